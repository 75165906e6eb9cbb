//! Partition awareness: what an unreachable or unknown task means for its
//! instance, after the service's `unreachable` policy
//! ([`UnreachablePolicy`]). Pure functions over task records and a time
//! (seconds since the UNIX epoch); the times they count from are stored in
//! the records ([`TaskRecord::partition`]), so a new leader continues every
//! wait where the last one was.
//!
//! The Mesos facts (`docs/high-availability-framework-guide.md` in
//! apache/mesos, "Dealing with Partitioned or Failed Agents"): a
//! `PARTITION_AWARE` framework's task on an agent that lost the master is
//! TASK_UNREACHABLE, which is not terminal — the task may still run, and
//! when its agent re-registers the master sends TASK_RUNNING again
//! (REASON_AGENT_REREGISTERED, `Master::_reregisterSlave` in
//! `src/master/master.cpp`). TASK_GONE, TASK_GONE_BY_OPERATOR and
//! TASK_DROPPED are terminal: the task is not coming back. TASK_UNKNOWN
//! means the master knows nothing of the task; the guide asks for an
//! explicit reconciliation before acting on it.
//!
//! - An unreachable task stands for its instance for `inactive_after`
//!   ([`Standing::Waiting`]): no replacement starts. It is neither
//!   running nor starting, and it does not hold its host for UNIQUE
//!   placement ([`occupies_host`]).
//! - After that the instance is replaced ([`Standing::Inactive`]); after
//!   `expunge_after` the task is given up ([`Standing::Expunged`]): its
//!   record is forgotten like an ended task's ([`given_up_at`]).
//! - A task that comes back while another copy of its instance runs is
//!   settled by `kill_on_return` ([`settle_return`]).
//! - A TASK_UNKNOWN task stands for its instance until an explicit
//!   reconciliation answer confirms it
//!   ([`TaskRecord::unknown_confirmed`]).

use crate::mesos::v1::TaskState;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::spec::unreachable::{KillOnReturn, UnreachablePolicy};

/// What every kill reason [`settle_return`] gives ends with, so a stored
/// kill mark tells it was `kill_on_return`'s ([`is_return_kill`]).
const RETURN_TAG: &str = "(kill_on_return: ";

/// True when a kill's reason is [`settle_return`]'s.
pub fn is_return_kill(reason: &str) -> bool {
    reason.contains(RETURN_TAG)
}

/// Where an unreachable task stands under its service's policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Standing {
    /// Still waited for, until this time: no replacement yet.
    Waiting {
        /// When the wait ends (seconds since the UNIX epoch).
        until: f64,
    },
    /// Replaced; still shown as its instance's unreachable copy.
    Inactive,
    /// Given up for good.
    Expunged,
}

impl Standing {
    /// The name pages and the API show: `unreachable`, `inactive`,
    /// `expunged`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Standing::Waiting { .. } => "unreachable",
            Standing::Inactive => "inactive",
            Standing::Expunged => "expunged",
        }
    }
}

/// Where `record` stands at `now`: `None` unless it is TASK_UNREACHABLE.
/// A record without a [`partition`](TaskRecord::partition) mark (written
/// before it existed) counts from its last update.
pub fn standing(record: &TaskRecord, policy: &UnreachablePolicy, now: f64) -> Option<Standing> {
    if record.state != TaskState::TaskUnreachable {
        return None;
    }
    let since = unreachable_since(record);
    let until = since + policy.inactive_after.as_secs_f64();
    Some(if now < until {
        Standing::Waiting { until }
    } else if now < since + policy.expunge_after.as_secs_f64() {
        Standing::Inactive
    } else {
        Standing::Expunged
    })
}

/// Since when `record` is unreachable (seconds since the UNIX epoch), if
/// it is.
pub fn unreachable_since(record: &TaskRecord) -> f64 {
    record
        .partition
        .filter(|m| m.returned_at.is_none())
        .map_or(record.updated_at, |m| m.unreachable_since)
}

/// True when a live `record` stands for its instance at `now` without
/// being heard from: unreachable and still waited for, or TASK_UNKNOWN
/// not yet confirmed. Its instance is not replaced; it counts as neither
/// running nor starting.
pub fn stands_by(record: &TaskRecord, policy: &UnreachablePolicy, now: f64) -> bool {
    match record.state {
        TaskState::TaskUnreachable => {
            matches!(
                standing(record, policy, now),
                Some(Standing::Waiting { .. })
            )
        }
        TaskState::TaskUnknown => !record.unknown_confirmed(),
        _ => false,
    }
}

/// True when a live `record` no longer stands for its instance: unreachable
/// past `inactive_after`, or TASK_UNKNOWN confirmed. Its instance is
/// replaced; the record is not killed (the master cannot reach the task).
pub fn replaced(record: &TaskRecord, policy: &UnreachablePolicy, now: f64) -> bool {
    match record.state {
        TaskState::TaskUnreachable => !matches!(
            standing(record, policy, now),
            Some(Standing::Waiting { .. })
        ),
        TaskState::TaskUnknown => record.unknown_confirmed(),
        _ => false,
    }
}

/// True when `record` is a task the master can reach: not terminal, not
/// unreachable or unknown. Only such a task's executor gets messages.
pub fn reachable(record: &TaskRecord) -> bool {
    !record.is_terminal()
        && !matches!(
            record.state,
            TaskState::TaskUnreachable | TaskState::TaskUnknown
        )
}

/// True when `record` holds its host for placement constraints (UNIQUE):
/// a live task the master can reach. An unreachable or unknown task does
/// not: its agent is away, and its replacement may need the host back.
pub fn occupies_host(record: &TaskRecord) -> bool {
    is_live(record) && reachable(record)
}

/// When the assessment of `record` changes by time alone (its wait ends),
/// if it does after `now`.
pub fn next_change(record: &TaskRecord, policy: &UnreachablePolicy, now: f64) -> Option<f64> {
    match standing(record, policy, now)? {
        Standing::Waiting { until } => Some(until),
        _ => None,
    }
}

/// Since when `record` is given up (seconds since the UNIX epoch): an
/// unreachable task past `expunge_after`, a TASK_UNKNOWN confirmed by
/// reconciliation; `None` otherwise. Such a record is forgotten once the
/// terminal records' retention has passed since.
pub fn given_up_at(record: &TaskRecord, policy: &UnreachablePolicy, now: f64) -> Option<f64> {
    if record.kill.is_some() {
        return None;
    }
    match record.state {
        TaskState::TaskUnreachable => (standing(record, policy, now)? == Standing::Expunged)
            .then(|| unreachable_since(record) + policy.expunge_after.as_secs_f64()),
        TaskState::TaskUnknown if record.unknown_confirmed() => {
            Some(record.timeline.last().map_or(record.updated_at, |e| e.at))
        }
        _ => None,
    }
}

/// True when `record` came back from a partition (TASK_RUNNING or
/// STARTING again after TASK_UNREACHABLE).
pub fn returned(record: &TaskRecord) -> bool {
    record.partition.is_some_and(|m| m.returned_at.is_some())
}

/// Which copies of one instance die when a copy that came back from a
/// partition runs beside its replacement: `copies` are the instance's live
/// copies, the one to keep first as the caller ranks them. `None` when no
/// copy returned or every copy did (the caller's own order decides); else
/// the index of the copy kept and the others with the reason each dies.
pub fn settle_return(
    copies: &[&TaskRecord],
    kill_on_return: KillOnReturn,
) -> Option<(usize, Vec<(TaskId, String)>)> {
    let back = |t: &&TaskRecord| returned(t);
    let returned_copy = copies.iter().position(back)?;
    let other = copies.iter().position(|t| !back(t))?;
    let instance = copies[0].instance;
    let keep = match kill_on_return {
        KillOnReturn::Old => other,
        KillOnReturn::New => returned_copy,
    };
    let kept = &copies[keep].task_id;
    let dead = copies
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != keep)
        .map(|(_, t)| {
            let why = match (kill_on_return, returned(t)) {
                (KillOnReturn::Old, true) => format!(
                    "returned from a partition after instance {instance} was replaced by {kept} \
                     {RETURN_TAG}old)"
                ),
                (KillOnReturn::New, false) => format!(
                    "replacement of instance {instance}, whose task {kept} returned from a \
                     partition {RETURN_TAG}new)"
                ),
                _ => format!("duplicate of instance {instance}"),
            };
            (t.task_id.clone(), why)
        })
        .collect();
    Some((keep, dead))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::scheduler::records::PartitionMark;

    fn record(id: &str, state: TaskState, partition: Option<PartitionMark>) -> TaskRecord {
        TaskRecord {
            updated_at: 100.0,
            partition,
            ..TaskRecord::sample(id, "web", state)
        }
    }

    fn policy(inactive: u64, expunge: u64, kill_on_return: KillOnReturn) -> UnreachablePolicy {
        UnreachablePolicy {
            inactive_after: Duration::from_secs(inactive),
            expunge_after: Duration::from_secs(expunge),
            kill_on_return,
        }
    }

    fn mark(since: f64, returned_at: Option<f64>) -> Option<PartitionMark> {
        Some(PartitionMark {
            unreachable_since: since,
            returned_at,
        })
    }

    #[test]
    fn an_unreachable_task_waits_then_is_replaced_then_expunged() {
        let p = policy(20, 40, KillOnReturn::Old);
        let t = record("t", TaskState::TaskUnreachable, mark(50.0, None));
        assert_eq!(
            standing(&t, &p, 69.9),
            Some(Standing::Waiting { until: 70.0 })
        );
        assert!(stands_by(&t, &p, 69.9) && !replaced(&t, &p, 69.9));
        assert_eq!(next_change(&t, &p, 60.0), Some(70.0));
        assert_eq!(standing(&t, &p, 70.0), Some(Standing::Inactive));
        assert!(!stands_by(&t, &p, 70.0) && replaced(&t, &p, 70.0));
        assert_eq!(given_up_at(&t, &p, 89.0), None);
        assert_eq!(standing(&t, &p, 90.0), Some(Standing::Expunged));
        assert_eq!(given_up_at(&t, &p, 95.0), Some(90.0));
        assert!(!occupies_host(&t));
        // The default policy replaces at once.
        let d = UnreachablePolicy::default();
        assert!(replaced(&t, &d, 50.0));
        // A record without a mark counts from its last update.
        let old = record("o", TaskState::TaskUnreachable, None);
        assert_eq!(unreachable_since(&old), 100.0);
        // Not unreachable: no standing, and it holds its host.
        let r = record("r", TaskState::TaskRunning, mark(50.0, Some(60.0)));
        assert_eq!(standing(&r, &p, 0.0), None);
        assert!(occupies_host(&r) && returned(&r));
    }

    #[test]
    fn an_unknown_task_stands_until_reconciliation_confirms_it() {
        use crate::mesos::v1::task_status::Reason;
        use crate::scheduler::records::StatusEntry;
        let p = UnreachablePolicy::default();
        let mut t = record("u", TaskState::TaskUnknown, None);
        let entry = |reason| StatusEntry {
            at: 120.0,
            state: TaskState::TaskUnknown,
            source: None,
            reason,
            message: None,
            healthy: None,
        };
        t.timeline.push(entry(None));
        assert!(stands_by(&t, &p, 1e9) && !replaced(&t, &p, 1e9));
        assert_eq!(given_up_at(&t, &p, 1e9), None);
        t.timeline.push(entry(Some(Reason::Reconciliation)));
        assert!(!stands_by(&t, &p, 0.0) && replaced(&t, &p, 0.0));
        assert_eq!(given_up_at(&t, &p, 0.0), Some(120.0));
    }

    #[test]
    fn kill_on_return_picks_the_copy_that_dies() {
        let new = record("new", TaskState::TaskRunning, None);
        let old = record("old", TaskState::TaskRunning, mark(50.0, Some(90.0)));
        let copies = [&old, &new];
        let (keep, dead) = settle_return(&copies, KillOnReturn::Old).unwrap();
        assert_eq!(keep, 1);
        assert_eq!(dead[0].0, "old");
        assert!(dead[0].1.contains("replaced by new"), "{}", dead[0].1);
        let (keep, dead) = settle_return(&copies, KillOnReturn::New).unwrap();
        assert_eq!(keep, 0);
        assert_eq!(dead[0].0, "new");
        assert!(dead[0].1.contains("kill_on_return: new"));
        assert!(is_return_kill(&dead[0].1) && !is_return_kill("scaled down"));
        // No copy returned, or all did: the caller's order decides.
        assert!(settle_return(&[&new, &new], KillOnReturn::Old).is_none());
        assert!(settle_return(&[&old, &old], KillOnReturn::Old).is_none());
    }
}
