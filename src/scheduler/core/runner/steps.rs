//! The runner's steps: what it has received and not fed to the machine
//! yet ([`Inbox`]), and the order it feeds it in, one bounded step at a
//! time, so that a command, or the result of a command's write, waits for
//! at most one small step of other work — never for a whole batch of
//! status updates or of task-write results (issue 30: every command
//! answered within 100 ms while tens of thousands of tasks launch).
//!
//! Before each step the runner looks for a command. A step is, by
//! priority:
//!
//! 1. the result of a store operation other than a task write (a
//!    command's write, a service or framework-ID write, a read): one. It
//!    goes before new commands: it finishes a command already under way,
//!    and a stream of new commands must not hold up the writes of those
//!    before them;
//! 2. a command, unless the last step took one: then it comes after the
//!    rest, so that a stream of commands does not starve the rest (a
//!    command still waits for at most one step);
//! 3. the answer to a Mesos or operator call: one;
//! 4. taking turns, so that neither starves the other:
//!    - a piece of the Mesos stream: one event, or up to
//!      [`UPDATES_PER_STEP`] consecutive UPDATEs as one input;
//!    - up to [`WRITTEN_PER_STEP`] task-write results, in the order their
//!      batches came back.
//!
//! Every message from spawned work is moved into the inbox before each step
//! (cheap: a batch's results move as one vector), so a command's write
//! result that came after many task batches does not wait behind them in
//! the channel.

use std::collections::VecDeque;
use std::time::Instant as StdInstant;

use tokio::sync::mpsc;

use super::{Msg, Runner, timing};
use crate::scheduler::commands::Command;
use crate::scheduler::core::io::{Input, RequestId, StoreResult};
use crate::scheduler::core::machine::Machine;

/// Consecutive UPDATEs joined into one [`Input::Updates`]: a piece small
/// enough that a command waits little behind it (a status update costs the
/// machine about 10 µs of CPU at 50,000 tasks: `perf` of a release build
/// under the failover benchmark), large enough that the per-input work
/// (closing the step, the metrics) stays a small share.
pub(super) const UPDATES_PER_STEP: usize = 64;

/// Task-write results fed in one step (a batch of ZooKeeper writes brings
/// 125, `store::BATCH`).
pub(super) const WRITTEN_PER_STEP: usize = 32;

/// What spawned work sent back and the machine has not been fed yet.
#[derive(Default)]
pub(super) struct Inbox {
    /// Results of store operations other than task writes, each with the
    /// instant it came (`timing::result_read`).
    singles: VecDeque<(RequestId, StoreResult, StdInstant)>,
    /// Answers to Mesos and operator calls.
    inputs: VecDeque<Input>,
    /// Results of task writes, in the order their batches came.
    written: VecDeque<(RequestId, StoreResult)>,
    /// The stream goes first at the next shared step.
    stream_next: bool,
    /// The last step took a command: the next serves the rest first.
    took_command: bool,
}

impl Inbox {
    /// True if nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.singles.is_empty() && self.inputs.is_empty() && self.written.is_empty()
    }

    /// True if no store result other than a task write's waits.
    #[cfg(test)]
    pub(super) fn singles_is_empty(&self) -> bool {
        self.singles.is_empty()
    }

    /// Task-write results waiting.
    #[cfg(test)]
    pub(super) fn written_len(&self) -> usize {
        self.written.len()
    }
}

impl Runner<'_> {
    /// Moves everything spawned work sent back into the inbox.
    pub(super) fn collect(&mut self) {
        while let Ok(msg) = self.results.try_recv() {
            self.take(msg);
        }
    }

    /// Puts `msg` in the inbox. A batch's slot is freed at once so the
    /// next batch of writes leaves while this one's results wait.
    pub(super) fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Input(input) => self.inbox.inputs.push_back(input),
            Msg::StoreBatch(results) => {
                self.store.batch_done();
                self.inbox.written.extend(results);
                self.store.pump();
            }
            Msg::Stored(id, result, done_at) => {
                self.inbox.singles.push_back((id, result, done_at));
            }
        }
    }

    /// Feeds one step (see the module doc); false if nothing was ready.
    pub(super) fn step(
        &mut self,
        machine: &mut Machine,
        commands: &mut mpsc::Receiver<Command>,
    ) -> bool {
        self.collect();
        if let Some((id, result, done_at)) = self.inbox.singles.pop_front() {
            timing::result_read(done_at.elapsed());
            // Freed only now: while a command's write is out no task batch
            // leaves (`store`), and its next write must not find batches
            // sent in between.
            self.store.single_done();
            self.feed(machine, Input::Stored { id, result });
            self.store.pump();
            return true;
        }
        // Right after a command, the rest first if any waits.
        let commands_first = !std::mem::take(&mut self.inbox.took_command);
        if commands_first && self.command_step(machine, commands) {
            return true;
        }
        if let Some(input) = self.inbox.inputs.pop_front() {
            self.feed(machine, input);
            return true;
        }
        let stream_first = self.inbox.stream_next;
        self.inbox.stream_next = !stream_first;
        if stream_first && self.stream_step(machine) {
            return true;
        }
        if self.written_step(machine) || (!stream_first && self.stream_step(machine)) {
            return true;
        }
        !commands_first && self.command_step(machine, commands)
    }

    /// A command, if one waits.
    fn command_step(
        &mut self,
        machine: &mut Machine,
        commands: &mut mpsc::Receiver<Command>,
    ) -> bool {
        match commands.try_recv() {
            Ok(command) => {
                self.command(machine, command);
                self.inbox.took_command = true;
                true
            }
            Err(_) => false,
        }
    }

    /// One piece of the Mesos stream, if an event waits.
    fn stream_step(&mut self, machine: &mut Machine) -> bool {
        match self.events.as_mut().and_then(|rx| rx.try_recv().ok()) {
            Some(event) => {
                self.event(machine, event);
                true
            }
            None => false,
        }
    }

    /// Up to [`WRITTEN_PER_STEP`] task-write results, if any wait.
    fn written_step(&mut self, machine: &mut Machine) -> bool {
        if self.inbox.written.is_empty() {
            return false;
        }
        for _ in 0..WRITTEN_PER_STEP {
            let Some((id, result)) = self.inbox.written.pop_front() else {
                break;
            };
            self.feed(machine, Input::Stored { id, result });
        }
        self.store.pump();
        true
    }
}
