//! The leader's snapshot. The runner adds what only the process knows: the
//! election's view and the deployment record, and why no master leads.

use tokio::time::Instant;

use super::Machine;
use super::table::ServiceTasks;
use crate::coordination::Leadership;
use crate::mesos::resources::format_ranges;
use crate::scheduler::snapshot::{
    FrameworkStatus, InstanceBackoff, OfferSummary, ServiceCounts, ServiceStatus, Snapshot,
    UnrecordedKill,
};
use crate::scheduler::spec::service::ServiceSpec;

/// A service's counts as the last snapshot showed them, from its stored
/// records: kept while none of them changed, the spec is the same and no
/// rollout is in progress (availability changes with time alone).
#[derive(Debug)]
pub(super) struct Shown {
    spec: ServiceSpec,
    counts: ServiceCounts,
}

impl Shown {
    pub(super) fn new(spec: &ServiceSpec, tasks: Option<&ServiceTasks>, now_secs: f64) -> Shown {
        let empty = ServiceTasks::default();
        let tasks = tasks.unwrap_or(&empty);
        Shown {
            spec: spec.clone(),
            counts: ServiceCounts::of(spec, tasks.stored(), now_secs),
        }
    }

    /// True while this still shows `spec`'s service.
    fn holds_for(&self, spec: &ServiceSpec) -> bool {
        self.counts.progress.complete() && self.spec == *spec
    }
}

impl Machine {
    /// The leader's snapshot at `now`. `light`: the task list and the
    /// counts of the last full one, recounting only services whose spec
    /// changed since (a command's answer between full snapshots).
    pub(super) fn snapshot(&mut self, now: Instant, light: bool) -> Snapshot {
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
            last_event_at: self.lag.last_read.map(|t| self.unix(t)),
            event_lag_seconds: self.lag.lag(now).as_secs_f64(),
            event_inbox_depth: self.lag.depth,
            event_inbox_full: self.lag.full,
            heartbeat_interval_seconds: sub.map(|s| s.info.heartbeat_interval.as_secs_f64()),
            heartbeat_timeout_seconds: sub.map(|s| s.info.heartbeat_timeout.as_secs_f64()),
            strategy: self.cfg.strategy,
        };
        let names = self.services.names();
        let mut services = Vec::with_capacity(names.len());
        for name in names {
            let Some(state) = self.services.state_mut(&name) else {
                continue;
            };
            let entry = &state.entry;
            let spec = &entry.spec;
            let recount = if light {
                !state.shown.as_ref().is_some_and(|s| s.spec == *spec)
            } else {
                let changed = self.tasks.take_shown_changed(&name);
                changed || !state.shown.as_ref().is_some_and(|s| s.holds_for(spec))
            };
            if recount {
                state.shown = Some(Shown::new(spec, self.tasks.service(&name), now_secs));
            }
            let Some(shown) = &state.shown else {
                continue;
            };
            let backoff = state.backoff.as_ref();
            let mut status = ServiceStatus::new(
                spec,
                entry.previous.as_deref(),
                entry.rolling_out,
                entry.halted.as_ref(),
                &shown.counts,
            );
            if let Some(backoff) = backoff {
                status.consecutive_failures = backoff.failures_at(spec, now);
                status.next_launch_after = backoff
                    .next_launch(spec, now)
                    .map(|left| now_secs + left.as_secs_f64());
                status.backoff = backoff
                    .failing(spec, now)
                    .into_iter()
                    .map(|(instance, failures, left)| InstanceBackoff {
                        instance,
                        consecutive_failures: failures,
                        next_launch_after: (!left.is_zero())
                            .then_some(now_secs + left.as_secs_f64()),
                    })
                    .collect();
            }
            status.waiting = state.waiting.as_ref().map(ToString::to_string);
            services.push(status);
        }
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
            tasks: if light {
                self.shown_tasks.clone()
            } else {
                self.shown_tasks = self.tasks.stored().cloned().collect();
                self.shown_tasks.clone()
            },
            offers,
            agents: self.agent_statuses(),
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
            jobs: self.jobs.statuses(),
        }
    }
}
