//! Health checks and containers on the testbed: simulated executors check
//! `TaskInfo.health_check` with results set by `/testbed/faults/health` and
//! report and kill as Mesos' command executor does; agents launch only the
//! containers their containerizers take and fail the others as a real
//! agent does; in process mode our executor runs real checks and notes in
//! its sandbox that it runs on the host.

use crate::support;

use std::time::Duration;

use mesos_appliance::testbed::{
    AgentSpec, DEFAULT_AGENT_RESOURCES, SimulatedHealth, Testbed, TestbedConfig,
};
use serde_json::{Value, json};
use support::mesos::*;

/// Launches one task (command executor) built from `extra` merged into a
/// `sleep` TaskInfo; returns the stream and the framework ID.
async fn launch_with(
    tb: &Testbed,
    framework: Value,
    task: &str,
    extra: Value,
) -> (Subscription, String) {
    let mut sub = subscribe(&tb.url(), framework).await;
    let fid = sub.subscribed().await;
    let offer = sub.expect("OFFERS").await["offers"]["offers"][0].clone();
    let mut accept = launch(&fid, &offer, &[(task, 0.1, 32.0)]);
    let info = &mut accept["accept"]["operations"][0]["launch"]["task_infos"][0];
    for (key, value) in extra.as_object().unwrap() {
        info[key] = value.clone();
    }
    assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
    (sub, fid)
}

/// The next update of `task`, acknowledged if it carries a uuid.
async fn next_update(tb: &Testbed, sub: &mut Subscription, fid: &str, task: &str) -> Value {
    let status = sub.expect_update(task).await;
    if status["uuid"].is_string() {
        call(&tb.url(), &sub.stream_id, acknowledge(fid, &status)).await;
    }
    status
}

fn tcp_check(failures: u32) -> Value {
    json!({"health_check": {"type": "TCP", "tcp": {"port": 1}, "delay_seconds": 0.0,
        "interval_seconds": 0.05, "timeout_seconds": 1.0, "grace_period_seconds": 0.0,
        "consecutive_failures": failures}})
}

use support::testbed;

#[tokio::test]
async fn an_unhealthy_task_is_reported_at_each_failure_then_killed() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let answer = post(
        &format!("{}/testbed/faults/health", tb.url()),
        &[("Content-Type", "application/json")],
        json!({"task_id_prefix": "sick", "health": "unhealthy"}).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let mut framework = new_framework("h", 60.0);
    framework["subscribe"]["framework_info"]["capabilities"] =
        json!([{"type": "TASK_KILLING_STATE"}]);
    let (mut sub, fid) = launch_with(&tb, framework, "sick-1", tcp_check(3)).await;
    let mut seen = Vec::new();
    loop {
        let status = next_update(&tb, &mut sub, &fid, "sick-1").await;
        seen.push((
            status["state"].as_str().unwrap().to_string(),
            status["healthy"].as_bool(),
            status["reason"].as_str().map(str::to_string),
        ));
        if status["state"] == "TASK_KILLED" {
            assert_eq!(
                status["message"],
                "Command terminated with signal Terminated"
            );
            assert_eq!(status["source"], "SOURCE_EXECUTOR");
            break;
        }
    }
    let updated = Some("REASON_TASK_HEALTH_CHECK_STATUS_UPDATED".to_string());
    let running = "TASK_RUNNING".to_string();
    assert_eq!(
        seen,
        [
            ("TASK_STARTING".to_string(), None, None),
            (running.clone(), None, None),
            (running.clone(), Some(false), updated.clone()),
            (running.clone(), Some(false), updated.clone()),
            (running, Some(false), updated),
            ("TASK_KILLING".to_string(), None, None),
            ("TASK_KILLED".to_string(), Some(false), None),
        ]
    );
}

#[tokio::test]
async fn a_flapping_task_reports_each_change_and_a_healthy_one_only_its_first_success() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut extra = tcp_check(2);
    extra["labels"] = json!({"labels": [{"key": "release", "value": "canary"}]});
    tb.set_health("", Some(("release", "canary")), SimulatedHealth::Flapping);
    tb.set_health("other", None, SimulatedHealth::Unhealthy);
    let (mut sub, fid) = launch_with(&tb, new_framework("f", 60.0), "flappy", extra).await;
    next_update(&tb, &mut sub, &fid, "flappy").await;
    next_update(&tb, &mut sub, &fid, "flappy").await;
    let mut healthy = Vec::new();
    for _ in 0..5 {
        let status = next_update(&tb, &mut sub, &fid, "flappy").await;
        assert_eq!(status["state"], "TASK_RUNNING");
        healthy.push(status["healthy"].as_bool().unwrap());
    }
    assert_eq!(
        healthy,
        [true, false, true, false, true],
        "never 2 failures in a row"
    );

    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = launch_with(&tb, new_framework("g", 60.0), "fine", tcp_check(1)).await;
    next_update(&tb, &mut sub, &fid, "fine").await;
    next_update(&tb, &mut sub, &fid, "fine").await;
    let status = next_update(&tb, &mut sub, &fid, "fine").await;
    assert_eq!(status["healthy"], true, "healthy without a fault");
    sub.expect_none("UPDATE", Duration::from_millis(500)).await;
    // A fault set later reaches the task at its next check.
    tb.set_health("fine", None, SimulatedHealth::Unhealthy);
    let status = next_update(&tb, &mut sub, &fid, "fine").await;
    assert_eq!(status["healthy"], false);
    let status = next_update(&tb, &mut sub, &fid, "fine").await;
    assert_eq!(
        (status["state"].as_str(), status["healthy"].as_bool()),
        (Some("TASK_KILLED"), Some(false))
    );
}

#[tokio::test]
async fn the_master_refuses_an_invalid_health_check_or_container() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, _) = launch_with(
        &tb,
        new_framework("v", 60.0),
        "bad-check",
        json!({"health_check": {"type": "HTTP", "http": {"port": 80, "path": "health"}}}),
    )
    .await;
    let status = sub.expect_update("bad-check").await;
    assert_eq!(status["state"], "TASK_ERROR");
    assert_eq!(status["reason"], "REASON_TASK_INVALID");
    assert_eq!(
        status["message"],
        "Task uses invalid health check: The path 'health' of HTTP health check must start with '/'"
    );
    let (mut sub, _) = launch_with(
        &tb,
        new_framework("w", 60.0),
        "bad-container",
        json!({"container": {"type": "DOCKER"}}),
    )
    .await;
    let status = sub.expect_update("bad-container").await;
    assert_eq!(status["state"], "TASK_ERROR");
    assert_eq!(
        status["message"],
        "Task's `ContainerInfo` is invalid: DockerInfo 'docker' is not set for DOCKER typed ContainerInfo"
    );
}

fn image(name: &str) -> Value {
    json!({"container": {"type": "MESOS", "mesos": {"image": {"type": "DOCKER",
        "docker": {"name": name}}}}})
}

fn docker(name: &str) -> Value {
    json!({"container": {"type": "DOCKER", "docker": {"image": name}}})
}

#[tokio::test]
async fn agents_launch_only_what_their_containerizers_take() {
    // One agent as Mesos starts by default: --containerizers=mesos, no
    // image providers.
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    for (task, container, reason, message) in [
        (
            "img",
            image("alpine:3.20"),
            "REASON_CONTAINER_LAUNCH_FAILED",
            "Failed to launch container: Unsupported container image type: DOCKER",
        ),
        (
            "dock",
            docker("alpine:3.20"),
            "REASON_EXECUTOR_TERMINATED",
            "Abnormal executor termination: unknown container",
        ),
    ] {
        let (mut sub, fid) = launch_with(&tb, new_framework(task, 60.0), task, container).await;
        let status = next_update(&tb, &mut sub, &fid, task).await;
        assert_eq!(status["state"], "TASK_FAILED", "{task}: no STARTING first");
        assert_eq!(status["source"], "SOURCE_AGENT");
        assert_eq!(status["reason"], reason);
        assert_eq!(status["message"], message);
    }
    assert!(tb.agents()[0].executors.is_empty(), "nothing left running");

    let agents = vec![
        AgentSpec::new("both", DEFAULT_AGENT_RESOURCES)
            .with_containerizers("mesos,docker", "docker"),
    ];
    let tb = testbed(TestbedConfig {
        agents,
        ..TestbedConfig::for_tests(0)
    })
    .await;
    for (task, container) in [("img", image("alpine")), ("dock", docker("alpine"))] {
        let (mut sub, fid) = launch_with(&tb, new_framework(task, 60.0), task, container).await;
        assert_eq!(
            next_update(&tb, &mut sub, &fid, task).await["state"],
            "TASK_STARTING"
        );
        assert_eq!(
            next_update(&tb, &mut sub, &fid, task).await["state"],
            "TASK_RUNNING"
        );
    }
    let view = &tb.agents()[0];
    assert_eq!(view.containerizers.len(), 2);
}

mod process_mode {
    use super::*;
    use support::executor::{EXECUTOR, framework, task_info};

    async fn launch_ours(
        tb: &Testbed,
        task: &str,
        container: Option<Value>,
    ) -> (Subscription, String) {
        let mut sub = subscribe(&tb.url(), framework("pm", false)).await;
        let fid = sub.subscribed().await;
        let offer = sub.expect("OFFERS").await["offers"]["offers"][0].clone();
        let mut info = task_info(
            &fid,
            &offer["agent_id"],
            task,
            &format!("ex-{task}"),
            "sleep 100",
            None,
        );
        if let Some(container) = container {
            info["executor"]["container"] = container;
        }
        let accept = json!({"framework_id": {"value": fid}, "type": "ACCEPT", "accept": {
            "offer_ids": [offer["id"]],
            "operations": [{"type": "LAUNCH", "launch": {"task_infos": [info]}}]}});
        assert_eq!(call(&tb.url(), &sub.stream_id, accept).await.status, 202);
        (sub, fid)
    }

    #[tokio::test]
    async fn our_executor_runs_on_the_host_and_says_so_in_its_sandbox() {
        let mut config = TestbedConfig::for_tests_with_executor(1, EXECUTOR);
        config.agents[0] =
            AgentSpec::new("img", DEFAULT_AGENT_RESOURCES).with_containerizers("mesos", "docker");
        let tb = testbed(config).await;
        let container = image("python:3.12-alpine")["container"].clone();
        let (mut sub, fid) = launch_ours(&tb, "boxed", Some(container)).await;
        assert_eq!(
            next_update(&tb, &mut sub, &fid, "boxed").await["state"],
            "TASK_STARTING"
        );
        assert_eq!(
            next_update(&tb, &mut sub, &fid, "boxed").await["state"],
            "TASK_RUNNING"
        );
        let sandbox = tb.executors()[0].sandbox.clone();
        let stderr = std::fs::read_to_string(sandbox.join("stderr")).unwrap();
        assert!(
            stderr.starts_with("mesos-testbed: process mode provisions no container")
                && stderr.contains("image 'python:3.12-alpine'"),
            "{stderr}"
        );
    }

    #[tokio::test]
    async fn an_image_on_an_agent_without_image_support_starts_no_executor() {
        let tb = testbed(TestbedConfig::for_tests_with_executor(1, EXECUTOR)).await;
        let container = image("python:3.12-alpine")["container"].clone();
        let (mut sub, fid) = launch_ours(&tb, "unboxed", Some(container)).await;
        let mut failure = None;
        let mut status = None;
        while failure.is_none() || status.is_none() {
            let event = sub.next().await.expect("event");
            match event["type"].as_str() {
                Some("FAILURE") => failure = Some(event["failure"].clone()),
                Some("UPDATE") => status = Some(event["update"]["status"].clone()),
                _ => {}
            }
        }
        let status = status.unwrap();
        assert_eq!(status["state"], "TASK_FAILED");
        assert_eq!(status["reason"], "REASON_CONTAINER_LAUNCH_FAILED");
        assert_eq!(failure.unwrap()["status"], -1);
        assert!(tb.executors().is_empty(), "no executor process was started");
        let _ = fid;
    }
}

#[tokio::test]
async fn master_state_shows_a_task_s_labels_container_and_health_check() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut extra = tcp_check(3);
    extra["labels"] = json!({"labels": [{"key": "team", "value": "web"}]});
    extra["container"] = json!({"type": "MESOS"});
    let (mut sub, fid) = launch_with(&tb, new_framework("s", 60.0), "shown", extra).await;
    next_update(&tb, &mut sub, &fid, "shown").await;
    let state = master_state(&tb.url()).await;
    let task = &state["frameworks"][0]["tasks"][0];
    assert_eq!(task["id"], "shown");
    // src/common/http.cpp: labels as an array of {key, value}; container
    // and health_check as their protobuf JSON.
    assert_eq!(task["labels"], json!([{"key": "team", "value": "web"}]));
    assert_eq!(task["container"]["type"], "MESOS");
    assert_eq!(task["health_check"]["type"], "TCP");
    assert_eq!(task["health_check"]["tcp"]["port"], 1);
    assert_eq!(task["health_check"]["consecutive_failures"], 3);
    // A task launched without them has none of the three.
    let (mut plain, pfid) = launch_with(&tb, new_framework("p", 60.0), "bare", json!({})).await;
    next_update(&tb, &mut plain, &pfid, "bare").await;
    let state = master_state(&tb.url()).await;
    let frameworks = state["frameworks"].as_array().unwrap();
    let bare = frameworks
        .iter()
        .flat_map(|f| f["tasks"].as_array().unwrap())
        .find(|t| t["id"] == "bare")
        .expect("the bare task");
    for key in ["labels", "container", "health_check"] {
        assert!(bare.get(key).is_none(), "{key}: {bare}");
    }
}
