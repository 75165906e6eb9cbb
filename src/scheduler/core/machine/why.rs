//! "Why isn't it running?": per service, its last failure and a bounded
//! summary of the offers it was not launched on, shown in the snapshot
//! ([`LastFailure`], [`OffersSummary`]). Marathon's `/v2/queue` answered
//! the same question with `lastTaskFailure` and `processedOffersSummary`
//! (counts per reject reason over the current launch attempt).
//!
//! Cheap by construction: no per-offer log. The machine notes the IDs of
//! offers received since the last scheduling pass ([`Why::received`],
//! bounded by [`FRESH_MAX`]); each pass classifies those still known once
//! for every service with instances it could not place, adding to that
//! service's counters (one per reason), and forgets them. A launch of one
//! of the service's tasks starts a new window (the counters restart); a
//! deleted service is forgotten. Both are kept for the term only (a new
//! leader starts empty, as Marathon's launch queue did).
//!
//! Reasons, for each offer (an offer short of several resources counts
//! for each): `insufficient_cpus`, `insufficient_mem`, `insufficient_disk`,
//! `insufficient_ports` (after what this pass placed on it);
//! `constraint` (large enough, but the service has placement constraints
//! and no instance was placed on it); `unused` (large enough, no
//! constraints, not used: taken by other instances or the launch budget);
//! `maintenance` (declined at once: its agent's maintenance window is near,
//! `maintenance`); `agent_draining` (declined: its agent is draining or
//! deactivated, `agents`).

use std::collections::HashMap;

use crate::scheduler::counts::{LastFailure, OffersSummary};
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::offers::OfferRegistry;
use crate::scheduler::rules::placement::{self, Demand};

/// Offers remembered between two passes at most (more are not counted).
pub(super) const FRESH_MAX: usize = 10_000;

/// The per-service counters and last failures of a term.
#[derive(Debug, Default)]
pub(super) struct Why {
    /// Offers received since the last pass: ID, agent ID, and the reason
    /// when the offer was declined on arrival.
    fresh: Vec<(String, String, Option<&'static str>)>,
    /// The current window's counters, by service.
    tallies: HashMap<String, OffersSummary>,
    /// The last failed task, by service.
    failures: HashMap<String, LastFailure>,
}

impl Why {
    /// An offer arrived; `declined`: the reason it was declined at once.
    pub(super) fn received(
        &mut self,
        offer_id: &str,
        agent_id: &str,
        declined: Option<&'static str>,
    ) {
        if self.fresh.len() < FRESH_MAX {
            self.fresh
                .push((offer_id.to_string(), agent_id.to_string(), declined));
        }
    }

    /// Counts the offers received since the last pass against `demand`,
    /// whose missing instances were not all placed (`offers`: the held
    /// offers after placement; `takes_new_tasks`: whether an agent
    /// accepts launches; `at`: now, seconds since the UNIX epoch).
    pub(super) fn tally(
        &mut self,
        demand: &Demand<'_>,
        offers: &OfferRegistry,
        takes_new_tasks: &dyn Fn(&str) -> bool,
        at: f64,
    ) {
        let mut need = placement::task_resources(demand.spec);
        need.add(&demand.executor_resources);
        let ports = u64::from(demand.spec.ports);
        let summary = self
            .tallies
            .entry(demand.spec.name.clone())
            .or_insert_with(|| OffersSummary::since(at));
        for (id, agent, declined) in &self.fresh {
            let reasons: Vec<&'static str> = if let Some(reason) = declined {
                vec![reason]
            } else if let Some(offer) = offers.iter().find(|o| o.id() == id) {
                let r = &offer.remaining;
                let mut short: Vec<&'static str> = [
                    ("cpus", "insufficient_cpus"),
                    ("mem", "insufficient_mem"),
                    ("disk", "insufficient_disk"),
                ]
                .into_iter()
                .filter(|(name, _)| need.scalar(name) > r.scalar(name) + 1e-9)
                .map(|(_, reason)| reason)
                .collect();
                let free: u64 = r.ranges("ports").iter().map(|(lo, hi)| hi - lo + 1).sum();
                if ports > free {
                    short.push("insufficient_ports");
                }
                if short.is_empty() {
                    short.push(if demand.spec.constraints.is_empty() {
                        "unused"
                    } else {
                        "constraint"
                    });
                }
                short
            } else if !takes_new_tasks(agent) {
                vec!["agent_draining"]
            } else {
                // Rescinded or expired before the pass: not seen.
                continue;
            };
            summary.processed += 1;
            summary.last_offer_at = Some(at);
            for reason in reasons {
                *summary.reasons.entry(reason.to_string()).or_default() += 1;
            }
        }
    }

    /// The pass is over: the offers received before it are counted.
    pub(super) fn end_pass(&mut self) {
        self.fresh.clear();
    }

    /// A task of `service` is launched: a new window begins.
    pub(super) fn launched(&mut self, service: &str) {
        self.tallies.remove(service);
    }

    /// A task ended; `failed`: it counts as a failure of its service.
    pub(super) fn ended(&mut self, record: &TaskRecord, failed: bool) {
        if !failed {
            return;
        }
        let last = record.timeline.last();
        self.failures.insert(
            record.service.clone(),
            LastFailure {
                task_id: record.task_id.to_string(),
                instance: record.instance,
                state: record.state.as_str_name().to_string(),
                reason: last
                    .and_then(|e| e.reason)
                    .map(|r| r.as_str_name().to_string()),
                message: last.and_then(|e| e.message.clone()),
                at: last.map_or(record.updated_at, |e| e.at),
                agent_id: record.agent_id.to_string(),
                hostname: record.hostname.clone(),
            },
        );
    }

    /// Forgets services not in `known`.
    pub(super) fn retain(&mut self, known: &dyn Fn(&str) -> bool) {
        self.tallies.retain(|name, _| known(name));
        self.failures.retain(|name, _| known(name));
    }

    /// `service`'s counters of the current window.
    pub(super) fn summary(&self, service: &str) -> Option<OffersSummary> {
        self.tallies.get(service).cloned()
    }

    /// `service`'s last failed task.
    pub(super) fn last_failure(&self, service: &str) -> Option<LastFailure> {
        self.failures.get(service).cloned()
    }
}
