//! Actions: reconcile (explicit, implicit), kamikaze, teardown, abdicate,
//! reregister. Each is one [`Request`] to the core, answered within
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
//!
//! Layout: this module holds the actions and `execute`, which runs one;
//! `record.rs` the outcomes kept for the result pages ([`ActionRecord`],
//! [`ResultLog`]); `api.rs` the JSON endpoints (one per action, e.g.
//! [`reconcile`], [`rollback`]) and their bodies.

mod api;
mod drain;
mod record;

pub use api::{
    FrameworkBody, ReasonBody, ReconcileBody, RolloutBody, RolloutQuery, abdicate, kamikaze,
    reconcile, reregister, restart, resume, rollback, teardown, unknown_action,
    unknown_rollout_action,
};
pub use drain::{
    CancelDrainBody, DrainBody, cancel as drain_cancel, check_drain, start as drain_start,
};
pub use record::{ActionRecord, RESULTS_KEPT, ResultLog};

use std::sync::Arc;

use axum::http::HeaderMap;
use serde::Serialize;

use super::AppState;
use super::audit::{self, Context, Outcome};
use super::auth::{self, Peer};
use super::error::AppError;
use super::views::Blast;
use crate::scheduler::drains::DrainRecord;
use crate::scheduler::rules::rollout::RolloutAction;
use crate::scheduler::{
    Answered, CommandError, FrameworkState, ReconcileKind, ReconciliationStatus, Request, Snapshot,
    TeardownResult,
};
use record::reconcile_summary;

/// The outcome of an `abdicate`, recorded before the step-down.
const ABDICATE_SUMMARY: &str = "stepped down; another replica (or this one again) will lead";

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
    /// spec ([`crate::scheduler::rules::rollout`]).
    Rollout {
        /// The service.
        service: String,
        /// Resume or rollback.
        action: RolloutAction,
        /// Rollback: the fingerprint of the spec to restore as the
        /// operator saw it (refused when it changed since).
        expected: Option<String>,
    },
    /// Start the appliance's SLA-aware drain of an agent
    /// (`docs/draining.md`).
    Drain {
        /// The agent.
        agent_id: String,
        /// The floor per service.
        min_healthy: crate::scheduler::drains::MinHealthy,
        /// The operator call once done.
        then: crate::scheduler::drains::ThenAction,
    },
    /// Cancel an agent's drain.
    CancelDrain {
        /// The agent.
        agent_id: String,
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
            OperatorAction::Rollout {
                action: RolloutAction::Restart,
                ..
            } => "restart",
            OperatorAction::Reconcile(_) => "reconcile",
            OperatorAction::Kamikaze => "kamikaze",
            OperatorAction::Teardown => "teardown",
            OperatorAction::Abdicate => "abdicate",
            OperatorAction::Reregister => "reregister",
            OperatorAction::Drain { .. } => "drain",
            OperatorAction::CancelDrain { .. } => "cancel_drain",
        }
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

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Sends `request` and waits for its answer at most the handler timeout in
/// all (`SchedulerHandle::request` bounds the send and the wait for the
/// reply each by it, which could add up to twice that).
pub(crate) async fn ask<T: Answered>(
    state: &AppState,
    request: Request,
) -> Result<T, CommandError> {
    let timeout = state.config.handler_timeout;
    tokio::time::timeout(timeout, state.handle.request(timeout, request))
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
        drain: None,
    };
    // The step-down ends the term, and with it the leader's right to append
    // (appends are fenced): an `abdicate` is recorded before it runs, as
    // asked; a failure to step down is recorded after, if it still can be.
    let recorded_before = action == OperatorAction::Abdicate
        && audit::record(
            state,
            ctx,
            action.name(),
            serde_json::json!({}),
            &Outcome {
                ok: true,
                status: 200,
                summary: ABDICATE_SUMMARY.into(),
            },
        )
        .await;
    let outcome: Result<(), CommandError> = match action.clone() {
        OperatorAction::Rollout {
            service,
            action,
            expected,
        } => {
            record.service = Some(service.clone());
            if action == RolloutAction::Restart {
                // Accepted: stored now, carried out by the rollout.
                record.status = 202;
            }
            let name = service.clone();
            ask::<bool>(
                state,
                Request::Rollout {
                    name,
                    action,
                    expected,
                },
            )
            .await
            .map(|_| {
                record.summary = match action {
                    RolloutAction::Resume => format!("rollout of service {service} resumed"),
                    RolloutAction::Rollback => {
                        format!("service {service} rolled back to its previous spec")
                    }
                    RolloutAction::Restart => format!(
                        "rolling restart of service {service} begun: every task is replaced, \
                         health-gated"
                    ),
                }
            })
        }
        OperatorAction::Drain {
            agent_id,
            min_healthy,
            then,
        } => {
            record.status = 202;
            let request = Request::StartDrain {
                agent_id: agent_id.as_str().into(),
                min_healthy,
                reason: ctx.reason.clone(),
                by: ctx.actor.name.clone(),
                then,
            };
            ask::<DrainRecord>(state, request).await.map(|drain| {
                record.summary = format!(
                    "drain of agent {agent_id} started: min_healthy {min_healthy}, then {}",
                    then.as_str()
                );
                record.drain = Some(drain);
            })
        }
        OperatorAction::CancelDrain { agent_id } => {
            let request = Request::CancelDrain {
                agent_id: agent_id.as_str().into(),
                by: ctx.actor.name.clone(),
            };
            ask::<DrainRecord>(state, request).await.map(|drain| {
                record.summary = format!("drain of agent {agent_id} cancelled");
                record.drain = Some(drain);
            })
        }
        OperatorAction::Reconcile(kind) => {
            record.kind = Some(kind);
            record.status = 202;
            match ask(state, Request::Reconcile(kind)).await {
                Ok(run) => {
                    record.summary = reconcile_summary(&run);
                    record.reconcile = Some(run);
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        OperatorAction::Kamikaze => match ask::<Vec<_>>(state, Request::Kamikaze).await {
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
        OperatorAction::Teardown => match ask::<TeardownResult>(state, Request::Teardown).await {
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
        OperatorAction::Abdicate => ask(state, Request::Abdicate)
            .await
            .map(|()| record.summary = ABDICATE_SUMMARY.into()),
        OperatorAction::Reregister => ask(state, Request::Reregister).await.map(|()| {
            record.summary = "stale framework ID and task records cleared; subscribing as a \
                                  new framework"
                .into()
        }),
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
        OperatorAction::Rollout {
            service,
            action: RolloutAction::Restart,
            ..
        } => serde_json::json!({ "service": service }),
        OperatorAction::Rollout {
            service, expected, ..
        } => serde_json::json!({ "service": service, "expected": expected }),
        OperatorAction::Reconcile(kind) => serde_json::json!({ "kind": kind }),
        OperatorAction::Kamikaze | OperatorAction::Teardown => {
            serde_json::json!({ "framework_id": record.framework_id })
        }
        OperatorAction::Abdicate | OperatorAction::Reregister => serde_json::json!({}),
        OperatorAction::Drain {
            agent_id,
            min_healthy,
            then,
        } => serde_json::json!({
            "agent_id": agent_id, "min_healthy": min_healthy, "then": then
        }),
        OperatorAction::CancelDrain { agent_id } => serde_json::json!({ "agent_id": agent_id }),
    };
    let outcome = Outcome {
        ok: record.ok,
        status: record.status,
        summary: record.summary.clone(),
    };
    if !(recorded_before && outcome.ok) {
        audit::record(state, ctx, action.name(), params, &outcome).await;
    }
    (state.results.push(record), error)
}
