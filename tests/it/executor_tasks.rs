//! The real `mesos-appliance-executor` run by the testbed's process mode:
//! a task runs and is killed with SIGTERM, a task ignoring SIGTERM is
//! SIGKILLed when its grace period is over, a task writes into its sandbox,
//! `kamikaze` kills the tasks, reports them and ends the executor, SHUTDOWN,
//! and the executor's memory footprint (`docs/mesos-protocol.md#executor-api`,
//! capture executor/).

use crate::support;

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::json;
use support::executor::*;
use support::mesos::*;

fn uuid_len(value: &serde_json::Value) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().unwrap_or_default())
        .map(|b| b.len())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_sleep_task_runs_and_is_killed_with_sigterm() {
    let tb = process_testbed().await;
    let (mut sub, fid) = connected(&tb.url(), "kill", 60.0).await;
    let offer = launch_command(&tb, &mut sub, &fid, "sleeper", "exec-1", "sleep 1000", None).await;

    let starting = expect_state(&mut sub, "sleeper", "TASK_STARTING").await;
    let executor = live_executor(&tb, "exec-1");
    assert_eq!(starting["source"], "SOURCE_EXECUTOR");
    assert_eq!(starting["executor_id"]["value"], "exec-1");
    assert_eq!(starting["agent_id"], offer["agent_id"]);
    assert_eq!(uuid_len(&starting["uuid"]), 16, "the executor's own uuid");
    assert_eq!(starting["container_status"]["executor_pid"], executor.pid);
    assert_eq!(
        starting["container_status"]["container_id"]["value"],
        executor.container_id.as_str()
    );
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &starting)).await;
    let running = expect_state(&mut sub, "sleeper", "TASK_RUNNING").await;
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &running)).await;

    // The task is a process group of its own inside the executor's session.
    assert!(alive(executor.pid));
    let members = session_members(executor.pid);
    assert!(
        members.iter().any(|(pid, pgrp)| pid == pgrp),
        "a task group leader in the executor's session: {members:?}"
    );

    let started = Instant::now();
    let kill = json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {
        "task_id": {"value": "sleeper"}, "agent_id": offer["agent_id"]}});
    assert_eq!(call(&tb.url(), &sub.stream_id, kill).await.status, 202);
    let killed = expect_state(&mut sub, "sleeper", "TASK_KILLED").await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "SIGTERM ends sleep at once"
    );
    assert_eq!(killed["source"], "SOURCE_EXECUTOR");
    assert_eq!(
        killed["message"],
        "Command terminated with signal Terminated"
    );
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killed)).await;

    // Its only task is done and acknowledged by the agent: the executor exits 0.
    let failure = sub.expect("FAILURE").await;
    assert_eq!(failure["failure"]["executor_id"]["value"], "exec-1");
    assert_eq!(failure["failure"]["status"], 0);
    let exited = exited_executor(&tb, "exec-1").await;
    assert_eq!(exited.wait_status, Some(0));
    assert!(!alive(executor.pid));
    eventually("no process left in the executor's session", || {
        session_members(executor.pid).is_empty()
    })
    .await;
    tb.shutdown().await;
}

#[tokio::test]
async fn a_task_ignoring_sigterm_is_sigkilled_after_the_kill_grace_period() {
    let tb = process_testbed().await;
    let (mut sub, fid) = connected(&tb.url(), "stubborn", 60.0).await;
    // The task's policy says 30 s; the KILL call's policy (1 s) wins.
    let offer = launch_command(
        &tb,
        &mut sub,
        &fid,
        "stubborn",
        "exec-2",
        "trap '' TERM; sleep 1000",
        Some(Duration::from_secs(30)),
    )
    .await;
    expect_running(&tb, &mut sub, &fid, "stubborn").await;
    let executor = live_executor(&tb, "exec-2");

    let started = Instant::now();
    let kill = json!({"framework_id": {"value": fid}, "type": "KILL", "kill": {
        "task_id": {"value": "stubborn"}, "agent_id": offer["agent_id"],
        "kill_policy": {"grace_period": {"nanoseconds": 1_000_000_000u64}}}});
    assert_eq!(call(&tb.url(), &sub.stream_id, kill).await.status, 202);
    let killed = expect_state(&mut sub, "stubborn", "TASK_KILLED").await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "SIGKILL after the 1 s grace period, took {took:?}"
    );
    assert_eq!(killed["message"], "Command terminated with signal Killed");
    eprintln!("KILL → TASK_KILLED for a task ignoring SIGTERM (grace 1 s): {took:?}");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killed)).await;
    eventually("the task's processes are gone", || {
        session_members(executor.pid).is_empty()
    })
    .await;
    tb.shutdown().await;
}

#[tokio::test]
async fn a_task_writes_into_its_sandbox() {
    let tb = process_testbed().await;
    let (mut sub, fid) = connected(&tb.url(), "sandbox", 60.0).await;
    let offer = sub.next_offer().await;
    let mut task = task_info(
        &fid,
        &offer["agent_id"],
        "writer",
        "exec-3",
        "echo hello > greeting.txt && pwd > cwd.txt && echo \"$MESOS_SANDBOX $MESOS_TASK_ID\" > env.txt",
        None,
    );
    // This executor talks JSON to the agent (the others protobuf).
    use_json(&mut task);
    let answer = call(&tb.url(), &sub.stream_id, accept(&fid, &offer, vec![task])).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    expect_running(&tb, &mut sub, &fid, "writer").await;
    let executor = any_executor(&tb, "exec-3");
    let finished = expect_state(&mut sub, "writer", "TASK_FINISHED").await;
    assert_eq!(finished["message"], "Command exited with status 0");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &finished)).await;

    let sandbox = &executor.sandbox;
    assert!(
        sandbox.ends_with(format!("executors/exec-3/runs/{}", executor.container_id)),
        "Mesos' sandbox layout: {}",
        sandbox.display()
    );
    let read = |name: &str| std::fs::read_to_string(sandbox.join(name)).unwrap_or_default();
    assert_eq!(read("greeting.txt"), "hello\n");
    let cwd = std::fs::canonicalize(read("cwd.txt").trim()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(sandbox).unwrap());
    assert_eq!(
        read("env.txt").trim(),
        format!("{} writer", sandbox.display())
    );
    // The executor logs into the sandbox like under a real agent.
    assert!(
        executor_log(&executor).contains("subscribed"),
        "{}",
        executor_log(&executor)
    );
    tb.shutdown().await;
}

#[tokio::test]
async fn kamikaze_kills_the_executor_and_its_tasks_fail() {
    let tb = process_testbed().await;
    let (mut sub, fid) = connected(&tb.url(), "kamikaze", 60.0).await;
    let offer = launch_command(&tb, &mut sub, &fid, "k-0", "exec-k", "sleep 1000", None).await;
    expect_running(&tb, &mut sub, &fid, "k-0").await;
    launch_command(&tb, &mut sub, &fid, "k-1", "exec-k", "sleep 1000", None).await;
    let running = expect_running(&tb, &mut sub, &fid, "k-1").await;
    assert_eq!(running["executor_id"]["value"], "exec-k");
    let executor = live_executor(&tb, "exec-k");
    let tasks: Vec<(u32, u32)> = session_members(executor.pid)
        .into_iter()
        .filter(|(pid, pgrp)| pid == pgrp)
        .collect();
    assert_eq!(tasks.len(), 2, "two task process groups");

    let message = |data: &[u8]| {
        json!({"framework_id": {"value": fid}, "type": "MESSAGE", "message": {
        "agent_id": offer["agent_id"], "executor_id": {"value": "exec-k"},
        "data": base64::engine::general_purpose::STANDARD.encode(data)}})
    };
    // An unknown message is logged and ignored.
    assert_eq!(
        call(&tb.url(), &sub.stream_id, message(b"hello"))
            .await
            .status,
        202
    );
    eventually("the executor logs the unknown message", || {
        executor_log(&executor).contains("unknown framework message ignored")
    })
    .await;
    assert!(alive(executor.pid));

    let sent = Instant::now();
    assert_eq!(
        call(&tb.url(), &sub.stream_id, message(b"kamikaze"))
            .await
            .status,
        202
    );
    // The executor reports its tasks itself (SIGKILL, then TASK_FAILED from
    // SOURCE_EXECUTOR); the agent fails only tasks that are not terminal
    // yet when the executor exits, so it adds nothing here (slave.cpp
    // executorTerminated).
    let mut acknowledged = Vec::new();
    for task in ["k-0", "k-1"] {
        let failed = expect_state(&mut sub, task, "TASK_FAILED").await;
        acknowledged.push(failed["uuid"].clone());
        assert_eq!(failed["source"], "SOURCE_EXECUTOR");
        assert_eq!(failed["reason"], "REASON_EXECUTOR_TERMINATED");
        assert!(
            failed["message"].as_str().unwrap().contains("kamikaze"),
            "{failed}"
        );
        assert_eq!(failed["executor_id"]["value"], "exec-k");
        assert_eq!(uuid_len(&failed["uuid"]), 16);
        call(&tb.url(), &sub.stream_id, acknowledge(&fid, &failed)).await;
    }
    let failure = sub.expect("FAILURE").await;
    assert_eq!(failure["failure"]["executor_id"]["value"], "exec-k");
    assert_eq!(failure["failure"]["agent_id"], offer["agent_id"]);
    assert_eq!(
        failure["failure"]["status"], 256,
        "exit code 1 as a raw wait status"
    );
    // The agent acknowledged at once, so the executor did not wait out
    // its 2 s bound.
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "kamikaze MESSAGE → FAILURE took {:?}",
        sent.elapsed()
    );
    eprintln!(
        "kamikaze MESSAGE → TASK_FAILED ×2 and FAILURE: {:?}",
        sent.elapsed()
    );
    // Nothing new; a redelivery that crossed our ACKNOWLEDGE may arrive.
    sub.expect_none_but("UPDATE", Duration::from_secs(1), |e| {
        acknowledged.contains(&e["update"]["status"]["uuid"])
    })
    .await;
    assert_eq!(exited_executor(&tb, "exec-k").await.wait_status, Some(256));
    assert!(!alive(executor.pid), "the executor process is gone");
    for (pid, _) in tasks {
        assert!(!alive(pid), "task process {pid} is gone");
    }
    assert!(executor_log(&executor).contains("kamikaze"));
    tb.shutdown().await;
}

#[tokio::test]
async fn shutdown_kills_the_tasks_and_the_executor_exits_0() {
    let tb = process_testbed().await;
    let (mut sub, fid) = connected(&tb.url(), "shutdown", 60.0).await;
    let offer = launch_command(&tb, &mut sub, &fid, "s-0", "exec-s", "sleep 1000", None).await;
    expect_running(&tb, &mut sub, &fid, "s-0").await;
    let executor = live_executor(&tb, "exec-s");

    let shutdown = json!({"framework_id": {"value": fid}, "type": "SHUTDOWN", "shutdown": {
        "executor_id": {"value": "exec-s"}, "agent_id": offer["agent_id"]}});
    assert_eq!(call(&tb.url(), &sub.stream_id, shutdown).await.status, 202);
    let killed = expect_state(&mut sub, "s-0", "TASK_KILLED").await;
    assert_eq!(killed["source"], "SOURCE_EXECUTOR");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &killed)).await;
    let failure = sub.expect("FAILURE").await;
    assert_eq!(failure["failure"]["status"], 0);
    assert_eq!(exited_executor(&tb, "exec-s").await.wait_status, Some(0));
    assert!(session_members(executor.pid).is_empty());
    tb.shutdown().await;
}

#[tokio::test]
async fn the_executor_stays_small_while_running_one_task() {
    let tb = process_testbed().await;
    let (mut sub, fid) = connected(&tb.url(), "rss", 60.0).await;
    launch_command(&tb, &mut sub, &fid, "r-0", "exec-r", "sleep 1000", None).await;
    expect_running(&tb, &mut sub, &fid, "r-0").await;
    let executor = live_executor(&tb, "exec-r");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = rss_kb(executor.pid).expect("VmRSS readable");
    eprintln!("mesos-appliance-executor VmRSS with one task: {rss} kB");
    // ExecutorResources::default() asks Mesos for 32 MB.
    assert!(rss < 32 * 1024, "RSS {rss} kB");
    tb.shutdown().await;
    assert!(!alive(executor.pid), "testbed shutdown kills the executor");
}
