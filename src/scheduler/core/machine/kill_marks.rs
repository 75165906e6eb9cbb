//! Kill marks and renumbering: a task's death (or a scale-down's new
//! instance number) is first stored in its record, as the task's one write
//! in flight, then acted on — so a new leader resumes the KILLs a previous
//! term had not seen finish.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::table::TaskOp;
use super::tasks::{DEFAULT_KILL_GRACE, Step};
use super::{Machine, Pending};
use crate::coordination::Expect;
use crate::scheduler::core::io::StoreOp;
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::{KillRequest, TaskRecord, is_live};
use crate::scheduler::snapshot::EventKind;

impl Machine {
    /// Asks for a task's death: marks its record (stored), then KILLs with
    /// its service's grace period as of now (the service may be going).
    pub(super) fn request_kill(&mut self, task_id: &TaskId, reason: &str, now: Instant) {
        let Some(service) = self.tasks.get(task_id).map(|e| e.record.service.clone()) else {
            return;
        };
        let grace = self.kill_grace(&service);
        let Some(entry) = self.tasks.get_mut(task_id) else {
            return;
        };
        if entry.record.kill.is_some() {
            self.queue_kill(task_id, grace, now);
            return;
        }
        if entry.kill_wanted {
            return;
        }
        entry.kill_wanted = true;
        if entry.writing {
            entry
                .queued
                .push_back(TaskOp::MarkKill(reason.to_string(), grace));
            return;
        }
        self.write_kill_mark(task_id.clone(), reason.to_string(), grace, now);
    }

    pub(super) fn write_kill_mark(
        &mut self,
        task_id: TaskId,
        reason: String,
        grace: Duration,
        now: Instant,
    ) {
        let at = self.unix(now);
        let marked = |r: &TaskRecord| r.kill.is_none();
        let kill = KillRequest::new(reason.clone(), at);
        let step = |task, record| Step::KillMark {
            task,
            record,
            reason,
            grace,
        };
        if !self.write_record(&task_id, marked, |r| r.kill = Some(kill), step) {
            if let Some(entry) = self.tasks.get_mut(&task_id) {
                entry.kill_wanted = false;
            }
            self.queue_kill(&task_id, grace, now);
        }
    }

    /// Gives a live task a scale-down keeps the free instance number
    /// `instance` ([`assess`](crate::scheduler::rules::workload::assess));
    /// its record is stored with it, so a new leader counts the same
    /// instances.
    pub(super) fn request_move(&mut self, task_id: &TaskId, instance: u32) {
        let Some(entry) = self.tasks.get_mut(task_id) else {
            return;
        };
        if entry.move_wanted || entry.record.instance == instance {
            return;
        }
        entry.move_wanted = true;
        if entry.writing {
            entry.queued.push_back(TaskOp::Move(instance));
            return;
        }
        self.write_move(task_id.clone(), instance);
    }

    pub(super) fn write_move(&mut self, task_id: TaskId, instance: u32) {
        let live = |r: &TaskRecord| is_live(r);
        let step = |task, record| Step::Move { task, record };
        if !self.write_record(&task_id, live, |r| r.instance = instance, step)
            && let Some(entry) = self.tasks.get_mut(&task_id)
        {
            entry.move_wanted = false;
        }
    }

    /// Stores `change` of a task's record when it is stored and `applies`
    /// to it, as the task's one write in flight; false when not.
    pub(super) fn write_record(
        &mut self,
        task_id: &TaskId,
        applies: impl FnOnce(&TaskRecord) -> bool,
        change: impl FnOnce(&mut TaskRecord),
        step: impl FnOnce(TaskId, Arc<TaskRecord>) -> Step,
    ) -> bool {
        let Some(entry) = self.tasks.get_mut(task_id) else {
            return false;
        };
        let Some(version) = entry.version.filter(|_| applies(&entry.record)) else {
            return false;
        };
        let mut record = (*entry.record).clone();
        change(&mut record);
        let record = Arc::new(record);
        entry.writing = true;
        self.store(
            StoreOp::PutTask(record.clone(), Expect::Version(version)),
            Pending::Task(step(task_id.clone(), record)),
        );
        true
    }

    /// A kill mark of `task` is stored: the events page says why, and its
    /// KILLs go out.
    pub(super) fn kill_marked(
        &mut self,
        task: &TaskId,
        reason: &str,
        grace: Duration,
        now: Instant,
    ) {
        self.log(EventKind::Kill, format!("killing {task}: {reason}"), now);
        self.audit_return_kill(task, reason, now);
        self.queue_kill(task, grace, now);
        self.send_due_kills(now);
    }

    /// Queues KILLs for a task whose record carries its kill mark.
    pub(super) fn queue_kill(&mut self, task_id: &TaskId, grace: Duration, now: Instant) {
        let Some(entry) = self.tasks.get(task_id) else {
            return;
        };
        let record = entry.record.clone();
        let Some(kill) = record.kill.as_ref().filter(|_| !record.is_terminal()) else {
            return;
        };
        let agent = (!record.agent_id.is_empty()).then(|| record.agent_id.clone());
        self.kills.request(task_id, agent, &kill.reason, grace, now);
    }

    /// The KILL grace period of a service's tasks.
    pub(super) fn kill_grace(&self, service: &str) -> Duration {
        self.services
            .spec(service)
            .map(|s| s.kill_grace_period)
            .or_else(|| self.jobs.grace(service))
            .unwrap_or(DEFAULT_KILL_GRACE)
    }

    /// Every task a previous term marked for killing and has not seen end
    /// gets its KILL again (KILL is never acknowledged and may be lost), or
    /// a replaced task would run on beside its replacement.
    pub(super) fn resume_kills(&mut self, now: Instant) {
        let marked: Vec<TaskId> = self
            .tasks
            .iter()
            .filter(|(_, e)| e.record.kill.is_some() && !e.record.is_terminal())
            .map(|(id, _)| id.clone())
            .collect();
        for task_id in marked {
            let Some(service) = self.tasks.get(&task_id).map(|e| e.record.service.clone()) else {
                continue;
            };
            let grace = self.kill_grace(&service);
            self.queue_kill(&task_id, grace, now);
        }
    }
}
