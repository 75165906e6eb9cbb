//! `POST /api/v1/actions/{action}` and
//! `POST /api/v1/services/{name}/rollout/{resume|rollback}`: the checks of
//! a JSON request and of its body, then `execute` (`actions/mod.rs`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::{OperatorAction, execute};
use crate::scheduler::rules::rollout::RolloutAction;
use crate::scheduler::{FieldError, ReconcileKind};
use crate::web::AppState;
use crate::web::api::{bad_path, guard_api, json_body};
use crate::web::audit::{self, Context};
use crate::web::auth::Peer;
use crate::web::error::AppError;
use crate::web::query::StrictQuery;

/// The fields of an action's body: none without a body; 400 unless it is
/// a JSON object holding only `allowed` fields (each unknown one named).
fn body_fields(
    action: &str,
    body: Option<serde_json::Value>,
    allowed: &[&str],
) -> Result<serde_json::Map<String, serde_json::Value>, AppError> {
    let object = match body {
        None => return Ok(serde_json::Map::new()),
        Some(serde_json::Value::Object(object)) => object,
        Some(_) => {
            return Err(AppError::bad_request(format!(
                "the body of {action} must be a JSON object (or left out)"
            )));
        }
    };
    let takes = if allowed.is_empty() {
        format!("{action} takes no fields")
    } else {
        format!("{action} takes only {}", allowed.join(", "))
    };
    let unknown: Vec<FieldError> = object
        .keys()
        .filter(|key| !allowed.contains(&key.as_str()))
        .map(|key| FieldError {
            field: key.clone(),
            message: format!("unknown field; {takes}"),
        })
        .collect();
    if unknown.is_empty() {
        Ok(object)
    } else {
        Err(AppError::invalid(unknown))
    }
}

fn field_error(field: &str, message: &str) -> AppError {
    AppError::invalid(vec![FieldError {
        field: field.to_string(),
        message: message.to_string(),
    }])
}

/// `kind` of a reconcile body: left out (or null) is explicit.
fn reconcile_kind(
    fields: &serde_json::Map<String, serde_json::Value>,
) -> Result<ReconcileKind, AppError> {
    match fields.get("kind") {
        None | Some(serde_json::Value::Null) => Ok(ReconcileKind::Explicit),
        Some(kind) => match kind.as_str() {
            Some("explicit") => Ok(ReconcileKind::Explicit),
            Some("implicit") => Ok(ReconcileKind::Implicit),
            _ => Err(field_error("kind", r#"must be "explicit" or "implicit""#)),
        },
    }
}

/// The `framework_id` guard of teardown and kamikaze: when given, it must
/// name the registered framework (409 otherwise), so that a request meant
/// for one framework never hits the one registered since.
fn check_framework_id(
    state: &AppState,
    fields: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), AppError> {
    let wanted = match fields.get("framework_id") {
        None | Some(serde_json::Value::Null) => return Ok(()),
        Some(serde_json::Value::String(id)) => id,
        Some(_) => return Err(field_error("framework_id", "must be a string")),
    };
    let current = state.handle.snapshot().framework.id.clone();
    if current.as_ref() != Some(wanted) {
        return Err(AppError::conflict(format!(
            "framework_id {wanted:?} is not the registered framework ({})",
            current.as_deref().unwrap_or("none")
        )));
    }
    Ok(())
}

/// The body's `reason` (absent or null: none), checked as the audit trail
/// takes it.
fn reason(fields: &serde_json::Map<String, serde_json::Value>) -> Result<Option<String>, AppError> {
    match fields.get("reason") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(reason)) => audit::check_reason(Some(reason)),
        Some(_) => Err(field_error("reason", "must be a string")),
    }
}

/// `POST /api/v1/actions/{action}`: see the module doc for bodies and
/// statuses. Checks, in order: known action (404), origin (403), token
/// or loopback rule (401/403), leadership (503), body (400/415).
pub async fn api_action(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let Path(name) = name.map_err(bad_path)?;
    let known = [
        "reconcile",
        "kamikaze",
        "teardown",
        "abdicate",
        "reregister",
    ];
    if !known.contains(&name.as_str()) {
        return Err(AppError::not_found(format!(
            "no action {name:?}; actions are {}",
            known.join(", ")
        )));
    }
    let actor = guard_api(&state, &headers, peer, uri.path())?;
    let body = json_body(&headers, body)?;
    let (action, fields) = match name.as_str() {
        "reconcile" => {
            let fields = body_fields(&name, body, &["kind", "reason"])?;
            (OperatorAction::Reconcile(reconcile_kind(&fields)?), fields)
        }
        "teardown" | "kamikaze" => {
            let fields = body_fields(&name, body, &["framework_id", "reason"])?;
            check_framework_id(&state, &fields)?;
            if name == "teardown" {
                (OperatorAction::Teardown, fields)
            } else {
                (OperatorAction::Kamikaze, fields)
            }
        }
        "abdicate" => (
            OperatorAction::Abdicate,
            body_fields(&name, body, &["reason"])?,
        ),
        _ => (
            OperatorAction::Reregister,
            body_fields(&name, body, &["reason"])?,
        ),
    };
    let ctx = Context::api(actor, peer, reason(&fields)?);
    let (record, error) = execute(&state, action, uri.path(), &ctx).await;
    if let Some(error) = error {
        return Err(error);
    }
    let status = StatusCode::from_u16(record.status).unwrap_or(StatusCode::OK);
    Ok((status, Json(&*record)).into_response())
}

/// The query of `POST …/rollout/{action}`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct RolloutQuery {
    /// Rollback: the fingerprint of the spec to restore, as the operator
    /// saw it (`restore.fingerprint` of the service).
    pub expected: Option<String>,
}

/// `POST /api/v1/services/{name}/rollout/{resume|rollback}`: resume the
/// service's halted rollout, or roll it back to its previous spec (body
/// left out, or `{"reason": "…", "expected": "<fingerprint>"}`; `expected`
/// may be given as `?expected=` instead). Checks as [`api_action`]: known
/// action (404), origin (403), token or loopback rule (401/403),
/// leadership (503), query and body (400/415); then 200 with the action
/// record, 404 for an unknown service, 409 when not halted (resume), or
/// (rollback) with no rollout under way or halted, no previous spec, or a
/// previous spec other than `expected`. Audited.
pub async fn api_rollout(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<StrictQuery<RolloutQuery>, AppError>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let Path((service, name)) = path.map_err(bad_path)?;
    let action = match name.as_str() {
        "resume" => RolloutAction::Resume,
        "rollback" => RolloutAction::Rollback,
        _ => {
            return Err(AppError::not_found(format!(
                "no rollout action {name:?}; they are resume, rollback"
            )));
        }
    };
    let actor = guard_api(&state, &headers, peer, uri.path())?;
    let StrictQuery(query) = query?;
    let body = json_body(&headers, body)?;
    let fields = body_fields(&name, body, &["reason", "expected"])?;
    let expected = match (fields.get("expected"), query.expected) {
        (None | Some(serde_json::Value::Null), q) => q,
        (Some(serde_json::Value::String(e)), None) => Some(e.clone()),
        (Some(serde_json::Value::String(e)), Some(q)) if *e == q => Some(q),
        (Some(serde_json::Value::String(_)), Some(_)) => {
            return Err(field_error("expected", "differs from ?expected="));
        }
        (Some(_), _) => return Err(field_error("expected", "must be a string")),
    };
    let ctx = Context::api(actor, peer, reason(&fields)?);
    let action = OperatorAction::Rollout {
        service,
        action,
        expected,
    };
    let (record, error) = execute(&state, action, uri.path(), &ctx).await;
    if let Some(error) = error {
        return Err(error);
    }
    Ok(Json(&*record).into_response())
}
