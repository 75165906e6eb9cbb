//! Reconciliation and launches in flight: a task whose ACCEPT the master
//! may not have processed is not asked about (the master would answer
//! TASK_LOST and the instance would run twice); an ACCEPT that failed is
//! followed by an explicit run that asks about its tasks; a task reported
//! alive after its record ended is killed, not counted.

use super::*;
use crate::mesos::client::CallError;
use crate::scheduler::snapshot::{ReconcileKind, ReconcileTrigger};

/// The task IDs of the RECONCILE calls in `calls`, one list per call.
fn reconciled_lists(calls: &[MesosCall]) -> Vec<Vec<String>> {
    calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Reconcile(list) => {
                let mut ids: Vec<String> = list.iter().map(|(t, _)| t.to_string()).collect();
                ids.sort();
                Some(ids)
            }
            _ => None,
        })
        .collect()
}

/// A leader of `web` × `instances` whose instance 0 runs and whose
/// subscription's explicit run converged; an offer is placed and its
/// records stored, the ACCEPT left unanswered. Returns the launched IDs.
async fn launching(instances: u32) -> (Harness, Vec<String>) {
    let spec = service("web", instances);
    let mut h = Harness::running(&spec);
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.advance(Duration::from_secs(5)).await;
    h.answer_all();
    h.drain_call_log();
    h.offer("o1", "agent-1", 4.0);
    h.answer_stores();
    let launched = Harness::launched(&h.drain_call_log());
    assert_eq!(launched.len(), instances as usize - 1);
    (h, launched)
}

#[tokio::test(start_paused = true)]
async fn an_explicit_run_leaves_out_tasks_whose_accept_is_unanswered() {
    let (mut h, launched) = launching(3).await;
    // The ACCEPT is out, its answer not in: the master may not have it.
    h.command(Request::Reconcile(ReconcileKind::Explicit));
    assert_eq!(
        reconciled_lists(&h.drain_call_log()),
        [vec!["web.0.stored".to_string()]]
    );
    // Answered: the next run asks about them too.
    h.answer_calls();
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.advance(Duration::from_secs(2)).await;
    h.drain_call_log();
    h.command(Request::Reconcile(ReconcileKind::Explicit));
    let mut all = launched.clone();
    all.push("web.0.stored".into());
    all.sort();
    assert_eq!(reconciled_lists(&h.drain_call_log()), [all]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_accept_is_followed_by_an_explicit_run_that_asks_about_its_tasks() {
    let (mut h, launched) = launching(2).await;
    // A run of the running task is under way when the ACCEPT fails.
    h.command(Request::Reconcile(ReconcileKind::Explicit));
    let (id, call) = h.calls.pop_front().expect("the ACCEPT");
    assert!(matches!(call, MesosCall::Accept { .. }), "{call:?}");
    h.answer_calls();
    h.feed(Input::Called {
        id,
        result: Err(CallError::Timeout),
    });
    h.drain_call_log();
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.advance(Duration::from_secs(2)).await;
    // (Asked again after its first wait of 1 s: nobody answered yet.)
    let lists = reconciled_lists(&h.drain_call_log());
    let mut both = vec![launched[0].clone(), "web.0.stored".to_string()];
    both.sort();
    assert_eq!(
        lists.first(),
        Some(&both),
        "the follow-up run asks about the task of the failed ACCEPT"
    );
    let running = h.machine.reconciler.status().running;
    assert_eq!(
        running.map(|r| r.trigger),
        Some(ReconcileTrigger::LaunchFailed)
    );
    // The master does not know it: its record ends and the instance
    // launches again.
    h.update(reconciled(&launched[0], TaskState::TaskLost));
    h.answer_all();
    assert_eq!(
        h.stored(&launched[0]).map(|r| r.state),
        Some(TaskState::TaskLost)
    );
    h.offer("o2", "agent-1", 4.0);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_task_reported_alive_after_its_end_is_killed_and_not_counted() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    // The master says it does not know the task; its instance launches
    // again.
    h.update(reconciled("web.0.stored", TaskState::TaskLost));
    h.answer_all();
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    let replacement = Harness::launched(&h.drain_call_log());
    assert_eq!(replacement.len(), 1);
    // Then the old task reports RUNNING.
    h.update(status("web.0.stored", TaskState::TaskRunning, Some("u1")));
    assert!(h.acks.is_empty(), "not acknowledged before it is stored");
    h.answer_stores();
    let record = h.stored("web.0.stored").expect("the record");
    assert_eq!(
        record.state,
        TaskState::TaskRunning,
        "the record tells the truth"
    );
    let reason = record.kill.as_ref().map(|k| k.reason.clone());
    assert!(
        reason
            .as_deref()
            .is_some_and(|r| r.contains("after TASK_LOST")),
        "{reason:?}"
    );
    assert_eq!(h.acks.len(), 1, "acknowledged once stored");
    let calls = h.drain_call_log();
    assert!(
        calls.iter().any(
            |c| matches!(c, MesosCall::Kill { task_id, .. } if task_id.as_str() == "web.0.stored")
        ),
        "{calls:?}"
    );
    // One instance, one live task: nothing else launches, the replacement
    // is not killed.
    h.answer_all();
    h.offer("o2", "agent-2", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    assert_eq!(h.marked(), ["web.0.stored"]);
}
