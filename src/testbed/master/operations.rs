//! KILL, RECONCILE, MESSAGE and SHUTDOWN, and what happens when an executor
//! exits (`kamikaze`). Sources: master.cpp (`kill`, `reconcile`, `message`),
//! slave.cpp (`killTask`, `executorTerminated`), `docs/mesos-protocol.md#kills`,
//! `#reconciliation`, `#framework-messages`, and captures c, e, f and executor/.

use super::agent_side::AgentSide;
use super::tasks::{KAMIKAZE, Task, container_status, is_terminal};
use super::{AgentState, Faults, Master, update_event};
use crate::mesos::v1::scheduler::{Event, call, event};
use crate::mesos::v1::{self, TaskState, task_status};

impl Master {
    /// KILL: an unknown task is answered as an explicit reconciliation of it
    /// (capture e); a KILL naming another agent is ignored; a task still in
    /// STAGING is killed by the agent; a running one by its executor (with
    /// TASK_KILLING first for TASK_KILLING_STATE frameworks).
    pub fn kill(&mut self, framework_id: &str, kill: &call::Kill) {
        let key = (framework_id.to_string(), kill.task_id.value.clone());
        let Some(task) = self.tasks.get(&key) else {
            let request = call::reconcile::Task {
                task_id: kill.task_id.clone(),
                agent_id: kill.agent_id.clone(),
            };
            self.reconcile(framework_id, &[request]);
            return;
        };
        if kill
            .agent_id
            .as_ref()
            .is_some_and(|a| a.value != task.agent_id)
            || is_terminal(task.state)
        {
            return;
        }
        if Faults::matches(&self.faults.ignore_kill, &kill.task_id.value) {
            tracing::info!(task_id = %kill.task_id.value, "fault: KILL ignored");
            return;
        }
        let task = task.clone();
        if self.agent_kill_task(framework_id, &task, kill) {
            return;
        }
        let task_id = &kill.task_id.value;
        if task.state == TaskState::TaskStaging && task.pending.is_empty() {
            // slave.cpp killTask for a task not yet delivered to its executor.
            let status = self.agent_status(
                &task,
                TaskState::TaskKilled,
                task_status::Reason::TaskKilledDuringLaunch,
                "Killed before delivery to the executor",
            );
            self.agent_update(framework_id, task_id, status);
            return;
        }
        self.executor_kills(framework_id, &task, false);
    }

    /// A simulated executor kills its running task (capture e): TASK_KILLING
    /// for TASK_KILLING_STATE frameworks, then TASK_KILLED as the command
    /// executor words it; `unhealthy` (killed by its health check) adds
    /// `healthy = false` to the TASK_KILLED (`src/launcher/executor.cpp`
    /// kill and reaped).
    pub(crate) fn executor_kills(&mut self, framework_id: &str, task: &Task, unhealthy: bool) {
        let task_id = &task.task_id.value;
        let killing_state = self.framework(framework_id).is_some_and(|f| {
            f.has_capability(v1::framework_info::capability::Type::TaskKillingState)
        });
        if killing_state {
            let killing = self.executor_status(task, TaskState::TaskKilling, None);
            self.agent_update(framework_id, task_id, killing);
        }
        let mut killed = self.executor_status(
            task,
            TaskState::TaskKilled,
            Some("Command terminated with signal Terminated"),
        );
        if unhealthy {
            killed.healthy = Some(false);
        }
        self.agent_update(framework_id, task_id, killed);
    }

    /// RECONCILE (`docs/mesos-protocol.md#reconciliation`, capture c). Empty `tasks`: implicit, one
    /// update per live task. Otherwise explicit, one answer per task; tasks
    /// on agents not yet re-registered after a master failover get none.
    pub fn reconcile(&mut self, framework_id: &str, tasks: &[call::reconcile::Task]) {
        let partition_aware = self
            .framework(framework_id)
            .is_some_and(|f| f.partition_aware());
        let mut answers = Vec::new();
        if tasks.is_empty() {
            let mut live: Vec<&Task> = self
                .tasks
                .values()
                .filter(|t| t.framework_id == framework_id)
                .filter(|t| self.agent_state(&t.agent_id) == Some(AgentState::Registered))
                .collect();
            live.sort_by(|a, b| a.task_id.value.cmp(&b.task_id.value));
            answers.extend(live.into_iter().map(latest_state));
        } else {
            let any_recovering = self
                .agents
                .iter()
                .any(|a| a.state == AgentState::Recovering);
            for request in tasks {
                if let Some(answer) =
                    self.reconcile_one(framework_id, request, partition_aware, any_recovering)
                {
                    answers.push(answer);
                }
            }
        }
        tracing::debug!(
            asked = tasks.len(),
            answers = answers.len(),
            "RECONCILE answered"
        );
        for status in answers {
            self.send(framework_id, &update_event(status));
        }
    }

    pub(crate) fn agent_state(&self, agent_id: &str) -> Option<AgentState> {
        self.agent_index(agent_id).map(|i| self.agents[i].state)
    }

    pub(crate) fn reconcile_one(
        &self,
        framework_id: &str,
        request: &call::reconcile::Task,
        partition_aware: bool,
        any_recovering: bool,
    ) -> Option<v1::TaskStatus> {
        use task_status::Reason::Reconciliation;
        let key = (framework_id.to_string(), request.task_id.value.clone());
        let pick = |aware: TaskState| {
            if partition_aware {
                aware
            } else {
                TaskState::TaskLost
            }
        };
        if let Some(task) = self.tasks.get(&key) {
            if self.agent_state(&task.agent_id) == Some(AgentState::Recovering) {
                return None;
            }
            return Some(latest_state(task));
        }
        // An unreachable task is answered by the agent the request names
        // (`Master::_reconcileTasks` in `src/master/master.cpp`, case (4)),
        // not looked up: asked without its agent ID, it is unknown (case
        // (6); capture t at 10.545: TASK_UNKNOWN for a partition-aware
        // framework's unreachable task).
        let agent_id = request.agent_id.as_ref().map(|a| a.value.as_str());
        match agent_id.map(|a| self.agent_state(a)) {
            Some(Some(AgentState::Recovering)) => None,
            Some(Some(AgentState::Registered)) => Some(Self::master_status(
                &request.task_id,
                agent_id,
                pick(TaskState::TaskGone),
                Reconciliation,
                "Reconciliation: Task is unknown to the agent",
            )),
            Some(Some(AgentState::Unreachable { since_nanos })) => {
                let mut status = Self::master_status(
                    &request.task_id,
                    agent_id,
                    pick(TaskState::TaskUnreachable),
                    Reconciliation,
                    "Reconciliation: Task is unreachable",
                );
                status.unreachable_time = Some(v1::TimeInfo {
                    nanoseconds: since_nanos,
                });
                Some(status)
            }
            // master.cpp reconcile, case (5): the agent was marked gone.
            Some(Some(AgentState::Gone)) => Some(Self::master_status(
                &request.task_id,
                agent_id,
                pick(TaskState::TaskGoneByOperator),
                Reconciliation,
                "Reconciliation: Task is gone",
            )),
            None if any_recovering => None,
            _ => Some(Self::master_status(
                &request.task_id,
                agent_id,
                pick(TaskState::TaskUnknown),
                Reconciliation,
                "Reconciliation: Task is unknown",
            )),
        }
    }

    /// MESSAGE: delivered to a running executor of a registered agent, dropped
    /// otherwise (`docs/mesos-protocol.md#framework-messages`). The command executor
    /// ignores messages; a
    /// custom executor receiving `kamikaze` exits with status 1.
    pub fn message(&mut self, framework_id: &str, message: &call::Message) {
        let Some(index) = self.agent_index(&message.agent_id.value) else {
            return;
        };
        if self.agents[index].state != AgentState::Registered {
            return;
        }
        if self.agent_framework_message(framework_id, index, message) {
            return;
        }
        let key = (framework_id.to_string(), message.executor_id.value.clone());
        let Some(executor) = self.agents[index].executors.get_mut(&key) else {
            return;
        };
        if executor.info.is_none() {
            return;
        }
        if message.data == KAMIKAZE {
            tracing::info!(executor_id = %message.executor_id.value, "executor received kamikaze; exiting");
            // A process exiting with code 1: raw wait status 256 (capture executor/).
            self.executor_exits(framework_id, index, &message.executor_id.value, 256);
        } else {
            executor.messages.push(message.data.clone());
        }
    }

    /// An executor process ends: FAILURE{agent, executor, status}, then for
    /// each of its unfinished tasks TASK_FAILED / SOURCE_AGENT /
    /// REASON_EXECUTOR_TERMINATED "Executor terminated" with a uuid
    /// (slave.cpp executorTerminated; capture executor/).
    pub fn executor_exits(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        executor_id: &str,
        wait_status: i32,
    ) {
        self.executor_terminated(
            framework_id,
            agent_index,
            executor_id,
            Some(wait_status),
            TaskState::TaskFailed,
            task_status::Reason::ExecutorTerminated,
            "Executor terminated",
        );
    }

    /// [`Master::executor_exits`] with the container's termination: `state`,
    /// `reason` and `message` of the tasks' updates (registration timeout,
    /// launch failure, …), and no `status` in FAILURE when the process never
    /// ran (slave.cpp sendExecutorTerminatedStatusUpdate).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn executor_terminated(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        executor_id: &str,
        wait_status: Option<i32>,
        state: TaskState,
        reason: task_status::Reason,
        message: &str,
    ) {
        let key = (framework_id.to_string(), executor_id.to_string());
        let Some(executor) = self.agents[agent_index].executors.remove(&key) else {
            return;
        };
        let agent_id = self.agents[agent_index].id.clone();
        self.agents[agent_index].used.subtract(&executor.resources);
        if executor.info.is_some() {
            let failure = Event {
                r#type: Some(event::Type::Failure as i32),
                failure: Some(event::Failure {
                    agent_id: Some(v1::AgentId { value: agent_id }),
                    executor_id: Some(v1::ExecutorId {
                        value: executor_id.to_string(),
                    }),
                    status: wait_status,
                }),
                ..Default::default()
            };
            self.send(framework_id, &failure);
        }
        for task_id in executor.tasks {
            let key = (framework_id.to_string(), task_id.clone());
            let Some(task) = self.tasks.get(&key) else {
                continue;
            };
            // A terminal update the agent already holds (e.g. the executor's
            // own, sent before it exited) wins: slave.cpp executorTerminated
            // transitions only tasks whose state is not terminal.
            let last_queued = task.pending.back().map(|s| s.state()).unwrap_or(task.state);
            if is_terminal(last_queued) {
                continue;
            }
            let status = self.agent_status(task, state, reason, message);
            self.agent_update(framework_id, &task_id, status);
        }
    }

    /// SHUTDOWN of an executor: its tasks are killed (TASK_KILLED from the
    /// executor), then it exits with status 0 (capture executor/, exec-b).
    pub fn shutdown_executor(&mut self, framework_id: &str, shutdown: &call::Shutdown) {
        let Some(index) = self.agent_index(&shutdown.agent_id.value) else {
            return;
        };
        if self.agents[index].state != AgentState::Registered {
            return;
        }
        if self.agent_shutdown_executor(framework_id, index, &shutdown.executor_id.value) {
            return;
        }
        let key = (framework_id.to_string(), shutdown.executor_id.value.clone());
        let Some(executor) = self.agents[index].executors.get(&key) else {
            return;
        };
        let tasks = executor.tasks.clone();
        for task_id in tasks {
            let task_key = (framework_id.to_string(), task_id.clone());
            let Some(task) = self.tasks.get(&task_key) else {
                continue;
            };
            if is_terminal(task.pending.back().map(|s| s.state()).unwrap_or(task.state)) {
                continue;
            }
            let status =
                self.executor_status(task, TaskState::TaskKilled, Some("Executor shutdown"));
            self.agent_update(framework_id, &task_id, status);
        }
        self.executor_exits(framework_id, index, &shutdown.executor_id.value, 0);
    }
}

/// A reconciliation answer for a task the master knows: its latest state,
/// SOURCE_MASTER, REASON_RECONCILIATION, no uuid (capture c).
fn latest_state(task: &Task) -> v1::TaskStatus {
    let mut status = Master::master_status(
        &task.task_id,
        Some(&task.agent_id),
        task.state,
        task_status::Reason::Reconciliation,
        "Reconciliation: Latest task state",
    );
    if task.custom_executor {
        status.executor_id = Some(v1::ExecutorId {
            value: task.executor_id.clone(),
        });
    }
    if task.state != TaskState::TaskStaging {
        status.container_status = Some(container_status(task));
    }
    status
}
