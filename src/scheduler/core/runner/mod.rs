//! The runner: the only part of the core that does I/O. It owns the Mesos
//! client, the operator client and the reply channels; feeds the
//! [`Machine`] its inputs; performs its effects concurrently (`store`,
//! `calls`) and feeds their results back. Nothing it awaits is I/O: it
//! waits only for the next input — a stream event, a command, an I/O
//! result or the machine's timer — so a slow write never holds up the
//! stream, commands or timers.
//!
//! Inputs are handled in rounds: whatever is ready is fed in, one bounded
//! step at a time with a look for a command before each (`steps`: commands
//! first, then I/O results, then stream events and task-write results in
//! turn, keeping stream order and joining consecutive UPDATEs), for at
//! most [`DRAIN_FOR`]; then [`Machine::settle`] runs the one scheduling
//! pass the round asked for.
//!
//! Everything the runner starts lives for the term: spawned work stops when
//! the term ends, and the client is stopped.

mod calls;
mod steps;
mod store;
#[cfg(test)]
mod tests;
mod timing;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::io::{
    Answer, Effect, Effects, Input, OperatorAnswer, OperatorFailure, OperatorOp, ReplyId,
    RequestId, StoreResult, SubscribedInfo,
};
use super::machine::{Machine, TermInfo};
use super::{CoreDeps, TermOutcome};
use crate::coordination::RecordMirror;
use crate::mesos::client::{ClientConfig, ClientEvent, SchedulerClient};
use crate::mesos::operator::OperatorClient;
use crate::mesos::v1::scheduler::event;
use crate::scheduler::commands::Command;
use crate::scheduler::config::CoreConfig;
use crate::scheduler::ids::IdSource;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::snapshot::{EventKind, FrameworkState, Snapshot};
use crate::util::unix_now_secs;

use calls::{CallLanes, SharedClient};
use steps::{Inbox, UPDATES_PER_STEP};
use store::StoreLane;
use timing::Waiting;

/// Steps (`steps`) of a round before [`Machine::settle`] runs.
const BATCH: usize = 1024;
/// Longest stretch of steps before [`Machine::settle`] and a yield to the
/// other tasks of this worker (command answers waiting to be sent among
/// them). It is checked between steps: a round's inputs take at most this
/// plus one step, or [`MIN_STEPS`] steps.
const DRAIN_FOR: Duration = Duration::from_millis(5);
/// Steps a round takes whatever the time: a command's write result, a
/// command, and one of the rest (`steps`: a command's step is followed by
/// one of the rest when any waits), so that commands and the backlog take
/// turns even when each step outlasts [`DRAIN_FOR`].
const MIN_STEPS: usize = 3;

/// What woke the runner.
enum Wake {
    Command(Command),
    Msg(Msg),
    Event(ClientEvent),
    Tick,
    /// Nothing new: work already received waits in the inbox (or the
    /// stream ended).
    Backlog,
}

/// What spawned work sends back.
enum Msg {
    /// An input for the machine.
    Input(Input),
    /// A batch of task writes ended.
    StoreBatch(Vec<(RequestId, StoreResult)>),
    /// A store operation other than a task write ended, at the instant
    /// given.
    Stored(RequestId, StoreResult, std::time::Instant),
}

/// Spawns work that stops when the term ends.
#[derive(Clone)]
struct Work(CancellationToken);

impl Work {
    fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let token = self.0.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = work => {}
            }
        });
    }
}

/// The ID of the next term's first reconciliation run. The machine counts
/// its runs itself (its runs replay from their inputs); the runner carries
/// the count from one term to the next in this process, so a run ID never
/// comes back on the pages (their history keeps a watermark on run IDs).
static NEXT_RUN_ID: AtomicU64 = AtomicU64::new(1);

/// Runs the core for leadership `term` until it ends. `commands` is lent
/// for the term. `wary`: this replica's previous term ended because another
/// scheduler took the framework ID, so this one first checks on the master
/// that nobody drives it now. `tasks`: the task records this replica kept
/// current while it followed (`standby`), read again only where they
/// changed; `None` reads every record.
pub async fn run_term(
    cfg: &CoreConfig,
    deps: &CoreDeps,
    term: u64,
    term_token: CancellationToken,
    commands: &mut mpsc::Receiver<Command>,
    wary: bool,
    tasks: Option<RecordMirror<TaskRecord>>,
) -> TermOutcome {
    let work = Work(term_token.child_token());
    let _stop_work = work.0.clone().drop_guard();
    let mut runner = Runner::new(deps, term_token, work, tasks);
    let now = Instant::now();
    let mut machine = Machine::new(
        cfg.clone(),
        TermInfo {
            term,
            replica: deps.coordinator.replica().clone(),
            wary,
            initial_services: deps.initial_services.clone(),
            ids: IdSource::from_os(),
            first_run_id: NEXT_RUN_ID.load(Ordering::Relaxed),
        },
        now,
        unix_now_secs(),
    );
    let effects = machine.start(now);
    // The counts go out before the effects they count, as they did when
    // the machine updated the registry itself.
    deps.metrics.leader.set(1);
    deps.metrics.record(&machine.take_stats());
    runner.perform(effects);
    let outcome = runner.run(&mut machine, commands).await;
    NEXT_RUN_ID.fetch_max(machine.next_run_id(), Ordering::Relaxed);
    let effects = machine.end(&outcome, Instant::now());
    deps.metrics.record(&machine.take_stats());
    runner.perform(effects);
    // Only the leader reports these.
    deps.metrics.leader.set(0);
    deps.metrics.framework_subscribed.set(0);
    deps.metrics.services(None);
    runner.stop_client();
    outcome
}

struct Runner<'a> {
    deps: &'a CoreDeps,
    term_token: CancellationToken,
    operator: OperatorClient,
    client_config: ClientConfig,
    running_client: Option<(SchedulerClient, CancellationToken)>,
    events: Option<mpsc::Receiver<ClientEvent>>,
    shared_client: SharedClient,
    store: StoreLane,
    calls: CallLanes,
    results: mpsc::UnboundedReceiver<Msg>,
    results_tx: mpsc::UnboundedSender<Msg>,
    /// Received and not fed yet (`steps`).
    inbox: Inbox,
    replies: HashMap<ReplyId, Waiting>,
    /// A command was answered since the last yield.
    replied: bool,
    next_reply: u64,
    wake_at: Option<Instant>,
    outcome: Option<TermOutcome>,
    work: Work,
}

impl<'a> Runner<'a> {
    /// A runner for one term on `deps`; its spawned work goes on `work`.
    /// `tasks`: the follower's mirror of the task records, which answers the
    /// term's first listing of them ([`StoreLane::new`]).
    fn new(
        deps: &'a CoreDeps,
        term_token: CancellationToken,
        work: Work,
        tasks: Option<RecordMirror<TaskRecord>>,
    ) -> Runner<'a> {
        let (results_tx, results) = mpsc::unbounded_channel();
        let client: SharedClient = Arc::new(Mutex::new(None));
        Runner {
            deps,
            operator: OperatorClient::start(&deps.client, term_token.child_token()),
            client_config: ClientConfig {
                // Heartbeats come through too: each one refreshes the
                // snapshot's `last_event_at` (heartbeat age, readiness).
                forward_heartbeats: true,
                ..deps.client.clone()
            },
            running_client: None,
            events: None,
            shared_client: client.clone(),
            store: StoreLane::new(
                deps.coordinator.clone(),
                results_tx.clone(),
                work.clone(),
                tasks,
            ),
            calls: CallLanes::new(client, results_tx.clone(), work.clone()),
            results,
            results_tx,
            inbox: Inbox::default(),
            replies: HashMap::new(),
            replied: false,
            next_reply: 0,
            wake_at: None,
            outcome: None,
            term_token,
            work,
        }
    }

    /// The loop: one input (or what waits in the inbox), then whatever
    /// else is ready, step by step (up to [`BATCH`] steps or [`DRAIN_FOR`]),
    /// then a settle.
    async fn run(
        &mut self,
        machine: &mut Machine,
        commands: &mut mpsc::Receiver<Command>,
    ) -> TermOutcome {
        loop {
            if let Some(outcome) = self.outcome.take() {
                return outcome;
            }
            let far = Instant::now() + Duration::from_secs(3600);
            let sleep = tokio::time::sleep_until(self.wake_at.unwrap_or(far));
            let backlog = !self.inbox.is_empty();
            let wake = tokio::select! {
                biased;
                _ = self.term_token.cancelled() => return TermOutcome::LeadershipLost,
                command = commands.recv() => match command {
                    Some(command) => Wake::Command(command),
                    // The web layer is gone: the process is stopping.
                    None => return TermOutcome::LeadershipLost,
                },
                Some(msg) = self.results.recv() => Wake::Msg(msg),
                event = recv_event(&mut self.events) => match event {
                    Some(event) => Wake::Event(event),
                    None => {
                        self.events = None;
                        Wake::Backlog
                    }
                },
                _ = sleep => Wake::Tick,
                () = std::future::ready(()), if backlog => Wake::Backlog,
            };
            // The round counts from here: what woke the runner is fed in it.
            let round = std::time::Instant::now();
            match wake {
                Wake::Command(command) => self.command(machine, command),
                Wake::Msg(msg) => self.take(msg),
                Wake::Event(event) => self.event(machine, event),
                Wake::Tick => {
                    self.wake_at = None;
                    self.feed(machine, Input::Tick);
                }
                Wake::Backlog => {}
            }
            let longest = self.drain(machine, commands, round);
            self.report_inbox(machine);
            if std::mem::take(&mut self.replied) {
                // An answer's handler, woken into this worker's LIFO slot,
                // goes before the settle's pass and snapshot, not after.
                tokio::task::yield_now().await;
            }
            let drained = std::time::Instant::now();
            let effects = machine.settle(Instant::now());
            self.deps.metrics.record(&machine.take_stats());
            self.perform(effects);
            timing::round(drained - round, drained.elapsed(), longest);
            // Let the tasks this round woke run before the next: a command's
            // HTTP handler woken by its answer waits in this worker's queue
            // (tokio's LIFO slot, which no other worker takes) until the
            // core yields.
            tokio::task::yield_now().await;
        }
    }

    /// Feeds what is ready without waiting, step by step, up to [`BATCH`]
    /// steps or for [`DRAIN_FOR`], whichever ends first; at least
    /// [`MIN_STEPS`] steps whatever the input that woke the runner took and
    /// however slow the steps are (a loaded machine): a round that woke for
    /// a command and spent its time on it must not leave the rest waiting,
    /// or a stream of commands would hold up the results their own writes
    /// wait for. Returns the longest step (the round's first input, fed
    /// since `round`, counts as one).
    fn drain(
        &mut self,
        machine: &mut Machine,
        commands: &mut mpsc::Receiver<Command>,
        round: std::time::Instant,
    ) -> Duration {
        let mut started = std::time::Instant::now();
        let until = started + DRAIN_FOR;
        let mut longest = started - round;
        let mut steps = 0;
        while steps < BATCH
            && self.outcome.is_none()
            && !machine.is_ending()
            && (steps < MIN_STEPS || started < until)
        {
            if !self.step(machine, commands) {
                break;
            }
            let now = std::time::Instant::now();
            longest = longest.max(now - started);
            started = now;
            steps += 1;
        }
        longest
    }

    fn feed(&mut self, machine: &mut Machine, input: Input) {
        let clock = timing::StepClock::start();
        let kind = input.name();
        let effects = machine.handle(input, Instant::now());
        clock.stop(kind);
        self.deps.metrics.record(&machine.take_stats());
        self.perform(effects);
    }

    /// When the event just received was read off the stream (its stamp in
    /// the client's inbox).
    fn take_stamp(&self) -> Option<Instant> {
        let client = self.running_client.as_ref().map(|(c, _)| c);
        client.and_then(|c| c.inbox().take()).map(Instant::from_std)
    }

    /// Feeds `input`, made of stream events read at `read_at`.
    fn feed_read(&mut self, machine: &mut Machine, input: Input, read_at: Option<Instant>) {
        if let Some(read_at) = read_at {
            machine.event_read_at(read_at);
        }
        self.feed(machine, input);
    }

    /// Tells the machine which events wait in the client's inbox.
    fn report_inbox(&self, machine: &mut Machine) {
        let inbox = self.running_client.as_ref().map(|(c, _)| c.inbox());
        let oldest = inbox.and_then(|i| i.oldest()).map(Instant::from_std);
        let depth = inbox.map_or(0, |i| i.depth());
        let full = inbox.is_some_and(|i| i.is_full());
        machine.inbox(oldest, depth, full, Instant::now());
    }

    /// A stream event; consecutive UPDATEs already queued join it, up to
    /// [`UPDATES_PER_STEP`].
    fn event(&mut self, machine: &mut Machine, event: ClientEvent) {
        let mut read_at = self.take_stamp();
        let ClientEvent::Event(e) = &event else {
            let input = self.client_input(event);
            self.feed_read(machine, input, read_at);
            return;
        };
        if e.r#type() != event::Type::Update {
            let input = self.client_input(event);
            self.feed_read(machine, input, read_at);
            return;
        }
        let mut updates = Vec::new();
        let mut next = Some((event, read_at));
        while let Some((event, stamp)) = next.take() {
            match event {
                ClientEvent::Event(e) if e.r#type() == event::Type::Update => {
                    read_at = stamp.or(read_at);
                    if let Some(update) = e.update {
                        updates.push(update.status);
                    }
                    if updates.len() < UPDATES_PER_STEP {
                        let queued = self.events.as_mut().and_then(|rx| rx.try_recv().ok());
                        next = queued.map(|e| (e, self.take_stamp()));
                    }
                }
                other => {
                    let batch = Input::Updates(std::mem::take(&mut updates));
                    self.feed_read(machine, batch, read_at);
                    let input = self.client_input(other);
                    self.feed_read(machine, input, stamp);
                    return;
                }
            }
        }
        self.feed_read(machine, Input::Updates(updates), read_at);
    }

    /// A client event as an input (UPDATEs one by one; see [`Self::event`]).
    fn client_input(&self, event: ClientEvent) -> Input {
        match event {
            ClientEvent::Subscribed(sub) => Input::Subscribed(SubscribedInfo {
                framework_id: (&sub.framework_id).into(),
                master: sub.master.to_string(),
                master_version: sub.master_info.as_ref().and_then(|m| m.version.clone()),
                heartbeat_interval: sub.heartbeat_interval,
                heartbeat_timeout: self.client_config.heartbeat_timeout(sub.heartbeat_interval),
            }),
            ClientEvent::Disconnected { reason } => Input::Disconnected(reason),
            ClientEvent::Stopped(reason) => Input::ClientStopped(reason),
            ClientEvent::Event(e) => {
                let e = *e;
                match e.r#type() {
                    event::Type::Offers => {
                        Input::Offers(e.offers.map(|o| o.offers).unwrap_or_default())
                    }
                    event::Type::Rescind => match e.rescind {
                        Some(r) => Input::Rescind(r.offer_id.value),
                        None => Input::OtherEvent,
                    },
                    event::Type::InverseOffers => Input::InverseOffers(
                        e.inverse_offers
                            .map(|o| o.inverse_offers)
                            .unwrap_or_default(),
                    ),
                    event::Type::RescindInverseOffer => match e.rescind_inverse_offer {
                        Some(r) => Input::RescindInverseOffer(r.inverse_offer_id.value),
                        None => Input::OtherEvent,
                    },
                    event::Type::Update => {
                        Input::Updates(e.update.map(|u| vec![u.status]).unwrap_or_default())
                    }
                    event::Type::Failure => match e.failure {
                        Some(f) => {
                            let agent_id = f.agent_id.map(Into::into).unwrap_or_default();
                            match f.executor_id {
                                None => Input::AgentLost(agent_id),
                                Some(executor) => Input::ExecutorExited {
                                    agent_id,
                                    executor_id: executor.value,
                                    status: f.status,
                                },
                            }
                        }
                        None => Input::OtherEvent,
                    },
                    event::Type::Heartbeat => Input::Heartbeat,
                    event::Type::Message => match e.message {
                        Some(m) => Input::FrameworkMessage {
                            executor_id: m.executor_id.value,
                            bytes: m.data.len(),
                        },
                        None => Input::OtherEvent,
                    },
                    _ => Input::OtherEvent,
                }
            }
        }
    }

    /// A command: its reply channel is kept, the request goes in.
    fn command(&mut self, machine: &mut Machine, command: Command) {
        self.next_reply += 1;
        let id = ReplyId(self.next_reply);
        let kind = command.request.name();
        self.replies
            .insert(id, Waiting::new(command.reply, kind, command.sent_at));
        let request = command.request;
        self.feed(machine, Input::Command { id, request });
    }

    /// Carries out the machine's effects.
    fn perform(&mut self, effects: Effects) {
        for effect in effects.items {
            match effect {
                Effect::Store { id, op } => self.store.submit(id, op),
                Effect::Call { id, call } => self.calls.submit(id, call),
                Effect::Acknowledge(acks) => self.calls.acknowledge(acks),
                Effect::Operator { id, op } => self.operator(id, op),
                Effect::StartClient(info) => self.start_client(*info),
                Effect::StopClient => self.stop_client(),
                Effect::Publish(snapshot) => self.publish(*snapshot),
                Effect::Log(entry) => {
                    if entry.kind == EventKind::Error {
                        tracing::warn!(kind = %entry.kind, "{}", entry.message);
                    } else {
                        tracing::info!(kind = %entry.kind, "{}", entry.message);
                    }
                }
                Effect::Warn(message) => tracing::warn!("{message}"),
                Effect::Reply { id, answer } => self.reply(id, answer),
                Effect::EndTerm(outcome) => self.outcome = Some(outcome),
            }
        }
        if effects.wake_at.is_some() {
            self.wake_at = effects.wake_at;
        }
        self.store.pump();
    }

    fn start_client(&mut self, info: crate::mesos::v1::FrameworkInfo) {
        self.stop_client();
        let cancel = self.term_token.child_token();
        // One leader detection per term: the operator client's.
        let (client, events) = SchedulerClient::start_with_detector(
            self.client_config.clone(),
            self.operator.detector().clone(),
            info,
            cancel.clone(),
        );
        *self.shared_client.lock().unwrap_or_else(|e| e.into_inner()) = Some(client.clone());
        self.running_client = Some((client, cancel));
        self.events = Some(events);
    }

    fn stop_client(&mut self) {
        if let Some((_, cancel)) = self.running_client.take() {
            cancel.cancel();
        }
        *self.shared_client.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.events = None;
    }

    fn operator(&self, id: RequestId, op: OperatorOp) {
        let operator = self.operator.clone();
        let results = self.results_tx.clone();
        self.work.spawn(async move {
            let answer = match op {
                OperatorOp::ListFrameworks { within } => {
                    let listed = match within {
                        Some(limit) => {
                            match tokio::time::timeout(limit, operator.get_frameworks()).await {
                                Ok(answer) => answer.map_err(OperatorFailure::Failed),
                                Err(_) => Err(OperatorFailure::TimedOut {
                                    after: limit,
                                    no_leader: operator.detector().problem(),
                                }),
                            }
                        }
                        None => operator
                            .get_frameworks()
                            .await
                            .map_err(OperatorFailure::Failed),
                    };
                    OperatorAnswer::Frameworks(listed)
                }
                OperatorOp::ListAgents { within } => OperatorAnswer::Agents(
                    match tokio::time::timeout(within, operator.get_agents()).await {
                        Ok(answer) => answer.map_err(OperatorFailure::Failed),
                        Err(_) => Err(OperatorFailure::TimedOut {
                            after: within,
                            no_leader: operator.detector().problem(),
                        }),
                    },
                ),
                OperatorOp::DrainAgent { agent, within } => OperatorAnswer::AgentCalled(
                    match tokio::time::timeout(within, operator.drain_agent(agent.as_str())).await {
                        Ok(answer) => answer.map_err(OperatorFailure::Failed),
                        Err(_) => Err(OperatorFailure::TimedOut {
                            after: within,
                            no_leader: operator.detector().problem(),
                        }),
                    },
                ),
                OperatorOp::DeactivateAgent { agent, within } => OperatorAnswer::AgentCalled(
                    match tokio::time::timeout(within, operator.deactivate_agent(agent.as_str()))
                        .await
                    {
                        Ok(answer) => answer.map_err(OperatorFailure::Failed),
                        Err(_) => Err(OperatorFailure::TimedOut {
                            after: within,
                            no_leader: operator.detector().problem(),
                        }),
                    },
                ),
                OperatorOp::ReactivateAgent { agent, within } => OperatorAnswer::AgentCalled(
                    match tokio::time::timeout(within, operator.reactivate_agent(agent.as_str()))
                        .await
                    {
                        Ok(answer) => answer.map_err(OperatorFailure::Failed),
                        Err(_) => Err(OperatorFailure::TimedOut {
                            after: within,
                            no_leader: operator.detector().problem(),
                        }),
                    },
                ),
                OperatorOp::Teardown(framework_id) => OperatorAnswer::TornDown(
                    operator
                        .teardown(&framework_id)
                        .await
                        .map_err(OperatorFailure::Failed),
                ),
            };
            let _ = results.send(Msg::Input(Input::Operator { id, answer }));
        });
    }

    /// Adds the election's view to the machine's snapshot and publishes it.
    fn publish(&self, mut snapshot: Snapshot) {
        self.deps.metrics.services(Some(&snapshot.services));
        let coordinator = &self.deps.coordinator;
        snapshot.leadership = coordinator.leadership().borrow().clone();
        snapshot.deployment = coordinator
            .watch_deployment()
            .borrow()
            .clone()
            .map(|v| v.value);
        if snapshot.framework.state == FrameworkState::Subscribing
            && snapshot.framework.reason.is_none()
        {
            // Waiting for a leading master: say why none is known.
            snapshot.framework.reason = self
                .operator
                .detector()
                .problem()
                .map(|why| format!("no leading Mesos master: {why}"));
        }
        self.deps.snapshots.send_replace(Arc::new(snapshot));
    }

    fn reply(&mut self, id: ReplyId, answer: Answer) {
        if let Some(waiting) = self.replies.remove(&id) {
            waiting.answered();
            self.replied = true;
            // The requester may have given up (its handler timed out).
            let _ = waiting.reply.send(answer);
        }
    }
}

async fn recv_event(events: &mut Option<mpsc::Receiver<ClientEvent>>) -> Option<ClientEvent> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
