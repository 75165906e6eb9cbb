//! The agents' status update streams (`src/slave/task_status_update_manager.cpp`,
//! `docs/mesos-protocol.md#acknowledgements`): per task only the oldest unacknowledged update is in
//! flight; it is re-sent with a doubling backoff until acknowledged; the next
//! one is forwarded only after that. The master records each forwarded state
//! and frees a task's resources when a terminal state passes through.
//!
//! The retry rule is the status update manager's: the first retry comes
//! `STATUS_UPDATE_RETRY_INTERVAL_MIN` (10 s) after an update is forwarded,
//! each later one after twice the previous interval, capped at
//! `STATUS_UPDATE_RETRY_INTERVAL_MAX` (10 min) (`src/slave/constants.hpp`;
//! `TaskStatusUpdateManagerProcess::forward` and `timeout` in
//! `src/slave/task_status_update_manager.cpp`); the next update of the
//! stream starts again from the minimum. The testbed's bounds are
//! `--status-update-retry-min` and `--status-update-retry-max`, the
//! doubling is [`Backoff`]'s.

use super::agent_side::AgentSide;
use super::tasks::{StatusRecord, Task, is_terminal};
use super::{AgentState, Master, Timer, push_bounded, update_event};
use crate::backoff::Backoff;
use crate::mesos::v1;
use crate::mesos::v1::scheduler::call;
use crate::testbed::config::TestbedConfig;
use std::time::Duration;

/// How many status updates of a task the master keeps for `/master/state`.
const MAX_STATUSES: usize = 32;

/// How long the agent waits for the acknowledgement of an update it
/// forwarded after `retries` re-sends before sending it again:
/// `min(max, min · 2^retries)` of `--status-update-retry-min` and
/// `--status-update-retry-max` (the module documentation has the rule's
/// source).
pub(crate) fn retry_interval(cfg: &TestbedConfig, retries: u32) -> Duration {
    Backoff::nth(
        cfg.status_update_retry_min,
        cfg.status_update_retry_max,
        retries,
    )
}

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
        let retry = retry_interval(&self.cfg, task.retries);
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
        if let Some(task) = self.tasks.get_mut(&key) {
            task.retries = task.retries.saturating_add(1);
        }
        if let Some(framework) = self.frameworks.get_mut(framework_id) {
            framework.updates_resent += 1;
        }
        tracing::debug!(%task_id, "re-sending unacknowledged status update");
        self.forward_head(framework_id, task_id);
    }

    /// A live task the master gives up on (its agent is removed or lost
    /// it): its resources go back, its framework gets TASK_LOST with
    /// `reason` and `message` from the master (with the executor ID for a
    /// custom executor's task), and it joins the framework's completed
    /// tasks.
    pub(crate) fn lose_task(
        &mut self,
        mut task: super::tasks::Task,
        reason: crate::mesos::v1::task_status::Reason,
        message: &str,
    ) {
        use crate::mesos::v1::{self, TaskState};
        self.release_task_resources(&mut task);
        let mut status = Self::master_status(
            &task.task_id,
            Some(&task.agent_id),
            TaskState::TaskLost,
            reason,
            message,
        );
        if task.custom_executor {
            status.executor_id = Some(v1::ExecutorId {
                value: task.executor_id.clone(),
            });
        }
        task.state = TaskState::TaskLost;
        let framework_id = task.framework_id.clone();
        self.send(&framework_id, &super::update_event(status));
        let limit = self.cfg.max_completed_tasks_per_framework;
        if let Some(framework) = self.frameworks.get_mut(&framework_id) {
            super::push_bounded(&mut framework.completed_tasks, task, limit);
        }
    }

    /// Gives a task's resources back to its agent (once) and detaches it from
    /// its executor; the command executor exits with its task.
    pub(crate) fn release_task_resources(&mut self, task: &mut Task) {
        if task.released {
            return;
        }
        task.released = true;
        self.agent_task_released(&task.framework_id, &task.task_id.value);
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
        task.retries = 0;
        task.acknowledged = Some(acked.state());
        if is_terminal(acked.state()) {
            if let Some(task) = self.tasks.remove(&key) {
                let limit = self.cfg.max_completed_tasks_per_framework;
                if let Some(framework) = self.frameworks.get_mut(framework_id) {
                    push_bounded(&mut framework.completed_tasks, task, limit);
                }
            }
            self.drain_progress(&ack.agent_id.value);
        } else if !task.pending.is_empty() {
            self.forward_head(framework_id, &ack.task_id.value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_the_minimum_to_the_maximum() {
        // for_tests: --status-update-retry-min 1s, --status-update-retry-max 8s.
        let cfg = TestbedConfig::for_tests(1);
        let intervals: Vec<Duration> = (0..6).map(|n| retry_interval(&cfg, n)).collect();
        let secs = |s: u64| Duration::from_secs(s);
        assert_eq!(
            intervals,
            [secs(1), secs(2), secs(4), secs(8), secs(8), secs(8)]
        );
        assert_eq!(retry_interval(&cfg, u32::MAX), secs(8));
        // Mesos' defaults: 10 s doubling to 10 min (src/slave/constants.hpp).
        let cfg = TestbedConfig::default();
        let mesos: Vec<u64> = (0..8).map(|n| retry_interval(&cfg, n).as_secs()).collect();
        assert_eq!(mesos, [10, 20, 40, 80, 160, 320, 600, 600]);
    }
}
