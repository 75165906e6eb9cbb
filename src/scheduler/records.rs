//! The task record: what the scheduler knows of one task, persisted under
//! `tasks/<task-id>` in ZooKeeper before the task is launched and after every
//! status update (before that update is acknowledged:
//! `docs/deployment-strategies.md#rules-every-strategy-keeps`), so that
//! a new leader recovers every task it must reconcile.

use serde::{Deserialize, Serialize};

use super::services::ExecutorKind;
use crate::mesos::v1::{TaskState, TaskStatus, task_status};

/// Status updates kept per task record (the timeline shown on its page).
pub const TIMELINE_LEN: usize = 20;

/// One status update as recorded in a task's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusEntry {
    /// When the scheduler received it, seconds since the UNIX epoch.
    pub at: f64,
    /// Mesos state name, e.g. `TASK_RUNNING`.
    pub state: String,
    /// `SOURCE_MASTER`, `SOURCE_AGENT` or `SOURCE_EXECUTOR`.
    pub source: String,
    /// Mesos reason name, e.g. `REASON_RECONCILIATION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The update's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl StatusEntry {
    /// The entry for a Mesos status update received at `at`.
    pub fn from_status(status: &TaskStatus, at: f64) -> StatusEntry {
        StatusEntry {
            at,
            state: status.state().as_str_name().to_string(),
            source: status
                .source
                .and_then(|s| task_status::Source::try_from(s).ok())
                .map(|s| s.as_str_name().to_string())
                .unwrap_or_default(),
            reason: status
                .reason
                .and_then(|r| task_status::Reason::try_from(r).ok())
                .map(|r| r.as_str_name().to_string()),
            message: status.message.clone(),
        }
    }
}

/// Why the scheduler wants a task dead, and how often it asked Mesos.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillRequest {
    /// Why: `scaled down`, `replaced by upgrade`, `stuck in TASK_STAGING`, …
    pub reason: String,
    /// First request, seconds since the UNIX epoch.
    pub requested_at: f64,
    /// KILL calls sent so far ("kill pending (n)" on the dashboard).
    pub attempts: u32,
}

/// One task, as stored in ZooKeeper and shown by the dashboard and
/// `/api/v1/tasks`. JSON with snake_case keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// `<service>.<instance>.<uuid>`.
    pub task_id: String,
    /// The service it belongs to.
    pub service: String,
    /// Its instance number within the service, from 0.
    pub instance: u32,
    /// [`ServiceSpec::fingerprint`](super::services::ServiceSpec::fingerprint)
    /// of the spec it was launched from.
    pub fingerprint: String,
    /// The agent it was launched on.
    pub agent_id: String,
    /// That agent's hostname.
    pub hostname: String,
    /// Which executor runs it.
    pub executor: ExecutorKind,
    /// The executor ID (the task ID for the command executor).
    pub executor_id: String,
    /// Host ports assigned from the offer.
    #[serde(default)]
    pub ports: Vec<u64>,
    /// Latest Mesos state name (`TASK_STAGING` until the first update).
    pub state: String,
    /// Launch time, seconds since the UNIX epoch.
    pub launched_at: f64,
    /// Time of the latest update, seconds since the UNIX epoch.
    pub updated_at: f64,
    /// Set while the scheduler wants the task killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<KillRequest>,
    /// Recent status updates, oldest first (at most [`TIMELINE_LEN`]).
    #[serde(default)]
    pub timeline: Vec<StatusEntry>,
}

impl TaskRecord {
    /// The latest state as a Mesos enum (`TASK_STAGING` if unreadable).
    pub fn task_state(&self) -> TaskState {
        TaskState::from_str_name(&self.state).unwrap_or(TaskState::TaskStaging)
    }

    /// True once the task reached a terminal state.
    pub fn is_terminal(&self) -> bool {
        crate::mesos::is_terminal(self.task_state())
    }

    /// Records an update: state, time and a timeline entry (bounded).
    pub fn apply(&mut self, status: &TaskStatus, at: f64) {
        self.state = status.state().as_str_name().to_string();
        self.updated_at = at;
        self.timeline.push(StatusEntry::from_status(status, at));
        if self.timeline.len() > TIMELINE_LEN {
            let excess = self.timeline.len() - TIMELINE_LEN;
            self.timeline.drain(..excess);
        }
    }
}
