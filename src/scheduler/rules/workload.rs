//! Comparing the desired workload with the tasks the scheduler knows: which
//! instances are missing, which tasks are surplus, and which ends count as
//! a task's failure (the restart backoff, [`super::restart`], counts them).
//! Pure functions over task records.

use super::review::review;
use crate::mesos::v1::{TaskState, task_status};
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::spec::service::ServiceSpec;

/// What one service needs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Assessment {
    /// Instance numbers with no live task, ascending.
    pub missing: Vec<u32>,
    /// Live tasks to kill, with the reason: a scale-down's (`scaled
    /// down`) or a second live task of one instance (`duplicate of
    /// instance n`, e.g. a lost task whose agent came back after it was
    /// replaced).
    pub surplus: Vec<(TaskId, String)>,
    /// Live tasks a scale-down keeps although their instance number is
    /// beyond the desired count, with the free instance number each takes
    /// (its record is rewritten; its task ID keeps the number it was
    /// launched with).
    pub moves: Vec<(TaskId, u32)>,
    /// Instances whose task (the one live task kept for each, see
    /// [`assess`]) is in TASK_RUNNING.
    pub running: u32,
    /// Instances whose task is not running yet (STAGING, STARTING).
    pub starting: u32,
    /// Instances whose task's health check last reported healthy: the
    /// same tasks as `running` and `starting`, so a task leaving a
    /// draining agent and its replacement count once, as one instance.
    pub healthy: u32,
    /// Instances whose task's health check last reported unhealthy.
    pub unhealthy: u32,
    /// Tasks with a kill requested that are not terminal yet.
    pub killing: u32,
    /// Live tasks in TASK_UNREACHABLE not given up yet (`expunge_after`),
    /// whether still waited for or already replaced
    /// ([`partition::standing`]).
    pub unreachable: u32,
    /// When this assessment changes by time alone (an unreachable task's
    /// wait ends), seconds since the UNIX epoch: the service must be
    /// assessed again then.
    pub wake_at: Option<f64>,
}

/// Assesses `spec` against its tasks (any order; other services' tasks are
/// ignored) at `now` (seconds since the UNIX epoch): a view of
/// [`review`](super::review::review).
///
/// Each instance is counted once, by the one live task kept for it: a
/// running one before a starting one, then the oldest (the others are
/// duplicates, [`Assessment::surplus`]). Its state and health make the
/// `running`, `starting`, `healthy` and `unhealthy` counts, which are
/// therefore all counts of instances.
///
/// A scale-down keeps the best tasks, not the lowest-numbered: the tasks
/// beyond the desired count go in the order of
/// [`Judge::kill_rank`](super::rollout::Judge::kill_rank) — unhealthy
/// first, then not yet RUNNING, then an unproven release's, then any
/// other not available, the highest instance first within each — so a
/// scale-down during a halted rollout kills the broken release's tasks
/// and keeps the healthy old ones. A kept task numbered beyond the count
/// takes a free instance number ([`Assessment::moves`]).
pub fn assess<'a>(
    spec: &ServiceSpec,
    tasks: impl IntoIterator<Item = &'a TaskRecord>,
    now: f64,
) -> Assessment {
    let own = tasks.into_iter().filter(|t| t.service == spec.name);
    review(spec, own, |_| true, now).assessment
}

/// True when a terminal update is the task's own failure, which backs off
/// its service's restarts: it failed, erred or exited. Losses of agents,
/// executors that were told to exit, dropped launches and kills are not the
/// task's fault and are replaced at once.
pub fn counts_as_failure(state: TaskState, reason: Option<task_status::Reason>) -> bool {
    use task_status::Reason as R;
    match state {
        TaskState::TaskError | TaskState::TaskFinished => true,
        TaskState::TaskFailed => !matches!(
            reason,
            Some(
                R::ExecutorTerminated
                    | R::AgentRemoved
                    | R::AgentRestarted
                    | R::AgentDisconnected
                    | R::ContainerPreempted
            )
        ),
        _ => false,
    }
}

/// [`counts_as_failure`] of a terminal task record, which also counts a
/// task its health check killed (TASK_KILLED carrying `healthy = false`,
/// `src/launcher/executor.cpp` in apache/mesos: the scheduler did not ask
/// for it; callers leave out kills they requested), and a
/// task whose executor terminated before the task ever ran: TASK_FAILED
/// with REASON_EXECUTOR_TERMINATED and no TASK_RUNNING in its timeline.
/// Its command never ran — an agent without a containerizer for it reports
/// exactly that ("Abnormal executor termination: unknown container",
/// `src/slave/slave.cpp` executorTerminated), as does an executor that
/// dies at start, TASK_STARTING or not (the command executor sends
/// TASK_STARTING before it forks the command and ABORTs when that fork
/// fails, `src/launcher/executor.cpp` launch) — so a replacement launched
/// at once would fail the same way, in a loop. An executor that exits
/// under a running task (`kamikaze`, a crash) is still not the task's
/// fault.
pub fn counts_as_failure_of(record: &TaskRecord) -> bool {
    let last = record.timeline.last();
    let reason = last.and_then(|e| e.reason);
    let state = record.state;
    if counts_as_failure(state, reason) {
        return true;
    }
    if state == TaskState::TaskKilled && last.is_some_and(|e| e.healthy == Some(false)) {
        return true;
    }
    let ran = record
        .timeline
        .iter()
        .any(|e| e.state == TaskState::TaskRunning);
    state == TaskState::TaskFailed
        && reason == Some(task_status::Reason::ExecutorTerminated)
        && !ran
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A service `web` of `instances`, restart backoff 1 s up to 5 s (the
    /// restart backoff's tests use it too).
    pub(in crate::scheduler::rules) fn spec(instances: u32) -> ServiceSpec {
        serde_json::from_value(
            serde_json::json!({"name": "web", "command": "x", "cpus": 0.1, "mem": 32,
            "instances": instances, "restart_backoff": "1s", "restart_backoff_max": "5s"}),
        )
        .unwrap()
    }

    /// A record of `web`'s instance `instance` in `state`, launched (and
    /// last updated) at `launched_at`.
    pub(in crate::scheduler::rules) fn task(
        id: &str,
        instance: u32,
        state: &str,
        launched_at: f64,
    ) -> TaskRecord {
        TaskRecord {
            instance,
            launched_at,
            updated_at: launched_at,
            ..TaskRecord::sample(id, "web", TaskState::from_str_name(state).unwrap())
        }
    }

    #[test]
    fn missing_instances_surplus_and_counts() {
        let mut killed = task("k", 1, "TASK_RUNNING", 0.0);
        killed.kill = Some(crate::scheduler::KillRequest {
            reason: "x".into(),
            requested_at: 0.0,
            attempts: 1,
        });
        let tasks = [
            task("a", 0, "TASK_RUNNING", 2.0),
            task("b", 0, "TASK_RUNNING", 1.0),
            task("c", 2, "TASK_STARTING", 1.0),
            task("d", 3, "TASK_RUNNING", 1.0),
            task("e", 1, "TASK_FAILED", 1.0),
            killed,
            task("other", 0, "TASK_RUNNING", 1.0),
        ];
        let mut other = tasks[6].clone();
        other.service = "db".into();
        let mut all = tasks.to_vec();
        all[6] = other;
        let a = assess(&spec(3), &all, 0.0);
        // Instance 3 is beyond the count, but three tasks are wanted and
        // three live: it takes the free number 1 instead of dying.
        assert_eq!(a.missing, [] as [u32; 0]);
        assert_eq!(
            a.surplus,
            [(TaskId::from("a"), "duplicate of instance 0".to_string())]
        );
        assert_eq!(a.moves, [(TaskId::from("d"), 1)]);
        assert_eq!((a.running, a.starting, a.killing), (2, 1, 1));
        // Two wanted: the starting task goes, the running one moves.
        let a = assess(&spec(2), &all, 0.0);
        assert!(a.missing.is_empty());
        assert_eq!(a.surplus[1], (TaskId::from("c"), "scaled down".into()));
        assert_eq!(a.moves, [(TaskId::from("d"), 1)]);
    }

    #[test]
    fn a_scale_down_kills_the_worst_tasks_first() {
        let s = spec(2);
        let current = s.fingerprint();
        let old = |id: &str, instance| TaskRecord {
            fingerprint: "old".into(),
            ..task(id, instance, "TASK_RUNNING", 0.0)
        };
        // A halted rollout: instance 0 runs the new spec, unhealthy.
        let broken = TaskRecord {
            fingerprint: current.clone(),
            healthy: Some(false),
            ..task("new", 0, "TASK_RUNNING", 50.0)
        };
        let tasks = [broken.clone(), old("o1", 1), old("o2", 2)];
        let a = assess(&s, &tasks, 100.0);
        assert_eq!(a.surplus, [(TaskId::from("new"), "scaled down".into())]);
        assert_eq!(a.moves, [(TaskId::from("o2"), 0)]);
        assert!(a.missing.is_empty());
        // Unproven (running, not yet for min_healthy) goes before proven,
        // not RUNNING before unproven, unhealthy before all.
        let unproven = TaskRecord {
            healthy: None,
            ..broken.clone()
        };
        let starting = TaskRecord {
            fingerprint: "old".into(),
            ..task("st", 2, "TASK_STARTING", 0.0)
        };
        let order = |tasks: &[TaskRecord], keep: u32| {
            let a = assess(&spec(keep), tasks, 5.0);
            a.surplus
                .into_iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            order(&[unproven.clone(), old("o1", 1), old("o2", 2)], 2),
            ["new"]
        );
        assert_eq!(
            order(&[unproven, old("o1", 1), starting.clone()], 2),
            ["st"]
        );
        let sick = TaskRecord {
            healthy: Some(false),
            ..old("o1", 1)
        };
        assert_eq!(order(&[sick, starting, old("o3", 3)], 2), ["o1"]);
        // All alike: the highest instance goes, as before.
        assert_eq!(
            order(&[old("o1", 0), old("o2", 1), old("o3", 2)], 2),
            ["o3"]
        );
    }

    #[test]
    fn running_beats_starting_for_the_same_instance() {
        let tasks = [
            task("new", 0, "TASK_STARTING", 1.0),
            task("old", 0, "TASK_RUNNING", 5.0),
        ];
        let a = assess(&spec(1), &tasks, 0.0);
        assert_eq!(a.surplus[0].0, "new");
    }

    #[test]
    fn an_executor_that_never_started_its_task_is_a_failure() {
        use crate::scheduler::StatusEntry;
        let entry = |state: &str, reason: Option<&str>| StatusEntry {
            at: 0.0,
            state: TaskState::from_str_name(state).unwrap(),
            source: Some(task_status::Source::Agent),
            reason: reason.and_then(task_status::Reason::from_str_name),
            message: None,
            healthy: None,
        };
        let terminated = Some("REASON_EXECUTOR_TERMINATED");
        let mut never_ran = task("a", 0, "TASK_FAILED", 0.0);
        never_ran.timeline = vec![entry("TASK_FAILED", terminated)];
        assert!(!counts_as_failure(
            TaskState::TaskFailed,
            Some(task_status::Reason::ExecutorTerminated)
        ));
        assert!(counts_as_failure_of(&never_ran));
        let mut kamikaze = never_ran.clone();
        kamikaze.timeline = vec![
            entry("TASK_STARTING", None),
            entry("TASK_RUNNING", None),
            entry("TASK_FAILED", terminated),
        ];
        assert!(!counts_as_failure_of(&kamikaze), "it ran: not its fault");
        let mut aborted_at_start = never_ran.clone();
        aborted_at_start.timeline = vec![
            entry("TASK_STARTING", None),
            entry("TASK_FAILED", terminated),
        ];
        assert!(
            counts_as_failure_of(&aborted_at_start),
            "the executor died before the command ran: a loop unless it backs off"
        );
        let mut launch_failed = never_ran.clone();
        launch_failed.timeline = vec![entry("TASK_FAILED", Some("REASON_CONTAINER_LAUNCH_FAILED"))];
        assert!(counts_as_failure_of(&launch_failed));
        let mut unhealthy = never_ran.clone();
        unhealthy.state = TaskState::TaskKilled;
        unhealthy.timeline = vec![entry("TASK_RUNNING", None), entry("TASK_KILLED", None)];
        assert!(!counts_as_failure_of(&unhealthy), "a plain kill");
        unhealthy.timeline[1].healthy = Some(false);
        assert!(
            counts_as_failure_of(&unhealthy),
            "killed by its health check"
        );
        let mut lost = never_ran.clone();
        lost.timeline = vec![entry("TASK_FAILED", Some("REASON_AGENT_REMOVED"))];
        assert!(!counts_as_failure_of(&lost));
    }
}
