//! Maintenance windows (`machine/maintenance.rs`): offers whose window is
//! near are declined, far ones used; inverse offers are accepted when every
//! affected service keeps its floor (and its tasks there get replacements
//! elsewhere), declined with the reason in the events and the audit log
//! otherwise (and the tasks there move all the same, start first);
//! rescinds and odd inverse offers change nothing.

use super::*;

/// `unavailability` starting `secs` after the machine's clock at `now`.
pub(super) fn window_in(h: &Harness, secs: f64) -> v1::Unavailability {
    let at = h.machine.unix(tokio::time::Instant::now()) + secs;
    v1::Unavailability {
        start: v1::TimeInfo {
            nanoseconds: (at * 1e9) as i64,
        },
        duration: Some(v1::DurationInfo {
            nanoseconds: 600_000_000_000,
        }),
    }
}

pub(super) fn offer_with(
    id: &str,
    agent: &str,
    unavailability: Option<v1::Unavailability>,
) -> v1::Offer {
    v1::Offer {
        id: v1::OfferId { value: id.into() },
        agent_id: v1::AgentId {
            value: agent.into(),
        },
        hostname: format!("{agent}.test"),
        resources: Resources::parse("cpus:4;mem:1024")
            .expect("resources")
            .to_protos(None),
        unavailability,
        ..Default::default()
    }
}

pub(super) fn inverse_offer(
    id: &str,
    agent: Option<&str>,
    unavailability: v1::Unavailability,
) -> v1::InverseOffer {
    v1::InverseOffer {
        id: v1::OfferId { value: id.into() },
        framework_id: v1::FrameworkId {
            value: FRAMEWORK.into(),
        },
        agent_id: agent.map(|a| v1::AgentId { value: a.into() }),
        unavailability,
        ..Default::default()
    }
}

fn declined(calls: &[MesosCall]) -> Vec<String> {
    calls
        .iter()
        .flat_map(|c| match c {
            MesosCall::Decline { offer_ids, .. } => offer_ids.clone(),
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_offer_whose_window_starts_within_the_lead_time_is_declined_and_a_far_one_used() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    // Default lead time: 1 hour. A window in 10 minutes blocks the agent.
    let near = window_in(&h, 600.0);
    h.feed(Input::Offers(vec![offer_with(
        "o-near",
        "agent-1",
        Some(near),
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(declined(&calls), ["o-near"]);
    assert!(Harness::launched(&calls).is_empty());
    // A window in two hours does not: the task goes there.
    let far = window_in(&h, 7200.0);
    h.feed(Input::Offers(vec![offer_with(
        "o-far",
        "agent-2",
        Some(far),
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(Harness::launched(&calls).len(), 1, "{calls:?}");
    assert!(declined(&calls).is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_lead_time_is_configurable() {
    let cfg = CoreConfig {
        maintenance_lead: Duration::from_secs(60),
        ..config()
    };
    let mut h = Harness::new(cfg, Some(FRAMEWORK), &[service("web", 1)], &[]);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    // Ten minutes away is beyond a one-minute lead: the offer is used.
    let window = window_in(&h, 600.0);
    h.feed(Input::Offers(vec![offer_with(
        "o-1",
        "agent-1",
        Some(window),
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(Harness::launched(&calls).len(), 1, "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn an_inverse_offer_is_accepted_when_every_service_keeps_its_floor_and_the_instance_is_replaced_elsewhere()
 {
    let spec = service("web", 2);
    let tasks = [
        running_record("web", 0, &spec),
        running_record("web", 1, &spec),
    ];
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    let window = window_in(&h, 120.0);
    h.feed(Input::InverseOffers(vec![inverse_offer(
        "io-1",
        Some("agent-0"),
        window,
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(
        Harness::kinds_of_calls(&calls).contains(&"ACCEPT_INVERSE_OFFERS"),
        "{calls:?}"
    );
    assert_eq!(h.store.audit.len(), 1);
    assert_eq!(
        h.store.audit[0]["action"],
        "maintenance.accept_inverse_offer"
    );
    // The instance on agent-0 gets a replacement on another agent; the old
    // task is not killed before the replacement is available.
    h.offer("o-2", "agent-2", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    let launched = Harness::launched(&calls);
    assert_eq!(launched.len(), 1, "{calls:?}");
    assert!(launched[0].starts_with("web.0."), "{launched:?}");
    assert!(!Harness::kinds_of_calls(&calls).contains(&"KILL"));
    // Once it runs and has been available for min_healthy, the old one goes.
    h.update(status(&launched[0], TaskState::TaskRunning, None));
    h.answer_all();
    tokio::time::advance(Duration::from_secs(11)).await;
    h.feed(Input::Tick);
    h.answer_all();
    let kills = super::drains::killed(&h.drain_call_log());
    assert_eq!(kills, ["web.0.stored"]);
    assert!(
        h.logs
            .iter()
            .any(|l| l.contains("ahead of its maintenance window")),
        "{:?}",
        h.logs
    );
}

#[tokio::test(start_paused = true)]
async fn an_inverse_offer_that_would_break_a_floor_is_declined_with_the_reason_in_the_audit() {
    let spec = service("web", 2);
    let mut second = running_record("web", 1, &spec);
    second.agent_id = "agent-0".into();
    let tasks = [running_record("web", 0, &spec), second];
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    let window = window_in(&h, 120.0);
    h.feed(Input::InverseOffers(vec![inverse_offer(
        "io-1",
        Some("agent-0"),
        window,
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(
        Harness::kinds_of_calls(&calls).contains(&"DECLINE_INVERSE_OFFERS"),
        "{calls:?}"
    );
    assert_eq!(
        h.store.audit[0]["action"],
        "maintenance.decline_inverse_offer"
    );
    let reason = h.store.audit[0]["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("service web would keep 0 available instance(s)"),
        "{reason}"
    );
    assert!(h.logs.iter().any(|l| l.contains(&reason)));
    // Asked again with nothing changed: answered again, not audited again.
    h.feed(Input::InverseOffers(vec![inverse_offer(
        "io-2",
        Some("agent-0"),
        window,
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::kinds_of_calls(&calls).contains(&"DECLINE_INVERSE_OFFERS"));
    assert_eq!(h.store.audit.len(), 1);
    // The tasks move anyway, start first: both instances get a replacement
    // on agent-2 and nothing is killed before they are available (left
    // alone, the window would kill both at once).
    h.offer("o-2", "agent-2", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    let mut launched = Harness::launched(&calls);
    launched.sort();
    assert_eq!(launched.len(), 2, "{calls:?}");
    assert!(
        !Harness::kinds_of_calls(&calls).contains(&"KILL"),
        "{calls:?}"
    );
    for task in &launched {
        h.update(status(task, TaskState::TaskRunning, None));
    }
    h.answer_all();
    tokio::time::advance(Duration::from_secs(11)).await;
    h.feed(Input::Tick);
    h.answer_all();
    let mut kills = super::drains::killed(&h.drain_call_log());
    kills.sort();
    assert_eq!(kills.len(), 2, "the old copies go once replaced: {kills:?}");
    assert!(kills.iter().all(|k| !launched.contains(k)), "{kills:?}");
    // Asked again once they have moved: accepted.
    h.feed(Input::InverseOffers(vec![inverse_offer(
        "io-3",
        Some("agent-0"),
        window,
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(
        Harness::kinds_of_calls(&calls).contains(&"ACCEPT_INVERSE_OFFERS"),
        "{calls:?}"
    );
    assert_eq!(
        h.store.audit.last().unwrap()["action"],
        "maintenance.accept_inverse_offer"
    );
}

#[tokio::test(start_paused = true)]
async fn rescinds_and_odd_inverse_offers_change_nothing() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    h.drain_call_log();
    h.feed(Input::RescindInverseOffer("never-sent".into()));
    let window = window_in(&h, 120.0);
    // No agent named, and an agent where nothing of ours runs: accepted,
    // nothing to move.
    h.feed(Input::InverseOffers(vec![
        inverse_offer("io-x", None, window),
        inverse_offer("io-y", Some("agent-9"), window),
    ]));
    h.answer_all();
    h.feed(Input::RescindInverseOffer("io-y".into()));
    h.answer_all();
    let calls = h.drain_call_log();
    let kinds = Harness::kinds_of_calls(&calls);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "ACCEPT_INVERSE_OFFERS")
            .count(),
        2,
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"KILL"));
    assert!(!h.machine.is_ending());
}
