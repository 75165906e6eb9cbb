//! The Agents page (`GET /agents`) and its JSON twin (`GET /api/v1/agents`):
//! the leader's agent table — each agent's hostname, state (active,
//! unreachable, draining, drained, deactivated, gone) and since when, its
//! maintenance window when known, this framework's live tasks there, and
//! the appliance's SLA-aware drain of it with its progress
//! (`docs/draining.md`), with the Drain and Cancel buttons. A replica that
//! does not lead keeps no agent table: it shows the agents it can know
//! without the master — those of the task records and the drains stored
//! in ZooKeeper (`scheduler::standby`) — marked as its own view (`as_of`,
//! `unknown_fields`, state `unknown`), with no buttons.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::actions::{DrainBody, OperatorAction, check_drain, execute};
use super::auth::Access;
use super::error::AppError;
use super::extract::{ActionForm, AdminForm, PagePath};
use super::pages::{Chrome, with_cookie};
use super::query::{NoQuery, StrictQuery};
use crate::scheduler::drains::{DrainProgress, DrainState, DrainStatus};
use crate::scheduler::snapshot::{AgentState, AgentStatus};
use crate::scheduler::{FieldError, Snapshot};

/// What a replica that does not lead cannot know of the agents it lists
/// (`AgentsView::unknown_fields`): the master's word (only the leader asks
/// GET_AGENTS), and a running drain's progress (the leader works it out
/// from the offers and task states it holds).
pub const FOLLOWER_UNKNOWN: &[&str] = &[
    "agents[].state",
    "agents[].since",
    "agents[].registered_time",
    "agents[].reregistered_time",
    "agents[].maintenance",
    "agents[].drain.moved",
    "agents[].drain.waiting",
    "agents[].drain.blocked",
    "agents[].drain.stopped",
    "agents[].drain.tasks",
];

/// `/api/v1/agents` and the Agents page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AgentsView {
    /// The leader's agent table, by agent ID. On a replica that does not
    /// lead: the agents of its task records and of the drains stored in
    /// ZooKeeper, each in state `unknown` (see `unknown_fields`).
    pub agents: Vec<AgentStatus>,
    /// Whether this replica leads (only the leader keeps an agent table).
    pub leading: bool,
    /// On a replica that does not lead: when it read the drains from
    /// ZooKeeper (seconds since the UNIX epoch; the task records are read
    /// at their own pace, `scheduler::standby`). `null` on the leader.
    #[serde(default)]
    pub as_of: Option<f64>,
    /// The fields of `agents` this replica cannot know, as paths
    /// (`agents[].state`; the drain's counts and tasks of a `running`
    /// drain only: an ended drain shows its stored end): empty on the
    /// leader; on a replica that does not lead, [`FOLLOWER_UNKNOWN`].
    #[serde(default)]
    pub unknown_fields: Vec<String>,
    /// On the leader: when the master last listed its agents (GET_AGENTS,
    /// seconds since the UNIX epoch); `null` until its first answer in
    /// this leader's term — `agents` then holds only those its offers and
    /// status updates named, not yet the master's list. `null` on a
    /// replica that does not lead (see `as_of`).
    #[serde(default)]
    pub listed_at: Option<f64>,
}

impl AgentsView {
    /// The view of `s`.
    pub fn new(s: &Snapshot) -> AgentsView {
        let leading = s.leadership.is_leader();
        AgentsView {
            agents: s.agents.clone(),
            leading,
            as_of: (!leading).then_some(s.at),
            unknown_fields: if leading {
                Vec::new()
            } else {
                FOLLOWER_UNKNOWN.iter().map(|f| (*f).to_string()).collect()
            },
            listed_at: s.agents_listed_at.filter(|_| leading),
        }
    }
}

/// `GET /api/v1/agents`.
#[utoipa::path(
    get,
    path = "/api/v1/agents",
    tag = "agents",
    responses((status = 200, description = "The agents", body = AgentsView), crate::web::error::responses::BadRequest)
)]
pub async fn api(State(state): State<AppState>, _: StrictQuery<NoQuery>) -> Json<AgentsView> {
    Json(AgentsView::new(&state.handle.snapshot()))
}

#[derive(Template, WebTemplate)]
#[template(path = "agents.html")]
struct AgentsPage {
    chrome: Chrome,
    view: AgentsView,
    /// For the Cancel buttons.
    csrf: String,
    /// The leader's URL, on a replica that does not lead.
    leader_url: Option<String>,
}

impl AgentsPage {
    /// The badge class of a drain in `state`.
    fn drain_class(&self, state: &DrainState) -> &'static str {
        match state {
            DrainState::Running => "info",
            DrainState::Done => "ok",
            DrainState::Cancelled => "",
        }
    }

    /// The JSON name of `p` (a CSS class of the task's line).
    fn progress_name(&self, p: &DrainProgress) -> &'static str {
        match p {
            DrainProgress::Moved => "moved",
            DrainProgress::WaitingForHealth => "waiting_for_health",
            DrainProgress::Blocked => "blocked",
            DrainProgress::Stopped => "stopped",
            DrainProgress::Ended => "ended",
        }
    }

    /// `p` in words.
    fn progress_text(&self, p: &DrainProgress) -> &'static str {
        match p {
            DrainProgress::Moved => "moved",
            DrainProgress::WaitingForHealth => "waiting for health",
            DrainProgress::Blocked => "blocked",
            DrainProgress::Stopped => "stopped by another rule",
            DrainProgress::Ended => "ended there, not moved",
        }
    }

    /// The badge class of `p`.
    fn progress_class(&self, p: &DrainProgress) -> &'static str {
        match p {
            DrainProgress::Moved => "ok",
            DrainProgress::WaitingForHealth => "info",
            DrainProgress::Blocked => "warn",
            DrainProgress::Stopped => "",
            DrainProgress::Ended => "warn",
        }
    }

    /// Whether `d`'s counts and tasks are known here: on the leader, or
    /// for a drain that ended (its end is stored).
    fn progress_known(&self, d: &DrainStatus) -> bool {
        self.view.leading || d.state != DrainState::Running
    }

    /// The master's latest registration time of `a`, when known.
    fn registered(&self, a: &AgentStatus) -> Option<f64> {
        a.reregistered_time.or(a.registered_time)
    }

    /// Whether a drain of `a` may be started: none holds it and the master
    /// has not removed it.
    fn can_drain(&self, a: &AgentStatus) -> bool {
        a.state != AgentState::Gone && !a.drain.as_ref().is_some_and(|d| d.state.holds())
    }
}

/// `GET /agents`: the table, each agent's drain progress, and its Drain
/// link or Cancel button.
pub async fn page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let s = state.handle.snapshot();
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let page = AgentsPage {
        chrome: Chrome::new(&state, &s, &headers, "agents", "Agents", "/api/v1/agents"),
        view: AgentsView::new(&s),
        csrf,
        leader_url: (!s.leadership.is_leader())
            .then(|| s.leader_url())
            .flatten(),
    };
    with_cookie(page.into_response(), cookie)
}

// The browser side of the appliance's SLA-aware drain (`docs/draining.md`):
// `GET /agents/{agent_id}/drain` is the confirmation page (what moves, the
// form); `POST /agents/{agent_id}/drain` starts it and `POST
// /agents/{agent_id}/drain/cancel` cancels it, both with the checks of
// every browser action ([`AdminForm`]: Origin, CSRF, admin session or
// loopback rule, leadership, reason) and run through the actions' `execute`,
// so they are audited with who and why and end on the result page.

/// Fields of the drain form.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct DrainForm {
    /// The CSRF token.
    pub csrf: String,
    /// The floor per service as typed: `3` (tasks) or `75%`.
    pub min_healthy: String,
    /// `none`, `drain_agent` or `deactivate_agent`.
    pub then: String,
    /// Why (optional; recorded in the drain and the audit trail).
    pub reason: String,
}

/// Fields of the cancel button.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct CancelForm {
    /// The CSRF token.
    pub csrf: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

impl ActionForm for DrainForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
    fn reason(&self) -> &str {
        &self.reason
    }
}

impl ActionForm for CancelForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
    fn reason(&self) -> &str {
        &self.reason
    }
}

/// The JSON the API takes for `min_healthy` as typed in the form: digits
/// are a number of tasks, anything else is passed on as a string (`"75%"`),
/// so the API's own check judges both — white space around it included,
/// refused as in the API (`crate::util::refuse_padding`).
pub fn min_healthy_value(typed: &str) -> serde_json::Value {
    match typed.parse::<u64>() {
        Ok(n) => serde_json::Value::from(n),
        Err(_) => serde_json::Value::from(typed),
    }
}

/// A service with tasks on the agent, on the confirmation page.
#[derive(Debug, Clone)]
pub struct AffectedService {
    /// The service.
    pub name: String,
    /// Its desired instances.
    pub instances: u32,
    /// Its tasks that pass their health check (`None`: no check, running
    /// counts).
    pub healthy: Option<u32>,
    /// Its running tasks.
    pub running: u32,
    /// Its tasks on the agent.
    pub here: usize,
}

#[derive(Template, WebTemplate)]
#[template(path = "agent_drain.html")]
struct DrainPage {
    chrome: Chrome,
    agent: Option<AgentStatus>,
    services: Vec<AffectedService>,
    csrf: String,
    leading: bool,
    leader_url: Option<String>,
    access: &'static str,
    errors: Vec<FieldError>,
    min_healthy: String,
    then: String,
    reason: String,
}

impl DrainPage {
    /// `selected` when `then` is `value` (the form's choice is kept when
    /// the page is shown again).
    fn selected(&self, value: &str) -> &'static str {
        let then = if self.then.is_empty() {
            "none"
        } else {
            &self.then
        };
        if then == value { "selected" } else { "" }
    }
}

/// The services with tasks on `agent` in `s`, by name.
fn affected(s: &Snapshot, agent: &AgentStatus) -> Vec<AffectedService> {
    let mut out: Vec<AffectedService> = Vec::new();
    for t in s.tasks.iter().filter(|t| agent.tasks.contains(&t.task_id)) {
        match out.iter_mut().find(|a| a.name == t.service) {
            Some(a) => a.here += 1,
            None => {
                let svc = s.services.iter().find(|x| x.spec.name == t.service);
                out.push(AffectedService {
                    name: t.service.clone(),
                    instances: svc.map_or(0, |x| x.spec.instances),
                    healthy: svc
                        .filter(|x| x.spec.health_check.is_some())
                        .map(|x| x.healthy),
                    running: svc.map_or(0, |x| x.running),
                    here: 1,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The confirmation page of a drain of `agent_id`, with `form` as typed
/// and `errors` when it is shown again; a login first in token mode; 404
/// for an agent the leader does not know.
fn drain_page(
    state: &AppState,
    headers: &HeaderMap,
    agent_id: &str,
    form: &DrainForm,
    errors: Vec<FieldError>,
) -> Response {
    let s = state.handle.snapshot();
    let needs_login = state.access == Access::Token && !state.keys.has_session(headers);
    if needs_login {
        let next = format!("/agents/{}/drain", crate::util::segment(agent_id));
        return Redirect::to(&format!("/login?next={}", crate::util::segment(&next)))
            .into_response();
    }
    let leading = s.leadership.is_leader();
    let agent = s.agents.iter().find(|a| *a.agent_id == *agent_id).cloned();
    if leading && agent.is_none() {
        return AppError::not_found(format!(
            "the leader knows no agent {agent_id:?} (see /agents)"
        ))
        .html()
        .into_response();
    }
    let services = agent.as_ref().map_or_else(Vec::new, |a| affected(&s, a));
    let (csrf, cookie) = state.keys.csrf_for(headers, state.secure_cookies());
    let title = format!("Drain agent {agent_id}");
    let page = DrainPage {
        chrome: Chrome::new(state, &s, headers, "agents", title, "/api/v1/agents").still(),
        agent,
        services,
        csrf,
        leading,
        leader_url: s.leader_url(),
        access: state.access.as_str(),
        errors,
        min_healthy: form.min_healthy.clone(),
        then: form.then.clone(),
        reason: form.reason.clone(),
    };
    with_cookie(page.into_response(), cookie)
}

/// `GET /agents/{agent_id}/drain`: the confirmation page of a drain — the
/// agent, the services whose tasks move and their counts now, and the form
/// (`min_healthy`, `then`, reason).
pub async fn confirm_drain(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(agent_id): PagePath<String>,
) -> Response {
    drain_page(
        &state,
        &headers,
        &agent_id,
        &DrainForm::default(),
        Vec::new(),
    )
}

/// `POST /agents/{agent_id}/drain`: after the checks of [`AdminForm`], the
/// form's fields as the API checks them (422 and the page again, each
/// field's error named), then the drain starts and the browser goes to the
/// result (303).
pub async fn post_drain(
    PagePath(agent_id): PagePath<String>,
    post: AdminForm<DrainForm>,
) -> Response {
    let body = DrainBody {
        min_healthy: (!post.form.min_healthy.trim().is_empty())
            .then(|| min_healthy_value(&post.form.min_healthy)),
        reason: None,
        then: Some(post.form.then.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_string),
    };
    let (min_healthy, then) = match check_drain(&body) {
        Ok(checked) => checked,
        Err(errors) => {
            let mut page = drain_page(&post.state, &post.headers, &agent_id, &post.form, errors);
            *page.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            return page;
        }
    };
    let action = OperatorAction::Drain {
        agent_id,
        min_healthy,
        then,
    };
    let (record, _) = execute(&post.state, action, &post.path, &post.ctx).await;
    Redirect::to(&format!("/actions/results/{}", record.id)).into_response()
}

/// `POST /agents/{agent_id}/drain/cancel`: after the checks of
/// [`AdminForm`], cancels the agent's drain and goes to the result (303).
pub async fn post_cancel_drain(
    PagePath(agent_id): PagePath<String>,
    post: AdminForm<CancelForm>,
) -> Response {
    let action = OperatorAction::CancelDrain { agent_id };
    let (record, _) = execute(&post.state, action, &post.path, &post.ctx).await;
    Redirect::to(&format!("/actions/results/{}", record.id)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::drains::MinHealthy;

    #[test]
    fn the_form_s_min_healthy_is_judged_as_the_api_judges_it() {
        assert_eq!(min_healthy_value("3"), serde_json::json!(3));
        assert_eq!(
            MinHealthy::from_json(&min_healthy_value("75%")),
            Ok(MinHealthy::Percent(75))
        );
        for padded in [" 50%", "50% ", " 3", "3 "] {
            let e = MinHealthy::from_json(&min_healthy_value(padded)).unwrap_err();
            assert!(e.contains("has white space around it"), "{padded:?}: {e}");
        }
    }
}
