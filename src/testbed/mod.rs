//! `mesos-testbed`: a stand-in Apache Mesos master with simulated agents and
//! fault injection. The integration tests and `mesos-appliance demo` run
//! against it, so its fidelity to a real master is a product property: every
//! behaviour it imitates cites the Mesos source or doc it follows, and the
//! captures of a real Mesos 1.12 master
//! (`docs/mesos-protocol.md#captures-from-a-real-master`) are its reference.
//! What it imitates, its fault API and its gaps: `docs/testbed.md`.
//!
//! What it serves:
//! - `POST /api/v1/scheduler` — the v1 scheduler API in JSON and protobuf:
//!   subscription streams (RecordIO, one record per chunk), heartbeats,
//!   offers and filters, launches, status updates with acknowledgements and
//!   retries, kills, reconciliation, framework messages and executor exits,
//!   framework failover, failover timeout and removal;
//! - `POST /api/v1` — operator GET_FRAMEWORKS, TEARDOWN and MARK_AGENT_GONE,
//!   and the legacy `/master/teardown`, `/master/state`,
//!   `/master/frameworks`, `/master/slaves`, `/master/redirect`;
//! - `/testbed/…` — fault injection and inspection: agents lost, back,
//!   restarted or gone for good, streams cut, heartbeats stopped, calls
//!   lost, latency, master failover;
//! - agents with containerizers and image providers that launch only the
//!   containers a real agent so configured would, and simulated executors
//!   that run tasks' health checks;
//! - with `zk`, master election through ZooKeeper; a non-leading testbed
//!   redirects (307) or answers 503 `No leader elected`;
//! - with `run_executors` (process mode), real `mesos-appliance-executor`
//!   processes for tasks that use it, each agent serving
//!   `POST /api/v1/executor` on a port of its own;
//! - on every agent's port, the agent's `/state` and files API
//!   (`/files/read`) over real sandboxes in process mode and generated
//!   logs for simulated tasks.
//!
//! Where things live (`docs/testbed.md#where-things-live`): the code is in
//! rooms, each importing only the rooms below it —
//! - `config/` and `http.rs` at the bottom: the configuration and command
//!   line, and HTTP answers in libprocess' words;
//! - `master/`: the state (one `Master` behind a mutex) and the master's
//!   rules — frameworks, offers, launches, status updates, kills and
//!   reconciliation, unreachable and gone agents, election, the call log;
//! - `agents/`: the agents' side — containerizers, simulated health
//!   checks, process mode's executors and executor API, agent restarts,
//!   sandboxes; the master reaches it only through the
//!   `master::agent_side::AgentSide` trait it implements;
//! - `api/`: the master's HTTP APIs (scheduler, operator, `/testbed`);
//! - this module: [`Testbed`], the router and the timer task.
//!
//! Tests start it in-process with [`Testbed::start`] on `127.0.0.1:0`.

mod agents;
mod api;
mod config;
mod http;
mod master;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use api::views::{AgentView, FrameworkView, TaskView};
pub use config::{
    AgentSpec, Containerizer, DEFAULT_AGENT_RESOURCES, ImageProvider, TestbedArgs, TestbedConfig,
};
pub use master::calls::CallRecord;
pub use master::faults::SimulatedHealth;
pub use master::processes::{ExecutorView, ProcessState};
pub use master::tasks::KAMIKAZE;

use master::{App, Master, Shared, Timer};

/// A running testbed master. Dropping it stops the server (connections are
/// cut as if the master died); [`Testbed::shutdown`] waits for that.
pub struct Testbed {
    app: App,
    addr: SocketAddr,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Testbed {
    /// Binds `config.listen` and starts serving.
    ///
    /// # Errors
    /// When the address cannot be bound or `config.zk` is not a `zk://` URL.
    pub async fn start(config: TestbedConfig) -> anyhow::Result<Testbed> {
        let zk = config
            .zk
            .as_deref()
            .map(crate::util::zk::ZkUrl::parse_mesos)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--zk: {e}"))?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        let zk_spec = config.zk.clone();
        let body_limit = config.max_request_bytes;
        let session_timeout = config.zk_session_timeout;
        let allocation_interval = config.allocation_interval;
        let mut master = Master::new(config, addr.port());
        if zk.is_some() {
            master.leadership = master::Leadership::NoLeader;
        }
        let shared: Shared = Arc::new(Mutex::new(master));
        {
            let mut m = shared.lock().unwrap_or_else(|p| p.into_inner());
            m.this = Arc::downgrade(&shared);
            m.schedule(allocation_interval, Timer::Allocate { periodic: true });
        }
        let app = App(shared.clone());
        register(addr, zk_spec, &shared);
        let stop = CancellationToken::new();
        start_process_mode(&app, addr, &stop)?;
        let router = router(app.clone()).layer(DefaultBodyLimit::max(body_limit));

        let mut tasks = Vec::new();
        let server_stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let server = axum::serve(listener, router)
                .with_graceful_shutdown(async move { server_stop.cancelled().await });
            if let Err(error) = server.await {
                tracing::error!(%error, "testbed HTTP server failed");
            }
        }));
        tasks.push(tokio::spawn(drive_timers(shared.clone(), stop.clone())));
        if let Some(target) = zk {
            tasks.push(tokio::spawn(master::election::run(
                target,
                session_timeout,
                shared.clone(),
                stop.clone(),
            )));
        }
        tracing::info!(%addr, "mesos-testbed listening");
        Ok(Testbed {
            app,
            addr,
            stop,
            tasks,
        })
    }

    /// The address the testbed listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, the URL to give schedulers as `--master`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The current master ID (changes with a simulated master failover).
    pub fn master_id(&self) -> String {
        self.app.lock().info.id.clone()
    }

    /// True while this testbed is the leading master.
    pub fn is_leading(&self) -> bool {
        self.app.lock().leadership == master::Leadership::Leading
    }

    /// A token cancelled when the testbed stops (shutdown, or ZooKeeper
    /// session expiry in election mode).
    pub fn stopped(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Every call the log keeps (the newest `master::calls::MAX_CALLS`, within
    /// its byte budget: `docs/testbed.md#inspection`), oldest first. The
    /// entries are copied under the master's lock and decoded after.
    pub fn calls(&self) -> Vec<CallRecord> {
        let entries = self.app.lock().calls.entries(None);
        entries.iter().map(|e| e.record()).collect()
    }

    /// The scheduler calls of type `call_type` (e.g. `"KILL"`), oldest first.
    pub fn scheduler_calls(&self, call_type: &str) -> Vec<CallRecord> {
        let entries = self.app.lock().calls.entries(Some(call_type));
        entries
            .iter()
            .filter(|e| e.api == "scheduler")
            .map(|e| e.record())
            .collect()
    }

    /// Live and unreachable tasks.
    pub fn tasks(&self) -> Vec<TaskView> {
        self.app.lock().task_views()
    }

    /// Known frameworks, completed ones included.
    pub fn frameworks(&self) -> Vec<FrameworkView> {
        self.app.lock().framework_views()
    }

    /// The simulated agents.
    pub fn agents(&self) -> Vec<AgentView> {
        self.app.lock().agent_views()
    }

    /// Marks an agent unreachable (see `control`); false if unknown.
    pub fn make_agent_unreachable(&self, agent_id: &str) -> bool {
        self.app.lock().agent_unreachable(agent_id)
    }

    /// Lets an unreachable agent re-register; false if unknown.
    pub fn make_agent_reachable(&self, agent_id: &str) -> bool {
        self.app.lock().agent_reachable(agent_id)
    }

    /// Cuts a framework's subscription without a terminating chunk; false if
    /// it is not connected.
    pub fn drop_stream(&self, framework_id: &str) -> bool {
        let mut master = self.app.lock();
        let connected = master
            .frameworks
            .get(framework_id)
            .is_some_and(|f| f.connected());
        if connected {
            master.disconnect(framework_id, true);
        }
        connected
    }

    /// Stops HEARTBEAT events for one framework, or for all with `None`.
    pub fn stop_heartbeats(&self, framework_id: Option<&str>) {
        let mut master = self.app.lock();
        match framework_id {
            Some(id) => master.faults.heartbeats_stopped_for.push(id.to_string()),
            None => master.faults.heartbeats_stopped = true,
        }
    }

    /// Resumes HEARTBEAT events for everyone.
    pub fn resume_heartbeats(&self) {
        let mut master = self.app.lock();
        master.faults.heartbeats_stopped = false;
        master.faults.heartbeats_stopped_for.clear();
    }

    /// Executors ignore KILL of tasks whose ID starts with `prefix`.
    pub fn ignore_kill(&self, prefix: &str) {
        self.app.lock().faults.ignore_kill.push(prefix.to_string());
    }

    /// Tasks whose ID starts with `prefix` stay in TASK_STAGING.
    pub fn hold_staging(&self, prefix: &str) {
        self.app.lock().faults.hold_staging.push(prefix.to_string());
    }

    /// Simulated health checks of tasks whose ID starts with `prefix` (and
    /// that carry `label`, a `(key, value)`, if given) get `health` from now
    /// on; the last matching call wins (see `testbed::agents::health`).
    pub fn set_health(&self, prefix: &str, label: Option<(&str, &str)>, health: SimulatedHealth) {
        self.app
            .lock()
            .faults
            .health
            .push(master::faults::HealthRule {
                task_id_prefix: prefix.to_string(),
                label: label.map(|(k, v)| (k.to_string(), v.to_string())),
                health,
            });
    }

    /// Simulated tasks whose ID starts with `prefix` (and that carry
    /// `label`, a `(key, value)`, if given), launched from now on, exit
    /// with `exit_code` `run` after their TASK_RUNNING: TASK_FINISHED for
    /// 0, TASK_FAILED otherwise (the `task-exit` fault, see
    /// `testbed::master::finite`); the last matching call wins.
    pub fn set_task_exit(
        &self,
        prefix: &str,
        label: Option<(&str, &str)>,
        run: std::time::Duration,
        exit_code: u8,
    ) {
        self.app.lock().faults.exits.push(master::faults::ExitRule {
            task_id_prefix: prefix.to_string(),
            label: label.map(|(k, v)| (k.to_string(), v.to_string())),
            run,
            exit_code,
        });
    }

    /// `/api/v1` answers 404 as on a master without the v1 operator API,
    /// until [`Testbed::clear_faults`].
    pub fn remove_operator_api(&self) {
        self.app.lock().faults.no_operator_api = true;
    }

    /// Clears every injected fault.
    pub fn clear_faults(&self) {
        self.app.lock().faults.clear();
    }

    /// Marks an agent gone, as the operator's MARK_AGENT_GONE (see
    /// `master/gone.rs`); false if unknown.
    pub fn mark_agent_gone(&self, agent_id: &str) -> bool {
        self.app.lock().mark_agent_gone(agent_id)
    }

    /// The next `count` scheduler calls of `call_type` (e.g. `"ACCEPT"`, one
    /// of the types a master answers 202) are answered 202 and not acted
    /// on; a `count` of 0 stops dropping them.
    ///
    /// # Errors
    /// The reason, for a type that cannot be lost that way (`SUBSCRIBE`,
    /// `UPDATE_FRAMEWORK`, unknown names) or a count above a million.
    pub fn drop_calls(&self, call_type: &str, count: u64) -> Result<(), String> {
        self.app.lock().faults.drop_next(call_type, count)
    }

    /// Delays every event on scheduler subscription streams by `stream`
    /// (open ones too) and every scheduler API answer by `response`.
    pub fn set_latency(&self, stream: Duration, response: Duration) {
        self.app.lock().faults.set_latency(stream, response);
    }

    /// Completed tasks the master keeps, with their terminal state.
    pub fn completed_tasks(&self) -> Vec<TaskView> {
        self.app.lock().completed_task_views()
    }

    /// Process mode: the executor processes, live ones first, then the
    /// recently exited ones with their wait status.
    pub fn executors(&self) -> Vec<ExecutorView> {
        self.app.lock().executor_views()
    }

    /// Process mode: the agent's executor endpoint (`MESOS_AGENT_ENDPOINT`).
    pub fn agent_endpoint(&self, agent_id: &str) -> Option<SocketAddr> {
        let master = self.app.lock();
        let index = master.agent_index(agent_id)?;
        master.processes.endpoints.get(index).map(|e| e.addr)
    }

    /// Process mode: the agent dies (executor streams cut, endpoint refusing
    /// connections) and is back after `down` (see `agents/agent_restart.rs`); false
    /// for an unknown agent or without process mode.
    pub fn restart_agent(&self, agent_id: &str, down: Duration) -> bool {
        let mut master = self.app.lock();
        match master.agent_index(agent_id) {
            Some(index) => master.restart_agent(index, down),
            None => false,
        }
    }

    /// Simulates a master failover; agents re-register after `reregister_delay`.
    pub fn simulate_master_failover(&self, reregister_delay: Duration) {
        self.app.lock().simulate_failover(reregister_delay);
    }

    /// Stops serving: every stream is cut, the ZooKeeper session (if any) is
    /// closed, and the server stops accepting.
    pub async fn shutdown(mut self) {
        self.stop_now();
        for task in self.tasks.drain(..) {
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                tracing::warn!("testbed task did not stop in 5 s");
            }
        }
    }

    fn stop_now(&self) {
        {
            let mut master = self.app.lock();
            master.kill_all_processes();
            let ids: Vec<String> = master.frameworks.keys().cloned().collect();
            for id in ids {
                if let Some(sub) = master.frameworks.get_mut(&id).and_then(|f| f.sub.take()) {
                    sub.abort();
                }
            }
        }
        self.stop.cancel();
    }
}

/// In-process testbeds of this process: the address, the `--zk` URL (if
/// any) and the master. Weak, so a dropped testbed is gone from here too.
type Registry = Vec<(SocketAddr, Option<String>, std::sync::Weak<Mutex<Master>>)>;

static RUNNING: Mutex<Registry> = Mutex::new(Vec::new());

fn register(addr: SocketAddr, zk: Option<String>, master: &Shared) {
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    running.retain(|(_, _, m)| m.strong_count() > 0);
    running.push((addr, zk, Arc::downgrade(master)));
}

/// A read-only view of an in-process testbed, found by the master URL a
/// scheduler was given ([`TestbedInspector::find`]). It reads the master
/// under its lock, without the HTTP API: a test harness can inspect the
/// master from a `Drop` that blocks the runtime serving that API.
#[derive(Clone)]
pub struct TestbedInspector(App);

impl TestbedInspector {
    /// The running in-process testbed that `master` names: a `--master`
    /// value, `http://host:port` (or a comma-separated list of them), or
    /// the `zk://` URL a testbed elected through. `None` when no testbed
    /// of this process matches (it stopped, or runs elsewhere).
    pub fn find(master: &str) -> Option<TestbedInspector> {
        let running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        running.iter().find_map(|(addr, zk, shared)| {
            let named = master.split(',').any(|part| {
                let part = part.trim().trim_end_matches('/');
                let host = part
                    .strip_prefix("http://")
                    .or_else(|| part.strip_prefix("https://"))
                    .unwrap_or(part);
                host == addr.to_string() || zk.as_deref() == Some(master)
            });
            named
                .then(|| shared.upgrade())
                .flatten()
                .map(|shared| TestbedInspector(App(shared)))
        })
    }

    /// Live and unreachable tasks, then the completed ones the master
    /// keeps (as `GET /testbed/tasks` lists them).
    pub fn tasks(&self) -> Vec<TaskView> {
        self.0.lock().all_task_views()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.stop_now();
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn router(app: App) -> Router {
    Router::new()
        .route("/api/v1/scheduler", any(api::scheduler_api::scheduler))
        .route(
            "/master/api/v1/scheduler",
            any(api::scheduler_api::scheduler),
        )
        .route("/api/v1", any(api::operator_api::operator))
        .route("/master/api/v1", any(api::operator_api::operator))
        .route("/master/teardown", any(api::operator_api::legacy_teardown))
        .route("/teardown", any(api::operator_api::legacy_teardown))
        .route("/master/state", get(api::operator_api::state))
        .route("/state", get(api::operator_api::state))
        .route("/master/state.json", get(api::operator_api::state))
        .route("/master/frameworks", get(api::operator_api::frameworks))
        .route("/master/slaves", get(api::operator_api::slaves))
        .route("/slaves", get(api::operator_api::slaves))
        .route("/frameworks", get(api::operator_api::frameworks))
        .route("/master/redirect", get(api::operator_api::redirect))
        .route("/redirect", get(api::operator_api::redirect))
        .route("/version", get(api::operator_api::version))
        .merge(api::control::routes())
        .with_state(app)
}

/// Process mode: a sandbox root, and one executor endpoint per agent on the
/// testbed's IP (loopback if it listens on all addresses); the agents'
/// advertised ports become those of their endpoints. Simulated mode: one
/// endpoint per agent for its `/state` and files API only.
fn start_process_mode(app: &App, addr: SocketAddr, stop: &CancellationToken) -> anyhow::Result<()> {
    let ip = if addr.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        addr.ip()
    };
    if app.lock().cfg.run_executors.is_none() {
        return agents::sandboxes::serve_simulated(app, ip, stop);
    }
    let mut master = app.lock();
    let (work_dir, remove) = match master.cfg.work_dir.clone() {
        Some(dir) => (dir, false),
        None => (
            std::env::temp_dir().join(format!("mesos-testbed-{}", uuid::Uuid::new_v4())),
            true,
        ),
    };
    std::fs::create_dir_all(&work_dir)
        .with_context(|| format!("creating the work directory {}", work_dir.display()))?;
    master.processes.work_dir = work_dir;
    master.processes.remove_work_dir = remove;
    master.processes.stop = stop.child_token();
    for index in 0..master.agents.len() {
        let endpoint_stop = master.processes.stop.child_token();
        let bound = agents::executor_api::serve_agent(
            app.clone(),
            index,
            SocketAddr::new(ip, 0),
            endpoint_stop.clone(),
        )?;
        master.agents[index].port = bound.port();
        master
            .processes
            .endpoints
            .push(master::processes::AgentEndpoint {
                addr: bound,
                up: true,
                recovering: false,
                stop: endpoint_stop,
                epoch: 0,
            });
    }
    Ok(())
}

/// Timers run under one hold of the master's lock at most
/// ([`master::Master::run_due_timers`]).
const TIMER_BATCH: usize = 256;

/// Runs due timers until `stop`, [`TIMER_BATCH`] at a time; sleeps until
/// the next deadline or a new timer.
async fn drive_timers(shared: Shared, stop: CancellationToken) {
    let wake = shared
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .wake
        .clone();
    loop {
        let (more, next) = {
            let mut master = shared.lock().unwrap_or_else(|p| p.into_inner());
            let more = master.run_due_timers(std::time::Instant::now(), TIMER_BATCH);
            (more, master.next_deadline())
        };
        if more && !stop.is_cancelled() {
            // The lock is released between batches and calls waiting for
            // it get their turn.
            tokio::task::yield_now().await;
            continue;
        }
        let sleep = match next {
            Some(at) => tokio::time::sleep_until(at.into()),
            None => tokio::time::sleep(Duration::from_secs(3600)),
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.notified() => {}
            _ = sleep => {}
        }
    }
}
