//! Status updates: acknowledged after their record is stored, not written
//! again when they change nothing, one write per task at a time; kills
//! marked, then retried with backoff.

use std::time::Duration;

use super::*;
use crate::scheduler::records::KillRequest;

fn staging_record(spec: &ServiceSpec) -> TaskRecord {
    TaskRecord {
        state: TaskState::TaskStaging,
        ..running_record(&spec.name, 0, spec)
    }
}

fn acked(h: &Harness) -> Vec<String> {
    h.acks
        .iter()
        .map(|a| String::from_utf8_lossy(&a.uuid).into_owned())
        .collect()
}

/// TASK_RUNNING with a health result: stored before it is acknowledged (a
/// launch's first TASK_RUNNING without one is acknowledged ahead of its
/// write, `a_launch_s_starting_and_first_running_are_acknowledged_at_once`).
fn checked_running(task: &str, uuid: &str) -> v1::TaskStatus {
    v1::TaskStatus {
        healthy: Some(true),
        ..status(task, TaskState::TaskRunning, Some(uuid))
    }
}

#[tokio::test(start_paused = true)]
async fn an_update_is_acknowledged_only_after_its_record_is_stored() {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[staging_record(&spec)]);
    h.subscribe();
    h.answer_all();
    h.update(checked_running("web.0.stored", "u1"));
    assert!(
        matches!(h.stores.front(), Some((_, StoreOp::PutTask(r, Expect::Version(3)))) if r.state == TaskState::TaskRunning)
    );
    assert!(h.acks.is_empty(), "not before the write");
    h.answer_stores();
    assert_eq!(acked(&h), ["u1"]);
    assert_eq!(
        h.stored("web.0.stored").unwrap().state,
        TaskState::TaskRunning
    );

    // A write that fails is not acknowledged: the agent sends it again.
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("u2")));
    h.fail_next_store(CoordinationError::Unavailable("connection loss".into()));
    assert_eq!(acked(&h), ["u1"]);
    assert!(
        h.logs.iter().any(|l| l.contains("not acknowledged")),
        "{:?}",
        h.logs
    );
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("u2")));
    h.answer_stores();
    assert_eq!(acked(&h), ["u1", "u2"]);
}

#[tokio::test(start_paused = true)]
async fn an_update_that_changes_nothing_is_not_written_again() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    // An agent re-sending RUNNING (our acknowledgement was lost), and the
    // master answering a reconciliation: both confirm the stored state.
    h.update(status(
        "web.0.stored",
        TaskState::TaskRunning,
        Some("again"),
    ));
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    assert!(h.stores.is_empty(), "{:?}", h.stores);
    assert_eq!(
        acked(&h),
        ["again"],
        "acknowledged at once: the record holds it"
    );
    assert!(h.store.task_writes.is_empty());
    assert!(
        h.machine
            .tasks
            .get("web.0.stored")
            .unwrap()
            .confirmed_at
            .is_some()
    );
    // A health check's report is news, though the state is the same.
    let report = v1::TaskStatus {
        reason: Some(task_status::Reason::TaskHealthCheckStatusUpdated as i32),
        healthy: Some(false),
        ..status("web.0.stored", TaskState::TaskRunning, Some("health"))
    };
    h.update(report);
    assert_eq!(h.stores.len(), 1);
    h.answer_stores();
    assert_eq!(acked(&h), ["again", "health"]);
    // So is a new state.
    h.update(status("web.0.stored", TaskState::TaskFinished, Some("end")));
    assert_eq!(h.stores.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn updates_of_one_task_wait_for_its_write_in_flight() {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[staging_record(&spec)]);
    h.subscribe();
    h.answer_all();
    h.update(status("web.0.stored", TaskState::TaskRunning, Some("a")));
    h.update(status("web.0.stored", TaskState::TaskFinished, Some("b")));
    assert_eq!(h.stores.len(), 1, "the second waits for the first's write");
    h.answer_next_store();
    assert_eq!(acked(&h), ["a"]);
    assert!(
        matches!(h.stores.front(), Some((_, StoreOp::PutTask(r, Expect::Version(4)))) if r.state == TaskState::TaskFinished)
    );
    h.answer_next_store();
    assert_eq!(acked(&h), ["a", "b"]);
    let record = h.stored("web.0.stored").unwrap();
    assert_eq!(record.state, TaskState::TaskFinished);
    assert_eq!(record.timeline.len(), 2);
}

/// A launch's first steps are acknowledged ahead of the store
/// (`tasks::ahead_of_store`): the executor's TASK_STARTING after a stored
/// TASK_STAGING is not written (the table's copy takes it, one write
/// instead of two), and the first TASK_RUNNING is acknowledged at once
/// while its write, carrying both, is out. What follows waits for that
/// write and is stored before it is acknowledged. Any other TASK_STARTING
/// (a killed task's, one after TASK_RUNNING) is written as before.
#[tokio::test(start_paused = true)]
async fn a_launch_s_starting_and_first_running_are_acknowledged_at_once() {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[staging_record(&spec)]);
    h.subscribe();
    h.answer_all();
    h.update(status("web.0.stored", TaskState::TaskStarting, Some("s")));
    assert!(h.stores.is_empty(), "{:?}", h.stores);
    assert_eq!(acked(&h), ["s"], "acknowledged at once");
    assert_eq!(
        h.stored("web.0.stored").unwrap().state,
        TaskState::TaskStaging,
        "the store keeps what it had"
    );
    let entry = h.machine.tasks.get("web.0.stored").unwrap();
    assert_eq!(entry.record.state, TaskState::TaskStarting);
    assert!(!entry.writing);

    h.update(status("web.0.stored", TaskState::TaskRunning, Some("r")));
    assert!(
        matches!(h.stores.front(), Some((_, StoreOp::PutTask(r, Expect::Version(3)))) if r.state == TaskState::TaskRunning),
        "a compare-and-set on the version STAGING was stored with: {:?}",
        h.stores
    );
    assert_eq!(acked(&h), ["s", "r"], "RUNNING does not wait for its write");
    let entry = h.machine.tasks.get("web.0.stored").unwrap();
    assert_eq!(
        entry.record.state,
        TaskState::TaskRunning,
        "the table's copy"
    );
    assert!(entry.writing);
    // An end meanwhile waits for that write, and is acknowledged only
    // once stored itself.
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("f")));
    h.answer_next_store();
    let record = h.stored("web.0.stored").unwrap();
    assert_eq!(record.state, TaskState::TaskRunning);
    let states: Vec<TaskState> = record.timeline.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [TaskState::TaskStarting, TaskState::TaskRunning],
        "the RUNNING write carries the STARTING entry"
    );
    assert_eq!(acked(&h), ["s", "r"], "the end waits for its write");
    assert!(
        matches!(h.stores.front(), Some((_, StoreOp::PutTask(r, Expect::Version(4)))) if r.state == TaskState::TaskFailed),
        "{:?}",
        h.stores
    );
    h.answer_stores();
    assert_eq!(acked(&h), ["s", "r", "f"]);
}

/// A TASK_STARTING that is not the first step of a launch (one after
/// TASK_RUNNING) is written before it is acknowledged, and so is a
/// TASK_RUNNING that is not the first.
#[tokio::test(start_paused = true)]
async fn a_starting_or_running_after_running_is_written_first() {
    let spec = service("web", 1);
    let mut ran = staging_record(&spec);
    ran.apply(&status("web.0.stored", TaskState::TaskRunning, None), 1.0);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[ran]);
    h.subscribe();
    h.answer_all();
    h.update(status(
        "web.0.stored",
        TaskState::TaskStarting,
        Some("late"),
    ));
    assert_eq!(h.stores.len(), 1, "{:?}", h.stores);
    assert!(acked(&h).is_empty());
    h.answer_stores();
    assert_eq!(acked(&h), ["late"]);
    h.update(status(
        "web.0.stored",
        TaskState::TaskRunning,
        Some("again"),
    ));
    assert_eq!(h.stores.len(), 1, "{:?}", h.stores);
    assert_eq!(acked(&h), ["late"]);
    h.answer_stores();
    assert_eq!(acked(&h), ["late", "again"]);
}

/// A leader of `web` (1 instance, its task stored in TASK_STAGING) whose
/// first TASK_RUNNING (uuid `r`) was acknowledged ahead of its write, and
/// that write failed.
fn running_write_failed() -> Harness {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[staging_record(&spec)]);
    h.subscribe();
    h.answer_all();
    h.update(status("web.0.stored", TaskState::TaskRunning, Some("r")));
    assert_eq!(acked(&h), ["r"]);
    h.fail_next_store(CoordinationError::Unavailable("connection loss".into()));
    h
}

/// A first TASK_RUNNING whose write fails stays in the table (it was
/// acknowledged: the agent does not send it again); the record's next
/// write stores it.
#[tokio::test(start_paused = true)]
async fn a_first_running_whose_write_fails_is_kept_for_the_next_write() {
    let mut h = running_write_failed();
    assert!(
        h.logs.iter().any(|l| l.contains("kept in memory")),
        "{:?}",
        h.logs
    );
    let entry = h.machine.tasks.get("web.0.stored").unwrap();
    assert_eq!(entry.record.state, TaskState::TaskRunning);
    assert!(!entry.writing);
    assert_eq!(
        h.stored("web.0.stored").unwrap().state,
        TaskState::TaskStaging
    );
    h.update(status("web.0.stored", TaskState::TaskFinished, Some("f")));
    h.answer_stores();
    assert_eq!(acked(&h), ["r", "f"]);
    let record = h.stored("web.0.stored").unwrap();
    let states: Vec<TaskState> = record.timeline.iter().map(|e| e.state).collect();
    assert_eq!(states, [TaskState::TaskRunning, TaskState::TaskFinished]);
}

/// The agent's repeat of a first TASK_RUNNING whose write failed (the
/// first ACKNOWLEDGE lost, or crossed by the agent's retry) is stored
/// before it is acknowledged again: the table's copy kept the RUNNING, but
/// the store does not hold it, and the repeat is the last retry the agent
/// makes of it. A reconciliation answer that confirms the kept copy writes
/// it too (property seed 9971670278345447695).
#[tokio::test(start_paused = true)]
async fn a_repeat_of_a_first_running_whose_write_failed_is_stored_before_its_ack() {
    let mut h = running_write_failed();
    h.stores.clear();

    h.update(status("web.0.stored", TaskState::TaskRunning, Some("r")));
    assert_eq!(acked(&h), ["r"], "not acknowledged again before a write");
    assert!(
        matches!(h.stores.front(), Some((_, StoreOp::PutTask(r, Expect::Version(3)))) if r.state == TaskState::TaskRunning),
        "the kept copy is written again: {:?}",
        h.stores
    );
    h.answer_stores();
    assert_eq!(acked(&h), ["r", "r"]);
    assert_eq!(
        h.stored("web.0.stored").unwrap().state,
        TaskState::TaskRunning
    );
    // Stored now: a further repeat only confirms it.
    h.update(status("web.0.stored", TaskState::TaskRunning, Some("r")));
    assert!(h.stores.is_empty(), "{:?}", h.stores);
    assert_eq!(acked(&h), ["r", "r", "r"]);
}

/// The same with the master's reconciliation answer (no uuid): it writes
/// the kept TASK_RUNNING, and nothing is acknowledged.
#[tokio::test(start_paused = true)]
async fn a_reconciliation_answer_stores_a_first_running_whose_write_failed() {
    let mut h = running_write_failed();
    h.stores.clear();
    h.update(status("web.0.stored", TaskState::TaskRunning, None));
    assert_eq!(h.stores.len(), 1, "{:?}", h.stores);
    h.answer_stores();
    assert_eq!(acked(&h), ["r"]);
    assert_eq!(
        h.stored("web.0.stored").unwrap().state,
        TaskState::TaskRunning
    );
}

/// A staging task marked for killing stores its TASK_STARTING as any
/// update: the kill's record is the one a new leader resumes from.
#[tokio::test(start_paused = true)]
async fn a_starting_of_a_task_marked_for_killing_is_written() {
    let spec = service("web", 1);
    let marked = TaskRecord {
        kill: Some(KillRequest::new("test".into(), 1.0)),
        ..staging_record(&spec)
    };
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[marked]);
    h.subscribe();
    h.answer_all();
    h.stores.clear();
    h.update(status("web.0.stored", TaskState::TaskStarting, Some("s")));
    assert_eq!(h.stores.len(), 1, "{:?}", h.stores);
    assert!(acked(&h).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_version_conflict_reads_the_record_again() {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[staging_record(&spec)]);
    h.subscribe();
    h.answer_all();
    // Someone else wrote the record meanwhile.
    h.store.tasks.get_mut("web.0.stored").unwrap().1 = 9;
    h.update(checked_running("web.0.stored", "u"));
    h.answer_next_store();
    assert!(h.acks.is_empty());
    assert!(matches!(h.stores.front(), Some((_, StoreOp::ReadTask(_)))));
    h.answer_next_store();
    assert_eq!(
        h.machine.tasks.get("web.0.stored").unwrap().version,
        Some(9)
    );
    // The agent sends the update again; now it is stored.
    h.update(checked_running("web.0.stored", "u"));
    h.answer_stores();
    assert_eq!(acked(&h), ["u"]);
}

#[tokio::test(start_paused = true)]
async fn a_surplus_task_is_marked_then_killed_with_backoff_until_it_ends() {
    let spec = service("web", 1);
    let tasks = [
        running_record("web", 0, &spec),
        running_record("web", 1, &spec),
    ];
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    // The mark comes first, stored; no KILL before it is.
    let calls = h.drain_call_log();
    assert!(!Harness::kinds_of_calls(&calls).contains(&"KILL"));
    let marked = h
        .stores
        .iter()
        .find_map(|(_, op)| match op {
            StoreOp::PutTask(r, _) => r.kill.clone(),
            _ => None,
        })
        .expect("a kill mark");
    assert_eq!(marked.reason, "scaled down");
    h.answer_all();
    let t0 = Instant::now();
    let mut kills = vec![];
    for _ in 0..20 {
        let calls = h.drain_call_log();
        if calls
            .iter()
            .any(|c| matches!(c, MesosCall::Kill { task_id, .. } if task_id == "web.1.stored"))
        {
            kills.push((Instant::now() - t0).as_secs());
        }
        h.advance(Duration::from_secs(1)).await;
        h.answer_all();
    }
    // 2, 4, 8, 8 s apart.
    assert_eq!(kills, [0, 2, 6, 14]);
    h.update(status("web.1.stored", TaskState::TaskKilled, Some("k")));
    h.answer_all();
    h.drain_call_log();
    h.advance(Duration::from_secs(20)).await;
    let calls = h.drain_call_log();
    assert!(
        !Harness::kinds_of_calls(&calls).contains(&"KILL"),
        "{calls:?}"
    );
    assert_eq!(h.snapshot().await.services[0].running, 1);
}

#[tokio::test(start_paused = true)]
async fn a_new_term_resumes_the_kills_of_the_last_one() {
    let spec = service("web", 1);
    let mut doomed = running_record("web", 1, &spec);
    doomed.kill = Some(crate::scheduler::records::KillRequest {
        reason: "scaled down".into(),
        requested_at: 1.0,
        attempts: 3,
    });
    let mut h = Harness::leader(
        std::slice::from_ref(&spec),
        &[running_record("web", 0, &spec), doomed],
    );
    h.subscribe();
    let calls = h.drain_call_log();
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, MesosCall::Kill { task_id, .. } if task_id == "web.1.stored")),
        "{calls:?}"
    );
    assert!(h.stores.is_empty(), "already marked: no new write");
}

/// A batch of updates that only confirm their records (an explicit
/// reconciliation's answers) asks for no scheduling pass; one that changes
/// a record, or ends a run, does.
#[tokio::test(start_paused = true)]
async fn confirmations_alone_ask_for_no_pass() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    let task = "web.0.stored";
    let batch = |h: &mut Harness, updates: Vec<v1::TaskStatus>| {
        h.machine.needs_schedule = false;
        let effects = h.machine.handle(Input::Updates(updates), Instant::now());
        h.take(effects);
        h.machine.needs_schedule
    };
    let confirm = vec![
        reconciled(task, TaskState::TaskRunning),
        status(task, TaskState::TaskRunning, None),
    ];
    // The subscription's explicit run is under way: its last answer ends it.
    assert!(h.machine.reconciler.status().running.is_some());
    assert!(batch(&mut h, confirm.clone()), "the run ended");
    // No run under way: answers that change nothing.
    assert!(h.machine.reconciler.status().running.is_none());
    assert!(!batch(&mut h, confirm), "nothing changed");
    let failed = status(task, TaskState::TaskFailed, Some("u-failed"));
    assert!(batch(&mut h, vec![failed]), "the task ended");
}
