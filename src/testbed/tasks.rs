//! Tasks on simulated agents: LAUNCH validation, the executors' status
//! updates, the agents' status-update streams (one update in flight per task,
//! retried with backoff until acknowledged), KILL, RECONCILE, MESSAGE,
//! SHUTDOWN, executor exits (`kamikaze`) and agents becoming unreachable.
//!
//! Sources: `src/master/validation.cpp` (task validation texts),
//! `src/slave/task_status_update_manager.cpp` (per-task stream, retries
//! 10 s … 10 min), master.cpp (`accept`, `_accept`, `kill`, `reconcile`,
//! `acknowledge`, `markUnreachable`), mesos-notes §3–§5, §8 and captures b, c,
//! e, f, p, q, s and executor/ (mesos-notes §12).

use std::collections::VecDeque;
use std::time::Duration;

use super::allocator::refuse_duration;
use super::master::{
    AgentState, Executor, Faults, Master, Timer, now_nanos, now_secs, push_bounded, update_event,
};
use crate::mesos::resources::Resources;
use crate::mesos::v1::scheduler::{Event, call, event};
use crate::mesos::v1::{self, TaskState, offer, task_status};

/// How many status updates of a task the master keeps for `/master/state`.
const MAX_STATUSES: usize = 32;

/// Framework message that makes one of our executors exit.
pub const KAMIKAZE: &[u8] = b"kamikaze";

/// A task the master knows.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub framework_id: String,
    pub info: v1::TaskInfo,
    pub agent_id: String,
    pub executor_id: String,
    /// Runs under a custom executor (`TaskInfo.executor`), not the command executor.
    pub custom_executor: bool,
    /// Latest state the master has seen (forwarded by the agent).
    pub state: TaskState,
    /// Latest status forwarded, for reconciliation answers.
    pub last_status: Option<v1::TaskStatus>,
    /// Recent statuses, oldest first.
    pub statuses: VecDeque<v1::TaskStatus>,
    /// The agent's unacknowledged updates; the front one is in flight.
    pub pending: VecDeque<v1::TaskStatus>,
    /// Current retry interval of the front update.
    pub retry: Duration,
    pub resources: Resources,
    /// Resources already given back to the agent.
    pub released: bool,
    pub container_id: String,
    pub executor_pid: u32,
    /// When the agent became unreachable (nanoseconds), for unreachable tasks.
    pub unreachable_since: Option<i64>,
}

/// Terminal states (`src/common/protobuf_utils.cpp` isTerminalState).
pub fn is_terminal(state: TaskState) -> bool {
    use TaskState::*;
    matches!(
        state,
        TaskFinished
            | TaskFailed
            | TaskKilled
            | TaskLost
            | TaskError
            | TaskDropped
            | TaskGone
            | TaskGoneByOperator
    )
}

fn random_uuid() -> Vec<u8> {
    uuid::Uuid::new_v4().as_bytes().to_vec()
}

fn pseudo_pid() -> u32 {
    10_000 + (rand::random::<u32>() % 50_000)
}

/// Validates a task ID like `common/validation.cpp` validateID.
fn validate_id(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("ID must not be empty".into());
    }
    if id == "." || id == ".." {
        return Some("'.' and '..' are disallowed".into());
    }
    if id.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
        return Some(format!("TaskID '{id}' contains invalid characters"));
    }
    None
}

impl Master {
    fn agent_index(&self, agent_id: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.id == agent_id)
    }

    // ---- building statuses -------------------------------------------------

    fn executor_status(
        &self,
        task: &Task,
        state: TaskState,
        message: Option<&str>,
    ) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: task.info.task_id.clone(),
            state: state as i32,
            message: message.map(str::to_string),
            source: Some(task_status::Source::Executor as i32),
            agent_id: Some(v1::AgentId {
                value: task.agent_id.clone(),
            }),
            executor_id: Some(v1::ExecutorId {
                value: task.executor_id.clone(),
            }),
            timestamp: Some(now_secs()),
            uuid: Some(random_uuid()),
            container_status: Some(container_status(task)),
            ..Default::default()
        }
    }

    fn agent_status(
        &self,
        task: &Task,
        state: TaskState,
        reason: task_status::Reason,
        message: &str,
    ) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: task.info.task_id.clone(),
            state: state as i32,
            message: Some(message.to_string()),
            source: Some(task_status::Source::Agent as i32),
            reason: Some(reason as i32),
            agent_id: Some(v1::AgentId {
                value: task.agent_id.clone(),
            }),
            executor_id: Some(v1::ExecutorId {
                value: task.executor_id.clone(),
            }),
            timestamp: Some(now_secs()),
            uuid: Some(random_uuid()),
            ..Default::default()
        }
    }

    /// A master-generated status: SOURCE_MASTER and never a uuid (mesos-notes §4).
    fn master_status(
        task_id: &v1::TaskId,
        agent_id: Option<&str>,
        state: TaskState,
        reason: task_status::Reason,
        message: &str,
    ) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: task_id.clone(),
            state: state as i32,
            message: Some(message.to_string()),
            source: Some(task_status::Source::Master as i32),
            reason: Some(reason as i32),
            agent_id: agent_id.map(|a| v1::AgentId {
                value: a.to_string(),
            }),
            timestamp: Some(now_secs()),
            ..Default::default()
        }
    }

    // ---- LAUNCH ------------------------------------------------------------

    /// ACCEPT: takes the offers, then runs LAUNCH operations; other operation
    /// types are ignored. Unused offered resources are filtered for
    /// `filters.refuse_seconds` (default 5 s), as the allocator does.
    pub fn accept(&mut self, framework_id: &str, accept: call::Accept) {
        let partition_aware = self
            .framework(framework_id)
            .is_some_and(|f| f.partition_aware());
        match self.take_offers(framework_id, &accept.offer_ids) {
            Err(error) => {
                // master.cpp accept: every task of the call is lost (dropped for
                // PARTITION_AWARE frameworks), before the 202 (capture p).
                let state = if partition_aware {
                    TaskState::TaskDropped
                } else {
                    TaskState::TaskLost
                };
                let message = format!("Task launched with invalid offers: {error}");
                for task in launched_tasks(&accept.operations) {
                    let status = Self::master_status(
                        &task.task_id,
                        Some(&task.agent_id.value),
                        state,
                        task_status::Reason::InvalidOffers,
                        &message,
                    );
                    self.send(framework_id, &update_event(status));
                }
            }
            Ok((agent_index, mut remaining)) => {
                for operation in accept.operations {
                    match operation.r#type() {
                        offer::operation::Type::Launch => {
                            for task in operation.launch.map(|l| l.task_infos).unwrap_or_default() {
                                self.launch(framework_id, agent_index, task, &mut remaining);
                            }
                        }
                        offer::operation::Type::LaunchGroup => {
                            let tasks = operation
                                .launch_group
                                .map(|g| g.task_group.tasks)
                                .unwrap_or_default();
                            for task in tasks {
                                let status = Self::master_status(
                                    &task.task_id,
                                    Some(&task.agent_id.value),
                                    TaskState::TaskError,
                                    task_status::Reason::TaskGroupInvalid,
                                    "LAUNCH_GROUP is not simulated by mesos-testbed",
                                );
                                self.send(framework_id, &update_event(status));
                            }
                        }
                        other => {
                            tracing::warn!(?other, "testbed ignores offer operation");
                        }
                    }
                }
                let agent_id = self.agents[agent_index].id.clone();
                let refuse = refuse_duration(accept.filters.as_ref());
                self.add_filter(framework_id, &agent_id, remaining, refuse);
            }
        }
    }

    /// Validates one task against the offered resources left
    /// (`validation.cpp` task::validate) and starts it, or answers TASK_ERROR.
    fn launch(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        mut info: v1::TaskInfo,
        remaining: &mut Resources,
    ) {
        let total = match self.validate_task(framework_id, agent_index, &mut info, remaining) {
            Ok(total) => total,
            Err(message) => {
                let status = Self::master_status(
                    &info.task_id,
                    Some(&info.agent_id.value),
                    TaskState::TaskError,
                    task_status::Reason::TaskInvalid,
                    &message,
                );
                self.send(framework_id, &update_event(status));
                return;
            }
        };
        remaining.subtract(&total);
        let task_id = info.task_id.value.clone();
        let custom = info.executor.is_some();
        let executor_id = info
            .executor
            .as_ref()
            .map(|e| e.executor_id.value.clone())
            .unwrap_or_else(|| task_id.clone());
        let agent = &mut self.agents[agent_index];
        agent.used.add(&total);
        let executor = agent
            .executors
            .entry((framework_id.to_string(), executor_id.clone()))
            .or_insert_with(|| Executor {
                info: info.executor.clone(),
                resources: info
                    .executor
                    .as_ref()
                    .map(|e| Resources::from_protos(&e.resources))
                    .unwrap_or_default(),
                tasks: Vec::new(),
                container_id: uuid::Uuid::new_v4().to_string(),
                pid: pseudo_pid(),
                messages: Vec::new(),
            });
        executor.tasks.push(task_id.clone());
        let task = Task {
            framework_id: framework_id.to_string(),
            agent_id: agent.id.clone(),
            executor_id,
            custom_executor: custom,
            state: TaskState::TaskStaging,
            last_status: None,
            statuses: VecDeque::new(),
            pending: VecDeque::new(),
            retry: self.cfg.status_update_retry_min,
            resources: Resources::from_protos(&info.resources),
            released: false,
            container_id: executor.container_id.clone(),
            executor_pid: executor.pid,
            unreachable_since: None,
            info,
        };
        self.tasks
            .insert((framework_id.to_string(), task_id.clone()), task);
        if Faults::matches(&self.faults.hold_staging, &task_id) {
            tracing::info!(%task_id, "fault: task held in TASK_STAGING");
            return;
        }
        self.schedule(
            self.cfg.launch_delay,
            Timer::AgentLaunch {
                framework_id: framework_id.to_string(),
                task_id,
            },
        );
    }

    /// Returns the resources the task and a new executor take.
    fn validate_task(
        &self,
        framework_id: &str,
        agent_index: usize,
        info: &mut v1::TaskInfo,
        remaining: &Resources,
    ) -> Result<Resources, String> {
        let task_id = info.task_id.value.clone();
        if let Some(error) = validate_id(&task_id) {
            return Err(error);
        }
        let key = (framework_id.to_string(), task_id.clone());
        if self.tasks.contains_key(&key) || self.unreachable_tasks.contains_key(&key) {
            return Err(format!("Task has duplicate ID: {task_id}"));
        }
        let agent = &self.agents[agent_index];
        if info.agent_id.value != agent.id {
            return Err(format!(
                "Task uses invalid agent {} while agent {} is expected",
                info.agent_id.value, agent.id
            ));
        }
        if info.resources.is_empty() {
            return Err("Task uses no resources".into());
        }
        if info.executor.is_some() == info.command.is_some() {
            return Err(
                "Task should have at least one (but not both) of CommandInfo or ExecutorInfo present".into(),
            );
        }
        let mut total = Resources::from_protos(&info.resources);
        if let Some(executor) = info.executor.as_mut() {
            if executor.command.is_none() {
                return Err("'ExecutorInfo.command' must be set".into());
            }
            // The master fills in ExecutorInfo.framework_id (validation.cpp).
            executor
                .framework_id
                .get_or_insert_with(|| v1::FrameworkId {
                    value: framework_id.to_string(),
                });
            match agent
                .executors
                .get(&(framework_id.to_string(), executor.executor_id.value.clone()))
            {
                Some(existing) if existing.info.as_ref() != Some(executor) => {
                    return Err(
                        "ExecutorInfo is not compatible with existing ExecutorInfo with same ExecutorID".into(),
                    );
                }
                Some(_) => {}
                None => total.add(&Resources::from_protos(&executor.resources)),
            }
        }
        if !remaining.contains(&total) {
            return Err(format!(
                "Total resources {total} required by task and its executor is more than available {remaining}"
            ));
        }
        Ok(total)
    }

    /// The simulated executor starts the task: TASK_STARTING, then
    /// TASK_RUNNING (queued behind the unacknowledged STARTING, capture b).
    pub fn executor_starts_task(&mut self, framework_id: &str, task_id: &str) {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get(&key) else {
            return;
        };
        if task.state != TaskState::TaskStaging || !task.pending.is_empty() {
            return;
        }
        let agent_ok = self
            .agent_index(&task.agent_id)
            .is_some_and(|i| self.agents[i].state == AgentState::Registered);
        if !agent_ok {
            return;
        }
        let starting = self.executor_status(task, TaskState::TaskStarting, None);
        let running = self.executor_status(task, TaskState::TaskRunning, None);
        self.agent_update(framework_id, task_id, starting);
        self.agent_update(framework_id, task_id, running);
    }

    // ---- status update streams ---------------------------------------------

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
    fn forward_head(&mut self, framework_id: &str, task_id: &str) {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get_mut(&key) else {
            return;
        };
        let Some(head) = task.pending.front().cloned() else {
            return;
        };
        task.state = head.state();
        task.last_status = Some(head.clone());
        push_bounded(&mut task.statuses, head.clone(), MAX_STATUSES);
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
            executor.tasks.retain(|t| *t != task.info.task_id.value);
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

    // ---- KILL, RECONCILE, MESSAGE, SHUTDOWN ---------------------------------

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
        let killing_state = self.framework(framework_id).is_some_and(|f| {
            f.has_capability(v1::framework_info::capability::Type::TaskKillingState)
        });
        if killing_state {
            let killing = self.executor_status(&task, TaskState::TaskKilling, None);
            self.agent_update(framework_id, task_id, killing);
        }
        let killed = self.executor_status(
            &task,
            TaskState::TaskKilled,
            Some("Command terminated with signal Terminated"),
        );
        self.agent_update(framework_id, task_id, killed);
    }

    /// RECONCILE (mesos-notes §5, capture c). Empty `tasks`: implicit, one
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
            live.sort_by(|a, b| a.info.task_id.value.cmp(&b.info.task_id.value));
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
        for status in answers {
            self.send(framework_id, &update_event(status));
        }
    }

    fn agent_state(&self, agent_id: &str) -> Option<AgentState> {
        self.agent_index(agent_id).map(|i| self.agents[i].state)
    }

    fn reconcile_one(
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
        if let Some(task) = self.unreachable_tasks.get(&key) {
            let mut status = Self::master_status(
                &request.task_id,
                Some(&task.agent_id),
                pick(TaskState::TaskUnreachable),
                Reconciliation,
                "Reconciliation: Task is unreachable",
            );
            status.unreachable_time = task
                .unreachable_since
                .map(|n| v1::TimeInfo { nanoseconds: n });
            return Some(status);
        }
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
    /// otherwise (mesos-notes §8). The command executor ignores messages; a
    /// custom executor receiving `kamikaze` exits with status 1.
    pub fn message(&mut self, framework_id: &str, message: &call::Message) {
        let Some(index) = self.agent_index(&message.agent_id.value) else {
            return;
        };
        if self.agents[index].state != AgentState::Registered {
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
                    status: Some(wait_status),
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
            let last_queued = task.pending.back().map(|s| s.state()).unwrap_or(task.state);
            if is_terminal(last_queued) {
                continue;
            }
            let status = self.agent_status(
                task,
                TaskState::TaskFailed,
                task_status::Reason::ExecutorTerminated,
                "Executor terminated",
            );
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

    // ---- agents becoming unreachable and coming back -------------------------

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
        let keys: Vec<_> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.agent_id == agent_id)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(mut task) = self.tasks.remove(&key) else {
                continue;
            };
            task.unreachable_since = Some(since);
            let partition_aware = self.framework(&key.0).is_some_and(|f| f.partition_aware());
            let mut status = Self::master_status(
                &task.info.task_id,
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
        true
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
        let keys: Vec<_> = self
            .unreachable_tasks
            .iter()
            .filter(|(_, t)| t.agent_id == agent_id)
            .map(|(k, _)| k.clone())
            .collect();
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
                &task.info.task_id,
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
        true
    }
}

/// The tasks of every LAUNCH operation of an ACCEPT.
fn launched_tasks(operations: &[offer::Operation]) -> Vec<v1::TaskInfo> {
    operations
        .iter()
        .filter_map(|op| op.launch.as_ref())
        .flat_map(|l| l.task_infos.iter().cloned())
        .collect()
}

fn container_status(task: &Task) -> v1::ContainerStatus {
    v1::ContainerStatus {
        container_id: Some(v1::ContainerId {
            value: task.container_id.clone(),
            parent: None,
        }),
        network_infos: vec![v1::NetworkInfo {
            ip_addresses: vec![v1::network_info::IpAddress {
                protocol: Some(v1::network_info::Protocol::IPv4 as i32),
                ip_address: Some("127.0.0.1".into()),
            }],
            ..Default::default()
        }],
        executor_pid: Some(task.executor_pid),
    }
}

/// A reconciliation answer for a task the master knows: its latest state,
/// SOURCE_MASTER, REASON_RECONCILIATION, no uuid (capture c).
fn latest_state(task: &Task) -> v1::TaskStatus {
    let mut status = Master::master_status(
        &task.info.task_id,
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
