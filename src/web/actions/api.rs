//! `POST /api/v1/actions/{reconcile,kamikaze,teardown,abdicate,reregister}`
//! `POST /api/v1/services/{name}/rollout/{resume,rollback}` and
//! `POST /api/v1/services/{name}/restart`: one
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
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ReasonBody {
    /// Why (recorded in the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
}

/// The body of `resume` and `rollback`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
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
#[utoipa::path(
    post,
    path = "/api/v1/actions/reconcile",
    tag = "actions",
    params(ActionQuery),
    request_body(content = Option<ReconcileBody>, content_type = "application/json"),
    responses((status = 202, description = "Started or joined", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::Upstream, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn reconcile(
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<ReconcileBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    let kind = body.kind.unwrap_or(ReconcileKind::Explicit);
    run(&admin, OperatorAction::Reconcile(kind), reason).await
}

/// `POST /api/v1/actions/kamikaze`: 200, one result per executor.
#[utoipa::path(
    post,
    path = "/api/v1/actions/kamikaze",
    tag = "actions",
    params(ActionQuery),
    request_body(content = Option<FrameworkBody>, content_type = "application/json"),
    responses((status = 200, description = "One result per executor", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::Upstream, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn kamikaze(
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<FrameworkBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    check_framework_id(&admin.state, body.framework_id.as_deref())?;
    run(&admin, OperatorAction::Kamikaze, reason).await
}

/// `POST /api/v1/actions/teardown`: 200 with what was removed.
#[utoipa::path(
    post,
    path = "/api/v1/actions/teardown",
    tag = "actions",
    params(ActionQuery),
    request_body(content = Option<FrameworkBody>, content_type = "application/json"),
    responses((status = 200, description = "What was removed", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::Upstream, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn teardown(
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<FrameworkBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    check_framework_id(&admin.state, body.framework_id.as_deref())?;
    run(&admin, OperatorAction::Teardown, reason).await
}

/// `POST /api/v1/actions/abdicate`: 200 once this replica stepped down.
#[utoipa::path(
    post,
    path = "/api/v1/actions/abdicate",
    tag = "actions",
    params(ActionQuery),
    request_body(content = Option<ReasonBody>, content_type = "application/json"),
    responses((status = 200, description = "Stepped down", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn abdicate(
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<ReasonBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    run(&admin, OperatorAction::Abdicate, reason).await
}

/// `POST /api/v1/actions/reregister`: 200 (only in state `removed`, else
/// 409).
#[utoipa::path(
    post,
    path = "/api/v1/actions/reregister",
    tag = "actions",
    params(ActionQuery),
    request_body(content = Option<ReasonBody>, content_type = "application/json"),
    responses((status = 200, description = "Registering again", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::Upstream, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn reregister(
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<ReasonBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    run(&admin, OperatorAction::Reregister, reason).await
}

/// `POST /api/v1/actions/{other}`: 404 naming the actions there are.
pub async fn unknown_action(ApiPath(name): ApiPath<String>) -> AppError {
    AppError::not_found(format!(
        "no action {name:?}; actions are reconcile, kamikaze, teardown, abdicate, reregister"
    ))
}

/// The query every action takes: `?reason=`, as services and jobs take it
/// (either there or in the body; both must then agree, see
/// [`body_or_query`]).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct ActionQuery {
    /// Why (recorded in the audit trail). Given in the body's `reason` as
    /// well, the two must be equal (400 otherwise); an empty or blank
    /// `reason` on either side counts as not given, so the other is used.
    pub reason: Option<String>,
}

/// A value that may come in the body or the query: either, or both when
/// equal (400 naming `field` when they differ). An empty or blank value
/// counts as not given — `{"reason": ""}` is how many clients leave a field
/// out — so `{"reason": ""}` with `?reason=x` is `x`, and blank on both
/// sides is `None`.
pub(super) fn body_or_query(
    field: &str,
    body: Option<String>,
    query: Option<String>,
) -> Result<Option<String>, AppError> {
    let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    match (given(body), given(query)) {
        (None, q) => Ok(q),
        (Some(b), None) => Ok(Some(b)),
        (Some(b), Some(q)) if b == q => Ok(Some(q)),
        (Some(_), Some(_)) => Err(field_error(field, &format!("differs from ?{field}="))),
    }
}

/// The query of `POST …/rollout/{action}`.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RolloutQuery {
    /// Why (recorded in the audit trail). Given in the body's `reason` as
    /// well, the two must be equal (400 otherwise); an empty or blank
    /// `reason` on either side counts as not given, so the other is used.
    pub reason: Option<String>,
    /// Rollback: the fingerprint of the spec to restore, as the operator
    /// saw it (`restore.fingerprint` of the service). The body's
    /// `expected` follows the same rule as `reason`.
    pub expected: Option<String>,
}

/// `POST /api/v1/services/{name}/rollout/resume`: resume the service's
/// halted rollout; see [`rollback`].
#[utoipa::path(
    post,
    path = "/api/v1/services/{name}/rollout/resume",
    tag = "services",
    params(("name" = String, Path, description = "The service"), RolloutQuery),
    request_body(content = Option<RolloutBody>, content_type = "application/json"),
    responses((status = 200, description = "Resumed", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
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
#[utoipa::path(
    post,
    path = "/api/v1/services/{name}/rollout/rollback",
    tag = "services",
    params(("name" = String, Path, description = "The service"), RolloutQuery),
    request_body(content = Option<RolloutBody>, content_type = "application/json"),
    responses((status = 200, description = "Rolling back", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
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
    let expected = body_or_query("expected", body.expected, query.expected)?;
    let reason = body_or_query("reason", body.reason, query.reason)?;
    let action = OperatorAction::Rollout {
        service,
        action,
        expected,
    };
    run(&admin, action, reason).await
}

/// `POST /api/v1/services/{name}/restart`: a rolling restart (body left
/// out, or `{"reason": "…"}`): every task of the service is replaced
/// through its rollout, health-gated (`docs/health-checks.md`). Checks as
/// [`rollback`]; then 202 with the action record once the restart is
/// stored, 404 for an unknown service, 409 while a rollout is under way or
/// halted or when the service has 0 instances. Audited as `restart`.
#[utoipa::path(
    post,
    path = "/api/v1/services/{name}/restart",
    tag = "services",
    params(("name" = String, Path, description = "The service"), ActionQuery),
    request_body(content = Option<ReasonBody>, content_type = "application/json"),
    responses((status = 202, description = "Restart stored; the rollout replaces every task", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn restart(
    ApiPath(service): ApiPath<String>,
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<ReasonBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    let action = OperatorAction::Rollout {
        service,
        action: RolloutAction::Restart,
        expected: None,
    };
    run(&admin, action, reason).await
}

/// `POST /api/v1/services/{name}/rollout/{other}`: 404 naming the rollout
/// actions there are.
pub async fn unknown_rollout_action(ApiPath((_, name)): ApiPath<(String, String)>) -> AppError {
    AppError::not_found(format!(
        "no rollout action {name:?}; they are resume, rollback"
    ))
}
