//! Housekeeping's timers (`housekeeping.rs`, `partition.rs`), read through
//! the table's [`aging`](super::super::aging) index: a task stuck in
//! TASK_STAGING or TASK_STARTING past the transient timeout is killed, an
//! ended record past the retention is deleted, a task given up by the
//! partition rules is deleted once the retention has passed since; a
//! record that changed since is not, and is when its own time comes.

use std::time::Duration;

use super::*;
use crate::scheduler::records::PartitionMark;
use crate::scheduler::spec::unreachable::{KillOnReturn, UnreachablePolicy};

/// The term starts at this UNIX time (`Harness::new`).
const START: f64 = 1_000_000.0;

/// A stored record of `service`'s instance `instance` in `state`, last
/// changed `age` seconds before the term's start.
fn aged(spec: &ServiceSpec, instance: u32, state: TaskState, age: f64) -> TaskRecord {
    TaskRecord {
        state,
        updated_at: START - age,
        ..running_record(&spec.name, instance, spec)
    }
}

/// A subscribed leader of `spec` whose store holds `records`, I/O settled.
fn subscribed(spec: &ServiceSpec, records: &[TaskRecord]) -> Harness {
    let mut h = Harness::leader(std::slice::from_ref(spec), records);
    h.subscribe();
    h.answer_all();
    h
}

/// `secs` seconds on, I/O settled.
async fn after(h: &mut Harness, secs: u64) {
    h.advance(Duration::from_secs(secs)).await;
    h.answer_all();
}

/// The task IDs the store holds.
fn stored(h: &Harness) -> Vec<String> {
    h.store.tasks.keys().cloned().collect()
}

#[tokio::test(start_paused = true)]
async fn a_task_stuck_in_a_transient_state_is_killed_once_the_timeout_is_over() {
    // The default transient timeout: 300 s.
    let spec = service("web", 3);
    let records = [
        aged(&spec, 0, TaskState::TaskStaging, 298.0),
        aged(&spec, 1, TaskState::TaskStarting, 100.0),
        aged(&spec, 2, TaskState::TaskRunning, 10_000.0),
    ];
    let mut h = subscribed(&spec, &records);
    after(&mut h, 4).await;
    assert_eq!(h.marked(), ["web.0.stored"], "only the one past 300 s");
    after(&mut h, 196).await;
    assert_eq!(h.marked(), ["web.0.stored"], "web.1 is at 299 s");
    after(&mut h, 3).await;
    assert_eq!(h.marked(), ["web.0.stored", "web.1.stored"]);
}

#[tokio::test(start_paused = true)]
async fn an_ended_record_is_deleted_once_its_retention_is_over() {
    // The default retention: 3,600 s.
    let spec = service("web", 0);
    let records = [
        aged(&spec, 0, TaskState::TaskFinished, 3_598.0),
        aged(&spec, 1, TaskState::TaskKilled, 3_000.0),
        aged(&spec, 2, TaskState::TaskFailed, 10.0),
    ];
    let mut h = subscribed(&spec, &records);
    after(&mut h, 4).await;
    assert_eq!(stored(&h), ["web.1.stored", "web.2.stored"]);
    after(&mut h, 600).await;
    assert_eq!(stored(&h), ["web.2.stored"]);
}

#[tokio::test(start_paused = true)]
async fn a_given_up_task_is_deleted_once_the_retention_has_passed_since() {
    let mut spec = service("web", 0);
    spec.unreachable = Some(UnreachablePolicy {
        inactive_after: Duration::from_secs(20),
        expunge_after: Duration::from_secs(40),
        kill_on_return: KillOnReturn::Old,
    });
    let unreachable = |instance, since_age: f64| TaskRecord {
        partition: Some(PartitionMark {
            unreachable_since: START - since_age,
            returned_at: None,
        }),
        ..aged(&spec, instance, TaskState::TaskUnreachable, since_age)
    };
    // Given up 40 s after it became unreachable; forgotten 3,600 s later.
    let records = [unreachable(0, 3_638.0), unreachable(1, 3_000.0)];
    let mut h = subscribed(&spec, &records);
    after(&mut h, 4).await;
    assert_eq!(stored(&h), ["web.1.stored"]);
    after(&mut h, 700).await;
    assert!(stored(&h).is_empty());
}
