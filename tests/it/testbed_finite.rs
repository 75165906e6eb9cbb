//! Finite tasks on the testbed (`docs/testbed.md#finite-tasks`): in process
//! mode a command-executor task runs for real, as Mesos' command executor
//! runs it (`src/launcher/executor.cpp` in apache/mesos: `launch`, `kill`,
//! `reaped`, `escalated`; the message is `"Command " + WSTRINGIFY(status)`,
//! `src/common/status_utils.hpp`); simulated tasks end after the run time
//! and with the exit code the fault API gives them.

use crate::support;
use crate::support::testbed;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

/// A process-mode testbed with one agent.
async fn process_testbed() -> Testbed {
    testbed(TestbedConfig::for_tests_with_executor(
        1,
        support::executor::executor_binary(),
    ))
    .await
}

/// A command task `(task_id, shell command)`, with a kill policy grace
/// period if given.
fn command_task(offer: &Value, task_id: &str, command: &str, grace: Option<Duration>) -> Value {
    let mut task = json!({
        "name": task_id, "task_id": {"value": task_id}, "agent_id": offer["agent_id"],
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32.0}}],
        "command": {"shell": true, "value": command,
            "environment": {"variables": [{"name": "GREETING", "value": "hello"}]}}});
    if let Some(grace) = grace {
        task["kill_policy"] = json!({"grace_period": {"nanoseconds": grace.as_nanos() as i64}});
    }
    task
}

/// Subscribes (with `capabilities`), launches `task` on the first offer
/// and acknowledges STARTING and RUNNING; returns the stream and the
/// framework ID.
async fn running(tb: &Testbed, capabilities: Value, task: Value) -> (Subscription, String) {
    let mut body = new_framework("finite", 60.0);
    body["subscribe"]["framework_info"]["capabilities"] = capabilities;
    let mut sub = subscribe(&tb.url(), body).await;
    let fid = sub.subscribed().await;
    let offer = sub.next_offer().await;
    let task_id = task["task_id"]["value"].as_str().unwrap().to_string();
    let mut task = task;
    task["agent_id"] = offer["agent_id"].clone();
    let accept = json!({"framework_id": {"value": fid}, "type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [task]}}]}});
    assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
    // STARTING, then RUNNING (a loaded machine may redeliver STARTING
    // before its acknowledgement arrives).
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("TASK_RUNNING") {
        let status = sub.expect_update(&task_id).await;
        let state = status["state"].as_str().unwrap_or_default().to_string();
        assert!(
            matches!(state.as_str(), "TASK_STARTING" | "TASK_RUNNING"),
            "{status}"
        );
        call(&tb.url(), &sub.stream_id, acknowledge(&fid, &status)).await;
        seen.push(state);
    }
    assert_eq!(seen[0], "TASK_STARTING");
    (sub, fid)
}

/// The next update of `task_id` that is not a redelivered TASK_STARTING or
/// TASK_RUNNING (a loaded machine may deliver an acknowledgement after the
/// retry interval).
async fn next_change(sub: &mut Subscription, task_id: &str) -> Value {
    loop {
        let status = sub.expect_update(task_id).await;
        if !matches!(
            status["state"].as_str(),
            Some("TASK_STARTING" | "TASK_RUNNING")
        ) {
            return status;
        }
    }
}

fn kill(fid: &str, task_id: &str, grace: Option<Duration>) -> Value {
    let mut body = json!({"framework_id": {"value": fid}, "type": "KILL",
        "kill": {"task_id": {"value": task_id}}});
    if let Some(grace) = grace {
        body["kill"]["kill_policy"] =
            json!({"grace_period": {"nanoseconds": grace.as_nanos() as i64}});
    }
    body
}

/// The text of `file` in the sandbox of `executor_id`, read through the
/// agent's files API as the appliance's logs page reads it.
async fn sandbox_file(tb: &Testbed, executor_id: &str, file: &str) -> String {
    let state: Value = get_json(&format!("{}/master/state", tb.url())).await;
    let pid = state["slaves"][0]["pid"].as_str().unwrap().to_string();
    let agent = format!("http://{}", pid.split('@').nth(1).unwrap());
    let agent_state: Value = get_json(&format!("{agent}/state")).await;
    let directory = agent_state["frameworks"]
        .as_array()
        .into_iter()
        .chain(agent_state["completed_frameworks"].as_array())
        .flatten()
        .flat_map(|f| {
            f["executors"]
                .as_array()
                .into_iter()
                .chain(f["completed_executors"].as_array())
                .flatten()
        })
        .find(|e| e["id"] == executor_id)
        .unwrap_or_else(|| panic!("no sandbox of {executor_id} in {agent_state}"))["directory"]
        .as_str()
        .unwrap()
        .to_string();
    let read: Value = get_json(&format!(
        "{agent}/files/read?path={directory}/{file}&offset=0&length=65536"
    ))
    .await;
    read["data"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn process_mode_runs_a_command_task_to_task_finished() {
    let tb = process_testbed().await;
    let task = command_task(
        &json!({}),
        "job.ok",
        "echo \"$GREETING from $MESOS_SANDBOX\"; sleep 0.2",
        None,
    );
    let (mut sub, fid) = running(&tb, json!([]), task).await;
    let finished = next_change(&mut sub, "job.ok").await;
    assert_eq!(finished["state"], "TASK_FINISHED", "{finished}");
    assert_eq!(finished["message"], "Command exited with status 0");
    assert_eq!(finished["source"], "SOURCE_EXECUTOR");
    assert!(finished.get("reason").is_none(), "no reason: {finished}");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &finished)).await;
    let stdout = sandbox_file(&tb, "job.ok", "stdout").await;
    assert!(stdout.starts_with("hello from /"), "stdout: {stdout:?}");
    assert!(stdout.contains("/executors/job.ok/runs/"), "{stdout:?}");
    // The command executor exits with its task: no FAILURE (it is no
    // custom executor), and the task is completed at the master.
    sub.expect_none("FAILURE", Duration::from_millis(300)).await;
    let task = tb
        .completed_tasks()
        .into_iter()
        .find(|t| t.task_id == "job.ok")
        .expect("task kept");
    assert_eq!(task.state.as_str_name(), "TASK_FINISHED");
}

#[tokio::test]
async fn process_mode_a_non_zero_exit_is_task_failed_with_the_status() {
    let tb = process_testbed().await;
    let task = command_task(&json!({}), "job.bad", "echo oops >&2; exit 3", None);
    let (mut sub, _) = running(&tb, json!([]), task).await;
    let failed = next_change(&mut sub, "job.bad").await;
    assert_eq!(failed["state"], "TASK_FAILED", "{failed}");
    assert_eq!(failed["message"], "Command exited with status 3");
    assert_eq!(failed["source"], "SOURCE_EXECUTOR");
    assert!(failed.get("reason").is_none(), "no reason: {failed}");
    assert!(
        sandbox_file(&tb, "job.bad", "stderr")
            .await
            .contains("oops")
    );
}

#[tokio::test]
async fn process_mode_kill_sends_sigterm_and_the_task_is_killed() {
    let tb = process_testbed().await;
    let task = command_task(&json!({}), "job.term", "sleep 30", None);
    let capabilities = json!([{"type": "TASK_KILLING_STATE"}]);
    let (mut sub, fid) = running(&tb, capabilities, task).await;
    let asked = Instant::now();
    call(&tb.url(), &sub.stream_id, kill(&fid, "job.term", None)).await;
    let killing = next_change(&mut sub, "job.term").await;
    assert_eq!(killing["state"], "TASK_KILLING");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killing)).await;
    let killed = next_change(&mut sub, "job.term").await;
    assert_eq!(killed["state"], "TASK_KILLED", "{killed}");
    assert_eq!(
        killed["message"],
        "Command terminated with signal Terminated"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "SIGTERM ends it at once, not after the 3 s default grace"
    );
}

#[tokio::test]
async fn process_mode_kill_escalates_to_sigkill_after_the_grace_period() {
    let tb = process_testbed().await;
    // The shell and its sleep ignore SIGTERM: only SIGKILL ends them.
    let grace = Duration::from_millis(600);
    let task = command_task(
        &json!({}),
        "job.stubborn",
        "trap '' TERM; sleep 30",
        Some(grace),
    );
    let (mut sub, fid) = running(&tb, json!([]), task).await;
    let asked = Instant::now();
    call(&tb.url(), &sub.stream_id, kill(&fid, "job.stubborn", None)).await;
    let killed = next_change(&mut sub, "job.stubborn").await;
    let took = asked.elapsed();
    assert_eq!(killed["state"], "TASK_KILLED", "{killed}");
    assert_eq!(killed["message"], "Command terminated with signal Killed");
    assert!(
        took >= grace,
        "SIGKILL only after the grace period: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn process_mode_a_second_kill_may_only_shorten_the_grace_period() {
    let tb = process_testbed().await;
    let task = command_task(
        &json!({}),
        "job.shorter",
        "trap '' TERM; sleep 30",
        Some(Duration::from_secs(20)),
    );
    let (mut sub, fid) = running(&tb, json!([]), task).await;
    let asked = Instant::now();
    call(&tb.url(), &sub.stream_id, kill(&fid, "job.shorter", None)).await;
    // A retried KILL with a longer grace changes nothing; a shorter one
    // brings the SIGKILL forward (executor.cpp kill: "can be only decreased").
    call(
        &tb.url(),
        &sub.stream_id,
        kill(&fid, "job.shorter", Some(Duration::from_secs(60))),
    )
    .await;
    call(
        &tb.url(),
        &sub.stream_id,
        kill(&fid, "job.shorter", Some(Duration::from_millis(300))),
    )
    .await;
    let killed = next_change(&mut sub, "job.shorter").await;
    assert_eq!(killed["state"], "TASK_KILLED", "{killed}");
    assert_eq!(killed["message"], "Command terminated with signal Killed");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
}

async fn post_fault(tb: &Testbed, body: Value) -> (u16, Value) {
    let answer = client()
        .post(format!("{}/testbed/faults/task-exit", tb.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn simulated_tasks_end_after_the_run_time_with_the_exit_code() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (status, _) = post_fault(
        &tb,
        json!({"task_id_prefix": "report.", "run_ms": 300, "exit_code": 0}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post_fault(
        &tb,
        json!({"task_id_prefix": "backup.", "label": "tier=gold", "run_ms": 100, "exit_code": 2}),
    )
    .await;
    assert_eq!(status, 200);

    let mut sub = subscribe(&tb.url(), new_framework("sim", 60.0)).await;
    let fid = sub.subscribed().await;
    let offer = sub.next_offer().await;
    let mut gold = command_task(&offer, "backup.1", "backup", None);
    gold["labels"] = json!({"labels": [{"key": "tier", "value": "gold"}]});
    let tasks = [
        command_task(&offer, "report.1", "report", None),
        gold,
        command_task(&offer, "backup.2", "backup", None),
    ];
    let accept = json!({"framework_id": {"value": fid}, "type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": tasks}}]}});
    let launched = Instant::now();
    assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
    let mut ends = std::collections::HashMap::new();
    while ends.len() < 2 {
        let event = sub.expect("UPDATE").await;
        let status = event["update"]["status"].clone();
        call(&tb.url(), &sub.stream_id, acknowledge(&fid, &status)).await;
        let state = status["state"].as_str().unwrap();
        if matches!(state, "TASK_FINISHED" | "TASK_FAILED") {
            let id = status["task_id"]["value"].as_str().unwrap().to_string();
            ends.insert(id, (status, launched.elapsed()));
        }
    }
    let (report, took) = &ends["report.1"];
    assert_eq!(report["state"], "TASK_FINISHED");
    assert_eq!(report["message"], "Command exited with status 0");
    assert_eq!(report["source"], "SOURCE_EXECUTOR");
    assert!(*took >= Duration::from_millis(300), "{took:?}");
    let (backup, _) = &ends["backup.1"];
    assert_eq!(backup["state"], "TASK_FAILED");
    assert_eq!(backup["message"], "Command exited with status 2");
    // backup.2 lacks the label: it keeps running.
    sub.expect_none_but("UPDATE", Duration::from_millis(500), |e| {
        e["update"]["status"]["task_id"]["value"] != "backup.2"
            || e["update"]["status"]["state"] == "TASK_RUNNING"
    })
    .await;
    let states: Vec<(String, &str)> = tb
        .tasks()
        .iter()
        .map(|t| (t.task_id.clone(), t.state.as_str_name()))
        .collect();
    assert!(
        states.contains(&("backup.2".into(), "TASK_RUNNING")),
        "{states:?}"
    );
}

#[tokio::test]
async fn a_simulated_task_killed_before_its_run_time_stays_killed() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let run = Duration::from_secs(4);
    tb.set_task_exit("slow.", None, run, 0);
    let task = command_task(&json!({}), "slow.1", "slow", None);
    let launched = Instant::now();
    let (mut sub, fid) = running(&tb, json!([]), task).await;
    call(&tb.url(), &sub.stream_id, kill(&fid, "slow.1", None)).await;
    let killed = next_change(&mut sub, "slow.1").await;
    assert!(
        launched.elapsed() < run,
        "the machine is too slow for this test: {:?} from launch to TASK_KILLED",
        launched.elapsed()
    );
    assert_eq!(killed["state"], "TASK_KILLED");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killed)).await;
    // Past the run time: no TASK_FINISHED after the TASK_KILLED.
    let past =
        (launched + run + Duration::from_millis(500)).saturating_duration_since(Instant::now());
    sub.expect_none_but("UPDATE", past, |e| {
        e["update"]["status"]["state"] == "TASK_KILLED"
    })
    .await;
}

#[tokio::test]
async fn the_task_exit_fault_refuses_bad_bodies() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    for (body, says) in [
        (
            json!({"task_id_prefix": "", "run_ms": 1, "exit_code": 0}),
            "task_id_prefix",
        ),
        (
            json!({"task_id_prefix": "a", "run_ms": 1, "exit_code": 256}),
            "exit_code",
        ),
        (
            json!({"task_id_prefix": "a", "run_ms": 86_400_001u64, "exit_code": 0}),
            "run_ms",
        ),
        (
            json!({"task_id_prefix": "a", "label": "nokey", "run_ms": 1, "exit_code": 0}),
            "label",
        ),
        (json!({"task_id_prefix": "a", "run_ms": 1}), "exit_code"),
        (
            json!({"task_id_prefix": "a", "run_ms": 1, "exit_code": 0, "signal": 9}),
            "signal",
        ),
    ] {
        let (status, answer) = post_fault(&tb, body.clone()).await;
        assert_eq!(status, 400, "{body} → {answer}");
        assert!(
            answer["error"].as_str().unwrap_or_default().contains(says),
            "{body} → {answer}"
        );
    }
}
