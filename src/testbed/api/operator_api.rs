//! The operator API subset (`POST /api/v1`: GET_FRAMEWORKS, GET_AGENTS,
//! TEARDOWN, the maintenance calls — in `maintenance_api.rs` —,
//! MARK_AGENT_GONE — in `master/gone.rs` — and DRAIN_AGENT,
//! DEACTIVATE_AGENT and REACTIVATE_AGENT — in `master/drain.rs`) and the
//! legacy endpoints `/master/teardown`, `/master/state`, `/master/frameworks`,
//! `/master/slaves` and `/master/redirect` (each also without the `/master` prefix, as the
//! master's HTTP delegate serves them). Sources: `src/master/http.cpp`
//! (`api`, `teardown`, `redirect`, `state`, `frameworks`, `slaves`),
//! `docs/mesos-protocol.md#operator-api` and captures h, i, k.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{OriginalUri, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;

use super::views::{FrameworksDraft, StateDraft};
use crate::mesos::json;
use crate::mesos::media::Encoding;
use crate::mesos::v1::master::{Call, Response as OperatorResponse, call, response};
use crate::testbed::http::{self, empty, text};
use crate::testbed::master::App;
use crate::testbed::master::drain::HoldRefusal;
use crate::testbed::master::{Leadership, Master};

/// `POST /api/v1`.
pub(crate) async fn operator(
    State(app): State<App>,
    method: Method,
    headers: HeaderMap,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let mut master = app.lock();
    let (response, call) = handle(&mut master, &method, &headers, uri.path(), &body);
    master.calls.record(
        "operator",
        call.as_ref().map(|c| c.r#type().as_str_name()),
        call.as_ref()
            .and_then(|c| c.teardown.as_ref())
            .map(|t| t.framework_id.value.clone()),
        None,
        response.status().as_u16(),
        call.as_ref(),
    );
    response
}

fn handle(
    master: &mut Master,
    method: &Method,
    headers: &HeaderMap,
    path: &str,
    body: &[u8],
) -> (Response, Option<Call>) {
    // An unrouted path: libprocess answers 404 before any authentication
    // (3rdparty/libprocess/src/process.cpp, no handler for the path).
    if master.faults.no_operator_api {
        return (empty(StatusCode::NOT_FOUND), None);
    }
    if let Err(refusal) = super::authenticate(master, headers, "mesos-master-readwrite") {
        return (refusal.into_response(), None);
    }
    if let Some(response) = super::leader_gate(master, path) {
        return (response, None);
    }
    if method != Method::POST {
        return (http::method_not_allowed(method), None);
    }
    let encoding = match http::request_encoding(headers) {
        Ok(e) => e,
        Err(refusal) => return (refusal.into_response(), None),
    };
    // The operator API checks Accept for every call
    // (`docs/mesos-protocol.md#v1-operator-calls`).
    let accept = match http::response_encoding(headers) {
        Ok(e) => e,
        Err(refusal) => return (refusal.into_response(), None),
    };
    let call: Call = match http::decode(encoding, body) {
        Ok(call) => call,
        Err(refusal) => return (refusal.into_response(), None),
    };
    if call.r#type.is_none() {
        let response = text(
            StatusCode::BAD_REQUEST,
            "Failed to validate master::Call: Expecting 'type' to be present",
        );
        return (response, Some(call));
    }
    let response = match call.r#type() {
        call::Type::GetFrameworks => {
            let answer = OperatorResponse {
                r#type: Some(response::Type::GetFrameworks as i32),
                get_frameworks: Some(master.get_frameworks()),
                ..Default::default()
            };
            answer_with(accept, &answer)
        }
        call::Type::GetMaintenanceSchedule
        | call::Type::GetMaintenanceStatus
        | call::Type::UpdateMaintenanceSchedule
        | call::Type::StartMaintenance
        | call::Type::StopMaintenance => super::maintenance_api::handle(master, &call, accept),
        call::Type::Teardown => match &call.teardown {
            None => text(
                StatusCode::BAD_REQUEST,
                "Failed to validate master::Call: Expecting 'teardown' to be present",
            ),
            Some(teardown) => teardown_framework(master, &teardown.framework_id.value),
        },
        call::Type::MarkAgentGone => match &call.mark_agent_gone {
            None => text(
                StatusCode::BAD_REQUEST,
                "Failed to validate master::Call: Expecting 'mark_agent_gone' to be present",
            ),
            // http.cpp _markAgentGone: 200 OK, also when already gone; 404
            // for an agent the master does not know.
            Some(gone) => {
                let agent_id = &gone.agent_id.value;
                if master.mark_agent_gone(agent_id) {
                    empty(StatusCode::OK)
                } else {
                    text(
                        StatusCode::NOT_FOUND,
                        format!("Agent '{agent_id}' not found"),
                    )
                }
            }
        },
        call::Type::GetAgents => {
            let answer = OperatorResponse {
                r#type: Some(response::Type::GetAgents as i32),
                get_agents: Some(master.get_agents()),
                ..Default::default()
            };
            answer_with(accept, &answer)
        }
        call::Type::DrainAgent | call::Type::DeactivateAgent | call::Type::ReactivateAgent => {
            agent_hold(master, &call)
        }
        _ => text(
            StatusCode::NOT_IMPLEMENTED,
            "This operator call is not simulated by mesos-testbed",
        ),
    };
    (response, Some(call))
}

/// A 200 answer of `answer` in the `accept`ed encoding.
pub(super) fn answer_with(accept: Encoding, answer: &OperatorResponse) -> Response {
    let body = match accept {
        Encoding::Json => json::to_vec(answer),
        Encoding::Protobuf => answer.encode_to_vec(),
    };
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(accept.media_type()),
        )],
        body,
    )
        .into_response()
}

/// DRAIN_AGENT, DEACTIVATE_AGENT and REACTIVATE_AGENT (`master/drain.rs`):
/// 200 with an empty body, or 400 (409 for REACTIVATE_AGENT of an
/// unreachable agent) with the master's text (capture u; `_reactivateAgent`).
fn agent_hold(master: &mut Master, call: &Call) -> Response {
    let missing = |field: &str| {
        text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate master::Call: Expecting '{field}' to be present"),
        )
    };
    let result = match call.r#type() {
        call::Type::DrainAgent => match &call.drain_agent {
            None => return missing("drain_agent"),
            Some(d) => master
                .drain_agent(
                    &d.agent_id.value,
                    d.max_grace_period.as_ref(),
                    d.mark_gone(),
                )
                .map_err(Into::into),
        },
        call::Type::DeactivateAgent => match &call.deactivate_agent {
            None => return missing("deactivate_agent"),
            Some(d) => master
                .deactivate_agent(&d.agent_id.value)
                .map_err(Into::into),
        },
        _ => match &call.reactivate_agent {
            None => return missing("reactivate_agent"),
            Some(r) => master.reactivate_agent(&r.agent_id.value),
        },
    };
    match result {
        Ok(()) => empty(StatusCode::OK),
        Err(HoldRefusal::BadRequest(body)) => text(StatusCode::BAD_REQUEST, body),
        Err(HoldRefusal::Conflict(body)) => text(StatusCode::CONFLICT, body),
    }
}

/// Operator teardown of an active or inactive framework: 200 and an empty
/// body; an unknown or completed one is 400 (capture h).
fn teardown_framework(master: &mut Master, framework_id: &str) -> Response {
    if master.remove_framework(framework_id) {
        empty(StatusCode::OK)
    } else {
        text(
            StatusCode::BAD_REQUEST,
            "No framework found with specified ID",
        )
    }
}

/// `POST /master/teardown` with the form field `frameworkId` in the body.
pub(crate) async fn legacy_teardown(
    State(app): State<App>,
    method: Method,
    headers: HeaderMap,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let mut master = app.lock();
    if let Err(refusal) = super::authenticate(&master, &headers, "mesos-master-readwrite") {
        return refusal.into_response();
    }
    if let Some(response) = super::leader_gate(&master, uri.path()) {
        return response;
    }
    if method != Method::POST {
        return http::method_not_allowed(&method);
    }
    let form: HashMap<String, String> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let framework_id = form.get("frameworkId").cloned();
    let response = match &framework_id {
        None => text(
            StatusCode::BAD_REQUEST,
            "Missing 'frameworkId' query parameter in the request body",
        ),
        Some(id) => teardown_framework(&mut master, id),
    };
    master.calls.record::<Call>(
        "teardown",
        Some("TEARDOWN"),
        framework_id,
        None,
        response.status().as_u16(),
        None,
    );
    response
}

fn json_ok(value: serde_json::Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// A read-only endpoint's answer: `draft` is taken under the master's lock
/// (after the leader gate) and `render` turns it into JSON on a blocking
/// thread once the lock is released.
///
/// A real master renders these endpoints on worker threads while its actor
/// waits for them, so that the state cannot change under the writers
/// (`Master::Http::deferBatchedRequest` and `processRequestsBatch` in
/// `src/master/http.cpp`, the writers in `src/master/readonly_handler.cpp`).
/// The testbed instead copies what it renders (each task cloned), so that
/// its master goes on serving calls and faults meanwhile: the answer is
/// the state when the copy was taken (`docs/testbed.md#inspection`).
async fn read_only<D: Send + 'static>(
    app: &App,
    path: &str,
    draft: impl FnOnce(&Master) -> D,
    render: fn(D) -> Vec<u8>,
) -> Response {
    let draft = {
        let master = app.lock();
        if let Some(response) = super::leader_gate(&master, path) {
            return response;
        }
        draft(&master)
    };
    match tokio::task::spawn_blocking(move || render(draft)).await {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering {path} failed: {e}"),
        ),
    }
}

/// `GET /master/state`.
pub(crate) async fn state(State(app): State<App>, OriginalUri(uri): OriginalUri) -> Response {
    read_only(&app, uri.path(), Master::state_draft, StateDraft::render).await
}

/// `GET /master/frameworks[?framework_id=ID]`.
pub(crate) async fn frameworks(
    State(app): State<App>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let only = query.get("framework_id").map(String::as_str);
    let draft = |m: &Master| m.frameworks_draft(only);
    read_only(&app, uri.path(), draft, FrameworksDraft::render).await
}

/// `GET /master/slaves[?slave_id=ID]`: `{"slaves": [...], "recovered_slaves": []}`,
/// each registered agent as in `/master/state`; `slave_id` keeps only that
/// agent (none for an unknown ID, still 200). Follows
/// `Master::ReadOnlyHandler::slaves` and `SlavesWriter` in
/// `src/master/readonly_handler.cpp` and `docs/endpoints/master/slaves.md`
/// (apache/mesos). The testbed recovers no agents from a registry, so
/// `recovered_slaves` is empty. Small (one entry per agent): rendered
/// under the lock.
pub(crate) async fn slaves(
    State(app): State<App>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let master = app.lock();
    if let Some(response) = super::leader_gate(&master, uri.path()) {
        return response;
    }
    let only = query.get("slave_id").map(String::as_str);
    json_ok(serde_json::json!({
        "slaves": master.slaves_json(only),
        "recovered_slaves": [],
    }))
}

/// `GET /master/redirect`: always 307 to the leader's base URL, even on the
/// leader itself; 503 without a leader (http.cpp `redirect`, capture k).
pub(crate) async fn redirect(State(app): State<App>) -> Response {
    let master = app.lock();
    match &master.leadership {
        Leadership::Leading => http::redirect(&format!("//{}", master.advertised())),
        Leadership::Following { leader } => http::redirect(&format!("//{leader}")),
        Leadership::NoLeader => text(StatusCode::SERVICE_UNAVAILABLE, "No leader elected"),
    }
}

/// `GET /version` (libprocess `VersionProcess`): the build's version, as
/// clients like pymesos ask for it.
pub(crate) async fn version(State(app): State<App>) -> Response {
    let master = app.lock();
    json_ok(serde_json::json!({
        "version": master.cfg.version,
        "build_date": "",
        "build_time": 0.0,
        "build_user": "mesos-testbed",
    }))
}
