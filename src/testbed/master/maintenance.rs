//! Maintenance: the operator's schedule of machine windows, offers that carry
//! the window as `unavailability`, inverse offers and their answers, and
//! machines brought DOWN and UP again.
//!
//! Sources (apache/mesos): `docs/maintenance.md`; `src/master/http.cpp`
//! (`___updateMaintenanceSchedule`, `_startMaintenance`, `_stopMaintenance`,
//! `getMaintenanceStatus`, `getMaintenanceSchedule`);
//! `src/master/maintenance.cpp` (the `validation` namespace, whose error
//! texts are answered as 400 bodies); `src/master/master.cpp`
//! (`updateUnavailability`, `acceptInverseOffers`, `declineInverseOffers`,
//! `removeInverseOffer`, `__removeSlave`); the allocator's
//! `generateInverseOffers`, `updateUnavailability` and `updateInverseOffer`
//! in `src/master/allocator/mesos/hierarchical.cpp`; and the real-master
//! capture v (`v-maintenance.txt`), which the rules below follow:
//!
//! - UPDATE_MAINTENANCE_SCHEDULE answers 200 with an empty body. Every
//!   registered agent's offers are rescinded and every outstanding inverse
//!   offer is rescinded (RESCIND_INVERSE_OFFER), the answers so far and the
//!   inverse-offer filters are forgotten, and an allocation round follows at
//!   once: offers of an agent whose machine has a window carry it as
//!   `unavailability`, and each framework with tasks or offers on such an
//!   agent gets one INVERSE_OFFERS (capture v, run B: also a framework that
//!   only holds an offer there). A machine new to the schedule is DRAINING;
//!   a machine left out of it is UP again (a DOWN one cannot be left out).
//! - An inverse offer stays outstanding until it is answered or rescinded;
//!   ACCEPT_INVERSE_OFFERS / DECLINE_INVERSE_OFFERS record the answer for
//!   GET_MAINTENANCE_STATUS (`statuses`, one per framework, the latest) and
//!   filter the agent's inverse offers for the framework for
//!   `refuse_seconds` (default 5 s): the next allocation round after the
//!   filter sends a new one (capture v: ≈5.9 s after an ACCEPT without
//!   filters, ≈4.5 s after a DECLINE with refuse_seconds 4).
//! - START_MAINTENANCE (machines in DRAINING only) brings the machines
//!   DOWN: each registered agent there is removed — every task there gets
//!   TASK_LOST, REASON_AGENT_REMOVED, `Agent <hostname> removed: Operator
//!   initiated 'Machine DOWN'` (also for PARTITION_AWARE frameworks), offers
//!   are rescinded, inverse offers rescinded, and every connected framework
//!   gets FAILURE{agent_id}. The window stays in the schedule; the agent
//!   cannot re-register while its machine is DOWN.
//! - STOP_MAINTENANCE (machines in DOWN only) takes the machines out of the
//!   schedule and brings them UP; the agent re-registers with the same agent
//!   ID (capture v) and no tasks. The testbed has it re-register at once
//!   (a real agent does when it is restarted).
//!
//! Not simulated: unreachable agents on a machine brought DOWN (they stay
//! unreachable), and machine IDs with only a hostname or only an IP (an
//! agent's machine is always its hostname and the master's listen IP).

use std::collections::HashMap;
use std::time::Instant;

use super::agent_side::AgentSide;
use super::allocator::refuse_duration;
use super::{AgentState, Master, now_nanos, now_secs};
use crate::mesos::resources::Resources;
use crate::mesos::v1::maintenance::{
    ClusterStatus, InverseOfferStatus, Schedule, cluster_status, inverse_offer_status,
};
use crate::mesos::v1::scheduler::{Event, event};
use crate::mesos::v1::{self, task_status};

/// A machine as the master matches it: hostname (case-insensitive) and IP
/// (`MachineID` equality in `src/common/type_utils.cpp`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MachineKey {
    hostname: String,
    ip: String,
}

impl MachineKey {
    fn of(id: &v1::MachineId) -> MachineKey {
        MachineKey {
            hostname: id.hostname.clone().unwrap_or_default().to_lowercase(),
            ip: id.ip.clone().unwrap_or_default(),
        }
    }
}

/// `MachineInfo.Mode` of a scheduled machine (an unscheduled one is UP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Draining,
    Down,
}

/// A machine of the schedule.
#[derive(Debug, Clone)]
struct Machine {
    /// As the operator named it.
    id: v1::MachineId,
    mode: Mode,
    unavailability: v1::Unavailability,
    /// The latest answer of each framework to this machine's inverse offers.
    statuses: Vec<InverseOfferStatus>,
}

/// An outstanding inverse offer.
#[derive(Debug, Clone)]
pub(crate) struct InverseOfferRecord {
    pub framework_id: String,
    pub agent_id: String,
}

/// The master's maintenance state.
#[derive(Debug, Default)]
pub(crate) struct Maintenance {
    /// The schedule as the operator gave it (windows emptied by
    /// STOP_MAINTENANCE are dropped).
    schedule: Schedule,
    machines: HashMap<MachineKey, Machine>,
    /// Outstanding inverse offers by ID.
    pub(crate) inverse_offers: HashMap<String, InverseOfferRecord>,
    /// No inverse offer for (framework, agent) before this (an answer's
    /// `refuse_seconds`).
    filters: HashMap<(String, String), Instant>,
}

/// `JSON::protobuf(id)` of a machine ID, as the master's 400 bodies quote it.
fn machine_json(id: &v1::MachineId) -> String {
    let mut object = serde_json::Map::new();
    if let Some(hostname) = &id.hostname {
        object.insert("hostname".into(), hostname.clone().into());
    }
    if let Some(ip) = &id.ip {
        object.insert("ip".into(), ip.clone().into());
    }
    serde_json::Value::Object(object).to_string()
}

/// `maintenance::validation::machine`.
fn validate_machine(id: &v1::MachineId) -> Result<(), String> {
    let hostname = id.hostname.as_deref().unwrap_or("");
    let ip = id.ip.as_deref().unwrap_or("");
    if hostname.is_empty() && ip.is_empty() {
        return Err("Both 'hostname' and 'ip' for a machine are empty".into());
    }
    if !ip.is_empty() && ip.parse::<std::net::Ipv4Addr>().is_err() {
        return Err(format!("Failed to parse IP address '{ip}'"));
    }
    Ok(())
}

/// `maintenance::validation::machines` (START/STOP_MAINTENANCE).
fn validate_machines(ids: &[v1::MachineId]) -> Result<(), String> {
    if ids.is_empty() {
        return Err("List of machines is empty".into());
    }
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        validate_machine(id)?;
        if !seen.insert(MachineKey::of(id)) {
            return Err(format!(
                "Machine '{}' appears more than once in the schedule",
                machine_json(id)
            ));
        }
    }
    Ok(())
}

impl Master {
    /// The machine an agent runs on: its hostname and the master's IP (all
    /// simulated agents share the host).
    fn machine_of(&self, agent_index: usize) -> MachineKey {
        MachineKey {
            hostname: self.agents[agent_index].spec.hostname.to_lowercase(),
            ip: self.cfg.listen.ip().to_string(),
        }
    }

    /// The scheduled machine of a registered agent, as Mesos prints a
    /// `MachineID` (`operator<<` in src/common/type_utils.cpp: `host (ip)`,
    /// or whichever of the two is set); `None` when it is not scheduled.
    pub(crate) fn scheduled_machine(&self, agent_id: &str) -> Option<String> {
        let index = self.agent_index(agent_id)?;
        if self.agents[index].state != super::AgentState::Registered {
            return None;
        }
        let machine = self.maintenance.machines.get(&self.machine_of(index))?;
        let (host, ip) = (machine.id.hostname.as_deref(), machine.id.ip.as_deref());
        Some(match (host, ip) {
            (Some(h), Some(i)) => format!("{h} ({i})"),
            (Some(h), None) => h.to_string(),
            (None, Some(i)) => i.to_string(),
            (None, None) => String::new(),
        })
    }

    /// The agent's scheduled unavailability, set on its offers.
    pub(crate) fn agent_unavailability(&self, agent_index: usize) -> Option<v1::Unavailability> {
        if self.maintenance.machines.is_empty() {
            return None;
        }
        self.maintenance
            .machines
            .get(&self.machine_of(agent_index))
            .map(|m| m.unavailability)
    }

    /// UPDATE_MAINTENANCE_SCHEDULE; `Err` is the 400 body.
    pub fn update_maintenance_schedule(&mut self, schedule: Schedule) -> Result<(), String> {
        // maintenance::validation::schedule.
        let mut updated: HashMap<MachineKey, (v1::MachineId, v1::Unavailability)> = HashMap::new();
        for window in &schedule.windows {
            if window.machine_ids.is_empty() {
                return Err("List of machines in the maintenance window is empty".into());
            }
            let duration = window
                .unavailability
                .duration
                .as_ref()
                .map_or(0, |d| d.nanoseconds);
            if duration < 0 {
                return Err("Unavailability 'duration' is negative".into());
            }
            for id in &window.machine_ids {
                validate_machine(id)?;
                let key = MachineKey::of(id);
                if updated.contains_key(&key) {
                    return Err(format!(
                        "Machine '{}' appears more than once in the schedule",
                        machine_json(id)
                    ));
                }
                updated.insert(key, (id.clone(), window.unavailability));
            }
        }
        for (key, machine) in &self.maintenance.machines {
            if machine.mode == Mode::Down && !updated.contains_key(key) {
                return Err(format!(
                    "Machine '{}' is deactivated and cannot be removed from the schedule",
                    machine_json(&machine.id)
                ));
            }
        }
        // Machines left out are UP again; the others keep their mode and
        // take the new window; new ones are DRAINING. Every machine's
        // answers start again (the allocator's `updateUnavailability`
        // resets the agent's maintenance state).
        let old = std::mem::take(&mut self.maintenance.machines);
        for (key, (id, unavailability)) in updated {
            let mode = old.get(&key).map_or(Mode::Draining, |m| m.mode);
            self.maintenance.machines.insert(
                key,
                Machine {
                    id,
                    mode,
                    unavailability,
                    statuses: Vec::new(),
                },
            );
        }
        self.maintenance.schedule = schedule;
        self.maintenance.filters.clear();
        // master.cpp updateUnavailability, for every machine with agents:
        // rescind the offers and the inverse offers, then the allocator
        // offers again (capture v: RESCIND, then OFFERS with
        // `unavailability` and INVERSE_OFFERS within a few ms).
        let registered: Vec<String> = self
            .agents
            .iter()
            .filter(|a| a.state == AgentState::Registered)
            .map(|a| a.id.clone())
            .collect();
        for agent_id in &registered {
            self.rescind_offers_on(agent_id);
        }
        self.rescind_inverse_offers(|_| true);
        if self.leadership == super::Leadership::Leading {
            self.allocate();
            self.allocate_inverse_offers();
        }
        Ok(())
    }

    /// GET_MAINTENANCE_SCHEDULE.
    pub fn maintenance_schedule(&self) -> Schedule {
        self.maintenance.schedule.clone()
    }

    /// GET_MAINTENANCE_STATUS: DRAINING machines with their answers, DOWN
    /// machines.
    pub fn maintenance_status(&self) -> ClusterStatus {
        let mut machines: Vec<&Machine> = self.maintenance.machines.values().collect();
        machines.sort_by_key(|m| machine_json(&m.id));
        let mut status = ClusterStatus::default();
        for machine in machines {
            match machine.mode {
                Mode::Draining => status
                    .draining_machines
                    .push(cluster_status::DrainingMachine {
                        id: machine.id.clone(),
                        statuses: machine.statuses.clone(),
                    }),
                Mode::Down => status.down_machines.push(machine.id.clone()),
            }
        }
        status
    }

    /// Sends an inverse offer to every connected framework with tasks or
    /// offers on an agent whose machine is DRAINING, unless one is
    /// outstanding or the framework's answer filters it (the allocator's
    /// `generateInverseOffers`). Runs after each allocation round.
    pub fn allocate_inverse_offers(&mut self) {
        if self.maintenance.machines.is_empty() {
            return;
        }
        let now = Instant::now();
        self.maintenance.filters.retain(|_, until| *until > now);
        let mut batches: Vec<(String, Vec<v1::InverseOffer>)> = Vec::new();
        for index in 0..self.agents.len() {
            if self.agents[index].state != AgentState::Registered {
                continue;
            }
            let Some(machine) = self.maintenance.machines.get(&self.machine_of(index)) else {
                continue;
            };
            if machine.mode != Mode::Draining {
                continue;
            }
            let unavailability = machine.unavailability;
            let agent_id = self.agents[index].id.clone();
            let mut holders: Vec<String> = self
                .tasks
                .on_agent(&agent_id)
                .map(|(_, t)| t.framework_id.clone())
                .chain(
                    self.offers
                        .values()
                        .filter(|o| o.agent_id == agent_id)
                        .map(|o| o.framework_id.clone()),
                )
                .collect();
            holders.sort();
            holders.dedup();
            for framework_id in holders {
                let connected = self
                    .frameworks
                    .get(&framework_id)
                    .is_some_and(|f| f.connected());
                let outstanding = self
                    .maintenance
                    .inverse_offers
                    .values()
                    .any(|o| o.framework_id == framework_id && o.agent_id == agent_id);
                let filtered = self
                    .maintenance
                    .filters
                    .contains_key(&(framework_id.clone(), agent_id.clone()));
                if !connected || outstanding || filtered {
                    continue;
                }
                // Inverse offers share the offers' ID sequence (capture v).
                let id = format!("{}-O{}", self.info.id, self.next_offer);
                self.next_offer += 1;
                let agent = &self.agents[index];
                let offer = v1::InverseOffer {
                    id: v1::OfferId { value: id.clone() },
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
                    framework_id: v1::FrameworkId {
                        value: framework_id.clone(),
                    },
                    agent_id: Some(v1::AgentId {
                        value: agent_id.clone(),
                    }),
                    unavailability,
                    resources: Vec::new(),
                };
                self.maintenance.inverse_offers.insert(
                    id,
                    InverseOfferRecord {
                        framework_id: framework_id.clone(),
                        agent_id: agent_id.clone(),
                    },
                );
                super::push_batch(&mut batches, framework_id, offer);
            }
        }
        self.send_batches(batches, |inverse_offers| Event {
            r#type: Some(event::Type::InverseOffers as i32),
            inverse_offers: Some(event::InverseOffers { inverse_offers }),
            ..Default::default()
        });
    }

    /// Removes the inverse offers `which` selects and tells their
    /// frameworks (RESCIND_INVERSE_OFFER).
    fn rescind_inverse_offers(&mut self, which: impl Fn(&InverseOfferRecord) -> bool) {
        let mut ids: Vec<String> = self
            .maintenance
            .inverse_offers
            .iter()
            .filter(|(_, o)| which(o))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        for id in ids {
            let Some(record) = self.maintenance.inverse_offers.remove(&id) else {
                continue;
            };
            let event = Event {
                r#type: Some(event::Type::RescindInverseOffer as i32),
                rescind_inverse_offer: Some(event::RescindInverseOffer {
                    inverse_offer_id: v1::OfferId { value: id },
                }),
                ..Default::default()
            };
            self.send(&record.framework_id, &event);
        }
    }

    /// Inverse offers die with the framework's subscription, as offers do,
    /// and its inverse-offer filters with them (`deactivateFramework` in
    /// `hierarchical.cpp`).
    pub fn remove_inverse_offers_of(&mut self, framework_id: &str) {
        self.maintenance
            .inverse_offers
            .retain(|_, o| o.framework_id != framework_id);
        self.maintenance
            .filters
            .retain(|(f, _), _| f != framework_id);
    }

    /// ACCEPT_INVERSE_OFFERS (`accept` true) or DECLINE_INVERSE_OFFERS: each
    /// named inverse offer of this framework is removed, its answer recorded
    /// on the machine, and the agent's inverse offers filtered for the
    /// framework for `refuse_seconds`. Unknown IDs are ignored (master.cpp
    /// drops an invalid call with a warning).
    pub fn answer_inverse_offers(
        &mut self,
        framework_id: &str,
        ids: &[v1::OfferId],
        filters: Option<&v1::Filters>,
        accept: bool,
    ) {
        let refuse = refuse_duration(filters);
        let status = if accept {
            inverse_offer_status::Status::Accept
        } else {
            inverse_offer_status::Status::Decline
        };
        for id in ids {
            let owned = self
                .maintenance
                .inverse_offers
                .get(&id.value)
                .is_some_and(|o| o.framework_id == framework_id);
            if !owned {
                continue;
            }
            let Some(record) = self.maintenance.inverse_offers.remove(&id.value) else {
                continue;
            };
            let Some(index) = self.agent_index(&record.agent_id) else {
                continue;
            };
            let key = self.machine_of(index);
            if let Some(machine) = self.maintenance.machines.get_mut(&key) {
                machine
                    .statuses
                    .retain(|s| s.framework_id.value != framework_id);
                machine.statuses.push(InverseOfferStatus {
                    status: status as i32,
                    framework_id: v1::FrameworkId {
                        value: framework_id.to_string(),
                    },
                    timestamp: v1::TimeInfo {
                        nanoseconds: now_nanos(),
                    },
                });
            }
            if !refuse.is_zero() {
                self.maintenance.filters.insert(
                    (framework_id.to_string(), record.agent_id.clone()),
                    Instant::now() + refuse,
                );
            }
        }
    }

    /// START_MAINTENANCE; `Err` is the 400 body.
    pub fn start_maintenance(&mut self, ids: &[v1::MachineId]) -> Result<(), String> {
        validate_machines(ids)?;
        let known = |master: &Master, key: &MachineKey| {
            (0..master.agents.len()).any(|i| master.machine_of(i) == *key)
        };
        for id in ids {
            let key = MachineKey::of(id);
            match self.maintenance.machines.get(&key) {
                Some(m) if m.mode == Mode::Draining => {}
                // A machine with agents is known to the master (UP) even
                // when unscheduled (capture v).
                Some(_) => {
                    return Err(format!(
                        "Machine '{}' is not in DRAINING mode and cannot be brought down",
                        machine_json(id)
                    ));
                }
                None if known(self, &key) => {
                    return Err(format!(
                        "Machine '{}' is not in DRAINING mode and cannot be brought down",
                        machine_json(id)
                    ));
                }
                None => {
                    return Err(format!(
                        "Machine '{}' is not part of a maintenance schedule",
                        machine_json(id)
                    ));
                }
            }
        }
        for id in ids {
            let key = MachineKey::of(id);
            if let Some(machine) = self.maintenance.machines.get_mut(&key) {
                machine.mode = Mode::Down;
                machine.statuses.clear();
            }
            let on_machine: Vec<usize> = (0..self.agents.len())
                .filter(|i| {
                    self.agents[*i].state == AgentState::Registered && self.machine_of(*i) == key
                })
                .collect();
            for index in on_machine {
                self.machine_down(index);
            }
        }
        Ok(())
    }

    /// Removes a registered agent whose machine went DOWN (master.cpp
    /// `__removeSlave` with "Operator initiated 'Machine DOWN'").
    fn machine_down(&mut self, index: usize) {
        let agent_id = self.agents[index].id.clone();
        let hostname = self.agents[index].spec.hostname.clone();
        tracing::info!(%agent_id, "agent removed: machine DOWN");
        self.agents[index].state = AgentState::Down;
        self.agent_shutdown(index);
        let message = format!("Agent {hostname} removed: Operator initiated 'Machine DOWN'");
        for key in self.tasks.keys_on(&agent_id) {
            if let Some(task) = self.tasks.remove(&key) {
                self.lose_task(task, task_status::Reason::AgentRemoved, &message);
            }
        }
        self.rescind_offers_on(&agent_id);
        self.rescind_inverse_offers(|o| o.agent_id == agent_id);
        self.notify_agent_lost(&agent_id);
        let agent = &mut self.agents[index];
        agent.executors.clear();
        agent.used = Resources::new();
    }

    /// STOP_MAINTENANCE; `Err` is the 400 body.
    pub fn stop_maintenance(&mut self, ids: &[v1::MachineId]) -> Result<(), String> {
        validate_machines(ids)?;
        for id in ids {
            let key = MachineKey::of(id);
            let down = self
                .maintenance
                .machines
                .get(&key)
                .is_some_and(|m| m.mode == Mode::Down);
            if !down {
                return Err(format!(
                    "Machine '{}' is not in DOWN mode and cannot be brought up",
                    machine_json(id)
                ));
            }
        }
        for id in ids {
            let key = MachineKey::of(id);
            self.maintenance.machines.remove(&key);
            for window in &mut self.maintenance.schedule.windows {
                window.machine_ids.retain(|m| MachineKey::of(m) != key);
            }
            self.maintenance
                .schedule
                .windows
                .retain(|w| !w.machine_ids.is_empty());
            // The agent re-registers with its ID (capture v), without tasks.
            let now = now_secs();
            for index in 0..self.agents.len() {
                if self.agents[index].state == AgentState::Down && self.machine_of(index) == key {
                    self.agents[index].state = AgentState::Registered;
                    self.agents[index].registered_time = now;
                }
            }
        }
        if self.leadership == super::Leadership::Leading {
            self.allocate();
        }
        Ok(())
    }
}
