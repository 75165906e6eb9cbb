//! The task table: every task record the leader knows, with what waits
//! for its write in flight (one per task: `tasks`), and the time an update
//! last confirmed it without a change.
//!
//! Beside the table, an index kept in step with every change of a record
//! ([`ServiceTasks`] per service):
//! the scheduling pass and the snapshot read one service's records, or
//! skip a service nothing changed in, instead of going over every record
//! several times a second. Every change of a record goes through the
//! table's methods so that the index cannot drift.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::aging::Aging;
use super::by_agent::ByAgent;
use crate::coordination::Versioned;
use crate::mesos::v1;
use crate::scheduler::ids::{AgentId, TaskId};
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::reconcile::TaskList;

/// One known task.
#[derive(Debug)]
pub(super) struct TaskEntry {
    /// The record as stored (shared with snapshots), or being created.
    /// Read-only outside the table: changes go through
    /// [`TaskTable::replace`] and [`TaskTable::touch`], which keep the
    /// index in step.
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
    /// A new instance number was asked for and is being stored.
    pub(super) move_wanted: bool,
    /// Launched in this term and the master may not know it yet: from the
    /// record's create until its ACCEPT is answered (or not sent). An
    /// explicit reconciliation does not ask about it: the master would
    /// answer TASK_LOST for a task whose ACCEPT it has not processed, and
    /// the task would then run beside its replacement.
    pub(super) launch_pending: bool,
    /// The table's copy holds a launch's first TASK_RUNNING that was
    /// acknowledged ahead of the store and whose write failed
    /// (`tasks::ahead_of_store`): the store is behind the copy until the
    /// record's next write. Cleared when a write or a read replaces the
    /// copy ([`TaskTable::replace`]).
    pub(super) running_unstored: bool,
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
            move_wanted: false,
            launch_pending: false,
            running_unstored: false,
        }
    }
}

/// Work for a task that waits for its write in flight.
#[derive(Debug)]
pub(super) enum TaskOp {
    Update(Box<v1::TaskStatus>),
    /// A kill mark, with the KILL grace period as of the request.
    MarkKill(String, Duration),
    /// A new instance number (a scale-down's).
    Move(u32),
}

/// The records of one service, in step with the table.
#[derive(Debug, Default)]
pub(super) struct ServiceTasks {
    /// Every record of the service, by task ID, and whether it is stored
    /// (`false` while its create is in flight).
    records: BTreeMap<TaskId, (Arc<TaskRecord>, bool)>,
    /// A record changed since [`TaskTable::take_changed`] last asked.
    changed: bool,
}

/// The stored records of one service that changed since
/// [`TaskTable::take_shown_changes`] last asked, by task ID, each with the
/// record as stored then (`None`: it was not stored). One entry per task
/// whatever the number of changes; the record now is the table's.
pub(super) type ShownChanges = HashMap<TaskId, Option<Arc<TaskRecord>>>;

impl ServiceTasks {
    /// How many records the service has (those being created too).
    pub(super) fn len(&self) -> usize {
        self.records.len()
    }

    /// Every record of the service (those being created too).
    pub(super) fn records(&self) -> impl Iterator<Item = &TaskRecord> + Clone {
        self.records.values().map(|(r, _)| r.as_ref())
    }

    /// The stored record of `task_id` in the service, if any.
    pub(super) fn stored_record(&self, task_id: &TaskId) -> Option<&TaskRecord> {
        self.records
            .get(task_id)
            .filter(|(_, stored)| *stored)
            .map(|(r, _)| r.as_ref())
    }

    /// The stored records of the service.
    pub(super) fn stored(&self) -> impl Iterator<Item = &TaskRecord> + Clone {
        self.records
            .values()
            .filter(|(_, stored)| *stored)
            .map(|(r, _)| r.as_ref())
    }
}

/// Every task record the leader knows, by task ID (sorted: snapshots list
/// them in this order), with the index.
#[derive(Debug, Default)]
pub(super) struct TaskTable {
    entries: BTreeMap<TaskId, TaskEntry>,
    pub(super) loaded: bool,
    /// Updates that came before the records were read.
    pub(super) early: Vec<v1::TaskStatus>,
    /// The records by service.
    services: HashMap<String, ServiceTasks>,
    /// The stored records' changes by service, kept apart from
    /// `services` so that a service's last record going away is seen.
    shown_changes: HashMap<String, ShownChanges>,
    /// Counts [`TaskTable::clear`]s: changes before one are not in
    /// `shown_changes`, so what was built from them is void.
    epoch: u64,
    /// Counts the changes of stored records and the clears
    /// ([`TaskTable::stored_generation`]).
    stored_generation: u64,
    /// The records housekeeping's timers may act on.
    aging: Aging,
    /// The live stored tasks by agent.
    by_agent: ByAgent,
}

impl TaskTable {
    /// True once the records were read at the start of the term.
    pub(super) fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// Takes the stored records; returns the updates held meanwhile.
    #[cfg(test)]
    pub(super) fn load(
        &mut self,
        records: Vec<(String, Versioned<TaskRecord>)>,
    ) -> Vec<v1::TaskStatus> {
        self.load_part(records);
        self.finish_load()
    }

    /// Takes some of the stored records; the table stays not loaded.
    pub(super) fn load_part(
        &mut self,
        records: impl IntoIterator<Item = (String, Versioned<TaskRecord>)>,
    ) {
        for (key, v) in records {
            let task_id: TaskId = key.into();
            self.remove(&task_id);
            let record = Arc::new(v.value);
            self.index_add(&record, true);
            self.entries
                .insert(task_id, TaskEntry::new(record, Some(v.version)));
        }
    }

    /// Every stored record was taken: the table is loaded; returns the
    /// updates held meanwhile.
    pub(super) fn finish_load(&mut self) -> Vec<v1::TaskStatus> {
        self.loaded = true;
        std::mem::take(&mut self.early)
    }

    /// The entry of `task_id`.
    pub(super) fn get(&self, task_id: &str) -> Option<&TaskEntry> {
        self.entries.get(task_id)
    }

    /// The entry of `task_id`, to change (its record through
    /// [`TaskTable::replace`]).
    pub(super) fn get_mut(&mut self, task_id: &str) -> Option<&mut TaskEntry> {
        self.entries.get_mut(task_id)
    }

    /// A task being launched: its record is being created.
    pub(super) fn insert_launching(&mut self, record: Arc<TaskRecord>) {
        let task_id = record.task_id.clone();
        self.remove(&task_id);
        self.index_add(&record, false);
        let mut entry = TaskEntry::new(record, None);
        entry.launch_pending = true;
        self.entries.insert(task_id, entry);
    }

    /// The ACCEPT of these launching tasks was answered, failed or was not
    /// sent: reconciliation may ask about them.
    pub(super) fn launch_settled<'a>(&mut self, tasks: impl IntoIterator<Item = &'a TaskId>) {
        for task in tasks {
            if let Some(entry) = self.entries.get_mut(task) {
                entry.launch_pending = false;
            }
        }
    }

    /// The create of a launching task failed: it never existed.
    pub(super) fn remove_launching(&mut self, task_id: &str) {
        if self
            .entries
            .get(task_id)
            .is_some_and(|e| e.version.is_none())
        {
            self.remove(task_id);
        }
    }

    /// Forgets the record of `task_id` (deleted, or gone from the store).
    pub(super) fn remove(&mut self, task_id: &str) {
        if let Some(entry) = self.entries.remove(task_id) {
            self.index_remove(&entry.record, entry.version.is_some());
        }
    }

    /// The record of `task_id` as now stored at `version`.
    pub(super) fn replace(&mut self, task_id: &str, record: Arc<TaskRecord>, version: i32) {
        let Some(entry) = self.entries.get_mut(task_id) else {
            return;
        };
        let old = std::mem::replace(&mut entry.record, record.clone());
        entry.running_unstored = false;
        let was_stored = entry.version.replace(version).is_some();
        self.index_remove(&old, was_stored);
        self.index_add(&record, true);
    }

    /// The create succeeded; returns true if work waits for the task.
    pub(super) fn created(&mut self, task_id: &str, version: i32) -> bool {
        match self.entries.get_mut(task_id) {
            Some(entry) => {
                // Stored already when a create is answered twice.
                let was_stored = entry.version.replace(version).is_some();
                entry.writing = false;
                let waiting = !entry.queued.is_empty();
                let record = entry.record.clone();
                self.index_remove(&record, was_stored);
                self.index_add(&record, true);
                waiting
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

    /// How many records the table holds (those being created too).
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Forgets every record (the framework was forgotten).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.services.clear();
        self.shown_changes.clear();
        self.aging.clear();
        self.by_agent.clear();
        self.epoch += 1;
        self.stored_generation += 1;
    }

    /// How many times the table was cleared ([`TaskTable::take_shown_changes`]).
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A number that moves whenever a stored record is added, changed or
    /// removed, or the table is cleared: what is built from the stored
    /// records alone ([`TaskTable::stored`], [`TaskTable::tasks_by_agent`])
    /// stands while it stays (the full snapshot's task list: 100,000 records
    /// listed again took 4–5 ms, `tests/snapshot_cost.rs`).
    pub(super) fn stored_generation(&self) -> u64 {
        self.stored_generation
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

    /// The records by service (every service with a record).
    pub(super) fn services(&self) -> impl Iterator<Item = (&String, &ServiceTasks)> {
        self.services.iter()
    }

    /// The records of `service`.
    pub(super) fn service(&self, service: &str) -> Option<&ServiceTasks> {
        self.services.get(service)
    }

    /// True if a record of `service` changed since [`TaskTable::take_changed`]
    /// last asked (which it does not reset).
    pub(super) fn is_changed(&self, service: &str) -> bool {
        self.services.get(service).is_some_and(|s| s.changed)
    }

    /// True if a record of `service` changed since the last call for it;
    /// clears the mark.
    pub(super) fn take_changed(&mut self, service: &str) -> bool {
        self.services
            .get_mut(service)
            .is_some_and(|s| std::mem::take(&mut s.changed))
    }

    /// The stored records of `service` that changed since the last call
    /// for it (or since the last [`TaskTable::clear`], see
    /// [`TaskTable::epoch`]), with what each was then.
    pub(super) fn take_shown_changes(&mut self, service: &str) -> ShownChanges {
        self.shown_changes.remove(service).unwrap_or_default()
    }

    /// Forgets the changes of the services `keep` refuses (services no
    /// longer known: nobody asks for theirs, and they must not pile up).
    pub(super) fn retain_shown_changes(&mut self, keep: impl Fn(&str) -> bool) {
        self.shown_changes.retain(|name, _| keep(name));
    }

    /// Notes that the stored record `task_id` of `service` changes from
    /// `before` (`None`: not stored), unless an earlier change since the
    /// last take already did.
    fn note_shown(&mut self, service: &str, task_id: &TaskId, before: Option<&Arc<TaskRecord>>) {
        self.stored_generation += 1;
        let changes = match self.shown_changes.get_mut(service) {
            Some(c) => c,
            None => self.shown_changes.entry(service.to_string()).or_default(),
        };
        changes
            .entry(task_id.clone())
            .or_insert_with(|| before.cloned());
    }

    fn index_add(&mut self, record: &Arc<TaskRecord>, stored: bool) {
        self.aging.add(record);
        self.by_agent.add(record, stored);
        let service = match self.services.get_mut(&record.service) {
            Some(s) => s,
            None => self.services.entry(record.service.clone()).or_default(),
        };
        service
            .records
            .insert(record.task_id.clone(), (record.clone(), stored));
        service.changed = true;
        if stored {
            self.note_shown(&record.service, &record.task_id, None);
        }
    }

    fn index_remove(&mut self, record: &Arc<TaskRecord>, stored: bool) {
        self.aging.remove(record);
        self.by_agent.remove(record, stored);
        if let Some(service) = self.services.get_mut(&record.service) {
            service.records.remove(&record.task_id);
            service.changed = true;
            if service.records.is_empty() {
                self.services.remove(&record.service);
            }
        }
        if stored {
            self.note_shown(&record.service, &record.task_id, Some(record));
        }
    }

    /// The records housekeeping's timers may act on ([`Aging`]).
    pub(super) fn aging(&self) -> &Aging {
        &self.aging
    }

    /// Each agent's live stored tasks, in task ID order ([`ByAgent::lists`]).
    pub(super) fn tasks_by_agent(&mut self) -> HashMap<AgentId, Arc<[TaskId]>> {
        self.by_agent.lists()
    }

    /// How many records `agent` has, and how many of them are unfinished
    /// ([`ByAgent::count`](super::by_agent::ByAgent::count)).
    pub(super) fn count_on(&self, agent: &str) -> super::by_agent::RecordCount {
        self.by_agent.count(agent)
    }

    /// The by-agent index (the properties compare it with a scan).
    #[cfg(test)]
    pub(super) fn by_agent(&self) -> &super::by_agent::ByAgent {
        &self.by_agent
    }

    /// True if a record of `task_id` is known.
    pub(super) fn contains(&self, task_id: &str) -> bool {
        self.entries.contains_key(task_id)
    }

    /// Non-terminal tasks with their agents, for explicit reconciliation.
    pub(super) fn reconcilable(&self) -> TaskList {
        self.entries
            .values()
            .filter(|e| !e.record.is_terminal() && !e.launch_pending)
            .map(|e| {
                let agent = (!e.record.agent_id.is_empty()).then(|| e.record.agent_id.clone());
                (e.record.task_id.clone(), agent)
            })
            .collect()
    }

    /// Mutates a record in memory only (the KILL attempt count shown on
    /// pages; the next write stores it).
    pub(super) fn touch(&mut self, task_id: &str, change: impl FnOnce(&mut TaskRecord)) {
        let Some(entry) = self.entries.get_mut(task_id) else {
            return;
        };
        let stored = entry.version.is_some();
        let old = entry.record.clone();
        let mut record = (*old).clone();
        change(&mut record);
        let record = Arc::new(record);
        entry.record = record.clone();
        self.index_remove(&old, stored);
        self.index_add(&record, stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::v1::TaskState;

    fn record(id: &str, service: &str, state: TaskState) -> Arc<TaskRecord> {
        Arc::new(TaskRecord {
            fingerprint: "f".into(),
            agent_id: format!("agent-{}", id.len() % 3).into(),
            ..TaskRecord::sample(id, service, state)
        })
    }

    /// The index as a full recount of the table would make it: per service,
    /// (task ID, state, stored).
    fn recount(t: &TaskTable) -> BTreeMap<String, Vec<(String, i32, bool)>> {
        let mut out: BTreeMap<String, Vec<(String, i32, bool)>> = BTreeMap::new();
        for (id, e) in t.iter() {
            out.entry(e.record.service.clone()).or_default().push((
                id.to_string(),
                e.record.state as i32,
                e.version.is_some(),
            ));
        }
        out
    }

    fn indexed(t: &TaskTable) -> BTreeMap<String, Vec<(String, i32, bool)>> {
        t.services()
            .map(|(name, s)| {
                let list = s
                    .records
                    .iter()
                    .map(|(id, (r, stored))| (id.to_string(), r.state as i32, *stored))
                    .collect();
                (name.clone(), list)
            })
            .collect()
    }

    #[test]
    fn the_index_agrees_with_a_full_recount_after_random_changes() {
        let states = [
            TaskState::TaskStaging,
            TaskState::TaskStarting,
            TaskState::TaskRunning,
            TaskState::TaskFailed,
            TaskState::TaskKilled,
            TaskState::TaskUnreachable,
            TaskState::TaskUnknown,
        ];
        let services = ["web", "db", "cache"];
        // A small LCG: the sequence is the same on every run.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % n
        };
        let mut t = TaskTable::default();
        let mut version = 0;
        for step in 0..5_000 {
            let id = format!("task-{}", next(40));
            let service = services[next(services.len())];
            let state = states[next(states.len())];
            version += 1;
            match next(8) {
                0 => t.insert_launching(record(&id, service, TaskState::TaskStaging)),
                1 => {
                    t.created(&id, version);
                }
                2 => {
                    // A record changes (state; now and then its service).
                    if let Some(old) = t.get(&id).map(|e| e.record.clone()) {
                        let service = if next(10) == 0 { service } else { &old.service };
                        t.replace(&id, record(&id, service, state), version);
                    }
                }
                3 => {
                    let at = next(1_000) as f64 / 7.0;
                    let agent = format!("agent-{}", next(4));
                    let kill = (next(4) == 0).then(|| crate::scheduler::records::KillRequest {
                        reason: "scaled down".into(),
                        requested_at: at,
                        attempts: 0,
                    });
                    t.touch(&id, |r| {
                        r.state = state;
                        r.updated_at = at;
                        r.agent_id = agent.into();
                        r.kill = kill;
                    })
                }
                4 => t.remove(&id),
                5 => t.remove_launching(&id),
                6 if next(50) == 0 => t.clear(),
                _ => {
                    let loaded = vec![(
                        id.clone(),
                        Versioned {
                            value: (*record(&id, service, state)).clone(),
                            version,
                        },
                    )];
                    t.load(loaded);
                }
            }
            assert_eq!(indexed(&t), recount(&t), "after step {step}");
            let records = t.records().map(|r| r.as_ref());
            assert_eq!(
                t.aging.listing(),
                Aging::recount(records),
                "after step {step}"
            );
        }
    }

    #[test]
    fn changes_mark_their_service_once() {
        let mut t = TaskTable::default();
        let shown = |t: &mut TaskTable, name: &str| -> Vec<(String, Option<i32>)> {
            let mut list: Vec<_> = t
                .take_shown_changes(name)
                .into_iter()
                .map(|(id, before)| (id.to_string(), before.map(|r| r.state as i32)))
                .collect();
            list.sort();
            list
        };
        t.insert_launching(record("w1", "web", TaskState::TaskStaging));
        assert!(t.take_changed("web"));
        assert!(!t.take_changed("web"));
        // Not stored yet: the snapshot shows nothing new.
        assert!(shown(&mut t, "web").is_empty());
        t.created("w1", 1);
        assert!(t.take_changed("web"));
        assert_eq!(shown(&mut t, "web"), [("w1".to_string(), None)]);
        t.replace("w1", record("w1", "web", TaskState::TaskRunning), 2);
        t.replace("w1", record("w1", "web", TaskState::TaskFailed), 3);
        assert!(t.take_changed("web"));
        // Two changes, one entry: the record as last taken.
        let staging = Some(TaskState::TaskStaging as i32);
        assert_eq!(shown(&mut t, "web"), [("w1".to_string(), staging)]);
        assert!(!t.take_changed("db") && shown(&mut t, "db").is_empty());
        let failed: Vec<TaskState> = t
            .service("web")
            .unwrap()
            .stored()
            .map(|r| r.state)
            .collect();
        assert_eq!(failed, [TaskState::TaskFailed]);
        // The service's last record goes: the change is still seen.
        t.remove("w1");
        assert!(t.service("web").is_none());
        let failed = Some(TaskState::TaskFailed as i32);
        assert_eq!(shown(&mut t, "web"), [("w1".to_string(), failed)]);
        let epoch = t.epoch();
        t.created("w1", 4);
        t.clear();
        assert!(t.epoch() > epoch && shown(&mut t, "web").is_empty());
    }
}
