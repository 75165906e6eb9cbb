//! An agent removed for good: the operator's `MARK_AGENT_GONE` (operator
//! API v1, `docs/operator-http-api.md`), which a real master serves in
//! `Master::Http::markAgentGone` (`src/master/http.cpp`) and carries out in
//! `Master::markGone` and `Master::__removeSlave` (`src/master/master.cpp`).
//!
//! What a framework sees when a registered agent is marked gone:
//! - each of its tasks there gets TASK_GONE_BY_OPERATOR,
//!   REASON_AGENT_REMOVED_BY_OPERATOR if the framework is PARTITION_AWARE,
//!   TASK_LOST, REASON_AGENT_REMOVED otherwise; SOURCE_MASTER, message
//!   `Agent has been marked gone`, no uuid (nothing to acknowledge), the
//!   executor ID for tasks of a custom executor. The task is then completed
//!   (`Master::removeTask`), so it is not live any more;
//! - its offers on the agent are rescinded;
//! - every connected framework gets FAILURE{agent_id} (`sendSlaveLost`).
//!
//! For an unreachable agent only the task updates are sent (FAILURE went out
//! when it became unreachable); an agent known only from a master failover
//! (recovering) is marked gone silently: the new master knows none of its
//! tasks (MESOS-9739). Either way the agent is shut down and never comes back
//! (the master refuses a gone agent's re-registration, `slaves.gone`), and
//! explicit reconciliation of a task it had answers TASK_GONE_BY_OPERATOR
//! (TASK_LOST if not PARTITION_AWARE), `Reconciliation: Task is gone`
//! (`Master::reconcile` case 5). Marking it gone again is a success.

use super::agent_side::AgentSide;
use super::tasks::Task;
use super::{AgentState, Master, push_bounded, update_event};
use crate::mesos::resources::Resources;
use crate::mesos::v1::{self, TaskState, task_status};

/// The message of the master's updates (`Master::markGone`).
const GONE_MESSAGE: &str = "Agent has been marked gone";

impl Master {
    /// Marks agent `agent_id` gone (see the module doc). Returns false for
    /// an unknown agent (the operator API answers 404 `Agent '…' not found`).
    pub fn mark_agent_gone(&mut self, agent_id: &str) -> bool {
        let Some(index) = self.agent_index(agent_id) else {
            return false;
        };
        let was = self.agents[index].state;
        if was == AgentState::Gone {
            return true;
        }
        tracing::info!(%agent_id, "agent marked gone");
        self.agents[index].state = AgentState::Gone;
        self.agent_shutdown(index);
        match was {
            AgentState::Registered => {
                let keys = self.tasks.keys_on(agent_id);
                for key in keys {
                    if let Some(task) = self.tasks.remove(&key) {
                        self.task_gone(task);
                    }
                }
                self.rescind_offers_on(agent_id);
                self.notify_agent_lost(agent_id);
            }
            AgentState::Unreachable { .. } => {
                let keys = self.unreachable_tasks.keys_on(agent_id);
                for key in keys {
                    if let Some(task) = self.unreachable_tasks.remove(&key) {
                        self.task_gone(task);
                    }
                }
            }
            AgentState::Recovering => {
                let keys = self.tasks.keys_on(agent_id);
                for key in keys {
                    if let Some(mut task) = self.tasks.remove(&key) {
                        self.release_task_resources(&mut task);
                    }
                }
            }
            // A DOWN machine's agent has no tasks left (`master/maintenance.rs`).
            AgentState::Gone | AgentState::Down => {}
        }
        let agent = &mut self.agents[index];
        agent.executors.clear();
        agent.used = Resources::new();
        true
    }

    /// One task of a gone agent: its framework hears of it (if connected) and
    /// it joins the framework's completed tasks.
    fn task_gone(&mut self, mut task: Task) {
        self.release_task_resources(&mut task);
        let framework_id = task.framework_id.clone();
        let partition_aware = self
            .framework(&framework_id)
            .is_some_and(|f| f.partition_aware());
        let (state, reason) = if partition_aware {
            (
                TaskState::TaskGoneByOperator,
                task_status::Reason::AgentRemovedByOperator,
            )
        } else {
            (TaskState::TaskLost, task_status::Reason::AgentRemoved)
        };
        let mut status = Self::master_status(
            &task.task_id,
            Some(&task.agent_id),
            state,
            reason,
            GONE_MESSAGE,
        );
        if task.custom_executor {
            status.executor_id = Some(v1::ExecutorId {
                value: task.executor_id.clone(),
            });
        }
        task.state = state;
        task.pending.clear();
        task.unreachable_since = None;
        task.healthy = None;
        self.send(&framework_id, &update_event(status));
        let limit = self.cfg.max_completed_tasks_per_framework;
        if let Some(framework) = self.frameworks.get_mut(&framework_id) {
            push_bounded(&mut framework.completed_tasks, task, limit);
        }
    }
}
