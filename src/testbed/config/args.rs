//! The `mesos-testbed` command line, and the configuration it builds.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use super::{AgentSpec, TestbedConfig, parse_list};
use crate::mesos::resources::{self, Resources};

/// The `/testbed` control API, for `--help`.
const CONTROL_HELP: &str = "\
Mesos endpoints:
  POST /api/v1/scheduler        v1 scheduler API (also /master/api/v1/scheduler)
  POST /api/v1                  operator API: GET_FRAMEWORKS, GET_AGENTS, TEARDOWN,
                                MARK_AGENT_GONE, DRAIN_AGENT, DEACTIVATE_AGENT,
                                REACTIVATE_AGENT, the maintenance calls (GET/UPDATE_
                                MAINTENANCE_SCHEDULE, GET_MAINTENANCE_STATUS,
                                START/STOP_MAINTENANCE); others 501
  POST /master/teardown         legacy teardown (form field frameworkId)
  GET  /master/state, /master/frameworks, /master/slaves, /master/redirect, /version

Fault injection and inspection (JSON; not part of Mesos):
  GET  /testbed/calls[?type=&since=&limit=] a page of the calls kept (of one type), in order
  GET  /testbed/tasks                       live, unreachable and completed tasks
  GET  /testbed/frameworks | /testbed/agents
  POST /testbed/agents/{id}/unreachable     TASK_LOST + FAILURE + RESCIND
  POST /testbed/agents/{id}/reachable       tasks come back TASK_RUNNING
  POST /testbed/agents/{id}/gone            MARK_AGENT_GONE: TASK_GONE_BY_OPERATOR
                                            (TASK_LOST unless PARTITION_AWARE),
                                            RESCIND, FAILURE; never comes back
  POST /testbed/frameworks/{id}/drop-stream cut the subscription abruptly
  POST /testbed/heartbeats/stop             body {\"framework_id\": ...} optional
  POST /testbed/heartbeats/resume
  POST /testbed/faults/ignore-kill          body {\"task_id_prefix\": ...}
  POST /testbed/faults/hold-staging         body {\"task_id_prefix\": ...}
  POST /testbed/faults/no-operator-api
  POST /testbed/faults/drop-calls           body {\"call_type\": \"ACCEPT\", \"count\": 1}:
                                            answered 202, never acted on
  POST /testbed/faults/latency              body {\"stream_ms\": 0, \"response_ms\": 0}:
                                            delay stream events / call answers
  POST /testbed/faults/health               body {\"task_id_prefix\": ..., \"label\": \"k=v\" (optional),
                                            \"health\": \"healthy\" | \"unhealthy\" | \"flapping\"}:
                                            results of the simulated executors' health checks
  POST /testbed/faults/task-exit            body {\"task_id_prefix\": ..., \"label\": \"k=v\" (optional),
                                            \"run_ms\": N, \"exit_code\": 0}: simulated tasks exit
                                            N ms after TASK_RUNNING (TASK_FINISHED for 0,
                                            TASK_FAILED otherwise)
  POST /testbed/faults/clear
  POST /testbed/master/failover             body {\"reregister_delay_ms\": 1000}
  GET  /testbed/executors                   executor processes (--run-executors)
  POST /testbed/agents/{id}/restart         body {\"down_ms\": 1000}: the agent dies and
                                            restarts (--run-executors)
  Delays (reregister_delay_ms, down_ms, stream_ms, response_ms) are at most
  3600000 (one hour). The call log records the stream ID each SUBSCRIBE got.
  Errors are JSON {\"error\": ...}: 404 unknown agent, framework or path;
  409 a gone agent (never comes back), a disconnected framework, a restart
  without --run-executors; 400 a body that is not what the endpoint takes.

Health checks: simulated executors run a task's TaskInfo.health_check on its
timing (delay, interval, grace period) with results set by faults/health
(default healthy), and report and kill as Mesos' command executor does; in
process mode mesos-appliance-executor runs real checks.

Containers: each agent launches only what its containerizers take
(--agent-containerizers, --agent-image-providers); other tasks fail as on a
real agent (TASK_FAILED, REASON_CONTAINER_LAUNCH_FAILED or
REASON_EXECUTOR_TERMINATED). Images are never pulled.

Process mode (--run-executors): tasks whose ExecutorInfo command ends with
mesos-appliance-executor run that binary for real, one process per executor,
in a sandbox under --work-dir. Each agent serves POST /api/v1/executor on a
port of its own (MESOS_AGENT_ENDPOINT; the port in offers' URLs). Tasks with
a CommandInfo (the command executor) run their command for real, as Mesos'
command executor does: TASK_FINISHED on exit 0, TASK_FAILED \"Command exited
with status N\" otherwise; a KILL sends SIGTERM, then SIGKILL after the kill
policy's grace period (3 s by default), and the task is TASK_KILLED.

Example:
  mesos-testbed --port 5050 --agents 3
  curl -sN -H 'Content-Type: application/json' -d \\
    '{\"type\":\"SUBSCRIBE\",\"subscribe\":{\"framework_info\":{\"user\":\"root\",\"name\":\"demo\"}}}' \\
    http://127.0.0.1:5050/api/v1/scheduler";

/// Resources of each agent unless configured otherwise.
pub const DEFAULT_AGENT_RESOURCES: &str = "cpus:4;mem:8192;disk:65536;ports:[31000-32000]";

/// mesos-testbed: a stand-in Apache Mesos master with simulated agents and
/// fault injection, speaking the v1 scheduler and operator HTTP APIs
/// (JSON and protobuf) like a Mesos 1.12 master.
#[derive(Debug, Parser)]
#[command(name = "mesos-testbed", version, after_long_help = CONTROL_HELP)]
pub struct TestbedArgs {
    /// IP address to listen on.
    #[arg(long, default_value = "127.0.0.1", env = "MESOS_TESTBED_IP")]
    pub ip: std::net::IpAddr,
    /// Port to listen on (0 picks a free port).
    #[arg(long, default_value_t = 5050, env = "MESOS_TESTBED_PORT")]
    pub port: u16,
    /// Hostname advertised in MasterInfo and redirects [default: the IP].
    #[arg(long, env = "MESOS_TESTBED_HOSTNAME")]
    pub hostname: Option<String>,
    /// Number of simulated agents.
    #[arg(long, default_value_t = 1, env = "MESOS_TESTBED_AGENTS")]
    pub agents: usize,
    /// Resources of each agent, in Mesos text form.
    #[arg(long, default_value = DEFAULT_AGENT_RESOURCES, env = "MESOS_TESTBED_AGENT_RESOURCES")]
    pub agent_resources: String,
    /// Attributes of each agent in Mesos text form; `{i}` is replaced by the
    /// agent's index (e.g. `rack:r{i}`).
    #[arg(long, default_value = "", env = "MESOS_TESTBED_AGENT_ATTRIBUTES")]
    pub agent_attributes: String,
    /// Containerizers of the agents (agent `--containerizers`): `mesos`,
    /// `docker` or both, in order; `;` separates the lists of successive
    /// agents, the last one going for the rest (`mesos,docker;mesos`).
    #[arg(
        long,
        default_value = "mesos",
        env = "MESOS_TESTBED_AGENT_CONTAINERIZERS"
    )]
    pub agent_containerizers: String,
    /// Image providers of the agents' Mesos containerizer (agent
    /// `--image_providers`, e.g. `docker`); empty for none; `;` per agent
    /// as for --agent-containerizers.
    #[arg(long, default_value = "", env = "MESOS_TESTBED_AGENT_IMAGE_PROVIDERS")]
    pub agent_image_providers: String,
    /// Hostname pattern of the agents; `{i}` is replaced by the agent's index.
    #[arg(
        long,
        default_value = "agent-{i}",
        env = "MESOS_TESTBED_AGENT_HOSTNAME"
    )]
    pub agent_hostname: String,
    /// How often offers are made (Mesos `--allocation_interval`), e.g. `1s`, `100ms`.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub allocation_interval: Duration,
    /// Interval of HEARTBEAT events (Mesos: fixed 15 s); shorten for tests.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub heartbeat_interval: Duration,
    /// First retry of an unacknowledged status update, above zero (Mesos: 10 s); doubles up to the maximum.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub status_update_retry_min: Duration,
    /// Maximum interval between status update retries, at least the first (Mesos: 10 min).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub status_update_retry_max: Duration,
    /// Time from an accepted LAUNCH to TASK_STARTING.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    pub launch_delay: Duration,
    /// Completed frameworks kept in memory (Mesos `--max_completed_frameworks`).
    #[arg(long, default_value_t = 50)]
    pub max_completed_frameworks: usize,
    /// Take part in master election: `zk://host:port[,host:port]/path`.
    #[arg(long, env = "MESOS_TESTBED_ZK")]
    pub zk: Option<String>,
    /// ZooKeeper session timeout (Mesos `--zk_session_timeout`).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub zk_session_timeout: Duration,
    /// Require HTTP basic authentication on the scheduler and operator APIs
    /// with these credentials: Mesos' credentials file, JSON
    /// (`{"credentials":[{"principal":"p","secret":"s"}]}`) or one
    /// `principal secret` pair per line.
    #[arg(long, value_name = "FILE", env = "MESOS_TESTBED_CREDENTIALS")]
    pub credentials: Option<std::path::PathBuf>,
    /// Process mode: run `mesos-appliance-executor` for real for tasks that
    /// use it. Without a value, the binary next to `mesos-testbed` is used.
    #[arg(long, value_name = "PATH", num_args = 0..=1, env = "MESOS_TESTBED_RUN_EXECUTORS")]
    #[allow(clippy::option_option)] // absent / without a value / with a path
    pub run_executors: Option<Option<PathBuf>>,
    /// Process mode: directory for the executors' sandboxes [default: a
    /// temporary directory removed on exit].
    #[arg(long, env = "MESOS_TESTBED_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// Agent `--executor_registration_timeout`.
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    pub executor_registration_timeout: Duration,
    /// Agent `--executor_shutdown_grace_period`.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub executor_shutdown_grace_period: Duration,
    /// Agent `--executor_reregistration_timeout` (executors' re-subscription backoff cap).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub executor_reregistration_timeout: Duration,
    /// Agent `--recovery_timeout` (how long executors retry after losing the agent).
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub recovery_timeout: Duration,
}

impl TestbedArgs {
    /// Builds the configuration; errors name the flag whose value is bad.
    pub fn into_config(self) -> Result<TestbedConfig, String> {
        let resources = Resources::parse(&self.agent_resources)
            .map_err(|e| format!("--agent-resources: {e}"))?;
        let mut agents = Vec::with_capacity(self.agents);
        for i in 0..self.agents {
            let attributes = self.agent_attributes.replace("{i}", &i.to_string());
            let containerizers = parse_list(per_agent(&self.agent_containerizers, i))
                .map_err(|e| format!("--agent-containerizers: {e}"))?;
            if containerizers.is_empty() {
                return Err("--agent-containerizers: an agent needs a containerizer".into());
            }
            agents.push(AgentSpec {
                hostname: self.agent_hostname.replace("{i}", &i.to_string()),
                resources: resources.clone(),
                attributes: resources::parse_attributes(&attributes)
                    .map_err(|e| format!("--agent-attributes: {e}"))?,
                containerizers,
                image_providers: parse_list(per_agent(&self.agent_image_providers, i))
                    .map_err(|e| format!("--agent-image-providers: {e}"))?,
            });
        }
        if self.allocation_interval.is_zero() || self.heartbeat_interval.is_zero() {
            return Err("--allocation-interval and --heartbeat-interval must be positive".into());
        }
        // A zero retry would resend unacknowledged updates in a busy loop.
        if self.status_update_retry_min.is_zero() {
            return Err("--status-update-retry-min must be positive".into());
        }
        if self.status_update_retry_max < self.status_update_retry_min {
            return Err(format!(
                "--status-update-retry-max ({}) must be at least --status-update-retry-min ({})",
                humantime::format_duration(self.status_update_retry_max),
                humantime::format_duration(self.status_update_retry_min)
            ));
        }
        if let Some(zk) = &self.zk {
            crate::util::zk::ZkUrl::parse_mesos(zk).map_err(|e| format!("--zk: {e}"))?;
        }
        let run_executors = match self.run_executors {
            Some(None) => Some(sibling_executor()?),
            Some(Some(path)) => Some(path),
            None => None,
        };
        if let Some(path) = &run_executors
            && !path.is_file()
        {
            return Err(format!("--run-executors: {} is not a file", path.display()));
        }
        Ok(TestbedConfig {
            listen: SocketAddr::new(self.ip, self.port),
            hostname: self.hostname,
            agents,
            allocation_interval: self.allocation_interval,
            heartbeat_interval: self.heartbeat_interval,
            status_update_retry_min: self.status_update_retry_min,
            status_update_retry_max: self.status_update_retry_max,
            launch_delay: self.launch_delay,
            max_completed_frameworks: self.max_completed_frameworks,
            zk: self.zk,
            zk_session_timeout: self.zk_session_timeout,
            credentials: self
                .credentials
                .as_deref()
                .map(read_credentials)
                .transpose()?,
            run_executors,
            work_dir: self.work_dir,
            executor_registration_timeout: self.executor_registration_timeout,
            executor_shutdown_grace_period: self.executor_shutdown_grace_period,
            executor_reregistration_timeout: self.executor_reregistration_timeout,
            recovery_timeout: self.recovery_timeout,
            ..TestbedConfig::default()
        })
    }
}

/// Agent `i`'s part of a `;`-separated per-agent list: the `i`-th, or the
/// last for agents beyond the list.
fn per_agent(lists: &str, i: usize) -> &str {
    let parts: Vec<&str> = lists.split(';').collect();
    parts.get(i).or(parts.last()).copied().unwrap_or("")
}

/// `mesos-appliance-executor` in the directory of the running binary.
fn sibling_executor() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("--run-executors: {e}"))?;
    Ok(me.with_file_name(crate::executor::info::EXECUTOR_BINARY))
}

/// Reads a Mesos credentials file (`--credentials`): JSON
/// `{"credentials":[{"principal":…,"secret":…}]}`, or text with one
/// `principal secret` pair per line.
pub fn read_credentials(path: &std::path::Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--credentials {}: {e}", path.display()))?;
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
        let list = json["credentials"].as_array().ok_or_else(|| {
            format!(
                "--credentials {}: expected {{\"credentials\": [...]}}",
                path.display()
            )
        })?;
        return list
            .iter()
            .map(|c| match (c["principal"].as_str(), c["secret"].as_str()) {
                (Some(p), Some(s)) => Ok((p.to_string(), s.to_string())),
                _ => Err(format!(
                    "--credentials {}: each entry needs principal and secret",
                    path.display()
                )),
            })
            .collect();
    }
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split_once(char::is_whitespace)
                .map(|(p, s)| (p.to_string(), s.trim().to_string()))
                .ok_or_else(|| {
                    format!(
                        "--credentials {}: expected `principal secret` lines",
                        path.display()
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::config::{Containerizer, ImageProvider};

    fn parse(args: &[&str]) -> TestbedArgs {
        TestbedArgs::try_parse_from(std::iter::once("mesos-testbed").chain(args.iter().copied()))
            .expect("arguments parse")
    }

    #[test]
    fn status_update_retries_must_be_positive_and_ordered() {
        for args in [
            &["--status-update-retry-min", "0s"][..],
            &[
                "--status-update-retry-min",
                "0s",
                "--status-update-retry-max",
                "0s",
            ][..],
            &[
                "--status-update-retry-min",
                "10s",
                "--status-update-retry-max",
                "5s",
            ][..],
        ] {
            let error = parse(args).into_config().unwrap_err();
            assert!(
                error.contains("--status-update-retry-m"),
                "{args:?}: {error}"
            );
        }
        let config = parse(&[
            "--status-update-retry-min",
            "1s",
            "--status-update-retry-max",
            "1s",
        ])
        .into_config()
        .unwrap();
        assert_eq!(config.status_update_retry_min, Duration::from_secs(1));
        assert_eq!(config.status_update_retry_max, Duration::from_secs(1));
        let defaults = parse(&[]).into_config().unwrap();
        assert_eq!(defaults.status_update_retry_min, Duration::from_secs(10));
        assert_eq!(defaults.status_update_retry_max, Duration::from_secs(600));
    }

    #[test]
    fn containerizers_are_per_agent_and_checked() {
        let config = parse(&[
            "--agents",
            "3",
            "--agent-containerizers",
            "mesos,docker;mesos",
            "--agent-image-providers",
            "docker",
        ])
        .into_config()
        .unwrap();
        let lists: Vec<(Vec<Containerizer>, Vec<ImageProvider>)> = config
            .agents
            .iter()
            .map(|a| (a.containerizers.clone(), a.image_providers.clone()))
            .collect();
        use Containerizer::{Docker, Mesos};
        assert_eq!(
            lists,
            [
                (vec![Mesos, Docker], vec![ImageProvider::Docker]),
                (vec![Mesos], vec![ImageProvider::Docker]),
                (vec![Mesos], vec![ImageProvider::Docker]),
            ]
        );
        let defaults = parse(&[]).into_config().unwrap();
        assert_eq!(defaults.agents[0].containerizers, [Mesos]);
        assert!(defaults.agents[0].image_providers.is_empty());
        for (flag, value) in [
            ("--agent-containerizers", "rkt"),
            ("--agent-containerizers", ""),
            ("--agent-image-providers", "oci"),
        ] {
            let error = parse(&[flag, value]).into_config().unwrap_err();
            assert!(error.starts_with(flag), "{error}");
        }
    }

    #[test]
    fn a_zk_flag_that_is_no_zk_url_is_a_usage_error() {
        let error = parse(&["--zk", "nope"]).into_config().unwrap_err();
        assert!(error.starts_with("--zk: "), "{error}");
        let config = parse(&["--zk", "zk://127.0.0.1:2181/mesos"])
            .into_config()
            .unwrap();
        assert_eq!(config.zk.as_deref(), Some("zk://127.0.0.1:2181/mesos"));
    }

    #[test]
    fn run_executors_takes_an_optional_path() {
        assert_eq!(parse(&[]).run_executors, None);
        assert_eq!(parse(&["--run-executors"]).run_executors, Some(None));
        assert_eq!(
            parse(&["--run-executors", "--port", "0"]).run_executors,
            Some(None)
        );
        assert_eq!(
            parse(&["--run-executors", "/bin/true"]).run_executors,
            Some(Some(PathBuf::from("/bin/true")))
        );
        let config = parse(&[
            "--run-executors=/bin/true",
            "--executor-registration-timeout",
            "2s",
        ])
        .into_config()
        .unwrap();
        assert_eq!(config.run_executors, Some(PathBuf::from("/bin/true")));
        assert_eq!(config.executor_registration_timeout, Duration::from_secs(2));
        let error = parse(&["--run-executors", "/no/such/file"])
            .into_config()
            .unwrap_err();
        assert!(error.contains("is not a file"), "{error}");
        // Without a value: the binary next to this one.
        let sibling = parse(&["--run-executors"]).into_config();
        let expected = std::env::current_exe()
            .unwrap()
            .with_file_name("mesos-appliance-executor");
        match sibling {
            Ok(config) => assert_eq!(config.run_executors, Some(expected)),
            Err(error) => assert!(error.contains("is not a file"), "{error}"),
        }
    }
}
