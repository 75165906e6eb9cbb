//! Housekeeping, once a second: offers held past their TTL, tasks stuck
//! in STAGING or STARTING, terminal records past their retention, and a
//! scheduling pass.

use tokio::time::Instant;

use super::{Machine, Pending, tasks};
use crate::coordination::Expect;
use crate::mesos::v1::TaskState;
use crate::scheduler::core::io::{MesosCall, StoreOp};
use crate::scheduler::ids::TaskId;
use crate::scheduler::rules::offers::Gone;
use crate::scheduler::snapshot::{EventKind, FrameworkState};

impl Machine {
    /// Once a second: offers past their TTL, stuck tasks, old terminal
    /// records, and a scheduling pass.
    pub(super) fn housekeeping(&mut self, now: Instant) {
        if self.framework.state == FrameworkState::Subscribing {
            // The reason may change without an event (master detection).
            self.out.dirty = true;
        }
        self.expire_offers(now);
        self.maintenance_housekeeping(now);
        self.offers.forget_lingering(now);
        self.kill_stuck_tasks(now);
        self.forget_old_terminal_tasks(now);
        self.forget_given_up_tasks(now);
        for message in self.health_log.due(now) {
            self.log(EventKind::Task, message, now);
        }
        self.needs_schedule = true;
    }

    /// Tasks stuck in STAGING or STARTING longer than the transient timeout
    /// are killed (and so replaced).
    fn kill_stuck_tasks(&mut self, now: Instant) {
        if !self.may_schedule() {
            return;
        }
        let limit = self.cfg.transient_timeout.as_secs_f64();
        let at = self.unix(now);
        // In task ID order, as a scan of the table found them.
        let mut due: Vec<&TaskId> = self.tasks.aging().transient_before(at - limit).collect();
        due.sort();
        let stuck: Vec<(TaskId, TaskState)> = due
            .into_iter()
            .filter_map(|id| Some((id, self.tasks.get(id.as_str())?)))
            .filter(|(_, e)| e.version.is_some() && e.record.kill.is_none())
            .filter(|(_, e)| {
                matches!(
                    e.record.state,
                    TaskState::TaskStaging | TaskState::TaskStarting
                )
            })
            .filter(|(_, e)| at - e.record.updated_at > limit)
            .map(|(id, e)| (id.clone(), e.record.state))
            .collect();
        for (task_id, state) in stuck {
            let reason = format!(
                "stuck in {state} for more than {} (--task-launch-timeout)",
                crate::util::format_duration(limit)
            );
            self.request_kill(&task_id, &reason, now);
        }
    }

    /// Terminal records older than the retention are deleted.
    fn forget_old_terminal_tasks(&mut self, now: Instant) {
        let limit = self.cfg.terminal_retention.as_secs_f64();
        let at = self.unix(now);
        let mut due: Vec<&TaskId> = self.tasks.aging().terminal_before(at - limit).collect();
        due.sort();
        let old: Vec<(TaskId, i32)> = due
            .into_iter()
            .filter_map(|id| Some((id, self.tasks.get(id.as_str())?)))
            .filter(|(_, e)| !e.writing && e.record.is_terminal())
            .filter(|(_, e)| at - e.record.updated_at > limit)
            .filter_map(|(id, e)| Some((id.clone(), e.version?)))
            .collect();
        for (task_id, version) in old {
            self.tasks.begin_write(&task_id);
            self.store(
                StoreOp::DeleteTask(task_id.clone(), Expect::Version(version)),
                Pending::Task(tasks::Step::Delete { task: task_id }),
            );
        }
    }

    /// Declines offers held past their TTL, with the master's default filter
    /// (the resources come back if still needed), but those the tasks a
    /// launch budget held back would take (`Launches::wanted`):
    /// a launch of 100,000 tasks on 1,000 agents takes longer than the TTL
    /// to reach its last offers, and declining them cost a 5 s filter each
    /// time before the resources came back (`docs/benchmarks.md`, "Offers
    /// kept for a paced launch").
    fn expire_offers(&mut self, now: Instant) {
        let wanted = self.launches.wanted(&self.offers);
        let expired: Vec<String> = self
            .offers
            .expired(now)
            .filter(|o| !wanted.contains(o.id()))
            .map(|o| o.id().to_string())
            .collect();
        if expired.is_empty() {
            return;
        }
        for id in &expired {
            self.offers.remove(id, Gone::Declined, now);
        }
        self.count_offers("expired", expired.len());
        self.out.dirty = true;
        if self.framework.client_running {
            self.revive.filtered(None);
            self.call(
                MesosCall::Decline {
                    offer_ids: expired,
                    refuse_seconds: None,
                },
                Pending::Schedule(super::schedule::Step::Decline),
            );
        }
    }
}
