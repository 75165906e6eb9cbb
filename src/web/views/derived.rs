//! What the views compute over all tasks, once per snapshot: the counts,
//! the service names and the task list's [`TaskIndex`], each made from the
//! previous snapshot's where the task records are the same.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use super::index::TaskIndex;
use crate::scheduler::Snapshot;

/// Aggregates over all tasks of one snapshot, computed once per snapshot
/// (see [`DerivedCache`]): with 10,000 tasks, counting them per request
/// cost more than rendering a page.
#[derive(Debug)]
pub struct Derived {
    /// Task records per Mesos state name, sorted by name.
    pub task_counts: Vec<(String, usize)>,
    /// Task records not in a terminal state.
    pub active_tasks: usize,
    /// Service names from the specs and the task records, sorted.
    pub service_names: Vec<String>,
    /// The task list's keys and orders.
    pub index: TaskIndex,
}

impl Derived {
    /// The aggregates of `s`, built from `prev` (an earlier snapshot's)
    /// when given: see [`TaskIndex::new`].
    pub fn new(s: &Snapshot, prev: Option<&Derived>) -> Derived {
        let index = TaskIndex::new(s.tasks.clone(), prev.map(|p| &p.index));
        let (counts, active_tasks) = index.state_counts();
        let names: BTreeSet<&str> = s
            .services
            .iter()
            .map(|x| x.spec.name.as_str())
            .chain(index.services())
            .collect();
        let service_names = names.into_iter().map(str::to_string).collect();
        Derived {
            task_counts: counts
                .into_iter()
                .map(|(state, n)| (state.as_str_name().to_string(), n))
                .collect(),
            active_tasks,
            service_names,
            index,
        }
    }
}

/// The [`Derived`] of the latest snapshot asked about, made by the first
/// request that asks (the others wait for it) from the one before.
#[derive(Debug, Default)]
pub struct DerivedCache {
    latest: Mutex<Option<Arc<Entry>>>,
}

#[derive(Debug)]
struct Entry {
    snapshot: Arc<Snapshot>,
    derived: OnceLock<Arc<Derived>>,
    /// What to build it from, until it is built.
    prev: Mutex<Option<Arc<Derived>>>,
}

impl DerivedCache {
    /// The aggregates of `s` if made already (cheap: for the async
    /// workers, which must not wait for a build).
    pub fn ready(&self, s: &Arc<Snapshot>) -> Option<Arc<Derived>> {
        let latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest
            .as_ref()
            .filter(|e| Arc::ptr_eq(&e.snapshot, s))
            .and_then(|e| e.derived.get().cloned())
    }

    /// The aggregates of `s`, made now if need be (up to tens of
    /// milliseconds at 100,000 tasks without a previous snapshot's: call
    /// it off the async workers).
    pub fn get(&self, s: &Arc<Snapshot>) -> Arc<Derived> {
        let entry = {
            let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
            match &*latest {
                Some(e) if Arc::ptr_eq(&e.snapshot, s) => e.clone(),
                other => {
                    // Build from the newest made: the replaced entry's, or
                    // (not built yet) what it was to be built from.
                    let prev = other.as_ref().and_then(|e| {
                        e.derived
                            .get()
                            .cloned()
                            .or_else(|| e.prev.lock().unwrap_or_else(|e| e.into_inner()).clone())
                    });
                    let e = Arc::new(Entry {
                        snapshot: s.clone(),
                        derived: OnceLock::new(),
                        prev: Mutex::new(prev),
                    });
                    *latest = Some(e.clone());
                    e
                }
            }
        };
        entry
            .derived
            .get_or_init(|| {
                let prev = entry.prev.lock().unwrap_or_else(|e| e.into_inner()).take();
                Arc::new(Derived::new(s, prev.as_deref()))
            })
            .clone()
    }
}
