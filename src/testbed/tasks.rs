//! The task model shared by the testbed's task handling: what the master
//! knows of a task, terminal states, and how executors, agents and the master
//! word the status updates they generate (captures b, c, q and executor/ in
//! `docs/mesos-protocol.md#captures-from-a-real-master`). The behaviour lives next door: [`super::launch`]
//! (ACCEPT and LAUNCH), [`super::updates`] (status update streams and
//! acknowledgements), [`super::operations`] (KILL, RECONCILE, MESSAGE,
//! SHUTDOWN, executor exits) and [`super::agents`] (unreachable agents).

use std::collections::VecDeque;
use std::time::Duration;

use super::master::{Master, now_secs};
use crate::mesos::resources::Resources;
use crate::mesos::v1::{self, TaskState, task_status};

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
    /// The simulated executor's health checker (`super::health`).
    pub checker: Option<super::health::Checker>,
}

pub(crate) use crate::mesos::is_terminal;

pub(crate) fn random_uuid() -> Vec<u8> {
    uuid::Uuid::new_v4().as_bytes().to_vec()
}

pub(crate) fn pseudo_pid() -> u32 {
    10_000 + (rand::random::<u32>() % 50_000)
}

impl Master {
    pub(crate) fn agent_index(&self, agent_id: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.id == agent_id)
    }

    // ---- building statuses -------------------------------------------------

    pub(crate) fn executor_status(
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

    pub(crate) fn agent_status(
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
