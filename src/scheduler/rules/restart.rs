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
mod tests;
