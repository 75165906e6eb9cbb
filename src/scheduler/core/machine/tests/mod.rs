//! The machine's rules, tested without ZooKeeper, Mesos or Java: a
//! [`Harness`] plays the runner — it answers store operations from an
//! in-memory store, Mesos calls with 202, and advances paused tokio time,
//! ticking the machine when it asked to be woken. Tests hold answers back
//! where the order matters (a write in flight, a lost leadership).

mod agents;
mod backoff;
mod commands;
mod conditional;
mod determinism;
mod drain_ends;
mod drains;
mod evacuation;
mod housekeeping;
mod job_properties;
mod jobs;
mod lag;
mod launch_reconcile;
mod leaver_properties;
mod leavers;
mod lifecycle;
mod maintenance;
mod offers;
mod partition;
mod pass_bound;
mod pass_cost;
mod pass_equivalence;
mod properties;
mod reconcile_cost;
mod removed;
mod revive;
mod rollout;
mod rollout_end;
mod sliced_load;
mod snapshot;
mod snapshot_cost;
mod stats;
mod tally;
mod tasks;
mod why;
mod workload;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::{Machine, TermInfo};
use crate::coordination::{CoordinationError, Expect, RecordList, ReplicaInfo, Versioned, Written};
use crate::mesos::operator::Frameworks;
use crate::mesos::resources::Resources;
use crate::mesos::v1::{self, TaskState, task_status};
use crate::scheduler::config::CoreConfig;
use crate::scheduler::core::TermOutcome;
use crate::scheduler::core::io::{
    Ack, Answer, Effect, Input, MesosCall, OperatorAnswer, OperatorOp, ReplyId, Request, RequestId,
    StoreOp, StoreResult, SubscribedInfo,
};
use crate::scheduler::records::ServiceRecord;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::reconcile::ReconcilerConfig;
use crate::scheduler::snapshot::Snapshot;
use crate::scheduler::spec::service::ServiceSpec;

/// The framework ID the tests register with.
const FRAMEWORK: &str = "fw-1";

/// Short timers, the command executor.
fn config() -> CoreConfig {
    CoreConfig {
        framework_name: "unit".into(),
        user: "root".into(),
        offer_ttl: Duration::from_secs(10),
        decline_refuse_seconds: 30.0,
        reconcile: ReconcilerConfig {
            interval: Duration::from_secs(600),
            initial_delay: Duration::from_secs(600),
            cooldown: Duration::from_secs(1),
            explicit_max_backoff: Duration::from_secs(8),
            explicit_abort_timeout: Duration::from_secs(30),
            implicit_window: Duration::from_secs(2),
            explicit_slice: crate::scheduler::rules::reconcile::EXPLICIT_SLICE,
        },
        framework_id_refresh_interval: Duration::from_secs(30),
        kill_retry_min: Duration::from_secs(2),
        kill_retry_max: Duration::from_secs(8),
        snapshot_interval: Duration::from_millis(100),
        // Every settle runs its pass (`pacing` tests the interval).
        schedule_interval: Duration::ZERO,
        executor_url: None,
        ..CoreConfig::default()
    }
}

/// A service of `instances` tiny tasks.
/// `spec`, validated as the web layer would before a `PutService`.
fn valid(spec: ServiceSpec) -> crate::scheduler::spec::ValidServiceSpec {
    crate::scheduler::spec::ValidServiceSpec::new(spec).expect("a valid test spec")
}

fn service(name: &str, instances: u32) -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": name, "command": "sleep 1000", "cpus": 0.1, "mem": 16,
        "instances": instances, "restart_backoff": "2s", "restart_backoff_max": "8s"
    }))
    .expect("a service spec")
}

/// A stored record of a running task of `service`.
fn running_record(service: &str, instance: u32, spec: &ServiceSpec) -> TaskRecord {
    TaskRecord {
        instance,
        fingerprint: spec.fingerprint(),
        agent_id: format!("agent-{instance}").into(),
        hostname: format!("host-{instance}"),
        launched_at: 1.0,
        updated_at: 1.0,
        ..TaskRecord::sample(
            &format!("{service}.{instance}.stored"),
            service,
            TaskState::TaskRunning,
        )
    }
}

/// A status update.
fn status(task: &str, state: TaskState, uuid: Option<&str>) -> v1::TaskStatus {
    v1::TaskStatus {
        task_id: v1::TaskId { value: task.into() },
        state: state as i32,
        agent_id: Some(v1::AgentId {
            value: "agent-0".into(),
        }),
        uuid: uuid.map(|u| u.as_bytes().to_vec()),
        source: Some(task_status::Source::Executor as i32),
        ..Default::default()
    }
}

/// A reconciliation answer from the master (no uuid).
fn reconciled(task: &str, state: TaskState) -> v1::TaskStatus {
    v1::TaskStatus {
        reason: Some(task_status::Reason::Reconciliation as i32),
        source: Some(task_status::Source::Master as i32),
        ..status(task, state, None)
    }
}

/// A runtime for one case of a property: one thread, tokio's clock
/// paused (time passes only as a case advances it).
fn paused_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())
}

/// ZooKeeper as the tests see it: records with versions.
#[derive(Debug, Default)]
struct Store {
    framework_id: Option<String>,
    services: BTreeMap<String, (ServiceRecord, i32)>,
    tasks: BTreeMap<String, (TaskRecord, i32)>,
    /// Task writes performed, by task ID (to count needless ones).
    task_writes: BTreeMap<String, usize>,
    /// Audit entries appended, oldest first.
    audit: Vec<serde_json::Value>,
    /// The drains, by agent.
    drains: BTreeMap<String, (crate::scheduler::drains::DrainRecord, i32)>,
    jobs: BTreeMap<String, (crate::scheduler::jobs::JobRecord, i32)>,
    runs: BTreeMap<String, (crate::scheduler::jobs::RunRecord, i32)>,
}

/// The records of a store map as a listing, sorted by key, all decoded.
fn listed<T: Clone>(records: &BTreeMap<String, (T, i32)>) -> RecordList<T> {
    RecordList {
        records: records
            .iter()
            .map(|(k, (value, version))| {
                let value = value.clone();
                (
                    k.clone(),
                    Versioned {
                        value,
                        version: *version,
                    },
                )
            })
            .collect(),
        malformed: Vec::new(),
    }
}

impl Store {
    fn check(current: Option<i32>, expect: Expect, path: &str) -> Result<i32, CoordinationError> {
        let conflict = || CoordinationError::VersionConflict {
            path: path.to_string(),
        };
        match (expect, current) {
            (Expect::Absent | Expect::Any, None) => Ok(0),
            (Expect::Absent, Some(_)) => Err(conflict()),
            (Expect::Version(v), Some(c)) if v == c => Ok(c + 1),
            (Expect::Version(_), _) => Err(conflict()),
            (Expect::Any, Some(c)) => Ok(c + 1),
        }
    }

    /// Performs `op` as ZooKeeper would.
    fn apply(&mut self, op: StoreOp) -> StoreResult {
        match op {
            StoreOp::ReadFrameworkId => {
                StoreResult::FrameworkId(Ok(self.framework_id.as_deref().map(Into::into)))
            }
            StoreOp::StoreFrameworkId(id) => StoreResult::Written(match &self.framework_id {
                Some(stored) if *stored != id.as_str() => Err(CoordinationError::Mismatch {
                    stored: stored.clone(),
                    ours: id.to_string(),
                }),
                _ => {
                    self.framework_id = Some(id.to_string());
                    Ok(Written::Version(0))
                }
            }),
            StoreOp::DeleteFrameworkId => {
                let gone = self.framework_id.take().is_some();
                StoreResult::Written(Ok(if gone {
                    Written::Deleted
                } else {
                    Written::Absent
                }))
            }
            StoreOp::ReadDeployment => StoreResult::Deployment(Ok(None)),
            StoreOp::WriteDeployment(..) => StoreResult::Written(Ok(Written::Version(0))),
            StoreOp::ListServices => StoreResult::Services(Ok(listed(&self.services))),
            StoreOp::PutService(record, expect) => {
                let name = record.spec.name.clone();
                let current = self.services.get(&name).map(|(_, v)| *v);
                StoreResult::Written(Self::check(current, expect, &name).map(|v| {
                    self.services.insert(name.clone(), ((*record).clone(), v));
                    Written::Version(v)
                }))
            }
            StoreOp::DeleteService(name, _) => {
                let gone = self.services.remove(&name).is_some();
                StoreResult::Written(Ok(if gone {
                    Written::Deleted
                } else {
                    Written::Absent
                }))
            }
            StoreOp::ListTasks => StoreResult::Tasks(Ok(listed(&self.tasks))),
            StoreOp::ReadTask(id) => StoreResult::Task(Box::new(Ok(self
                .tasks
                .get(id.as_str())
                .map(|(r, v)| Versioned {
                    value: r.clone(),
                    version: *v,
                })))),
            StoreOp::PutTask(record, expect) => {
                let key = record.task_id.to_string();
                *self.task_writes.entry(key.clone()).or_default() += 1;
                let current = self.tasks.get(&key).map(|(_, v)| *v);
                StoreResult::Written(Self::check(current, expect, &key).map(|v| {
                    self.tasks.insert(key, ((*record).clone(), v));
                    Written::Version(v)
                }))
            }
            StoreOp::DeleteTask(id, _) => {
                let gone = self.tasks.remove(id.as_str()).is_some();
                StoreResult::Written(Ok(if gone {
                    Written::Deleted
                } else {
                    Written::Absent
                }))
            }
            StoreOp::DeleteAllTasks => {
                let n = self.tasks.len();
                self.tasks.clear();
                StoreResult::Count(Ok(n))
            }
            StoreOp::AppendAudit(entry) => {
                self.audit.push(*entry);
                StoreResult::Written(Ok(Written::Version(self.audit.len() as i32)))
            }
            StoreOp::ListDrains => StoreResult::Drains(Ok(listed(&self.drains))),
            StoreOp::PutDrain(record, expect) => {
                let key = record.agent_id.to_string();
                let current = self.drains.get(&key).map(|(_, v)| *v);
                StoreResult::Written(Self::check(current, expect, &key).map(|v| {
                    self.drains.insert(key, ((*record).clone(), v));
                    Written::Version(v)
                }))
            }
            StoreOp::ListJobs => StoreResult::Jobs(Ok(listed(&self.jobs))),
            StoreOp::ListRuns => StoreResult::Runs(Ok(listed(&self.runs))),
            StoreOp::PutJob(record, expect) => {
                let key = record.spec.name.clone();
                let current = self.jobs.get(&key).map(|(_, v)| *v);
                StoreResult::Written(Self::check(current, expect, &key).map(|v| {
                    self.jobs.insert(key, (*record, v));
                    Written::Version(v)
                }))
            }
            StoreOp::PutRun(record, expect) => {
                let key = record.key();
                let current = self.runs.get(&key).map(|(_, v)| *v);
                StoreResult::Written(Self::check(current, expect, &key).map(|v| {
                    self.runs.insert(key, ((*record).clone(), v));
                    Written::Version(v)
                }))
            }
            StoreOp::DeleteJob(key, _) => {
                StoreResult::Written(Ok(if self.jobs.remove(&key).is_some() {
                    Written::Deleted
                } else {
                    Written::Absent
                }))
            }
            StoreOp::DeleteRun(key, _) => {
                StoreResult::Written(Ok(if self.runs.remove(&key).is_some() {
                    Written::Deleted
                } else {
                    Written::Absent
                }))
            }
        }
    }
}

/// The runner's part, played by hand.
struct Harness {
    machine: Machine,
    store: Store,
    /// Store operations not answered yet, oldest first.
    stores: VecDeque<(RequestId, StoreOp)>,
    /// Calls not answered yet.
    calls: VecDeque<(RequestId, MesosCall)>,
    /// Every call made, in order (answered or not).
    call_log: Vec<MesosCall>,
    operators: VecDeque<(RequestId, OperatorOp)>,
    acks: Vec<Ack>,
    replies: Vec<(ReplyId, Answer)>,
    logs: Vec<String>,
    snapshot: Option<Snapshot>,
    started_clients: usize,
    ended: Option<TermOutcome>,
    wake_at: Option<Instant>,
    next_reply: u64,
    /// Every [`Effects`](crate::scheduler::core::io::Effects) the machine
    /// returned, Debug-formatted, in order (to compare two runs).
    trace: Vec<String>,
    /// Looks at each effect as it comes, before the harness takes it, with
    /// the store as the machine knew it when deciding (the property tests'
    /// checks that only hold at that moment); what it reports is kept in
    /// `violations`.
    watch: Option<fn(&Harness, &Effect) -> Option<String>>,
    violations: Vec<String>,
}

/// The seed of the task ID source in tests that do not choose one.
const TEST_SEED: u64 = 1;

impl Harness {
    /// A leader whose store holds `framework_id`, `services` and `tasks`.
    fn new(
        cfg: CoreConfig,
        framework_id: Option<&str>,
        services: &[ServiceSpec],
        tasks: &[TaskRecord],
    ) -> Harness {
        Self::seeded(cfg, framework_id, services, tasks, TEST_SEED)
    }

    /// [`Harness::new`] with the task ID source seeded by `seed`.
    fn seeded(
        cfg: CoreConfig,
        framework_id: Option<&str>,
        services: &[ServiceSpec],
        tasks: &[TaskRecord],
        seed: u64,
    ) -> Harness {
        let mut store = Store {
            framework_id: framework_id.map(str::to_string),
            ..Store::default()
        };
        for spec in services {
            store
                .services
                .insert(spec.name.clone(), (ServiceRecord::new(spec.clone()), 0));
        }
        for task in tasks {
            store
                .tasks
                .insert(task.task_id.to_string(), (task.clone(), 3));
        }
        let machine = Machine::new(
            cfg,
            TermInfo {
                term: 1,
                // Fixed, not `ReplicaInfo::new` (a random ID, the clock):
                // the determinism tests compare snapshots.
                replica: ReplicaInfo {
                    replica_id: "replica-1".into(),
                    advertised_url: "http://unit.test".into(),
                    deployment_id: "d1".into(),
                    version: "test".into(),
                    started_at: 1_000_000,
                },
                wary: false,
                initial_services: Vec::new(),
                ids: crate::scheduler::ids::IdSource::seeded(seed),
                first_run_id: 1,
            },
            Instant::now(),
            1_000_000.0,
        );
        Harness {
            machine,
            store,
            stores: VecDeque::new(),
            calls: VecDeque::new(),
            call_log: Vec::new(),
            operators: VecDeque::new(),
            acks: Vec::new(),
            replies: Vec::new(),
            logs: Vec::new(),
            snapshot: None,
            started_clients: 0,
            ended: None,
            wake_at: None,
            next_reply: 0,
            trace: Vec::new(),
            watch: None,
            violations: Vec::new(),
        }
    }

    /// A leader with a stored framework ID, started, its stores answered.
    fn leader(services: &[ServiceSpec], tasks: &[TaskRecord]) -> Harness {
        let mut h = Harness::new(config(), Some(FRAMEWORK), services, tasks);
        h.start();
        h.answer_stores();
        h
    }

    /// A subscribed leader of `spec` whose instance 0 runs, I/O settled.
    fn running(spec: &ServiceSpec) -> Harness {
        let mut h = Harness::leader(
            std::slice::from_ref(spec),
            &[running_record(&spec.name, 0, spec)],
        );
        h.subscribe();
        h.answer_all();
        h
    }

    fn take(&mut self, effects: crate::scheduler::core::io::Effects) {
        self.trace.push(format!("{effects:?}"));
        for effect in effects.items {
            if let Some(watch) = self.watch
                && let Some(violation) = watch(self, &effect)
            {
                self.violations.push(violation);
            }
            match effect {
                Effect::Store { id, op } => self.stores.push_back((id, op)),
                Effect::Call { id, call } => {
                    self.call_log.push(call.clone());
                    self.calls.push_back((id, call));
                }
                Effect::Acknowledge(acks) => self.acks.extend(acks),
                Effect::Operator { id, op } => self.operators.push_back((id, op)),
                Effect::StartClient(_) => self.started_clients += 1,
                Effect::StopClient => {}
                Effect::Publish(snapshot) => self.snapshot = Some(*snapshot),
                Effect::Log(entry) => self.logs.push(entry.message),
                Effect::Warn(message) => self.logs.push(message),
                Effect::Reply { id, answer } => self.replies.push((id, answer)),
                Effect::EndTerm(outcome) => self.ended = Some(outcome),
            }
        }
        if effects.wake_at.is_some() {
            self.wake_at = effects.wake_at;
        }
    }

    fn start(&mut self) {
        let effects = self.machine.start(Instant::now());
        self.take(effects);
    }

    /// Feeds one input, then settles (as the runner does after a batch).
    fn feed(&mut self, input: Input) {
        let now = Instant::now();
        let effects = self.machine.handle(input, now);
        self.take(effects);
        let effects = self.machine.settle(now);
        self.take(effects);
    }

    /// Answers every store operation (and those they lead to).
    fn answer_stores(&mut self) {
        while let Some((id, op)) = self.stores.pop_front() {
            let result = self.store.apply(op);
            self.feed(Input::Stored { id, result });
        }
    }

    /// Answers the oldest store operation from the store; returns it.
    fn answer_next_store(&mut self) -> StoreOp {
        let (id, op) = self.stores.pop_front().expect("a store operation");
        let result = self.store.apply(op.clone());
        self.feed(Input::Stored { id, result });
        op
    }

    /// Answers the oldest store operation with `error` instead.
    fn fail_next_store(&mut self, error: CoordinationError) -> StoreOp {
        let (id, op) = self.stores.pop_front().expect("a store operation");
        let result = match &op {
            StoreOp::PutTask(..)
            | StoreOp::PutService(..)
            | StoreOp::DeleteService(..)
            | StoreOp::DeleteTask(..) => StoreResult::Written(Err(error)),
            other => panic!("fail_next_store on {other:?}"),
        };
        self.feed(Input::Stored { id, result });
        op
    }

    /// Answers every call with 202.
    fn answer_calls(&mut self) {
        while let Some((id, _)) = self.calls.pop_front() {
            self.feed(Input::Called { id, result: Ok(()) });
        }
    }

    /// Answers operator calls: no frameworks on the master.
    fn answer_operators(&mut self) {
        while let Some((id, _)) = self.operators.pop_front() {
            self.feed(Input::Operator {
                id,
                answer: OperatorAnswer::Frameworks(Ok(Frameworks::default())),
            });
        }
    }

    /// All I/O answered until nothing is left.
    fn answer_all(&mut self) {
        while !(self.stores.is_empty() && self.calls.is_empty() && self.operators.is_empty()) {
            self.answer_stores();
            self.answer_calls();
            self.answer_operators();
        }
    }

    fn subscribe(&mut self) {
        self.subscribe_as(FRAMEWORK);
    }

    /// The master's SUBSCRIBED assigning framework ID `id`.
    fn subscribe_as(&mut self, id: &str) {
        self.feed(Input::Subscribed(SubscribedInfo {
            framework_id: id.into(),
            master: "http://master.test:5050".into(),
            master_version: Some("1.12.0".into()),
            heartbeat_interval: Duration::from_secs(15),
            heartbeat_timeout: Duration::from_secs(75),
        }));
    }

    /// One offer of `cpus` and 1 GB on agent `agent`.
    fn offer(&mut self, id: &str, agent: &str, cpus: f64) {
        let resources = Resources::parse(&format!("cpus:{cpus};mem:1024"))
            .expect("resources")
            .to_protos(None);
        self.feed(Input::Offers(vec![v1::Offer {
            id: v1::OfferId { value: id.into() },
            agent_id: v1::AgentId {
                value: agent.into(),
            },
            hostname: format!("{agent}.test"),
            resources,
            ..Default::default()
        }]));
    }

    /// An offer with room for thousands of tiny tasks, on agent `agent-<id>`.
    fn huge_offer(&mut self, id: &str) {
        self.offer_of(id, "cpus:10000;mem:10000000");
    }

    /// An offer of `resources` (Mesos text form) on agent `agent-<id>`.
    fn offer_of(&mut self, id: &str, resources: &str) {
        let resources = Resources::parse(resources)
            .expect("resources")
            .to_protos(None);
        self.feed(Input::Offers(vec![v1::Offer {
            id: v1::OfferId { value: id.into() },
            agent_id: v1::AgentId {
                value: format!("agent-{id}"),
            },
            hostname: format!("{id}.test"),
            resources,
            ..Default::default()
        }]));
    }

    fn update(&mut self, status: v1::TaskStatus) {
        self.feed(Input::Updates(vec![status]));
    }

    /// Sends command `request`; returns its reply ID.
    fn command(&mut self, request: Request) -> ReplyId {
        self.next_reply += 1;
        let id = ReplyId(self.next_reply);
        self.feed(Input::Command { id, request });
        id
    }

    /// The answer to command `id`, if given.
    /// IDs of the stored tasks marked for a kill, in task ID order.
    fn marked(&self) -> Vec<String> {
        self.store
            .tasks
            .values()
            .filter(|(r, _)| r.kill.is_some())
            .map(|(r, _)| r.task_id.to_string())
            .collect()
    }

    fn reply(&self, id: ReplyId) -> Option<&Answer> {
        self.replies.iter().find(|(r, _)| *r == id).map(|(_, a)| a)
    }

    /// Advances paused time by `by`, ticking the machine whenever it asked.
    async fn advance(&mut self, by: Duration) {
        let end = Instant::now() + by;
        loop {
            let next = self.wake_at.filter(|w| *w <= end);
            let Some(wake) = next else {
                tokio::time::advance(end.saturating_duration_since(Instant::now())).await;
                return;
            };
            tokio::time::advance(wake.saturating_duration_since(Instant::now())).await;
            self.wake_at = None;
            self.feed(Input::Tick);
            if self.wake_at.is_none_or(|w| w <= Instant::now()) && self.wake_at.is_some() {
                // Due again at once: let time move on to avoid spinning.
                tokio::time::advance(Duration::from_millis(1)).await;
            }
        }
    }

    /// Calls made so far, cleared.
    fn drain_call_log(&mut self) -> Vec<MesosCall> {
        std::mem::take(&mut self.call_log)
    }

    /// The task IDs launched by the ACCEPTs in `calls`.
    fn launched(calls: &[MesosCall]) -> Vec<String> {
        Self::launched_infos(calls)
            .map(|t| t.task_id.value.clone())
            .collect()
    }

    /// The tasks launched by the ACCEPTs in `calls`.
    fn launched_infos(calls: &[MesosCall]) -> impl Iterator<Item = &v1::TaskInfo> {
        calls
            .iter()
            .filter_map(|c| match c {
                MesosCall::Accept { operations, .. } => Some(operations),
                _ => None,
            })
            .flatten()
            .filter_map(|op| op.launch.as_ref())
            .flat_map(|l| l.task_infos.iter())
    }

    /// The latest snapshot (forcing one out if the throttle held it).
    async fn snapshot(&mut self) -> &Snapshot {
        self.advance(Duration::from_millis(200)).await;
        self.snapshot.as_ref().expect("a snapshot")
    }

    /// The stored state of task `id`.
    fn stored(&self, id: &str) -> Option<&TaskRecord> {
        self.store.tasks.get(id).map(|(r, _)| r)
    }

    /// The call types of `calls`, in order.
    fn kinds_of_calls(calls: &[MesosCall]) -> Vec<&'static str> {
        calls
            .iter()
            .map(|c| match c {
                MesosCall::Accept { .. } => "ACCEPT",
                MesosCall::Decline { .. } => "DECLINE",
                MesosCall::Kill { .. } => "KILL",
                MesosCall::Reconcile(_) => "RECONCILE",
                MesosCall::Suppress => "SUPPRESS",
                MesosCall::Revive => "REVIVE",
                MesosCall::Message { .. } => "MESSAGE",
                MesosCall::Teardown => "TEARDOWN",
                MesosCall::AnswerInverseOffers { accept: true, .. } => "ACCEPT_INVERSE_OFFERS",
                MesosCall::AnswerInverseOffers { accept: false, .. } => "DECLINE_INVERSE_OFFERS",
            })
            .collect()
    }
}
