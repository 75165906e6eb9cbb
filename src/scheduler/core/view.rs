//! Building and publishing the leader's snapshot.

use std::sync::Arc;
use tokio::time::Instant;

use super::Core;
use crate::mesos::resources::format_ranges;
use crate::scheduler::snapshot::{
    FrameworkState, FrameworkStatus, OfferSummary, ServiceStatus, Snapshot, UnrecordedKill,
};
use crate::scheduler::workload::assess;
use crate::util::unix_now_secs;

impl Core {
    /// Publishes a snapshot if something changed and the throttle allows it
    /// (or at once with `force`).
    pub(crate) fn publish(&mut self, force: bool) {
        let now = Instant::now();
        let due = self
            .last_publish
            .is_none_or(|t| now.duration_since(t) >= self.cfg.snapshot_interval);
        if !(force || (self.dirty && due)) {
            return;
        }
        let snapshot = self.snapshot();
        self.deps.snapshots.send_replace(Arc::new(snapshot));
        self.dirty = false;
        self.last_publish = Some(now);
    }

    fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let now_secs = unix_now_secs();
        let coordinator = &self.deps.coordinator;
        let sub = self.subscription.as_ref();
        let client = self.client();
        let std_now = std::time::Instant::now();
        let last_event_at = client
            .and_then(|c| c.last_event_at())
            .map(|t| now_secs - std_now.duration_since(t).as_secs_f64());
        let framework = FrameworkStatus {
            id: self.framework_id.clone(),
            name: self.cfg.framework_name.clone(),
            role: self.cfg.role.clone(),
            state: self.state,
            reason: self.reason.clone().or_else(|| {
                // Waiting for a leading master: say why none is known.
                (self.state == FrameworkState::Subscribing)
                    .then(|| self.operator.detector().problem())
                    .flatten()
                    .map(|why| format!("no leading Mesos master: {why}"))
            }),
            failover_timeout_seconds: self.cfg.failover_timeout.as_secs_f64(),
            master: sub.map(|s| s.master.to_string()),
            master_version: sub
                .and_then(|s| s.master_info.as_ref())
                .and_then(|m| m.version.clone()),
            subscribed_at: sub.map(|s| now_secs - std_now.duration_since(s.since).as_secs_f64()),
            last_event_at,
            heartbeat_interval_seconds: sub.map(|s| s.heartbeat_interval.as_secs_f64()),
            heartbeat_timeout_seconds: sub.map(|s| {
                self.deps
                    .client
                    .heartbeat_timeout(s.heartbeat_interval)
                    .as_secs_f64()
            }),
            strategy: self.cfg.strategy,
        };
        let services = self
            .services
            .values()
            .map(|spec| {
                let a = assess(spec, self.tasks.values().map(|e| e.record.as_ref()));
                let backoff = self.backoff.get(&spec.name);
                ServiceStatus {
                    spec: spec.clone(),
                    running: a.running,
                    starting: a.starting,
                    killing: a.killing,
                    consecutive_failures: backoff.map(|b| b.failures_at(spec, now)).unwrap_or(0),
                    next_launch_after: backoff
                        .filter(|b| !b.ready(now))
                        .map(|b| now_secs + b.remaining(now).as_secs_f64()),
                    waiting: self.waiting.get(&spec.name).map(ToString::to_string),
                }
            })
            .collect();
        let offers = self
            .offers
            .iter()
            .map(|o| OfferSummary {
                id: o.id().to_string(),
                agent_id: o.agent_id().to_string(),
                hostname: o.offer.hostname.clone(),
                cpus: o.remaining.scalar("cpus"),
                mem: o.remaining.scalar("mem"),
                disk: o.remaining.scalar("disk"),
                ports: format_ranges(o.remaining.ranges("ports")),
                received_at: o.received_at,
                expires_at: o.received_at + self.offers.ttl().as_secs_f64(),
            })
            .collect();
        Snapshot {
            at: now_secs,
            replica: coordinator.replica().clone(),
            leadership: coordinator.leadership().borrow().clone(),
            framework,
            deployment: coordinator
                .watch_deployment()
                .borrow()
                .clone()
                .map(|v| v.value),
            services,
            tasks: self.tasks.values().map(|e| e.record.clone()).collect(),
            offers,
            reconciliation: self.reconciler.status(),
            events: self.events_log.iter().cloned().collect(),
            unrecorded_kills: self
                .kills
                .iter()
                .filter(|(task_id, _)| !self.tasks.contains_key(*task_id))
                .map(|(task_id, k)| UnrecordedKill {
                    task_id: task_id.clone(),
                    agent_id: k.agent_id.clone(),
                    reason: k.reason.clone(),
                    attempts: k.attempts,
                })
                .collect(),
        }
    }
}
