//! REVIVE whenever a new need for offers arises while a filter or a
//! suppression may hide them (`machine::revive`,
//! `docs/mesos-protocol.md#suppress-and-revive`): a (re)subscription with
//! unmet demand, a loss, a created or scaled-up service, a killed task to
//! replace, the end of a backoff; and not when nothing new waits, not on
//! every pass of a launch the budget spreads out, not in a loop with offers
//! that do not fit.

use std::time::Duration;

use super::*;

/// A service whose one instance fits no offer of the tests (100 cpus).
fn big() -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": "big", "command": "sleep 1000", "cpus": 100, "mem": 16, "instances": 1
    }))
    .expect("a service spec")
}

/// How many REVIVEs `calls` holds.
fn revives(calls: &[MesosCall]) -> usize {
    calls
        .iter()
        .filter(|c| matches!(c, MesosCall::Revive))
        .count()
}

/// A leader of `web` (2 instances, both running, reconciled) and `big`
/// (waiting for an offer that never fits), subscribed and not suppressed,
/// whose DECLINE of an expired, unfit offer left a filter standing; call
/// log drained.
async fn waiting_behind_a_filter() -> Harness {
    let web = service("web", 2);
    let mut h = Harness::leader(
        &[web.clone(), big()],
        &[
            running_record("web", 0, &web),
            running_record("web", 1, &web),
        ],
    );
    h.subscribe();
    h.answer_all();
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.update(reconciled("web.1.stored", TaskState::TaskRunning));
    h.answer_all();
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    // Past the offer TTL (10 s): the unfit offer is declined with a filter.
    h.advance(Duration::from_secs(11)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, MesosCall::Decline { offer_ids, .. } if offer_ids == &["o1"])),
        "the expired offer was declined: {calls:?}"
    );
    assert!(!h.machine.suppressed, "big waits: not suppressed");
    h
}

#[tokio::test(start_paused = true)]
async fn a_subscription_and_a_resubscription_with_unmet_demand_revive_at_once() {
    let spec = service("web", 2);
    let mut h = Harness::leader(
        std::slice::from_ref(&spec),
        &[running_record("web", 0, &spec)],
    );
    h.subscribe();
    h.answer_all();
    // The previous leader's filters may stand (a failover with its stream
    // still open keeps them), and instance 1 waits.
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
    h.feed(Input::Disconnected(
        crate::mesos::client::DisconnectReason::EndOfStream,
    ));
    h.subscribe();
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
}

#[tokio::test(start_paused = true)]
async fn a_task_lost_in_reconciliation_revives() {
    let mut h = waiting_behind_a_filter().await;
    h.update(reconciled("web.1.stored", TaskState::TaskLost));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
    // The replacement's offer: instance 1 launches.
    h.offer("o2", "agent-2", 4.0);
    h.answer_all();
    let launched = Harness::launched(&h.drain_call_log());
    assert!(
        launched.len() == 1 && launched[0].starts_with("web.1."),
        "{launched:?}"
    );
}

/// Puts `spec` on [`waiting_behind_a_filter`]'s leader and expects one
/// REVIVE; `replaced`: the service existed.
async fn put_revives(spec: ServiceSpec, replaced: bool) {
    let mut h = waiting_behind_a_filter().await;
    let reply = h.command(Request::PutService(Box::new(valid(spec))));
    h.answer_all();
    assert!(
        matches!(h.reply(reply), Some(Answer::Service(Ok(r))) if *r == replaced),
        "{:?}",
        h.reply(reply)
    );
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
}

#[tokio::test(start_paused = true)]
async fn a_created_service_revives() {
    put_revives(service("db", 1), false).await;
}

#[tokio::test(start_paused = true)]
async fn a_scale_up_revives() {
    put_revives(service("web", 3), true).await;
}

#[tokio::test(start_paused = true)]
async fn a_killed_task_to_replace_revives_once_it_is_gone() {
    let mut h = waiting_behind_a_filter().await;
    // A new command: the rollout kills an old task, then replaces it.
    let changed: ServiceSpec = serde_json::from_value(serde_json::json!({
        "name": "web", "command": "sleep 2000", "cpus": 0.1, "mem": 16,
        "instances": 2, "restart_backoff": "2s", "restart_backoff_max": "8s"
    }))
    .expect("a service spec");
    h.command(Request::PutService(Box::new(valid(changed))));
    h.answer_all();
    let calls = h.drain_call_log();
    let killed: Vec<crate::scheduler::ids::TaskId> = calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Kill { task_id, .. } => Some(task_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(killed.len(), 1, "{:?}", Harness::kinds_of_calls(&calls));
    assert_eq!(revives(&calls), 0, "nothing waits yet: {calls:?}");
    h.update(status(
        killed[0].as_str(),
        TaskState::TaskKilled,
        Some("k1"),
    ));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
}

#[tokio::test(start_paused = true)]
async fn the_end_of_a_backoff_revives() {
    let mut h = waiting_behind_a_filter().await;
    h.update(status("web.1.stored", TaskState::TaskFailed, Some("f1")));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(
        revives(&calls),
        0,
        "instance 1 backs off 2 s first: {:?}",
        Harness::kinds_of_calls(&calls)
    );
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
}

#[tokio::test(start_paused = true)]
async fn no_revive_while_nothing_new_waits() {
    let mut h = waiting_behind_a_filter().await;
    // Answers about tasks that run, more unfit offers, their expiry.
    for round in 0..3 {
        h.update(reconciled("web.0.stored", TaskState::TaskRunning));
        h.offer(&format!("unfit-{round}"), "agent-3", 4.0);
        h.answer_all();
        h.advance(Duration::from_secs(11)).await;
        h.answer_all();
    }
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 0, "{:?}", Harness::kinds_of_calls(&calls));
}

#[tokio::test(start_paused = true)]
async fn unfit_offers_do_not_loop_revive_offer_decline() {
    let mut h = Harness::leader(&[big()], &[]);
    h.subscribe();
    h.answer_all();
    for round in 0..5 {
        h.offer(&format!("unfit-{round}"), "agent-1", 4.0);
        h.answer_all();
        h.advance(Duration::from_secs(11)).await;
        h.answer_all();
    }
    let calls = h.drain_call_log();
    let declines = calls
        .iter()
        .filter(|c| matches!(c, MesosCall::Decline { .. }))
        .count();
    assert_eq!(declines, 5, "{:?}", Harness::kinds_of_calls(&calls));
    assert_eq!(
        revives(&calls),
        1,
        "one REVIVE, for the subscription: {:?}",
        Harness::kinds_of_calls(&calls)
    );
}

#[tokio::test(start_paused = true)]
async fn a_launch_spread_over_passes_by_its_budget_revives_once() {
    // 9,000 instances; a pass places at most LAUNCHING_MAX (4,000).
    let mut h = Harness::leader(&[service("many", 9_000)], &[]);
    h.subscribe();
    h.answer_all();
    // One pass while the first launch's records are still being stored
    // (no budget left), then the rest.
    h.huge_offer("h1");
    h.huge_offer("h2");
    h.answer_all();
    for round in 3..6 {
        // Passes over thousands of records are paced.
        h.advance(Duration::from_secs(1)).await;
        h.answer_all();
        h.huge_offer(&format!("h{round}"));
        h.answer_all();
    }
    let calls = h.drain_call_log();
    assert_eq!(Harness::launched(&calls).len(), 9_000);
    let accepts = calls
        .iter()
        .filter(|c| matches!(c, MesosCall::Accept { .. }))
        .count();
    assert!(accepts >= 3, "spread over passes: {accepts} ACCEPTs");
    assert_eq!(
        revives(&calls),
        1,
        "one REVIVE, for the subscription: {:?}",
        Harness::kinds_of_calls(&calls)
            .into_iter()
            .filter(|k| *k != "ACCEPT")
            .collect::<Vec<_>>()
    );
}

/// [`waiting_behind_a_filter`]'s leader after web.1 was lost (one REVIVE)
/// and its replacement launched on an offer, whose ACCEPT set a filter;
/// call log drained. The REVIVE was sent at the returned instant.
async fn revived_then_filtered() -> (Harness, Instant) {
    let mut h = waiting_behind_a_filter().await;
    h.update(reconciled("web.1.stored", TaskState::TaskLost));
    h.answer_all();
    let revived_at = Instant::now();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 1, "{:?}", Harness::kinds_of_calls(&calls));
    h.offer("o2", "agent-2", 4.0);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 1);
    (h, revived_at)
}

#[tokio::test(start_paused = true)]
async fn a_need_inside_the_revive_interval_waits_for_its_end() {
    let (mut h, revived_at) = revived_then_filtered().await;
    // 100 ms after the REVIVE, a second need behind the ACCEPT's filter.
    h.advance(Duration::from_millis(100)).await;
    h.update(reconciled("web.0.stored", TaskState::TaskLost));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 0, "{:?}", Harness::kinds_of_calls(&calls));
    let interval = config().min_revive_interval;
    h.advance(interval - Duration::from_millis(150)).await;
    h.answer_all();
    assert_eq!(revives(&h.drain_call_log()), 0, "inside the interval");
    h.advance(Duration::from_millis(100)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(
        revives(&calls),
        1,
        "at the interval's end: {:?}",
        Harness::kinds_of_calls(&calls)
    );
    let sent = Instant::now() - revived_at;
    assert!(sent >= interval && sent < interval + Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn a_deferred_revive_is_dropped_once_its_need_is_met() {
    let (mut h, _) = revived_then_filtered().await;
    h.advance(Duration::from_millis(100)).await;
    h.update(reconciled("web.0.stored", TaskState::TaskLost));
    h.answer_all();
    // An offer comes anyway and web.0's replacement launches.
    h.offer("o3", "agent-3", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(
        Harness::launched(&calls).len(),
        1,
        "{:?}",
        Harness::kinds_of_calls(&calls)
    );
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(revives(&calls), 0, "{:?}", Harness::kinds_of_calls(&calls));
}

#[tokio::test(start_paused = true)]
async fn a_subscription_s_first_revive_is_never_delayed() {
    let (mut h, _) = revived_then_filtered().await;
    h.update(reconciled("web.0.stored", TaskState::TaskLost));
    h.feed(Input::Disconnected(
        crate::mesos::client::DisconnectReason::EndOfStream,
    ));
    h.subscribe();
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(
        revives(&calls),
        1,
        "the new subscription revives at once, within the interval: {:?}",
        Harness::kinds_of_calls(&calls)
    );
}
