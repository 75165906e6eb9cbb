//! The leader's snapshot. The runner adds what only the process knows: the
//! election's view and the deployment record, and why no master leads.

use std::collections::HashMap;

use tokio::time::Instant;

use super::Machine;
use crate::coordination::Leadership;
use crate::mesos::resources::format_ranges;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rollout;
use crate::scheduler::snapshot::{
    FrameworkStatus, OfferSummary, ServiceStatus, Snapshot, UnrecordedKill,
};
use crate::scheduler::workload::{self, assess};

impl Machine {
    pub(super) fn snapshot(&self, now: Instant) -> Snapshot {
        let now_secs = self.unix(now);
        let sub = self.framework.subscription.as_ref();
        let framework = FrameworkStatus {
            id: self.framework.id.as_ref().map(ToString::to_string),
            name: self.cfg.framework_name.clone(),
            role: self.cfg.role.clone(),
            state: self.framework.state,
            reason: self.framework.reason.clone(),
            failover_timeout_seconds: self.cfg.failover_timeout.as_secs_f64(),
            master: sub.map(|s| s.info.master.clone()),
            master_version: sub.and_then(|s| s.info.master_version.clone()),
            subscribed_at: sub.map(|s| s.since),
            last_event_at: self.last_event.map(|t| self.unix(t)),
            heartbeat_interval_seconds: sub.map(|s| s.info.heartbeat_interval.as_secs_f64()),
            heartbeat_timeout_seconds: sub.map(|s| s.info.heartbeat_timeout.as_secs_f64()),
            strategy: self.cfg.strategy,
        };
        let mut by_service: HashMap<&str, Vec<&TaskRecord>> = HashMap::new();
        for record in self.tasks.stored() {
            by_service
                .entry(record.service.as_str())
                .or_default()
                .push(record);
        }
        let services = self
            .services
            .values()
            .map(|entry| {
                let spec = &entry.spec;
                let tasks = by_service
                    .get(spec.name.as_str())
                    .map_or(&[][..], Vec::as_slice);
                let a = assess(spec, tasks.iter().copied());
                let progress = rollout::progress(spec, tasks.iter().copied(), now_secs);
                let live = || tasks.iter().filter(|t| workload::is_live(t));
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
                    healthy: live().filter(|t| t.healthy == Some(true)).count() as u32,
                    unhealthy: live().filter(|t| t.healthy == Some(false)).count() as u32,
                    rollout: self.rollout_status(spec, &progress),
                    can_roll_back: self.has_previous(&spec.name),
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
            replica: self.term.replica.clone(),
            leadership: Leadership::Leader {
                term: self.term.term,
            },
            framework,
            deployment: None,
            services,
            tasks: self.tasks.stored().cloned().collect(),
            offers,
            reconciliation: self.reconciler.status(),
            events: self.out.events.iter().cloned().collect(),
            unrecorded_kills: self
                .kills
                .iter()
                .filter(|(task_id, _)| !self.tasks.contains(task_id))
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
