//! The scheduling pass's read of one service's records: one walk that
//! yields what the service needs ([`workload::assess`](super::workload::assess)),
//! where its rollout stands ([`rollout::progress`](super::rollout::progress))
//! and the next task a rollout replaces
//! ([`rollout::next_replacement`](super::rollout::next_replacement)) — those
//! three are views of it.
//!
//! The pass reads a changed service whole, and while a launch of 100,000
//! tasks finishes every record change marks a service of 10,000 records,
//! so this walk runs over 10,000 records several times a second. It reads
//! each record once and compares no string per record that it can avoid:
//! the records are the service's own (no name is compared), and whether a
//! record runs the current spec is asked once, as one fixed-width
//! comparison ([`Judge::is_current`]), and reused for its availability.

use super::partition;
use super::rollout::{Judge, Progress, is_down};
use super::workload::Assessment;
use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::spec::service::ServiceSpec;
use crate::scheduler::spec::unreachable::KillOnReturn;

/// One service's records as one scheduling pass sees them (see the module
/// docs), from [`review`].
#[derive(Debug, Clone, PartialEq)]
pub struct Review<'a> {
    /// What the service needs: [`workload::assess`](super::workload::assess)
    /// of the records `review` counted.
    pub assessment: Assessment,
    /// Where its rollout stands: [`rollout::progress`](super::rollout::progress)
    /// of every record.
    pub progress: Progress,
    /// Live records `review` did not count (tasks leaving their agent).
    pub set_aside: u32,
    /// The live outdated task of the lowest instance (the first read
    /// among equals) among those counted: a task leaving its agent is
    /// replaced by the evacuation, copy first.
    outdated: Option<&'a TaskRecord>,
    /// The same among the outdated tasks that are down ([`is_down`]).
    outdated_down: Option<&'a TaskRecord>,
}

impl Review<'_> {
    /// The next outdated task to kill, if any, as
    /// [`rollout::next_replacement`](super::rollout::next_replacement)
    /// says: the lowest one that is down, whatever else; else, unless
    /// `halted`, the lowest one while fewer than `max_unavailable` (at
    /// least 1) desired instances are not available.
    pub fn replacement(&self, max_unavailable: u32, halted: bool) -> Option<TaskId> {
        if let Some(down) = self.outdated_down {
            return Some(down.task_id.clone());
        }
        let lowest = self.outdated?;
        if halted {
            return None;
        }
        let unavailable = u32::try_from(self.progress.unavailable.len()).unwrap_or(u32::MAX);
        if unavailable >= max_unavailable.max(1) {
            return None;
        }
        Some(lowest.task_id.clone())
    }
}

/// Reads `records` — `spec`'s service's own (any order; another service's
/// record would be counted as this one's) — once, at `now` (seconds since
/// the UNIX epoch). The assessment counts only the records `counted` says
/// (the pass leaves out tasks leaving their agent: their instances get
/// replacements); the rollout reads them all.
pub fn review<'a>(
    spec: &ServiceSpec,
    records: impl IntoIterator<Item = &'a TaskRecord>,
    counted: impl Fn(&TaskRecord) -> bool,
    now: f64,
) -> Review<'a> {
    let judge = Judge::new(spec);
    let policy = spec.unreachable_policy();
    let desired = spec.instances as usize;
    // By desired instance: one of its live tasks runs the current spec;
    // one is available.
    let mut current = vec![false; desired];
    let mut available = vec![false; desired];
    let mut out = Review {
        assessment: Assessment::default(),
        progress: Progress::default(),
        set_aside: 0,
        outdated: None,
        outdated_down: None,
    };
    let records = records.into_iter();
    // One list ordered by instance rather than a list per instance (see
    // `order_by_instance`); as long as the records, mostly live.
    let mut live: Vec<&TaskRecord> = Vec::with_capacity(records.size_hint().0);
    // Instances an unreachable or unknown task still stands for
    // (`partition`): not missing, not running.
    let mut standing_by: Vec<u32> = Vec::new();
    for task in records {
        let is_live = is_live(task);
        let counted = counted(task);
        if is_live {
            let runs_current = judge.is_current(task);
            if !runs_current {
                out.progress.remaining += 1;
            }
            // A task leaving its agent is not the rollout's to replace:
            // the evacuation starts its copy (of the current spec) first
            // and kills it once that copy is available and a drain's
            // floor holds (`machine/evacuation.rs`, `docs/draining.md`).
            // Killed by the rollout, it went first, below the floor (a
            // fresh user's trial: a new spec during a drain of
            // `min_healthy: 100%`).
            if !runs_current && counted {
                if out.outdated.is_none_or(|l| task.instance < l.instance) {
                    out.outdated = Some(task);
                }
                if is_down(task) && out.outdated_down.is_none_or(|l| task.instance < l.instance) {
                    out.outdated_down = Some(task);
                }
            }
            if wants_instance(spec, task.instance) {
                let i = task.instance as usize;
                current[i] |= runs_current;
                // Availability is pure: once one task of the instance is
                // available, the others need not be judged.
                if !available[i] {
                    available[i] = judge.available_if(task, || runs_current, now);
                }
            }
        }
        if !counted {
            out.set_aside += u32::from(is_live);
            continue;
        }
        if task.is_terminal() {
            continue;
        }
        if task.kill.is_some() {
            out.assessment.killing += 1;
            continue;
        }
        if let Some(standing) = partition::standing(task, &policy, now)
            && standing != partition::Standing::Expunged
        {
            out.assessment.unreachable += 1;
        }
        if partition::stands_by(task, &policy, now) {
            standing_by.push(task.instance);
            if let Some(at) = partition::next_change(task, &policy, now) {
                let wake_at = &mut out.assessment.wake_at;
                *wake_at = Some(wake_at.map_or(at, |w: f64| w.min(at)));
            }
            continue;
        }
        if partition::replaced(task, &policy, now) {
            continue;
        }
        live.push(task);
    }
    let kill_on_return = policy.kill_on_return;
    needs(
        spec,
        &judge,
        kill_on_return,
        live,
        standing_by,
        &mut out.assessment,
        now,
    );
    let progress = &mut out.progress;
    progress.replaced = count(current.iter().copied());
    progress.healthy = count(current.iter().zip(&available).map(|(c, a)| *c && *a));
    progress.unavailable = (0..spec.instances)
        .filter(|i| !available[*i as usize])
        .collect();
    out
}

/// True when `spec` wants its instance `instance`: the instances wanted
/// are `0..instances`. The review counts tasks against them (a task of
/// another instance is moved into a free one, or killed as surplus when
/// more tasks than instances are kept), and a task leaving its agent
/// waits for a copy of its instance only while this holds
/// (`core/machine/evacuation.rs`): the one rule of which instances a
/// service wants.
pub fn wants_instance(spec: &ServiceSpec, instance: u32) -> bool {
    instance < spec.instances
}

/// How many are true.
fn count(flags: impl Iterator<Item = bool>) -> u32 {
    u32::try_from(flags.filter(|f| *f).count()).unwrap_or(u32::MAX)
}

/// The assessment's conclusion from the live tasks it counted (`live`) and
/// the instances unreachable tasks stand for: duplicates, a scale-down's
/// surplus (see [`workload::assess`](super::workload::assess)), moves and
/// missing instances, and the running and starting counts.
fn needs(
    spec: &ServiceSpec,
    judge: &Judge<'_>,
    kill_on_return: KillOnReturn,
    mut live: Vec<&TaskRecord>,
    standing_by: Vec<u32>,
    out: &mut Assessment,
    now: f64,
) {
    order_by_instance(&mut live);
    // One task per instance; the others are duplicates.
    let mut kept: Vec<&TaskRecord> = Vec::with_capacity(live.len());
    for group in live.chunk_by(|a, b| a.instance == b.instance) {
        // A copy back from a partition beside its replacement: the
        // policy's `kill_on_return` decides.
        if let Some((keep, dead)) = partition::settle_return(group, kill_on_return) {
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
        if wants_instance(spec, t.instance) {
            covered[t.instance as usize] = true;
        } else {
            beyond.push(t);
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
        if wants_instance(spec, instance) {
            covered[instance as usize] = true;
        }
    }
    let mut free = (0..spec.instances).filter(|i| !covered[*i as usize]);
    for (t, instance) in beyond.into_iter().zip(free.by_ref()) {
        out.moves.push((t.task_id.clone(), instance));
    }
    out.missing = free.collect();
}

/// Orders `live` by instance and, within one, a running task before a
/// starting one, then the oldest; ties keep their order (as a stable sort
/// by that key would).
///
/// A comparison sort of a service's live tasks was the largest item of
/// the walk (about 500 instructions a task at 10,000, reading each
/// record's fields through its pointer at every comparison). Instances
/// are dense — `0..instances`, a few beyond it after a scale-down — so
/// the tasks are placed by counting, and only the copies of one instance
/// are compared; sparse instances (a span over twice the tasks) are
/// sorted as before.
fn order_by_instance(live: &mut Vec<&TaskRecord>) {
    let copies = |a: &&TaskRecord, b: &&TaskRecord| {
        let starting = |t: &TaskRecord| t.state != TaskState::TaskRunning;
        starting(a).cmp(&starting(b)).then_with(|| {
            a.launched_at
                .partial_cmp(&b.launched_at)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    };
    let Some(max) = live.iter().map(|t| t.instance).max() else {
        return;
    };
    let span = max as usize + 1;
    if span > 2 * live.len() + 64 {
        live.sort_by(|a, b| a.instance.cmp(&b.instance).then_with(|| copies(a, b)));
        return;
    }
    // Where the next task of each instance goes.
    let mut next = vec![0usize; span];
    for t in live.iter() {
        next[t.instance as usize] += 1;
    }
    let mut start = 0;
    for slot in &mut next {
        let count = *slot;
        *slot = start;
        start += count;
    }
    // Every slot is written once: the counts add up to the length.
    let mut ordered = live.clone();
    for t in live.iter() {
        let slot = &mut next[t.instance as usize];
        ordered[*slot] = t;
        *slot += 1;
    }
    for group in ordered.chunk_by_mut(|a, b| a.instance == b.instance) {
        if group.len() > 1 {
            group.sort_by(copies);
        }
    }
    *live = ordered;
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
