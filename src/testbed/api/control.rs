//! Fault injection and inspection over HTTP, under `/testbed/`. Not part of
//! Mesos; answered whether or not this master leads. Bodies are JSON.
//!
//! | method and path | effect |
//! |---|---|
//! | `GET /testbed/calls[?type=T&since=SEQ&limit=N]` | `{"calls": [CallRecord…], "next", "first", "evicted", "counts"}`: a page of the calls received (of type `T`, e.g. `SUBSCRIBE`; unknown types are 400), oldest first from `since`, at most `limit` (1000 by default, 10000 at most); `next` is the `since` of the next page (`null` at the end), `first` the oldest kept, `evicted` how many the bounded log forgot, `counts` every call received so far by type (evicted ones included) |
//! | `GET /testbed/tasks` | `{"tasks": [TaskView…]}`: live and unreachable tasks, then completed ones (`"completed": true`) with their terminal state |
//! | `GET /testbed/frameworks` | `{"frameworks": [FrameworkView…]}` (completed ones too) |
//! | `GET /testbed/agents` | `{"agents": [AgentView…]}` |
//! | `POST /testbed/agents/{agent_id}/unreachable` | the agent stops answering health checks: TASK_LOST (REASON_AGENT_REMOVED, no uuid), FAILURE{agent_id}, RESCIND of its offers |
//! | `POST /testbed/agents/{agent_id}/reachable` | the agent re-registers with its tasks: TASK_RUNNING (REASON_AGENT_REREGISTERED) |
//! | `POST /testbed/agents/{agent_id}/partition` `{"seconds": N}` | the agent is unreachable now (as `unreachable`) and reachable again after `N` seconds (at most one hour) with its tasks (`master/partition.rs`) |
//! | `POST /testbed/agents/{agent_id}/gone` | the operator's MARK_AGENT_GONE (also served on `/api/v1`): TASK_GONE_BY_OPERATOR (TASK_LOST if not PARTITION_AWARE), RESCIND, FAILURE; the agent never returns (`master/gone.rs`) |
//! | `POST /testbed/frameworks/{framework_id}/drop-stream` | cut the framework's subscription without a terminating chunk |
//! | `POST /testbed/heartbeats/stop` `{"framework_id": "…"}` (optional) | stop HEARTBEAT events (for one framework or all) |
//! | `POST /testbed/heartbeats/resume` | resume them for everyone |
//! | `POST /testbed/faults/ignore-kill` `{"task_id_prefix": "…"}` | executors ignore KILL of matching tasks |
//! | `POST /testbed/faults/hold-staging` `{"task_id_prefix": "…"}` | matching tasks stay in TASK_STAGING |
//! | `POST /testbed/faults/no-operator-api` | `/api/v1` answers 404, as on a master older than the v1 operator API |
//! | `POST /testbed/faults/drop-calls` `{"call_type": "ACCEPT", "count": 1}` | lose the next `count` scheduler calls of that type: each is answered 202 as usual and not acted on (`"dropped": true` in the call log) |
//! | `POST /testbed/faults/latency` `{"stream_ms": 0, "response_ms": 0}` | delay every event on scheduler subscription streams (open ones too) and every answer of the scheduler API |
//! | `POST /testbed/faults/health` `{"task_id_prefix": "…", "label": "key=value" (optional), "health": "healthy" \| "unhealthy" \| "flapping"}` | results of the simulated executors' health checks of matching tasks, from their next check (see `agents/health.rs`); the last matching call wins |
//! | `POST /testbed/faults/task-exit` `{"task_id_prefix": "…", "label": "key=value" (optional), "run_ms": N, "exit_code": 0}` | simulated tasks matching it launched from now on exit `run_ms` after their TASK_RUNNING with `exit_code`: TASK_FINISHED for 0, TASK_FAILED otherwise, `Command exited with status N` (see `master/finite.rs`); the last matching call wins |
//! | `POST /testbed/faults/clear` | forget every fault above (stopped heartbeats, ignore-kill, hold-staging, no-operator-api, health, task-exit, dropped calls, latency) |
//! | `POST /testbed/master/failover` `{"reregister_delay_ms": 1000}` | simulate a master failover (new master ID, streams cut, agents re-register after the delay) |
//! | `GET /testbed/executors` | `{"executors": [ExecutorView…]}`: executor processes (process mode) |
//! | `POST /testbed/agents/{agent_id}/restart` `{"down_ms": 1000}` | process mode: the agent dies and comes back after `down_ms` (see `agent_restart`) |
//!
//! Every answer is JSON: `200 {"ok": true}` on success, otherwise
//! `{"error": "…"}` with
//!
//! - 404 for an agent or framework ID the master does not know, and for a
//!   path under `/testbed` that is not an endpoint (the error names it);
//!   405 for a known path with another method;
//! - 409 when the agent or framework is known but the fault cannot apply:
//!   the agent was marked gone (it never comes back, so it can be neither
//!   reachable, unreachable nor restarted), the framework is not connected
//!   (drop-stream), the agent restart needs process mode;
//! - 400 for a body that is not JSON, has unknown fields or misses one,
//!   a delay (`reregister_delay_ms`, `down_ms`, `stream_ms`, `response_ms`)
//!   above one hour, a call type that cannot be dropped; 415 for a body
//!   that is not `application/json`.
//!
//! Repeating a fault that holds already (unreachable twice, gone twice)
//! answers 200 and does nothing more.
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
use axum::extract::{FromRequest, OriginalUri, Path, Query, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::testbed::master::faults::{ExitRule, HealthRule, SimulatedHealth};
use crate::testbed::master::{AgentState, App, Faults, Master};

/// The `/testbed` routes; any other path under `/testbed` answers 404 and
/// a known path with another method 405, both with a JSON error.
pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route("/testbed/calls", json_only(get(calls)))
        .route("/testbed/tasks", json_only(get(tasks)))
        .route("/testbed/frameworks", json_only(get(frameworks)))
        .route("/testbed/agents", json_only(get(agents)))
        .route(
            "/testbed/agents/{agent_id}/unreachable",
            json_only(post(unreachable)),
        )
        .route(
            "/testbed/agents/{agent_id}/reachable",
            json_only(post(reachable)),
        )
        .route("/testbed/agents/{agent_id}/gone", json_only(post(gone)))
        .route(
            "/testbed/agents/{agent_id}/partition",
            json_only(post(partition)),
        )
        .route(
            "/testbed/frameworks/{framework_id}/drop-stream",
            json_only(post(drop_stream)),
        )
        .route("/testbed/heartbeats/stop", json_only(post(stop_heartbeats)))
        .route(
            "/testbed/heartbeats/resume",
            json_only(post(resume_heartbeats)),
        )
        .route("/testbed/faults/ignore-kill", json_only(post(ignore_kill)))
        .route(
            "/testbed/faults/hold-staging",
            json_only(post(hold_staging)),
        )
        .route(
            "/testbed/faults/no-operator-api",
            json_only(post(no_operator_api)),
        )
        .route("/testbed/faults/drop-calls", json_only(post(drop_calls)))
        .route("/testbed/faults/latency", json_only(post(latency)))
        .route("/testbed/faults/health", json_only(post(set_health)))
        .route("/testbed/faults/task-exit", json_only(post(set_task_exit)))
        .route("/testbed/faults/clear", json_only(post(clear_faults)))
        .route("/testbed/master/failover", json_only(post(failover)))
        .route("/testbed/executors", json_only(get(executors)))
        .route(
            "/testbed/agents/{agent_id}/restart",
            json_only(post(restart_agent)),
        )
        .route("/testbed", any(no_such_endpoint))
        .route("/testbed/", any(no_such_endpoint))
        .route("/testbed/{*rest}", any(no_such_endpoint))
}

/// `route` answering a method it does not serve with a JSON 405.
fn json_only(route: MethodRouter<App>) -> MethodRouter<App> {
    route.fallback(wrong_method)
}

async fn wrong_method(method: Method, OriginalUri(uri): OriginalUri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

async fn no_such_endpoint(method: Method, OriginalUri(uri): OriginalUri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no testbed endpoint {method} {}; see docs/testbed.md#fault-api",
            uri.path()
        ),
    )
}

/// `{"error": message}` with `status`.
fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// A JSON request body of `T`, refused with a JSON error: 400 when it does
/// not parse as `T` (axum's own `Json` answers 422 in plain text), 415 when
/// it is not `application/json`. An empty body is `None`: the fields of an
/// optional body keep their defaults.
struct Body<T>(Option<T>);

/// A JSON request body of `T` that must be present: [`Body`]'s refusals,
/// plus 400 when the body is empty.
struct Required<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Required<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let Body(body) = Body::<T>::from_request(request, state).await?;
        body.map(Required).ok_or_else(|| {
            error(
                StatusCode::BAD_REQUEST,
                "a JSON body is required; see docs/testbed.md#fault-api".into(),
            )
        })
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|rejection| error(rejection.status(), rejection.body_text()))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Body(None));
        }
        if !json {
            return Err(error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the body must be JSON, with Content-Type: application/json".into(),
            ));
        }
        serde_json::from_slice(&bytes)
            .map(|body| Body(Some(body)))
            .map_err(|e| error(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))
    }
}

/// Why an agent fault cannot apply: 404 for an unknown agent, 409 for one
/// marked gone (`master/gone.rs`: it never comes back).
fn agent_refusal(master: &Master, agent_id: &str) -> Option<Response> {
    let Some(index) = master.agent_index(agent_id) else {
        return Some(error(
            StatusCode::NOT_FOUND,
            format!("agent '{agent_id}' not found"),
        ));
    };
    (master.agents[index].state == AgentState::Gone).then(|| {
        error(
            StatusCode::CONFLICT,
            format!("agent '{agent_id}' was marked gone and never comes back"),
        )
    })
}

/// 404 for a framework ID the master does not know: never subscribed, or
/// removed (torn down, failover timeout).
fn framework_refusal(master: &Master, framework_id: &str) -> Option<Response> {
    (!master.frameworks.contains_key(framework_id)).then(|| {
        error(
            StatusCode::NOT_FOUND,
            format!("framework '{framework_id}' not found (never subscribed, or removed)"),
        )
    })
}

async fn executors(State(app): State<App>) -> Response {
    Json(json!({"executors": app.lock().executor_views()})).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestartBody {
    #[serde(default = "default_reregister_delay_ms")]
    down_ms: u64,
}

async fn restart_agent(
    State(app): State<App>,
    Path(agent_id): Path<String>,
    Body(body): Body<RestartBody>,
) -> Response {
    let down = body
        .map(|b| b.down_ms)
        .unwrap_or_else(default_reregister_delay_ms);
    let down = match bounded_delay("down_ms", down) {
        Ok(down) => down,
        Err(error) => return bad_request(error),
    };
    let mut master = app.lock();
    if let Some(refusal) = agent_refusal(&master, &agent_id) {
        return refusal;
    }
    let index = master.agent_index(&agent_id).expect("known: checked above");
    if master.restart_agent(index, down) {
        done()
    } else {
        error(
            StatusCode::CONFLICT,
            "agent restarts need process mode (--run-executors)".into(),
        )
    }
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

fn bad_request(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, message)
}

/// `200 {"ok": true}`.
fn done() -> Response {
    Json(json!({"ok": true})).into_response()
}

/// `GET /testbed/calls[?type=T][&since=SEQ][&limit=N]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallsQuery {
    r#type: Option<String>,
    #[serde(default)]
    since: u64,
    limit: Option<usize>,
}

/// One page of the call log. Under the lock only the entries' pointers are
/// copied; they are decoded and written out on a blocking thread, so the
/// master serves other calls meanwhile (`docs/testbed.md#inspection`).
async fn calls(
    State(app): State<App>,
    query: Result<Query<CallsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let query = match query {
        Ok(Query(query)) => query,
        Err(e) => return bad_request(format!("{e}; the query takes type, since and limit")),
    };
    let known = crate::testbed::master::calls::known_types();
    if let Some(t) = &query.r#type
        && !known.contains(&t.as_str())
    {
        return bad_request(format!(
            "unknown call type '{t}'; known types: {}",
            known.join(", ")
        ));
    }
    let limit = query
        .limit
        .unwrap_or(crate::testbed::master::calls::DEFAULT_PAGE);
    if !(1..=crate::testbed::master::calls::MAX_PAGE).contains(&limit) {
        return bad_request(format!(
            "limit must be 1 to {}, got {limit}",
            crate::testbed::master::calls::MAX_PAGE
        ));
    }
    let selection = crate::testbed::master::calls::Selection {
        call_type: query.r#type,
        since: query.since,
        limit,
    };
    let page = app.lock().calls.page(&selection);
    render_json(move || crate::testbed::master::calls::render(&page)).await
}

/// `render`'s bytes as a JSON answer, rendered on a blocking thread.
async fn render_json(render: impl FnOnce() -> Vec<u8> + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(render).await {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("render failed: {e}"),
        ),
    }
}

/// Views are copied under the lock and serialized after it is released.
async fn tasks(State(app): State<App>) -> Response {
    let tasks = app.lock().all_task_views();
    render_json(move || serde_json::to_vec(&json!({ "tasks": tasks })).expect("views serialize"))
        .await
}

async fn frameworks(State(app): State<App>) -> Response {
    Json(json!({"frameworks": app.lock().framework_views()})).into_response()
}

async fn agents(State(app): State<App>) -> Response {
    Json(json!({"agents": app.lock().agent_views()})).into_response()
}

async fn unreachable(State(app): State<App>, Path(agent_id): Path<String>) -> Response {
    let mut master = app.lock();
    if let Some(refusal) = agent_refusal(&master, &agent_id) {
        return refusal;
    }
    master.agent_unreachable(&agent_id);
    done()
}

async fn reachable(State(app): State<App>, Path(agent_id): Path<String>) -> Response {
    let mut master = app.lock();
    if let Some(refusal) = agent_refusal(&master, &agent_id) {
        return refusal;
    }
    master.agent_reachable(&agent_id);
    done()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionBody {
    seconds: f64,
}

async fn partition(
    State(app): State<App>,
    Path(agent_id): Path<String>,
    Required(body): Required<PartitionBody>,
) -> Response {
    let ms = body.seconds * 1000.0;
    if !(0.0..=MAX_DELAY_MS as f64).contains(&ms) {
        return bad_request(format!(
            "seconds must be between 0 and 3600, got {}",
            body.seconds
        ));
    }
    let duration = match bounded_delay("seconds", ms as u64) {
        Ok(duration) => duration,
        Err(error) => return bad_request(error),
    };
    let mut master = app.lock();
    if let Some(refusal) = agent_refusal(&master, &agent_id) {
        return refusal;
    }
    master.partition_agent(&agent_id, duration);
    done()
}

/// Marking a gone agent gone again is 200, as the operator API's
/// MARK_AGENT_GONE answers it (`src/master/http.cpp` `_markAgentGone`).
async fn gone(State(app): State<App>, Path(agent_id): Path<String>) -> Response {
    if app.lock().mark_agent_gone(&agent_id) {
        done()
    } else {
        error(
            StatusCode::NOT_FOUND,
            format!("agent '{agent_id}' not found"),
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DropCallsBody {
    call_type: String,
    #[serde(default = "one")]
    count: u64,
}

fn one() -> u64 {
    1
}

async fn drop_calls(State(app): State<App>, Required(body): Required<DropCallsBody>) -> Response {
    match app.lock().faults.drop_next(&body.call_type, body.count) {
        Ok(()) => done(),
        Err(error) => bad_request(error),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyBody {
    #[serde(default)]
    stream_ms: u64,
    #[serde(default)]
    response_ms: u64,
}

async fn latency(State(app): State<App>, Required(body): Required<LatencyBody>) -> Response {
    let (stream, response) = match (
        bounded_delay("stream_ms", body.stream_ms),
        bounded_delay("response_ms", body.response_ms),
    ) {
        (Ok(stream), Ok(response)) => (stream, response),
        (Err(error), _) | (_, Err(error)) => return bad_request(error),
    };
    app.lock().faults.set_latency(stream, response);
    done()
}

/// 404 for an unknown framework, 409 for one that is not connected.
async fn drop_stream(State(app): State<App>, Path(framework_id): Path<String>) -> Response {
    let mut master = app.lock();
    if let Some(refusal) = framework_refusal(&master, &framework_id) {
        return refusal;
    }
    if !master.frameworks[&framework_id].connected() {
        return error(
            StatusCode::CONFLICT,
            format!("framework '{framework_id}' is not connected: no stream to drop"),
        );
    }
    master.disconnect(&framework_id, true);
    done()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatBody {
    framework_id: Option<String>,
}

/// For one framework the master knows (404 otherwise), or for all.
async fn stop_heartbeats(State(app): State<App>, Body(body): Body<HeartbeatBody>) -> Response {
    let mut master = app.lock();
    match body.and_then(|b| b.framework_id) {
        Some(id) => {
            if let Some(refusal) = framework_refusal(&master, &id) {
                return refusal;
            }
            master.faults.heartbeats_stopped_for.push(id);
        }
        None => master.faults.heartbeats_stopped = true,
    }
    done()
}

async fn resume_heartbeats(State(app): State<App>) -> Response {
    let mut master = app.lock();
    master.faults.heartbeats_stopped = false;
    master.faults.heartbeats_stopped_for.clear();
    done()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrefixBody {
    task_id_prefix: String,
}

/// Most task-prefix rules of one kind (`ignore-kill`, `hold-staging`,
/// `health`) held at once; `faults/clear` drops them.
const MAX_PREFIX_RULES: usize = 1_000;
/// Longest task ID prefix (Mesos task IDs are short strings; more is a
/// mistake).
const MAX_PREFIX_LEN: usize = 1_024;

/// Why a task-prefix rule cannot be added next to `held` others: 400 for
/// an empty or overlong prefix (an empty one would match every task), 409
/// when [`MAX_PREFIX_RULES`] are held.
fn prefix_refusal(prefix: &str, held: usize) -> Option<Response> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN {
        return Some(bad_request(format!(
            "task_id_prefix must be 1 to {MAX_PREFIX_LEN} bytes (an empty one would match every task)"
        )));
    }
    (held >= MAX_PREFIX_RULES).then(|| {
        error(
            StatusCode::CONFLICT,
            format!("{MAX_PREFIX_RULES} rules of this kind are held already; POST /testbed/faults/clear first"),
        )
    })
}

async fn ignore_kill(State(app): State<App>, Required(body): Required<PrefixBody>) -> Response {
    add_prefix_rule(&app, body, |faults| &mut faults.ignore_kill)
}

async fn hold_staging(State(app): State<App>, Required(body): Required<PrefixBody>) -> Response {
    add_prefix_rule(&app, body, |faults| &mut faults.hold_staging)
}

/// Adds `body`'s prefix to the rules `kind` picks, or answers why not
/// ([`prefix_refusal`]).
fn add_prefix_rule(
    app: &App,
    body: PrefixBody,
    kind: impl FnOnce(&mut Faults) -> &mut Vec<String>,
) -> Response {
    let mut master = app.lock();
    let rules = kind(&mut master.faults);
    if let Some(refusal) = prefix_refusal(&body.task_id_prefix, rules.len()) {
        return refusal;
    }
    rules.push(body.task_id_prefix);
    done()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthBody {
    task_id_prefix: String,
    #[serde(default)]
    label: Option<String>,
    health: SimulatedHealth,
}

async fn set_health(State(app): State<App>, Required(body): Required<HealthBody>) -> Response {
    let label = match parse_label(body.label.as_deref()) {
        Ok(label) => label,
        Err(error) => return bad_request(error),
    };
    let mut master = app.lock();
    if let Some(refusal) = prefix_refusal(&body.task_id_prefix, master.faults.health.len()) {
        return refusal;
    }
    master.faults.health.push(HealthRule {
        task_id_prefix: body.task_id_prefix,
        label,
        health: body.health,
    });
    done()
}

/// Longest run time the `task-exit` fault gives a simulated task: a day.
const MAX_RUN_MS: u64 = 86_400_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskExitBody {
    task_id_prefix: String,
    #[serde(default)]
    label: Option<String>,
    run_ms: u64,
    exit_code: u16,
}

async fn set_task_exit(State(app): State<App>, Required(body): Required<TaskExitBody>) -> Response {
    let label = match parse_label(body.label.as_deref()) {
        Ok(label) => label,
        Err(error) => return bad_request(error),
    };
    if body.run_ms > MAX_RUN_MS {
        return bad_request(format!(
            "run_ms must be 0 to {MAX_RUN_MS} (a day), got {}",
            body.run_ms
        ));
    }
    let Ok(exit_code) = u8::try_from(body.exit_code) else {
        return bad_request(format!(
            "exit_code must be 0 to 255 (a process's exit status), got {}",
            body.exit_code
        ));
    };
    let mut master = app.lock();
    if let Some(refusal) = prefix_refusal(&body.task_id_prefix, master.faults.exits.len()) {
        return refusal;
    }
    master.faults.exits.push(ExitRule {
        task_id_prefix: body.task_id_prefix,
        label,
        run: Duration::from_millis(body.run_ms),
        exit_code,
    });
    done()
}

/// A rule's optional `key=value` label, or the 400 answer's text.
fn parse_label(label: Option<&str>) -> Result<Option<(String, String)>, String> {
    match label.map(|l| l.split_once('=')) {
        None => Ok(None),
        Some(Some((key, value))) if !key.is_empty() => {
            Ok(Some((key.to_string(), value.to_string())))
        }
        Some(_) => Err("label must be key=value".into()),
    }
}

async fn no_operator_api(State(app): State<App>) -> Response {
    app.lock().faults.no_operator_api = true;
    done()
}

async fn clear_faults(State(app): State<App>) -> Response {
    app.lock().faults.clear();
    done()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FailoverBody {
    #[serde(default = "default_reregister_delay_ms")]
    reregister_delay_ms: u64,
}

fn default_reregister_delay_ms() -> u64 {
    1000
}

async fn failover(State(app): State<App>, Body(body): Body<FailoverBody>) -> Response {
    let delay = body
        .map(|b| b.reregister_delay_ms)
        .unwrap_or_else(default_reregister_delay_ms);
    match bounded_delay("reregister_delay_ms", delay) {
        Ok(delay) => {
            app.lock().simulate_failover(delay);
            done()
        }
        Err(error) => bad_request(error),
    }
}
