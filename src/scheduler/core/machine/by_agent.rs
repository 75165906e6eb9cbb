//! The live stored tasks by agent, kept beside the task table
//! ([`super::table::TaskTable`] updates it with every change of a record),
//! for the full snapshot's per-agent task lists (`AgentStatus::tasks`).
//!
//! Grouping every record by agent at each full snapshot cost about 2.5 %
//! of the leader's CPU during a 100,000-task launch (`perf`,
//! `docs/benchmarks.md` "Housekeeping by index"), most of it hashing agent
//! IDs: work proportional to the task count, several times a second. Here
//! a change moves one task ID, and a snapshot builds the list only of the
//! agents whose tasks changed since the last one.
//!
//! Beside the lists, it counts every record by agent, stored or not, and
//! the unfinished (non-terminal) ones: a drain is done when its agent has
//! no unfinished task left, asked at every tick while a drain runs, and a
//! drain may start on an agent the leader has a record on. Both were a
//! walk of every record (at 100,000 tasks a tick took 30–40 ms of CPU while
//! any drain ran: `command_timing` `step` lines, `docs/benchmarks.md`
//! "Slow steps by kind, drains' ticks and an explicit run's start").

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::scheduler::ids::{AgentId, TaskId};
use crate::scheduler::records::{TaskRecord, is_live};

/// One agent's live stored tasks, and their list as last built.
#[derive(Debug, Default)]
struct AgentTasks {
    ids: BTreeSet<TaskId>,
    /// `ids` as a list, until they change.
    list: Option<Arc<[TaskId]>>,
}

/// How many records an agent has in the table.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct RecordCount {
    /// Every record, stored or not, terminal or not.
    pub(super) all: u32,
    /// The non-terminal ones (being killed or not).
    pub(super) unfinished: u32,
}

/// The index: live stored tasks by agent, and every record counted by
/// agent.
#[derive(Debug, Default)]
pub(super) struct ByAgent {
    agents: HashMap<AgentId, AgentTasks>,
    counts: HashMap<AgentId, RecordCount>,
}

impl ByAgent {
    /// `record` is now in the table, stored if `stored`.
    pub(super) fn add(&mut self, record: &TaskRecord, stored: bool) {
        let count = match self.counts.get_mut(&record.agent_id) {
            Some(count) => count,
            None => self.counts.entry(record.agent_id.clone()).or_default(),
        };
        count.all += 1;
        count.unfinished += u32::from(!record.is_terminal());
        if !stored || !is_live(record) {
            return;
        }
        let agent = match self.agents.get_mut(&record.agent_id) {
            Some(agent) => agent,
            None => self.agents.entry(record.agent_id.clone()).or_default(),
        };
        if agent.ids.insert(record.task_id.clone()) {
            agent.list = None;
        }
    }

    /// `record` (as it was added, `stored` as then) is no longer in the
    /// table.
    pub(super) fn remove(&mut self, record: &TaskRecord, stored: bool) {
        if let Some(count) = self.counts.get_mut(&record.agent_id) {
            count.all = count.all.saturating_sub(1);
            if !record.is_terminal() {
                count.unfinished = count.unfinished.saturating_sub(1);
            }
            if count.all == 0 {
                self.counts.remove(&record.agent_id);
            }
        }
        if !stored || !is_live(record) {
            return;
        }
        let Some(agent) = self.agents.get_mut(&record.agent_id) else {
            return;
        };
        if agent.ids.remove(&record.task_id) {
            agent.list = None;
        }
        if agent.ids.is_empty() {
            self.agents.remove(&record.agent_id);
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.agents.clear();
        self.counts.clear();
    }

    /// The records `agent` has in the table (zero counts if none).
    pub(super) fn count(&self, agent: &str) -> RecordCount {
        self.counts.get(agent).copied().unwrap_or_default()
    }

    /// Each agent's live stored tasks in task ID order; a list is built
    /// again only where its tasks changed since the last call.
    pub(super) fn lists(&mut self) -> HashMap<AgentId, Arc<[TaskId]>> {
        self.agents
            .iter_mut()
            .map(|(agent, tasks)| {
                let list = tasks
                    .list
                    .get_or_insert_with(|| tasks.ids.iter().cloned().collect());
                (agent.clone(), list.clone())
            })
            .collect()
    }
}

/// What a scan of `records` gives: the live stored ones (`stored` true)
/// by agent, sorted, agents sorted (tests compare the index with it).
#[cfg(test)]
pub(super) fn recount<'a>(
    records: impl Iterator<Item = (&'a TaskRecord, bool)>,
) -> Vec<(String, Vec<String>)> {
    let mut by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (record, _) in records.filter(|(r, stored)| *stored && is_live(r)) {
        by.entry(record.agent_id.to_string())
            .or_default()
            .push(record.task_id.to_string());
    }
    by.into_iter()
        .map(|(agent, mut ids)| {
            ids.sort();
            (agent, ids)
        })
        .collect()
}

/// What a scan of `records` counts by agent ([`ByAgent::count`]'s
/// shape, agents sorted; tests compare the index with it).
#[cfg(test)]
pub(super) fn count_all<'a>(
    records: impl Iterator<Item = &'a TaskRecord>,
) -> Vec<(String, RecordCount)> {
    let mut by: std::collections::BTreeMap<String, RecordCount> = Default::default();
    for record in records {
        let count = by.entry(record.agent_id.to_string()).or_default();
        count.all += 1;
        count.unfinished += u32::from(!record.is_terminal());
    }
    by.into_iter().collect()
}

/// The index's counts in [`count_all`]'s shape.
#[cfg(test)]
pub(super) fn counts(by: &ByAgent) -> Vec<(String, RecordCount)> {
    let mut out: Vec<(String, RecordCount)> = by
        .counts
        .iter()
        .map(|(agent, count)| (agent.to_string(), *count))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The index's lists in [`recount`]'s shape.
#[cfg(test)]
pub(super) fn listing(lists: HashMap<AgentId, Arc<[TaskId]>>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = lists
        .into_iter()
        .map(|(a, l)| (a.to_string(), l.iter().map(|t| t.to_string()).collect()))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::v1::TaskState;

    fn record(id: &str, agent: &str, state: TaskState) -> TaskRecord {
        TaskRecord {
            agent_id: agent.into(),
            ..TaskRecord::sample(id, "web", state)
        }
    }

    fn shown(by: &mut ByAgent) -> Vec<(String, Vec<String>)> {
        listing(by.lists())
    }

    #[test]
    fn only_live_stored_tasks_are_listed_and_a_list_is_kept_until_it_changes() {
        let mut by = ByAgent::default();
        by.add(&record("b", "a1", TaskState::TaskRunning), true);
        by.add(&record("a", "a1", TaskState::TaskStaging), true);
        by.add(&record("c", "a2", TaskState::TaskRunning), false);
        by.add(&record("d", "a2", TaskState::TaskFinished), true);
        let mut killed = record("e", "a2", TaskState::TaskRunning);
        killed.kill = Some(crate::scheduler::records::KillRequest {
            reason: "scaled down".into(),
            requested_at: 1.0,
            attempts: 0,
        });
        by.add(&killed, true);
        assert_eq!(
            shown(&mut by),
            [("a1".into(), vec!["a".into(), "b".into()])]
        );
        let first = by.lists()[&AgentId::from("a1")].clone();
        assert!(
            Arc::ptr_eq(&first, &by.lists()[&AgentId::from("a1")]),
            "kept"
        );
        by.add(&record("f", "a3", TaskState::TaskRunning), true);
        assert!(
            Arc::ptr_eq(&first, &by.lists()[&AgentId::from("a1")]),
            "another agent's change leaves it"
        );
        by.remove(&record("a", "a1", TaskState::TaskStaging), true);
        assert_eq!(&*by.lists()[&AgentId::from("a1")], [TaskId::from("b")]);
        by.remove(&record("b", "a1", TaskState::TaskRunning), true);
        assert_eq!(shown(&mut by), [("a3".into(), vec!["f".into()])]);
    }

    #[test]
    fn every_record_counts_by_agent_and_the_unfinished_apart() {
        let mut by = ByAgent::default();
        let count = |all, unfinished| RecordCount { all, unfinished };
        let running = record("a", "a1", TaskState::TaskRunning);
        let finished = record("b", "a1", TaskState::TaskFinished);
        let mut killed = record("c", "a1", TaskState::TaskRunning);
        killed.kill = Some(crate::scheduler::records::KillRequest {
            reason: "drained".into(),
            requested_at: 1.0,
            attempts: 0,
        });
        by.add(&running, false);
        by.add(&finished, true);
        by.add(&killed, true);
        assert_eq!(by.count("a1"), count(3, 2), "unstored and killed count");
        assert_eq!(by.count("a2"), count(0, 0));
        by.remove(&killed, true);
        by.remove(&running, false);
        assert_eq!(by.count("a1"), count(1, 0), "only a finished one left");
        by.remove(&finished, true);
        assert_eq!(counts(&by), [], "an agent with no record is forgotten");
    }
}
