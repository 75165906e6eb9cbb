//! The agents' status update streams (`src/slave/task_status_update_manager.cpp`,
//! `docs/mesos-protocol.md#acknowledgements`): per task only the oldest unacknowledged update is in
//! flight; it is re-sent with a doubling backoff until acknowledged; the next
//! one is forwarded only after that. The master records each forwarded state
//! and frees a task's resources when a terminal state passes through.

use super::master::{AgentState, Master, Timer, push_bounded, update_event};
use super::tasks::{StatusRecord, Task, is_terminal};
use crate::mesos::v1;
use crate::mesos::v1::scheduler::call;

/// How many status updates of a task the master keeps for `/master/state`.
const MAX_STATUSES: usize = 32;

impl Master {
    /// The agent's status update manager receives an update: it is queued and,
    /// if nothing is in flight for the task, forwarded.
    pub fn agent_update(&mut self, framework_id: &str, task_id: &str, status: v1::TaskStatus) {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get_mut(&key) else {
            return;
        };
        task.pending.push_back(status);
        if task.pending.len() == 1 {
            self.forward_head(framework_id, task_id);
        }
    }

    /// Forwards the task's oldest unacknowledged update through the master:
    /// the master records its state (and frees resources of a terminal task),
    /// sends it if the framework is connected, and the agent arms a retry.
    pub(crate) fn forward_head(&mut self, framework_id: &str, task_id: &str) {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get_mut(&key) else {
            return;
        };
        let Some(head) = task.pending.front().cloned() else {
            return;
        };
        task.state = head.state();
        task.healthy = head.healthy;
        push_bounded(&mut task.statuses, StatusRecord::of(&head), MAX_STATUSES);
        let retry = task.retry;
        let uuid = head.uuid.clone().unwrap_or_default();
        if is_terminal(head.state())
            && let Some(mut task) = self.tasks.remove(&key)
        {
            self.release_task_resources(&mut task);
            self.tasks.insert(key, task);
        }
        self.send(framework_id, &update_event(head));
        self.schedule(
            retry,
            Timer::StatusRetry {
                framework_id: framework_id.to_string(),
                task_id: task_id.to_string(),
                uuid,
            },
        );
    }

    /// Re-sends an update still unacknowledged after its retry interval; the
    /// interval doubles up to the maximum (task_status_update_manager.cpp).
    pub fn retry_status_update(&mut self, framework_id: &str, task_id: &str, uuid: &[u8]) {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get(&key) else {
            return;
        };
        let in_flight = task.pending.front().and_then(|s| s.uuid.as_deref()) == Some(uuid);
        let reachable = self
            .agent_index(&task.agent_id)
            .is_some_and(|i| self.agents[i].state == AgentState::Registered);
        if !in_flight || !reachable {
            return;
        }
        let max = self.cfg.status_update_retry_max;
        if let Some(task) = self.tasks.get_mut(&key) {
            task.retry = (task.retry * 2).min(max);
        }
        tracing::debug!(%task_id, "re-sending unacknowledged status update");
        self.forward_head(framework_id, task_id);
    }

    /// Gives a task's resources back to its agent (once) and detaches it from
    /// its executor; the command executor exits with its task.
    pub(crate) fn release_task_resources(&mut self, task: &mut Task) {
        if task.released {
            return;
        }
        task.released = true;
        let Some(index) = self.agent_index(&task.agent_id) else {
            return;
        };
        let agent = &mut self.agents[index];
        agent.used.subtract(&task.resources);
        let key = (task.framework_id.clone(), task.executor_id.clone());
        if let Some(executor) = agent.executors.get_mut(&key) {
            executor.tasks.retain(|t| *t != task.task_id.value);
            if executor.info.is_none() {
                agent.executors.remove(&key);
            }
        }
    }

    /// ACKNOWLEDGE: if it names the update in flight, the agent drops it and
    /// forwards the next one; an acknowledged terminal update ends the task
    /// (it moves to the framework's completed tasks). Acknowledgements for
    /// unknown agents, tasks or updates are dropped silently (master.cpp).
    pub fn acknowledge(&mut self, framework_id: &str, ack: &call::Acknowledge) {
        let reachable = self
            .agent_index(&ack.agent_id.value)
            .is_some_and(|i| self.agents[i].state == AgentState::Registered);
        if !reachable {
            return;
        }
        let key = (framework_id.to_string(), ack.task_id.value.clone());
        let Some(task) = self.tasks.get_mut(&key) else {
            return;
        };
        if task.agent_id != ack.agent_id.value
            || task.pending.front().and_then(|s| s.uuid.as_deref()) != Some(ack.uuid.as_slice())
        {
            return;
        }
        let acked = task.pending.pop_front().expect("front checked above");
        if task.pending.is_empty() {
            // Tens of thousands of settled tasks keep no update buffers.
            task.pending = Default::default();
        }
        task.retry = self.cfg.status_update_retry_min;
        if is_terminal(acked.state()) {
            if let Some(task) = self.tasks.remove(&key) {
                let limit = self.cfg.max_completed_tasks_per_framework;
                if let Some(framework) = self.frameworks.get_mut(framework_id) {
                    push_bounded(&mut framework.completed_tasks, task, limit);
                }
            }
        } else if !task.pending.is_empty() {
            self.forward_head(framework_id, &ack.task_id.value);
        }
    }
}
