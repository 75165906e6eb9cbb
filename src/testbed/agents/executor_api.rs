//! Process mode, the agents' side of the v1 executor API: each simulated
//! agent gets its own listener (its `MESOS_AGENT_ENDPOINT`, and the port in
//! offers' URLs) serving `POST /api/v1/executor` and
//! `/slave(1)/api/v1/executor` for the real executor processes it starts.
//! One listener per agent, because an executor call names only its framework
//! and executor, which two agents may share.
//!
//! Checks, codes and texts follow `Http::executor` in `src/slave/http.cpp`
//! (Mesos 1.12) in its order: 405; 400 / 415 for the media type and body;
//! 400 `Failed to validate Executor::Call: …` (`src/common/validation.cpp`
//! validateExecutorCall); 406 for SUBSCRIBE's `Accept`; HEARTBEAT → 202
//! before any lookup; 503 `Agent has not finished recovery` for other calls
//! while recovering; 400 `Framework cannot be found` / `Executor cannot be
//! found`; 403 `Executor is not subscribed`; then SUBSCRIBE → 200 stream,
//! UPDATE and MESSAGE → 202, UNKNOWN → 501.
//! `docs/mesos-protocol.md#executor-calls-and-events`.

use std::net::SocketAddr;
use std::sync::{Mutex, Weak};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use tokio_util::sync::CancellationToken;

use crate::mesos::media::Encoding;
use crate::mesos::v1::executor::{Call, call};
use crate::mesos::v1::{TaskState, task_status};
use crate::testbed::http::{self, empty, text};
use crate::testbed::master::App;
use crate::testbed::master::Master;
use crate::testbed::master::stream::{ExecutorStream, RecordStream, record_stream};

/// Bytes queued for one executor before it is considered stuck and cut.
const EXECUTOR_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// Handler state: the master and which agent this listener is.
#[derive(Clone)]
pub(crate) struct AgentApp {
    app: App,
    agent_index: usize,
}

/// Binds `addr` (port 0 for a free one) and serves agent `agent_index`'s
/// executor API until `stop` is cancelled. Returns the bound address.
///
/// # Errors
/// When the address cannot be bound.
pub(crate) fn serve_agent(
    app: App,
    agent_index: usize,
    addr: SocketAddr,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let bound = listener.local_addr()?;
    let files = super::sandboxes::routes(app.clone(), agent_index);
    let state = AgentApp { app, agent_index };
    let router = Router::new()
        .route("/api/v1/executor", any(executor))
        .route("/slave(1)/api/v1/executor", any(executor))
        .with_state(state)
        .merge(files);
    tokio::spawn(async move {
        let server = axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(error) = server.await {
            tracing::error!(%error, "agent executor endpoint failed");
        }
    });
    Ok(bound)
}

/// A new stream for the executor in `container_id`; the master hears of its
/// end through `executor_stream_closed`.
pub(crate) fn open_stream(
    master: Weak<Mutex<Master>>,
    container_id: &str,
    token: u64,
    encoding: Encoding,
) -> (ExecutorStream, RecordStream) {
    let container_id = container_id.to_string();
    let (sender, body) = record_stream(encoding, EXECUTOR_QUEUE_BYTES, move || {
        if let Some(master) = master.upgrade() {
            let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
            master.executor_stream_closed(&container_id, token);
        }
    });
    (ExecutorStream::new(token, sender), body)
}

/// `POST /api/v1/executor`; every call is recorded with `api: "executor"`.
async fn executor(
    State(state): State<AgentApp>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut master = state.app.lock();
    let (response, call) = handle(&mut master, state.agent_index, &method, &headers, &body);
    master.calls.record(
        "executor",
        call.as_ref().map(|c| c.r#type().as_str_name()),
        call.as_ref().map(|c| c.framework_id.value.clone()),
        None,
        response.status().as_u16(),
        call.as_ref(),
    );
    response
}

fn handle(
    master: &mut Master,
    agent_index: usize,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> (Response, Option<Call>) {
    if method != Method::POST {
        return (http::method_not_allowed(method), None);
    }
    let encoding = match http::request_encoding(headers) {
        Ok(e) => e,
        Err(refusal) => return (refusal.into_response(), None),
    };
    let call: Call = match http::decode(encoding, body) {
        Ok(call) => call,
        Err(refusal) => return (refusal.into_response(), None),
    };
    if let Err(reason) = validate(&call) {
        let response = text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate Executor::Call: {reason}"),
        );
        return (response, Some(call));
    }
    let response = dispatch(master, agent_index, headers, &call);
    (response, Some(call))
}

fn dispatch(master: &mut Master, agent_index: usize, headers: &HeaderMap, call: &Call) -> Response {
    use call::Type as T;
    let subscribe_encoding = if call.r#type() == T::Subscribe {
        match http::response_encoding(headers) {
            Ok(e) => Some(e),
            Err(refusal) => return refusal.into_response(),
        }
    } else if call.r#type() == T::Heartbeat {
        return empty(StatusCode::ACCEPTED);
    } else {
        if master.agent_recovering(agent_index) {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "Agent has not finished recovery",
            );
        }
        None
    };
    let framework_id = call.framework_id.value.as_str();
    let executor_id = call.executor_id.value.as_str();
    let Some(container_id) = master.find_process(agent_index, framework_id, executor_id) else {
        let message = if master.agent_knows_framework(agent_index, framework_id) {
            "Executor cannot be found"
        } else {
            "Framework cannot be found"
        };
        return text(StatusCode::BAD_REQUEST, message);
    };
    if let Some(encoding) = subscribe_encoding {
        let subscribe = call.subscribe.clone().unwrap_or_default();
        let body = master.executor_subscribed(&container_id, subscribe, encoding);
        let mut response = Response::new(Body::from_stream(body));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(encoding.media_type()),
        );
        return response;
    }
    if !master.process_subscribed(&container_id) {
        return text(StatusCode::FORBIDDEN, "Executor is not subscribed");
    }
    match call.r#type() {
        T::Update => {
            let status = call.update.clone().expect("validated").status;
            master.executor_update(&container_id, status);
            empty(StatusCode::ACCEPTED)
        }
        T::Message => {
            let data = call.message.clone().expect("validated").data;
            master.executor_message(&container_id, data);
            empty(StatusCode::ACCEPTED)
        }
        _ => empty(StatusCode::NOT_IMPLEMENTED),
    }
}

/// `validateExecutorCall` (`src/common/validation.cpp`), returning the
/// reason text. `executor_id` and `framework_id` are `required`, so a call
/// without them does not parse at all.
fn validate(call: &Call) -> Result<(), String> {
    use call::Type as T;
    if call.r#type.is_none() {
        return Err("Expecting 'type' to be present".into());
    }
    match call.r#type() {
        T::Subscribe if call.subscribe.is_none() => {
            Err("Expecting 'subscribe' to be present".into())
        }
        T::Update => {
            let Some(update) = &call.update else {
                return Err("Expecting 'update' to be present".into());
            };
            let status = &update.status;
            let Some(uuid) = &status.uuid else {
                return Err("Expecting 'uuid' to be present".into());
            };
            // stout UUID::fromBytes: exactly 16 bytes.
            if uuid.len() != 16 {
                return Err(format!("Not a valid UUID: {} bytes", uuid.len()));
            }
            if let Some(id) = &status.executor_id
                && id.value != call.executor_id.value
            {
                return Err(format!(
                    "ExecutorID in Call: {} does not match ExecutorID in TaskStatus: {}",
                    call.executor_id.value, id.value
                ));
            }
            if status.source() != task_status::Source::Executor {
                return Err(format!(
                    "Received Call from executor {} of framework {} with invalid source, expecting 'SOURCE_EXECUTOR'",
                    call.executor_id.value, call.framework_id.value
                ));
            }
            if status.state() == TaskState::TaskStaging {
                return Err(format!(
                    "Received TASK_STAGING from executor {} of framework {} which is not allowed",
                    call.executor_id.value, call.framework_id.value
                ));
            }
            Ok(())
        }
        T::Message if call.message.is_none() => Err("Expecting 'message' to be present".into()),
        _ => Ok(()),
    }
}
