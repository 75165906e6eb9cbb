//! The web layer in isolation: a router over a snapshot channel the test
//! publishes into, a [`MemoryCoordinator`], and a small scripted core
//! ([`TestCore`]) answering commands from the `mpsc` receiver — success
//! with plausible effects, a chosen error, or never (to hit the handler
//! timeout). This tests the web layer only; it imitates neither ZooKeeper
//! nor Mesos.
//!
//! Also: sample snapshots (a leader with tasks, a follower), and request
//! helpers for `tower::ServiceExt::oneshot`.

use mesos_appliance::scheduler::records::Halt;
use mesos_appliance::scheduler::rules::rollout::{RolloutAction, RolloutStatus};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use mesos_appliance::coordination::memory::MemoryCoordinator;
use mesos_appliance::coordination::{DeploymentRecord, Leadership, ReplicaInfo, Strategy};
use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::mesos::v1::task_status::{Reason, Source};
use mesos_appliance::scheduler::Request as CoreRequest;
use mesos_appliance::scheduler::snapshot::RestoreTarget;
use mesos_appliance::scheduler::{
    Answer, Command, CommandError, CommandSpec, EventEntry, EventKind, ExecutorKind,
    FrameworkState, FrameworkStatus, KamikazeResult, OfferSummary, ReconcileKind, ReconcileOutcome,
    ReconcileRun, ReconcileTrigger, ReconciliationStatus, SchedulerHandle, ServiceSpec,
    ServiceStatus, Snapshot, StatusEntry, TaskRecord, TeardownResult,
};
use mesos_appliance::web::{AppState, WebConfig, router};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{mpsc, watch};
use tower::ServiceExt;

/// The framework ID of the sample snapshots.
pub const FRAMEWORK_ID: &str = "7c1f3a9e-52b4-4d0e-9f3c-2a8b6e1d4c70-0000";
/// The fingerprint the sample `web` service would be rolled back to.
pub const RESTORE_FINGERPRINT: &str = "0a1b2c3d4e5f6071";
/// The framework name of the sample snapshots.
pub const FRAMEWORK_NAME: &str = "mesos-appliance";
/// The admin token of token-mode tests.
pub const TOKEN: &str = "test-admin-token-0123456789";
/// "Now" for the sample snapshots: the wall clock when first asked, in
/// whole seconds, fixed for the rest of the test binary. The web layer
/// measures ages against the request's time, so samples must be recent for
/// their ages (heartbeat age, readiness) to mean what the tests expect.
pub fn now() -> f64 {
    static NOW: OnceLock<f64> = OnceLock::new();
    *NOW.get_or_init(|| mesos_appliance::util::unix_now_secs().floor())
}

/// Replica info for `url`.
pub fn replica_info(id: &str, url: &str) -> ReplicaInfo {
    ReplicaInfo {
        replica_id: id.to_string(),
        advertised_url: url.to_string(),
        deployment_id: "dep-3f9a1c".to_string(),
        version: "0.1.0".to_string(),
        started_at: (now() - 3.0 * 3600.0) as u64,
    }
}

fn spec(name: &str, command: &str, instances: u32, executor: ExecutorKind) -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": name, "command": command, "cpus": 0.1, "mem": 64, "instances": instances,
        "ports": if executor == ExecutorKind::Appliance { 1 } else { 0 },
        "executor": if executor == ExecutorKind::Appliance { "appliance" } else { "command" },
        "constraints": if name == "web" { vec!["hostname:UNIQUE"] } else { vec![] },
    }))
    .expect("sample spec")
}

/// Task `i` of the samples: services `web` (appliance executor) and
/// `batch` (command executor); mostly running, some staging or failed.
pub fn sample_task(i: usize, generation: u32) -> TaskRecord {
    let (service, executor) = if i % 4 == 3 {
        ("batch", ExecutorKind::Command)
    } else {
        ("web", ExecutorKind::Appliance)
    };
    let uuid = uuid::Uuid::from_u128(
        (i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
            ^ u128::from(generation) << 64,
    );
    let task_id = format!("{service}.{i}.{uuid}");
    let agent = i % 8;
    let launched = now() - 3000.0 + i as f64 * 7.0 + f64::from(generation) * 100.0;
    let state = match (generation, i % 20) {
        (0, 5) => "TASK_STAGING",
        (0, 13) => "TASK_FAILED",
        _ => "TASK_RUNNING",
    };
    let mut timeline = vec![StatusEntry {
        at: launched + 0.4,
        state: TaskState::TaskStarting,
        source: Some(Source::Executor),
        reason: None,
        message: None,
        healthy: None,
    }];
    if state != "TASK_STAGING" {
        timeline.push(StatusEntry {
            at: launched + 1.2,
            state: TaskState::TaskRunning,
            source: Some(Source::Executor),
            reason: None,
            message: None,
            healthy: None,
        });
    }
    if state == "TASK_FAILED" {
        timeline.push(StatusEntry {
            at: launched + 60.0,
            state: TaskState::TaskFailed,
            source: Some(Source::Executor),
            reason: Some(Reason::CommandExecutorFailed),
            message: Some("Command exited with status 1".into()),
            healthy: None,
        });
    }
    TaskRecord {
        task_id: task_id.as_str().into(),
        service: service.into(),
        instance: i as u32,
        fingerprint: "9d2b7c1e4f0a3b65".into(),
        agent_id: format!("b2a4e6c8-0d1f-4a3b-8c5d-7e9f1a2b3c4d-S{agent}").into(),
        hostname: format!("agent-{agent}.cluster.test"),
        executor,
        executor_id: match executor {
            ExecutorKind::Appliance => {
                format!("mesos-appliance-executor.{service}.{agent}.g{generation}")
            }
            ExecutorKind::Command => task_id,
        },
        ports: if executor == ExecutorKind::Appliance {
            vec![31000 + i as u64]
        } else {
            vec![]
        },
        state: TaskState::from_str_name(state).expect("a Mesos state"),
        launched_at: launched,
        updated_at: timeline.last().map_or(launched, |e| e.at),
        kill: None,
        timeline,
        healthy: None,
        healthy_since: None,
        health_checked: None,
        partition: None,
    }
}

/// A leader's snapshot at `url` with `tasks` sample tasks, subscribed.
pub fn leader_snapshot(url: &str, tasks: usize) -> Snapshot {
    let replica = replica_info("replica-a", url);
    let mut s = Snapshot::standby(replica, FRAMEWORK_NAME, "*", Strategy::Failover);
    s.at = now();
    s.leadership = Leadership::Leader { term: 3 };
    s.loading = false;
    s.framework = FrameworkStatus {
        id: Some(FRAMEWORK_ID.into()),
        name: FRAMEWORK_NAME.into(),
        role: "*".into(),
        state: FrameworkState::Subscribed,
        reason: None,
        failover_timeout_seconds: 604_800.0,
        master: Some("http://master-1.cluster.test:5050".into()),
        master_version: Some("1.11.0".into()),
        subscribed_at: Some(now() - 2.5 * 3600.0),
        last_event_at: Some(now() - 4.0),
        event_lag_seconds: 0.5,
        event_inbox_depth: 2,
        event_inbox_full: false,
        heartbeat_interval_seconds: Some(15.0),
        heartbeat_timeout_seconds: Some(75.0),
        strategy: Strategy::Failover,
    };
    s.deployment = Some(DeploymentRecord {
        deployment_id: "dep-3f9a1c".into(),
        epoch: 2,
        strategy: Strategy::Failover,
        teardown_done: false,
    });
    let mut records: Vec<TaskRecord> = (0..tasks).map(|i| sample_task(i, 0)).collect();
    records.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let web = records.iter().filter(|t| t.service == "web").count() as u32;
    let batch = records.len() as u32 - web;
    let running = |svc: &str| {
        records
            .iter()
            .filter(|t| t.service == svc && t.state.as_str_name() == "TASK_RUNNING")
            .count() as u32
    };
    s.services = vec![
        ServiceStatus {
            spec: spec(
                "web",
                "python3 -m http.server $PORT0",
                web,
                ExecutorKind::Appliance,
            ),
            running: running("web"),
            starting: 0,
            killing: 0,
            unreachable: 0,
            consecutive_failures: 0,
            next_launch_after: None,
            backoff: Vec::new(),
            waiting: None,
            last_failure: None,
            offers: None,
            healthy: 0,
            unhealthy: 0,
            // A rollout halted a minute ago, for the resume and rollback
            // buttons.
            rollout: Some(RolloutStatus {
                desired: web,
                replaced: 1,
                healthy: 0,
                remaining: web.saturating_sub(1),
                halted: Some(Halt {
                    at: now() - 60.0,
                    reason: "instance(s) 0 not RUNNING and healthy for 10s within the \
                             deadline of 5m"
                        .into(),
                }),
            }),
            can_roll_back: true,
            restore: Some(RestoreTarget {
                fingerprint: RESTORE_FINGERPRINT.into(),
                summary: "sleep 1000; no health check".into(),
            }),
            restart_generation: 0,
            starting_tasks: 0,
            starting_since: None,
        },
        ServiceStatus {
            spec: spec(
                "batch",
                "./run-batch.sh --shard $MESOS_TASK_ID",
                batch,
                ExecutorKind::Command,
            ),
            running: running("batch"),
            starting: 0,
            killing: 0,
            unreachable: 0,
            consecutive_failures: 1,
            next_launch_after: Some(now() + 20.0),
            backoff: Vec::new(),
            waiting: None,
            last_failure: None,
            offers: None,
            healthy: 0,
            unhealthy: 0,
            rollout: None,
            can_roll_back: false,
            restore: None,
            restart_generation: 0,
            starting_tasks: 0,
            starting_since: None,
        },
    ];
    s.tasks = records.into_iter().map(Arc::new).collect();
    s.offers = (0..2)
        .map(|i| OfferSummary {
            id: format!("b2a4e6c8-0d1f-4a3b-8c5d-7e9f1a2b3c4d-O{}", 812 + i),
            agent_id: format!("b2a4e6c8-0d1f-4a3b-8c5d-7e9f1a2b3c4d-S{i}"),
            hostname: format!("agent-{i}.cluster.test"),
            cpus: 3.5,
            mem: 14_848.0,
            disk: 90_000.0,
            ports: "[31100-32000]".into(),
            received_at: now() - 3.0,
            expires_at: now() + 7.0,
        })
        .collect();
    s.reconciliation = ReconciliationStatus {
        running: None,
        queued: Vec::new(),
        not_before: None,
        history: vec![ReconcileRun {
            id: 1,
            kind: ReconcileKind::Explicit,
            trigger: ReconcileTrigger::Subscribed,
            started_at: now() - 2.5 * 3600.0,
            finished_at: Some(now() - 2.5 * 3600.0 + 1.5),
            asked: tasks,
            answered: tasks,
            unanswered: vec![],
            calls: 1,
            outcome: ReconcileOutcome::Converged,
        }],
    };
    s.events = vec![
        event(now() - 3.0 * 3600.0, "leadership", "became leader (term 3)"),
        event(
            now() - 2.5 * 3600.0,
            "subscribed",
            &format!("SUBSCRIBED as {FRAMEWORK_ID}, heartbeat 15s"),
        ),
        event(
            now() - 2.5 * 3600.0 + 1.5,
            "reconcile",
            "explicit reconciliation converged",
        ),
        event(
            now() - 600.0,
            "error",
            "TASK_FAILED batch.13: Command exited with status 1",
        ),
    ];
    s
}

/// An event entry.
pub fn event(at: f64, kind: &str, message: &str) -> EventEntry {
    EventEntry {
        at,
        kind: EventKind::from_name(kind).expect("an event kind"),
        message: message.into(),
    }
}

/// A follower's snapshot at `url`, following `leader_url`: framework ID
/// and tasks from the stores, state `standby`.
pub fn follower_snapshot(url: &str, leader_url: &str, tasks: usize) -> Snapshot {
    let mut s = leader_snapshot(url, tasks);
    s.replica = replica_info("replica-b", url);
    s.leadership = Leadership::Follower {
        leader: Some(replica_info("replica-a", leader_url)),
    };
    s.framework.state = FrameworkState::Standby;
    s.framework.master = None;
    s.framework.subscribed_at = None;
    s.framework.last_event_at = None;
    s.framework.heartbeat_interval_seconds = None;
    s.framework.heartbeat_timeout_seconds = None;
    s.offers = std::sync::Arc::from([]);
    s
}

/// How the test core answers.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Carry the command out (with plausible effects on the snapshot).
    Succeed,
    /// Answer every command with this error.
    Fail(CommandError),
    /// Never answer (the handler times out).
    Silent,
}

/// The scripted core: answers commands per [`Mode`], logs their names.
#[derive(Clone)]
pub struct TestCore {
    mode: Arc<Mutex<Mode>>,
    log: Arc<Mutex<Vec<&'static str>>>,
    snapshots: watch::Sender<Arc<Snapshot>>,
}

impl TestCore {
    /// Sets how the following commands are answered.
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Names of the commands received so far.
    pub fn received(&self) -> Vec<&'static str> {
        self.log.lock().unwrap().clone()
    }

    fn run(self, mut rx: mpsc::Receiver<Command>) {
        tokio::spawn(async move {
            // Replies of `Silent` commands, kept so they never resolve.
            let mut parked: Vec<Command> = Vec::new();
            while let Some(command) = rx.recv().await {
                let name = command.request.name();
                self.log.lock().unwrap().push(name);
                let mode = self.mode.lock().unwrap().clone();
                match mode {
                    Mode::Silent => parked.push(command),
                    Mode::Fail(e) => command.refuse(e),
                    Mode::Succeed => self.succeed(command),
                }
            }
        });
    }

    fn succeed(&self, command: Command) {
        let mut s = (**self.snapshots.borrow()).clone();
        s.at += 1.0;
        let Command { request, reply, .. } = command;
        let answer = |answer: Answer| drop(reply.send(answer));
        // A conditional replace is a put once its version holds (as the
        // core's `replace_service`).
        let request = match request {
            CoreRequest::ReplaceService { spec, expected } => {
                let stored = s.services.iter().find(|x| x.spec.name == spec.name);
                match stored.map(|x| x.spec.version()) {
                    Some(now) => match changed(&expected, &now) {
                        None => CoreRequest::PutService(spec),
                        Some(error) => {
                            answer(Answer::Service(Err(error)));
                            return;
                        }
                    },
                    None => {
                        let what = format!("service {}", spec.name);
                        answer(Answer::Service(Err(CommandError::NotFound(what))));
                        return;
                    }
                }
            }
            other => other,
        };
        match request {
            CoreRequest::Reconcile(kind) => {
                let active = s.tasks.iter().filter(|t| !t.is_terminal()).count();
                let run = ReconcileRun {
                    id: 2,
                    kind,
                    trigger: ReconcileTrigger::Manual,
                    started_at: s.at,
                    finished_at: None,
                    asked: if kind == ReconcileKind::Explicit {
                        active
                    } else {
                        0
                    },
                    answered: 0,
                    unanswered: vec![],
                    calls: 1,
                    outcome: ReconcileOutcome::Running,
                };
                s.reconciliation.running = Some(run.clone());
                s.events
                    .push(event(s.at, "action", "manual reconciliation started"));
                answer(Answer::Reconcile(Ok(run)));
            }
            CoreRequest::Kamikaze => {
                let blast = mesos_appliance::web::views::Blast::new(&s);
                let results = blast
                    .executors
                    .iter()
                    .map(|e| KamikazeResult {
                        agent_id: e.agent_id.clone(),
                        hostname: e.hostname.clone(),
                        executor_id: e.executor_id.clone(),
                        accepted: true,
                        error: None,
                    })
                    .collect();
                // The appliance executors' tasks die and are replaced.
                let mut tasks: Vec<TaskRecord> = Vec::new();
                for t in s.tasks.iter() {
                    if t.executor == ExecutorKind::Appliance && !t.is_terminal() {
                        let mut dead = (**t).clone();
                        dead.state = TaskState::TaskKilled;
                        dead.updated_at = s.at;
                        tasks.push(dead);
                        let mut fresh = sample_task(t.instance as usize, 1);
                        fresh.launched_at = s.at;
                        fresh.updated_at = s.at;
                        tasks.push(fresh);
                    } else {
                        tasks.push((**t).clone());
                    }
                }
                tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
                s.tasks = tasks.into_iter().map(Arc::new).collect();
                s.events.push(event(s.at, "action", "kamikaze sent"));
                answer(Answer::Kamikaze(Ok(results)));
            }
            CoreRequest::Teardown => {
                let result = TeardownResult {
                    framework_id: s.framework.id.clone().unwrap_or_default(),
                    tasks: s.tasks.len(),
                };
                s.framework.id = None;
                s.tasks = Default::default();
                s.framework.state = FrameworkState::Subscribing;
                answer(Answer::Teardown(Ok(result)));
            }
            CoreRequest::Abdicate => answer(Answer::Done(Ok(()))),
            CoreRequest::Reregister => {
                if s.framework.state == FrameworkState::Removed {
                    s.framework.state = FrameworkState::Subscribing;
                    answer(Answer::Done(Ok(())));
                } else {
                    answer(Answer::Done(Err(CommandError::Conflict(format!(
                        "reregister applies in state removed, not {}",
                        s.framework.state.as_str()
                    )))));
                }
            }
            CoreRequest::PutService(spec) => {
                let spec = spec.into_inner();
                let existing = s.services.iter_mut().find(|x| x.spec.name == spec.name);
                let replaced = existing.is_some();
                match existing {
                    Some(x) => x.spec = spec,
                    None => s.services.push(ServiceStatus {
                        spec,
                        running: 0,
                        starting: 0,
                        killing: 0,
                        unreachable: 0,
                        consecutive_failures: 0,
                        next_launch_after: None,
                        backoff: Vec::new(),
                        waiting: None,
                        last_failure: None,
                        offers: None,
                        healthy: 0,
                        unhealthy: 0,
                        rollout: None,
                        can_roll_back: false,
                        restore: None,
                        restart_generation: 0,
                        starting_tasks: 0,
                        starting_since: None,
                    }),
                }
                answer(Answer::Service(Ok(replaced)));
            }
            CoreRequest::ReplaceService { .. } => unreachable!("a replace is a put by now"),
            CoreRequest::DeleteService { name, expected } => {
                let stored = s.services.iter().find(|x| x.spec.name == name);
                if let (Some(now), Some(expected)) = (stored.map(|x| x.spec.version()), &expected)
                    && let Some(error) = changed(expected, &now)
                {
                    answer(Answer::Service(Err(error)));
                    return;
                }
                let before = s.services.len();
                s.services.retain(|x| x.spec.name != name);
                answer(Answer::Service(Ok(s.services.len() != before)));
            }
            CoreRequest::Rollout {
                name,
                action,
                expected,
            } => {
                // As the core answers: 404 unknown, 409 when it does not apply.
                let result = match s.services.iter_mut().find(|x| x.spec.name == name) {
                    None => Err(CommandError::NotFound(format!("service {name}"))),
                    Some(x) => {
                        let applies = match action {
                            RolloutAction::Resume => {
                                x.rollout.as_ref().is_some_and(|r| r.halted.is_some())
                            }
                            // As `machine/rollout.rs` `restart_refusal`.
                            RolloutAction::Restart => x.rollout.is_none() && x.spec.instances > 0,
                            RolloutAction::Rollback => {
                                x.can_roll_back
                                    && expected.as_ref().is_none_or(|e| {
                                        x.restore.as_ref().is_some_and(|t| t.fingerprint == *e)
                                    })
                            }
                        };
                        if applies {
                            if let Some(r) = x.rollout.as_mut() {
                                r.halted = None;
                            }
                            if action == RolloutAction::Restart {
                                x.restart_generation += 1;
                                x.spec.restart_generation = x.restart_generation;
                            }
                            if action == RolloutAction::Rollback {
                                // No toggling: the previous spec is spent.
                                x.can_roll_back = false;
                                x.restore = None;
                            }
                            Ok(true)
                        } else {
                            Err(CommandError::Conflict(format!(
                                "{} does not apply to service {name}",
                                action.as_str()
                            )))
                        }
                    }
                };
                answer(Answer::Service(result));
            }
            // As the core answers (`machine/drains.rs`): 404 for an agent
            // not in the table, 409 while one runs or is done; the agent's
            // entry shows the drain.
            CoreRequest::StartDrain {
                agent_id,
                min_healthy,
                reason,
                by,
                then,
            } => {
                use mesos_appliance::scheduler::drains::{DrainRecord, DrainState, DrainStatus};
                let at = s.at;
                let result = match s.agents.iter_mut().find(|a| a.agent_id == agent_id) {
                    None => Err(CommandError::NotFound(format!("agent {agent_id}"))),
                    Some(a) if a.drain.as_ref().is_some_and(|d| d.state.holds()) => {
                        Err(CommandError::Conflict(format!(
                            "agent {agent_id} is already being drained"
                        )))
                    }
                    Some(a) => {
                        let record = DrainRecord {
                            agent_id,
                            min_healthy,
                            reason,
                            by,
                            started_at: at,
                            then,
                            state: DrainState::Running,
                            finished_at: None,
                            cancelled_by: None,
                            then_called: false,
                            then_error: None,
                            reactivated: false,
                            reactivate_error: None,
                            reactivate_tries: 0,
                            reactivate_retry: false,
                            ended: None,
                        };
                        a.drain = Some(DrainStatus::new(&record, Vec::new()));
                        Ok(record)
                    }
                };
                answer(Answer::Drain(result));
            }
            CoreRequest::CancelDrain { agent_id, by } => {
                use mesos_appliance::scheduler::drains::{DrainRecord, DrainState};
                let at = s.at;
                let result = match s.agents.iter_mut().find(|a| a.agent_id == agent_id) {
                    Some(a) if a.drain.as_ref().is_some_and(|d| d.state.holds()) => {
                        let d = a.drain.as_mut().expect("a drain");
                        d.state = DrainState::Cancelled;
                        d.finished_at = Some(at);
                        Ok(DrainRecord {
                            agent_id,
                            min_healthy: d.min_healthy,
                            reason: d.reason.clone(),
                            by: d.by.clone(),
                            started_at: d.started_at,
                            then: d.then,
                            state: DrainState::Cancelled,
                            finished_at: Some(at),
                            cancelled_by: Some(by),
                            then_called: false,
                            then_error: None,
                            reactivated: false,
                            reactivate_error: None,
                            reactivate_tries: 0,
                            reactivate_retry: false,
                            ended: None,
                        })
                    }
                    _ => Err(CommandError::NotFound(format!(
                        "a running or done drain of agent {agent_id}"
                    ))),
                };
                answer(Answer::Drain(result));
            }
            // This fake core keeps no jobs: the jobs' rules are the real
            // core's (`core/machine/jobs.rs`), tested with it.
            CoreRequest::PutJob(_)
            | CoreRequest::DeleteJob(_)
            | CoreRequest::SetJobEnabled { .. }
            | CoreRequest::StartRun(_)
            | CoreRequest::KillRun { .. } => answer(Answer::Refused(CommandError::Conflict(
                "the fake core keeps no jobs".into(),
            ))),
        }
        self.snapshots.send_replace(Arc::new(s));
    }
}

/// A web layer under test.
pub struct TestWeb {
    /// The state handed to the router.
    pub state: AppState,
    /// The scripted core.
    pub core: TestCore,
    /// Publishes snapshots.
    pub snapshots: watch::Sender<Arc<Snapshot>>,
}

/// The default test config: loopback (actions allowed without a token),
/// advertised as `http://127.0.0.1:8080`, 2 s handler timeout.
pub fn test_config() -> WebConfig {
    let mut config = WebConfig::new("127.0.0.1:8080".parse().unwrap(), "http://127.0.0.1:8080");
    config.handler_timeout = Duration::from_secs(2);
    config
}

/// A token-mode config (non-loopback listen address, admin token set).
pub fn token_config() -> WebConfig {
    let mut config = WebConfig::new(
        "10.0.0.5:8080".parse().unwrap(),
        "http://sched-a.cluster.test:8080",
    );
    config.admin_tokens = vec![mesos_appliance::util::tokens::AdminToken::new(
        "admin", TOKEN,
    )];
    config.handler_timeout = Duration::from_secs(2);
    config
}

impl TestWeb {
    /// A web layer with `config` showing `snapshot`, its core succeeding.
    /// Must run inside a tokio runtime (it spawns the core).
    pub fn new(config: WebConfig, snapshot: Snapshot) -> TestWeb {
        let coordinator = Arc::new(MemoryCoordinator::new(snapshot.replica.clone()));
        let (snapshots, rx) = watch::channel(Arc::new(snapshot));
        let (commands, command_rx) = mpsc::channel(16);
        let core = TestCore {
            mode: Arc::new(Mutex::new(Mode::Succeed)),
            log: Arc::new(Mutex::new(Vec::new())),
            snapshots: snapshots.clone(),
        };
        core.clone().run(command_rx);
        let mut registry = mesos_appliance::scheduler::metrics::registry();
        let subscribed = Gauge::<i64>::default();
        subscribed.set(1);
        registry.register(
            "framework_subscribed",
            "1 while this replica is subscribed",
            subscribed,
        );
        let state = AppState::new(
            config,
            SchedulerHandle::new(commands, rx),
            coordinator,
            Arc::new(registry),
        );
        TestWeb {
            state,
            core,
            snapshots,
        }
    }

    /// A leader with 120 tasks on the default config.
    pub fn leader() -> TestWeb {
        TestWeb::new(test_config(), leader_snapshot("http://127.0.0.1:8080", 120))
    }

    /// The router.
    pub fn router(&self) -> Router {
        router(self.state.clone())
    }

    /// Publishes a new snapshot.
    pub fn publish(&self, s: Snapshot) {
        self.snapshots.send_replace(Arc::new(s));
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Snapshot {
        (**self.snapshots.borrow()).clone()
    }

    /// Sends one request through a fresh router.
    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        send(self.router(), request).await
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl TestResponse {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The `field` of each of a problem's `errors`, in order (panics with
    /// the body when there is no `errors` list).
    pub fn error_fields(&self) -> Vec<String> {
        let v = self.json();
        let errors = v["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("no errors: {}", self.text()));
        errors
            .iter()
            .map(|e| e["field"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `name=value` of the `Set-Cookie` for `name`.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.split(';').next())
            .find(|kv| kv.starts_with(&format!("{name}=")))
            .map(str::to_string)
    }

    /// The value of the hidden `csrf` field in an HTML form.
    pub fn csrf_field(&self) -> Option<String> {
        let text = self.text();
        let marker = r#"name="csrf" value=""#;
        let start = text.find(marker)? + marker.len();
        let end = text[start..].find('"')?;
        Some(text[start..start + end].to_string())
    }
}

/// Sends `request` to `router`.
pub async fn send(router: Router, request: Request<Body>) -> TestResponse {
    let response = router.oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 16 << 20)
        .await
        .expect("body")
        .to_vec();
    TestResponse {
        status,
        headers,
        body,
    }
}

/// `GET path`.
pub fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

/// A request builder for `method path`.
pub fn request(method: Method, path: &str) -> axum::http::request::Builder {
    Request::builder().method(method).uri(path)
}

/// `method path` with a JSON body.
pub fn json_request(method: Method, path: &str, body: &serde_json::Value) -> Request<Body> {
    request(method, path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A browser form post from `origin` with `cookies` (`a=b; c=d`).
pub fn form_post(
    path: &str,
    origin: Option<&str>,
    cookies: &str,
    fields: &[(&str, &str)],
) -> Request<Body> {
    let mut b = request(Method::POST, path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::HOST, "127.0.0.1:8080");
    if let Some(origin) = origin {
        b = b.header(header::ORIGIN, origin);
    }
    if !cookies.is_empty() {
        b = b.header(header::COOKIE, cookies);
    }
    b.body(Body::from(serde_urlencoded::to_string(fields).unwrap()))
        .unwrap()
}

/// The shell command of a sample service (for assertions).
pub fn command_text(spec: &ServiceSpec) -> String {
    match &spec.command {
        CommandSpec::Shell(s) => s.clone(),
        CommandSpec::Argv(a) => a.join(" "),
    }
}

/// The fake core's precondition check, as the core's
/// `replace_service`/`delete_service`: `None` when `expected` admits the
/// stored version `now`, else the 412 error.
fn changed(expected: &mesos_appliance::scheduler::Expected, now: &str) -> Option<CommandError> {
    (!expected.admits(now)).then(|| {
        CommandError::PreconditionFailed(format!("service changed ({expected}, now {now})"))
    })
}
