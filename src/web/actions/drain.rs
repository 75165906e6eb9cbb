//! `POST` and `DELETE /api/v1/agents/{agent_id}/drain`: start or cancel
//! the appliance's SLA-aware drain of an agent (`docs/draining.md`). Both
//! are admin actions run through `execute` (`actions/mod.rs`), so they are
//! audited with who and why, and kept for the result pages.

use axum::response::Response;
use serde::Deserialize;

use super::OperatorAction;
use super::api::{ActionQuery, body_or_query, run};
use crate::scheduler::FieldError;
use crate::scheduler::drains::{MinHealthy, ThenAction};
use crate::web::error::AppError;
use crate::web::extract::{ActionBody, Admin, ApiPath, fields};
use crate::web::query::StrictQuery;

/// The body of `POST …/drain`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DrainBody {
    /// The floor per service: a non-negative integer or `"P%"` (required).
    #[schema(value_type = crate::scheduler::drains::MinHealthy, required = true)]
    pub min_healthy: Option<serde_json::Value>,
    /// Why (recorded in the drain and the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
    /// `none` (default), `drain_agent` or `deactivate_agent`.
    #[serde(deserialize_with = "fields::string")]
    #[schema(example = "drain_agent")]
    pub then: Option<String>,
}

/// The body of `DELETE …/drain`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CancelDrainBody {
    /// Why (recorded in the audit trail).
    #[serde(deserialize_with = "fields::string")]
    pub reason: Option<String>,
}

/// Checks a drain body: every field error at once.
pub fn check_drain(body: &DrainBody) -> Result<(MinHealthy, ThenAction), Vec<FieldError>> {
    let mut errors = Vec::new();
    let min_healthy = match &body.min_healthy {
        None => {
            errors.push(FieldError {
                field: "min_healthy".into(),
                message: r#"required: a non-negative integer (tasks) or a string "P%""#.into(),
            });
            None
        }
        Some(value) => MinHealthy::from_json(value)
            .map_err(|message| {
                errors.push(FieldError {
                    field: "min_healthy".into(),
                    message,
                })
            })
            .ok(),
    };
    let then = ThenAction::parse(body.then.as_deref().unwrap_or("none"))
        .map_err(|message| {
            errors.push(FieldError {
                field: "then".into(),
                message,
            })
        })
        .ok();
    match (min_healthy, then) {
        (Some(m), Some(t)) if errors.is_empty() => Ok((m, t)),
        _ => Err(errors),
    }
}

/// `POST /api/v1/agents/{agent_id}/drain`: start a drain. Checks, in
/// order: Origin (403), token or loopback rule (401/403), leadership (503),
/// body (400 with field errors, 415); then 202 with the action record once
/// the drain is stored, 404 for an agent the leader does not know, 409
/// when a drain of it runs or is done (cancel it first). Audited.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{agent_id}/drain",
    tag = "agents",
    params(("agent_id" = String, Path, description = "The Mesos agent ID"), ActionQuery),
    request_body(content = DrainBody, content_type = "application/json"),
    responses((status = 202, description = "Drain started", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn start(
    ApiPath(agent_id): ApiPath<String>,
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<DrainBody>,
) -> Result<Response, AppError> {
    let (min_healthy, then) = check_drain(&body).map_err(AppError::invalid)?;
    let reason = body_or_query("reason", body.reason, query.reason)?;
    let action = OperatorAction::Drain {
        agent_id,
        min_healthy,
        then,
    };
    run(&admin, action, reason).await
}

/// `DELETE /api/v1/agents/{agent_id}/drain`: cancel the agent's drain; the
/// agent takes new tasks again. 200 with the action record, 404 when no
/// drain of it runs or is done. Audited.
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{agent_id}/drain",
    tag = "agents",
    params(("agent_id" = String, Path, description = "The Mesos agent ID"), ActionQuery),
    request_body(content = Option<CancelDrainBody>, content_type = "application/json"),
    responses((status = 200, description = "Drain cancelled", body = super::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn cancel(
    ApiPath(agent_id): ApiPath<String>,
    admin: Admin,
    StrictQuery(query): StrictQuery<ActionQuery>,
    ActionBody(body): ActionBody<CancelDrainBody>,
) -> Result<Response, AppError> {
    let reason = body_or_query("reason", body.reason, query.reason)?;
    run(&admin, OperatorAction::CancelDrain { agent_id }, reason).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_error_is_named() {
        let body = DrainBody {
            min_healthy: Some(serde_json::json!("120%")),
            reason: None,
            then: Some("reboot".into()),
        };
        let errors = check_drain(&body).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["min_healthy", "then"]);
        assert!(check_drain(&DrainBody::default()).is_err());
        let ok = DrainBody {
            min_healthy: Some(serde_json::json!(3)),
            ..Default::default()
        };
        assert_eq!(
            check_drain(&ok).unwrap(),
            (MinHealthy::Count(3), ThenAction::None)
        );
    }
}
