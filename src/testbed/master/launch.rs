//! ACCEPT with LAUNCH operations: offers are taken, each task is validated
//! against what is left of them in the master's words (`src/master/validation.cpp`
//! task::validate; `docs/mesos-protocol.md#taskinfo-and-commandinfo`, capture p), and valid
//! tasks start on their
//! simulated executor: TASK_STARTING, then TASK_RUNNING (capture b).

use super::agent_side::{AgentSide, LaunchFailure};
use super::allocator::refuse_duration;
use super::tasks::{Task, pseudo_pid};
use super::{AgentState, Executor, Faults, Master, Timer, update_event};
use crate::mesos::resources::Resources;
use crate::mesos::v1::scheduler::call;
use crate::mesos::v1::{self, TaskState, container_info, offer, task_status};

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
    pub(crate) fn launch(
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
        let executor_id = info
            .executor
            .as_ref()
            .map(|e| e.executor_id.value.clone())
            .unwrap_or_else(|| task_id.clone());
        let agent = &mut self.agents[agent_index];
        agent.used.add(&total);
        let executor = agent.executors.get_or_insert_with(
            (framework_id.to_string(), executor_id.clone()),
            || Executor {
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
            },
        );
        executor.tasks.push(task_id.clone());
        let task = Task::new(
            framework_id,
            &info,
            &agent.id,
            executor.container_id.clone(),
            executor.pid,
        );
        self.tasks
            .insert((framework_id.to_string(), task_id.clone()), task);
        if Faults::matches(&self.faults.hold_staging, &task_id) {
            tracing::info!(%task_id, "fault: task held in TASK_STAGING");
            return;
        }
        // A container the agent cannot launch fails after the launch delay
        // (executor_starts_task), in process mode too.
        let launchable = self.launch_failure(framework_id, &task_id).is_none();
        if launchable && self.agent_run_task(framework_id, agent_index, &task_id) {
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
    pub(crate) fn validate_task(
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
        if let Some(check) = &info.health_check {
            crate::executor::health::validate(check)
                .map_err(|e| format!("Task uses invalid health check: {e}"))?;
        }
        if info.resources.is_empty() {
            return Err("Task uses no resources".into());
        }
        if info.executor.is_some() == info.command.is_some() {
            return Err(
                "Task should have at least one (but not both) of CommandInfo or ExecutorInfo present".into(),
            );
        }
        if let Some(container) = &info.container {
            validate_container_info(container)
                .map_err(|e| format!("Task's `ContainerInfo` is invalid: {e}"))?;
        }
        let mut total = Resources::from_protos(&info.resources);
        if let Some(executor) = info.executor.as_mut() {
            if executor.command.is_none() {
                return Err("'ExecutorInfo.command' must be set".into());
            }
            if let Some(container) = &executor.container {
                validate_container_info(container)
                    .map_err(|e| format!("Executor's `ContainerInfo` is invalid: {e}"))?;
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
        let Some(agent_index) = self
            .agent_index(&task.agent_id)
            .filter(|i| self.agents[*i].state == AgentState::Registered)
        else {
            return;
        };
        if let Some(failure) = self.launch_failure(framework_id, task_id) {
            // src/slave/slave.cpp executorLaunched / executorTerminated: the
            // container never ran; a custom executor's exit carries -1.
            let executor_id = task.executor_id.clone();
            tracing::info!(%task_id, message = %failure.message, "agent cannot launch the container");
            self.executor_terminated(
                framework_id,
                agent_index,
                &executor_id,
                Some(-1),
                TaskState::TaskFailed,
                failure.reason,
                &failure.message,
            );
            return;
        }
        // Process mode runs a command-executor task for real
        // (`testbed::agents::command_executor`).
        if self.agent_start_command(framework_id, task_id) {
            self.agent_start_health_checks(framework_id, task_id);
            return;
        }
        let Some(task) = self.tasks.get(&key) else {
            return;
        };
        let starting = self.executor_status(task, TaskState::TaskStarting, None);
        let running = self.executor_status(task, TaskState::TaskRunning, None);
        self.agent_update(framework_id, task_id, starting);
        self.agent_update(framework_id, task_id, running);
        self.agent_start_health_checks(framework_id, task_id);
        self.schedule_simulated_exit(framework_id, task_id);
    }

    /// How launching the task's executor container fails on its agent, if
    /// it does (see `testbed::agents::containerizers`): the executor's container, or
    /// for the command executor the task's.
    pub(crate) fn launch_failure(
        &self,
        framework_id: &str,
        task_id: &str,
    ) -> Option<LaunchFailure> {
        let task = self
            .tasks
            .get(&(framework_id.to_string(), task_id.to_string()))?;
        let agent_index = self.agent_index(&task.agent_id)?;
        let info = task.info();
        let container = match &info.executor {
            Some(executor) => executor.container.as_ref(),
            None => info.container.as_ref(),
        };
        self.agent_launch_failure(agent_index, container)
    }
}

/// The master's checks of a `ContainerInfo` (`src/common/validation.cpp`
/// validateContainerInfo and validateVolume), in Mesos' words.
///
/// # Errors
/// The first problem.
fn validate_container_info(container: &v1::ContainerInfo) -> Result<(), String> {
    for volume in &container.volumes {
        let set = usize::from(volume.host_path.is_some()) + usize::from(volume.image.is_some());
        if set != 1 {
            return Err("Invalid volume: Only one of them should be set: \
                 'host_path', 'image' and 'source'"
                .into());
        }
    }
    if container.r#type() == container_info::Type::Docker {
        let Some(docker) = &container.docker else {
            return Err("DockerInfo 'docker' is not set for DOCKER typed ContainerInfo".into());
        };
        if docker.parameters.iter().any(|p| p.key == "name") {
            return Err("Parameter in DockerInfo must not be 'name'".into());
        }
    }
    Ok(())
}

/// The tasks of every LAUNCH operation of an ACCEPT.
fn launched_tasks(operations: &[offer::Operation]) -> Vec<v1::TaskInfo> {
    operations
        .iter()
        .filter_map(|op| op.launch.as_ref())
        .flat_map(|l| l.task_infos.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_master_validates_container_infos() {
        let docker = v1::ContainerInfo {
            r#type: container_info::Type::Docker as i32,
            docker: Some(container_info::DockerInfo {
                image: "alpine".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(validate_container_info(&docker), Ok(()));
        let mut bad = docker.clone();
        bad.docker = None;
        assert_eq!(
            validate_container_info(&bad).unwrap_err(),
            "DockerInfo 'docker' is not set for DOCKER typed ContainerInfo"
        );
        let mut named = docker;
        named.docker.as_mut().unwrap().parameters = vec![v1::Parameter {
            key: "name".into(),
            value: "x".into(),
        }];
        assert!(validate_container_info(&named).is_err());
        let volume = v1::ContainerInfo {
            r#type: container_info::Type::Mesos as i32,
            volumes: vec![v1::Volume {
                container_path: "/a".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(
            validate_container_info(&volume)
                .unwrap_err()
                .starts_with("Invalid volume")
        );
    }
}
