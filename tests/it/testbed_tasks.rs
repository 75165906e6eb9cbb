//! Tasks on the testbed: launch, status updates and acknowledgements,
//! redelivery, KILL, RECONCILE, MESSAGE and `kamikaze`, SHUTDOWN
//! (`docs/mesos-protocol.md#tasks-and-status-updates`, `#acknowledgements`,
//! `#reconciliation`, `#framework-messages`; captures b, c, e, f, executor/).

use crate::support;
use crate::support::testbed;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

/// A framework with task `t1` launched; returns the stream, the framework ID
/// and the first offer.
async fn with_task(tb: &Testbed, body: Value, task: &str) -> (Subscription, String, Value) {
    let mut sub = subscribe(&tb.url(), body).await;
    let fid = sub.subscribed().await;
    let event = sub.expect("OFFERS").await;
    let offer = event["offers"]["offers"][0].clone();
    assert_eq!(
        call(
            &tb.url(),
            &sub.stream_id,
            launch(&fid, &offer, &[(task, 0.1, 32.0)])
        )
        .await
        .status,
        202
    );
    (sub, fid, offer)
}

/// Acknowledges STARTING and RUNNING of `task`; returns the RUNNING status.
async fn run(tb: &Testbed, sub: &mut Subscription, fid: &str, task: &str) -> Value {
    let starting = sub.expect_update(task).await;
    assert_eq!(starting["state"], "TASK_STARTING");
    call(&tb.url(), &sub.stream_id, acknowledge(fid, &starting)).await;
    let running = sub.expect_update(task).await;
    assert_eq!(running["state"], "TASK_RUNNING");
    call(&tb.url(), &sub.stream_id, acknowledge(fid, &running)).await;
    running
}

#[tokio::test]
async fn launch_gives_starting_then_running_only_after_the_ack() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, offer) = with_task(&tb, new_framework("l", 60.0), "t1").await;
    let starting = sub.expect_update("t1").await;
    assert_eq!(starting["state"], "TASK_STARTING");
    assert_eq!(starting["source"], "SOURCE_EXECUTOR");
    assert_eq!(
        starting["executor_id"]["value"], "t1",
        "command executor: executor ID = task ID"
    );
    assert_eq!(starting["agent_id"], offer["agent_id"]);
    assert_eq!(base64_len(&starting["uuid"]), 16);
    assert!(starting["container_status"]["container_id"]["value"].is_string());
    // RUNNING is held behind the unacknowledged STARTING.
    let mut early = Vec::new();
    while let Some(Ok(event)) = sub.next_within(Duration::from_millis(300)).await {
        early.push(event);
    }
    assert!(
        early.iter().all(|e| e["type"] != "UPDATE"),
        "no update before the ack: {early:?}"
    );
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &starting)).await;
    let running = sub.expect_update("t1").await;
    assert_eq!(running["state"], "TASK_RUNNING");
    assert_ne!(running["uuid"], starting["uuid"]);
    assert_eq!(tb.tasks()[0].state.as_str_name(), "TASK_RUNNING");
}

fn base64_len(value: &Value) -> usize {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().unwrap_or_default())
        .map(|b| b.len())
        .unwrap_or(0)
}

#[tokio::test]
async fn unacknowledged_update_is_redelivered_with_backoff() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, _) = with_task(&tb, new_framework("r", 60.0), "t1").await;
    let first = sub.expect_update("t1").await;
    let t0 = Instant::now();
    let again = sub.expect_update("t1").await;
    let t1 = t0.elapsed();
    assert_eq!(again["uuid"], first["uuid"], "the same update is re-sent");
    let third = sub.expect_update("t1").await;
    let t2 = t0.elapsed();
    assert_eq!(third["uuid"], first["uuid"]);
    // for_tests: 1 s, then 2 s.
    assert!(
        t1 >= Duration::from_millis(800) && t1 < Duration::from_millis(1800),
        "{t1:?}"
    );
    assert!(
        t2 - t1 >= Duration::from_millis(1800),
        "backoff doubles: {t1:?} then {t2:?}"
    );
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &third)).await;
    assert_eq!(sub.expect_update("t1").await["state"], "TASK_RUNNING");
    // The framework's count of re-sent updates (the benchmark reads it).
    let frameworks = get_json(&format!("{}/testbed/frameworks", tb.url())).await;
    let ours = frameworks["frameworks"]
        .as_array()
        .and_then(|all| all.iter().find(|f| f["id"] == fid.as_str()))
        .cloned();
    assert_eq!(ours.map(|f| f["updates_resent"].clone()), Some(json!(2)));
}

#[tokio::test]
async fn invalid_tasks_get_task_error_from_the_master() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "e", 60.0).await;
    let event = sub.expect("OFFERS").await;
    let offer = &event["offers"]["offers"][0];
    let mut accept = launch(
        &fid,
        offer,
        &[
            ("too-big", 100.0, 32.0),
            ("ok", 0.1, 32.0),
            ("ok", 0.1, 32.0),
        ],
    );
    accept["accept"]["operations"][0]["launch"]["task_infos"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"name": "nocmd", "task_id": {"value": "nocmd"}, "agent_id": offer["agent_id"],
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}]}),
        );
    call(&tb.url(), &sub.stream_id, accept).await;
    let big = sub.expect_update("too-big").await;
    assert_eq!(big["state"], "TASK_ERROR");
    assert_eq!(big["reason"], "REASON_TASK_INVALID");
    assert!(big["message"].as_str().unwrap().starts_with("Total resources cpus:100;mem:32 required by task and its executor is more than available"), "{big}");
    let dup = sub.expect_update("ok").await;
    let dup = if dup["state"] == "TASK_STARTING" {
        sub.expect_update("ok").await
    } else {
        dup
    };
    assert_eq!(dup["state"], "TASK_ERROR");
    assert_eq!(dup["message"], "Task has duplicate ID: ok");
    let nocmd = sub.expect_update("nocmd").await;
    assert_eq!(
        nocmd["message"],
        "Task should have at least one (but not both) of CommandInfo or ExecutorInfo present"
    );
}

#[tokio::test]
async fn kill_running_task_and_kill_unknown_task() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, offer) = with_task(&tb, new_framework("k", 60.0), "t1").await;
    run(&tb, &mut sub, &fid, "t1").await;
    let kill = |task: &str, agent: Option<&Value>| {
        let mut body = json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {"task_id": {"value": task}}});
        if let Some(agent) = agent {
            body["kill"]["agent_id"] = agent.clone();
        }
        body
    };
    assert_eq!(
        call(
            &tb.url(),
            &sub.stream_id,
            kill("t1", Some(&offer["agent_id"]))
        )
        .await
        .status,
        202
    );
    let killed = sub.expect_update("t1").await;
    assert_eq!(killed["state"], "TASK_KILLED");
    assert_eq!(
        killed["message"],
        "Command terminated with signal Terminated"
    );
    assert_eq!(killed["source"], "SOURCE_EXECUTOR");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killed)).await;

    // Unknown and already-finished tasks: answered as reconciliation.
    call(&tb.url(), &sub.stream_id, kill("no-such-task", None)).await;
    let unknown = sub.expect_update("no-such-task").await;
    assert_eq!(unknown["state"], "TASK_LOST");
    assert_eq!(unknown["message"], "Reconciliation: Task is unknown");
    assert_eq!(unknown["reason"], "REASON_RECONCILIATION");
    assert!(unknown.get("uuid").is_none() && unknown.get("agent_id").is_none());
    call(
        &tb.url(),
        &sub.stream_id,
        kill("t1", Some(&offer["agent_id"])),
    )
    .await;
    let done = sub.expect_update("t1").await;
    assert_eq!(
        done["message"],
        "Reconciliation: Task is unknown to the agent"
    );
    assert_eq!(done["state"], "TASK_LOST");
}

#[tokio::test]
async fn task_killing_state_frameworks_get_killing_first() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut body = new_framework("ks", 60.0);
    body["subscribe"]["framework_info"]["capabilities"] = json!([{"type": "TASK_KILLING_STATE"}]);
    let (mut sub, fid, _) = with_task(&tb, body, "t2").await;
    run(&tb, &mut sub, &fid, "t2").await;
    call(&tb.url(), &sub.stream_id, json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {"task_id": {"value": "t2"}}})).await;
    let killing = sub.expect_update("t2").await;
    assert_eq!(killing["state"], "TASK_KILLING");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killing)).await;
    assert_eq!(sub.expect_update("t2").await["state"], "TASK_KILLED");
}

#[tokio::test]
async fn reconciliation_answers_every_case_like_the_real_master() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, offer) = with_task(&tb, new_framework("rc", 60.0), "t1").await;
    run(&tb, &mut sub, &fid, "t1").await;
    let agent = offer["agent_id"].clone();
    let reconcile = json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": [
        {"task_id": {"value": "t1"}, "agent_id": agent},
        {"task_id": {"value": "no-such-task"}},
        {"task_id": {"value": "no-such-task-2"}, "agent_id": agent},
        {"task_id": {"value": "no-such-task-3"}, "agent_id": {"value": "no-such-agent"}}]}});
    call(&tb.url(), &sub.stream_id, reconcile).await;
    let known = sub.expect_update("t1").await;
    assert_eq!(
        (known["state"].as_str(), known["message"].as_str()),
        (
            Some("TASK_RUNNING"),
            Some("Reconciliation: Latest task state")
        )
    );
    assert_eq!(known["source"], "SOURCE_MASTER");
    assert!(known.get("uuid").is_none());
    let unknown = sub.expect_update("no-such-task").await;
    assert_eq!(
        (unknown["state"].as_str(), unknown["message"].as_str()),
        (Some("TASK_LOST"), Some("Reconciliation: Task is unknown"))
    );
    let on_agent = sub.expect_update("no-such-task-2").await;
    assert_eq!(
        on_agent["message"],
        "Reconciliation: Task is unknown to the agent"
    );
    assert_eq!(on_agent["agent_id"], agent);
    let no_agent = sub.expect_update("no-such-task-3").await;
    assert_eq!(no_agent["message"], "Reconciliation: Task is unknown");
    assert_eq!(no_agent["agent_id"]["value"], "no-such-agent");

    // Implicit: one update per live task.
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": []}}),
    )
    .await;
    let implicit = sub.expect_update("t1").await;
    assert_eq!(implicit["message"], "Reconciliation: Latest task state");
    sub.expect_none("UPDATE", Duration::from_millis(300)).await;
}

#[tokio::test]
async fn partition_aware_frameworks_get_unknown_and_gone() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut body = new_framework("pa", 60.0);
    body["subscribe"]["framework_info"]["capabilities"] = json!([{"type": "PARTITION_AWARE"}]);
    let mut sub = subscribe(&tb.url(), body).await;
    let fid = sub.subscribed().await;
    let agent = tb.agents()[0].id.clone();
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": [
        {"task_id": {"value": "a"}}, {"task_id": {"value": "b"}, "agent_id": {"value": agent}}]}}),
    )
    .await;
    assert_eq!(sub.expect_update("a").await["state"], "TASK_UNKNOWN");
    assert_eq!(sub.expect_update("b").await["state"], "TASK_GONE");
}

/// A framework `name` with `task` running under the custom executor
/// `executor` (STARTING and RUNNING acknowledged); returns the stream, the
/// framework ID and the offer the task was launched on.
async fn with_executor_task(
    tb: &Testbed,
    name: &str,
    task: &str,
    executor: &str,
) -> (Subscription, String, Value) {
    let (mut sub, fid) = connected(&tb.url(), name, 60.0).await;
    let event = sub.expect("OFFERS").await;
    let offer = event["offers"]["offers"][0].clone();
    launch_under_executor(tb, &mut sub, &fid, &offer, task, executor).await;
    (sub, fid, offer)
}

/// ACCEPTs `offer` launching `task` under the custom executor `executor`,
/// then acknowledges its STARTING and RUNNING; returns the RUNNING status.
async fn launch_under_executor(
    tb: &Testbed,
    sub: &mut Subscription,
    fid: &str,
    offer: &Value,
    task: &str,
    executor: &str,
) -> Value {
    let accept = json!({"framework_id": {"value": fid}, "type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [{
            "name": task, "task_id": {"value": task}, "agent_id": offer["agent_id"],
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}],
            "executor": {"executor_id": {"value": executor}, "type": "CUSTOM",
                "command": {"value": "./mesos-appliance-executor"},
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                              {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}]}}]}}],
        "filters": {"refuse_seconds": 0.0}}});
    assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
    run(tb, sub, fid, task).await
}

/// A MESSAGE of base64 `data` to `executor` on `offer`'s agent.
fn message(fid: &str, offer: &Value, executor: &str, data: &str) -> Value {
    json!({"framework_id": {"value": fid}, "type": "MESSAGE", "message": {
        "agent_id": offer["agent_id"], "executor_id": {"value": executor}, "data": data}})
}

#[tokio::test]
async fn kamikaze_message_makes_a_custom_executor_exit_and_fail_its_tasks() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, offer) = with_executor_task(&tb, "kz", "a-0", "exec-a").await;
    // The rest of the agent is offered again, maybe while `run` waited.
    let second_offer = sub.next_offer().await;
    let running = launch_under_executor(&tb, &mut sub, &fid, &second_offer, "a-1", "exec-a").await;
    assert_eq!(running["executor_id"]["value"], "exec-a");

    let message = |data: &str| message(&fid, &offer, "exec-a", data);
    // "hello" is delivered and ignored; "kamikaze" kills the executor.
    assert_eq!(
        call(&tb.url(), &sub.stream_id, message("aGVsbG8="))
            .await
            .status,
        202
    );
    assert_eq!(
        tb.agents()[0].executors[0].2,
        1,
        "the executor received one message"
    );
    assert_eq!(
        call(&tb.url(), &sub.stream_id, message("a2FtaWthemU="))
            .await
            .status,
        202
    );
    let failure = sub.expect("FAILURE").await;
    assert_eq!(failure["failure"]["executor_id"]["value"], "exec-a");
    assert_eq!(failure["failure"]["status"], 256);
    for task in ["a-0", "a-1"] {
        let failed = sub.expect_update(task).await;
        assert_eq!(failed["state"], "TASK_FAILED");
        assert_eq!(failed["source"], "SOURCE_AGENT");
        assert_eq!(failed["reason"], "REASON_EXECUTOR_TERMINATED");
        assert_eq!(failed["message"], "Executor terminated");
        assert_eq!(base64_len(&failed["uuid"]), 16);
        call(&tb.url(), &sub.stream_id, acknowledge(&fid, &failed)).await;
    }
    // MESSAGE to an unknown executor or agent is still 202.
    let mut unknown = message("aGk=");
    unknown["message"]["executor_id"] = json!({"value": "no-such-executor"});
    assert_eq!(call(&tb.url(), &sub.stream_id, unknown).await.status, 202);
}

#[tokio::test]
async fn command_executor_ignores_kamikaze() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, offer) = with_task(&tb, new_framework("ck", 60.0), "t1").await;
    run(&tb, &mut sub, &fid, "t1").await;
    let kamikaze = message(&fid, &offer, "t1", "a2FtaWthemU=");
    call(&tb.url(), &sub.stream_id, kamikaze).await;
    sub.expect_none("UPDATE", Duration::from_millis(500)).await;
    assert_eq!(tb.tasks()[0].state.as_str_name(), "TASK_RUNNING");
}

#[tokio::test]
async fn shutdown_kills_the_executors_tasks_then_it_exits_cleanly() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid, offer) = with_executor_task(&tb, "sd", "b-0", "exec-b").await;
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "SHUTDOWN", "shutdown": {
        "agent_id": offer["agent_id"], "executor_id": {"value": "exec-b"}}}),
    )
    .await;
    let failure = sub.expect("FAILURE").await;
    assert_eq!(failure["failure"]["status"], 0);
    let killed = sub.expect_update("b-0").await;
    assert_eq!(killed["state"], "TASK_KILLED");
}
