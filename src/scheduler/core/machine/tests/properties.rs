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
//! rollouts they start, resumed or rolled back, rolling restarts; explicit and implicit
//! reconciliation; partitions (TASK_UNREACHABLE, returns, TASK_GONE*,
//! TASK_DROPPED, TASK_UNKNOWN, random unreachable policies); drains
//! (TASK_KILLED for the drain, GET_AGENTS answers); offers with a
//! maintenance window, inverse offers and their rescinds; the appliance's
//! own drains started and cancelled (nothing launched on a drained agent,
//! no drain kill below its floor); and a settle
//! step that answers everything and offers enough for every instance.
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

use super::agents::{drained_kill, listed};
use super::maintenance::{inverse_offer, offer_with, window_in};
use super::partition::{returned, unreachable};
use super::rollout::health;
use super::*;
use crate::mesos::client::{CallError, DisconnectReason, ErrorKind, StopReason};
use crate::mesos::is_terminal;
use crate::scheduler::records::is_live;
use crate::scheduler::rules::partition::occupies_host;
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
    /// The executor's TASK_STARTING for stored TASK_STAGING task `pick`
    /// (modulo those with no kill mark; nothing when there is none): the
    /// update kept in memory (`tasks::ahead_of_store`).
    Start { pick: u8 },
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
    /// health check when `checked`, unreachable policy `policy`
    /// ([`spec`]).
    Put {
        service: u8,
        instances: u8,
        version: u8,
        checked: bool,
        policy: u8,
    },
    /// DELETE of service `service`.
    Delete { service: u8 },
    /// Resume, or roll back, service `service`'s rollout.
    Rollout { service: u8, rollback: bool },
    /// A rolling restart of service `service` (every task replaced, under
    /// the same rollout rules).
    Restart { service: u8 },
    /// A reconciliation asked for by the operator.
    Reconcile { explicit: bool },
    /// Everything answered, enough offers, a few seconds: then the
    /// settled invariants are checked.
    Settle,
    /// The master's TASK_UNREACHABLE for known task `pick` (its agent
    /// partitioned away; `Master::markUnreachable`).
    Unreachable { pick: u8 },
    /// Known task `pick` is back: TASK_RUNNING REASON_AGENT_REREGISTERED
    /// (`Master::_reregisterSlave`).
    Returned { pick: u8 },
    /// TASK_GONE, TASK_GONE_BY_OPERATOR, TASK_DROPPED or TASK_UNKNOWN
    /// (`kind` modulo) for known task `pick`, as an update or, when
    /// `reconciled`, as an explicit reconciliation's answer.
    Gone {
        pick: u8,
        kind: u8,
        reconciled: bool,
    },
    /// The executor's TASK_KILLED REASON_AGENT_DRAINING for known task
    /// `pick` (the agent's drain ended it).
    DrainKilled { pick: u8 },
    /// The GET_AGENTS calls in flight answered: agent `i` is active (0),
    /// draining (1), drained (2) or deactivated (3) per `states[i]`.
    Agents { states: [u8; 3] },
    /// An offer of agent `agent` whose maintenance window starts in
    /// `minutes` minutes (within the 1 h lead time below 60).
    WindowOffer { agent: u8, minutes: u8 },
    /// INVERSE_OFFERS for agent `agent` (none when `agent` is 3: an
    /// inverse offer for no agent) with a window in `minutes` minutes.
    InverseOffer { agent: u8, minutes: u8 },
    /// RESCIND_INVERSE_OFFER of inverse offer `pick` (modulo; one past the
    /// end is an unknown inverse offer).
    RescindInverse { pick: u8 },
    /// The operator starts the appliance's drain of agent `agent` with
    /// `min_healthy` = `floor` tasks (`drains.rs`).
    DrainStart { agent: u8, floor: u8 },
    /// The operator cancels agent `agent`'s drain.
    DrainCancel { agent: u8 },
}

/// The states of [`Op::Gone`].
const GONE: [TaskState; 4] = [
    TaskState::TaskGone,
    TaskState::TaskGoneByOperator,
    TaskState::TaskDropped,
    TaskState::TaskUnknown,
];

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
        2 => any::<u8>().prop_map(|pick| Op::Start { pick }),
        1 => (any::<u8>(), 0..STATES.len() as u8)
            .prop_map(|(pick, state)| Op::Reconciled { pick, state }),
        6 => prop::bool::weighted(0.85).prop_map(|ok| Op::Store { ok }),
        3 => prop::bool::weighted(0.85).prop_map(|ok| Op::Calls { ok }),
        2 => (0..12u8).prop_map(|seconds| Op::Wait { seconds }),
        1 => any::<bool>().prop_map(|leader_changed| Op::Disconnect { leader_changed }),
        2 => (0..2u8).prop_map(|master| Op::Subscribe { master }),
        2 => (0..3u8, any::<bool>()).prop_map(|(how, land)| Op::Depose { how, land }),
        1 => Just(Op::Regain),
        2 => (0..SERVICES.len() as u8, 0..5u8, 0..3u8, any::<bool>(), 0..3u8).prop_map(
            |(service, instances, version, checked, policy)| Op::Put {
                service,
                instances,
                version,
                checked,
                policy,
            }
        ),
        1 => (0..SERVICES.len() as u8).prop_map(|service| Op::Delete { service }),
        1 => (0..SERVICES.len() as u8, any::<bool>())
            .prop_map(|(service, rollback)| Op::Rollout { service, rollback }),
        1 => (0..SERVICES.len() as u8).prop_map(|service| Op::Restart { service }),
        1 => any::<bool>().prop_map(|explicit| Op::Reconcile { explicit }),
        2 => Just(Op::Settle),
        2 => any::<u8>().prop_map(|pick| Op::Unreachable { pick }),
        1 => any::<u8>().prop_map(|pick| Op::Returned { pick }),
        1 => (any::<u8>(), 0..GONE.len() as u8, any::<bool>())
            .prop_map(|(pick, kind, reconciled)| Op::Gone { pick, kind, reconciled }),
        1 => any::<u8>().prop_map(|pick| Op::DrainKilled { pick }),
        1 => prop::array::uniform3(prop::strategy::Union::new_weighted(vec![
            (3, Just(0u8)), (1, Just(1u8)), (1, Just(2u8)), (1, Just(3u8)),
        ])).prop_map(|states| Op::Agents { states }),
        1 => (0..3u8, 0..120u8).prop_map(|(agent, minutes)| Op::WindowOffer { agent, minutes }),
        1 => (0..4u8, 0..120u8).prop_map(|(agent, minutes)| Op::InverseOffer { agent, minutes }),
        1 => any::<u8>().prop_map(|pick| Op::RescindInverse { pick }),
        1 => (0..3u8, 0..4u8).prop_map(|(agent, floor)| Op::DrainStart { agent, floor }),
        1 => (0..3u8).prop_map(|agent| Op::DrainCancel { agent }),
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
/// available task and halt after 20 s. Policy 0 is the default
/// unreachable policy (replaced at once); 1 and 2 wait 5 s, forget after
/// 10 s (so [`Op::Wait`]s cross both) and kill the old or the new copy on
/// return.
fn spec(name: &str, instances: u32, version: u8, checked: bool, policy: u8) -> ServiceSpec {
    let mut json = serde_json::json!({
        "name": name, "command": format!("sleep {}", 1000 + u32::from(version)),
        "cpus": 0.1, "mem": 16, "instances": instances,
        "restart_backoff": "2s", "restart_backoff_max": "8s",
        "upgrade": {"min_healthy": "3s", "deadline": "20s"}
    });
    if policy > 0 {
        let kill_on_return = if policy == 1 { "old" } else { "new" };
        json["unreachable"] = serde_json::json!({
            "inactive_after": "5s", "expunge_after": "10s", "kill_on_return": kill_on_return
        });
    }
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
    /// Records seen unreachable (per check).
    unreachable: usize,
    /// Records seen returned from a partition (per check).
    returned: usize,
    /// Checks made while the agent table held an agent.
    held: usize,
    /// Inverse offers answered.
    inverse: usize,
    /// Kills of a drain checked against its floor.
    drain_kills: usize,
    /// Of the replacement kills, those of a service restarted at least
    /// once.
    restart_kills: usize,
    /// Tasks seen in TASK_STARTING in the table over a stored TASK_STAGING
    /// (per check).
    starts_kept: usize,
    /// Tasks seen in TASK_RUNNING in the table, acknowledged, while the
    /// write of a stored TASK_STAGING or TASK_STARTING is out (per check).
    runnings_ahead: usize,
}

impl Reach {
    fn add(&mut self, other: Reach) {
        self.replacements += other.replacements;
        self.settled += other.settled;
        self.terms += other.terms;
        self.revived += other.revived;
        self.unreachable += other.unreachable;
        self.returned += other.returned;
        self.held += other.held;
        self.inverse += other.inverse;
        self.restart_kills += other.restart_kills;
        self.drain_kills += other.drain_kills;
        self.starts_kept += other.starts_kept;
        self.runnings_ahead += other.runnings_ahead;
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
/// once its write is stored, so the harness's store is the machine's view;
/// the exceptions, a launch's steps acknowledged ahead of the store, are
/// checked by `World::check_table`):
///
/// - no ACKNOWLEDGE before the update's record is stored ([`acked_early`]);
/// - no ACCEPT and no KILL once the term ended (`EndTerm` given, or
///   `Machine::end` called): a deposed leader acts no more;
/// - a rolling replacement kills an available task only while fewer than
///   `upgrade_max_unavailable` of the service's instances are unavailable
///   (so the service stays at its `min_healthy` availability; failures
///   after the decision may take it lower, and are no violation);
/// - no ACCEPT launches a task on an agent a stored drain holds, and a
///   drain's kill keeps the service's available tasks at its floor
///   ([`drain_watch`]).
fn watch(h: &Harness, effect: &Effect) -> Option<String> {
    if h.ended.is_none()
        && let Some(violation) = drain_watch(h, effect)
    {
        return Some(violation);
    }
    if let Effect::Acknowledge(acks) = effect {
        return WATCHED.with(|w| {
            acks.iter()
                .find_map(|ack| acked_early(h, &mut w.borrow_mut(), ack))
        });
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
    // A task leaving its agent is moved by the evacuation, copy first;
    // the rollout never kills it (`rules::review`).
    if let Some(spec) = h.machine.services.spec(&record.service)
        && (h.machine.drains.leave(spec, stored).is_some()
            || h.machine.maintenance.leave(stored).is_some())
    {
        return Some(format!(
            "the rollout killed {} on agent {}, which it is leaving",
            record.task_id, record.agent_id
        ));
    }
    let (service, _) = h.store.services.get(&record.service)?;
    let now = h.machine.clock.unix(Instant::now());
    WATCHED.with(|w| w.borrow_mut().reach.replacements += 1);
    if service.spec.restart_generation > 0 {
        WATCHED.with(|w| w.borrow_mut().reach.restart_kills += 1);
    }
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

/// The drains' invariants at the effect, with the store as the machine
/// knew it: an ACCEPT launches nothing on an agent a drain holds; a kill
/// marked as a drain's move leaves the service at least `min_healthy`
/// available tasks, counting the kills of the same decision still on
/// their way to the store; a leaving task killed as no longer wanted is
/// of an instance its service does not want, above the floor capped at
/// the instances (`leaver_properties::unwanted_kill`).
fn drain_watch(h: &Harness, effect: &Effect) -> Option<String> {
    let holds = |agent: &str| {
        h.store
            .drains
            .get(agent)
            .is_some_and(|(d, _)| d.state.holds())
    };
    match effect {
        Effect::Call {
            call: call @ MesosCall::Accept { .. },
            ..
        } => {
            let calls = std::slice::from_ref(call);
            Harness::launched_infos(calls)
                .find(|t| holds(&t.agent_id.value))
                .map(|t| {
                    format!(
                        "ACCEPT of {} on {}, which a drain holds",
                        t.task_id.value, t.agent_id.value
                    )
                })
        }
        Effect::Store {
            op: StoreOp::PutTask(record, _),
            ..
        } => {
            if let Some(violation) = super::leaver_properties::unwanted_kill(h, record) {
                return Some(violation);
            }
            let kill = record.kill.as_ref()?;
            let stored = h.stored(record.task_id.as_str())?;
            if stored.kill.is_some() || !kill.reason.ends_with("by its drain") {
                return None;
            }
            let (drain, _) = h.store.drains.get(record.agent_id.as_str())?;
            let (service, _) = h.store.services.get(&record.service)?;
            let spec = &service.spec;
            WATCHED.with(|w| w.borrow_mut().reach.drain_kills += 1);
            let (after, floor) =
                super::leaver_properties::after_kill(h, record, stored, spec, drain)?;
            (after < floor).then(|| {
                format!(
                    "drain killed {} leaving {after} available of {} (floor {floor})",
                    record.task_id, record.service
                )
            })
        }
        _ => None,
    }
}

/// An ACKNOWLEDGE given before its update's record is stored: the store
/// must hold the update's state, or a terminal one the update came too late
/// for. The exceptions are a launch's steps (`tasks::ahead_of_store`):
/// TASK_STARTING while the store holds TASK_STAGING with no kill mark (kept
/// in memory only), and TASK_RUNNING while the store holds TASK_STAGING or
/// TASK_STARTING with no kill mark, its write in flight as it is
/// acknowledged.
fn acked_early(h: &Harness, watched: &mut Watched, ack: &Ack) -> Option<String> {
    let Some((task, state)) = watched.sent.get(&ack.uuid) else {
        return Some(format!("ACKNOWLEDGE of an update never sent: {ack:?}"));
    };
    if !watched.known.contains(task) {
        return None; // Unknown to the machine: there is nothing to store.
    }
    let start_in_memory = |r: &TaskRecord| {
        *state == TaskState::TaskStarting && r.state == TaskState::TaskStaging && r.kill.is_none()
    };
    let writing = h.machine.tasks.get(task).is_some_and(|e| e.writing);
    let running_written = |r: &TaskRecord| {
        *state == TaskState::TaskRunning && launching(r) && r.kill.is_none() && writing
    };
    match h.stored(task) {
        Some(r) if r.state == *state || is_terminal(r.state) || start_in_memory(r) => None,
        Some(r) if running_written(r) => {
            watched.reach.runnings_ahead += 1;
            None
        }
        other => Some(format!(
            "ACKNOWLEDGE of {task} {state:?} while the store holds {:?}",
            other.map(|r| r.state)
        )),
    }
}

/// A record of a task still launching (TASK_STAGING or TASK_STARTING).
fn launching(r: &TaskRecord) -> bool {
    matches!(r.state, TaskState::TaskStaging | TaskState::TaskStarting)
}

/// `update` with its uuid set to `uuid` (one [`World::uuid`] gave).
fn uuid_of(update: v1::TaskStatus, uuid: &str) -> v1::TaskStatus {
    v1::TaskStatus {
        uuid: Some(uuid.as_bytes().to_vec()),
        ..update
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
    /// Agents the machine was told (GET_AGENTS, this term) are draining,
    /// drained or deactivated.
    held: HashSet<String>,
    /// The agents' states in the last GET_AGENTS answer ([`Op::Agents`]),
    /// what the settle step answers again.
    agent_states: [u8; 3],
    /// Offers whose maintenance window starts within the lead time.
    windowed: HashSet<String>,
    /// Calls of the log checked against [`World::held`].
    holds_checked: usize,
    /// A violation found between checks.
    violation: Option<String>,
    /// Inverse offer IDs sent.
    inverse: Vec<String>,
    reach: Reach,
}

impl World {
    /// A subscribed leader of `web` ([`INSTANCES`] instances) of which
    /// `running` run.
    fn new(running: u8) -> World {
        let web = spec(SERVICES[0], INSTANCES, 0, false, 1);
        let records: Vec<TaskRecord> = (0..u32::from(running))
            .map(|i| running_record(SERVICES[0], i, &web))
            .collect();
        WATCHED.with(|w| *w.borrow_mut() = Watched::default());
        let mut h = Harness::new(
            case_config(),
            Some(FRAMEWORK),
            std::slice::from_ref(&web),
            &records,
        );
        h.start();
        h.answer_stores();
        h.machine.pass.budget = PASS_BUDGET.with(|b| b.get());
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
            held: HashSet::new(),
            agent_states: [0; 3],
            windowed: HashSet::new(),
            inverse: Vec::new(),
            holds_checked: 0,
            violation: None,
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
                // The table holds a lost agent no more (unreachable, or
                // gone after a drain): a later offer shows it active.
                self.held.remove(&format!("agent-{agent}"));
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
            Op::Start { pick } => {
                let staging: Vec<String> = self
                    .h
                    .store
                    .tasks
                    .values()
                    .filter(|(r, _)| r.state == TaskState::TaskStaging && r.kill.is_none())
                    .map(|(r, _)| r.task_id.to_string())
                    .collect();
                if !staging.is_empty() {
                    let task = staging[usize::from(pick) % staging.len()].clone();
                    let uuid = self.uuid(&task, TaskState::TaskStarting);
                    self.h
                        .update(status(&task, TaskState::TaskStarting, Some(&uuid)));
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
                policy,
            } => {
                let name = SERVICES[usize::from(service)];
                let spec = spec(name, instances.into(), version, checked, policy);
                self.h.command(Request::PutService(Box::new(valid(spec))));
            }
            Op::Delete { service } => {
                let name = SERVICES[usize::from(service)];
                self.h.command(Request::DeleteService {
                    name: name.into(),
                    expected: None,
                });
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
            Op::Restart { service } => {
                self.h.command(Request::Rollout {
                    name: SERVICES[usize::from(service)].into(),
                    action: RolloutAction::Restart,
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
            Op::Unreachable { pick } => {
                let task = self.task(pick);
                let uuid = self.uuid(&task, TaskState::TaskUnreachable);
                let agent = self.agent_of(&task);
                // As after FAILURE: the agent is unreachable in the table.
                self.held.remove(&agent);
                let update = v1::TaskStatus {
                    agent_id: Some(v1::AgentId { value: agent }),
                    ..unreachable(&task)
                };
                self.h.update(uuid_of(update, &uuid));
            }
            Op::Returned { pick } => {
                let task = self.task(pick);
                let uuid = self.uuid(&task, TaskState::TaskRunning);
                self.h.update(uuid_of(returned(&task), &uuid));
            }
            Op::Gone {
                pick,
                kind,
                reconciled: answer,
            } => {
                let task = self.task(pick);
                let state = GONE[usize::from(kind) % GONE.len()];
                if answer {
                    self.h.update(reconciled(&task, state));
                } else {
                    let uuid = self.uuid(&task, state);
                    self.h.update(status(&task, state, Some(&uuid)));
                }
            }
            Op::DrainKilled { pick } => {
                let task = self.task(pick);
                let agent = self.agent_of(&task);
                let uuid = self.uuid(&task, TaskState::TaskKilled);
                let update = drained_kill(&task, &agent, TaskState::TaskKilled);
                self.h.update(uuid_of(update, &uuid));
            }
            Op::Agents { states } => self.agents(states),
            Op::WindowOffer { agent, minutes } => {
                self.next_id += 1;
                let id = format!("o-{}", self.next_id);
                let window = window_in(&self.h, f64::from(minutes) * 60.0);
                let offer = offer_with(&id, &format!("agent-{agent}"), Some(window));
                if minutes < 60 {
                    // Within the default lead time (1 h): never used.
                    self.windowed.insert(id.clone());
                }
                self.h.feed(Input::Offers(vec![offer]));
                self.offers.push(id);
            }
            Op::InverseOffer { agent, minutes } => {
                self.next_id += 1;
                let id = format!("io-{}", self.next_id);
                let agent = (agent < 3).then(|| format!("agent-{agent}"));
                let window = window_in(&self.h, f64::from(minutes) * 60.0);
                let inverse = inverse_offer(&id, agent.as_deref(), window);
                self.h.feed(Input::InverseOffers(vec![inverse]));
                self.inverse.push(id);
            }
            Op::DrainStart { agent, floor } => {
                self.h.command(Request::StartDrain {
                    agent_id: format!("agent-{agent}").into(),
                    min_healthy: crate::scheduler::drains::MinHealthy::Count(floor.into()),
                    reason: None,
                    by: "property".into(),
                    then: crate::scheduler::drains::ThenAction::None,
                });
            }
            Op::DrainCancel { agent } => {
                self.h.command(Request::CancelDrain {
                    agent_id: format!("agent-{agent}").into(),
                    by: "property".into(),
                });
            }
            Op::RescindInverse { pick } => {
                let id = self
                    .inverse
                    .get(usize::from(pick) % (self.inverse.len() + 1))
                    .cloned()
                    .unwrap_or_else(|| "io-unknown".to_string());
                self.h.feed(Input::RescindInverseOffer(id));
            }
        }
        // The machine ended its term itself (abdicated, failed over, a
        // framework-ID mismatch): the runner ends it, its writes land.
        if self.h.ended.is_some() && !self.deposed {
            self.depose(0, true);
        }
    }

    /// The ACCEPTs since the last look against the holds as they are now
    /// (before an answer changes them); the first violation is kept for
    /// [`World::check`].
    fn check_holds(&mut self) {
        // No ACCEPT on an agent the table holds (draining, drained,
        // deactivated) or of an offer whose window is within the lead time.
        let new = &self.h.call_log[self.holds_checked..];
        for call in new {
            match call {
                MesosCall::Accept { offer_id, .. } if self.windowed.contains(offer_id) => {
                    let e = format!("ACCEPT of {offer_id}, its window near");
                    self.violation.get_or_insert(e);
                }
                MesosCall::AnswerInverseOffers { .. } => self.reach.inverse += 1,
                _ => {}
            }
        }
        for task in Harness::launched_infos(new) {
            if self.held.contains(&task.agent_id.value) {
                self.violation.get_or_insert(format!(
                    "ACCEPT of {} on {}, which the agent table holds",
                    task.task_id.value, task.agent_id.value
                ));
            }
        }
        self.holds_checked = self.h.call_log.len();
    }

    /// Answers the GET_AGENTS calls in flight (other operator calls as the
    /// harness does) with agents 0-2 in `states` ([`Op::Agents`]).
    fn agents(&mut self, states: [u8; 3]) {
        let drains = [
            None,
            Some(v1::DrainState::Draining),
            Some(v1::DrainState::Drained),
            None,
        ];
        let listed: Vec<_> = (0..3)
            .map(|i| {
                let state = usize::from(states[i].min(3));
                listed(&format!("agent-{i}"), state == 3, drains[state])
            })
            .collect();
        let mut answered = false;
        while let Some((id, op)) = self.h.operators.pop_front() {
            let answer = match op {
                OperatorOp::ListAgents { .. } => {
                    answered = true;
                    OperatorAnswer::Agents(Ok(listed.clone()))
                }
                _ => OperatorAnswer::Frameworks(Ok(Frameworks::default())),
            };
            self.h.feed(Input::Operator { id, answer });
        }
        if answered && !self.deposed {
            self.check_holds();
            self.agent_states = states;
            self.held = (0..3)
                .filter(|i| states[*i] != 0)
                .map(|i| format!("agent-{i}"))
                .collect();
        }
    }

    /// The agent of `task`'s stored record (`agent-0` when none).
    fn agent_of(&self, task: &str) -> String {
        self.h
            .stored(task)
            .map_or_else(|| "agent-0".to_string(), |r| r.agent_id.to_string())
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
        self.h.machine = Machine::new(case_config(), term, now, unix);
        self.h.machine.pass.budget = PASS_BUDGET.with(|b| b.get());
        self.h.stores.clear();
        self.h.calls.clear();
        self.h.operators.clear();
        self.h.ended = None;
        self.h.wake_at = None;
        self.deposed = false;
        self.subscribed = false;
        self.clients_before = self.h.started_clients;
        // A new machine's agent table is empty until its own GET_AGENTS.
        self.held.clear();
        self.reach.terms += 1;
        self.h.start();
    }

    /// A leader, subscribed, every request answered, offers enough for
    /// every instance, a few seconds: then what must hold once settled.
    async fn settle(&mut self) {
        self.regain();
        for _ in 0..4 {
            self.agents(self.agent_states);
            self.h.answer_all();
            self.subscribe(self.master);
            for agent in 0..3 {
                self.offer(agent, 4.0);
            }
            self.h.answer_all();
            self.start_launched();
            self.h.answer_all();
            self.h.advance(Duration::from_secs(1)).await;
        }
        self.h.answer_all();
    }

    /// The agents start what was launched: TASK_RUNNING for every stored
    /// task still staging (so that replacements, a drain's among them,
    /// become available within a settle).
    fn start_launched(&mut self) {
        let staging: Vec<(String, String)> = self
            .h
            .store
            .tasks
            .values()
            .filter(|(r, _)| r.state == TaskState::TaskStaging && r.kill.is_none())
            .map(|(r, _)| (r.task_id.to_string(), r.agent_id.to_string()))
            .collect();
        for (task, agent) in staging {
            let uuid = self.uuid(&task, TaskState::TaskRunning);
            let update = v1::TaskStatus {
                agent_id: Some(v1::AgentId { value: agent }),
                ..status(&task, TaskState::TaskRunning, Some(&uuid))
            };
            self.h.update(update);
        }
    }

    /// The invariants over what happened since the last check.
    /// The table's copy of a stored record with no write in flight says
    /// the state the store holds, but for a launch's steps
    /// (`tasks::ahead_of_store`): a TASK_STARTING kept in memory over a
    /// stored TASK_STAGING with no kill mark, and a TASK_RUNNING whose
    /// write failed over a stored TASK_STAGING or TASK_STARTING: nothing
    /// else is acknowledged or decided on without being stored.
    fn check_table(&mut self) -> Result<(), String> {
        if self.h.ended.is_some() {
            return Ok(());
        }
        for (id, entry) in self.h.machine.tasks.iter() {
            if entry.version.is_none() {
                continue;
            }
            let Some(stored) = self.h.stored(id) else {
                continue;
            };
            let table = &entry.record;
            // A launch's first TASK_RUNNING, acknowledged while its write
            // is out, or kept after that write failed.
            let running_ahead =
                table.state == TaskState::TaskRunning && launching(stored) && stored.kill.is_none();
            if entry.writing {
                self.reach.runnings_ahead += usize::from(running_ahead);
                continue;
            }
            if table.state == stored.state || running_ahead {
                continue;
            }
            if table.state == TaskState::TaskStarting
                && stored.state == TaskState::TaskStaging
                && stored.kill.is_none()
            {
                self.reach.starts_kept += 1;
                continue;
            }
            return Err(format!(
                "the table holds {id} {:?} while the store holds {:?}",
                table.state, stored.state
            ));
        }
        Ok(())
    }

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
        self.check_table()?;
        // Housekeeping reads the records its timers may be due for from
        // the table's aging index: it holds every such record, no other.
        let table = &self.h.machine.tasks;
        let recount = super::super::aging::Aging::recount(table.records().map(|r| r.as_ref()));
        if table.aging().listing() != recount {
            return Err("the aging index disagrees with the table".into());
        }
        let stored = table
            .iter()
            .map(|(_, e)| (e.record.as_ref(), e.version.is_some()));
        let recount = super::super::by_agent::recount(stored);
        let lists = super::super::by_agent::listing(self.h.machine.tasks.tasks_by_agent());
        if lists != recount {
            return Err("the tasks by agent disagree with the table".into());
        }
        let table = &self.h.machine.tasks;
        let scan = super::super::by_agent::count_all(table.records().map(|r| r.as_ref()));
        if super::super::by_agent::counts(table.by_agent()) != scan {
            return Err("the records counted by agent disagree with the table".into());
        }
        // No offer is held past its TTL and a housekeeping period, but one
        // a launch the budget held back waits for (`Launches::wanted`), on
        // a machine that still leads.
        let now = Instant::now();
        let ttl = self.h.machine.cfg.offer_ttl + super::super::HOUSEKEEPING;
        let wanted = self.h.machine.launches.wanted(&self.h.machine.offers);
        for o in self.h.machine.offers.iter() {
            if !self.deposed && now.duration_since(o.received) > ttl && !wanted.contains(o.id()) {
                return Err(format!("offer {} held past its TTL", o.id()));
            }
        }
        // The snapshot's counts, kept as the records change (`tally`),
        // equal a recount of every record.
        if self.h.ended.is_none()
            && let Some(mismatch) = self.h.machine.shown_mismatch(Instant::now())
        {
            return Err(mismatch);
        }
        if let Some(mismatch) = self.h.machine.offers_mismatch() {
            return Err(mismatch);
        }
        if let Some(mismatch) = self.h.machine.shown_tasks_mismatch() {
            return Err(mismatch);
        }
        self.check_holds();
        if let Some(violation) = self.violation.take() {
            return Err(violation);
        }
        if !self.held.is_empty() {
            self.reach.held += 1;
        }
        self.calls = self.h.call_log.len();
        // "Why isn't it running" (`why`): each offer is counted at most
        // once per service, with one to four reasons (four resources may
        // be short at once); a last failure is one of the service's tasks.
        if let Some(snapshot) = &self.h.snapshot {
            for status in &snapshot.services {
                let name = &status.spec.name;
                if let Some(o) = &status.offers {
                    let reasons: u64 = o.reasons.values().sum();
                    if o.processed > self.offers.len() as u64
                        || reasons < o.processed
                        || reasons > 4 * o.processed
                    {
                        return Err(format!(
                            "{name} counted {o:?} of {} offers sent",
                            self.offers.len()
                        ));
                    }
                }
                if let Some(f) = &status.last_failure
                    && !f.task_id.starts_with(&format!("{name}."))
                {
                    return Err(format!("{name}'s last failure is {f:?}"));
                }
            }
        }
        // Every launched task ID is unique, across terms.
        let mut ids = HashSet::new();
        if let Some(twice) = launched.iter().find(|id| !ids.insert(*id)) {
            return Err(format!("task ID {twice} launched twice"));
        }
        // A terminal task never comes back to life in the records (an
        // update saying it lives is recorded with a kill mark).
        for (id, (record, _)) in &self.h.store.tasks {
            if record.state == TaskState::TaskUnreachable {
                self.reach.unreachable += 1;
            }
            if record.partition.is_some_and(|m| m.returned_at.is_some()) {
                self.reach.returned += 1;
            }
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
        // An unreachable or unknown copy is no live copy: its instance may
        // have a replacement, and `kill_on_return` settles it if it returns.
        // A task on an agent a drain holds is leaving: it and its
        // replacement both run until the replacement is available.
        let drained = |r: &TaskRecord| {
            h.store
                .drains
                .get(r.agent_id.as_str())
                .is_some_and(|(d, _)| d.state.holds())
        };
        let copies = h.store.tasks.values().map(|(r, _)| r);
        for record in copies.filter(|r| occupies_host(r) && !drained(r)) {
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
    paused_runtime()?.block_on(async {
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
        let (replacements, drain_kills, restart_kills, runnings_ahead) = WATCHED.with(|w| {
            let w = w.borrow();
            (
                w.reach.replacements,
                w.reach.drain_kills,
                w.reach.restart_kills,
                w.reach.runnings_ahead,
            )
        });
        Ok(Reach {
            replacements,
            drain_kills,
            restart_kills,
            runnings_ahead: runnings_ahead + world.reach.runnings_ahead,
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

thread_local! {
    /// The scheduling pass's record budget in this thread's cases
    /// (`schedule::PassBound`).
    static PASS_BUDGET: std::cell::Cell<usize> =
        const { std::cell::Cell::new(super::super::schedule::PASS_RECORDS) };
}

thread_local! {
    /// The explicit reconciliation's slice in this thread's cases
    /// (`ReconcilerConfig::explicit_slice`).
    static RECONCILE_SLICE: std::cell::Cell<usize> =
        const { std::cell::Cell::new(crate::scheduler::rules::reconcile::EXPLICIT_SLICE) };
}

/// The machine's configuration in this thread's cases: the unit tests'
/// with the slices the case's variant sets.
fn case_config() -> CoreConfig {
    let mut cfg = config();
    cfg.reconcile.explicit_slice = RECONCILE_SLICE.with(|s| s.get());
    cfg.load_per_step = LOAD_SLICE.with(|s| s.get());
    cfg
}

thread_local! {
    /// Task records a term loads per step in this thread's cases
    /// (`CoreConfig::load_per_step`).
    static LOAD_SLICE: std::cell::Cell<usize> =
        const { std::cell::Cell::new(crate::scheduler::config::LOAD_PER_STEP) };
}

/// The invariants again with every term loading its task records one per
/// step: updates, commands, offers and ticks come between the slices, as
/// while a new leader loads 100,000 records.
#[test]
fn machine_invariants_with_sliced_loads() {
    LOAD_SLICE.with(|s| s.set(1));
    let reach = run("machine_invariants_with_sliced_loads", CASES);
    eprintln!("machine_invariants_with_sliced_loads reached: {reach:?}");
}

/// The invariants again with explicit reconciliations that ask about one
/// task at a time: every run goes in slices, the next asked as answers come
/// or when the wait elapses, as at 100,000 tasks.
#[test]
fn machine_invariants_with_reconcile_slices() {
    RECONCILE_SLICE.with(|s| s.set(1));
    let reach = run("machine_invariants_with_reconcile_slices", CASES);
    eprintln!("machine_invariants_with_reconcile_slices reached: {reach:?}");
}

/// The invariants again with passes of one service each (a record budget
/// of one): every pass defers the other service, as a pass does at 100,000
/// tasks.
#[test]
fn machine_invariants_with_bounded_passes() {
    PASS_BUDGET.with(|b| b.set(1));
    let reach = run("machine_invariants_with_bounded_passes", CASES);
    eprintln!("machine_invariants_with_bounded_passes reached: {reach:?}");
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
        rng_seed: RngSeed::Fixed(1),
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
    assert!(total.unreachable > 0, "{total:?}");
    assert!(total.returned > 0, "{total:?}");
    assert!(total.held > 0, "{total:?}");
    assert!(total.inverse > 0, "{total:?}");
    assert!(total.drain_kills > 0, "{total:?}");
    assert!(total.restart_kills > 0, "{total:?}");
    assert!(total.starts_kept > 0, "{total:?}");
    assert!(total.runnings_ahead > 0, "{total:?}");
}

/// What a random sequence does to one explicit run: an answer for task
/// `pick` (in or out of the run), or time passing.
#[derive(Debug, Clone)]
enum RunOp {
    Answer(u8),
    Wait(u16),
}

proptest! {
    #![proptest_config(Config { cases: 256, failure_persistence: None, ..Config::default() })]

    /// Explicit reconciliation in slices (`rules::reconcile`), over random
    /// answer orders and waits: a call that is not a retry asks about at
    /// most a slice; between retries, the tasks asked and unanswered (the
    /// answers on their way) stay within a slice and a half; no task is
    /// asked about after it answered; the run converges exactly when every
    /// task answered, and every task it lists was asked about unless it
    /// answered first.
    #[test]
    fn reconciliation_slices_bound_the_answers_on_their_way(
        count in 0usize..24,
        slice in 1usize..6,
        ops in proptest::collection::vec(
            prop_oneof![
                4 => (0u8..30).prop_map(RunOp::Answer),
                1 => (1u16..3000).prop_map(RunOp::Wait),
            ],
            0..80,
        ),
    ) {
        use crate::scheduler::rules::reconcile::{Action, ReconcileOutcome, Reconciler};
        use crate::scheduler::ids::{AgentId, TaskId};
        let t0 = tokio::time::Instant::now();
        let mut cfg = config().reconcile;
        cfg.explicit_slice = slice;
        cfg.explicit_abort_timeout = Duration::from_secs(3600);
        let mut r = Reconciler::new(cfg, t0);
        let name = |i: usize| format!("t{i:02}");
        let list: Vec<(TaskId, Option<AgentId>)> =
            (0..count).map(|i| (TaskId::from(name(i)), None)).collect();
        let mut asked: HashSet<String> = HashSet::new();
        let mut answered: HashSet<String> = HashSet::new();
        let mut converged = false;
        let mut now = t0;
        let mut check = |actions: Vec<Action>, retry: bool, answered: &HashSet<String>, converged: &mut bool| -> Result<(), TestCaseError> {
            for action in actions {
                match action {
                    Action::Send(tasks) => {
                        prop_assert!(retry || tasks.len() <= slice, "a call of {} > slice {slice}", tasks.len());
                        for (t, _) in tasks {
                            prop_assert!(!answered.contains(t.as_str()), "{t} asked after it answered");
                            asked.insert(t.to_string());
                        }
                    }
                    Action::Finished(run) => {
                        prop_assert_eq!(run.outcome, ReconcileOutcome::Converged);
                        prop_assert_eq!(answered.len(), count);
                        *converged = true;
                    }
                }
            }
            if !retry && !*converged {
                let on_their_way = asked.iter().filter(|t| !answered.contains(*t)).count();
                prop_assert!(on_their_way <= slice + slice / 2, "{on_their_way} unanswered asked, slice {slice}");
            }
            Ok(())
        };
        let first = r.subscribed(list, now, 0.0);
        check(first, false, &answered, &mut converged)?;
        let mut retried = false;
        for op in ops {
            if converged {
                break;
            }
            match op {
                RunOp::Answer(pick) => {
                    let task = name(usize::from(pick));
                    let in_run = usize::from(pick) < count;
                    let actions = r.on_update(&task, true, now, 0.0);
                    if in_run {
                        answered.insert(task);
                    }
                    check(actions, retried, &answered, &mut converged)?;
                }
                RunOp::Wait(ms) => {
                    now += Duration::from_millis(u64::from(ms));
                    let actions = r.tick(now, 0.0, Vec::new);
                    retried |= actions.iter().any(|a| matches!(a, Action::Send(_)));
                    check(actions, true, &answered, &mut converged)?;
                }
            }
        }
        prop_assert_eq!(converged, answered.len() == count);
        if converged {
            // Every task was asked about, or answered before its slice.
            prop_assert!((0..count).all(|i| asked.contains(&name(i)) || answered.contains(&name(i))));
        }
    }
}
