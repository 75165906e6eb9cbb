//! Fault injection on the testbed: unreachable agents (captures q, s),
//! tasks held in STAGING, ignored KILLs, stopped heartbeats, cut streams and a
//! simulated master failover (capture o).

use crate::support;
use crate::support::testbed;

use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

/// Launches `task` on the first offer and acknowledges STARTING and RUNNING.
async fn running_task(tb: &Testbed, sub: &mut Subscription, fid: &str, task: &str) -> Value {
    let event = sub.expect("OFFERS").await;
    let offer = event["offers"]["offers"][0].clone();
    call(
        &tb.url(),
        &sub.stream_id,
        launch(fid, &offer, &[(task, 0.1, 32.0)]),
    )
    .await;
    for _ in 0..2 {
        let status = sub.expect_update(task).await;
        call(&tb.url(), &sub.stream_id, acknowledge(fid, &status)).await;
    }
    offer
}

fn reconcile(fid: &str, task: &str, agent: &Value) -> Value {
    json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": [
        {"task_id": {"value": task}, "agent_id": agent}]}})
}

#[tokio::test]
async fn unreachable_agent_loses_its_tasks_until_it_comes_back() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "ua", 60.0).await;
    let offer = running_task(&tb, &mut sub, &fid, "t1").await;
    let agent = offer["agent_id"]["value"].as_str().unwrap().to_string();

    // Over HTTP, as a multi-process test would do it.
    let answer = post(
        &format!("{}/testbed/agents/{agent}/unreachable", tb.url()),
        &[],
        "",
    )
    .await;
    assert_eq!(answer.status, 200);
    let lost = sub.expect_update("t1").await;
    assert_eq!(lost["state"], "TASK_LOST");
    assert_eq!(lost["source"], "SOURCE_MASTER");
    assert_eq!(lost["reason"], "REASON_AGENT_REMOVED");
    assert_eq!(lost["message"], "health check timed out");
    assert!(lost.get("uuid").is_none());
    assert!(lost["unreachable_time"]["nanoseconds"].as_i64().unwrap() > 0);
    assert_eq!(
        sub.expect("FAILURE").await["failure"],
        json!({"agent_id": {"value": agent}})
    );
    assert!(tb.tasks()[0].unreachable);

    call(
        &tb.url(),
        &sub.stream_id,
        reconcile(&fid, "t1", &offer["agent_id"]),
    )
    .await;
    let answer = sub.expect_update("t1").await;
    assert_eq!(
        (answer["state"].as_str(), answer["message"].as_str()),
        (
            Some("TASK_LOST"),
            Some("Reconciliation: Task is unreachable")
        )
    );
    assert_eq!(answer["unreachable_time"], lost["unreachable_time"]);
    // Without its agent ID the master does not look the task up: unknown
    // (`Master::_reconcileTasks` case (6); capture t).
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "RECONCILE",
               "reconcile": {"tasks": [{"task_id": {"value": "t1"}}]}}),
    )
    .await;
    let answer = sub.expect_update("t1").await;
    assert_eq!(
        (answer["state"].as_str(), answer["message"].as_str()),
        (Some("TASK_LOST"), Some("Reconciliation: Task is unknown"))
    );
    // Implicit reconciliation leaves unreachable tasks out.
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": []}}),
    )
    .await;
    sub.expect_none("UPDATE", Duration::from_millis(300)).await;

    // The agent returns with the task still running: TASK_LOST was not final.
    assert_eq!(
        post(
            &format!("{}/testbed/agents/{agent}/reachable", tb.url()),
            &[],
            ""
        )
        .await
        .status,
        200
    );
    let back = sub.expect_update("t1").await;
    assert_eq!(back["state"], "TASK_RUNNING");
    assert_eq!(back["reason"], "REASON_AGENT_REREGISTERED");
    assert_eq!(back["message"], "Unreachable agent re-reregistered");
    assert!(back.get("uuid").is_none());
    assert!(!tb.tasks()[0].unreachable);
    assert_eq!(
        post(
            &format!("{}/testbed/agents/no-such/unreachable", tb.url()),
            &[],
            ""
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn held_task_stays_staging_and_can_be_killed() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    tb.hold_staging("held.");
    let (mut sub, fid) = connected(&tb.url(), "hs", 60.0).await;
    let event = sub.expect("OFFERS").await;
    let offer = event["offers"]["offers"][0].clone();
    call(
        &tb.url(),
        &sub.stream_id,
        launch(&fid, &offer, &[("held.1", 0.1, 32.0)]),
    )
    .await;
    sub.expect_none("UPDATE", Duration::from_millis(400)).await;
    call(
        &tb.url(),
        &sub.stream_id,
        reconcile(&fid, "held.1", &offer["agent_id"]),
    )
    .await;
    let staging = sub.expect_update("held.1").await;
    assert_eq!(staging["state"], "TASK_STAGING");
    call(&tb.url(), &sub.stream_id, json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {"task_id": {"value": "held.1"}}})).await;
    let killed = sub.expect_update("held.1").await;
    assert_eq!(killed["state"], "TASK_KILLED");
    assert_eq!(killed["source"], "SOURCE_AGENT");
    assert_eq!(killed["reason"], "REASON_TASK_KILLED_DURING_LAUNCH");
}

#[tokio::test]
async fn ignored_kill_leaves_the_task_running() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "ik", 60.0).await;
    running_task(&tb, &mut sub, &fid, "stubborn.1").await;
    let answer = post(
        &format!("{}/testbed/faults/ignore-kill", tb.url()),
        &[("Content-Type", "application/json")],
        json!({"task_id_prefix": "stubborn."}).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200);
    call(&tb.url(), &sub.stream_id, json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {"task_id": {"value": "stubborn.1"}}})).await;
    sub.expect_none("UPDATE", Duration::from_millis(500)).await;
    tb.clear_faults();
    call(&tb.url(), &sub.stream_id, json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {"task_id": {"value": "stubborn.1"}}})).await;
    assert_eq!(
        sub.expect_update("stubborn.1").await["state"],
        "TASK_KILLED"
    );
}

#[tokio::test]
async fn heartbeats_stop_and_resume() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "hb", 60.0).await;
    sub.expect("HEARTBEAT").await;
    // Stop offers too, so the stream goes silent.
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "SUPPRESS"}),
    )
    .await;
    let answer = post(
        &format!("{}/testbed/heartbeats/stop", tb.url()),
        &[("Content-Type", "application/json")],
        json!({"framework_id": fid}).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200);
    // A heartbeat the master wrote before the stop may still be on its
    // way: take what is already there, then watch for new ones.
    while sub.next_within(Duration::from_millis(200)).await.is_some() {}
    let mut silent = true;
    while let Some(item) = sub.next_within(Duration::from_millis(2500)).await {
        if item.as_ref().is_ok_and(|e| e["type"] == "HEARTBEAT") {
            silent = false;
            break;
        }
    }
    assert!(silent, "no heartbeat while stopped");
    post(&format!("{}/testbed/heartbeats/resume", tb.url()), &[], "").await;
    sub.expect("HEARTBEAT").await;
}

#[tokio::test]
async fn dropped_stream_is_cut_and_the_framework_disconnected() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "ds", 60.0).await;
    let answer = post(
        &format!("{}/testbed/frameworks/{fid}/drop-stream", tb.url()),
        &[],
        "",
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(
        matches!(sub.expect_end().await, End::Broken(_)),
        "no terminating chunk"
    );
    let refused = call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "REVIVE"}),
    )
    .await;
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (403, "Framework is not subscribed")
    );
}

#[tokio::test]
async fn master_failover_keeps_tasks_and_recovers_frameworks_from_agents() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let old_master = tb.master_id();
    let (mut sub, fid) = connected(&tb.url(), "mf", 60.0).await;
    let offer = running_task(&tb, &mut sub, &fid, "t1").await;
    let answer = post(
        &format!("{}/testbed/master/failover", tb.url()),
        &[("Content-Type", "application/json")],
        json!({"reregister_delay_ms": 1500}).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(matches!(sub.expect_end().await, End::Broken(_)));
    assert_ne!(tb.master_id(), old_master);

    // Re-subscribe with the same ID before the agent re-registered.
    let mut again = subscribe(&tb.url(), existing_framework("mf", &fid, 60.0)).await;
    let subscribed = again.expect("SUBSCRIBED").await;
    assert_eq!(
        subscribed["subscribed"]["master_info"]["id"],
        tb.master_id()
    );
    // Explicit reconciliation gets no answer while the agent is recovering.
    call(
        &tb.url(),
        &again.stream_id,
        reconcile(&fid, "t1", &offer["agent_id"]),
    )
    .await;
    sub.seen.clear();
    again
        .expect_none("UPDATE", Duration::from_millis(800))
        .await;
    // Once it re-registered, the task is there, and offers carry the new master ID.
    let offers = again.expect("OFFERS").await;
    assert!(
        offers["offers"]["offers"][0]["id"]["value"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}-O", tb.master_id()))
    );
    call(
        &tb.url(),
        &again.stream_id,
        reconcile(&fid, "t1", &offer["agent_id"]),
    )
    .await;
    assert_eq!(again.expect_update("t1").await["state"], "TASK_RUNNING");
}

#[tokio::test]
async fn fault_delays_beyond_an_hour_are_refused() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let old_master = tb.master_id();
    let agent = tb.agents()[0].id.clone();
    for (path, field) in [
        (
            "/testbed/master/failover".to_string(),
            "reregister_delay_ms",
        ),
        (format!("/testbed/agents/{agent}/restart"), "down_ms"),
    ] {
        for too_long in [u64::MAX, 3_600_001] {
            let answer = post(
                &format!("{}{path}", tb.url()),
                &[("Content-Type", "application/json")],
                json!({ field: too_long }).to_string(),
            )
            .await;
            assert_eq!(answer.status, 400, "{path} {too_long}: {}", answer.body);
            assert!(answer.body.contains(field), "{}", answer.body);
            assert!(answer.body.contains("one hour"), "{}", answer.body);
        }
    }
    // Nothing happened: same master, the agent still there.
    assert_eq!(tb.master_id(), old_master);
    assert_eq!(tb.agents().len(), 1);
    // An hour exactly is allowed.
    let answer = post(
        &format!("{}/testbed/master/failover", tb.url()),
        &[("Content-Type", "application/json")],
        json!({"reregister_delay_ms": 3_600_000}).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_ne!(tb.master_id(), old_master);
}

#[tokio::test]
async fn recovered_framework_is_listed_inactive_after_master_failover() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "rf", 60.0).await;
    running_task(&tb, &mut sub, &fid, "t1").await;
    tb.simulate_master_failover(Duration::from_millis(100));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(f) = tb.frameworks().into_iter().find(|f| f.id == fid) {
            assert!(f.recovered && !f.connected);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
