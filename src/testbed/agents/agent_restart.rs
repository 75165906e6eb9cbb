//! Process mode: an agent process that dies and restarts with the same work
//! directory (capture r, `docs/agent-recovery.md`,
//! `docs/executor-http-api.md` "Agent Recovery").
//!
//! While it is down its executor endpoint refuses connections and every
//! executor stream is cut without a terminating chunk. The master notices
//! the disconnection: tasks of frameworks that do not checkpoint are lost
//! at once — TASK_LOST, SOURCE_MASTER, REASON_AGENT_DISCONNECTED, `Agent
//! <host> disconnected`, no uuid (master.cpp `disconnect`,
//! `docs/mesos-protocol.md#master-generated-updates`) —
//! and their executors die with the agent. Checkpointing frameworks notice
//! nothing (capture r: the scheduler saw no event): when the agent is back,
//! their executors re-subscribe within `--executor_reregistration_timeout`
//! with their unacknowledged updates, or are destroyed (their tasks TASK_LOST,
//! TASK_GONE if PARTITION_AWARE, REASON_EXECUTOR_REREGISTRATION_TIMEOUT;
//! slave.cpp reregisterExecutorTimeout,
//! `docs/mesos-protocol.md#disconnections-and-agent-recovery`). Until then the agent
//! answers executors' other calls with 503 `Agent has not finished recovery`.
//! Status update retries of simulated tasks on that agent are not paused.

use std::time::Duration;

use super::executor_api::serve_agent;
use crate::executor::config::format_duration;
use crate::mesos::v1::{TaskState, task_status};
use crate::testbed::master::processes::{ExecutorTimer, ProcessState, Termination};
use crate::testbed::master::{AgentState, Master, Timer};

/// Delay before trying to re-bind an agent's port again.
const REBIND_RETRY: Duration = Duration::from_millis(100);

impl Master {
    /// Restarts agent `agent_index` (process mode only): down for `down`,
    /// then up again on the same port. Returns false for an unknown or gone
    /// agent or without process mode.
    pub fn restart_agent(&mut self, agent_index: usize, down: Duration) -> bool {
        // A gone agent never comes back (`master/gone.rs`).
        // Nor does an agent whose machine is DOWN (capture v: its
        // re-registration is refused; `master/maintenance.rs`).
        if matches!(
            self.agents[agent_index].state,
            AgentState::Gone | AgentState::Down
        ) {
            return false;
        }
        let Some(endpoint) = self.processes.endpoints.get_mut(agent_index) else {
            return false;
        };
        endpoint.epoch += 1;
        endpoint.up = false;
        endpoint.recovering = false;
        endpoint.stop.cancel();
        let epoch = endpoint.epoch;
        tracing::info!(agent_index, ?down, "agent restarting");
        for process in self.processes.live.values_mut() {
            if process.agent_index != agent_index {
                continue;
            }
            if let Some(stream) = process.stream.take() {
                stream.abort();
            }
            if process.state == ProcessState::Subscribed {
                process.state = ProcessState::Disconnected;
            }
        }
        self.lose_uncheckpointed_tasks(agent_index);
        self.schedule(
            down,
            Timer::Executor(ExecutorTimer::AgentUp { agent_index, epoch }),
        );
        true
    }

    fn checkpoints(&self, framework_id: &str) -> bool {
        self.frameworks
            .get(framework_id)
            .map(|f| &f.info)
            .or_else(|| self.recovery_infos.get(framework_id))
            .is_some_and(|info| info.checkpoint == Some(true))
    }

    /// The master's side of an agent disconnection for frameworks that do
    /// not checkpoint: their tasks there are lost and their executors gone.
    fn lose_uncheckpointed_tasks(&mut self, agent_index: usize) {
        let agent_id = self.agents[agent_index].id.clone();
        let hostname = self.agents[agent_index].spec.hostname.clone();
        let keys: Vec<(String, String)> = self
            .tasks
            .on_agent(&agent_id)
            .filter(|(_, t)| !self.checkpoints(&t.framework_id))
            .map(|(k, _)| k.clone())
            .collect();
        let message = format!("Agent {hostname} disconnected");
        for key in keys {
            if let Some(task) = self.tasks.remove(&key) {
                self.lose_task(task, task_status::Reason::AgentDisconnected, &message);
            }
        }
        let lost_executors: Vec<(String, String)> = self.agents[agent_index]
            .executors
            .keys()
            .filter(|(f, _)| !self.checkpoints(f))
            .cloned()
            .collect();
        for (framework_id, executor_id) in lost_executors {
            match self.find_process(agent_index, &framework_id, &executor_id) {
                Some(container_id) => self.destroy_container(&container_id, None),
                None => {
                    let agent = &mut self.agents[agent_index];
                    if let Some(executor) = agent.executors.remove(&(framework_id, executor_id)) {
                        agent.used.subtract(&executor.resources);
                    }
                }
            }
        }
    }

    /// The restarted agent is up: its endpoint listens again on the same
    /// address, and it waits for checkpointed executors to re-subscribe.
    pub(crate) fn agent_up(&mut self, agent_index: usize, epoch: u64) {
        let Some(shared) = self.this.upgrade() else {
            return;
        };
        let Some(endpoint) = self.processes.endpoints.get(agent_index) else {
            return;
        };
        if endpoint.epoch != epoch || endpoint.up {
            return;
        }
        let stop = self.processes.stop.child_token();
        match serve_agent(
            crate::testbed::master::App(shared),
            agent_index,
            endpoint.addr,
            stop.clone(),
        ) {
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, agent_index, "agent cannot re-bind yet; retrying");
                self.schedule(
                    REBIND_RETRY,
                    Timer::Executor(ExecutorTimer::AgentUp { agent_index, epoch }),
                );
                return;
            }
        }
        let waiting = self
            .processes
            .live
            .values()
            .any(|p| p.agent_index == agent_index && p.state == ProcessState::Disconnected);
        if let Some(endpoint) = self.processes.endpoints.get_mut(agent_index) {
            endpoint.stop = stop;
            endpoint.up = true;
            endpoint.recovering = waiting;
        }
        tracing::info!(agent_index, recovering = waiting, "agent is back");
        if waiting {
            self.schedule(
                self.cfg.executor_reregistration_timeout,
                Timer::Executor(ExecutorTimer::Reregistration { agent_index, epoch }),
            );
        }
    }

    /// Executors that did not re-subscribe in time are destroyed.
    pub(crate) fn reregistration_timeout(&mut self, agent_index: usize, epoch: u64) {
        let Some(endpoint) = self.processes.endpoints.get_mut(agent_index) else {
            return;
        };
        if endpoint.epoch != epoch {
            return;
        }
        endpoint.recovering = false;
        let timeout = format_duration(self.cfg.executor_reregistration_timeout);
        let late: Vec<(String, String)> = self
            .processes
            .live
            .values()
            .filter(|p| p.agent_index == agent_index && p.state == ProcessState::Disconnected)
            .map(|p| (p.container_id.clone(), p.framework_id.clone()))
            .collect();
        for (container_id, framework_id) in late {
            let partition_aware = self
                .framework(&framework_id)
                .is_some_and(|f| f.partition_aware());
            tracing::warn!(%container_id, "executor did not re-subscribe after the agent restart");
            self.destroy_container(
                &container_id,
                Some(Termination {
                    state: if partition_aware {
                        TaskState::TaskGone
                    } else {
                        TaskState::TaskLost
                    },
                    reason: task_status::Reason::ExecutorReregistrationTimeout,
                    message: format!("Executor did not reregister within {timeout}"),
                }),
            );
        }
    }
}
