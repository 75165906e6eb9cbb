//! Tasks that end on their own (`docs/testbed.md#finite-tasks`).
//!
//! A simulated task runs nothing, so it ends only when the `task-exit`
//! fault (`POST /testbed/faults/task-exit`, [`ExitRule`]) gives it a run
//! time and an exit code: that long after its TASK_RUNNING, its executor
//! reports the exit as Mesos' command executor does
//! (`src/launcher/executor.cpp` `reaped`): TASK_FINISHED when the command
//! exited with status 0, TASK_FAILED otherwise, no reason, and the message
//! `"Command " + WSTRINGIFY(status)` (`src/common/status_utils.hpp`), for
//! example `Command exited with status 3`. A task killed, lost or ended
//! otherwise before then is left as it is.
//!
//! Process mode runs command-executor tasks for real
//! (`testbed::agents::command_executor`) and words their end with
//! [`command_message`] too.

use super::faults::ExitRule;
use super::tasks::is_terminal;
use super::{Master, Timer};
use crate::mesos::v1::TaskState;

/// `"Command " + WSTRINGIFY(status)` of a raw wait(2) status, as the
/// command executor words a task's end (`src/launcher/executor.cpp`
/// `reaped`, `src/common/status_utils.hpp` WSTRINGIFY): `Command exited with
/// status N`, `Command terminated with signal Terminated` (`strsignal`'s
/// text), with ` (core dumped)` when it dumped core.
pub(crate) fn command_message(raw: i32) -> String {
    if libc::WIFEXITED(raw) {
        format!("Command exited with status {}", libc::WEXITSTATUS(raw))
    } else if libc::WIFSIGNALED(raw) {
        let signal = libc::WTERMSIG(raw);
        let core = if libc::WCOREDUMP(raw) {
            " (core dumped)"
        } else {
            ""
        };
        format!(
            "Command terminated with signal {}{core}",
            signal_name(signal)
        )
    } else if libc::WIFSTOPPED(raw) {
        format!(
            "Command stopped on signal {}",
            signal_name(libc::WSTOPSIG(raw))
        )
    } else {
        format!("Command wait status {raw}")
    }
}

/// `strsignal(3)`'s description of `signal` (glibc's English texts).
fn signal_name(signal: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local
    // string, valid until the next call on this thread; it is copied at once.
    unsafe {
        let ptr = libc::strsignal(signal);
        if ptr.is_null() {
            return format!("Unknown signal {signal}");
        }
        std::ffi::CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

/// The raw wait status of a process that exited with `code`.
pub(crate) fn exited_with(code: u8) -> i32 {
    i32::from(code) << 8
}

impl Master {
    /// The last `task-exit` rule matching the task (by ID prefix and label).
    fn exit_rule_for(&self, framework_id: &str, task_id: &str) -> Option<ExitRule> {
        let task = self
            .tasks
            .get(&(framework_id.to_string(), task_id.to_string()))?;
        let rules = &self.faults.exits;
        if !rules.iter().any(|r| task_id.starts_with(&r.task_id_prefix)) {
            return None;
        }
        let info = task.info();
        let labels = info.labels.as_ref().map(|l| l.labels.as_slice());
        let has_label = |key: &str, value: &str| {
            labels
                .unwrap_or_default()
                .iter()
                .any(|l| l.key == key && l.value.as_deref().unwrap_or_default() == value)
        };
        rules
            .iter()
            .rev()
            .find(|rule| {
                task_id.starts_with(&rule.task_id_prefix)
                    && rule
                        .label
                        .as_ref()
                        .is_none_or(|(key, value)| has_label(key, value))
            })
            .cloned()
    }

    /// A simulated executor has sent the task's TASK_RUNNING: if a
    /// `task-exit` rule matches it, its command exits after the rule's run time.
    pub(crate) fn schedule_simulated_exit(&mut self, framework_id: &str, task_id: &str) {
        let Some(rule) = self.exit_rule_for(framework_id, task_id) else {
            return;
        };
        let Some(task) = self
            .tasks
            .get(&(framework_id.to_string(), task_id.to_string()))
        else {
            return;
        };
        let container_id = task.container_id.clone();
        tracing::info!(%task_id, run = ?rule.run, exit_code = rule.exit_code, "fault: simulated task will exit");
        self.schedule(
            rule.run,
            Timer::SimulatedExit {
                framework_id: framework_id.to_string(),
                task_id: task_id.to_string(),
                container_id,
                exit_code: rule.exit_code,
            },
        );
    }

    /// The simulated command exits with `exit_code`: TASK_FINISHED for 0,
    /// TASK_FAILED otherwise (`src/launcher/executor.cpp` `reaped`), unless
    /// the task has ended or is being killed meanwhile.
    pub(crate) fn simulated_exit(
        &mut self,
        framework_id: &str,
        task_id: &str,
        container_id: &str,
        exit_code: u8,
    ) {
        let Some(task) = self
            .tasks
            .get(&(framework_id.to_string(), task_id.to_string()))
        else {
            return;
        };
        let latest = task.pending.back().map(|s| s.state()).unwrap_or(task.state);
        if task.container_id != container_id
            || is_terminal(latest)
            || latest == TaskState::TaskKilling
        {
            return;
        }
        let state = if exit_code == 0 {
            TaskState::TaskFinished
        } else {
            TaskState::TaskFailed
        };
        let message = command_message(exited_with(exit_code));
        let status = self.executor_status(task, state, Some(&message));
        tracing::info!(%task_id, %message, "simulated command exited");
        self.agent_update(framework_id, task_id, status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_are_worded_like_wstringify() {
        assert_eq!(command_message(0), "Command exited with status 0");
        assert_eq!(
            command_message(exited_with(3)),
            "Command exited with status 3"
        );
        assert_eq!(
            command_message(libc::SIGTERM),
            "Command terminated with signal Terminated"
        );
        assert_eq!(
            command_message(libc::SIGKILL),
            "Command terminated with signal Killed"
        );
        assert_eq!(
            command_message(libc::SIGSEGV | 0x80),
            "Command terminated with signal Segmentation fault (core dumped)"
        );
    }
}
