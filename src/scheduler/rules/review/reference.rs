//! The three functions [`review`](super::review) replaced, as they were
//! (main at 94937e5): each read every record of the list it was given,
//! compared every record's service name and fingerprint, and
//! `next_replacement` read the records a second time through `progress`
//! while a rollout was under way. Whether a task runs the spec is
//! compared as strings here, as `Judge::is_current` did. Kept only as the reference the
//! differential property (`tests.rs`) holds the fused walk to.

use super::super::partition;
use super::super::rollout::{Judge, Progress, is_down};
use super::super::workload::Assessment;
use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::spec::service::ServiceSpec;

/// Assesses `spec` against its tasks (any order; other services' tasks are
/// ignored) at `now` (seconds since the UNIX epoch).
///
/// A scale-down keeps the best tasks, not the lowest-numbered: the tasks
/// beyond the desired count go in the order of
/// [`Judge::kill_rank`](super::super::rollout::Judge::kill_rank) — unhealthy
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
    let mut out = Assessment::default();
    // One sorted list rather than a list per instance: the scheduling
    // pass assesses every service, so this runs over every record several
    // times a second while tens of thousands of tasks launch.
    let mut live: Vec<&TaskRecord> = Vec::new();
    // Instances an unreachable or unknown task still stands for
    // (`partition`): not missing, not running.
    let mut standing_by: Vec<u32> = Vec::new();
    let policy = spec.unreachable_policy();
    for task in tasks.into_iter().filter(|t| t.service == spec.name) {
        if task.is_terminal() {
            continue;
        }
        if task.kill.is_some() {
            out.killing += 1;
            continue;
        }
        if let Some(standing) = partition::standing(task, &policy, now)
            && standing != partition::Standing::Expunged
        {
            out.unreachable += 1;
        }
        if partition::stands_by(task, &policy, now) {
            standing_by.push(task.instance);
            if let Some(at) = partition::next_change(task, &policy, now) {
                out.wake_at = Some(out.wake_at.map_or(at, |w: f64| w.min(at)));
            }
            continue;
        }
        if partition::replaced(task, &policy, now) {
            continue;
        }
        live.push(task);
    }
    // By instance; within one, a running task before a starting one, then
    // the oldest (a stable sort: ties keep their order).
    live.sort_by(|a, b| {
        let key = |t: &TaskRecord| (t.instance, t.state != TaskState::TaskRunning);
        key(a).cmp(&key(b)).then_with(|| {
            a.launched_at
                .partial_cmp(&b.launched_at)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    });
    // One task per instance; the others are duplicates.
    let mut kept: Vec<&TaskRecord> = Vec::new();
    for group in live.chunk_by(|a, b| a.instance == b.instance) {
        // A copy back from a partition beside its replacement: the
        // policy's `kill_on_return` decides.
        if let Some((keep, dead)) = partition::settle_return(group, policy.kill_on_return) {
            kept.push(group[keep]);
            out.surplus.extend(dead);
            continue;
        }
        kept.push(group[0]);
        for t in &group[1..] {
            out.surplus.push((
                t.task_id.clone(),
                format!("duplicate of instance {}", group[0].instance),
            ));
        }
    }
    let desired = spec.instances as usize;
    if kept.len() > desired {
        let judge = Judge::new(spec);
        // Kill first: lowest rank, then highest instance.
        kept.sort_by_key(|t| (judge.kill_rank(t, now), std::cmp::Reverse(t.instance)));
        for t in kept.drain(..kept.len() - desired) {
            out.surplus.push((t.task_id.clone(), "scaled down".into()));
        }
        kept.sort_by_key(|t| t.instance);
    }
    let mut covered = vec![false; desired];
    let mut beyond = Vec::new();
    for t in kept {
        match covered.get_mut(t.instance as usize) {
            Some(slot) => *slot = true,
            None => beyond.push(t),
        }
        if t.state == TaskState::TaskRunning {
            out.running += 1;
        } else {
            out.starting += 1;
        }
        match t.health() {
            Some(true) => out.healthy += 1,
            Some(false) => out.unhealthy += 1,
            None => {}
        }
    }
    for instance in standing_by {
        if let Some(slot) = covered.get_mut(instance as usize) {
            *slot = true;
        }
    }
    let mut free = (0..spec.instances).filter(|i| !covered[*i as usize]);
    for (t, instance) in beyond.into_iter().zip(free.by_ref()) {
        out.moves.push((t.task_id.clone(), instance));
    }
    out.missing = free.collect();
    out
}

/// The rollout's progress of `spec` over its tasks at `now` (seconds since
/// the UNIX epoch).
pub fn progress<'a>(
    spec: &ServiceSpec,
    tasks: impl IntoIterator<Item = &'a TaskRecord>,
    now: f64,
) -> Progress {
    let judge = Judge::new(spec);
    // As the old `Judge::is_current` compared: strings.
    let fingerprint = spec.fingerprint();
    let mut out = Progress::default();
    let mut current = vec![false; spec.instances as usize];
    let mut available = vec![false; spec.instances as usize];
    for task in tasks.into_iter().filter(|t| t.service == spec.name) {
        if !is_live(task) {
            continue;
        }
        let current_spec = task.fingerprint == fingerprint;
        if !current_spec {
            out.remaining += 1;
        }
        let Some(i) = usize::try_from(task.instance)
            .ok()
            .filter(|i| *i < current.len())
        else {
            continue;
        };
        current[i] |= current_spec;
        available[i] |= judge.available(task, now);
    }
    out.replaced = current.iter().filter(|c| **c).count() as u32;
    out.healthy = (0..current.len())
        .filter(|i| current[*i] && available[*i])
        .count() as u32;
    out.unavailable = (0..spec.instances)
        .filter(|i| !available[*i as usize])
        .collect();
    out
}

/// The next outdated task of `spec` to kill, if any (see the module docs),
/// among those `counted` says (a task leaving its agent is the
/// evacuation's); `halted` rollouts kill only outdated tasks that are not
/// available.
pub fn next_replacement<'a>(
    spec: &ServiceSpec,
    tasks: impl IntoIterator<Item = &'a TaskRecord> + Clone,
    counted: impl Fn(&TaskRecord) -> bool,
    max_unavailable: u32,
    halted: bool,
    now: f64,
) -> Option<TaskId> {
    let fingerprint = spec.fingerprint();
    // One pass over the tasks: the lowest outdated one, and the lowest
    // outdated one that is down. Without outdated tasks (no rollout: the
    // common case, every scheduling pass) nothing more is read.
    let mut lowest: Option<&TaskRecord> = None;
    let mut lowest_down: Option<&TaskRecord> = None;
    let outdated = tasks.clone().into_iter().filter(|t| {
        t.service == spec.name && is_live(t) && t.fingerprint != fingerprint && counted(t)
    });
    for task in outdated {
        if lowest.is_none_or(|l| task.instance < l.instance) {
            lowest = Some(task);
        }
        if is_down(task) && lowest_down.is_none_or(|l| task.instance < l.instance) {
            lowest_down = Some(task);
        }
    }
    if let Some(down) = lowest_down {
        return Some(down.task_id.clone());
    }
    let lowest = lowest?;
    if halted {
        return None;
    }
    let unavailable = progress(spec, tasks, now).unavailable.len() as u32;
    if unavailable >= max_unavailable.max(1) {
        return None;
    }
    Some(lowest.task_id.clone())
}
