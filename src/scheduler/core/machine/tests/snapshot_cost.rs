//! What the leader's snapshot costs at 100,000 tasks: not a check (it is
//! `#[ignore]`d and asserts nothing about time), a probe to profile with.
//!
//! ```text
//! cargo test --release --lib snapshot_cost -- --ignored --nocapture
//! valgrind --tool=callgrind target/release/deps/mesos_appliance-… snapshot_cost --ignored
//! ```
//!
//! Ten services of 10,000 instances on 1,000 agents, loaded through the
//! term's sliced load (`startup::load_slice`) after SUBSCRIBED, as a
//! follower that takes over does; 95,000 tasks run, 5,000 stage. Then,
//! each timed alone (the step around it is not):
//!
//! - (a) the first full snapshot after the load;
//! - (b) a full snapshot after 1,000 records changed (TASK_RUNNING for
//!   1,000 staging tasks, as in a launch), five times; and one after
//!   1,000 updates that change no record (as a reconciliation's answers);
//! - (c) a light snapshot (a command's answer).
//!
//! (a) and (b) are also broken down, timed on a second machine in the
//! same state: the services' counts (`Shown::refresh`), then the rest of a
//! full snapshot. Each step of the load is timed too (the slices, then
//! the per-service steps).

use std::time::{Duration, Instant as StdInstant};

use super::*;
use crate::scheduler::StatusEntry;

const SERVICES: usize = 10;
const PER_SERVICE: u32 = 10_000;
const AGENTS: usize = 1_000;
/// Records changed between two steady-state full snapshots.
const CHANGED: usize = 1_000;
/// Rounds of changes.
const ROUNDS: usize = 5;

#[tokio::test(start_paused = true)]
#[ignore = "a probe to profile the snapshot with; run it in release"]
async fn snapshot_cost_at_100k_tasks() {
    let specs: Vec<ServiceSpec> = (0..SERVICES)
        .map(|s| service(&format!("svc{s}"), PER_SERVICE))
        .collect();
    let records = records(&specs);
    // (a) whole, and the load's steps.
    let mut whole = loaded(&specs, &records);
    let now = Instant::now();
    let started = StdInstant::now();
    let first = whole.machine.snapshot(now, false);
    let took = started.elapsed();
    println!(
        "(a) first full snapshot after the load: {} ({} tasks shown)",
        ms(took),
        first.tasks.len()
    );
    drop(first);
    // (a) in parts.
    let mut parted = loaded(&specs, &records);
    print_parts("(a) parts", &parts(&mut parted.machine, now));
    // (b) and (c): 1,000 records change between two full snapshots.
    let staging: Vec<String> = records
        .iter()
        .filter(|r| r.state == TaskState::TaskStaging)
        .map(|r| r.task_id.to_string())
        .collect();
    let mut uuid = 0u64;
    // The last round's tasks again: running already, nothing changes.
    let rounds = staging
        .chunks(CHANGED)
        .chain(staging.chunks(CHANGED).last());
    for (round, ids) in rounds.enumerate() {
        tokio::time::advance(Duration::from_secs(3)).await;
        let now = Instant::now();
        for h in [&mut whole, &mut parted] {
            change(h, ids, &mut uuid, now);
        }
        let what = if round < ROUNDS {
            "changes"
        } else {
            "updates changing nothing"
        };
        let started = StdInstant::now();
        let snapshot = whole.machine.snapshot(now, false);
        let took = started.elapsed();
        drop(snapshot);
        println!(
            "(b) round {round}: full snapshot after {CHANGED} {what}: {}",
            ms(took)
        );
        print_parts("(b) parts", &parts(&mut parted.machine, now));
        let started = StdInstant::now();
        let light = whole.machine.snapshot(now, true);
        println!(
            "(c) round {round}: light snapshot: {}",
            ms(started.elapsed())
        );
        drop(light);
    }
}

/// The stored records: instance `i` of each service runs on agent
/// `(service × instances + i) mod AGENTS`; the first `ROUNDS × CHANGED`
/// of the last service stage.
fn records(specs: &[ServiceSpec]) -> Vec<TaskRecord> {
    let entry = |at: f64, state| StatusEntry {
        at,
        state,
        source: Some(task_status::Source::Executor),
        reason: None,
        message: None,
        healthy: None,
    };
    let mut records = Vec::new();
    for (s, spec) in specs.iter().enumerate() {
        for i in 0..PER_SERVICE {
            let mut r = running_record(&spec.name, i, spec);
            let n = s * PER_SERVICE as usize + i as usize;
            r.agent_id = format!("agent-{}", n % AGENTS).into();
            r.hostname = format!("host-{}", n % AGENTS);
            r.timeline = vec![
                entry(1.0, TaskState::TaskStarting),
                entry(1.5, TaskState::TaskRunning),
            ];
            if s == specs.len() - 1 && (i as usize) < ROUNDS * CHANGED {
                r.state = TaskState::TaskStaging;
                r.timeline.clear();
            }
            records.push(r);
        }
    }
    records
}

/// A subscribed leader whose records were loaded slice by slice; prints
/// how long each step of the load took.
fn loaded(specs: &[ServiceSpec], records: &[TaskRecord]) -> Harness {
    let defaults = CoreConfig::default();
    let cfg = CoreConfig {
        snapshot_interval: defaults.snapshot_interval,
        schedule_interval: defaults.schedule_interval,
        load_per_step: defaults.load_per_step,
        ..config()
    };
    let mut h = Harness::new(cfg, Some(FRAMEWORK), specs, records);
    h.start();
    h.answer_stores();
    h.subscribe();
    let mut steps = Vec::new();
    let now = Instant::now();
    loop {
        // The list of records, then each next step, as the runner ticks.
        let Some((id, op)) = h.stores.pop_front() else {
            if !h.machine.loading_tasks() {
                break;
            }
            let started = StdInstant::now();
            let effects = h.machine.handle(Input::Tick, now);
            steps.push(started.elapsed());
            h.take(effects);
            continue;
        };
        let result = h.store.apply(op);
        let loading = h.machine.loading_tasks() || matches!(result, StoreResult::Tasks(_));
        let started = StdInstant::now();
        let effects = h.machine.handle(Input::Stored { id, result }, now);
        if loading {
            steps.push(started.elapsed());
        }
        h.take(effects);
    }
    assert!(h.machine.tasks.is_loaded());
    let max = steps.iter().max().copied().unwrap_or_default();
    let total: Duration = steps.iter().sum();
    println!(
        "load: {} steps, {} in all, {} at most; each: {}",
        steps.len(),
        ms(total),
        ms(max),
        steps.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(" ")
    );
    // Calls and writes the load's end made are left unanswered: the
    // snapshot does not wait for them.
    h.calls.clear();
    h
}

/// TASK_RUNNING for `ids`, the writes it makes answered.
fn change(h: &mut Harness, ids: &[String], uuid: &mut u64, now: Instant) {
    let statuses = ids
        .iter()
        .map(|id| {
            *uuid += 1;
            status(id, TaskState::TaskRunning, Some(&format!("u{uuid}")))
        })
        .collect();
    let effects = h.machine.handle(Input::Updates(statuses), now);
    h.take(effects);
    while let Some((id, op)) = h.stores.pop_front() {
        let result = h.store.apply(op);
        let effects = h.machine.handle(Input::Stored { id, result }, now);
        h.take(effects);
    }
    h.calls.clear();
}

/// A full snapshot's parts at `now`, each timed alone, in its order:
/// the services' counts, then the rest (the task list and the tasks by
/// agent where they are built again, the drains' tasks, what a light
/// snapshot has).
fn parts(machine: &mut Machine, now: Instant) -> Vec<(&'static str, Duration)> {
    use super::super::view::Shown;
    let now_secs = machine.unix(now);
    let mut out = Vec::new();
    let started = StdInstant::now();
    for name in machine.services.names() {
        let state = machine.services.state_mut(&name).expect("a service");
        let spec = &state.entry.spec;
        Shown::refresh(&mut state.shown, spec, &mut machine.tasks, now_secs, false);
    }
    out.push(("counts", started.elapsed()));
    let started = StdInstant::now();
    drop(machine.snapshot(now, false));
    out.push(("the rest", started.elapsed()));
    out
}

fn print_parts(what: &str, parts: &[(&str, Duration)]) {
    let total: Duration = parts.iter().map(|(_, d)| *d).sum();
    let each: Vec<String> = parts
        .iter()
        .map(|(n, d)| format!("{n} {}", ms(*d)))
        .collect();
    println!("{what}: {} = {}", ms(total), each.join(" + "));
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
