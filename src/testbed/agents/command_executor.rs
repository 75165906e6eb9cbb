//! Process mode (`--run-executors`): a task with a `CommandInfo` and no
//! `ExecutorInfo` runs for real, as Mesos' command executor runs it
//! (`src/launcher/executor.cpp` in apache/mesos; `docs/testbed.md#finite-tasks`).
//!
//! - **Launch** (`launch`): TASK_STARTING, then the command as a process,
//!   then TASK_RUNNING. A `shell` command runs as `/bin/sh -c <value>`,
//!   otherwise `value` is executed with `arguments` as its argv
//!   (`launchTaskSubprocess`). Its environment is the agent's executor
//!   environment (`src/slave/slave.cpp` executorEnvironment: `MESOS_SANDBOX`,
//!   `MESOS_DIRECTORY`, `MESOS_FRAMEWORK_ID`, `MESOS_EXECUTOR_ID`,
//!   `MESOS_AGENT_ENDPOINT`, `MESOS_SLAVE_ID`), `MESOS_ALLOCATION_ROLE`, then
//!   the `CommandInfo.environment` values, which win. It runs in the
//!   sandbox `<work_dir>/slaves/<agent>/frameworks/<fw>/executors/<task>/runs/<container>`
//!   with `stdout` and `stderr` there, in a session of its own (the posix
//!   launcher's `setsid`). No fetcher: URIs are not downloaded; no user
//!   switch, no container.
//! - **Exit** (`reaped`): TASK_FINISHED when it exited with status 0,
//!   TASK_FAILED otherwise, TASK_KILLED if a KILL came first; no reason; the
//!   message is `"Command " + WSTRINGIFY(status)`
//!   ([`command_message`]). The executor then exits; being a command
//!   executor, no FAILURE reaches the scheduler (`src/slave/slave.cpp`
//!   executorTerminated sends ExitedExecutorMessage only for custom
//!   executors). Its sandbox stays listed among the agent's completed
//!   executors, so its files can be read after the end.
//! - **Kill** (`kill`, `escalated`): TASK_KILLING for TASK_KILLING_STATE
//!   frameworks, SIGTERM to the process tree, and SIGKILL once the grace
//!   period is over: the KILL call's `kill_policy`, else the task's, else
//!   3 s. A later KILL may shorten the grace period, never lengthen it.
//!   The task is TASK_KILLED with the real wait status in the message
//!   (`Command terminated with signal Terminated`, or `… Killed` after the
//!   escalation).
//! - A task the master gives up otherwise (its agent is gone or drained,
//!   its framework removed, a simulated health check killed it) has its
//!   process SIGKILLed without a further update.

use std::time::{Duration, Instant};

use crate::mesos::v1::{TaskState, scheduler::call};
use crate::testbed::master::Master;
use crate::testbed::master::Timer;
use crate::testbed::master::finite::command_message;
use crate::testbed::master::processes::{CommandProcess, ExecutorTimer, MAX_FINISHED};
use crate::testbed::master::tasks::{Task, is_terminal};

use super::executors::{kill_session, signal_session};

/// The command executor's grace period when neither the KILL nor the task
/// has a kill policy (`src/launcher/executor.cpp` kill: "Default grace
/// period is set to 3s for backwards compatibility").
pub(crate) const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(3);

/// A `DurationInfo`'s nanoseconds as a duration (negative: zero).
fn nanos(d: &crate::mesos::v1::DurationInfo) -> Duration {
    Duration::from_nanos(u64::try_from(d.nanoseconds).unwrap_or(0))
}

/// What [`spawn_command`](Master::spawn_command) started.
enum Spawned {
    /// The command runs as this process.
    Pid(u32),
    /// The command could not be executed (why, as the launch helper
    /// prints it).
    Exec(String),
}

impl Master {
    /// The live command process running `task_id` of `framework_id`.
    fn command_of(&self, framework_id: &str, task_id: &str) -> Option<String> {
        self.processes
            .commands
            .values()
            .find(|c| c.framework_id == framework_id && c.task_id == task_id)
            .map(|c| c.container_id.clone())
    }

    /// Process mode: the sandbox of a command executor, for the agent's
    /// `/state` — where its command runs, runs or ran. The path is known
    /// from the launch on, as a real agent creates the directory before it
    /// starts the executor (`src/slave/paths.cpp`); `None` outside
    /// process mode.
    pub(super) fn command_sandbox(
        &self,
        agent_index: usize,
        framework_id: &str,
        executor_id: &str,
        container_id: &str,
    ) -> Option<std::path::PathBuf> {
        self.cfg.run_executors.as_ref()?;
        let agent_id = &self.agents.get(agent_index)?.id;
        Some(
            self.processes
                .work_dir
                .join("slaves")
                .join(agent_id)
                .join("frameworks")
                .join(framework_id)
                .join("executors")
                .join(executor_id)
                .join("runs")
                .join(container_id),
        )
    }

    /// Starts a command-executor task for real in process mode; false when
    /// process mode is off or the task has a custom executor.
    pub(super) fn start_command(&mut self, framework_id: &str, task_id: &str) -> bool {
        if self.cfg.run_executors.is_none() {
            return false;
        }
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get(&key) else {
            return false;
        };
        if task.custom_executor {
            return false;
        }
        let Some(agent_index) = self.agent_index(&task.agent_id) else {
            return false;
        };
        let starting = self.executor_status(task, TaskState::TaskStarting, None);
        self.agent_update(framework_id, task_id, starting);
        match self.spawn_command(agent_index, framework_id, task_id) {
            Ok(Spawned::Exec(message)) => {
                // Real Mesos forks `mesos-containerizer launch`, which
                // succeeds, so the executor reports TASK_RUNNING; the helper
                // then fails its execvp, prints why on stderr and exits 1
                // (`src/slave/containerizer/mesos/launch.cpp`, "Failed to
                // execute"), and the executor reaps it as any command
                // (`src/launcher/executor.cpp` reaped: TASK_FAILED, no
                // reason, "Command exited with status 1").
                tracing::warn!(%task_id, %message, "command could not be executed");
                for (state, text) in [
                    (TaskState::TaskRunning, None),
                    (TaskState::TaskFailed, Some(command_message(1 << 8))),
                ] {
                    if let Some(task) = self.tasks.get(&key) {
                        let status = self.executor_status(task, state, text.as_deref());
                        self.agent_update(framework_id, task_id, status);
                    }
                }
            }
            Ok(Spawned::Pid(pid)) => {
                if let Some(task) = self.tasks.get_mut(&key) {
                    task.executor_pid = pid;
                }
                let executor_key = (framework_id.to_string(), task_id.to_string());
                if let Some(executor) = self.agents[agent_index].executors.get_mut(&executor_key) {
                    executor.pid = pid;
                }
                if let Some(task) = self.tasks.get(&key) {
                    let running = self.executor_status(task, TaskState::TaskRunning, None);
                    self.agent_update(framework_id, task_id, running);
                }
            }
            Err(message) => {
                // executor.cpp ABORTs when the subprocess cannot start: the
                // executor dies and the agent fails the task.
                tracing::warn!(%task_id, %message, "command launch failed");
                if let Some(task) = self.tasks.get(&key) {
                    let failed = self.agent_status(
                        task,
                        TaskState::TaskFailed,
                        crate::mesos::v1::task_status::Reason::ExecutorTerminated,
                        &format!("Abnormal executor termination: {message}"),
                    );
                    self.agent_update(framework_id, task_id, failed);
                }
            }
        }
        true
    }

    /// Spawns the task's command in a fresh sandbox. `Err` is a failure
    /// of the executor itself before the command (it aborts: the agent
    /// fails the task); a command that cannot be executed is
    /// [`Spawned::Exec`], its reason written to the sandbox's `stderr`.
    fn spawn_command(
        &mut self,
        agent_index: usize,
        framework_id: &str,
        task_id: &str,
    ) -> Result<Spawned, String> {
        use std::io::Write;
        let task = self
            .tasks
            .get(&(framework_id.to_string(), task_id.to_string()))
            .ok_or("task vanished")?;
        let info = task.info();
        let container_id = task.container_id.clone();
        let command_info = info.command.clone().unwrap_or_default();
        let agent_id = self.agents[agent_index].id.clone();
        let hostname = self.agents[agent_index].spec.hostname.clone();
        let agent_addr = self
            .processes
            .endpoints
            .get(agent_index)
            .map(|e| e.addr.to_string())
            .unwrap_or_default();
        let sandbox = self
            .command_sandbox(agent_index, framework_id, task_id, &container_id)
            .ok_or("process mode is off")?;
        std::fs::create_dir_all(&sandbox).map_err(|e| format!("Failed to create sandbox: {e}"))?;
        let stdout = std::fs::File::create(sandbox.join("stdout")).map_err(|e| e.to_string())?;
        let mut stderr =
            std::fs::File::create(sandbox.join("stderr")).map_err(|e| e.to_string())?;
        // The command executor's own lines precede the task's output.
        let _ = write!(
            stderr,
            "Received SUBSCRIBED event\nSubscribed executor on {hostname}\nReceived LAUNCH event\nStarting task {task_id}\n"
        );
        let value = command_info.value.clone().unwrap_or_default();
        let shell = command_info.shell.unwrap_or(true);
        if value.is_empty() {
            return Err(format!("Command of task '{task_id}' is not specified"));
        }
        let mut command = if shell {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(&value);
            c
        } else {
            let mut c = tokio::process::Command::new(&value);
            if let Some((argv0, rest)) = command_info.arguments.split_first() {
                c.arg0(argv0).args(rest);
            }
            c
        };
        let role = info
            .resources
            .iter()
            .find_map(|r| r.allocation_info.as_ref().and_then(|a| a.role.clone()))
            .unwrap_or_else(|| "*".into());
        // Kept to write why the command could not be executed.
        let mut launch_errors = stderr.try_clone().ok();
        command
            .current_dir(&sandbox)
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(false)
            .env("MESOS_FRAMEWORK_ID", framework_id)
            .env("MESOS_EXECUTOR_ID", task_id)
            .env("MESOS_AGENT_ENDPOINT", &agent_addr)
            .env("MESOS_SLAVE_ID", &agent_id)
            .env("MESOS_DIRECTORY", &sandbox)
            .env("MESOS_SANDBOX", &sandbox)
            .env("MESOS_ALLOCATION_ROLE", role);
        let variables = command_info
            .environment
            .iter()
            .flat_map(|e| e.variables.iter());
        for variable in variables {
            if let Some(value) = &variable.value {
                command.env(&variable.name, value);
            }
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
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                let executable = if shell { "/bin/sh" } else { value.as_str() };
                let message = format!("Failed to execute '{executable}': {e}");
                if let Some(file) = launch_errors.as_mut() {
                    let _ = writeln!(file, "{message}");
                }
                return Ok(Spawned::Exec(message));
            }
        };
        let pid = child.id().ok_or("command vanished at launch")?;
        tracing::info!(%task_id, %container_id, pid, sandbox = %sandbox.display(), "started command task");
        let master = self.this.clone();
        let waited = container_id.clone();
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            let raw = match child.wait().await {
                Ok(status) => Some(status.into_raw()),
                Err(error) => {
                    tracing::error!(%error, "waiting for a command task failed");
                    None
                }
            };
            if let Some(master) = master.upgrade() {
                let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
                master.command_exited(&waited, raw);
            }
        });
        let grace = info
            .kill_policy
            .as_ref()
            .and_then(|p| p.grace_period.as_ref())
            .map(nanos);
        self.processes.commands.insert(
            container_id.clone(),
            CommandProcess {
                agent_index,
                framework_id: framework_id.to_string(),
                task_id: task_id.to_string(),
                container_id,
                pid,
                sandbox,
                grace,
                kill_started: None,
                escalate_at: None,
            },
        );
        Ok(Spawned::Pid(pid))
    }

    /// The command process ended with raw wait status `raw` (`None`: the
    /// wait failed): its task's terminal update (`reaped`), unless the
    /// task is over already.
    pub(crate) fn command_exited(&mut self, container_id: &str, raw: Option<i32>) {
        let Some(process) = self.processes.commands.remove(container_id) else {
            return;
        };
        // What the command left behind in its session goes with it.
        kill_session(process.pid);
        let agent_id = self.agents[process.agent_index].id.clone();
        crate::testbed::master::push_bounded(
            &mut self.processes.finished,
            process.view(&agent_id, Some(raw.unwrap_or(-1))),
            MAX_FINISHED,
        );
        let key = (process.framework_id.clone(), process.task_id.clone());
        let Some(task) = self.tasks.get(&key) else {
            return;
        };
        let latest = task.pending.back().map(|s| s.state()).unwrap_or(task.state);
        if is_terminal(latest) || task.container_id != process.container_id {
            return;
        }
        let (state, message) = match raw {
            None => (
                TaskState::TaskFailed,
                "Failed to get exit status for Command".to_string(),
            ),
            Some(raw) => {
                let state = if process.kill_started.is_some() {
                    TaskState::TaskKilled
                } else if libc::WIFEXITED(raw) && libc::WEXITSTATUS(raw) == 0 {
                    TaskState::TaskFinished
                } else {
                    TaskState::TaskFailed
                };
                (state, command_message(raw))
            }
        };
        tracing::info!(task_id = %process.task_id, %message, "command task ended");
        let status = self.executor_status(task, state, Some(&message));
        self.agent_update(&process.framework_id, &process.task_id, status);
    }

    /// KILL of a command-executor task. In process mode with its process
    /// running: TASK_KILLING (TASK_KILLING_STATE frameworks), SIGTERM, and
    /// SIGKILL after the grace period; a repeated KILL may only bring the
    /// SIGKILL forward (`src/launcher/executor.cpp` kill). True when the
    /// task has a process; otherwise the simulated executor kills it.
    pub(super) fn kill_command(
        &mut self,
        framework_id: &str,
        task: &Task,
        kill: &call::Kill,
    ) -> bool {
        let task_id = &task.task_id.value;
        let Some(container_id) = self.command_of(framework_id, task_id) else {
            return false;
        };
        let killing_state = self.framework(framework_id).is_some_and(|f| {
            f.has_capability(crate::mesos::v1::framework_info::capability::Type::TaskKillingState)
        });
        let Some(process) = self.processes.commands.get_mut(&container_id) else {
            return false;
        };
        let grace = kill
            .kill_policy
            .as_ref()
            .and_then(|p| p.grace_period.as_ref())
            .map(nanos)
            .or(process.grace)
            .unwrap_or(DEFAULT_KILL_GRACE);
        let now = Instant::now();
        let escalate_at = match (process.kill_started, process.escalate_at) {
            (Some(started), Some(at)) => {
                if started + grace >= at {
                    return true;
                }
                (started + grace).max(now)
            }
            _ => {
                process.kill_started = Some(now);
                tracing::info!(%task_id, pid = process.pid, ?grace, "sending SIGTERM to the command's process tree");
                signal_session(process.pid, libc::SIGTERM);
                if killing_state {
                    let killing = self.executor_status(task, TaskState::TaskKilling, None);
                    self.agent_update(framework_id, task_id, killing);
                }
                now + grace
            }
        };
        if let Some(process) = self.processes.commands.get_mut(&container_id) {
            process.escalate_at = Some(escalate_at);
        }
        self.schedule(
            escalate_at.saturating_duration_since(now),
            Timer::Executor(ExecutorTimer::KillEscalation { container_id }),
        );
        true
    }

    /// The grace period of a killed command is over: SIGKILL to its process
    /// tree if it still runs (`src/launcher/executor.cpp` escalated). A
    /// timer made stale by a shorter grace period does nothing.
    pub(super) fn escalate_kill(&mut self, container_id: &str) {
        let Some(process) = self.processes.commands.get(container_id) else {
            return;
        };
        let due = process
            .escalate_at
            .is_some_and(|at| at <= Instant::now() + Duration::from_millis(1));
        if due {
            tracing::info!(task_id = %process.task_id, pid = process.pid, "grace period over: sending SIGKILL to the command's process tree");
            kill_session(process.pid);
        }
    }

    /// The master is done with the task: a command still running it is
    /// SIGKILLed (its exit then sends nothing more).
    pub(super) fn command_task_released(&mut self, framework_id: &str, task_id: &str) {
        if let Some(container_id) = self.command_of(framework_id, task_id)
            && let Some(process) = self.processes.commands.get(&container_id)
        {
            tracing::info!(%task_id, pid = process.pid, "task over at the master: killing its command");
            kill_session(process.pid);
        }
    }

    /// A removed framework's command tasks are killed (`src/slave/slave.cpp`
    /// shutdownFramework shuts its executors down); no updates follow.
    pub(super) fn kill_framework_commands(&mut self, framework_id: &str) {
        for process in self.processes.commands.values() {
            if process.framework_id == framework_id {
                kill_session(process.pid);
            }
        }
    }
}
