//! `evacuation::look` is linear in a service's records: it asks how each
//! record leaves once, and it decides what the quadratic look it replaced
//! decided (its way of finding a leaving task's copies kept here as the
//! reference; both decide each task's step by `evacuation::step`), for
//! any records and any leaving set (a property over random services).

use std::cell::Cell;
use std::time::Duration;

use proptest::prelude::*;

use super::super::evacuation::{Leave, Looking, Step, look};
use super::*;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::is_live;
use crate::scheduler::rules::rollout::Judge;

/// The launch timeout the looks here are given: shorter than some of the
/// property's ages, longer than others.
const LAUNCH: Duration = Duration::from_secs(10);

/// The look as it was: for each leaving task, every record of the service
/// again, asking how each of its instance's copies leaves.
fn reference(
    spec: &ServiceSpec,
    records: &[TaskRecord],
    leaving: impl Fn(&TaskRecord) -> Option<Leave>,
    dying: impl Fn(&TaskRecord) -> bool,
    now: f64,
) -> Vec<(TaskId, Step)> {
    let judge = Judge::new(spec);
    let mut available = records
        .iter()
        .filter(|t| t.service == spec.name && !dying(t) && judge.available(t, now))
        .count() as u32;
    let mut steps = Vec::new();
    for task in records {
        if !is_live(task) || dying(task) {
            continue;
        }
        let Some(leave) = leaving(task) else {
            continue;
        };
        let copies: Vec<&TaskRecord> = records
            .iter()
            .filter(|o| {
                o.instance == task.instance
                    && o.task_id != task.task_id
                    && is_live(o)
                    && !dying(o)
                    && leaving(o).is_none()
            })
            .collect();
        let step = Looking::new(spec, now, LAUNCH).step(task, leave, &copies, &mut available);
        steps.push((task.task_id.clone(), step));
    }
    steps
}

/// A record of `spec`'s instance `instance` on agent `agent`.
fn record(
    spec: &ServiceSpec,
    n: usize,
    instance: u32,
    agent: u8,
    state: TaskState,
    healthy: Option<bool>,
    since: f64,
) -> TaskRecord {
    TaskRecord {
        instance,
        fingerprint: spec.fingerprint(),
        agent_id: format!("agent-{agent}").into(),
        launched_at: since,
        updated_at: since,
        healthy,
        ..TaskRecord::sample(&format!("{}.{n}", spec.name), &spec.name, state)
    }
}

/// Tasks on agent-0 leave with `floor`.
fn drained(floor: Option<u32>) -> impl Fn(&TaskRecord) -> Option<Leave> {
    move |t: &TaskRecord| {
        (t.agent_id.as_str() == "agent-0").then(|| Leave {
            floor,
            why: "drained".into(),
            unwanted: "not wanted".into(),
        })
    }
}

/// A 1,000-instance service, 100 of whose instances run on the drained
/// agent with a copy elsewhere: each record's way of leaving is asked for
/// once. (The quadratic look asked again for each leaving task's copies:
/// 1,100 times here, and for a drain of a hundred tasks of a
/// 10,000-instance service, a million times per snapshot.)
#[test]
fn a_look_asks_once_per_record() {
    let spec = service("web", 1_000);
    let mut records = Vec::new();
    for i in 0..1_000u32 {
        let agent = if i < 100 { 0 } else { 1 + (i % 7) as u8 };
        let r = record(
            &spec,
            records.len(),
            i,
            agent,
            TaskState::TaskRunning,
            None,
            1.0,
        );
        records.push(r);
    }
    for i in 0..100u32 {
        let r = record(
            &spec,
            records.len(),
            i,
            9,
            TaskState::TaskRunning,
            None,
            1.0,
        );
        records.push(r);
    }
    let asked = Cell::new(0usize);
    let leave = drained(None);
    let steps = look(
        &spec,
        &records,
        |t| {
            asked.set(asked.get() + 1);
            leave(t)
        },
        |_| false,
        100.0,
        LAUNCH,
    );
    assert_eq!(steps.len(), 100, "every drained task has a step");
    assert!(
        steps.iter().all(|(_, s)| matches!(s, Step::Kill { .. })),
        "every drained task has an available copy"
    );
    assert!(
        asked.get() <= records.len(),
        "asked {} times for {} records",
        asked.get(),
        records.len()
    );
}

/// A kill decided but not stored yet (`dying`) counts against the floor:
/// with instance 0's only task on agent-1 dying, the scale-down's
/// unwanted leaver on the drained agent-0 is the last available task of
/// the service and a floor of one holds it; without the dying task
/// counted, the floor passed its kill and left none.
#[test]
fn a_kill_decided_elsewhere_counts_against_the_floor() {
    let spec = service("web", 1);
    let records = [
        record(&spec, 0, 0, 1, TaskState::TaskRunning, None, 1.0),
        record(&spec, 1, 1, 0, TaskState::TaskRunning, None, 1.0),
    ];
    let dying = |t: &TaskRecord| t.task_id.as_str() == "web.0";
    let steps = look(&spec, &records, drained(Some(1)), dying, 100.0, LAUNCH);
    assert!(
        matches!(&steps[..], [(id, Step::Floor { replacement: None, .. })] if id.as_str() == "web.1"),
        "{steps:?}"
    );
    let steps = look(&spec, &records, drained(Some(1)), |_| false, 100.0, LAUNCH);
    assert!(
        matches!(&steps[..], [(_, Step::Unwanted { .. })]),
        "{steps:?}"
    );
}

/// A leaver whose replacement is still in TASK_STAGING waits, and the
/// wait says for how long the copy has been so and when the launch
/// timeout kills and replaces it (then, once past it, that it is killed
/// now); a replacement RUNNING but unhealthy names no timeout.
#[test]
fn a_wait_on_a_staging_copy_names_its_age_and_its_deadline() {
    let spec = service("web", 1);
    let staging = [
        record(&spec, 0, 0, 0, TaskState::TaskRunning, None, 1.0),
        record(&spec, 1, 0, 1, TaskState::TaskStaging, None, 100.0),
    ];
    let why = |records: &[TaskRecord], now: f64| match &look(
        &spec,
        records,
        drained(None),
        |_| false,
        now,
        LAUNCH,
    )[..]
    {
        [(_, Step::WaitForHealth { why, .. })] => why.clone(),
        steps => panic!("{steps:?}"),
    };
    assert_eq!(
        why(&staging, 104.0),
        "replacement web.1 is TASK_STAGING for 4s, not yet available; killed and replaced \
         after 10s (--task-launch-timeout)"
    );
    assert_eq!(
        why(&staging, 112.0),
        "replacement web.1 is TASK_STAGING for 12s, not yet available; killed and replaced \
         now (past --task-launch-timeout 10s)"
    );
    let unhealthy = [
        staging[0].clone(),
        record(&spec, 1, 0, 1, TaskState::TaskRunning, Some(false), 100.0),
    ];
    assert_eq!(
        why(&unhealthy, 104.0),
        "replacement web.1 is TASK_RUNNING, unhealthy, not yet available"
    );
}

fn any_state() -> impl Strategy<Value = TaskState> {
    prop_oneof![
        Just(TaskState::TaskRunning),
        Just(TaskState::TaskRunning),
        Just(TaskState::TaskStaging),
        Just(TaskState::TaskStarting),
        Just(TaskState::TaskKilling),
        Just(TaskState::TaskFinished),
        Just(TaskState::TaskFailed),
    ]
}

proptest! {
    /// For random records (instances, agents, states, health, ages) and a
    /// random floor, the linear look decides as the reference does, step
    /// for step, in the same order.
    #[test]
    fn the_linear_look_decides_as_the_quadratic_one(
        tasks in prop::collection::vec(
            (0u32..6, 0u8..4, any_state(), prop::option::of(any::<bool>()), 0u32..20),
            0..40,
        ),
        dying in prop::collection::hash_set(0usize..40, 0..6),
        floor in prop::option::of(0u32..8),
        now in 0u32..30,
    ) {
        let spec = service("web", 6);
        let records: Vec<TaskRecord> = tasks
            .iter()
            .enumerate()
            .map(|(n, (instance, agent, state, healthy, since))| {
                record(&spec, n, *instance, *agent, *state, *healthy, f64::from(*since))
            })
            .collect();
        let now = f64::from(now);
        let dies = |t: &TaskRecord| {
            dying.iter().any(|n| t.task_id.as_str() == format!("web.{n}"))
        };
        let fast = look(&spec, &records, drained(floor), dies, now, LAUNCH);
        let slow = reference(&spec, &records, drained(floor), dies, now);
        prop_assert_eq!(fast, slow);
    }
}
