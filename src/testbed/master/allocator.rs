//! Offers: allocation rounds, decline filters, SUPPRESS / REVIVE, RESCIND,
//! and the offer half of ACCEPT.
//!
//! Sources: `src/master/allocator/mesos/hierarchical.cpp` (batch allocation
//! every `--allocation_interval`; `recoverResources` for the
//! refused-resources filter of a DECLINE; `suppressOffers`/`reviveOffers`),
//! `include/mesos/v1/mesos.proto` (`Filters.refuse_seconds`, default 5),
//! master.cpp (`accept`, `decline`, `removeOffer`, `rescindOffer`),
//! `docs/mesos-protocol.md#filters-and-declines`, `#suppress-and-revive`,
//! `#defaults` and capture p (DECLINE with
//! refuse_seconds 3 → the same resources after ≈3 s; SUPPRESS → no offers;
//! REVIVE → an offer within ≈50 ms and cleared filters).

use std::time::{Duration, Instant};

use super::{AgentState, Framework, Leadership, Master, OfferFilter};
use crate::mesos::resources::Resources;
use crate::mesos::v1::scheduler::{Event, event};
use crate::mesos::v1::{self, resource};

/// Default `Filters.refuse_seconds` (`include/mesos/v1/mesos.proto`).
pub(crate) const DEFAULT_REFUSE_SECONDS: f64 = 5.0;
/// Longest filter honoured: 365 days (the hierarchical allocator,
/// `src/master/allocator/mesos/hierarchical.cpp`, caps larger values).
const MAX_REFUSE_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// Smallest offerable amounts (`MIN_CPUS` 0.01, `MIN_MEM` 32 MB in
/// `src/master/constants.hpp`): an agent with less free is not offered.
const MIN_CPUS: f64 = 0.01;
const MIN_MEM: f64 = 32.0;

/// An outstanding offer.
#[derive(Debug, Clone)]
pub(crate) struct OfferRecord {
    pub framework_id: String,
    pub agent_id: String,
    pub resources: Resources,
    pub proto: v1::Offer,
}

/// The duration of a filter from `Filters.refuse_seconds`: absent → 5 s,
/// negative or NaN → 5 s (the allocator's `recoverResources` falls back to
/// the default for an invalid or negative value), above a year → a year,
/// zero → no filter (`hierarchical.cpp`).
pub(crate) fn refuse_duration(filters: Option<&v1::Filters>) -> Duration {
    let seconds = filters
        .and_then(|f| f.refuse_seconds)
        .unwrap_or(DEFAULT_REFUSE_SECONDS);
    let seconds = if seconds.is_nan() || seconds < 0.0 {
        DEFAULT_REFUSE_SECONDS
    } else {
        seconds.min(MAX_REFUSE_SECONDS)
    };
    Duration::from_secs_f64(seconds)
}

impl Master {
    /// One allocation round: each reachable agent's free resources go, as one
    /// offer, to the first eligible framework in rotation (active, connected,
    /// not suppressed, not filtering them). All offers of a round for one
    /// framework travel in one OFFERS event.
    pub fn allocate(&mut self) {
        let now = Instant::now();
        let mut eligible: Vec<String> = self
            .frameworks
            .values_mut()
            .filter(|f| f.connected() && !f.suppressed)
            .map(|f| {
                f.filters.retain(|_, filters| {
                    filters.retain(|filter| filter.until > now);
                    !filters.is_empty()
                });
                f.id.clone()
            })
            .collect();
        if eligible.is_empty() {
            return;
        }
        eligible.sort();
        let rotation = self.next_offer as usize % eligible.len();
        eligible.rotate_left(rotation);

        let mut batches: Vec<(String, Vec<v1::Offer>)> = Vec::new();
        for index in 0..self.agents.len() {
            let agent = &self.agents[index];
            if agent.state != AgentState::Registered || self.holds.deactivated(&agent.id) {
                continue;
            }
            let free = agent.available();
            if free.scalar("cpus") < MIN_CPUS && free.scalar("mem") < MIN_MEM {
                continue;
            }
            let agent_id = agent.id.clone();
            let taker = eligible.iter().find(|fid| {
                self.frameworks.get(*fid).is_some_and(|f| {
                    !f.filters
                        .get(&agent_id)
                        .is_some_and(|filters| filters.iter().any(|x| x.resources.contains(&free)))
                })
            });
            let Some(framework_id) = taker.cloned() else {
                continue;
            };
            let offer = self.make_offer(&framework_id, index, free);
            super::push_batch(&mut batches, framework_id, offer);
        }
        self.send_batches(batches, |offers| Event {
            r#type: Some(event::Type::Offers as i32),
            offers: Some(event::Offers { offers }),
            ..Default::default()
        });
    }

    fn make_offer(&mut self, framework_id: &str, agent_index: usize, free: Resources) -> v1::Offer {
        let id = format!("{}-O{}", self.info.id, self.next_offer);
        self.next_offer += 1;
        let multi_role = self
            .frameworks
            .get(framework_id)
            .is_some_and(Framework::multi_role);
        let agent = &mut self.agents[agent_index];
        agent.offered.add(&free);
        let mut resources = free.to_protos(if multi_role { None } else { Some("*") });
        let allocation = multi_role.then(|| resource::AllocationInfo {
            role: Some("*".into()),
        });
        if multi_role {
            for r in &mut resources {
                r.allocation_info = allocation.clone();
            }
        }
        let executor_ids = agent
            .executors
            .custom_of(framework_id)
            .map(|e| v1::ExecutorId { value: e.clone() })
            .collect();
        let proto = v1::Offer {
            id: v1::OfferId { value: id.clone() },
            framework_id: v1::FrameworkId {
                value: framework_id.to_string(),
            },
            agent_id: v1::AgentId {
                value: agent.id.clone(),
            },
            hostname: agent.spec.hostname.clone(),
            resources,
            executor_ids,
            attributes: agent.spec.attributes.clone(),
            url: Some(v1::Url {
                scheme: "http".into(),
                address: v1::Address {
                    hostname: Some(agent.spec.hostname.clone()),
                    ip: Some(self.cfg.listen.ip().to_string()),
                    port: agent.port as i32,
                },
                path: Some("/slave(1)".into()),
                ..Default::default()
            }),
            allocation_info: allocation,
            unavailability: None,
        };
        let agent_id = agent.id.clone();
        let mut proto = proto;
        proto.unavailability = self.agent_unavailability(agent_index);
        self.offers.insert(
            id,
            OfferRecord {
                framework_id: framework_id.to_string(),
                agent_id,
                resources: free,
                proto: proto.clone(),
            },
        );
        proto
    }

    /// Removes an offer and returns its resources to the agent's free pool.
    pub fn remove_offer(&mut self, offer_id: &str) -> Option<OfferRecord> {
        let record = self.offers.remove(offer_id)?;
        if let Some(index) = self.agent_index(&record.agent_id) {
            self.agents[index].offered.subtract(&record.resources);
        }
        Some(record)
    }

    /// Removes every offer of a framework without telling it (disconnection,
    /// failover, removal: `docs/mesos-protocol.md#offers-die-with-the-subscription`).
    pub fn remove_offers_of(&mut self, framework_id: &str) {
        let ids: Vec<String> = self
            .offers
            .iter()
            .filter(|(_, o)| o.framework_id == framework_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.remove_offer(&id);
        }
        self.remove_inverse_offers_of(framework_id);
    }

    /// Rescinds every offer on an agent: RESCIND to the holder, then removal.
    pub fn rescind_offers_on(&mut self, agent_id: &str) {
        let ids: Vec<(String, String)> = self
            .offers
            .iter()
            .filter(|(_, o)| o.agent_id == agent_id)
            .map(|(id, o)| (id.clone(), o.framework_id.clone()))
            .collect();
        for (id, framework_id) in ids {
            self.remove_offer(&id);
            let rescind = Event {
                r#type: Some(event::Type::Rescind as i32),
                rescind: Some(event::Rescind {
                    offer_id: v1::OfferId { value: id },
                }),
                ..Default::default()
            };
            self.send(&framework_id, &rescind);
        }
    }

    /// DECLINE: each named offer of this framework is removed and its
    /// resources filtered for `refuse_seconds`; unknown IDs are ignored
    /// (`src/master/master.cpp` `decline`, then the allocator's
    /// `recoverResources` in `hierarchical.cpp`).
    pub fn decline(
        &mut self,
        framework_id: &str,
        offer_ids: &[v1::OfferId],
        filters: Option<&v1::Filters>,
    ) {
        let refuse = refuse_duration(filters);
        for offer_id in offer_ids {
            let owned = self
                .offers
                .get(&offer_id.value)
                .is_some_and(|o| o.framework_id == framework_id);
            if !owned {
                continue;
            }
            if let Some(record) = self.remove_offer(&offer_id.value) {
                self.add_filter(framework_id, &record.agent_id, record.resources, refuse);
            }
        }
    }

    /// Filters `resources` on `agent_id` for `refuse` (no filter when zero).
    pub fn add_filter(
        &mut self,
        framework_id: &str,
        agent_id: &str,
        resources: Resources,
        refuse: Duration,
    ) {
        if refuse.is_zero() || resources.is_empty() {
            return;
        }
        if let Some(framework) = self.frameworks.get_mut(framework_id) {
            framework
                .filters
                .entry(agent_id.to_string())
                .or_default()
                .push(OfferFilter {
                    resources,
                    until: Instant::now() + refuse,
                });
        }
    }

    /// SUPPRESS: no offers until REVIVE (`suppressOffers` in
    /// `hierarchical.cpp`; capture p: none for 6 s).
    pub fn suppress(&mut self, framework_id: &str) {
        if let Some(f) = self.frameworks.get_mut(framework_id) {
            f.suppressed = true;
        }
    }

    /// REVIVE: clears suppression and every decline filter, and allocates at
    /// once (`reviveOffers` in `hierarchical.cpp`; capture p: an offer within
    /// ≈50 ms).
    pub fn revive(&mut self, framework_id: &str) {
        if let Some(f) = self.frameworks.get_mut(framework_id) {
            f.suppressed = false;
            f.filters.clear();
        }
        if self.leadership == Leadership::Leading {
            self.allocate();
        }
    }

    /// Validates and takes the offers named by an ACCEPT. On success returns
    /// the agent index and the offered resources (the offers are gone). On
    /// failure every valid named offer is still removed and the error names
    /// the first invalid one (master.cpp `accept`: "Offer `<id>` is no longer
    /// valid").
    pub fn take_offers(
        &mut self,
        framework_id: &str,
        offer_ids: &[v1::OfferId],
    ) -> Result<(usize, Resources), String> {
        let mut error = None;
        let mut agent_id: Option<String> = None;
        if offer_ids.is_empty() {
            error = Some("No offers specified".to_string());
        }
        let mut seen = std::collections::HashSet::with_capacity(offer_ids.len());
        for offer_id in offer_ids {
            if error.is_some() {
                break;
            }
            if !seen.insert(offer_id.value.as_str()) {
                error = Some(format!("Duplicate offer {} in offer list", offer_id.value));
                break;
            }
            match self.offers.get(&offer_id.value) {
                Some(o) if o.framework_id == framework_id => match &agent_id {
                    Some(a) if *a != o.agent_id => {
                        error = Some("Aggregated offers must belong to one single agent".into());
                    }
                    _ => agent_id = Some(o.agent_id.clone()),
                },
                _ => error = Some(format!("Offer {} is no longer valid", offer_id.value)),
            }
        }
        let mut offered = Resources::new();
        for offer_id in offer_ids {
            let owned = self
                .offers
                .get(&offer_id.value)
                .is_some_and(|o| o.framework_id == framework_id);
            if owned && let Some(record) = self.remove_offer(&offer_id.value) {
                offered.add(&record.resources);
            }
        }
        if let Some(error) = error {
            return Err(error);
        }
        let agent_id = agent_id.expect("set for a non-empty valid offer list");
        let index = self
            .agent_index(&agent_id)
            .expect("offers name known agents");
        Ok((index, offered))
    }
}
