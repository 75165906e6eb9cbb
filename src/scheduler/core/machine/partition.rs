//! Partition awareness on the machine's side; the rules are in
//! [`rules::partition`](crate::scheduler::rules::partition).
//!
//! - The waits of the `unreachable` policy need no timer of their own:
//!   every housekeeping tick (once a second) asks for a scheduling pass,
//!   and a service with an unreachable task still waited for is never
//!   skipped as settled ([`Assessment::wake_at`]), so its replacement
//!   starts within a second of `inactive_after`, counted from the time
//!   stored in the record — also by a new leader.
//! - A TASK_UNKNOWN that did not come from a reconciliation is asked
//!   about explicitly (`docs/reconciliation.md` in apache/mesos); only the
//!   answer lets its instance go.
//! - A copy killed because its instance's other copy came back from a
//!   partition (`kill_on_return`) leaves an audit entry naming it.
//! - Records given up (expunged, unknown confirmed) are deleted after the
//!   terminal records' retention, like ended ones.
//!
//! [`Assessment::wake_at`]: crate::scheduler::rules::workload::Assessment::wake_at

use tokio::time::Instant;

use super::audit::Decision;
use super::{Machine, Pending, schedule, tasks};
use crate::coordination::Expect;
use crate::mesos::v1::TaskState;
use crate::scheduler::core::io::{MesosCall, StoreOp};
use crate::scheduler::ids::TaskId;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::partition;
use crate::scheduler::snapshot::EventKind;

/// The audit entry's `action` for a kill `kill_on_return` decided.
pub(super) const RETURN_KILL_ACTION: &str = "task.kill_on_return";

impl Machine {
    /// After a stored update: a TASK_UNKNOWN not yet confirmed is asked
    /// about with an explicit RECONCILE of that task alone.
    pub(super) fn confirm_unknown(&mut self, record: &TaskRecord, now: Instant) {
        if record.state != TaskState::TaskUnknown
            || record.unknown_confirmed()
            || !self.framework.client_running
        {
            return;
        }
        let agent = (!record.agent_id.is_empty()).then(|| record.agent_id.clone());
        self.log(
            EventKind::Reconcile,
            format!(
                "task {} is TASK_UNKNOWN: asking the master before its instance is given up",
                record.task_id
            ),
            now,
        );
        self.call(
            MesosCall::Reconcile(vec![(record.task_id.clone(), agent)]),
            Pending::Schedule(schedule::Step::Reconcile),
        );
    }

    /// After a kill mark is stored: a kill `kill_on_return` decided gets
    /// an audit entry naming the copy killed, the copy kept and why.
    pub(super) fn audit_return_kill(&mut self, task: &TaskId, reason: &str, now: Instant) {
        if !partition::is_return_kill(reason) {
            return;
        }
        let Some(record) = self.tasks.get(task).map(|e| e.record.clone()) else {
            return;
        };
        let outcome = format!("killing {task} on {}: {reason}", record.hostname);
        self.audit(
            Decision {
                method: "policy",
                action: RETURN_KILL_ACTION,
                params: serde_json::json!({
                    "service": record.service,
                    "instance": record.instance,
                    "task_id": record.task_id,
                    "agent_id": record.agent_id,
                    "hostname": record.hostname,
                }),
                reason: reason.to_string(),
                status: 200,
                outcome,
            },
            now,
        );
    }

    /// Records given up by the partition rules and older than the terminal
    /// records' retention are deleted, as ended ones are. While a task is
    /// unreachable the snapshot is made again: its standing changes by
    /// time alone (`unreachable`, `inactive`, `expunged`).
    pub(super) fn forget_given_up_tasks(&mut self, now: Instant) {
        let limit = self.cfg.terminal_retention.as_secs_f64();
        let at = self.unix(now);
        // Only unreachable and unknown tasks may be given up (`given_up_at`).
        let lost = || {
            let tasks = &self.tasks;
            tasks
                .aging()
                .lost()
                .filter_map(move |id| Some((id, tasks.get(id.as_str())?)))
        };
        if lost().any(|(_, e)| e.record.state == TaskState::TaskUnreachable) {
            self.out.dirty = true;
        }
        let old: Vec<(TaskId, i32)> = lost()
            .filter(|(_, e)| !e.writing && !e.record.is_terminal())
            .filter(|(_, e)| {
                let policy = self
                    .services
                    .spec(&e.record.service)
                    .map(|s| s.unreachable_policy())
                    .unwrap_or_default();
                partition::given_up_at(&e.record, &policy, at).is_some_and(|t| at - t > limit)
            })
            .filter_map(|(id, e)| Some((id.clone(), e.version?)))
            .collect();
        for (task_id, version) in old {
            self.log(
                EventKind::Task,
                format!("forgetting task {task_id}: given up, not heard from since"),
                now,
            );
            self.tasks.begin_write(&task_id);
            self.store(
                StoreOp::DeleteTask(task_id.clone(), Expect::Version(version)),
                Pending::Task(tasks::Step::Delete { task: task_id }),
            );
        }
    }
}
