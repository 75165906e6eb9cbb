//! `POST /api/v1/actions/{reconcile,kamikaze,teardown,abdicate,reregister}`
//! and `POST /api/v1/services/{name}/rollout/{resume,rollback}`: one
//! handler and one body struct per action; the checks of the request
//! ([`Admin`]) and of its body ([`ActionBody`]) are the extractors', then
//! `execute` (`actions/mod.rs`) runs it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{OperatorAction, execute};
use crate::scheduler::rules::rollout::RolloutAction;
use crate::scheduler::{FieldError, ReconcileKind};
use crate::web::AppState;
use crate::web::audit;
use crate::web::error::AppError;
use crate::web::extract::{ActionBody, Admin, ApiPath, fields};
use crate::web::query::StrictQuery;

/// The body of `reconcile`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconcileBody {
    /// Explicit (the default) or implicit.
    #[serde(deserialize_with = "fields::reconcile_kind")]
    pub kind: Option<ReconcileKind>,
    /// Why (recorded in the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
}

/// The body of `teardown` and `kamikaze`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FrameworkBody {
    /// When given, the action is refused (409) unless this framework is
    /// the registered one, so that a request meant for one framework
    /// never hits the one registered since.
    #[serde(deserialize_with = "fields::string")]
    pub framework_id: Option<String>,
    /// Why (recorded in the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
}

/// The body of `abdicate` and `reregister`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReasonBody {
    /// Why (recorded in the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
}

/// The body of `resume` and `rollback`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolloutBody {
    /// Why (recorded in the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
    /// Rollback: the fingerprint of the spec to restore, as the operator
    /// saw it (may be given as `?expected=` instead).
    #[serde(deserialize_with = "fields::string")]
    pub expected: Option<String>,
}

fn field_error(field: &str, message: &str) -> AppError {
    AppError::invalid(vec![FieldError {
        field: field.to_string(),
        message: message.to_string(),
    }])
}

/// The `framework_id` guard of teardown and kamikaze: when given, it must
/// name the registered framework (409 otherwise).
fn check_framework_id(state: &AppState, wanted: Option<&str>) -> Result<(), AppError> {
    let Some(wanted) = wanted else {
        return Ok(());
    };
    let current = state.handle.snapshot().framework.id.clone();
    if current.as_deref() != Some(wanted) {
        return Err(AppError::conflict(format!(
            "framework_id {wanted:?} is not the registered framework ({})",
            current.as_deref().unwrap_or("none")
        )));
    }
    Ok(())
}

/// Runs `action` for `admin` with `reason` (checked as the audit trail
/// takes it) and answers its record: `status` on success, else the error.
pub(super) async fn run(
    admin: &Admin,
    action: OperatorAction,
    reason: Option<String>,
) -> Result<Response, AppError> {
    let ctx = admin.context(audit::check_reason(reason.as_deref())?);
    let (record, error) = execute(&admin.state, action, &admin.path, &ctx).await;
    if let Some(error) = error {
        return Err(error);
    }
    let status = StatusCode::from_u16(record.status).unwrap_or(StatusCode::OK);
    Ok((status, Json(&*record)).into_response())
}

/// `POST /api/v1/actions/reconcile`: 202 with the run started (or joined).
pub async fn reconcile(
    admin: Admin,
    ActionBody(body): ActionBody<ReconcileBody>,
) -> Result<Response, AppError> {
    let kind = body.kind.unwrap_or(ReconcileKind::Explicit);
    run(&admin, OperatorAction::Reconcile(kind), body.reason).await
}

/// `POST /api/v1/actions/kamikaze`: 200, one result per executor.
pub async fn kamikaze(
    admin: Admin,
    ActionBody(body): ActionBody<FrameworkBody>,
) -> Result<Response, AppError> {
    check_framework_id(&admin.state, body.framework_id.as_deref())?;
    run(&admin, OperatorAction::Kamikaze, body.reason).await
}

/// `POST /api/v1/actions/teardown`: 200 with what was removed.
pub async fn teardown(
    admin: Admin,
    ActionBody(body): ActionBody<FrameworkBody>,
) -> Result<Response, AppError> {
    check_framework_id(&admin.state, body.framework_id.as_deref())?;
    run(&admin, OperatorAction::Teardown, body.reason).await
}

/// `POST /api/v1/actions/abdicate`: 200 once this replica stepped down.
pub async fn abdicate(
    admin: Admin,
    ActionBody(body): ActionBody<ReasonBody>,
) -> Result<Response, AppError> {
    run(&admin, OperatorAction::Abdicate, body.reason).await
}

/// `POST /api/v1/actions/reregister`: 200 (only in state `removed`, else
/// 409).
pub async fn reregister(
    admin: Admin,
    ActionBody(body): ActionBody<ReasonBody>,
) -> Result<Response, AppError> {
    run(&admin, OperatorAction::Reregister, body.reason).await
}

/// `POST /api/v1/actions/{other}`: 404 naming the actions there are.
pub async fn unknown_action(ApiPath(name): ApiPath<String>) -> AppError {
    AppError::not_found(format!(
        "no action {name:?}; actions are reconcile, kamikaze, teardown, abdicate, reregister"
    ))
}

/// The query of `POST …/rollout/{action}`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct RolloutQuery {
    /// Rollback: the fingerprint of the spec to restore, as the operator
    /// saw it (`restore.fingerprint` of the service).
    pub expected: Option<String>,
}

/// `POST /api/v1/services/{name}/rollout/resume`: resume the service's
/// halted rollout; see [`rollback`].
pub async fn resume(
    service: ApiPath<String>,
    admin: Admin,
    query: StrictQuery<RolloutQuery>,
    body: ActionBody<RolloutBody>,
) -> Result<Response, AppError> {
    rollout(service, admin, query, body, RolloutAction::Resume).await
}

/// `POST /api/v1/services/{name}/rollout/rollback`: roll the service back
/// to its previous spec (body left out, or `{"reason": "…", "expected":
/// "<fingerprint>"}`; `expected` may be given as `?expected=` instead).
/// Checks, in order: the path (400), Origin (403), token or loopback rule
/// (401/403), leadership (503), query and body (400/415); then 200 with
/// the action record, 404 for an unknown service, 409 when not halted
/// (resume), or (rollback) with no rollout under way or halted, no
/// previous spec, or a previous spec other than `expected`. Audited.
pub async fn rollback(
    service: ApiPath<String>,
    admin: Admin,
    query: StrictQuery<RolloutQuery>,
    body: ActionBody<RolloutBody>,
) -> Result<Response, AppError> {
    rollout(service, admin, query, body, RolloutAction::Rollback).await
}

async fn rollout(
    ApiPath(service): ApiPath<String>,
    admin: Admin,
    StrictQuery(query): StrictQuery<RolloutQuery>,
    ActionBody(body): ActionBody<RolloutBody>,
    action: RolloutAction,
) -> Result<Response, AppError> {
    let expected = match (body.expected, query.expected) {
        (None, q) => q,
        (Some(e), None) => Some(e),
        (Some(e), Some(q)) if e == q => Some(q),
        (Some(_), Some(_)) => return Err(field_error("expected", "differs from ?expected=")),
    };
    let action = OperatorAction::Rollout {
        service,
        action,
        expected,
    };
    run(&admin, action, body.reason).await
}

/// `POST /api/v1/services/{name}/restart`: a rolling restart (body left
/// out, or `{"reason": "…"}`): every task of the service is replaced
/// through its rollout, health-gated (`docs/health-checks.md`). Checks as
/// [`rollback`]; then 202 with the action record once the restart is
/// stored, 404 for an unknown service, 409 while a rollout is under way or
/// halted or when the service has 0 instances. Audited as `restart`.
pub async fn restart(
    ApiPath(service): ApiPath<String>,
    admin: Admin,
    ActionBody(body): ActionBody<ReasonBody>,
) -> Result<Response, AppError> {
    let action = OperatorAction::Rollout {
        service,
        action: RolloutAction::Restart,
        expected: None,
    };
    run(&admin, action, body.reason).await
}

/// `POST /api/v1/services/{name}/rollout/{other}`: 404 naming the rollout
/// actions there are.
pub async fn unknown_rollout_action(ApiPath((_, name)): ApiPath<(String, String)>) -> AppError {
    AppError::not_found(format!(
        "no rollout action {name:?}; they are resume, rollback"
    ))
}
