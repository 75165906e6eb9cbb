//! Process mode (`TestbedConfig::run_executors`, `--run-executors`): a task
//! whose `ExecutorInfo` is CUSTOM and whose command ends with
//! `mesos-appliance-executor` is run by a real executor process that the
//! simulated agent starts, instead of a simulated executor. This file is the
//! agent's containerizer and executor bookkeeping; the HTTP side is
//! [`super::executor_api`], the per-event handling [`super::executor_events`].
//!
//! What the agent does, and where Mesos does it:
//! - launch: one process per executor, in its own session (the posix
//!   launcher's `setsid`, `src/slave/containerizer/mesos/launcher.cpp`),
//!   cwd = a fresh sandbox
//!   `<work_dir>/slaves/<agent>/frameworks/<fw>/executors/<id>/runs/<container>`
//!   (the run directory of `src/slave/paths.cpp`)
//!   with `stdout` / `stderr` files, and the agent's environment
//!   (`src/slave/slave.cpp` executorEnvironment,
//!   `docs/mesos-protocol.md#executor-environment`); no fetcher
//!   runs: the configured binary is started directly and the command's URIs
//!   are not downloaded;
//! - registration timeout (`--executor_registration_timeout`, 1 min): an
//!   executor that never subscribes is destroyed, its tasks TASK_FAILED /
//!   REASON_EXECUTOR_REGISTRATION_TIMEOUT (`src/slave/slave.cpp`
//!   registerExecutorTimeout);
//! - destroy: SIGKILL to every process of the session (posix launcher
//!   `destroy` → `os::killtree(pid, SIGKILL, groups, sessions)`,
//!   `3rdparty/stout/include/stout/os/posix/killtree.hpp`);
//! - exit: the real wait status goes to the scheduler as
//!   `FAILURE{status}` and the tasks not yet terminal become TASK_FAILED /
//!   REASON_EXECUTOR_TERMINATED; a terminal update the executor sent before
//!   exiting stands (`src/slave/slave.cpp` executorTerminated, via
//!   [`Master::executor_terminated`]);
//! - SHUTDOWN: the executor gets the event and `shutdown_grace_period` to
//!   exit, then is destroyed (`src/slave/slave.cpp` shutdownExecutor /
//!   shutdownExecutorTimeout);
//! - agent restart (`POST /testbed/agents/{id}/restart`): see
//!   [`Master::restart_agent`].

use std::collections::VecDeque;
use std::time::Duration;

use crate::executor::config::format_duration;
use crate::mesos::v1::{self, TaskState, task_status};
use crate::testbed::master::processes::{
    ExecutorProcess, ExecutorTimer, ExecutorView, MAX_FINISHED, ProcessState, Termination,
};
use crate::testbed::master::{Master, Timer};

/// True for an `ExecutorInfo` that process mode runs: CUSTOM (or untyped
/// with a command) and a command ending with `mesos-appliance-executor`.
pub(crate) fn runs_our_executor(info: &v1::ExecutorInfo) -> bool {
    info.r#type() != v1::executor_info::Type::Default
        && info
            .command
            .as_ref()
            .and_then(|c| c.value.as_deref())
            .is_some_and(|v| {
                v.trim_end()
                    .ends_with(crate::executor::info::EXECUTOR_BINARY)
            })
}

impl Master {
    /// The live process of an executor, by container ID.
    pub(crate) fn find_process(
        &self,
        agent_index: usize,
        framework_id: &str,
        executor_id: &str,
    ) -> Option<String> {
        self.processes
            .live
            .values()
            .find(|p| {
                p.agent_index == agent_index
                    && p.framework_id == framework_id
                    && p.executor_id == executor_id
            })
            .map(|p| p.container_id.clone())
    }

    /// The agent runs some executor process of this framework.
    pub(crate) fn agent_knows_framework(&self, agent_index: usize, framework_id: &str) -> bool {
        self.processes
            .live
            .values()
            .any(|p| p.agent_index == agent_index && p.framework_id == framework_id)
    }

    /// A restarted agent still waiting for its executors.
    pub(crate) fn agent_recovering(&self, agent_index: usize) -> bool {
        self.processes
            .endpoints
            .get(agent_index)
            .is_some_and(|e| e.recovering)
    }

    /// Starts the executor process for a task's `ExecutorInfo` on an agent.
    /// Returns its container ID, or the launch error.
    pub(crate) fn spawn_executor(
        &mut self,
        agent_index: usize,
        framework_id: &str,
        info: &v1::ExecutorInfo,
    ) -> Result<String, String> {
        let binary = self
            .cfg
            .run_executors
            .clone()
            .ok_or("process mode is off")?;
        let endpoint = self
            .processes
            .endpoints
            .get(agent_index)
            .ok_or("agent has no executor endpoint")?;
        let agent_addr = endpoint.addr;
        let agent_id = self.agents[agent_index].id.clone();
        let framework_info = self
            .frameworks
            .get(framework_id)
            .map(|f| f.info.clone())
            .or_else(|| self.recovery_infos.get(framework_id).cloned())
            .unwrap_or_default();
        let checkpoint = framework_info.checkpoint.unwrap_or(false);
        let container_id = uuid::Uuid::new_v4().to_string();
        let executor_id = info.executor_id.value.clone();
        let sandbox = self
            .processes
            .work_dir
            .join("slaves")
            .join(&agent_id)
            .join("frameworks")
            .join(framework_id)
            .join("executors")
            .join(&executor_id)
            .join("runs")
            .join(&container_id);
        std::fs::create_dir_all(&sandbox).map_err(|e| format!("Failed to create sandbox: {e}"))?;
        let stdout = std::fs::File::create(sandbox.join("stdout")).map_err(|e| e.to_string())?;
        let mut stderr =
            std::fs::File::create(sandbox.join("stderr")).map_err(|e| e.to_string())?;
        if let Some(container) = &info.container {
            // The executor's output follows this line in the same file.
            use std::io::Write;
            let note = super::containerizers::process_mode_note(container);
            stderr
                .write_all(note.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let grace = info
            .shutdown_grace_period
            .as_ref()
            .map(|d| Duration::from_nanos(u64::try_from(d.nanoseconds).unwrap_or(0)))
            .unwrap_or(self.cfg.executor_shutdown_grace_period);
        let mut command = tokio::process::Command::new(&binary);
        command
            .current_dir(&sandbox)
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(false)
            .env("MESOS_FRAMEWORK_ID", framework_id)
            .env("MESOS_EXECUTOR_ID", &executor_id)
            .env("MESOS_AGENT_ENDPOINT", agent_addr.to_string())
            .env("MESOS_SLAVE_PID", format!("slave(1)@{agent_addr}"))
            .env("MESOS_SLAVE_ID", &agent_id)
            .env("MESOS_DIRECTORY", &sandbox)
            .env("MESOS_SANDBOX", &sandbox)
            .env("MESOS_CHECKPOINT", if checkpoint { "1" } else { "0" })
            .env("MESOS_HTTP_COMMAND_EXECUTOR", "0")
            .env(
                "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD",
                format_duration(grace),
            )
            .env("LIBPROCESS_PORT", "0");
        if checkpoint {
            command
                .env(
                    "MESOS_RECOVERY_TIMEOUT",
                    format_duration(self.cfg.recovery_timeout),
                )
                .env(
                    "MESOS_SUBSCRIPTION_BACKOFF_MAX",
                    format_duration(self.cfg.executor_reregistration_timeout),
                );
        }
        let variables = info
            .command
            .iter()
            .flat_map(|c| c.environment.iter())
            .flat_map(|e| e.variables.iter());
        for variable in variables {
            command.env(&variable.name, variable.value.as_deref().unwrap_or(""));
        }
        // SAFETY: setsid(2) is async-signal-safe and touches no memory of
        // the parent; it runs in the child between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("Failed to launch executor '{}': {e}", binary.display()))?;
        let pid = child.id().ok_or("executor vanished at launch")?;
        tracing::info!(%executor_id, %container_id, pid, sandbox = %sandbox.display(), "started executor process");
        let master = self.this.clone();
        let waited_container = container_id.clone();
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            let raw = match child.wait().await {
                Ok(status) => status.into_raw(),
                Err(error) => {
                    tracing::error!(%error, "waiting for an executor failed");
                    -1
                }
            };
            if let Some(master) = master.upgrade() {
                let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
                master.executor_process_exited(&waited_container, raw);
            }
        });
        self.processes.live.insert(
            container_id.clone(),
            ExecutorProcess {
                agent_index,
                framework_id: framework_id.to_string(),
                executor_id,
                container_id: container_id.clone(),
                pid,
                sandbox,
                state: ProcessState::Registering,
                stream: None,
                next_token: 0,
                queued: Vec::new(),
                received: VecDeque::new(),
                info: info.clone(),
                framework_info,
                termination: None,
            },
        );
        self.schedule(
            self.cfg.executor_registration_timeout,
            Timer::Executor(ExecutorTimer::Registration {
                container_id: container_id.clone(),
            }),
        );
        Ok(container_id)
    }

    /// Kills every process of the executor's session (its tasks included);
    /// the exit is reported when the wait on the process returns.
    pub(crate) fn destroy_container(
        &mut self,
        container_id: &str,
        termination: Option<Termination>,
    ) {
        let Some(process) = self.processes.live.get_mut(container_id) else {
            return;
        };
        if process.termination.is_none() {
            process.termination = termination;
        }
        if let Some(stream) = process.stream.take() {
            stream.abort();
        }
        tracing::info!(
            container_id,
            pid = process.pid,
            "destroying executor container"
        );
        kill_session(process.pid);
    }

    /// The executor process ended with raw wait status `raw`: its session is
    /// destroyed, and the scheduler learns of it like from a real agent.
    pub(crate) fn executor_process_exited(&mut self, container_id: &str, raw: i32) {
        let Some(mut process) = self.processes.live.remove(container_id) else {
            return;
        };
        kill_session(process.pid);
        if let Some(stream) = process.stream.take() {
            stream.abort();
        }
        tracing::info!(executor_id = %process.executor_id, wait_status = raw, "executor process exited");
        process.state = ProcessState::Exited;
        let agent_id = self.agents[process.agent_index].id.clone();
        let view = process.view(&agent_id, Some(raw));
        crate::testbed::master::push_bounded(&mut self.processes.finished, view, MAX_FINISHED);
        let termination = process.termination.unwrap_or(Termination {
            state: TaskState::TaskFailed,
            reason: task_status::Reason::ExecutorTerminated,
            message: "Executor terminated".into(),
        });
        self.executor_terminated(
            &process.framework_id,
            process.agent_index,
            &process.executor_id,
            Some(raw),
            termination.state,
            termination.reason,
            &termination.message,
        );
    }

    /// Runs a process-mode timer.
    pub(super) fn fire_executor_timer(&mut self, timer: ExecutorTimer) {
        match timer {
            ExecutorTimer::Registration { container_id } => {
                let registering = self
                    .processes
                    .live
                    .get(&container_id)
                    .is_some_and(|p| p.state == ProcessState::Registering);
                if registering {
                    let timeout = format_duration(self.cfg.executor_registration_timeout);
                    tracing::warn!(%container_id, "executor did not register in time");
                    self.destroy_container(
                        &container_id,
                        Some(Termination {
                            state: TaskState::TaskFailed,
                            reason: task_status::Reason::ExecutorRegistrationTimeout,
                            message: format!("Executor did not register within {timeout}"),
                        }),
                    );
                }
            }
            ExecutorTimer::ShutdownGrace { container_id } => {
                if self.processes.live.contains_key(&container_id) {
                    tracing::warn!(%container_id, "executor did not exit within its shutdown grace period");
                    self.destroy_container(&container_id, None);
                }
            }
            ExecutorTimer::KillEscalation { container_id } => self.escalate_kill(&container_id),
            ExecutorTimer::AgentUp { agent_index, epoch } => self.agent_up(agent_index, epoch),
            ExecutorTimer::Reregistration { agent_index, epoch } => {
                self.reregistration_timeout(agent_index, epoch)
            }
        }
    }

    /// Process mode: the master's ShutdownMessage. The agent kills its
    /// executors and stops serving for good (its restart timers are voided).
    pub(super) fn shut_down_agent(&mut self, index: usize) {
        let Some(endpoint) = self.processes.endpoints.get_mut(index) else {
            return;
        };
        endpoint.epoch += 1;
        endpoint.up = false;
        endpoint.recovering = false;
        endpoint.stop.cancel();
        for process in self.processes.live.values_mut() {
            if process.agent_index != index {
                continue;
            }
            if let Some(stream) = process.stream.take() {
                stream.abort();
            }
            kill_session(process.pid);
        }
        for command in self.processes.commands.values() {
            if command.agent_index == index {
                kill_session(command.pid);
            }
        }
    }

    /// SIGKILLs every executor session (testbed shutdown): nothing outlives
    /// the testbed.
    pub(crate) fn kill_all_processes(&mut self) {
        for process in self.processes.live.values() {
            kill_session(process.pid);
        }
        for command in self.processes.commands.values() {
            kill_session(command.pid);
        }
        for endpoint in &self.processes.endpoints {
            endpoint.stop.cancel();
        }
        if self.processes.remove_work_dir {
            let _ = std::fs::remove_dir_all(&self.processes.work_dir);
        }
    }

    /// Live and recently exited executor processes.
    pub fn executor_views(&self) -> Vec<ExecutorView> {
        let mut out: Vec<ExecutorView> = self
            .processes
            .live
            .values()
            .map(|p| p.view(&self.agents[p.agent_index].id, None))
            .chain(
                self.processes
                    .commands
                    .values()
                    .map(|c| c.view(&self.agents[c.agent_index].id, None)),
            )
            .collect();
        out.sort_by(|a, b| a.container_id.cmp(&b.container_id));
        out.extend(self.processes.finished.iter().cloned());
        out
    }
}

/// SIGKILLs the session `sid` (the executor was started with `setsid`, so
/// `sid` is its pid): its own process group, then every process whose
/// session is `sid` — the task groups it created inside the session.
pub(crate) fn kill_session(sid: u32) {
    signal_session(sid, libc::SIGKILL);
}

/// Sends `signal` to the session `sid`: its own process group, then every
/// process whose session is `sid` (`os::killtree` with groups and sessions,
/// `3rdparty/stout/include/stout/os/posix/killtree.hpp`).
pub(crate) fn signal_session(sid: u32, signal: i32) {
    crate::executor::tasks::signal_group(sid, signal);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name `(…)`: state ppid pgrp session …
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let session = rest
            .split_whitespace()
            .nth(3)
            .and_then(|s| s.parse::<u32>().ok());
        if session == Some(sid) && pid > 1 {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}
