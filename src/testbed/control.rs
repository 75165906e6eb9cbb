//! Fault injection and inspection over HTTP, under `/testbed/`. Not part of
//! Mesos; answered whether or not this master leads. Bodies are JSON.
//!
//! | method and path | effect |
//! |---|---|
//! | `GET /testbed/calls[?type=T]` | `{"calls": [CallRecord…]}`: every call received (of type `T`, e.g. `SUBSCRIBE`), oldest first |
//! | `GET /testbed/tasks` | `{"tasks": [TaskView…]}`: live and unreachable tasks, then completed ones (`"completed": true`) with their terminal state |
//! | `GET /testbed/frameworks` | `{"frameworks": [FrameworkView…]}` (completed ones too) |
//! | `GET /testbed/agents` | `{"agents": [AgentView…]}` |
//! | `POST /testbed/agents/{agent_id}/unreachable` | the agent stops answering health checks: TASK_LOST (REASON_AGENT_REMOVED, no uuid), FAILURE{agent_id}, RESCIND of its offers |
//! | `POST /testbed/agents/{agent_id}/reachable` | the agent re-registers with its tasks: TASK_RUNNING (REASON_AGENT_REREGISTERED) |
//! | `POST /testbed/agents/{agent_id}/gone` | the operator's MARK_AGENT_GONE (also served on `/api/v1`): TASK_GONE_BY_OPERATOR (TASK_LOST if not PARTITION_AWARE), RESCIND, FAILURE; the agent never returns (`gone.rs`) |
//! | `POST /testbed/frameworks/{framework_id}/drop-stream` | cut the framework's subscription without a terminating chunk |
//! | `POST /testbed/heartbeats/stop` `{"framework_id": "…"}` (optional) | stop HEARTBEAT events (for one framework or all) |
//! | `POST /testbed/heartbeats/resume` | resume them for everyone |
//! | `POST /testbed/faults/ignore-kill` `{"task_id_prefix": "…"}` | executors ignore KILL of matching tasks |
//! | `POST /testbed/faults/hold-staging` `{"task_id_prefix": "…"}` | matching tasks stay in TASK_STAGING |
//! | `POST /testbed/faults/no-operator-api` | `/api/v1` answers 404, as on a master older than the v1 operator API |
//! | `POST /testbed/faults/drop-calls` `{"call_type": "ACCEPT", "count": 1}` | lose the next `count` scheduler calls of that type: each is answered 202 as usual and not acted on (`"dropped": true` in the call log) |
//! | `POST /testbed/faults/latency` `{"stream_ms": 0, "response_ms": 0}` | delay every event on scheduler subscription streams (open ones too) and every answer of the scheduler API |
//! | `POST /testbed/faults/health` `{"task_id_prefix": "…", "label": "key=value" (optional), "health": "healthy" \| "unhealthy" \| "flapping"}` | results of the simulated executors' health checks of matching tasks, from their next check (see `health.rs`); the last matching call wins |
//! | `POST /testbed/faults/clear` | forget every fault above (stopped heartbeats, ignore-kill, hold-staging, no-operator-api, health, dropped calls, latency) |
//! | `POST /testbed/master/failover` `{"reregister_delay_ms": 1000}` | simulate a master failover (new master ID, streams cut, agents re-register after the delay) |
//! | `GET /testbed/executors` | `{"executors": [ExecutorView…]}`: executor processes (process mode) |
//! | `POST /testbed/agents/{agent_id}/restart` `{"down_ms": 1000}` | process mode: the agent dies and comes back after `down_ms` (see `agent_restart`) |
//!
//! Unknown agents or frameworks answer 404; delays (`reregister_delay_ms`,
//! `down_ms`, `stream_ms`, `response_ms`) above one hour answer 400 with
//! `{"error": "…"}`, and so does a call type that cannot be dropped.
//!
//! Dropped calls imitate a master that accepted a call and lost it: a real
//! master answers these calls 202 Accepted before acting on them
//! (`Master::Http::scheduler` in `src/master/http.cpp`), so a scheduler
//! never learns of the loss from the answer. Only calls that pass every
//! check answered otherwise (validation, framework, stream ID) are dropped,
//! and only the types answered 202: not SUBSCRIBE (a stream) nor
//! UPDATE_FRAMEWORK (200 after it was applied). What a dropped call would
//! have done does not happen: the offers of a dropped ACCEPT stay
//! outstanding, as they do on a master without `--offer_timeout`.
//!
//! Latency imitates a slow link between master and scheduler: each event is
//! stamped when the master queues it and goes out that long after (a burst
//! is delayed once, not per event); each call is acted on at once and
//! answered that long after.

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::App;

/// The `/testbed` routes.
pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route("/testbed/calls", get(calls))
        .route("/testbed/tasks", get(tasks))
        .route("/testbed/frameworks", get(frameworks))
        .route("/testbed/agents", get(agents))
        .route("/testbed/agents/{agent_id}/unreachable", post(unreachable))
        .route("/testbed/agents/{agent_id}/reachable", post(reachable))
        .route("/testbed/agents/{agent_id}/gone", post(gone))
        .route(
            "/testbed/frameworks/{framework_id}/drop-stream",
            post(drop_stream),
        )
        .route("/testbed/heartbeats/stop", post(stop_heartbeats))
        .route("/testbed/heartbeats/resume", post(resume_heartbeats))
        .route("/testbed/faults/ignore-kill", post(ignore_kill))
        .route("/testbed/faults/hold-staging", post(hold_staging))
        .route("/testbed/faults/no-operator-api", post(no_operator_api))
        .route("/testbed/faults/drop-calls", post(drop_calls))
        .route("/testbed/faults/latency", post(latency))
        .route("/testbed/faults/health", post(set_health))
        .route("/testbed/faults/clear", post(clear_faults))
        .route("/testbed/master/failover", post(failover))
        .route("/testbed/executors", get(executors))
        .route("/testbed/agents/{agent_id}/restart", post(restart_agent))
}

async fn executors(State(app): State<App>) -> Response {
    Json(json!({"executors": app.lock().executor_views()})).into_response()
}

#[derive(Debug, Deserialize)]
struct RestartBody {
    #[serde(default = "default_reregister_delay_ms")]
    down_ms: u64,
}

async fn restart_agent(
    State(app): State<App>,
    Path(agent_id): Path<String>,
    body: Option<Json<RestartBody>>,
) -> Response {
    let down = body
        .map(|Json(b)| b.down_ms)
        .unwrap_or_else(default_reregister_delay_ms);
    let down = match bounded_delay("down_ms", down) {
        Ok(down) => down,
        Err(error) => return bad_request(error),
    };
    let mut master = app.lock();
    let found = master
        .agent_index(&agent_id)
        .is_some_and(|index| master.restart_agent(index, down));
    done(found)
}

/// The longest delay a fault may ask for: one hour, in milliseconds. Longer
/// is a typo, and far beyond any test; near `u64::MAX` the timer overflows.
const MAX_DELAY_MS: u64 = 3_600_000;

/// `ms` as a delay, or the 400 to answer when it exceeds [`MAX_DELAY_MS`].
fn bounded_delay(field: &str, ms: u64) -> Result<Duration, String> {
    if ms > MAX_DELAY_MS {
        return Err(format!(
            "{field} must be at most {MAX_DELAY_MS} (one hour), got {ms}"
        ));
    }
    Ok(Duration::from_millis(ms))
}

fn bad_request(error: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response()
}

fn done(found: bool) -> Response {
    if found {
        Json(json!({"ok": true})).into_response()
    } else {
        (StatusCode::NOT_FOUND, Json(json!({"error": "not found"}))).into_response()
    }
}

/// `GET /testbed/calls[?type=SUBSCRIBE]`.
#[derive(Debug, Deserialize)]
struct CallsQuery {
    r#type: Option<String>,
}

async fn calls(State(app): State<App>, Query(query): Query<CallsQuery>) -> Response {
    let calls = {
        let master = app.lock();
        match &query.r#type {
            Some(call_type) => master.calls.of_type(call_type),
            None => master.calls.all(),
        }
    };
    Json(json!({ "calls": calls })).into_response()
}

async fn tasks(State(app): State<App>) -> Response {
    let master = app.lock();
    let mut tasks = master.task_views();
    tasks.extend(master.completed_task_views());
    Json(json!({ "tasks": tasks })).into_response()
}

async fn frameworks(State(app): State<App>) -> Response {
    Json(json!({"frameworks": app.lock().framework_views()})).into_response()
}

async fn agents(State(app): State<App>) -> Response {
    Json(json!({"agents": app.lock().agent_views()})).into_response()
}

async fn unreachable(State(app): State<App>, Path(agent_id): Path<String>) -> Response {
    done(app.lock().agent_unreachable(&agent_id))
}

async fn reachable(State(app): State<App>, Path(agent_id): Path<String>) -> Response {
    done(app.lock().agent_reachable(&agent_id))
}

async fn gone(State(app): State<App>, Path(agent_id): Path<String>) -> Response {
    done(app.lock().mark_agent_gone(&agent_id))
}

#[derive(Debug, Deserialize)]
struct DropCallsBody {
    call_type: String,
    #[serde(default = "one")]
    count: u64,
}

fn one() -> u64 {
    1
}

async fn drop_calls(State(app): State<App>, Json(body): Json<DropCallsBody>) -> Response {
    match app.lock().faults.drop_next(&body.call_type, body.count) {
        Ok(()) => done(true),
        Err(error) => bad_request(error),
    }
}

#[derive(Debug, Deserialize)]
struct LatencyBody {
    #[serde(default)]
    stream_ms: u64,
    #[serde(default)]
    response_ms: u64,
}

async fn latency(State(app): State<App>, Json(body): Json<LatencyBody>) -> Response {
    let (stream, response) = match (
        bounded_delay("stream_ms", body.stream_ms),
        bounded_delay("response_ms", body.response_ms),
    ) {
        (Ok(stream), Ok(response)) => (stream, response),
        (Err(error), _) | (_, Err(error)) => return bad_request(error),
    };
    app.lock().faults.set_latency(stream, response);
    done(true)
}

async fn drop_stream(State(app): State<App>, Path(framework_id): Path<String>) -> Response {
    let mut master = app.lock();
    let connected = master
        .frameworks
        .get(&framework_id)
        .is_some_and(|f| f.connected());
    if connected {
        master.disconnect(&framework_id, true);
    }
    done(connected)
}

#[derive(Debug, Default, Deserialize)]
struct HeartbeatBody {
    framework_id: Option<String>,
}

async fn stop_heartbeats(State(app): State<App>, body: Option<Json<HeartbeatBody>>) -> Response {
    let mut master = app.lock();
    match body.and_then(|Json(b)| b.framework_id) {
        Some(id) => master.faults.heartbeats_stopped_for.push(id),
        None => master.faults.heartbeats_stopped = true,
    }
    done(true)
}

async fn resume_heartbeats(State(app): State<App>) -> Response {
    let mut master = app.lock();
    master.faults.heartbeats_stopped = false;
    master.faults.heartbeats_stopped_for.clear();
    done(true)
}

#[derive(Debug, Deserialize)]
struct PrefixBody {
    task_id_prefix: String,
}

async fn ignore_kill(State(app): State<App>, Json(body): Json<PrefixBody>) -> Response {
    app.lock().faults.ignore_kill.push(body.task_id_prefix);
    done(true)
}

async fn hold_staging(State(app): State<App>, Json(body): Json<PrefixBody>) -> Response {
    app.lock().faults.hold_staging.push(body.task_id_prefix);
    done(true)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthBody {
    task_id_prefix: String,
    #[serde(default)]
    label: Option<String>,
    health: super::health::SimulatedHealth,
}

async fn set_health(State(app): State<App>, Json(body): Json<HealthBody>) -> Response {
    let label = match body.label.as_deref().map(|l| l.split_once('=')) {
        None => None,
        Some(Some((key, value))) if !key.is_empty() => Some((key.to_string(), value.to_string())),
        Some(_) => return bad_request("label must be key=value".into()),
    };
    app.lock().faults.health.push(super::health::HealthRule {
        task_id_prefix: body.task_id_prefix,
        label,
        health: body.health,
    });
    done(true)
}

async fn no_operator_api(State(app): State<App>) -> Response {
    app.lock().faults.no_operator_api = true;
    done(true)
}

async fn clear_faults(State(app): State<App>) -> Response {
    app.lock().faults.clear();
    done(true)
}

#[derive(Debug, Deserialize)]
struct FailoverBody {
    #[serde(default = "default_reregister_delay_ms")]
    reregister_delay_ms: u64,
}

fn default_reregister_delay_ms() -> u64 {
    1000
}

async fn failover(State(app): State<App>, body: Option<Json<FailoverBody>>) -> Response {
    let delay = body
        .map(|Json(b)| b.reregister_delay_ms)
        .unwrap_or_else(default_reregister_delay_ms);
    match bounded_delay("reregister_delay_ms", delay) {
        Ok(delay) => {
            app.lock().simulate_failover(delay);
            done(true)
        }
        Err(error) => bad_request(error),
    }
}
