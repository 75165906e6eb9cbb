//! A framework the master removed: its live records become TASK_KILLED as
//! the master recorded them, and no KILL goes out (`machine::removed`).

use std::time::Duration;

use super::*;
use crate::mesos::client::{ErrorKind, StopReason};
use crate::scheduler::records::KillRequest;
use crate::scheduler::snapshot::FrameworkState;

/// The master's answer to SUBSCRIBE with a removed framework's ID.
fn removed() -> Input {
    Input::ClientStopped(StopReason::Error(ErrorKind::Removed))
}

/// Two running tasks, one marked for killing by an earlier term, one
/// already finished.
fn records(spec: &ServiceSpec) -> Vec<TaskRecord> {
    let mut marked = running_record("web", 2, spec);
    marked.kill = Some(KillRequest {
        reason: "scaled down".into(),
        requested_at: 1.0,
        attempts: 1,
    });
    let mut finished = running_record("web", 3, spec);
    finished.state = TaskState::TaskFinished;
    vec![
        running_record("web", 0, spec),
        running_record("web", 1, spec),
        marked,
        finished,
    ]
}

/// Checks the store and the snapshot after the removal was handled.
async fn assert_settled(h: &mut Harness) {
    for task in ["web.0.stored", "web.1.stored", "web.2.stored"] {
        let record = h.stored(task).expect("the record is kept");
        assert_eq!(record.state, TaskState::TaskKilled, "{task}");
        let last = record.timeline.last().expect("a timeline entry");
        assert_eq!(last.source, Some(task_status::Source::Master));
        assert_eq!(last.reason, Some(task_status::Reason::FrameworkRemoved));
        let message = last.message.as_deref().unwrap_or_default();
        assert!(message.contains("Framework fw-1 removed"), "{message}");
        assert_eq!(h.store.task_writes.get(task), Some(&1), "one write each");
    }
    assert!(
        !h.store.task_writes.contains_key("web.3.stored"),
        "a terminal record is left alone"
    );
    assert!(h.acks.is_empty(), "nothing to acknowledge");
    let calls = h.drain_call_log();
    assert!(
        !Harness::kinds_of_calls(&calls).contains(&"KILL"),
        "no KILL for tasks the master killed: {calls:?}"
    );
    assert!(Harness::launched(&calls).is_empty());
    let s = h.snapshot().await;
    assert_eq!(s.framework.state, FrameworkState::Removed);
    assert!(
        s.tasks.iter().all(|t| t.is_terminal()),
        "{:?}",
        s.tasks
            .iter()
            .map(|t| (&t.task_id, t.state))
            .collect::<Vec<_>>()
    );
    assert_eq!(s.services[0].running, 0);
    assert!(s.unrecorded_kills.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_removed_framework_s_records_become_killed_without_a_kill() {
    let spec = service("web", 3);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &records(&spec));
    assert!(h.machine.tasks.is_loaded());
    h.feed(removed());
    h.answer_all();
    // Long past every kill retry and housekeeping pass: still no KILL.
    h.advance(Duration::from_secs(60)).await;
    h.answer_all();
    assert_settled(&mut h).await;
}

#[tokio::test(start_paused = true)]
async fn a_removal_seen_before_the_records_are_read_is_applied_once_they_are() {
    let spec = service("web", 3);
    let mut h = Harness::new(
        config(),
        Some(FRAMEWORK),
        std::slice::from_ref(&spec),
        &records(&spec),
    );
    h.start();
    // The term's reads, up to the task records (read beside SUBSCRIBE).
    while !matches!(h.stores.front(), Some((_, StoreOp::ListTasks)) | None) {
        h.answer_next_store();
    }
    assert!(matches!(h.stores.front(), Some((_, StoreOp::ListTasks))));
    h.feed(removed());
    assert!(h.store.task_writes.is_empty());
    h.answer_all();
    h.advance(Duration::from_secs(60)).await;
    h.answer_all();
    assert_settled(&mut h).await;
}

#[tokio::test(start_paused = true)]
async fn an_end_stored_first_is_not_overwritten_by_the_removal() {
    let spec = service("web", 3);
    let mut h = Harness::running(&spec);
    // An executor's update is being stored when the removal shows.
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("u1")));
    assert!(matches!(h.stores.front(), Some((_, StoreOp::PutTask(..)))));
    h.feed(removed());
    h.answer_all();
    let record = h.stored("web.0.stored").unwrap();
    assert_eq!(
        record.state,
        TaskState::TaskFailed,
        "already terminal by the time its turn came"
    );
    assert_eq!(h.store.task_writes.get("web.0.stored"), Some(&1));
    assert_eq!(h.acks.len(), 1, "the executor's update is acknowledged");
}
