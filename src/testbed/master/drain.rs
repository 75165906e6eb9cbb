//! Agents drained, deactivated and reactivated by the operator
//! (`DRAIN_AGENT`, `DEACTIVATE_AGENT`, `REACTIVATE_AGENT` of the v1
//! operator API) and the agents' `deactivated` and `drain_info` in
//! `GET_AGENTS`.
//!
//! Sources: `src/master/http.cpp` (`Master::Http::drainAgent`,
//! `_drainAgent`, `_deactivateAgent`, `_reactivateAgent`),
//! `src/master/master.cpp` (`Master::deactivate(Slave*)`,
//! `checkAndTransitionDrainingAgent`, `_reregisterSlave`),
//! `src/slave/slave.cpp` (`Slave::drain`: tasks killed with
//! REASON_AGENT_DRAINING, terminal updates rewritten to
//! TASK_GONE_BY_OPERATOR with `mark_gone`), `include/mesos/v1/master/master.proto`
//! (`DrainAgent`, `GetAgents`), and the real Mesos 1.12 capture of
//! DRAIN_AGENT / DEACTIVATE_AGENT / REACTIVATE_AGENT (capture u,
//! `docs/testbed.md#draining`). What the capture shows:
//! - DRAIN_AGENT answers 200 with an empty body; the agent is deactivated
//!   (its offers rescinded, none made while deactivated) and its drain is
//!   DRAINING; each task is killed by its executor: TASK_KILLING (only for
//!   TASK_KILLING_STATE frameworks), then TASK_KILLED, SOURCE_EXECUTOR,
//!   REASON_AGENT_DRAINING, "Command terminated with signal Terminated";
//!   with `mark_gone` the terminal update is TASK_GONE_BY_OPERATOR instead.
//! - Once the last terminal update is acknowledged the drain is DRAINED; with
//!   `mark_gone` the agent is marked gone instead (FAILURE{agent_id} to every
//!   framework, gone from GET_AGENTS), and its drain stays DRAINING, so
//!   REACTIVATE_AGENT is refused with "Agent is still in the DRAINING
//!   state" and DRAIN_AGENT with "Unknown agent".
//! - DRAIN_AGENT of a DRAINED agent is 200 and it is DRAINED again at once.
//! - DRAIN_AGENT and DEACTIVATE_AGENT of an unreachable agent are 200; the
//!   drain takes effect when the agent re-registers (its tasks come back
//!   RUNNING, then are killed as above). Of an unknown agent: 400 "Unknown
//!   agent".
//! - REACTIVATE_AGENT: 400 "Agent is not deactivated" for an active (or
//!   unknown) agent, 400 "Agent is still in the DRAINING state" while
//!   draining; otherwise 200, `drain_info` is cleared and offers resume.
//!   Of an unreachable agent the hold is cleared too, but the answer is 409
//!   "Agent removed while processing the call" (`_reactivateAgent`).
//!
//! `max_grace_period` caps the kill grace period of each task; the
//! simulated executors end their tasks at once, so it only shows in
//! `drain_info`.

use std::collections::HashMap;

use super::tasks::{Task, is_terminal};
use super::{AgentState, Master, now_nanos};
use crate::mesos::v1::master::response::GetAgents;
use crate::mesos::v1::master::response::get_agents;
use crate::mesos::v1::{self, DrainState, TaskState, task_status};

/// The 400 body for an agent the master does not know (or marked gone).
pub(crate) const UNKNOWN_AGENT: &str = "Unknown agent";
/// The 400 body of REACTIVATE_AGENT for an agent that is not deactivated.
pub(crate) const NOT_DEACTIVATED: &str = "Agent is not deactivated";
/// The 400 body of REACTIVATE_AGENT while the agent drains.
pub(crate) const STILL_DRAINING: &str = "Agent is still in the DRAINING state";
/// The 409 body of REACTIVATE_AGENT for an agent that is not registered
/// (unreachable): the hold is dropped all the same.
pub(crate) const REMOVED_WHILE_PROCESSING: &str = "Agent removed while processing the call";

/// Why the master refused an agent-hold call: its HTTP status and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldRefusal {
    /// 400 Bad Request with this text.
    BadRequest(String),
    /// 409 Conflict with this text.
    Conflict(&'static str),
}

impl From<String> for HoldRefusal {
    fn from(body: String) -> Self {
        HoldRefusal::BadRequest(body)
    }
}

impl From<&'static str> for HoldRefusal {
    fn from(body: &'static str) -> Self {
        HoldRefusal::BadRequest(body.to_string())
    }
}

/// The operator's hold on one agent: the master's `slaves.deactivated` and
/// `slaves.draining` (kept in its registry, so they outlive an
/// unreachable period).
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentHold {
    /// No offers are made for the agent's resources.
    pub deactivated: bool,
    /// The agent's drain, if one was asked for.
    pub drain: Option<v1::DrainInfo>,
    /// When the drain was sent to the agent (nanoseconds), as GET_AGENTS'
    /// `estimated_drain_start_time` shows it.
    pub drain_started: Option<i64>,
}

/// Operator holds by agent ID.
#[derive(Debug, Default)]
pub(crate) struct AgentHolds {
    by_agent: HashMap<String, AgentHold>,
}

impl AgentHolds {
    /// The hold on `agent_id`, if any.
    pub fn get(&self, agent_id: &str) -> Option<&AgentHold> {
        self.by_agent.get(agent_id)
    }

    /// True when the agent was deactivated (by a drain or DEACTIVATE_AGENT).
    pub fn deactivated(&self, agent_id: &str) -> bool {
        self.get(agent_id).is_some_and(|h| h.deactivated)
    }

    fn draining(&self, agent_id: &str) -> Option<&v1::DrainInfo> {
        self.get(agent_id)
            .and_then(|h| h.drain.as_ref())
            .filter(|d| d.state() == DrainState::Draining)
    }
}

impl Master {
    /// True when the agent may be sent DRAIN_AGENT or DEACTIVATE_AGENT: the
    /// master knows it as registered, recovering or unreachable.
    fn agent_known(&self, agent_id: &str) -> bool {
        self.agent_index(agent_id)
            .is_some_and(|i| self.agents[i].state != AgentState::Gone)
    }

    fn agent_registered(&self, agent_id: &str) -> bool {
        self.agent_index(agent_id)
            .is_some_and(|i| self.agents[i].state == AgentState::Registered)
    }

    /// DRAIN_AGENT (see the module doc); `Err` is the 400 body.
    pub fn drain_agent(
        &mut self,
        agent_id: &str,
        max_grace_period: Option<&v1::master::Duration>,
        mark_gone: bool,
    ) -> Result<(), String> {
        if !self.agent_known(agent_id) {
            return Err(UNKNOWN_AGENT.into());
        }
        // `Master::Http::drainAgent` (src/master/http.cpp): a registered
        // agent whose machine is in the maintenance schedule is refused.
        if let Some(machine) = self.scheduled_machine(agent_id) {
            return Err(format!(
                "Agent {agent_id} is part of a maintenance schedule under Machine {machine}"
            ));
        }
        // The agent's DrainConfig carries the grace period as a DurationInfo
        // (capture u: `{"nanoseconds":5000000000}`).
        let max_grace_period = max_grace_period.map(|d| v1::DurationInfo {
            nanoseconds: d
                .seconds
                .unwrap_or(0)
                .saturating_mul(1_000_000_000)
                .saturating_add(i64::from(d.nanos.unwrap_or(0))),
        });
        let info = v1::DrainInfo {
            state: DrainState::Draining as i32,
            config: v1::DrainConfig {
                max_grace_period,
                mark_gone: Some(mark_gone),
            },
        };
        let hold = self.holds.by_agent.entry(agent_id.to_string()).or_default();
        hold.drain = Some(info);
        hold.deactivated = true;
        if self.agent_registered(agent_id) {
            tracing::info!(%agent_id, mark_gone, "agent draining");
            self.rescind_offers_on(agent_id);
            self.start_drain(agent_id);
        }
        Ok(())
    }

    /// DEACTIVATE_AGENT: no offers for the agent until REACTIVATE_AGENT; its
    /// outstanding offers are rescinded, its tasks keep running.
    pub fn deactivate_agent(&mut self, agent_id: &str) -> Result<(), &'static str> {
        if !self.agent_known(agent_id) {
            return Err(UNKNOWN_AGENT);
        }
        self.holds
            .by_agent
            .entry(agent_id.to_string())
            .or_default()
            .deactivated = true;
        if self.agent_registered(agent_id) {
            self.rescind_offers_on(agent_id);
        }
        Ok(())
    }

    /// REACTIVATE_AGENT: the drain info is dropped and offers resume with the
    /// next allocation round. Of an agent that is not registered (an
    /// unreachable one) the hold is dropped too, but the answer is 409
    /// (`Master::Http::_reactivateAgent` in src/master/http.cpp erases
    /// `draining`/`deactivated` from the registry and memory, then finds no
    /// registered `Slave` and answers Conflict).
    pub fn reactivate_agent(&mut self, agent_id: &str) -> Result<(), HoldRefusal> {
        if !self.holds.deactivated(agent_id) {
            return Err(NOT_DEACTIVATED.into());
        }
        if self.holds.draining(agent_id).is_some() {
            return Err(STILL_DRAINING.into());
        }
        self.holds.by_agent.remove(agent_id);
        if !self.agent_registered(agent_id) {
            return Err(HoldRefusal::Conflict(REMOVED_WHILE_PROCESSING));
        }
        Ok(())
    }

    /// The agent (registered now) is told to drain: every live task there is
    /// killed, then the drain may be over at once (no tasks).
    fn start_drain(&mut self, agent_id: &str) {
        let Some(info) = self.holds.draining(agent_id).copied() else {
            return;
        };
        if let Some(hold) = self.holds.by_agent.get_mut(agent_id) {
            hold.drain_started = Some(now_nanos());
        }
        let mark_gone = info.config.mark_gone();
        for key in self.tasks.keys_on(agent_id) {
            let Some(task) = self.tasks.get(&key) else {
                continue;
            };
            if is_terminal(task.state) || task.pending.iter().any(|s| is_terminal(s.state())) {
                continue;
            }
            let task = task.clone();
            self.drain_kill(&task, mark_gone);
        }
        self.drain_progress(agent_id);
    }

    /// The executor kills `task` for the drain (`Slave::drain` kills each
    /// task; the agent adds the reason and, with `mark_gone`, rewrites the
    /// terminal state).
    fn drain_kill(&mut self, task: &Task, mark_gone: bool) {
        let framework_id = task.framework_id.clone();
        let task_id = task.task_id.value.clone();
        let killing_state = self.framework(&framework_id).is_some_and(|f| {
            f.has_capability(v1::framework_info::capability::Type::TaskKillingState)
        });
        let reason = Some(task_status::Reason::AgentDraining as i32);
        if killing_state {
            let mut killing = self.executor_status(task, TaskState::TaskKilling, None);
            killing.reason = reason;
            self.agent_update(&framework_id, &task_id, killing);
        }
        let state = if mark_gone {
            TaskState::TaskGoneByOperator
        } else {
            TaskState::TaskKilled
        };
        let mut end = self.executor_status(
            task,
            state,
            Some("Command terminated with signal Terminated"),
        );
        end.reason = reason;
        self.agent_update(&framework_id, &task_id, end);
    }

    /// `checkAndTransitionDrainingAgent`: a draining agent without tasks
    /// (every terminal update acknowledged) is DRAINED, or marked gone when
    /// the drain said `mark_gone`. Called after each acknowledgement.
    pub(crate) fn drain_progress(&mut self, agent_id: &str) {
        let Some(info) = self.holds.draining(agent_id) else {
            return;
        };
        if !self.agent_registered(agent_id) || !self.tasks.keys_on(agent_id).is_empty() {
            return;
        }
        if info.config.mark_gone() {
            tracing::info!(%agent_id, "drained agent marked gone");
            self.mark_agent_gone(agent_id);
            return;
        }
        tracing::info!(%agent_id, "agent drained");
        if let Some(drain) = self
            .holds
            .by_agent
            .get_mut(agent_id)
            .and_then(|h| h.drain.as_mut())
        {
            drain.state = DrainState::Drained as i32;
        }
    }

    /// An unreachable agent re-registered (`_reregisterSlave`): a drain asked
    /// for meanwhile starts now (capture u, run C).
    pub(crate) fn drain_on_reregistration(&mut self, agent_id: &str) {
        if self.holds.deactivated(agent_id) {
            self.rescind_offers_on(agent_id);
        }
        if self.holds.draining(agent_id).is_some() {
            self.start_drain(agent_id);
        }
    }

    /// `GET_AGENTS`: registered agents with `active`, `deactivated`,
    /// `drain_info` and `estimated_drain_start_time`; agents recovering after
    /// a master failover as `recovered_agents`. Unreachable and gone agents
    /// are not listed (capture u).
    pub fn get_agents(&self) -> GetAgents {
        use v1::agent_info::capability::Type as Cap;
        let capabilities = [
            Cap::MultiRole,
            Cap::HierarchicalRole,
            Cap::ReservationRefinement,
            Cap::ResourceProvider,
            Cap::ResizeVolume,
            Cap::AgentOperationFeedback,
            Cap::AgentDraining,
            Cap::TaskResourceLimits,
        ];
        let mut out = GetAgents::default();
        for agent in &self.agents {
            let info = v1::AgentInfo {
                hostname: agent.spec.hostname.clone(),
                resources: agent.spec.resources.to_protos(None),
                attributes: agent.spec.attributes.clone(),
                id: Some(v1::AgentId {
                    value: agent.id.clone(),
                }),
                port: Some(i32::from(agent.port)),
            };
            match agent.state {
                AgentState::Registered => {}
                AgentState::Recovering => {
                    out.recovered_agents.push(info);
                    continue;
                }
                // A machine brought DOWN removed its agent (capture v): it is
                // listed no more than an unreachable or gone one.
                AgentState::Unreachable { .. } | AgentState::Gone | AgentState::Down => continue,
            }
            let hold = self.holds.get(&agent.id);
            let deactivated = hold.is_some_and(|h| h.deactivated);
            out.agents.push(get_agents::Agent {
                agent_info: info,
                active: !deactivated,
                deactivated: Some(deactivated),
                version: self.cfg.version.clone(),
                pid: Some(format!("slave(1)@{}:{}", self.cfg.listen.ip(), agent.port)),
                registered_time: Some(v1::TimeInfo {
                    nanoseconds: (agent.registered_time * 1e9) as i64,
                }),
                reregistered_time: None,
                total_resources: agent.spec.resources.to_protos(None),
                allocated_resources: agent.used.to_protos(None),
                offered_resources: agent.offered.to_protos(None),
                capabilities: capabilities
                    .iter()
                    .map(|t| v1::agent_info::Capability {
                        r#type: Some(*t as i32),
                    })
                    .collect(),
                drain_info: hold.and_then(|h| h.drain),
                estimated_drain_start_time: hold
                    .filter(|h| h.drain.is_some())
                    .and_then(|h| h.drain_started)
                    .map(|nanoseconds| v1::TimeInfo { nanoseconds }),
            });
        }
        out
    }
}
