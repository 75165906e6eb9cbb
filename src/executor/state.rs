//! The executor's state and how each agent event and task exit changes it
//! (the table in [`super`]); the loop that drives it is [`super::runtime`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::config::ExecutorConfig;
use super::connection::AgentClient;
use super::health::{HealthPolicy, HealthState};
use super::probes::{self, CheckResult, Checker};
use super::tasks::{Exit, Exited, TaskProcess, task_command};
use crate::mesos::v1::executor::{Call, Event, call, event};
use crate::mesos::v1::{self, TaskState, task_status};

/// Framework message that makes the executor kill its tasks, report them
/// and exit 1.
pub const KAMIKAZE: &[u8] = b"kamikaze";
/// The message of the TASK_FAILED a kamikaze sends for each task.
pub const KAMIKAZE_MESSAGE: &str =
    "Killed by kamikaze: the scheduler told its executor to kill every task and exit";
/// How long a kamikaze waits for the agent to acknowledge its updates (and
/// for the killed processes to be reaped) before the executor exits anyway.
pub const KAMIKAZE_ACK_WAIT: Duration = Duration::from_secs(2);
/// Most updates kept for re-sending; older ones are dropped (logged).
const MAX_UNACKNOWLEDGED: usize = 10_000;
/// Longest framework message text logged.
const MAX_LOGGED_MESSAGE: usize = 200;

/// Why the executor is stopping its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// SHUTDOWN event or SIGTERM: report TASK_KILLED, exit 0.
    Shutdown,
    /// `kamikaze`: SIGKILL, TASK_FAILED for each task, exit 1.
    Kamikaze,
}

/// What the loop does next.
pub(super) enum Flow {
    /// The subscription ended.
    Disconnected,
    /// Exit with this code.
    Exit(u8),
}

pub(super) struct Task {
    pub(super) info: v1::TaskInfo,
    pub(super) process: Option<TaskProcess>,
    /// Set once a KILL (or shutdown) asked this task to stop.
    pub(super) killed: bool,
    /// Runs the task's health check; dropped (checking stops) once the task
    /// is being killed, as the command executor pauses its checker.
    pub(super) checker: Option<Checker>,
    /// The interpretation of the check's results.
    pub(super) health: Option<HealthState>,
    /// The health check asked for the kill: the terminal update says
    /// `healthy = false` (`src/launcher/executor.cpp` reaped).
    pub(super) killed_by_health_check: bool,
}

/// The executor's state.
pub(super) struct Runtime {
    pub(super) cfg: ExecutorConfig,
    pub(super) client: AgentClient,
    /// Launched tasks whose process has not ended.
    pub(super) tasks: HashMap<String, Task>,
    /// Updates the agent has not acknowledged, oldest first.
    pub(super) unacked_updates: Vec<call::Update>,
    /// Launched tasks none of whose updates the agent acknowledged.
    pub(super) unacked_tasks: HashMap<String, v1::TaskInfo>,
    pub(super) exits_tx: mpsc::UnboundedSender<Exited>,
    pub(super) exits_rx: mpsc::UnboundedReceiver<Exited>,
    pub(super) checks_tx: mpsc::UnboundedSender<CheckResult>,
    pub(super) checks_rx: mpsc::UnboundedReceiver<CheckResult>,
    /// Calls to send in order on the current subscription.
    pub(super) outbox: Option<mpsc::UnboundedSender<Call>>,
    pub(super) agent_id: Option<String>,
    pub(super) killing_state: bool,
    pub(super) subscribed_once: bool,
    pub(super) had_tasks: bool,
    pub(super) stop: Option<(Stop, Instant)>,
}

impl Runtime {
    /// A fresh executor: no tasks yet, not subscribed.
    pub(super) fn new(cfg: ExecutorConfig, client: AgentClient) -> Self {
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let (checks_tx, checks_rx) = mpsc::unbounded_channel();
        Runtime {
            client,
            tasks: HashMap::new(),
            unacked_updates: Vec::new(),
            unacked_tasks: HashMap::new(),
            exits_tx,
            exits_rx,
            checks_tx,
            checks_rx,
            outbox: None,
            agent_id: cfg.agent_id.clone(),
            killing_state: false,
            subscribed_once: false,
            had_tasks: false,
            stop: None,
            cfg,
        }
    }

    /// SUBSCRIBE with the updates and tasks the agent has not acknowledged.
    pub(super) fn subscribe_call(&self) -> Call {
        let mut call = self.call(call::Type::Subscribe);
        call.subscribe = Some(call::Subscribe {
            unacknowledged_tasks: self.unacked_tasks.values().cloned().collect(),
            unacknowledged_updates: self.unacked_updates.clone(),
        });
        call
    }

    /// A call of `kind` from this executor.
    pub(super) fn call(&self, kind: call::Type) -> Call {
        Call {
            executor_id: v1::ExecutorId {
                value: self.cfg.executor_id.clone(),
            },
            framework_id: v1::FrameworkId {
                value: self.cfg.framework_id.clone(),
            },
            r#type: Some(kind as i32),
            ..Default::default()
        }
    }

    /// Handles one event; `Some` ends the subscription.
    pub(super) fn on_event(&mut self, event: Event) -> Option<Flow> {
        use event::Type;
        match event.r#type() {
            Type::Subscribed => {
                let subscribed = event.subscribed?;
                if let Some(id) = subscribed.agent_info.id {
                    self.agent_id = Some(id.value);
                }
                use v1::framework_info::capability::Type as Cap;
                self.killing_state = subscribed
                    .framework_info
                    .capabilities
                    .iter()
                    .any(|c| c.r#type() == Cap::TaskKillingState);
                self.subscribed_once = true;
                tracing::info!(agent = %subscribed.agent_info.hostname, "subscribed");
            }
            Type::Launch => {
                if let Some(launch) = event.launch {
                    self.launch(launch.task);
                }
            }
            Type::LaunchGroup => {
                for task in event
                    .launch_group
                    .map(|g| g.task_group.tasks)
                    .unwrap_or_default()
                {
                    self.unacked_tasks
                        .insert(task.task_id.value.clone(), task.clone());
                    self.update(
                        &task.task_id.value,
                        TaskState::TaskFailed,
                        "LAUNCH_GROUP is not supported by mesos-appliance-executor",
                    );
                }
            }
            Type::Kill => {
                if let Some(kill) = event.kill {
                    self.kill(&kill.task_id.value, kill.kill_policy.as_ref());
                }
            }
            Type::Acknowledged => {
                let ack = event.acknowledged?;
                self.unacked_updates
                    .retain(|u| u.status.uuid.as_deref() != Some(ack.uuid.as_slice()));
                self.unacked_tasks.remove(&ack.task_id.value);
            }
            Type::Message => {
                let data = event.message.map(|m| m.data).unwrap_or_default();
                if data == KAMIKAZE {
                    tracing::warn!(
                        tasks = self.tasks.len(),
                        "kamikaze: killing every task, reporting them and exiting 1"
                    );
                    self.begin_stop(Stop::Kamikaze);
                } else {
                    let text = String::from_utf8_lossy(&data[..data.len().min(MAX_LOGGED_MESSAGE)])
                        .into_owned();
                    tracing::info!(message = %text, bytes = data.len(), "unknown framework message ignored");
                }
            }
            Type::Shutdown => {
                tracing::info!("SHUTDOWN: killing every task");
                self.begin_stop(Stop::Shutdown);
            }
            Type::Error => {
                let message = event.error.map(|e| e.message).unwrap_or_default();
                // docs/executor-http-api.md: abort and retry subscription.
                tracing::error!(%message, "ERROR event from the agent");
                return Some(Flow::Disconnected);
            }
            Type::Heartbeat => {}
            Type::Unknown => tracing::warn!("UNKNOWN event ignored"),
        }
        None
    }

    pub(super) fn launch(&mut self, task: v1::TaskInfo) {
        let task_id = task.task_id.value.clone();
        if self.tasks.contains_key(&task_id) {
            tracing::warn!(%task_id, "duplicate LAUNCH ignored");
            return;
        }
        self.had_tasks = true;
        self.unacked_tasks.insert(task_id.clone(), task.clone());
        if self.stop.is_some() {
            self.update(&task_id, TaskState::TaskFailed, "Executor is shutting down");
            return;
        }
        self.update(&task_id, TaskState::TaskStarting, "");
        let spawned = task_command(&task).and_then(|command| {
            TaskProcess::spawn(&task_id, &command, &self.cfg.sandbox, self.exits_tx.clone())
        });
        match spawned {
            Ok(process) => {
                tracing::info!(%task_id, pid = process.pid, "task started");
                // As the command executor: the checker starts with the task,
                // before TASK_RUNNING is sent.
                let (checker, health) = self.start_health_check(&task);
                self.tasks.insert(
                    task_id.clone(),
                    Task {
                        info: task,
                        process: Some(process),
                        killed: false,
                        checker,
                        health,
                        killed_by_health_check: false,
                    },
                );
                self.update(&task_id, TaskState::TaskRunning, "");
            }
            Err(message) => {
                tracing::warn!(%task_id, %message, "task failed to start");
                self.update(&task_id, TaskState::TaskFailed, &message);
            }
        }
    }

    /// The task's health checker, if it has a usable health check (an
    /// invalid one is logged and ignored, as the command executor does).
    fn start_health_check(&self, task: &v1::TaskInfo) -> (Option<Checker>, Option<HealthState>) {
        let task_id = &task.task_id.value;
        let Some(check) = &task.health_check else {
            return (None, None);
        };
        let started = Instant::now();
        let policy = match HealthPolicy::from_proto(check) {
            Ok(policy) => policy,
            Err(error) => {
                tracing::error!(%task_id, %error, "invalid health check; the task is not checked");
                return (None, None);
            }
        };
        let state = HealthState::new(&policy, started);
        tracing::info!(%task_id, probe = ?policy.probe, "health checking the task");
        match probes::start(task_id, policy, &self.cfg.sandbox, self.checks_tx.clone()) {
            Ok(checker) => (Some(checker), Some(state)),
            Err(error) => {
                tracing::error!(%task_id, %error, "cannot start the health checker");
                (None, None)
            }
        }
    }

    /// A health check result: reported when `healthy` changes or the check
    /// failed (see [`HealthState`]); after too many failures in a row the
    /// task is killed with its kill policy. Results of a task being killed
    /// are ignored (`src/launcher/executor.cpp` taskHealthUpdated).
    pub(super) fn on_check(&mut self, result: CheckResult) {
        let task_id = result.task_id;
        let Some(task) = self.tasks.get_mut(&task_id) else {
            return;
        };
        if task.killed {
            return;
        }
        let Some(report) = task
            .health
            .as_mut()
            .and_then(|h| h.record(&result.outcome, Instant::now()))
        else {
            return;
        };
        tracing::info!(%task_id, healthy = report.healthy, failures = report.consecutive_failures, "task health changed");
        let mut status = self.status(
            &task_id,
            TaskState::TaskRunning,
            "",
            Some(task_status::Reason::TaskHealthCheckStatusUpdated),
        );
        status.healthy = Some(report.healthy);
        self.send_status(status);
        if report.kill {
            tracing::warn!(%task_id, failures = report.consecutive_failures, "killing the task: its health check failed too often");
            if let Some(task) = self.tasks.get_mut(&task_id) {
                task.killed_by_health_check = true;
            }
            self.kill(&task_id, None);
        }
    }

    /// KILL: SIGTERM now, SIGKILL after the grace period of the event's kill
    /// policy, else the task's, else the executor's shutdown grace period.
    pub(super) fn kill(&mut self, task_id: &str, policy: Option<&v1::KillPolicy>) {
        let default = self.cfg.shutdown_grace_period;
        let killing_state = self.killing_state;
        let Some(task) = self.tasks.get_mut(task_id) else {
            tracing::warn!(%task_id, "KILL of an unknown or finished task ignored");
            return;
        };
        let grace = grace_of(policy)
            .or_else(|| grace_of(task.info.kill_policy.as_ref()))
            .unwrap_or(default);
        let first = !task.killed;
        task.killed = true;
        task.checker = None;
        if let Some(process) = task.process.as_mut() {
            tracing::info!(%task_id, ?grace, "killing task");
            process.kill(grace);
        }
        if first && killing_state {
            self.update(task_id, TaskState::TaskKilling, "");
        }
    }

    /// Starts stopping every task for `why`; the executor exits once they
    /// are gone and reported (see [`Runtime::finished`]) or at the deadline.
    /// A kamikaze overrides a shutdown in progress, never the reverse.
    pub(super) fn begin_stop(&mut self, why: Stop) {
        if matches!(self.stop, Some((Stop::Kamikaze, _))) || self.stop.map(|(w, _)| w) == Some(why)
        {
            return;
        }
        if why == Stop::Kamikaze {
            self.kamikaze();
            return;
        }
        let grace_total = self.cfg.shutdown_grace_period;
        self.stop = Some((why, Instant::now() + grace_total));
        let grace = stop_grace(grace_total);
        for (task_id, task) in &mut self.tasks {
            task.killed = true;
            task.checker = None;
            let grace = grace_of(task.info.kill_policy.as_ref()).map_or(grace, |g| g.min(grace));
            if let Some(process) = task.process.as_mut() {
                tracing::info!(%task_id, ?grace, ?why, "stopping task");
                process.kill(grace);
            }
        }
    }

    /// Kamikaze: every task's process group is SIGKILLed (no grace: the
    /// point is to die now) and reported TASK_FAILED at once; the executor
    /// then waits up to [`KAMIKAZE_ACK_WAIT`] for the agent's ACKNOWLEDGED
    /// and exits 1. Reporting the tasks ourselves makes our update the
    /// terminal one: an agent only fails the tasks of an exited executor
    /// that are not terminal yet (`src/slave/slave.cpp` executorTerminated),
    /// so the agent's TASK_FAILED / REASON_EXECUTOR_TERMINATED remains only
    /// for tasks whose update it never received. The reason is the same, so
    /// the scheduler treats the task as not at fault either way.
    fn kamikaze(&mut self) {
        self.stop = Some((Stop::Kamikaze, Instant::now() + KAMIKAZE_ACK_WAIT));
        let mut ids: Vec<String> = self.tasks.keys().cloned().collect();
        ids.sort();
        for task_id in ids {
            if let Some(task) = self.tasks.get_mut(&task_id) {
                task.killed = true;
                task.checker = None;
                if let Some(process) = task.process.as_mut() {
                    tracing::info!(%task_id, "kamikaze: SIGKILL");
                    process.kill(Duration::ZERO);
                }
            }
            self.send_update(
                &task_id,
                TaskState::TaskFailed,
                KAMIKAZE_MESSAGE,
                Some(task_status::Reason::ExecutorTerminated),
            );
        }
    }

    /// A task process ended: report it (under kamikaze it was reported
    /// when it was killed).
    pub(super) fn on_exit(&mut self, exited: Exited) {
        let Some(mut task) = self.tasks.remove(&exited.task_id) else {
            return;
        };
        if let Some(process) = task.process.as_mut() {
            process.reaped();
        }
        let description = exited.exit.describe();
        tracing::info!(task_id = %exited.task_id, exit = %description, "task ended");
        if matches!(self.stop, Some((Stop::Kamikaze, _))) {
            return;
        }
        let state = match (task.killed, exited.exit) {
            (true, _) => TaskState::TaskKilled,
            (false, Exit::Code(0)) => TaskState::TaskFinished,
            (false, _) => TaskState::TaskFailed,
        };
        let mut status = self.status(&exited.task_id, state, &description, None);
        if task.killed_by_health_check {
            // src/launcher/executor.cpp reaped: a kill by the health check
            // is told by `healthy = false` (no reason of its own).
            status.healthy = Some(false);
        }
        self.send_status(status);
    }

    /// `Some(exit code)` when there is nothing left to do: stopping, all
    /// tasks gone and their updates acknowledged; or,
    /// like the default executor (`src/launcher/default_executor.cpp`), every
    /// task ended and every update was acknowledged by the agent.
    pub(super) fn finished(&self) -> Option<u8> {
        if !self.tasks.is_empty() {
            return None;
        }
        match self.stop {
            Some((Stop::Kamikaze, _)) if self.unacked_updates.is_empty() => Some(1),
            Some((Stop::Shutdown, _)) if self.unacked_updates.is_empty() => Some(0),
            None if self.had_tasks && self.unacked_updates.is_empty() => {
                tracing::info!("no tasks left and every update acknowledged; exiting");
                Some(0)
            }
            _ => None,
        }
    }

    pub(super) fn exit_code(&self) -> u8 {
        match self.stop {
            Some((Stop::Kamikaze, _)) => 1,
            _ => 0,
        }
    }

    /// Sends a status update (queued while disconnected) and keeps it until
    /// the agent acknowledges it.
    pub(super) fn update(&mut self, task_id: &str, state: TaskState, message: &str) {
        self.send_update(task_id, state, message, None);
    }

    /// [`Runtime::update`] with a reason.
    fn send_update(
        &mut self,
        task_id: &str,
        state: TaskState,
        message: &str,
        reason: Option<task_status::Reason>,
    ) {
        let status = self.status(task_id, state, message, reason);
        self.send_status(status);
    }

    /// A new status of this executor's: a fresh uuid and timestamp.
    fn status(
        &self,
        task_id: &str,
        state: TaskState,
        message: &str,
        reason: Option<task_status::Reason>,
    ) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: v1::TaskId {
                value: task_id.to_string(),
            },
            state: state as i32,
            message: (!message.is_empty()).then(|| message.to_string()),
            source: Some(task_status::Source::Executor as i32),
            reason: reason.map(|r| r as i32),
            agent_id: self.agent_id.clone().map(|value| v1::AgentId { value }),
            executor_id: Some(v1::ExecutorId {
                value: self.cfg.executor_id.clone(),
            }),
            timestamp: Some(crate::util::unix_now_secs()),
            uuid: Some(uuid::Uuid::new_v4().as_bytes().to_vec()),
            ..Default::default()
        }
    }

    /// Sends a status update (queued while disconnected) and keeps it until
    /// the agent acknowledges it.
    fn send_status(&mut self, status: v1::TaskStatus) {
        let update = call::Update { status };
        if self.unacked_updates.len() >= MAX_UNACKNOWLEDGED {
            let dropped = self.unacked_updates.remove(0);
            tracing::error!(task_id = %dropped.status.task_id.value, "too many unacknowledged updates; dropped the oldest");
        }
        self.unacked_updates.push(update.clone());
        let mut call = self.call(call::Type::Update);
        call.update = Some(update);
        if let Some(outbox) = &self.outbox {
            let _ = outbox.send(call);
        }
    }
}

/// A KillPolicy's grace period, if it has one.
fn grace_of(policy: Option<&v1::KillPolicy>) -> Option<Duration> {
    let nanos = policy?.grace_period.as_ref()?.nanoseconds;
    Some(Duration::from_nanos(u64::try_from(nanos).unwrap_or(0)))
}

/// The kill grace used when stopping everything: shorter than the agent's
/// shutdown grace period so tasks are gone before the agent destroys the
/// container (the idea of `src/slave/utils.hpp` adjustShutdownTimeout).
fn stop_grace(shutdown_grace: Duration) -> Duration {
    shutdown_grace
        .saturating_sub(Duration::from_secs(1))
        .max(shutdown_grace / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_grace_leaves_room_before_the_agent_destroys_us() {
        assert_eq!(stop_grace(Duration::from_secs(5)), Duration::from_secs(4));
        assert_eq!(
            stop_grace(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        assert_eq!(stop_grace(Duration::ZERO), Duration::ZERO);
    }

    fn runtime(sandbox: &std::path::Path) -> (Runtime, mpsc::UnboundedReceiver<Call>) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let sandbox = sandbox.to_str().unwrap().to_string();
        let cfg = ExecutorConfig::from_lookup(|name| match name {
            "MESOS_FRAMEWORK_ID" => Some("fw".into()),
            "MESOS_EXECUTOR_ID" => Some("ex".into()),
            "MESOS_AGENT_ENDPOINT" => Some("127.0.0.1:1".into()),
            "MESOS_SANDBOX" => Some(sandbox.clone()),
            _ => None,
        })
        .unwrap();
        let client = AgentClient::new(&cfg).unwrap();
        let mut rt = Runtime::new(cfg, client);
        let (tx, rx) = mpsc::unbounded_channel();
        rt.outbox = Some(tx);
        (rt, rx)
    }

    fn event(kind: event::Type) -> Event {
        Event {
            r#type: Some(kind as i32),
            ..Default::default()
        }
    }

    fn launch(task_id: &str) -> Event {
        let mut launch = event(event::Type::Launch);
        launch.launch = Some(event::Launch {
            task: v1::TaskInfo {
                name: task_id.into(),
                task_id: v1::TaskId {
                    value: task_id.into(),
                },
                command: Some(v1::CommandInfo {
                    value: Some("sleep 100".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        });
        launch
    }

    fn updates(rx: &mut mpsc::UnboundedReceiver<Call>) -> Vec<v1::TaskStatus> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|call| call.update.map(|u| u.status))
            .collect()
    }

    #[tokio::test]
    async fn kamikaze_kills_reports_each_task_and_exits_1_once_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rt, mut calls) = runtime(dir.path());
        for id in ["t1", "t2"] {
            assert!(rt.on_event(launch(id)).is_none());
        }
        let pids: Vec<u32> = rt
            .tasks
            .values()
            .map(|t| t.process.as_ref().unwrap().pid)
            .collect();
        assert_eq!(updates(&mut calls).len(), 4, "STARTING and RUNNING each");
        let mut message = event(event::Type::Message);
        message.message = Some(event::Message {
            data: KAMIKAZE.to_vec(),
        });
        let before = Instant::now();
        assert!(rt.on_event(message).is_none());

        let failed = updates(&mut calls);
        let ids: Vec<&str> = failed.iter().map(|s| s.task_id.value.as_str()).collect();
        assert_eq!(ids, ["t1", "t2"]);
        for status in &failed {
            assert_eq!(status.state(), TaskState::TaskFailed);
            assert_eq!(status.source(), task_status::Source::Executor);
            assert_eq!(status.reason(), task_status::Reason::ExecutorTerminated);
            assert!(status.message().contains("kamikaze"), "{status:?}");
            assert_eq!(status.uuid.as_ref().map(Vec::len), Some(16));
        }
        let (why, deadline) = rt.stop.unwrap();
        assert_eq!(why, Stop::Kamikaze);
        assert!(deadline <= before + Duration::from_secs(2) + Duration::from_millis(50));

        // SIGKILLed: both processes end at once; their exits add no update.
        for _ in 0..2 {
            let exited = tokio::time::timeout(Duration::from_secs(5), rt.exits_rx.recv())
                .await
                .expect("killed task reaped")
                .unwrap();
            assert_eq!(exited.exit, Exit::Signal(libc::SIGKILL));
            rt.on_exit(exited);
        }
        assert!(updates(&mut calls).is_empty());
        for pid in pids {
            // SAFETY: kill(2) with signal 0 only checks for existence.
            assert_ne!(unsafe { libc::kill(pid as i32, 0) }, 0, "{pid} is gone");
        }
        // Exit only once the agent has every update (or at the deadline).
        assert_eq!(rt.finished(), None);
        for update in rt.unacked_updates.clone() {
            let mut ack = event(event::Type::Acknowledged);
            ack.acknowledged = Some(event::Acknowledged {
                task_id: update.status.task_id.clone(),
                uuid: update.status.uuid.clone().unwrap(),
            });
            rt.on_event(ack);
        }
        assert_eq!(rt.finished(), Some(1));
        assert_eq!(rt.exit_code(), 1);
    }

    #[tokio::test]
    async fn failing_health_checks_are_reported_and_kill_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rt, mut calls) = runtime(dir.path());
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let mut event = launch("sick");
        let task = &mut event.launch.as_mut().unwrap().task;
        task.health_check = Some(v1::HealthCheck {
            r#type: Some(v1::health_check::Type::Tcp as i32),
            tcp: Some(v1::health_check::TcpCheckInfo {
                port: u32::from(port),
                protocol: None,
            }),
            delay_seconds: Some(0.0),
            interval_seconds: Some(0.1),
            timeout_seconds: Some(1.0),
            grace_period_seconds: Some(0.0),
            consecutive_failures: Some(2),
            ..Default::default()
        });
        task.kill_policy = Some(crate::executor::info::kill_policy(Duration::from_secs(3)));
        assert!(rt.on_event(event).is_none());
        let wait = Duration::from_secs(10);
        for _ in 0..2 {
            let result = tokio::time::timeout(wait, rt.checks_rx.recv())
                .await
                .expect("a check result")
                .unwrap();
            assert!(result.outcome.is_err());
            rt.on_check(result);
        }
        assert!(rt.tasks["sick"].killed, "killed after 2 failures");
        assert!(rt.tasks["sick"].checker.is_none(), "checking stopped");
        let exited = tokio::time::timeout(wait, rt.exits_rx.recv())
            .await
            .expect("the task ends")
            .unwrap();
        assert_eq!(exited.exit, Exit::Signal(libc::SIGTERM));
        rt.on_exit(exited);
        let seen: Vec<(TaskState, Option<bool>, Option<task_status::Reason>)> = updates(&mut calls)
            .iter()
            .map(|s| (s.state(), s.healthy, s.reason.map(|_| s.reason())))
            .collect();
        let updated = Some(task_status::Reason::TaskHealthCheckStatusUpdated);
        assert_eq!(
            seen,
            [
                (TaskState::TaskStarting, None, None),
                (TaskState::TaskRunning, None, None),
                (TaskState::TaskRunning, Some(false), updated),
                (TaskState::TaskRunning, Some(false), updated),
                (TaskState::TaskKilled, Some(false), None),
            ]
        );
    }

    #[test]
    fn kill_policy_grace() {
        let policy = crate::executor::info::kill_policy(Duration::from_millis(300));
        assert_eq!(grace_of(Some(&policy)), Some(Duration::from_millis(300)));
        assert_eq!(grace_of(None), None);
        assert_eq!(grace_of(Some(&v1::KillPolicy::default())), None);
    }
}
