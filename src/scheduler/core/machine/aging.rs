//! The records housekeeping's timers act on, kept beside the task table
//! ([`super::table::TaskTable`] updates it with every change of a record):
//! tasks in a transient state and ended tasks, each ordered by when its
//! record last changed, and unreachable or unknown tasks.
//!
//! Housekeeping runs every second. Going over every record for its three
//! timers (a task stuck in TASK_STAGING or TASK_STARTING past the
//! transient timeout, an ended record past its retention, a task given up
//! by the partition rules) cost the leader about 30 ms a second at 100,000
//! running tasks (`docs/benchmarks.md`, "Housekeeping by index"): work
//! proportional to the task count, for records that are almost all
//! TASK_RUNNING and concern none of them. With this index it reads only
//! the records a timer may be due for.

use std::collections::BTreeSet;

use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::TaskRecord;

/// A record's last change, in whole milliseconds since the UNIX epoch (a
/// key that orders; the callers compare the exact seconds again).
type Millis = u64;

fn millis(seconds: f64) -> Millis {
    // `max` maps NaN to 0; `as` saturates what does not fit.
    (seconds.max(0.0) * 1000.0) as Millis
}

/// Which timer a record concerns, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// TASK_STAGING or TASK_STARTING: the transient timeout.
    Transient,
    /// Ended: the retention of terminal records.
    Terminal,
    /// TASK_UNREACHABLE or TASK_UNKNOWN: the partition rules' give-up.
    Lost,
}

fn class(record: &TaskRecord) -> Option<Class> {
    match record.state {
        TaskState::TaskStaging | TaskState::TaskStarting => Some(Class::Transient),
        TaskState::TaskUnreachable | TaskState::TaskUnknown => Some(Class::Lost),
        _ if record.is_terminal() => Some(Class::Terminal),
        _ => None,
    }
}

/// The index: task IDs by class, the transient and ended ones by the
/// `updated_at` of their record.
#[derive(Debug, Default)]
pub(super) struct Aging {
    transient: BTreeSet<(Millis, TaskId)>,
    terminal: BTreeSet<(Millis, TaskId)>,
    lost: BTreeSet<TaskId>,
}

impl Aging {
    /// `record` is now in the table.
    pub(super) fn add(&mut self, record: &TaskRecord) {
        let key = || (millis(record.updated_at), record.task_id.clone());
        match class(record) {
            Some(Class::Transient) => {
                self.transient.insert(key());
            }
            Some(Class::Terminal) => {
                self.terminal.insert(key());
            }
            Some(Class::Lost) => {
                self.lost.insert(record.task_id.clone());
            }
            None => {}
        }
    }

    /// `record` (as it was added) is no longer in the table.
    pub(super) fn remove(&mut self, record: &TaskRecord) {
        let key = || (millis(record.updated_at), record.task_id.clone());
        match class(record) {
            Some(Class::Transient) => {
                self.transient.remove(&key());
            }
            Some(Class::Terminal) => {
                self.terminal.remove(&key());
            }
            Some(Class::Lost) => {
                self.lost.remove(&record.task_id);
            }
            None => {}
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        *self = Aging::default();
    }

    /// Tasks in TASK_STAGING or TASK_STARTING whose record last changed at
    /// or before `before` (seconds since the UNIX epoch; a few in the same
    /// millisecond after it too), oldest first.
    pub(super) fn transient_before(&self, before: f64) -> impl Iterator<Item = &TaskId> {
        up_to(&self.transient, before)
    }

    /// Ended tasks whose record last changed at or before `before`, as
    /// [`Aging::transient_before`].
    pub(super) fn terminal_before(&self, before: f64) -> impl Iterator<Item = &TaskId> {
        up_to(&self.terminal, before)
    }

    /// Tasks in TASK_UNREACHABLE or TASK_UNKNOWN, by task ID.
    pub(super) fn lost(&self) -> impl Iterator<Item = &TaskId> {
        self.lost.iter()
    }

    /// Every indexed task ID with its class, sorted (tests compare it with
    /// a recount of the table).
    #[cfg(test)]
    pub(super) fn listing(&self) -> Vec<(String, &'static str)> {
        let mut out: Vec<(String, &'static str)> = self
            .transient
            .iter()
            .map(|(_, id)| (id.to_string(), "transient"))
            .chain(
                self.terminal
                    .iter()
                    .map(|(_, id)| (id.to_string(), "terminal")),
            )
            .chain(self.lost.iter().map(|id| (id.to_string(), "lost")))
            .collect();
        out.sort();
        out
    }

    /// The listing a recount of `records` gives ([`Aging::listing`]).
    #[cfg(test)]
    pub(super) fn recount<'a>(
        records: impl Iterator<Item = &'a TaskRecord>,
    ) -> Vec<(String, &'static str)> {
        let mut out: Vec<(String, &'static str)> = records
            .filter_map(|r| {
                let name = match class(r)? {
                    Class::Transient => "transient",
                    Class::Terminal => "terminal",
                    Class::Lost => "lost",
                };
                Some((r.task_id.to_string(), name))
            })
            .collect();
        out.sort();
        out
    }
}

fn up_to(set: &BTreeSet<(Millis, TaskId)>, before: f64) -> impl Iterator<Item = &TaskId> {
    let last = millis(before);
    set.iter()
        .take_while(move |(at, _)| *at <= last)
        .map(|(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, state: TaskState, updated_at: f64) -> TaskRecord {
        TaskRecord {
            updated_at,
            ..TaskRecord::sample(id, "web", state)
        }
    }

    #[test]
    fn only_the_records_a_timer_may_be_due_for_are_read() {
        let mut aging = Aging::default();
        let records = [
            record("a", TaskState::TaskStaging, 100.0),
            record("b", TaskState::TaskStarting, 200.0),
            record("c", TaskState::TaskRunning, 50.0),
            record("d", TaskState::TaskFinished, 150.0),
            record("e", TaskState::TaskKilled, 300.0),
            record("f", TaskState::TaskUnreachable, 10.0),
            record("g", TaskState::TaskUnknown, 10.0),
        ];
        for r in &records {
            aging.add(r);
        }
        let ids = |it: Box<dyn Iterator<Item = &TaskId> + '_>| -> Vec<String> {
            it.map(|id| id.to_string()).collect()
        };
        assert_eq!(ids(Box::new(aging.transient_before(150.0))), ["a"]);
        assert_eq!(ids(Box::new(aging.transient_before(1e9))), ["a", "b"]);
        assert_eq!(ids(Box::new(aging.terminal_before(299.9))), ["d"]);
        assert_eq!(ids(Box::new(aging.lost())), ["f", "g"]);
        // Removing the record as it was added takes it out.
        aging.remove(&records[0]);
        aging.remove(&records[3]);
        aging.remove(&records[5]);
        assert_eq!(ids(Box::new(aging.transient_before(1e9))), ["b"]);
        assert_eq!(ids(Box::new(aging.terminal_before(1e9))), ["e"]);
        assert_eq!(ids(Box::new(aging.lost())), ["g"]);
    }

    #[test]
    fn odd_times_neither_panic_nor_hide_a_record() {
        let mut aging = Aging::default();
        aging.add(&record("nan", TaskState::TaskStaging, f64::NAN));
        aging.add(&record("neg", TaskState::TaskStaging, -5.0));
        aging.add(&record("huge", TaskState::TaskStaging, f64::MAX));
        let early: Vec<_> = aging.transient_before(0.0).map(|i| i.to_string()).collect();
        assert_eq!(early, ["nan", "neg"]);
        assert_eq!(aging.transient_before(f64::INFINITY).count(), 3);
    }
}
