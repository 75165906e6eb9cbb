//! The task table, status updates and kill marks.
//!
//! Rules (`docs/architecture.md`; acknowledgements as in the Mesos
//! scheduler HTTP API doc, `docs/scheduler-http-api.md` in apache/mesos):
//! - A status update is acknowledged only after its record is stored; one
//!   whose write fails is not acknowledged, so the agent sends it again.
//!   Updates without a uuid (the master's own, e.g. reconciliation answers)
//!   are never acknowledged.
//! - An update that changes nothing the record stores (the same state: a
//!   reconciliation answer, a re-sent update whose acknowledgement was lost)
//!   is not written again; the time it confirmed the record is kept in
//!   memory ([`TaskEntry::confirmed_at`](super::table::TaskEntry)).
//! - Exceptions, the steps of a launch ([`ahead_of_store`]): the executor's
//!   TASK_STARTING after a stored TASK_STAGING changes the table's copy
//!   only and is acknowledged at once; the record's next write stores it.
//!   The first TASK_RUNNING changes the table's copy, is acknowledged at
//!   once, and its write follows without being waited for. If that write
//!   fails, the next update that would only confirm the copy (the agent's
//!   repeat, a reconciliation answer) writes it before it is acknowledged
//!   ([`Machine::route_update`], `apply_update`).
//! - One write per task is in flight at a time (each is a compare-and-set
//!   on the record's version); what comes meanwhile waits in the task's
//!   queue, in order.
//! - An update for a task we have no record of: terminal ones are
//!   acknowledged and ignored; live ones are killed, unless still staging
//!   (it may be a launch whose record write we have not seen succeed).
//! - A kill is first marked in the record (stored), then KILLs follow, so a
//!   new leader resumes them.
//! - A task reported alive after its record ended (a TASK_LOST the master
//!   sent before it knew the task; an agent back from a partition) is
//!   recorded as it is, with a kill mark in the same write: its instance
//!   was given up and may already run elsewhere.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::table::TaskOp;
use super::{Machine, Pending};
use crate::coordination::{CoordinationError, Expect, Versioned, Written};
use crate::mesos::is_terminal;
use crate::mesos::v1::{self, TaskState, task_status};
use crate::scheduler::core::io::{Ack, StoreOp, StoreResult};
use crate::scheduler::ids::TaskId;
use crate::scheduler::metrics::UpdateLabels;
use crate::scheduler::records::{KillRequest, TaskRecord};
use crate::scheduler::rules::{restart, workload};
use crate::scheduler::snapshot::EventKind;

/// Grace period of a KILL for a task whose service is gone, and for tasks
/// unknown to the scheduler.
pub(super) const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);
/// Status updates held while the task records are being read; more are
/// dropped unacknowledged (the agents send them again).
const EARLY_UPDATES: usize = 100_000;

/// What a task request in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    /// An update's record; send `ack` (if the update has a uuid) once
    /// stored. Only what the answer needs is kept, not the whole update:
    /// thousands wait for their writes while many tasks launch.
    Update {
        task: TaskId,
        state: TaskState,
        ack: Option<Ack>,
        /// Acknowledged already: the first TASK_RUNNING
        /// ([`Ahead::Running`]).
        acked: bool,
        record: Arc<TaskRecord>,
        /// The record was terminal and the update says the task lives: the
        /// record carries a kill mark, and KILLs follow once it is stored.
        revived: bool,
    },
    /// A launching task's record; its ACCEPT waits for it.
    Create {
        task: TaskId,
        group: u64,
        index: usize,
    },
    /// A kill mark; its KILLs carry `grace`.
    KillMark {
        task: TaskId,
        record: Arc<TaskRecord>,
        reason: String,
        grace: Duration,
    },
    /// A scale-down gives the task another instance number.
    Move {
        task: TaskId,
        record: Arc<TaskRecord>,
    },
    /// Deleting an old terminal record.
    Delete { task: TaskId },
    /// Re-reading a record after a version conflict.
    Reload { task: TaskId },
    /// An audit entry of the scheduler's own (`partition`).
    Audit,
}

/// What became of a status update ([`Machine::route_update`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    /// It only confirmed the task's record: nothing changed.
    Confirmed,
    /// Anything else: the record changed or will, the update waits behind
    /// a write, or the task is unknown.
    Other,
}

impl Machine {
    /// A batch of status updates, in stream order.
    ///
    /// A batch of updates that each only confirmed its task's record (an
    /// explicit reconciliation's answers, nothing changed) and ended no
    /// reconciliation asks for no scheduling pass: the pass reads nothing
    /// they touch, and at 100,000 tasks a run's answers asked for one every
    /// batch of 64.
    pub(super) fn on_updates(&mut self, batch: Vec<v1::TaskStatus>, now: Instant) {
        let at = self.unix(now);
        let mut confirmations_only = true;
        for status in batch {
            self.count_update(&status);
            let reconciliation = status.reason == Some(task_status::Reason::Reconciliation as i32);
            let actions = self
                .reconciler
                .on_update(&status.task_id.value, reconciliation, now, at);
            confirmations_only &= actions.is_empty();
            self.reconcile_actions(actions, now);
            if !self.tasks.is_loaded() {
                if self.tasks.early.len() < EARLY_UPDATES {
                    self.tasks.early.push(status);
                }
                confirmations_only = false;
                continue;
            }
            confirmations_only &= self.route_update(status, now) == Applied::Confirmed;
        }
        if !confirmations_only {
            self.needs_schedule = true;
        }
    }

    /// Applies an update now, or queues it behind its task's write; says
    /// which.
    pub(super) fn route_update(&mut self, status: v1::TaskStatus, now: Instant) -> Applied {
        let task_id = TaskId::from(&status.task_id);
        match self.tasks.get_mut(&task_id) {
            None => {
                self.unknown_task_update(task_id, &status, now);
                Applied::Other
            }
            Some(entry) if entry.writing => {
                entry.queued.push_back(TaskOp::Update(Box::new(status)));
                Applied::Other
            }
            Some(_) => self.apply_update(task_id, status, now),
        }
    }

    fn apply_update(&mut self, task_id: TaskId, status: v1::TaskStatus, now: Instant) -> Applied {
        let at = self.unix(now);
        let Some(entry) = self.tasks.get_mut(&task_id) else {
            return Applied::Other;
        };
        // The master's word for a removed framework's tasks (`removed`)
        // does not overwrite an end the task reached first.
        let removed = status.reason == Some(task_status::Reason::FrameworkRemoved as i32);
        if removed && entry.record.is_terminal() {
            return Applied::Other;
        }
        if !entry.record.changed_by(&status) {
            if entry.running_unstored
                && let Some(version) = entry.version
            {
                // A launch's first TASK_RUNNING was acknowledged ahead of
                // its write and that write failed: the table's copy holds
                // it, the store does not. An ACKNOWLEDGE tells the agent to
                // stop retrying (`docs/scheduler-http-api.md` in
                // apache/mesos), so a repeat of the update is acknowledged
                // only once what it says is stored, as every update but a
                // launch's steps is (`docs/architecture.md`, the life of a
                // status update). Were the repeat acknowledged from the
                // copy, nothing would be certain to store it: no write is
                // retried after a failure; the record's next write carries
                // the copy only if no version conflict re-reads the record
                // first; and a new leader reads TASK_STAGING or
                // TASK_STARTING, so TASK_RUNNING would come back only from
                // its reconciliation (`docs/reconciliation.md` in
                // apache/mesos: the master answers with the latest state),
                // with the timeline entry and `running_since` lost. That
                // loss is accepted for the first ACKNOWLEDGE alone, which
                // takes the write off the launch's critical path
                // (`ahead_of_store`); the repeat has no such reason and is
                // the agent's last retry of the update, so it is used to
                // store the copy (a reconciliation answer too: it has no
                // acknowledgement, and the store catches up).
                let record = entry.record.clone();
                self.write_update(task_id, &status, record, version, false, false);
                return Applied::Other;
            }
            entry.confirmed_at = Some(at);
            self.acknowledge(&status);
            return Applied::Confirmed;
        }
        let Some(version) = entry.version else {
            entry.queued.push_back(TaskOp::Update(Box::new(status)));
            return Applied::Other;
        };
        if let Some(ahead) = ahead_of_store(&entry.record, &status) {
            // The table's copy takes the update and it is acknowledged at
            // once. TASK_STARTING: the record stays as stored
            // (TASK_STAGING) and its next write carries it. TASK_RUNNING:
            // that write is sent now, not waited for.
            entry.confirmed_at = Some(at);
            self.tasks
                .touch(&task_id, |record| record.apply(&status, at));
            self.out.dirty = true;
            self.acknowledge(&status);
            if ahead == Ahead::Starting {
                return Applied::Other;
            }
            if let Some(entry) = self.tasks.get(&task_id) {
                let record = entry.record.clone();
                self.write_update(task_id, &status, record, version, true, false);
            }
            return Applied::Other;
        }
        let mut record = (*entry.record).clone();
        let ended = record.is_terminal().then_some(record.state);
        record.apply(&status, at);
        let revived = ended.is_some() && !record.is_terminal() && record.kill.is_none();
        if let Some(ended) = ended.filter(|_| revived) {
            // Alive after its end (a TASK_LOST the master gave before it
            // knew the task, an agent back from a partition): its instance
            // was given up and may run again elsewhere. The record tells
            // the truth and carries the kill mark in the same write, so no
            // scheduling pass counts the task as live.
            record.kill = Some(KillRequest::new(
                format!(
                    "reported {} after {ended}: its instance was given up",
                    status.state()
                ),
                at,
            ));
        }
        self.write_update(task_id, &status, Arc::new(record), version, false, revived);
        Applied::Other
    }

    /// Writes `record`, the task's record with `status` applied, as a
    /// compare-and-set on `version`; its acknowledgement follows the write
    /// unless `acked` (sent already, [`Ahead::Running`]).
    fn write_update(
        &mut self,
        task: TaskId,
        status: &v1::TaskStatus,
        record: Arc<TaskRecord>,
        version: i32,
        acked: bool,
        revived: bool,
    ) {
        if let Some(entry) = self.tasks.get_mut(&task) {
            entry.writing = true;
        }
        self.store(
            StoreOp::PutTask(record.clone(), Expect::Version(version)),
            Pending::Task(Step::Update {
                task,
                state: status.state(),
                ack: if acked { None } else { ack_of(status) },
                acked,
                record,
                revived,
            }),
        );
    }

    fn unknown_task_update(&mut self, task_id: TaskId, status: &v1::TaskStatus, now: Instant) {
        let state = status.state();
        if !is_terminal(state) && state != TaskState::TaskStaging {
            let agent = status.agent_id.as_ref().map(Into::into);
            let reason = "unknown to the scheduler";
            if self
                .kills
                .request(&task_id, agent, reason, DEFAULT_KILL_GRACE, now)
            {
                self.log(
                    EventKind::Kill,
                    format!("task {task_id} is unknown to the scheduler ({state}); killing it"),
                    now,
                );
                self.send_due_kills(now);
            }
        } else if is_terminal(state) {
            self.kills.done(&task_id);
        }
        self.acknowledge(status);
    }

    fn count_update(&mut self, status: &v1::TaskStatus) {
        let name = |s: Option<&str>| s.unwrap_or("none").to_string();
        let labels = UpdateLabels {
            state: status.state().as_str_name().into(),
            source: name(
                status
                    .source
                    .and_then(|s| task_status::Source::try_from(s).ok())
                    .map(|s| s.as_str_name()),
            ),
            reason: name(
                status
                    .reason
                    .and_then(|r| task_status::Reason::try_from(r).ok())
                    .map(|r| r.as_str_name()),
            ),
        };
        *self.stats.status_updates.entry(labels).or_default() += 1;
    }

    pub(super) fn on_task_stored(&mut self, step: Step, result: StoreResult, now: Instant) {
        let StoreResult::Written(written) = result else {
            if let (Step::Reload { task }, StoreResult::Task(read)) = (&step, result) {
                self.reloaded(task.clone(), *read, now);
            }
            return;
        };
        match step {
            Step::Update {
                task,
                state,
                ack,
                acked,
                record,
                revived,
            } => match written {
                Ok(Written::Version(version)) => {
                    let at = self.unix(now);
                    let Some(entry) = self.tasks.get_mut(&task) else {
                        return;
                    };
                    entry.writing = false;
                    entry.confirmed_at = Some(at);
                    self.tasks.replace(&task, record.clone(), version);
                    self.out.dirty = true;
                    // The workload may have changed (an instance ended, a
                    // replacement runs): decide again.
                    self.needs_schedule = true;
                    self.note_transition(&record, now);
                    self.job_task_changed(&record, now);
                    self.confirm_unknown(&record, now);
                    self.out.acks.extend(ack);
                    if revived && let Some(kill) = &record.kill {
                        let grace = self.kill_grace(&record.service);
                        self.kill_marked(&task, &kill.reason, grace, now);
                    }
                    self.drain(&task, now);
                }
                other => {
                    let (e, why) = failure(other);
                    if acked && let Some(entry) = self.tasks.get_mut(&task) {
                        entry.running_unstored = true;
                    }
                    let message = if acked {
                        // Acknowledged already (`Ahead::Running`): the
                        // table keeps it; the record's next write, the
                        // agent's repeat of the update (`apply_update`),
                        // or a new leader's reconciliation, stores it.
                        format!(
                            "could not store the {state} update of {task}: {why}; kept in memory"
                        )
                    } else {
                        format!(
                            "could not store the {state} update of {task}: {why}; not acknowledged"
                        )
                    };
                    self.log(EventKind::Error, message, now);
                    self.write_failed(task, e, now);
                }
            },
            Step::Create { task, group, index } => {
                self.launch_stored(task, group, index, written, now);
            }
            Step::KillMark {
                task,
                record,
                reason,
                grace,
            } => match written {
                Ok(Written::Version(version)) => {
                    if let Some(entry) = self.tasks.get_mut(&task) {
                        entry.writing = false;
                        entry.kill_wanted = false;
                    } else {
                        return;
                    }
                    self.tasks.replace(&task, record, version);
                    self.out.dirty = true;
                    self.kill_marked(&task, &reason, grace, now);
                    self.drain(&task, now);
                }
                other => {
                    let (e, why) = failure(other);
                    let message = format!("could not mark {task} for killing: {why}");
                    self.log(EventKind::Error, message, now);
                    if let Some(entry) = self.tasks.get_mut(&task) {
                        entry.kill_wanted = false;
                    }
                    self.write_failed(task, e, now);
                }
            },
            Step::Move { task, record } => {
                if let Some(entry) = self.tasks.get_mut(&task) {
                    entry.move_wanted = false;
                }
                match written {
                    Ok(Written::Version(version)) => {
                        if let Some(entry) = self.tasks.get_mut(&task) {
                            entry.writing = false;
                        }
                        let message = format!(
                            "task {task} of service {} kept by the scale-down as instance {}",
                            record.service, record.instance
                        );
                        self.tasks.replace(&task, record, version);
                        self.out.dirty = true;
                        self.needs_schedule = true;
                        self.log(EventKind::Service, message, now);
                        self.drain(&task, now);
                    }
                    other => {
                        let (e, why) = failure(other);
                        self.warn(format!("could not renumber {task}: {why}"));
                        self.write_failed(task, e, now);
                    }
                }
            }
            Step::Delete { task } => match written {
                Ok(_) => {
                    self.tasks.remove(&task);
                    self.out.dirty = true;
                }
                Err(e) => self.write_failed(task, Some(e), now),
            },
            Step::Reload { task } => self.write_failed(task, None, now),
            Step::Audit => {
                if let Err(e) = written {
                    self.warn(format!("could not append to the audit log: {e}"));
                }
            }
        }
    }

    /// A write failed: on a version conflict the record is read again,
    /// otherwise what waits goes on.
    fn write_failed(&mut self, task: TaskId, error: Option<CoordinationError>, now: Instant) {
        let Some(entry) = self.tasks.get_mut(&task) else {
            return;
        };
        if matches!(error, Some(CoordinationError::VersionConflict { .. })) {
            self.store(
                StoreOp::ReadTask(task.clone()),
                Pending::Task(Step::Reload { task }),
            );
            return;
        }
        entry.writing = false;
        self.drain(&task, now);
    }

    fn reloaded(
        &mut self,
        task: TaskId,
        read: Result<Option<Versioned<TaskRecord>>, CoordinationError>,
        now: Instant,
    ) {
        let Some(entry) = self.tasks.get_mut(&task) else {
            return;
        };
        match read {
            Ok(Some(v)) => {
                entry.writing = false;
                self.tasks.replace(&task, Arc::new(v.value), v.version);
                self.out.dirty = true;
                self.drain(&task, now);
            }
            Ok(None) => {
                // Someone deleted it: the task is no longer ours to track;
                // reconciliation finds it if it runs.
                self.tasks.remove(&task);
                self.out.dirty = true;
            }
            Err(e) => {
                entry.writing = false;
                self.warn(format!("could not read the record of {task} again: {e}"));
                self.drain(&task, now);
            }
        }
    }

    /// Runs what waited for a task's write, until a new write starts.
    pub(super) fn drain(&mut self, task: &TaskId, now: Instant) {
        loop {
            let Some(entry) = self.tasks.get_mut(task) else {
                return;
            };
            if entry.writing {
                return;
            }
            let Some(op) = entry.queued.pop_front() else {
                return;
            };
            match op {
                TaskOp::Update(status) => {
                    self.apply_update(task.clone(), *status, now);
                }
                TaskOp::MarkKill(reason, grace) => {
                    self.write_kill_mark(task.clone(), reason, grace, now)
                }
                TaskOp::Move(instance) => self.write_move(task.clone(), instance),
            }
        }
    }

    /// Bookkeeping after a stored update: kills done, restart backoff,
    /// events.
    fn note_transition(&mut self, record: &TaskRecord, now: Instant) {
        let state = record.state;
        if state == TaskState::TaskRunning {
            // A task of a service not known (any more) leaves no backoff.
            if let Some(backoff) = self.services.backoff_mut(&record.service) {
                let healthy = restart::runs_healthy(record);
                backoff.running(record.instance, &record.task_id, healthy, now);
            }
        }
        let last = record.timeline.last();
        if let (Some(entry), false) = (last, is_terminal(state))
            && entry.healthy.is_some()
            && record.healthy_since == Some(entry.at)
        {
            let health = if record.healthy == Some(true) {
                "healthy"
            } else {
                "unhealthy"
            };
            let detail = entry
                .message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            let change = format!("{health}{detail}");
            if let Some(message) = self.health_log.change(&record.task_id, change, now) {
                self.log(EventKind::Task, message, now);
            }
        }
        if !is_terminal(state) {
            return;
        }
        self.health_log.forget(&record.task_id);
        let wanted_dead = self.kills.done(&record.task_id).is_some() || record.kill.is_some();
        let spec = self.services.spec(&record.service).cloned();
        if let Some(spec) = &spec
            && let Some(backoff) = self.services.backoff_mut(&record.service)
        {
            let failed = !wanted_dead && workload::counts_as_failure_of(record);
            self.why.ended(record, failed);
            backoff.terminal(spec, record.instance, &record.task_id, failed, now);
        }
        // Tasks of a removed framework are summed up in one entry
        // (`removed`).
        let removed = last.and_then(|e| e.reason) == Some(task_status::Reason::FrameworkRemoved);
        if wanted_dead || removed {
            return;
        }
        let message = last.and_then(|e| e.message.as_ref());
        // A health check's kill says so: Mesos' own message names only the
        // signal ("Command terminated with signal Terminated").
        let detail = match (record.health_kill(spec.as_ref()), message) {
            (Some(kill), Some(m)) => format!(": {kill} ({m})"),
            (Some(kill), None) => format!(": {kill}"),
            (None, Some(m)) => format!(": {m}"),
            (None, None) => String::new(),
        };
        self.log(
            EventKind::Task,
            format!("task {} is {state}{detail}", record.task_id),
            now,
        );
    }
}

/// A write's failure: the error, if it was one, and what to say.
fn failure(written: Result<Written, CoordinationError>) -> (Option<CoordinationError>, String) {
    match written {
        Err(e) => {
            let why = e.to_string();
            (Some(e), why)
        }
        Ok(other) => (None, format!("unexpected answer {other:?}")),
    }
}

/// An update of a launch that is acknowledged before its record is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ahead {
    /// The executor's TASK_STARTING over a stored TASK_STAGING: applied to
    /// the table's copy, acknowledged, not written (the record's next
    /// write, usually its TASK_RUNNING, stores it).
    Starting,
    /// The first TASK_RUNNING (over TASK_STAGING or TASK_STARTING):
    /// applied to the table's copy and acknowledged, its write sent at once
    /// but not waited for.
    Running,
}

/// Whether `status` is one of a launch's steps acknowledged ahead of the
/// store: the executor's TASK_STARTING of a task whose record (the table's
/// copy) says TASK_STAGING, or the first TASK_RUNNING of one that says
/// TASK_STAGING or TASK_STARTING and never ran (no TASK_RUNNING in its
/// timeline); either with no kill mark on the record and no health result
/// in the update.
///
/// Nothing a new leader decides on depends on them being stored: it
/// reconciles every live record (a stored TASK_STAGING like any, and the
/// master answers with the task's latest state, `docs/reconciliation.md`
/// in apache/mesos), and it stores what the answer changes; until then a
/// stored TASK_STAGING counts as live, as the task is. The agent's status
/// update manager keeps the task's later updates (an end, a health
/// change) until they are acknowledged, one at a time
/// (`src/slave/task_status_update_manager.cpp` in apache/mesos;
/// `docs/scheduler-http-api.md`, ACKNOWLEDGE), so each of those is stored
/// before its acknowledgement, and the record's TASK_RUNNING entry is
/// stored with or before them (one write per task at a time). What a crash
/// before the TASK_RUNNING write loses is the record's timeline entries and
/// `running_since` (a new leader counts the task running from its
/// reconciliation, so a rollout's `min_healthy` wait starts again).
///
/// Why: every other update of a launch waits for ZooKeeper, and an agent
/// forwards a task's TASK_RUNNING only once its TASK_STARTING is
/// acknowledged; acknowledging both at once takes the store's writes off
/// the launch's critical path (`docs/benchmarks.md`, "The launch's
/// critical path"). Every other update is stored first.
pub(super) fn ahead_of_store(record: &TaskRecord, status: &v1::TaskStatus) -> Option<Ahead> {
    let launching = matches!(
        record.state,
        TaskState::TaskStaging | TaskState::TaskStarting
    );
    if !launching || record.kill.is_some() || status.healthy.is_some() {
        return None;
    }
    // Never running before (a TASK_STARTING after TASK_RUNNING is stored,
    // and so is the TASK_RUNNING after it).
    let ran = record
        .timeline
        .iter()
        .any(|e| e.state == TaskState::TaskRunning);
    match status.state() {
        TaskState::TaskStarting if record.state == TaskState::TaskStaging => Some(Ahead::Starting),
        TaskState::TaskRunning if !ran => Some(Ahead::Running),
        _ => None,
    }
}

/// The acknowledgement `status` needs, if any (only updates with a uuid
/// are acknowledged).
pub(super) fn ack_of(status: &v1::TaskStatus) -> Option<Ack> {
    match (&status.agent_id, &status.uuid) {
        (Some(agent), Some(uuid)) => Some(Ack {
            agent_id: agent.into(),
            task_id: (&status.task_id).into(),
            uuid: uuid.clone(),
        }),
        _ => None,
    }
}
