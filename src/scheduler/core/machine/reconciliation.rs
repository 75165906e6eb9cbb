//! Reconciliation's side of the machine: the explicit run every
//! subscription starts (once the records are known), the reconciler's
//! timers, and its actions as RECONCILE calls, metrics and log entries. The
//! rules (backoff, abort, the implicit run after) are the
//! [`Reconciler`](crate::scheduler::rules::reconcile::Reconciler)'s, after
//! `docs/reconciliation.md` in apache/mesos.

use tokio::time::Instant;

use super::{Machine, Pending, schedule};
use crate::scheduler::core::io::MesosCall;
use crate::scheduler::ids::TaskId;
use crate::scheduler::metrics::ReconcileLabels;
use crate::scheduler::rules::reconcile::Action;
use crate::scheduler::snapshot::{EventKind, ReconcileTrigger};

impl Machine {
    /// The explicit run every subscription starts, once the records are
    /// known too.
    pub(super) fn reconcile_after_subscription(&mut self, now: Instant) {
        if !self.framework.is_subscribed() || !self.tasks.is_loaded() {
            return;
        }
        let tasks = self.tasks.reconcilable();
        let actions = self.reconciler.subscribed(tasks, now, self.unix(now));
        self.reconcile_actions(actions, now);
    }

    /// An ACCEPT failed or was not sent: its tasks' records are written
    /// but the master may never have seen them. They may be reconciled now
    /// (they were left out while their launch was under way), and an
    /// explicit run asks about them: the master's TASK_LOST ends the
    /// records of those it does not know, and their instances launch again.
    pub(super) fn launch_unsettled(&mut self, tasks: &[TaskId], now: Instant) {
        self.tasks.launch_settled(tasks);
        if tasks.is_empty() || !self.framework.is_subscribed() || !self.tasks.is_loaded() {
            // The next subscription's explicit run asks about them.
            return;
        }
        let at = self.unix(now);
        let table = &self.tasks;
        let actions = self.reconciler.follow_up(
            ReconcileTrigger::LaunchFailed,
            || table.reconcilable(),
            now,
            at,
        );
        self.reconcile_actions(actions, now);
    }

    /// The subscription ended: the run and the queued ones are cancelled.
    pub(super) fn reconcile_cancel(&mut self, now: Instant) {
        let actions = self.reconciler.cancel(now, self.unix(now));
        self.reconcile_actions(actions, now);
    }

    /// The reconciler's timers: backoff resends, aborts, the periodic
    /// implicit run.
    pub(super) fn reconcile_tick(&mut self, now: Instant) {
        if !self.framework.is_subscribed() || !self.tasks.is_loaded() {
            return;
        }
        let at = self.unix(now);
        let tasks = &self.tasks;
        let actions = self.reconciler.tick(now, at, || tasks.reconcilable());
        self.reconcile_actions(actions, now);
    }

    /// Carries out the reconciler's actions.
    pub(super) fn reconcile_actions(&mut self, actions: Vec<Action>, now: Instant) {
        for action in actions {
            match action {
                Action::Send(tasks) => {
                    // Each call's time and size (a slice, a retry, the
                    // implicit run's empty call): where a large run's
                    // time goes, with `RUST_LOG=…reconciliation=debug`.
                    tracing::debug!(tasks = tasks.len(), "RECONCILE sent");
                    if self.framework.client_running {
                        self.call(
                            MesosCall::Reconcile(tasks),
                            Pending::Schedule(schedule::Step::Reconcile),
                        );
                    }
                }
                Action::Finished(run) => {
                    let kind = format!("{:?}", run.kind).to_lowercase();
                    let labels = ReconcileLabels {
                        kind: kind.clone(),
                        outcome: run.outcome.to_string(),
                    };
                    *self.stats.reconciliations.entry(labels).or_default() += 1;
                    if let Some(end) = run.finished_at {
                        self.stats.reconciliation_seconds.push(end - run.started_at);
                    }
                    let detail = if run.unanswered.is_empty() {
                        String::new()
                    } else {
                        let ids: Vec<&str> = run.unanswered.iter().map(|t| t.as_str()).collect();
                        format!("; unanswered: {}", ids.join(", "))
                    };
                    self.log(
                        EventKind::Reconcile,
                        format!(
                            "{kind} reconciliation ({}) {}: {} asked, {} answered, {} call(s){detail}",
                            run.trigger, run.outcome, run.asked, run.answered, run.calls
                        ),
                        now,
                    );
                }
            }
        }
    }
}
