//! The `/testbed` fault API answers what happened, in JSON: 404 for an
//! unknown agent, framework or path (naming it), 409 for a fault that
//! cannot apply (a gone agent, a disconnected framework), 400 for a body
//! that is not what the endpoint takes, 415 for one that is not JSON
//! (`docs/testbed.md#fault-api`).

use crate::support;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::mesos::*;

const JSON: &[(&str, &str)] = &[("Content-Type", "application/json")];

async fn testbed() -> Testbed {
    support::testbed(TestbedConfig::for_tests(1)).await
}

/// POSTs `body` (raw) to `/testbed/{path}` with `headers`.
async fn fault(tb: &Testbed, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    post(
        &format!("{}/testbed/{path}", tb.url()),
        headers,
        body.to_string(),
    )
    .await
}

/// POSTs a task-prefix rule `{"task_id_prefix": prefix}` to `faults/{kind}`.
async fn prefix_rule(tb: &Testbed, kind: &str, prefix: &str) -> Answer {
    let body = serde_json::json!({ "task_id_prefix": prefix }).to_string();
    fault(tb, &format!("faults/{kind}"), JSON, &body).await
}

/// The status and the `error` of a JSON error answer; panics when the
/// answer is not JSON with a non-empty `error`.
fn refusal(answer: &Answer) -> (u16, String) {
    assert_eq!(
        answer.header("content-type"),
        Some("application/json"),
        "{} {}",
        answer.status,
        answer.body
    );
    let body: Value = serde_json::from_str(&answer.body).expect("a JSON body");
    let error = body["error"].as_str().unwrap_or_default().to_string();
    assert!(!error.is_empty(), "no error in {body}");
    (answer.status, error)
}

#[tokio::test]
async fn heartbeats_of_an_unknown_framework_are_a_404() {
    let tb = testbed().await;
    let (_sub, fid) = connected(&tb.url(), "hb", 60.0).await;

    let unknown = fault(&tb, "heartbeats/stop", JSON, r#"{"framework_id": "nope"}"#).await;
    let (status, error) = refusal(&unknown);
    assert_eq!(status, 404);
    assert!(error.contains("'nope'"), "{error}");

    let known = fault(
        &tb,
        "heartbeats/stop",
        JSON,
        &json!({ "framework_id": fid }).to_string(),
    )
    .await;
    assert_eq!((known.status, known.body.as_str()), (200, r#"{"ok":true}"#));
    // No body: every framework.
    assert_eq!(fault(&tb, "heartbeats/stop", &[], "").await.status, 200);
    // A misspelt field is not "stop them all".
    let typo = fault(&tb, "heartbeats/stop", JSON, r#"{"framwork_id": "x"}"#).await;
    let (status, error) = refusal(&typo);
    assert_eq!(status, 400);
    assert!(error.contains("framwork_id"), "{error}");
}

#[tokio::test]
async fn malformed_bodies_are_a_400_in_json() {
    let tb = testbed().await;
    // Not JSON at all (axum alone: 400 text/plain).
    let (status, error) = refusal(&fault(&tb, "faults/ignore-kill", JSON, "{nope").await);
    assert_eq!(status, 400);
    assert!(error.starts_with("invalid JSON body"), "{error}");
    // JSON of the wrong shape (axum alone: 422 text/plain).
    let wrong = fault(&tb, "faults/ignore-kill", JSON, r#"{"task_id_prefix": 5}"#).await;
    let (status, error) = refusal(&wrong);
    assert_eq!(status, 400);
    assert!(error.contains("invalid type"), "{error}");
    // A required body missing.
    let (status, error) = refusal(&fault(&tb, "faults/drop-calls", JSON, "").await);
    assert_eq!(status, 400);
    assert!(error.contains("body is required"), "{error}");
    let (status, _) = refusal(&fault(&tb, "faults/latency", JSON, r#"{"stream_ms": -1}"#).await);
    assert_eq!(status, 400);
    // A body that is not declared JSON.
    let form = fault(
        &tb,
        "faults/hold-staging",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        r#"{"task_id_prefix": "x"}"#,
    )
    .await;
    let (status, error) = refusal(&form);
    assert_eq!(status, 415);
    assert!(error.contains("application/json"), "{error}");
    // Optional bodies are checked too.
    let failover = fault(&tb, "master/failover", JSON, r#"{"reregister_delay": 5}"#).await;
    assert_eq!(refusal(&failover).0, 400);
    // Values that would do nothing, or everything.
    let empty = prefix_rule(&tb, "hold-staging", "").await;
    let (status, error) = refusal(&empty);
    assert_eq!(status, 400);
    assert!(error.contains("match every task"), "{error}");
    let zero = r#"{"call_type": "ACCEPT", "count": 0}"#;
    let (status, error) = refusal(&fault(&tb, "faults/drop-calls", JSON, zero).await);
    assert_eq!(status, 400);
    assert!(error.contains("count must be 1 to"), "{error}");
    // And a good one still works.
    let ok = prefix_rule(&tb, "ignore-kill", "k").await;
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[tokio::test]
async fn faults_of_a_gone_agent_are_a_409_and_of_an_unknown_one_a_404() {
    let tb = testbed().await;
    let agent = tb.agents()[0].id.clone();
    assert_eq!(
        fault(&tb, &format!("agents/{agent}/gone"), &[], "")
            .await
            .status,
        200
    );
    for action in ["unreachable", "reachable", "restart"] {
        let answer = fault(&tb, &format!("agents/{agent}/{action}"), &[], "").await;
        let (status, error) = refusal(&answer);
        assert_eq!(status, 409, "{action}: {error}");
        assert!(
            error.contains(&agent) && error.contains("gone"),
            "{action}: {error}"
        );
    }
    // Marking it gone again is what MARK_AGENT_GONE answers: 200.
    assert_eq!(
        fault(&tb, &format!("agents/{agent}/gone"), &[], "")
            .await
            .status,
        200
    );
    assert_eq!(tb.agents()[0].state, "gone");

    for action in ["unreachable", "reachable", "gone", "restart"] {
        let answer = fault(&tb, &format!("agents/no-such/{action}"), &[], "").await;
        let (status, error) = refusal(&answer);
        assert_eq!(status, 404, "{action}: {error}");
        assert!(error.contains("'no-such'"), "{action}: {error}");
    }
}

#[tokio::test]
async fn restart_without_process_mode_and_drop_stream_of_a_disconnected_framework_are_409() {
    let tb = testbed().await;
    let agent = tb.agents()[0].id.clone();
    let (status, error) = refusal(&fault(&tb, &format!("agents/{agent}/restart"), &[], "").await);
    assert_eq!(status, 409);
    assert!(error.contains("process mode"), "{error}");

    let (_sub, fid) = connected(&tb.url(), "ds", 60.0).await;
    let path = format!("frameworks/{fid}/drop-stream");
    assert_eq!(fault(&tb, &path, &[], "").await.status, 200);
    let (status, error) = refusal(&fault(&tb, &path, &[], "").await);
    assert_eq!(status, 409);
    assert!(error.contains("not connected"), "{error}");
    let (status, error) = refusal(&fault(&tb, "frameworks/nope/drop-stream", &[], "").await);
    assert_eq!(status, 404);
    assert!(error.contains("'nope'"), "{error}");
}

#[tokio::test]
async fn unknown_paths_and_methods_get_a_json_error_naming_them() {
    let tb = testbed().await;
    let (status, error) = refusal(&fault(&tb, "faults/no-such-fault", JSON, "{}").await);
    assert_eq!(status, 404);
    assert!(
        error.contains("POST /testbed/faults/no-such-fault"),
        "{error}"
    );
    let (status, body) = get_status_json(&format!("{}/testbed", tb.url())).await;
    assert_eq!(status, 404);
    assert!(
        body["error"].as_str().unwrap().contains("GET /testbed"),
        "{body}"
    );
    // A known path with the wrong method.
    let (status, body) = get_status_json(&format!("{}/testbed/faults/clear", tb.url())).await;
    assert_eq!(status, 405);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("/testbed/faults/clear"),
        "{body}"
    );
    // Mesos paths keep a master's answers.
    let answer = client()
        .get(format!("{}/master/no-such", tb.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
}

#[tokio::test]
async fn task_prefix_rules_are_bounded_until_cleared() {
    let tb = testbed().await;
    for i in 0..1_000 {
        let answer = prefix_rule(&tb, "ignore-kill", &format!("t{i}.")).await;
        assert_eq!(answer.status, 200, "rule {i}: {}", answer.body);
    }
    let more = prefix_rule(&tb, "ignore-kill", "x").await;
    let (status, error) = refusal(&more);
    assert_eq!(status, 409);
    assert!(error.contains("faults/clear"), "{error}");
    // Other kinds have their own bound; clearing frees this one.
    let other = prefix_rule(&tb, "hold-staging", "x").await;
    assert_eq!(other.status, 200, "{}", other.body);
    assert_eq!(fault(&tb, "faults/clear", JSON, "{}").await.status, 200);
    let again = prefix_rule(&tb, "ignore-kill", "x").await;
    assert_eq!(again.status, 200, "{}", again.body);
}
