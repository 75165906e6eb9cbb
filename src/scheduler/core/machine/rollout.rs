//! The machine's side of health-gated rollouts (rules in
//! [`crate::scheduler::rules::rollout`]): watching each service's rollout for its
//! deadline, halting it (stored with the service, so a new leader and the
//! standby views see it), ending it once complete (clearing the stored
//! rollout and any halt, also a stale one a new leader finds with nothing
//! outdated), and the operator's resume, rollback and rolling restart
//! (the restart generation goes up: every task is outdated).
//!
//! When an instance stopped being available during a rollout is kept in
//! memory only: a new leader starts the deadline afresh (a stored halt
//! stays a halt).

use std::collections::BTreeSet;

use tokio::time::Instant;

use super::Machine;
use crate::scheduler::commands::CommandError;
use crate::scheduler::core::io::{Answer, ReplyId, Request};
use crate::scheduler::records::{Halt, ServiceRecord};
use crate::scheduler::rules::rollout::{self, Progress, RolloutAction};
use crate::scheduler::snapshot::EventKind;
use crate::scheduler::spec::service::ServiceSpec;

/// Why a service record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Write {
    /// A command created or replaced the spec.
    Put,
    /// The machine halts the rollout.
    Halt,
    /// The machine ends a complete rollout (or a stale halt).
    Complete,
    /// The operator resumes a halted rollout.
    Resume,
    /// The operator rolls back to the previous spec.
    Rollback,
    /// The operator asked for a rolling restart.
    Restart,
}

impl Write {
    /// The answer to the command that asked for the write.
    pub(super) fn answer(self, result: Result<bool, CommandError>) -> Answer {
        Answer::Service(result)
    }
}

impl Machine {
    /// After a scheduling pass: starts or clears each service's deadline
    /// and halts the rollouts past it.
    pub(super) fn watch_rollouts(&mut self, progress: Vec<(String, Progress)>, now: Instant) {
        let at = self.unix(now);
        // Availability changes with time alone: while rollouts go on, each
        // pass refreshes the snapshot (one a second at most, housekeeping's
        // pace), and once more when the last one ends.
        let under_way = |name: &String, p: &Progress| {
            self.services
                .get(name)
                .is_some_and(|e| p.under_way(e.rolling_out))
        };
        let rolling: BTreeSet<String> = progress
            .iter()
            .filter(|(name, p)| under_way(name, p))
            .map(|(name, _)| name.clone())
            .collect();
        if self.services.set_rolling(|name| rolling.contains(name)) || !rolling.is_empty() {
            self.out.dirty = true;
        }
        for (name, p) in progress {
            let writing = self.services.writing(&name);
            let Some(state) = self.services.state_mut(&name) else {
                continue;
            };
            if !p.under_way(state.entry.rolling_out) {
                state.rollout_since = None;
                if (state.entry.rolling_out || state.entry.halted.is_some()) && !writing {
                    self.end_rollout(&name, now);
                }
                continue;
            }
            if p.unavailable.is_empty() {
                state.rollout_since = None;
                continue;
            }
            let since = *state.rollout_since.get_or_insert(at);
            let entry = &mut state.entry;
            if entry.halted.is_some() || writing {
                continue;
            }
            let Some(reason) = rollout::overdue(&entry.spec, &p, entry.rolling_out, since, at)
            else {
                continue;
            };
            let mut record = entry.record();
            let message = format!(
                "rollout of service {name} halted: {reason}; the old instances keep running \
                 until it is resumed or rolled back"
            );
            record.halted = Some(Halt { at, reason });
            entry.halted = record.halted.clone();
            // Shown at once; stored next (a failed write is logged and the
            // services read again).
            self.log(EventKind::Service, message, now);
            self.write_service(None, record, Write::Halt);
        }
    }

    /// Ends `name`'s rollout, which is no longer under way: stores the
    /// record without it and without a halt, and says so. A halt with no
    /// rollout begun (stored by a version that took a first launch for
    /// one) is stale: nothing is outdated, so there is nothing to hold.
    fn end_rollout(&mut self, name: &str, now: Instant) {
        let Some(entry) = self.services.get_mut(name) else {
            return;
        };
        let halted = entry.halted.is_some();
        let message = if entry.rolling_out {
            format!(
                "rollout of service {name} complete: all {} instance(s) run spec {} and are \
                 available{}",
                entry.spec.instances,
                entry.spec.fingerprint(),
                if halted { "; its halt is cleared" } else { "" }
            )
        } else {
            format!(
                "halt of service {name}'s rollout cleared: no task runs an outdated spec (a \
                 launch or scale-up is no rollout)"
            )
        };
        let record = entry.record().completed();
        entry.rolling_out = false;
        entry.halted = None;
        self.log(EventKind::Service, message, now);
        self.write_service(None, record, Write::Complete);
    }

    /// `resume` or `rollback` of a service's rollout. A rollback applies
    /// only while a rollout is under way or halted, restores the previous
    /// spec (when `expected`, only if that is its fingerprint) and forgets
    /// it: a second rollback finds nothing to restore instead of rolling
    /// forward to the broken release.
    pub(super) fn rollout_command(
        &mut self,
        reply: ReplyId,
        name: String,
        action: RolloutAction,
        expected: Option<String>,
        now: Instant,
    ) {
        if self.services.writing(&name) {
            let request = Request::Rollout {
                name,
                action,
                expected,
            };
            self.services.queue(reply, request);
            return;
        }
        let Some(entry) = self.services.get(&name) else {
            let error = CommandError::NotFound(format!("service {name}"));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        };
        let record = match action {
            RolloutAction::Resume if entry.halted.is_none() => Err(format!(
                "the rollout of service {name} is not halted; nothing to resume"
            )),
            RolloutAction::Resume => Ok((
                ServiceRecord {
                    halted: None,
                    ..entry.record()
                },
                Write::Resume,
            )),
            RolloutAction::Rollback => match self.rollback_refusal(entry, expected.as_deref(), now)
            {
                Some(why) => Err(why),
                None => entry
                    .record()
                    .rolled_back()
                    .map(|r| (r, Write::Rollback))
                    .ok_or_else(|| format!("service {name} has no previous spec to roll back to")),
            },
            RolloutAction::Restart => match self.restart_refusal(entry, now) {
                Some(why) => Err(why),
                None => Ok((entry.record().restarted(), Write::Restart)),
            },
        };
        match record {
            Ok((record, why)) => self.write_service(Some(reply), record, why),
            Err(message) => {
                self.reply(reply, Answer::Service(Err(CommandError::Conflict(message))));
            }
        }
    }

    /// Why a rolling restart of `entry` does not apply now, if it does
    /// not: with 0 instances there is nothing to restart, and a rollout
    /// under way or halted is finished, resumed or rolled back first (one
    /// rollout at a time, as a PUT of a new shape would replace it).
    fn restart_refusal(
        &self,
        entry: &super::service_table::ServiceEntry,
        now: Instant,
    ) -> Option<String> {
        let name = &entry.spec.name;
        if entry.spec.instances == 0 {
            return Some(format!(
                "service {name} has 0 instances; there is nothing to restart"
            ));
        }
        if entry.halted.is_some() {
            return Some(format!(
                "the rollout of service {name} is halted; resume or roll it back before \
                 restarting"
            ));
        }
        let empty = super::table::ServiceTasks::default();
        let tasks = self.tasks.service(name).unwrap_or(&empty);
        let rolling = rollout::progress(&entry.spec, tasks.records(), self.unix(now));
        if rolling.under_way(entry.rolling_out) {
            return Some(format!(
                "a rollout of service {name} is under way ({} task(s) still to replace); \
                 restart once it is complete",
                rolling.remaining
            ));
        }
        None
    }

    /// Why a rollback of `entry` does not apply now, if it does not.
    fn rollback_refusal(
        &self,
        entry: &super::service_table::ServiceEntry,
        expected: Option<&str>,
        now: Instant,
    ) -> Option<String> {
        let name = &entry.spec.name;
        let Some(previous) = entry.previous.as_deref() else {
            return Some(format!(
                "service {name} has no previous spec to roll back to (none was \
                 stored, or a rollback already restored it)"
            ));
        };
        let empty = super::table::ServiceTasks::default();
        let tasks = self.tasks.service(name).unwrap_or(&empty);
        let rolling = rollout::progress(&entry.spec, tasks.records(), self.unix(now));
        if entry.halted.is_none() && !rolling.under_way(entry.rolling_out) {
            return Some(format!(
                "service {name} has no rollout under way or halted; a rollback applies \
                 only to one (PUT the spec to change it)"
            ));
        }
        let fingerprint = previous.fingerprint();
        match expected {
            Some(e) if e != fingerprint => Some(format!(
                "service {name} would be rolled back to spec {fingerprint}, not the \
                 expected {e}: it changed since; look again before rolling back"
            )),
            _ => None,
        }
    }

    /// Events and bookkeeping once a service record is stored.
    pub(super) fn service_written(
        &mut self,
        spec: &ServiceSpec,
        replaced: bool,
        why: Write,
        now: Instant,
    ) {
        let name = &spec.name;
        let (kind, message) = match why {
            Write::Put => (
                EventKind::Action,
                format!(
                    "service {name} {} ({} instance(s))",
                    if replaced { "updated" } else { "created" },
                    spec.instances
                ),
            ),
            // Logged when it was decided (`watch_rollouts`).
            Write::Halt | Write::Complete => return,
            Write::Resume => (
                EventKind::Action,
                format!("rollout of service {name} resumed"),
            ),
            Write::Restart => (
                EventKind::Action,
                format!(
                    "rolling restart of service {name} begun (restart generation {}): its {} \
                     task(s) are replaced under its upgrade policy",
                    spec.restart_generation, spec.instances
                ),
            ),
            Write::Rollback => (
                EventKind::Action,
                format!(
                    "service {name} rolled back to its previous spec {}",
                    spec.fingerprint()
                ),
            ),
        };
        if why != Write::Halt {
            // A new deadline for what follows.
            if let Some(state) = self.services.state_mut(name) {
                state.rollout_since = None;
            }
        }
        self.log(kind, message, now);
    }
}
