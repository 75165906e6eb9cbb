//! The offer registry: offers held by the leader, with a time to live, and a
//! short memory of offers that left it (so a late RESCIND or a duplicate is
//! recognised instead of being mistaken for news).
//!
//! Offers are only valid on the subscription that received them: they are
//! all dropped on disconnection, on leadership loss and on re-subscription
//! (`docs/mesos-protocol.md#offers-die-with-the-subscription`), and an agent's offers are
//! dropped when it is lost (FAILURE{agent_id}). Pure data; the core decides
//! what to decline, and when.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::mesos::resources::Resources;
use crate::mesos::v1;

/// An offer the scheduler holds.
#[derive(Debug, Clone)]
pub struct HeldOffer {
    /// The offer as received.
    pub offer: v1::Offer,
    /// What is left of it after planned launches.
    pub remaining: Resources,
    /// When it arrived.
    pub received: Instant,
    /// When it arrived, seconds since the UNIX epoch (for display).
    pub received_at: f64,
    /// Its place in the arrival order (`OfferRegistry::order`).
    seq: u64,
}

impl HeldOffer {
    /// The offer ID.
    pub fn id(&self) -> &str {
        &self.offer.id.value
    }

    /// The agent ID.
    pub fn agent_id(&self) -> &str {
        &self.offer.agent_id.value
    }
}

/// Why an offer left the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Used by an ACCEPT.
    Used,
    /// Declined.
    Declined,
    /// Rescinded by the master.
    Rescinded,
    /// Dropped: disconnection, lost agent, leadership loss.
    Dropped,
}

/// Held offers in arrival order, plus linger memory.
#[derive(Debug)]
pub struct OfferRegistry {
    ttl: Duration,
    linger: Duration,
    /// Held offers by ID, and their arrival order.
    held: HashMap<String, HeldOffer>,
    order: BTreeMap<(Instant, u64), String>,
    seq: u64,
    /// Counts every change to the held offers (arrivals, departures, a
    /// placement's use): a view of them is current while it is the same.
    generation: u64,
    /// Offers that left, with when and why, until `linger` passes.
    lingering: HashMap<String, (Instant, Gone)>,
}

impl OfferRegistry {
    /// A registry declining offers unused for `ttl` and remembering gone
    /// offers for `linger`.
    pub fn new(ttl: Duration, linger: Duration) -> Self {
        OfferRegistry {
            ttl,
            linger,
            held: HashMap::new(),
            order: BTreeMap::new(),
            seq: 0,
            generation: 0,
            lingering: HashMap::new(),
        }
    }

    /// Adds a received offer. Returns false (and ignores it) when the ID is
    /// already held or recently gone.
    pub fn add(&mut self, offer: v1::Offer, now: Instant, now_secs: f64) -> bool {
        let id = offer.id.value.clone();
        if self.held.contains_key(&id) || self.lingering.contains_key(&id) {
            return false;
        }
        self.seq += 1;
        self.generation += 1;
        self.order.insert((now, self.seq), id.clone());
        let remaining = Resources::from_protos(&offer.resources);
        self.held.insert(
            id,
            HeldOffer {
                offer,
                remaining,
                received: now,
                received_at: now_secs,
                seq: self.seq,
            },
        );
        true
    }

    /// Removes an offer (for `why`) and returns it if it was held.
    pub fn remove(&mut self, id: &str, why: Gone, now: Instant) -> Option<HeldOffer> {
        let held = self.held.remove(id)?;
        self.generation += 1;
        // By its key: scanning the order for the ID made clearing 1,000
        // offers a million comparisons.
        self.order.remove(&(held.received, held.seq));
        self.lingering.insert(id.to_string(), (now, why));
        Some(held)
    }

    /// Removes every offer (for `why`); returns their IDs.
    pub fn clear(&mut self, why: Gone, now: Instant) -> Vec<String> {
        let ids: Vec<String> = self.order.values().cloned().collect();
        for id in &ids {
            self.remove(id, why, now);
        }
        ids
    }

    /// Removes every offer on `agent_id`; returns their IDs.
    pub fn remove_agent(&mut self, agent_id: &str, now: Instant) -> Vec<String> {
        let ids: Vec<String> = self
            .iter()
            .filter(|o| o.agent_id() == agent_id)
            .map(|o| o.id().to_string())
            .collect();
        for id in &ids {
            self.remove(id, Gone::Dropped, now);
        }
        ids
    }

    /// Offers held longer than the TTL (to decline), oldest first.
    pub fn expired(&self, now: Instant) -> impl Iterator<Item = &HeldOffer> {
        self.iter()
            .filter(move |o| now.duration_since(o.received) >= self.ttl)
    }

    /// Forgets gone offers older than the linger time.
    pub fn forget_lingering(&mut self, now: Instant) {
        let linger = self.linger;
        self.lingering
            .retain(|_, (at, _)| now.duration_since(*at) < linger);
    }

    /// Why a recently gone offer left, if it is still remembered.
    pub fn gone(&self, id: &str) -> Option<Gone> {
        self.lingering.get(id).map(|(_, why)| *why)
    }

    /// Held offers, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &HeldOffer> {
        self.order.values().filter_map(|id| self.held.get(id))
    }

    /// A held offer, mutably (placement subtracts from `remaining`).
    pub fn get_mut(&mut self, id: &str) -> Option<&mut HeldOffer> {
        self.generation += 1;
        self.held.get_mut(id)
    }

    /// The count of changes to the held offers so far: a view built from
    /// [`OfferRegistry::iter`] is current while this is the same.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of held offers.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// True when no offer is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The configured time to live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(id: &str, agent: &str) -> v1::Offer {
        v1::Offer {
            id: v1::OfferId { value: id.into() },
            agent_id: v1::AgentId {
                value: agent.into(),
            },
            resources: Resources::parse("cpus:1;mem:128").unwrap().to_protos(None),
            ..Default::default()
        }
    }

    /// Every change to the held offers counts (a view of them built at one
    /// generation is stale at the next); reading does not. Offers that
    /// arrived at the same instant leave by their own key, in any order.
    #[test]
    fn every_change_counts_and_offers_leave_by_their_key() {
        let t0 = Instant::now();
        let mut r = OfferRegistry::new(Duration::from_secs(10), Duration::from_secs(60));
        let mut seen = vec![r.generation()];
        for (id, agent) in [("o1", "a1"), ("o2", "a1"), ("o3", "a2"), ("o4", "a3")] {
            r.add(offer(id, agent), t0, 0.0);
        }
        seen.push(r.generation());
        assert_eq!(r.iter().count(), 4);
        assert!(r.expired(t0).next().is_none());
        assert_eq!(r.generation(), seen[1], "reading changes nothing");
        r.get_mut("o3").unwrap().remaining = Resources::default();
        seen.push(r.generation());
        r.remove("o2", Gone::Used, t0);
        seen.push(r.generation());
        let ids: Vec<&str> = r.iter().map(|o| o.id()).collect();
        assert_eq!(ids, ["o1", "o3", "o4"]);
        assert_eq!(r.order.len(), 3, "no order entry left behind");
        r.remove_agent("a1", t0);
        seen.push(r.generation());
        r.clear(Gone::Dropped, t0);
        seen.push(r.generation());
        assert!(r.is_empty() && r.iter().next().is_none());
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    }

    #[test]
    fn held_in_arrival_order_and_expire_after_ttl() {
        let t0 = Instant::now();
        let mut r = OfferRegistry::new(Duration::from_secs(10), Duration::from_secs(60));
        assert!(r.add(offer("b", "a1"), t0, 0.0));
        assert!(r.add(offer("a", "a2"), t0 + Duration::from_secs(1), 0.0));
        let ids: Vec<&str> = r.iter().map(|o| o.id()).collect();
        assert_eq!(ids, ["b", "a"]);
        let expired: Vec<&str> = r
            .expired(t0 + Duration::from_secs(10))
            .map(|o| o.id())
            .collect();
        assert_eq!(expired, ["b"]);
        assert_eq!(r.iter().next().unwrap().remaining.scalar("cpus"), 1.0);
    }

    #[test]
    fn gone_offers_linger_and_duplicates_are_ignored() {
        let t0 = Instant::now();
        let mut r = OfferRegistry::new(Duration::from_secs(10), Duration::from_secs(5));
        r.add(offer("o1", "a1"), t0, 0.0);
        assert!(!r.add(offer("o1", "a1"), t0, 0.0), "duplicate");
        assert!(r.remove("o1", Gone::Used, t0).is_some());
        assert_eq!(r.gone("o1"), Some(Gone::Used));
        assert!(!r.add(offer("o1", "a1"), t0, 0.0), "recently gone");
        r.forget_lingering(t0 + Duration::from_secs(5));
        assert_eq!(r.gone("o1"), None);
    }

    #[test]
    fn agent_loss_and_clear_drop_offers() {
        let t0 = Instant::now();
        let mut r = OfferRegistry::new(Duration::from_secs(10), Duration::from_secs(5));
        r.add(offer("o1", "a1"), t0, 0.0);
        r.add(offer("o2", "a2"), t0, 0.0);
        assert_eq!(r.remove_agent("a1", t0), ["o1"]);
        assert_eq!(r.clear(Gone::Dropped, t0), ["o2"]);
        assert!(r.is_empty());
    }
}
