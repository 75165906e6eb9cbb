//! Comparing the desired workload with the tasks the scheduler knows: which
//! instances are missing, which tasks are surplus, and each instance's
//! restart backoff. Pure functions over task records.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::review::review;
use crate::backoff::Backoff;
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
    /// Live tasks in TASK_RUNNING.
    pub running: u32,
    /// Live tasks not running yet (STAGING, STARTING).
    pub starting: u32,
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

/// One instance's restart backoff (a service's instance number): after a
/// task of the instance fails, the instance's next launch waits
/// `restart_backoff × 2^(failures-1)`, capped at `restart_backoff_max`.
///
/// The count belongs to the instance, not to the service: a crash-looping
/// instance keeps backing off while its siblings run, and the siblings
/// launch without waiting for it.
///
/// Failures are forgiven only by a *stable run* of the instance itself: one
/// of its tasks stayed TASK_RUNNING — and, when it was launched with a
/// health check, reported healthy — without a break for
/// [`stable_run`]`(spec)` (`restart_backoff_max`, at least
/// [`MIN_STABLE_RUN`]). Reaching RUNNING alone proves nothing, since an
/// executor reports RUNNING as soon as the command starts, before a
/// crash-looping command exits; a task that reports unhealthy (or, with a
/// check, has not reported healthy yet) is not running stably, and its
/// clock starts again at its next healthy report. Nothing else forgives:
/// not a sibling's run, another service's change, a reconciliation answer
/// (a repeated RUNNING keeps the time first seen) or a scale change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestartBackoff {
    /// Consecutive failed tasks of the instance.
    pub failures: u32,
    /// No launch of the instance before this.
    pub not_before: Option<Instant>,
    /// The instance's task now running stably-so-far (RUNNING, and healthy
    /// when checked), with the time it became so.
    running_since: Option<(TaskId, Instant)>,
}

/// The shortest run that forgives an instance's failures, whatever its
/// service's `restart_backoff_max`.
pub const MIN_STABLE_RUN: Duration = Duration::from_secs(10);

/// How long an instance's task must run healthy to forgive the instance's
/// failures: `restart_backoff_max`, at least [`MIN_STABLE_RUN`].
pub fn stable_run(spec: &ServiceSpec) -> Duration {
    spec.restart_backoff_max.max(MIN_STABLE_RUN)
}

/// Is `record` (TASK_RUNNING) fit to count towards a stable run: healthy
/// when it was launched with a health check, not reported unhealthy
/// otherwise (records from before `health_checked` was kept).
pub fn runs_healthy(record: &TaskRecord) -> bool {
    match record.health_checked {
        Some(true) => record.healthy == Some(true),
        _ => record.healthy != Some(false),
    }
}

impl RestartBackoff {
    /// The instance's task `task_id` is TASK_RUNNING at `now`, `healthy`
    /// as [`runs_healthy`] says. Repeated healthy updates (reconciliation,
    /// a new leader adopting the task) keep the first time seen; an
    /// unhealthy one stops the clock. A second live task of the instance
    /// (a duplicate) does not take over a running clock.
    pub fn running(&mut self, task_id: &TaskId, healthy: bool, now: Instant) {
        let same =
            |since: &Option<(TaskId, Instant)>| since.as_ref().is_some_and(|(id, _)| id == task_id);
        if !healthy {
            if same(&self.running_since) {
                self.running_since = None;
            }
        } else if self.running_since.is_none() {
            self.running_since = Some((task_id.clone(), now));
        }
    }

    /// The instance's task `task_id` reached a terminal state at `now`;
    /// `failed` says whether it was the task's own failure (see
    /// [`counts_as_failure_of`]), which lengthens the backoff.
    pub fn terminal(&mut self, spec: &ServiceSpec, task_id: &str, failed: bool, now: Instant) {
        if self.has_stable_run(spec, now) {
            self.failures = 0;
            self.not_before = None;
        }
        if self
            .running_since
            .as_ref()
            .is_some_and(|(id, _)| id.as_str() == task_id)
        {
            self.running_since = None;
        }
        if !failed {
            return;
        }
        self.failures = self.failures.saturating_add(1);
        let delay = Backoff::nth(
            spec.restart_backoff,
            spec.restart_backoff_max,
            self.failures - 1,
        );
        self.not_before = Some(now + delay);
    }

    /// Consecutive failures as of `now`: zero once the instance has run
    /// stably.
    pub fn failures_at(&self, spec: &ServiceSpec, now: Instant) -> u32 {
        if self.has_stable_run(spec, now) {
            0
        } else {
            self.failures
        }
    }

    /// May the instance launch at `now`?
    pub fn ready(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|t| now >= t)
    }

    /// Shortens a wait under way to at most `max` from `now` (a lowered
    /// `restart_backoff_max`); the count stays.
    pub fn cap(&mut self, max: Duration, now: Instant) {
        if let Some(t) = self.not_before.as_mut() {
            *t = (*t).min(now + max);
        }
    }

    /// Time left before the instance may launch.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.not_before
            .map(|t| t.saturating_duration_since(now))
            .unwrap_or_default()
    }

    fn has_stable_run(&self, spec: &ServiceSpec, now: Instant) -> bool {
        self.running_since
            .as_ref()
            .is_some_and(|(_, since)| now.saturating_duration_since(*since) >= stable_run(spec))
    }
}

/// The restart backoffs of one service's instances, by instance number.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceBackoff {
    instances: BTreeMap<u32, RestartBackoff>,
}

impl ServiceBackoff {
    /// Instance `instance`'s backoff, created clean when it had none.
    pub fn instance(&mut self, instance: u32) -> &mut RestartBackoff {
        self.instances.entry(instance).or_default()
    }

    /// May instance `instance` launch at `now`?
    pub fn ready(&self, instance: u32, now: Instant) -> bool {
        self.instances.get(&instance).is_none_or(|b| b.ready(now))
    }

    /// [`RestartBackoff::cap`] for every instance.
    pub fn cap(&mut self, max: Duration, now: Instant) {
        for backoff in self.instances.values_mut() {
            backoff.cap(max, now);
        }
    }

    /// The backoffs of the instances `spec` runs (`0..instances`): one kept
    /// for an instance a scale-down removed is not shown or counted, and
    /// applies again if a scale-up brings the instance back.
    fn current<'a>(
        &'a self,
        spec: &ServiceSpec,
    ) -> impl Iterator<Item = (u32, &'a RestartBackoff)> + 'a {
        self.instances.range(..spec.instances).map(|(i, b)| (*i, b))
    }

    /// The instances with failures not forgiven at `now`, ascending, with
    /// their count and the time left before each may launch (zero when it
    /// may).
    pub fn failing(&self, spec: &ServiceSpec, now: Instant) -> Vec<(u32, u32, Duration)> {
        self.current(spec)
            .map(|(i, b)| (i, b.failures_at(spec, now), b.remaining(now)))
            .filter(|(_, failures, _)| *failures > 0)
            .collect()
    }

    /// The most consecutive failures of any instance at `now`.
    pub fn failures_at(&self, spec: &ServiceSpec, now: Instant) -> u32 {
        self.current(spec)
            .map(|(_, b)| b.failures_at(spec, now))
            .max()
            .unwrap_or(0)
    }

    /// The soonest time an instance in backoff at `now` may launch.
    pub fn next_launch(&self, spec: &ServiceSpec, now: Instant) -> Option<Duration> {
        self.current(spec)
            .filter(|(_, b)| !b.ready(now))
            .map(|(_, b)| b.remaining(now))
            .min()
    }

    /// True when no instance has a backoff.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// Rebuilds the backoffs of `spec`'s instances from the task records a
    /// new leader loads (any order; other services' records are ignored),
    /// so that a leader change forgives no failure. `now` is the machine's
    /// time for `now_unix` (seconds since the UNIX epoch), which maps the
    /// records' times onto it.
    ///
    /// Per instance, from its newest task back: a task that failed
    /// ([`counts_as_failure_of`], and no kill was requested) counts; a
    /// task of an older release (another fingerprint) ends the count, as
    /// a new release forgives the old one's failures; so does a task that
    /// ran stably ([`stable_run`]) before it ended (it still counts when it
    /// then failed, as [`RestartBackoff::terminal`] does). Other ends (a
    /// requested kill, a loss) neither count nor forgive. The instance
    /// waits from its newest failure's end for the delay of its count. A
    /// live task that is running healthy keeps its clock, so its stable
    /// run forgives as it would have under the previous leader.
    ///
    /// Limits: only the records still stored count. Terminal records are
    /// deleted after `terminal_retention` (an hour by default), so failures
    /// older than that are forgiven, and a task's timeline keeps its last
    /// [`TIMELINE_LEN`](crate::scheduler::records::TIMELINE_LEN) updates, so
    /// a run whose start fell off it is timed from its oldest kept update.
    pub fn from_records<'a>(
        spec: &ServiceSpec,
        records: impl IntoIterator<Item = &'a TaskRecord>,
        now: Instant,
        now_unix: f64,
    ) -> ServiceBackoff {
        let at = |unix: f64| {
            let ago = now_unix - unix;
            if ago >= 0.0 {
                now.checked_sub(Duration::try_from_secs_f64(ago).unwrap_or(Duration::MAX))
                    .unwrap_or(now)
            } else {
                now + Duration::try_from_secs_f64(-ago).unwrap_or_default()
            }
        };
        let fingerprint = spec.fingerprint();
        let mut by_instance: BTreeMap<u32, Vec<&TaskRecord>> = BTreeMap::new();
        for record in records.into_iter().filter(|r| r.service == spec.name) {
            by_instance.entry(record.instance).or_default().push(record);
        }
        let stable = stable_run(spec).as_secs_f64();
        let mut out = ServiceBackoff::default();
        for (instance, mut tasks) in by_instance {
            // Newest first.
            tasks.sort_by(|a, b| b.launched_at.total_cmp(&a.launched_at));
            let mut backoff = RestartBackoff::default();
            let mut newest_failure: Option<f64> = None;
            for (i, task) in tasks.iter().enumerate() {
                if task.fingerprint != fingerprint {
                    break;
                }
                let run = healthy_run(task);
                if !task.is_terminal() {
                    // Only the newest live task keeps a clock (a duplicate
                    // does not take over a running one).
                    if i == 0
                        && let Some(since) = run.current
                    {
                        backoff.running_since = Some((task.task_id.clone(), at(since)));
                    }
                    continue;
                }
                let ended = task.timeline.last().map_or(task.updated_at, |e| e.at);
                if task.kill.is_none() && counts_as_failure_of(task) {
                    backoff.failures = backoff.failures.saturating_add(1);
                    newest_failure.get_or_insert(ended);
                }
                let ran_stably = run.longest >= stable
                    || run.current.is_some_and(|since| ended - since >= stable);
                if ran_stably {
                    break;
                }
            }
            if let Some(ended) = newest_failure {
                let delay = Backoff::nth(
                    spec.restart_backoff,
                    spec.restart_backoff_max,
                    backoff.failures - 1,
                );
                backoff.not_before = Some(at(ended) + delay);
            }
            if backoff.failures > 0 || backoff.running_since.is_some() {
                out.instances.insert(instance, backoff);
            }
        }
        out
    }
}

/// A task's healthy running per its timeline (seconds since the UNIX
/// epoch): the longest stretch that ended before its last update, and the
/// one still going at it, if any.
struct HealthyRun {
    longest: f64,
    current: Option<f64>,
}

/// Reads `record`'s timeline as [`RestartBackoff::running`] would have
/// seen it: RUNNING and [`runs_healthy`] starts or keeps the clock, an
/// unhealthy report stops it, a terminal update ends it.
fn healthy_run(record: &TaskRecord) -> HealthyRun {
    let checked = record.health_checked == Some(true);
    let mut health: Option<bool> = None;
    let mut run = HealthyRun {
        longest: 0.0,
        current: None,
    };
    for entry in &record.timeline {
        if entry.healthy.is_some() {
            health = entry.healthy;
        }
        let healthy = if checked {
            health == Some(true)
        } else {
            health != Some(false)
        };
        match entry.state {
            TaskState::TaskRunning if healthy => {
                run.current.get_or_insert(entry.at);
            }
            TaskState::TaskRunning => {
                if let Some(since) = run.current.take() {
                    run.longest = run.longest.max(entry.at - since);
                }
            }
            _ => {}
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(instances: u32) -> ServiceSpec {
        serde_json::from_value(
            serde_json::json!({"name": "web", "command": "x", "cpus": 0.1, "mem": 32,
            "instances": instances, "restart_backoff": "1s", "restart_backoff_max": "5s"}),
        )
        .unwrap()
    }

    fn task(id: &str, instance: u32, state: &str, launched_at: f64) -> TaskRecord {
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

    #[test]
    fn backoff_doubles_to_its_cap() {
        let s = spec(1);
        let t0 = Instant::now();
        let mut b = RestartBackoff::default();
        assert!(b.ready(t0));
        let delays: Vec<u64> = (0..5)
            .map(|i| {
                b.terminal(&s, &format!("t{i}"), true, t0);
                b.remaining(t0).as_secs()
            })
            .collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert!(!b.ready(t0));
        b.terminal(&s, "killed", false, t0);
        assert_eq!(b.failures, 5, "kills and losses are not failures");
    }

    #[test]
    fn a_crash_loop_that_reports_running_keeps_backing_off() {
        let s = spec(1);
        let t0 = Instant::now();
        let mut b = RestartBackoff::default();
        let mut at = t0;
        let mut delays = vec![];
        for i in 0..4 {
            let id = format!("t{i}");
            b.running(&TaskId::from(id.as_str()), true, at);
            at += Duration::from_millis(200);
            b.terminal(&s, &id, true, at);
            delays.push(b.remaining(at).as_secs());
            at += b.remaining(at);
        }
        assert_eq!(delays, [1, 2, 4, 5]);
        assert_eq!(b.failures_at(&s, at), 4);
    }

    #[test]
    fn a_stable_run_forgives_failures() {
        let s = spec(1); // restart_backoff_max 5s, so MIN_STABLE_RUN (10s) rules
        let t0 = Instant::now();
        let mut b = RestartBackoff::default();
        b.terminal(&s, "a", true, t0);
        b.terminal(&s, "b", true, t0);
        b.running(&"c".into(), true, t0);
        let early = t0 + Duration::from_secs(9);
        assert_eq!(b.failures_at(&s, early), 2);
        let late = t0 + MIN_STABLE_RUN;
        assert_eq!(b.failures_at(&s, late), 0);
        b.terminal(&s, "c", true, late);
        assert_eq!(b.failures, 1, "the long run reset the count first");
        assert_eq!(b.remaining(late).as_secs(), 1);
    }

    #[test]
    fn a_scaled_away_instance_is_not_shown_and_a_lowered_cap_shortens_a_wait() {
        let t0 = Instant::now();
        let mut s = spec(3);
        s.restart_backoff = Duration::from_secs(60);
        s.restart_backoff_max = Duration::from_secs(600);
        let mut b = ServiceBackoff::default();
        b.instance(2).terminal(&s, "web.2.a", true, t0);
        assert_eq!(b.failures_at(&s, t0), 1);
        assert_eq!(b.next_launch(&s, t0), Some(Duration::from_secs(60)));
        // Scaled to 2: instance 2 is gone from the view, its count kept.
        s.instances = 2;
        assert_eq!(b.failures_at(&s, t0), 0);
        assert!(b.failing(&s, t0).is_empty());
        assert_eq!(b.next_launch(&s, t0), None);
        s.instances = 3;
        assert_eq!(b.failing(&s, t0), [(2, 1, Duration::from_secs(60))]);
        // A lowered maximum: at most 2 s more from the change.
        let later = t0 + Duration::from_secs(5);
        b.cap(Duration::from_secs(2), later);
        assert_eq!(b.next_launch(&s, later), Some(Duration::from_secs(2)));
        assert_eq!(b.failures_at(&s, later), 1);
    }

    #[test]
    fn an_unhealthy_report_stops_the_stable_run_clock() {
        let s = spec(1);
        let t0 = Instant::now();
        let mut b = RestartBackoff::default();
        b.terminal(&s, "a", true, t0);
        let c = TaskId::from("c");
        b.running(&c, true, t0);
        b.running(&c, false, t0 + Duration::from_secs(5));
        let late = t0 + MIN_STABLE_RUN;
        assert_eq!(b.failures_at(&s, late), 1, "unhealthy at 5 s");
        b.running(&c, true, late);
        assert_eq!(b.failures_at(&s, late + Duration::from_secs(9)), 1);
        assert_eq!(b.failures_at(&s, late + MIN_STABLE_RUN), 0);
        // A duplicate's healthy report does not restart a running clock.
        b.running(&TaskId::from("dup"), true, late + MIN_STABLE_RUN);
        assert_eq!(b.failures_at(&s, late + MIN_STABLE_RUN), 0);
    }

    /// A terminal record of instance `instance` of `spec(1)`'s release:
    /// launched at `at`, RUNNING (healthy) from `at + 1` for `ran` s, then
    /// `end` (`TASK_FAILED` counts, `TASK_KILLED` alone does not).
    fn ended(id: &str, instance: u32, at: f64, ran: f64, end: &str) -> TaskRecord {
        use crate::scheduler::StatusEntry;
        let entry = |at: f64, state: &str| StatusEntry {
            at,
            state: TaskState::from_str_name(state).unwrap(),
            source: Some(task_status::Source::Executor),
            reason: None,
            message: None,
            healthy: None,
        };
        let mut t = task(id, instance, end, at);
        t.fingerprint = spec(1).fingerprint();
        t.timeline = vec![entry(at + 1.0, "TASK_RUNNING"), entry(at + 1.0 + ran, end)];
        t.updated_at = at + 1.0 + ran;
        t
    }

    #[test]
    fn a_new_leader_rebuilds_each_instance_s_backoff_from_its_records() {
        let s = spec(3); // 1 s doubling to 5 s; a stable run is 10 s
        let now = Instant::now();
        let now_unix = 993.0;
        let records = [
            // Instance 0: three failures after a stable run (which itself
            // failed: it counts, then the count stops).
            ended("a0", 0, 900.0, 30.0, "TASK_FAILED"),
            ended("a1", 0, 940.0, 0.5, "TASK_FAILED"),
            ended("a2", 0, 950.0, 0.5, "TASK_FAILED"),
            // A kill the scheduler asked for neither counts nor forgives.
            TaskRecord {
                kill: Some(crate::scheduler::KillRequest {
                    reason: "x".into(),
                    requested_at: 0.0,
                    attempts: 1,
                }),
                ..ended("a3", 0, 960.0, 0.5, "TASK_KILLED")
            },
            ended("a4", 0, 990.0, 0.5, "TASK_FAILED"),
            // Instance 1: a stable run in the middle resets the count.
            ended("b0", 1, 900.0, 0.5, "TASK_FAILED"),
            ended("b1", 1, 910.0, 20.0, "TASK_KILLED"),
            ended("b2", 1, 980.0, 0.5, "TASK_FAILED"),
        ];
        let b = ServiceBackoff::from_records(&s, &records, now, now_unix);
        let at_now = b.failing(&s, now);
        // a4 ended at 991.5: 4 failures wait 5 s (capped), 3.5 s left.
        // b2 ended at 981.5: 1 failure waits 1 s, over by now.
        assert_eq!(at_now.len(), 2);
        assert_eq!((at_now[0].0, at_now[0].1), (0, 4));
        assert_eq!(at_now[0].2, Duration::from_millis(3500));
        assert_eq!((at_now[1].0, at_now[1].1), (1, 1));
        assert!(b.ready(1, now) && !b.ready(0, now));
        // Instance 2 has no records: clean.
        assert!(b.ready(2, now));
        assert_eq!(b.instances.len(), 2);
    }

    #[test]
    fn a_rebuilt_backoff_skips_older_releases_and_counts_tasks_that_never_started() {
        use crate::scheduler::StatusEntry;
        let s = spec(1);
        let now = Instant::now();
        let old = TaskRecord {
            fingerprint: "older release".into(),
            ..ended("o", 0, 800.0, 0.5, "TASK_FAILED")
        };
        // Its executor terminated before the task started.
        let mut never = ended("n", 0, 990.0, 0.0, "TASK_FAILED");
        never.timeline = vec![StatusEntry {
            at: 995.0,
            state: TaskState::TaskFailed,
            source: Some(task_status::Source::Agent),
            reason: Some(task_status::Reason::ExecutorTerminated),
            message: None,
            healthy: None,
        }];
        let b = ServiceBackoff::from_records(&s, [&old, &never], now, 1000.0);
        assert_eq!(b.failing(&s, now), [(0, 1, Duration::ZERO)]);
        // Only the older release's failures: forgiven.
        let b = ServiceBackoff::from_records(&s, [&old], now, 1000.0);
        assert!(b.is_empty());
        // Another service's records are not this one's.
        let other = TaskRecord {
            service: "db".into(),
            ..never.clone()
        };
        assert!(ServiceBackoff::from_records(&s, [&other], now, 1000.0).is_empty());
    }

    #[test]
    fn a_rebuilt_backoff_keeps_a_running_task_s_clock() {
        let s = spec(1);
        let now = Instant::now();
        let failed = ended("f", 0, 900.0, 0.5, "TASK_FAILED");
        let mut live = ended("l", 0, 950.0, 0.0, "TASK_RUNNING");
        live.timeline.truncate(1); // RUNNING since 951
        let b = ServiceBackoff::from_records(&s, [&failed, &live], now, 955.0);
        assert_eq!(b.failures_at(&s, now), 1, "4 s of 10");
        assert_eq!(b.failures_at(&s, now + Duration::from_secs(6)), 0);
    }
}
