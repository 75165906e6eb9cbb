//! The audit trail through the web layer: who (the token's name, the
//! session's, or the loopback rule), from where, what with which
//! parameters, why and how it went — for API actions, browser posts and
//! service changes; reasons bounded (a 100 KB reason refused before
//! anything runs); the Audit page's filters and escaping.

use crate::support;

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use mesos_appliance::util::tokens::AdminToken;
use serde_json::json;
use support::web::{
    FRAMEWORK_ID, TestWeb, form_post, get, json_request, leader_snapshot, request, token_config,
};

fn with_token(
    mut r: axum::http::Request<axum::body::Body>,
    token: &str,
) -> axum::http::Request<axum::body::Body> {
    r.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    r
}

async fn audit(web: &TestWeb, query: &str) -> Vec<serde_json::Value> {
    let r = web.send(get(&format!("/api/v1/audit{query}"))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()["entries"].as_array().unwrap().clone()
}

/// Actions take `?reason=` as services and jobs do (the body's `reason`
/// or the query's, equal when both), and refuse a parameter they do not
/// take instead of dropping it.
#[tokio::test]
async fn actions_take_their_reason_from_the_query_too() {
    let web = TestWeb::leader();
    let empty = |path: &str| {
        request(Method::POST, path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::empty())
            .unwrap()
    };
    let r = web
        .send(empty(
            "/api/v1/actions/reconcile?reason=after%20the%20switch%20swap",
        ))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert_eq!(r.json()["reason"], "after the switch swap");
    let same = json!({"reason": "same"});
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/reconcile?reason=same",
            &same,
        ))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let entries = audit(&web, "?action=reconcile").await;
    let reasons: Vec<_> = entries.iter().map(|e| e["reason"].clone()).collect();
    assert!(
        reasons.contains(&json!("after the switch swap")),
        "{entries:?}"
    );
    assert!(reasons.contains(&json!("same")), "{entries:?}");
    let sent = web.core.received().len();

    let other = json!({"reason": "one"});
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/abdicate?reason=two",
            &other,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.json()["errors"][0]["field"], "reason");
    for path in [
        "/api/v1/actions/reconcile?resaon=typo",
        "/api/v1/agents/a1/drain?why=x",
        "/api/v1/services/web/restart?force=1",
    ] {
        let r = web.send(empty(path)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text());
        assert!(
            r.text().contains("unknown parameter"),
            "{path}: {}",
            r.text()
        );
    }
    assert_eq!(
        web.core.received().len(),
        sent,
        "nothing refused reached the core"
    );
}

/// An empty or blank `reason` in the body is one not given: the query's
/// is used (many clients send `""` for a field left empty), and blank on
/// both sides records none.
#[tokio::test]
async fn an_empty_body_reason_gives_way_to_the_query_s() {
    let web = TestWeb::leader();
    for (body, query, recorded) in [
        (
            json!({"reason": ""}),
            "?reason=from%20the%20query",
            json!("from the query"),
        ),
        (json!({"reason": "  "}), "?reason=q", json!("q")),
        (
            json!({"reason": "from the body"}),
            "?reason=",
            json!("from the body"),
        ),
        (json!({"reason": ""}), "?reason=", serde_json::Value::Null),
    ] {
        let path = format!("/api/v1/actions/reconcile{query}");
        let r = web.send(json_request(Method::POST, &path, &body)).await;
        assert_eq!(
            r.status,
            StatusCode::ACCEPTED,
            "{body} {query}: {}",
            r.text()
        );
        assert_eq!(r.json()["reason"], recorded, "{body} {query}");
    }
}

#[tokio::test]
async fn each_action_is_audited_with_who_why_and_the_outcome() {
    let mut config = token_config();
    config.admin_tokens = vec![
        AdminToken::new("alice", "alice-token-0123456789"),
        AdminToken::new("bob", "bob-token-0123456789abc"),
    ];
    let web = TestWeb::new(
        config,
        leader_snapshot("http://sched-a.cluster.test:8080", 20),
    );

    let body = json!({"kind": "implicit", "reason": "agents back from maintenance"});
    let r = web
        .send(with_token(
            json_request(Method::POST, "/api/v1/actions/reconcile", &body),
            "bob-token-0123456789abc",
        ))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert_eq!(r.json()["by"], "bob");
    assert_eq!(r.json()["reason"], "agents back from maintenance");

    let spec = json!({"command": "sleep 60", "cpus": 0.1, "mem": 32, "instances": 2});
    let r = web
        .send(with_token(
            json_request(
                Method::PUT,
                "/api/v1/services/cache?reason=more%20capacity",
                &spec,
            ),
            "alice-token-0123456789",
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());

    // A request refused before anything runs (the framework ID guard) is
    // no action: no entry.
    let r = web
        .send(with_token(
            json_request(
                Method::POST,
                "/api/v1/actions/teardown",
                &json!({"framework_id": "other", "reason": "oops"}),
            ),
            "alice-token-0123456789",
        ))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);

    let entries = audit(&web, "").await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    let (service, reconcile) = (&entries[0], &entries[1]);
    assert_eq!(reconcile["who"], "bob");
    assert_eq!(reconcile["method"], "token");
    assert_eq!(reconcile["action"], "reconcile");
    assert_eq!(reconcile["params"], json!({"kind": "implicit"}));
    assert_eq!(reconcile["reason"], "agents back from maintenance");
    assert_eq!(reconcile["ok"], true);
    assert_eq!(reconcile["status"], 202);
    assert_eq!(reconcile["client"], "unknown");
    assert_eq!(reconcile["framework_id"], FRAMEWORK_ID);
    assert_eq!(service["who"], "alice");
    assert_eq!(service["action"], "service.put");
    assert_eq!(service["params"]["name"], "cache");
    assert_eq!(service["params"]["instances"], 2);
    assert_eq!(service["reason"], "more capacity");
    assert!(service["outcome"].as_str().unwrap().contains("created"));

    // Filters.
    assert_eq!(audit(&web, "?who=alice").await.len(), 1);
    assert_eq!(audit(&web, "?action=reconcile&outcome=ok").await.len(), 1);
    assert_eq!(audit(&web, "?outcome=failed").await.len(), 0);
    assert_eq!(audit(&web, "?q=MAINTENANCE").await.len(), 1);
    assert_eq!(audit(&web, "?limit=1").await.len(), 1);
    let r = web.send(get("/api/v1/audit?outcome=maybe")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    // The page, filtered.
    let html = web.send(get("/audit?who=bob")).await.text();
    assert!(html.contains("agents back from maintenance"), "{html}");
    assert!(!html.contains("more capacity"));
    assert!(html.contains(r#"<option value="bob" selected>"#), "{html}");
}

#[tokio::test]
async fn unknown_query_parameters_are_refused_naming_the_known_ones() {
    let web = TestWeb::leader();
    for path in ["/api/v1/audit?foo=bar", "/api/v1/audit?who=alice&limt=5"] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text());
        let detail = r.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.contains("unknown parameter"), "{path}: {detail}");
        assert!(detail.contains("limit"), "{path}: {detail}");
    }
    let r = web.send(get("/audit?foo=bar")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "the page too");
    assert!(audit(&web, "?who=alice&limit=5").await.is_empty());
}

#[tokio::test]
async fn oversized_reasons_are_refused_before_anything_runs() {
    let web = TestWeb::leader();
    let huge = "x".repeat(100 * 1024);

    // In a JSON body: past the body limit, 413 at once.
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/reconcile",
            &json!({ "reason": huge }),
        ))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    let detail = r.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains("65536 bytes") && detail.contains("reason: at most 1000 characters"),
        "{detail}"
    );

    // Within the body limit but past the reason's: 400 naming `reason`.
    let long = "y".repeat(2000);
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/actions/abdicate",
            &json!({ "reason": long }),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let problem = r.json();
    assert_eq!(problem["errors"][0]["field"], "reason");
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("at most 1000 characters (this one has 2000)"),
        "{problem}"
    );

    // In a query string (service changes; a 100 KB URL is beyond any
    // client's): 400 naming `reason`.
    let r = web
        .send(
            request(
                Method::DELETE,
                &format!("/api/v1/services/web?reason={}", "z".repeat(3000)),
            )
            .body(axum::body::Body::empty())
            .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert!(r.text().contains("this one has 3000"), "{}", r.text());

    // From a form: the page says so.
    let (cookie, token) = {
        let r = web.send(get("/actions")).await;
        (r.cookie("ma_csrf").unwrap(), r.csrf_field().unwrap())
    };
    let r = web
        .send(form_post(
            "/actions/reconcile",
            Some("http://127.0.0.1:8080"),
            &cookie,
            &[("csrf", &token), ("kind", "explicit"), ("reason", &long)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("at most 1000 characters"));

    assert!(web.core.received().is_empty(), "nothing ran");
    assert!(audit(&web, "").await.is_empty());
}

#[tokio::test]
async fn browser_posts_record_the_user_agent_and_reasons_are_escaped() {
    let web = TestWeb::leader();
    let r = web.send(get("/actions")).await;
    let (cookie, token) = (r.cookie("ma_csrf").unwrap(), r.csrf_field().unwrap());
    let mut post = form_post(
        "/actions/reconcile",
        Some("http://127.0.0.1:8080"),
        &cookie,
        &[
            ("csrf", &token),
            ("kind", "implicit"),
            ("reason", "<img src=x onerror=alert(1)> rolling restart"),
        ],
    );
    post.headers_mut()
        .insert(header::USER_AGENT, "Mozilla/5.0 (test)".parse().unwrap());
    let r = web.send(post).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    let entry = &audit(&web, "").await[0];
    assert_eq!(entry["who"], "local user");
    assert_eq!(entry["method"], "loopback");
    assert_eq!(entry["via"], "browser");
    assert_eq!(entry["user_agent"], "Mozilla/5.0 (test)");
    let html = web.send(get("/audit")).await.text();
    assert!(!html.contains("<img src=x"), "unescaped reason");
    assert!(html.contains("rolling restart"));
}
