//! Health-gated rolling replacement of a service's tasks after its spec
//! changes (`docs/deployment-strategies.md`): pure rules over task records
//! and the service record ZooKeeper stores
//! ([`ServiceRecord`](crate::scheduler::records::ServiceRecord): the spec,
//! the previous spec and a halted rollout).
//!
//! The rules:
//! - a task is *available* once it is TASK_RUNNING and — when it was
//!   launched with a health check (its own, not the current spec's) — its
//!   executor reported it healthy (`TaskStatus.healthy`,
//!   `docs/health-checks.md` in apache/mesos), and it has stayed so for
//!   the spec's `upgrade.min_healthy`;
//! - the next outdated task (launched from another spec) is killed only
//!   while fewer than `max_unavailable` of the desired instances are not
//!   available, lowest instance first; an outdated task that is *down*
//!   (not RUNNING, or reported unhealthy) is replaced at once, since
//!   killing it costs nothing (this is what lets a rollback replace a
//!   broken release's tasks); one that is healthy but not yet for
//!   `min_healthy` is not down;
//! - a rollout is under way while outdated tasks are live, or — once a
//!   change of shape (or a rollback) began one — until every desired
//!   instance is available; an initial launch or a scale-up replaces
//!   nothing and is no rollout, whatever time it takes;
//! - while a rollout is under way, an instance that stays not available
//!   for longer than `upgrade.deadline` halts it: no more outdated tasks
//!   are killed, so the old instances keep running, until an operator
//!   resumes the rollout or rolls back to the previous spec;
//! - once nothing is outdated and every instance is available (or the
//!   service is scaled to 0), the rollout is complete and a halt clears.
//!
//! The policy is the spec's `upgrade`
//! ([`UpgradePolicy`](crate::scheduler::spec::upgrade::UpgradePolicy)).

use serde::{Deserialize, Serialize};

use super::review::review;
use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::{Halt, TaskRecord, is_live};
use crate::scheduler::spec::ServiceSpec;

/// An operator's action on a service's rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RolloutAction {
    /// Clear the halt: replacing goes on, with a new deadline.
    Resume,
    /// Restore the previous spec (keeping the instance count) while a
    /// rollout is under way or halted; the previous spec is then
    /// forgotten (no toggling back).
    Rollback,
    /// A rolling restart: the restart generation goes up by one, which
    /// outdates every task, and the rollout replaces them all like any
    /// other (Marathon's `POST /v2/apps/{id}/restart`). Refused while a
    /// rollout is under way or halted, and for a service of 0 instances.
    Restart,
}

impl RolloutAction {
    /// `resume`, `rollback` or `restart`.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutAction::Resume => "resume",
            RolloutAction::Rollback => "rollback",
            RolloutAction::Restart => "restart",
        }
    }
}

/// True when `task` of `spec` counts as available at `now` (seconds since
/// the UNIX epoch); see the module docs and [`Judge`].
pub fn is_available(spec: &ServiceSpec, task: &TaskRecord, now: f64) -> bool {
    Judge::new(spec).available(task, now)
}

/// Judges the tasks of one spec: which run it, and which are available.
/// Each task is judged by the health check *it* was launched with
/// ([`TaskRecord::launched_checked`]): a task launched without one is
/// available once RUNNING for `min_healthy` — adding a check to a service
/// must not make its old tasks wait for reports they can never send.
pub struct Judge<'a> {
    spec: &'a ServiceSpec,
    fingerprint: String,
    /// `fingerprint` as the number its 16 bytes make, when it has 16 (a
    /// [`ServiceSpec::fingerprint`] is 16 hex digits): see
    /// [`Judge::is_current`].
    key: Option<u128>,
    min_healthy: f64,
}

/// The 16 bytes of a fingerprint as one number, or `None` for any other
/// length. Equal numbers are equal bytes.
fn fingerprint_key(fingerprint: &str) -> Option<u128> {
    let bytes: [u8; 16] = fingerprint.as_bytes().try_into().ok()?;
    Some(u128::from_ne_bytes(bytes))
}

impl<'a> Judge<'a> {
    /// A judge of `spec`'s tasks.
    pub fn new(spec: &'a ServiceSpec) -> Judge<'a> {
        let fingerprint = spec.fingerprint();
        Judge {
            spec,
            key: fingerprint_key(&fingerprint),
            fingerprint,
            min_healthy: spec.upgrade_policy().min_healthy.as_secs_f64(),
        }
    }

    /// True when `task` runs the spec (same fingerprint).
    ///
    /// The scheduling pass asks this of every record of a service each
    /// time it reads one, and a string comparison is a call to `memcmp`
    /// (it was the largest item of the pass's profile at 100,000 tasks):
    /// two fingerprints of 16 bytes are compared as two numbers instead,
    /// inline. Other lengths (never a current spec's) compare as strings.
    pub fn is_current(&self, task: &TaskRecord) -> bool {
        match (self.key, fingerprint_key(&task.fingerprint)) {
            (Some(ours), Some(theirs)) => ours == theirs,
            _ => task.fingerprint == self.fingerprint,
        }
    }

    /// True when `task` counts as available at `now` (seconds since the
    /// UNIX epoch).
    pub fn available(&self, task: &TaskRecord, now: f64) -> bool {
        self.available_if(task, || self.is_current(task), now)
    }

    /// [`Judge::available`] where the caller already knows whether `task`
    /// runs the spec (`runs_current`, asked only of a record from before
    /// [`TaskRecord::health_checked`]).
    pub(super) fn available_if(
        &self,
        task: &TaskRecord,
        runs_current: impl FnOnce() -> bool,
        now: f64,
    ) -> bool {
        if !is_live(task) || task.state != TaskState::TaskRunning || task.healthy == Some(false) {
            return false;
        }
        let checked = task.launched_checked_if(runs_current, self.spec.health_check.is_some());
        let since = if checked {
            if task.healthy != Some(true) {
                return false;
            }
            task.healthy_since.or_else(|| task.running_since())
        } else {
            task.running_since()
        };
        since.is_some_and(|s| now - s >= self.min_healthy)
    }

    /// Which of a service's live tasks a scale-down kills first (lowest
    /// first): reported unhealthy, then not RUNNING yet, then running
    /// the current spec but not yet available (an unproven release),
    /// then any other not available, then the available ones.
    pub fn kill_rank(&self, task: &TaskRecord, now: f64) -> u8 {
        if task.healthy == Some(false) {
            0
        } else if task.state != TaskState::TaskRunning {
            1
        } else if self.available(task, now) {
            4
        } else if self.is_current(task) {
            2
        } else {
            3
        }
    }
}

/// A rollout as the snapshot shows it (present while one is under way or
/// halted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RolloutStatus {
    /// Desired instances.
    pub desired: u32,
    /// Instances whose task runs the current spec.
    pub replaced: u32,
    /// Of those, the available ones (healthy for `min_healthy`).
    pub healthy: u32,
    /// Live tasks still on another spec.
    pub remaining: u32,
    /// Set while halted.
    pub halted: Option<Halt>,
}

/// True when a live `task` serves nothing: not RUNNING, or its health
/// check last reported it unhealthy.
pub fn is_down(task: &TaskRecord) -> bool {
    task.state != TaskState::TaskRunning || task.healthy == Some(false)
}

/// Where a service's rollout stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Progress {
    /// Desired instances whose task runs the current spec.
    pub replaced: u32,
    /// Of those, the available ones.
    pub healthy: u32,
    /// Live tasks still running another spec.
    pub remaining: u32,
    /// Desired instances not available (no task, or its task not yet
    /// available), ascending.
    pub unavailable: Vec<u32>,
}

impl Progress {
    /// True while a rollout is under way: outdated tasks remain, or
    /// `rolling_out` (the stored record says a change of shape or a
    /// rollback began one, [`ServiceRecord::rolling_out`](crate::scheduler::records::ServiceRecord::rolling_out)) and a desired
    /// instance is not available yet. An initial launch or a scale-up
    /// (nothing outdated, no rollout begun) is none, however long it takes.
    pub fn under_way(&self, rolling_out: bool) -> bool {
        self.remaining > 0 || (rolling_out && !self.unavailable.is_empty())
    }

    /// True when nothing is outdated and every desired instance is
    /// available: nothing changes with time alone, and a rollout (if any)
    /// is complete.
    pub fn complete(&self) -> bool {
        self.remaining == 0 && self.unavailable.is_empty()
    }
}

/// The rollout's progress of `spec` over its tasks (any order; other
/// services' tasks are ignored) at `now` (seconds since the UNIX epoch): a
/// view of [`review`](super::review::review).
pub fn progress<'a>(
    spec: &ServiceSpec,
    tasks: impl IntoIterator<Item = &'a TaskRecord>,
    now: f64,
) -> Progress {
    let own = tasks.into_iter().filter(|t| t.service == spec.name);
    review(spec, own, |_| true, now).progress
}

/// The next outdated task of `spec` to kill, if any (see the module docs);
/// `halted` rollouts kill only outdated tasks that are not available. A
/// view of [`review`](super::review::review)
/// ([`Review::replacement`](super::review::Review::replacement)).
pub fn next_replacement<'a>(
    spec: &ServiceSpec,
    tasks: impl IntoIterator<Item = &'a TaskRecord>,
    max_unavailable: u32,
    halted: bool,
    now: f64,
) -> Option<TaskId> {
    let own = tasks.into_iter().filter(|t| t.service == spec.name);
    review(spec, own, |_| true, now).replacement(max_unavailable, halted)
}

/// The reason a rollout halts, when an instance has been unavailable past
/// the deadline: `unavailable_since` is when the rollout last saw every
/// instance available, or began; `rolling_out` as in
/// [`Progress::under_way`].
pub fn overdue(
    spec: &ServiceSpec,
    progress: &Progress,
    rolling_out: bool,
    unavailable_since: f64,
    now: f64,
) -> Option<String> {
    let policy = spec.upgrade_policy();
    if !progress.under_way(rolling_out) || progress.unavailable.is_empty() {
        return None;
    }
    if now - unavailable_since < policy.deadline.as_secs_f64() {
        return None;
    }
    let instances: Vec<String> = progress
        .unavailable
        .iter()
        .take(5)
        .map(u32::to_string)
        .collect();
    let what = if spec.health_check.is_some() {
        "RUNNING and healthy"
    } else {
        "RUNNING"
    };
    Some(format!(
        "instance(s) {} not {what} for {} within the deadline of {}",
        instances.join(", "),
        humantime::format_duration(policy.min_healthy),
        humantime::format_duration(policy.deadline),
    ))
}

#[cfg(test)]
mod tests;
