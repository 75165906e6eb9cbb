//! Mesos events: subscription changes, offers, rescinds, agent and executor
//! failures, and status updates (acknowledged only after their effect is
//! stored in ZooKeeper; updates without a uuid are never acknowledged —
//! DESIGN.md §2a, mesos-notes §4).

use tokio::time::Instant;

use super::{Core, REFUSED_RETRY, TermOutcome};
use crate::coordination::CoordinationError;
use crate::mesos::client::{ClientEvent, ErrorKind, SchedulerClient, StopReason};
use crate::mesos::v1::scheduler::{Event, event};
use crate::scheduler::config::OnFrameworkRemoved;
use crate::scheduler::offers::Gone;
use crate::scheduler::reconcile::Action;
use crate::scheduler::snapshot::FrameworkState;
use crate::util::unix_now_secs;

/// How long a leader without a stored framework ID waits for the master's
/// list of frameworks before it retries (the actor waits meanwhile).
const FRAMEWORK_LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An operator call's failure in an operator's words: a refusal of our
/// credentials names the flags to check.
fn operator_failure(e: &crate::mesos::operator::OperatorError) -> String {
    use crate::mesos::operator::OperatorError;
    match e {
        OperatorError::Refused {
            status: status @ (401 | 403),
            body,
        } => format!(
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

impl Core {
    /// Starts a Mesos client subscribing with the stored framework ID — or,
    /// with no stored ID, after checking that no framework of our name is
    /// already active on the master (DESIGN.md §2a: minting a new ID then
    /// would orphan its tasks).
    pub(crate) async fn start_client(&mut self) {
        self.stop_client();
        self.restart_client_at = None;
        if self.framework_id.is_none() && self.cfg.strategy != crate::coordination::Strategy::Hard {
            // Say what the actor waits for: with the master unreachable the
            // operator call retries for a while.
            self.set_state(
                FrameworkState::Subscribing,
                Some(format!(
                    "asking the master for active frameworks named {:?} before registering",
                    self.cfg.framework_name
                )),
            );
            self.publish(true);
            let listed =
                match tokio::time::timeout(FRAMEWORK_LIST_WAIT, self.operator.get_frameworks())
                    .await
                {
                    Ok(answer) => answer.map_err(|e| operator_failure(&e)),
                    Err(_) => Err(format!(
                        "gave up after {} s{}",
                        FRAMEWORK_LIST_WAIT.as_secs(),
                        self.operator
                            .detector()
                            .problem()
                            .map(|why| format!(" (no leading master: {why})"))
                            .unwrap_or_default()
                    )),
                };
            match listed {
                Ok(frameworks) => {
                    let name = &self.cfg.framework_name;
                    let principal = &self.cfg.principal;
                    // Inactive ones count too: a disconnected framework keeps
                    // its tasks until its failover timeout passes.
                    let clash = frameworks.active().chain(frameworks.inactive()).find(|f| {
                        f.framework_info.name == *name && f.framework_info.principal == *principal
                    });
                    if let Some(f) = clash {
                        let id = crate::mesos::operator::framework_id(f)
                            .unwrap_or("?")
                            .to_string();
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
                        self.log("framework", reason.clone());
                        self.set_state(FrameworkState::Subscribing, Some(reason));
                        self.restart_client_at = Some(Instant::now() + REFUSED_RETRY);
                        return;
                    }
                    self.set_state(FrameworkState::Subscribing, None);
                }
                Err(e) => {
                    let reason = format!("cannot list frameworks on the master: {e}");
                    if self.reason.as_deref() != Some(reason.as_str()) {
                        self.log("error", reason.clone());
                    }
                    self.set_state(FrameworkState::Subscribing, Some(reason));
                    self.restart_client_at =
                        Some(Instant::now() + std::time::Duration::from_secs(5));
                    return;
                }
            }
        }
        if self.wary && !self.nobody_else_drives_our_framework().await {
            return;
        }
        let cancel = self.term_token.child_token();
        // Heartbeats come through too: each one republishes the snapshot, so
        // its `last_event_at` (heartbeat age, readiness) stays current while
        // nothing else changes.
        let mut config = self.deps.client.clone();
        config.forward_heartbeats = true;
        // One leader detection per term: the operator client's.
        let (client, events) = SchedulerClient::start_with_detector(
            config,
            self.operator.detector().clone(),
            self.framework_info(),
            cancel.clone(),
        );
        self.client = Some((client, cancel));
        self.client_events = Some(events);
        self.set_state(FrameworkState::Subscribing, None);
    }

    pub(crate) async fn on_client_event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Subscribed(sub) => self.on_subscribed(*sub).await,
            ClientEvent::Event(event) => self.on_mesos_event(*event).await,
            ClientEvent::Disconnected { reason } => {
                let now = Instant::now();
                self.subscription = None;
                self.deps.metrics.framework_subscribed.set(0);
                let dropped = self.offers.clear(Gone::Dropped, now);
                self.deps.metrics.offer("dropped", dropped.len() as u64);
                let actions = self.reconciler.cancel(now, unix_now_secs());
                self.reconcile_actions(actions).await;
                self.set_state(FrameworkState::Disconnected, Some(reason.to_string()));
                self.log(
                    "disconnected",
                    format!("subscription lost: {reason}; re-subscribing"),
                );
            }
            ClientEvent::Stopped(reason) => self.on_stopped(reason).await,
        }
    }

    async fn on_subscribed(&mut self, sub: crate::mesos::client::Subscription) {
        let id = sub.framework_id.value.clone();
        match &self.framework_id {
            None => match self.deps.coordinator.store_framework_id(&id).await {
                Ok(_) => self.framework_id = Some(id.clone()),
                Err(CoordinationError::Mismatch { stored, .. }) => {
                    self.outcome = Some(TermOutcome::Mismatch(format!(
                        "the master registered us as {id} but ZooKeeper holds {stored}: another scheduler registered at the same time"
                    )));
                    return;
                }
                Err(e) => {
                    // Not stored: keep going; the periodic check stores it.
                    self.log("error", format!("could not store framework ID {id}: {e}"));
                    self.framework_id = Some(id.clone());
                }
            },
            Some(ours) if *ours != id => {
                self.outcome = Some(TermOutcome::Mismatch(format!(
                    "subscribed as {id} while our framework ID is {ours}"
                )));
                return;
            }
            Some(_) => {}
        }
        let now = Instant::now();
        let dropped = self.offers.clear(Gone::Dropped, now);
        self.deps.metrics.offer("dropped", dropped.len() as u64);
        self.suppressed = false;
        self.deps.metrics.framework_subscribed.set(1);
        let master = sub.master.to_string();
        self.subscription = Some(sub);
        self.set_state(FrameworkState::Subscribed, None);
        self.log("subscribed", format!("subscribed as {id} to {master}"));
        // Reconcile every task we believe alive, after every (re-)subscription
        // (reconciliation guide; mesos-notes §5).
        let tasks = self.reconcilable_tasks();
        let actions = self.reconciler.subscribed(tasks, now, unix_now_secs());
        self.reconcile_actions(actions).await;
        self.schedule().await;
    }

    /// After "framework failed over" (DESIGN.md §2a: never fight): true when
    /// the master lists our framework as not connected (or not at all), so
    /// subscribing takes nothing from anyone. Otherwise stays `failed_over`
    /// with the reason and retries later.
    async fn nobody_else_drives_our_framework(&mut self) -> bool {
        let Some(id) = self.framework_id.clone() else {
            self.wary = false;
            return true;
        };
        let listed =
            tokio::time::timeout(FRAMEWORK_LIST_WAIT, self.operator.get_frameworks()).await;
        let reason = match listed {
            Ok(Ok(frameworks)) => match frameworks.get(&id) {
                Some(f) if f.connected => format!(
                    "framework {id} is connected to the master through another scheduler; \
                     not taking it back (checking again in {} s)",
                    REFUSED_RETRY.as_secs()
                ),
                _ => {
                    self.wary = false;
                    return true;
                }
            },
            Ok(Err(e)) => format!("cannot check who drives framework {id}: {e}"),
            Err(_) => format!(
                "cannot check who drives framework {id}: no answer within {} s",
                FRAMEWORK_LIST_WAIT.as_secs()
            ),
        };
        self.log("framework", reason.clone());
        self.set_state(FrameworkState::FailedOver, Some(reason));
        self.restart_client_at = Some(Instant::now() + REFUSED_RETRY);
        false
    }

    async fn on_stopped(&mut self, reason: StopReason) {
        self.client = None;
        self.client_events = None;
        self.subscription = None;
        self.deps.metrics.framework_subscribed.set(0);
        let now = Instant::now();
        self.offers.clear(Gone::Dropped, now);
        let actions = self.reconciler.cancel(now, unix_now_secs());
        self.reconcile_actions(actions).await;
        match reason {
            StopReason::Cancelled | StopReason::ReceiverDropped => {}
            StopReason::Error(ErrorKind::FailedOver) => {
                self.log("error", "ERROR \"Framework failed over\": another scheduler took over our framework ID; stepping down".into());
                self.set_state(
                    FrameworkState::FailedOver,
                    Some("another scheduler subscribed with our framework ID".into()),
                );
                self.outcome = Some(TermOutcome::FailedOver);
            }
            StopReason::Error(ErrorKind::Removed) => {
                let id = self.framework_id.clone().unwrap_or_default();
                let reason = format!(
                    "the master removed framework {id} (failover timeout passed or torn down); \
                     use the reregister action to register a new framework"
                );
                self.log(
                    "error",
                    format!("ERROR \"Framework has been removed\": {reason}"),
                );
                self.set_state(FrameworkState::Removed, Some(reason));
                // DESIGN.md §2a: `hard` always registers afresh.
                let reregister = self.cfg.on_framework_removed == OnFrameworkRemoved::Reregister
                    || self.cfg.strategy == crate::coordination::Strategy::Hard;
                if reregister && let Err(e) = self.reregister().await {
                    self.log("error", format!("automatic re-registration failed: {e}"));
                }
            }
            StopReason::Error(ErrorKind::Other(message)) => {
                let reason = format!("the master refused the subscription: {message}");
                self.log("error", reason.clone());
                self.set_state(FrameworkState::Disconnected, Some(reason));
                self.restart_client_at = Some(now + REFUSED_RETRY);
            }
            StopReason::SubscribeRefused { status, body } => {
                let hint = if matches!(status, 401 | 403) {
                    " (check --principal and --secret-file)"
                } else {
                    ""
                };
                let reason = format!("SUBSCRIBE refused with {status}: {body}{hint}");
                self.log("error", reason.clone());
                self.set_state(FrameworkState::Disconnected, Some(reason));
                self.restart_client_at = Some(now + REFUSED_RETRY);
            }
        }
    }

    async fn on_mesos_event(&mut self, event: Event) {
        let now = Instant::now();
        match event.r#type() {
            event::Type::Offers => {
                let offers = event.offers.map(|o| o.offers).unwrap_or_default();
                self.deps.metrics.offer("received", offers.len() as u64);
                for offer in offers {
                    self.agent_attributes
                        .insert((&offer.agent_id).into(), offer.attributes.clone());
                    self.offers.add(offer, now, unix_now_secs());
                }
                self.dirty = true;
                self.needs_schedule = true;
            }
            event::Type::Rescind => {
                if let Some(r) = event.rescind
                    && self
                        .offers
                        .remove(&r.offer_id.value, Gone::Rescinded, now)
                        .is_some()
                {
                    self.deps.metrics.offer("rescinded", 1);
                    self.dirty = true;
                }
            }
            event::Type::Update => {
                if let Some(update) = event.update {
                    self.on_updates(vec![update.status]).await;
                }
            }
            event::Type::Failure => {
                let Some(f) = event.failure else { return };
                let agent = f.agent_id.map(|a| a.value).unwrap_or_default();
                match f.executor_id {
                    None => {
                        let dropped = self.offers.remove_agent(&agent, now);
                        self.deps.metrics.offer("dropped", dropped.len() as u64);
                        self.log(
                            "agent",
                            format!("agent {agent} lost; {} offer(s) dropped", dropped.len()),
                        );
                    }
                    Some(executor) => {
                        let status = f.status.unwrap_or(0);
                        self.log(
                            "agent",
                            format!(
                                "executor {} on agent {agent} exited (wait status {status})",
                                executor.value
                            ),
                        );
                    }
                }
            }
            // Only `last_event_at` changed; see `start_client`.
            event::Type::Heartbeat => self.dirty = true,
            event::Type::Message => {
                if let Some(m) = event.message {
                    self.log(
                        "message",
                        format!(
                            "framework message from executor {} ({} bytes)",
                            m.executor_id.value,
                            m.data.len()
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    /// Non-terminal tasks with their agents, for explicit reconciliation.
    pub(crate) fn reconcilable_tasks(&self) -> crate::scheduler::reconcile::TaskList {
        self.tasks
            .values()
            .filter(|e| !e.record.is_terminal())
            .map(|e| {
                let agent = (!e.record.agent_id.is_empty()).then(|| e.record.agent_id.clone());
                (e.record.task_id.clone(), agent)
            })
            .collect()
    }

    /// Carries out the reconciler's actions.
    pub(crate) async fn reconcile_actions(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send(tasks) => {
                    let Some(client) = self.client().cloned() else {
                        continue;
                    };
                    let list = tasks
                        .into_iter()
                        .map(|(t, a)| (t.to_proto(), a.map(|a| a.to_proto())))
                        .collect();
                    if let Err(e) = client.reconcile(list).await {
                        tracing::warn!(error = %e, "RECONCILE failed; retried with the run's backoff");
                    }
                }
                Action::Finished(run) => {
                    let kind = format!("{:?}", run.kind).to_lowercase();
                    self.deps
                        .metrics
                        .reconciliations
                        .get_or_create(&crate::scheduler::metrics::ReconcileLabels {
                            kind: kind.clone(),
                            outcome: run.outcome.to_string(),
                        })
                        .inc();
                    if let Some(end) = run.finished_at {
                        self.deps
                            .metrics
                            .reconciliation_seconds
                            .observe(end - run.started_at);
                    }
                    let detail = if run.unanswered.is_empty() {
                        String::new()
                    } else {
                        format!("; unanswered: {}", run.unanswered.join(", "))
                    };
                    self.log(
                        "reconcile",
                        format!(
                            "{kind} reconciliation ({}) {}: {} asked, {} answered, {} call(s){detail}",
                            run.trigger, run.outcome, run.asked, run.answered, run.calls
                        ),
                    );
                }
            }
        }
    }
}
