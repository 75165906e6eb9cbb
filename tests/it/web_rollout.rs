//! A service's rollout resumed or rolled back, through the API
//! (`POST /api/v1/services/{name}/rollout/{resume|rollback}`) and through
//! the services page's buttons (`POST /actions/resume`, `/actions/rollback`):
//! the admin token, Origin and CSRF rules, 404 for an unknown service or
//! action, 409 when there is no halted rollout or no previous spec, and the
//! success paths with their records. The sample snapshot has service `web`
//! halted with a previous spec and service `batch` with neither.

use crate::support;

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use serde_json::json;
use support::web::*;

const ORIGIN: Option<&str> = Some("http://127.0.0.1:8080");

fn post(path: &str) -> axum::http::request::Builder {
    request(Method::POST, path)
}

fn empty(b: axum::http::request::Builder) -> axum::http::Request<Body> {
    b.body(Body::empty()).unwrap()
}

/// Whether `service`'s rollout is halted in the current snapshot.
fn halted(web: &TestWeb, service: &str) -> bool {
    web.snapshot()
        .services
        .iter()
        .find(|x| x.spec.name == service)
        .and_then(|x| x.rollout.as_ref())
        .is_some_and(|r| r.halted.is_some())
}

#[tokio::test]
async fn resume_and_rollback_need_the_admin_token_and_a_same_origin() {
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 8),
    );
    for path in [
        "/api/v1/services/web/rollout/resume",
        "/api/v1/services/web/rollout/rollback",
    ] {
        let r = web.send(empty(post(path))).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
        let r = web
            .send(empty(
                post(path).header(header::AUTHORIZATION, "Bearer wrong"),
            ))
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!r.text().contains(TOKEN));
        // A browser on another origin cannot, even with the token.
        let r = web
            .send(empty(
                post(path)
                    .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                    .header(header::ORIGIN, "http://evil.test"),
            ))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:cross-origin");
    }
    assert!(web.core.received().is_empty(), "nothing reached the core");
    assert!(halted(&web, "web"));

    let r = web
        .send(
            post("/api/v1/services/web/rollout/resume")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"reason":"the registry is back"}"#))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let v = r.json();
    assert_eq!(v["action"], "resume");
    assert_eq!(v["service"], "web");
    assert_eq!(v["by"], "admin");
    assert_eq!(v["reason"], "the registry is back");
    assert_eq!(v["summary"], "rollout of service web resumed");
    assert!(!halted(&web, "web"));
    assert_eq!(web.core.received(), ["rollout"]);
}

#[tokio::test]
async fn unknown_services_actions_and_inapplicable_rollouts_are_refused() {
    let web = TestWeb::leader();
    let r = web
        .send(empty(post("/api/v1/services/web/rollout/pause")))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.text().contains("resume, rollback"), "{}", r.text());
    assert!(web.core.received().is_empty());

    let r = web
        .send(empty(post("/api/v1/services/nosuch/rollout/resume")))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    assert!(r.text().contains("nosuch"));

    // `batch` has no halted rollout and no previous spec.
    for action in ["resume", "rollback"] {
        let r = web
            .send(empty(post(&format!(
                "/api/v1/services/batch/rollout/{action}"
            ))))
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{action}: {}", r.text());
        assert!(r.text().contains("batch"), "{}", r.text());
    }

    // Bodies are checked as for the other actions.
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/services/web/rollout/rollback",
            &json!({"force": true}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "force");
    let r = web
        .send(
            post("/api/v1/services/web/rollout/rollback")
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        web.core.received(),
        ["rollout", "rollout", "rollout"],
        "the unknown service and the two conflicts asked the core"
    );

    // Rollback applies to `web`; then a resume has nothing to resume.
    let r = web
        .send(empty(post("/api/v1/services/web/rollout/rollback")))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        r.json()["summary"],
        "service web rolled back to its previous spec"
    );
    let r = web
        .send(empty(post("/api/v1/services/web/rollout/resume")))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());

    // Every outcome is kept, newest first.
    let recent = web.send(get("/api/v1/actions")).await.json();
    let statuses: Vec<u64> = recent["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [409, 200, 409, 409, 404]);
}

#[tokio::test]
async fn a_follower_points_rollout_actions_at_the_leader() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot("http://127.0.0.1:8080", "http://sched-a.test:8080", 8),
    );
    let r = web
        .send(empty(post("/api/v1/services/web/rollout/resume")))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        r.header("location"),
        Some("http://sched-a.test:8080/api/v1/services/web/rollout/resume")
    );
    assert!(web.core.received().is_empty());
}

#[tokio::test]
async fn the_buttons_check_origin_and_csrf_then_show_the_result() {
    let web = TestWeb::leader();
    let r = web.send(get("/services")).await;
    assert_eq!(r.status, StatusCode::OK);
    let cookie = r.cookie("ma_csrf").expect("csrf cookie");
    let token = r.csrf_field().expect("csrf field");
    let html = r.text();
    assert!(html.contains(r#"id="resume-web""#), "{html}");
    assert!(html.contains(r#"id="rollback-web""#));
    assert!(!html.contains(r#"id="resume-batch""#));

    // Another origin, a missing or wrong CSRF field: refused, nothing done.
    let fields = [("csrf", token.as_str()), ("service", "web")];
    let evil = form_post(
        "/actions/resume",
        Some("http://evil.test"),
        &cookie,
        &fields,
    );
    assert_eq!(web.send(evil).await.status, StatusCode::FORBIDDEN);
    for csrf in ["", "garbage"] {
        let r = web
            .send(form_post(
                "/actions/rollback",
                ORIGIN,
                &cookie,
                &[("csrf", csrf), ("service", "web")],
            ))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{csrf:?}");
        assert!(r.text().contains("CSRF"));
    }
    let r = web
        .send(form_post(
            "/actions/resume",
            ORIGIN,
            &cookie,
            &[("csrf", &token)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "no service named");
    assert!(web.core.received().is_empty());

    // The real thing: post, redirect, result page.
    let r = web
        .send(form_post("/actions/resume", ORIGIN, &cookie, &fields))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    let html = web.send(get(r.header("location").unwrap())).await.text();
    assert!(html.contains("rollout of service web resumed"), "{html}");
    assert!(!halted(&web, "web"));
    // Resuming again conflicts, and the result page says so.
    let r = web
        .send(form_post("/actions/resume", ORIGIN, &cookie, &fields))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let html = web.send(get(r.header("location").unwrap())).await.text();
    assert!(html.contains("failed (409)"), "{html}");
    assert_eq!(web.core.received(), ["rollout", "rollout"]);
    let html = web.send(get("/services")).await.text();
    assert!(
        !html.contains(r#"id="resume-web""#),
        "nothing left to resume"
    );
}

#[tokio::test]
async fn a_rollback_names_its_target_and_refuses_a_stale_or_repeated_one() {
    let web = TestWeb::leader();
    // The target is shown before anyone clicks: in the API and on the page.
    let api = web.send(get("/api/v1/services")).await.text();
    assert!(api.contains(RESTORE_FINGERPRINT), "{api}");
    let page = web.send(get("/services")).await;
    let html = page.text();
    assert!(html.contains(r#"id="restore-web""#), "{html}");
    assert!(
        html.contains(&format!(r#"name="expected" value="{RESTORE_FINGERPRINT}""#)),
        "the button posts what it showed"
    );
    let stale = "/api/v1/services/web/rollout/rollback?expected=ffffffffffffffff";
    let r = web.send(empty(post(stale))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    let r = web
        .send(json_request(
            Method::POST,
            &format!("/api/v1/services/web/rollout/rollback?expected={RESTORE_FINGERPRINT}"),
            &json!({"expected": "ffffffffffffffff"}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.json()["errors"][0]["field"], "expected");
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/services/web/rollout/rollback",
            &json!({"expected": RESTORE_FINGERPRINT, "reason": "bad release"}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    // A double click does not roll forward.
    let again = format!("/api/v1/services/web/rollout/rollback?expected={RESTORE_FINGERPRINT}");
    let r = web.send(empty(post(&again))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
}

/// `POST /api/v1/services/{name}/restart` (the contract in
/// `docs/health-checks.md`): admin token and same origin, 202 with the record,
/// audited as `restart` with who and why; 404 unknown, 409 while a rollout
/// is halted; the browser twin `POST /actions/restart` checks CSRF.
#[tokio::test]
async fn a_rolling_restart_is_accepted_audited_and_refused_when_it_does_not_apply() {
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 8),
    );
    let path = "/api/v1/services/batch/restart";
    let r = web.send(empty(post(path))).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = web
        .send(empty(
            post(path)
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .header(header::ORIGIN, "http://evil.test"),
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(web.core.received().is_empty(), "nothing reached the core");

    let authed = |path: &str, body: &'static str| {
        post(path)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap()
    };
    let r = web.send(authed(path, r#"{"reason":"new certs"}"#)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let v = r.json();
    assert_eq!(v["action"], "restart");
    assert_eq!(v["service"], "batch");
    assert_eq!(v["status"], 202);
    assert_eq!(v["reason"], "new certs");
    let audit = web
        .send(
            request(Method::GET, "/api/v1/audit")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .json();
    let entry = &audit["entries"][0];
    assert_eq!(entry["action"], "restart", "{audit}");
    assert_eq!(entry["who"], "admin", "{audit}");
    assert_eq!(entry["reason"], "new certs");
    assert_eq!(entry["params"]["service"], "batch");

    // `web`'s rollout is halted: 409; unknown: 404; unknown field: 400.
    let r = web.send(authed("/api/v1/services/web/restart", "{}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    let r = web
        .send(authed("/api/v1/services/nosuch/restart", ""))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    let r = web.send(authed(path, r#"{"why":"x"}"#)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.json()["errors"][0]["field"], "why");
    assert_eq!(web.core.received(), ["rollout", "rollout", "rollout"]);
}
