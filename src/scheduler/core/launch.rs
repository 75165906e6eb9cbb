//! The scheduling pass (surplus kills, placement, launches, declines,
//! SUPPRESS / REVIVE), kill retries, and the timers: offer expiry, stuck
//! tasks, terminal-record clean-up, the framework-ID check, reconciliation.
//!
//! Task records are written to ZooKeeper *before* the ACCEPT that launches
//! them, so a leader that dies between the two leaves a record the next
//! leader reconciles (the master answers TASK_LOST for a task it never saw)
//! rather than a task nobody knows.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

use futures::future::join_all;

use super::{Core, TermOutcome};
use crate::coordination::Expect;
use crate::mesos::v1::scheduler::{Call, call};
use crate::mesos::v1::{self, TaskState, offer};
use crate::scheduler::ids::TaskId;
use crate::scheduler::offers::Gone;
use crate::scheduler::placement::{self, Demand};
use crate::scheduler::records::{KillRequest, TaskRecord};
use crate::scheduler::services::ExecutorKind;
use crate::scheduler::snapshot::FrameworkState;
use crate::scheduler::taskinfo::{self, ExecutorSource};
use crate::scheduler::workload::{self, assess};
use crate::util::unix_now_secs;

/// Filter for the unused part of an accepted offer while more work is
/// pending: short, so the rest comes back soon.
const ACCEPT_REFUSE_SECONDS: f64 = 1.0;
/// Grace period of a KILL for a task whose service is gone (seconds, as
/// the service default).
pub(super) const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);

impl Core {
    fn executor_source(&self) -> Option<ExecutorSource> {
        self.cfg.executor_url.as_ref().map(|url| ExecutorSource {
            url: url.clone(),
            cpus: self.cfg.executor_cpus,
            mem: self.cfg.executor_mem,
        })
    }

    /// Asks for a task's death: marks its record (stored) and queues KILLs.
    pub(crate) async fn request_kill(&mut self, task_id: &TaskId, reason: &str) {
        let Some(entry) = self.tasks.get(task_id).cloned() else {
            return;
        };
        let grace = self
            .services
            .get(&entry.record.service)
            .map_or(DEFAULT_KILL_GRACE, |s| s.kill_grace_period);
        if entry.record.kill.is_none() {
            let mut record = (*entry.record).clone();
            record.kill = Some(KillRequest {
                reason: reason.to_string(),
                requested_at: unix_now_secs(),
                attempts: 0,
            });
            match self
                .task_store
                .put(task_id.as_str(), &record, Expect::Version(entry.version))
                .await
            {
                Ok(version) => self.put_task(record, version),
                Err(e) => {
                    self.log(
                        "error",
                        format!("could not mark {task_id} for killing: {e}"),
                    );
                    return;
                }
            }
            self.log("kill", format!("killing {task_id}: {reason}"));
        }
        let agent = (!entry.record.agent_id.is_empty()).then(|| entry.record.agent_id.clone());
        self.kills
            .request(task_id, agent, reason, grace, Instant::now());
    }

    /// Sends the KILLs that are due.
    pub(crate) async fn kill_due(&mut self) {
        if self.state != FrameworkState::Subscribed {
            return;
        }
        let Some(client) = self.client().cloned() else {
            return;
        };
        for (task_id, kill) in self.kills.due(Instant::now()) {
            let call = Call {
                r#type: Some(call::Type::Kill as i32),
                kill: Some(call::Kill {
                    task_id: task_id.to_proto(),
                    agent_id: kill.agent_id.as_ref().map(|a| a.to_proto()),
                    kill_policy: Some(v1::KillPolicy {
                        grace_period: Some(v1::DurationInfo {
                            nanoseconds: kill.grace.as_nanos() as i64,
                        }),
                    }),
                }),
                ..Default::default()
            };
            self.deps.metrics.kills.inc();
            if let Err(e) = client.call(call).await {
                tracing::warn!(%task_id, error = %e, "KILL failed; will retry");
            }
            if let Some(entry) = self.tasks.get(&task_id).cloned() {
                let mut record = (*entry.record).clone();
                if let Some(k) = record.kill.as_mut() {
                    k.attempts = kill.attempts;
                }
                self.put_task(record, entry.version);
            }
        }
    }

    /// One scheduling pass: kill surplus tasks, replace outdated ones (rolling),
    /// place missing instances on held offers and launch them, then decline or
    /// keep the rest and suppress or revive offers. One pass over the task
    /// records (grouped by service), however many there are.
    pub(crate) async fn schedule(&mut self) {
        if self.state != FrameworkState::Subscribed || self.client.is_none() {
            return;
        }
        let now = Instant::now();
        let mut by_service: HashMap<&str, Vec<&TaskRecord>> = HashMap::new();
        let mut kills = Vec::new();
        for e in self.tasks.values() {
            if self.services.contains_key(&e.record.service) {
                by_service
                    .entry(e.record.service.as_str())
                    .or_default()
                    .push(e.record.as_ref());
            } else if workload::is_live(&e.record) {
                kills.push((e.record.task_id.clone(), "service deleted".to_string()));
            }
        }
        let mut demands_data = Vec::new();
        let mut missing_total = 0;
        for spec in self.services.values() {
            let tasks = by_service
                .get(spec.name.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let assessment = assess(spec, tasks.iter().copied());
            kills.extend(assessment.surplus.iter().cloned());
            if let Some(task_id) = workload::upgrade_step(
                spec,
                tasks.iter().copied(),
                self.cfg.upgrade_max_unavailable,
            ) {
                kills.push((task_id, "replaced by a newer service spec".into()));
            }
            if assessment.missing.is_empty() {
                continue;
            }
            missing_total += assessment.missing.len();
            if !self.backoff.get(&spec.name).is_none_or(|b| b.ready(now)) {
                continue;
            }
            let occupied: Vec<(crate::scheduler::AgentId, String)> = tasks
                .iter()
                .filter(|t| workload::is_live(t))
                .map(|t| (t.agent_id.clone(), t.hostname.clone()))
                .collect();
            let executor_resources = match spec.executor {
                ExecutorKind::Appliance => self
                    .executor_source()
                    .map(|s| s.resources())
                    .unwrap_or_default(),
                ExecutorKind::Command => Default::default(),
            };
            demands_data.push((
                spec.clone(),
                assessment.missing,
                occupied,
                executor_resources,
            ));
        }
        drop(by_service);
        for (task_id, reason) in kills {
            self.request_kill(&task_id, &reason).await;
        }
        self.kill_due().await;

        let demands: Vec<Demand<'_>> = demands_data
            .iter()
            .map(|(spec, missing, occupied, executor_resources)| Demand {
                spec,
                missing: missing.clone(),
                occupied: occupied.clone(),
                executor_resources: executor_resources.clone(),
            })
            .collect();
        let planned = placement::plan(&demands, &mut self.offers, &self.agent_attributes);
        let waiting: HashMap<String, placement::Shortfall> = demands
            .iter()
            .filter(|d| {
                let placed = planned.iter().filter(|p| p.service == d.spec.name).count();
                placed < d.missing.len()
            })
            .map(|d| (d.spec.name.clone(), placement::shortfall(d, &self.offers)))
            .collect();
        drop(demands);
        self.note_waiting(waiting);
        let unplaced = missing_total.saturating_sub(planned.len());
        if !planned.is_empty() {
            self.launch(planned, unplaced > 0).await;
        }
        self.settle_offers(unplaced > 0).await;
    }

    /// Keeps why services wait for offers; an event when a service becomes
    /// stuck (no offer large enough, or constraints exclude them all), not
    /// while offers merely have not arrived yet. A stuck service stays stuck
    /// while no offers are held (declined offers come back no larger).
    fn note_waiting(&mut self, mut waiting: HashMap<String, placement::Shortfall>) {
        for (service, why) in waiting.iter_mut() {
            let before = self.waiting.get(service).filter(|w| w.is_stuck());
            match before {
                Some(stuck) if *why == placement::Shortfall::NoOffers => *why = stuck.clone(),
                None if why.is_stuck() => {
                    self.log("service", format!("service {service} waits: {why}"));
                }
                _ => {}
            }
        }
        if waiting != self.waiting {
            self.waiting = waiting;
            self.dirty = true;
        }
    }

    /// Writes the records, then ACCEPTs each used offer with its tasks.
    async fn launch(&mut self, planned: Vec<placement::Planned>, more_pending: bool) {
        let Some(framework_id) = self.framework_id.clone() else {
            return;
        };
        let Some(client) = self.client().cloned() else {
            return;
        };
        let executor = self.executor_source();
        let now = unix_now_secs();
        let mut by_offer: BTreeMap<String, Vec<(v1::TaskInfo, TaskRecord)>> = BTreeMap::new();
        for p in planned {
            let Some(spec) = self.services.get(&p.service) else {
                continue;
            };
            let task_id = taskinfo::new_task_id(&spec.name, p.instance);
            let info = taskinfo::task_info(spec, &p, &task_id, &framework_id, executor.as_ref());
            let executor_id = info
                .executor
                .as_ref()
                .map(|e| e.executor_id.value.clone())
                .unwrap_or_else(|| task_id.clone());
            let record = TaskRecord {
                task_id: task_id.as_str().into(),
                service: spec.name.clone(),
                instance: p.instance,
                fingerprint: spec.fingerprint(),
                agent_id: p.agent_id.clone(),
                hostname: p.hostname.clone(),
                executor: if info.executor.is_some() {
                    ExecutorKind::Appliance
                } else {
                    ExecutorKind::Command
                },
                executor_id,
                ports: p.ports.clone(),
                state: TaskState::TaskStaging,
                launched_at: now,
                updated_at: now,
                kill: None,
                timeline: Vec::new(),
            };
            by_offer.entry(p.offer_id).or_default().push((info, record));
        }
        for (offer_id, launches) in by_offer {
            // Store every record first, in parallel; a task whose record could
            // not be stored is not launched.
            let writes = launches
                .iter()
                .map(|(_, r)| self.task_store.put(r.task_id.as_str(), r, Expect::Absent));
            let results = join_all(writes).await;
            let mut infos = Vec::new();
            for ((info, record), result) in launches.into_iter().zip(results) {
                match result {
                    Ok(version) => {
                        infos.push(info);
                        self.put_task(record, version);
                    }
                    Err(e) => self.log(
                        "error",
                        format!(
                            "not launching {}: storing its record failed: {e}",
                            record.task_id
                        ),
                    ),
                }
            }
            self.offers.remove(&offer_id, Gone::Used, Instant::now());
            let count = infos.len();
            let operations = if infos.is_empty() {
                Vec::new()
            } else {
                vec![v1::offer::Operation {
                    r#type: Some(offer::operation::Type::Launch as i32),
                    launch: Some(offer::operation::Launch { task_infos: infos }),
                    ..Default::default()
                }]
            };
            let refuse = if more_pending {
                ACCEPT_REFUSE_SECONDS
            } else {
                self.cfg.decline_refuse_seconds
            };
            let filters = Some(v1::Filters {
                refuse_seconds: Some(refuse),
            });
            let result = client
                .accept(
                    vec![v1::OfferId {
                        value: offer_id.clone(),
                    }],
                    operations,
                    filters,
                )
                .await;
            match result {
                Ok(()) => {
                    self.deps.metrics.offer("used", 1);
                    self.deps.metrics.launches.inc_by(count as u64);
                    if count > 0 {
                        self.log(
                            "launch",
                            format!("launched {count} task(s) on offer {offer_id}"),
                        );
                    }
                }
                // The records stay: reconciliation finds out what happened.
                Err(e) => self.log("error", format!("ACCEPT of offer {offer_id} failed: {e}")),
            }
        }
    }

    /// After placement: with nothing pending, decline every held offer with
    /// the long filter and SUPPRESS; with work pending, REVIVE if suppressed
    /// and keep offers (they expire after the offer TTL).
    async fn settle_offers(&mut self, pending: bool) {
        let Some(client) = self.client().cloned() else {
            return;
        };
        if pending {
            if self.suppressed && client.revive(Vec::new()).await.is_ok() {
                self.suppressed = false;
                self.log("offers", "work pending: REVIVE".into());
            }
            return;
        }
        let ids = self.offers.clear(Gone::Declined, Instant::now());
        if !ids.is_empty() {
            self.deps.metrics.offer("declined", ids.len() as u64);
            let filters = Some(v1::Filters {
                refuse_seconds: Some(self.cfg.decline_refuse_seconds),
            });
            let ids = ids.into_iter().map(|value| v1::OfferId { value }).collect();
            if let Err(e) = client.decline(ids, filters).await {
                tracing::warn!(error = %e, "DECLINE failed");
            }
        }
        if !self.suppressed && client.suppress(Vec::new()).await.is_ok() {
            self.suppressed = true;
            self.dirty = true;
        }
    }

    /// Declines offers held past their TTL.
    async fn expire_offers(&mut self, now: Instant) {
        let expired = self.offers.expired(now);
        if expired.is_empty() {
            return;
        }
        for id in &expired {
            self.offers.remove(id, Gone::Declined, now);
        }
        self.deps.metrics.offer("expired", expired.len() as u64);
        if let Some(client) = self.client().cloned() {
            let ids = expired
                .into_iter()
                .map(|value| v1::OfferId { value })
                .collect();
            // The default filter (5 s): the resources come back if still needed.
            let _ = client.decline(ids, None).await;
        }
        self.dirty = true;
    }

    /// Timers: reconciliation, kills, offers, stuck tasks, records, the
    /// framework-ID check, client restarts, snapshots.
    pub(crate) async fn on_timers(&mut self) {
        let now = Instant::now();
        let tasks = self.reconcilable_tasks();
        let actions = if self.state == FrameworkState::Subscribed {
            self.reconciler.tick(now, unix_now_secs(), || tasks)
        } else {
            Vec::new()
        };
        self.reconcile_actions(actions).await;
        self.kill_due().await;
        if self.restart_client_at.is_some_and(|t| now >= t) {
            self.start_client().await;
        }
        if now >= self.next_fid_check {
            self.next_fid_check = now + self.cfg.framework_id_refresh_interval;
            self.check_framework_id().await;
        }
        if now >= self.next_housekeeping {
            self.next_housekeeping = now + Duration::from_secs(1);
            if self.state == FrameworkState::Subscribing {
                // The reason may change without an event (master detection).
                self.dirty = true;
            }
            self.expire_offers(now).await;
            self.offers.forget_lingering(now);
            self.kill_stuck_tasks().await;
            self.forget_old_terminal_tasks().await;
            self.schedule().await;
        }
    }

    /// The stored framework ID must still be ours (DESIGN.md §3): another
    /// deployment, `hard` or `uninstall` may have replaced or removed it.
    async fn check_framework_id(&mut self) {
        let Some(ours) = self.framework_id.clone() else {
            return;
        };
        match self.deps.coordinator.framework_id().await {
            Ok(Some(stored)) if stored.value == ours => {}
            Ok(Some(stored)) => {
                self.outcome = Some(TermOutcome::Mismatch(format!(
                    "ZooKeeper now holds framework ID {} but we run {ours}",
                    stored.value
                )));
            }
            Ok(None) => match self.deps.coordinator.store_framework_id(&ours).await {
                Ok(_) => {}
                Err(e) => self.log(
                    "error",
                    format!("framework ID {ours} is not stored and storing it failed: {e}"),
                ),
            },
            Err(e) => tracing::warn!(error = %e, "could not re-read the framework ID"),
        }
    }

    /// Tasks stuck in STAGING or STARTING longer than the transient timeout
    /// are killed (and so replaced).
    async fn kill_stuck_tasks(&mut self) {
        if self.state != FrameworkState::Subscribed {
            return;
        }
        let limit = self.cfg.transient_timeout.as_secs_f64();
        let now = unix_now_secs();
        let stuck: Vec<(TaskId, TaskState)> = self
            .tasks
            .values()
            .filter(|e| e.record.kill.is_none())
            .filter(|e| {
                matches!(
                    e.record.state,
                    TaskState::TaskStaging | TaskState::TaskStarting
                )
            })
            .filter(|e| now - e.record.updated_at > limit)
            .map(|e| (e.record.task_id.clone(), e.record.state.clone()))
            .collect();
        for (task_id, state) in stuck {
            self.request_kill(
                &task_id,
                &format!("stuck in {state} for more than {limit:.0} s"),
            )
            .await;
        }
    }

    /// Terminal records older than the retention are deleted.
    async fn forget_old_terminal_tasks(&mut self) {
        let limit = self.cfg.terminal_retention.as_secs_f64();
        let now = unix_now_secs();
        let old: Vec<(TaskId, i32)> = self
            .tasks
            .values()
            .filter(|e| e.record.is_terminal() && now - e.record.updated_at > limit)
            .map(|e| (e.record.task_id.clone(), e.version))
            .collect();
        for (task_id, version) in old {
            if self
                .task_store
                .delete(task_id.as_str(), Expect::Version(version))
                .await
                .is_ok()
            {
                self.tasks.remove(&task_id);
                self.dirty = true;
            }
        }
    }
}
