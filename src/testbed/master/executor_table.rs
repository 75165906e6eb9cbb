//! One agent's executors, by (framework ID, executor ID), with an index of
//! the custom ones per framework. With the command executor an agent runs
//! one executor per task, so anything that needs only the custom executors
//! (each offer lists the framework's custom executors running on the agent,
//! `Offer.executor_ids` in `include/mesos/v1/mesos.proto`) reads the index
//! instead of scanning every task's executor.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Executor;

/// (framework ID, executor ID).
pub(crate) type ExecutorKey = (String, String);

/// The executors of one agent.
#[derive(Debug, Default)]
pub(crate) struct ExecutorTable {
    all: HashMap<ExecutorKey, Executor>,
    /// Custom executors (`Executor::info` set) per framework.
    custom: BTreeMap<String, BTreeSet<String>>,
}

impl ExecutorTable {
    pub fn get(&self, key: &ExecutorKey) -> Option<&Executor> {
        self.all.get(key)
    }

    pub fn get_mut(&mut self, key: &ExecutorKey) -> Option<&mut Executor> {
        self.all.get_mut(key)
    }

    /// The executor under `key`, made by `make` if there is none.
    pub fn get_or_insert_with(
        &mut self,
        key: ExecutorKey,
        make: impl FnOnce() -> Executor,
    ) -> &mut Executor {
        if !self.all.contains_key(&key) {
            let executor = make();
            if executor.info.is_some() {
                self.custom
                    .entry(key.0.clone())
                    .or_default()
                    .insert(key.1.clone());
            }
            self.all.insert(key.clone(), executor);
        }
        self.all.get_mut(&key).expect("inserted above")
    }

    pub fn remove(&mut self, key: &ExecutorKey) -> Option<Executor> {
        let executor = self.all.remove(key)?;
        if executor.info.is_some()
            && let Some(ids) = self.custom.get_mut(&key.0)
        {
            ids.remove(&key.1);
            if ids.is_empty() {
                self.custom.remove(&key.0);
            }
        }
        Some(executor)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ExecutorKey, &Executor)> {
        self.all.iter()
    }

    /// Forgets every executor.
    pub fn clear(&mut self) {
        self.all.clear();
        self.custom.clear();
    }

    pub fn keys(&self) -> impl Iterator<Item = &ExecutorKey> {
        self.all.keys()
    }

    /// IDs of the framework's custom executors, in order.
    pub fn custom_of(&self, framework_id: &str) -> impl Iterator<Item = &String> {
        self.custom.get(framework_id).into_iter().flatten()
    }

    /// The framework's custom executors, in ID order.
    pub fn custom_executors_of<'a>(
        &'a self,
        framework_id: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a Executor)> {
        self.custom_of(framework_id).filter_map(move |id| {
            let executor = self.all.get(&(framework_id.to_string(), id.clone()))?;
            Some((id, executor))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::resources::Resources;
    use crate::mesos::v1;

    fn executor(custom: bool) -> Executor {
        Executor {
            info: custom.then(v1::ExecutorInfo::default),
            resources: Resources::new(),
            tasks: Vec::new(),
            container_id: "c".into(),
            pid: 1,
            messages: Vec::new(),
        }
    }

    fn key(f: &str, e: &str) -> ExecutorKey {
        (f.to_string(), e.to_string())
    }

    #[test]
    fn the_index_lists_custom_executors_only_and_follows_removals() {
        let mut table = ExecutorTable::default();
        table.get_or_insert_with(key("f", "task-1"), || executor(false));
        table.get_or_insert_with(key("f", "x2"), || executor(true));
        table.get_or_insert_with(key("f", "x1"), || executor(true));
        table.get_or_insert_with(key("g", "y"), || executor(true));
        // An existing key keeps its executor.
        table
            .get_or_insert_with(key("f", "x1"), || executor(false))
            .pid = 7;
        assert_eq!(table.get(&key("f", "x1")).unwrap().pid, 7);
        assert_eq!(table.custom_of("f").collect::<Vec<_>>(), ["x1", "x2"]);
        assert_eq!(table.custom_executors_of("g").count(), 1);
        assert!(table.remove(&key("f", "task-1")).is_some());
        assert!(table.remove(&key("f", "x1")).is_some());
        assert!(table.remove(&key("f", "x1")).is_none());
        assert_eq!(table.custom_of("f").collect::<Vec<_>>(), ["x2"]);
        table.remove(&key("f", "x2"));
        assert_eq!(table.custom_of("f").count(), 0);
        assert_eq!(table.iter().count(), 1);
    }
}
