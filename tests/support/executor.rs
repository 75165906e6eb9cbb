//! Helpers for tests that run the real `mesos-appliance-executor` through
//! the testbed's process mode: launch calls built with the library's
//! `ExecutorInfo` helper, and process inspection through `/proc`.

use std::time::{Duration, Instant};

use mesos_appliance::executor::info::{ExecutorResources, executor_info, kill_policy, task_data};
use mesos_appliance::mesos::json;
use mesos_appliance::mesos::v1;
use mesos_appliance::testbed::{ExecutorView, Testbed, TestbedConfig};
use serde_json::{Value, json};

use super::mesos::*;

/// The executor binary Cargo built for this test run.
pub const EXECUTOR: &str = env!("CARGO_BIN_EXE_mesos-appliance-executor");

/// The executor the tests run: [`EXECUTOR`], or the binary named by
/// `MESOS_APPLIANCE_TEST_EXECUTOR` (e.g. a release or musl build, to measure it).
pub fn executor_binary() -> std::path::PathBuf {
    std::env::var_os("MESOS_APPLIANCE_TEST_EXECUTOR")
        .map(Into::into)
        .unwrap_or_else(|| EXECUTOR.into())
}

/// A testbed with one agent in process mode.
pub async fn process_testbed() -> Testbed {
    process_testbed_with(TestbedConfig::for_tests_with_executor(1, executor_binary())).await
}

/// A testbed from `config`.
pub async fn process_testbed_with(config: TestbedConfig) -> Testbed {
    super::testbed(config).await
}

/// A SUBSCRIBE body for a framework; `checkpoint` as given.
pub fn framework(name: &str, checkpoint: bool) -> Value {
    json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "root", "name": name, "failover_timeout": 60.0, "checkpoint": checkpoint}}})
}

/// Makes the executor of a TaskInfo (from [`task_info`]) talk JSON to the
/// agent instead of protobuf.
pub fn use_json(task: &mut Value) {
    task["executor"]["command"]["environment"] = json!({"variables": [
        {"name": "MESOS_APPLIANCE_EXECUTOR_ENCODING", "value": "json"}]});
}

/// A TaskInfo (Mesos JSON) running shell `command` under our executor
/// `executor_id`, with an optional kill policy grace period.
pub fn task_info(
    framework_id: &str,
    agent_id: &Value,
    task_id: &str,
    executor_id: &str,
    command: &str,
    grace: Option<Duration>,
) -> Value {
    let scalar = |name: &str, value: f64| v1::Resource {
        name: name.into(),
        r#type: v1::value::Type::Scalar as i32,
        scalar: Some(v1::value::Scalar { value }),
        ..Default::default()
    };
    let info = v1::TaskInfo {
        name: task_id.into(),
        task_id: v1::TaskId {
            value: task_id.into(),
        },
        agent_id: v1::AgentId {
            value: agent_id["value"].as_str().expect("agent id").into(),
        },
        resources: vec![scalar("cpus", 0.1), scalar("mem", 32.0)],
        executor: Some(executor_info(
            executor_id,
            framework_id,
            "http://127.0.0.1:8080/executor/0.1.0-000000000000/mesos-appliance-executor",
            &ExecutorResources::default(),
        )),
        data: Some(task_data(&v1::CommandInfo {
            value: Some(command.into()),
            ..Default::default()
        })),
        kill_policy: grace.map(kill_policy),
        ..Default::default()
    };
    json::to_value(&info)
}

/// An ACCEPT of `offer` launching `tasks` (TaskInfo JSON).
pub fn accept(framework_id: &str, offer: &Value, tasks: Vec<Value>) -> Value {
    json!({"framework_id": {"value": framework_id}, "type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": tasks}}],
        "filters": {"refuse_seconds": 0.0}}})
}

/// Launches shell `command` as `task_id` on executor `executor_id` from the
/// next offer; returns the offer.
pub async fn launch_command(
    tb: &Testbed,
    sub: &mut Subscription,
    fid: &str,
    task_id: &str,
    executor_id: &str,
    command: &str,
    grace: Option<Duration>,
) -> Value {
    let offer = sub.next_offer().await;
    let task = task_info(
        fid,
        &offer["agent_id"],
        task_id,
        executor_id,
        command,
        grace,
    );
    let answer = call(&tb.url(), &sub.stream_id, accept(fid, &offer, vec![task])).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    offer
}

/// Waits for TASK_STARTING then TASK_RUNNING of `task_id`, acknowledging
/// both; returns the RUNNING status.
pub async fn expect_running(
    tb: &Testbed,
    sub: &mut Subscription,
    fid: &str,
    task_id: &str,
) -> Value {
    let starting = expect_state(sub, task_id, "TASK_STARTING").await;
    assert_eq!(starting["source"], "SOURCE_EXECUTOR");
    call(&tb.url(), &sub.stream_id, acknowledge(fid, &starting)).await;
    let running = expect_state(sub, task_id, "TASK_RUNNING").await;
    call(&tb.url(), &sub.stream_id, acknowledge(fid, &running)).await;
    running
}

/// The next update of `task_id`, asserted to be in `state`.
pub async fn expect_state(sub: &mut Subscription, task_id: &str, state: &str) -> Value {
    let status = sub.expect_update(task_id).await;
    assert_eq!(status["state"], state, "unexpected update: {status}");
    status
}

/// The live executor process of `executor_id`.
pub fn live_executor(tb: &Testbed, executor_id: &str) -> ExecutorView {
    tb.executors()
        .into_iter()
        .find(|e| e.executor_id == executor_id && e.wait_status.is_none())
        .unwrap_or_else(|| panic!("no live executor {executor_id}: {:?}", tb.executors()))
}

/// The executor process of `executor_id`, live or exited.
pub fn any_executor(tb: &Testbed, executor_id: &str) -> ExecutorView {
    tb.executors()
        .into_iter()
        .find(|e| e.executor_id == executor_id)
        .unwrap_or_else(|| panic!("no executor {executor_id}: {:?}", tb.executors()))
}

/// Waits until `executor_id` has exited; returns its view (with the wait status).
pub async fn exited_executor(tb: &Testbed, executor_id: &str) -> ExecutorView {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(view) = tb
            .executors()
            .into_iter()
            .find(|e| e.executor_id == executor_id && e.wait_status.is_some())
        {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "executor {executor_id} did not exit: {:?}",
            tb.executors()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `/proc/<pid>/stat` fields after the command name: state, ppid, pgrp, session.
fn stat(pid: u32) -> Option<(char, u32, u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp, session))
}

/// True while `pid` runs (zombies count as gone: PID 1 here may not reap).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, ..)| state != 'Z' && state != 'X')
}

/// Live processes of session `sid` other than its leader, as (pid, pgrp).
pub fn session_members(sid: u32) -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != sid)
        .filter_map(|pid| {
            let (state, _, pgrp, session) = stat(pid)?;
            (session == sid && state != 'Z' && state != 'X').then_some((pid, pgrp))
        })
        .collect()
}

/// Waits until `cond` holds, polling; panics naming `what` after [`WAIT`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The executor's log (its sandbox `stderr`).
pub fn executor_log(view: &ExecutorView) -> String {
    std::fs::read_to_string(view.sandbox.join("stderr")).unwrap_or_default()
}

/// `VmRSS` of `pid` in kB.
pub fn rss_kb(pid: u32) -> Option<u64> {
    super::processes::memory(pid).map(|m| m.rss_kib)
}
