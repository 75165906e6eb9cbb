//! Each instance's restart backoff: how long a failed instance waits
//! before its next launch, what forgives its failures, and how a new leader
//! rebuilds the counts from the task records. Pure, over `Instant`s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use super::workload::counts_as_failure_of;
use crate::backoff::Backoff;
use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::spec::service::ServiceSpec;

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
///
/// The instances with a failure counted are indexed apart (`failed`): only
/// they can show failures or wait for a launch (a wait is set with a
/// failure and cleared with the count), and the summaries a snapshot
/// shows at every step ([`ServiceBackoff::failing`],
/// [`ServiceBackoff::failures_at`], [`ServiceBackoff::next_launch`]) read
/// only them. Every instance that ran keeps its clock here, so walking all
/// of them cost a 10,000-instance service 10,000 entries three times per
/// snapshot, light ones (a command's answer) included
/// (`docs/benchmarks.md`, *A follower that catches up*).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceBackoff {
    instances: BTreeMap<u32, RestartBackoff>,
    /// The instances whose `failures` is not zero.
    failed: BTreeSet<u32>,
}

impl ServiceBackoff {
    /// [`RestartBackoff::running`] for instance `instance` (created clean
    /// when it had no backoff).
    pub fn running(&mut self, instance: u32, task_id: &TaskId, healthy: bool, now: Instant) {
        self.instances
            .entry(instance)
            .or_default()
            .running(task_id, healthy, now);
    }

    /// [`RestartBackoff::terminal`] for instance `instance` (created clean
    /// when it had no backoff).
    pub fn terminal(
        &mut self,
        spec: &ServiceSpec,
        instance: u32,
        task_id: &str,
        failed: bool,
        now: Instant,
    ) {
        let backoff = self.instances.entry(instance).or_default();
        backoff.terminal(spec, task_id, failed, now);
        if backoff.failures > 0 {
            self.failed.insert(instance);
        } else {
            self.failed.remove(&instance);
        }
    }

    /// Instance `instance`'s backoff, if it has one.
    pub fn instance(&self, instance: u32) -> Option<&RestartBackoff> {
        self.instances.get(&instance)
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

    /// The backoffs of the instances `spec` runs (`0..instances`) that have
    /// a failure counted: one kept for an instance a scale-down removed is
    /// not shown or counted, and applies again if a scale-up brings the
    /// instance back. The others show no failure and no wait.
    fn current<'a>(
        &'a self,
        spec: &ServiceSpec,
    ) -> impl Iterator<Item = (u32, &'a RestartBackoff)> + 'a {
        self.failed
            .range(..spec.instances)
            .filter_map(|i| Some((*i, self.instances.get(i)?)))
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
            if backoff.failures > 0 {
                out.failed.insert(instance);
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
    use crate::mesos::v1::task_status;

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
        b.terminal(&s, 2, "web.2.a", true, t0);
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

    /// The summaries read the instances with a failure counted, and an
    /// instance leaves them when a stable run forgives it: 1,000 running
    /// instances with clocks only show nothing.
    #[test]
    fn the_summaries_read_only_the_instances_with_failures() {
        let s = spec(1_000);
        let t0 = Instant::now();
        let mut b = ServiceBackoff::default();
        for i in 0..1_000 {
            b.running(i, &TaskId::from(format!("web.{i}").as_str()), true, t0);
        }
        assert_eq!(b.failures_at(&s, t0), 0);
        assert!(b.failing(&s, t0).is_empty());
        assert_eq!(b.next_launch(&s, t0), None);
        assert!(b.failed.is_empty(), "{:?}", b.failed);
        // Instance 7's running task fails after 2 s: it backs off.
        let t1 = t0 + Duration::from_secs(2);
        b.terminal(&s, 7, "web.7", true, t1);
        assert_eq!(b.failing(&s, t1), [(7, 1, Duration::from_secs(1))]);
        assert_eq!(b.failed.iter().copied().collect::<Vec<_>>(), [7]);
        // Its next task runs stably, then is killed on request: the count
        // is forgiven and the instance leaves the index.
        let t2 = t1 + Duration::from_secs(1);
        b.running(7, &"web.7.b".into(), true, t2);
        let t3 = t2 + MIN_STABLE_RUN;
        b.terminal(&s, 7, "web.7.b", false, t3);
        assert!(b.failed.is_empty(), "{:?}", b.failed);
        assert_eq!(b.instance(7).map(|r| r.failures), Some(0));
        assert!(b.failing(&s, t3).is_empty());
    }

    /// One step of [`the_summaries_equal_a_walk_of_every_instance`].
    #[derive(Debug, Clone)]
    enum Op {
        Running(u32, bool),
        Terminal(u32, bool),
        Cap(u64),
        Wait(u64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u32..6, any::<bool>()).prop_map(|(i, h)| Op::Running(i, h)),
            (0u32..6, any::<bool>()).prop_map(|(i, f)| Op::Terminal(i, f)),
            (0u64..8).prop_map(Op::Cap),
            (0u64..15).prop_map(Op::Wait),
        ]
    }

    proptest::proptest! {
        /// Whatever the sequence of runs, ends, caps and waits, the
        /// summaries read from the index equal those of a walk over
        /// every instance's backoff (the reference: the summaries before
        /// the index), at every step and for every instance count shown
        /// (a scale-down hides instances, a scale-up shows them again).
        #[test]
        fn the_summaries_equal_a_walk_of_every_instance(
            ops in proptest::collection::vec(op(), 1..60),
            shown in 1u32..7,
        ) {
            let mut s = spec(6);
            let t0 = Instant::now();
            let mut now = t0;
            let mut b = ServiceBackoff::default();
            let mut n = 0;
            for op in ops {
                match op {
                    Op::Running(i, healthy) => {
                        n += 1;
                        b.running(i, &TaskId::from(format!("web.{i}.{n}").as_str()), healthy, now);
                    }
                    Op::Terminal(i, failed) => {
                        let running = b.instance(i).and_then(|r| r.running_since.clone());
                        let id = running.map_or_else(|| format!("web.{i}.x"), |(id, _)| id.to_string());
                        b.terminal(&s, i, &id, failed, now);
                    }
                    Op::Cap(secs) => b.cap(Duration::from_secs(secs), now),
                    Op::Wait(secs) => now += Duration::from_secs(secs),
                }
                s.instances = shown;
                let every = b.instances.range(..s.instances);
                let failing: Vec<(u32, u32, Duration)> = every
                    .clone()
                    .map(|(i, r)| (*i, r.failures_at(&s, now), r.remaining(now)))
                    .filter(|(_, failures, _)| *failures > 0)
                    .collect();
                let most = every.clone().map(|(_, r)| r.failures_at(&s, now)).max().unwrap_or(0);
                let next = every
                    .filter(|(_, r)| !r.ready(now))
                    .map(|(_, r)| r.remaining(now))
                    .min();
                proptest::prop_assert_eq!(b.failing(&s, now), failing);
                proptest::prop_assert_eq!(b.failures_at(&s, now), most);
                proptest::prop_assert_eq!(b.next_launch(&s, now), next);
                s.instances = 6;
            }
        }
    }
}
