//! The outcomes of actions: one [`ActionRecord`] each, the last
//! [`RESULTS_KEPT`] of them kept in memory for `/actions/results/{id}`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::plural;
use crate::scheduler::{KamikazeResult, ReconcileKind, ReconcileRun, Snapshot, TeardownResult};

/// Results kept for the result pages.
pub const RESULTS_KEPT: usize = 100;

/// The outcome of one action, as the result page and the API show it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ActionRecord {
    /// Random ID (the result page is `/actions/results/{id}`).
    pub id: String,
    /// `reconcile`, `kamikaze`, `teardown`, `abdicate`, `reregister`,
    /// `resume`, `rollback`, `restart`, `drain`, `cancel_drain`.
    pub action: &'static str,
    /// `explicit` / `implicit` for reconcile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ReconcileKind>,
    /// Resume, rollback and restart: the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// When it was asked for.
    pub at: f64,
    /// `api` or `browser`.
    pub via: &'static str,
    /// Who asked (the admin token's name, see [`crate::web::auth::Actor`]).
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
    /// Drain and cancel_drain: the drain as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<crate::scheduler::drains::DrainRecord>,
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
pub(super) fn reconcile_summary(run: &ReconcileRun) -> String {
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
    pub(super) fn push(&self, record: ActionRecord) -> Arc<ActionRecord> {
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

    /// The outcome `id`, or the 404 of a result page and its JSON twin,
    /// saying where outcomes live: with the replica that ran the action,
    /// so another replica (a new leader, a follower) never has it.
    pub fn found(&self, id: &str) -> Result<Arc<ActionRecord>, crate::web::AppError> {
        self.get(id).ok_or_else(|| {
            crate::web::AppError::not_found(format!(
                "no action result {id:?} on this replica: a replica keeps the outcomes of the \
                 actions it ran in memory (the latest {RESULTS_KEPT}; gone when it stops); the \
                 audit (/audit) records every action of every replica"
            ))
        })
    }

    /// The newest `n` outcomes, newest first.
    pub fn recent(&self, n: usize) -> Vec<Arc<ActionRecord>> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.iter().rev().take(n).cloned().collect()
    }
}
