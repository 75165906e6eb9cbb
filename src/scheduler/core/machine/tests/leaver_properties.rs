//! A property of leaving tasks no longer wanted (`machine/evacuation.rs`):
//! random drains (started, cancelled, any floor), maintenance windows,
//! scale changes, new specs and deletions of `web` against a leader, its
//! store and calls answered at once. Agent-3 is never drained nor
//! maintained, so a wanted instance always has somewhere to go.
//!
//! - at the effect ([`unwanted_kill`]): a leaving task killed as no
//!   longer wanted is of an instance its service does not want, and the
//!   kill keeps a drain's floor capped at the instances wanted (no wanted
//!   instance loses its task to a leaver's kill);
//! - once settled (offers everywhere, launched tasks running, kills
//!   confirmed, time for availability): a drain of an agent that holds no
//!   task of a wanted instance is `done`, no agent being emptied holds a
//!   task no longer wanted, and every wanted instance has a live task;
//! - after every step: a drain's end (done, or cancelled while running)
//!   lists every task live on its agent when it began — moved, waiting,
//!   blocked, stopped or ended (an agent brought DOWN loses its tasks,
//!   [`Op::Lose`]) — none silently missing.
//!
//! `PROPTEST_RNG_SEED=<seed> cargo test --lib machine_invariants_unwanted`
//! replays a failure.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

use super::maintenance::{inverse_offer, window_in};
use super::*;
use crate::mesos::is_terminal;
use crate::scheduler::drains::{DrainState, MinHealthy, ThenAction};
use crate::scheduler::records::is_live;
use crate::scheduler::rules::review::wants_instance;
use crate::scheduler::rules::rollout as rules;

/// Cases per `cargo test` run.
const CASES: u32 = 64;
/// Steps of a case, at most.
const STEPS: usize = 40;
/// The agents the case drains or maintains (agent-3 is the free one).
const AGENTS: u8 = 3;

/// The words every kill of a task no longer wanted carries (`drains.rs`,
/// `maintenance.rs`).
const UNWANTED: &str = "its service no longer wants the instance";

#[derive(Debug, Clone)]
enum Op {
    /// PUT of `web` with `instances`, command `version`.
    Put { instances: u8, version: u8 },
    /// DELETE of `web`.
    Delete,
    /// The appliance's drain of agent `agent` with `min_healthy` `floor`.
    DrainStart { agent: u8, floor: u8 },
    /// Its cancellation.
    DrainCancel { agent: u8 },
    /// An inverse offer for agent `agent`, its window in half an hour.
    Inverse { agent: u8 },
    /// An offer of agent `agent` (0-3).
    Offer { agent: u8 },
    /// The agents start what was launched and end what was killed.
    Run,
    /// The master ends every task on agent `agent` (0-2) with TASK_LOST,
    /// REASON_AGENT_REMOVED: its machine brought DOWN (START_MAINTENANCE).
    Lose { agent: u8 },
    /// Time passes.
    Wait { seconds: u8 },
    /// Enough of everything, then the settled invariants.
    Settle,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..5u8, 0..2u8).prop_map(|(instances, version)| Op::Put { instances, version }),
        1 => Just(Op::Delete),
        3 => (0..AGENTS, 0..4u8).prop_map(|(agent, floor)| Op::DrainStart { agent, floor }),
        1 => (0..AGENTS).prop_map(|agent| Op::DrainCancel { agent }),
        1 => (0..AGENTS).prop_map(|agent| Op::Inverse { agent }),
        3 => (0..=AGENTS).prop_map(|agent| Op::Offer { agent }),
        2 => Just(Op::Run),
        1 => (0..AGENTS).prop_map(|agent| Op::Lose { agent }),
        2 => (0..6u8).prop_map(|seconds| Op::Wait { seconds }),
        2 => Just(Op::Settle),
    ]
}

/// `web`: `instances` tiny tasks, command `version`; available 3 s after
/// it runs.
fn web(instances: u32, version: u8) -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": "web", "command": format!("sleep {}", 1000 + u32::from(version)),
        "cpus": 0.1, "mem": 16, "instances": instances,
        "restart_backoff": "2s", "restart_backoff_max": "8s",
        "upgrade": {"min_healthy": "3s", "deadline": "20s"}
    }))
    .expect("a service spec")
}

/// A kill's store write that marks a leaving task as no longer wanted:
/// its instance must be one its service does not want, and with a drain
/// on its agent, the service keeps `min_healthy` available tasks capped
/// at its instances (counting the kills on their way to the store). The
/// big property's watch asks this too (`properties.rs`).
pub(super) fn unwanted_kill(h: &Harness, record: &TaskRecord) -> Option<String> {
    let kill = record.kill.as_ref()?;
    let stored = h.stored(record.task_id.as_str())?;
    if stored.kill.is_some() || !kill.reason.contains(UNWANTED) {
        return None;
    }
    let Some(spec) = h.machine.services.spec(&record.service) else {
        return Some(format!(
            "{} killed as unwanted of no service",
            record.task_id
        ));
    };
    if wants_instance(spec, record.instance) {
        return Some(format!(
            "{} killed as unwanted while {} wants instance {} of {}",
            record.task_id, spec.name, record.instance, spec.instances
        ));
    }
    // A drain's floor (maintenance has none of its own).
    if !kill.reason.contains("is drained") {
        return None;
    }
    let (drain, _) = h.store.drains.get(record.agent_id.as_str())?;
    let (after, floor) = after_kill(h, record, stored, spec, drain)?;
    (after < floor).then(|| {
        format!(
            "unwanted {} killed leaving {after} available of {} (floor {floor})",
            record.task_id, record.service
        )
    })
}

/// For a drain's kill of `record` (stored as `stored`) of `spec`: the
/// service's available tasks once it and the kills on their way to the
/// store are done, and the drain's floor capped at the instances
/// (`evacuation.rs`); `None` when the task is not available as the
/// machine last knew it (the record without its kill): its kill lowers
/// no count, whatever the floor. Both properties' watches judge a drain
/// kill by it.
pub(super) fn after_kill(
    h: &Harness,
    record: &TaskRecord,
    stored: &TaskRecord,
    spec: &ServiceSpec,
    drain: &crate::scheduler::drains::DrainRecord,
) -> Option<(u32, u32)> {
    let now = h.machine.clock.unix(Instant::now());
    let known = TaskRecord {
        kill: None,
        ..record.clone()
    };
    if !rules::is_available(spec, &known, now) {
        return None;
    }
    let killing: HashSet<&str> = h
        .stores
        .iter()
        .filter_map(|(_, op)| match op {
            StoreOp::PutTask(r, _) if r.kill.is_some() => Some(r.task_id.as_str()),
            _ => None,
        })
        .collect();
    let available = h
        .store
        .tasks
        .values()
        .filter(|(r, _)| r.service == record.service)
        .filter(|(r, _)| !killing.contains(r.task_id.as_str()))
        .filter(|(r, _)| rules::is_available(spec, r, now))
        .count() as u32;
    let after = available.saturating_sub(u32::from(rules::is_available(spec, stored, now)));
    Some((
        after,
        drain.min_healthy.floor(spec.instances).min(spec.instances),
    ))
}

fn watch(h: &Harness, effect: &Effect) -> Option<String> {
    match effect {
        Effect::Store {
            op: StoreOp::PutTask(record, _),
            ..
        } => unwanted_kill(h, record),
        _ => None,
    }
}

struct World {
    h: Harness,
    next: u64,
    /// Settled states checked, and drains seen ending with nothing wanted
    /// left on their agent.
    settled: usize,
    unwanted_kills: usize,
    /// Each drained agent's drain, by its start, with the tasks live there
    /// when it began.
    began: HashMap<String, (f64, Vec<String>)>,
    /// Drain ends checked against [`World::began`].
    ends: usize,
}

impl World {
    fn new() -> World {
        let spec = web(3, 0);
        let tasks: Vec<TaskRecord> = (0..3).map(|i| running_record("web", i, &spec)).collect();
        let mut h = Harness::leader(&[spec], &tasks);
        h.watch = Some(watch);
        h.subscribe();
        h.answer_all();
        World {
            h,
            next: 0,
            settled: 0,
            unwanted_kills: 0,
            began: HashMap::new(),
            ends: 0,
        }
    }

    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    async fn step(&mut self, op: &Op) {
        match *op {
            Op::Put { instances, version } => {
                let spec = web(instances.into(), version);
                self.h.command(Request::PutService(Box::new(valid(spec))));
            }
            Op::Delete => {
                self.h.command(Request::DeleteService {
                    name: "web".into(),
                    expected: None,
                });
            }
            Op::DrainStart { agent, floor } => {
                self.h.command(Request::StartDrain {
                    agent_id: format!("agent-{agent}").into(),
                    min_healthy: MinHealthy::Count(floor.into()),
                    reason: None,
                    by: "property".into(),
                    then: ThenAction::None,
                });
            }
            Op::DrainCancel { agent } => {
                self.h.command(Request::CancelDrain {
                    agent_id: format!("agent-{agent}").into(),
                    by: "property".into(),
                });
            }
            Op::Inverse { agent } => {
                let id = format!("io-{}", self.id());
                let window = window_in(&self.h, 1800.0);
                let agent = format!("agent-{agent}");
                let inverse = inverse_offer(&id, Some(&agent), window);
                self.h.feed(Input::InverseOffers(vec![inverse]));
            }
            Op::Offer { agent } => {
                let id = format!("o-{}", self.id());
                self.h.offer(&id, &format!("agent-{agent}"), 4.0);
            }
            Op::Run => self.run(),
            Op::Lose { agent } => self.lose(&format!("agent-{agent}")),
            Op::Wait { seconds } => self.h.advance(Duration::from_secs(seconds.into())).await,
            Op::Settle => self.settle().await,
        }
        self.h.answer_all();
        if let Op::DrainStart { agent, .. } = *op {
            self.note_start(&format!("agent-{agent}"));
        }
    }

    /// Notes the tasks live on `agent` when its drain began, once per
    /// drain.
    fn note_start(&mut self, agent: &str) {
        let Some((drain, _)) = self.h.store.drains.get(agent) else {
            return;
        };
        if self
            .began
            .get(agent)
            .is_some_and(|(at, _)| *at == drain.started_at)
        {
            return;
        }
        let live = self.h.store.tasks.values().map(|(r, _)| r);
        let live = live.filter(|r| r.agent_id.as_str() == agent && is_live(r));
        let ids = live.map(|r| r.task_id.to_string()).collect();
        self.began
            .insert(agent.to_string(), (drain.started_at, ids));
    }

    /// TASK_LOST for every stored task not ended on `agent`, as the master
    /// sends it when the agent's machine is brought DOWN.
    fn lose(&mut self, agent: &str) {
        let there: Vec<String> = self
            .h
            .store
            .tasks
            .values()
            .map(|(r, _)| r)
            .filter(|r| r.agent_id.as_str() == agent && !is_terminal(r.state))
            .map(|r| r.task_id.to_string())
            .collect();
        for task in there {
            let uuid = format!("u{}", self.id());
            self.h.update(v1::TaskStatus {
                agent_id: Some(v1::AgentId {
                    value: agent.to_string(),
                }),
                reason: Some(v1::task_status::Reason::AgentRemoved as i32),
                message: Some(format!(
                    "Agent {agent} removed: Operator initiated 'Machine DOWN'"
                )),
                ..status(&task, TaskState::TaskLost, Some(&uuid))
            });
        }
    }

    /// Every drain that ended lists the tasks live on its agent when it
    /// began (see the module doc).
    fn check_ends(&mut self) -> Result<(), String> {
        for (agent, (drain, _)) in &self.h.store.drains {
            let (Some(end), Some((at, began))) = (&drain.ended, self.began.get(agent.as_str()))
            else {
                continue;
            };
            if *at != drain.started_at || end.left_out > 0 {
                continue;
            }
            self.ends += 1;
            let listed: HashSet<&str> = end.tasks.iter().map(|t| t.task_id.as_str()).collect();
            if let Some(missing) = began.iter().find(|t| !listed.contains(t.as_str())) {
                return Err(format!(
                    "the end of the drain of {agent} misses {missing}, live there when it \
                     began: {end:?}"
                ));
            }
        }
        Ok(())
    }

    /// TASK_RUNNING for every stored task still staging, TASK_KILLED for
    /// every live one marked for a kill (the agents did as told).
    fn run(&mut self) {
        let stored: Vec<TaskRecord> = self
            .h
            .store
            .tasks
            .values()
            .map(|(r, _)| r.clone())
            .collect();
        for r in stored {
            let state = if r.kill.is_some() && !is_terminal(r.state) {
                TaskState::TaskKilled
            } else if r.state == TaskState::TaskStaging {
                TaskState::TaskRunning
            } else {
                continue;
            };
            if state == TaskState::TaskKilled
                && r.kill.as_ref().is_some_and(|k| k.reason.contains(UNWANTED))
            {
                self.unwanted_kills += 1;
            }
            let uuid = format!("u{}", self.id());
            self.h.update(v1::TaskStatus {
                agent_id: Some(v1::AgentId {
                    value: r.agent_id.to_string(),
                }),
                ..status(r.task_id.as_str(), state, Some(&uuid))
            });
        }
    }

    async fn settle(&mut self) {
        for _ in 0..10 {
            self.h.answer_all();
            for agent in 0..=AGENTS {
                let id = format!("o-{}", self.id());
                self.h.offer(&id, &format!("agent-{agent}"), 4.0);
            }
            self.h.answer_all();
            self.run();
            self.h.answer_all();
            self.h.advance(Duration::from_secs(2)).await;
        }
        self.h.answer_all();
    }

    fn check(&self) -> Result<(), String> {
        match self.h.violations.first() {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }

    /// See the module doc.
    fn check_settled(&mut self) -> Result<(), String> {
        self.settled += 1;
        let h = &self.h;
        let spec = h.machine.services.spec("web");
        let wanted = |r: &TaskRecord| spec.is_some_and(|s| wants_instance(s, r.instance));
        let live: Vec<&TaskRecord> = h
            .store
            .tasks
            .values()
            .map(|(r, _)| r)
            .filter(|r| is_live(r))
            .collect();
        for (agent, (drain, _)) in &h.store.drains {
            let on_agent = |r: &&&TaskRecord| r.agent_id.as_str() == agent.as_str();
            if drain.state == DrainState::Running
                && !live.iter().filter(on_agent).any(|r| wanted(r))
            {
                return Err(format!(
                    "the drain of {agent} runs with nothing wanted there: {:?}",
                    live.iter()
                        .filter(on_agent)
                        .map(|r| r.task_id.as_str())
                        .collect::<Vec<_>>()
                ));
            }
        }
        let emptied = |r: &TaskRecord| {
            h.machine.maintenance.is_leaving(r)
                || h.store
                    .drains
                    .get(r.agent_id.as_str())
                    .is_some_and(|(d, _)| d.state.holds())
        };
        if let Some(r) = live.iter().find(|r| emptied(r) && !wanted(r)) {
            return Err(format!(
                "{} is left on an emptied agent, not wanted",
                r.task_id
            ));
        }
        if let Some(spec) = spec {
            for i in 0..spec.instances {
                if !live.iter().any(|r| r.instance == i) {
                    return Err(format!(
                        "instance {i} of {} has no live task",
                        spec.instances
                    ));
                }
            }
        }
        Ok(())
    }
}

fn run_case(ops: &[Op]) -> Result<(usize, usize, usize), String> {
    paused_runtime()?.block_on(async {
        let mut world = World::new();
        for (i, op) in ops.iter().enumerate() {
            world.step(op).await;
            let settled = match op {
                Op::Settle => world.check_settled(),
                _ => Ok(()),
            };
            settled
                .and_then(|()| world.check())
                .and_then(|()| world.check_ends())
                .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
        }
        world.settle().await;
        world
            .check_settled()
            .and_then(|()| world.check())
            .and_then(|()| world.check_ends())
            .map_err(|e| format!("the last settle: {e}"))?;
        Ok((world.settled, world.unwanted_kills, world.ends))
    })
}

/// The property (see the module doc); a failure prints the seed and the
/// shrunk case.
#[test]
fn machine_invariants_unwanted_leavers() {
    let seed: u64 = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    });
    let reached = std::cell::Cell::new((0, 0, 0));
    let result = runner.run(&proptest::collection::vec(op(), 1..STEPS), |ops| {
        let (settled, kills, ends) = run_case(&ops).map_err(TestCaseError::fail)?;
        let (s, k, e) = reached.get();
        reached.set((s + settled, k + kills, e + ends));
        Ok(())
    });
    if let Err(e) = result {
        panic!(
            "{e}\nseed {seed}; replay with: PROPTEST_RNG_SEED={seed} cargo test --lib \
             machine_invariants_unwanted_leavers"
        );
    }
    let (settled, kills, ends) = reached.get();
    eprintln!(
        "settled {settled} times, {kills} unwanted leavers killed, {ends} checks of a drain's end"
    );
    assert!(kills > 0, "the cases killed no unwanted leaver");
    assert!(ends > 0, "no drain ended");
}
