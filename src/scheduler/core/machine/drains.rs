//! The machine's side of the appliance's SLA-aware drain
//! (`docs/draining.md`; shapes in [`crate::scheduler::drains`]):
//! - the drains are read at the term's start (`drains/<agent_id>`), and
//!   nothing is scheduled before they are known, so a new leader never
//!   places a task on an agent its predecessor was draining;
//! - a drain that is `running` or `done` holds its agent: its offers are
//!   declined with the hold's long filter (`agents.rs`), and an ACCEPT
//!   whose records were written before the drain began is not sent;
//! - its tasks leave by the evacuation rule (`evacuation.rs`) with the
//!   drain's floor: replacement first, kill once the replacement is
//!   available and the service keeps `min_healthy`;
//! - once no task of ours is left on the agent (every record there is
//!   terminal) the drain is `done` (stored, audited); with `then` set, the
//!   master's `DRAIN_AGENT` or `DEACTIVATE_AGENT` follows once
//!   (`include/mesos/v1/master/master.proto`), its outcome stored so that a
//!   new leader does not call it again;
//! - a cancelled drain releases the agent: a REVIVE clears the decline
//!   filters of its offers; when its `then` call was made (answered, or
//!   failed: a timed-out call may have been done), the master's
//!   `REACTIVATE_AGENT` follows once, its outcome stored too
//!   (`Master::Http::_reactivateAgent` in `src/master/http.cpp`: it
//!   reactivates a deactivated or DRAINED agent, and refuses one still
//!   DRAINING — other frameworks' tasks there; the refusal is stored and
//!   the call is sent again once GET_AGENTS shows the agent DRAINED, at
//!   most [`REACTIVATE_TRIES`] calls within [`REACTIVATE_RETRY_FOR`] of
//!   the cancel, at most one per GET_AGENTS answer; past them the stored
//!   error says what the operator does, `docs/draining.md`).
//!
//! Every write is a compare-and-set on the version the leader read or
//! wrote last (fenced like every leader write); a conflict reads the drains
//! again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::audit::Decision;
use super::evacuation::{self, Leave};
use super::{Machine, Pending};
use crate::coordination::{CoordinationError, Expect, RecordList, Written};
use crate::scheduler::commands::CommandError;
use crate::scheduler::core::io::{
    Answer, OperatorAnswer, OperatorFailure, OperatorOp, ReplyId, StoreOp, StoreResult,
};
use crate::scheduler::drains::{
    DrainEnd, DrainProgress, DrainRecord, DrainState, DrainStatus, DrainTask, MinHealthy,
    ThenAction,
};
use crate::scheduler::ids::AgentId;
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::snapshot::{AgentState, EventKind};
use crate::scheduler::spec::ServiceSpec;

/// How long the master may take to answer a `then` call.
pub(super) const THEN_TIMEOUT: Duration = Duration::from_secs(10);
/// The most `REACTIVATE_AGENT` calls of one cancelled drain.
pub(super) const REACTIVATE_TRIES: u32 = 5;
/// How long after a cancel a `REACTIVATE_AGENT` refused while the agent
/// was DRAINING is sent again: the master's drain ends once every task
/// there ended (other frameworks' kill grace periods).
pub(super) const REACTIVATE_RETRY_FOR: Duration = Duration::from_secs(3600);

/// The drains the leader knows (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Drains {
    /// The stored drains were read.
    loaded: bool,
    /// Each agent's drain with its stored version.
    by_agent: BTreeMap<AgentId, (DrainRecord, i32)>,
    /// Agents whose drain record is being written.
    writing: BTreeSet<AgentId>,
    /// Agents whose `then` call is in flight.
    calling: BTreeSet<AgentId>,
    /// When a `REACTIVATE_AGENT` was refused, as an instant and in unix
    /// seconds: what the agent table learnt since is the master's word
    /// after the refusal.
    reactivate_after: BTreeMap<AgentId, (Instant, f64)>,
}

/// What a drain request in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    Load,
    /// A write of `record`; `reply` when a command asked for it.
    Put {
        reply: Option<ReplyId>,
        record: Box<DrainRecord>,
    },
    /// The `then` call of the agent's drain.
    Then {
        agent: AgentId,
    },
    /// The `REACTIVATE_AGENT` of the agent whose drain was cancelled after
    /// its `then` call.
    Reactivate {
        agent: AgentId,
    },
}

/// The kill reason of a task moved off `agent` by its drain (how the
/// progress knows a task as moved).
fn moved_reason(agent: &AgentId) -> String {
    format!("moved off agent {agent} by its drain")
}

/// The kill reason of a task on `agent`, under its drain, whose service no
/// longer wants its instance (`evacuation`'s unwanted leaver).
fn unwanted_reason(agent: &AgentId) -> String {
    format!("scaled down while agent {agent} is drained: its service no longer wants the instance")
}

impl Drains {
    /// True once the stored drains were read.
    pub(super) fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// True while a drain holds `agent` (running or done).
    pub(super) fn holds(&self, agent: &str) -> bool {
        self.by_agent
            .get(agent)
            .is_some_and(|(d, _)| d.state.holds())
    }

    /// True while some drain holds an agent.
    pub(super) fn any_holding(&self) -> bool {
        self.by_agent.values().any(|(d, _)| d.state.holds())
    }

    /// True while a drain cancelled after its `then` call has not had its
    /// `REACTIVATE_AGENT` answered.
    fn any_to_reactivate(&self) -> bool {
        self.by_agent
            .values()
            .any(|(d, _)| Self::to_reactivate(d) || Self::retrying(d))
    }

    /// True for a cancelled drain whose `REACTIVATE_AGENT` was refused
    /// while the master's agent was DRAINING and is to be sent again.
    fn retrying(d: &DrainRecord) -> bool {
        d.state == DrainState::Cancelled && !d.reactivated && d.reactivate_retry
    }

    /// True for a drain cancelled after its `then` call (answered, or
    /// failed: a call that timed out may have been done) whose
    /// `REACTIVATE_AGENT` was not answered yet.
    fn to_reactivate(d: &DrainRecord) -> bool {
        d.state == DrainState::Cancelled
            && d.then != ThenAction::None
            && (d.then_called || d.then_error.is_some())
            && !d.reactivated
            && d.reactivate_error.is_none()
    }

    /// True while some drain is moving tasks (not only holding an agent).
    pub(super) fn any_running(&self) -> bool {
        self.by_agent
            .values()
            .any(|(d, _)| d.state == DrainState::Running)
    }

    /// How `task` of `spec` leaves, when a drain holds its agent: with the
    /// drain's floor for the service.
    pub(super) fn leave(&self, spec: &ServiceSpec, task: &TaskRecord) -> Option<Leave> {
        let (drain, _) = self.by_agent.get(&task.agent_id)?;
        drain.state.holds().then(|| Leave {
            floor: Some(drain.min_healthy.floor(spec.instances)),
            why: moved_reason(&task.agent_id),
            unwanted: unwanted_reason(&task.agent_id),
        })
    }

    /// The drain of `agent`, if any.
    pub(super) fn get(&self, agent: &str) -> Option<&DrainRecord> {
        self.by_agent.get(agent).map(|(d, _)| d)
    }
}

impl Machine {
    /// Reads the stored drains (at the term's start).
    pub(super) fn load_drains(&mut self) {
        self.store(StoreOp::ListDrains, Pending::Drain(Step::Load));
    }

    /// True unless `agent` takes no new task: held by the master's state
    /// (`agents.rs`) or by a drain.
    pub(super) fn takes_new_tasks(&self, agent: &str) -> bool {
        self.agents.takes_new_tasks(agent) && !self.drains.holds(agent)
    }

    /// `StartDrain` (see [`crate::scheduler::Request::StartDrain`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_drain(
        &mut self,
        reply: ReplyId,
        agent: AgentId,
        min_healthy: MinHealthy,
        reason: Option<String>,
        by: String,
        then: ThenAction,
        now: Instant,
    ) {
        let refuse = |m: &mut Machine, e: CommandError| m.reply(reply, Answer::Drain(Err(e)));
        if !self.drains.loaded || !self.tasks.is_loaded() {
            let why = "the drains and task records are still being read from ZooKeeper; \
                       try again in a moment";
            return refuse(self, CommandError::Conflict(why.into()));
        }
        let known = self.agents.knows(&agent) || self.tasks.count_on(&agent).all > 0;
        if !known {
            return refuse(self, CommandError::NotFound(format!("agent {agent}")));
        }
        if self.drains.writing.contains(&agent) {
            let why = format!("a change of agent {agent}'s drain is being stored");
            return refuse(self, CommandError::Conflict(why));
        }
        let expect = match self.drains.by_agent.get(&agent) {
            Some((d, _)) if d.state.holds() => {
                let why = format!(
                    "agent {agent} is already being drained (state {}, started by {}); \
                     cancel that drain first",
                    d.state.as_str(),
                    d.by
                );
                return refuse(self, CommandError::Conflict(why));
            }
            Some((_, version)) => Expect::Version(*version),
            None => Expect::Absent,
        };
        let record = DrainRecord {
            agent_id: agent.clone(),
            min_healthy,
            reason,
            by,
            started_at: self.unix(now),
            then,
            state: DrainState::Running,
            finished_at: None,
            cancelled_by: None,
            then_called: false,
            then_error: None,
            reactivated: false,
            reactivate_error: None,
            reactivate_tries: 0,
            reactivate_retry: false,
            ended: None,
        };
        self.put_drain(Some(reply), record, expect);
    }

    /// `CancelDrain` (see [`crate::scheduler::Request::CancelDrain`]).
    pub(super) fn cancel_drain(
        &mut self,
        reply: ReplyId,
        agent: AgentId,
        by: String,
        now: Instant,
    ) {
        if self.drains.writing.contains(&agent) {
            let why = format!("a change of agent {agent}'s drain is being stored");
            self.reply(reply, Answer::Drain(Err(CommandError::Conflict(why))));
            return;
        }
        let Some((drain, version)) = self
            .drains
            .by_agent
            .get(&agent)
            .filter(|(d, _)| d.state.holds())
        else {
            let error = CommandError::NotFound(format!("a running or done drain of agent {agent}"));
            self.reply(reply, Answer::Drain(Err(error)));
            return;
        };
        // A running drain ends here: its tasks as they stand now are kept
        // (a done one keeps those of its end).
        let ended = drain
            .ended
            .clone()
            .unwrap_or_else(|| DrainEnd::new(self.drain_tasks_of(&agent, drain, now)));
        let record = DrainRecord {
            state: DrainState::Cancelled,
            finished_at: Some(self.unix(now)),
            cancelled_by: Some(by),
            ended: Some(ended),
            ..drain.clone()
        };
        let expect = Expect::Version(*version);
        self.put_drain(Some(reply), record, expect);
    }

    fn put_drain(&mut self, reply: Option<ReplyId>, record: DrainRecord, expect: Expect) {
        self.drains.writing.insert(record.agent_id.clone());
        let record = Box::new(record);
        self.store(
            StoreOp::PutDrain(record.clone(), expect),
            Pending::Drain(Step::Put { reply, record }),
        );
    }

    pub(super) fn on_drain_stored(&mut self, step: Step, result: StoreResult, now: Instant) {
        match (step, result) {
            (Step::Load, StoreResult::Drains(Ok(list))) => self.drains_loaded(list, now),
            (Step::Load, StoreResult::Drains(Err(e))) => {
                self.end_term(crate::scheduler::core::TermOutcome::StartupFailed(
                    crate::scheduler::core::StartupError::Read {
                        what: "drains",
                        source: e,
                    },
                ));
            }
            (Step::Put { reply, record }, StoreResult::Written(result)) => {
                self.drain_written(reply, *record, result, now)
            }
            (step, _) => tracing::warn!(?step, "unexpected answer to a drain request"),
        }
    }

    fn drains_loaded(&mut self, list: RecordList<DrainRecord>, now: Instant) {
        for bad in &list.malformed {
            self.warn(format!(
                "drain record {} is malformed and ignored: {}",
                bad.key, bad.reason
            ));
        }
        let first = !self.drains.loaded;
        self.drains.loaded = true;
        self.drains.by_agent = list
            .records
            .into_iter()
            .map(|(_, v)| (v.value.agent_id.clone(), (v.value, v.version)))
            .collect();
        if first {
            let running: Vec<String> = self
                .drains
                .by_agent
                .values()
                .filter(|(d, _)| d.state.holds())
                .map(|(d, _)| format!("{} ({})", d.agent_id, d.state.as_str()))
                .collect();
            if !running.is_empty() {
                self.log(
                    EventKind::Agent,
                    format!("drains continued: {}", running.join(", ")),
                    now,
                );
            }
        }
        self.needs_schedule = true;
        self.out.dirty = true;
    }

    fn drain_written(
        &mut self,
        reply: Option<ReplyId>,
        record: DrainRecord,
        result: Result<Written, CoordinationError>,
        now: Instant,
    ) {
        let agent = record.agent_id.clone();
        self.drains.writing.remove(&agent);
        let version = match result {
            Ok(Written::Version(v)) => v,
            Ok(other) => {
                tracing::warn!(?other, "unexpected answer to a drain write");
                0
            }
            Err(e) => {
                if matches!(e, CoordinationError::VersionConflict { .. }) {
                    // Someone else wrote it: read them all again.
                    self.load_drains();
                }
                let message = format!("drain of agent {agent} not stored: {e}");
                match reply {
                    Some(reply) => self.reply(reply, Answer::Drain(Err(e.into()))),
                    None => self.warn(message),
                }
                return;
            }
        };
        let before = self
            .drains
            .by_agent
            .insert(agent.clone(), (record.clone(), version))
            .map(|(d, _)| d.state);
        self.out.dirty = true;
        self.needs_schedule = true;
        if before != Some(record.state) {
            let message = match record.state {
                DrainState::Running => format!(
                    "drain of agent {agent} started by {} (min_healthy {}, then {}){}",
                    record.by,
                    record.min_healthy,
                    record.then.as_str(),
                    record
                        .reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                DrainState::Done => format!(
                    "drain of agent {agent} done: no task of ours is left there; the agent \
                     stays held until the drain is cancelled"
                ),
                DrainState::Cancelled => format!(
                    "drain of agent {agent} cancelled by {}",
                    record.cancelled_by.as_deref().unwrap_or("-")
                ),
            };
            self.log(EventKind::Agent, message, now);
        }
        if record.state.holds() {
            self.note_agent(&agent, now);
        }
        if record.state == DrainState::Cancelled {
            self.release_agent(&agent, now);
        }
        if let Some(reply) = reply {
            self.reply(reply, Answer::Drain(Ok(record)));
        }
    }

    /// From the tick: a running drain with nothing of ours left becomes
    /// done; a done drain's `then` call is made once.
    pub(super) fn drains_tick(&mut self, now: Instant) {
        if !self.drains.loaded
            || !self.tasks.is_loaded()
            || !(self.drains.any_holding() || self.drains.any_to_reactivate())
        {
            return;
        }
        // Progress changes with time alone (a replacement becomes
        // available): the snapshot is refreshed while a drain runs.
        let running = self
            .drains
            .by_agent
            .values()
            .any(|(d, _)| d.state == DrainState::Running);
        if running {
            self.out.dirty = true;
        }
        let held: Vec<AgentId> = self
            .drains
            .by_agent
            .iter()
            .filter(|(a, (d, _))| d.state.holds() && !self.agents.knows(a))
            .map(|(a, _)| a.clone())
            .collect();
        for agent in held {
            self.note_agent(&agent, now);
        }
        let at = self.unix(now);
        let mut writes = Vec::new();
        let mut calls = Vec::new();
        let mut settled = Vec::new();
        for (agent, (drain, version)) in &self.drains.by_agent {
            if self.drains.writing.contains(agent) {
                continue;
            }
            match drain.state {
                // No task of ours left on the agent (the table counts
                // them by agent).
                DrainState::Running if self.tasks.count_on(agent).unfinished == 0 => {
                    let done = DrainRecord {
                        state: DrainState::Done,
                        finished_at: Some(at),
                        ended: Some(DrainEnd::new(self.drain_tasks_of(agent, drain, now))),
                        ..drain.clone()
                    };
                    writes.push((done, *version));
                }
                DrainState::Done
                    if drain.then != ThenAction::None
                        && !drain.then_called
                        && drain.then_error.is_none()
                        && !self.drains.calling.contains(agent)
                        && self.framework.is_subscribed() =>
                {
                    calls.push((agent.clone(), Some(drain.then)));
                }
                // Cancelled after its `then` call: the master takes the
                // agent back into its offers.
                DrainState::Cancelled
                    if Drains::retrying(drain)
                        && !self.drains.calling.contains(agent)
                        && self.retry_settled(drain, at).is_some() =>
                {
                    let why = self.retry_settled(drain, at).unwrap_or_default();
                    settled.push((drain.clone(), *version, why));
                }
                DrainState::Cancelled
                    if (Drains::to_reactivate(drain) || self.reactivate_again(agent, drain))
                        && !self.drains.calling.contains(agent)
                        && self.framework.is_subscribed() =>
                {
                    calls.push((agent.clone(), None));
                }
                _ => {}
            }
        }
        for (drain, version, why) in settled {
            let agent = drain.agent_id.clone();
            let record = DrainRecord {
                reactivate_retry: false,
                reactivate_error: Some(why.clone()),
                ..drain
            };
            self.log(
                EventKind::Agent,
                format!("REACTIVATE_AGENT of agent {agent} not sent again: {why}"),
                now,
            );
            self.put_drain(None, record, Expect::Version(version));
        }
        for (done, version) in writes {
            self.audit(
                Decision {
                    method: "drain",
                    action: "drain.done",
                    params: serde_json::json!({"agent_id": done.agent_id, "by": done.by}),
                    reason: format!(
                        "every task of ours moved off agent {} keeping min_healthy {}",
                        done.agent_id, done.min_healthy
                    ),
                    status: 200,
                    outcome: "drain done; the agent stays held until cancelled".into(),
                },
                now,
            );
            self.put_drain(None, done, Expect::Version(version));
        }
        for (agent, then) in calls {
            self.drains.calling.insert(agent.clone());
            let (op, step) = match then {
                Some(ThenAction::DrainAgent) => (
                    OperatorOp::DrainAgent {
                        agent: agent.clone(),
                        within: THEN_TIMEOUT,
                    },
                    Step::Then { agent },
                ),
                Some(_) => (
                    OperatorOp::DeactivateAgent {
                        agent: agent.clone(),
                        within: THEN_TIMEOUT,
                    },
                    Step::Then { agent },
                ),
                None => (
                    OperatorOp::ReactivateAgent {
                        agent: agent.clone(),
                        within: THEN_TIMEOUT,
                    },
                    Step::Reactivate { agent },
                ),
            };
            self.operator(op, Pending::Drain(step));
        }
    }

    /// The answer to a `then` call: stored in the drain (a failure too:
    /// it is not retried on its own; the operator sees it and acts).
    /// A `then` call answered after the drain was cancelled is stored
    /// all the same: the cancel's `REACTIVATE_AGENT` follows it.
    pub(super) fn on_drain_operator(&mut self, step: Step, answer: OperatorAnswer, now: Instant) {
        let OperatorAnswer::AgentCalled(result) = answer else {
            return;
        };
        let agent = match step {
            Step::Then { agent } => agent,
            Step::Reactivate { agent } => return self.drain_reactivated(agent, result, now),
            Step::Load | Step::Put { .. } => return,
        };
        self.drains.calling.remove(&agent);
        let Some((drain, version)) = self.drains.by_agent.get(&agent).cloned() else {
            return;
        };
        if drain.state == DrainState::Running || self.drains.writing.contains(&agent) {
            return;
        }
        let call = match drain.then {
            ThenAction::DrainAgent => "DRAIN_AGENT",
            _ => "DEACTIVATE_AGENT",
        };
        let (record, outcome) = match result {
            Ok(()) => (
                DrainRecord {
                    then_called: true,
                    ..drain
                },
                format!("{call} of agent {agent} accepted by the master"),
            ),
            Err(e) => (
                DrainRecord {
                    then_error: Some(e.to_string()),
                    ..drain
                },
                format!("{call} of agent {agent} failed: {e}"),
            ),
        };
        self.log(EventKind::Agent, outcome.clone(), now);
        self.audit(
            Decision {
                method: "drain",
                action: "drain.then",
                params: serde_json::json!({"agent_id": agent, "then": record.then}),
                reason: format!("the drain of agent {agent} is done"),
                status: if record.then_called { 200 } else { 502 },
                outcome,
            },
            now,
        );
        self.put_drain(None, record, Expect::Version(version));
    }

    /// True when the refused `REACTIVATE_AGENT` of `drain` (cancelled) is
    /// due again: a GET_AGENTS answered after the refusal shows the agent
    /// DRAINED (so at most one call per poll, `agents::AGENTS_POLL`). A new
    /// leader, which knows no refusal of its own, asks on its own first
    /// DRAINED listing.
    fn reactivate_again(&self, agent: &AgentId, drain: &DrainRecord) -> bool {
        let refused = self.drains.reactivate_after.get(agent).map(|(at, _)| *at);
        let listed_since = match (self.agents.listed_at(), refused) {
            (Some(listed), Some(refused)) => listed > refused,
            (listed, None) => listed.is_some(),
            (None, Some(_)) => false,
        };
        Drains::retrying(drain)
            && listed_since
            && self.agents.state(agent) == Some(AgentState::Drained)
    }

    /// Why a retried `REACTIVATE_AGENT` of `drain` is not sent again, at
    /// unix time `at`: the retry time ran out, or the master lists the
    /// agent active since the refusal (someone reactivated it; an older
    /// "active" of the table is from before the master's drain began);
    /// `None` while it waits.
    fn retry_settled(&self, drain: &DrainRecord, at: f64) -> Option<String> {
        let last = drain.reactivate_error.as_deref().unwrap_or("refused");
        let refused_at = self.drains.reactivate_after.get(&drain.agent_id);
        let active_since_refusal = match (self.agents.state_since(&drain.agent_id), refused_at) {
            (Some((AgentState::Active, since)), Some((_, refused))) => since > *refused,
            _ => false,
        };
        if active_since_refusal {
            return Some(format!(
                "{last}; since then GET_AGENTS lists the agent active (reactivated at the \
                 master): nothing is left to do"
            ));
        }
        let cancelled = drain.finished_at.unwrap_or(at);
        (at - cancelled >= REACTIVATE_RETRY_FOR.as_secs_f64()).then(|| {
            format!(
                "{last}; not sent again: the agent was not DRAINED within {} s of the cancel. \
                 Once GET_AGENTS shows its drain_info.state DRAINED, call REACTIVATE_AGENT at \
                 the master",
                REACTIVATE_RETRY_FOR.as_secs()
            )
        })
    }

    /// The answer to the `REACTIVATE_AGENT` of a cancelled drain: stored in
    /// the drain. A refusal while the master's agent is still DRAINING is
    /// sent again once GET_AGENTS shows it DRAINED (see the module doc);
    /// other failures are not retried on their own.
    fn drain_reactivated(
        &mut self,
        agent: AgentId,
        result: Result<(), OperatorFailure>,
        now: Instant,
    ) {
        self.drains.calling.remove(&agent);
        let Some((drain, version)) = self.drains.by_agent.get(&agent).cloned() else {
            return;
        };
        if drain.state != DrainState::Cancelled || self.drains.writing.contains(&agent) {
            return;
        }
        let tries = drain.reactivate_tries.saturating_add(1);
        let at = self.unix(now);
        let (record, outcome) = match result {
            Ok(()) => {
                self.drains.reactivate_after.remove(&agent);
                (
                    DrainRecord {
                        reactivated: true,
                        reactivate_tries: tries,
                        reactivate_retry: false,
                        reactivate_error: None,
                        ..drain
                    },
                    format!("REACTIVATE_AGENT of agent {agent} accepted by the master"),
                )
            }
            Err(e) => {
                // Refused while other frameworks' tasks drain there
                // (`_reactivateAgent`): sent again once it is DRAINED,
                // within the bounds; past them, the operator's part.
                let still_draining = drain.then == ThenAction::DrainAgent
                    && matches!(&e, OperatorFailure::Failed(f) if f.is_still_draining());
                let within =
                    at - drain.finished_at.unwrap_or(at) < REACTIVATE_RETRY_FOR.as_secs_f64();
                let retry = still_draining && tries < REACTIVATE_TRIES && within;
                if retry {
                    self.drains
                        .reactivate_after
                        .insert(agent.clone(), (now, at));
                }
                let error = match drain.then {
                    ThenAction::DrainAgent if retry => format!(
                        "{e}; the master's drain of the agent goes on (other frameworks' \
                         tasks there are ending): REACTIVATE_AGENT is sent again once \
                         GET_AGENTS shows it DRAINED (call {tries} of at most \
                         {REACTIVATE_TRIES}, within {} s of the cancel)",
                        REACTIVATE_RETRY_FOR.as_secs()
                    ),
                    ThenAction::DrainAgent => format!(
                        "{e}; not sent again (call {tries} of at most {REACTIVATE_TRIES}): \
                         the master keeps the agent drained: once GET_AGENTS shows it \
                         DRAINED, call REACTIVATE_AGENT at the master"
                    ),
                    _ => format!(
                        "{e}; the master keeps the agent deactivated until \
                         REACTIVATE_AGENT is called at the master"
                    ),
                };
                (
                    DrainRecord {
                        reactivate_error: Some(error),
                        reactivate_tries: tries,
                        reactivate_retry: retry,
                        ..drain
                    },
                    format!(
                        "REACTIVATE_AGENT of agent {agent} failed: {e}; the master may still \
                         hold the agent{} (docs/draining.md, \"The API\")",
                        if retry {
                            "; sent again once GET_AGENTS shows it DRAINED"
                        } else {
                            ""
                        }
                    ),
                )
            }
        };
        self.log(EventKind::Agent, outcome.clone(), now);
        self.audit(
            Decision {
                method: "drain",
                action: "drain.reactivate",
                params: serde_json::json!({"agent_id": agent, "then": record.then}),
                reason: format!(
                    "the drain of agent {agent} was cancelled after its {} call",
                    record.then.as_str()
                ),
                status: if record.reactivated { 200 } else { 502 },
                outcome,
            },
            now,
        );
        self.put_drain(None, record, Expect::Version(version));
    }

    /// Each drained agent's tasks and how far each has moved, for a full
    /// snapshot: it goes over every record (the light snapshots between,
    /// a command's answer among them, show the last full one's lists).
    /// A drain that ended shows its stored end instead
    /// ([`DrainStatus::new`]): it is not looked at.
    pub(super) fn drain_tasks(&self, now: Instant) -> HashMap<AgentId, Vec<DrainTask>> {
        self.drains
            .by_agent
            .iter()
            .filter(|(_, (drain, _))| drain.ended.is_none())
            .map(|(agent, (drain, _))| (agent.clone(), self.drain_tasks_of(agent, drain, now)))
            .collect()
    }

    /// The drain of `agent` as shown: its record now, with its tasks as
    /// the last full snapshot found them ([`Self::drain_tasks`]).
    pub(super) fn drain_status(&self, agent: &AgentId) -> Option<DrainStatus> {
        let drain = self.drains.get(agent)?;
        let tasks = self.shown_drain_tasks.get(agent).cloned();
        Some(DrainStatus::new(drain, tasks.unwrap_or_default()))
    }

    /// `agent`'s tasks under `drain` and how far each has moved, by task
    /// ID: moved (killed by the drain), stopped (killed since the drain
    /// began for another reason: no longer wanted, its service deleted,
    /// replaced by a new spec), ended (ended there since the drain began
    /// without a kill since: lost with the agent, finished, failed, with
    /// its last status), a job's task (not moved: the drain waits for its
    /// run to end), and the live tasks as the evacuation rule finds them. Of a drain that ended without a stored end (a record
    /// stored before [`DrainRecord::ended`]), only the kills between its
    /// start and its end, and no live task.
    fn drain_tasks_of(&self, agent: &AgentId, drain: &DrainRecord, now: Instant) -> Vec<DrainTask> {
        let at = self.unix(now);
        let since = drain.started_at;
        let until = drain.finished_at.unwrap_or(f64::INFINITY);
        let within = |requested_at: f64| since <= requested_at && requested_at <= until;
        // The other agents whose offers are declined: often why no
        // replacement is placed. Those drains hold, and those whose
        // maintenance window is near or has begun (`maintenance.rs`).
        let named = |a: &AgentId| match self.agents.hostname(a) {
            Some(host) if !host.is_empty() && host != a.as_str() => format!("{a} ({host})"),
            _ => a.to_string(),
        };
        let drained: Vec<&AgentId> = self
            .drains
            .by_agent
            .iter()
            .filter(|(a, (d, _))| *a != agent && d.state.holds())
            .map(|(a, _)| a)
            .collect();
        let lead = self.cfg.maintenance_lead.as_secs_f64();
        let in_window: Vec<String> = self
            .maintenance_windows()
            .iter()
            .filter(|(a, w)| *a != agent && !drained.contains(a) && w.blocks(at, lead))
            .map(|(a, _)| named(a))
            .collect();
        let drained: Vec<String> = drained.into_iter().map(named).collect();
        let drained_too = match drained.as_slice() {
            [] => String::new(),
            [one] => format!("; agent {one} is drained too (its offers are declined)"),
            many => format!(
                "; agents {} are drained too (their offers are declined)",
                many.join(", ")
            ),
        } + &match in_window.as_slice() {
            [] => String::new(),
            [one] => format!(
                "; agent {one} is near or in its maintenance window (its offers are declined)"
            ),
            many => format!(
                "; agents {} are near or in their maintenance windows (their offers are \
                 declined)",
                many.join(", ")
            ),
        };
        let moved = moved_reason(agent);
        let mut services: BTreeSet<&str> = BTreeSet::new();
        for record in self.tasks.records() {
            if record.agent_id == *agent {
                services.insert(record.service.as_str());
            }
        }
        let mut tasks = Vec::new();
        let empty = super::table::ServiceTasks::default();
        for name in services {
            let records = self.tasks.service(name).unwrap_or(&empty);
            let copy_of = |instance: u32| {
                records
                    .records()
                    .find(|o| o.instance == instance && o.agent_id != *agent && is_live(o))
                    .map(|o| o.task_id.clone())
            };
            let shown = |r: &TaskRecord, progress, replacement, reason| DrainTask {
                task_id: r.task_id.clone(),
                service: r.service.clone(),
                instance: r.instance,
                progress,
                replacement,
                reason,
            };
            let spec = self.services.spec(name);
            for r in records.records().filter(|r| r.agent_id == *agent) {
                match &r.kill {
                    // Moved already: killed by this drain (an earlier
                    // drain of the agent gave the same reason: its moves
                    // are not this one's).
                    Some(k) if k.reason == moved && within(k.requested_at) => {
                        tasks.push(shown(r, DrainProgress::Moved, copy_of(r.instance), None));
                    }
                    // Killed for another reason since the drain began.
                    Some(k) if within(k.requested_at) => {
                        let reason = Some(k.reason.clone());
                        tasks.push(shown(r, DrainProgress::Stopped, None, reason));
                    }
                    None if drain.state == DrainState::Running
                        && spec.is_none()
                        && !r.is_terminal()
                        && self.jobs.contains(name) =>
                    {
                        let why = format!(
                            "a task of job {name}: jobs are not moved; the drain waits for its \
                             run to end"
                        );
                        tasks.push(shown(r, DrainProgress::Blocked, None, Some(why)));
                    }
                    // Ended there without this drain's kill or another
                    // rule's since it began: lost with the agent (put DOWN
                    // for maintenance: TASK_GONE_BY_OPERATOR, TASK_LOST),
                    // or finished or failed on its own.
                    _ if r.is_terminal() && within(r.updated_at) => {
                        let why = format!("ended on the agent: {}", r.last_status());
                        tasks.push(shown(r, DrainProgress::Ended, None, Some(why)));
                    }
                    _ => {}
                }
            }
            let Some(spec) = spec else {
                continue;
            };
            let holds = drain.state.holds();
            let steps = evacuation::look(
                spec,
                records.records(),
                |t| {
                    if holds && t.agent_id == *agent {
                        self.drains.leave(spec, t)
                    } else {
                        None
                    }
                },
                |t| {
                    self.tasks
                        .get(t.task_id.as_str())
                        .is_some_and(|e| e.kill_wanted)
                },
                at,
                self.cfg.transient_timeout,
            );
            for (task_id, step) in steps {
                let Some(r) = self.tasks.get(task_id.as_str()).map(|e| e.record.clone()) else {
                    continue;
                };
                let (progress, replacement, reason) = match step {
                    evacuation::Step::Kill { replacement, .. } => {
                        (DrainProgress::Moved, Some(replacement), None)
                    }
                    evacuation::Step::WaitForHealth { replacement, why } => (
                        DrainProgress::WaitingForHealth,
                        Some(replacement),
                        Some(why),
                    ),
                    evacuation::Step::Floor { replacement, why } => {
                        (DrainProgress::Blocked, replacement, Some(why))
                    }
                    evacuation::Step::NoReplacement => {
                        let why = match self.services.waiting(name) {
                            Some(s) if s.is_stuck() => {
                                format!("no offer fits elsewhere: {s}{drained_too}")
                            }
                            _ => format!(
                                "waiting for an offer elsewhere for the replacement{drained_too}"
                            ),
                        };
                        (DrainProgress::Blocked, None, Some(why))
                    }
                    evacuation::Step::Unwanted { why } => (DrainProgress::Stopped, None, Some(why)),
                };
                tasks.push(shown(&r, progress, replacement, reason));
            }
        }
        tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        tasks
    }
}
