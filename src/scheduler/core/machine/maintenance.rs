//! Maintenance windows: offers that carry `unavailability`, and the answers
//! to INVERSE_OFFERS (`docs/maintenance.md` and
//! `include/mesos/v1/scheduler/scheduler.proto` in apache/mesos).
//!
//! The rules:
//! - the machine remembers each agent's window (from its offers and inverse
//!   offers; an offer without one clears it) so that the pages can show it;
//! - an offer is used only when its agent's window starts more than
//!   `cfg.maintenance_lead` from now, or is over. Services never finish, so
//!   "a task that can finish before the window" never applies: a task placed
//!   there would be killed by the window. Other offers are declined at
//!   once;
//! - an inverse offer is accepted when every service with live tasks on the
//!   agent keeps its floor without them: at least `instances −
//!   upgrade_max_unavailable` of its instances available (RUNNING, healthy,
//!   for `upgrade.min_healthy`, as a rollout judges them) on other agents —
//!   the same floor a rollout keeps. Otherwise it is declined, and the
//!   reason (which service, how many available, how many needed) goes to the
//!   events page and the audit log. A declined agent is asked again by the
//!   master after the decline's filter, and judged again then;
//! - accepted or declined, the agent's tasks *leave* by the evacuation rule
//!   shared with the SLA-aware drain (`evacuation.rs`): each instance there
//!   gets a replacement on another agent (the scheduling pass sees the
//!   instance as missing), and the old task is killed only once the
//!   replacement is available — start first, then kill, as a rollout does,
//!   so moving never takes an instance down. A decline only tells the
//!   master the agent cannot go down *yet*: a service whose instances all
//!   run there would otherwise keep declining until the window killed them
//!   all at once; once they have moved, the next answer accepts;
//! - RESCIND_INVERSE_OFFER and inverse offers for unknown agents or with
//!   nothing of ours on the agent never fail anything: the former only
//!   forget the offer, the latter are accepted (nothing to move).

use std::collections::{BTreeMap, HashMap};

use tokio::time::Instant;

use super::audit::Decision;
use super::evacuation::Leave;
use super::{Machine, Pending};
use crate::mesos::v1;
use crate::scheduler::core::io::MesosCall;
use crate::scheduler::ids::AgentId;
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::rules::rollout::Judge;
use crate::scheduler::snapshot::EventKind;
use crate::scheduler::spec::ServiceSpec;

/// Filter sent with an answer: the master asks again after this long, so a
/// declined agent is judged again (and an accepted one confirmed).
const ANSWER_REFUSE_SECONDS: f64 = 5.0;

/// A maintenance window of an agent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Start, seconds since the UNIX epoch.
    pub start: f64,
    /// Length in seconds; `None`: it never ends.
    pub duration: Option<f64>,
}

impl Window {
    /// The window of `unavailability`.
    pub fn of(unavailability: &v1::Unavailability) -> Window {
        Window {
            start: unavailability.start.nanoseconds as f64 / 1e9,
            duration: unavailability
                .duration
                .as_ref()
                .map(|d| d.nanoseconds.max(0) as f64 / 1e9),
        }
    }

    /// True once the window is over at `now` (seconds since the epoch).
    pub fn is_over(&self, now: f64) -> bool {
        self.duration.is_some_and(|d| now >= self.start + d)
    }

    /// True when no new task may go to the agent at `now`: the window
    /// starts within `lead` seconds, or has begun, and is not over.
    pub fn blocks(&self, now: f64, lead: f64) -> bool {
        !self.is_over(now) && self.start - now <= lead
    }
}

/// The machine's maintenance state.
#[derive(Debug, Default)]
pub(super) struct Maintenance {
    /// Each agent's known window.
    windows: BTreeMap<AgentId, Window>,
    /// Agents with an inverse offer (accepted or declined): their tasks
    /// leave.
    leaving: BTreeMap<AgentId, Window>,
    /// Outstanding inverse offers (ID → agent) not yet answered.
    inverse_offers: HashMap<String, AgentId>,
    /// The last answer per agent (accepted, why): the master asks again
    /// every few seconds, and only a changed answer is logged and audited.
    answers: HashMap<Option<AgentId>, (bool, String)>,
}

impl Maintenance {
    /// True when `task` runs on an agent being emptied for its window.
    pub(super) fn is_leaving(&self, task: &TaskRecord) -> bool {
        self.leaving.contains_key(&task.agent_id)
    }

    /// True while some agent is being emptied.
    pub(super) fn any_leaving(&self) -> bool {
        !self.leaving.is_empty()
    }

    /// How `task` leaves, when it runs on an agent being emptied for its
    /// window: no floor (the old task goes only once its replacement is
    /// available, so moving never lowers what is available), and the kill
    /// reasons.
    pub(super) fn leave(&self, task: &TaskRecord) -> Option<Leave> {
        self.is_leaving(task).then(|| Leave {
            floor: None,
            why: format!(
                "moved off agent {} ahead of its maintenance window",
                task.agent_id
            ),
            unwanted: format!(
                "scaled down while agent {} is emptied ahead of its maintenance window: \
                 its service no longer wants the instance",
                task.agent_id
            ),
        })
    }
}

/// Why `spec` would fall below its floor without its tasks on `agent`, or
/// `None` when it keeps it: at least `instances − max_unavailable` of its
/// instances available on other agents (see the module doc).
pub fn shortfall<'a>(
    spec: &ServiceSpec,
    tasks: impl IntoIterator<Item = &'a TaskRecord>,
    agent: &AgentId,
    max_unavailable: u32,
    now: f64,
) -> Option<String> {
    let judge = Judge::new(spec);
    let floor = spec.instances.saturating_sub(max_unavailable.max(1));
    let mut available: Vec<u32> = tasks
        .into_iter()
        .filter(|t| t.service == spec.name && t.agent_id != *agent && t.kill.is_none())
        .filter(|t| judge.available(t, now))
        .map(|t| t.instance)
        .collect();
    available.sort_unstable();
    available.dedup();
    let available = available.len() as u32;
    (available < floor).then(|| {
        format!(
            "service {} would keep {available} available instance(s) without agent {agent}, \
             fewer than the {floor} it must keep ({} instances, at most {} unavailable)",
            spec.name,
            spec.instances,
            max_unavailable.max(1)
        )
    })
}

impl Machine {
    /// Notes the window an offer carries (or its absence) and tells whether
    /// the offer may be used now.
    pub(super) fn offer_usable(&mut self, offer: &v1::Offer, now: Instant) -> bool {
        let agent: AgentId = (&offer.agent_id).into();
        let Some(unavailability) = &offer.unavailability else {
            // The schedule no longer names the agent's machine.
            self.maintenance.windows.remove(&agent);
            self.maintenance.leaving.remove(&agent);
            return true;
        };
        let window = Window::of(unavailability);
        self.note_window(&agent, window);
        let at = self.unix(now);
        !window.blocks(at, self.cfg.maintenance_lead.as_secs_f64())
    }

    fn note_window(&mut self, agent: &AgentId, window: Window) {
        if self.maintenance.windows.insert(agent.clone(), window) != Some(window) {
            self.out.dirty = true;
        }
        if let Some(leaving) = self.maintenance.leaving.get_mut(agent) {
            *leaving = window;
        }
    }

    /// Declines offers of agents whose window is near (see the module doc).
    pub(super) fn decline_blocked(&mut self, blocked: Vec<String>, now: Instant) {
        if blocked.is_empty() {
            return;
        }
        self.log(
            EventKind::Offers,
            format!(
                "declined {} offer(s) of agents whose maintenance window is near",
                blocked.len()
            ),
            now,
        );
        self.call(
            MesosCall::Decline {
                offer_ids: blocked,
                refuse_seconds: Some(self.cfg.decline_refuse_seconds),
            },
            Pending::Maintenance,
        );
    }

    /// INVERSE_OFFERS: each is answered (see the module doc).
    pub(super) fn on_inverse_offers(&mut self, offers: Vec<v1::InverseOffer>, now: Instant) {
        let at = self.unix(now);
        for offer in offers {
            let id = offer.id.value.clone();
            let Some(agent) = offer.agent_id.as_ref().map(AgentId::from) else {
                // Not for one agent (maintenance always names one): nothing
                // of ours can be moved for it.
                self.answer(id, None, true, "no agent named".into(), now);
                continue;
            };
            let window = Window::of(&offer.unavailability);
            self.note_window(&agent, window);
            self.maintenance
                .inverse_offers
                .insert(id.clone(), agent.clone());
            let affected: Vec<String> = {
                let mut names: Vec<String> = self
                    .tasks
                    .records()
                    .filter(|r| r.agent_id == agent && is_live(r))
                    .map(|r| r.service.clone())
                    .collect();
                names.sort();
                names.dedup();
                names
            };
            let max = self.cfg.upgrade_max_unavailable;
            let mut reasons = Vec::new();
            for name in &affected {
                let Some(spec) = self.services.spec(name) else {
                    continue;
                };
                let records = self
                    .tasks
                    .service(name)
                    .into_iter()
                    .flat_map(|t| t.records());
                if let Some(why) = shortfall(spec, records, &agent, max, at) {
                    reasons.push(why);
                }
            }
            let leaving = affected.len();
            if self
                .maintenance
                .leaving
                .insert(agent.clone(), window)
                .is_none()
                && leaving > 0
            {
                self.needs_schedule = true;
            }
            if reasons.is_empty() {
                let why = format!(
                    "{leaving} service(s) on agent {agent} keep their floor; moving their tasks off \
                     before the window"
                );
                self.answer(id, Some(agent), true, why, now);
            } else {
                let why = format!(
                    "{}; moving the tasks off first (each replaced on another agent before it is \
                     killed), then answering again",
                    reasons.join("; ")
                );
                self.answer(id, Some(agent), false, why, now);
            }
        }
        self.out.dirty = true;
    }

    /// Sends the answer; logs it and records it in the audit log when it
    /// differs from the agent's last one.
    fn answer(
        &mut self,
        id: String,
        agent: Option<AgentId>,
        accept: bool,
        why: String,
        now: Instant,
    ) {
        self.maintenance.inverse_offers.remove(&id);
        self.call(
            MesosCall::AnswerInverseOffers {
                inverse_offer_ids: vec![id.clone()],
                accept,
                refuse_seconds: ANSWER_REFUSE_SECONDS,
            },
            Pending::Maintenance,
        );
        let answer = (accept, why.clone());
        if self.maintenance.answers.get(&agent) == Some(&answer) {
            return;
        }
        self.maintenance.answers.insert(agent.clone(), answer);
        let verb = if accept { "accepted" } else { "declined" };
        let agent_text = agent.as_ref().map_or("-".to_string(), |a| a.to_string());
        self.log(
            EventKind::Agent,
            format!("inverse offer {id} for agent {agent_text} {verb}: {why}"),
            now,
        );
        self.audit(
            Decision {
                method: "maintenance",
                action: if accept {
                    "maintenance.accept_inverse_offer"
                } else {
                    "maintenance.decline_inverse_offer"
                },
                params: serde_json::json!({"inverse_offer_id": id, "agent_id": agent_text}),
                reason: why,
                status: 202,
                outcome: format!("inverse offer {verb}"),
            },
            now,
        );
    }

    /// RESCIND_INVERSE_OFFER: the offer is forgotten (an unknown one too).
    pub(super) fn on_rescind_inverse_offer(&mut self, id: &str, now: Instant) {
        if self.maintenance.inverse_offers.remove(id).is_none() {
            tracing::debug!(inverse_offer_id = %id, "rescind of an inverse offer not outstanding");
        }
        self.log(
            EventKind::Agent,
            format!("inverse offer {id} rescinded"),
            now,
        );
    }

    /// The maintenance windows the machine knows, by agent (for the pages:
    /// the agents table joins them).
    pub fn maintenance_windows(&self) -> &BTreeMap<AgentId, Window> {
        &self.maintenance.windows
    }

    /// Forgets windows that are over.
    pub(super) fn maintenance_housekeeping(&mut self, now: Instant) {
        let at = self.unix(now);
        let before = self.maintenance.windows.len() + self.maintenance.leaving.len();
        self.maintenance.windows.retain(|_, w| !w.is_over(at));
        self.maintenance.leaving.retain(|_, w| !w.is_over(at));
        let windows = &self.maintenance.windows;
        self.maintenance
            .answers
            .retain(|agent, _| agent.as_ref().is_some_and(|a| windows.contains_key(a)));
        if before != self.maintenance.windows.len() + self.maintenance.leaving.len() {
            self.out.dirty = true;
        }
    }
}
