//! The agent side of process mode with the real executor: an agent restart
//! with and without checkpointing (capture r,
//! `docs/mesos-protocol.md#disconnections-and-agent-recovery`), the
//! executor registration timeout, and the executor API's codes and texts
//! (`src/slave/http.cpp` Http::executor), in JSON as well as protobuf.

use crate::support;

use std::time::Duration;

use mesos_appliance::testbed::TestbedConfig;
use serde_json::{Value, json};
use support::executor::*;
use support::mesos::*;

#[tokio::test]
async fn after_an_agent_restart_the_executor_resubscribes_and_resends_its_updates() {
    let tb = process_testbed().await;
    let mut sub = subscribe(&tb.url(), framework("restart", true)).await;
    let fid = sub.subscribed().await;
    // The task ends while the agent is down (when the test creates `go` in
    // its sandbox); its TASK_FINISHED waits in the executor and travels in
    // the next SUBSCRIBE.
    launch_command(
        &tb,
        &mut sub,
        &fid,
        "r-0",
        "exec-r",
        "while [ ! -e go ]; do sleep 0.05; done; echo done > done.txt",
        None,
    )
    .await;
    expect_running(&tb, &mut sub, &fid, "r-0").await;
    let executor = live_executor(&tb, "exec-r");
    let agent_id = tb.agents()[0].id.clone();
    let endpoint = tb.agent_endpoint(&agent_id).expect("process mode endpoint");
    assert!(tb.restart_agent(&agent_id, Duration::from_secs(3)));

    // While it is down the endpoint refuses connections; the scheduler sees
    // nothing (capture r).
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while tokio::net::TcpStream::connect(endpoint).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarting agent's endpoint still accepts connections"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::write(executor.sandbox.join("go"), b"").unwrap();
    sub.expect_none("UPDATE", Duration::from_millis(1500)).await;
    assert!(
        alive(executor.pid),
        "the executor keeps running without its agent"
    );

    let finished = expect_state(&mut sub, "r-0", "TASK_FINISHED").await;
    assert_eq!(finished["source"], "SOURCE_EXECUTOR");
    assert_eq!(finished["executor_id"]["value"], "exec-r");
    call(&tb.url(), &sub.stream_id, acknowledge(&fid, &finished)).await;

    let subscribes: Vec<Value> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "executor" && c.call_type == "SUBSCRIBE" && c.status == 200)
        .map(|c| c.call)
        .collect();
    assert!(
        subscribes.len() >= 2,
        "first subscription and the re-subscription: {subscribes:?}"
    );
    let resent = &subscribes.last().unwrap()["subscribe"]["unacknowledged_updates"];
    assert_eq!(resent[0]["status"]["state"], "TASK_FINISHED", "{resent}");
    assert_eq!(resent[0]["status"]["uuid"], finished["uuid"]);
    assert_eq!(
        live_executor_or_exited_pid(&tb, "exec-r"),
        executor.pid,
        "same process throughout"
    );
    let log = executor_log(&executor);
    assert!(
        log.contains("SUBSCRIBE failed"),
        "it retried while the agent was down: {log}"
    );
    // Done and acknowledged: it exits 0.
    assert_eq!(exited_executor(&tb, "exec-r").await.wait_status, Some(0));
    tb.shutdown().await;
}

fn live_executor_or_exited_pid(tb: &mesos_appliance::testbed::Testbed, id: &str) -> u32 {
    any_executor(tb, id).pid
}

#[tokio::test]
async fn without_checkpointing_an_agent_restart_loses_the_tasks_and_the_executor() {
    let tb = process_testbed().await;
    let mut sub = subscribe(&tb.url(), framework("no-checkpoint", false)).await;
    let fid = sub.subscribed().await;
    launch_command(&tb, &mut sub, &fid, "n-0", "exec-n", "sleep 1000", None).await;
    expect_running(&tb, &mut sub, &fid, "n-0").await;
    let executor = live_executor(&tb, "exec-n");
    let agent_id = tb.agents()[0].id.clone();
    assert!(tb.restart_agent(&agent_id, Duration::from_millis(500)));

    let lost = expect_state(&mut sub, "n-0", "TASK_LOST").await;
    assert_eq!(lost["source"], "SOURCE_MASTER");
    assert_eq!(lost["reason"], "REASON_AGENT_DISCONNECTED");
    assert_eq!(lost["message"], "Agent agent-0 disconnected");
    assert!(lost.get("uuid").is_none(), "master updates carry no uuid");
    exited_executor(&tb, "exec-n").await;
    assert!(!alive(executor.pid));
    eventually("the task process is gone", || {
        session_members(executor.pid).is_empty()
    })
    .await;
    tb.shutdown().await;
}

#[tokio::test]
async fn an_executor_that_never_subscribes_is_destroyed_after_the_registration_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("mesos-appliance-executor");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut config = TestbedConfig::for_tests_with_executor(1, &script);
    config.executor_registration_timeout = Duration::from_millis(1500);
    let tb = process_testbed_with(config).await;
    let (mut sub, fid) = connected(&tb.url(), "registration", 60.0).await;
    let offer = launch_command(&tb, &mut sub, &fid, "t-0", "exec-t", "sleep 1", None).await;
    let executor = live_executor(&tb, "exec-t");
    let url = format!(
        "http://{}/api/v1/executor",
        tb.agent_endpoint(&tb.agents()[0].id).unwrap()
    );

    // While it registers, the agent refuses its other calls.
    let update = json!({"type": "UPDATE", "framework_id": {"value": fid},
        "executor_id": {"value": "exec-t"}, "update": {"status": {
            "task_id": {"value": "t-0"}, "state": "TASK_RUNNING", "source": "SOURCE_EXECUTOR",
            "uuid": "AAAAAAAAQACAAAAAAAAAAA=="}}});
    let answer = post(
        &url,
        &[("Content-Type", "application/json")],
        update.to_string(),
    )
    .await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (403, "Executor is not subscribed")
    );

    // FAILURE first, then the task's update (as in capture executor/).
    let failure = sub.expect("FAILURE").await;
    assert_eq!(failure["failure"]["status"], 9, "destroyed with SIGKILL");
    assert_eq!(failure["failure"]["agent_id"], offer["agent_id"]);
    let failed = expect_state(&mut sub, "t-0", "TASK_FAILED").await;
    assert_eq!(failed["source"], "SOURCE_AGENT");
    assert_eq!(failed["reason"], "REASON_EXECUTOR_REGISTRATION_TIMEOUT");
    assert_eq!(
        failed["message"],
        "Executor did not register within 1.5secs"
    );
    assert!(!alive(executor.pid));
    tb.shutdown().await;
}

#[tokio::test]
async fn the_executor_endpoint_speaks_json_with_the_agents_codes() {
    // A script that never subscribes stands in for the executor process;
    // the test speaks the executor API itself, in JSON.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("mesos-appliance-executor");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let tb = process_testbed_with(TestbedConfig::for_tests_with_executor(1, &script)).await;
    let (mut sub, fid) = connected(&tb.url(), "json-executor", 60.0).await;
    launch_command(&tb, &mut sub, &fid, "j-0", "exec-j", "sleep 1", None).await;
    let endpoint = tb.agent_endpoint(&tb.agents()[0].id).unwrap();
    let url = format!("http://{endpoint}/api/v1/executor");
    let json_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    let body = |call: Value| call.to_string();
    let ids = json!({"framework_id": {"value": fid}, "executor_id": {"value": "exec-j"}});
    let with_ids = |mut call: Value| {
        call["framework_id"] = ids["framework_id"].clone();
        call["executor_id"] = ids["executor_id"].clone();
        call
    };

    let get = client().get(&url).send().await.unwrap();
    assert_eq!(get.status(), 405);
    let answer = post(&url, &[("Content-Type", "text/plain")], "x").await;
    assert_eq!(answer.status, 415);
    let answer = post(
        &url,
        &json_headers,
        body(with_ids(json!({"type": "SUBSCRIBE"}))),
    )
    .await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (
            400,
            "Failed to validate Executor::Call: Expecting 'subscribe' to be present"
        )
    );
    let mut other = with_ids(json!({"type": "SUBSCRIBE", "subscribe": {}}));
    other["framework_id"]["value"] = json!("no-such-framework");
    let answer = post(&url, &json_headers, body(other)).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (400, "Framework cannot be found")
    );
    let mut other = with_ids(json!({"type": "SUBSCRIBE", "subscribe": {}}));
    other["executor_id"]["value"] = json!("no-such-executor");
    let answer = post(&url, &json_headers, body(other)).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (400, "Executor cannot be found")
    );
    let heartbeat = post(
        &url,
        &json_headers,
        body(with_ids(json!({"type": "HEARTBEAT"}))),
    )
    .await;
    assert_eq!(heartbeat.status, 202);

    // SUBSCRIBE in JSON: SUBSCRIBED, then the LAUNCH queued while registering.
    let mut request = client().post(&url).body(body(with_ids(
        json!({"type": "SUBSCRIBE", "subscribe": {}}),
    )));
    for (k, v) in json_headers {
        request = request.header(k, v);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let mut events = executor_events(response);
    let subscribed = events.recv().await.unwrap();
    assert_eq!(subscribed["type"], "SUBSCRIBED");
    assert_eq!(
        subscribed["subscribed"]["executor_info"]["executor_id"]["value"],
        "exec-j"
    );
    assert_eq!(
        subscribed["subscribed"]["framework_info"]["id"]["value"],
        fid.as_str()
    );
    assert_eq!(
        subscribed["subscribed"]["agent_info"]["port"],
        endpoint.port()
    );
    let launch = events.recv().await.unwrap();
    assert_eq!(launch["type"], "LAUNCH");
    assert_eq!(launch["launch"]["task"]["task_id"]["value"], "j-0");

    let update = |state: &str, source: &str, uuid: &str| {
        with_ids(json!({"type": "UPDATE", "update": {"status": {
            "task_id": {"value": "j-0"}, "state": state, "source": source, "uuid": uuid}}}))
    };
    let answer = post(
        &url,
        &json_headers,
        body(update(
            "TASK_RUNNING",
            "SOURCE_MASTER",
            "AAAAAAAAQACAAAAAAAAAAA==",
        )),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.body,
        format!(
            "Failed to validate Executor::Call: Received Call from executor exec-j of framework {fid} with invalid source, expecting 'SOURCE_EXECUTOR'"
        )
    );
    let answer = post(
        &url,
        &json_headers,
        body(update(
            "TASK_STAGING",
            "SOURCE_EXECUTOR",
            "AAAAAAAAQACAAAAAAAAAAA==",
        )),
    )
    .await;
    assert!(
        answer.body.ends_with("which is not allowed"),
        "{}",
        answer.body
    );
    let answer = post(
        &url,
        &json_headers,
        body(update(
            "TASK_RUNNING",
            "SOURCE_EXECUTOR",
            "AAAAAAAAQACAAAAAAAAAAQ==",
        )),
    )
    .await;
    assert_eq!(answer.status, 202);
    let ack = events.recv().await.unwrap();
    assert_eq!(ack["type"], "ACKNOWLEDGED");
    assert_eq!(ack["acknowledged"]["uuid"], "AAAAAAAAQACAAAAAAAAAAQ==");
    let running = expect_state(&mut sub, "j-0", "TASK_RUNNING").await;
    assert_eq!(
        running["agent_id"]["value"],
        tb.agents()[0].id.as_str(),
        "the agent adds its ID"
    );
    assert!(running["container_status"]["executor_pid"].is_number());

    // The executor's MESSAGE reaches the scheduler.
    let message = with_ids(json!({"type": "MESSAGE", "message": {"data": "aGk="}}));
    assert_eq!(post(&url, &json_headers, body(message)).await.status, 202);
    let event = sub.expect("MESSAGE").await;
    assert_eq!(event["message"]["executor_id"]["value"], "exec-j");
    assert_eq!(event["message"]["data"], "aGk=");
    tb.shutdown().await;
}

/// Decodes a JSON executor event stream into a channel.
fn executor_events(response: reqwest::Response) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    use futures::StreamExt;
    use tokio_util::codec::Decoder;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut codec = mesos_appliance::mesos::recordio::RecordIoCodec::default();
        let mut buf = bytes::BytesMut::new();
        let mut chunks = response.bytes_stream();
        while let Some(Ok(chunk)) = chunks.next().await {
            buf.extend_from_slice(&chunk);
            while let Ok(Some(record)) = codec.decode(&mut buf) {
                if let Ok(value) = serde_json::from_slice::<Value>(&record) {
                    let _ = tx.send(value);
                }
            }
        }
    });
    rx
}
