//! What follows a scheduling pass on the wire: the ACCEPT of an offer once
//! every record of its tasks is stored (on the subscription the offer came
//! on), DECLINE and SUPPRESS when nothing is pending, REVIVE before new
//! work, the KILLs that are due, and the answers to those calls.

use tokio::time::Instant;

use super::schedule::{PendingTask, Step};
use super::{Machine, Pending};
use crate::coordination::{CoordinationError, Written};
use crate::mesos::client::CallError;
use crate::mesos::v1::{self, offer};
use crate::scheduler::core::io::MesosCall;
use crate::scheduler::ids::TaskId;
use crate::scheduler::rules::offers::Gone;
use crate::scheduler::rules::taskinfo;
use crate::scheduler::snapshot::EventKind;

impl Machine {
    /// A launching task's record was stored (or not).
    pub(super) fn launch_stored(
        &mut self,
        task: TaskId,
        group: u64,
        index: usize,
        written: Result<Written, CoordinationError>,
        now: Instant,
    ) {
        match written {
            Ok(Written::Version(version)) => {
                if self.tasks.created(&task, version) {
                    self.drain(&task, now);
                }
            }
            other => {
                let why = match other {
                    Err(e) => e.to_string(),
                    Ok(w) => format!("{w:?}"),
                };
                self.log(
                    EventKind::Error,
                    format!("not launching {task}: storing its record failed: {why}"),
                    now,
                );
                self.tasks.remove_launching(&task);
                self.out.dirty = true;
                if let Some(g) = self.launches.groups.get_mut(&group)
                    && let Some(pending) = g.tasks.get_mut(index)
                {
                    *pending = None;
                }
            }
        }
        let done = match self.launches.groups.get_mut(&group) {
            Some(g) => {
                g.outstanding = g.outstanding.saturating_sub(1);
                g.outstanding == 0
            }
            None => false,
        };
        if done {
            self.accept(group, now);
        }
    }

    /// Every record of the offer's tasks is settled: ACCEPT the offer with
    /// the tasks whose records are stored.
    pub(super) fn accept(&mut self, group: u64, now: Instant) {
        let Some(g) = self.launches.groups.remove(&group) else {
            return;
        };
        let pending: Vec<PendingTask> = g.tasks.into_iter().flatten().collect();
        let tasks: Vec<TaskId> = pending.iter().map(|p| p.task_id.clone()).collect();
        let count = pending.len();
        self.needs_schedule = true;
        let framework_id = self.framework.id.clone();
        let subscribed = g.epoch == self.framework.epoch && self.framework.is_subscribed();
        let Some(framework_id) = framework_id.filter(|_| subscribed) else {
            if count > 0 {
                self.log(
                    EventKind::Error,
                    format!(
                        "ACCEPT of offer {} not sent: its subscription ended; \
                         reconciliation settles the {count} task record(s) written for it",
                        g.offer_id
                    ),
                    now,
                );
                self.launch_unsettled(&tasks, now);
            }
            return;
        };
        // The placement saw the agent active; GET_AGENTS may have shown it
        // draining, drained or deactivated while the records were written.
        if let Some(agent) = pending.first().map(|p| p.planned.agent_id.to_string())
            && !self.takes_new_tasks(&agent)
        {
            self.log(
                EventKind::Agent,
                format!(
                    "ACCEPT of offer {} not sent: agent {agent} takes no new task since the \
                     placement; reconciliation settles the {count} task record(s) written for it",
                    g.offer_id
                ),
                now,
            );
            self.decline_for_hold(g.offer_id, agent.as_str().into());
            self.launch_unsettled(&tasks, now);
            return;
        }
        let executor = self.executor_source();
        let infos: Vec<v1::TaskInfo> = pending
            .iter()
            .map(|p| {
                taskinfo::task_info(
                    &p.spec.spec,
                    &p.spec.fingerprint,
                    &p.planned,
                    p.task_id.as_str(),
                    &framework_id,
                    executor.as_ref(),
                )
            })
            .collect();
        drop(pending);
        let operations = if infos.is_empty() {
            Vec::new()
        } else {
            vec![v1::offer::Operation {
                r#type: Some(offer::operation::Type::Launch as i32),
                launch: Some(offer::operation::Launch { task_infos: infos }),
                ..Default::default()
            }]
        };
        self.revive.filtered(Some(g.refuse_seconds));
        self.call(
            MesosCall::Accept {
                offer_id: g.offer_id.clone(),
                operations,
                refuse_seconds: g.refuse_seconds,
            },
            Pending::Schedule(Step::Accept {
                offer_id: g.offer_id,
                tasks,
            }),
        );
    }

    /// After placement: with nothing pending, decline every held offer with
    /// the long filter and SUPPRESS — once the pass's ACCEPTs are out, so the
    /// master sees ACCEPT, DECLINE, SUPPRESS in that order; with work
    /// pending, keep offers (they expire after the offer TTL) and REVIVE if
    /// suppressed or if `new_need` (see `revive`): a filter may hide what
    /// the new need asks for. A REVIVE inside `min_revive_interval` of the
    /// last one is deferred to the interval's end (`revive`).
    pub(super) fn settle_offers(&mut self, pending: bool, new_need: bool, now: Instant) {
        if !self.framework.client_running {
            return;
        }
        if pending {
            if !(self.suppressed || new_need) {
                self.revive.not_needed();
            } else if self.revive.may_revive(now, self.cfg.min_revive_interval) {
                self.suppressed = false;
                self.revive.revived(now);
                self.call(MesosCall::Revive, Pending::Schedule(Step::Revive));
            }
            return;
        }
        self.revive.not_needed();
        if !self.launches.groups.is_empty() {
            // `accept` asks for another pass once they are.
            return;
        }
        let ids = self.offers.clear(Gone::Declined, now);
        if !ids.is_empty() {
            self.count_offers("declined", ids.len());
            self.revive.filtered(Some(self.cfg.decline_refuse_seconds));
            self.call(
                MesosCall::Decline {
                    offer_ids: ids,
                    refuse_seconds: Some(self.cfg.decline_refuse_seconds),
                },
                Pending::Schedule(Step::Decline),
            );
        }
        if !self.suppressed {
            self.suppressed = true;
            self.out.dirty = true;
            self.call(MesosCall::Suppress, Pending::Schedule(Step::Suppress));
        }
    }

    /// Sends the KILLs that are due.
    pub(super) fn send_due_kills(&mut self, now: Instant) {
        if !self.framework.is_subscribed() {
            return;
        }
        for (task_id, kill) in self.kills.due(now) {
            self.stats.kills += 1;
            let attempt = kill.attempts;
            self.call(
                MesosCall::Kill {
                    task_id: task_id.clone(),
                    agent_id: kill.agent_id,
                    grace: kill.grace,
                },
                Pending::Schedule(Step::Kill {
                    task: task_id,
                    attempt,
                }),
            );
        }
    }

    pub(super) fn on_called(&mut self, step: Step, result: Result<(), CallError>, now: Instant) {
        if let Step::Kill { task, attempt } = &step {
            // "kill pending (n)" counts KILLs the master was sent.
            self.tasks.touch(task, |record| {
                if let Some(k) = record.kill.as_mut() {
                    k.attempts = k.attempts.max(*attempt);
                }
            });
            self.out.dirty = true;
        }
        match (step, result) {
            (Step::Accept { offer_id, tasks }, Ok(())) => {
                // The master has the launch (it answers RECONCILE about
                // these tasks with TASK_STAGING from now on).
                self.tasks.launch_settled(&tasks);
                let count = tasks.len();
                self.count_offers("used", 1);
                self.stats.launches += count as u64;
                if count > 0 {
                    self.log(
                        EventKind::Launch,
                        format!("launched {count} task(s) on offer {offer_id}"),
                        now,
                    );
                }
            }
            // The records stay: reconciliation finds out what happened.
            (Step::Accept { offer_id, tasks }, Err(e)) => {
                self.log(
                    EventKind::Error,
                    format!("ACCEPT of offer {offer_id} failed: {e}"),
                    now,
                );
                self.launch_unsettled(&tasks, now);
            }
            (Step::Revive, Ok(())) => {
                self.log(EventKind::Offers, "work pending: REVIVE".into(), now)
            }
            (Step::Revive, Err(e)) => {
                self.suppressed = true;
                self.revive.revive_failed();
                self.warn(format!("REVIVE failed: {e}"));
            }
            (Step::Suppress, Err(e)) => {
                self.suppressed = false;
                self.out.dirty = true;
                self.warn(format!("SUPPRESS failed: {e}"));
            }
            (Step::Decline, Err(e)) => self.warn(format!("DECLINE failed: {e}")),
            (Step::Kill { task, .. }, Err(e)) => {
                self.warn(format!("KILL of {task} failed; will retry: {e}"))
            }
            (Step::Reconcile, Err(e)) => self.warn(format!(
                "RECONCILE failed; retried with the run's backoff: {e}"
            )),
            (_, Ok(())) => {}
        }
    }
}
