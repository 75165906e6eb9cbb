//! When a rollout is none, and when it ends: a first launch or a scale-up
//! never halts, however long its tasks take; a rollout ends (its halt
//! cleared, with an event) once nothing is outdated and every instance is
//! available, or when the service is scaled to 0; a stale stored halt with
//! nothing outdated clears on the next leader's first pass.

use std::time::Duration;

use super::rollout::{checked, health, healthy_record, run_for, upgrading_from};
use super::*;

/// Logged lines containing `text`.
fn logged(h: &Harness, text: &str) -> usize {
    h.logs.iter().filter(|l| l.contains(text)).count()
}

/// Puts `spec`, answered at once; asserts it was stored.
fn put(h: &mut Harness, spec: &ServiceSpec) {
    let reply = h.command(Request::PutService(Box::new(valid(spec.clone()))));
    h.answer_all();
    assert!(matches!(h.reply(reply), Some(Answer::Service(Ok(_)))));
}

#[tokio::test(start_paused = true)]
async fn a_first_launch_or_a_scale_up_that_never_runs_does_not_halt() {
    let spec = checked(2, "sleep 1000");
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[]);
    h.subscribe();
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    let launched = Harness::launched(&h.drain_call_log());
    assert_eq!(launched.len(), 2);
    // Staging forever (the master lags): far past the 30 s deadline.
    run_for(&mut h, Duration::from_secs(90)).await;
    assert_eq!(h.store.services["web"].0.halted, None);
    assert_eq!(logged(&h, "halted"), 0, "{:?}", h.logs);
    assert_eq!(h.snapshot().await.services[0].rollout, None);
    // Both run healthy; a scale-up's new instance never runs: no halt either.
    for (i, id) in launched.iter().enumerate() {
        h.update(status(id, TaskState::TaskRunning, Some(&format!("r{i}"))));
        h.update(health(id, true, &format!("h{i}")));
    }
    h.answer_all();
    put(&mut h, &checked(3, "sleep 1000"));
    h.offer("o2", "agent-2", 4.0);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
    run_for(&mut h, Duration::from_secs(90)).await;
    let stored = &h.store.services["web"].0;
    assert_eq!((stored.halted.clone(), stored.rolling_out), (None, false));
    assert_eq!(logged(&h, "halted"), 0, "{:?}", h.logs);
    assert_eq!(h.snapshot().await.services[0].rollout, None);
}

#[tokio::test(start_paused = true)]
async fn a_stale_stored_halt_clears_when_nothing_is_outdated() {
    let spec = checked(2, "sleep 1000");
    let mut staging = running_record("web", 1, &spec);
    staging.state = TaskState::TaskStaging;
    let tasks = [healthy_record(0, &spec), staging];
    let mut h = Harness::new(
        config(),
        Some(FRAMEWORK),
        std::slice::from_ref(&spec),
        &tasks,
    );
    // As an older leader stored it after a slow first launch.
    let record = &mut h.store.services.get_mut("web").unwrap().0;
    record.halted = Some(crate::scheduler::records::Halt {
        at: 3.0,
        reason: "instance(s) 1 not RUNNING and healthy".into(),
    });
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    assert_eq!(h.store.services["web"].0.halted, None, "cleared and stored");
    assert_eq!(logged(&h, "halt of service web's rollout cleared"), 1);
    assert_eq!(h.snapshot().await.services[0].rollout, None);
}

/// A leader of 1 healthy `old` task given `new`, whose replacement reports
/// unhealthy until the rollout halts. Returns the replacement's ID.
async fn halted_upgrade(old: &ServiceSpec, new: &ServiceSpec) -> (Harness, String) {
    let (mut h, new0) = upgrading_from(old, &[healthy_record(0, old)], new).await;
    assert!(h.store.services["web"].0.rolling_out, "a rollout begins");
    h.update(health(&new0, false, "u0"));
    h.answer_all();
    run_for(&mut h, Duration::from_secs(35)).await;
    assert!(h.store.services["web"].0.halted.is_some(), "halted");
    (h, new0)
}

#[tokio::test(start_paused = true)]
async fn a_halt_clears_once_the_last_replacement_is_available() {
    let (old, new) = (checked(1, "sleep 1000"), checked(1, "sleep 2000"));
    let (mut h, new0) = halted_upgrade(&old, &new).await;
    h.update(health(&new0, true, "h0"));
    h.answer_all();
    run_for(&mut h, Duration::from_secs(3)).await;
    assert!(
        h.store.services["web"].0.halted.is_some(),
        "not yet min_healthy"
    );
    run_for(&mut h, Duration::from_secs(4)).await;
    let stored = &h.store.services["web"].0;
    assert_eq!((stored.halted.clone(), stored.rolling_out), (None, false));
    assert_eq!(logged(&h, "rollout of service web complete"), 1);
    assert_eq!(logged(&h, "its halt is cleared"), 1);
    let s = h.snapshot().await;
    assert_eq!(s.services[0].rollout, None);
    assert!(!s.services[0].can_roll_back);
}

#[tokio::test(start_paused = true)]
async fn scaling_to_zero_ends_a_halted_rollout() {
    let (old, new) = (checked(1, "sleep 1000"), checked(1, "sleep 2000"));
    let (mut h, new0) = halted_upgrade(&old, &new).await;
    put(&mut h, &checked(0, "sleep 2000"));
    let stored = &h.store.services["web"].0;
    assert_eq!((stored.halted.clone(), stored.rolling_out), (None, false));
    h.update(status(&new0, TaskState::TaskKilled, Some("k")));
    h.answer_all();
    // Back to 1: a launch, not a rollout; it never halts.
    put(&mut h, &new);
    h.offer("o9", "agent-1", 4.0);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
    run_for(&mut h, Duration::from_secs(60)).await;
    assert_eq!(h.store.services["web"].0.halted, None);
    assert_eq!(h.snapshot().await.services[0].rollout, None);
}
