//! The Agents page and `/api/v1/agents`: the leader's agent table with each
//! agent's hostname, state, since when and this framework's tasks there.

use crate::support;

use axum::http::StatusCode;
use mesos_appliance::scheduler::snapshot::{AgentState, AgentStatus};
use support::web::*;

fn agent(id: &str, state: AgentState, tasks: &[&str]) -> AgentStatus {
    AgentStatus {
        agent_id: id.into(),
        hostname: format!("{id}.example"),
        state,
        since: now() - 90.0,
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

    // Other pages link it from the nav.
    let html = web.send(get("/offers")).await.text();
    assert!(
        html.contains(r#"<a href="/agents" class="">Agents</a>"#),
        "{html}"
    );
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
    let fields: Vec<String> = r.json()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_string())
        .collect();
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
