//! What the core spends on an explicit reconciliation of 100,000 running
//! tasks: not a check (it is `#[ignore]`d and asserts nothing about time),
//! a probe to profile with.
//!
//! ```text
//! cargo test --release --lib reconcile_cost -- --ignored --nocapture
//! valgrind --tool=callgrind target/release/deps/mesos_appliance-… reconcile_cost --ignored
//! ```
//!
//! Ten services of 10,000 running instances; the subscription's explicit
//! run asks about them in slices; a master answers each RECONCILE with the
//! latest state of every task it names (nothing changes), in the runner's
//! batches of 1,024, each batch followed by a settle. Paused time moves on
//! by the wall time each batch took, so the snapshot and the pass are
//! paced as they would be.

use std::time::Instant as StdInstant;

use crate::scheduler::core::io::Effects;
use crate::scheduler::rules::reconcile::ReconcileKind;

use super::*;

const SERVICES: usize = 10;
const PER_SERVICE: u32 = 10_000;
const BATCH: usize = 1024;

#[tokio::test(start_paused = true)]
#[ignore = "a probe to profile reconciliation with; run it in release"]
async fn reconcile_cost_of_100k_running_tasks() {
    let specs: Vec<ServiceSpec> = (0..SERVICES)
        .map(|s| service(&format!("svc{s}"), PER_SERVICE))
        .collect();
    let records: Vec<TaskRecord> = specs
        .iter()
        .flat_map(|spec| (0..PER_SERVICE).map(|i| running_record(&spec.name, i, spec)))
        .collect();
    let defaults = CoreConfig::default();
    let cfg = CoreConfig {
        snapshot_interval: defaults.snapshot_interval,
        schedule_interval: defaults.schedule_interval,
        ..config()
    };
    let mut h = Harness::new(cfg, Some(FRAMEWORK), &specs, &records);
    h.start();
    h.answer_stores();
    // The records load a slice per step (`CoreConfig::load_per_step`): the
    // subscription's run starts after the last.
    while !h.machine.tasks.is_loaded() {
        h.advance(Duration::ZERO).await;
        h.answer_stores();
    }
    // The subscription's run sends its first slice (the harness answers
    // the call and the writes subscribing makes).
    h.subscribe();
    h.answer_all();
    h.trace.clear();
    let mut asked: VecDeque<String> = VecDeque::new();
    let (mut calls, mut answered) = (0, 0);
    for call in h.drain_call_log() {
        if let MesosCall::Reconcile(list) = call {
            calls += 1;
            asked.extend(list.iter().map(|(t, _)| t.to_string()));
        }
    }
    let mut pending = Vec::new();
    let started = StdInstant::now();
    loop {
        for (id, call) in std::mem::take(&mut pending) {
            if let MesosCall::Reconcile(list) = &call
                && !list.is_empty()
            {
                calls += 1;
                asked.extend(list.iter().map(|(t, _)| t.to_string()));
            }
            pending.extend(feed(&mut h.machine, Input::Called { id, result: Ok(()) }));
        }
        if asked.is_empty() && pending.is_empty() {
            break;
        }
        let take = asked.len().min(BATCH);
        let batch: Vec<v1::TaskStatus> = asked
            .drain(..take)
            .map(|t| reconciled(&t, TaskState::TaskRunning))
            .collect();
        answered += batch.len();
        let at = StdInstant::now();
        pending.extend(feed(&mut h.machine, Input::Updates(batch)));
        tokio::time::advance(at.elapsed()).await;
    }
    let took = started.elapsed();
    let run = h.machine.reconciler.status().history.into_iter().next();
    println!(
        "{answered} answers to {calls} RECONCILE calls: {:.1} ms in all, {:.2} µs per answer; run: {:?}",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / answered.max(1) as f64,
        run.map(|r| (r.outcome, r.asked, r.answered, r.calls))
    );
    // An operator's explicit run of the 100,000 tasks: the step that
    // starts it, after a tick that made the full snapshot due by then (the
    // command's answer then carries a light one).
    tokio::time::advance(Duration::from_secs(60)).await;
    let at = StdInstant::now();
    h.machine.handle(Input::Tick, Instant::now());
    let tick = at.elapsed();
    let input = Input::Command {
        id: ReplyId(u64::MAX),
        request: Request::Reconcile(ReconcileKind::Explicit),
    };
    let at = StdInstant::now();
    let sent = started_calls(h.machine.handle(input, Instant::now()));
    println!(
        "an explicit run of every task asked for: its command's step {:.1} ms ({sent} task(s) \
         asked in its first slice); the tick before it (a full snapshot) {:.1} ms",
        at.elapsed().as_secs_f64() * 1e3,
        tick.as_secs_f64() * 1e3,
    );
}

/// Tasks asked about by the RECONCILE calls among `effects`.
fn started_calls(effects: Effects) -> usize {
    effects
        .items
        .iter()
        .map(|e| match e {
            Effect::Call {
                call: MesosCall::Reconcile(list),
                ..
            } => list.len(),
            _ => 0,
        })
        .sum()
}

/// Handles `input` and settles, as the runner does after a batch; returns
/// the Mesos calls made (nothing else is looked at: formatting or keeping
/// snapshots of 100,000 tasks would cost more than the core).
fn feed(machine: &mut Machine, input: Input) -> Vec<(RequestId, MesosCall)> {
    let now = Instant::now();
    let mut effects = machine.handle(input, now).items;
    effects.extend(machine.settle(now).items);
    effects
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call { id, call } => Some((id, call)),
            _ => None,
        })
        .collect()
}
