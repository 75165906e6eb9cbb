//! Faults of a degraded cluster on the testbed (issue 13, part C): an agent
//! the operator removes for good (MARK_AGENT_GONE, `src/master/master.cpp`
//! `markGone`/`__removeSlave`), scheduler calls a master answers 202 and
//! loses, latency on the subscription stream and on call answers, and the
//! inspection that shows what happened: completed tasks in `/testbed/tasks`
//! and the stream ID each SUBSCRIBE got in the call log.

use crate::support;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::executor::{
    eventually, exited_executor, expect_running, expect_state, framework, launch_command,
    live_executor, process_testbed, session_members,
};
use support::mesos::*;

async fn testbed(agents: usize) -> Testbed {
    support::testbed(TestbedConfig::for_tests(agents)).await
}

/// An ACCEPT launching `task` on `offer` that leaves the rest of the offer
/// to be offered again at once (no refusal filter).
fn launch_one(fid: &str, offer: &Value, task: &str) -> Value {
    let mut accept = launch(fid, offer, &[(task, 0.1, 32.0)]);
    accept["accept"]
        .as_object_mut()
        .expect("accept")
        .remove("filters");
    accept
}

/// Launches `task` on `offer` and acknowledges STARTING and RUNNING.
async fn run_on(tb: &Testbed, sub: &mut Subscription, fid: &str, offer: &Value, task: &str) {
    let answer = call(&tb.url(), &sub.stream_id, launch_one(fid, offer, task)).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    for _ in 0..2 {
        let status = sub.expect_update(task).await;
        call(&tb.url(), &sub.stream_id, acknowledge(fid, &status)).await;
    }
}

/// Explicit reconciliation of `task` on `agent`; returns the answer.
async fn reconciled(
    tb: &Testbed,
    sub: &mut Subscription,
    fid: &str,
    task: &str,
    agent: &Value,
) -> Value {
    let body = json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": [
        {"task_id": {"value": task}, "agent_id": agent}]}});
    assert_eq!(call(&tb.url(), &sub.stream_id, body).await.status, 202);
    sub.expect_update(task).await
}

/// POSTs `body` to the fault API at `/testbed/{path}`.
async fn control(tb: &Testbed, path: &str, body: Value) -> Answer {
    post(
        &format!("{}/testbed/{path}", tb.url()),
        &[("Content-Type", "application/json")],
        body.to_string(),
    )
    .await
}

/// `(task ID, state, completed)` of each task `/testbed/tasks` lists.
async fn listed_tasks(tb: &Testbed) -> Vec<(String, String, bool)> {
    let tasks = testbed_json(tb, "tasks").await["tasks"].clone();
    tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task_id"].as_str().unwrap().to_string(),
                t["state"].as_str().unwrap().to_string(),
                t["completed"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn kill(fid: &str, task: &str) -> Value {
    json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {"task_id": {"value": task}}})
}

/// A connected PARTITION_AWARE framework.
async fn partition_aware(master: &str) -> (Subscription, String) {
    let mut body = new_framework("pa", 60.0);
    body["subscribe"]["framework_info"]["capabilities"] = json!([{"type": "PARTITION_AWARE"}]);
    let mut sub = subscribe(master, body).await;
    assert_eq!(sub.status, 200, "{}", sub.body);
    let fid = sub.subscribed().await;
    (sub, fid)
}

async fn testbed_json(tb: &Testbed, what: &str) -> Value {
    get_json(&format!("{}/testbed/{what}", tb.url())).await
}

fn mark_gone(agent: &str) -> Value {
    json!({"type": "MARK_AGENT_GONE", "mark_agent_gone": {"agent_id": {"value": agent}}})
}

#[tokio::test]
async fn agent_marked_gone_loses_its_tasks_for_good() {
    let tb = testbed(1).await;
    let (mut sub, fid) = connected(&tb.url(), "gone", 60.0).await;
    let offer = sub.next_offer().await;
    let agent = offer["agent_id"]["value"].as_str().unwrap().to_string();
    run_on(&tb, &mut sub, &fid, &offer, "t1").await;
    // What is left of the agent is offered again and stays outstanding.
    let rest = sub.next_offer().await;
    assert_eq!(rest["agent_id"]["value"], agent.as_str());

    let answer = operator(&tb.url(), mark_gone(&agent)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // Not PARTITION_AWARE: TASK_LOST, as master.cpp __removeSlave sends it.
    let lost = sub.expect_update("t1").await;
    assert_eq!(lost["state"], "TASK_LOST");
    assert_eq!(lost["reason"], "REASON_AGENT_REMOVED");
    assert_eq!(lost["source"], "SOURCE_MASTER");
    assert_eq!(lost["message"], "Agent has been marked gone");
    assert!(lost.get("uuid").is_none(), "nothing to acknowledge: {lost}");
    assert!(lost.get("unreachable_time").is_none());
    let rescind = sub.expect("RESCIND").await;
    assert_eq!(rescind["rescind"]["offer_id"], rest["id"]);
    assert_eq!(
        sub.expect("FAILURE").await["failure"],
        json!({"agent_id": {"value": agent}})
    );

    // Again: 200, nothing more; an unknown agent: 404.
    assert_eq!(operator(&tb.url(), mark_gone(&agent)).await.status, 200);
    let unknown = operator(&tb.url(), mark_gone("no-such-agent")).await;
    assert_eq!(
        (unknown.status, unknown.body.as_str()),
        (404, "Agent 'no-such-agent' not found")
    );
    let missing = operator(&tb.url(), json!({"type": "MARK_AGENT_GONE"})).await;
    assert_eq!(missing.status, 400);

    // The task is completed, not live; the agent is gone and stays gone.
    assert!(tb.tasks().is_empty());
    let tasks = testbed_json(&tb, "tasks").await;
    assert_eq!(
        tasks["tasks"],
        json!([{"framework_id": fid, "task_id": "t1", "agent_id": agent, "executor_id": "t1",
            "state": "TASK_LOST", "unreachable": false, "unacknowledged_updates": 0,
            "acknowledged": "TASK_RUNNING", "healthy": null, "completed": true}])
    );
    let reachable = control(&tb, &format!("agents/{agent}/reachable"), json!({})).await;
    assert_eq!(reachable.status, 409, "{}", reachable.body);
    assert_eq!(
        testbed_json(&tb, "agents").await["agents"][0]["state"],
        "gone"
    );
    assert_eq!(tb.agents()[0].state, "gone");
    let state = master_state(&tb.url()).await;
    assert_eq!(state["slaves"], json!([]));
    assert_eq!(
        state["frameworks"][0]["completed_tasks"][0]["state"],
        "TASK_LOST"
    );

    // Reconciliation: case (5) of master.cpp reconcile.
    let answer = reconciled(&tb, &mut sub, &fid, "t1", &offer["agent_id"]).await;
    assert_eq!(
        (answer["state"].as_str(), answer["message"].as_str()),
        (Some("TASK_LOST"), Some("Reconciliation: Task is gone"))
    );
    // Never offered again.
    sub.expect_none("OFFERS", Duration::from_millis(600)).await;
}

#[tokio::test]
async fn gone_agent_shuts_its_executors_down_and_stops_serving() {
    let tb = process_testbed().await;
    let mut sub = subscribe(&tb.url(), framework("gone-process", true)).await;
    let fid = sub.subscribed().await;
    launch_command(&tb, &mut sub, &fid, "g-0", "exec-g", "sleep 1000", None).await;
    expect_running(&tb, &mut sub, &fid, "g-0").await;
    let executor = live_executor(&tb, "exec-g");
    let agent_id = tb.agents()[0].id.clone();
    let endpoint = tb.agent_endpoint(&agent_id).unwrap();

    assert!(tb.mark_agent_gone(&agent_id));
    // Even for a checkpointing framework: the agent is not coming back.
    let lost = expect_state(&mut sub, "g-0", "TASK_LOST").await;
    assert_eq!(lost["executor_id"]["value"], "exec-g");
    assert_eq!(lost["reason"], "REASON_AGENT_REMOVED");
    // The master's ShutdownMessage: the executor and its task are killed,
    // the agent stops serving and cannot be restarted.
    exited_executor(&tb, "exec-g").await;
    eventually("the task process is gone", || {
        session_members(executor.pid).is_empty()
    })
    .await;
    eventually("the agent endpoint is closed", || {
        std::net::TcpStream::connect(endpoint).is_err()
    })
    .await;
    assert!(!tb.restart_agent(&agent_id, Duration::from_millis(100)));
    // The executor's end is not reported: the master removed the agent.
    sub.expect_none("UPDATE", Duration::from_millis(500)).await;
    tb.shutdown().await;
}

#[tokio::test]
async fn partition_aware_framework_sees_gone_by_operator_also_after_unreachable() {
    let tb = testbed(2).await;
    let (mut sub, fid) = partition_aware(&tb.url()).await;
    // One offer per agent (the allocator offers both in one event).
    let mut offers: Vec<Value> = Vec::new();
    while offers.len() < 2 {
        let event = sub.expect("OFFERS").await;
        offers.extend(
            event["offers"]["offers"]
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
    }
    let (first, second) = (offers[0].clone(), offers[1].clone());
    let a = first["agent_id"].clone();
    let b = second["agent_id"].clone();
    assert_ne!(a, b);
    run_on(&tb, &mut sub, &fid, &first, "on-a").await;
    run_on(&tb, &mut sub, &fid, &second, "on-b").await;
    let a_id = a["value"].as_str().unwrap();
    let b_id = b["value"].as_str().unwrap();

    // A registered agent, over the fault API.
    let answer = control(&tb, &format!("agents/{a_id}/gone"), json!({})).await;
    assert_eq!(answer.status, 200);
    let gone = sub.expect_update("on-a").await;
    assert_eq!(gone["state"], "TASK_GONE_BY_OPERATOR");
    assert_eq!(gone["reason"], "REASON_AGENT_REMOVED_BY_OPERATOR");
    assert_eq!(gone["message"], "Agent has been marked gone");
    assert_eq!(sub.expect("FAILURE").await["failure"]["agent_id"], a);

    // An unreachable agent: its framework already had FAILURE, and now
    // only the tasks' updates.
    assert!(tb.make_agent_unreachable(b_id));
    assert_eq!(sub.expect_update("on-b").await["state"], "TASK_UNREACHABLE");
    assert_eq!(sub.expect("FAILURE").await["failure"]["agent_id"], b);
    assert!(tb.mark_agent_gone(b_id));
    let gone = sub.expect_update("on-b").await;
    assert_eq!(gone["state"], "TASK_GONE_BY_OPERATOR");
    sub.expect_none("FAILURE", Duration::from_millis(300)).await;
    tb.make_agent_reachable(b_id);
    let states: Vec<String> = tb.agents().into_iter().map(|a| a.state).collect();
    assert_eq!(states, ["gone", "gone"], "a gone agent never comes back");

    let answer = reconciled(&tb, &mut sub, &fid, "on-b", &b).await;
    assert_eq!(
        (answer["state"].as_str(), answer["reason"].as_str()),
        (Some("TASK_GONE_BY_OPERATOR"), Some("REASON_RECONCILIATION"))
    );
    let completed: Vec<(String, String)> = tb
        .completed_tasks()
        .into_iter()
        .map(|t| (t.task_id, t.state.as_str_name().to_string()))
        .collect();
    assert_eq!(
        completed,
        [
            ("on-a".to_string(), "TASK_GONE_BY_OPERATOR".to_string()),
            ("on-b".to_string(), "TASK_GONE_BY_OPERATOR".to_string())
        ]
    );
    // No agent is left to offer anything.
    sub.expect_none("OFFERS", Duration::from_millis(600)).await;
}

#[tokio::test]
async fn dropped_accept_is_answered_202_and_its_offer_stays_outstanding() {
    let tb = testbed(1).await;
    let (mut sub, fid) = connected(&tb.url(), "drop", 60.0).await;
    let offer = sub.next_offer().await;
    let refused = control(&tb, "faults/drop-calls", json!({"call_type": "SUBSCRIBE"})).await;
    assert_eq!(refused.status, 400, "a stream cannot be lost after 202");
    let answer = control(
        &tb,
        "faults/drop-calls",
        json!({"call_type": "ACCEPT", "count": 1}),
    )
    .await;
    assert_eq!(answer.status, 200);

    let launch_t1 = launch_one(&fid, &offer, "t1");
    let answer = call(&tb.url(), &sub.stream_id, launch_t1.clone()).await;
    assert_eq!(answer.status, 202, "as a master that took it");
    sub.expect_none("UPDATE", Duration::from_millis(500)).await;
    assert!(tb.tasks().is_empty(), "nothing launched");
    let accepts = tb.scheduler_calls("ACCEPT");
    assert_eq!(
        accepts
            .iter()
            .map(|c| (c.status, c.dropped))
            .collect::<Vec<_>>(),
        [(202, true)]
    );

    // The master never saw the ACCEPT, so the offer is still outstanding:
    // the same call again (the fault is used up) launches the task.
    let answer = call(&tb.url(), &sub.stream_id, launch_t1).await;
    assert_eq!(answer.status, 202);
    assert_eq!(sub.expect_update("t1").await["state"], "TASK_STARTING");
    assert!(!tb.scheduler_calls("ACCEPT")[1].dropped);
}

#[tokio::test]
async fn only_calls_a_master_would_accept_are_dropped() {
    let tb = testbed(1).await;
    let (mut sub, fid) = connected(&tb.url(), "drop-kill", 60.0).await;
    let offer = sub.next_offer().await;
    run_on(&tb, &mut sub, &fid, &offer, "t1").await;
    tb.drop_calls("KILL", 1).unwrap();

    // Refused before it could be lost: does not use the fault up.
    let wrong = call(&tb.url(), "not-the-stream", kill(&fid, "t1")).await;
    assert_eq!(wrong.status, 400);
    let lost = call(&tb.url(), &sub.stream_id, kill(&fid, "t1")).await;
    assert_eq!(lost.status, 202);
    sub.expect_none("UPDATE", Duration::from_millis(400)).await;
    assert_eq!(tb.tasks()[0].state.as_str_name(), "TASK_RUNNING");
    let kills: Vec<(u16, bool)> = tb
        .scheduler_calls("KILL")
        .iter()
        .map(|c| (c.status, c.dropped))
        .collect();
    assert_eq!(kills, [(400, false), (202, true)]);

    let again = call(&tb.url(), &sub.stream_id, kill(&fid, "t1")).await;
    assert_eq!(again.status, 202);
    assert_eq!(sub.expect_update("t1").await["state"], "TASK_KILLED");

    // A cleared fault loses nothing.
    tb.drop_calls("RECONCILE", 5).unwrap();
    assert!(tb.drop_calls("UPDATE_FRAMEWORK", 1).is_err());
    tb.clear_faults();
    reconciled(&tb, &mut sub, &fid, "t1", &offer["agent_id"]).await;
}

#[tokio::test]
async fn latency_delays_stream_events_and_call_answers() {
    let tb = testbed(1).await;
    let (mut sub, fid) = connected(&tb.url(), "slow", 60.0).await;
    let offer = sub.next_offer().await;
    run_on(&tb, &mut sub, &fid, &offer, "t1").await;

    let answer = control(
        &tb,
        "faults/latency",
        json!({"stream_ms": 1500, "response_ms": 300}),
    )
    .await;
    assert_eq!(answer.status, 200);
    // The call is acted on at once, answered 300 ms later; its answer on
    // the open stream goes out 1.5 s after the master queued it.
    let t0 = Instant::now();
    let reconcile = json!({"framework_id": {"value": fid}, "type": "RECONCILE",
        "reconcile": {"tasks": [{"task_id": {"value": "t1"}, "agent_id": offer["agent_id"]}]}});
    let answer = call(&tb.url(), &sub.stream_id, reconcile).await;
    let answered = t0.elapsed();
    assert_eq!(answer.status, 202);
    sub.expect_update("t1").await;
    let event = t0.elapsed();
    assert!(answered >= Duration::from_millis(300), "{answered:?}");
    assert!(event >= Duration::from_millis(1500), "{event:?}");

    // Cleared: under the 1.5 s stream delay, which would hold the answer
    // at least that long. Events queued before the clear (offers, say) are
    // released with it, so the answer does not wait behind them (it did:
    // 1.506 s once under load).
    assert_eq!(control(&tb, "faults/clear", json!({})).await.status, 200);
    let t0 = Instant::now();
    reconciled(&tb, &mut sub, &fid, "t1", &offer["agent_id"]).await;
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );

    let too_long = control(&tb, "faults/latency", json!({"stream_ms": 3_600_001u64})).await;
    assert_eq!(too_long.status, 400);
}

#[tokio::test]
async fn completed_tasks_are_listed_with_their_terminal_state() {
    let tb = testbed(1).await;
    let (mut sub, fid) = connected(&tb.url(), "done", 60.0).await;
    let offer = sub.next_offer().await;
    run_on(&tb, &mut sub, &fid, &offer, "killed").await;
    let offer = sub.next_offer().await;
    run_on(&tb, &mut sub, &fid, &offer, "torn-down").await;
    call(&tb.url(), &sub.stream_id, kill(&fid, "killed")).await;
    let killed = sub.expect_update("killed").await;
    assert_eq!(killed["state"], "TASK_KILLED");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killed)).await;

    let row = |task: &str, state: &str, completed| (task.to_string(), state.to_string(), completed);
    assert_eq!(
        listed_tasks(&tb).await,
        [
            row("torn-down", "TASK_RUNNING", false),
            row("killed", "TASK_KILLED", true)
        ]
    );

    // A removed framework's tasks are completed too (master.cpp
    // removeFramework), and listed as such.
    let teardown = json!({"framework_id": {"value": fid}, "type": "TEARDOWN"});
    assert_eq!(call(&tb.url(), &sub.stream_id, teardown).await.status, 202);
    assert_eq!(
        listed_tasks(&tb).await,
        [
            row("killed", "TASK_KILLED", true),
            row("torn-down", "TASK_KILLED", true)
        ]
    );
    assert!(tb.tasks().is_empty(), "Testbed::tasks lists live ones only");
}

#[tokio::test]
async fn call_log_records_the_stream_id_each_subscribe_got() {
    let tb = testbed(1).await;
    let (first, fid) = connected(&tb.url(), "ids", 60.0).await;
    let mut second = subscribe(&tb.url(), existing_framework("ids", &fid, 60.0)).await;
    assert_eq!(second.status, 200);
    second.subscribed().await;
    let refused = subscribe_raw(
        &tb.url(),
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
            ("Mesos-Stream-Id", "made-up"),
        ],
        existing_framework("ids", &fid, 60.0)
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(refused.status, 400);

    let subscribes: Vec<(u16, Option<String>)> = tb
        .scheduler_calls("SUBSCRIBE")
        .into_iter()
        .map(|c| (c.status, c.stream_id))
        .collect();
    assert_ne!(first.stream_id, second.stream_id);
    assert_eq!(
        subscribes,
        [
            (200, Some(first.stream_id.clone())),
            (200, Some(second.stream_id.clone())),
            // Refused: no stream issued; the header it wrongly carried.
            (400, Some("made-up".to_string())),
        ]
    );
    let log = testbed_json(&tb, "calls").await;
    assert_eq!(log["calls"][0]["stream_id"], first.stream_id.as_str());
    assert_eq!(log["calls"][0]["dropped"], false);
}
