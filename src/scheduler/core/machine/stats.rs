//! What the machine counts for the metrics, as plain values: the machine
//! never touches the Prometheus registry (it stays a pure function of its
//! inputs). The runner takes the counts after each settle
//! ([`Machine::take_stats`]) and publishes them
//! (`crate::scheduler::metrics`).

use std::collections::HashMap;

use super::Machine;
use crate::scheduler::metrics::{ReconcileLabels, UpdateLabels};

/// Counts since the last [`Machine::take_stats`], and the gauges' current
/// values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Gauge: the framework is subscribed.
    pub framework_subscribed: bool,
    /// Gauge: how far behind the Mesos stream the machine is, seconds.
    pub event_lag_seconds: f64,
    /// Gauge: events received and not applied yet.
    pub event_inbox_depth: usize,
    /// Offer events (`received`, `used`, `declined`, `expired`,
    /// `rescinded`, `dropped`) by event.
    pub offers: HashMap<&'static str, u64>,
    /// Tasks launched.
    pub launches: u64,
    /// KILL calls sent.
    pub kills: u64,
    /// Status updates by state, source and reason.
    pub status_updates: HashMap<UpdateLabels, u64>,
    /// Reconciliation runs ended, by kind and outcome.
    pub reconciliations: HashMap<ReconcileLabels, u64>,
    /// Durations of the runs that ended, seconds (one per run, so at most
    /// the runs of one batch between two takes).
    pub reconciliation_seconds: Vec<f64>,
}

impl Machine {
    /// The counts since the last call and the gauges as they are now. The
    /// runner calls it after each settle and publishes the result.
    pub fn take_stats(&mut self) -> Stats {
        let gauges = Stats {
            framework_subscribed: self.stats.framework_subscribed,
            event_lag_seconds: self.stats.event_lag_seconds,
            event_inbox_depth: self.stats.event_inbox_depth,
            ..Stats::default()
        };
        std::mem::replace(&mut self.stats, gauges)
    }

    /// Counts `n` offer events of kind `event`.
    pub(super) fn count_offers(&mut self, event: &'static str, n: usize) {
        // Zero too: the series shows on /metrics from the first event on,
        // as when the machine updated the registry itself.
        *self.stats.offers.entry(event).or_default() += n as u64;
    }
}
