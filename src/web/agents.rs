//! The Agents page (`GET /agents`) and its JSON twin (`GET /api/v1/agents`):
//! the leader's agent table — each agent's hostname, state (active,
//! unreachable, draining, drained, deactivated, gone) and since when, its
//! maintenance window when known, and this framework's live tasks there.
//! Followers keep no table and show none.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use serde::Serialize;

use super::AppState;
use super::pages::Chrome;
use crate::scheduler::Snapshot;
use crate::scheduler::snapshot::AgentStatus;

/// `/api/v1/agents` and the Agents page.
#[derive(Debug, Clone, Serialize)]
pub struct AgentsView {
    /// The leader's agent table, by agent ID (empty on followers).
    pub agents: Vec<AgentStatus>,
    /// Whether this replica leads (followers keep no agent table).
    pub leading: bool,
}

impl AgentsView {
    /// The view of `s`.
    pub fn new(s: &Snapshot) -> AgentsView {
        AgentsView {
            agents: s.agents.clone(),
            leading: s.leadership.is_leader(),
        }
    }
}

/// `GET /api/v1/agents`.
pub async fn api(State(state): State<AppState>) -> Json<AgentsView> {
    Json(AgentsView::new(&state.handle.snapshot()))
}

#[derive(Template, WebTemplate)]
#[template(path = "agents.html")]
struct AgentsPage {
    chrome: Chrome,
    view: AgentsView,
}

/// `GET /agents`.
pub async fn page(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let s = state.handle.snapshot();
    AgentsPage {
        chrome: Chrome::new(&state, &s, &headers, "agents", "Agents", "/api/v1/agents"),
        view: AgentsView::new(&s),
    }
}
