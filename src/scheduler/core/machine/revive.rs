//! When to REVIVE (`docs/mesos-protocol.md#suppress-and-revive`).
//!
//! The master withholds offers from a framework while it is suppressed and,
//! per agent, while a filter of an earlier DECLINE or ACCEPT
//! (`refuse_seconds`) stands. Filters may outlive the connection that set
//! them: a failover while the old stream is still open is no deactivation,
//! so the allocator keeps the framework's filters (`Master::failoverFramework`
//! in `src/master/master.cpp`). A need for resources that such a filter may
//! hide must therefore REVIVE at once, or it waits out the filter (120 s by
//! default).
//!
//! A *need* is an instance that newly waits for placement and is not in its
//! restart backoff, compared with the previous pass; after a (re)subscription
//! every waiting instance is new. That covers a (re)subscription with unmet
//! demand, a lost or failed task, a created or scaled-up service, a killed
//! task to replace and the end of a backoff alike. An instance waiting across
//! passes is no new need: a launch that the launch budget spreads over many
//! passes, or offers that keep not fitting, revive once, not on every pass.
//!
//! REVIVEs are at least `min_revive_interval` apart (`--min-revive-interval`):
//! each one makes the allocator offer everything again, and a crash loop of
//! many instances with staggered backoffs would otherwise REVIVE at its
//! failure rate (Marathon bounds it the same way with
//! `--min_revive_offers_interval`). A need that arises inside the interval is
//! deferred to its end, never dropped: the pass then REVIVEs if work is still
//! pending. A subscription's first REVIVE is never delayed.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Instances waiting for placement, by service, and whether filters of this
/// framework may stand. Memory: one entry per waiting instance, at most four
/// times (previous, current, new, deferred).
#[derive(Debug, Default)]
pub(super) struct ReviveWatch {
    /// The previous pass's waiting instances, by service, ascending.
    previous: HashMap<String, Vec<u32>>,
    /// This pass's so far.
    current: HashMap<String, Vec<u32>>,
    /// This pass's instances that did not wait in the previous one.
    new: Vec<(String, u32)>,
    /// The last pass's need: its new instances.
    need: Vec<(String, u32)>,
    /// A filter may hide offers: since the last REVIVE a DECLINE or an
    /// ACCEPT with a filter was sent, or the subscription is fresh (the
    /// previous connection's filters may stand).
    filters_may_stand: bool,
    /// When this subscription last sent a REVIVE.
    last_revive: Option<Instant>,
    /// The instances whose REVIVE was due inside the interval and waits
    /// for its end, as long as one of them still waits (empty: none).
    deferred: Vec<(String, u32)>,
}

impl ReviveWatch {
    /// A new subscription: whatever waits is a new need, and the previous
    /// connection's filters may stand.
    pub(super) fn subscribed(&mut self) {
        self.previous.clear();
        self.current.clear();
        self.new.clear();
        self.need.clear();
        self.filters_may_stand = true;
        self.last_revive = None;
        self.deferred.clear();
    }

    /// A DECLINE, or an ACCEPT, with a filter of `refuse_seconds` was sent
    /// (`None`: the master's default of 5 s).
    pub(super) fn filtered(&mut self, refuse_seconds: Option<f64>) {
        if refuse_seconds.is_none_or(|s| s > 0.0 || s.is_nan()) {
            self.filters_may_stand = true;
        }
    }

    /// A REVIVE was sent at `now`: it clears every filter of the framework
    /// (`reviveOffers` in `src/master/allocator/mesos/hierarchical.cpp`).
    pub(super) fn revived(&mut self, now: Instant) {
        self.filters_may_stand = false;
        self.last_revive = Some(now);
        self.need.clear();
        self.deferred.clear();
    }

    /// May a REVIVE go out at `now`, `interval` after the last one? If not,
    /// it is deferred: [`ReviveWatch::deferred_until`] says when the pass
    /// that sends it is due.
    pub(super) fn may_revive(&mut self, now: Instant, interval: Duration) -> bool {
        if self.last_revive.is_none_or(|t| now >= t + interval) {
            return true;
        }
        let mut need = std::mem::take(&mut self.need);
        if need.is_empty() && self.deferred.is_empty() {
            // Suppressed with nothing new: whatever waits is the need.
            need = self
                .previous
                .iter()
                .flat_map(|(s, is)| is.iter().map(|i| (s.clone(), *i)))
                .collect();
        }
        self.deferred.extend(need);
        self.deferred.sort_unstable();
        self.deferred.dedup();
        false
    }

    /// A pass found no REVIVE needed (nothing pending, or no filter and no
    /// suppression to hide offers): a deferred one is dropped with its need.
    pub(super) fn not_needed(&mut self) {
        self.need.clear();
        self.deferred.clear();
    }

    /// When a deferred REVIVE may go out, if one waits.
    pub(super) fn deferred_until(&self, interval: Duration) -> Option<Instant> {
        (!self.deferred.is_empty())
            .then_some(self.last_revive)
            .flatten()
            .map(|t| t + interval)
    }

    /// A REVIVE failed: the filters it was to clear may stand.
    pub(super) fn revive_failed(&mut self) {
        self.filters_may_stand = true;
    }

    /// In this pass, `missing` (ascending) of `service` wait for placement
    /// and are past their backoff: all of them, not only those the pass's
    /// launch budget reaches.
    pub(super) fn waits(&mut self, service: &str, missing: &[u32]) {
        if missing.is_empty() {
            return;
        }
        let before = self.previous.get(service).map(Vec::as_slice);
        let before = before.unwrap_or_default();
        self.new.extend(
            missing
                .iter()
                .filter(|i| before.binary_search(i).is_err())
                .map(|i| (service.to_string(), *i)),
        );
        self.current.insert(service.to_string(), missing.to_vec());
    }

    /// `service` was not assessed in this pass (the pass's record budget
    /// was spent, `schedule`): its instances that waited in the previous
    /// pass still wait, none of them new. Returns how many.
    pub(super) fn carry(&mut self, service: &str) -> usize {
        let Some(before) = self.previous.get(service) else {
            return 0;
        };
        let count = before.len();
        self.current.insert(service.to_string(), before.clone());
        count
    }

    /// The pass is over: true if it should REVIVE, i.e. something new waits
    /// (or an instance of a deferred REVIVE still waits) while a filter or a
    /// suppression (`suppressed`) may hide offers.
    pub(super) fn end_pass(&mut self, suppressed: bool) -> bool {
        self.previous = std::mem::take(&mut self.current);
        self.need = std::mem::take(&mut self.new);
        let previous = &self.previous;
        self.deferred.retain(|(s, i)| {
            previous
                .get(s)
                .is_some_and(|is| is.binary_search(i).is_ok())
        });
        let need = !self.need.is_empty() || !self.deferred.is_empty();
        need && (self.filters_may_stand || suppressed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_instances_that_did_not_wait_before_are_a_need() {
        let mut w = ReviveWatch::default();
        w.subscribed();
        w.waits("web", &[0, 1, 2]);
        assert!(w.end_pass(false), "fresh subscription: all new");
        w.revived(Instant::now());
        w.waits("web", &[1, 2]);
        assert!(!w.end_pass(true), "fewer wait: nothing new");
        w.filtered(Some(30.0));
        w.waits("web", &[0, 1, 2]);
        assert!(w.end_pass(false), "instance 0 waits again");
        w.waits("web", &[0, 1, 2]);
        w.waits("db", &[0]);
        assert!(w.end_pass(false), "a new service");
        w.revived(Instant::now());
        w.waits("web", &[0, 1, 2]);
        w.waits("db", &[0, 1]);
        assert!(!w.end_pass(false), "new, but no filter and not suppressed");
        w.filtered(Some(0.0));
        w.waits("db", &[0, 1, 2]);
        assert!(!w.end_pass(false), "a zero filter is none");
        w.waits("db", &[0, 1, 2, 3]);
        assert!(w.end_pass(true), "suppressed");
    }
}
