//! What the master asks of its agents, as a trait the agents' side
//! (`testbed::agents`) implements for [`Master`](super::Master): the messages a master sends
//! an agent (`RunTaskMessage`, `KillTaskMessage`,
//! `FrameworkToExecutorMessage`, `ShutdownExecutorMessage`,
//! `ShutdownFrameworkMessage`, `ShutdownMessage` in
//! `src/messages/messages.proto`) and the agents' own timers, which run on
//! the master's timer heap. The master's rules call these methods and never
//! the agents' code itself, so `master/` does not depend on `agents/`.

use super::processes::ExecutorTimer;
use super::tasks::Task;
use crate::mesos::v1::scheduler::call;
use crate::mesos::v1::{self, task_status};

/// Why an agent cannot launch a container: the tasks' update.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LaunchFailure {
    pub reason: task_status::Reason,
    pub message: String,
}

/// The agents' side of the master's rules; implemented in `testbed::agents`.
pub(crate) trait AgentSide {
    /// RunTaskMessage in process mode: true when a real executor process
    /// takes the task (otherwise it runs on a simulated executor).
    fn agent_run_task(&mut self, framework_id: &str, agent_index: usize, task_id: &str) -> bool;

    /// Process mode: the command executor starts a command-executor task
    /// as a real process (TASK_STARTING, the process, TASK_RUNNING); true
    /// when it did, false outside process mode or for a custom executor's task.
    fn agent_start_command(&mut self, framework_id: &str, task_id: &str) -> bool;

    /// The task is over at the master (a terminal update went out, or it
    /// was lost or removed): a process still running it is killed.
    fn agent_task_released(&mut self, framework_id: &str, task_id: &str);

    /// KillTaskMessage: true when a real executor process was told.
    fn agent_kill_task(&mut self, framework_id: &str, task: &Task, kill: &call::Kill) -> bool;

    /// FrameworkToExecutorMessage: true when a real executor process got it.
    fn agent_framework_message(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        message: &call::Message,
    ) -> bool;

    /// ShutdownExecutorMessage: true when a real executor process is shut down.
    fn agent_shutdown_executor(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        executor_id: &str,
    ) -> bool;

    /// ShutdownFrameworkMessage: the agents shut the framework's executor
    /// processes down.
    fn agent_shutdown_framework(&mut self, framework_id: &str);

    /// ShutdownMessage (the agent is gone): the agent kills its executors
    /// and stops serving for good.
    fn agent_shutdown(&mut self, agent_index: usize);

    /// Runs one of process mode's timers.
    fn agent_timer(&mut self, timer: ExecutorTimer);

    /// A simulated executor has started a task: its health checks begin.
    fn agent_start_health_checks(&mut self, framework_id: &str, task_id: &str);

    /// A simulated executor's next health check of a task.
    fn agent_health_check(&mut self, framework_id: &str, task_id: &str);

    /// How launching `container` (the executor's, or the task's for the
    /// command executor) fails on agent `agent_index`, if it does.
    fn agent_launch_failure(
        &self,
        agent_index: usize,
        container: Option<&v1::ContainerInfo>,
    ) -> Option<LaunchFailure>;
}
