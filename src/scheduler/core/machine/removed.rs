//! A framework the master removed: its task records stop claiming life.
//!
//! The master removes a framework when its failover timeout passes with no
//! scheduler connected, or when an operator tears it down (`TEARDOWN`).
//! Either way it marks every task of the framework TASK_KILLED with
//! `REASON_FRAMEWORK_REMOVED` and message `Framework <id> removed`, and
//! delivers no update for them (`Master::removeFramework` in
//! `src/master/master.cpp`, apache/mesos); a later SUBSCRIBE with that ID is
//! answered ERROR "Framework has been removed" (`Master::validate…`, same
//! file), and the operator API lists it among the completed frameworks.
//!
//! So a record that is not terminal when the framework is known removed
//! describes a task the master has already killed. The machine writes each
//! such record terminal in the same words — TASK_KILLED, SOURCE_MASTER,
//! REASON_FRAMEWORK_REMOVED, a message naming the framework and what showed
//! it removed — through the normal write path (one versioned write per
//! record, queued behind a write in flight, batched by the runner, never
//! acknowledged). No KILL is sent: pending kills are dropped and the
//! client is stopped. Records still being read when the removal shows are
//! written once they are known. `reregister` then deletes the records and
//! registers a new framework, which launches fresh instances
//! (`docs/deployment-strategies.md#removed`).

use tokio::time::Instant;

use super::Machine;
use super::forget::Then;
use crate::mesos::v1::{self, TaskState, task_status};
use crate::scheduler::config::OnFrameworkRemoved;
use crate::scheduler::ids::TaskId;
use crate::scheduler::snapshot::{EventKind, FrameworkState};

/// How the removal showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RemovedBy {
    /// SUBSCRIBE was answered ERROR "Framework has been removed".
    SubscribeError,
    /// The master's frameworks listed ours as completed.
    CompletedList,
}

impl RemovedBy {
    fn describe(self) -> &'static str {
        match self {
            RemovedBy::SubscribeError => {
                "the master answered SUBSCRIBE with \"Framework has been removed\""
            }
            RemovedBy::CompletedList => "the master lists it among completed frameworks",
        }
    }
}

impl Machine {
    /// The master removed our framework: state `removed`, no KILL, every
    /// live record written terminal (now, or once the records are read),
    /// then `reregister` if configured (or `hard`).
    pub(super) fn framework_removed(&mut self, by: RemovedBy, now: Instant) {
        self.stop_client();
        self.kills.clear();
        let id = self.framework.id.clone().unwrap_or_default().to_string();
        let reason = format!(
            "the master removed framework {id} (failover timeout passed or torn down: {}); \
             its tasks are killed; use the reregister action to register a new framework",
            by.describe()
        );
        self.log(
            EventKind::Error,
            format!("framework removed: {reason}"),
            now,
        );
        self.set_state(FrameworkState::Removed, Some(reason));
        self.framework.removed = Some(by);
        self.settle_removed_records(now);
        // `hard` always registers afresh.
        let reregister =
            self.cfg.on_framework_removed == OnFrameworkRemoved::Reregister || self.is_hard();
        if reregister {
            self.forget(Then::Reregister {
                reply: None,
                old: id,
            });
        }
    }

    /// Writes every non-terminal record TASK_KILLED as the master recorded
    /// it (see the module doc). Does nothing unless the framework is known
    /// removed and the records are read.
    pub(super) fn settle_removed_records(&mut self, now: Instant) {
        let Some(by) = self.framework.removed else {
            return;
        };
        if !self.tasks.is_loaded() {
            return;
        }
        let id = self.framework.id.clone().unwrap_or_default().to_string();
        let live: Vec<(TaskId, String)> = self
            .tasks
            .iter()
            .filter(|(_, e)| e.version.is_some() && !e.record.is_terminal())
            .map(|(task, e)| (task.clone(), e.record.agent_id.to_string()))
            .collect();
        if live.is_empty() {
            return;
        }
        let message = format!(
            "Framework {id} removed: killed by the master ({}; seen at {:.0} s since the UNIX epoch)",
            by.describe(),
            self.unix(now)
        );
        self.log(
            EventKind::Task,
            format!(
                "{} task(s) of removed framework {id} recorded TASK_KILLED (killed by the master; no KILL sent)",
                live.len()
            ),
            now,
        );
        for (task, agent) in live {
            self.kills.done(&task);
            let status = v1::TaskStatus {
                task_id: v1::TaskId {
                    value: task.to_string(),
                },
                state: TaskState::TaskKilled as i32,
                agent_id: (!agent.is_empty()).then_some(v1::AgentId { value: agent }),
                source: Some(task_status::Source::Master as i32),
                reason: Some(task_status::Reason::FrameworkRemoved as i32),
                message: Some(message.clone()),
                // The master's own update: nothing to acknowledge.
                uuid: None,
                ..Default::default()
            };
            self.route_update(status, now);
        }
        self.out.dirty = true;
    }
}
