//! Maintenance on the testbed, checked against the real Mesos 1.12 capture v
//! (`v-maintenance.txt`) and, where it has nothing, `src/master/http.cpp`,
//! `src/master/maintenance.cpp` and `src/master/allocator/mesos/hierarchical.cpp`
//! (apache/mesos): schedules, offers with `unavailability`, inverse offers to
//! each framework with tasks or offers on the machine, their answers in
//! GET_MAINTENANCE_STATUS, RESCIND_INVERSE_OFFER, START_MAINTENANCE (TASK_LOST
//! 'Machine DOWN') and STOP_MAINTENANCE (the same agent ID comes back), and
//! the 400 bodies.

use crate::support;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

/// The machine of the testbed's agent `agent-<i>` (hostname, listen IP).
fn machine(i: usize) -> Value {
    json!({"hostname": format!("agent-{i}"), "ip": "127.0.0.1"})
}

/// UNIX time in nanoseconds `secs` from now.
fn nanos_from_now(secs: u64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now + Duration::from_secs(secs)).as_nanos() as i64
}

fn schedule(machines: Vec<Value>, start: i64) -> Value {
    json!({"type": "UPDATE_MAINTENANCE_SCHEDULE", "update_maintenance_schedule": {"schedule": {
        "windows": [{"machine_ids": machines, "unavailability": {
            "start": {"nanoseconds": start}, "duration": {"nanoseconds": 600_000_000_000i64}}}]}}})
}

async fn status(tb: &Testbed) -> Value {
    let answer = operator(&tb.url(), json!({"type": "GET_MAINTENANCE_STATUS"})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let value: Value = serde_json::from_str(&answer.body).unwrap();
    value["get_maintenance_status"]["status"].clone()
}

/// A framework running one task on `agent-0`, offers of the rest declined
/// for an hour (capture v run B: mt and plain).
async fn with_task_on_agent_0(
    tb: &Testbed,
    name: &str,
    task: &str,
) -> (Subscription, String, String) {
    let (mut sub, fid) = connected(&tb.url(), name, 60.0).await;
    let event = sub.expect("OFFERS").await;
    let offers = event["offers"]["offers"].as_array().unwrap().clone();
    let on_0 = offers
        .iter()
        .find(|o| o["hostname"] == "agent-0")
        .expect("an offer of agent-0")
        .clone();
    let mut accept = launch(&fid, &on_0, &[(task, 0.1, 32.0)]);
    accept["accept"]["filters"] = json!({"refuse_seconds": 3600.0});
    assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
    let others: Vec<Value> = offers
        .iter()
        .filter(|o| o["id"] != on_0["id"])
        .map(|o| o["id"].clone())
        .collect();
    if !others.is_empty() {
        let decline = json!({"framework_id": {"value": fid}, "type": "DECLINE",
            "decline": {"offer_ids": others, "filters": {"refuse_seconds": 3600.0}}});
        call(&tb.url(), &sub.stream_id, decline).await;
    }
    loop {
        let status = sub.expect_update(task).await;
        if status.get("uuid").is_some() {
            call(&tb.url(), &sub.stream_id, acknowledge(&fid, &status)).await;
        }
        if status["state"] == "TASK_RUNNING" {
            break;
        }
    }
    let agent_id = on_0["agent_id"]["value"].as_str().unwrap().to_string();
    (sub, fid, agent_id)
}

fn answer_call(fid: &str, kind: &str, id: &Value, refuse: Option<f64>) -> Value {
    let field = kind.to_lowercase();
    let mut body = json!({"inverse_offer_ids": [id]});
    if let Some(refuse) = refuse {
        body["filters"] = json!({"refuse_seconds": refuse});
    }
    json!({"framework_id": {"value": fid}, "type": kind, field: body})
}

/// Capture v, run A at 17.5–43 s: an empty schedule and status, then a
/// window: RESCIND of the held offers, a new offer of the machine with
/// `unavailability`, one INVERSE_OFFERS; GET_MAINTENANCE_SCHEDULE echoes
/// it, the status lists the machine as draining; ACCEPT and DECLINE show
/// in the status, and a new inverse offer follows once the answer's
/// filter ends; moving the window and removing the schedule rescind the
/// outstanding inverse offer.
#[tokio::test]
async fn schedule_unavailability_inverse_offers_and_answers() {
    init();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let url = tb.url();
    let empty = operator(&url, json!({"type": "GET_MAINTENANCE_SCHEDULE"})).await;
    assert_eq!(
        empty.body,
        r#"{"type":"GET_MAINTENANCE_SCHEDULE","get_maintenance_schedule":{"schedule":{}}}"#
    );
    assert_eq!(status(&tb).await, json!({}));

    let (mut mt, fid, _) = with_task_on_agent_0(&tb, "mt", "mt-1").await;
    // mt holds a fresh offer of agent-1 after a REVIVE.
    call(
        &url,
        &mt.stream_id,
        json!({"framework_id": {"value": fid}, "type": "REVIVE"}),
    )
    .await;
    let held = mt.expect("OFFERS").await;

    let start = nanos_from_now(60);
    let answer = operator(&url, schedule(vec![machine(0)], start)).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
    let rescind = mt.expect("RESCIND").await;
    assert!(
        held["offers"]["offers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["id"] == rescind["rescind"]["offer_id"]),
        "held offers are rescinded: {rescind}"
    );
    let inverse = mt.expect("INVERSE_OFFERS").await;
    let io = &inverse["inverse_offers"]["inverse_offers"][0];
    assert_eq!(io["framework_id"]["value"], fid.as_str());
    assert_eq!(io["url"]["path"], "/slave(1)");
    assert_eq!(io["unavailability"]["start"]["nanoseconds"], start);
    assert_eq!(
        io["unavailability"]["duration"]["nanoseconds"],
        600_000_000_000i64
    );
    // Offers of the machine carry the window; others do not.
    let offers: Vec<Value> = mt
        .seen
        .iter()
        .chain(std::iter::once(&inverse))
        .filter(|e| e["type"] == "OFFERS")
        .flat_map(|e| e["offers"]["offers"].as_array().unwrap().clone())
        .collect();
    for offer in &offers {
        let windowed = offer.get("unavailability").is_some();
        assert_eq!(windowed, offer["hostname"] == "agent-0", "{offer}");
    }
    let got = operator(&url, json!({"type": "GET_MAINTENANCE_SCHEDULE"})).await;
    let got: Value = serde_json::from_str(&got.body).unwrap();
    assert_eq!(
        got["get_maintenance_schedule"]["schedule"]["windows"][0]["machine_ids"],
        json!([machine(0)])
    );
    assert_eq!(
        status(&tb).await,
        json!({"draining_machines": [{"id": machine(0)}]})
    );

    // ACCEPT without filters: the status says so; the next inverse offer
    // comes after the default 5 s filter (capture v: ≈5.9 s).
    let accepted_at = Instant::now();
    let accept = answer_call(&fid, "ACCEPT_INVERSE_OFFERS", &io["id"], None);
    assert_eq!(call(&url, &mt.stream_id, accept).await.status, 202);
    let s = status(&tb).await;
    assert_eq!(s["draining_machines"][0]["statuses"][0]["status"], "ACCEPT");
    assert_eq!(
        s["draining_machines"][0]["statuses"][0]["framework_id"]["value"],
        fid.as_str()
    );
    let again = mt.expect("INVERSE_OFFERS").await;
    let waited = accepted_at.elapsed();
    assert!(
        waited >= Duration::from_millis(4900) && waited < Duration::from_secs(8),
        "next inverse offer after {waited:?}"
    );
    // DECLINE with refuse_seconds 2: DECLINE in the status, the next one
    // after ≈2 s.
    let io2 = again["inverse_offers"]["inverse_offers"][0]["id"].clone();
    assert_ne!(io2, io["id"]);
    let declined_at = Instant::now();
    let decline = answer_call(&fid, "DECLINE_INVERSE_OFFERS", &io2, Some(2.0));
    assert_eq!(call(&url, &mt.stream_id, decline).await.status, 202);
    let s = status(&tb).await;
    assert_eq!(
        s["draining_machines"][0]["statuses"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s["draining_machines"][0]["statuses"][0]["status"],
        "DECLINE"
    );
    let third = mt.expect("INVERSE_OFFERS").await;
    let waited = declined_at.elapsed();
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_secs(4),
        "next inverse offer after {waited:?}"
    );
    let io3 = third["inverse_offers"]["inverse_offers"][0]["id"].clone();

    // The window moves: the outstanding inverse offer is rescinded, a new
    // one with the new start follows, and the answers start again.
    let moved = nanos_from_now(90);
    assert_eq!(
        operator(&url, schedule(vec![machine(0)], moved))
            .await
            .status,
        200
    );
    let rescinded = mt.expect("RESCIND_INVERSE_OFFER").await;
    assert_eq!(rescinded["rescind_inverse_offer"]["inverse_offer_id"], io3);
    let fourth = mt.expect("INVERSE_OFFERS").await;
    assert_eq!(
        fourth["inverse_offers"]["inverse_offers"][0]["unavailability"]["start"]["nanoseconds"],
        moved
    );
    assert_eq!(
        status(&tb).await,
        json!({"draining_machines": [{"id": machine(0)}]})
    );

    // No windows: rescinded, status and schedule empty, offers plain again.
    let none = json!({"type": "UPDATE_MAINTENANCE_SCHEDULE",
        "update_maintenance_schedule": {"schedule": {"windows": []}}});
    assert_eq!(operator(&url, none).await.status, 200);
    let rescinded = mt.expect("RESCIND_INVERSE_OFFER").await;
    assert_eq!(
        rescinded["rescind_inverse_offer"]["inverse_offer_id"],
        fourth["inverse_offers"]["inverse_offers"][0]["id"]
    );
    assert_eq!(status(&tb).await, json!({}));
    let offer = mt.expect("OFFERS").await;
    assert!(offer["offers"]["offers"][0].get("unavailability").is_none());
}

/// Capture v, run B: inverse offers go to each framework with tasks or
/// offers on the machine (not to one with neither); START_MAINTENANCE
/// sends TASK_LOST REASON_AGENT_REMOVED 'Machine DOWN' even to a
/// PARTITION_AWARE framework, rescinds the outstanding inverse offer, sends
/// FAILURE, and lists the machine as down; STOP_MAINTENANCE empties the
/// schedule and the agent comes back with its ID.
#[tokio::test]
async fn start_and_stop_maintenance() {
    init();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let url = tb.url();
    let (mut mt, mt_id, agent_0) = with_task_on_agent_0(&tb, "mt", "mt-1").await;
    // A framework with neither tasks nor offers on the machine (capture v,
    // run A: "other") gets no inverse offer: it declines all for an hour.
    let (mut bystander, by_id) = connected(&url, "bystander", 60.0).await;
    let held = bystander.expect("OFFERS").await;
    let ids: Vec<Value> = held["offers"]["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].clone())
        .collect();
    let decline = json!({"framework_id": {"value": by_id}, "type": "DECLINE",
        "decline": {"offer_ids": ids, "filters": {"refuse_seconds": 3600.0}}});
    call(&url, &bystander.stream_id, decline).await;

    assert_eq!(
        operator(&url, schedule(vec![machine(0)], nanos_from_now(60)))
            .await
            .status,
        200
    );
    let inverse = mt.expect("INVERSE_OFFERS").await;
    let io = inverse["inverse_offers"]["inverse_offers"][0]["id"].clone();
    bystander
        .expect_none("INVERSE_OFFERS", Duration::from_millis(500))
        .await;

    let answer = operator(
        &url,
        json!({"type": "STOP_MAINTENANCE", "stop_maintenance": {"machines": [machine(0)]}}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.body,
        r#"Machine '{"hostname":"agent-0","ip":"127.0.0.1"}' is not in DOWN mode and cannot be brought up"#
    );

    let start =
        json!({"type": "START_MAINTENANCE", "start_maintenance": {"machines": [machine(0)]}});
    let answer = operator(&url, start.clone()).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
    let lost = mt.expect_update("mt-1").await;
    assert_eq!(lost["state"], "TASK_LOST");
    assert_eq!(lost["reason"], "REASON_AGENT_REMOVED");
    assert_eq!(lost["source"], "SOURCE_MASTER");
    assert_eq!(
        lost["message"],
        "Agent agent-0 removed: Operator initiated 'Machine DOWN'"
    );
    assert!(lost.get("uuid").is_none());
    let rescinded = mt.expect("RESCIND_INVERSE_OFFER").await;
    assert_eq!(rescinded["rescind_inverse_offer"]["inverse_offer_id"], io);
    let failure = mt.expect("FAILURE").await;
    assert_eq!(failure["failure"]["agent_id"]["value"], agent_0.as_str());
    bystander.expect("FAILURE").await;
    assert_eq!(status(&tb).await, json!({"down_machines": [machine(0)]}));
    assert!(!registered(&url).await.contains(&agent_0));
    // Still in the schedule; a second START is refused.
    let answer = operator(&url, start).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.body,
        r#"Machine '{"hostname":"agent-0","ip":"127.0.0.1"}' is not in DRAINING mode and cannot be brought down"#
    );
    // A DOWN machine cannot be left out of the schedule.
    let none = json!({"type": "UPDATE_MAINTENANCE_SCHEDULE",
        "update_maintenance_schedule": {"schedule": {"windows": []}}});
    let answer = operator(&url, none).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.body,
        r#"Machine '{"hostname":"agent-0","ip":"127.0.0.1"}' is deactivated and cannot be removed from the schedule"#
    );

    let stop = json!({"type": "STOP_MAINTENANCE", "stop_maintenance": {"machines": [machine(0)]}});
    let answer = operator(&url, stop.clone()).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
    assert_eq!(status(&tb).await, json!({}));
    let got = operator(&url, json!({"type": "GET_MAINTENANCE_SCHEDULE"})).await;
    assert_eq!(
        got.body,
        r#"{"type":"GET_MAINTENANCE_SCHEDULE","get_maintenance_schedule":{"schedule":{}}}"#
    );
    assert_eq!(operator(&url, stop).await.status, 400);
    // The same agent ID is registered again (capture v: it re-registers
    // with its ID once the machine is UP), without tasks.
    assert_eq!(
        registered(&url).await,
        vec![agent_0.clone(), agent_1(&url).await]
    );
    // Offered again, without a window: mt revives.
    call(
        &url,
        &mt.stream_id,
        json!({"framework_id": {"value": mt_id}, "type": "REVIVE"}),
    )
    .await;
    let offers = mt.expect("OFFERS").await;
    assert!(
        offers["offers"]["offers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o.get("unavailability").is_none()),
        "{offers}"
    );
}

/// 400 bodies of `maintenance::validation` (src/master/maintenance.cpp):
/// a window without machines, a negative duration, a machine without
/// hostname and IP, a machine twice; START_MAINTENANCE of a machine
/// without agents that is not scheduled.
#[tokio::test]
async fn invalid_schedules_and_machines_are_refused() {
    init();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let url = tb.url();
    let window = |machines: Value, duration: i64| {
        json!({"type": "UPDATE_MAINTENANCE_SCHEDULE", "update_maintenance_schedule": {"schedule": {
            "windows": [{"machine_ids": machines, "unavailability": {
                "start": {"nanoseconds": 1}, "duration": {"nanoseconds": duration}}}]}}})
    };
    let cases = [
        (
            window(json!([]), 1),
            "List of machines in the maintenance window is empty",
        ),
        (
            window(json!([machine(0)]), -1),
            "Unavailability 'duration' is negative",
        ),
        (
            window(json!([{}]), 1),
            "Both 'hostname' and 'ip' for a machine are empty",
        ),
        (
            window(
                json!([machine(0), {"hostname": "AGENT-0", "ip": "127.0.0.1"}]),
                1,
            ),
            r#"Machine '{"hostname":"AGENT-0","ip":"127.0.0.1"}' appears more than once in the schedule"#,
        ),
        (
            json!({"type": "START_MAINTENANCE", "start_maintenance": {"machines": [
                {"hostname": "elsewhere", "ip": "127.0.0.1"}]}}),
            r#"Machine '{"hostname":"elsewhere","ip":"127.0.0.1"}' is not part of a maintenance schedule"#,
        ),
        (
            json!({"type": "START_MAINTENANCE", "start_maintenance": {"machines": []}}),
            "List of machines is empty",
        ),
    ];
    for (body, expected) in cases {
        let answer = operator(&url, body.clone()).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (400, expected),
            "{body}"
        );
    }
    assert_eq!(status(&tb).await, json!({}));
}

/// The registered agents' IDs, sorted (`/master/slaves`).
async fn registered(url: &str) -> Vec<String> {
    let slaves: Value = get_json(&format!("{url}/master/slaves")).await;
    let mut ids: Vec<String> = slaves["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The ID of agent-1.
async fn agent_1(url: &str) -> String {
    registered(url)
        .await
        .into_iter()
        .find(|id| id.ends_with("-S1"))
        .unwrap()
}

/// DRAIN_AGENT of an agent whose machine is in the maintenance schedule is
/// refused with 400 (`Master::Http::drainAgent` in src/master/http.cpp,
/// the machine printed as `MachineID`'s `operator<<` in
/// src/common/type_utils.cpp); once the schedule is empty the drain is taken.
#[tokio::test]
async fn drain_of_an_agent_in_the_maintenance_schedule_is_refused() {
    init();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let url = tb.url();
    let agent = agent_1(&url).await;
    let drain = json!({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": agent}}});
    let answer = operator(&url, schedule(vec![machine(1)], nanos_from_now(3600))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = operator(&url, drain.clone()).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (
            400,
            format!(
                "Agent {agent} is part of a maintenance schedule under Machine agent-1 (127.0.0.1)"
            )
            .as_str()
        )
    );
    let none = json!({"type": "UPDATE_MAINTENANCE_SCHEDULE",
        "update_maintenance_schedule": {"schedule": {}}});
    assert_eq!(operator(&url, none).await.status, 200);
    let answer = operator(&url, drain).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
}
