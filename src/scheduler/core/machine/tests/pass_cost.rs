//! What the scheduling pass costs at 100,000 tasks: not a check (it is
//! `#[ignore]`d and asserts nothing about time), a probe to profile with.
//!
//! ```text
//! cargo test --release --lib pass_cost -- --ignored --nocapture
//! valgrind --tool=callgrind target/release/deps/mesos_appliance-… pass_cost --ignored
//! ```
//!
//! Ten services of 10,000 instances, every task TASK_STAGING in the store;
//! then TASK_RUNNING for all of them in batches of 1,024 (the runner's
//! batch), each batch's writes answered, then one pass per batch (timed
//! alone), as while a launch of 100,000 tasks finishes.

use std::time::{Duration, Instant as StdInstant};

use super::*;

const SERVICES: usize = 10;
const PER_SERVICE: u32 = 10_000;
const BATCH: usize = 1024;

#[tokio::test(start_paused = true)]
#[ignore = "a probe to profile the pass with; run it in release"]
async fn pass_cost_while_100k_tasks_start() {
    // Unbounded (every changed service in each pass), then bounded.
    for budget in [usize::MAX, super::super::schedule::PASS_RECORDS] {
        probe(budget).await;
    }
}

async fn probe(budget: usize) {
    let specs: Vec<ServiceSpec> = (0..SERVICES)
        .map(|s| service(&format!("svc{s}"), PER_SERVICE))
        .collect();
    let mut records = Vec::new();
    for spec in &specs {
        for i in 0..PER_SERVICE {
            let mut r = running_record(&spec.name, i, spec);
            r.state = TaskState::TaskStaging;
            records.push(r);
        }
    }
    let ids: Vec<String> = records.iter().map(|r| r.task_id.to_string()).collect();
    let mut h = Harness::leader(&specs, &records);
    h.machine.pass.budget = budget;
    // The records load a slice per step (`CoreConfig::load_per_step`): no
    // pass runs before the last.
    while !h.machine.tasks.is_loaded() {
        h.advance(Duration::ZERO).await;
        h.answer_stores();
    }
    h.subscribe();
    h.answer_all();
    let mut passes = Vec::new();
    let mut uuid = 0u64;
    // Interleaved over the services, as updates arrive.
    let mut order: Vec<&String> = Vec::with_capacity(ids.len());
    for i in 0..PER_SERVICE as usize {
        for s in 0..SERVICES {
            order.push(&ids[s * PER_SERVICE as usize + i]);
        }
    }
    for batch in order.chunks(BATCH) {
        let statuses = batch
            .iter()
            .map(|id| {
                uuid += 1;
                status(id, TaskState::TaskRunning, Some(&format!("u{uuid}")))
            })
            .collect();
        let now = Instant::now();
        let effects = h.machine.handle(Input::Updates(statuses), now);
        h.take(effects);
        while let Some((id, op)) = h.stores.pop_front() {
            let result = h.store.apply(op);
            let effects = h.machine.handle(Input::Stored { id, result }, now);
            h.take(effects);
        }
        h.calls.clear();
        // The pass alone (`settle` runs it when its pacing allows; here
        // every batch gets one).
        let started = StdInstant::now();
        h.machine.schedule(now);
        passes.push(started.elapsed());
        assert!(h.machine.last_pass_records > 0, "the pass read records");
        let effects = h.machine.settle(now);
        h.take(effects);
        tokio::time::advance(Duration::from_millis(10)).await;
    }
    let total: Duration = passes.iter().sum();
    let max = passes.iter().max().copied().unwrap_or_default();
    println!(
        "budget {budget}: {} passes over {} records: {:.1} ms in all, {:.2} ms each on average, {:.2} ms at most",
        passes.len(),
        ids.len(),
        total.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3 / passes.len() as f64,
        max.as_secs_f64() * 1e3
    );
}

/// One service of [`PER_SERVICE`] RUNNING tasks (each with the usual
/// TASK_STARTING, TASK_RUNNING timeline), `outdated` of them on an older
/// spec; a leader whose pass has nothing to place. Returns the harness
/// with the service's last assessment forgotten, so the next pass reads
/// every record.
fn one_service(outdated: u32) -> Harness {
    one_service_beside(outdated, &[])
}

/// [`one_service`] with `others` (services without tasks) beside it.
fn one_service_beside(outdated: u32, others: &[ServiceSpec]) -> Harness {
    use crate::scheduler::StatusEntry;
    let spec = service("svc", PER_SERVICE);
    let entry = |at: f64, state| StatusEntry {
        at,
        state,
        source: Some(task_status::Source::Executor),
        reason: None,
        message: None,
        healthy: None,
    };
    let records: Vec<TaskRecord> = (0..PER_SERVICE)
        .map(|i| {
            let mut r = running_record(&spec.name, i, &spec);
            r.timeline = vec![
                entry(1.0, TaskState::TaskStarting),
                entry(1.5, TaskState::TaskRunning),
            ];
            if i % 2 == 1 && i / 2 < outdated {
                r.fingerprint = "0123456789abcdef".into();
            }
            r
        })
        .collect();
    let mut specs = vec![spec];
    specs.extend_from_slice(others);
    let mut h = Harness::leader(&specs, &records);
    h.subscribe();
    h.answer_all();
    h
}

/// The pass callgrind counts (`--toggle-collect='*measured_pass*'`): the
/// service's last assessment forgotten first, so it reads every record.
/// An uncounted pass goes first: the allocator's first large request
/// after the set-up consolidates the set-up's freed chunks (millions of
/// instructions that belong to no pass).
#[inline(never)]
fn measured_pass(h: &mut Harness, now: Instant) {
    h.machine.services.state_mut("svc").expect("svc").settled = None;
    h.machine.schedule(now);
}

/// [`measured_pass`] after an uncounted one (see there).
fn warm_then_measured_pass(h: &mut Harness, now: Instant) {
    h.machine.services.state_mut("svc").expect("svc").settled = None;
    h.machine.schedule(now);
    measured_pass(h, now);
}

/// One pass over one service of 10,000 records, every task current and
/// available; under callgrind:
///
/// ```text
/// valgrind --tool=callgrind --toggle-collect='*measured_pass*' \
///   target/release/deps/mesos_appliance-… --ignored --exact \
///   scheduler::core::machine::tests::pass_cost::pass_cost_of_one_current_service
/// ```
#[tokio::test(start_paused = true)]
#[ignore = "a probe to count instructions with; run it in release"]
async fn pass_cost_of_one_current_service() {
    let mut h = one_service(0);
    tokio::time::advance(Duration::from_secs(60)).await;
    warm_then_measured_pass(&mut h, Instant::now());
}

/// As [`pass_cost_of_one_current_service`], with every other task on an
/// older spec (a rollout under way: the replacement is looked for).
#[tokio::test(start_paused = true)]
#[ignore = "a probe to count instructions with; run it in release"]
async fn pass_cost_of_one_service_half_outdated() {
    let mut h = one_service(PER_SERVICE / 2);
    tokio::time::advance(Duration::from_secs(60)).await;
    warm_then_measured_pass(&mut h, Instant::now());
}

/// A pass that launches: `svc` of [`PER_SERVICE`] tasks all running, and
/// `new` of [`PER_SERVICE`] instances without a task, with offers held for
/// all of them (placed up to `launching_max`, 4,000). Under callgrind, as
/// [`pass_cost_of_one_current_service`] (this name instead); the items to
/// read are `ReviveWatch::waits`, `placement::plan` and `launch`
/// (`TaskTable::insert_launching`, the store operations).
#[tokio::test(start_paused = true)]
#[ignore = "a probe to count instructions with; run it in release"]
async fn pass_cost_of_a_launching_pass() {
    let mut h = one_service_beside(0, &[service("new", PER_SERVICE)]);
    let offers = (0..8)
        .map(|i| {
            let resources = Resources::parse("cpus:1000;mem:1000000")
                .expect("resources")
                .to_protos(None);
            v1::Offer {
                id: v1::OfferId {
                    value: format!("o{i}"),
                },
                agent_id: v1::AgentId {
                    value: format!("agent-o{i}"),
                },
                hostname: format!("o{i}.test"),
                resources,
                ..Default::default()
            }
        })
        .collect();
    tokio::time::advance(Duration::from_secs(60)).await;
    let now = Instant::now();
    // Uncounted, as in `warm_then_measured_pass`: no offers yet.
    h.machine.services.state_mut("svc").expect("svc").settled = None;
    h.machine.schedule(now);
    h.machine.on_offers(offers, now);
    measured_pass(&mut h, now);
    assert!(!h.machine.launches.groups.is_empty(), "the pass launched");
}
