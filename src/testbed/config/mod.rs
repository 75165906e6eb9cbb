//! The `config/` room: configuration of a testbed master
//! ([`TestbedConfig`]) and its simulated agents ([`AgentSpec`],
//! `agent_spec`), and the `mesos-testbed` command line that builds it
//! ([`TestbedArgs`], `args`). A bottom room: it imports no other room.

mod agent_spec;
mod args;

pub use agent_spec::{AgentSpec, Containerizer, ImageProvider, parse_list};
pub use args::{DEFAULT_AGENT_RESOURCES, TestbedArgs};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a testbed master needs. [`TestbedConfig::default`] follows the
/// Mesos 1.12 defaults (`docs/mesos-protocol.md#defaults`); [`TestbedConfig::for_tests`] shortens
/// the timers so integration tests run in seconds.
///
/// Where the defaults come from: master flags in `src/master/flags.cpp` with
/// their constants in `src/master/constants.hpp`; agent flags in
/// `src/slave/flags.cpp` with their constants in `src/slave/constants.hpp`.
/// Each field names its flag or constant.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Hostname advertised in `MasterInfo`, redirects and offers' URLs.
    /// Defaults to the listen IP so that redirects resolve without DNS.
    pub hostname: Option<String>,
    /// The simulated agents.
    pub agents: Vec<AgentSpec>,
    /// How often the allocator makes offers (master `--allocation_interval`,
    /// `DEFAULT_ALLOCATION_INTERVAL` 1 s in `src/master/constants.hpp`).
    pub allocation_interval: Duration,
    /// Interval of scheduler HEARTBEAT events (`DEFAULT_HEARTBEAT_INTERVAL`,
    /// 15 s, `src/master/constants.hpp`).
    pub heartbeat_interval: Duration,
    /// First retry of an unacknowledged status update
    /// (`STATUS_UPDATE_RETRY_INTERVAL_MIN`, 10 s, `src/slave/constants.hpp`);
    /// doubles on each retry.
    pub status_update_retry_min: Duration,
    /// Cap of the status update retry backoff
    /// (`STATUS_UPDATE_RETRY_INTERVAL_MAX`, 10 min, `src/slave/constants.hpp`).
    pub status_update_retry_max: Duration,
    /// Time from an accepted LAUNCH to the executor's TASK_STARTING.
    pub launch_delay: Duration,
    /// Completed frameworks kept (master `--max_completed_frameworks`,
    /// `DEFAULT_MAX_COMPLETED_FRAMEWORKS` 50 in `src/master/constants.hpp`).
    pub max_completed_frameworks: usize,
    /// Completed tasks kept per framework (master
    /// `--max_completed_tasks_per_framework`,
    /// `DEFAULT_MAX_COMPLETED_TASKS_PER_FRAMEWORK` 1000 in `src/master/constants.hpp`).
    pub max_completed_tasks_per_framework: usize,
    /// `zk://host:port[,host:port]/path` to take part in master election.
    pub zk: Option<String>,
    /// ZooKeeper session timeout (master `--zk_session_timeout`,
    /// `ZOOKEEPER_SESSION_TIMEOUT` 10 s in `src/master/constants.hpp`).
    pub zk_session_timeout: Duration,
    /// Version string reported in `MasterInfo.version` and `/master/state`.
    pub version: String,
    /// Most bytes of events queued on one subscription stream; a scheduler
    /// that falls this far behind is disconnected. A real master queues
    /// without limit; this bounds the testbed's memory. The default, 256 MiB,
    /// holds an update, two retries of it and a reconciliation answer, in
    /// JSON, for each of 100,000 tasks.
    pub stream_queue_bytes: usize,
    /// Largest request body accepted, in bytes.
    pub max_request_bytes: usize,
    /// HTTP basic-auth credentials `(principal, secret)`. When set, the
    /// scheduler and operator APIs require them, as a master started with
    /// `--authenticate_http_frameworks --authenticate_http_readwrite
    /// --credentials=…` does.
    pub credentials: Option<Vec<(String, String)>>,
    /// Process mode: the `mesos-appliance-executor` binary to run for tasks
    /// whose `ExecutorInfo` is CUSTOM with a command ending in
    /// `mesos-appliance-executor` (the URIs are not fetched). `None`: every
    /// executor is simulated. Each agent then serves the executor API on a
    /// port of its own (see `testbed::agents::executor_api`).
    pub run_executors: Option<PathBuf>,
    /// Process mode: root of the executors' sandboxes; `None` makes a
    /// temporary directory that is removed when the testbed stops.
    pub work_dir: Option<PathBuf>,
    /// Agent `--executor_registration_timeout` (`EXECUTOR_REGISTRATION_TIMEOUT`,
    /// 1 min, `src/slave/constants.hpp`): an executor that has
    /// not subscribed by then is destroyed.
    pub executor_registration_timeout: Duration,
    /// Agent `--executor_shutdown_grace_period`
    /// (`DEFAULT_EXECUTOR_SHUTDOWN_GRACE_PERIOD`, 5 s, `src/slave/constants.hpp`),
    /// unless the
    /// `ExecutorInfo` sets `shutdown_grace_period`.
    pub executor_shutdown_grace_period: Duration,
    /// Agent `--executor_reregistration_timeout` (`EXECUTOR_REREGISTRATION_TIMEOUT`,
    /// 2 s, `src/slave/constants.hpp`): how long a restarted
    /// agent waits for executors to re-subscribe; also their
    /// `MESOS_SUBSCRIPTION_BACKOFF_MAX`.
    pub executor_reregistration_timeout: Duration,
    /// Agent `--recovery_timeout` (`RECOVERY_TIMEOUT`, 15 min,
    /// `src/slave/constants.hpp`), passed as `MESOS_RECOVERY_TIMEOUT`.
    pub recovery_timeout: Duration,
}

impl Default for TestbedConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:5050".parse().expect("literal address"),
            hostname: None,
            agents: vec![AgentSpec::new("agent-0", DEFAULT_AGENT_RESOURCES)],
            allocation_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(15),
            status_update_retry_min: Duration::from_secs(10),
            status_update_retry_max: Duration::from_secs(600),
            launch_delay: Duration::from_millis(20),
            max_completed_frameworks: 50,
            max_completed_tasks_per_framework: 1000,
            zk: None,
            zk_session_timeout: Duration::from_secs(10),
            version: "1.12.0".to_string(),
            stream_queue_bytes: 256 * 1024 * 1024,
            max_request_bytes: 16 * 1024 * 1024,
            credentials: None,
            run_executors: None,
            work_dir: None,
            executor_registration_timeout: Duration::from_secs(60),
            executor_shutdown_grace_period: Duration::from_secs(5),
            executor_reregistration_timeout: Duration::from_secs(2),
            recovery_timeout: Duration::from_secs(15 * 60),
        }
    }
}

impl TestbedConfig {
    /// Defaults for in-process tests: a free port on 127.0.0.1, `agents`
    /// agents of [`DEFAULT_AGENT_RESOURCES`] named `agent-<i>`, offers every
    /// 100 ms, heartbeats every second, status update retries from 1 s.
    pub fn for_tests(agents: usize) -> Self {
        Self {
            listen: "127.0.0.1:0".parse().expect("literal address"),
            agents: (0..agents)
                .map(|i| AgentSpec::new(&format!("agent-{i}"), DEFAULT_AGENT_RESOURCES))
                .collect(),
            allocation_interval: Duration::from_millis(100),
            heartbeat_interval: Duration::from_secs(1),
            status_update_retry_min: Duration::from_secs(1),
            status_update_retry_max: Duration::from_secs(8),
            launch_delay: Duration::from_millis(5),
            ..Self::default()
        }
    }

    /// [`TestbedConfig::for_tests`] in process mode: tasks for our executor
    /// run `executor` for real; registration timeout 10 s, shutdown grace
    /// 3 s, re-registration timeout (and executors' backoff cap) 1 s,
    /// recovery timeout 20 s.
    pub fn for_tests_with_executor(agents: usize, executor: impl Into<PathBuf>) -> Self {
        Self {
            run_executors: Some(executor.into()),
            executor_registration_timeout: Duration::from_secs(10),
            executor_shutdown_grace_period: Duration::from_secs(3),
            executor_reregistration_timeout: Duration::from_secs(1),
            recovery_timeout: Duration::from_secs(20),
            ..Self::for_tests(agents)
        }
    }
}
