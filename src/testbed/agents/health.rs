//! Health checks of simulated executors. A simulated task with a valid
//! `TaskInfo.health_check` is checked on the check's own timing — the first
//! check `delay_seconds` after its executor started it, the next ones
//! `interval_seconds` apart (`src/checks/checker_process.cpp`) — and each
//! result is interpreted as Mesos' `HealthChecker` does (the shared
//! [`HealthState`], `src/checks/health_checker.cpp`): TASK_RUNNING with
//! `healthy` and REASON_TASK_HEALTH_CHECK_STATUS_UPDATED on a change or a
//! failure, and after `consecutive_failures` failures the executor kills the
//! task: TASK_KILLING (for TASK_KILLING_STATE frameworks), then TASK_KILLED
//! with `healthy = false` (`src/launcher/executor.cpp` taskHealthUpdated
//! and reaped).
//!
//! There is no process to probe, so results come from faults
//! (`POST /testbed/faults/health`): each check takes the health of the last
//! rule matching the task (by task ID prefix and, optionally, a label),
//! `healthy` without one; `flapping` alternates, starting healthy. In
//! process mode `mesos-appliance-executor` runs real checks instead.

use std::time::Instant;

use crate::executor::health::{HealthPolicy, HealthState};
use crate::mesos::v1::{TaskState, task_status};
use crate::testbed::master::faults::SimulatedHealth;
use crate::testbed::master::tasks::Checker;
use crate::testbed::master::tasks::is_terminal;
use crate::testbed::master::{Master, Timer};

impl Master {
    /// Starts checking a simulated task that its executor has just started,
    /// if it has a valid health check (an invalid one is not run, as the
    /// command executor logs and ignores it).
    pub(super) fn start_simulated_checks(&mut self, framework_id: &str, task_id: &str) {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(task) = self.tasks.get_mut(&key) else {
            return;
        };
        let Some(check) = &task.info().health_check else {
            return;
        };
        let Ok(policy) = HealthPolicy::from_proto(check) else {
            return;
        };
        let delay = policy.delay;
        task.checker = Some(Checker {
            state: HealthState::new(&policy, Instant::now()),
            policy,
            checks: 0,
        });
        self.schedule(
            delay,
            Timer::HealthCheck {
                framework_id: framework_id.to_string(),
                task_id: task_id.to_string(),
            },
        );
    }

    /// One simulated check of a task: stops once the task is gone, ending
    /// or being killed; otherwise reports as the executor would and
    /// schedules the next check.
    pub(super) fn simulated_check(&mut self, framework_id: &str, task_id: &str) {
        let key = (framework_id.to_string(), task_id.to_string());
        let health = self.tasks.get(&key).and_then(|task| self.health_for(task));
        let Some(task) = self.tasks.get_mut(&key) else {
            return;
        };
        let latest = task.pending.back().map(|s| s.state()).unwrap_or(task.state);
        if is_terminal(latest) || latest == TaskState::TaskKilling {
            task.checker = None;
        }
        let Some(checker) = task.checker.as_mut() else {
            return;
        };
        let passed = match health.unwrap_or(SimulatedHealth::Healthy) {
            SimulatedHealth::Healthy => true,
            SimulatedHealth::Unhealthy => false,
            SimulatedHealth::Flapping => checker.checks % 2 == 0,
        };
        checker.checks += 1;
        let outcome = if passed {
            Ok(())
        } else {
            Err("simulated failure".to_string())
        };
        let report = checker.state.record(&outcome, Instant::now());
        let interval = checker.policy.interval;
        let task = task.clone();
        if let Some(report) = report {
            let mut status = self.executor_status(&task, TaskState::TaskRunning, None);
            status.reason = Some(task_status::Reason::TaskHealthCheckStatusUpdated as i32);
            status.healthy = Some(report.healthy);
            self.agent_update(framework_id, task_id, status);
            if report.kill {
                tracing::info!(%task_id, "simulated health check failed too often; killing the task");
                if let Some(task) = self.tasks.get_mut(&key) {
                    task.checker = None;
                }
                self.executor_kills(framework_id, &task, true);
                return;
            }
        }
        self.schedule(
            interval,
            Timer::HealthCheck {
                framework_id: framework_id.to_string(),
                task_id: task_id.to_string(),
            },
        );
    }

    /// The health of the last rule matching the task, if any.
    fn health_for(&self, task: &crate::testbed::master::tasks::Task) -> Option<SimulatedHealth> {
        let info = task.info();
        let labels = info.labels.as_ref().map(|l| l.labels.as_slice());
        let has_label = |key: &str, value: &str| {
            labels
                .unwrap_or_default()
                .iter()
                .any(|l| l.key == key && l.value.as_deref().unwrap_or_default() == value)
        };
        self.faults
            .health
            .iter()
            .rev()
            .find(|rule| {
                task.task_id.value.starts_with(&rule.task_id_prefix)
                    && rule
                        .label
                        .as_ref()
                        .is_none_or(|(key, value)| has_label(key, value))
            })
            .map(|rule| rule.health)
    }
}
