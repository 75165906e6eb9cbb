//! The browser side of actions: confirmation pages, form posts, result
//! pages, login and logout.
//!
//! A destructive action (teardown, kamikaze) is never a GET: `GET
//! /actions/teardown` shows a confirmation page naming the framework ID and
//! the tasks that will die (their IDs, up to
//! [`BLAST_TASKS_LISTED`](super::views::BLAST_TASKS_LISTED), and how many
//! more), asks for the framework name typed in,
//! and carries a CSRF token; `POST /actions/teardown` checks, in order,
//! `Origin` (403), CSRF (403), the admin session or loopback rule (401/403),
//! leadership (503, with a link to the leader), that the framework is still
//! the one confirmed (409) and the typed name (422, the page again), then
//! runs the action and redirects (303) to `/actions/results/{id}`.
//! Reconcile, abdicate, reregister, and a service's rollout resume and
//! rollback are one-button forms with the same checks minus the typed name.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::AppState;
use super::actions::{ActionRecord, OperatorAction, execute};
use super::auth::{self, Access, Peer, SESSION_COOKIE, SESSION_SECONDS, TokenCheck};
use super::error::AppError;
use super::extract::{ActionForm, AdminForm, PageForm, PagePath};
use super::pages::{Chrome, LoginPage, safe_next, with_cookie};
use super::views::Blast;
use crate::scheduler::ReconcileKind;
use crate::scheduler::rules::rollout::RolloutAction;

// The browser forms ignore fields they do not take, unlike the API's
// bodies: a browser posts every named control of a form (one form may
// carry two actions' buttons, as a service's resume and rollback do), and
// a page of an older version may post a field this one no longer takes.

/// Fields of the confirmation forms (teardown, kamikaze).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConfirmForm {
    /// The CSRF token.
    pub csrf: String,
    /// The framework ID the page showed.
    pub framework_id: String,
    /// The framework name as typed by the operator.
    pub confirm_name: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

/// Fields of the reconcile buttons.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ReconcileForm {
    /// The CSRF token.
    pub csrf: String,
    /// `explicit` (or empty) or `implicit`.
    pub kind: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

/// Fields of the abdicate and reregister buttons.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ReasonForm {
    /// The CSRF token.
    pub csrf: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

/// Fields of a service's resume and rollback buttons (one form, two
/// buttons: both post every field).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RolloutForm {
    /// The CSRF token.
    pub csrf: String,
    /// The service.
    pub service: String,
    /// Rollback: the fingerprint of the spec to restore, as the page
    /// showed it.
    pub expected: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

macro_rules! action_form {
    ($($form:ty),*) => {$(
        impl ActionForm for $form {
            fn csrf(&self) -> &str {
                &self.csrf
            }
            fn reason(&self) -> &str {
                &self.reason
            }
        }
    )*};
}
action_form!(ConfirmForm, ReconcileForm, ReasonForm, RolloutForm);

/// Fields of the login form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LoginForm {
    /// The CSRF token.
    pub csrf: String,
    /// The admin token.
    pub token: String,
    /// Where to go afterwards.
    pub next: String,
}

fn to_result(record: &ActionRecord) -> Response {
    Redirect::to(&format!("/actions/results/{}", record.id)).into_response()
}

#[derive(Template, WebTemplate)]
#[template(path = "confirm.html")]
struct ConfirmPage {
    chrome: Chrome,
    action: &'static str,
    blast: Blast,
    csrf: String,
    leading: bool,
    leader_url: Option<String>,
    access: &'static str,
    error: Option<String>,
}

fn confirm_page(
    state: &AppState,
    headers: &HeaderMap,
    action: &'static str,
    error: Option<String>,
) -> Response {
    let s = state.handle.snapshot();
    let needs_login = state.access == Access::Token && !state.keys.has_session(headers);
    if needs_login {
        return Redirect::to(&format!("/login?next=/actions/{action}")).into_response();
    }
    let (csrf, cookie) = state.keys.csrf_for(headers, state.secure_cookies());
    let title = format!("Confirm {action}");
    let page = ConfirmPage {
        chrome: Chrome::new(state, &s, headers, "actions", title, "/api/v1/actions").still(),
        action,
        blast: Blast::new(&s),
        csrf,
        leading: s.leadership.is_leader(),
        leader_url: s.leader_url(),
        access: state.access.as_str(),
        error,
    };
    with_cookie(page.into_response(), cookie)
}

/// `GET /actions/teardown`: the confirmation page, naming the tasks that
/// die.
pub async fn confirm_teardown(State(state): State<AppState>, headers: HeaderMap) -> Response {
    confirm_page(&state, &headers, "teardown", None)
}

/// `GET /actions/kamikaze`: the confirmation page, listing the executors
/// and, under each, the tasks that die.
pub async fn confirm_kamikaze(State(state): State<AppState>, headers: HeaderMap) -> Response {
    confirm_page(&state, &headers, "kamikaze", None)
}

/// A confirmed action's post: after the checks of [`AdminForm`], the
/// framework must still be the one the page showed (409) and the typed
/// name its name (422, the page again).
async fn post_confirmed(
    post: AdminForm<ConfirmForm>,
    action: OperatorAction,
) -> Result<Response, AppError> {
    let AdminForm {
        state,
        form,
        ctx,
        headers,
        path,
    } = post;
    let s = state.handle.snapshot();
    let Some(id) = s.framework.id.as_deref() else {
        return Err(AppError::conflict("no framework is registered; nothing to do").html());
    };
    if form.framework_id != id {
        return Err(AppError::conflict(format!(
            "the confirmation page showed framework {:?}, but {id} is registered now; review \
             the confirmation page again",
            form.framework_id
        ))
        .html());
    }
    if form.confirm_name.trim() != s.framework.name {
        let error = format!(
            "the typed name {:?} is not the framework name; nothing was done",
            form.confirm_name.trim()
        );
        let mut page = confirm_page(&state, &headers, action.name(), Some(error));
        *page.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
        return Ok(page);
    }
    let (record, _) = execute(&state, action, &path, &ctx).await;
    Ok(to_result(&record))
}

/// `POST /actions/teardown`.
pub async fn post_teardown(post: AdminForm<ConfirmForm>) -> Result<Response, AppError> {
    post_confirmed(post, OperatorAction::Teardown).await
}

/// `POST /actions/kamikaze`.
pub async fn post_kamikaze(post: AdminForm<ConfirmForm>) -> Result<Response, AppError> {
    post_confirmed(post, OperatorAction::Kamikaze).await
}

/// Runs a one-button action once its post passed the checks of
/// [`AdminForm`], and redirects to its result.
async fn run<F>(post: AdminForm<F>, action: OperatorAction) -> Response {
    let (record, _) = execute(&post.state, action, &post.path, &post.ctx).await;
    to_result(&record)
}

/// `POST /actions/reconcile`: `kind` = `explicit` (the default) or
/// `implicit` (else 400).
pub async fn post_reconcile(post: AdminForm<ReconcileForm>) -> Result<Response, AppError> {
    let kind = match post.form.kind.as_str() {
        "" | "explicit" => ReconcileKind::Explicit,
        "implicit" => ReconcileKind::Implicit,
        other => {
            return Err(AppError::bad_request(format!(
                "kind must be explicit or implicit, not {other:?}"
            ))
            .html());
        }
    };
    Ok(run(post, OperatorAction::Reconcile(kind)).await)
}

/// `POST /actions/abdicate`.
pub async fn post_abdicate(post: AdminForm<ReasonForm>) -> Response {
    run(post, OperatorAction::Abdicate).await
}

/// `POST /actions/reregister`.
pub async fn post_reregister(post: AdminForm<ReasonForm>) -> Response {
    run(post, OperatorAction::Reregister).await
}

/// `POST /actions/resume` (on the services and overview pages): the
/// form's `service` (400 when missing).
pub async fn post_resume(post: AdminForm<RolloutForm>) -> Result<Response, AppError> {
    post_rollout(post, RolloutAction::Resume).await
}

/// `POST /actions/rollback`: as [`post_resume`], with the fingerprint the
/// page showed as `expected`.
pub async fn post_rollback(post: AdminForm<RolloutForm>) -> Result<Response, AppError> {
    post_rollout(post, RolloutAction::Rollback).await
}

/// `POST /actions/restart`: a rolling restart of the form's `service`
/// (400 when missing); `expected` is ignored.
pub async fn post_restart(post: AdminForm<RolloutForm>) -> Result<Response, AppError> {
    post_rollout(post, RolloutAction::Restart).await
}

async fn post_rollout(
    post: AdminForm<RolloutForm>,
    action: RolloutAction,
) -> Result<Response, AppError> {
    let service = post.form.service.trim();
    if service.is_empty() {
        return Err(AppError::bad_request("service is missing".to_string()).html());
    }
    let expected = post.form.expected.trim();
    let expected = if action == RolloutAction::Restart {
        ""
    } else {
        expected
    };
    let action = OperatorAction::Rollout {
        service: service.to_string(),
        action,
        expected: (!expected.is_empty()).then(|| expected.to_string()),
    };
    Ok(run(post, action).await)
}

#[derive(Template, WebTemplate)]
#[template(path = "result.html")]
struct ResultPage {
    chrome: Chrome,
    record: std::sync::Arc<ActionRecord>,
}

/// `GET /actions/results/{id}`: the outcome of an action, per executor /
/// per call.
pub async fn result_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(id): PagePath<String>,
) -> Result<Response, AppError> {
    let record = state.results.found(&id).map_err(AppError::html)?;
    let s = state.handle.snapshot();
    let record = record.current(&s);
    let title = format!("Result: {}", record.action);
    let json = format!("/api/v1/actions/results/{}", record.id);
    let chrome = Chrome::new(&state, &s, &headers, "actions", title, json);
    // Live while a queued or running reconciliation may still change.
    let chrome = if record.in_progress() {
        chrome
    } else {
        chrome.still()
    };
    Ok(ResultPage { chrome, record }.into_response())
}

/// `POST /login`: checks the admin token and sets the session cookie.
/// Checks `Origin` and CSRF first; a wrong token gets the form again (401)
/// after a short delay; too many wrong ones from this client lately, 429
/// (see [`auth::Keys::check_admin_token`]).
pub async fn post_login(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    PageForm(form): PageForm<LoginForm>,
) -> Result<Response, AppError> {
    auth::check_origin(&headers, &state.config.advertised_url, true).map_err(AppError::html)?;
    state
        .keys
        .check_csrf(&headers, &form.csrf)
        .map_err(AppError::html)?;
    let next = safe_next(Some(&form.next));
    if state.access != Access::Token {
        return Ok(Redirect::to(&next).into_response());
    }
    let name = match state.keys.check_admin_token(form.token.trim(), peer) {
        TokenCheck::Valid(name) => name,
        TokenCheck::Wrong => return Ok(wrong_token(&state, &headers, form.csrf, next).await),
        TokenCheck::Throttled(left) => {
            tracing::warn!(?peer, "login refused: too many wrong admin tokens lately");
            return Err(AppError::too_many_attempts(left).html());
        }
    };
    let cookie = auth::set_cookie(
        SESSION_COOKIE,
        &state.keys.new_session(&name),
        Some(SESSION_SECONDS),
        state.secure_cookies(),
    );
    tracing::info!(%name, "admin session started");
    Ok(with_cookie(
        Redirect::to(&next).into_response(),
        Some(cookie),
    ))
}

/// The login form again (401), after a short delay.
async fn wrong_token(
    state: &AppState,
    headers: &HeaderMap,
    csrf: String,
    next: String,
) -> Response {
    tracing::warn!("login with a wrong admin token");
    // Slows down guessing; the token should be long anyway.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let s = state.handle.snapshot();
    let mut page = LoginPage {
        chrome: Chrome::new(state, &s, headers, "actions", "Log in", "").still(),
        csrf,
        next,
        error: Some("That is not the admin token.".into()),
        enabled: true,
    }
    .into_response();
    *page.status_mut() = StatusCode::UNAUTHORIZED;
    page
}

/// `POST /logout`: ends the admin session on the server, so copies of the
/// cookie stop working too, and deletes the cookie (Origin-checked).
pub async fn post_logout(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    auth::check_origin(&headers, &state.config.advertised_url, true).map_err(AppError::html)?;
    if state.keys.end_session(&headers) {
        tracing::info!("admin session ended");
    }
    let cookie = auth::set_cookie(SESSION_COOKIE, "", Some(0), state.secure_cookies());
    Ok(with_cookie(Redirect::to("/").into_response(), Some(cookie)))
}
