//! Actions: reconcile (explicit, implicit), kamikaze, teardown, abdicate,
//! reregister. Each is one [`Command`] to the core, answered within
//! [`WebConfig::handler_timeout`](super::WebConfig::handler_timeout) or 503.
//!
//! API: `POST /api/v1/actions/{action}` (leader only; a follower answers
//! 503 with the leader's URL in `Location` and in the body):
//!
//! | action | body | success |
//! |---|---|---|
//! | `reconcile` | `{"kind":"explicit"\|"implicit"}` (no body or no `kind`: explicit) | 202, the run |
//! | `kamikaze` | none, or `{"framework_id": "<id>"}` to refuse (409) if another framework is registered by now | 200, one result per executor |
//! | `teardown` | none, or `{"framework_id": "<id>"}` as for kamikaze | 200 |
//! | `abdicate` | none (or `{}`) | 200 |
//! | `reregister` | none (or `{}`; only in state `removed`, else 409) | 200 |
//!
//! Every body may also carry `"reason": "<why>"` (at most
//! [`MAX_REASON_CHARS`](super::audit::MAX_REASON_CHARS) characters), which
//! the audit trail records with who asked and the outcome ([`super::audit`]).
//!
//! A body is a JSON object with only the fields above: anything else is
//! 400, each unknown field named. Errors: 400 bad body, 401 token missing or wrong, 403 cross-origin
//! (`Origin`, else `Referer`) or actions disabled, 404 unknown action, 409
//! conflict, 415 a body not declared JSON or any declared form or text
//! content type (even with an empty body), 502 Mesos refused, 503 not
//! leader / timeout / ZooKeeper failed.
//!
//! Every outcome (API or browser) is kept in a small in-memory log and shown
//! at `/actions/results/{id}` (browser flows redirect there: post /
//! redirect / get); see [`super::forms`] for the browser side.

use crate::scheduler::rollout::RolloutAction;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::AppState;
use super::api::{bad_path, guard_api, json_body};
use super::audit::{self, Context, Outcome};
use super::auth::{self, Peer};
use super::error::AppError;
use super::views::Blast;
use crate::scheduler::{
    Command, CommandError, FieldError, FrameworkState, KamikazeResult, ReconcileKind, ReconcileRun,
    ReconciliationStatus, Reply, Snapshot, TeardownResult,
};

/// Results kept for the result pages.
pub const RESULTS_KEPT: usize = 100;

/// One action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorAction {
    /// Start a reconciliation.
    Reconcile(ReconcileKind),
    /// Tell every executor of ours to kill its tasks and exit.
    Kamikaze,
    /// Tear the framework down; delete the stored ID and task records.
    Teardown,
    /// Step down as leader.
    Abdicate,
    /// In state `removed`: register as a new framework.
    Reregister,
    /// Resume a service's halted rollout or roll it back to the previous
    /// spec ([`crate::scheduler::rollout`]).
    Rollout {
        /// The service.
        service: String,
        /// Resume or rollback.
        action: RolloutAction,
    },
}

impl OperatorAction {
    /// The action's name in URLs and records.
    pub fn name(&self) -> &'static str {
        match self {
            OperatorAction::Rollout {
                action: RolloutAction::Resume,
                ..
            } => "resume",
            OperatorAction::Rollout {
                action: RolloutAction::Rollback,
                ..
            } => "rollback",
            OperatorAction::Reconcile(_) => "reconcile",
            OperatorAction::Kamikaze => "kamikaze",
            OperatorAction::Teardown => "teardown",
            OperatorAction::Abdicate => "abdicate",
            OperatorAction::Reregister => "reregister",
        }
    }
}

/// The outcome of one action, as the result page and the API show it.
#[derive(Debug, Clone, Serialize)]
pub struct ActionRecord {
    /// Random ID (the result page is `/actions/results/{id}`).
    pub id: String,
    /// `reconcile`, `kamikaze`, `teardown`, `abdicate`, `reregister`.
    pub action: &'static str,
    /// `explicit` / `implicit` for reconcile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ReconcileKind>,
    /// Resume and rollback: the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// When it was asked for.
    pub at: f64,
    /// `api` or `browser`.
    pub via: &'static str,
    /// Who asked (the admin token's name, see [`auth::Actor`]).
    pub by: String,
    /// Why, as they said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the core carried it out.
    pub ok: bool,
    /// The HTTP status of the outcome.
    pub status: u16,
    /// One line saying what happened.
    pub summary: String,
    /// The framework at the time.
    pub framework_id: Option<String>,
    /// Reconcile: the run started (or joined).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<ReconcileRun>,
    /// Kamikaze: one result per executor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executors: Option<Vec<KamikazeResult>>,
    /// Teardown: what was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teardown: Option<TeardownResult>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The leader, when this replica turned out not to lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_url: Option<String>,
}

impl ActionRecord {
    /// Whether the outcome may still change (a reconciliation run that is
    /// queued or running).
    pub fn in_progress(&self) -> bool {
        self.reconcile
            .as_ref()
            .is_some_and(|r| r.finished_at.is_none())
    }

    /// This record with its reconciliation run brought up to date from the
    /// snapshot `s`, found by run ID (queued, running or finished). A run
    /// this replica no longer knows (leadership moved) is left as it was.
    pub fn current(self: Arc<Self>, s: &Snapshot) -> Arc<ActionRecord> {
        let Some(id) = self
            .reconcile
            .as_ref()
            .filter(|_| self.in_progress())
            .map(|r| r.id)
        else {
            return self;
        };
        let status = &s.reconciliation;
        let found = status
            .running
            .iter()
            .chain(status.queued.iter())
            .chain(status.history.iter())
            .find(|r| r.id == id);
        match found {
            Some(run) => {
                let mut record = (*self).clone();
                record.summary = reconcile_summary(run);
                record.reconcile = Some(run.clone());
                Arc::new(record)
            }
            None => self,
        }
    }
}

/// `explicit reconciliation converged (trigger manual, 3 tasks asked)`.
fn reconcile_summary(run: &ReconcileRun) -> String {
    format!(
        "{} reconciliation {} (trigger {}, {} asked)",
        if run.kind == ReconcileKind::Explicit {
            "explicit"
        } else {
            "implicit"
        },
        run.outcome,
        run.trigger,
        plural(run.asked, "task")
    )
}

/// The last [`RESULTS_KEPT`] action outcomes, in memory.
#[derive(Default)]
pub struct ResultLog {
    records: Mutex<VecDeque<Arc<ActionRecord>>>,
}

impl ResultLog {
    fn push(&self, record: ActionRecord) -> Arc<ActionRecord> {
        let record = Arc::new(record);
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if records.len() == RESULTS_KEPT {
            records.pop_front();
        }
        records.push_back(record.clone());
        record
    }

    /// The outcome `id`.
    pub fn get(&self, id: &str) -> Option<Arc<ActionRecord>> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.iter().find(|r| r.id == id).cloned()
    }

    /// The newest `n` outcomes, newest first.
    pub fn recent(&self, n: usize) -> Vec<Arc<ActionRecord>> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.iter().rev().take(n).cloned().collect()
    }
}

/// `/api/v1/actions` and the actions page.
#[derive(Debug, Clone, Serialize)]
pub struct ActionsView {
    /// Whether this replica leads (actions run only on the leader).
    pub leading: bool,
    /// The leader's URL (where to act from a follower).
    pub leader_url: Option<String>,
    /// `framework.state`.
    pub framework_state: &'static str,
    /// What teardown and kamikaze would hit.
    pub blast: Blast,
    /// Reregister applies (state `removed`).
    pub can_reregister: bool,
    /// `token`, `loopback`, `insecure` or `disabled` (see [`auth`]).
    pub access: &'static str,
    /// Whether this client may act now (token presented or session held,
    /// or no token needed).
    pub authorized: bool,
    /// Reconciliation runs.
    pub reconciliation: ReconciliationStatus,
    /// Recent action outcomes on this replica, newest first.
    pub recent: Vec<Arc<ActionRecord>>,
}

impl ActionsView {
    /// The view for client `peer` sending `headers`.
    pub fn new(state: &AppState, s: &Snapshot, headers: &HeaderMap, peer: Peer) -> ActionsView {
        ActionsView {
            leading: s.leadership.is_leader(),
            leader_url: s.leader_url(),
            framework_state: s.framework.state.as_str(),
            blast: Blast::new(s),
            can_reregister: s.framework.state == FrameworkState::Removed,
            access: state.access.as_str(),
            authorized: auth::check_access(state.access, &state.keys, headers, peer, true).is_ok(),
            reconciliation: s.reconciliation.clone(),
            recent: state
                .results
                .recent(10)
                .into_iter()
                .map(|r| r.current(s))
                .collect(),
        }
    }
}

/// 503 with the leader's URL unless the latest snapshot says this replica
/// leads (the core double-checks: it answers `NotLeader` too).
pub(crate) fn leader_precheck(state: &AppState, path: &str) -> Result<(), AppError> {
    let s = state.handle.snapshot();
    if s.leadership.is_leader() {
        Ok(())
    } else {
        Err(AppError::not_leader(s.leader_url(), path))
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Sends a command built by `make` and waits for its answer at most the
/// handler timeout in all (`SchedulerHandle::request` bounds the send and
/// the wait for the reply each by it, which could add up to twice that).
pub(crate) async fn ask<T>(
    state: &AppState,
    make: impl FnOnce(Reply<T>) -> Command,
) -> Result<T, CommandError> {
    let timeout = state.config.handler_timeout;
    tokio::time::timeout(timeout, state.handle.request(timeout, make))
        .await
        .unwrap_or(Err(CommandError::Timeout(timeout)))
}

/// Sends `action` to the core, waits at most the handler timeout, keeps
/// the outcome and writes it to the audit trail. Returns the record and,
/// when it failed, the error to answer (`path` is the request path, for a
/// not-leader `Location`).
pub(crate) async fn execute(
    state: &AppState,
    action: OperatorAction,
    path: &str,
    ctx: &Context,
) -> (Arc<ActionRecord>, Option<AppError>) {
    let s = state.handle.snapshot();
    let via = ctx.via;
    let mut record = ActionRecord {
        id: uuid::Uuid::new_v4().simple().to_string(),
        action: action.name(),
        kind: None,
        service: None,
        at: crate::util::unix_now_secs(),
        via,
        by: ctx.actor.name.clone(),
        reason: ctx.reason.clone(),
        ok: true,
        status: 200,
        summary: String::new(),
        framework_id: s.framework.id.clone(),
        reconcile: None,
        executors: None,
        teardown: None,
        error: None,
        leader_url: None,
    };
    let outcome: Result<(), CommandError> = match action.clone() {
        OperatorAction::Rollout { service, action } => {
            record.service = Some(service.clone());
            let name = service.clone();
            ask(state, |reply| Command::Rollout {
                name,
                action,
                reply,
            })
            .await
            .map(|_| {
                record.summary = match action {
                    RolloutAction::Resume => format!("rollout of service {service} resumed"),
                    RolloutAction::Rollback => {
                        format!("service {service} rolled back to its previous spec")
                    }
                }
            })
        }
        OperatorAction::Reconcile(kind) => {
            record.kind = Some(kind);
            record.status = 202;
            match ask(state, |reply| Command::Reconcile { kind, reply }).await {
                Ok(run) => {
                    record.summary = reconcile_summary(&run);
                    record.reconcile = Some(run);
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        OperatorAction::Kamikaze => match ask(state, |reply| Command::Kamikaze { reply }).await {
            Ok(results) => {
                let accepted = results.iter().filter(|r| r.accepted).count();
                record.summary = format!(
                    "kamikaze sent to {}: {} accepted by the master, {} refused",
                    plural(results.len(), "executor"),
                    accepted,
                    results.len() - accepted
                );
                record.ok = accepted == results.len();
                record.executors = Some(results);
                Ok(())
            }
            Err(e) => Err(e),
        },
        OperatorAction::Teardown => match ask(state, |reply| Command::Teardown { reply }).await {
            Ok(result) => {
                record.summary = format!(
                    "framework {} torn down; stored framework ID and {} deleted",
                    result.framework_id,
                    plural(result.tasks, "task record")
                );
                record.teardown = Some(result);
                Ok(())
            }
            Err(e) => Err(e),
        },
        OperatorAction::Abdicate => {
            ask(state, |reply| Command::Abdicate { reply })
                .await
                .map(|()| {
                    record.summary =
                        "stepped down; another replica (or this one again) will lead".into()
                })
        }
        OperatorAction::Reregister => {
            ask(state, |reply| Command::Reregister { reply })
                .await
                .map(|()| {
                    record.summary =
                        "stale framework ID and task records cleared; subscribing as a \
                                  new framework"
                            .into()
                })
        }
    };
    let error = match outcome {
        Ok(()) => None,
        Err(e) => {
            let error = AppError::from_command(e, path);
            record.ok = false;
            record.status = error.status.as_u16();
            record.summary = format!("{} failed: {}", action.name(), error.title);
            record.error = Some(error.detail.clone());
            record.leader_url = error.leader_url.clone();
            Some(error)
        }
    };
    tracing::info!(
        action = record.action,
        via,
        by = %record.by,
        ok = record.ok,
        status = record.status,
        summary = %record.summary,
        "action"
    );
    let params = match &action {
        OperatorAction::Rollout { service, .. } => serde_json::json!({ "service": service }),
        OperatorAction::Reconcile(kind) => serde_json::json!({ "kind": kind }),
        OperatorAction::Kamikaze | OperatorAction::Teardown => {
            serde_json::json!({ "framework_id": record.framework_id })
        }
        OperatorAction::Abdicate | OperatorAction::Reregister => serde_json::json!({}),
    };
    let outcome = Outcome {
        ok: record.ok,
        status: record.status,
        summary: record.summary.clone(),
    };
    audit::record(state, ctx, action.name(), params, &outcome).await;
    (state.results.push(record), error)
}

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
    let reason = match fields.get("reason") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(reason)) => audit::check_reason(Some(reason))?,
        Some(_) => return Err(field_error("reason", "must be a string")),
    };
    let ctx = Context::api(actor, peer, reason);
    let (record, error) = execute(&state, action, uri.path(), &ctx).await;
    if let Some(error) = error {
        return Err(error);
    }
    let status = StatusCode::from_u16(record.status).unwrap_or(StatusCode::OK);
    Ok((status, Json(&*record)).into_response())
}

/// `POST /api/v1/services/{name}/rollout/{resume|rollback}`: resume the
/// service's halted rollout, or roll it back to its previous spec (body
/// left out, or `{"reason": "…"}`). Checks as [`api_action`]: known action
/// (404), origin (403), token or loopback rule (401/403), leadership
/// (503), body (400/415); then 200 with the action record, 404 for an
/// unknown service, 409 when not halted (resume) or without a previous
/// spec (rollback). Audited.
pub async fn api_rollout(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
    path: Result<Path<(String, String)>, PathRejection>,
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
    let body = json_body(&headers, body)?;
    let fields = body_fields(&name, body, &["reason"])?;
    let reason = match fields.get("reason") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(reason)) => audit::check_reason(Some(reason))?,
        Some(_) => return Err(field_error("reason", "must be a string")),
    };
    let ctx = Context::api(actor, peer, reason);
    let action = OperatorAction::Rollout { service, action };
    let (record, error) = execute(&state, action, uri.path(), &ctx).await;
    if let Some(error) = error {
        return Err(error);
    }
    Ok(Json(&*record).into_response())
}
