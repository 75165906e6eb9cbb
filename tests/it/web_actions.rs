//! Actions and service changes through the API with `oneshot`: what each
//! answers, and the status codes of the rules (token missing or wrong,
//! cross-origin, follower, core errors, timeout, bounded bodies).

use crate::support;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use mesos_appliance::coordination::{CoordinationError, Leadership};
use mesos_appliance::mesos::client::CallError;
use mesos_appliance::scheduler::{CommandError, FrameworkState};
use serde_json::json;
use support::web::*;

fn action(path: &str) -> axum::http::request::Builder {
    request(Method::POST, path)
}

#[tokio::test]
async fn services_are_created_replaced_and_deleted() {
    let web = TestWeb::leader();
    let spec = json!({"command": "sleep 100", "cpus": 0.1, "mem": 32, "instances": 2});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/sleeper", &spec))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    assert_eq!(r.json(), json!({"name": "sleeper", "outcome": "created"}));
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/sleeper", &spec))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["outcome"], "replaced");

    let bad =
        json!({"command": "", "cpus": 0, "mem": 32, "instances": 1, "constraints": ["x:NEAR"]});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/sleeper", &bad))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let v = r.json();
    let fields: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["command", "cpus", "constraints[0]"]);

    let renamed = json!({"name": "other", "command": "x", "cpus": 1, "mem": 1, "instances": 1});
    let r = web
        .send(json_request(
            Method::PUT,
            "/api/v1/services/sleeper",
            &renamed,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "name");

    // URIs the fetcher cannot take, and absurd durations: field errors.
    let bad_uri = json!({"command": "x", "cpus": 1, "mem": 1, "instances": 1,
        "uris": ["http://h/ok.tgz", "not a url at all"]});
    let r = web
        .send(json_request(
            Method::PUT,
            "/api/v1/services/sleeper",
            &bad_uri,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "uris[1]", "{}", r.text());
    for field in [
        "restart_backoff",
        "restart_backoff_max",
        "kill_grace_period",
    ] {
        let mut long = json!({"command": "x", "cpus": 1, "mem": 1, "instances": 1});
        long[field] = "500000000000years".into();
        let r = web
            .send(json_request(Method::PUT, "/api/v1/services/sleeper", &long))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let v = r.json();
        assert_eq!(v["errors"][0]["field"], field, "{v}");
        assert!(
            v["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("at most 365 days"),
            "{v}"
        );
    }

    let typo = json!({"command": "x", "cpus": 1, "mem": 1, "instnaces": 1});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/sleeper", &typo))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json()["detail"].as_str().unwrap().contains("instnaces"));

    let r = web
        .send(
            request(Method::PUT, "/api/v1/services/sleeper")
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from(spec.to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let r = web
        .send(
            request(Method::PUT, "/api/v1/services/big")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(vec![b' '; 100 * 1024]))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));

    let r = web
        .send(
            request(Method::DELETE, "/api/v1/services/sleeper")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = web
        .send(
            request(Method::DELETE, "/api/v1/services/sleeper")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        web.core.received(),
        [
            "put_service",
            "put_service",
            "delete_service",
            "delete_service"
        ]
    );
}

/// A new service's name is a DNS label: one ending in `-` is refused
/// before the core is asked, named with the spec's other field errors; a
/// service stored under such a name (before the edge refused it) can
/// still be replaced.
#[tokio::test]
async fn a_new_service_name_must_end_with_a_letter_or_digit() {
    let web = TestWeb::leader();
    let spec = json!({"command": "sleep 100", "cpus": 0.1, "mem": 32, "instances": 1});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/a-", &spec))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let errors = &r.json()["errors"];
    assert_eq!(errors.as_array().map(Vec::len), Some(1), "{errors}");
    assert_eq!(errors[0]["field"], "name");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("ending with a letter or digit"),
        "{errors}"
    );
    let bad = json!({"command": "sleep 100", "cpus": 0, "mem": 32, "instances": 1});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/a-", &bad))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let fields = r.error_fields();
    assert_eq!(fields, ["cpus", "name"]);
    assert!(!web.core.received().contains(&"put_service"));

    let mut s = web.snapshot();
    let mut legacy = s.services[0].clone();
    legacy.spec.name = "a-".into();
    s.services.push(legacy);
    web.publish(s);
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/a-", &spec))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"name": "a-", "outcome": "replaced"}));
}

/// Asks the leader for an explicit reconciliation without a body; the 202's
/// JSON.
async fn reconcile_accepted(web: &TestWeb) -> serde_json::Value {
    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    r.json()
}

/// A reconcile result follows its run: a run that was running (or queued)
/// when asked for shows how it ended, found by run ID.
#[tokio::test]
async fn a_reconcile_result_follows_its_run_to_the_end() {
    let web = TestWeb::leader();
    let v = reconcile_accepted(&web).await;
    assert_eq!(v["reconcile"]["outcome"], "running");
    let result_id = v["id"].as_str().unwrap().to_string();
    let run_id = v["reconcile"]["id"].as_u64().unwrap();

    let mut s = web.snapshot();
    let mut run = s.reconciliation.running.take().unwrap();
    assert_eq!(run.id, run_id);
    run.outcome = mesos_appliance::scheduler::ReconcileOutcome::Converged;
    run.answered = run.asked;
    run.finished_at = Some(run.started_at + 1.0);
    s.reconciliation.history.push(run);
    web.publish(s);

    let v = web
        .send(get(&format!("/api/v1/actions/results/{result_id}")))
        .await
        .json();
    assert_eq!(v["reconcile"]["outcome"], "converged", "{v}");
    assert!(v["summary"].as_str().unwrap().contains("converged"), "{v}");
    let html = web
        .send(get(&format!("/actions/results/{result_id}")))
        .await
        .text();
    assert!(
        html.contains("<dt>Outcome</dt><dd>converged</dd>"),
        "{html}"
    );
    // Another replica's result (or one pushed out): 404 saying where
    // results live, on the page and its JSON twin.
    let r = web.send(get("/api/v1/actions/results/r-elsewhere")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let detail = r.json()["detail"].as_str().unwrap_or_default().to_string();
    assert!(
        detail.contains("on this replica") && detail.contains("/audit"),
        "{detail}"
    );
    let r = web.send(get("/actions/results/r-elsewhere")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.text().contains("on this replica"), "{}", r.text());
}

#[tokio::test]
async fn actions_run_on_the_leader() {
    let web = TestWeb::leader();
    let v = reconcile_accepted(&web).await;
    assert_eq!(v["action"], "reconcile");
    assert_eq!(v["kind"], "explicit");
    assert_eq!(v["reconcile"]["asked"], 114);
    assert_eq!(v["ok"], true);

    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/reconcile",
            &json!({"kind": "implicit"}),
        ))
        .await;
    assert_eq!(r.json()["kind"], "implicit");
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/reconcile",
            &json!({"kind": "sideways"}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "kind");

    let r = web
        .send(
            action("/api/v1/actions/kamikaze")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let v = r.json();
    // 6 agents with a web (appliance) executor, 30 command-executor tasks.
    assert_eq!(v["executors"].as_array().unwrap().len(), 6 + 30);
    let id = v["id"].as_str().unwrap();
    let again = web
        .send(get(&format!("/api/v1/actions/results/{id}")))
        .await;
    assert_eq!(again.json()["action"], "kamikaze");

    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/teardown",
            &json!({"framework_id": "someone-else"}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let r = web
        .send(
            action("/api/v1/actions/abdicate")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = web
        .send(
            action("/api/v1/actions/reregister")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "not in state removed");
    let records = web.snapshot().tasks.len();
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/teardown",
            &json!({"framework_id": FRAMEWORK_ID}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["teardown"]["tasks"], records);
    assert_eq!(
        web.core.received(),
        [
            "reconcile",
            "reconcile",
            "kamikaze",
            "abdicate",
            "reregister",
            "teardown"
        ]
    );

    let r = web
        .send(
            action("/api/v1/actions/explode")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = web.send(get("/api/v1/actions/teardown")).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "never a GET");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));

    let v = web.send(get("/api/v1/actions")).await.json();
    assert_eq!(v["recent"].as_array().unwrap().len(), 6);
    assert_eq!(v["access"], "loopback");
}

#[tokio::test]
async fn a_reconcile_body_without_kind_is_explicit() {
    let web = TestWeb::leader();
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/reconcile",
            &json!({}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert_eq!(r.json()["kind"], "explicit");
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/reconcile",
            &json!({"kind": null}),
        ))
        .await;
    assert_eq!(r.json()["kind"], "explicit");
    assert_eq!(web.core.received(), ["reconcile", "reconcile"]);
}

#[tokio::test]
async fn action_bodies_are_checked_field_by_field() {
    let web = TestWeb::leader();
    let post = |path: &str, body: serde_json::Value| {
        json_request(Method::POST, &format!("/api/v1/actions/{path}"), &body)
    };
    // Kamikaze has teardown's framework_id guard.
    let r = web
        .send(post("kamikaze", json!({"framework_id": "wrong-id"})))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert!(r.json()["detail"].as_str().unwrap().contains("wrong-id"));
    // Unknown fields are refused by every action, each named.
    for (path, body, field) in [
        ("kamikaze", json!({"bogus": 1}), "bogus"),
        (
            "teardown",
            json!({"framework_id": FRAMEWORK_ID, "force": true}),
            "force",
        ),
        ("abdicate", json!({"bogus": 1}), "bogus"),
        ("reregister", json!({"bogus": 1}), "bogus"),
        (
            "reconcile",
            json!({"kind": "implicit", "extra": 1}),
            "extra",
        ),
    ] {
        let r = web.send(post(path, body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text());
        let v = r.json();
        assert_eq!(v["errors"][0]["field"], field, "{path}: {v}");
        assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{path}: {v}");
    }
    // Not an object: no Rust type names in the answer.
    for (path, body) in [
        ("reconcile", json!(1)),
        ("reconcile", json!(["implicit"])),
        ("kamikaze", json!("x")),
        ("abdicate", json!([])),
    ] {
        let r = web.send(post(path, body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        let text = r.text();
        assert!(text.contains("must be a JSON object"), "{text}");
        assert!(!text.contains("struct"), "{text}");
    }
    let r = web.send(post("kamikaze", json!({"framework_id": 7}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "framework_id");
    assert!(web.core.received().is_empty(), "{:?}", web.core.received());
    // The right ID, and empty objects, go through.
    for (path, body) in [
        ("kamikaze", json!({"framework_id": FRAMEWORK_ID})),
        ("kamikaze", json!({})),
        ("abdicate", json!({})),
    ] {
        let r = web.send(post(path, body)).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
    }
    assert_eq!(web.core.received(), ["kamikaze", "kamikaze", "abdicate"]);
}

#[tokio::test]
async fn reregister_in_state_removed() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 3);
    s.framework.state = FrameworkState::Removed;
    s.framework.reason = Some("Framework has been removed".into());
    let web = TestWeb::new(test_config(), s);
    let r = web
        .send(
            action("/api/v1/actions/reregister")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(web.snapshot().framework.state, FrameworkState::Subscribing);
}

#[tokio::test]
async fn a_follower_points_at_the_leader() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot("http://127.0.0.1:8080", "http://sched-a.test:8080", 10),
    );
    for path in [
        "/api/v1/actions/reconcile",
        "/api/v1/actions/kamikaze",
        "/api/v1/actions/teardown",
    ] {
        let r = web.send(action(path).body(Body::empty()).unwrap()).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            r.header("location"),
            Some(format!("http://sched-a.test:8080{path}").as_str())
        );
        assert_eq!(r.json()["leader_url"], "http://sched-a.test:8080");
        assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:not-leader");
    }
    let r = web
        .send(json_request(
            Method::PUT,
            "/api/v1/services/x",
            &json!({"command": "x", "cpus": 1, "mem": 1, "instances": 1}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        web.core.received().is_empty(),
        "a follower sends no command"
    );

    // No leader known: 503 without Location.
    let mut s = web.snapshot();
    s.leadership = Leadership::Candidate;
    web.publish(s);
    let r = web
        .send(
            action("/api/v1/actions/abdicate")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.header("location"), None);
    assert!(r.json()["leader_url"].is_null());
}

#[tokio::test]
async fn core_errors_map_to_statuses() {
    let web = TestWeb::leader();
    let cases = [
        (
            CommandError::NotLeader {
                leader_url: Some("http://sched-c.test:8080".into()),
            },
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (
            CommandError::Mesos(CallError::Rejected {
                status: 403,
                body: "Forbidden".into(),
            }),
            StatusCode::BAD_GATEWAY,
        ),
        (
            CommandError::Store(CoordinationError::Unavailable("connection loss".into())),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (
            CommandError::Store(CoordinationError::VersionConflict {
                path: "services/web".into(),
            }),
            StatusCode::CONFLICT,
        ),
        (CommandError::Conflict("busy".into()), StatusCode::CONFLICT),
    ];
    for (error, status) in cases {
        web.core.set_mode(Mode::Fail(error.clone()));
        let r = web
            .send(
                action("/api/v1/actions/kamikaze")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, status, "{error:?}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
    }
    web.core.set_mode(Mode::Fail(CommandError::NotLeader {
        leader_url: Some("http://sched-c.test:8080".into()),
    }));
    let r = web
        .send(
            action("/api/v1/actions/abdicate")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(
        r.header("location"),
        Some("http://sched-c.test:8080/api/v1/actions/abdicate")
    );
}

#[tokio::test]
async fn a_silent_core_times_out_with_503() {
    let mut config = test_config();
    config.handler_timeout = Duration::from_millis(300);
    let web = TestWeb::new(config, leader_snapshot("http://127.0.0.1:8080", 5));
    web.core.set_mode(Mode::Silent);
    let start = Instant::now();
    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    let took = start.elapsed();
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:timeout");
    assert!(r.header("retry-after").is_some());
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // The outcome is kept for the result page.
    let recent = web.send(get("/api/v1/actions")).await.json();
    assert_eq!(recent["recent"][0]["status"], 503);
}

#[tokio::test]
async fn token_rules() {
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 5),
    );
    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="mesos-appliance""#)
    );

    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .header(header::AUTHORIZATION, "Bearer wrong")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("invalid_token")
    );
    assert!(!r.text().contains(TOKEN));

    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);

    // A browser on another origin cannot use it even with the token.
    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .header(header::ORIGIN, "http://evil.test")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:cross-origin");

    // The advertised origin may.
    let r = web
        .send(
            action("/api/v1/actions/reconcile")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .header(header::ORIGIN, "http://sched-a.cluster.test:8080")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);

    // Service changes need the token too.
    let spec = json!({"command": "x", "cpus": 1, "mem": 1, "instances": 1});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/x", &spec))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = web
        .send(
            request(Method::DELETE, "/api/v1/services/web")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(web.core.received(), ["reconcile", "reconcile"]);
}

#[tokio::test]
async fn wrong_admin_tokens_are_throttled_per_client() {
    use axum::extract::ConnectInfo;
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 5),
    );
    let from = |client: &str, token: &str| {
        let mut request = action("/api/v1/actions/reconcile")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let addr: std::net::SocketAddr = format!("{client}:40000").parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(addr));
        request
    };
    for _ in 0..5 {
        let r = web.send(from("192.0.2.1", "guess")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    // Now even the right token is refused from that client for a while.
    let r = web.send(from("192.0.2.1", TOKEN)).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        r.json()["type"],
        "urn:mesos-appliance:problem:too-many-attempts"
    );
    assert!(!r.text().contains(TOKEN) && !r.text().contains("guess"));
    // Reading the actions view with a token is no way around it.
    let mut read = request(Method::GET, "/api/v1/actions")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    read.extensions_mut()
        .insert(ConnectInfo::<std::net::SocketAddr>(
            "192.0.2.1:1".parse().unwrap(),
        ));
    assert_eq!(web.send(read).await.json()["authorized"], false);
    // Another client is not affected.
    let r = web.send(from("192.0.2.2", TOKEN)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert_eq!(web.core.received(), ["reconcile"]);
}

#[tokio::test]
async fn cross_origin_posts_are_refused_on_loopback() {
    let web = TestWeb::leader();
    let evil = action("/api/v1/actions/teardown")
        .header(header::ORIGIN, "http://evil.test")
        .header(header::HOST, "127.0.0.1:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(web.send(evil).await.status, StatusCode::FORBIDDEN);
    // DNS rebinding: Origin and Host agree, but Host is a name.
    let rebound = action("/api/v1/actions/teardown")
        .header(header::ORIGIN, "http://rebind.test:8080")
        .header(header::HOST, "rebind.test:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(web.send(rebound).await.status, StatusCode::FORBIDDEN);
    let fetch_meta = action("/api/v1/actions/teardown")
        .header("sec-fetch-site", "cross-site")
        .body(Body::empty())
        .unwrap();
    assert_eq!(web.send(fetch_meta).await.status, StatusCode::FORBIDDEN);
    // A text/plain body (what a cross-site form could send) is refused too.
    let plain = action("/api/v1/actions/reconcile")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(r#"{"kind":"implicit"}"#))
        .unwrap();
    assert_eq!(
        web.send(plain).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert!(web.core.received().is_empty());

    let same = action("/api/v1/actions/abdicate")
        .header(header::ORIGIN, "http://127.0.0.1:8080")
        .header(header::HOST, "127.0.0.1:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(web.send(same).await.status, StatusCode::OK);
}

#[tokio::test]
async fn cross_site_referers_and_form_types_never_drive_the_api() {
    let web = TestWeb::leader();
    // What a form on another site posts from a browser that sends no
    // Origin: a Referer naming that site.
    for path in ["/api/v1/actions/abdicate", "/api/v1/actions/teardown"] {
        let r = web
            .send(
                action(path)
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .header(header::REFERER, "http://evil.example/")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {}", r.text());
        assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:cross-origin");
    }
    let r = web
        .send(
            action("/api/v1/actions/teardown")
                .header(header::REFERER, "http://evil.example/page")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // Without Origin or Referer, the content types a plain form can send
    // are refused even with an empty body.
    for content_type in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "text/plain;charset=UTF-8",
    ] {
        let r = web
            .send(
                action("/api/v1/actions/abdicate")
                    .header(header::CONTENT_TYPE, content_type)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type}: {}",
            r.text()
        );
    }
    assert!(web.core.received().is_empty(), "{:?}", web.core.received());

    // A Referer from this origin, and an empty JSON post, are fine.
    let r = web
        .send(
            action("/api/v1/actions/abdicate")
                .header(header::REFERER, "http://127.0.0.1:8080/actions")
                .header(header::HOST, "127.0.0.1:8080")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(web.core.received(), ["abdicate"]);
}

#[tokio::test]
async fn unprotected_actions_are_disabled() {
    let mut config = test_config();
    config.listen = "0.0.0.0:8080".parse().unwrap();
    let web = TestWeb::new(config.clone(), leader_snapshot("http://10.0.0.5:8080", 1));
    let r = web
        .send(
            action("/api/v1/actions/abdicate")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(
        r.json()["type"],
        "urn:mesos-appliance:problem:actions-disabled"
    );

    config.insecure_actions = true;
    let web = TestWeb::new(config, leader_snapshot("http://10.0.0.5:8080", 1));
    let r = web
        .send(
            action("/api/v1/actions/abdicate")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn uri_passwords_are_hidden_in_answers_but_kept_in_the_spec() {
    let web = TestWeb::leader();
    let spec = json!({"command": "x", "cpus": 0.1, "mem": 32, "instances": 1,
        "uris": ["http://u:pw9secret@h/x"]});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/fetcher", &spec))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    for path in ["/api/v1/services", "/api/v1/services/fetcher", "/services"] {
        let text = web.send(get(path)).await.text();
        assert!(!text.contains("pw9secret"), "{path}: {text}");
    }
    let v = web.send(get("/api/v1/services/fetcher")).await.json();
    assert_eq!(v["spec"]["uris"][0]["value"], "http://u:***@h/x");
    let stored = web.snapshot();
    let stored = stored.services.iter().find(|s| s.spec.name == "fetcher");
    assert_eq!(stored.unwrap().spec.uris[0].value, "http://u:pw9secret@h/x");

    let bad = json!({"command": "x", "cpus": 0.1, "mem": 32, "instances": 1,
        "uris": ["gopher://u:pw9secret@h/x", "http://u:pw9secret@/x"]});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/services/fetcher", &bad))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let text = r.text();
    assert!(!text.contains("pw9secret"), "{text}");
    assert!(text.contains("u:***@"), "{text}");
}

#[tokio::test]
async fn specs_refuse_keys_given_twice_and_errors_name_the_json_path() {
    let web = TestWeb::leader();
    let put = |body: &str| {
        request(Method::PUT, "/api/v1/services/sleeper")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    for (body, field, says) in [
        (
            r#"{"command": "x", "cpus": 1, "cpus": 2, "mem": 1, "instances": 1}"#,
            "cpus",
            "more than once",
        ),
        (
            r#"{"command": "x", "cpus": 1, "mem": 1, "instances": 1, "env": {"A": "1", "A": "2"}}"#,
            "env.A",
            "more than once",
        ),
        (
            r#"{"command": "x", "cpus": "many", "mem": 1, "instances": 1}"#,
            "cpus",
            "must be a number from 0.01 to 1000000",
        ),
        (
            r#"{"command": "x", "cpus": 1, "mem": 1}"#,
            "instances",
            "missing field",
        ),
        (
            r#"{"command": "x", "cpus": 1, "mem": 1, "instances": 1, "ports": 1,
                "health_check": {"type": "tcp", "port_index": 0, "interval": "soon"}}"#,
            "health_check.interval",
            "expected a duration",
        ),
        (
            r#"{"command": "x", "cpus": 1, "mem": 1, "instances": 1,
                "constraints": ["hostname:UNIQUE", 7]}"#,
            "constraints[1]",
            "invalid type",
        ),
    ] {
        let r = web.send(put(body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text());
        let v = r.json();
        assert_eq!(v["errors"][0]["field"], field, "{body}: {v}");
        let message = v["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    // Action bodies too.
    let r = web
        .send(
            request(Method::POST, "/api/v1/actions/abdicate")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"reason": "a", "reason": "b"}"#))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "reason");
    assert!(web.core.received().is_empty());
}

/// One route per action: an unknown action (or rollout action) is 404
/// naming the known ones before any other check, and a known path with
/// another method is 405; an action body's field errors keep their
/// messages (every unknown field named with what the action takes, the
/// wrong type named per field), and nothing reaches the core.
#[tokio::test]
async fn action_routes_and_body_errors_keep_their_answers() {
    let web = TestWeb::new(token_config(), leader_snapshot("http://127.0.0.1:8080", 3));
    let empty = |path: &str| action(path).body(Body::empty()).unwrap();
    let r = web.send(empty("/api/v1/actions/bogus")).await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "no token needed to learn it"
    );
    assert_eq!(
        r.json()["detail"],
        r#"no action "bogus"; actions are reconcile, kamikaze, teardown, abdicate, reregister"#
    );
    let r = web.send(empty("/api/v1/services/web/rollout/bogus")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        r.json()["detail"],
        r#"no rollout action "bogus"; they are resume, rollback"#
    );
    let r = web.send(empty("/api/v1/actions/reconcile")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text());
    let r = web.send(get("/api/v1/actions/abdicate")).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.header("allow"), Some("POST"));

    let web = TestWeb::leader();
    let post = |path: &str, body: serde_json::Value| json_request(Method::POST, path, &body);
    let r = web
        .send(post(
            "/api/v1/actions/reconcile",
            json!({"bogus": 1, "extra": 2}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json()["errors"],
        json!([
            {"field": "bogus", "message": "unknown field; POST /api/v1/actions/reconcile takes only kind, reason"},
            {"field": "extra", "message": "unknown field; POST /api/v1/actions/reconcile takes only kind, reason"},
        ])
    );
    for (path, body, field, message) in [
        (
            "/api/v1/actions/abdicate",
            json!({"why": "x"}),
            "why",
            "unknown field; POST /api/v1/actions/abdicate takes only reason",
        ),
        (
            "/api/v1/actions/abdicate",
            json!({"reason": 5}),
            "reason",
            "must be a string",
        ),
        (
            "/api/v1/actions/reconcile",
            json!({"kind": "sideways"}),
            "kind",
            r#"must be "explicit" or "implicit""#,
        ),
        (
            "/api/v1/actions/teardown",
            json!({"framework_id": ["x"]}),
            "framework_id",
            "must be a string",
        ),
        (
            "/api/v1/services/web/rollout/rollback",
            json!({"expected": 1}),
            "expected",
            "must be a string",
        ),
        (
            "/api/v1/services/web/rollout/resume",
            json!({"force": true}),
            "force",
            "unknown field; POST /api/v1/services/{name}/rollout/resume takes only reason, expected",
        ),
    ] {
        let r = web.send(post(path, body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text());
        let v = r.json();
        assert_eq!(
            v["errors"],
            json!([{"field": field, "message": message}]),
            "{path}"
        );
    }
    assert!(web.core.received().is_empty(), "{:?}", web.core.received());
}
