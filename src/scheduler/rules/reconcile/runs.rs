//! Reconciliation runs as the snapshot shows them: which kind, why it
//! started, where it stands.

use serde::{Deserialize, Serialize};

use crate::scheduler::ids::TaskId;

/// Which reconciliation (Mesos' `docs/reconciliation.md`, `docs/mesos-protocol.md#reconciliation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileKind {
    /// RECONCILE naming every non-terminal task, retried with backoff.
    Explicit,
    /// RECONCILE with no tasks: the master reports every task it knows.
    Implicit,
}

/// One reconciliation run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReconcileRun {
    /// Run number, unique in this process; a queued request carries the
    /// number its run will have, so its result can be followed.
    #[serde(default)]
    pub id: u64,
    /// Explicit or implicit.
    pub kind: ReconcileKind,
    /// Why it ran.
    pub trigger: ReconcileTrigger,
    /// Start time.
    pub started_at: f64,
    /// End time, `None` while running.
    pub finished_at: Option<f64>,
    /// Tasks asked about (explicit) — 0 for implicit.
    pub asked: usize,
    /// Tasks answered so far.
    pub answered: usize,
    /// Tasks never answered (explicit runs that gave up).
    pub unanswered: Vec<TaskId>,
    /// RECONCILE calls sent (retries included).
    pub calls: u32,
    /// Where the run stands or how it ended.
    pub outcome: ReconcileOutcome,
}

/// Why a reconciliation run started (`trigger` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum ReconcileTrigger {
    /// The explicit run every (re-)subscription starts.
    #[serde(rename = "subscribed")]
    Subscribed,
    /// The implicit run that follows it, surfacing unknown tasks.
    #[serde(rename = "after explicit")]
    AfterExplicit,
    /// The periodic implicit run (`--reconcile-interval`).
    #[serde(rename = "periodic")]
    Periodic,
    /// An operator's request (action or API).
    #[serde(rename = "manual")]
    Manual,
    /// An ACCEPT failed or was not sent: the records of its tasks are
    /// written, but the master may never have seen them.
    #[serde(rename = "launch failed")]
    LaunchFailed,
}

impl ReconcileTrigger {
    /// The name used in JSON and on the pages.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileTrigger::Subscribed => "subscribed",
            ReconcileTrigger::AfterExplicit => "after explicit",
            ReconcileTrigger::Periodic => "periodic",
            ReconcileTrigger::Manual => "manual",
            ReconcileTrigger::LaunchFailed => "launch failed",
        }
    }
}

impl std::fmt::Display for ReconcileTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a reconciliation run stands (`outcome` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileOutcome {
    /// Waiting for the running run or the cooldown.
    Queued,
    /// In progress.
    Running,
    /// Every task answered (explicit) or the window closed (implicit).
    Converged,
    /// Gave up after the abort timeout; `unanswered` lists the silent tasks.
    Aborted,
    /// A new subscription started a new explicit run.
    Superseded,
    /// The subscription or leadership was lost (a queued run that never
    /// started is cancelled too).
    Cancelled,
}

impl ReconcileOutcome {
    /// The snake_case name used in JSON, metrics and on the pages.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileOutcome::Queued => "queued",
            ReconcileOutcome::Running => "running",
            ReconcileOutcome::Converged => "converged",
            ReconcileOutcome::Aborted => "aborted",
            ReconcileOutcome::Superseded => "superseded",
            ReconcileOutcome::Cancelled => "cancelled",
        }
    }

    /// True once the run ended (any outcome but queued and running).
    pub fn is_finished(self) -> bool {
        !matches!(self, ReconcileOutcome::Queued | ReconcileOutcome::Running)
    }
}

impl std::fmt::Display for ReconcileOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reconciliation history for the overview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReconciliationStatus {
    /// The run in progress.
    pub running: Option<ReconcileRun>,
    /// Runs waiting for the current one or the cooldown (at most one per
    /// kind; explicit goes first). Each is shown as a run with outcome
    /// `queued` whose `started_at` is when it was queued.
    #[serde(default)]
    pub queued: Vec<ReconcileRun>,
    /// The earliest time (seconds since the UNIX epoch) the first queued
    /// run may start: the end of the cooldown after the last run
    /// (`--reconcile-cooldown`). `None` when nothing is queued or a run is
    /// in progress (the queue waits for its end, then the cooldown).
    #[serde(default)]
    pub not_before: Option<f64>,
    /// Recent finished runs, newest last.
    pub history: Vec<ReconcileRun>,
}
