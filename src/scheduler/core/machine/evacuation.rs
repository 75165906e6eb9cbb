//! Evacuation: the one rule that empties an agent without losing
//! capacity, shared by maintenance windows (`maintenance.rs`, an accepted
//! inverse offer) and the appliance's SLA-aware drain (`drains.rs`).
//!
//! The rule (start the replacement, wait until it is available, then kill;
//! the practice of Aurora's SLA-aware drain and Singularity's decommission,
//! and of this appliance's rollouts):
//! - a *leaving* task (live, on an agent being emptied) does not count for
//!   its instance in the scheduling pass, so the instance is missing and the
//!   pass places a replacement — an extra task of the same instance — on
//!   another agent (the emptied agent takes no new task: its offers are
//!   declined);
//! - the leaving task is killed once a copy of its instance elsewhere is
//!   *available* (RUNNING and healthy for `upgrade.min_healthy`, as a
//!   rollout's [`Judge`] says);
//! - and only if the kill keeps the service's available tasks at or above
//!   the evacuation's floor, when it has one (a drain's `min_healthy`;
//!   maintenance has none: its floor was checked when the inverse offer was
//!   accepted). Kills of one pass count against the floor one after the
//!   other; only an available task's kill lowers the count, so a leaver
//!   that is not available goes whatever the floor. The floor is capped
//!   at the service's `instances`, one rule for
//!   every leaver: a move keeps `instances` available (the replacement
//!   first, then the kill), so a floor above them would hold the task
//!   forever; the reason of a wait says when the floor was capped;
//! - a leaving task whose instance its service no longer wants (scaled
//!   down below it: [`wants_instance`], the review's rule) gets no
//!   replacement — the pass places none for it — and is killed without
//!   one, as the scale-down's surplus. The floor still holds for that
//!   kill, capped as above at the instances the service wants: the drain chose to
//!   kill the leaving copy rather than one that stays (which a scale-down
//!   alone would rank), so it keeps its promise of available tasks, but
//!   an operator who scaled below the floor asked for fewer and a floor
//!   above the instances wanted would hold the task forever.
//!
//! This is pure: the machine applies the kills and shows the waits.

use std::collections::HashMap;
use std::time::Duration;

use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::rules::review::wants_instance;
use crate::scheduler::rules::rollout::Judge;
use crate::scheduler::spec::ServiceSpec;
use crate::util::format_duration;

/// How one leaving task leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Leave {
    /// The service's available tasks may not fall below this (`None`: no
    /// floor).
    pub floor: Option<u32>,
    /// The kill reason once it has moved (stored in the task record).
    pub why: String,
    /// The kill reason when its service no longer wants its instance.
    pub unwanted: String,
}

/// Where one leaving task stands after a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Kill it now: a copy elsewhere is available and the floor holds.
    Kill {
        /// The available copy.
        replacement: TaskId,
        /// The kill reason.
        why: String,
    },
    /// A copy runs elsewhere but is not available yet.
    WaitForHealth {
        /// The copy.
        replacement: TaskId,
        /// What it waits for.
        why: String,
    },
    /// The kill would take the service below the floor: a copy is
    /// available, or none is wanted.
    Floor {
        /// The available copy (`None` for a task no longer wanted).
        replacement: Option<TaskId>,
        /// Which floor.
        why: String,
    },
    /// No copy of the instance elsewhere yet (placement's business).
    NoReplacement,
    /// Kill it now without a replacement: its service no longer wants its
    /// instance, and the floor holds.
    Unwanted {
        /// The kill reason.
        why: String,
    },
}

/// Looks at `spec`'s `records` (all of one service, any agent) and tells,
/// for each live leaving task (`leaving` gives how it leaves, `None` for a
/// task that stays), what happens to it now (see the module doc). `now`:
/// seconds since the UNIX epoch; `launch_timeout`: how long a task may stay
/// in TASK_STAGING or TASK_STARTING before the machine's housekeeping
/// kills and replaces it (`CoreConfig::transient_timeout`,
/// `--task-launch-timeout`), named by the reason of a wait on such a copy.
///
/// `dying` names the tasks whose kill is decided but not in their record
/// yet (a kill mark being stored, or another rule's kill in the same
/// pass): they count as neither available nor live. Counting one of them
/// as available let the floor pass a kill that left the service with
/// none (a rolling restart's kill of instance 0 in flight while a
/// scale-down's unwanted leavers were killed: the property
/// `machine_invariants`, seed 17866518820087048313).
///
/// Linear in the records: `leaving` is asked once per live record and each
/// leaving task finds its copies among those of its instance. A drain of
/// an agent holding a hundred tasks of a 10,000-instance service made the
/// look (once per snapshot, command answers included, and once per pass)
/// go over every record for each leaving task: half the leader's CPU
/// during a 10,000-task launch (`perf` of the `failover` benchmark,
/// `docs/benchmarks.md`).
pub(super) fn look<'a>(
    spec: &ServiceSpec,
    records: impl IntoIterator<Item = &'a TaskRecord>,
    leaving: impl Fn(&TaskRecord) -> Option<Leave>,
    dying: impl Fn(&TaskRecord) -> bool,
    now: f64,
    launch_timeout: Duration,
) -> Vec<(TaskId, Step)> {
    let looking = Looking::new(spec, now, launch_timeout);
    let judge = &looking.judge;
    let mut available = 0u32;
    // The live records that stay, by instance, in the records' order, and
    // the live leaving ones in that order.
    let mut staying: HashMap<u32, Vec<&TaskRecord>> = HashMap::new();
    let mut leavers: Vec<(&TaskRecord, Leave)> = Vec::new();
    for task in records {
        if !is_live(task) || dying(task) {
            continue;
        }
        if task.service == spec.name && judge.available(task, now) {
            available += 1;
        }
        match leaving(task) {
            Some(leave) => leavers.push((task, leave)),
            None => staying.entry(task.instance).or_default().push(task),
        }
    }
    let mut steps = Vec::with_capacity(leavers.len());
    for (task, leave) in leavers {
        let copies = staying.get(&task.instance).map_or(&[][..], Vec::as_slice);
        let step = looking.step(task, leave, copies, &mut available);
        steps.push((task.task_id.clone(), step));
    }
    steps
}

/// One look's service and its judge of availability, at `now` (seconds
/// since the UNIX epoch), with the launch timeout a wait names (as for
/// [`look`]).
pub(super) struct Looking<'a> {
    spec: &'a ServiceSpec,
    judge: Judge<'a>,
    now: f64,
    launch_timeout: Duration,
}

impl<'a> Looking<'a> {
    /// A look at `spec`'s leavers at `now`.
    pub(super) fn new(spec: &'a ServiceSpec, now: f64, launch_timeout: Duration) -> Looking<'a> {
        Looking {
            spec,
            judge: Judge::new(spec),
            now,
            launch_timeout,
        }
    }

    /// What happens now to `task`, leaving as `leave`, given the live
    /// copies of its instance that stay (`copies`, in the records' order)
    /// and how many of the service's tasks are `available` (lowered by a
    /// kill).
    pub(super) fn step(
        &self,
        task: &TaskRecord,
        leave: Leave,
        copies: &[&TaskRecord],
        available: &mut u32,
    ) -> Step {
        let (spec, judge, now) = (self.spec, &self.judge, self.now);
        // The floor, capped at the instances the service wants (see the
        // module doc), and how a wait names it.
        let floor = leave.floor.map(|f| f.min(spec.instances));
        let capped = |floor: u32| match leave.floor {
            Some(given) if given > floor => format!(
                "min_healthy {given} capped at {}'s {} instances; ",
                spec.name, spec.instances
            ),
            _ => String::new(),
        };
        // Only the kill of an available task lowers the count the floor
        // guards: a leaver that is not available (unhealthy, not running
        // yet) goes whatever the floor (waiting for the service to come back
        // above it would only keep a useless task).
        let lowers = judge.available(task, now);
        let after = available.saturating_sub(u32::from(lowers));
        if !wants_instance(spec, task.instance) {
            // No copy is wanted: the floor only.
            return match floor {
                Some(floor) if lowers && after < floor => Step::Floor {
                    replacement: None,
                    why: format!(
                        "{} no longer wants instance {}, but its kill would drop {} below {floor} \
                     healthy ({}{available} available now)",
                        spec.name,
                        task.instance,
                        spec.name,
                        capped(floor)
                    ),
                },
                _ => {
                    *available = after;
                    Step::Unwanted {
                        why: leave.unwanted,
                    }
                }
            };
        }
        let ready = copies.iter().find(|o| judge.available(o, now));
        match (ready, copies.first()) {
            (Some(copy), _) => match floor {
                Some(floor) if lowers && after < floor => Step::Floor {
                    replacement: Some(copy.task_id.clone()),
                    why: format!(
                        "would drop {} below {floor} healthy ({}{available} available now)",
                        spec.name,
                        capped(floor)
                    ),
                },
                _ => {
                    *available = after;
                    Step::Kill {
                        replacement: copy.task_id.clone(),
                        why: leave.why,
                    }
                }
            },
            (None, Some(copy)) => Step::WaitForHealth {
                replacement: copy.task_id.clone(),
                why: wait_reason(copy, now, self.launch_timeout),
            },
            (None, None) => Step::NoReplacement,
        }
    }
}

/// Why a leaver waits for `copy`, live and not available yet: its state
/// and health, and for a copy still in TASK_STAGING or TASK_STARTING how
/// long it has been so (since its last update, as the housekeeping counts)
/// and when it is killed and replaced for it: a drain waiting on a launch
/// that never ends says that it ends (`docs/draining.md`).
fn wait_reason(copy: &TaskRecord, now: f64, launch_timeout: Duration) -> String {
    let health = match copy.healthy {
        Some(true) => ", healthy",
        Some(false) => ", unhealthy",
        None => "",
    };
    let state = copy.state.as_str_name();
    if !matches!(copy.state, TaskState::TaskStaging | TaskState::TaskStarting) {
        return format!(
            "replacement {} is {state}{health}, not yet available",
            copy.task_id
        );
    }
    let limit = launch_timeout.as_secs_f64();
    let stuck_for = (now - copy.updated_at).max(0.0);
    let when = if stuck_for < limit {
        format!("after {} (--task-launch-timeout)", format_duration(limit))
    } else {
        format!(
            "now (past --task-launch-timeout {})",
            format_duration(limit)
        )
    };
    format!(
        "replacement {} is {state}{health} for {}, not yet available; killed and replaced {when}",
        copy.task_id,
        format_duration(stuck_for),
    )
}

/// The kills among `steps`.
pub(super) fn kills(steps: Vec<(TaskId, Step)>) -> Vec<(TaskId, String)> {
    steps
        .into_iter()
        .filter_map(|(id, step)| match step {
            Step::Kill { why, .. } | Step::Unwanted { why } => Some((id, why)),
            _ => None,
        })
        .collect()
}
