//! The `agents/` room: what the simulated agents do —
//! - `containerizers`: which containers an agent can launch;
//! - `health`: simulated executors' health checks;
//! - process mode: `executors` (real `mesos-appliance-executor` processes
//!   and their sandboxes), `command_executor` (command-executor tasks run
//!   for real), `executor_api` and `executor_events` (the
//!   agent's `POST /api/v1/executor` and the events it carries),
//!   `agent_restart` (an agent that dies and comes back);
//! - `sandboxes`: each agent's `/state` and files API.
//!
//! The room extends the master's state (`impl Master` blocks) and imports
//! `master`, `config` and `http`. The master's rules reach it only through
//! [`AgentSide`], implemented below: the methods behind it are
//! `pub(super)`, so the compiler keeps `master/` from calling them directly.

pub(super) mod agent_restart;
pub(super) mod command_executor;
pub(super) mod containerizers;
pub(super) mod executor_api;
pub(super) mod executor_events;
pub(super) mod executors;
pub(super) mod health;
pub(super) mod sandboxes;

use crate::mesos::v1;
use crate::mesos::v1::scheduler::call;
use crate::testbed::master::Master;
use crate::testbed::master::agent_side::{AgentSide, LaunchFailure};
use crate::testbed::master::processes::ExecutorTimer;
use crate::testbed::master::tasks::Task;

/// The master's messages to its agents, and the agents' timers, as this
/// room carries them out.
impl AgentSide for Master {
    fn agent_run_task(&mut self, framework_id: &str, agent_index: usize, task_id: &str) -> bool {
        self.process_launch(framework_id, agent_index, task_id)
    }

    fn agent_start_command(&mut self, framework_id: &str, task_id: &str) -> bool {
        self.start_command(framework_id, task_id)
    }

    fn agent_task_released(&mut self, framework_id: &str, task_id: &str) {
        self.command_task_released(framework_id, task_id);
    }

    fn agent_kill_task(&mut self, framework_id: &str, task: &Task, kill: &call::Kill) -> bool {
        if !task.custom_executor {
            return self.kill_command(framework_id, task, kill);
        }
        self.process_kill(framework_id, task, kill)
    }

    fn agent_framework_message(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        message: &call::Message,
    ) -> bool {
        self.process_message(framework_id, agent_index, message)
    }

    fn agent_shutdown_executor(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        executor_id: &str,
    ) -> bool {
        self.process_shutdown(framework_id, agent_index, executor_id)
    }

    fn agent_shutdown_framework(&mut self, framework_id: &str) {
        self.process_framework_removed(framework_id);
    }

    fn agent_shutdown(&mut self, agent_index: usize) {
        self.shut_down_agent(agent_index);
    }

    fn agent_timer(&mut self, timer: ExecutorTimer) {
        self.fire_executor_timer(timer);
    }

    fn agent_start_health_checks(&mut self, framework_id: &str, task_id: &str) {
        self.start_simulated_checks(framework_id, task_id);
    }

    fn agent_health_check(&mut self, framework_id: &str, task_id: &str) {
        self.simulated_check(framework_id, task_id);
    }

    fn agent_launch_failure(
        &self,
        agent_index: usize,
        container: Option<&v1::ContainerInfo>,
    ) -> Option<LaunchFailure> {
        let agent = self.agents.get(agent_index)?;
        containerizers::launch_failure(&agent.spec, container)
    }
}
