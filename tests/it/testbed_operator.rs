//! The testbed's operator API and legacy endpoints (`docs/mesos-protocol.md#operator-api`, captures
//! h, i, k): GET_FRAMEWORKS in JSON and protobuf, TEARDOWN, `/master/teardown`,
//! `/master/state`, `/master/frameworks`, `/master/redirect`.

use crate::support;
use crate::support::testbed;

use mesos_appliance::mesos::v1::master::{Call, Response, call, response};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use prost::Message;
use serde_json::{Value, json};
use support::mesos::*;

async fn operator(tb: &Testbed, body: Value) -> Answer {
    support::mesos::operator(&tb.url(), body).await
}

#[tokio::test]
async fn get_frameworks_lists_active_inactive_and_completed() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut live, live_id) = connected(&tb.url(), "live", 60.0).await;
    live.expect("OFFERS").await;
    let (gone, gone_id) = connected(&tb.url(), "gone", 60.0).await;
    call(
        &tb.url(),
        &gone.stream_id,
        json!({"framework_id": {"value": gone_id}, "type": "TEARDOWN"}),
    )
    .await;
    let (idle, idle_id) = connected(&tb.url(), "idle", 60.0).await;
    drop(idle);

    let answer = operator(&tb, json!({"type": "GET_FRAMEWORKS"})).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["type"], "GET_FRAMEWORKS");
    let frameworks = body["get_frameworks"]["frameworks"].as_array().unwrap();
    let find = |id: &str| {
        frameworks
            .iter()
            .find(|f| f["framework_info"]["id"]["value"] == id)
            .cloned()
    };
    let live = find(&live_id).expect("active framework listed");
    assert_eq!(
        (live["active"].as_bool(), live["connected"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(live["registered_time"]["nanoseconds"].as_i64().unwrap() > 0);
    assert!(live["offers"].as_array().is_some_and(|o| !o.is_empty()));
    // The dropped framework may take a moment to be seen as disconnected.
    let completed = &body["get_frameworks"]["completed_frameworks"];
    assert_eq!(
        completed[0]["framework_info"]["id"]["value"],
        gone_id.as_str()
    );
    assert!(
        completed[0]["unregistered_time"]["nanoseconds"]
            .as_i64()
            .unwrap()
            > 0
    );
    assert!(
        find(&idle_id).is_some(),
        "inactive frameworks stay listed until their failover timeout"
    );

    // The same in protobuf.
    let request = Call {
        r#type: Some(call::Type::GetFrameworks as i32),
        ..Default::default()
    };
    let response = client()
        .post(format!("{}/api/v1", tb.url()))
        .header("Content-Type", "application/x-protobuf")
        .header("Accept", "application/x-protobuf")
        .body(request.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-protobuf");
    let decoded = Response::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(decoded.r#type(), response::Type::GetFrameworks);
    assert_eq!(
        decoded.get_frameworks.unwrap().completed_frameworks.len(),
        1
    );
}

#[tokio::test]
async fn operator_teardown_known_unknown_and_repeated() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "op", 60.0).await;
    let teardown =
        |id: &str| json!({"type": "TEARDOWN", "teardown": {"framework_id": {"value": id}}});
    let answer = operator(&tb, teardown(&fid)).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""));
    assert_eq!(answer.header("content-length"), Some("0"));
    assert_eq!(sub.expect_end().await, End::Clean);
    assert!(
        sub.seen
            .iter()
            .all(|e| e["type"] != "ERROR" && e["type"] != "UPDATE")
    );
    for id in [fid.as_str(), "no-such-framework"] {
        let again = operator(&tb, teardown(id)).await;
        assert_eq!(
            (again.status, again.body.as_str()),
            (400, "No framework found with specified ID")
        );
    }
    let missing = operator(&tb, json!({"type": "TEARDOWN"})).await;
    assert_eq!(missing.status, 400);
    let log: Vec<(String, u16)> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "operator")
        .map(|c| (c.call_type, c.status))
        .collect();
    assert_eq!(log[0], ("TEARDOWN".to_string(), 200));
    assert_eq!(log[1], ("TEARDOWN".to_string(), 400));
}

#[tokio::test]
async fn legacy_teardown_endpoint() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (_sub, fid) = connected(&tb.url(), "legacy", 60.0).await;
    let url = format!("{}/master/teardown", tb.url());
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let ok = post(&url, &form, format!("frameworkId={fid}")).await;
    assert_eq!((ok.status, ok.body.as_str()), (200, ""));
    let again = post(&url, &form, format!("frameworkId={fid}")).await;
    assert_eq!(
        (again.status, again.body.as_str()),
        (400, "No framework found with specified ID")
    );
    let missing = post(&url, &form, "").await;
    assert_eq!(
        (missing.status, missing.body.as_str()),
        (
            400,
            "Missing 'frameworkId' query parameter in the request body"
        )
    );
    let get = client().get(&url).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_eq!(
        get.text().await.unwrap(),
        "405 Method Not Allowed. Expecting one of { 'POST' }, but received 'GET'."
    );
}

#[tokio::test]
async fn master_state_and_frameworks_use_plain_string_ids() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (mut sub, fid) = connected(&tb.url(), "state", 60.0).await;
    let offers = sub.expect("OFFERS").await;
    call(
        &tb.url(),
        &sub.stream_id,
        launch(&fid, &offers["offers"]["offers"][0], &[("t5", 0.1, 32.0)]),
    )
    .await;
    sub.expect_update("t5").await;
    let state = master_state(&tb.url()).await;
    for key in [
        "version",
        "id",
        "pid",
        "hostname",
        "leader",
        "leader_info",
        "slaves",
        "frameworks",
        "completed_frameworks",
        "orphan_tasks",
        "unregistered_frameworks",
    ] {
        assert!(state.get(key).is_some(), "missing {key}");
    }
    assert_eq!(state["id"], tb.master_id());
    let framework = &state["frameworks"][0];
    assert_eq!(framework["id"], fid.as_str(), "plain-string framework ID");
    assert_eq!(framework["name"], "state");
    assert_eq!(framework["role"], "*");
    assert_eq!(framework["used_resources"]["cpus"], 0.1);
    let task = &framework["tasks"][0];
    assert_eq!(task["id"], "t5");
    assert_eq!(task["slave_id"], state["slaves"][0]["id"]);
    assert_eq!(task["executor_id"], "");
    assert!(task["statuses"][0]["timestamp"].as_f64().unwrap() > 0.0);
    assert_eq!(state["slaves"][0]["resources"]["ports"], "[31000-32000]");

    let frameworks: Value = get_json(&format!(
        "{}/master/frameworks?framework_id={fid}",
        tb.url()
    ))
    .await;
    assert_eq!(frameworks["frameworks"][0]["id"], fid.as_str());
    assert_eq!(frameworks["unregistered_frameworks"], json!([]));
}

#[tokio::test]
async fn redirect_points_at_the_leader_even_on_the_leader() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    for path in ["/master/redirect", "/redirect"] {
        let response = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(format!("{}{path}", tb.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 307);
        assert_eq!(response.headers()["location"], format!("//{}", tb.addr()));
    }
}
