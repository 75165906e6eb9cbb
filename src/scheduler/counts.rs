//! A service's counts and status as the snapshot shows them, computed from
//! its stored records alike by the leader (`core::machine::view`) and by a
//! replica that does not lead (`supervisor`): running and starting tasks,
//! health, rollout progress and halts, and what a rollback would restore.

use serde::{Deserialize, Serialize};

use super::records::{Halt, TaskRecord};
use super::rules::rollout::{self, Progress, RolloutStatus};
use super::rules::workload::assess;
use super::spec::service::ServiceSpec;

/// The spec a rollback restores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RestoreTarget {
    /// Its [`ServiceSpec::fingerprint`].
    pub fingerprint: String,
    /// Its command, image and health check, in one line.
    pub summary: String,
}

impl RestoreTarget {
    /// The target of restoring `spec`.
    pub fn of(spec: &ServiceSpec) -> RestoreTarget {
        let mut summary = spec.command.display();
        if let Some(image) = spec.container.as_ref().and_then(|c| c.image.as_ref()) {
            summary.push_str(&format!("; image {image}"));
        }
        match &spec.health_check {
            Some(check) => summary.push_str(&format!("; {:?} health check", check.kind)),
            None => summary.push_str("; no health check"),
        }
        RestoreTarget {
            fingerprint: spec.fingerprint(),
            summary,
        }
    }
}

/// A service's task counts and rollout progress, from its task records at
/// `now` (seconds since the UNIX epoch): computed alike by the leader and
/// by a replica that does not lead (from the stored records), so both
/// tell the same.
///
/// `running`, `starting`, `healthy` and `unhealthy` count instances, each
/// by the one live task that stands for it
/// ([`assess`](super::rules::workload::assess)): a task leaving a draining
/// agent and its replacement, or a duplicate, count once, so `healthy +
/// unhealthy <= running + starting <= instances`. `killing` and
/// `unreachable` count tasks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceCounts {
    /// Instances whose task is in TASK_RUNNING.
    pub running: u32,
    /// Instances whose task is not running yet.
    pub starting: u32,
    /// Tasks being killed.
    pub killing: u32,
    /// Tasks unreachable and not given up (`rules/partition.rs`).
    pub unreachable: u32,
    /// Instances whose task's health check last reported healthy.
    pub healthy: u32,
    /// Instances whose task's health check last reported unhealthy.
    pub unhealthy: u32,
    /// Where the rollout stands.
    pub progress: Progress,
}

impl ServiceCounts {
    /// The counts of `spec`'s tasks among `tasks` at `now`.
    pub fn of<'a>(
        spec: &ServiceSpec,
        tasks: impl IntoIterator<Item = &'a TaskRecord> + Clone,
        now: f64,
    ) -> ServiceCounts {
        let a = assess(spec, tasks.clone(), now);
        ServiceCounts {
            running: a.running,
            starting: a.starting,
            killing: a.killing,
            unreachable: a.unreachable,
            healthy: a.healthy,
            unhealthy: a.unhealthy,
            progress: rollout::progress(spec, tasks, now),
        }
    }
}

/// A service with its desired and actual task counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ServiceStatus {
    /// The spec.
    pub spec: ServiceSpec,
    /// Instances whose task is in TASK_RUNNING (each instance counts once,
    /// by one live task: a task leaving a draining agent and its
    /// replacement count as one; see [`ServiceCounts`]).
    pub running: u32,
    /// Instances whose task was launched but is not running yet (STAGING,
    /// STARTING).
    pub starting: u32,
    /// Tasks being killed.
    pub killing: u32,
    /// Tasks whose agent is unreachable (TASK_UNREACHABLE), waited for or
    /// already replaced, not yet given up (the service's `unreachable`
    /// policy).
    #[serde(default)]
    pub unreachable: u32,
    /// Consecutive failed tasks of the instance that failed most (each
    /// instance has its own restart backoff).
    pub consecutive_failures: u32,
    /// The soonest time an instance in its restart backoff may launch
    /// again; the others launch meanwhile.
    pub next_launch_after: Option<f64>,
    /// The instances with failures not yet forgiven, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backoff: Vec<InstanceBackoff>,
    /// Why missing instances found no offer in the last scheduling pass, for
    /// operators (e.g. "no offer of the 3 held has enough: needs cpus 64
    /// (largest offer: 4)"); absent when nothing waits.
    #[serde(default)]
    pub waiting: Option<String>,
    /// The service's last failed task (a task that ended as a failure of
    /// its own: not killed by the appliance), this leader's term; absent
    /// when none failed (Marathon's `lastTaskFailure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<LastFailure>,
    /// The offers its missing instances were not launched on, by reason,
    /// since its last launch (Marathon's `processedOffersSummary`); absent
    /// when no offer was passed over since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offers: Option<OffersSummary>,
    /// Instances whose task's health check last reported healthy: the
    /// same unit and tasks as `running` and `starting`, never more than
    /// their sum.
    #[serde(default)]
    pub healthy: u32,
    /// Instances whose task's health check last reported unhealthy.
    #[serde(default)]
    pub unhealthy: u32,
    /// The rollout under way or halted ([`crate::scheduler::rules::rollout`]).
    #[serde(default)]
    pub rollout: Option<RolloutStatus>,
    /// A rollback applies now: a rollout is under way or halted and a
    /// previous spec is stored.
    #[serde(default)]
    pub can_roll_back: bool,
    /// What a rollback would restore, shown before the operator clicks
    /// (present when `can_roll_back`); its `fingerprint` is what
    /// `POST …/rollout/rollback` takes as `expected`.
    #[serde(default)]
    pub restore: Option<RestoreTarget>,
    /// How many rolling restarts were asked for (0: never); stored with
    /// the service, not part of its spec (`POST …/restart`).
    #[serde(default)]
    pub restart_generation: u64,
    /// Tasks launched and not running yet (TASK_STAGING or TASK_STARTING,
    /// no kill requested), every one: a replacement placed beside the task
    /// it replaces (a drain's, a maintenance window's) is counted here,
    /// though `starting` counts its instance once, by the running task.
    #[serde(default)]
    pub starting_tasks: u32,
    /// The last update of the one of them that has been in its state
    /// longest, seconds since the UNIX epoch: what
    /// `--task-launch-timeout` counts from before it is killed and
    /// replaced (`docs/services-pages.md`); absent without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_since: Option<f64>,
}

/// Per service, its tasks among `records` that were launched and are not
/// running yet ([`is_starting`]), every one: how many, and the last update
/// of the one in its state longest ([`ServiceStatus::starting_tasks`],
/// [`ServiceStatus::starting_since`]). One pass over `records`, whichever
/// services they are of.
pub fn starting_by_service<'a>(
    records: impl IntoIterator<Item = &'a TaskRecord>,
) -> std::collections::HashMap<String, (u32, f64)> {
    let mut by_service: std::collections::HashMap<String, (u32, f64)> =
        std::collections::HashMap::new();
    for r in records.into_iter().filter(|r| is_starting(r)) {
        let (n, since) = by_service
            .entry(r.service.clone())
            .or_insert((0, r.updated_at));
        *n = n.saturating_add(1);
        *since = since.min(r.updated_at);
    }
    by_service
}

/// Whether `record` was launched and is not running yet, and no kill is
/// requested: TASK_STAGING or TASK_STARTING.
pub fn is_starting(record: &TaskRecord) -> bool {
    record.kill.is_none()
        && matches!(
            record.state,
            crate::mesos::v1::TaskState::TaskStaging | crate::mesos::v1::TaskState::TaskStarting
        )
}

/// A service's last failed task: what Mesos said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LastFailure {
    /// The task.
    pub task_id: String,
    /// Its instance number.
    pub instance: u32,
    /// Its terminal Mesos state (`TASK_FAILED`, …).
    pub state: String,
    /// The Mesos reason of the last update (`REASON_COMMAND_EXECUTOR_FAILED`,
    /// …; `TaskStatus.reason`), if any.
    pub reason: Option<String>,
    /// The last update's message (`TaskStatus.message`), if any.
    pub message: Option<String>,
    /// When (seconds since the UNIX epoch).
    pub at: f64,
    /// The agent it ran on.
    pub agent_id: String,
    /// The agent's hostname.
    pub hostname: String,
}

/// Offers passed over for a service's missing instances, counted per
/// reason since its last launch (a new launch starts over). The reasons
/// (`insufficient_cpus`, `insufficient_mem`, `insufficient_disk`,
/// `insufficient_ports`, `constraint`, `unused`, `maintenance`,
/// `agent_draining`) are explained in `docs/why-not-running.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OffersSummary {
    /// Start of the window (seconds since the UNIX epoch).
    pub since: f64,
    /// Offers looked at in the window.
    pub processed: u64,
    /// Count per reason (an offer short of several resources counts once
    /// for each).
    pub reasons: std::collections::BTreeMap<String, u64>,
    /// When the last offer was looked at.
    pub last_offer_at: Option<f64>,
}

impl OffersSummary {
    /// An empty window starting at `at`.
    pub fn since(at: f64) -> OffersSummary {
        OffersSummary {
            since: at,
            processed: 0,
            reasons: Default::default(),
            last_offer_at: None,
        }
    }

    /// The reasons for people, most frequent first: "insufficient mem 12,
    /// constraint 3".
    pub fn reasons_text(&self) -> String {
        let mut by_count: Vec<(&String, &u64)> = self.reasons.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        by_count
            .into_iter()
            .map(|(reason, n)| format!("{} {n}", reason.replace('_', " ")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One instance's restart backoff ([`crate::scheduler::rules::restart::RestartBackoff`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InstanceBackoff {
    /// The instance number.
    pub instance: u32,
    /// Its consecutive failed tasks.
    pub consecutive_failures: u32,
    /// No task of the instance is launched before this time (seconds since
    /// the UNIX epoch); absent once it may launch.
    pub next_launch_after: Option<f64>,
}

impl ServiceStatus {
    /// The status of a stored service (`spec`, the `previous` spec a
    /// rollback restores, whether a rollout was begun — `rolling_out`, see
    /// [`rollout::Progress::under_way`] — and a `halted` rollout) with its
    /// `counts`; the
    /// restart backoff and offer waits are the leader's to fill in.
    pub fn new(
        spec: &ServiceSpec,
        previous: Option<&ServiceSpec>,
        rolling_out: bool,
        halted: Option<&Halt>,
        counts: &ServiceCounts,
    ) -> ServiceStatus {
        let p = &counts.progress;
        let rollout = (p.under_way(rolling_out) || halted.is_some()).then(|| RolloutStatus {
            desired: spec.instances,
            replaced: p.replaced,
            healthy: p.healthy,
            remaining: p.remaining,
            halted: halted.cloned(),
        });
        let restore = previous
            .filter(|_| rollout.is_some())
            .map(RestoreTarget::of);
        ServiceStatus {
            spec: spec.clone(),
            running: counts.running,
            starting: counts.starting,
            killing: counts.killing,
            unreachable: counts.unreachable,
            consecutive_failures: 0,
            next_launch_after: None,
            backoff: Vec::new(),
            waiting: None,
            last_failure: None,
            offers: None,
            healthy: counts.healthy,
            unhealthy: counts.unhealthy,
            rollout,
            can_roll_back: restore.is_some(),
            restore,
            restart_generation: spec.restart_generation,
            starting_tasks: 0,
            starting_since: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::v1::TaskState;

    /// A drain: instance 0's task leaves its agent and its replacement
    /// runs beside it, both healthy; instance 1 runs healthy, instance 2
    /// unhealthy. Every count is of instances, so the pair counts once.
    #[test]
    fn running_and_healthy_count_instances_during_a_drain() {
        let spec: ServiceSpec = serde_json::from_value(serde_json::json!({
            "name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": 3}))
        .unwrap();
        let task = |id: &str, instance, launched_at, healthy| TaskRecord {
            instance,
            launched_at,
            healthy: Some(healthy),
            ..TaskRecord::sample(id, "web", TaskState::TaskRunning)
        };
        let tasks = [
            task("web.0.leaving", 0, 1.0, true),
            task("web.0.replacement", 0, 5.0, true),
            task("web.1", 1, 1.0, true),
            task("web.2", 2, 1.0, false),
        ];
        let counts = ServiceCounts::of(&spec, &tasks, 10.0);
        assert_eq!((counts.running, counts.starting), (3, 0));
        assert_eq!(
            (counts.healthy, counts.unhealthy),
            (2, 1),
            "one per instance"
        );
        // The replacement not running yet: the running one stands for it.
        let mut starting = tasks.clone();
        starting[1].state = TaskState::TaskStarting;
        starting[1].healthy = None;
        let counts = ServiceCounts::of(&spec, &starting, 10.0);
        assert_eq!((counts.running, counts.starting), (3, 0));
        assert_eq!((counts.healthy, counts.unhealthy), (2, 1));
    }
}
