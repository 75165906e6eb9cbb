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

use std::collections::HashMap;

/// Instances waiting for placement, by service, and whether filters of this
/// framework may stand. Memory: one entry per waiting instance, twice during
/// a pass.
#[derive(Debug, Default)]
pub(super) struct ReviveWatch {
    /// The previous pass's waiting instances, by service, ascending.
    previous: HashMap<String, Vec<u32>>,
    /// This pass's so far.
    current: HashMap<String, Vec<u32>>,
    /// This pass found an instance that did not wait in the previous one.
    new_need: bool,
    /// A filter may hide offers: since the last REVIVE a DECLINE or an
    /// ACCEPT with a filter was sent, or the subscription is fresh (the
    /// previous connection's filters may stand).
    filters_may_stand: bool,
}

impl ReviveWatch {
    /// A new subscription: whatever waits is a new need, and the previous
    /// connection's filters may stand.
    pub(super) fn subscribed(&mut self) {
        self.previous.clear();
        self.current.clear();
        self.new_need = false;
        self.filters_may_stand = true;
    }

    /// A DECLINE, or an ACCEPT, with a filter of `refuse_seconds` was sent
    /// (`None`: the master's default of 5 s).
    pub(super) fn filtered(&mut self, refuse_seconds: Option<f64>) {
        if refuse_seconds.is_none_or(|s| s > 0.0 || s.is_nan()) {
            self.filters_may_stand = true;
        }
    }

    /// A REVIVE was sent: it clears every filter of the framework
    /// (`reviveOffers` in `src/master/allocator/mesos/hierarchical.cpp`).
    pub(super) fn revived(&mut self) {
        self.filters_may_stand = false;
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
        if !self.new_need {
            let before = self.previous.get(service).map(Vec::as_slice);
            let before = before.unwrap_or_default();
            self.new_need = missing.iter().any(|i| before.binary_search(i).is_err());
        }
        self.current.insert(service.to_string(), missing.to_vec());
    }

    /// The pass is over: true if it should REVIVE, i.e. something new waits
    /// while a filter or a suppression (`suppressed`) may hide offers.
    pub(super) fn end_pass(&mut self, suppressed: bool) -> bool {
        self.previous = std::mem::take(&mut self.current);
        let new_need = std::mem::take(&mut self.new_need);
        new_need && (self.filters_may_stand || suppressed)
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
        w.revived();
        w.waits("web", &[1, 2]);
        assert!(!w.end_pass(true), "fewer wait: nothing new");
        w.filtered(Some(30.0));
        w.waits("web", &[0, 1, 2]);
        assert!(w.end_pass(false), "instance 0 waits again");
        w.waits("web", &[0, 1, 2]);
        w.waits("db", &[0]);
        assert!(w.end_pass(false), "a new service");
        w.revived();
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
