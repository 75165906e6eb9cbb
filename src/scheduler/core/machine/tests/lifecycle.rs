//! A term's start, failover adoption, and reconciliation's timing.

use std::time::Duration;

use super::*;
use crate::scheduler::snapshot::{FrameworkState, ReconcileOutcome, ReconcileTrigger};

fn reconcile_calls(calls: &[MesosCall]) -> Vec<Vec<String>> {
    calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Reconcile(list) => Some(list.iter().map(|(t, _)| t.to_string()).collect()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_subscribes_before_it_reads_the_task_records() {
    let spec = service("web", 2);
    let tasks = [
        running_record("web", 0, &spec),
        running_record("web", 1, &spec),
    ];
    let mut h = Harness::new(
        config(),
        Some(FRAMEWORK),
        std::slice::from_ref(&spec),
        &tasks,
    );
    h.start();
    // Only the small reads come first (the drains: one per drained agent).
    let first: Vec<String> = h.stores.iter().map(|(_, op)| format!("{op:?}")).collect();
    assert_eq!(first, ["ReadFrameworkId", "ListServices", "ListDrains"]);
    h.answer_next_store();
    h.answer_next_store();
    h.answer_next_store();
    assert_eq!(
        h.started_clients, 1,
        "the client starts next to the task read"
    );
    assert!(matches!(h.stores.front(), Some((_, StoreOp::ListTasks))));

    // Subscribed, offered and updated while the records are still read:
    // nothing is launched, reconciled, written or acknowledged yet.
    h.subscribe();
    h.offer("o1", "agent-9", 4.0);
    h.update(status("web.0.stored", TaskState::TaskRunning, Some("u1")));
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    assert!(reconcile_calls(&calls).is_empty(), "{calls:?}");
    assert!(h.acks.is_empty());
    let outstanding: Vec<String> = h.stores.iter().map(|(_, op)| format!("{op:?}")).collect();
    assert_eq!(
        outstanding,
        ["ListTasks", "ListJobs", "ListRuns"],
        "only the task list (and the jobs', read beside it) is outstanding"
    );

    // The records arrive: the subscription's explicit run asks about both,
    // the held update (an echo) is acknowledged without a write, and the
    // offer is declined: both instances run.
    h.answer_next_store();
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(
        reconcile_calls(&calls),
        [vec!["web.0.stored", "web.1.stored"]]
    );
    assert!(Harness::launched(&calls).is_empty());
    assert_eq!(h.acks.len(), 1);
    assert!(h.store.task_writes.is_empty(), "{:?}", h.store.task_writes);
    assert_eq!(
        Harness::kinds_of_calls(&calls),
        ["RECONCILE", "DECLINE", "SUPPRESS"]
    );
}

#[tokio::test(start_paused = true)]
async fn failover_adoption_reconciles_and_neither_launches_nor_kills() {
    let spec = service("web", 2);
    let tasks = [
        running_record("web", 0, &spec),
        running_record("web", 1, &spec),
    ];
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    // The master answers the explicit reconciliation: both still run.
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.update(reconciled("web.1.stored", TaskState::TaskRunning));
    h.offer("o1", "agent-5", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty());
    assert!(
        !Harness::kinds_of_calls(&calls).contains(&"KILL"),
        "{calls:?}"
    );
    assert!(h.acks.is_empty(), "the master's answers carry no uuid");
    let s = h.snapshot().await;
    assert_eq!(s.framework.state, FrameworkState::Subscribed);
    let run = &s.reconciliation.history[0];
    assert_eq!(
        (run.trigger, run.outcome, run.asked, run.answered),
        (
            ReconcileTrigger::Subscribed,
            ReconcileOutcome::Converged,
            2,
            2
        )
    );
    assert!(h.store.task_writes.is_empty(), "echoes are not written");
    let confirmed = h.machine.tasks.get("web.0.stored").unwrap().confirmed_at;
    assert!(confirmed.is_some(), "the echo's time is kept in memory");
}

#[tokio::test(start_paused = true)]
async fn explicit_reconciliation_backs_off_then_aborts_and_the_implicit_run_follows() {
    let spec = service("web", 1);
    let mut h = Harness::leader(
        std::slice::from_ref(&spec),
        &[running_record("web", 0, &spec)],
    );
    let t0 = Instant::now();
    h.subscribe();
    h.answer_all();
    let mut sent = vec![0];
    for _ in 0..40 {
        h.advance(Duration::from_secs(1)).await;
        h.answer_all();
        let calls = h.drain_call_log();
        if !reconcile_calls(&calls).is_empty() {
            sent.push((Instant::now() - t0).as_secs());
        }
    }
    // 1, 2, 4, 8, 8 s apart; aborted at 30 s; the implicit run (an empty
    // RECONCILE) after the 1 s cooldown.
    assert_eq!(sent, [0, 1, 3, 7, 15, 23, 31]);
    let s = h.snapshot().await;
    let aborted = &s.reconciliation.history[0];
    assert_eq!(aborted.outcome, ReconcileOutcome::Aborted);
    assert_eq!(aborted.unanswered, ["web.0.stored"]);
    assert_eq!(
        s.reconciliation.history[1].trigger,
        ReconcileTrigger::AfterExplicit
    );
}

#[tokio::test(start_paused = true)]
async fn the_subscription_reconciles_in_slices_as_the_answers_come() {
    let spec = service("web", 5);
    let tasks: Vec<TaskRecord> = (0..5).map(|i| running_record("web", i, &spec)).collect();
    let mut cfg = config();
    cfg.reconcile.explicit_slice = 2;
    let mut h = Harness::new(cfg, Some(FRAMEWORK), std::slice::from_ref(&spec), &tasks);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    let first = reconcile_calls(&h.drain_call_log());
    assert_eq!(first, [vec!["web.0.stored", "web.1.stored"]], "one slice");
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.answer_all();
    assert_eq!(
        reconcile_calls(&h.drain_call_log()),
        [vec!["web.2.stored", "web.3.stored"]],
        "half the slice answered: the next one"
    );
    for i in 1..4 {
        h.update(reconciled(
            &format!("web.{i}.stored"),
            TaskState::TaskRunning,
        ));
    }
    h.answer_all();
    assert_eq!(reconcile_calls(&h.drain_call_log()), [vec!["web.4.stored"]]);
    h.update(reconciled("web.4.stored", TaskState::TaskRunning));
    h.answer_all();
    let s = h.snapshot().await;
    let run = &s.reconciliation.history[0];
    assert_eq!(
        (run.outcome, run.asked, run.answered, run.calls),
        (ReconcileOutcome::Converged, 5, 5, 3)
    );
    assert!(h.store.task_writes.is_empty(), "echoes are not written");
}
