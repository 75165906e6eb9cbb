//! Framework lifecycle on the testbed: scheduler failover, disconnection,
//! failover timeout, removal, TEARDOWN and the bounded completed list
//! (`docs/mesos-protocol.md#subscribe-and-the-framework-lifecycle`, captures d, g, m).

use crate::support;
use crate::support::testbed;

use std::time::Duration;

use mesos_appliance::testbed::TestbedConfig;
use serde_json::json;
use support::mesos::*;

fn reconcile(fid: &str) -> serde_json::Value {
    json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": []}})
}

#[tokio::test]
async fn second_subscribe_with_the_same_id_fails_the_first_over() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut first, fid) = connected(&tb.url(), "fo", 60.0).await;
    let offer = first.expect("OFFERS").await;
    let old_offer = offer["offers"]["offers"][0]["id"]["value"]
        .as_str()
        .unwrap()
        .to_string();

    let mut second = subscribe(&tb.url(), existing_framework("fo", &fid, 60.0)).await;
    assert_eq!(second.status, 200);
    assert_ne!(second.stream_id, first.stream_id);

    // The old stream: ERROR "Framework failed over", then a clean end, no RESCIND.
    let error = first.expect("ERROR").await;
    assert_eq!(
        error,
        json!({"type": "ERROR", "error": {"message": "Framework failed over"}})
    );
    assert_eq!(first.expect_end().await, End::Clean);
    assert!(
        first.seen.iter().all(|e| e["type"] != "RESCIND"),
        "{:?}",
        first.seen
    );

    // The new stream: SUBSCRIBED (same ID), HEARTBEAT, and a new offer for the same resources.
    assert_eq!(second.subscribed().await, fid);
    assert_eq!(second.next().await.unwrap()["type"], "HEARTBEAT");
    let offer = second.expect("OFFERS").await;
    assert_ne!(
        offer["offers"]["offers"][0]["id"]["value"],
        old_offer.as_str()
    );
    assert!(second.seen.iter().all(|e| e["type"] != "RESCIND"));

    // The old stream ID is now refused.
    let stale = call(&tb.url(), &first.stream_id, reconcile(&fid)).await;
    assert_eq!(stale.status, 400);
    assert_eq!(
        stale.body,
        format!(
            "The stream ID '{}' included in this request didn't match the stream ID currently associated with framework ID {fid}",
            first.stream_id
        )
    );
    // ACCEPT of the discarded offer: TASK_LOST for invalid offers.
    let accept = launch(&fid, &offer["offers"]["offers"][0], &[]);
    let mut accept_old = accept.clone();
    accept_old["accept"]["offer_ids"] = json!([{"value": old_offer}]);
    accept_old["accept"]["operations"][0]["launch"]["task_infos"] = json!([{
        "name": "x", "task_id": {"value": "x"}, "agent_id": offer["offers"]["offers"][0]["agent_id"],
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}],
        "command": {"value": "true"}}]);
    assert_eq!(
        call(&tb.url(), &second.stream_id, accept_old).await.status,
        202
    );
    let lost = second.expect_update("x").await;
    assert_eq!(lost["state"], "TASK_LOST");
    assert_eq!(lost["reason"], "REASON_INVALID_OFFERS");
    assert_eq!(lost["source"], "SOURCE_MASTER");
    assert_eq!(
        lost["message"],
        format!("Task launched with invalid offers: Offer {old_offer} is no longer valid")
    );
    assert!(lost.get("uuid").is_none());
}

#[tokio::test]
async fn disconnected_framework_is_inactive_until_it_resubscribes_within_the_timeout() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (sub, fid) = connected(&tb.url(), "dc", 60.0).await;
    let stream_id = sub.stream_id.clone();
    drop(sub); // the scheduler hangs up
    wait_until(|| tb.frameworks().iter().any(|f| f.id == fid && !f.connected)).await;

    let refused = call(&tb.url(), &stream_id, reconcile(&fid)).await;
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (403, "Framework is not subscribed")
    );

    let mut again = subscribe(&tb.url(), existing_framework("dc", &fid, 60.0)).await;
    assert_eq!(again.subscribed().await, fid);
    assert!(
        again.seen.is_empty(),
        "no ERROR before SUBSCRIBED: {:?}",
        again.seen
    );
    assert_eq!(
        call(&tb.url(), &again.stream_id, reconcile(&fid))
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn failover_timeout_removes_the_framework_and_kills_its_tasks() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "ft", 1.0).await;
    let offers = sub.expect("OFFERS").await;
    let accept = launch(&fid, &offers["offers"]["offers"][0], &[("t1", 0.1, 32.0)]);
    assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
    sub.expect_update("t1").await;
    drop(sub);

    wait_until(|| tb.frameworks().iter().any(|f| f.id == fid && f.completed)).await;
    assert!(
        tb.tasks().is_empty(),
        "tasks of a removed framework are gone: {:?}",
        tb.tasks()
    );
    // Recorded as TASK_KILLED in the master's state.
    let state = master_state(&tb.url()).await;
    let done = &state["completed_frameworks"][0];
    assert_eq!(done["id"], fid.as_str());
    assert_eq!(done["active"], false);
    assert!(done["unregistered_time"].as_f64().unwrap() > 0.0);
    assert_eq!(done["completed_tasks"][0]["state"], "TASK_KILLED");

    // Re-subscribing: 200, one ERROR, then the stream closes.
    let mut late = subscribe(&tb.url(), existing_framework("ft", &fid, 1.0)).await;
    assert_eq!(late.status, 200);
    assert_eq!(
        late.next().await.unwrap(),
        json!({"type": "ERROR", "error": {"message": "Framework has been removed"}})
    );
    assert_eq!(late.expect_end().await, End::Clean);
    let gone = call(&tb.url(), &late.stream_id, reconcile(&fid)).await;
    assert_eq!(
        (gone.status, gone.body.as_str()),
        (400, "Framework cannot be found")
    );
}

#[tokio::test]
async fn zero_failover_timeout_removes_at_once() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (sub, fid) = connected(&tb.url(), "zero", 0.0).await;
    let dropped_at = std::time::Instant::now();
    drop(sub);
    wait_until(|| tb.frameworks().iter().any(|f| f.id == fid && f.completed)).await;
    // failover_timeout 0 removes the framework as soon as it disconnects
    // (master.cpp: the failover timer is started with a zero delay).
    let took = dropped_at.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "removed after {took:?}"
    );
}

#[tokio::test]
async fn teardown_closes_the_stream_without_events_and_removes_the_framework() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "td", 60.0).await;
    let offers = sub.expect("OFFERS").await;
    let accept = launch(&fid, &offers["offers"]["offers"][0], &[("t1", 0.1, 32.0)]);
    call(&tb.url(), &sub.stream_id, accept).await;
    let starting = sub.expect_update("t1").await;
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &starting)).await;
    sub.expect_update("t1").await;
    sub.seen.clear();

    let teardown = call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "TEARDOWN"}),
    )
    .await;
    assert_eq!((teardown.status, teardown.body.as_str()), (202, ""));
    assert_eq!(sub.expect_end().await, End::Clean);
    assert!(
        sub.seen
            .iter()
            .all(|e| e["type"] == "HEARTBEAT" || e["type"] == "OFFERS"),
        "TEARDOWN sends no ERROR and no UPDATE: {:?}",
        sub.seen
    );
    let gone = call(&tb.url(), &sub.stream_id, reconcile(&fid)).await;
    assert_eq!(
        (gone.status, gone.body.as_str()),
        (400, "Framework cannot be found")
    );
    let mut late = subscribe(&tb.url(), existing_framework("td", &fid, 60.0)).await;
    assert_eq!(
        late.next().await.unwrap()["error"]["message"],
        "Framework has been removed"
    );
}

#[tokio::test]
async fn completed_frameworks_are_bounded_and_evicted_ids_are_accepted_again() {
    let mut config = TestbedConfig::for_tests(1);
    config.max_completed_frameworks = 2;
    let tb = testbed(config).await;
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let (sub, fid) = connected(&tb.url(), name, 60.0).await;
        call(
            &tb.url(),
            &sub.stream_id,
            json!({"framework_id": {"value": fid}, "type": "TEARDOWN"}),
        )
        .await;
        ids.push(fid);
    }
    let completed: Vec<String> = tb
        .frameworks()
        .into_iter()
        .filter(|f| f.completed)
        .map(|f| f.id)
        .collect();
    assert_eq!(completed, ids[1..]);
    // The evicted ID is no longer known as removed: accepted as a framework again.
    let mut back = subscribe(&tb.url(), existing_framework("a", &ids[0], 60.0)).await;
    assert_eq!(back.subscribed().await, ids[0]);
    // A removed one that is still cached is refused.
    let mut refused = subscribe(&tb.url(), existing_framework("b", &ids[1], 60.0)).await;
    assert_eq!(refused.next().await.unwrap()["type"], "ERROR");
}

#[tokio::test]
async fn principal_cannot_change_on_resubscribe() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut body = new_framework("p", 60.0);
    body["subscribe"]["framework_info"]["principal"] = json!("alice");
    let mut sub = subscribe(&tb.url(), body).await;
    let fid = sub.subscribed().await;
    let mut again = existing_framework("p", &fid, 60.0);
    again["subscribe"]["framework_info"]["principal"] = json!("mallory");
    let mut refused = subscribe(&tb.url(), again).await;
    assert_eq!(refused.status, 200);
    assert_eq!(
        refused.next().await.unwrap()["error"]["message"],
        "Changing framework's principal is not allowed."
    );
    assert_eq!(refused.expect_end().await, End::Clean);
    // The original subscription is untouched.
    sub.expect("HEARTBEAT").await;
}

/// Polls `condition` until it holds (10 s at most).
async fn wait_until(condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
