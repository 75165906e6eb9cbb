//! The Agents page and `/api/v1/agents`: the leader's agent table with each
//! agent's hostname, state, since when and this framework's tasks there;
//! each drain's progress, and the Drain (confirmation form) and Cancel
//! buttons with the checks of every browser action.

use crate::support;

use axum::http::StatusCode;
use mesos_appliance::scheduler::drains::{
    DrainProgress, DrainRecord, DrainState, DrainStatus, DrainTask, MinHealthy, ThenAction,
};
use mesos_appliance::scheduler::snapshot::{AgentState, AgentStatus};
use support::web::*;

fn agent(id: &str, state: AgentState, tasks: &[&str]) -> AgentStatus {
    AgentStatus {
        agent_id: id.into(),
        hostname: format!("{id}.example"),
        state,
        since: now() - 90.0,
        registered_time: None,
        reregistered_time: None,
        maintenance: None,
        tasks: tasks.iter().map(|t| (*t).into()).collect(),
        drain: None,
    }
}

#[tokio::test]
async fn the_agents_page_and_its_json_twin_show_the_table() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    s.agents = vec![
        agent("S0", AgentState::Active, &["web.0.a"]),
        agent("S1", AgentState::Draining, &["web.1.b"]),
        agent("S2", AgentState::Drained, &[]),
    ];
    let web = TestWeb::new(test_config(), s);

    let r = web.send(get("/agents")).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(
        html.contains(r#"<a href="/agents" class="on">Agents</a>"#),
        "{html}"
    );
    assert!(html.contains(r#"href="/api/v1/agents""#));
    let row = html.split(r#"data-agent="S1""#).nth(1).unwrap();
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("S1.example"), "{row}");
    assert!(row.contains(">draining<"), "{row}");
    assert!(row.contains(r#"href="/tasks/web.1.b""#), "{row}");
    assert!(row.contains("ago"), "{row}");
    assert!(html.contains(">drained<"));

    let v = web.send(get("/api/v1/agents")).await.json();
    assert_eq!(v["leading"], true);
    let agents = v["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3);
    assert_eq!(agents[1]["agent_id"], "S1");
    assert_eq!(agents[1]["hostname"], "S1.example");
    assert_eq!(agents[1]["state"], "draining");
    assert_eq!(agents[1]["tasks"], serde_json::json!(["web.1.b"]));
    assert!(agents[1]["since"].as_f64().unwrap() > 0.0);
    assert!(agents[1]["maintenance"].is_null());

    // No GET_AGENTS answer yet in this leader's term: the page and the
    // JSON say the list is not the master's yet.
    assert_eq!(v["listed_at"], serde_json::Value::Null);
    assert!(html.contains("Asking the master for its agents"), "{html}");
    let mut listed = leader_snapshot("http://127.0.0.1:8080", 2);
    listed.agents_listed_at = Some(now() - 5.0);
    let web_listed = TestWeb::new(test_config(), listed);
    let v = web_listed.send(get("/api/v1/agents")).await.json();
    assert!(v["listed_at"].as_f64().is_some_and(|t| t > 0.0), "{v}");
    let page = web_listed.send(get("/agents")).await.text();
    assert!(!page.contains("Asking the master for its agents"), "{page}");

    // Other pages link it from the nav.
    let html = web.send(get("/offers")).await.text();
    assert!(
        html.contains(r#"<a href="/agents" class="">Agents</a>"#),
        "{html}"
    );
}

fn drain(state: DrainState, tasks: Vec<DrainTask>) -> DrainStatus {
    let record = DrainRecord {
        agent_id: "S1".into(),
        min_healthy: MinHealthy::Count(3),
        reason: Some("kernel <b>upgrade</b>".into()),
        by: "admin".into(),
        started_at: now() - 60.0,
        then: ThenAction::DrainAgent,
        state,
        finished_at: None,
        cancelled_by: None,
        then_called: false,
        then_error: None,
        reactivated: false,
        reactivate_error: None,
        reactivate_tries: 0,
        reactivate_retry: false,
        ended: None,
    };
    DrainStatus::new(&record, tasks)
}

fn drain_task(id: &str, progress: DrainProgress, reason: Option<&str>) -> DrainTask {
    DrainTask {
        task_id: id.into(),
        service: "web".into(),
        instance: 0,
        progress,
        replacement: Some(format!("{id}.new").into()),
        reason: reason.map(str::to_string),
    }
}

#[tokio::test]
async fn the_agents_page_shows_each_drain_s_progress_and_its_buttons() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    let mut running = agent("S1", AgentState::Active, &["web.0.a", "web.1.b", "web.2.c"]);
    running.drain = Some(drain(
        DrainState::Running,
        vec![
            drain_task("web.0.a", DrainProgress::Moved, None),
            drain_task(
                "web.1.b",
                DrainProgress::WaitingForHealth,
                Some("replacement web.1.b.new is TASK_RUNNING, not yet healthy"),
            ),
            drain_task(
                "web.2.c",
                DrainProgress::Blocked,
                Some("would drop web below 3 healthy"),
            ),
            DrainTask {
                replacement: None,
                ..drain_task(
                    "web.3.e",
                    DrainProgress::Stopped,
                    Some(
                        "scaled down while agent S1 is drained: its service no longer wants the instance",
                    ),
                )
            },
        ],
    ));
    let mut cancelled = agent("S2", AgentState::Active, &[]);
    cancelled.drain = Some(drain(DrainState::Cancelled, Vec::new()));
    s.agents = vec![
        agent("S0", AgentState::Active, &["web.3.d"]),
        running,
        cancelled,
        agent("S3", AgentState::Gone, &[]),
    ];
    let web = TestWeb::new(test_config(), s);

    let html = web.send(get("/agents")).await.text();
    // An agent's row, with the row of its drain's progress when it has one.
    let row = |id: &str| {
        let row = html.split(&format!(r#"data-agent="{id}""#)).nth(1).unwrap();
        let row = &row[..row.find("</tr>").unwrap()];
        let detail = html
            .split(&format!(r#"data-drain-of="{id}""#))
            .nth(1)
            .map_or("", |d| &d[..d.find("</tr>").unwrap()]);
        format!("{row}{detail}")
    };
    // No drain: the Drain button, to the confirmation page.
    assert!(
        row("S0").contains(r#"href="/agents/S0/drain""#),
        "{}",
        row("S0")
    );
    assert!(!row("S0").contains("cancel"), "{}", row("S0"));
    // A running drain: its counts, each task's progress and why, Cancel.
    let r = row("S1");
    assert!(r.contains(">running<"), "{r}");
    assert!(
        r.contains("1 moved · 1 waiting for health · 1 blocked · 1 stopped"),
        "{r}"
    );
    assert!(r.contains(r#"class="drain-task progress-stopped""#), "{r}");
    assert!(r.contains("stopped by another rule"), "{r}");
    assert!(
        r.contains("min_healthy 3 · then drain_agent · by admin"),
        "{r}"
    );
    assert!(
        r.contains("upgrade") && !r.contains("<b>upgrade"),
        "escaped: {r}"
    );
    assert!(r.contains(r#"class="drain-task progress-blocked""#), "{r}");
    assert!(r.contains("would drop web below 3 healthy"), "{r}");
    assert!(r.contains("not yet healthy"), "{r}");
    assert!(r.contains(r#"href="/tasks/web.1.b.new""#), "{r}");
    assert!(r.contains(r#"action="/agents/S1/drain/cancel""#), "{r}");
    assert!(r.contains(r#"name="csrf""#), "{r}");
    assert!(
        !r.contains("drain-start"),
        "no second drain while one holds: {r}"
    );
    // Cancelled: shown, and the agent may be drained again.
    let r = row("S2");
    assert!(
        r.contains(">cancelled<") && r.contains("drain-start"),
        "{r}"
    );
    assert!(!r.contains("/drain/cancel"), "{r}");
    // Gone: nothing to drain.
    assert!(!row("S3").contains("drain-start"), "{}", row("S3"));

    // The JSON twin carries the same progress.
    let v = web.send(get("/api/v1/agents")).await.json();
    let d = &v["agents"][1]["drain"];
    assert_eq!(d["state"], "running");
    assert_eq!(
        (
            d["moved"].as_u64(),
            d["waiting"].as_u64(),
            d["blocked"].as_u64(),
            d["stopped"].as_u64()
        ),
        (Some(1), Some(1), Some(1), Some(1))
    );
    assert_eq!(d["tasks"][3]["progress"], "stopped");
    assert_eq!(d["tasks"][2]["progress"], "blocked");

    // A follower shows no buttons (it keeps no table; the leader acts).
    let mut s = web.snapshot();
    s.leadership = follower_snapshot("http://127.0.0.1:8080", "http://leader:1", 0).leadership;
    web.publish(s);
    let html = web.send(get("/agents")).await.text();
    assert!(
        !html.contains("drain-start") && !html.contains("/drain/cancel"),
        "{html}"
    );
}

/// The drain's `reactivated`, `reactivate_error` (with whether it is
/// sent again) and `tasks_left_out` are on the page, not only in the JSON.
/// (Before, the page showed none of them.)
#[tokio::test]
async fn the_agents_page_shows_a_drain_s_reactivation_and_its_tasks_left_out() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    let ended = |agent: &str| {
        let mut d = drain(DrainState::Cancelled, Vec::new());
        d.then_called = true;
        d.finished_at = Some(now() - 10.0);
        let mut a = self::agent(agent, AgentState::Drained, &[]);
        a.drain = Some(d);
        a
    };
    let mut back = ended("S1");
    let d = back.drain.as_mut().unwrap();
    d.reactivated = true;
    d.reactivate_tries = 2;
    d.tasks_left_out = 1234;
    let mut waiting = ended("S2");
    let d = waiting.drain.as_mut().unwrap();
    d.reactivate_tries = 1;
    d.reactivate_retry = true;
    d.reactivate_error =
        Some("master answered 400: Agent is still in the DRAINING state; <i>sent again</i>".into());
    let mut failed = ended("S3");
    let d = failed.drain.as_mut().unwrap();
    d.reactivate_tries = 5;
    d.reactivate_error = Some("not sent again: call REACTIVATE_AGENT at the master".into());
    s.agents = vec![back, waiting, failed];
    let web = TestWeb::new(test_config(), s);
    let html = web.send(get("/agents")).await.text();
    let detail = |id: &str| {
        let d = html
            .split(&format!(r#"data-drain-of="{id}""#))
            .nth(1)
            .unwrap();
        d[..d.find("</tr>").unwrap()].to_string()
    };
    let r = detail("S1");
    assert!(r.contains(r#"class="badge ok reactivated""#), "{r}");
    assert!(r.contains("reactivated at the master"), "{r}");
    assert!(r.contains(r#"class="muted tasks-left-out""#), "{r}");
    assert!(r.contains("and 1234 more tasks not kept"), "{r}");
    assert!(!r.contains("reactivate-error"), "{r}");
    let r = detail("S2");
    assert!(r.contains(r#"class="badge warn reactivate-error""#), "{r}");
    assert!(
        r.contains("sent again once the master shows the agent DRAINED (1 call)"),
        "{r}"
    );
    assert!(r.contains("Agent is still in the DRAINING state"), "{r}");
    assert!(!r.contains("<i>sent"), "escaped: {r}");
    assert!(!r.contains("tasks-left-out"), "{r}");
    let r = detail("S3");
    assert!(r.contains(r#"class="badge bad reactivate-error""#), "{r}");
    assert!(r.contains("REACTIVATE_AGENT failed (5 calls)"), "{r}");
    assert!(r.contains("call REACTIVATE_AGENT at the master"), "{r}");

    let v = web.send(get("/api/v1/agents")).await.json();
    assert_eq!(v["agents"][0]["drain"]["tasks_left_out"], 1234);
    assert_eq!(v["agents"][1]["drain"]["reactivate_retry"], true);
    assert_eq!(v["agents"][2]["drain"]["reactivate_tries"], 5);
}

#[tokio::test]
async fn the_drain_form_is_confirmed_checked_audited_and_cancelled() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 4);
    let on_s1: Vec<String> = s
        .tasks
        .iter()
        .take(2)
        .map(|t| t.task_id.to_string())
        .collect();
    let on_s1: Vec<&str> = on_s1.iter().map(String::as_str).collect();
    s.agents = vec![agent("S1", AgentState::Active, &on_s1)];
    let web = TestWeb::new(test_config(), s);

    // The confirmation page: the agent, what moves, the form.
    let r = web.send(get("/agents/S1/drain")).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(html.contains(r#"id="drain-agent-id">S1<"#), "{html}");
    assert!(html.contains(r#"id="drain-tasks">2<"#), "{html}");
    assert!(
        html.contains(r#"<form method="post" action="/agents/S1/drain""#),
        "{html}"
    );
    for field in ["min_healthy", "then", "reason", "csrf"] {
        assert!(
            html.contains(&format!(r#"name="{field}""#)),
            "{field}: {html}"
        );
    }
    for then in ["none", "drain_agent", "deactivate_agent"] {
        assert!(html.contains(&format!(r#"value="{then}""#)), "{then}");
    }
    let (cookie, token) = (r.cookie("ma_csrf").unwrap(), r.csrf_field().unwrap());
    assert_eq!(
        web.send(get("/agents/nope/drain")).await.status,
        StatusCode::NOT_FOUND
    );

    let origin = Some("http://127.0.0.1:8080");
    let post = |path: &str, origin: Option<&str>, fields: &[(&str, &str)]| {
        form_post(path, origin, &cookie, fields)
    };
    // Cross-origin, or without the page's CSRF token: 403, nothing runs.
    let fields = [
        ("csrf", token.as_str()),
        ("min_healthy", "3"),
        ("then", "none"),
    ];
    let r = web
        .send(post(
            "/agents/S1/drain",
            Some("http://evil.example"),
            &fields,
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = web
        .send(post(
            "/agents/S1/drain",
            origin,
            &[("csrf", "forged"), ("min_healthy", "3")],
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // Fields the API refuses: 422, the page again with each field named
    // and the values kept.
    let r = web
        .send(post(
            "/agents/S1/drain",
            origin,
            &[
                ("csrf", &token),
                ("min_healthy", "120%"),
                ("then", "reboot"),
                ("reason", "kernel"),
            ],
        ))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let html = r.text();
    assert!(html.contains(r#"data-field="min_healthy""#), "{html}");
    assert!(html.contains(r#"data-field="then""#), "{html}");
    assert!(html.contains(r#"value="120%""#), "{html}");
    assert!(web.core.received().is_empty(), "nothing ran");

    // Accepted: the drain starts, the browser goes to the result, the
    // audit trail has who and why.
    let r = web
        .send(post(
            "/agents/S1/drain",
            origin,
            &[
                ("csrf", &token),
                ("min_healthy", "75%"),
                ("then", "deactivate_agent"),
                ("reason", "kernel upgrade"),
            ],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    let result = r.header("location").unwrap().to_string();
    assert!(result.starts_with("/actions/results/"), "{result}");
    let v = web.send(get(&format!("/api/v1{result}"))).await.json();
    assert_eq!(v["action"], "drain");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["via"], "browser");
    assert_eq!(v["reason"], "kernel upgrade");
    let audit = web.send(get("/api/v1/audit")).await.json();
    let entry = &audit["entries"][0];
    assert_eq!(entry["action"], "drain", "{audit}");
    assert_eq!(entry["reason"], "kernel upgrade");
    assert_eq!(entry["params"]["min_healthy"], "75%");
    assert_eq!(entry["params"]["then"], "deactivate_agent");

    // Cancel, from the Agents page's button.
    let r = web
        .send(post(
            "/agents/S1/drain/cancel",
            origin,
            &[("csrf", &token), ("reason", "done with it")],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    let result = r.header("location").unwrap().to_string();
    let v = web.send(get(&format!("/api/v1{result}"))).await.json();
    assert_eq!(v["action"], "cancel_drain");
    assert_eq!(v["reason"], "done with it");
}

#[tokio::test]
async fn the_overview_counts_unreachable_instances_and_its_charts_mark_partitions_and_drains() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 3);
    s.services[0].unreachable = 2;
    s.agents = vec![
        agent("S0", AgentState::Active, &[]),
        agent("S1", AgentState::Active, &[]),
    ];
    let web = TestWeb::new(test_config(), s.clone());
    let stop = tokio_util::sync::CancellationToken::new();
    let _sampler = mesos_appliance::web::history::spawn_sampler(
        web.state.history.clone(),
        web.state.handle.subscribe(),
        None,
        stop.clone(),
    );

    // The overview counts the unreachable instances.
    let html = web.send(get("/")).await.text();
    assert!(
        html.contains(
            r#"<span id="unreachable-instances" class="badge warn">2 unreachable</span>"#
        ),
        "{html}"
    );

    // S0 is lost and comes back; S1 is drained by the master; both are
    // marked across the charts, in their own colours, and listed.
    let at = now();
    let mut lost = s.clone();
    lost.at = at;
    lost.agents[0] = AgentStatus {
        since: at - 30.0,
        ..agent("S0", AgentState::Unreachable, &[])
    };
    web.publish(lost.clone());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while web
        .state
        .history
        .view(
            mesos_appliance::web::history::Window::Quarter,
            now(),
            10,
            "",
        )
        .marks
        .iter()
        .all(|m| m.kind != "partition")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no partition mark: {:?}",
            web.state
                .history
                .view(
                    mesos_appliance::web::history::Window::Quarter,
                    now(),
                    10,
                    ""
                )
                .marks
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut back = lost;
    back.at = at + 1.0;
    back.agents[0] = AgentStatus {
        since: at - 5.0,
        ..agent("S0", AgentState::Active, &[])
    };
    back.agents[1] = AgentStatus {
        since: at - 2.0,
        ..agent("S1", AgentState::Draining, &[])
    };
    web.publish(back);
    let html = loop {
        let html = web.send(get("/?window=15m")).await.text();
        if html.contains("reachable again") && html.contains("mark-drain") {
            break html;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no return or drain mark: {html}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let chart = html.split(r#"id="chart-running""#).nth(1).unwrap();
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(
        chart.matches(r#"class="mark mark-partition""#).count(),
        2,
        "{chart}"
    );
    assert_eq!(
        chart.matches(r#"class="mark mark-drain""#).count(),
        1,
        "{chart}"
    );
    assert!(
        chart.contains("agent S0.example (S0) unreachable"),
        "{chart}"
    );
    assert!(
        chart.contains("agent S0.example (S0) reachable again after 25 s"),
        "{chart}"
    );
    assert!(chart.contains("agent S1.example (S1) draining"), "{chart}");
    assert!(
        html.contains(r#"<i class="mk-partition"></i>partition"#),
        "the legend"
    );
    assert!(
        html.contains(r#"<i class="mk-drain"></i>drain"#),
        "the legend"
    );
    stop.cancel();
}

#[tokio::test]
async fn in_token_mode_the_drain_page_asks_for_a_login_and_posts_need_the_session() {
    let mut s = leader_snapshot("http://sched-a.cluster.test:8080", 2);
    s.agents = vec![agent("S1", AgentState::Active, &[])];
    let web = TestWeb::new(token_config(), s);
    let r = web.send(get("/agents/S1/drain")).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let login = r.header("location").unwrap().to_string();
    assert_eq!(login, "/login?next=%2Fagents%2FS1%2Fdrain");
    // The login form takes the page back as its `next`.
    let r = web.send(get(&login)).await;
    let (cookie, token) = (r.cookie("ma_csrf").unwrap(), r.csrf_field().unwrap());
    let html = r.text();
    assert!(
        html.contains(r#"name="next" value="/agents/S1/drain""#),
        "{html}"
    );

    // Without the admin session: 401, nothing runs.
    for (path, fields) in [
        (
            "/agents/S1/drain",
            vec![("csrf", token.as_str()), ("min_healthy", "1")],
        ),
        ("/agents/S1/drain/cancel", vec![("csrf", token.as_str())]),
    ] {
        let mut post = form_post(
            path,
            Some("http://sched-a.cluster.test:8080"),
            &cookie,
            &fields,
        );
        post.headers_mut().insert(
            axum::http::header::HOST,
            "sched-a.cluster.test:8080".parse().unwrap(),
        );
        let r = web.send(post).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}: {}", r.text());
    }
    assert!(web.core.received().is_empty());
}

/// `POST /api/v1/agents/{id}/drain` and its `DELETE`: the admin token,
/// field errors in the problem shape, 404 for an unknown agent, 409 for a
/// second drain, and the drain in `/api/v1/agents` (`docs/draining.md`).
#[tokio::test]
async fn a_drain_is_an_admin_action_with_field_errors_and_shows_in_the_agents_api() {
    use axum::body::Body;
    use axum::http::{Method, header};
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    s.agents = vec![agent("S0", AgentState::Active, &["web.0.a"])];
    let web = TestWeb::new(token_config(), s);
    let post = |path: &str, body: &str, token: bool| {
        let mut b = request(Method::POST, path).header(header::CONTENT_TYPE, "application/json");
        if token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        }
        b.body(Body::from(body.to_string())).unwrap()
    };
    let r = web
        .send(post(
            "/api/v1/agents/S0/drain",
            r#"{"min_healthy":3}"#,
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = web
        .send(post(
            "/api/v1/agents/S0/drain",
            r#"{"min_healthy":"x","then":"reboot","extra":1}"#,
            true,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let fields = r.error_fields();
    assert_eq!(fields, ["extra"], "unknown fields first: {}", r.text());
    let r = web
        .send(post(
            "/api/v1/agents/S0/drain",
            r#"{"min_healthy":"x","then":"reboot"}"#,
            true,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(
        r.json()["errors"].as_array().unwrap().len(),
        2,
        "{}",
        r.text()
    );
    assert!(web.core.received().is_empty(), "nothing reached the core");
    let r = web
        .send(post(
            "/api/v1/agents/S9/drain",
            r#"{"min_healthy":3}"#,
            true,
        ))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    let r = web
        .send(post(
            "/api/v1/agents/S0/drain",
            r#"{"min_healthy":"75%","reason":"kernel upgrade","then":"drain_agent"}"#,
            true,
        ))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let v = r.json();
    assert_eq!(v["action"], "drain");
    assert_eq!(v["drain"]["min_healthy"], "75%");
    assert_eq!(v["drain"]["then"], "drain_agent");
    let r = web
        .send(post(
            "/api/v1/agents/S0/drain",
            r#"{"min_healthy":3}"#,
            true,
        ))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    let agents = web
        .send(
            request(Method::GET, "/api/v1/agents")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .json();
    let drain = &agents["agents"][0]["drain"];
    assert_eq!(drain["state"], "running", "{agents}");
    assert_eq!(drain["reason"], "kernel upgrade");
    let r = web
        .send(
            request(Method::DELETE, "/api/v1/agents/S0/drain")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["action"], "cancel_drain");
    assert_eq!(
        web.core.received(),
        ["start_drain", "start_drain", "start_drain", "cancel_drain"]
    );
}
