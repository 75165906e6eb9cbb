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
