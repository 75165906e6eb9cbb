//! Forgetting the framework: the operator's teardown, and registering
//! anew after "Framework has been removed" (`reregister`). The stored
//! framework ID goes first, then every task record; only then does the
//! command answer or the client subscribe without an ID, so a new leader
//! never finds records of a framework the master no longer knows
//! (`docs/architecture.md`).

use tokio::time::Instant;

use super::framework::Step;
use super::{Machine, Pending};
use crate::coordination::CoordinationError;
use crate::scheduler::commands::{CommandError, TeardownResult};
use crate::scheduler::core::io::{Answer, ReplyId, StoreOp};
use crate::scheduler::rules::offers::Gone;
use crate::scheduler::snapshot::{EventKind, FrameworkState};

/// What follows forgetting the framework.
#[derive(Debug)]
pub(super) enum Then {
    /// The teardown command answers.
    Teardown {
        reply: ReplyId,
        framework_id: String,
    },
    /// Register anew; the reregister command answers, if it asked.
    Reregister { reply: Option<ReplyId>, old: String },
}

impl Machine {
    /// TEARDOWN was accepted: the client stops, and the framework is
    /// forgotten before the command answers.
    pub(super) fn torn_down(&mut self, reply: ReplyId, now: Instant) {
        let framework_id = self.framework.id.clone().unwrap_or_default().to_string();
        self.stop_client();
        self.offers.clear(Gone::Dropped, now);
        self.kills.clear();
        self.forget(Then::Teardown {
            reply,
            framework_id,
        });
    }

    /// A TEARDOWN call is in flight.
    pub(super) fn begin_teardown(&mut self) {
        self.framework.tearing_down = true;
    }

    /// The TEARDOWN call failed.
    pub(super) fn teardown_failed(&mut self) {
        self.framework.tearing_down = false;
    }

    /// Deletes the stored framework ID and every task record, then `then`.
    pub(super) fn forget(&mut self, then: Then) {
        if self.framework.forgetting {
            if let Some(reply) = match &then {
                Then::Teardown { reply, .. } => Some(*reply),
                Then::Reregister { reply, .. } => *reply,
            } {
                let error = CommandError::Conflict(
                    "the framework is being forgotten already; try again shortly".into(),
                );
                self.reply_error(reply, &then, error);
            }
            return;
        }
        self.framework.forgetting = true;
        self.store(
            StoreOp::DeleteFrameworkId,
            Pending::Framework(Step::ForgetId(then)),
        );
    }

    /// Forgetting is done: `then` follows; `tasks` records were deleted.
    pub(super) fn forgotten(&mut self, then: Then, tasks: usize, now: Instant) {
        // The runs whose tasks went with the framework end first: their
        // attempts' records are about to be forgotten (`jobs`).
        let why = match &then {
            Then::Teardown { framework_id, .. } => {
                format!("framework torn down by an operator (framework {framework_id})")
            }
            Then::Reregister { old, .. } if self.framework.removed.is_some() => {
                format!("framework removed by the master (framework {old})")
            }
            Then::Reregister { old, .. } => format!("framework torn down (framework {old})"),
        };
        self.end_runs_lost_with_framework(why, now);
        self.framework.forgetting = false;
        self.framework.tearing_down = false;
        self.framework.id = None;
        self.framework.removed = None;
        self.tasks.clear();
        self.services.framework_forgotten();
        self.out.dirty = true;
        match then {
            Then::Teardown {
                reply,
                framework_id,
            } => {
                let reason = format!(
                    "torn down by an operator (framework {framework_id}, {tasks} task record(s) deleted)"
                );
                self.log(EventKind::Action, reason.clone(), now);
                self.set_state(FrameworkState::Removed, Some(reason));
                self.reply(
                    reply,
                    Answer::Teardown(Ok(TeardownResult {
                        framework_id,
                        tasks,
                    })),
                );
            }
            Then::Reregister { reply, old } => {
                self.log(
                    EventKind::Action,
                    format!(
                        "registering a new framework (old {old}, {tasks} stale task record(s) deleted)"
                    ),
                    now,
                );
                self.start_client(now);
                if let Some(reply) = reply {
                    self.reply(reply, Answer::Done(Ok(())));
                }
            }
        }
    }

    /// Forgetting failed: whoever asked is told why.
    pub(super) fn forget_failed(&mut self, then: Then, e: CoordinationError, now: Instant) {
        self.framework.forgetting = false;
        self.framework.tearing_down = false;
        match &then {
            Then::Reregister { reply: None, .. } => self.log(
                EventKind::Error,
                format!("automatic re-registration failed: {e}"),
                now,
            ),
            _ => self.log(
                EventKind::Error,
                format!("forgetting the framework failed: {e}"),
                now,
            ),
        }
        if let Some(reply) = match &then {
            Then::Teardown { reply, .. } => Some(*reply),
            Then::Reregister { reply, .. } => *reply,
        } {
            self.reply_error(reply, &then, e.into());
        }
    }

    fn reply_error(&mut self, reply: ReplyId, then: &Then, error: CommandError) {
        let answer = match then {
            Then::Teardown { .. } => Answer::Teardown(Err(error)),
            Then::Reregister { .. } => Answer::Done(Err(error)),
        };
        self.reply(reply, answer);
    }
}
