//! The agent table: where each agent stands (active, unreachable, draining,
//! drained, deactivated, gone) and since when, and what follows from it.
//!
//! Rules (`docs/architecture.md#agents`; Mesos: `src/master/http.cpp`
//! `_drainAgent`, `_deactivateAgent`, `_reactivateAgent`,
//! `include/mesos/v1/master/master.proto` `GetAgents`):
//! - The master's `GET_AGENTS` is the truth about operator holds: it is
//!   asked for once subscribed and every [`AGENTS_POLL`], each time given
//!   up after [`AGENTS_TIMEOUT`]. A listed agent is draining or drained
//!   (`drain_info`), deactivated (`deactivated`) or active; a known agent no
//!   longer listed is unreachable (the master lists neither unreachable nor
//!   gone agents).
//! - Between polls the events tell: an offer shows an agent active (a
//!   master offers no deactivated agent); FAILURE{agent_id} makes it
//!   unreachable, or gone when it was draining (a drain with `mark_gone`
//!   ends with the agent removed); TASK_UNREACHABLE / TASK_LOST with
//!   REASON_AGENT_REMOVED makes it unreachable, REASON_AGENT_REREGISTERED
//!   active again, REASON_AGENT_DRAINING draining, and
//!   REASON_AGENT_REMOVED_BY_OPERATOR gone.
//! - Nothing new is placed on an agent that is not active: its offers are
//!   declined with a filter of [`HOLD_REFUSE_SECONDS`], so that the master
//!   stops sending them; once GET_AGENTS shows it active again, a REVIVE
//!   clears the filters.
//! - A task ended by the agent's drain (REASON_AGENT_DRAINING, with
//!   TASK_KILLED or, for `mark_gone`, TASK_GONE_BY_OPERATOR) is not its own
//!   failure: it is acknowledged once stored like any update and replaced
//!   at once, its instance's restart backoff untouched
//!   ([`crate::scheduler::rules::workload::counts_as_failure`]).
//!
//! The snapshot joins each agent with its machine's maintenance window
//! ([`MaintenanceWindow`]), as the maintenance rules last learnt it from
//! offers and inverse offers (`maintenance.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use super::schedule::Step;
use super::{Machine, Pending};
use crate::mesos::operator;
use crate::mesos::v1::{self, DrainState, TaskState, task_status};
use crate::scheduler::core::io::{MesosCall, OperatorAnswer, OperatorFailure, OperatorOp};
use crate::scheduler::ids::AgentId;
use crate::scheduler::rules::offers::Gone;
use crate::scheduler::snapshot::{AgentState, AgentStatus, EventKind, MaintenanceWindow};

/// How often the leader asks the master for GET_AGENTS.
pub(super) const AGENTS_POLL: Duration = Duration::from_secs(5);
/// How long one GET_AGENTS may take before it is given up.
pub(super) const AGENTS_TIMEOUT: Duration = Duration::from_secs(5);
/// The decline filter of an offer from an agent that takes no new task:
/// long, since a REVIVE clears it when the agent is active again.
pub(super) const HOLD_REFUSE_SECONDS: f64 = 3600.0;

/// One agent of the table.
#[derive(Debug, Clone)]
struct Entry {
    hostname: String,
    state: AgentState,
    since: f64,
    /// GET_AGENTS' `registered_time` and `reregistered_time`, seconds.
    registered: Option<f64>,
    reregistered: Option<f64>,
}

/// The leader's agent table (see the module doc).
#[derive(Debug, Default)]
pub(super) struct AgentTable {
    by_id: BTreeMap<AgentId, Entry>,
    /// When the next GET_AGENTS is due; `None`: at the next tick.
    next_poll: Option<Instant>,
    /// A GET_AGENTS is in flight.
    polling: bool,
    /// Agents whose offers were declined for a hold: a REVIVE is owed when
    /// one of them is active again.
    declined: BTreeSet<AgentId>,
    /// The last GET_AGENTS failure was logged (one event per outage).
    failing: bool,
    /// When the last GET_AGENTS answer arrived.
    listed_at: Option<Instant>,
}

impl AgentTable {
    /// True unless the table knows the agent as not active.
    pub(super) fn takes_new_tasks(&self, agent: &str) -> bool {
        self.by_id
            .get(agent)
            .is_none_or(|e| e.state.takes_new_tasks())
    }

    /// The hostname of `agent`, when the table lists it.
    pub(super) fn hostname(&self, agent: &str) -> Option<&str> {
        self.by_id.get(agent).map(|e| e.hostname.as_str())
    }

    /// The state of `agent`, when the table lists it.
    pub(super) fn state(&self, agent: &str) -> Option<AgentState> {
        self.by_id.get(agent).map(|e| e.state)
    }

    /// The state of `agent` and since when (unix seconds), when listed.
    pub(super) fn state_since(&self, agent: &str) -> Option<(AgentState, f64)> {
        self.by_id.get(agent).map(|e| (e.state, e.since))
    }

    /// When the last GET_AGENTS answer arrived (the states it set are the
    /// master's word from then).
    pub(super) fn listed_at(&self) -> Option<Instant> {
        self.listed_at
    }

    /// True when the table lists `agent`.
    pub(super) fn knows(&self, agent: &str) -> bool {
        self.by_id.contains_key(agent)
    }

    /// Ask GET_AGENTS at the next tick (a new subscription).
    pub(super) fn poll_soon(&mut self) {
        self.next_poll = None;
    }
}

impl Machine {
    /// Sets `agent`'s state (and hostname when given) at `now`; logs a
    /// change, and REVIVEs when an agent whose offers were declined for a
    /// hold is active again.
    fn set_agent(
        &mut self,
        agent: &AgentId,
        hostname: Option<&str>,
        state: AgentState,
        now: Instant,
    ) {
        let at = self.unix(now);
        let entry = self.agents.by_id.entry(agent.clone()).or_insert_with(|| {
            self.out.dirty = true;
            Entry {
                hostname: String::new(),
                state,
                since: at,
                registered: None,
                reregistered: None,
            }
        });
        if let Some(h) = hostname.filter(|h| !h.is_empty() && *h != entry.hostname) {
            entry.hostname = h.to_string();
            self.out.dirty = true;
        }
        if entry.state == state {
            return;
        }
        let before = entry.state;
        entry.state = state;
        entry.since = at;
        self.out.dirty = true;
        self.log(
            EventKind::Agent,
            format!(
                "agent {agent} is {} (was {})",
                state.as_str(),
                before.as_str()
            ),
            now,
        );
        if state.takes_new_tasks() && self.agents.declined.remove(agent) {
            self.revive_for_agent(now);
        }
    }

    /// A hold of the appliance's own on `agent` ended (a drain was
    /// cancelled): a REVIVE clears the decline filters of its offers, if
    /// any were declined and it takes new tasks now.
    pub(super) fn release_agent(&mut self, agent: &AgentId, now: Instant) {
        if self.takes_new_tasks(agent) && self.agents.declined.remove(agent) {
            self.revive_for_agent(now);
        }
    }

    /// Lists `agent` as active (with the hostname a task record of ours
    /// there gives) unless the table knows it already: an agent being
    /// drained is shown with its drain before GET_AGENTS or an offer named
    /// it (a new leader), and the next GET_AGENTS sets its state.
    pub(super) fn note_agent(&mut self, agent: &AgentId, now: Instant) {
        if self.agents.knows(agent) {
            return;
        }
        let hostname = self
            .tasks
            .records()
            .find(|r| r.agent_id == *agent)
            .map(|r| r.hostname.clone());
        self.set_agent(agent, hostname.as_deref(), AgentState::Active, now);
    }

    /// A REVIVE that clears the hold's decline filters.
    fn revive_for_agent(&mut self, now: Instant) {
        if !self.framework.is_subscribed() {
            return;
        }
        self.suppressed = false;
        self.revive.revived(now);
        self.call(MesosCall::Revive, Pending::Schedule(Step::Revive));
        self.needs_schedule = true;
    }

    /// Offers show their agents active (with their hostnames).
    pub(super) fn agents_from_offers(&mut self, offers: &[v1::Offer], now: Instant) {
        for offer in offers {
            let agent = AgentId::from(&offer.agent_id);
            let known = self.agents.by_id.get(&agent).map(|e| e.state);
            // A hold is lifted only by GET_AGENTS: an offer made before
            // the hold may still arrive after it.
            let state = match known {
                Some(
                    s @ (AgentState::Draining | AgentState::Drained | AgentState::Deactivated),
                ) => s,
                _ => AgentState::Active,
            };
            self.set_agent(&agent, Some(&offer.hostname), state, now);
        }
    }

    /// FAILURE{agent_id}: unreachable, or gone after a drain.
    pub(super) fn agent_failed(&mut self, agent: &AgentId, now: Instant) {
        let state = match self.agents.by_id.get(agent).map(|e| e.state) {
            Some(AgentState::Draining | AgentState::Drained | AgentState::Gone) => AgentState::Gone,
            _ => AgentState::Unreachable,
        };
        self.set_agent(agent, None, state, now);
    }

    /// What a status update says of its agent.
    pub(super) fn agents_from_update(&mut self, status: &v1::TaskStatus, now: Instant) {
        use task_status::Reason as R;
        let Some(agent) = status.agent_id.as_ref().map(AgentId::from) else {
            return;
        };
        let reason = status.reason.and_then(|r| R::try_from(r).ok());
        let known = self.agents.by_id.get(&agent).map(|e| e.state);
        let state = match (status.state(), reason) {
            (_, Some(R::AgentDraining)) if known != Some(AgentState::Drained) => {
                AgentState::Draining
            }
            (_, Some(R::AgentRemovedByOperator)) => AgentState::Gone,
            (TaskState::TaskUnreachable | TaskState::TaskLost, Some(R::AgentRemoved)) => {
                AgentState::Unreachable
            }
            (_, Some(R::AgentReregistered)) if known == Some(AgentState::Unreachable) => {
                AgentState::Active
            }
            _ => {
                if known.is_none() {
                    // Known from now on, so that the pages list it.
                    self.set_agent(&agent, None, AgentState::Active, now);
                }
                return;
            }
        };
        self.set_agent(&agent, None, state, now);
    }

    /// Asks for GET_AGENTS when due (from the tick).
    pub(super) fn poll_agents(&mut self, now: Instant) {
        if self.agents.polling
            || !self.framework.is_subscribed()
            || self.agents.next_poll.is_some_and(|t| now < t)
        {
            return;
        }
        self.agents.polling = true;
        self.agents.next_poll = Some(now + AGENTS_POLL);
        self.operator(
            OperatorOp::ListAgents {
                within: AGENTS_TIMEOUT,
            },
            Pending::Agents,
        );
    }

    /// The GET_AGENTS answer (see the module doc).
    pub(super) fn on_agents_listed(&mut self, answer: OperatorAnswer, now: Instant) {
        self.agents.polling = false;
        let listed = match answer {
            OperatorAnswer::Agents(Ok(listed)) => listed,
            OperatorAnswer::Agents(Err(e)) => {
                if !self.agents.failing {
                    self.agents.failing = true;
                    let why = match e {
                        OperatorFailure::Failed(e) => e.to_string(),
                        other => other.to_string(),
                    };
                    self.warn(format!(
                        "GET_AGENTS failed: {why}; agent states may be stale"
                    ));
                }
                return;
            }
            _ => return,
        };
        self.agents.failing = false;
        self.agents.listed_at = Some(now);
        let mut seen = BTreeSet::new();
        for agent in &listed {
            let Some(id) = agent.agent_info.id.as_ref().map(AgentId::from) else {
                continue;
            };
            let state = listed_state(agent);
            self.set_agent(&id, Some(&agent.agent_info.hostname), state, now);
            // The master's times (`Master::Http::getAgents`): unlike
            // `since`, they outlive this leader's subscription.
            let times = (
                seconds(agent.registered_time.as_ref()),
                seconds(agent.reregistered_time.as_ref()),
            );
            if let Some(e) = self.agents.by_id.get_mut(&id)
                && (e.registered, e.reregistered) != times
            {
                (e.registered, e.reregistered) = times;
                self.out.dirty = true;
            }
            seen.insert(id);
        }
        let missing: Vec<AgentId> = self
            .agents
            .by_id
            .iter()
            .filter(|(id, e)| !seen.contains(*id) && e.state != AgentState::Gone)
            .map(|(id, _)| id.clone())
            .collect();
        for id in missing {
            self.set_agent(&id, None, AgentState::Unreachable, now);
        }
        self.needs_schedule = true;
    }

    /// Declines the held offers of agents that take no new task, with a
    /// long filter (before each placement).
    pub(super) fn decline_held_agents(&mut self, now: Instant) {
        let held: Vec<(String, AgentId)> = self
            .offers
            .iter()
            .filter(|o| !self.takes_new_tasks(o.agent_id()))
            .map(|o| (o.id().to_string(), AgentId::from(o.agent_id())))
            .collect();
        if held.is_empty() {
            return;
        }
        let mut ids = Vec::with_capacity(held.len());
        for (offer_id, agent) in held {
            self.offers.remove(&offer_id, Gone::Declined, now);
            self.agents.declined.insert(agent);
            ids.push(offer_id);
        }
        self.decline_held(ids);
    }

    /// Declines offer `offer_id` of held agent `agent`, taken for a launch
    /// the hold came too late for (no longer among the held offers).
    pub(super) fn decline_for_hold(&mut self, offer_id: String, agent: AgentId) {
        self.agents.declined.insert(agent);
        self.decline_held(vec![offer_id]);
    }

    /// DECLINE of held agents' offers with the hold's long filter (a REVIVE
    /// clears it once an agent is active again).
    fn decline_held(&mut self, ids: Vec<String>) {
        self.count_offers("declined", ids.len());
        self.revive.filtered(Some(HOLD_REFUSE_SECONDS));
        self.call(
            MesosCall::Decline {
                offer_ids: ids,
                refuse_seconds: Some(HOLD_REFUSE_SECONDS),
            },
            Pending::Schedule(Step::Decline),
        );
        self.out.dirty = true;
    }

    /// The table for the snapshot, with this framework's live tasks on
    /// each agent and each drain's tasks as the last full snapshot listed
    /// them (`TaskTable::tasks_by_agent`, `drains::drain_tasks`).
    pub(super) fn agent_statuses(&self) -> Vec<AgentStatus> {
        self.agents
            .by_id
            .iter()
            .map(|(id, e)| AgentStatus {
                agent_id: id.clone(),
                hostname: e.hostname.clone(),
                state: e.state,
                since: e.since,
                registered_time: e.registered,
                reregistered_time: e.reregistered,
                maintenance: self
                    .maintenance_windows()
                    .get(id)
                    .map(|w| MaintenanceWindow {
                        start: w.start,
                        duration_seconds: w.duration,
                    }),
                tasks: self.shown_agent_tasks.get(id).cloned().unwrap_or_default(),
                drain: self.drain_status(id),
            })
            .collect()
    }
}

/// A `TimeInfo` in seconds since the UNIX epoch.
fn seconds(t: Option<&v1::TimeInfo>) -> Option<f64> {
    t.map(|t| t.nanoseconds as f64 / 1e9)
}

/// A GET_AGENTS entry's state: the drain first, then deactivation.
fn listed_state(agent: &operator::Agent) -> AgentState {
    match agent.drain_info.as_ref().map(|d| d.state()) {
        Some(DrainState::Draining) => AgentState::Draining,
        Some(DrainState::Drained) => AgentState::Drained,
        _ if agent.deactivated() || !agent.active => AgentState::Deactivated,
        _ => AgentState::Active,
    }
}
