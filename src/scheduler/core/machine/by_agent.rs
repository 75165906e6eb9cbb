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

/// The index: live stored tasks by agent.
#[derive(Debug, Default)]
pub(super) struct ByAgent {
    agents: HashMap<AgentId, AgentTasks>,
}

impl ByAgent {
    /// `record` is now in the table, stored if `stored`.
    pub(super) fn add(&mut self, record: &TaskRecord, stored: bool) {
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
}
