//! Launches and offers: records before ACCEPT, an ACCEPT only on the
//! subscription its offer came from, SUPPRESS once done, REVIVE before new
//! work, decline filters.

use super::*;

#[tokio::test(start_paused = true)]
async fn records_are_stored_before_the_accept_that_launches_them() {
    let mut h = Harness::leader(&[service("web", 2)], &[]);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.offer("o1", "agent-1", 4.0);
    let creates: Vec<String> = h
        .stores
        .iter()
        .filter_map(|(_, op)| match op {
            StoreOp::PutTask(r, Expect::Absent) => Some(r.task_id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(creates.len(), 2);
    assert!(h.drain_call_log().is_empty(), "no call before the records");
    h.answer_stores();
    let calls = h.drain_call_log();
    // Done: offers are suppressed, after the ACCEPT.
    assert_eq!(Harness::kinds_of_calls(&calls), ["ACCEPT", "SUPPRESS"]);
    assert_eq!(Harness::launched(&calls), creates);
}

#[tokio::test(start_paused = true)]
async fn an_accept_launches_the_spec_its_records_were_written_for() {
    // The `TaskInfo`s are built at the ACCEPT (a launch holds its placement
    // and spec meanwhile, not a `TaskInfo`): a change of the service while
    // the records are written must not change what they launch.
    let old = service("web", 2);
    let mut h = Harness::leader(std::slice::from_ref(&old), &[]);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.offer("o1", "agent-1", 4.0);
    let mut new = old.clone();
    new.command = crate::scheduler::spec::CommandSpec::Shell("sleep 2000".into());
    h.command(Request::PutService(Box::new(valid(new.clone()))));
    h.answer_stores();
    let calls = h.drain_call_log();
    let infos: Vec<&v1::TaskInfo> = Harness::launched_infos(&calls).collect();
    assert_eq!(infos.len(), 2, "{calls:?}");
    for info in infos {
        let command = info.command.as_ref().and_then(|c| c.value.as_deref());
        assert_eq!(command, Some("sleep 1000"));
        let label = |key: &str| {
            let labels = info.labels.as_ref().map(|l| l.labels.as_slice());
            labels
                .unwrap_or_default()
                .iter()
                .find(|l| l.key == key)
                .and_then(|l| l.value.clone())
        };
        assert_eq!(label("appliance.fingerprint"), Some(old.fingerprint()));
        let record = h.stored(&info.task_id.value).expect("its record");
        assert_eq!(record.fingerprint, old.fingerprint());
        assert_ne!(record.fingerprint, new.fingerprint());
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_whose_record_failed_is_left_out_of_the_accept() {
    let mut h = Harness::leader(&[service("web", 2)], &[]);
    h.subscribe();
    h.answer_all();
    h.offer("o1", "agent-1", 4.0);
    let failed = match h.fail_next_store(CoordinationError::Unavailable("gone".into())) {
        StoreOp::PutTask(r, _) => r.task_id.to_string(),
        other => panic!("{other:?}"),
    };
    h.answer_stores();
    let launched = Harness::launched(&h.drain_call_log());
    assert_eq!(launched.len(), 1);
    assert!(!launched.contains(&failed));
    assert!(
        h.logs
            .iter()
            .any(|l| l.contains(&format!("not launching {failed}")))
    );
}

#[tokio::test(start_paused = true)]
async fn an_accept_is_not_sent_once_its_subscription_ended() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.offer("o1", "agent-1", 4.0);
    h.feed(Input::Disconnected(
        crate::mesos::client::DisconnectReason::EndOfStream,
    ));
    h.answer_stores();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    // The record stays for reconciliation; after the next subscription the
    // explicit run asks about it.
    h.subscribe();
    let calls = h.drain_call_log();
    let asked = calls
        .iter()
        .any(|c| matches!(c, MesosCall::Reconcile(list) if list.len() == 1));
    assert!(asked, "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn offers_are_suppressed_when_done_and_revived_before_new_launches() {
    let spec = service("web", 1);
    let mut h = Harness::leader(
        std::slice::from_ref(&spec),
        &[running_record("web", 0, &spec)],
    );
    h.subscribe();
    h.offer("o1", "agent-1", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    let kinds = Harness::kinds_of_calls(&calls);
    assert_eq!(kinds, ["RECONCILE", "SUPPRESS", "DECLINE"]);
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, MesosCall::Decline { refuse_seconds: Some(r), .. } if *r == 30.0)),
        "declined with --decline-refuse-seconds: {calls:?}"
    );
    // More instances: REVIVE first, then the launch on the next offer.
    let reply = h.command(Request::PutService(Box::new(valid(service("web", 2)))));
    h.answer_all();
    assert!(matches!(h.reply(reply), Some(Answer::Service(Ok(true)))));
    assert_eq!(Harness::kinds_of_calls(&h.drain_call_log()), ["REVIVE"]);
    h.offer("o2", "agent-2", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(Harness::kinds_of_calls(&calls), ["ACCEPT", "SUPPRESS"]);
}

/// Past the 10 s offer TTL, records still unstored (calls answered, not
/// the store): the offers declined are `expected`.
async fn expire_only(h: &mut Harness, expected: &[&str]) {
    h.advance(Duration::from_secs(11)).await;
    h.answer_calls();
    let calls = h.drain_call_log();
    assert_eq!(
        declined(&calls),
        expected,
        "{:?}",
        Harness::kinds_of_calls(&calls)
    );
}

/// The IDs of the offers `calls` declined.
fn declined(calls: &[MesosCall]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Decline { offer_ids, .. } => Some(offer_ids.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_offer_a_launch_beyond_the_budget_waits_for_outlives_its_ttl() {
    // 6,000 instances: a pass places at most LAUNCHING_MAX (4,000), all on
    // the first offer (first fit); the second waits for the rest, which the
    // budget holds back until the first records are stored. An unfit
    // offer is declined at its TTL all the same.
    let mut h = Harness::leader(&[service("many", 6_000)], &[]);
    h.subscribe();
    h.answer_all();
    h.huge_offer("h1");
    h.huge_offer("h2");
    h.offer("unfit", "agent-u", 0.05);
    h.answer_calls();
    assert!(
        !h.stores.is_empty(),
        "the first 4,000 records are being stored"
    );
    // ZooKeeper is slow: past the 10 s offer TTL, no record stored yet.
    expire_only(&mut h, &["unfit"]).await;
    h.answer_all();
    for _ in 0..3 {
        // Passes over thousands of records are paced.
        h.advance(Duration::from_secs(1)).await;
        h.answer_all();
    }
    let calls = h.drain_call_log();
    assert_eq!(Harness::launched(&calls).len(), 6_000);
    let accepted: Vec<&str> = calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Accept { offer_id, .. } => Some(offer_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        accepted,
        ["h1", "h2"],
        "{:?}",
        Harness::kinds_of_calls(&calls)
    );
}

#[tokio::test(start_paused = true)]
async fn an_offer_a_deferred_service_s_held_back_launch_waits_for_outlives_its_ttl() {
    // `a` (3,000) and `b` (3,000): the first pass places all of `a` and
    // 1,000 of `b` on h1 (the budget holds back `b`'s other 2,000). Then
    // passes read one service each (`PassBound`): a pass over `a` alone
    // must not forget that `b`, deferred, still waits for h2.
    let mut h = Harness::leader(&[service("a", 3_000), service("b", 3_000)], &[]);
    h.subscribe();
    h.answer_all();
    h.huge_offer("h1");
    h.huge_offer("h2");
    h.answer_calls();
    h.machine.pass.budget = 1;
    h.advance(Duration::from_secs(1)).await;
    // A new offer wakes a pass: it assesses `a` and defers `b`.
    h.offer("unfit", "agent-u", 0.05);
    h.answer_calls();
    assert!(h.machine.pass.deferred(), "b deferred");
    // The TTL may end right after such a pass (the next one, over `b`, is
    // paced): h2 is still wanted.
    let wanted = h.machine.launches.wanted(&h.machine.offers);
    assert_eq!(wanted, std::collections::HashSet::from(["h2".to_string()]));
    expire_only(&mut h, &["unfit"]).await;
}

#[tokio::test(start_paused = true)]
async fn only_the_offers_a_held_back_launch_would_take_outlive_their_ttl() {
    // 5,000 instances of 0.1 cpu: 4,000 placed on h1, 1,000 held back. m1
    // and m2 take 600 each: both are wanted, m3 is one too many.
    let mut h = Harness::leader(&[service("many", 5_000)], &[]);
    h.subscribe();
    h.answer_all();
    h.huge_offer("h1");
    for m in ["m1", "m2", "m3"] {
        h.offer_of(m, "cpus:60;mem:100000");
    }
    h.answer_calls();
    expire_only(&mut h, &["m3"]).await;
    h.answer_all();
    h.advance(Duration::from_secs(1)).await;
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 5_000);
}
