//! Status updates, handled in batches: each is applied to its task record,
//! the records are written to ZooKeeper concurrently, and only the updates
//! whose record was stored are acknowledged (DESIGN.md §2a; updates without a
//! uuid are never acknowledged, mesos-notes §4). An update whose write fails
//! is not acknowledged, so the agent re-sends it.
//!
//! The agent keeps one update per task in flight (mesos-notes §4), so a
//! batch rarely holds two for one task; when it does (a reconciliation
//! answer next to a real update), the later one waits for the next round.

use std::collections::HashSet;
use std::time::Duration;
use tokio::time::Instant;

use futures::future::join_all;

use super::Core;
use crate::coordination::{CoordinationError, Expect};
use crate::mesos::is_terminal;
use crate::mesos::v1::{self, TaskState, task_status};
use crate::scheduler::metrics::UpdateLabels;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::workload;
use crate::util::unix_now_secs;

/// ZooKeeper writes and ACKNOWLEDGE calls in flight at once.
const CONCURRENCY: usize = 128;

impl Core {
    /// Handles a batch of status updates in arrival order.
    pub(crate) async fn on_updates(&mut self, mut batch: Vec<v1::TaskStatus>) {
        while !batch.is_empty() {
            let mut seen = HashSet::new();
            let mut later = Vec::new();
            let mut now_round = Vec::new();
            for status in batch {
                if seen.insert(status.task_id.value.clone()) {
                    now_round.push(status);
                } else {
                    later.push(status);
                }
            }
            self.update_round(now_round).await;
            batch = later;
        }
        self.needs_schedule = true;
    }

    async fn update_round(&mut self, statuses: Vec<v1::TaskStatus>) {
        let now = Instant::now();
        let at = unix_now_secs();
        let mut acks = Vec::new();
        let mut writes = Vec::new();
        let mut rogue = false;
        for status in statuses {
            self.count_update(&status);
            let task_id = crate::scheduler::TaskId::from(&status.task_id);
            let state = status.state();
            let reconciliation = status.reason == Some(task_status::Reason::Reconciliation as i32);
            let finished = self
                .reconciler
                .on_update(task_id.as_str(), reconciliation, now, at);
            self.reconcile_actions(finished).await;
            let Some(entry) = self.tasks.get(&task_id) else {
                // Not ours: a terminal one is acknowledged and ignored; a live
                // one is killed (unless still staging: it may be a launch
                // whose record write we have not seen succeed).
                if !is_terminal(state) && state != TaskState::TaskStaging {
                    let agent = status.agent_id.as_ref().map(Into::into);
                    if self.kills.request(
                        &task_id,
                        agent,
                        "unknown to the scheduler",
                        Duration::from_secs(5),
                        now,
                    ) {
                        self.log(
                            "kill",
                            format!(
                                "task {task_id} is unknown to the scheduler ({}); killing it",
                                state.as_str_name()
                            ),
                        );
                        rogue = true;
                    }
                } else if is_terminal(state) {
                    self.kills.done(task_id.as_str());
                }
                acks.push(status);
                continue;
            };
            let mut record = (*entry.record).clone();
            record.apply(&status, at);
            writes.push((status, record, entry.version));
        }

        // Store every record (concurrently), then acknowledge what was stored.
        let mut stored = Vec::with_capacity(writes.len());
        for chunk in writes.chunks(CONCURRENCY) {
            let results = join_all(chunk.iter().map(|(_, record, version)| {
                self.task_store
                    .put(record.task_id.as_str(), record, Expect::Version(*version))
            }))
            .await;
            stored.extend(results);
        }
        for ((status, record, _), result) in writes.into_iter().zip(stored) {
            match result {
                Ok(version) => {
                    self.note_transition(&record, now);
                    self.put_task(record, version);
                    acks.push(status);
                }
                Err(e) => {
                    self.log(
                        "error",
                        format!(
                            "could not store the {} update of {}: {e}; not acknowledged",
                            status.state().as_str_name(),
                            status.task_id.value
                        ),
                    );
                    if matches!(e, CoordinationError::VersionConflict { .. }) {
                        self.reload_task(&status.task_id.value).await;
                    }
                }
            }
        }
        self.acknowledge_all(acks).await;
        if rogue {
            self.kill_due().await;
        }
    }

    fn count_update(&self, status: &v1::TaskStatus) {
        let name = |s: Option<&str>| s.unwrap_or("none").to_string();
        self.deps
            .metrics
            .status_updates
            .get_or_create(&UpdateLabels {
                state: status.state().as_str_name().into(),
                source: name(
                    status
                        .source
                        .and_then(|s| task_status::Source::try_from(s).ok())
                        .map(|s| s.as_str_name()),
                ),
                reason: name(
                    status
                        .reason
                        .and_then(|r| task_status::Reason::try_from(r).ok())
                        .map(|r| r.as_str_name()),
                ),
            })
            .inc();
    }

    /// Bookkeeping after a stored update: kills done, restart backoff, events.
    fn note_transition(&mut self, record: &TaskRecord, now: Instant) {
        let state = record.state;
        if state == TaskState::TaskRunning {
            self.backoff
                .entry(record.service.clone())
                .or_default()
                .running(&record.task_id, now);
        }
        if !is_terminal(state) {
            return;
        }
        let wanted_dead =
            self.kills.done(record.task_id.as_str()).is_some() || record.kill.is_some();
        let last = record.timeline.last();
        let reason = last.and_then(|e| e.reason);
        if let Some(spec) = self.services.get(&record.service).cloned() {
            let failed = !wanted_dead && workload::counts_as_failure(state, reason);
            self.backoff
                .entry(record.service.clone())
                .or_default()
                .terminal(&spec, record.task_id.as_str(), failed, now);
        }
        if wanted_dead {
            return;
        }
        let detail = last
            .and_then(|e| e.message.as_ref())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        self.log(
            "task",
            format!("task {} is {}{detail}", record.task_id, state.as_str_name()),
        );
    }

    async fn reload_task(&mut self, task_id: &str) {
        if let Ok(Some(v)) = self.task_store.get(task_id).await {
            self.put_task(v.value, v.version);
        }
    }

    /// Acknowledges the updates that carry a uuid (only those need it),
    /// concurrently.
    pub(crate) async fn acknowledge_all(&mut self, statuses: Vec<v1::TaskStatus>) {
        let Some(client) = self.client().cloned() else {
            return;
        };
        let acks: Vec<_> = statuses
            .into_iter()
            .filter_map(|s| Some((s.agent_id?, s.task_id, s.uuid?)))
            .collect();
        for chunk in acks.chunks(CONCURRENCY) {
            let results = join_all(chunk.iter().map(|(agent, task, uuid)| {
                client.acknowledge(agent.clone(), task.clone(), uuid.clone())
            }))
            .await;
            for ((_, task, _), result) in chunk.iter().zip(results) {
                if let Err(e) = result {
                    tracing::warn!(task_id = %task.value, error = %e, "acknowledge failed; the agent will re-send");
                }
            }
        }
    }
}
