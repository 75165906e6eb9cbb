//! The task model shared by the testbed's task handling: what the master
//! knows of a task, terminal states, and how executors, agents and the master
//! word the status updates they generate (captures b, c, q and executor/ in
//! `docs/mesos-protocol.md#captures-from-a-real-master`). The behaviour lives next door: [`super::launch`]
//! (ACCEPT and LAUNCH), [`super::updates`] (status update streams and
//! acknowledgements), [`super::operations`] (KILL, RECONCILE, MESSAGE,
//! SHUTDOWN, executor exits) and [`super::unreachable`] (unreachable agents).

use crate::executor::health::{HealthPolicy, HealthState};
use std::collections::VecDeque;

use prost::Message;

use super::{Master, now_secs};
use crate::mesos::resources::Resources;
use crate::mesos::v1::{self, TaskState, task_status};

/// Framework message that makes one of our executors exit.
pub const KAMIKAZE: &[u8] = b"kamikaze";

/// A task the master knows.
///
/// Its `TaskInfo` is kept encoded (about a hundred bytes for a plain
/// command task, where the decoded message takes over 1.5 KB), with the two
/// fields read often beside it: a master of tens of thousands of tasks
/// reads the whole info only to hand it to an executor.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub framework_id: String,
    /// `TaskInfo.task_id`.
    pub task_id: v1::TaskId,
    /// `TaskInfo.name`.
    pub name: String,
    /// The `TaskInfo` as launched (after the master's validation filled it in), encoded.
    info: Box<[u8]>,
    pub agent_id: String,
    pub executor_id: String,
    /// Runs under a custom executor (`TaskInfo.executor`), not the command executor.
    pub custom_executor: bool,
    /// Latest state the master has seen (forwarded by the agent).
    pub state: TaskState,
    /// `TaskStatus.healthy` of the latest status the master has seen.
    pub healthy: Option<bool>,
    /// Recent statuses, oldest first.
    pub statuses: VecDeque<StatusRecord>,
    /// The agent's unacknowledged updates; the front one is in flight.
    /// Emptied (and its buffer freed) once all are acknowledged.
    pub pending: VecDeque<v1::TaskStatus>,
    /// How many times the front update was re-sent: its next retry comes
    /// after [`retry_interval`](super::updates::retry_interval) of this count.
    pub retries: u32,
    /// The state of the latest update the scheduler acknowledged (the
    /// one in flight when its ACKNOWLEDGE came): inspection only, for
    /// tests that check an acknowledgement against what the scheduler
    /// stored. A Mesos agent forgets an update once it is acknowledged
    /// (`src/status_update_manager/status_update_manager_process.hpp`);
    /// this is the testbed's own record, not Mesos state.
    pub acknowledged: Option<TaskState>,
    pub resources: Resources,
    /// Resources already given back to the agent.
    pub released: bool,
    pub container_id: String,
    pub executor_pid: u32,
    /// When the agent became unreachable (nanoseconds), for unreachable tasks.
    pub unreachable_since: Option<i64>,
    /// The simulated executor's health checker (`crate::testbed::agents::health`).
    pub checker: Option<Checker>,
}

/// A status the master forwarded, as `/master/state` lists it
/// (`src/common/http.cpp` writes each of a task's statuses with its state,
/// timestamp and container status). A real master keeps the whole
/// `TaskStatus`; the testbed keeps what it shows, a few bytes per update.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StatusRecord {
    pub state: TaskState,
    /// `TaskStatus.timestamp`, seconds since the UNIX epoch.
    pub timestamp: f64,
    /// It carried a container status: the task's own (its executor's
    /// container), which [`container_status`] rebuilds.
    pub container: bool,
    /// `TaskStatus.healthy`.
    pub healthy: Option<bool>,
}

impl StatusRecord {
    pub fn of(status: &v1::TaskStatus) -> Self {
        StatusRecord {
            state: status.state(),
            timestamp: status.timestamp.unwrap_or(0.0),
            container: status.container_status.is_some(),
            healthy: status.healthy,
        }
    }
}

pub(crate) use crate::mesos::is_terminal;

pub(crate) fn random_uuid() -> Vec<u8> {
    uuid::Uuid::new_v4().as_bytes().to_vec()
}

pub(crate) fn pseudo_pid() -> u32 {
    10_000 + (rand::random::<u32>() % 50_000)
}

impl Task {
    /// A task of `info` in TASK_STAGING; `resources` are the task's own,
    /// `container_id` and `executor_pid` its executor's.
    pub fn new(
        framework_id: &str,
        info: &v1::TaskInfo,
        agent_id: &str,
        container_id: String,
        executor_pid: u32,
    ) -> Task {
        Task {
            framework_id: framework_id.to_string(),
            task_id: info.task_id.clone(),
            name: info.name.clone(),
            info: info.encode_to_vec().into_boxed_slice(),
            agent_id: agent_id.to_string(),
            executor_id: info
                .executor
                .as_ref()
                .map(|e| e.executor_id.value.clone())
                .unwrap_or_else(|| info.task_id.value.clone()),
            custom_executor: info.executor.is_some(),
            state: TaskState::TaskStaging,
            healthy: None,
            statuses: VecDeque::new(),
            pending: VecDeque::new(),
            retries: 0,
            acknowledged: None,
            resources: Resources::from_protos(&info.resources),
            released: false,
            container_id,
            executor_pid,
            unreachable_since: None,
            checker: None,
        }
    }

    /// The `TaskInfo` as launched.
    pub fn info(&self) -> v1::TaskInfo {
        v1::TaskInfo::decode(&*self.info).expect("encoded by Task::new")
    }
}

impl Master {
    pub(crate) fn agent_index(&self, agent_id: &str) -> Option<usize> {
        self.agent_indexes.get(agent_id).copied()
    }

    // ---- building statuses -------------------------------------------------

    pub(crate) fn executor_status(
        &self,
        task: &Task,
        state: TaskState,
        message: Option<&str>,
    ) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: task.task_id.clone(),
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

    pub(crate) fn agent_status(
        &self,
        task: &Task,
        state: TaskState,
        reason: task_status::Reason,
        message: &str,
    ) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: task.task_id.clone(),
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

    /// A master-generated status: SOURCE_MASTER and never a uuid
    /// (`docs/mesos-protocol.md#master-generated-updates`).
    pub(crate) fn master_status(
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
}

pub(crate) fn container_status(task: &Task) -> v1::ContainerStatus {
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

/// A simulated task's health checker (run by `testbed::agents::health`).
#[derive(Debug, Clone)]
pub(crate) struct Checker {
    pub policy: HealthPolicy,
    pub state: HealthState,
    pub checks: u64,
}
