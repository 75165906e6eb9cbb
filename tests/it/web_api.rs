//! The JSON API's read side with `oneshot`: state, tasks, offers, replicas,
//! events, services, health, readiness, metrics, the live stream, assets,
//! the executor binary, unknown routes; `serve`'s refusal to run with
//! unprotected actions. Actions and service changes: `web_actions.rs`;
//! connections (timeouts, the cap, live streams' share):
//! `web_connections.rs`.

use crate::support;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use mesos_appliance::coordination::Leadership;
use mesos_appliance::scheduler::FrameworkState;
use serde_json::json;
use support::web::*;

#[tokio::test]
async fn state_names_the_framework_and_the_leader() {
    let web = TestWeb::leader();
    let r = web.send(get("/api/v1/state")).await;
    assert_eq!(r.status, StatusCode::OK);
    let v = r.json();
    assert_eq!(v["framework"]["id"], FRAMEWORK_ID);
    assert_eq!(v["framework"]["name"], FRAMEWORK_NAME);
    assert_eq!(v["framework"]["state"], "subscribed");
    assert_eq!(v["framework"]["failover_timeout_seconds"], 604_800.0);
    assert_eq!(
        v["framework"]["master"],
        "http://master-1.cluster.test:5050"
    );
    // The sample's last event was 4 s before `now()`; ages are measured at
    // request time, later (`now()` is fixed once per test binary, so by
    // however long other tests ran before this one).
    let age = v["framework"]["heartbeat_age_seconds"].as_f64().unwrap();
    let since = mesos_appliance::util::unix_now_secs() - support::web::now();
    assert!(
        (4.0..10.0 + since).contains(&age),
        "{age} ({since}s since now())"
    );
    assert_eq!(v["framework"]["heartbeat_timeout_seconds"], 75.0);
    assert_eq!(v["leadership"]["role"], "leader");
    assert_eq!(v["leadership"]["leader_url"], "http://127.0.0.1:8080");
    assert_eq!(v["deployment"]["epoch"], 2);
    assert_eq!(v["counts"]["tasks"], 120);
    assert_eq!(v["counts"]["tasks_by_state"]["TASK_FAILED"], 6);
    assert_eq!(v["counts"]["active_tasks"], 114);
    assert_eq!(v["readiness"]["ready"], true);
}

/// An explicit reconciliation queued behind the cooldown is in
/// `/api/v1/state` and on the overview, with when it may start, before it
/// starts.
#[tokio::test]
async fn a_queued_reconciliation_is_shown_with_when_it_may_start() {
    use mesos_appliance::scheduler::{ReconcileKind, ReconcileOutcome, ReconcileTrigger};
    let web = TestWeb::leader();
    let v = web.send(get("/api/v1/state")).await.json();
    assert_eq!(v["reconciliation"]["queued"], json!([]));
    assert_eq!(v["reconciliation"]["not_before"], json!(null));
    let mut s = web.snapshot();
    let mut queued = s.reconciliation.history[0].clone();
    queued.id = 2;
    queued.kind = ReconcileKind::Explicit;
    queued.trigger = ReconcileTrigger::Manual;
    queued.started_at = now() - 2.0;
    queued.finished_at = None;
    queued.outcome = ReconcileOutcome::Queued;
    s.reconciliation.queued = vec![queued];
    // A cooldown that ends in 590 s (`now()` is fixed per test binary).
    let at = mesos_appliance::util::unix_now_secs() + 590.0;
    s.reconciliation.not_before = Some(at);
    web.publish(s);
    let v = web.send(get("/api/v1/state")).await.json();
    let q = &v["reconciliation"]["queued"][0];
    assert_eq!(
        (&q["id"], &q["kind"], &q["trigger"], &q["outcome"]),
        (
            &json!(2),
            &json!("explicit"),
            &json!("manual"),
            &json!("queued")
        )
    );
    assert_eq!(v["reconciliation"]["not_before"], at);
    let html = web.send(get("/")).await.text();
    let shown = html
        .split(r#"id="reconcile-queued">"#)
        .nth(1)
        .and_then(|rest| rest.split("</dd>").next())
        .expect("the queued line");
    assert!(
        shown.starts_with("explicit, manual, queued") && shown.contains(", starts in 9m"),
        "{shown}"
    );
}

/// A replica that has not read the stored records yet (a new leader
/// before its load) says so in every list and count, and on the pages:
/// its empty lists are not "no services, no tasks".
#[tokio::test]
async fn what_is_not_loaded_yet_is_shown_as_loading() {
    let web = TestWeb::leader();
    let v = web.send(get("/api/v1/state")).await.json();
    assert_eq!(v["counts"]["loading"], false);
    let mut s = web.snapshot();
    s.loading = true;
    s.tasks = Default::default();
    s.services.clear();
    web.publish(s);
    let v = web.send(get("/api/v1/state")).await.json();
    assert_eq!(
        (&v["counts"]["tasks"], &v["counts"]["loading"]),
        (&json!(0), &json!(true))
    );
    let v = web.send(get("/api/v1/services")).await.json();
    assert_eq!(v["loading"], true);
    let v = web.send(get("/api/v1/tasks")).await.json();
    assert_eq!(v["loading"], true);
    let html = web.send(get("/")).await.text();
    assert!(html.contains(r#"id="counts-loading""#), "{html}");
    assert!(html.contains(r#"id="loading""#), "the services: loading");
    assert!(!html.contains("No services defined."));
    assert!(!html.contains("no task records"));
    let html = web.send(get("/services")).await.text();
    assert!(html.contains(r#"id="loading""#) && !html.contains("No services defined."));
    // A lookup is not a confident 404 either: it may be stored.
    for path in ["/api/v1/services/web", "/api/v1/tasks/web.0.x"] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:loading");
    }
    let mut s = web.snapshot();
    s.loading = false;
    web.publish(s);
    for path in ["/api/v1/services/web", "/api/v1/tasks/web.0.x"] {
        assert_eq!(
            web.send(get(path)).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[tokio::test]
async fn follower_state_names_the_leader() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot("http://127.0.0.1:8080", "http://sched-a.test:8080", 10),
    );
    let v = web.send(get("/api/v1/state")).await.json();
    assert_eq!(v["leadership"]["role"], "follower");
    assert_eq!(v["leadership"]["leader_url"], "http://sched-a.test:8080");
    assert_eq!(v["framework"]["state"], "standby");
    assert_eq!(v["framework"]["id"], FRAMEWORK_ID);
}

#[tokio::test]
async fn tasks_are_paged_filtered_and_sorted() {
    let web = TestWeb::leader();
    let v = web.send(get("/api/v1/tasks")).await.json();
    assert_eq!(v["tasks"].as_array().unwrap().len(), 50);
    assert_eq!(
        (v["total"].clone(), v["pages"].clone()),
        (json!(120), json!(3))
    );
    let first = &v["tasks"][0];
    for key in ["id", "service", "state", "agent_id", "hostname", "updated"] {
        assert!(!first[key].is_null(), "{key} missing in {first}");
    }

    let v = web.send(get("/api/v1/tasks?page=3")).await.json();
    assert_eq!(v["tasks"].as_array().unwrap().len(), 20);

    let v = web
        .send(get(
            "/api/v1/tasks?service=batch&state=TASK_RUNNING&per_page=1000",
        ))
        .await
        .json();
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(v["matched"], tasks.len());
    assert!(!tasks.is_empty());
    assert!(
        tasks
            .iter()
            .all(|t| t["service"] == "batch" && t["state"] == "TASK_RUNNING")
    );

    let v = web.send(get("/api/v1/tasks?state=terminal")).await.json();
    assert_eq!(v["matched"], 6);

    let v = web
        .send(get("/api/v1/tasks?q=agent-3.&per_page=500"))
        .await
        .json();
    assert_eq!(v["matched"], 15);

    let v = web
        .send(get("/api/v1/tasks?sort=updated&order=desc&per_page=10000"))
        .await
        .json();
    let updated: Vec<f64> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["updated"].as_f64().unwrap())
        .collect();
    assert!(updated.windows(2).all(|w| w[0] >= w[1]));

    let r = web
        .send(get("/api/v1/tasks?sort=colour&per_page=0&state=RUNNIN"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let fields = r.error_fields();
    assert_eq!(fields, ["state", "sort", "per_page"]);
}

#[tokio::test]
async fn query_errors_say_what_is_expected_and_paging_past_the_end_is_empty() {
    let web = TestWeb::leader();
    let problem = |v: serde_json::Value| {
        (
            v["errors"][0]["field"].as_str().unwrap().to_string(),
            v["errors"][0]["message"].as_str().unwrap().to_string(),
        )
    };
    for query in ["page=-1", "page=0", "page=x", "page=1.5"] {
        let r = web.send(get(&format!("/api/v1/tasks?{query}"))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        let (field, message) = problem(r.json());
        assert_eq!(field, "page");
        assert_eq!(message, "must be a whole number ≥ 1", "{query}");
    }
    let r = web.send(get("/api/v1/tasks?per_page=0")).await;
    assert_eq!(
        problem(r.json()),
        (
            "per_page".into(),
            "must be a whole number from 1 to 10000".into()
        )
    );
    // Past the last page: no rows, the true page count.
    for (query, pages) in [("page=99", 3), ("page=4&state=terminal", 1)] {
        let r = web.send(get(&format!("/api/v1/tasks?{query}"))).await;
        assert_eq!(r.status, StatusCode::OK, "{query}");
        let v = r.json();
        assert_eq!(v["tasks"].as_array().unwrap().len(), 0, "{query}");
        assert_eq!(v["pages"], pages, "{query}");
    }
    // Unknown event kinds are refused, listing the known ones; a known
    // kind with no events is just empty.
    let r = web.send(get("/api/v1/events?kind=garbage")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let (field, message) = problem(r.json());
    assert_eq!(field, "kind");
    assert!(
        message.contains("\"garbage\"") && message.contains("leadership, message"),
        "{message}"
    );
    let r = web.send(get("/api/v1/events?kind=launch")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["events"].as_array().unwrap().len(), 0);
    let r = web.send(get("/events?kind=garbage")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "the page too");
}

#[tokio::test]
async fn state_filters_take_mesos_names_with_or_without_prefix() {
    let web = TestWeb::leader();
    let matched = |v: serde_json::Value| (v["matched"].clone(), v["filter"]["state"].clone());
    let full = web
        .send(get("/api/v1/tasks?state=TASK_RUNNING"))
        .await
        .json();
    assert_eq!(matched(full.clone()).1, "TASK_RUNNING");
    for name in ["running", "RUNNING", "Task_Running"] {
        let r = web.send(get(&format!("/api/v1/tasks?state={name}"))).await;
        assert_eq!(r.status, StatusCode::OK, "{name}: {}", r.text());
        assert_eq!(matched(r.json()), matched(full.clone()), "{name}");
    }
    let r = web.send(get("/api/v1/tasks?state=ACTIVE")).await;
    assert_eq!(r.json()["filter"]["state"], "active");
    // Unknown names are refused, naming the states, on the API and the page.
    for name in ["TASK_BOGUS", "bogus", "TASK_"] {
        let r = web.send(get(&format!("/api/v1/tasks?state={name}"))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        let detail = r.json()["errors"][0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            detail.contains("TASK_RUNNING") && detail.contains("TASK_GONE_BY_OPERATOR"),
            "{detail}"
        );
        let r = web.send(get(&format!("/tasks?state={name}"))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
    }
    let r = web.send(get("/tasks?state=killed")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text().contains(r#"<option value="TASK_FAILED""#));
}

/// The task list's sorts and text search are made once per snapshot and
/// then carried into the next one (`src/web/views/index`): each answer
/// still shows the snapshot it was asked of — a task that moved host
/// moves in the host order, a new task is found, a gone one is not.
#[tokio::test]
async fn sorted_and_searched_lists_follow_each_new_snapshot() {
    let web = TestWeb::leader();
    let first_id = |v: &serde_json::Value| v["tasks"][0]["id"].as_str().unwrap().to_string();
    let by_host = "/api/v1/tasks?sort=host&per_page=10000";
    let v = web.send(get(by_host)).await.json();
    let gone = first_id(&v);
    let moving = v["tasks"][119]["id"].as_str().unwrap().to_string();
    assert_eq!(
        web.send(get(&format!("/api/v1/tasks?q={gone}")))
            .await
            .json()["matched"],
        1
    );

    let mut s = (**web.snapshots.borrow()).clone();
    let mut tasks: Vec<_> = s.tasks.iter().cloned().collect();
    tasks.retain(|t| t.task_id != gone.as_str());
    for t in tasks.iter_mut() {
        if t.task_id == moving.as_str() {
            let mut moved = (**t).clone();
            moved.hostname = "a-first.cluster.test".into();
            *t = std::sync::Arc::new(moved);
        }
    }
    let mut new = sample_task(5000, 1);
    new.task_id = "zz.new.task".into();
    tasks.push(std::sync::Arc::new(new));
    tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    s.tasks = tasks.into();
    web.snapshots.send_replace(std::sync::Arc::new(s.clone()));

    let v = web.send(get(by_host)).await.json();
    assert_eq!(v["total"], 120);
    assert_eq!(first_id(&v), moving, "moved to the first host");
    assert!(
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["id"] != gone.as_str())
    );
    let found = |q: &str| {
        let web = &web;
        let path = format!("/api/v1/tasks?q={q}");
        async move { web.send(get(&path)).await.json()["matched"].clone() }
    };
    assert_eq!(found("zz.new").await, 1);
    assert_eq!(found(&gone).await, 0);
    assert_eq!(found("a-first").await, 1);

    // A snapshot sharing the task list (a command's answer).
    s.at += 1.0;
    web.snapshots.send_replace(std::sync::Arc::new(s));
    assert_eq!(first_id(&web.send(get(by_host)).await.json()), moving);
    assert_eq!(found("zz.new").await, 1);
}

#[tokio::test]
async fn one_task_with_its_timeline() {
    let web = TestWeb::leader();
    let id = web.snapshot().tasks[0].task_id.clone();
    let v = web.send(get(&format!("/api/v1/tasks/{id}"))).await.json();
    assert_eq!(v["task"]["id"], id.as_str());
    let timeline = v["timeline"].as_array().unwrap();
    assert!(timeline.len() >= 2);
    assert!(
        timeline[0]["at"].as_f64() > timeline[1]["at"].as_f64(),
        "newest first"
    );
    let r = web.send(get("/api/v1/tasks/nope")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json()["type"], "urn:mesos-appliance:problem:not-found");
}

#[tokio::test]
async fn offers_replicas_events_services() {
    let web = TestWeb::leader();
    let v = web.send(get("/api/v1/offers")).await.json();
    assert_eq!(v["offers"].as_array().unwrap().len(), 2);
    assert_eq!(v["leading"], true);

    let v = web.send(get("/api/v1/replicas")).await.json();
    let replicas = v["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 1);
    assert_eq!(replicas[0]["leader"], true);
    assert_eq!(replicas[0]["this"], true);
    assert_eq!(replicas[0]["subscription"], "subscribed");
    assert_eq!(replicas[0]["advertised_url"], "http://127.0.0.1:8080");
    assert!(v["error"].is_null());

    let v = web.send(get("/api/v1/events")).await.json();
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 4);
    assert_eq!(events[0]["kind"], "error", "newest first");
    let v = web.send(get("/api/v1/events?kind=leadership")).await.json();
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
    let r = web.send(get("/api/v1/events?limit=x")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    let v = web.send(get("/api/v1/services")).await.json();
    let names: Vec<&str> = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["batch", "web"]);
    assert_eq!(v["services"][1]["spec"]["instances"], 90);
    let r = web.send(get("/api/v1/services/web")).await;
    assert_eq!(r.json()["running"], 78);
    assert_eq!(
        web.send(get("/api/v1/services/nope")).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn health_and_readiness() {
    let web = TestWeb::leader();
    let r = web.send(get("/healthz")).await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "ok\n"));
    let r = web.send(get("/readyz")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["ready"], true);

    let mut s = web.snapshot();
    s.framework.state = FrameworkState::Removed;
    s.framework.reason = Some("Framework has been removed".into());
    web.publish(s.clone());
    let r = web.send(get("/readyz")).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let v = r.json();
    assert_eq!(v["state"], "removed");
    assert!(v["reason"].as_str().unwrap().contains("removed"), "{v}");

    let follower = follower_snapshot("http://127.0.0.1:8080", "http://sched-a.test:8080", 1);
    web.publish(follower.clone());
    assert_eq!(web.send(get("/readyz")).await.status, StatusCode::OK);

    let mut candidate = follower;
    candidate.leadership = Leadership::Candidate;
    web.publish(candidate);
    assert_eq!(
        web.send(get("/readyz")).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Liveness does not depend on any of that.
    assert_eq!(web.send(get("/healthz")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn ages_are_measured_at_request_time_not_snapshot_time() {
    // Nothing changed for 100 s, so the latest snapshot is 100 s old and
    // was made right after the last event from the master: the master has
    // been silent since, longer than the heartbeat timeout (75 s).
    let mut s = leader_snapshot("http://127.0.0.1:8080", 3);
    s.at = now() - 100.0;
    s.framework.last_event_at = Some(now() - 100.0);
    let web = TestWeb::new(test_config(), s.clone());
    let v = web.send(get("/api/v1/state")).await.json();
    let age = v["framework"]["heartbeat_age_seconds"].as_f64().unwrap();
    assert!((100.0..110.0).contains(&age), "{age}");
    assert_eq!(v["readiness"]["ready"], false, "{v}");
    let r = web.send(get("/readyz")).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let reason = r.json()["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("heartbeat timeout of 1m 15s"), "{reason}");
    let html = web.send(get("/")).await.text();
    assert!(html.contains("<dt>Last event</dt><dd>1m 4"), "{html}");
    assert!(html.contains("not ready"));

    // Silent for 60 s: late, but within the heartbeat timeout.
    s.framework.last_event_at = Some(now() - 60.0);
    web.publish(s);
    let r = web.send(get("/readyz")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

#[tokio::test]
async fn metrics_in_openmetrics_text() {
    let web = TestWeb::leader();
    let router = web.router();
    send(router.clone(), get("/api/v1/state")).await;
    let r = send(router, get("/metrics")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = r.text();
    assert!(
        text.contains("mesos_appliance_framework_subscribed 1"),
        "{text}"
    );
    assert!(
        text.contains(r#"mesos_appliance_http_requests_total{method="GET",route="/api/v1/state",status="200"} 1"#),
        "{text}"
    );
    assert!(text.contains("http_request_duration_seconds_bucket"));
    assert!(text.ends_with("# EOF\n"));
    assert_eq!(text.matches("# EOF").count(), 1);
}

#[tokio::test]
async fn unknown_routes_are_404_in_html_and_json() {
    let web = TestWeb::leader();
    let r = web.send(get("/no/such/page")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(r.text().contains("no such page"));
    let r = web.send(get("/api/v1/nothing")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(r.json()["status"], 404);
    // Like every page outside /api/, a missing asset is an HTML page.
    let r = web.send(get("/static/nothing.js")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
}

#[tokio::test]
async fn assets_and_security_headers() {
    let web = TestWeb::leader();
    let r = web.send(get("/static/app.css")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
    let r = web.send(get("/static/app.js")).await;
    assert!(r.text().contains("EventSource"));
    // The icon, where pages link it and where browsers look by default.
    for path in ["/static/favicon.svg", "/favicon.ico"] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert_eq!(r.header("content-type"), Some("image/svg+xml"), "{path}");
        assert!(r.text().starts_with("<svg"), "{path}");
    }
    let r = web.send(get("/")).await;
    assert!(
        r.text()
            .contains(r#"<link rel="icon" href="/static/favicon.svg?v="#)
    );
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert!(
        r.header("content-security-policy")
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
}

#[tokio::test]
async fn static_dir_overrides_compiled_in_assets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.css"), "body{color:red}").unwrap();
    let mut config = test_config();
    config.static_dir = Some(dir.path().to_path_buf());
    let web = TestWeb::new(config, leader_snapshot("http://127.0.0.1:8080", 1));
    assert_eq!(
        web.send(get("/static/app.css")).await.text(),
        "body{color:red}"
    );
    assert!(
        web.send(get("/static/app.js"))
            .await
            .text()
            .contains("EventSource")
    );
    let r = web.send(get("/static/nothing.css")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
}

#[tokio::test]
async fn the_executor_binary_is_served_at_a_versioned_url_when_configured() {
    use mesos_appliance::executor::info::ServedExecutor;
    let web = TestWeb::leader();
    let r = web.send(get("/executor/mesos-appliance-executor")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let file = tempfile::NamedTempFile::new().unwrap();
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(file.path(), &bytes).unwrap();
    let served = ServedExecutor::open(file.path()).unwrap();
    let mut config = test_config();
    config.executor_binary = Some(served.clone());
    let web = TestWeb::new(config, leader_snapshot("http://127.0.0.1:8080", 1));
    let path = format!("/executor/{}/mesos-appliance-executor", served.version);
    let r = web.send(get(&path)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body, bytes);
    assert_eq!(r.header("content-length"), Some("300000"));
    assert!(r.header("cache-control").unwrap().contains("immutable"));
    // The unversioned path of older releases still serves the binary.
    let r = web.send(get("/executor/mesos-appliance-executor")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body, bytes);
    // Another version is not this binary: no fetcher cache entry may map
    // its URL to these bytes.
    let r = web
        .send(get("/executor/0.0.1-000000000000/mesos-appliance-executor"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn serve_refuses_unprotected_addresses() {
    use mesos_appliance::web::{ServeError, serve};
    let mut config = test_config();
    config.listen = "0.0.0.0:0".parse().unwrap();
    let web = TestWeb::new(config.clone(), leader_snapshot("http://x", 1));
    let err = serve(web.state.clone(), std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(err, ServeError::Unprotected(_)), "{err}");
    assert!(err.to_string().contains("--admin-token-file"));

    // Loopback serves, and stops on shutdown even with a live stream open.
    let mut config = test_config();
    config.listen = "127.0.0.1:0".parse().unwrap();
    let web = TestWeb::new(config, leader_snapshot("http://x", 1));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = serve(web.state.clone(), async {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    let base = format!("http://{}", server.addr);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let mut stream = client
        .get(format!("{base}/api/v1/stream"))
        .send()
        .await
        .unwrap()
        .bytes_stream();
    use futures::StreamExt;
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("event: snapshot"));
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server.task)
        .await
        .expect("server stops")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_live_stream_sends_new_snapshots() {
    use futures::StreamExt;
    let web = TestWeb::leader();
    let response = tower::ServiceExt::oneshot(web.router(), get("/api/v1/stream"))
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body().into_data_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains(r#""tasks":120"#));
    let mut s = web.snapshot();
    s.tasks = s.tasks[..7].into();
    s.at += 5.0;
    web.publish(s);
    let next = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&next).contains(r#""tasks":7"#));
}

#[tokio::test]
async fn replicas_fall_back_to_what_this_replica_knows() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot("http://127.0.0.1:8080", "http://sched-a.test:8080", 1),
    );
    // The in-memory coordinator lists nobody once closed.
    web.state.coordinator.close().await;
    let v = web.send(get("/api/v1/replicas")).await.json();
    assert!(v["error"].as_str().unwrap().contains("not in the election"));
    let urls: Vec<&str> = v["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["advertised_url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["http://sched-a.test:8080", "http://127.0.0.1:8080"]);
    assert_eq!(v["replicas"][0]["leader"], true);
    let html = web.send(get("/replicas")).await.text();
    assert!(html.contains("<strong>incomplete</strong>"));
}

#[tokio::test]
async fn undecodable_paths_are_400_not_panics() {
    let web = TestWeb::leader();
    for path in [
        "/tasks/%FF%FE",
        "/api/v1/tasks/%FF",
        "/api/v1/services/%C3%28",
        "/static/%FF",
    ] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        assert!(
            !r.header("content-type").unwrap().starts_with("text/plain"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn every_mutating_route_refuses_form_and_text_types_even_without_a_body() {
    let web = TestWeb::leader();
    let routes = [
        (Method::PUT, "/api/v1/services/web"),
        (Method::DELETE, "/api/v1/services/web"),
        (Method::POST, "/api/v1/actions/abdicate"),
    ];
    for (method, path) in routes {
        for content_type in [
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=xyz",
            "text/plain",
        ] {
            let r = web
                .send(
                    request(method.clone(), path)
                        .header(header::CONTENT_TYPE, content_type)
                        .body(Body::empty())
                        .unwrap(),
                )
                .await;
            assert_eq!(
                r.status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{method} {path} as {content_type}: {}",
                r.text()
            );
            assert_eq!(
                r.json()["type"],
                "urn:mesos-appliance:problem:unsupported-media-type"
            );
        }
    }
    assert!(web.core.received().is_empty(), "{:?}", web.core.received());
    // Without a declared type, an empty DELETE still acts.
    let r = web
        .send(
            request(Method::DELETE, "/api/v1/services/web")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_ne!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.text());
    assert_eq!(web.core.received(), ["delete_service"]);
}

#[tokio::test]
async fn unknown_query_parameters_are_named_and_long_uris_are_problems() {
    let web = TestWeb::leader();
    for (path, parameter) in [
        ("/api/v1/tasks?stat=TASK_FAILED", "stat"),
        ("/api/v1/tasks?state=TASK_RUNNING&perpage=5", "perpage"),
        ("/api/v1/events?kind=agent&limt=5", "limt"),
    ] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        let v = r.json();
        assert_eq!(v["errors"][0]["field"], parameter, "{path}: {v}");
        assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{path}: {v}");
        assert!(
            v["detail"].as_str().unwrap().contains("unknown parameter"),
            "{v}"
        );
    }
    for path in [
        "/api/v1/tasks?state=TASK_RUNNING&per_page=5&health=&q=&sort=id&order=asc&page=1&service=web",
        "/api/v1/events?kind=agent&limit=5",
    ] {
        assert_eq!(web.send(get(path)).await.status, StatusCode::OK, "{path}");
    }

    // A URI past the limit: the usual problem document, not an empty body.
    let long = "x".repeat(mesos_appliance::web::query::MAX_URI_BYTES);
    let r = web.send(get(&format!("/api/v1/tasks?q={long}"))).await;
    assert_eq!(r.status, StatusCode::URI_TOO_LONG);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let v = r.json();
    assert_eq!(v["type"], "urn:mesos-appliance:problem:uri-too-long");
    assert!(
        v["detail"].as_str().unwrap().contains("at most 8192"),
        "{v}"
    );
    let r = web.send(get(&format!("/tasks?q={long}"))).await;
    assert_eq!(r.status, StatusCode::URI_TOO_LONG);
    assert!(r.text().contains("URI too long"));
    let fits = "x".repeat(mesos_appliance::web::query::MAX_URI_BYTES - 100);
    let r = web.send(get(&format!("/api/v1/tasks?q={fits}"))).await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn a_task_that_is_ending_or_ended_is_not_healthy() {
    use mesos_appliance::mesos::v1::TaskState;
    use mesos_appliance::scheduler::{KillRequest, TaskRecord};
    let mut s = leader_snapshot("http://127.0.0.1:8080", 3);
    let mut tasks: Vec<TaskRecord> = s.tasks.iter().take(3).map(|t| (**t).clone()).collect();
    for t in &mut tasks {
        t.state = TaskState::TaskRunning;
        t.kill = None;
        t.healthy = Some(true);
        t.healthy_since = Some(t.updated_at);
    }
    tasks[1].kill = Some(KillRequest {
        reason: "scaled down".into(),
        requested_at: tasks[1].updated_at,
        attempts: 1,
    });
    // A record stored before terminal updates cleared `healthy`.
    tasks[2].state = TaskState::TaskKilled;
    let live = tasks[0].task_id.to_string();
    s.tasks = tasks.into_iter().map(std::sync::Arc::new).collect();
    let web = TestWeb::new(test_config(), s);
    let v = web.send(get("/api/v1/tasks?health=healthy")).await.json();
    let ids: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [live.as_str()]);
    let v = web.send(get("/api/v1/tasks?health=unknown")).await.json();
    assert_eq!(v["matched"], 2);
    for t in v["tasks"].as_array().unwrap() {
        assert!(t.get("healthy").is_none(), "{t}");
    }
}

/// The Marathon `/v2` subset answers in Marathon's shape everywhere under
/// `/v2`: an app's task list, `{"message"}` for another method (405,
/// `Allow: GET`) and for a path outside the subset (404), never HTML.
#[tokio::test]
async fn the_marathon_subset_answers_marathon_json_under_all_of_v2() {
    let web = TestWeb::leader();
    let all = web.send(get("/v2/apps/web")).await.json();
    let tasks = web.send(get("/v2/apps/web/tasks")).await;
    assert_eq!(tasks.status, StatusCode::OK, "{}", tasks.text());
    let tasks = tasks.json();
    assert_eq!(tasks["tasks"], all["app"]["tasks"], "{tasks}");
    assert!(!tasks["tasks"].as_array().unwrap().is_empty());
    let missing = web.send(get("/v2/apps/nope/tasks")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["message"], "App '/nope' does not exist");
    for path in ["/v2/info", "/v2/leader", "/v2/groups/x", "/v2", "/v2/"] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert!(
            r.json()["message"].as_str().unwrap().contains("not served"),
            "{path}"
        );
    }
    // An ID that is not UTF-8 once decoded: Marathon's body too.
    let r = web.send(get("/v2/apps/%FF")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json()["message"].as_str().unwrap().contains("UTF-8"),
        "{}",
        r.text()
    );
    for (method, path) in [
        (Method::POST, "/v2/apps"),
        (Method::PUT, "/v2/apps/web"),
        (Method::DELETE, "/v2/apps/web"),
        (Method::POST, "/v2/tasks"),
    ] {
        let r = web
            .send(request(method.clone(), path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert_eq!(r.header("allow"), Some("GET"), "{method} {path}");
        assert!(r.json()["message"].as_str().unwrap().contains("read-only"));
    }
    assert!(web.core.received().is_empty());
}
