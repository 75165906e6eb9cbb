//! One clear answer for each bad input a fresh user's trial met, through
//! the HTTP API (over a scripted core) and `mesos-appliance ctl`:
//!
//! - a body that is JSON but not an object: one 400 problem, the same at
//!   every JSON endpoint;
//! - an unknown field in a drain's cancel names the cancel
//!   (`DELETE …/drain`), not the drain;
//! - `instances` out of range: one message however the number is wrong;
//! - `min_healthy: " 50%"`: refused, as every padded duration or
//!   percentage;
//! - a job schedule `@reboot`: our message, naming what is supported;
//! - `If-Match`: malformed is 400 (not 412), `*` and lists per RFC 9110;
//! - `ctl --token-file` reads the replicas' `--admin-token-file` format.

use crate::support;

use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use mesos_appliance::web::{WebConfig, serve_on};
use serde_json::{Value, json};
use support::web::*;
use tokio::net::TcpListener;

#[tokio::test]
async fn a_body_that_is_not_an_object_gets_one_answer_everywhere() {
    let web = TestWeb::leader();
    let endpoints = [
        (Method::POST, "/api/v1/jobs/report/runs"),
        (Method::POST, "/api/v1/agents/S0/drain"),
        (Method::DELETE, "/api/v1/agents/S0/drain"),
        (Method::PUT, "/api/v1/services/web"),
        (Method::PUT, "/api/v1/jobs/report"),
        (Method::POST, "/api/v1/actions/reconcile"),
        (Method::POST, "/api/v1/services/web/rollout/resume"),
    ];
    for (body, got) in [
        (json!([]), "an array"),
        (json!("x"), "a string"),
        (json!(3), "a number"),
        (json!(true), "a boolean"),
        (Value::Null, "null"),
    ] {
        for (method, path) in &endpoints {
            let r = web.send(json_request(method.clone(), path, &body)).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {path} {body}");
            assert_eq!(
                r.json(),
                json!({
                    "type": "urn:mesos-appliance:problem:invalid",
                    "title": "Invalid request",
                    "status": 400,
                    "detail": format!("body: must be a JSON object, not {got}"),
                    "errors": [{"field": "body", "message": format!("must be a JSON object, not {got}")}],
                }),
                "{method} {path} {body}"
            );
        }
    }
    assert!(web.core.received().is_empty(), "{:?}", web.core.received());
}

#[tokio::test]
async fn an_unknown_field_names_the_action_the_user_took() {
    let web = TestWeb::leader();
    for (method, path, takes) in [
        (
            Method::DELETE,
            "/api/v1/agents/S0/drain",
            "DELETE /api/v1/agents/{agent_id}/drain takes only reason",
        ),
        (
            Method::POST,
            "/api/v1/agents/S0/drain",
            "POST /api/v1/agents/{agent_id}/drain takes only min_healthy, reason, then",
        ),
        (
            Method::POST,
            "/api/v1/jobs/report/runs",
            "POST /api/v1/jobs/{name}/runs takes only args, env",
        ),
    ] {
        let r = web
            .send(json_request(method.clone(), path, &json!({"why": "x"})))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
        assert_eq!(
            r.json()["errors"],
            json!([{"field": "why", "message": format!("unknown field; {takes}")}]),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn a_number_out_of_range_gets_one_message_and_padded_values_are_refused() {
    let web = TestWeb::leader();
    let spec = |instances: Value| json!({"command": "sleep 1", "cpus": 0.1, "mem": 32, "instances": instances});
    for instances in [
        json!(-1),
        json!(4_294_967_296_u64),
        json!(10_001),
        json!(1.5),
    ] {
        let r = web
            .send(json_request(
                Method::PUT,
                "/api/v1/services/web",
                &spec(instances.clone()),
            ))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{instances}");
        assert_eq!(
            r.json()["errors"],
            json!([{"field": "instances", "message": "must be a whole number from 0 to 10000"}]),
            "{instances}"
        );
    }
    for (path, body, field) in [
        (
            "/api/v1/agents/S0/drain",
            json!({"min_healthy": " 50%"}),
            "min_healthy",
        ),
        (
            "/api/v1/services/web",
            json!({"command": "sleep 1", "cpus": 0.1, "mem": 32, "instances": 1,
                "restart_backoff": "5s "}),
            "restart_backoff",
        ),
    ] {
        let method = if path.ends_with("drain") {
            Method::POST
        } else {
            Method::PUT
        };
        let r = web.send(json_request(method, path, &body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text());
        let errors = r.json()["errors"].clone();
        assert_eq!(errors[0]["field"], field, "{errors}");
        let message = errors[0]["message"].as_str().unwrap_or_default();
        assert!(message.contains("has white space around it"), "{message}");
    }
    let r = web
        .send(json_request(
            Method::PUT,
            "/api/v1/jobs/boot",
            &json!({"command": "true", "cpus": 0.1, "mem": 32,
                "schedule": {"cron": "@reboot"}}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let errors = r.json()["errors"].clone();
    assert_eq!(errors[0]["field"], "schedule.cron", "{errors}");
    let message = errors[0]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("@reboot is not supported"), "{message}");
    assert!(message.contains("@daily"), "{message}");
    assert!(web.core.received().is_empty(), "{:?}", web.core.received());
}

#[tokio::test]
async fn if_match_is_read_as_rfc_9110_says() {
    let web = TestWeb::leader();
    let etag = web
        .send(get("/api/v1/services/web"))
        .await
        .header("etag")
        .expect("an ETag")
        .to_string();
    let version = etag.trim_matches('"').to_string();
    let body = json!({"command": "sleep 1", "cpus": 0.1, "mem": 32, "instances": 2});
    let put = |if_match: &str| {
        request(Method::PUT, "/api/v1/services/web")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::IF_MATCH, if_match)
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()
    };
    // Malformed: 400 on the header, never 412.
    for bad in [version.as_str(), "\"3", "*, \"3\"", "\"3\" \"4\""] {
        let r = web.send(put(bad)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.text());
        assert_eq!(r.error_fields(), ["If-Match"], "{bad}");
    }
    // Weak tags never match (strong comparison); a list without the
    // stored version neither.
    for stale in [format!("W/{etag}"), "\"0\", \"1\"".to_string()] {
        let r = web.send(put(&stale)).await;
        assert_eq!(
            r.status,
            StatusCode::PRECONDITION_FAILED,
            "{stale}: {}",
            r.text()
        );
    }
    // A list holding the stored version replaces; so does `*`.
    let r = web.send(put(&format!("\"0\", {etag}"))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = web.send(put("*")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    // `*` on a service that is not stored: the precondition fails (412,
    // RFC 9110 §13.1.1) and nothing is created.
    let absent = request(Method::PUT, "/api/v1/services/nope")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::IF_MATCH, "*")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let r = web.send(absent).await;
    assert_eq!(r.status, StatusCode::PRECONDITION_FAILED, "{}", r.text());
    let r = web.send(get("/api/v1/services/nope")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "nothing created");

    // DELETE reads the header as PUT does: malformed 400, a stale tag 412
    // and nothing deleted, the stored version deletes; a missing service
    // is 404 with or without it (RFC 9110 §13.2.1).
    let delete = |path: &str, if_match: &str| {
        request(Method::DELETE, path)
            .header(header::IF_MATCH, if_match)
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let r = web.send(delete("/api/v1/services/web", "\"3")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.error_fields(), ["If-Match"]);
    let r = web.send(delete("/api/v1/services/web", &etag)).await;
    assert_eq!(r.status, StatusCode::PRECONDITION_FAILED, "{}", r.text());
    let now = web
        .send(get("/api/v1/services/web"))
        .await
        .header("etag")
        .expect("still there")
        .to_string();
    let r = web.send(delete("/api/v1/services/nope", "*")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    let r = web.send(delete("/api/v1/services/web", &now)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// `ctl` with `args` and no token but `--token-file`; exit code and
/// stderr.
async fn ctl(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesos-appliance"))
        .arg("ctl")
        .args(["--url", url, "--timeout", "5s"])
        .args(args)
        .env_remove("MESOS_APPLIANCE_URL")
        .env_remove("MESOS_APPLIANCE_TOKEN")
        .env_remove("MESOS_APPLIANCE_TOKEN_FILE")
        .env_remove("MESOS_APPLIANCE_TOKEN_NAME")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), output)
        .await
        .expect("ctl ends")
        .expect("ctl runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_takes_the_replicas_token_file() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}");
    let mut config = WebConfig::new(addr, url.clone());
    config.admin_tokens = token_config().admin_tokens;
    let web = TestWeb::new(config, leader_snapshot(&url, 4));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = serve_on(listener, web.state.clone(), async {
        let _ = stopped.await;
    })
    .await
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let one = file("one", format!("# the replicas' file\nadmin:{TOKEN}\n"));
    let two = file(
        "two",
        format!("ci:wrong-s3cret-0123456789\nadmin:{TOKEN}\n"),
    );
    let delete = ["services", "scale", "web", "3", "--why", "inputs"];

    let (code, stderr) = ctl(
        &url,
        &[&["--token-file", one.as_str()][..], &delete].concat(),
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    // Several tokens and no name: exit 2, the names listed, no token.
    let (code, stderr) = ctl(
        &url,
        &[&["--token-file", two.as_str()][..], &delete].concat(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("(ci, admin); pick one with --token-name"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3cret") && !stderr.contains(TOKEN),
        "{stderr}"
    );
    let (code, stderr) = ctl(
        &url,
        &[
            &["--token-file", two.as_str(), "--token-name", "nobody"][..],
            &delete,
        ]
        .concat(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no token named \"nobody\""), "{stderr}");
    // A `:` typed as a space: exit 2 naming the line, nothing sent (so no
    // 401 counts toward the lockout).
    let spaced = file("spaced", format!("admin {TOKEN}\n"));
    let (code, stderr) = ctl(
        &url,
        &[&["--token-file", spaced.as_str()][..], &delete].concat(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("line 1: the token holds white space"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN), "{stderr}");
    // The name picks the token sent: the wrong one is 401, exit 1.
    let (code, stderr) = ctl(
        &url,
        &[
            &["--token-file", two.as_str(), "--token-name", "ci"][..],
            &delete,
        ]
        .concat(),
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    let (code, stderr) = ctl(
        &url,
        &[
            &["--token-file", two.as_str(), "--token-name", "admin"][..],
            &delete,
        ]
        .concat(),
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");

    stop.send(()).unwrap();
    let _ = server.task.await;
}
