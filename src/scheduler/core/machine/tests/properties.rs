//! Property tests of the core: random sequences of inputs (offers, status
//! updates in any order, duplicated or for unknown tasks, store answers
//! that succeed or fail, call answers, time passing), two invariants
//! checked after every step:
//!
//! - no ACKNOWLEDGE before the update's record is stored;
//! - no ACCEPT for a task whose record is not stored.
//!
//! The case count is bounded for CI (`PROPTEST_CASES` raises it); a failure
//! prints the RNG seed and the shrunk sequence, and
//! `PROPTEST_RNG_SEED=<seed> cargo test --lib machine_invariants` replays
//! it (the core is deterministic, `determinism`). See `docs/architecture.md`,
//! "Property tests of the core".

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

use super::*;
use crate::mesos::is_terminal;

/// Cases per `cargo test` run.
const CASES: u32 = 64;

/// One step of a case.
#[derive(Debug, Clone)]
enum Op {
    /// An offer of `cpus` on agent `agent`.
    Offer { agent: u8, cpus: u8 },
    /// An update of launched task `pick` (modulo; one past the end is a
    /// task nobody launched), sent twice when `twice`.
    Update { pick: u8, state: u8, twice: bool },
    /// The oldest store operation answered, or failed when `ok` is false
    /// (reads are always answered).
    Store { ok: bool },
    /// Every Mesos and operator call answered.
    Calls,
    /// Time passes, the machine ticks when it asked to.
    Wait { seconds: u8 },
}

const STATES: [TaskState; 6] = [
    TaskState::TaskStarting,
    TaskState::TaskRunning,
    TaskState::TaskFailed,
    TaskState::TaskFinished,
    TaskState::TaskKilled,
    TaskState::TaskLost,
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..3u8, 1..5u8).prop_map(|(agent, cpus)| Op::Offer { agent, cpus }),
        3 => (any::<u8>(), 0..STATES.len() as u8, any::<bool>())
            .prop_map(|(pick, state, twice)| Op::Update { pick, state, twice }),
        4 => any::<bool>().prop_map(|ok| Op::Store { ok }),
        2 => Just(Op::Calls),
        1 => (0..20u8).prop_map(|seconds| Op::Wait { seconds }),
    ]
}

/// What the checks remember between steps.
#[derive(Default)]
struct Seen {
    acks: usize,
    calls: usize,
    /// Update uuid → (task, state) of the update.
    sent: HashMap<Vec<u8>, (String, TaskState)>,
    next_uuid: u64,
}

impl Seen {
    /// Both invariants over what happened since the last check.
    fn check(&mut self, h: &Harness) -> Result<(), String> {
        let launched = Harness::launched(&h.call_log);
        for ack in &h.acks[self.acks..] {
            let Some((task, state)) = self.sent.get(&ack.uuid) else {
                return Err(format!("ACKNOWLEDGE of an update never sent: {ack:?}"));
            };
            if !launched.contains(task) {
                continue; // Unknown to the machine: there is nothing to store.
            }
            match h.stored(task) {
                Some(r) if r.state == *state || is_terminal(r.state) => {}
                other => {
                    return Err(format!(
                        "ACKNOWLEDGE of {task} {state:?} while the store holds {:?}",
                        other.map(|r| r.state)
                    ));
                }
            }
        }
        self.acks = h.acks.len();
        let accepted = Harness::launched(&h.call_log[self.calls..]);
        for task in accepted {
            if h.stored(&task).is_none() {
                return Err(format!("ACCEPT of {task} before its record is stored"));
            }
        }
        self.calls = h.call_log.len();
        Ok(())
    }
}

async fn step(h: &mut Harness, seen: &mut Seen, op: &Op) {
    match *op {
        Op::Offer { agent, cpus } => {
            let id = format!("o-{}", h.call_log.len() + h.acks.len() + seen.sent.len());
            h.offer(&id, &format!("agent-{agent}"), f64::from(cpus));
        }
        Op::Update { pick, state, twice } => {
            let launched = Harness::launched(&h.call_log);
            let pick = usize::from(pick) % (launched.len() + 1);
            let task = launched
                .get(pick)
                .cloned()
                .unwrap_or_else(|| "web.9.unknown".to_string());
            let state = STATES[usize::from(state)];
            seen.next_uuid += 1;
            let uuid = format!("u{}", seen.next_uuid);
            seen.sent
                .insert(uuid.clone().into_bytes(), (task.clone(), state));
            for _ in 0..=usize::from(twice) {
                h.update(status(&task, state, Some(&uuid)));
            }
        }
        Op::Store { ok } => match h.stores.front() {
            None => {}
            Some((_, StoreOp::PutTask(..) | StoreOp::PutService(..)))
            | Some((_, StoreOp::DeleteService(..) | StoreOp::DeleteTask(..)))
                if !ok =>
            {
                h.fail_next_store(CoordinationError::Unavailable("connection loss".into()));
            }
            Some(_) => {
                h.answer_next_store();
            }
        },
        Op::Calls => {
            h.answer_calls();
            h.answer_operators();
        }
        Op::Wait { seconds } => h.advance(Duration::from_secs(seconds.into())).await,
    }
}

/// Runs one case on a fresh leader of `web` (3 instances, no tasks).
fn run_case(ops: &[Op]) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let spec = service("web", 3);
        let mut h = Harness::leader(std::slice::from_ref(&spec), &[]);
        h.subscribe();
        let mut seen = Seen::default();
        seen.check(&h)?;
        for (i, op) in ops.iter().enumerate() {
            step(&mut h, &mut seen, op).await;
            seen.check(&h)
                .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
        }
        Ok(())
    })
}

#[test]
fn machine_invariants() {
    let env = |name: &str| std::env::var(name).ok();
    let seed: u64 = env("PROPTEST_RNG_SEED")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    let cases: u32 = env("PROPTEST_CASES")
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    let mut runner = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..60), |ops| {
        run_case(&ops).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!(
            "{e}\nseed {seed}; replay with: \
             PROPTEST_RNG_SEED={seed} cargo test --lib machine_invariants"
        );
    }
}
