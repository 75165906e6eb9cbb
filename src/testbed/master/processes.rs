//! Process mode's records in the master's state: the executor processes the
//! agents run, the agents' executor endpoints and process mode's timers. The
//! agents' side acts on them (`testbed::agents`); the master keeps them so
//! one lock covers every state change.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::stream::ExecutorStream;
use crate::mesos::v1::{self, TaskState, task_status};

/// Finished executors remembered for `Master::executor_views` (`testbed::agents::executors`).
pub(crate) const MAX_FINISHED: usize = 100;

/// Where an executor process stands with its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    /// Started, not subscribed yet: LAUNCHes are queued.
    Registering,
    /// Subscribed; events flow.
    Subscribed,
    /// Its subscription broke (agent restart); it may re-subscribe.
    Disconnected,
    /// Told to shut down; destroyed after its grace period.
    Terminating,
    /// The process has exited.
    Exited,
}

/// What the scheduler is told about the tasks of an executor the agent
/// destroyed on purpose.
#[derive(Debug, Clone)]
pub(crate) struct Termination {
    pub state: TaskState,
    pub reason: task_status::Reason,
    pub message: String,
}

/// A real executor process.
#[derive(Debug)]
pub(crate) struct ExecutorProcess {
    pub agent_index: usize,
    pub framework_id: String,
    pub executor_id: String,
    pub container_id: String,
    pub pid: u32,
    pub sandbox: PathBuf,
    pub state: ProcessState,
    pub stream: Option<ExecutorStream>,
    pub next_token: u64,
    /// Tasks launched before the executor subscribed.
    pub queued: Vec<v1::TaskInfo>,
    /// UUIDs of the updates received from it (the status update manager
    /// ignores duplicates), most recent last.
    pub received: VecDeque<Vec<u8>>,
    pub info: v1::ExecutorInfo,
    pub framework_info: v1::FrameworkInfo,
    pub termination: Option<Termination>,
}

/// Process mode: a command-executor task running for real
/// (`testbed::agents::command_executor`). The command executor and its
/// one task are a single process here: the task's command, in its own
/// session, in the executor's sandbox.
#[derive(Debug)]
pub(crate) struct CommandProcess {
    pub agent_index: usize,
    pub framework_id: String,
    /// The task's ID, also its executor's ID.
    pub task_id: String,
    pub container_id: String,
    /// Process ID of the command (also its session ID).
    pub pid: u32,
    pub sandbox: PathBuf,
    /// `TaskInfo.kill_policy.grace_period`, if set.
    pub grace: Option<std::time::Duration>,
    /// When the first KILL sent SIGTERM (`killGracePeriodStart`).
    pub kill_started: Option<std::time::Instant>,
    /// When SIGKILL follows unless it exited (`killGracePeriodTimer`).
    pub escalate_at: Option<std::time::Instant>,
}

/// Process-mode state of the master.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    /// Live executor processes by container ID.
    pub live: HashMap<String, ExecutorProcess>,
    /// Live command-executor tasks by container ID.
    pub commands: HashMap<String, CommandProcess>,
    /// Per agent: its executor endpoint.
    pub endpoints: Vec<AgentEndpoint>,
    /// Exited executors, for views and tests.
    pub finished: VecDeque<ExecutorView>,
    /// Root of the sandboxes.
    pub work_dir: PathBuf,
    /// The work dir was created by the testbed and is removed at shutdown.
    pub remove_work_dir: bool,
    /// Cancelled when the testbed stops; endpoints hang off it.
    pub stop: CancellationToken,
}

/// One agent's executor endpoint.
#[derive(Debug)]
pub(crate) struct AgentEndpoint {
    pub addr: std::net::SocketAddr,
    pub up: bool,
    /// Restarted and waiting for checkpointed executors to re-subscribe.
    pub recovering: bool,
    pub stop: CancellationToken,
    /// Bumped by each restart, so stale timers are ignored.
    pub epoch: u64,
}

/// Timers of process mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExecutorTimer {
    /// The executor must have subscribed by now.
    Registration { container_id: String },
    /// A killed command's grace period is over: SIGKILL if it still runs.
    KillEscalation { container_id: String },
    /// The executor had its shutdown grace period.
    ShutdownGrace { container_id: String },
    /// A restarted agent comes back up.
    AgentUp { agent_index: usize, epoch: u64 },
    /// A restarted agent stops waiting for executors to re-subscribe.
    Reregistration { agent_index: usize, epoch: u64 },
}

/// An executor process as tests and `GET /testbed/executors` see it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExecutorView {
    /// Framework ID.
    pub framework_id: String,
    /// Executor ID.
    pub executor_id: String,
    /// Agent ID.
    pub agent_id: String,
    /// Container ID (the `runs/` directory name).
    pub container_id: String,
    /// Process ID (also its session ID).
    pub pid: u32,
    /// Sandbox directory (`MESOS_SANDBOX`).
    pub sandbox: PathBuf,
    /// Where it stands.
    pub state: ProcessState,
    /// Raw wait status once exited (`256` = exit code 1).
    pub wait_status: Option<i32>,
}

impl ExecutorProcess {
    pub(crate) fn view(&self, agent_id: &str, wait_status: Option<i32>) -> ExecutorView {
        ExecutorView {
            framework_id: self.framework_id.clone(),
            executor_id: self.executor_id.clone(),
            agent_id: agent_id.to_string(),
            container_id: self.container_id.clone(),
            pid: self.pid,
            sandbox: self.sandbox.clone(),
            state: self.state,
            wait_status,
        }
    }
}

impl CommandProcess {
    pub(crate) fn view(&self, agent_id: &str, wait_status: Option<i32>) -> ExecutorView {
        ExecutorView {
            framework_id: self.framework_id.clone(),
            executor_id: self.task_id.clone(),
            agent_id: agent_id.to_string(),
            container_id: self.container_id.clone(),
            pid: self.pid,
            sandbox: self.sandbox.clone(),
            state: match (wait_status, self.kill_started) {
                (Some(_), _) => ProcessState::Exited,
                (None, Some(_)) => ProcessState::Terminating,
                (None, None) => ProcessState::Subscribed,
            },
            wait_status,
        }
    }
}
