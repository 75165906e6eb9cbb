//! The testbed's scheduler endpoint at the HTTP level: status codes, headers
//! and body texts exactly as a real Mesos 1.12 master answered them
//! (`docs/mesos-protocol.md#scheduler-api-transport`, captures a, l, n).

use crate::support;
use crate::support::testbed;

use mesos_appliance::mesos::json;
use mesos_appliance::mesos::v1;
use mesos_appliance::mesos::v1::scheduler::{Call, call};
use mesos_appliance::testbed::TestbedConfig;
use prost::Message;
use serde_json::json;
use support::mesos::*;

#[tokio::test]
async fn subscribe_streams_subscribed_heartbeat_and_offers_in_json() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut sub = subscribe(&tb.url(), new_framework("t", 60.0)).await;
    assert_eq!(sub.status, 200);
    assert_eq!(sub.header_str("content-type"), Some("application/json"));
    assert!(sub.headers.get("content-length").is_none());
    assert_eq!(sub.headers.get("transfer-encoding").unwrap(), "chunked");
    assert!(
        uuid::Uuid::parse_str(&sub.stream_id).is_ok(),
        "stream id {:?}",
        sub.stream_id
    );

    let subscribed = sub.next().await.unwrap();
    assert_eq!(subscribed["type"], "SUBSCRIBED");
    let fid = subscribed["subscribed"]["framework_id"]["value"]
        .as_str()
        .unwrap();
    assert_eq!(fid, format!("{}-0000", tb.master_id()));
    assert_eq!(subscribed["subscribed"]["heartbeat_interval_seconds"], 1.0);
    let info = &subscribed["subscribed"]["master_info"];
    assert_eq!(info["version"], "1.12.0");
    assert_eq!(info["address"]["port"], tb.addr().port());
    assert_eq!(
        info["ip"], 16777343,
        "127.0.0.1 in network order, read little-endian"
    );
    assert_eq!(sub.next().await.unwrap()["type"], "HEARTBEAT");
    let offers = sub.expect("OFFERS").await;
    let offer = &offers["offers"]["offers"][0];
    assert!(
        offer["id"]["value"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}-O", tb.master_id()))
    );
    assert_eq!(offer["framework_id"]["value"], fid);
    let names: Vec<&str> = offer["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ports", "cpus", "mem", "disk"]);
    assert_eq!(offer["resources"][1]["role"], "*");
    assert_eq!(offer["url"]["path"], "/slave(1)");
    // Heartbeats keep coming at the configured interval.
    sub.expect("HEARTBEAT").await;
}

#[tokio::test]
async fn subscribe_in_protobuf_streams_protobuf_records() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let call = Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: v1::FrameworkInfo {
                user: "root".into(),
                name: "pb".into(),
                failover_timeout: Some(60.0),
                ..Default::default()
            },
            suppressed_roles: vec![],
        }),
        ..Default::default()
    };
    let mut sub = subscribe_raw(
        &tb.url(),
        &[
            ("Content-Type", "application/x-protobuf"),
            ("Accept", "application/x-protobuf"),
        ],
        call.encode_to_vec(),
    )
    .await;
    assert_eq!(sub.status, 200);
    assert_eq!(
        sub.header_str("content-type"),
        Some("application/x-protobuf")
    );
    sub.subscribed().await;
    sub.expect("HEARTBEAT").await;
}

#[tokio::test]
async fn protobuf_body_without_accept_gets_json() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let call: Call = json::from_value(new_framework("x", 1.0)).unwrap();
    let sub = subscribe_raw(
        &tb.url(),
        &[("Content-Type", "application/x-protobuf")],
        call.encode_to_vec(),
    )
    .await;
    assert_eq!(sub.status, 200);
    assert_eq!(sub.header_str("content-type"), Some("application/json"));
}

#[tokio::test]
async fn request_validation_texts_match_the_real_master() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let url = format!("{}/api/v1/scheduler", tb.url());
    let (mut sub, fid) = connected(&tb.url(), "v", 60.0).await;
    let reconcile =
        json!({"framework_id": {"value": fid}, "type": "RECONCILE", "reconcile": {"tasks": []}});

    // GET → 405 with Allow.
    let get = client().get(&url).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_eq!(get.headers()["allow"], "POST");
    assert_eq!(get.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        get.text().await.unwrap(),
        "405 Method Not Allowed. Expecting one of { 'POST' }, but received 'GET'."
    );

    // (headers, body, expected status, expected body)
    type Case<'a> = (Vec<(&'a str, &'a str)>, String, u16, String);
    let cases: Vec<Case> = vec![
        (vec![("Mesos-Stream-Id", &sub.stream_id)], reconcile.to_string(), 400,
         "Expecting 'Content-Type' to be present".into()),
        (vec![("Content-Type", "text/plain"), ("Mesos-Stream-Id", &sub.stream_id)], reconcile.to_string(), 415,
         "Expecting 'Content-Type' of application/json or application/x-protobuf".into()),
        (vec![("Content-Type", "application/json; charset=utf-8")], reconcile.to_string(), 415,
         "Expecting 'Content-Type' of application/json or application/x-protobuf".into()),
        (vec![("Content-Type", "application/json")], reconcile.to_string(), 400,
         "All non-subscribe calls should include the 'Mesos-Stream-Id' header".into()),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", "not-a-uuid")], reconcile.to_string(), 400,
         format!("The stream ID 'not-a-uuid' included in this request didn't match the stream ID currently associated with framework ID {fid}")),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", &sub.stream_id)],
         json!({"framework_id": {"value": "no-such-framework"}, "type": "RECONCILE", "reconcile": {"tasks": []}}).to_string(), 400,
         "Framework cannot be found".into()),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", &sub.stream_id)],
         json!({"type": "RECONCILE", "reconcile": {"tasks": []}}).to_string(), 400,
         "Failed to validate scheduler::Call: Expecting 'framework_id' to be present".into()),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", &sub.stream_id)], "{\"type\":".into(), 400,
         "Failed to parse body into JSON: syntax error at line 1 near: ".into()),
        (vec![("Content-Type", "application/x-protobuf"), ("Mesos-Stream-Id", &sub.stream_id)], "\u{1}garbage".into(), 400,
         "Failed to parse body into Call protobuf".into()),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", &sub.stream_id)],
         json!({"framework_id": {"value": fid}, "type": "ACCEPT"}).to_string(), 400,
         "Failed to validate scheduler::Call: Expecting 'accept' to be present".into()),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", &sub.stream_id)],
         json!({"framework_id": {"value": fid}, "type": "ACKNOWLEDGE", "acknowledge": {
             "agent_id": {"value": "a"}, "task_id": {"value": "t"}, "uuid": "AAAA"}}).to_string(), 400,
         "Failed to validate scheduler::Call: Not a valid UUID".into()),
        (vec![("Content-Type", "application/json")],
         json!({"type": "SUBSCRIBE", "framework_id": {"value": "aaa"}, "subscribe": {"framework_info": {"id": {"value": "bbb"}, "user": "root", "name": "x"}}}).to_string(), 400,
         "Failed to validate scheduler::Call: 'framework_id' differs from 'subscribe.framework_info.id'".into()),
        (vec![("Content-Type", "application/json")],
         json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"id": {"value": "bbb"}, "user": "root", "name": "x"}}}).to_string(), 400,
         "Failed to validate scheduler::Call: 'framework_id' differs from 'subscribe.framework_info.id'".into()),
        (vec![("Content-Type", "application/json")],
         json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "x"}}}).to_string(), 400,
         "Failed to convert JSON into Call protobuf: Missing required fields: subscribe.framework_info.user".into()),
        (vec![("Content-Type", "application/json"), ("Mesos-Stream-Id", "00000000-1111-2222-3333-444444444444")],
         new_framework("x", 1.0).to_string(), 400,
         "Subscribe calls should not include the 'Mesos-Stream-Id' header".into()),
        (vec![("Content-Type", "application/json"), ("Accept", "text/html")], new_framework("x", 1.0).to_string(), 406,
         "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'".into()),
    ];
    for (headers, body, status, text) in cases {
        let answer = post(&url, &headers, body.clone()).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (status, text.as_str()),
            "request {headers:?} {body}"
        );
        assert_eq!(
            answer.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
    }

    // A valid call: 202, empty body, Content-Length 0, no Content-Type.
    let ok = call(&tb.url(), &sub.stream_id, reconcile).await;
    assert_eq!(ok.status, 202);
    assert_eq!(ok.body, "");
    assert_eq!(ok.header("content-length"), Some("0"));
    assert_eq!(ok.header("content-type"), None);
    // The stream is untouched by all of that.
    sub.expect("HEARTBEAT").await;
}

#[tokio::test]
async fn subscribe_with_a_never_seen_id_creates_that_framework() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut sub = subscribe(
        &tb.url(),
        existing_framework("n", "never-seen-fw-id-2", 60.0),
    )
    .await;
    assert_eq!(sub.status, 200);
    assert_eq!(sub.subscribed().await, "never-seen-fw-id-2");
}

#[tokio::test]
async fn every_call_is_in_the_call_log() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (sub, fid) = connected(&tb.url(), "log", 60.0).await;
    call(
        &tb.url(),
        &sub.stream_id,
        json!({"framework_id": {"value": fid}, "type": "REVIVE"}),
    )
    .await;
    let calls = tb.calls();
    let kinds: Vec<(&str, u16)> = calls
        .iter()
        .map(|c| (c.call_type.as_str(), c.status))
        .collect();
    assert_eq!(kinds, [("SUBSCRIBE", 200), ("REVIVE", 202)]);
    assert_eq!(calls[1].framework_id.as_deref(), Some(fid.as_str()));
    assert_eq!(calls[1].stream_id.as_deref(), Some(sub.stream_id.as_str()));
    // Also over HTTP.
    let log: serde_json::Value = get_json(&format!("{}/testbed/calls", tb.url())).await;
    assert_eq!(log["calls"][1]["call_type"], "REVIVE");
}

#[tokio::test]
async fn a_huge_malformed_body_is_not_echoed_back() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (_sub, _fid) = connected(&tb.url(), "big", 60.0).await;
    // 8 MB on one line after the error position; the real master would
    // echo all of it after "near: ".
    let body = format!("{{\"type\": {}", "x".repeat(8 * 1024 * 1024));
    let answer = post(
        &format!("{}/api/v1/scheduler", tb.url()),
        &[("Content-Type", "application/json")],
        body,
    )
    .await;
    assert_eq!(answer.status, 400);
    let prefix = "Failed to parse body into JSON: syntax error at line 1 near: ";
    assert!(answer.body.starts_with(prefix), "{}", answer.body);
    assert!(
        answer.body.len() <= prefix.len() + 100,
        "{} bytes echoed",
        answer.body.len()
    );
    assert!(answer.body[prefix.len()..].chars().all(|c| c == 'x'));
}
