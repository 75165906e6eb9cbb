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

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::AppState;
use super::actions::{ActionsView, ask};
use super::audit::{AuditQuery, AuditView};
use super::auth::Peer;
use super::error::AppError;
use super::extract::{
    ActionBody, AdminChange, ApiPath, JsonBody, NoFields, json_field_error, named_spec_body,
};
use super::query::{NoQuery, StrictQuery};
use super::views::{
    EventQuery, EventsView, OffersView, Readiness, ReplicasView, ServiceRow, ServicesView,
    StateView, TaskDetailView, TaskQuery, TasksView, readiness,
};
use crate::scheduler::spec::ValidServiceSpec;
use crate::scheduler::spec::service::new_name_problem;
use crate::scheduler::{CommandError, Expected, Request, ServiceSpec, Snapshot};
use crate::util::unix_now_secs;

/// `GET /api/v1/state`.
#[utoipa::path(
    get,
    path = "/api/v1/state",
    tag = "state",
    responses((status = 200, description = "The scheduler's state", body = StateView), crate::web::error::responses::BadRequest)
)]
pub async fn state(State(state): State<AppState>, _: StrictQuery<NoQuery>) -> Json<StateView> {
    let s = state.handle.snapshot();
    let mut view = StateView::new(&s, &*state.derived(&s).await, unix_now_secs());
    view.zookeeper_session = state.coordinator.session_timeouts().map(Into::into);
    Json(view)
}

/// `GET /api/v1/tasks`: filters and paging as [`TaskQuery`]; another
/// parameter is 400, named.
#[utoipa::path(
    get,
    path = "/api/v1/tasks",
    tag = "tasks",
    params(TaskQuery),
    responses((status = 200, description = "A page of tasks", body = TasksView), crate::web::error::responses::BadRequest)
)]
pub async fn tasks(
    State(state): State<AppState>,
    StrictQuery(query): StrictQuery<TaskQuery>,
) -> Result<Json<TasksView>, AppError> {
    let s = state.handle.snapshot();
    Ok(Json(tasks_view(&state, s, query).await?))
}

/// The tasks view of `s` under `query`, made off the async workers: a
/// filter reads every task's keys (a few milliseconds at 100,000 tasks).
pub(crate) async fn tasks_view(
    state: &AppState,
    s: Arc<Snapshot>,
    query: TaskQuery,
) -> Result<TasksView, AppError> {
    let d = state.derived(&s).await;
    state
        .off_workers(move || TasksView::new(&s, &d, &query))
        .await
        .map_err(|e| AppError::internal(format!("the tasks view failed: {e}")))?
}

/// `GET /api/v1/tasks/{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/tasks/{id}",
    tag = "tasks",
    params(("id" = String, Path, description = "The task ID")),
    responses((status = 200, description = "The task", body = TaskDetailView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Unavailable)
)]
pub async fn task(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<TaskDetailView>, AppError> {
    Ok(Json(TaskDetailView::new(&state.handle.snapshot(), &id)?))
}

/// `GET /api/v1/offers`.
#[utoipa::path(
    get,
    path = "/api/v1/offers",
    tag = "state",
    responses((status = 200, description = "Offers held", body = OffersView), crate::web::error::responses::BadRequest)
)]
pub async fn offers(State(state): State<AppState>, _: StrictQuery<NoQuery>) -> Json<OffersView> {
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
#[utoipa::path(
    get,
    path = "/api/v1/replicas",
    tag = "state",
    responses((status = 200, description = "The replicas", body = ReplicasView), crate::web::error::responses::BadRequest)
)]
pub async fn replicas(
    State(state): State<AppState>,
    _: StrictQuery<NoQuery>,
) -> Json<ReplicasView> {
    let s = state.handle.snapshot();
    Json(replicas_view(&state, &s).await)
}

/// `GET /api/v1/events`: `kind`, `limit` as [`EventQuery`]; another
/// parameter is 400, named.
#[utoipa::path(
    get,
    path = "/api/v1/events",
    tag = "events",
    params(EventQuery),
    responses((status = 200, description = "Recent events", body = EventsView), crate::web::error::responses::BadRequest)
)]
pub async fn events(
    State(state): State<AppState>,
    StrictQuery(query): StrictQuery<EventQuery>,
) -> Result<Json<EventsView>, AppError> {
    Ok(Json(EventsView::new(&state.handle.snapshot(), &query)?))
}

/// `GET /api/v1/services`.
#[utoipa::path(
    get,
    path = "/api/v1/services",
    tag = "services",
    responses((status = 200, description = "The services", body = ServicesView), crate::web::error::responses::BadRequest)
)]
pub async fn services(
    State(state): State<AppState>,
    _: StrictQuery<NoQuery>,
) -> Json<ServicesView> {
    Json(ServicesView::new(&state.handle.snapshot()))
}

/// `GET /api/v1/services/{name}`.
#[utoipa::path(
    get,
    path = "/api/v1/services/{name}",
    tag = "services",
    params(("name" = String, Path, description = "The service")),
    responses((status = 200, description = "The service; its `ETag` is the spec's `version`, for `If-Match`", body = ServiceRow, headers(("ETag" = String, description = "The stored spec's version, quoted"))), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Unavailable)
)]
pub async fn service(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let row = ServicesView::new(&s)
        .services
        .into_iter()
        .find(|row| row.name == name)
        .ok_or_else(|| AppError::absent(&s, format_args!("service {name:?}")))?;
    let etag = format!("\"{}\"", row.version);
    Ok(([(header::ETAG, etag)], Json(row)).into_response())
}

/// The versions an `If-Match` header accepts ([`super::etag`]); `None`
/// without the header. 400 (`invalid`, field `If-Match`) for a value that
/// is not `*` or a list of entity tags.
fn if_match(headers: &HeaderMap) -> Result<Option<Expected>, AppError> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    super::etag::parse_if_match(value.as_bytes())
        .map(Some)
        .map_err(|message| {
            AppError::invalid(vec![crate::scheduler::spec::FieldError {
                field: "If-Match".into(),
                message,
            }])
        })
}

/// What a service change answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
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
#[utoipa::path(
    put,
    path = "/api/v1/services/{name}",
    tag = "services",
    params(("name" = String, Path, description = "The service"), crate::web::extract::ReasonQuery, ("If-Match" = Option<String>, Header, description = "Replace only if the stored spec is still at one of these versions: entity tags as the `ETag` of `GET /api/v1/services/{name}` shows them, quoted and comma-separated (RFC 9110 §13.1.1; weak tags never match), or `*` for any stored spec; 412 when it changed or does not exist (nothing is created), 400 when the value is not `*` or entity tags")),
    request_body(content = ServiceSpec, description = "The service spec; `name` may be left out", content_type = "application/json"),
    responses((status = 200, description = "Replaced", body = ServiceChange), (status = 201, description = "Created", body = ServiceChange), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::PreconditionFailed, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn put_service(
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    AdminChange { admin, ctx }: AdminChange,
    JsonBody(body): JsonBody,
) -> Result<Response, AppError> {
    let expected = if_match(&headers)?;
    let spec = service_spec(body, &name, &admin.state.handle.snapshot())?;
    let params = put_params(&spec);
    let state = &admin.state;
    let conditional = expected.is_some();
    let request = match expected {
        Some(expected) => Request::ReplaceService {
            spec: Box::new(spec),
            expected,
        },
        None => Request::PutService(Box::new(spec)),
    };
    let result = ask(state, request).await.map_err(|e| match e {
        CommandError::NotFound(what) if conditional => missing_precondition(&what),
        e => AppError::from_command(e, &admin.path),
    });
    let (status, outcome) = match &result {
        Ok(true) => (StatusCode::OK, "replaced"),
        Ok(false) => (StatusCode::CREATED, "created"),
        Err(e) => (e.status, "failed"),
    };
    super::audit::record_result(state, &ctx, "service.put", params, &result, status, || {
        format!("service {name} {outcome}")
    })
    .await;
    result?;
    Ok((status, Json(ServiceChange { name, outcome })).into_response())
}

/// 412 for an `If-Match` on a service that does not exist (`what`, as the
/// core names it): the condition is false when there is no current
/// representation, whether it is `*` or entity tags (RFC 9110 §13.1.1).
/// Not 404: without the header the same `PUT` would create the service
/// (a 2xx), so the precondition is evaluated (RFC 9110 §13.2.1). A
/// `DELETE` of a missing service stays 404: without a precondition it
/// fails before anything is done, and §13.2.1 has such a failure win.
fn missing_precondition(what: &str) -> AppError {
    AppError::new(
        StatusCode::PRECONDITION_FAILED,
        "precondition-failed",
        "Changed since it was read",
        format!(
            "{what} does not exist, and If-Match asks for a stored spec; nothing was \
             created: PUT without If-Match to create it"
        ),
    )
}

/// The spec of a service change to `name` from a parsed body: a JSON
/// object whose `name`, when given, is `name`; 400 with field errors else
/// or when [`ValidServiceSpec::new`] refuses it, and, when `stored` has no
/// service `name` (the change creates it), when [`new_name_problem`]
/// refuses the name. The API's `PUT` and the dashboard's editor
/// (`super::service_pages`) both validate with this.
pub(crate) fn service_spec(
    body: Option<serde_json::Map<String, serde_json::Value>>,
    name: &str,
    stored: &Snapshot,
) -> Result<ValidServiceSpec, AppError> {
    let value = named_spec_body(body, name, "service spec")?;
    let spec: ServiceSpec = crate::util::json::from_value(value).map_err(json_field_error)?;
    let exists = stored.services.iter().any(|s| s.spec.name == name);
    let name_problem = new_name_problem(name).filter(|_| !exists);
    match (ValidServiceSpec::new(spec), name_problem) {
        (Ok(spec), None) => Ok(spec),
        (Ok(_), Some(problem)) => Err(AppError::invalid(vec![problem])),
        (Err(mut errors), problem) => {
            if !errors.iter().any(|e| e.field == "name") {
                errors.extend(problem);
            }
            Err(AppError::invalid(errors))
        }
    }
}

/// The audit parameters of a `service.put`: name, instances, cpus, mem
/// and the command, abbreviated.
pub(crate) fn put_params(spec: &ServiceSpec) -> serde_json::Value {
    serde_json::json!({
        "name": spec.name,
        "instances": spec.instances,
        "cpus": spec.cpus,
        "mem": spec.mem,
        "command": abbreviated(&spec.command),
    })
}

/// `DELETE /api/v1/services/{name}[?reason=…]`: delete a service (its
/// tasks are killed). 404 when there is no such service; with `If-Match`,
/// 412 when the stored spec is at none of its versions (nothing deleted).
/// Audited.
#[utoipa::path(
    delete,
    path = "/api/v1/services/{name}",
    tag = "services",
    params(("name" = String, Path, description = "The service"), crate::web::extract::ReasonQuery, ("If-Match" = Option<String>, Header, description = "Delete only if the stored spec is still at one of these versions: entity tags as the `ETag` of `GET /api/v1/services/{name}` shows them, quoted and comma-separated (RFC 9110 §13.1.1; weak tags never match), or `*` for any stored spec; 412 when it changed (nothing is deleted), 404 when there is no such service (as without the header: RFC 9110 §13.2.1), 400 when the value is not `*` or entity tags")),
    responses((status = 200, description = "Deleted", body = ServiceChange), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::PreconditionFailed, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn delete_service(
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    AdminChange { admin, ctx }: AdminChange,
    _: ActionBody<NoFields>,
) -> Result<Json<ServiceChange>, AppError> {
    let expected = if_match(&headers)?;
    let state = &admin.state;
    let request = Request::DeleteService {
        name: name.clone(),
        expected,
    };
    let result = ask::<bool>(state, request)
        .await
        .map_err(|e| AppError::from_command(e, &admin.path))
        .and_then(|deleted| {
            deleted
                .then_some(())
                .ok_or_else(|| AppError::not_found(format!("no service {name:?}")))
        });
    let params = serde_json::json!({ "name": name });
    super::audit::record_result(
        state,
        &ctx,
        "service.delete",
        params,
        &result,
        StatusCode::OK,
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
#[utoipa::path(
    get,
    path = "/api/v1/actions",
    tag = "actions",
    responses((status = 200, description = "The actions and their recent results", body = ActionsView), crate::web::error::responses::BadRequest)
)]
pub async fn actions(
    State(state): State<AppState>,
    _: StrictQuery<NoQuery>,
    headers: HeaderMap,
    peer: Peer,
) -> Json<ActionsView> {
    let s = state.handle.snapshot();
    Json(ActionsView::new(&state, &s, &headers, peer))
}

/// `GET /api/v1/audit`: the audit trail, with filters (see
/// [`super::audit`]).
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    params(AuditQuery),
    responses((status = 200, description = "Audit entries", body = AuditView), crate::web::error::responses::BadRequest, crate::web::error::responses::Unavailable)
)]
pub async fn audit(
    State(state): State<AppState>,
    StrictQuery(query): StrictQuery<AuditQuery>,
) -> Result<Json<AuditView>, AppError> {
    Ok(Json(AuditView::load(&state, query).await?))
}

/// `GET /api/v1/actions/results/{id}`: the JSON twin of a result page.
#[utoipa::path(
    get,
    path = "/api/v1/actions/results/{id}",
    tag = "actions",
    params(("id" = String, Path, description = "The action result ID")),
    responses((status = 200, description = "The action's record", body = super::actions::ActionRecord), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound)
)]
pub async fn action_result(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, AppError> {
    let record = state.results.found(&id)?;
    let record = record.current(&state.handle.snapshot());
    Ok(Json(&*record).into_response())
}

/// `GET /healthz`: liveness — 200 `ok` while the process serves HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    responses((status = 200, description = "`ok`", body = String, content_type = "text/plain"))
)]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// What `/readyz` answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ReadyBody<'a> {
    #[serde(flatten)]
    readiness: &'a Readiness,
    role: &'static str,
    state: &'static str,
}

/// `GET /readyz`: 200 when ready (leader and subscribed, events arriving
/// within the heartbeat timeout as of now; or follower of a live leader),
/// else 503; the body says why either way.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    responses((status = 200, description = "Ready", body = ReadyBody), (status = 503, description = "Not ready; the body says why", body = ReadyBody))
)]
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
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    responses((status = 200, description = "OpenMetrics text", body = String, content_type = "application/openmetrics-text"))
)]
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
