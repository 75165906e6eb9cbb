//! The machine's outbox: the effects an input produces (stores, calls,
//! replies, log entries, acknowledgements), the events page, and
//! [`Machine::finish`], which closes a step with the snapshot (full when
//! the throttle allows, light for a command's answer) and the next wake-up.

use std::collections::VecDeque;

use tokio::time::Instant;

use super::{EVENT_LOG_LEN, Machine, Pending, tasks};
use crate::mesos::v1;
use crate::scheduler::core::TermOutcome;
use crate::scheduler::core::io::{
    Ack, Answer, Effect, Effects, MesosCall, OperatorOp, ReplyId, RequestId, StoreOp,
};
use crate::scheduler::snapshot::{EventEntry, EventKind, FrameworkState};

/// Effects being collected for the input at hand, the events page, and
/// request IDs.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    pub(super) items: Vec<Effect>,
    pub(super) acks: Vec<Ack>,
    pub(super) events: VecDeque<EventEntry>,
    pub(super) next_id: u64,
    /// Something shown changed since the last snapshot.
    pub(super) dirty: bool,
    /// Publish at once, whatever the throttle says.
    pub(super) publish_now: bool,
}

impl Outbox {
    pub(super) fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

impl Machine {
    /// Wall-clock seconds at `now`.
    pub(super) fn unix(&self, now: Instant) -> f64 {
        self.clock.unix(now)
    }

    pub(super) fn store(&mut self, op: StoreOp, pending: Pending) -> RequestId {
        let id = RequestId(self.out.next());
        self.pending.insert(id, pending);
        self.out.items.push(Effect::Store { id, op });
        id
    }

    pub(super) fn call(&mut self, call: MesosCall, pending: Pending) -> RequestId {
        let id = RequestId(self.out.next());
        self.pending.insert(id, pending);
        self.out.items.push(Effect::Call { id, call });
        id
    }

    pub(super) fn operator(&mut self, op: OperatorOp, pending: Pending) -> RequestId {
        let id = RequestId(self.out.next());
        self.pending.insert(id, pending);
        self.out.items.push(Effect::Operator { id, op });
        id
    }

    pub(super) fn reply(&mut self, id: ReplyId, answer: Answer) {
        self.out.items.push(Effect::Reply { id, answer });
    }

    pub(super) fn acknowledge(&mut self, status: &v1::TaskStatus) {
        self.out.acks.extend(tasks::ack_of(status));
    }

    /// Appends to the events page and the log.
    pub(super) fn log(&mut self, kind: EventKind, message: String, now: Instant) {
        let entry = EventEntry {
            at: self.unix(now),
            kind,
            message,
        };
        self.out.items.push(Effect::Log(entry.clone()));
        self.out.events.push_back(entry);
        while self.out.events.len() > EVENT_LOG_LEN {
            self.out.events.pop_front();
        }
        self.out.dirty = true;
    }

    /// A line for the log only.
    pub(super) fn warn(&mut self, message: String) {
        self.out.items.push(Effect::Warn(message));
    }

    /// Sets the framework state (and why).
    pub(super) fn set_state(&mut self, state: FrameworkState, reason: Option<String>) {
        if self.framework.state != state || self.framework.reason != reason {
            self.framework.state = state;
            self.framework.reason = reason;
            self.out.dirty = true;
        }
    }

    /// Ends the term with `outcome` (once).
    pub(super) fn end_term(&mut self, outcome: TermOutcome) {
        if !self.ending {
            self.ending = true;
            self.out.items.push(Effect::EndTerm(outcome));
        }
    }

    pub(super) fn unexpected(&mut self, id: RequestId, pending: &Pending) {
        self.warn(format!(
            "an answer to request {} did not match what it was for ({pending:?}); ignored",
            id.0
        ));
    }

    /// Gives back the memory of the table of requests in flight once most
    /// of it is unused: a launch has thousands of record writes and calls
    /// in flight at its peak (the table held 1.9 MB after a launch of
    /// 10,000 tasks, heaptrack under `benches/memory.py`), and a `HashMap`
    /// keeps its capacity when emptied. Shrinks to twice what is in flight when that is under a
    /// quarter of the capacity, so a table that grows again first grows
    /// more than threefold: the rehash stays amortised.
    fn trim_pending(&mut self) {
        const SMALL: usize = 64;
        let (len, capacity) = (self.pending.len(), self.pending.capacity());
        if capacity > SMALL && len < capacity / 4 {
            self.pending.shrink_to((len * 2).max(SMALL));
        }
    }

    /// Collects the effects of this step: acknowledgements, a snapshot if
    /// due, the next wake-up.
    pub(super) fn finish(&mut self, now: Instant) -> Effects {
        self.trim_pending();
        if !self.out.acks.is_empty() {
            let acks = std::mem::take(&mut self.out.acks);
            self.out.items.push(Effect::Acknowledge(acks));
        }
        let due = self
            .last_publish
            .is_none_or(|t| now.saturating_duration_since(t) >= self.snapshot_pause());
        // Read-your-writes: a step that answers a command publishes, and
        // before the answer, so whoever reads after the answer sees what
        // the command did (the throttle only delays what nobody awaits).
        // Between full snapshots such a one is light: the last task list
        // and counts, with the command's changes (a service's spec,
        // reconciliation, events); counting tens of thousands of records
        // for every command would make commands the leader's main work.
        let answer_at = self
            .out
            .items
            .iter()
            .position(|e| matches!(e, Effect::Reply { .. }));
        // No full snapshot of a table half loaded (`load_slice`): the
        // dirty mark stands until the last slice.
        let full = !self.loading_tasks() && (self.out.publish_now || (self.out.dirty && due));
        if full || answer_at.is_some() {
            let snapshot = Effect::Publish(Box::new(self.snapshot(now, !full)));
            let at = answer_at.unwrap_or(self.out.items.len());
            self.out.items.insert(at, snapshot);
            if full {
                self.out.dirty = false;
                self.out.publish_now = false;
                self.last_publish = Some(now);
            }
        }
        Effects {
            items: std::mem::take(&mut self.out.items),
            wake_at: (!self.ending).then(|| self.next_wake(now)),
        }
    }

    /// When timers next need [`Input::Tick`](crate::scheduler::core::io::Input::Tick).
    pub(super) fn next_wake(&self, now: Instant) -> Instant {
        let mut next = self.next_housekeeping.min(self.framework.next_check);
        let subscribed = self.framework.is_subscribed();
        let candidates = [
            (subscribed && self.tasks.is_loaded())
                .then(|| self.reconciler.next_deadline())
                .flatten(),
            subscribed.then(|| self.kills.next_deadline()).flatten(),
            self.framework.restart_at,
            // The next slice of the task records (`load_slice`).
            self.loading_tasks().then_some(now),
            self.needs_schedule.then(|| self.schedule_due(now)),
            // A deferred REVIVE's pass (once asked for, `schedule_due`
            // rules).
            (!self.needs_schedule && self.may_schedule())
                .then(|| self.revive.deferred_until(self.cfg.min_revive_interval))
                .flatten(),
            self.out
                .dirty
                .then(|| self.last_publish.map_or(now, |t| t + self.snapshot_pause())),
        ];
        for candidate in candidates.into_iter().flatten() {
            next = next.min(candidate);
        }
        next.max(now)
    }
}
