//! In-process appliance replicas for tests: a coordinator (a ZooKeeper one
//! joined to the election, or the in-memory one where ZooKeeper is not what
//! the test is about), the scheduler supervisor with short timers, against a
//! testbed master. Stopping one is a failover stop (SIGTERM): the
//! supervisor ends and the coordinator leaves the election at once.

use std::sync::Arc;
use std::time::Duration;

use mesos_appliance::coordination::Coordinator;
use mesos_appliance::coordination::memory::MemoryCoordinator;
use mesos_appliance::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use mesos_appliance::mesos::client::ClientConfig;
use mesos_appliance::mesos::detector::MasterSpec;
use mesos_appliance::scheduler::config::CoreConfig;
use mesos_appliance::scheduler::core::CoreDeps;
use mesos_appliance::scheduler::metrics::Metrics;
use mesos_appliance::scheduler::rules::reconcile::ReconcilerConfig;
use mesos_appliance::scheduler::spec::ValidServiceSpec;
use mesos_appliance::scheduler::{
    CommandError, Request, SchedulerHandle, ServiceSpec, Snapshot, supervisor,
};
use mesos_appliance::util::zk::ZkUrl;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::checks::{Checks, Store, View};
use super::replicas;

/// Core settings for tests: short offer TTL, reconciliation and kill timers.
pub fn core_config() -> CoreConfig {
    let defaults = CoreConfig::default();
    CoreConfig {
        framework_name: "appliance-test".into(),
        user: "root".into(),
        failover_timeout: Duration::from_secs(60),
        offer_ttl: Duration::from_secs(2),
        decline_refuse_seconds: 5.0,
        reconcile: ReconcilerConfig {
            interval: Duration::from_secs(600),
            initial_delay: Duration::from_secs(600),
            cooldown: Duration::from_millis(500),
            explicit_max_backoff: Duration::from_secs(2),
            explicit_abort_timeout: Duration::from_secs(10),
            implicit_window: Duration::from_secs(1),
            explicit_slice: mesos_appliance::scheduler::rules::reconcile::EXPLICIT_SLICE,
        },
        framework_id_refresh_interval: Duration::from_secs(2),
        kill_retry_min: Duration::from_secs(1),
        kill_retry_max: Duration::from_secs(4),
        snapshot_interval: Duration::from_millis(50),
        executor_url: Some(
            "http://appliance.test/executor/0.1.0-000000000000/mesos-appliance-executor".into(),
        ),
        ..defaults
    }
}

/// The coordinator configuration of [`Replica::start`]: replica `name` with
/// root `/appliance` on `zk` (host:port), the tests' short session
/// ([`replicas::SESSION`]) and hold-off.
pub fn zk_config(zk: &str, name: &str) -> ZkConfig {
    let url = ZkUrl::parse(&format!("zk://{zk}/appliance"), "unused").expect("zk url");
    let mut config =
        ZkConfig::new(url, replicas::replica(name)).with_session_timeout(replicas::SESSION);
    config.hold_off = replicas::HOLD_OFF;
    config
}

/// Parses a list of services written as JSON.
pub fn services(json: serde_json::Value) -> Vec<ServiceSpec> {
    serde_json::from_value(json).expect("test services")
}

/// A service of `instances` one-port tasks with an HTTP health check every
/// second that kills at the first counted failure (for the testbed's
/// `unhealthy` rule), and the restart backoff `backoff` up to `backoff_max`.
pub fn health_checked(
    name: &str,
    instances: u32,
    backoff: &str,
    backoff_max: &str,
) -> serde_json::Value {
    serde_json::json!({"name": name, "command": "sleep 1000", "cpus": 0.1, "mem": 32,
        "ports": 1, "instances": instances, "restart_backoff": backoff,
        "restart_backoff_max": backoff_max,
        "health_check": {"type": "http", "port_index": 0, "path": "/health",
            "delay": "0s", "interval": "1s", "timeout": "1s", "grace_period": "0s",
            "consecutive_failures": 1}})
}

/// One in-process replica.
pub struct Replica {
    pub name: String,
    pub handle: SchedulerHandle,
    pub coordinator: Arc<dyn Coordinator>,
    /// The replica's metrics registry.
    pub registry: Arc<prometheus_client::registry::Registry>,
    /// Cancel to fence this replica as a newer deployment would.
    pub fence: CancellationToken,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
    /// The end-of-test checks, run on drop unless the replica was stopped.
    checks: Checks,
}

impl Replica {
    /// Starts replica `name` with root `/appliance` on `zk` (host:port),
    /// subscribing to `master` (a URL).
    pub async fn start(
        zk: &str,
        name: &str,
        master: &str,
        services: Vec<ServiceSpec>,
        core: CoreConfig,
    ) -> Replica {
        Replica::start_with(zk_config(zk, name), master, services, core).await
    }

    /// Like [`Replica::start`] with a coordinator configuration of the
    /// test's own (start from [`zk_config`]).
    pub async fn start_with(
        zk_config: ZkConfig,
        master: &str,
        services: Vec<ServiceSpec>,
        core: CoreConfig,
    ) -> Replica {
        super::mesos::init();
        let name = zk_config.replica.replica_id.clone();
        let store = Store::Zk(zk_config.url.clone());
        let coordinator = Arc::new(ZkCoordinator::start(zk_config).await.expect("coordinator"));
        Replica::with_coordinator(coordinator, store, &name, master, services, core)
    }

    /// Starts the only replica `name` on the in-memory coordinator (it leads
    /// at once), subscribing to `master`: for tests whose subject is the
    /// scheduler, not ZooKeeper.
    pub async fn in_memory(
        name: &str,
        master: &str,
        services: Vec<ServiceSpec>,
        core: CoreConfig,
    ) -> Replica {
        super::mesos::init();
        let coordinator: Arc<dyn Coordinator> =
            Arc::new(MemoryCoordinator::new(replicas::replica(name)));
        let store = Store::Memory(coordinator.clone());
        Replica::with_coordinator(coordinator, store, name, master, services, core)
    }

    fn with_coordinator(
        coordinator: Arc<dyn Coordinator>,
        store: Store,
        name: &str,
        master: &str,
        services: Vec<ServiceSpec>,
        core: CoreConfig,
    ) -> Replica {
        let mut registry = mesos_appliance::scheduler::metrics::registry();
        let deps = CoreDeps {
            coordinator: coordinator.clone(),
            client: ClientConfig::new(MasterSpec::parse(master).expect("master url")),
            metrics: Metrics::register(&mut registry),
            snapshots: supervisor::snapshot_channel(&core, coordinator.replica().clone()),
            initial_services: services,
            fence: CancellationToken::new(),
        };
        let fence = deps.fence.clone();
        let shutdown = CancellationToken::new();
        let (handle, task) = supervisor::start(core, deps, shutdown.clone());
        let checks = Checks::new(name, master, View::Snapshot(handle.clone()), store);
        Replica {
            checks,
            name: name.into(),
            handle,
            coordinator,
            registry: Arc::new(registry),
            fence,
            shutdown,
            task: Some(task),
        }
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.handle.snapshot()
    }

    /// Creates or replaces a service through the core, as
    /// `PUT /api/v1/services/<name>` does; `Ok(true)` when it replaced one.
    /// The core has 10 s to answer.
    pub async fn put_service(&self, spec: ServiceSpec) -> Result<bool, CommandError> {
        put_service(&self.handle, spec).await
    }

    /// Waits (at most `within`) until a snapshot satisfies `pred`.
    pub async fn wait_for(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Arc<Snapshot> {
        let mut rx = self.handle.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let current = rx.borrow_and_update().clone();
            if pred(&current) {
                return current;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() || tokio::time::timeout(left, rx.changed()).await.is_err() {
                let s = self.snapshot();
                panic!(
                    "{}: {what} not reached within {within:?}; framework {:?} ({:?}), tasks {:?}, events {:?}",
                    self.name,
                    s.framework.state,
                    s.framework.reason,
                    s.task_counts(),
                    s.events
                        .iter()
                        .rev()
                        .take(8)
                        .map(|e| &e.message)
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    /// Turns this replica's end-of-test checks off (the truth check and
    /// the "no ACK before its store" check, [`super::checks`]) because the
    /// scenario breaks them on purpose; `why` is printed at the end.
    pub fn expect_disagreement(&self, why: &str) {
        self.checks.expect_disagreement(why);
    }

    /// A failover stop (SIGTERM): the scheduler stops, the replica leaves the
    /// election at once and keeps all ZooKeeper state. The end-of-test
    /// checks ([`super::checks`]) run first: this is where the replica's
    /// life ends.
    pub async fn stop(mut self) {
        let failure = self.checks.at_end().await;
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        self.coordinator.close().await;
        if let Some(failure) = failure {
            panic!("{failure}");
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let failure = if self.shutdown.is_cancelled() {
            None
        } else {
            self.checks.at_drop()
        };
        self.shutdown.cancel();
        if let Some(failure) = failure {
            panic!("{failure}");
        }
    }
}

/// [`Replica::put_service`] on a bare handle (e.g. one moved into a task).
pub async fn put_service(
    handle: &SchedulerHandle,
    spec: ServiceSpec,
) -> Result<bool, CommandError> {
    let spec = ValidServiceSpec::new(spec).map_err(CommandError::Invalid)?;
    handle
        .request(Duration::from_secs(10), Request::PutService(Box::new(spec)))
        .await
}

/// Running tasks per service in a snapshot.
pub fn running(s: &Snapshot, service: &str) -> usize {
    s.tasks
        .iter()
        .filter(|t| {
            t.service == service && t.state.as_str_name() == "TASK_RUNNING" && t.kill.is_none()
        })
        .count()
}

/// Measures how long no scheduler is subscribed to a testbed: a task samples
/// the testbed's frameworks every [`SubscriptionClock::SAMPLE`] and adds up
/// the time none of them has a live subscription.
pub struct SubscriptionClock {
    state: Arc<std::sync::Mutex<ClockState>>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct ClockState {
    leaderless: Duration,
    /// Longest stretch without a subscription.
    longest: Duration,
    /// Start of the current stretch without a subscription.
    since: Option<std::time::Instant>,
    /// Times a subscription appeared after a stretch without one.
    resubscriptions: u32,
}

impl SubscriptionClock {
    /// How often the testbed is looked at.
    pub const SAMPLE: Duration = Duration::from_millis(20);

    /// Starts measuring `tb` now.
    pub fn start(tb: Arc<mesos_appliance::testbed::Testbed>) -> SubscriptionClock {
        let state = Arc::new(std::sync::Mutex::new(ClockState::default()));
        let sink = state.clone();
        let task = tokio::spawn(async move {
            let mut last = std::time::Instant::now();
            loop {
                tokio::time::sleep(Self::SAMPLE).await;
                let connected = tb.frameworks().iter().any(|f| f.connected);
                let now = std::time::Instant::now();
                let mut s = sink.lock().unwrap();
                if connected {
                    if s.since.take().is_some() {
                        s.resubscriptions += 1;
                    }
                } else {
                    s.leaderless += now - last;
                    let since = *s.since.get_or_insert(last);
                    s.longest = s.longest.max(now - since);
                }
                last = now;
            }
        });
        SubscriptionClock { state, task }
    }

    /// Total time without a subscribed scheduler so far.
    pub fn leaderless(&self) -> Duration {
        self.state.lock().unwrap().leaderless
    }

    /// The longest stretch without a subscribed scheduler so far.
    pub fn longest(&self) -> Duration {
        self.state.lock().unwrap().longest
    }

    /// How often a scheduler subscribed again after a stretch without one.
    pub fn resubscriptions(&self) -> u32 {
        self.state.lock().unwrap().resubscriptions
    }
}

impl Drop for SubscriptionClock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What [`Served`] starts: replica and framework `name` on a free loopback
/// port, the tests' [`core_config`] and a web server there. Change fields
/// before starting.
pub struct ServedConfig {
    /// The dashboard's base URL, `http://127.0.0.1:<port>`.
    pub url: String,
    /// The replica (advertising `url`).
    pub info: mesos_appliance::coordination::ReplicaInfo,
    /// The scheduler's settings (`framework_name` is `name`).
    pub core: CoreConfig,
    /// The web server's settings (listening on `url`'s port).
    pub web: mesos_appliance::web::WebConfig,
}

impl ServedConfig {
    /// The settings of replica and framework `name`.
    pub fn new(name: &str) -> ServedConfig {
        let port = super::zookeeper::free_port();
        let url = format!("http://127.0.0.1:{port}");
        let mut info = replicas::replica(name);
        info.advertised_url = url.clone();
        let mut core = core_config();
        core.framework_name = name.into();
        let web = mesos_appliance::web::WebConfig::new(
            format!("127.0.0.1:{port}")
                .parse()
                .expect("loopback address"),
            url.clone(),
        );
        ServedConfig {
            url,
            info,
            core,
            web,
        }
    }
}

/// A whole replica as `serve` runs it — scheduler and dashboard on a free
/// loopback port — for tests whose subject is what the web server shows.
/// Stops on drop.
pub struct Served {
    /// The dashboard's base URL, `http://127.0.0.1:<port>`.
    pub url: String,
    /// The replica: its handle and web server.
    pub running: mesos_appliance::app::Running,
    /// Cancel to stop the replica (dropping does it too).
    pub stop: CancellationToken,
}

impl Served {
    /// Starts replica and framework `name` with `services` on the in-memory
    /// coordinator (it leads at once), subscribing to `master` (a URL).
    pub async fn start(name: &str, master: &str, services: Vec<ServiceSpec>) -> Served {
        let config = ServedConfig::new(name);
        let coordinator = Arc::new(MemoryCoordinator::new(config.info.clone()));
        Served::start_with(config, coordinator, master, services).await
    }

    /// Starts `config`'s replica on ZooKeeper `zk` (host:port), root
    /// `/<framework name>`, with the tests' short session
    /// ([`replicas::SESSION`]): it leads once elected.
    pub async fn start_on_zk(
        zk: &str,
        config: ServedConfig,
        master: &str,
        services: Vec<ServiceSpec>,
    ) -> Served {
        let root = format!("zk://{zk}/{}", config.core.framework_name);
        let url = ZkUrl::parse(&root, &config.core.framework_name).expect("ZooKeeper URL");
        let coordinator = Arc::new(
            ZkCoordinator::start(
                ZkConfig::new(url, config.info.clone()).with_session_timeout(replicas::SESSION),
            )
            .await
            .expect("coordinator"),
        );
        Served::start_with(config, coordinator, master, services).await
    }

    /// Starts `config`'s replica on `coordinator`, subscribing to `master`.
    pub async fn start_with(
        config: ServedConfig,
        coordinator: Arc<dyn Coordinator>,
        master: &str,
        services: Vec<ServiceSpec>,
    ) -> Served {
        super::mesos::init();
        let stop = CancellationToken::new();
        let client = ClientConfig::new(MasterSpec::parse(master).expect("master URL"));
        let running = mesos_appliance::app::start_replica(
            config.core,
            client,
            coordinator,
            services,
            config.web,
            stop.clone(),
        )
        .await
        .expect("replica started");
        Served {
            url: config.url,
            running,
            stop,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
