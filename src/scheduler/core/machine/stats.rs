//! What the machine counts for the metrics, as plain values: the machine
//! never touches the Prometheus registry (it stays a pure function of its
//! inputs). The runner takes the counts after each settle
//! ([`Machine::take_stats`]) and publishes them
//! (`crate::scheduler::metrics`).

use super::Machine;
pub use crate::scheduler::metrics::Stats;

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
