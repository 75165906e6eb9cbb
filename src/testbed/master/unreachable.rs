//! Agents becoming unreachable and coming back (captures q and s): offers
//! rescinded, tasks lost (not final), FAILURE{agent_id}, and TASK_RUNNING
//! again when the agent re-registers.
//!
//! Sources: `src/master/master.cpp` (the agent observer's missed pings
//! marking an agent unreachable, `markUnreachable`, and an unreachable
//! agent's re-registration), the ping defaults in `src/master/constants.hpp`
//! (`DEFAULT_AGENT_PING_TIMEOUT`, `DEFAULT_MAX_AGENT_PING_TIMEOUTS`) and
//! `docs/high-availability-framework-guide.md` (TASK_LOST is not final for a
//! framework that is not PARTITION_AWARE).

use super::tasks::container_status;
use super::{AgentState, Master, Timer, now_nanos, update_event};
use crate::mesos::v1::scheduler::{Event, event};
use crate::mesos::v1::{self, TaskState, task_status};

impl Master {
    /// Marks an agent unreachable, as after missed health checks (capture q):
    /// its offers are rescinded, each task there becomes unreachable and its
    /// framework gets TASK_LOST (TASK_UNREACHABLE if PARTITION_AWARE),
    /// SOURCE_MASTER, REASON_AGENT_REMOVED, no uuid; then every connected
    /// framework gets FAILURE{agent_id}. Returns false for an unknown agent.
    pub fn agent_unreachable(&mut self, agent_id: &str) -> bool {
        let Some(index) = self.agent_index(agent_id) else {
            return false;
        };
        if self.agents[index].state != AgentState::Registered {
            return true;
        }
        let since = now_nanos();
        self.agents[index].state = AgentState::Unreachable { since_nanos: since };
        self.rescind_offers_on(agent_id);
        let keys = self.tasks.keys_on(agent_id);
        for key in keys {
            let Some(mut task) = self.tasks.remove(&key) else {
                continue;
            };
            task.unreachable_since = Some(since);
            let partition_aware = self.framework(&key.0).is_some_and(|f| f.partition_aware());
            let mut status = Self::master_status(
                &task.task_id,
                Some(agent_id),
                if partition_aware {
                    TaskState::TaskUnreachable
                } else {
                    TaskState::TaskLost
                },
                task_status::Reason::AgentRemoved,
                "health check timed out",
            );
            if task.custom_executor {
                status.executor_id = Some(v1::ExecutorId {
                    value: task.executor_id.clone(),
                });
            }
            status.unreachable_time = Some(v1::TimeInfo { nanoseconds: since });
            self.unreachable_tasks.insert(key.clone(), task);
            self.send(&key.0, &update_event(status));
        }
        self.notify_agent_lost(agent_id);
        true
    }

    /// FAILURE{agent_id} to every connected framework (master.cpp
    /// `sendSlaveLost`, at the end of removing an agent).
    pub(crate) fn notify_agent_lost(&mut self, agent_id: &str) {
        let failure = Event {
            r#type: Some(event::Type::Failure as i32),
            failure: Some(event::Failure {
                agent_id: Some(v1::AgentId {
                    value: agent_id.to_string(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let connected: Vec<String> = self
            .frameworks
            .values()
            .filter(|f| f.connected())
            .map(|f| f.id.clone())
            .collect();
        for framework_id in connected {
            self.send(&framework_id, &failure);
        }
    }

    /// An unreachable agent re-registers with its tasks still running
    /// (capture s): each task of a known framework comes back and its
    /// framework gets TASK_RUNNING "Unreachable agent re-reregistered",
    /// SOURCE_MASTER, REASON_AGENT_REREGISTERED; tasks of removed frameworks
    /// are killed by the agent. Unacknowledged updates are retried again.
    pub fn agent_reachable(&mut self, agent_id: &str) -> bool {
        let Some(index) = self.agent_index(agent_id) else {
            return false;
        };
        if !matches!(self.agents[index].state, AgentState::Unreachable { .. }) {
            return true;
        }
        self.agents[index].state = AgentState::Registered;
        let keys = self.unreachable_tasks.keys_on(agent_id);
        for key in keys {
            let Some(mut task) = self.unreachable_tasks.remove(&key) else {
                continue;
            };
            task.unreachable_since = None;
            if !self.frameworks.contains_key(&key.0) {
                self.release_task_resources(&mut task);
                continue;
            }
            let mut status = Self::master_status(
                &task.task_id,
                Some(agent_id),
                task.state,
                task_status::Reason::AgentReregistered,
                "Unreachable agent re-reregistered",
            );
            if task.custom_executor {
                status.executor_id = Some(v1::ExecutorId {
                    value: task.executor_id.clone(),
                });
            }
            status.container_status = Some(container_status(&task));
            let retry = (!task.pending.is_empty()).then(|| {
                task.pending
                    .front()
                    .and_then(|s| s.uuid.clone())
                    .unwrap_or_default()
            });
            self.tasks.insert(key.clone(), task);
            self.send(&key.0, &update_event(status));
            if let Some(uuid) = retry {
                self.schedule(
                    self.cfg.status_update_retry_min,
                    Timer::StatusRetry {
                        framework_id: key.0.clone(),
                        task_id: key.1.clone(),
                        uuid,
                    },
                );
            }
        }
        self.drain_on_reregistration(agent_id);
        true
    }
}
