//! The framework's registration and the Mesos client's life.
//!
//! - Before registering without a stored framework ID, the master is asked
//!   for frameworks of our name (`docs/architecture.md`: minting a new ID
//!   while one is active or within its failover timeout would orphan its
//!   tasks); `hard` skips this, it tore them down.
//! - After "Framework failed over" the next term first checks that nobody
//!   drives our framework now ("wary"), and never takes it back from a
//!   connected scheduler.
//! - SUBSCRIBED stores a newly assigned framework ID (compare-and-set; a
//!   different stored ID means two schedulers registered at once and this
//!   one steps down); every subscription drops held offers and starts an
//!   explicit reconciliation (`docs/reconciliation.md` in apache/mesos).
//! - ERROR "Framework has been removed" (or the wary check finding our
//!   framework completed) enters `removed` and writes the live records
//!   TASK_KILLED without a KILL (`removed`); `reregister` (or
//!   `--on-framework-removed=reregister`, or `hard`) forgets the stale ID
//!   and task records and registers anew.
//! - The stored framework ID is re-read periodically: a newer deployment,
//!   `hard` or `uninstall` may have replaced it.

use std::time::Duration;

use tokio::time::Instant;

use super::forget::Then;
use super::removed::RemovedBy;
use super::{Machine, Pending};
use crate::coordination::CoordinationError;
use crate::mesos::client::{DisconnectReason, ErrorKind, StopReason};
use crate::mesos::operator::{self, OperatorError};
use crate::scheduler::core::io::{
    Effect, OperatorAnswer, OperatorFailure, OperatorOp, StoreOp, StoreResult, SubscribedInfo,
};
use crate::scheduler::core::{Mismatch, TermOutcome};
use crate::scheduler::ids::FrameworkId;
use crate::scheduler::rules::offers::Gone;
use crate::scheduler::snapshot::{EventKind, FrameworkState};

/// How long to wait for the master's list of frameworks.
const FRAMEWORK_LIST_WAIT: Duration = Duration::from_secs(10);
/// How long to wait before subscribing again after a refusal that is not
/// "removed" or "failed over" (so a misconfiguration cannot cause a loop).
const REFUSED_RETRY: Duration = Duration::from_secs(60);
/// How long to wait before asking for the list of frameworks again after it
/// failed.
const LIST_RETRY: Duration = Duration::from_secs(5);

/// The framework's registration and the client's state.
#[derive(Debug)]
pub(super) struct Framework {
    /// The framework ID, stored or just assigned.
    pub(super) id: Option<FrameworkId>,
    pub(super) state: FrameworkState,
    pub(super) reason: Option<String>,
    /// The live subscription.
    pub(super) subscription: Option<Subscription>,
    /// Counts subscriptions: work begun on one (a launch waiting for its
    /// records) is dropped when another began.
    pub(super) epoch: u64,
    /// A client runs (subscribing, subscribed or re-subscribing).
    pub(super) client_running: bool,
    /// When to start the client again after a refusal.
    pub(super) restart_at: Option<Instant>,
    /// Check that nobody drives our framework before subscribing.
    wary: bool,
    /// A newly assigned framework ID is being stored: nothing is launched
    /// until it is.
    pub(super) registering: bool,
    /// Next periodic re-read of the stored framework ID.
    pub(super) next_check: Instant,
    checking: bool,
    /// TEARDOWN sent: the stream's end and refusals are expected.
    pub(super) tearing_down: bool,
    /// The framework ID and task records are being deleted.
    pub(super) forgetting: bool,
    /// The master removed the framework (and killed its tasks), as shown
    /// by this; cleared when a new framework registers.
    pub(super) removed: Option<RemovedBy>,
}

/// A live subscription.
#[derive(Debug, Clone)]
pub(super) struct Subscription {
    pub(super) info: SubscribedInfo,
    /// When it began, seconds since the UNIX epoch.
    pub(super) since: f64,
}

impl Framework {
    pub(super) fn new(wary: bool, next_check: Instant) -> Framework {
        Framework {
            id: None,
            state: FrameworkState::Subscribing,
            reason: None,
            subscription: None,
            epoch: 0,
            client_running: false,
            restart_at: None,
            wary,
            registering: false,
            next_check,
            checking: false,
            tearing_down: false,
            forgetting: false,
            removed: None,
        }
    }

    /// Subscribed, with the client running.
    pub(super) fn is_subscribed(&self) -> bool {
        self.state == FrameworkState::Subscribed
            && self.client_running
            && self.subscription.is_some()
    }
}

/// What a framework request in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    /// The same-name check before registering anew.
    ClashCheck,
    /// The "wary" check after failing over.
    WaryCheck,
    /// Storing the framework ID the master assigned.
    Register {
        id: FrameworkId,
    },
    /// The periodic re-read.
    Check,
    /// Storing our ID again after the re-read found none.
    Restore {
        id: FrameworkId,
    },
    /// Forgetting: the framework ID, then the task records.
    ForgetId(Then),
    ForgetTasks(Then),
}

/// An operator call's failure in an operator's words: a refusal of our
/// credentials names the flags to check.
fn operator_failure(e: &OperatorFailure) -> String {
    match e {
        OperatorFailure::Failed(OperatorError::Refused {
            status: status @ (401 | 403),
            body,
        }) => format!(
            "the master refused our credentials ({status}{}): check --principal and --secret-file",
            if body.is_empty() {
                String::new()
            } else {
                format!(": {body}")
            }
        ),
        other => other.to_string(),
    }
}

impl Machine {
    /// Starts the Mesos client, after the same-name check (no stored ID)
    /// and the wary check, as they apply.
    pub(super) fn start_client(&mut self, now: Instant) {
        self.stop_client();
        self.framework.restart_at = None;
        if self.ending {
            return;
        }
        if self.framework.id.is_none() && !self.is_hard() {
            // Say what the scheduler waits for: with the master unreachable
            // the operator call retries for a while.
            self.set_state(
                FrameworkState::Subscribing,
                Some(format!(
                    "asking the master for active frameworks named {:?} before registering",
                    self.cfg.framework_name
                )),
            );
            self.out.publish_now = true;
            self.operator(
                OperatorOp::ListFrameworks {
                    within: Some(FRAMEWORK_LIST_WAIT),
                },
                Pending::Framework(Step::ClashCheck),
            );
            return;
        }
        self.after_clash_check(now);
    }

    fn after_clash_check(&mut self, _now: Instant) {
        if self.framework.wary && self.framework.id.is_some() {
            self.operator(
                OperatorOp::ListFrameworks {
                    within: Some(FRAMEWORK_LIST_WAIT),
                },
                Pending::Framework(Step::WaryCheck),
            );
            return;
        }
        self.framework.wary = false;
        self.launch_client();
    }

    fn launch_client(&mut self) {
        let info = self.framework_info();
        self.out.items.push(Effect::StartClient(Box::new(info)));
        self.framework.client_running = true;
        self.set_state(FrameworkState::Subscribing, None);
    }

    /// Stops the client (if one runs): the subscription and its offers end.
    pub(super) fn stop_client(&mut self) {
        if self.framework.client_running {
            self.out.items.push(Effect::StopClient);
        }
        self.framework.client_running = false;
        self.framework.subscription = None;
        self.stats.framework_subscribed = false;
    }

    pub(super) fn on_framework_operator(
        &mut self,
        step: Step,
        answer: OperatorAnswer,
        now: Instant,
    ) {
        let OperatorAnswer::Frameworks(listed) = answer else {
            return;
        };
        match step {
            Step::ClashCheck => self.on_clash_check(listed, now),
            Step::WaryCheck => self.on_wary_check(listed, now),
            _ => {}
        }
    }

    fn on_clash_check(
        &mut self,
        listed: Result<operator::Frameworks, OperatorFailure>,
        now: Instant,
    ) {
        if self.framework.id.is_some() || self.framework.client_running {
            return;
        }
        match listed {
            Ok(frameworks) => {
                let name = &self.cfg.framework_name;
                let principal = &self.cfg.principal;
                // Inactive ones count too: a disconnected framework keeps its
                // tasks until its failover timeout passes.
                let clash = frameworks.active().chain(frameworks.inactive()).find(|f| {
                    f.framework_info.name == *name && f.framework_info.principal == *principal
                });
                if let Some(f) = clash {
                    let id = operator::framework_id(f).unwrap_or("?").to_string();
                    let how = if f.active {
                        "active"
                    } else {
                        "inactive (disconnected, within its failover timeout)"
                    };
                    let reason = format!(
                        "refusing to register: framework {id} named {name:?} is {how} on the master and \
                         no framework ID is stored; registering anew would orphan its tasks \
                         (tear it down with `mesos-appliance uninstall` or the operator API, \
                         or deploy with --framework-deployment-strategy=hard, which does)"
                    );
                    self.log(EventKind::Framework, reason.clone(), now);
                    self.set_state(FrameworkState::Subscribing, Some(reason));
                    self.framework.restart_at = Some(now + REFUSED_RETRY);
                    return;
                }
                self.set_state(FrameworkState::Subscribing, None);
                self.after_clash_check(now);
            }
            Err(e) => {
                let reason = format!(
                    "cannot list frameworks on the master: {}",
                    operator_failure(&e)
                );
                if self.framework.reason.as_deref() != Some(reason.as_str()) {
                    self.log(EventKind::Error, reason.clone(), now);
                }
                self.set_state(FrameworkState::Subscribing, Some(reason));
                self.framework.restart_at = Some(now + LIST_RETRY);
            }
        }
    }

    /// After "framework failed over" (never fight): subscribe only when the
    /// master lists our framework as not connected (or not at all).
    fn on_wary_check(
        &mut self,
        listed: Result<operator::Frameworks, OperatorFailure>,
        now: Instant,
    ) {
        let Some(id) = self.framework.id.clone() else {
            self.framework.wary = false;
            self.launch_client();
            return;
        };
        let reason = match listed {
            Ok(frameworks) if frameworks.is_completed(id.as_str()) => {
                self.framework.wary = false;
                self.framework_removed(RemovedBy::CompletedList, now);
                return;
            }
            Ok(frameworks) => match frameworks.get(&id) {
                Some(f) if f.connected => format!(
                    "framework {id} is connected to the master through another scheduler; \
                     not taking it back (checking again in {} s)",
                    REFUSED_RETRY.as_secs()
                ),
                _ => {
                    self.framework.wary = false;
                    self.launch_client();
                    return;
                }
            },
            Err(OperatorFailure::TimedOut { after, .. }) => format!(
                "cannot check who drives framework {id}: no answer within {} s",
                after.as_secs()
            ),
            Err(e) => format!("cannot check who drives framework {id}: {e}"),
        };
        self.log(EventKind::Framework, reason.clone(), now);
        self.set_state(FrameworkState::FailedOver, Some(reason));
        self.framework.restart_at = Some(now + REFUSED_RETRY);
    }

    pub(super) fn on_subscribed(&mut self, info: SubscribedInfo, now: Instant) {
        let id = info.framework_id.clone();
        match self.framework.id.clone() {
            None => {
                self.framework.id = Some(id.clone());
                self.framework.registering = true;
                self.store(
                    StoreOp::StoreFrameworkId(id.clone()),
                    Pending::Framework(Step::Register { id: id.clone() }),
                );
            }
            Some(ours) if ours != id => {
                self.mismatch(Mismatch::Subscribed {
                    assigned: id.to_string(),
                    ours: ours.to_string(),
                });
                return;
            }
            Some(_) => {}
        }
        self.framework.epoch += 1;
        let dropped = self.offers.clear(Gone::Dropped, now);
        self.count_offers("dropped", dropped.len());
        self.suppressed = false;
        self.revive.subscribed();
        self.stats.framework_subscribed = true;
        let master = info.master.clone();
        self.framework.subscription = Some(Subscription {
            info,
            since: self.unix(now),
        });
        self.set_state(FrameworkState::Subscribed, None);
        self.log(
            EventKind::Subscribed,
            format!("subscribed as {id} to {master}"),
            now,
        );
        // Reconcile every task we believe alive, after every subscription;
        // the records may still be loading (then it starts once they are).
        self.reconcile_after_subscription(now);
        self.needs_schedule = true;
    }

    pub(super) fn on_disconnected(&mut self, reason: DisconnectReason, now: Instant) {
        self.framework.subscription = None;
        self.stats.framework_subscribed = false;
        let dropped = self.offers.clear(Gone::Dropped, now);
        self.count_offers("dropped", dropped.len());
        self.reconcile_cancel(now);
        if self.framework.tearing_down {
            return;
        }
        self.set_state(FrameworkState::Disconnected, Some(reason.to_string()));
        self.log(
            EventKind::Disconnected,
            format!("subscription lost: {reason}; re-subscribing"),
            now,
        );
    }

    pub(super) fn on_client_stopped(&mut self, reason: StopReason, now: Instant) {
        self.framework.client_running = false;
        self.framework.subscription = None;
        self.stats.framework_subscribed = false;
        self.offers.clear(Gone::Dropped, now);
        self.reconcile_cancel(now);
        if self.framework.tearing_down {
            return;
        }
        match reason {
            StopReason::Cancelled | StopReason::ReceiverDropped => {}
            StopReason::Error(ErrorKind::FailedOver) => {
                self.log(
                    EventKind::Error,
                    "ERROR \"Framework failed over\": another scheduler took over our framework ID; stepping down".into(),
                    now,
                );
                self.set_state(
                    FrameworkState::FailedOver,
                    Some("another scheduler subscribed with our framework ID".into()),
                );
                self.end_term(TermOutcome::FailedOver);
            }
            StopReason::Error(ErrorKind::Removed) => {
                self.framework_removed(RemovedBy::SubscribeError, now);
            }
            StopReason::Error(ErrorKind::Other(message)) => {
                let reason = format!("the master refused the subscription: {message}");
                self.log(EventKind::Error, reason.clone(), now);
                self.set_state(FrameworkState::Disconnected, Some(reason));
                self.framework.restart_at = Some(now + REFUSED_RETRY);
            }
            StopReason::SubscribeRefused { status, body } => {
                let hint = if matches!(status, 401 | 403) {
                    " (check --principal and --secret-file)"
                } else {
                    ""
                };
                let reason = format!("SUBSCRIBE refused with {status}: {body}{hint}");
                self.log(EventKind::Error, reason.clone(), now);
                self.set_state(FrameworkState::Disconnected, Some(reason));
                self.framework.restart_at = Some(now + REFUSED_RETRY);
            }
        }
    }

    /// The periodic re-read of the stored framework ID.
    pub(super) fn check_framework_id(&mut self) {
        if self.framework.id.is_none()
            || self.framework.checking
            || self.framework.registering
            || self.framework.forgetting
        {
            return;
        }
        self.framework.checking = true;
        self.store(StoreOp::ReadFrameworkId, Pending::Framework(Step::Check));
    }

    pub(super) fn on_framework_stored(&mut self, step: Step, result: StoreResult, now: Instant) {
        match (step, result) {
            (Step::Register { id }, StoreResult::Written(written)) => {
                self.framework.registering = false;
                match written {
                    Ok(_) => self.needs_schedule = true,
                    Err(CoordinationError::Mismatch { stored, .. }) => {
                        self.mismatch(Mismatch::Registered {
                            assigned: id.to_string(),
                            stored,
                        });
                    }
                    Err(e) => {
                        // Not stored: keep going; the periodic check stores it.
                        self.log(
                            EventKind::Error,
                            format!("could not store framework ID {id}: {e}"),
                            now,
                        );
                        self.needs_schedule = true;
                    }
                }
            }
            (Step::Check, StoreResult::FrameworkId(read)) => {
                self.framework.checking = false;
                let Some(ours) = self.framework.id.clone() else {
                    return;
                };
                if self.framework.registering || self.framework.forgetting {
                    return;
                }
                match read {
                    Ok(Some(stored)) if stored == ours => {}
                    Ok(Some(stored)) => self.mismatch(Mismatch::Replaced {
                        stored: stored.to_string(),
                        ours: ours.to_string(),
                    }),
                    Ok(None) => {
                        self.store(
                            StoreOp::StoreFrameworkId(ours.clone()),
                            Pending::Framework(Step::Restore { id: ours }),
                        );
                    }
                    Err(e) => self.warn(format!("could not re-read the framework ID: {e}")),
                }
            }
            (Step::Restore { id }, StoreResult::Written(written)) => match written {
                Ok(_) => {}
                Err(CoordinationError::Mismatch { stored, .. }) => {
                    self.mismatch(Mismatch::Replaced {
                        stored,
                        ours: id.to_string(),
                    })
                }
                Err(e) => self.log(
                    EventKind::Error,
                    format!("framework ID {id} is not stored and storing it failed: {e}"),
                    now,
                ),
            },
            (Step::ForgetId(then), StoreResult::Written(written)) => match written {
                Ok(_) => {
                    self.store(
                        StoreOp::DeleteAllTasks,
                        Pending::Framework(Step::ForgetTasks(then)),
                    );
                }
                Err(e) => self.forget_failed(then, e, now),
            },
            (Step::ForgetTasks(then), StoreResult::Count(deleted)) => match deleted {
                Ok(n) => self.forgotten(then, n, now),
                Err(e) => self.forget_failed(then, e, now),
            },
            (step, result) => {
                self.warn(format!("unexpected answer {result:?} to {step:?}; ignored"));
            }
        }
    }
}
