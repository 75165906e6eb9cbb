//! Offers on the testbed: per-agent offers, DECLINE filters, SUPPRESS /
//! REVIVE, unused ACCEPT resources, RESCIND (`docs/mesos-protocol.md#offers`, capture p).

use crate::support;
use crate::support::testbed;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{AgentSpec, Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

fn offer_ids(event: &Value) -> Vec<Value> {
    event["offers"]["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].clone())
        .collect()
}

fn decline(fid: &str, ids: Vec<Value>, refuse_seconds: Option<f64>) -> Value {
    let mut body =
        json!({"framework_id": {"value": fid}, "type": "DECLINE", "decline": {"offer_ids": ids}});
    if let Some(s) = refuse_seconds {
        body["decline"]["filters"] = json!({"refuse_seconds": s});
    }
    body
}

/// A connected framework that declined its first offer for an hour.
async fn declined_for_an_hour(tb: &Testbed, name: &str) -> (Subscription, String) {
    let (mut sub, fid) = connected(&tb.url(), name, 60.0).await;
    let first = sub.expect("OFFERS").await;
    call(
        &tb.url(),
        &sub.stream_id,
        decline(&fid, offer_ids(&first), Some(3600.0)),
    )
    .await;
    (sub, fid)
}

#[tokio::test]
async fn one_offer_per_agent_with_hostnames_and_attributes() {
    init();
    let mut config = TestbedConfig::for_tests(0);
    config.agents = vec![
        AgentSpec::new("host-a", "cpus:2;mem:1024;ports:[31000-31009]").with_attributes("rack:r1"),
        AgentSpec::new("host-b", "cpus:1;mem:512").with_attributes("rack:r2;level:3"),
    ];
    let tb = Testbed::start(config).await.unwrap();
    let (mut sub, _) = connected(&tb.url(), "o", 60.0).await;
    let event = sub.expect("OFFERS").await;
    let offers = event["offers"]["offers"].as_array().unwrap();
    assert_eq!(
        offers.len(),
        2,
        "one OFFERS event carries every agent's offer"
    );
    let mut hosts: Vec<&str> = offers
        .iter()
        .map(|o| o["hostname"].as_str().unwrap())
        .collect();
    hosts.sort();
    assert_eq!(hosts, ["host-a", "host-b"]);
    let a = offers.iter().find(|o| o["hostname"] == "host-a").unwrap();
    assert_eq!(
        a["attributes"][0],
        json!({"name": "rack", "type": "TEXT", "text": {"value": "r1"}})
    );
    assert_eq!(
        a["resources"][0]["ranges"]["range"][0],
        json!({"begin": 31000, "end": 31009})
    );
    let b = offers.iter().find(|o| o["hostname"] == "host-b").unwrap();
    assert_eq!(b["attributes"][1]["scalar"]["value"], 3.0);
}

#[tokio::test]
async fn declined_resources_return_after_refuse_seconds() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "d", 60.0).await;
    let first = sub.expect("OFFERS").await;
    let declined_at = Instant::now();
    assert_eq!(
        call(
            &tb.url(),
            &sub.stream_id,
            decline(&fid, offer_ids(&first), Some(1.0))
        )
        .await
        .status,
        202
    );
    let next = sub.expect("OFFERS").await;
    let waited = declined_at.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "filter held for {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "filter expired late: {waited:?}"
    );
    assert_ne!(offer_ids(&next), offer_ids(&first));
}

#[tokio::test]
async fn decline_without_filters_uses_five_seconds() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "d5", 60.0).await;
    let first = sub.expect("OFFERS").await;
    // Taken before the call: the master starts the filter while it handles
    // the DECLINE, before its answer reaches us.
    let declined_at = Instant::now();
    call(
        &tb.url(),
        &sub.stream_id,
        decline(&fid, offer_ids(&first), None),
    )
    .await;
    sub.expect_none("OFFERS", Duration::from_secs(3)).await;
    // The default filter lasts 5 s (mesos.proto Filters.refuse_seconds), not
    // forever: the agent's resources come back within a few allocations.
    sub.expect("OFFERS").await;
    let back_after = declined_at.elapsed();
    assert!(
        (Duration::from_secs(5)..Duration::from_secs(8)).contains(&back_after),
        "offer back after {back_after:?}"
    );
}

#[tokio::test]
async fn suppress_stops_offers_and_revive_brings_them_back_at_once() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "s", 60.0).await;
    let first = sub.expect("OFFERS").await;
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "SUPPRESS"}),
    )
    .await;
    // Even a short decline filter does not bring offers back while suppressed.
    call(
        &tb.url(),
        &sub.stream_id,
        decline(&fid, offer_ids(&first), Some(0.2)),
    )
    .await;
    sub.expect_none("OFFERS", Duration::from_secs(1)).await;
    let revived_at = Instant::now();
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "REVIVE"}),
    )
    .await;
    sub.expect("OFFERS").await;
    assert!(
        revived_at.elapsed() < Duration::from_millis(500),
        "offer after {:?}",
        revived_at.elapsed()
    );
}

/// REVIVE clears the framework's decline filters
/// (`HierarchicalAllocatorProcess::reviveOffers` → `reviveRoles` in
/// `src/master/allocator/mesos/hierarchical.cpp`).
#[tokio::test]
async fn revive_clears_decline_filters() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = declined_for_an_hour(&tb, "r").await;
    sub.expect_none("OFFERS", Duration::from_millis(400)).await;
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "REVIVE"}),
    )
    .await;
    sub.expect("OFFERS").await;
}

#[tokio::test]
async fn unused_accept_resources_are_reoffered_and_used_ones_are_not() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "u", 60.0).await;
    let event = sub.expect("OFFERS").await;
    let offer = &event["offers"]["offers"][0];
    let mut accept = launch(&fid, offer, &[("t1", 1.0, 1024.0)]);
    accept["accept"]["filters"] = json!({"refuse_seconds": 0.0});
    call(&tb.url(), &sub.stream_id, accept).await;
    let next = sub.expect("OFFERS").await;
    let resources = &next["offers"]["offers"][0]["resources"];
    let scalar = |name: &str| {
        resources
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["scalar"]["value"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(scalar("cpus"), 3.0);
    assert_eq!(scalar("mem"), 7168.0);
}

#[tokio::test]
async fn unreachable_agent_rescinds_its_offers() {
    let tb = testbed(TestbedConfig::for_tests(2)).await;
    let (mut sub, _) = connected(&tb.url(), "rs", 60.0).await;
    let event = sub.expect("OFFERS").await;
    let agent = tb.agents()[0].id.clone();
    let on_agent: Vec<Value> = event["offers"]["offers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["agent_id"]["value"] == agent.as_str())
        .map(|o| o["id"].clone())
        .collect();
    assert_eq!(on_agent.len(), 1);
    assert!(tb.make_agent_unreachable(&agent));
    let rescind = sub.expect("RESCIND").await;
    assert_eq!(rescind["rescind"]["offer_id"], on_agent[0]);
    let failure = sub.expect("FAILURE").await;
    assert_eq!(
        failure,
        json!({"type": "FAILURE", "failure": {"agent_id": {"value": agent}}})
    );
}

#[tokio::test]
async fn multi_role_frameworks_see_allocation_info() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut body = new_framework("mr", 60.0);
    body["subscribe"]["framework_info"]["roles"] = json!(["*"]);
    body["subscribe"]["framework_info"]["capabilities"] = json!([{"type": "MULTI_ROLE"}]);
    let mut sub = subscribe(&tb.url(), body).await;
    let event = sub.expect("OFFERS").await;
    let offer = &event["offers"]["offers"][0];
    assert_eq!(offer["allocation_info"], json!({"role": "*"}));
    assert_eq!(
        offer["resources"][0]["allocation_info"],
        json!({"role": "*"})
    );
    assert!(offer["resources"][0].get("role").is_none());
    // roles without MULTI_ROLE is refused with an ERROR on the stream.
    let mut bad = new_framework("bad", 60.0);
    bad["subscribe"]["framework_info"]["roles"] = json!(["*"]);
    let mut refused = subscribe(&tb.url(), bad).await;
    assert_eq!(
        refused.next().await.unwrap()["error"]["message"],
        "'FrameworkInfo.roles' must not be set when the framework is not MULTI_ROLE capable"
    );
}

fn revive(fid: &str) -> Value {
    json!({"framework_id": {"value": fid}, "type": "REVIVE"})
}

fn suppress(fid: &str) -> Value {
    json!({"framework_id": {"value": fid}, "type": "SUPPRESS"})
}

/// A disconnection deactivates the framework, and deactivation drops its
/// offer filters (`HierarchicalAllocatorProcess::deactivateFramework` in
/// `src/master/allocator/mesos/hierarchical.cpp`, reached from
/// `Master::exited` → `_exited` → `disconnect` → `deactivate` in
/// `src/master/master.cpp`): after a re-SUBSCRIBE the declined agent is
/// offered again at once, long before `refuse_seconds` end.
#[tokio::test]
async fn a_disconnection_clears_the_frameworks_decline_filters() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = declined_for_an_hour(&tb, "dc").await;
    sub.expect_none("OFFERS", Duration::from_millis(400)).await;
    drop(sub);
    // The master sees the stream close; the framework becomes inactive.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = master_state(&tb.url()).await;
        let framework = state["frameworks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == fid.as_str())
            .cloned()
            .unwrap();
        if framework["active"] == false {
            break;
        }
        assert!(Instant::now() < deadline, "still active: {framework}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut again = subscribe(&tb.url(), existing_framework("dc", &fid, 60.0)).await;
    again.subscribed().await;
    let offer = tokio::time::timeout(Duration::from_secs(2), again.expect("OFFERS"))
        .await
        .expect("the declined agent is offered again after the disconnection");
    assert_eq!(offer["offers"]["offers"].as_array().unwrap().len(), 1);
}

/// A SUBSCRIBE of a known framework sets its suppressed roles to exactly the
/// call's `suppressed_roles` (`Master::_subscribe` → `updateFramework` →
/// `HierarchicalAllocatorProcess::updateFramework`, which suppresses the new
/// ones and revives the ones no longer listed): a SUPPRESS before a failover
/// does not outlive a re-SUBSCRIBE without `suppressed_roles`, and one with
/// them stays suppressed.
#[tokio::test]
async fn a_resubscribe_sets_suppression_to_its_suppressed_roles() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "sr", 60.0).await;
    sub.expect("OFFERS").await;
    call(&tb.url(), &sub.stream_id, suppress(&fid)).await;
    // The old stream is still open: a failover, not a reconnection.
    let mut listed = existing_framework("sr", &fid, 60.0);
    listed["subscribe"]["suppressed_roles"] = json!(["*"]);
    let mut second = subscribe(&tb.url(), listed).await;
    second.subscribed().await;
    second
        .expect_none("OFFERS", Duration::from_millis(600))
        .await;
    let mut third = subscribe(&tb.url(), existing_framework("sr", &fid, 60.0)).await;
    third.subscribed().await;
    tokio::time::timeout(Duration::from_secs(2), third.expect("OFFERS"))
        .await
        .expect("a SUBSCRIBE without suppressed_roles leaves no role suppressed");
}

/// A failover while the old stream is still open is no deactivation: the old
/// stream gets ERROR "Framework failed over", the offers are discarded, and
/// the allocator keeps the framework's filters (`Master::failoverFramework`
/// and `_failoverFramework` in `src/master/master.cpp`; `updateFramework` in
/// `hierarchical.cpp` keeps the filters of the roles it keeps). Only REVIVE
/// brings the declined agent back before `refuse_seconds` end
/// (`reviveOffers` → `reviveRoles`).
#[tokio::test]
async fn a_failover_with_the_old_stream_open_keeps_filters_until_revive() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = declined_for_an_hour(&tb, "fo").await;
    let mut second = subscribe(&tb.url(), existing_framework("fo", &fid, 60.0)).await;
    second.subscribed().await;
    let error = sub.expect("ERROR").await;
    assert_eq!(error["error"]["message"], "Framework failed over");
    second.expect_none("OFFERS", Duration::from_secs(1)).await;
    let revived_at = Instant::now();
    call(&tb.url(), &second.stream_id, revive(&fid)).await;
    second.expect("OFFERS").await;
    assert!(
        revived_at.elapsed() < Duration::from_millis(500),
        "offer {:?} after REVIVE",
        revived_at.elapsed()
    );
}
