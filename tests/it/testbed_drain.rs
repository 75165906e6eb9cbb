//! The testbed's DRAIN_AGENT, DEACTIVATE_AGENT, REACTIVATE_AGENT and
//! GET_AGENTS (`deactivated`, `drain_info`), checked against the real Mesos
//! 1.12 capture of them (capture u, runs A, B and C; `src/master/http.cpp`
//! `_drainAgent`, `_deactivateAgent`, `_reactivateAgent`,
//! `src/master/master.cpp` `checkAndTransitionDrainingAgent`), and the
//! timed partition fault (`POST /testbed/agents/{id}/partition`).

use crate::support;
use crate::support::testbed;

use std::time::Duration;

use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

/// How long an offer probe listens: long enough for an allocation round
/// (1 s by default) on a loaded machine, so "nothing offered" means it.
const PROBE: Duration = Duration::from_secs(2);

/// A framework subscribed with `capabilities` (e.g. `PARTITION_AWARE`).
async fn framework(tb: &Testbed, name: &str, capabilities: &[&str]) -> (Subscription, String) {
    let caps: Vec<Value> = capabilities.iter().map(|c| json!({"type": c})).collect();
    let mut sub = subscribe(
        &tb.url(),
        json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
            "user": "root", "name": name, "failover_timeout": 60.0, "capabilities": caps}}}),
    )
    .await;
    assert_eq!(sub.status, 200, "{}", sub.body);
    let id = sub.subscribed().await;
    (sub, id)
}

/// Launches `task` on the next offer and acknowledges STARTING and
/// RUNNING; returns the agent ID.
async fn running_task(tb: &Testbed, sub: &mut Subscription, fid: &str, task: &str) -> String {
    let event = match sub.seen.iter().position(|e| e["type"] == "OFFERS") {
        Some(i) => sub.seen.remove(i),
        None => sub.expect("OFFERS").await,
    };
    let offers = event["offers"]["offers"].as_array().unwrap();
    let offer = offers[0].clone();
    call(
        &tb.url(),
        &sub.stream_id,
        launch(fid, &offer, &[(task, 0.1, 32.0)]),
    )
    .await;
    // The others go back, so that offer probes see every agent.
    for other in &offers[1..] {
        call(&tb.url(), &sub.stream_id, decline(fid, other)).await;
    }
    for _ in 0..2 {
        let status = sub.expect_update(task).await;
        call(&tb.url(), &sub.stream_id, acknowledge(fid, &status)).await;
    }
    offer["agent_id"]["value"].as_str().unwrap().to_string()
}

async fn op(tb: &Testbed, body: Value) -> Answer {
    operator(&tb.url(), body).await
}

fn decline(fid: &str, offer: &Value) -> Value {
    json!({"framework_id": {"value": fid}, "type": "DECLINE", "decline": {
        "offer_ids": [offer["id"]], "filters": {"refuse_seconds": 0.1}}})
}

fn drain(agent: &str, mark_gone: bool) -> Value {
    json!({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": agent},
        "max_grace_period": {"seconds": 5}, "mark_gone": mark_gone}})
}

fn hold(kind: &str, agent: &str) -> Value {
    let field = kind.to_lowercase();
    json!({"type": kind, field: {"agent_id": {"value": agent}}})
}

/// GET_AGENTS' entry of `agent`, or `None` when it is not listed.
async fn listed(tb: &Testbed, agent: &str) -> Option<Value> {
    let answer = op(tb, json!({"type": "GET_AGENTS"})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["type"], "GET_AGENTS");
    // Our JSON mapping leaves out an empty `agents` list.
    body["get_agents"]["agents"]
        .as_array()?
        .iter()
        .find(|a| a["agent_info"]["id"]["value"] == agent)
        .cloned()
}

/// GET_AGENTS' entry of `agent` once its drain is DRAINED (within 5 s).
async fn drained(tb: &Testbed, agent: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let entry = listed(tb, agent).await;
        if let Some(entry) = entry.filter(|a| a["drain_info"]["state"] == "DRAINED") {
            return entry;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{agent} not DRAINED within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Declines every offer the framework holds or gets within `wait`
/// (refuse_seconds 0.1, the capture's "offer probe") and returns the agents
/// that were offered.
async fn offered_agents(
    tb: &Testbed,
    sub: &mut Subscription,
    fid: &str,
    wait: Duration,
) -> Vec<String> {
    let mut agents = Vec::new();
    let mut events: Vec<Value> = std::mem::take(&mut sub.seen);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        for event in events.drain(..) {
            if event["type"] != "OFFERS" {
                continue;
            }
            for offer in event["offers"]["offers"].as_array().unwrap() {
                agents.push(offer["agent_id"]["value"].as_str().unwrap().to_string());
                call(&tb.url(), &sub.stream_id, decline(fid, offer)).await;
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        match sub.next_within(left).await {
            Some(Ok(event)) => events.push(event),
            _ => break,
        }
    }
    agents.sort();
    agents.dedup();
    agents
}

/// Capture u, run A: DRAIN_AGENT with max_grace_period 5 s kills the
/// agent's tasks with REASON_AGENT_DRAINING (TASK_KILLING only for the
/// TASK_KILLING_STATE framework), the agent is deactivated and DRAINING,
/// DRAINED once the terminal updates are acknowledged, gets no offers until
/// REACTIVATE_AGENT, and a second REACTIVATE_AGENT is refused.
#[tokio::test]
async fn drain_kills_tasks_for_the_drain_and_ends_drained_until_reactivated() {
    let tb = testbed(TestbedConfig::for_tests(2)).await;
    let (mut pa, pa_id) = framework(&tb, "cap-pa", &["PARTITION_AWARE"]).await;
    let agent = running_task(&tb, &mut pa, &pa_id, "pa-1").await;
    let (mut kk, kk_id) =
        framework(&tb, "cap-kk", &["PARTITION_AWARE", "TASK_KILLING_STATE"]).await;
    // kk's task on the same agent as pa-1.
    let offer = loop {
        let event = kk.expect("OFFERS").await;
        let offers = event["offers"]["offers"].as_array().unwrap().clone();
        // kk keeps no other offer: one held here would keep the other
        // agent from pa's offer probe below.
        let (here, others): (Vec<_>, Vec<_>) = offers
            .into_iter()
            .partition(|o| o["agent_id"]["value"] == agent.as_str());
        for other in &others {
            call(&tb.url(), &kk.stream_id, decline(&kk_id, other)).await;
        }
        if let Some(o) = here.into_iter().next() {
            break o;
        }
    };
    call(
        &tb.url(),
        &kk.stream_id,
        launch(&kk_id, &offer, &[("kk-1", 0.1, 32.0)]),
    )
    .await;
    for _ in 0..2 {
        let status = kk.expect_update("kk-1").await;
        call(&tb.url(), &kk.stream_id, acknowledge(&kk_id, &status)).await;
    }
    call(
        &tb.url(),
        &kk.stream_id,
        json!({"framework_id": {"value": kk_id}, "type": "SUPPRESS", "suppress": {}}),
    )
    .await;
    let before = listed(&tb, &agent).await.expect("registered agent listed");
    assert_eq!(before["active"], true);
    assert_eq!(before["deactivated"], false);
    assert!(before.get("drain_info").is_none());
    assert!(
        before["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!({"type": "AGENT_DRAINING"}))
    );

    let answer = op(&tb, drain(&agent, false)).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));

    let killing = kk.expect_update("kk-1").await;
    assert_eq!(killing["state"], "TASK_KILLING");
    assert_eq!(killing["source"], "SOURCE_EXECUTOR");
    assert_eq!(killing["reason"], "REASON_AGENT_DRAINING");
    let killed = pa.expect_update("pa-1").await;
    assert_eq!(killed["state"], "TASK_KILLED");
    assert_eq!(killed["source"], "SOURCE_EXECUTOR");
    assert_eq!(killed["reason"], "REASON_AGENT_DRAINING");
    assert_eq!(
        killed["message"],
        "Command terminated with signal Terminated"
    );
    assert!(killed["uuid"].is_string());
    let draining = listed(&tb, &agent).await.unwrap();
    assert_eq!(draining["active"], false);
    assert_eq!(draining["deactivated"], true);
    assert_eq!(
        draining["drain_info"],
        json!({"state": "DRAINING", "config": {
            "max_grace_period": {"nanoseconds": 5_000_000_000i64}, "mark_gone": false}})
    );
    assert!(
        draining["estimated_drain_start_time"]["nanoseconds"]
            .as_i64()
            .unwrap()
            > 0
    );
    // Still draining: kk-1's terminal update is not acknowledged yet.
    call(&tb.url(), &kk.stream_id, acknowledge(&kk_id, &killing)).await;
    call(&tb.url(), &pa.stream_id, acknowledge(&pa_id, &killed)).await;
    let answer = op(&tb, hold("REACTIVATE_AGENT", &agent)).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (400, "Agent is still in the DRAINING state")
    );
    let kk_killed = kk.expect_update("kk-1").await;
    assert_eq!(kk_killed["state"], "TASK_KILLED");
    assert_eq!(kk_killed["reason"], "REASON_AGENT_DRAINING");
    call(&tb.url(), &kk.stream_id, acknowledge(&kk_id, &kk_killed)).await;
    let drained = drained(&tb, &agent).await;
    assert_eq!(drained["deactivated"], true);

    // The offer probe: only the other agent is offered.
    let offered = offered_agents(&tb, &mut pa, &pa_id, PROBE).await;
    assert!(!offered.is_empty());
    assert!(!offered.contains(&agent), "{offered:?}");

    // DRAIN_AGENT of a DRAINED agent: 200, DRAINED again.
    assert_eq!(op(&tb, drain(&agent, false)).await.status, 200);
    let again = listed(&tb, &agent).await.unwrap();
    assert_eq!(again["drain_info"]["state"], "DRAINED");

    let answer = op(&tb, hold("REACTIVATE_AGENT", &agent)).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
    let active = listed(&tb, &agent).await.unwrap();
    assert_eq!(
        (&active["active"], &active["deactivated"]),
        (&json!(true), &json!(false))
    );
    assert!(active.get("drain_info").is_none());
    let offered = offered_agents(&tb, &mut pa, &pa_id, PROBE).await;
    assert!(offered.contains(&agent), "{offered:?}");
    let answer = op(&tb, hold("REACTIVATE_AGENT", &agent)).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (400, "Agent is not deactivated")
    );
}

/// Capture u, run A (mark_gone): the task ends TASK_GONE_BY_OPERATOR,
/// REASON_AGENT_DRAINING, from the executor; once acknowledged the agent is
/// marked gone (FAILURE, not listed); REACTIVATE_AGENT then answers "Agent is
/// still in the DRAINING state" and DRAIN_AGENT "Unknown agent".
#[tokio::test]
async fn drain_with_mark_gone_removes_the_agent() {
    let tb = testbed(TestbedConfig::for_tests(2)).await;
    let (mut pa, pa_id) = framework(&tb, "cap-pa", &["PARTITION_AWARE"]).await;
    let agent = running_task(&tb, &mut pa, &pa_id, "pa-3").await;

    assert_eq!(op(&tb, drain(&agent, true)).await.status, 200);
    let draining = listed(&tb, &agent).await.unwrap();
    assert_eq!(draining["drain_info"]["config"]["mark_gone"], true);
    let gone = pa.expect_update("pa-3").await;
    assert_eq!(gone["state"], "TASK_GONE_BY_OPERATOR");
    assert_eq!(gone["source"], "SOURCE_EXECUTOR");
    assert_eq!(gone["reason"], "REASON_AGENT_DRAINING");
    assert!(gone["uuid"].is_string());
    call(&tb.url(), &pa.stream_id, acknowledge(&pa_id, &gone)).await;
    assert_eq!(
        pa.expect("FAILURE").await["failure"],
        json!({"agent_id": {"value": agent}})
    );
    assert!(listed(&tb, &agent).await.is_none());
    let answer = op(&tb, hold("REACTIVATE_AGENT", &agent)).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (400, "Agent is still in the DRAINING state")
    );
    let answer = op(&tb, drain(&agent, false)).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (400, "Unknown agent")
    );
}

/// Capture u, run A: DEACTIVATE_AGENT rescinds the agent's offers and stops
/// them while its task keeps running; REACTIVATE_AGENT brings them back;
/// unknown agents get "Unknown agent" (DRAIN, DEACTIVATE) and "Agent is not
/// deactivated" (REACTIVATE).
#[tokio::test]
async fn deactivate_stops_offers_until_reactivated() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut pa, pa_id) = framework(&tb, "cap-pa", &["PARTITION_AWARE"]).await;
    let agent = running_task(&tb, &mut pa, &pa_id, "pa-4").await;
    pa.expect("OFFERS").await;

    let answer = op(&tb, hold("DEACTIVATE_AGENT", &agent)).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
    pa.expect("RESCIND").await;
    let entry = listed(&tb, &agent).await.unwrap();
    assert_eq!(
        (&entry["active"], &entry["deactivated"]),
        (&json!(false), &json!(true))
    );
    assert!(entry.get("drain_info").is_none());
    assert!(offered_agents(&tb, &mut pa, &pa_id, PROBE).await.is_empty());
    assert!(
        tb.tasks()
            .iter()
            .any(|t| t.task_id == "pa-4" && t.state == TaskState::TaskRunning)
    );
    // Again: still 200.
    assert_eq!(op(&tb, hold("DEACTIVATE_AGENT", &agent)).await.status, 200);
    assert_eq!(op(&tb, hold("REACTIVATE_AGENT", &agent)).await.status, 200);
    assert_eq!(
        offered_agents(&tb, &mut pa, &pa_id, PROBE).await,
        vec![agent]
    );

    for (kind, body) in [
        ("DEACTIVATE_AGENT", "Unknown agent"),
        ("DRAIN_AGENT", "Unknown agent"),
        ("REACTIVATE_AGENT", "Agent is not deactivated"),
    ] {
        let answer = op(&tb, hold(kind, "no-such-agent")).await;
        assert_eq!((answer.status, answer.body.as_str()), (400, body), "{kind}");
    }
}

/// Capture u, run C: DRAIN_AGENT and DEACTIVATE_AGENT of an unreachable
/// agent answer 200 while GET_AGENTS lists no agent; when the agent
/// re-registers its task comes back RUNNING and is then killed for the
/// drain, and the agent ends deactivated and DRAINED. The partition is the
/// testbed's timed one, which heals by itself.
#[tokio::test]
async fn drain_of_an_unreachable_agent_takes_effect_when_it_returns() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut pa, pa_id) = framework(&tb, "cap-pa", &["PARTITION_AWARE"]).await;
    let agent = running_task(&tb, &mut pa, &pa_id, "pa-1").await;

    let answer = post(
        &format!("{}/testbed/agents/{agent}/partition", tb.url()),
        &[("Content-Type", "application/json")],
        r#"{"seconds": 1.5}"#,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let lost = pa.expect_update("pa-1").await;
    assert_eq!(lost["state"], "TASK_UNREACHABLE");
    pa.expect("FAILURE").await;
    assert_eq!(op(&tb, drain(&agent, false)).await.status, 200);
    assert!(listed(&tb, &agent).await.is_none());
    assert_eq!(op(&tb, hold("DEACTIVATE_AGENT", &agent)).await.status, 200);

    let back = pa.expect_update("pa-1").await;
    assert_eq!(back["state"], "TASK_RUNNING");
    assert_eq!(back["reason"], "REASON_AGENT_REREGISTERED");
    let killed = pa.expect_update("pa-1").await;
    assert_eq!(killed["state"], "TASK_KILLED");
    assert_eq!(killed["reason"], "REASON_AGENT_DRAINING");
    call(&tb.url(), &pa.stream_id, acknowledge(&pa_id, &killed)).await;
    let entry = drained(&tb, &agent).await;
    assert_eq!(
        (&entry["active"], &entry["deactivated"]),
        (&json!(false), &json!(true))
    );
}

/// The timed partition: unreachable at once (TASK_UNREACHABLE for a
/// PARTITION_AWARE framework, FAILURE), back with the same task RUNNING
/// after the given seconds (captures q and s); bad bodies are 400, unknown
/// agents 404.
#[tokio::test]
async fn a_partitioned_agent_comes_back_with_its_tasks() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut pa, pa_id) = framework(&tb, "cap-pa", &["PARTITION_AWARE"]).await;
    let agent = running_task(&tb, &mut pa, &pa_id, "pa-1").await;
    let url = format!("{}/testbed/agents/{agent}/partition", tb.url());
    let json_type = [("Content-Type", "application/json")];
    assert_eq!(
        post(&url, &json_type, r#"{"seconds": -1}"#).await.status,
        400
    );
    assert_eq!(
        post(&url, &json_type, r#"{"seconds": 4000}"#).await.status,
        400
    );
    assert_eq!(post(&url, &json_type, "").await.status, 400);
    let unknown = format!("{}/testbed/agents/no-such/partition", tb.url());
    assert_eq!(
        post(&unknown, &json_type, r#"{"seconds": 1}"#).await.status,
        404
    );

    let started = tokio::time::Instant::now();
    assert_eq!(
        post(&url, &json_type, r#"{"seconds": 1}"#).await.status,
        200
    );
    assert_eq!(pa.expect_update("pa-1").await["state"], "TASK_UNREACHABLE");
    assert!(tb.tasks()[0].unreachable);
    let back = pa.expect_update("pa-1").await;
    let took = started.elapsed();
    assert_eq!(back["state"], "TASK_RUNNING");
    assert_eq!(back["reason"], "REASON_AGENT_REREGISTERED");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(!tb.tasks()[0].unreachable);
}

/// REACTIVATE_AGENT of an unreachable agent: the master clears the hold in
/// its registry, then finds no registered agent and answers 409 "Agent
/// removed while processing the call" (`Master::Http::_reactivateAgent`,
/// src/master/http.cpp); a second REACTIVATE_AGENT is 400 "Agent is not
/// deactivated", and the agent comes back active.
#[tokio::test]
async fn reactivate_of_an_unreachable_agent_is_a_conflict_that_clears_the_hold() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut pa, pa_id) = framework(&tb, "cap-pa", &["PARTITION_AWARE"]).await;
    let agent = running_task(&tb, &mut pa, &pa_id, "pa-1").await;
    let answer = post(
        &format!("{}/testbed/agents/{agent}/partition", tb.url()),
        &[("Content-Type", "application/json")],
        r#"{"seconds": 2}"#,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(pa.expect_update("pa-1").await["state"], "TASK_UNREACHABLE");
    assert_eq!(op(&tb, hold("DEACTIVATE_AGENT", &agent)).await.status, 200);

    let refused = op(&tb, hold("REACTIVATE_AGENT", &agent)).await;
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (409, "Agent removed while processing the call")
    );
    let again = op(&tb, hold("REACTIVATE_AGENT", &agent)).await;
    assert_eq!(
        (again.status, again.body.as_str()),
        (400, "Agent is not deactivated")
    );

    let back = pa.expect_update("pa-1").await;
    assert_eq!(back["state"], "TASK_RUNNING");
    let entry = listed(&tb, &agent)
        .await
        .expect("the agent is listed again");
    assert_eq!(entry["deactivated"], json!(false), "{entry}");
}
