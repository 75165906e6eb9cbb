//! The workload's rules over time: restart backoff and the rolling upgrade.

use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn a_failed_task_is_replaced_after_the_restart_backoff() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    let failed = v1::TaskStatus {
        message: Some("exit 1".into()),
        ..status("web.0.stored", TaskState::TaskFailed, Some("f"))
    };
    h.update(failed);
    h.answer_all();
    h.drain_call_log();
    // Offers come at once; the replacement waits for the 2 s backoff, and
    // the offer is declined meanwhile (other frameworks may use it).
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty());
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, MesosCall::Decline { offer_ids, .. } if offer_ids == &["o1"])),
        "{calls:?}"
    );
    let s = h.snapshot().await;
    assert_eq!(s.services[0].consecutive_failures, 1);
    assert!(s.services[0].next_launch_after.is_some());
    // The end of the backoff REVIVEs; the next offer launches.
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(
        calls.iter().any(|c| matches!(c, MesosCall::Revive)),
        "{calls:?}"
    );
    h.offer("o2", "agent-1", 4.0);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
    assert!(
        h.logs
            .iter()
            .any(|l| l.contains("task web.0.stored is TASK_FAILED: exit 1"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_spec_replaces_one_task_at_a_time() {
    let old = service("web", 2);
    let tasks = [
        running_record("web", 0, &old),
        running_record("web", 1, &old),
    ];
    let mut h = Harness::leader(&[old], &tasks);
    h.subscribe();
    h.answer_all();
    let mut new = service("web", 2);
    new.command = crate::scheduler::spec::CommandSpec::Shell("sleep 2000".into());
    let reply = h.command(Request::PutService(Box::new(valid(new))));
    h.answer_all();
    assert!(matches!(h.reply(reply), Some(Answer::Service(Ok(true)))));
    assert_eq!(h.marked(), ["web.0.stored"], "the lowest instance first");
    // Killed; its replacement launches, and only once it runs does the
    // next old task go.
    h.update(status("web.0.stored", TaskState::TaskKilled, Some("k0")));
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    let launched = Harness::launched(&h.drain_call_log());
    assert_eq!(launched.len(), 1);
    assert!(launched[0].starts_with("web.0."));
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    assert_eq!(
        h.marked(),
        ["web.0.stored"],
        "the replacement is not running yet"
    );
    h.update(status(&launched[0], TaskState::TaskRunning, Some("r")));
    h.answer_all();
    assert_eq!(
        h.marked(),
        ["web.0.stored"],
        "running, but not for min_healthy yet"
    );
    h.advance(crate::scheduler::spec::upgrade::DEFAULT_MIN_HEALTHY)
        .await;
    h.answer_all();
    assert_eq!(h.marked(), ["web.0.stored", "web.1.stored"]);
}

/// Starts `h`, subscribes (the pass after SUBSCRIBED runs at once: an
/// instance is missing), then offers: the offer waits for the next pass.
fn offer_after_the_first_pass(h: &mut Harness) {
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    assert!(
        Harness::launched(&h.drain_call_log()).is_empty(),
        "an offer within the interval waits for the next pass"
    );
}

#[tokio::test(start_paused = true)]
async fn the_scheduling_pass_is_paced_by_the_schedule_interval() {
    let spec = service("web", 2);
    let cfg = CoreConfig {
        schedule_interval: Duration::from_secs(1),
        ..config()
    };
    let mut h = Harness::new(
        cfg,
        Some(FRAMEWORK),
        std::slice::from_ref(&spec),
        &[running_record("web", 0, &spec)],
    );
    offer_after_the_first_pass(&mut h);
    // The machine asks to be woken for the next pass.
    assert!(
        h.wake_at
            .is_some_and(|w| w <= Instant::now() + Duration::from_secs(1))
    );
    h.advance(Duration::from_secs(1)).await;
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_pass_over_many_records_paces_the_next_one() {
    // 2,000 records read: the next pass waits 2,000 × 10 µs = 20 ms,
    // though the configured interval is zero (`pacing`).
    let spec = service("web", 2_001);
    let records: Vec<TaskRecord> = (0..2_000)
        .map(|i| running_record("web", i, &spec))
        .collect();
    let mut h = Harness::new(
        config(),
        Some(FRAMEWORK),
        std::slice::from_ref(&spec),
        &records,
    );
    offer_after_the_first_pass(&mut h);
    h.advance(Duration::from_millis(15)).await;
    h.answer_all();
    assert!(
        Harness::launched(&h.drain_call_log()).is_empty(),
        "paced: not within 15 ms"
    );
    h.advance(Duration::from_millis(6)).await;
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
}

/// A new leader's term starts with an instance's failed tasks in the store:
/// its backoff is rebuilt from them (three failures, the newest ended 1 s
/// before the term: 8 s, the cap, so 7 s left), not started afresh.
#[tokio::test(start_paused = true)]
async fn a_term_started_with_stored_failures_keeps_the_backoff() {
    let spec = service("web", 1);
    let failed = |n: u32, ended: f64| TaskRecord {
        task_id: format!("web.0.failed{n}").into(),
        state: TaskState::TaskFailed,
        launched_at: ended - 1.0,
        updated_at: ended,
        ..running_record("web", 0, &spec)
    };
    // The harness's clock reads 1_000_000 s since the epoch at the start.
    let tasks = [
        failed(0, 999_991.0),
        failed(1, 999_995.0),
        failed(2, 999_999.0),
    ];
    let mut h = Harness::leader(std::slice::from_ref(&spec), &tasks);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    assert!(Harness::launched(&h.drain_call_log()).is_empty());
    let s = h.snapshot().await;
    assert_eq!(s.services[0].consecutive_failures, 3);
    h.advance(Duration::from_secs(6)).await;
    h.offer("o2", "agent-1", 4.0);
    h.answer_all();
    assert!(
        Harness::launched(&h.drain_call_log()).is_empty(),
        "6 s of the 7 s left"
    );
    h.advance(Duration::from_millis(1500)).await;
    h.offer("o3", "agent-1", 4.0);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
}

/// A scale-down's kill of a task whose record is being written waits for
/// no write: the pass after the write decides again. `web.1`'s health
/// report is being stored when `web` is scaled to one, then back to two
/// before that write lands: `web.1` is never killed. (Queued behind the
/// write, its kill landed after the service wanted it again: the property
/// `machine_invariants`, seed 8368845573905297724.)
#[tokio::test(start_paused = true)]
async fn a_scale_down_undone_while_a_tasks_record_is_written_kills_nothing() {
    let spec = service("web", 2);
    let tasks: Vec<TaskRecord> = (0..2).map(|i| running_record("web", i, &spec)).collect();
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.update(super::rollout::health("web.1.stored", true, "h1"));
    let held = h.stores.pop_front().expect("web.1's record being written");
    assert!(
        matches!(&held.1, StoreOp::PutTask(r, _) if r.task_id.as_str() == "web.1.stored"),
        "{:?}",
        held.1
    );
    h.command(Request::PutService(Box::new(valid(service("web", 1)))));
    h.answer_stores();
    h.advance(Duration::from_secs(1)).await;
    h.answer_stores();
    h.command(Request::PutService(Box::new(valid(service("web", 2)))));
    h.answer_stores();
    h.stores.push_front(held);
    h.answer_all();
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    assert_eq!(h.marked(), Vec::<String>::new());
    let calls = h.drain_call_log();
    assert!(
        !calls.iter().any(|c| matches!(c, MesosCall::Kill { .. })),
        "{calls:?}"
    );
}
