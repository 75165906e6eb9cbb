//! A service's snapshot counts ([`ServiceCounts`]) kept up to date as its
//! stored records change, instead of counted again from every record of a
//! service each time one of them changed: while tens of thousands of tasks
//! launch, every service changes between two snapshots, and the recount
//! (`ServiceCounts::of`: the workload assessment's sort, the health counts,
//! the rollout progress) was the largest part of the leader's CPU.
//!
//! Each record adds its own classification to the sums (and takes it away
//! when it changes or goes): killing, health, running or starting, outdated
//! or current, and per instance the live and available tasks. What
//! changes with time alone — a running task becomes available once it has
//! stayed so for the spec's `upgrade.min_healthy` (`rules/rollout.rs`) —
//! waits in a set ordered by that time and is counted once it is due.
//!
//! The sums equal [`ServiceCounts::of`] while every live task stands alone
//! for an instance below the desired count and none is in a partition
//! state (TASK_UNREACHABLE, TASK_UNKNOWN): that is a launch, a steady
//! service, a rollout. Otherwise — duplicates, a scale-down's surplus,
//! partitions, whose rules (`rules/workload.rs`, `rules/partition.rs`)
//! pick among an instance's tasks and change with time — [`Tally::counts`]
//! says so and the caller counts every record again.

use std::collections::BTreeSet;

use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::rollout::Progress;
use crate::scheduler::snapshot::ServiceCounts;
use crate::scheduler::spec::service::ServiceSpec;

/// A time in seconds since the UNIX epoch, ordered by [`f64::total_cmp`].
#[derive(Debug, Clone, Copy)]
struct Since(f64);

impl PartialEq for Since {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}

impl Eq for Since {}

impl PartialOrd for Since {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Since {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// What one record adds to the sums, apart from its availability.
struct Class {
    killing: bool,
    /// `TaskRecord::health` of a live record.
    health: Option<bool>,
    /// Live: not terminal, no kill requested.
    live: Option<Live>,
}

/// The part of a live record's classification the sums keep.
struct Live {
    running: bool,
    current: bool,
    /// Its instance when below the desired count.
    instance: Option<usize>,
    /// TASK_UNREACHABLE or TASK_UNKNOWN, or numbered beyond the count, or
    /// its availability time is not a number: the rules of `assess` and
    /// `progress` for it are not sums (see the module doc).
    irregular: bool,
    /// Since when it counts towards `min_healthy` if it may become
    /// available (`Judge::available`): running, and healthy if checked.
    since: Option<f64>,
}

/// The running sums of one service's stored records under one spec.
#[derive(Debug)]
pub(super) struct Tally {
    fingerprint: String,
    checked: bool,
    min_healthy: f64,
    desired: usize,
    killing: u32,
    healthy: u32,
    unhealthy: u32,
    running: u32,
    starting: u32,
    /// Live tasks of another spec.
    remaining: u32,
    /// Live current tasks below the desired count.
    current: u32,
    /// Of those, the available ones.
    current_available: u32,
    /// Live tasks per instance below the desired count.
    live: Vec<u32>,
    /// Available live tasks per instance below the desired count.
    available: Vec<u32>,
    /// Instances with more than one live task.
    crowded: u32,
    /// Live records the sums cannot stand for (see [`Live::irregular`]).
    irregular: u32,
    /// Live tasks waiting for `min_healthy`, by the time it counts from,
    /// with their instance and whether they are current: at most one entry
    /// per record, removed with it.
    waiting: BTreeSet<(Since, TaskId, usize, bool)>,
}

impl Tally {
    /// Empty sums for `spec`'s tasks.
    pub(super) fn new(spec: &ServiceSpec) -> Tally {
        let desired = spec.instances as usize;
        Tally {
            fingerprint: spec.fingerprint(),
            checked: spec.health_check.is_some(),
            min_healthy: spec.upgrade_policy().min_healthy.as_secs_f64(),
            desired,
            killing: 0,
            healthy: 0,
            unhealthy: 0,
            running: 0,
            starting: 0,
            remaining: 0,
            current: 0,
            current_available: 0,
            live: vec![0; desired],
            available: vec![0; desired],
            crowded: 0,
            irregular: 0,
            waiting: BTreeSet::new(),
        }
    }

    fn class(&self, r: &TaskRecord) -> Class {
        if r.is_terminal() {
            return Class {
                killing: false,
                health: None,
                live: None,
            };
        }
        if r.kill.is_some() {
            return Class {
                killing: true,
                health: None,
                live: None,
            };
        }
        let instance = usize::try_from(r.instance)
            .ok()
            .filter(|i| *i < self.desired);
        // As `Judge::available` before its time test.
        let since = (r.state == TaskState::TaskRunning && r.healthy != Some(false))
            .then(|| {
                if r.launched_checked(&self.fingerprint, self.checked) {
                    if r.healthy != Some(true) {
                        return None;
                    }
                    r.healthy_since.or(r.running_since())
                } else {
                    r.running_since()
                }
            })
            .flatten();
        let partition = matches!(r.state, TaskState::TaskUnreachable | TaskState::TaskUnknown);
        Class {
            killing: false,
            health: r.healthy,
            live: Some(Live {
                running: r.state == TaskState::TaskRunning,
                current: r.fingerprint == self.fingerprint,
                instance,
                irregular: partition || instance.is_none() || since.is_some_and(f64::is_nan),
                since,
            }),
        }
    }

    /// Adds a stored record to the sums (`add`) or takes it away.
    fn apply(&mut self, r: &TaskRecord, add: bool) {
        let c = self.class(r);
        let step = |n: &mut u32| {
            if add {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
        };
        if c.killing {
            step(&mut self.killing);
        }
        match c.health {
            Some(true) => step(&mut self.healthy),
            Some(false) => step(&mut self.unhealthy),
            None => {}
        }
        let Some(live) = c.live else {
            return;
        };
        if live.irregular {
            step(&mut self.irregular);
        }
        step(if live.running {
            &mut self.running
        } else {
            &mut self.starting
        });
        if !live.current {
            step(&mut self.remaining);
        }
        let Some(i) = live.instance else {
            return;
        };
        if live.current {
            step(&mut self.current);
        }
        let before = self.live[i];
        step(&mut self.live[i]);
        match (before > 1, self.live[i] > 1) {
            (false, true) => self.crowded += 1,
            (true, false) => self.crowded = self.crowded.saturating_sub(1),
            _ => {}
        }
        let Some(since) = live.since else {
            return;
        };
        let key = (Since(since), r.task_id.clone(), i, live.current);
        if add {
            self.waiting.insert(key);
        } else if !self.waiting.remove(&key) {
            // It was counted available (`advance`).
            step(&mut self.available[i]);
            if live.current {
                step(&mut self.current_available);
            }
        }
    }

    /// Counts the waiting tasks that are available at `now`: those that
    /// have stayed so for `min_healthy` (the test of `Judge::available`,
    /// `now - since >= min_healthy`, which holds for every earlier `since`
    /// once it holds for one). `now` is not earlier than any asked before.
    pub(super) fn advance(&mut self, now: f64) {
        while let Some((since, ..)) = self.waiting.first()
            && now - since.0 >= self.min_healthy
        {
            let Some((_, _, i, current)) = self.waiting.pop_first() else {
                break;
            };
            self.available[i] += 1;
            if current {
                self.current_available += 1;
            }
        }
    }

    /// Adds `record` (stored).
    pub(super) fn add(&mut self, record: &TaskRecord) {
        self.apply(record, true);
    }

    /// Takes away `record`, added before.
    pub(super) fn remove(&mut self, record: &TaskRecord) {
        self.apply(record, false);
    }

    /// The counts at `now` (not earlier than any `now` asked before), or
    /// `None` when the sums cannot stand for them (see the module doc) and
    /// the records must be counted one by one.
    pub(super) fn counts(&mut self, now: f64) -> Option<ServiceCounts> {
        self.advance(now);
        if self.irregular > 0 || self.crowded > 0 {
            return None;
        }
        let unavailable = (0..self.desired)
            .filter(|i| self.available[*i] == 0)
            .map(|i| i as u32)
            .collect();
        Some(ServiceCounts {
            running: self.running,
            starting: self.starting,
            killing: self.killing,
            unreachable: 0,
            healthy: self.healthy,
            unhealthy: self.unhealthy,
            progress: Progress {
                replaced: self.current,
                healthy: self.current_available,
                remaining: self.remaining,
                unavailable,
            },
        })
    }
}
