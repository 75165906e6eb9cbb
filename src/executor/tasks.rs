//! Tasks as child processes. Each task runs in its own process group (its
//! pid is the group ID), so that a kill reaches everything it started: the
//! group gets SIGTERM, then SIGKILL once the grace period is over — the
//! KillPolicy contract (`include/mesos/v1/mesos.proto` KillPolicy,
//! `docs/mesos-protocol.md#kill-policy`) — and whatever is left of a group after its leader exits
//! is SIGKILLed, so no task leaves stray processes behind.
//!
//! What a task runs comes from its `CommandInfo`
//! (`docs/mesos-protocol.md#taskinfo-and-commandinfo`): `shell`
//! (default true) runs `/bin/sh -c value`; otherwise `value` is executed with
//! `arguments` as argv (`arguments[0]` is argv\[0\]). The working directory is
//! the sandbox; the environment is the executor's plus `MESOS_TASK_ID`,
//! `MESOS_SANDBOX` and the command's `environment` (VALUE variables only).
//! A task launched with a custom executor cannot carry `TaskInfo.command`
//! (the master accepts exactly one of `command` and `executor`), so the
//! appliance puts the command into `TaskInfo.data` ([`task_command`]).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use prost::Message;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::mesos::v1;

/// The task's command: `TaskInfo.command` if present, else `TaskInfo.data`
/// decoded as a `mesos.v1.CommandInfo` — Mesos JSON when it starts with `{`,
/// protobuf otherwise (see [`crate::executor::info::task_data`]).
///
/// # Errors
/// A text for the TASK_FAILED message when there is no usable command.
pub fn task_command(task: &v1::TaskInfo) -> Result<v1::CommandInfo, String> {
    if let Some(command) = &task.command {
        return Ok(command.clone());
    }
    let data = task
        .data
        .as_deref()
        .filter(|d| !d.is_empty())
        .ok_or("Task has neither 'command' nor a CommandInfo in 'data'")?;
    let command: v1::CommandInfo = if data.first() == Some(&b'{') {
        crate::mesos::json::from_slice(data)
            .map_err(|e| format!("Invalid CommandInfo JSON in 'data': {e}"))?
    } else {
        v1::CommandInfo::decode(data).map_err(|e| format!("Invalid CommandInfo in 'data': {e}"))?
    };
    Ok(command)
}

/// How a task's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl Exit {
    pub(crate) fn from_status(status: ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        }
    }

    /// The command executor's wording (`src/launcher/executor.cpp`, via
    /// `WSTRINGIFY`): `Command exited with status 1`, `Command terminated
    /// with signal Terminated`.
    pub fn describe(self) -> String {
        match self {
            Exit::Code(code) => format!("Command exited with status {code}"),
            Exit::Signal(signal) => {
                format!("Command terminated with signal {}", signal_name(signal))
            }
        }
    }
}

/// strsignal(3)'s names of the signals a task usually dies of.
fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGHUP => "Hangup".into(),
        libc::SIGINT => "Interrupt".into(),
        libc::SIGQUIT => "Quit".into(),
        libc::SIGABRT => "Aborted".into(),
        libc::SIGKILL => "Killed".into(),
        libc::SIGSEGV => "Segmentation fault".into(),
        libc::SIGPIPE => "Broken pipe".into(),
        libc::SIGTERM => "Terminated".into(),
        other => format!("{other}"),
    }
}

/// A task process ended: sent to the executor's main loop.
#[derive(Debug, Clone)]
pub struct Exited {
    /// The task.
    pub task_id: String,
    /// How it ended.
    pub exit: Exit,
}

/// A running task process (the leader of its own process group).
#[derive(Debug)]
pub struct TaskProcess {
    /// Process ID, also the process group ID.
    pub pid: u32,
    waiter: JoinHandle<()>,
    escalation: Option<JoinHandle<()>>,
}

impl TaskProcess {
    /// Starts `command` for `task_id` in `sandbox`. When the process ends,
    /// the rest of its group is SIGKILLed and an [`Exited`] goes to `exits`.
    ///
    /// # Errors
    /// When the command is empty or cannot be spawned (text for TASK_FAILED).
    pub fn spawn(
        task_id: &str,
        command: &v1::CommandInfo,
        sandbox: &Path,
        exits: mpsc::UnboundedSender<Exited>,
    ) -> Result<TaskProcess, String> {
        let value = command.value.clone().unwrap_or_default();
        let mut cmd = if command.shell.unwrap_or(true) {
            if value.trim().is_empty() {
                return Err("Task's command is empty".into());
            }
            let mut cmd = tokio::process::Command::new("/bin/sh");
            cmd.arg("-c").arg(&value);
            cmd
        } else {
            if value.is_empty() {
                return Err("Task's command has no program ('value')".into());
            }
            let mut cmd = tokio::process::Command::new(&value);
            if let Some((argv0, rest)) = command.arguments.split_first() {
                cmd.arg0(argv0);
                cmd.args(rest);
            }
            cmd
        };
        cmd.current_dir(sandbox)
            .env("MESOS_TASK_ID", task_id)
            .env("MESOS_SANDBOX", sandbox)
            .env_remove("MESOS_EXECUTOR_AUTHENTICATION_TOKEN")
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        for variable in command.environment.iter().flat_map(|e| e.variables.iter()) {
            use v1::environment::variable::Type;
            if variable.r#type() == Type::Secret {
                tracing::warn!(%task_id, name = %variable.name, "secret environment variables are not supported; skipped");
                continue;
            }
            cmd.env(&variable.name, variable.value.as_deref().unwrap_or(""));
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("Failed to launch '{value}': {e}"))?;
        let pid = child.id().ok_or("Task process vanished at launch")?;
        let task_id = task_id.to_string();
        let waiter = tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => Exit::from_status(status),
                Err(error) => {
                    tracing::error!(%task_id, %error, "waiting for the task failed");
                    Exit::Code(-1)
                }
            };
            // The leader is reaped; its group ID stays reserved while members
            // remain, so this reaches only the task's own leftovers.
            signal_group(pid, libc::SIGKILL);
            let _ = exits.send(Exited { task_id, exit });
        });
        Ok(TaskProcess {
            pid,
            waiter,
            escalation: None,
        })
    }

    /// Kills the task with a grace period: SIGTERM to its process group now,
    /// SIGKILL after `grace` if it still runs. A second call with a shorter
    /// grace shortens the wait (as a later KILL with a new policy does).
    pub fn kill(&mut self, grace: Duration) {
        if grace.is_zero() {
            signal_group(self.pid, libc::SIGKILL);
            return;
        }
        if self.escalation.is_none() {
            signal_group(self.pid, libc::SIGTERM);
        }
        if let Some(previous) = self.escalation.take() {
            previous.abort();
        }
        let pid = self.pid;
        self.escalation = Some(tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            tracing::info!(pid, ?grace, "grace period over; sending SIGKILL");
            signal_group(pid, libc::SIGKILL);
        }));
    }

    /// True once a kill was requested.
    pub fn killing(&self) -> bool {
        self.escalation.is_some()
    }

    /// The process ended: stop any pending SIGKILL (its group ID could be
    /// reused later).
    pub fn reaped(&mut self) {
        if let Some(escalation) = self.escalation.take() {
            escalation.abort();
        }
    }
}

impl Drop for TaskProcess {
    /// A task process must never outlive its record: SIGKILL its group if
    /// it still runs.
    fn drop(&mut self) {
        if !self.waiter.is_finished() {
            signal_group(self.pid, libc::SIGKILL);
        }
        if let Some(escalation) = self.escalation.take() {
            escalation.abort();
        }
    }
}

/// Sends `signal` to process group `pgid`; a group that no longer exists is
/// not an error.
pub fn signal_group(pgid: u32, signal: i32) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid
    // addresses the process group.
    let rc = unsafe { libc::kill(-pgid, signal) };
    if rc != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, signal, %error, "kill failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(line: &str) -> v1::CommandInfo {
        v1::CommandInfo {
            value: Some(line.into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn exit_codes_and_signals_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let _ok = TaskProcess::spawn("ok", &shell("exit 0"), dir.path(), tx.clone()).unwrap();
        let _bad = TaskProcess::spawn("bad", &shell("exit 3"), dir.path(), tx.clone()).unwrap();
        let mut sleeper =
            TaskProcess::spawn("sleep", &shell("exec sleep 30"), dir.path(), tx).unwrap();
        sleeper.kill(Duration::from_secs(5));
        let mut got = Vec::new();
        for _ in 0..3 {
            let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .unwrap()
                .unwrap();
            got.push((e.task_id, e.exit));
        }
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                ("bad".to_string(), Exit::Code(3)),
                ("ok".to_string(), Exit::Code(0)),
                ("sleep".to_string(), Exit::Signal(libc::SIGTERM)),
            ]
        );
        assert_eq!(
            Exit::Signal(libc::SIGTERM).describe(),
            "Command terminated with signal Terminated"
        );
        assert_eq!(Exit::Code(1).describe(), "Command exited with status 1");
    }

    #[tokio::test]
    async fn argv_environment_and_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let command = v1::CommandInfo {
            shell: Some(false),
            value: Some("/bin/sh".into()),
            arguments: vec![
                "sh".into(),
                "-c".into(),
                "echo \"$GREETING $MESOS_TASK_ID $0\" > out.txt".into(),
            ],
            environment: Some(v1::Environment {
                variables: vec![v1::environment::Variable {
                    name: "GREETING".into(),
                    value: Some("hi".into()),
                    r#type: None,
                }],
            }),
            ..Default::default()
        };
        let _p = TaskProcess::spawn("t-9", &command, dir.path(), tx).unwrap();
        let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.exit, Exit::Code(0));
        let out = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
        assert_eq!(out.trim(), "hi t-9 sh");
    }

    #[test]
    fn command_from_data() {
        let command = shell("sleep 1");
        let mut task = v1::TaskInfo {
            data: Some(command.encode_to_vec()),
            ..Default::default()
        };
        assert_eq!(task_command(&task).unwrap(), command);
        task.data = Some(br#"{"value":"sleep 1"}"#.to_vec());
        assert_eq!(task_command(&task).unwrap(), command);
        task.data = None;
        assert!(task_command(&task).is_err());
        task.command = Some(command.clone());
        assert_eq!(task_command(&task).unwrap(), command);
    }
}
