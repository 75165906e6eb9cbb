//! The task table: every task record the leader knows, with what waits
//! for its write in flight (one per task: `tasks`), and the time an update
//! last confirmed it without a change.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::coordination::Versioned;
use crate::mesos::v1;
use crate::scheduler::ids::TaskId;
use crate::scheduler::reconcile::TaskList;
use crate::scheduler::records::TaskRecord;

/// One known task.
#[derive(Debug)]
pub(super) struct TaskEntry {
    /// The record as stored (shared with snapshots), or being created.
    pub(super) record: Arc<TaskRecord>,
    /// Its version in ZooKeeper; `None` while the create is in flight.
    pub(super) version: Option<i32>,
    /// A write of this record is in flight.
    pub(super) writing: bool,
    /// What waits for that write, in order.
    pub(super) queued: VecDeque<TaskOp>,
    /// When an update last confirmed the stored state without changing it,
    /// seconds since the UNIX epoch (memory only).
    pub(super) confirmed_at: Option<f64>,
    /// A kill was asked for and is being marked.
    pub(super) kill_wanted: bool,
}

impl TaskEntry {
    pub(super) fn new(record: Arc<TaskRecord>, version: Option<i32>) -> TaskEntry {
        TaskEntry {
            writing: version.is_none(),
            record,
            version,
            queued: VecDeque::new(),
            confirmed_at: None,
            kill_wanted: false,
        }
    }
}

/// Work for a task that waits for its write in flight.
#[derive(Debug)]
pub(super) enum TaskOp {
    Update(Box<v1::TaskStatus>),
    /// A kill mark, with the KILL grace period as of the request.
    MarkKill(String, Duration),
}

/// Every task record the leader knows, by task ID (sorted: snapshots list
/// them in this order).
#[derive(Debug, Default)]
pub(super) struct TaskTable {
    pub(super) entries: BTreeMap<TaskId, TaskEntry>,
    pub(super) loaded: bool,
    /// Updates that came before the records were read.
    pub(super) early: Vec<v1::TaskStatus>,
}

impl TaskTable {
    /// True once the records were read at the start of the term.
    pub(super) fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// Takes the stored records; returns the updates held meanwhile.
    pub(super) fn load(
        &mut self,
        records: Vec<(String, Versioned<TaskRecord>)>,
    ) -> Vec<v1::TaskStatus> {
        for (key, v) in records {
            self.entries.insert(
                key.into(),
                TaskEntry::new(Arc::new(v.value), Some(v.version)),
            );
        }
        self.loaded = true;
        std::mem::take(&mut self.early)
    }

    /// The entry of `task_id`.
    pub(super) fn get(&self, task_id: &str) -> Option<&TaskEntry> {
        self.entries.get(task_id)
    }

    /// The entry of `task_id`, to change.
    pub(super) fn get_mut(&mut self, task_id: &str) -> Option<&mut TaskEntry> {
        self.entries.get_mut(task_id)
    }

    /// A task being launched: its record is being created.
    pub(super) fn insert_launching(&mut self, record: Arc<TaskRecord>) {
        self.entries
            .insert(record.task_id.clone(), TaskEntry::new(record, None));
    }

    /// The create of a launching task failed: it never existed.
    pub(super) fn remove_launching(&mut self, task_id: &str) {
        if self
            .entries
            .get(task_id)
            .is_some_and(|e| e.version.is_none())
        {
            self.entries.remove(task_id);
        }
    }

    /// The create succeeded; returns true if work waits for the task.
    pub(super) fn created(&mut self, task_id: &str, version: i32) -> bool {
        match self.entries.get_mut(task_id) {
            Some(entry) => {
                entry.version = Some(version);
                entry.writing = false;
                !entry.queued.is_empty()
            }
            None => false,
        }
    }

    /// Marks a write of `task_id` in flight (a delete).
    pub(super) fn begin_write(&mut self, task_id: &str) {
        if let Some(entry) = self.entries.get_mut(task_id) {
            entry.writing = true;
        }
    }

    /// Forgets every record (the framework was forgotten).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }

    /// Every entry, by task ID.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&TaskId, &TaskEntry)> {
        self.entries.iter()
    }

    /// Every stored record, by task ID (not those being created: their
    /// tasks are not launched yet).
    pub(super) fn stored(&self) -> impl Iterator<Item = &Arc<TaskRecord>> {
        self.entries
            .values()
            .filter(|e| e.version.is_some())
            .map(|e| &e.record)
    }

    /// Every record, by task ID.
    pub(super) fn records(&self) -> impl Iterator<Item = &Arc<TaskRecord>> + Clone {
        self.entries.values().map(|e| &e.record)
    }

    /// True if a record of `task_id` is known.
    pub(super) fn contains(&self, task_id: &str) -> bool {
        self.entries.contains_key(task_id)
    }

    /// Non-terminal tasks with their agents, for explicit reconciliation.
    pub(super) fn reconcilable(&self) -> TaskList {
        self.entries
            .values()
            .filter(|e| !e.record.is_terminal())
            .map(|e| {
                let agent = (!e.record.agent_id.is_empty()).then(|| e.record.agent_id.clone());
                (e.record.task_id.clone(), agent)
            })
            .collect()
    }

    /// Mutates a record in memory only (the KILL attempt count shown on
    /// pages; the next write stores it).
    pub(super) fn touch(&mut self, task_id: &str, change: impl FnOnce(&mut TaskRecord)) {
        if let Some(entry) = self.entries.get_mut(task_id) {
            change(Arc::make_mut(&mut entry.record));
        }
    }
}
