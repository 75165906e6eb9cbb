//! The master's tasks by (framework ID, task ID), with an index of the
//! tasks on each agent.
//!
//! A real master keeps its tasks on the agent they run on
//! (`Slave::tasks` in `src/master/master.hpp`, by framework and task ID), so
//! what happens to one agent — it becomes unreachable, re-registers, is
//! marked gone, restarts — touches that agent's tasks only. The testbed
//! does the same through the index: those paths cost the agent's tasks,
//! not every task of the cluster (100 agents made unreachable one after
//! the other would otherwise read every task 100 times).
//!
//! Reads go through `Deref` to the map; inserts and removals go through
//! [`TaskTable::insert`] and [`TaskTable::remove`], which keep the index.

use std::collections::{BTreeSet, HashMap};
use std::ops::Deref;

use super::tasks::Task;

/// (framework ID, task ID).
pub(crate) type TaskKey = (String, String);

/// Tasks by key, indexed by agent.
#[derive(Debug, Default)]
pub(crate) struct TaskTable {
    all: HashMap<TaskKey, Task>,
    /// The keys of each agent's tasks, in order (updates about an agent's
    /// tasks go out in task order).
    by_agent: HashMap<String, BTreeSet<TaskKey>>,
}

impl Deref for TaskTable {
    type Target = HashMap<TaskKey, Task>;

    fn deref(&self) -> &Self::Target {
        &self.all
    }
}

impl TaskTable {
    /// Adds (or replaces) the task under `key`; returns the one replaced.
    pub fn insert(&mut self, key: TaskKey, task: Task) -> Option<Task> {
        let agent_id = task.agent_id.clone();
        let old = self.all.insert(key.clone(), task);
        if let Some(old) = &old {
            self.unindex(&old.agent_id, &key);
        }
        self.by_agent.entry(agent_id).or_default().insert(key);
        old
    }

    /// Removes the task under `key`.
    pub fn remove(&mut self, key: &TaskKey) -> Option<Task> {
        let task = self.all.remove(key)?;
        self.unindex(&task.agent_id, key);
        Some(task)
    }

    /// The task under `key`, to change anything but its agent.
    pub fn get_mut(&mut self, key: &TaskKey) -> Option<&mut Task> {
        self.all.get_mut(key)
    }

    /// The keys of the tasks on `agent_id`, in order.
    pub fn keys_on(&self, agent_id: &str) -> Vec<TaskKey> {
        self.by_agent
            .get(agent_id)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The tasks on `agent_id`, in key order.
    pub fn on_agent<'a>(&'a self, agent_id: &str) -> impl Iterator<Item = (&'a TaskKey, &'a Task)> {
        self.by_agent
            .get(agent_id)
            .into_iter()
            .flatten()
            .filter_map(|key| self.all.get_key_value(key))
    }

    fn unindex(&mut self, agent_id: &str, key: &TaskKey) {
        if let Some(keys) = self.by_agent.get_mut(agent_id) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_agent.remove(agent_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::v1;

    fn task(framework: &str, id: &str, agent: &str) -> (TaskKey, Task) {
        let info = v1::TaskInfo {
            task_id: v1::TaskId { value: id.into() },
            ..Default::default()
        };
        let task = Task::new(framework, &info, agent, "c".into(), 1);
        ((framework.to_string(), id.to_string()), task)
    }

    #[test]
    fn the_agent_index_follows_inserts_replacements_and_removals() {
        let mut table = TaskTable::default();
        for (f, t, a) in [("f", "t2", "a"), ("f", "t1", "a"), ("g", "t1", "b")] {
            let (key, task) = task(f, t, a);
            assert!(table.insert(key, task).is_none());
        }
        let key = |f: &str, t: &str| (f.to_string(), t.to_string());
        assert_eq!(table.keys_on("a"), [key("f", "t1"), key("f", "t2")]);
        assert_eq!(table.on_agent("b").count(), 1);
        assert!(table.keys_on("c").is_empty());

        // Replaced by a task of the same key on another agent: it moves.
        let (k, moved) = task("f", "t2", "b");
        assert!(table.insert(k, moved).is_some());
        assert_eq!(table.keys_on("a"), [key("f", "t1")]);
        assert_eq!(table.keys_on("b"), [key("f", "t2"), key("g", "t1")]);

        assert!(table.remove(&key("f", "t1")).is_some());
        assert!(table.remove(&key("f", "t1")).is_none());
        assert!(table.keys_on("a").is_empty());
        assert!(
            !table.by_agent.contains_key("a"),
            "empty agents are dropped"
        );
        assert_eq!(table.len(), 2);
        table.get_mut(&key("g", "t1")).unwrap().retries = 3;
        assert_eq!(table[&key("g", "t1")].retries, 3);
    }
}
