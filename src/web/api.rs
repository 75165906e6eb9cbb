//! The JSON API (`/api/v1/...`), health, readiness and metrics
//! (`docs/architecture.md#http-api`). Read endpoints answer from the latest snapshot and are
//! open; service changes need the same rights as actions ([`super::auth`]).
//!
//! | method | path | answers |
//! |---|---|---|
//! | GET | `/api/v1/state` | 200 [`StateView`] |
//! | GET | `/api/v1/tasks` | 200 [`TasksView`]; 400 bad query ([`TaskQuery`]) |
//! | GET | `/api/v1/tasks/{id}` | 200 [`TaskDetailView`]; 404 |
//! | GET | `/api/v1/offers` | 200 [`OffersView`] |
//! | GET | `/api/v1/replicas` | 200 [`ReplicasView`] |
//! | GET | `/api/v1/events` | 200 [`EventsView`]; 400 bad query |
//! | GET | `/api/v1/services`, `/api/v1/services/{name}` | 200 [`ServicesView`] / [`ServiceRow`]; 404 |
//! | PUT | `/api/v1/services/{name}` | 201 created, 200 replaced; 400 field errors; 401; 403; 415; 503 |
//! | DELETE | `/api/v1/services/{name}` | 200; 404; 401; 403; 415; 503 |
//! | GET | `/healthz` | 200 `ok` while the process serves |
//! | GET | `/readyz` | 200 / 503 with [`Readiness`] |
//! | GET | `/metrics` | 200 OpenMetrics text |

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::AppState;
use super::actions::{ActionsView, ask, leader_precheck};
use super::auth::{self, Peer};
use super::error::AppError;
use super::query::StrictQuery;
use super::views::{
    EventQuery, EventsView, OffersView, Readiness, ReplicasView, ServiceRow, ServicesView,
    StateView, TaskDetailView, TaskQuery, TasksView, readiness,
};
use crate::scheduler::{Command, FieldError, ServiceSpec, Snapshot};
use crate::util::json::JsonError;
use crate::util::unix_now_secs;

/// The problem for a query string that does not parse.
pub(crate) fn bad_query(e: QueryRejection) -> AppError {
    AppError::bad_request(e.body_text())
}

/// The problem for a path that does not decode.
pub(crate) fn bad_path(e: PathRejection) -> AppError {
    AppError::bad_request(e.body_text())
}

/// `GET /api/v1/state`.
pub async fn state(State(state): State<AppState>) -> Json<StateView> {
    let s = state.handle.snapshot();
    Json(StateView::new(&s, &state.derived(&s), unix_now_secs()))
}

/// `GET /api/v1/tasks`: filters and paging as [`TaskQuery`]; another
/// parameter is 400, named.
pub async fn tasks(
    State(state): State<AppState>,
    StrictQuery(query): StrictQuery<TaskQuery>,
) -> Result<Json<TasksView>, AppError> {
    let s = state.handle.snapshot();
    Ok(Json(TasksView::new(&s, &state.derived(&s), &query)?))
}

/// `GET /api/v1/tasks/{id}`.
pub async fn task(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<TaskDetailView>, AppError> {
    let Path(id) = id.map_err(bad_path)?;
    Ok(Json(TaskDetailView::new(&state.handle.snapshot(), &id)?))
}

/// `GET /api/v1/offers`.
pub async fn offers(State(state): State<AppState>) -> Json<OffersView> {
    Json(OffersView::new(&state.handle.snapshot()))
}

/// The replicas view: election members from the coordinator, read within
/// the handler timeout (else the rows this replica knows, with `error`).
pub async fn replicas_view(state: &AppState, s: &Snapshot) -> ReplicasView {
    let timeout = state.config.handler_timeout;
    let members = match tokio::time::timeout(timeout, state.coordinator.members()).await {
        Ok(Ok(members)) => Ok(members),
        Ok(Err(e)) => Err(format!("cannot list election members: {e}")),
        Err(_) => Err(format!(
            "cannot list election members: no answer within {timeout:?}"
        )),
    };
    ReplicasView::new(s, members, unix_now_secs())
}

/// `GET /api/v1/replicas`.
pub async fn replicas(State(state): State<AppState>) -> Json<ReplicasView> {
    let s = state.handle.snapshot();
    Json(replicas_view(&state, &s).await)
}

/// `GET /api/v1/events`: `kind`, `limit` as [`EventQuery`]; another
/// parameter is 400, named.
pub async fn events(
    State(state): State<AppState>,
    StrictQuery(query): StrictQuery<EventQuery>,
) -> Result<Json<EventsView>, AppError> {
    Ok(Json(EventsView::new(&state.handle.snapshot(), &query)?))
}

/// `GET /api/v1/services`.
pub async fn services(State(state): State<AppState>) -> Json<ServicesView> {
    Json(ServicesView::new(&state.handle.snapshot()))
}

/// `GET /api/v1/services/{name}`.
pub async fn service(
    State(state): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ServiceRow>, AppError> {
    let Path(name) = name.map_err(bad_path)?;
    ServicesView::new(&state.handle.snapshot())
        .services
        .into_iter()
        .find(|s| s.name == name)
        .map(Json)
        .ok_or_else(|| AppError::not_found(format!("no service {name:?}")))
}

/// The checks every mutating API call (PUT, DELETE, POST) passes first:
/// Origin, then the token (or loopback rule), then leadership, then the
/// declared `Content-Type` ([`refuse_form_types`]). Returns who is acting.
pub(crate) fn guard_api(
    state: &AppState,
    headers: &HeaderMap,
    peer: Peer,
    path: &str,
) -> Result<auth::Actor, AppError> {
    auth::check_origin(headers, &state.config.advertised_url, false)?;
    let actor = auth::check_access(state.access, &state.keys, headers, peer, false)?;
    leader_precheck(state, path)?;
    refuse_form_types(headers)?;
    Ok(actor)
}

/// Whether the request declares a JSON `Content-Type`
/// (`application/json` or `application/*+json`); `None` when it declares
/// none.
fn declares_json(headers: &HeaderMap) -> Option<bool> {
    headers.get(header::CONTENT_TYPE).map(|v| {
        v.to_str()
            .ok()
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| {
                let t = t.trim().to_ascii_lowercase();
                t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
            })
    })
}

/// 415 when a mutating API call declares any `Content-Type` but JSON, even
/// with an empty body: a plain HTML form on another site can only send
/// `application/x-www-form-urlencoded`, `multipart/form-data` or
/// `text/plain`, and must never drive the API ([`super::auth`]).
fn refuse_form_types(headers: &HeaderMap) -> Result<(), AppError> {
    if declares_json(headers) == Some(false) {
        return Err(unsupported_media_type(
            "the API accepts only Content-Type: application/json (form and text types are \
             refused even with an empty body)",
        ));
    }
    Ok(())
}

/// `?reason=` of a service change (its body is the spec).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct ReasonQuery {
    /// Why (see [`super::audit`]).
    pub reason: Option<String>,
}

/// A JSON request body, after [`guard_api`]: empty is `None`; otherwise
/// it must be declared JSON (415) and parse (400).
pub(crate) fn json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<serde_json::Value>, AppError> {
    let body = body
        .map_err(|e| AppError::new(e.status(), "body", "Unreadable request body", e.body_text()))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if declares_json(headers) != Some(true) {
        return Err(unsupported_media_type(
            "send the body as Content-Type: application/json",
        ));
    }
    match crate::util::json::parse(&body) {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.syntax => Err(AppError::bad_request(format!(
            "the body is not JSON: {}",
            e.message
        ))),
        Err(e) => Err(json_field_error(e)),
    }
}

/// A field-level 400 naming the JSON path of the value at fault (`body`
/// for the whole document).
fn json_field_error(e: JsonError) -> AppError {
    let field = if e.path.is_empty() {
        "body".to_string()
    } else {
        e.path
    };
    AppError::invalid(vec![FieldError {
        field,
        message: e.message,
    }])
}

fn unsupported_media_type(detail: &str) -> AppError {
    AppError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
        "Unsupported media type",
        detail,
    )
}

/// What a service change answers.
#[derive(Debug, Serialize)]
pub struct ServiceChange {
    /// The service.
    pub name: String,
    /// `created`, `replaced` or `deleted`.
    pub outcome: &'static str,
}

/// `PUT /api/v1/services/{name}[?reason=…]`: create or replace a service.
/// The body is a service spec (the `--services` format of the README); `name` may be
/// left out (taken from the path) but must match it when given. 201 when
/// created, 200 when replaced, 400 with field-level `errors`. Audited.
#[allow(clippy::too_many_arguments)]
pub async fn put_service(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
    name: Result<Path<String>, PathRejection>,
    reason: Result<Query<ReasonQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let Path(name) = name.map_err(bad_path)?;
    let Query(reason) = reason.map_err(bad_query)?;
    let actor = guard_api(&state, &headers, peer, uri.path())?;
    let reason = super::audit::check_reason(reason.reason.as_deref())?;
    let mut value = json_body(&headers, body)?
        .ok_or_else(|| AppError::bad_request("the body must be a service spec (JSON object)"))?;
    let Some(object) = value.as_object_mut() else {
        return Err(AppError::bad_request("the body must be a JSON object"));
    };
    let named = object
        .entry("name")
        .or_insert_with(|| serde_json::Value::String(name.clone()));
    if named.as_str() != Some(name.as_str()) {
        return Err(AppError::invalid(vec![FieldError {
            field: "name".into(),
            message: format!("must equal the name in the path ({name:?})"),
        }]));
    }
    let spec: ServiceSpec = crate::util::json::from_value(value).map_err(json_field_error)?;
    let errors = spec.validate();
    if !errors.is_empty() {
        return Err(AppError::invalid(errors));
    }
    let params = serde_json::json!({
        "name": spec.name,
        "instances": spec.instances,
        "cpus": spec.cpus,
        "mem": spec.mem,
        "command": abbreviated(&spec.command),
    });
    let ctx = super::audit::Context::api(actor, peer, reason);
    let result = ask(&state, |reply| Command::PutService { spec, reply })
        .await
        .map_err(|e| AppError::from_command(e, uri.path()));
    let (status, outcome) = match &result {
        Ok(true) => (StatusCode::OK, "replaced"),
        Ok(false) => (StatusCode::CREATED, "created"),
        Err(e) => (e.status, "failed"),
    };
    audit_change(&state, &ctx, "service.put", params, &result, status, || {
        format!("service {name} {outcome}")
    })
    .await;
    result?;
    Ok((status, Json(ServiceChange { name, outcome })).into_response())
}

/// Writes the audit entry of a service change.
async fn audit_change<T>(
    state: &AppState,
    ctx: &super::audit::Context,
    action: &str,
    params: serde_json::Value,
    result: &Result<T, AppError>,
    status: StatusCode,
    summary: impl FnOnce() -> String,
) {
    let outcome = super::audit::Outcome {
        ok: result.is_ok(),
        status: status.as_u16(),
        summary: match result {
            Ok(_) => summary(),
            Err(e) => format!("{action} failed: {}: {}", e.title, e.detail),
        },
    };
    super::audit::record(state, ctx, action, params, &outcome).await;
}

/// `DELETE /api/v1/services/{name}[?reason=…]`: delete a service (its
/// tasks are killed). 404 when there is no such service. Audited.
pub async fn delete_service(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
    name: Result<Path<String>, PathRejection>,
    reason: Result<Query<ReasonQuery>, QueryRejection>,
) -> Result<Json<ServiceChange>, AppError> {
    let Path(name) = name.map_err(bad_path)?;
    let Query(reason) = reason.map_err(bad_query)?;
    let actor = guard_api(&state, &headers, peer, uri.path())?;
    let reason = super::audit::check_reason(reason.reason.as_deref())?;
    let ctx = super::audit::Context::api(actor, peer, reason);
    let target = name.clone();
    let result = ask(&state, |reply| Command::DeleteService {
        name: target,
        reply,
    })
    .await
    .map_err(|e| AppError::from_command(e, uri.path()))
    .and_then(|deleted| {
        deleted
            .then_some(())
            .ok_or_else(|| AppError::not_found(format!("no service {name:?}")))
    });
    let status = result
        .as_ref()
        .map_or_else(|e| e.status, |_| StatusCode::OK);
    let params = serde_json::json!({ "name": name });
    audit_change(
        &state,
        &ctx,
        "service.delete",
        params,
        &result,
        status,
        || format!("service {name} deleted"),
    )
    .await;
    result?;
    Ok(Json(ServiceChange {
        name,
        outcome: "deleted",
    }))
}

/// `GET /api/v1/actions`: the JSON twin of the actions page.
pub async fn actions(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
) -> Json<ActionsView> {
    let s = state.handle.snapshot();
    Json(ActionsView::new(&state, &s, &headers, peer))
}

/// `GET /api/v1/actions/results/{id}`: the JSON twin of a result page.
pub async fn action_result(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, AppError> {
    let Path(id) = id.map_err(bad_path)?;
    let record = state.results.get(&id).ok_or_else(|| {
        AppError::not_found(format!(
            "no action result {id:?} (results are kept in memory, the latest 100)"
        ))
    })?;
    let record = record.current(&state.handle.snapshot());
    Ok(Json(&*record).into_response())
}

/// `GET /healthz`: liveness — 200 `ok` while the process serves HTTP.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// What `/readyz` answers.
#[derive(Debug, Serialize)]
struct ReadyBody<'a> {
    #[serde(flatten)]
    readiness: &'a Readiness,
    role: &'static str,
    state: &'static str,
}

/// `GET /readyz`: 200 when ready (leader and subscribed, events arriving
/// within the heartbeat timeout as of now; or follower of a live leader),
/// else 503; the body says why either way.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let s = state.handle.snapshot();
    let r = readiness(&s, unix_now_secs());
    let status = if r.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = ReadyBody {
        readiness: &r,
        role: s.leadership.role(),
        state: s.framework.state.as_str(),
    };
    (status, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

/// `GET /metrics`: the core's registry, then the web layer's HTTP metrics,
/// in the OpenMetrics text format.
pub async fn metrics(State(state): State<AppState>) -> Result<Response, AppError> {
    use prometheus_client::encoding::text::{encode_eof, encode_registry};
    let mut out = String::new();
    encode_registry(&mut out, &state.registry)
        .and_then(|_| encode_registry(&mut out, &state.http_metrics.registry))
        .and_then(|_| encode_eof(&mut out))
        .map_err(|e| AppError::internal(format!("cannot encode metrics: {e}")))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
        .into_response())
}

/// A service's command for its audit entry, as the spec gives it (a string
/// or an argv array), with each string cut at 200 characters and at most 20
/// arguments, so that an entry stays small.
fn abbreviated(command: &crate::scheduler::spec::CommandSpec) -> serde_json::Value {
    use crate::scheduler::spec::CommandSpec;
    let cut = |s: &String| s.chars().take(200).collect::<String>();
    match command {
        CommandSpec::Shell(line) => cut(line).into(),
        CommandSpec::Argv(argv) => argv.iter().take(20).map(cut).collect::<Vec<_>>().into(),
    }
}
