//! Property tests of the core: random sequences of inputs against a leader
//! of one service, with invariants checked after every step (and some at
//! the moment of an effect). See `docs/architecture.md`, "Property tests
//! of the core", for what is covered and how a failure replays.
//!
//! The inputs ([`Op`]): offers, rescinds and lost agents; status updates in any state,
//! duplicated, stale or for tasks nobody launched; health-check results;
//! the master's reconciliation answers; store answers that succeed or fail
//! (late ones: every answer waits for its own step); Mesos call answers
//! that succeed or fail; time passing; subscription loss, resubscription
//! and master failover; leadership loss (lost, abdicated, failed over, its
//! writes in flight landing or not) and a new term; service changes (add,
//! scale, a new spec with or without a health check, delete) and the
//! rollouts they start, resumed or rolled back; explicit and implicit
//! reconciliation; and a settle step that answers everything and offers
//! enough for every instance.
//!
//! A new kind of input is one [`Op`] variant, one arm in [`op`] and one in
//! [`World::step`]; a new invariant is a check in [`World::check`] (after
//! every step), [`World::check_settled`] (once settled) or [`watch`] (at
//! the effect).
//!
//! `cargo test` runs [`CASES`] cases; `machine_invariants_long` (ignored)
//! runs [`LONG_CASES`]. A failure prints the RNG seed and the shrunk
//! sequence, and `PROPTEST_RNG_SEED=<seed> cargo test --lib
//! machine_invariants` replays it (the core is deterministic,
//! `determinism`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

use super::rollout::health;
use super::*;
use crate::mesos::client::{CallError, DisconnectReason, ErrorKind, StopReason};
use crate::mesos::is_terminal;
use crate::scheduler::records::is_live;
use crate::scheduler::rules::reconcile::ReconcileKind;
use crate::scheduler::rules::rollout::{self as rules, RolloutAction};

/// Cases per `cargo test` run.
const CASES: u32 = 96;
/// Cases of the ignored long run.
const LONG_CASES: u32 = 5_000;
/// Steps of a case, at most.
const STEPS: usize = 80;
/// The services a case may define; the first is stored at the start.
const SERVICES: [&str; 2] = ["web", "api"];
/// Instances of `web` at the start; `RUNNING` of them already run.
const INSTANCES: u32 = 3;
/// The kill reason of a rolling replacement (`machine/schedule.rs`): the
/// only kill that must keep the service at `instances - max_unavailable`
/// available. Scale-downs, deletions and duplicates are meant to reduce.
const REPLACED: &str = "replaced by a newer service spec";

/// One step of a case.
#[derive(Debug, Clone)]
enum Op {
    /// An offer of `cpus` on agent `agent`.
    Offer { agent: u8, cpus: u8 },
    /// RESCIND of offer `pick` (modulo the offers sent).
    Rescind { pick: u8 },
    /// FAILURE of agent `agent`: its offers are void.
    AgentLost { agent: u8 },
    /// An update of known task `pick` (modulo; one past the end is a task
    /// nobody launched), sent twice when `twice`.
    Update { pick: u8, state: u8, twice: bool },
    /// A health check's result for known task `pick`.
    Health { pick: u8, healthy: bool },
    /// The master's reconciliation answer for known task `pick` (no uuid,
    /// never acknowledged).
    Reconciled { pick: u8, state: u8 },
    /// The oldest store operation answered, or failed when `ok` is false
    /// (reads are always answered).
    Store { ok: bool },
    /// Every Mesos and operator call answered, or every Mesos call failed
    /// (503) when `ok` is false.
    Calls { ok: bool },
    /// Time passes, the machine ticks when it asked to.
    Wait { seconds: u8 },
    /// The event stream broke; the client subscribes again.
    Disconnect { leader_changed: bool },
    /// SUBSCRIBED on a new stream, to master `master` (another than the
    /// last one: a master failover).
    Subscribe { master: u8 },
    /// The term ends: `how` 0 leadership lost, 1 abdicated, 2 another
    /// scheduler took the framework over; the store writes in flight land
    /// in ZooKeeper when `land`, else they are lost.
    Depose { how: u8, land: bool },
    /// A new term begins (after a deposition), from the store.
    Regain,
    /// PUT of service `service` with `instances`, command `version`, a
    /// health check when `checked`.
    Put {
        service: u8,
        instances: u8,
        version: u8,
        checked: bool,
    },
    /// DELETE of service `service`.
    Delete { service: u8 },
    /// Resume, or roll back, service `service`'s rollout.
    Rollout { service: u8, rollback: bool },
    /// A reconciliation asked for by the operator.
    Reconcile { explicit: bool },
    /// Everything answered, enough offers, a few seconds: then the
    /// settled invariants are checked.
    Settle,
}

const STATES: [TaskState; 7] = [
    TaskState::TaskStaging,
    TaskState::TaskStarting,
    TaskState::TaskRunning,
    TaskState::TaskFailed,
    TaskState::TaskFinished,
    TaskState::TaskKilled,
    TaskState::TaskLost,
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3u8, 1..5u8).prop_map(|(agent, cpus)| Op::Offer { agent, cpus }),
        1 => any::<u8>().prop_map(|pick| Op::Rescind { pick }),
        1 => (0..3u8).prop_map(|agent| Op::AgentLost { agent }),
        4 => (any::<u8>(), 0..STATES.len() as u8, any::<bool>())
            .prop_map(|(pick, state, twice)| Op::Update { pick, state, twice }),
        2 => (any::<u8>(), prop::bool::weighted(0.8))
            .prop_map(|(pick, healthy)| Op::Health { pick, healthy }),
        1 => (any::<u8>(), 0..STATES.len() as u8)
            .prop_map(|(pick, state)| Op::Reconciled { pick, state }),
        6 => prop::bool::weighted(0.85).prop_map(|ok| Op::Store { ok }),
        3 => prop::bool::weighted(0.85).prop_map(|ok| Op::Calls { ok }),
        2 => (0..12u8).prop_map(|seconds| Op::Wait { seconds }),
        1 => any::<bool>().prop_map(|leader_changed| Op::Disconnect { leader_changed }),
        2 => (0..2u8).prop_map(|master| Op::Subscribe { master }),
        2 => (0..3u8, any::<bool>()).prop_map(|(how, land)| Op::Depose { how, land }),
        1 => Just(Op::Regain),
        2 => (0..SERVICES.len() as u8, 0..5u8, 0..3u8, any::<bool>()).prop_map(
            |(service, instances, version, checked)| Op::Put {
                service,
                instances,
                version,
                checked,
            }
        ),
        1 => (0..SERVICES.len() as u8).prop_map(|service| Op::Delete { service }),
        1 => (0..SERVICES.len() as u8, any::<bool>())
            .prop_map(|(service, rollback)| Op::Rollout { service, rollback }),
        1 => any::<bool>().prop_map(|explicit| Op::Reconcile { explicit }),
        2 => Just(Op::Settle),
    ]
}

/// A case: how many of `web`'s instances run at the start (from stored
/// records, available), then the steps.
fn case() -> impl Strategy<Value = (u8, Vec<Op>)> {
    (
        0..=INSTANCES as u8,
        proptest::collection::vec(op(), 1..STEPS),
    )
}

/// Service `name`'s spec: `instances` tiny tasks, command `version`, a
/// command health check when `checked`; rollouts wait 3 s for an
/// available task and halt after 20 s.
fn spec(name: &str, instances: u32, version: u8, checked: bool) -> ServiceSpec {
    let mut json = serde_json::json!({
        "name": name, "command": format!("sleep {}", 1000 + u32::from(version)),
        "cpus": 0.1, "mem": 16, "instances": instances,
        "restart_backoff": "2s", "restart_backoff_max": "8s",
        "upgrade": {"min_healthy": "3s", "deadline": "20s"}
    });
    if checked {
        json["health_check"] = serde_json::json!({"type": "command", "command": "true"});
    }
    serde_json::from_value(json).expect("a service spec")
}

/// How often a run reached what the invariants are about (a property that
/// never meets a rollout proves nothing about rollouts).
#[derive(Debug, Default, Clone, Copy)]
struct Reach {
    /// Rolling-replacement kills checked against the availability rule.
    replacements: usize,
    /// Settled states checked.
    settled: usize,
    /// Terms begun after a deposition.
    terms: usize,
    /// Records seen coming back from a terminal state (with a kill mark).
    revived: usize,
}

impl Reach {
    fn add(&mut self, other: Reach) {
        self.replacements += other.replacements;
        self.settled += other.settled;
        self.terms += other.terms;
        self.revived += other.revived;
    }
}

/// What [`watch`] needs from the case and what it counts.
#[derive(Default)]
struct Watched {
    /// Update uuid → (task, state) of the updates sent.
    sent: HashMap<Vec<u8>, (String, TaskState)>,
    /// Tasks stored at the start or launched since.
    known: HashSet<String>,
    reach: Reach,
}

thread_local! {
    /// The current case's [`Watched`] (one case at a time per thread).
    static WATCHED: RefCell<Watched> = RefCell::new(Watched::default());
}

/// The checks made at the moment of an effect, with the store as the
/// machine knew it when it decided (a task's record changes in memory only
/// once its write is stored, so the harness's store is the machine's view):
///
/// - no ACKNOWLEDGE before the update's record is stored ([`acked_early`]);
/// - no ACCEPT and no KILL once the term ended (`EndTerm` given, or
///   `Machine::end` called): a deposed leader acts no more;
/// - a rolling replacement kills an available task only while fewer than
///   `upgrade_max_unavailable` of the service's instances are unavailable
///   (so the service stays at its `min_healthy` availability; failures
///   after the decision may take it lower, and are no violation).
fn watch(h: &Harness, effect: &Effect) -> Option<String> {
    if let Effect::Acknowledge(acks) = effect {
        return WATCHED.with(|w| acks.iter().find_map(|ack| acked_early(h, &w.borrow(), ack)));
    }
    if let Some(outcome) = &h.ended {
        match effect {
            Effect::Call {
                call: call @ (MesosCall::Accept { .. } | MesosCall::Kill { .. }),
                ..
            } => {
                return Some(format!("{call:?} after the term ended ({outcome})"));
            }
            _ => return None,
        }
    }
    let Effect::Store {
        op: StoreOp::PutTask(record, _),
        ..
    } = effect
    else {
        return None;
    };
    let kill = record.kill.as_ref()?;
    let stored = h.stored(record.task_id.as_str())?;
    if kill.reason != REPLACED || stored.kill.is_some() {
        return None;
    }
    let (service, _) = h.store.services.get(&record.service)?;
    let now = h.machine.clock.unix(Instant::now());
    WATCHED.with(|w| w.borrow_mut().reach.replacements += 1);
    if !rules::is_available(&service.spec, stored, now) {
        return None; // Down already: replacing it costs nothing.
    }
    let records = h.store.tasks.values().map(|(r, _)| r);
    let unavailable = rules::progress(&service.spec, records, now).unavailable;
    let max = config().upgrade_max_unavailable.max(1);
    (unavailable.len() as u32 >= max).then(|| {
        let judge = rules::Judge::new(&service.spec);
        let records: Vec<String> = h
            .store
            .tasks
            .values()
            .filter(|(r, _)| r.service == record.service)
            .map(|(r, _)| {
                let spec = if judge.is_current(r) { "new" } else { "old" };
                let kill = r.kill.as_ref().map(|k| k.reason.as_str());
                format!(
                    "{} #{} {:?} {spec} kill {kill:?}",
                    r.task_id, r.instance, r.state
                )
            })
            .collect();
        format!(
            "rolling replacement killed available {} while instances {unavailable:?} of {} \
             were unavailable (max_unavailable {max}); records: {records:#?}",
            record.task_id, record.service
        )
    })
}

/// An ACKNOWLEDGE given before its update's record is stored: the store
/// must hold the update's state, or a terminal one the update came too late
/// for.
fn acked_early(h: &Harness, watched: &Watched, ack: &Ack) -> Option<String> {
    let Some((task, state)) = watched.sent.get(&ack.uuid) else {
        return Some(format!("ACKNOWLEDGE of an update never sent: {ack:?}"));
    };
    if !watched.known.contains(task) {
        return None; // Unknown to the machine: there is nothing to store.
    }
    match h.stored(task) {
        Some(r) if r.state == *state || is_terminal(r.state) => None,
        other => Some(format!(
            "ACKNOWLEDGE of {task} {state:?} while the store holds {:?}",
            other.map(|r| r.state)
        )),
    }
}

/// One case's world: the harness (the runner's part, the store) across
/// terms, and what the checks remember between steps.
struct World {
    h: Harness,
    term: u64,
    /// The term ended and no new one began: the ended machine still gets
    /// the inputs (it must not act on them).
    deposed: bool,
    /// A SUBSCRIBED came since the stream last broke.
    subscribed: bool,
    master: u8,
    /// Clients started before this term.
    clients_before: usize,
    /// Offer IDs sent.
    offers: Vec<String>,
    /// Task IDs stored at the start.
    stored_at_start: Vec<String>,
    next_id: u64,
    calls: usize,
    /// Tasks whose record was seen terminal.
    ended: HashSet<String>,
    reach: Reach,
}

impl World {
    /// A subscribed leader of `web` ([`INSTANCES`] instances) of which
    /// `running` run.
    fn new(running: u8) -> World {
        let web = spec(SERVICES[0], INSTANCES, 0, false);
        let records: Vec<TaskRecord> = (0..u32::from(running))
            .map(|i| running_record(SERVICES[0], i, &web))
            .collect();
        WATCHED.with(|w| *w.borrow_mut() = Watched::default());
        let mut h = Harness::leader(std::slice::from_ref(&web), &records);
        h.watch = Some(watch);
        h.subscribe();
        World {
            h,
            term: 1,
            deposed: false,
            subscribed: true,
            master: 0,
            clients_before: 0,
            offers: Vec::new(),
            stored_at_start: records.iter().map(|r| r.task_id.to_string()).collect(),
            next_id: 0,
            calls: 0,
            ended: HashSet::new(),
            reach: Reach::default(),
        }
    }

    /// Task `pick` (modulo) of those stored at the start and launched
    /// since, or one nobody launched.
    fn task(&self, pick: u8) -> String {
        let mut known = self.stored_at_start.clone();
        known.extend(Harness::launched(&self.h.call_log));
        known
            .get(usize::from(pick) % (known.len() + 1))
            .cloned()
            .unwrap_or_else(|| "web.9.unknown".to_string())
    }

    fn uuid(&mut self, task: &str, state: TaskState) -> String {
        self.next_id += 1;
        let uuid = format!("u{}", self.next_id);
        WATCHED.with(|w| {
            let mut w = w.borrow_mut();
            w.sent
                .insert(uuid.clone().into_bytes(), (task.to_string(), state));
            w.known.extend(self.stored_at_start.iter().cloned());
            w.known.extend(Harness::launched(&self.h.call_log));
        });
        uuid
    }

    async fn step(&mut self, op: &Op) {
        match *op {
            Op::Offer { agent, cpus } => self.offer(agent, f64::from(cpus)),
            Op::Rescind { pick } => {
                if !self.offers.is_empty() {
                    let id = self.offers[usize::from(pick) % self.offers.len()].clone();
                    self.h.feed(Input::Rescind(id));
                }
            }
            Op::AgentLost { agent } => {
                self.h
                    .feed(Input::AgentLost(format!("agent-{agent}").into()));
            }
            Op::Update { pick, state, twice } => {
                let task = self.task(pick);
                let state = STATES[usize::from(state)];
                let uuid = self.uuid(&task, state);
                for _ in 0..=usize::from(twice) {
                    self.h.update(status(&task, state, Some(&uuid)));
                }
            }
            Op::Health { pick, healthy } => {
                let task = self.task(pick);
                let uuid = self.uuid(&task, TaskState::TaskRunning);
                self.h.update(health(&task, healthy, &uuid));
            }
            Op::Reconciled { pick, state } => {
                let task = self.task(pick);
                self.h.update(reconciled(&task, STATES[usize::from(state)]));
            }
            Op::Store { ok } => match self.h.stores.front() {
                None => {}
                Some((_, StoreOp::PutTask(..) | StoreOp::PutService(..)))
                | Some((_, StoreOp::DeleteService(..) | StoreOp::DeleteTask(..)))
                    if !ok =>
                {
                    self.h
                        .fail_next_store(CoordinationError::Unavailable("connection loss".into()));
                }
                Some(_) => {
                    self.h.answer_next_store();
                }
            },
            Op::Calls { ok: true } => {
                self.h.answer_calls();
                self.h.answer_operators();
            }
            Op::Calls { ok: false } => {
                while let Some((id, _)) = self.h.calls.pop_front() {
                    let result = Err(CallError::Rejected {
                        status: 503,
                        body: "No leader elected".into(),
                    });
                    self.h.feed(Input::Called { id, result });
                }
            }
            Op::Wait { seconds } => self.h.advance(Duration::from_secs(seconds.into())).await,
            Op::Disconnect { leader_changed } => {
                if self.subscribed {
                    self.subscribed = false;
                    let reason = if leader_changed {
                        DisconnectReason::LeaderChanged { to: None }
                    } else {
                        DisconnectReason::StreamError("connection reset".into())
                    };
                    self.h.feed(Input::Disconnected(reason));
                }
            }
            Op::Subscribe { master } => self.subscribe(master),
            Op::Depose { how, land } => self.depose(how, land),
            Op::Regain => self.regain(),
            Op::Put {
                service,
                instances,
                version,
                checked,
            } => {
                let name = SERVICES[usize::from(service)];
                let spec = spec(name, instances.into(), version, checked);
                self.h.command(Request::PutService(Box::new(valid(spec))));
            }
            Op::Delete { service } => {
                let name = SERVICES[usize::from(service)];
                self.h.command(Request::DeleteService(name.into()));
            }
            Op::Rollout { service, rollback } => {
                self.h.command(Request::Rollout {
                    name: SERVICES[usize::from(service)].into(),
                    action: if rollback {
                        RolloutAction::Rollback
                    } else {
                        RolloutAction::Resume
                    },
                    expected: None,
                });
            }
            Op::Reconcile { explicit } => {
                let kind = if explicit {
                    ReconcileKind::Explicit
                } else {
                    ReconcileKind::Implicit
                };
                self.h.command(Request::Reconcile(kind));
            }
            Op::Settle => self.settle().await,
        }
        // The machine ended its term itself (abdicated, failed over, a
        // framework-ID mismatch): the runner ends it, its writes land.
        if self.h.ended.is_some() && !self.deposed {
            self.depose(0, true);
        }
    }

    fn offer(&mut self, agent: u8, cpus: f64) {
        self.next_id += 1;
        let id = format!("o-{}", self.next_id);
        self.h.offer(&id, &format!("agent-{agent}"), cpus);
        self.offers.push(id);
    }

    /// SUBSCRIBED, when the client runs and has no subscription; or to an
    /// ended term (an event already on its way when the term ended).
    fn subscribe(&mut self, master: u8) {
        if self.subscribed || self.h.started_clients == self.clients_before {
            return;
        }
        self.subscribed = true;
        self.master = master;
        self.h.feed(Input::Subscribed(SubscribedInfo {
            framework_id: FRAMEWORK.into(),
            master: format!("http://master-{master}.test:5050"),
            master_version: Some("1.12.0".into()),
            heartbeat_interval: Duration::from_secs(15),
            heartbeat_timeout: Duration::from_secs(75),
        }));
    }

    /// Ends the term as the runner does (`Machine::end`); the writes in
    /// flight land in the store or are lost, the calls are lost.
    fn depose(&mut self, how: u8, land: bool) {
        if self.deposed {
            return;
        }
        match how {
            0 => {}
            1 => {
                self.h.command(Request::Abdicate);
            }
            _ => self.h.feed(Input::ClientStopped(StopReason::Error(
                ErrorKind::FailedOver,
            ))),
        }
        let outcome = self
            .h
            .ended
            .get_or_insert(TermOutcome::LeadershipLost)
            .clone();
        let effects = self.h.machine.end(&outcome, Instant::now());
        self.h.take(effects);
        for (_, op) in std::mem::take(&mut self.h.stores) {
            if land {
                self.h.store.apply(op);
            }
        }
        self.h.calls.clear();
        self.h.operators.clear();
        self.deposed = true;
        self.subscribed = false;
    }

    /// A new term from the store (after a deposition), started.
    fn regain(&mut self) {
        if !self.deposed {
            return;
        }
        let now = Instant::now();
        let old = &self.h.machine;
        let term = TermInfo {
            term: self.term + 1,
            replica: old.term.replica.clone(),
            wary: matches!(self.h.ended, Some(TermOutcome::FailedOver)),
            initial_services: Vec::new(),
            ids: crate::scheduler::ids::IdSource::seeded(TEST_SEED + self.term),
            first_run_id: old.next_run_id(),
        };
        let unix = old.clock.unix(now);
        self.term += 1;
        self.h.machine = Machine::new(config(), term, now, unix);
        self.h.stores.clear();
        self.h.calls.clear();
        self.h.operators.clear();
        self.h.ended = None;
        self.h.wake_at = None;
        self.deposed = false;
        self.subscribed = false;
        self.clients_before = self.h.started_clients;
        self.reach.terms += 1;
        self.h.start();
    }

    /// A leader, subscribed, every request answered, offers enough for
    /// every instance, a few seconds: then what must hold once settled.
    async fn settle(&mut self) {
        self.regain();
        for _ in 0..4 {
            self.h.answer_all();
            self.subscribe(self.master);
            for agent in 0..3 {
                self.offer(agent, 4.0);
            }
            self.h.answer_all();
            self.h.advance(Duration::from_secs(1)).await;
        }
        self.h.answer_all();
    }

    /// The invariants over what happened since the last check.
    fn check(&mut self) -> Result<(), String> {
        if let Some(violation) = self.h.violations.first() {
            return Err(violation.clone());
        }
        let launched = Harness::launched(&self.h.call_log);
        // No ACCEPT for a task whose record is not stored.
        for task in Harness::launched(&self.h.call_log[self.calls..]) {
            if self.h.stored(&task).is_none() {
                return Err(format!("ACCEPT of {task} before its record is stored"));
            }
        }
        self.calls = self.h.call_log.len();
        // Every launched task ID is unique, across terms.
        let mut ids = HashSet::new();
        if let Some(twice) = launched.iter().find(|id| !ids.insert(*id)) {
            return Err(format!("task ID {twice} launched twice"));
        }
        // A terminal task never comes back to life in the records (an
        // update saying it lives is recorded with a kill mark).
        for (id, (record, _)) in &self.h.store.tasks {
            if record.is_terminal() {
                self.ended.insert(id.clone());
            } else if self.ended.contains(id) {
                if is_live(record) {
                    return Err(format!("{id} is live again after its end: {record:?}"));
                }
                self.reach.revived += 1;
            }
        }
        Ok(())
    }

    /// Once settled (a subscribed leader, no store or call answer pending,
    /// offers enough): at most one live task per instance, no more than
    /// the desired instances, none of a deleted service.
    fn check_settled(&mut self) -> Result<(), String> {
        let h = &self.h;
        let quiet = h.stores.is_empty() && h.calls.is_empty() && h.operators.is_empty();
        if self.deposed || !self.subscribed || !quiet {
            return Ok(());
        }
        self.reach.settled += 1;
        let mut live: HashMap<&str, Vec<u32>> = HashMap::new();
        for (record, _) in h.store.tasks.values().filter(|(r, _)| is_live(r)) {
            live.entry(record.service.as_str())
                .or_default()
                .push(record.instance);
        }
        for (service, mut instances) in live {
            let desired = h
                .store
                .services
                .get(service)
                .map_or(0, |(r, _)| r.spec.instances);
            instances.sort_unstable();
            let distinct = instances.windows(2).all(|w| w[0] != w[1]);
            if !distinct || instances.len() as u32 > desired {
                return Err(format!(
                    "settled with live instances {instances:?} of {service} (desired {desired})"
                ));
            }
        }
        Ok(())
    }
}

/// Runs one case; the error says which step broke which invariant.
fn run_case(running: u8, ops: &[Op]) -> Result<Reach, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut world = World::new(running);
        world.check()?;
        for (i, op) in ops.iter().enumerate() {
            world.step(op).await;
            let settled = match op {
                Op::Settle => world.check_settled(),
                _ => Ok(()),
            };
            settled
                .and_then(|()| world.check())
                .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
        }
        let replacements = WATCHED.with(|w| w.borrow().reach.replacements);
        Ok(Reach {
            replacements,
            ..world.reach
        })
    })
}

/// Runs `cases` cases from `PROPTEST_RNG_SEED` (or a random seed), and
/// `PROPTEST_CASES` (or `cases`); panics with the seed, the shrunk case
/// and the replay command on a failure. Returns what the run reached.
fn run(test: &str, cases: u32) -> Reach {
    let env = |name: &str| std::env::var(name).ok();
    let seed: u64 = env("PROPTEST_RNG_SEED")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    let cases: u32 = env("PROPTEST_CASES")
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let mut runner = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    });
    let reach = RefCell::new(Reach::default());
    let result = runner.run(&case(), |(running, ops)| {
        let r = run_case(running, &ops).map_err(TestCaseError::fail)?;
        reach.borrow_mut().add(r);
        Ok(())
    });
    if let Err(e) = result {
        let ignored = if test.ends_with("_long") {
            " -- --ignored"
        } else {
            ""
        };
        panic!(
            "{e}\nseed {seed}; replay with: \
             PROPTEST_RNG_SEED={seed} PROPTEST_CASES={cases} cargo test --lib {test}{ignored}"
        );
    }
    reach.into_inner()
}

#[test]
fn machine_invariants() {
    let reach = run("machine_invariants", CASES);
    // Shrinking is off the path here: these count the passing run only.
    eprintln!("machine_invariants reached: {reach:?}");
}

/// The long run: `cargo test --lib machine_invariants_long -- --ignored`.
#[test]
#[ignore = "thousands of cases; run by hand or in a nightly job"]
fn machine_invariants_long() {
    let reach = run("machine_invariants_long", LONG_CASES);
    eprintln!("machine_invariants_long reached: {reach:?}");
}

/// The generator reaches what the invariants are about: rolling
/// replacements, settled states, new terms and tasks reported alive after
/// their end (a fixed seed, so this does not flake).
#[test]
fn the_generator_reaches_every_invariant() {
    let mut runner = TestRunner::new(Config {
        cases: 48,
        rng_seed: RngSeed::Fixed(27),
        failure_persistence: None,
        ..Config::default()
    });
    let mut total = Reach::default();
    for _ in 0..48 {
        let (running, ops) = case().new_tree(&mut runner).expect("a case").current();
        total.add(run_case(running, &ops).expect("the invariants hold"));
    }
    eprintln!("reached: {total:?}");
    assert!(total.replacements > 0, "{total:?}");
    assert!(total.settled > 0, "{total:?}");
    assert!(total.terms > 0, "{total:?}");
    assert!(total.revived > 0, "{total:?}");
}
