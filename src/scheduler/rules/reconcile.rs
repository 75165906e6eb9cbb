//! Task reconciliation as the Mesos reconciliation guide describes it
//! (`docs/reconciliation.md`, `docs/mesos-protocol.md#reconciliation`):
//!
//! - **explicit**: ask about every non-terminal task (with its agent ID);
//!   wait with truncated exponential backoff, the wait counting from the
//!   last answer (a large run answers for longer than the first wait); ask
//!   again about the tasks with no update since the run started; stop when
//!   every task answered
//!   (*converged*) or after the abort timeout (*aborted*, unanswered tasks
//!   listed). Run after every (re-)subscription, then an implicit run to
//!   surface tasks the scheduler does not know. A run asks in *slices* of
//!   at most [`ReconcilerConfig::explicit_slice`] tasks (the guide: "the
//!   scheduler sends some of its non-terminal tasks"; MESOS-2308 asks for
//!   a way to pace the master's answers): the next slice goes once at most
//!   half of the tasks asked so far are unanswered, or when the wait
//!   elapses, so the answers on their way (held by the master's stream, the
//!   client and the core) stay bounded whatever the task count;
//! - **implicit**: an empty RECONCILE; the master reports every task it
//!   knows. Run periodically (after an initial delay) and on request.
//!
//! At most one run at a time; requests made while one runs are coalesced
//! into it (same kind) or queued (one slot per kind, which later requests of
//! that kind join; a queued explicit run goes first); every run has an ID,
//! known from the moment it is queued; a cooldown separates runs,
//! except the explicit run a new subscription demands. An explicit request
//! never waits for an implicit run: that run only counts answers to the
//! RECONCILE it sent, so it ends (*superseded*) and the explicit run starts
//! at once (an operator asking about every task is not kept waiting out a
//! 10 s window). Pure state machine
//! over `Instant`s: the core feeds it updates and ticks, and sends what
//! [`Reconciler::tick`] asks for.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::scheduler::ids::{AgentId, TaskId};

mod asks;
mod runs;

use asks::Asks;

pub use runs::{
    ReconcileKind, ReconcileOutcome, ReconcileRun, ReconcileTrigger, ReconciliationStatus,
};

/// The `(task, agent)` pairs an explicit run asks about.
pub type TaskList = Vec<(TaskId, Option<AgentId>)>;

/// A run waiting to start.
#[derive(Debug, Clone)]
struct Queued {
    id: u64,
    kind: ReconcileKind,
    trigger: ReconcileTrigger,
    since: f64,
}

/// Runs kept in the history.
const HISTORY: usize = 20;
/// First wait of an explicit run before asking again.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Default [`ReconcilerConfig::explicit_slice`]: at 5,000 tasks the
/// answers on their way stay under a few MiB, and one RECONCILE call's body
/// under 0.5 MB.
pub const EXPLICIT_SLICE: usize = 5_000;

/// Timing of reconciliation (the `--reconcile-*` and
/// `--explicit-reconcile-*` flags).
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Period of implicit reconciliation.
    pub interval: Duration,
    /// Delay before the first periodic run.
    pub initial_delay: Duration,
    /// Minimum time between the end of a run and the start of the next.
    pub cooldown: Duration,
    /// Cap of the explicit run's backoff between RECONCILE calls.
    pub explicit_max_backoff: Duration,
    /// An explicit run gives up after this long.
    pub explicit_abort_timeout: Duration,
    /// How long an implicit run stays open to count answers.
    pub implicit_window: Duration,
    /// Most tasks one RECONCILE call of an explicit run asks about (its
    /// first call and each next slice; a retry asks again about every task
    /// asked and unanswered). At least 1.
    pub explicit_slice: usize,
}

/// What the core must do after a tick.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send RECONCILE with these `(task ID, agent ID)` pairs; empty = implicit.
    Send(TaskList),
    /// A run ended (converged, aborted) — for events and metrics.
    Finished(ReconcileRun),
}

#[derive(Debug)]
struct Running {
    view: ReconcileRun,
    /// Explicit: every task of the run, asked already or not, and which
    /// answered (any update since the run started counts, as the guide's
    /// algorithm uses arrival times). Empty for an implicit run.
    asks: Asks,
    /// Implicit: the tasks that answered.
    answered: HashSet<TaskId>,
    backoff: Backoff,
    /// The wait armed by the last RECONCILE call; each answer restarts it.
    wait: Duration,
    next_send: Instant,
    deadline: Instant,
}

/// The reconciliation state machine.
#[derive(Debug)]
pub struct Reconciler {
    cfg: ReconcilerConfig,
    running: Option<Running>,
    /// At most one per kind.
    queued: Vec<Queued>,
    last_end: Option<Instant>,
    /// `last_end` in seconds since the UNIX epoch, for the status.
    last_end_secs: Option<f64>,
    next_periodic: Option<Instant>,
    history: VecDeque<ReconcileRun>,
    /// The ID of the next run. Run IDs are counted here, not globally, so a
    /// run replays from its inputs; a reconciler lives for one term, so the
    /// runner starts each term's count where the last term's stopped
    /// ([`Reconciler::with_first_run_id`]): the history keeps a watermark
    /// on run IDs, and pages outlive a term.
    next_id: u64,
}

impl Reconciler {
    /// A reconciler whose first periodic run is due `initial_delay` after `now`.
    pub fn new(cfg: ReconcilerConfig, now: Instant) -> Self {
        let next_periodic = Some(now + cfg.initial_delay);
        Reconciler {
            cfg,
            running: None,
            queued: Vec::new(),
            last_end: None,
            last_end_secs: None,
            next_periodic,
            history: VecDeque::new(),
            next_id: 1,
        }
    }

    /// Numbers this reconciler's runs from `id` on (at least 1).
    pub fn with_first_run_id(mut self, id: u64) -> Self {
        self.next_id = id.max(1);
        self
    }

    /// The ID the next new run gets: one past every ID handed out so far.
    pub fn next_run_id(&self) -> u64 {
        self.next_id
    }

    fn new_run_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    /// A new subscription: whatever runs is superseded and an explicit run of
    /// `tasks` starts at once (no cooldown), followed by an implicit one.
    pub fn subscribed(&mut self, tasks: TaskList, now: Instant, now_secs: f64) -> Vec<Action> {
        let mut actions = self.finish(ReconcileOutcome::Superseded, now, now_secs);
        // The subscription's explicit run answers a queued explicit request.
        let id = self.queued_id(ReconcileKind::Explicit);
        actions.extend(self.start(
            id,
            ReconcileKind::Explicit,
            ReconcileTrigger::Subscribed,
            tasks,
            now,
            now_secs,
        ));
        // Then an implicit run surfaces tasks the scheduler does not know; a
        // queued implicit request is that run.
        self.queue(
            ReconcileKind::Implicit,
            ReconcileTrigger::AfterExplicit,
            now_secs,
        );
        actions
    }

    /// The subscription or leadership is gone: the running run and the
    /// queued ones are cancelled (and recorded as such).
    pub fn cancel(&mut self, now: Instant, now_secs: f64) -> Vec<Action> {
        let actions = self.finish(ReconcileOutcome::Cancelled, now, now_secs);
        for queued in std::mem::take(&mut self.queued) {
            let mut run = Self::placeholder(&queued);
            run.outcome = ReconcileOutcome::Cancelled;
            run.finished_at = Some(now_secs);
            self.remember(run);
        }
        actions
    }

    /// A manual or periodic request. Returns the run it was merged into or
    /// the run started; a queued request is reported with outcome `queued`.
    /// An implicit run sends an empty RECONCILE: `tasks` is only asked for
    /// explicit runs.
    pub fn request(
        &mut self,
        kind: ReconcileKind,
        trigger: ReconcileTrigger,
        tasks: impl FnOnce() -> TaskList,
        now: Instant,
        now_secs: f64,
    ) -> (ReconcileRun, Vec<Action>) {
        if let Some(running) = &self.running
            && running.view.kind == kind
        {
            return (running.view.clone(), Vec::new());
        }
        let mut actions = Vec::new();
        let id = if kind == ReconcileKind::Explicit && self.running.is_some() {
            // An implicit run only waits out its window, counting answers
            // to the RECONCILE it already sent: the explicit run does not
            // wait for it. It ends (superseded) and the explicit run
            // starts now, whatever the cooldown.
            actions.extend(self.finish(ReconcileOutcome::Superseded, now, now_secs));
            self.queued_id(kind)
        } else if self.running.is_some() || self.in_cooldown(now) {
            let queued = self.queue(kind, trigger, now_secs);
            return (Self::placeholder(queued), Vec::new());
        } else {
            self.new_run_id()
        };
        let list = match kind {
            ReconcileKind::Explicit => tasks(),
            ReconcileKind::Implicit => Vec::new(),
        };
        actions.extend(self.start(id, kind, trigger, list, now, now_secs));
        let view = self.running.as_ref().map(|r| r.view.clone());
        (
            view.unwrap_or_else(|| self.history.back().cloned().expect("a run just ended")),
            actions,
        )
    }

    /// An explicit run that must ask about tasks the running run (if any)
    /// does not: started now, or queued behind the running run and the
    /// cooldown (it then asks about every non-terminal task as of its
    /// start). `tasks` is asked for only when it starts now.
    pub fn follow_up(
        &mut self,
        trigger: ReconcileTrigger,
        tasks: impl FnOnce() -> TaskList,
        now: Instant,
        now_secs: f64,
    ) -> Vec<Action> {
        if self.running.is_some() || self.in_cooldown(now) {
            self.queue(ReconcileKind::Explicit, trigger, now_secs);
            return Vec::new();
        }
        let id = self.queued_id(ReconcileKind::Explicit);
        self.start(id, ReconcileKind::Explicit, trigger, tasks(), now, now_secs)
    }

    /// Joins the queued run of `kind`, or queues one.
    fn queue(&mut self, kind: ReconcileKind, trigger: ReconcileTrigger, now_secs: f64) -> &Queued {
        let at = match self.queued.iter().position(|q| q.kind == kind) {
            Some(at) => at,
            None => {
                let id = self.new_run_id();
                self.queued.push(Queued {
                    id,
                    kind,
                    trigger,
                    since: now_secs,
                });
                self.queued.len() - 1
            }
        };
        &self.queued[at]
    }

    /// Removes the queued run of `kind`, if any.
    fn take_queued(&mut self, kind: ReconcileKind) -> Option<Queued> {
        let at = self.queued.iter().position(|q| q.kind == kind)?;
        Some(self.queued.remove(at))
    }

    /// The ID of the queued run of `kind`, taken off the queue (it starts
    /// now), or a new ID.
    fn queued_id(&mut self, kind: ReconcileKind) -> u64 {
        match self.take_queued(kind) {
            Some(q) => q.id,
            None => self.new_run_id(),
        }
    }

    /// The next queued run: explicit before implicit.
    fn next_queued(&mut self) -> Option<Queued> {
        self.take_queued(ReconcileKind::Explicit)
            .or_else(|| self.take_queued(ReconcileKind::Implicit))
    }

    fn placeholder(queued: &Queued) -> ReconcileRun {
        ReconcileRun {
            id: queued.id,
            kind: queued.kind,
            trigger: queued.trigger,
            started_at: queued.since,
            finished_at: None,
            asked: 0,
            answered: 0,
            unanswered: Vec::new(),
            calls: 0,
            outcome: ReconcileOutcome::Queued,
        }
    }

    fn in_cooldown(&self, now: Instant) -> bool {
        self.last_end
            .is_some_and(|end| now.duration_since(end) < self.cfg.cooldown)
    }

    /// Records that `task_id` got an update (any update counts as an answer,
    /// as the guide's algorithm uses arrival times); `reconciliation` tells
    /// whether it was a reconciliation answer. An explicit run whose last
    /// task just answered converges at once (its `Finished` is returned).
    pub fn on_update(
        &mut self,
        task_id: &str,
        reconciliation: bool,
        now: Instant,
        now_secs: f64,
    ) -> Vec<Action> {
        let Some(running) = &mut self.running else {
            return Vec::new();
        };
        match running.view.kind {
            ReconcileKind::Explicit => {
                if running.asks.answer(task_id) {
                    running.view.answered += 1;
                    if running.asks.all_answered() {
                        return self.finish(ReconcileOutcome::Converged, now, now_secs);
                    }
                    // Answers still coming: the master is not done with
                    // the call, so asking again now would only repeat it.
                    // The wait counts from the last answer (tens of
                    // thousands of tasks take longer than the first wait
                    // to answer).
                    running.next_send = running.next_send.max(now + running.wait);
                    // Half the tasks asked so far answered: the next slice
                    // goes while the rest still come.
                    if running.asks.outstanding() <= self.cfg.explicit_slice.max(1) / 2
                        && running.asks.unsent()
                    {
                        let slice = running.asks.next_slice(self.cfg.explicit_slice);
                        if !slice.is_empty() {
                            running.view.calls += 1;
                            return vec![Action::Send(slice)];
                        }
                    }
                }
            }
            ReconcileKind::Implicit => {
                if reconciliation && !running.answered.contains(task_id) {
                    running.answered.insert(TaskId::from(task_id));
                    running.view.answered += 1;
                }
            }
        }
        Vec::new()
    }

    /// Advances time: retries, convergence, aborts, queued and periodic runs.
    /// `tasks` lists the non-terminal tasks to ask about if an explicit run
    /// starts.
    pub fn tick(
        &mut self,
        now: Instant,
        now_secs: f64,
        tasks: impl FnOnce() -> TaskList,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Some(running) = &mut self.running {
            match running.view.kind {
                ReconcileKind::Explicit => {
                    if running.asks.all_answered() {
                        actions.extend(self.finish(ReconcileOutcome::Converged, now, now_secs));
                    } else if now >= running.deadline {
                        // Every task not answered, asked already or not.
                        running.view.unanswered = running.asks.unanswered_ids();
                        actions.extend(self.finish(ReconcileOutcome::Aborted, now, now_secs));
                    } else if now >= running.next_send {
                        running.wait = running.backoff.next_delay();
                        running.next_send = now + running.wait;
                        running.view.calls += 1;
                        // Again the tasks asked and unanswered, then the
                        // next slice: a master silent about some tasks does
                        // not hold up the others.
                        let mut list = running.asks.unanswered_sent();
                        list.extend(running.asks.next_slice(self.cfg.explicit_slice));
                        actions.push(Action::Send(list));
                    }
                }
                ReconcileKind::Implicit => {
                    if now >= running.deadline {
                        actions.extend(self.finish(ReconcileOutcome::Converged, now, now_secs));
                    }
                }
            }
        }
        if self.running.is_none() && !self.in_cooldown(now) {
            let periodic_due = self.next_periodic.is_some_and(|at| now >= at);
            let next = self.next_queued().or_else(|| {
                periodic_due.then(|| Queued {
                    id: self.new_run_id(),
                    kind: ReconcileKind::Implicit,
                    trigger: ReconcileTrigger::Periodic,
                    since: now_secs,
                })
            });
            if let Some(next) = next {
                if next.trigger == ReconcileTrigger::Periodic || periodic_due {
                    self.next_periodic = Some(now + self.cfg.interval);
                }
                let list = if next.kind == ReconcileKind::Explicit {
                    tasks()
                } else {
                    Vec::new()
                };
                actions.extend(self.start(next.id, next.kind, next.trigger, list, now, now_secs));
            }
        }
        actions
    }

    fn start(
        &mut self,
        id: u64,
        kind: ReconcileKind,
        trigger: ReconcileTrigger,
        tasks: TaskList,
        now: Instant,
        now_secs: f64,
    ) -> Vec<Action> {
        let max = self.cfg.explicit_max_backoff;
        let mut backoff = Backoff::new(FIRST_BACKOFF.min(max), max);
        let first_wait = backoff.next_delay();
        let asks = match kind {
            ReconcileKind::Explicit => Asks::new(tasks),
            ReconcileKind::Implicit => Asks::default(),
        };
        let mut running = Running {
            view: ReconcileRun {
                id,
                kind,
                trigger,
                started_at: now_secs,
                finished_at: None,
                asked: asks.len(),
                answered: 0,
                unanswered: Vec::new(),
                calls: 1,
                outcome: ReconcileOutcome::Running,
            },
            backoff,
            wait: first_wait,
            next_send: now + first_wait,
            deadline: now
                + match kind {
                    ReconcileKind::Explicit => self.cfg.explicit_abort_timeout,
                    ReconcileKind::Implicit => self.cfg.implicit_window,
                },
            asks,
            answered: HashSet::new(),
        };
        if kind == ReconcileKind::Explicit && running.asks.is_empty() {
            // Nothing to ask: converged at once, nothing sent.
            running.view.calls = 0;
            self.running = Some(running);
            return self.finish(ReconcileOutcome::Converged, now, now_secs);
        }
        let send = match kind {
            ReconcileKind::Explicit => {
                Action::Send(running.asks.next_slice(self.cfg.explicit_slice))
            }
            ReconcileKind::Implicit => Action::Send(Vec::new()),
        };
        self.running = Some(running);
        vec![send]
    }

    fn finish(&mut self, outcome: ReconcileOutcome, now: Instant, now_secs: f64) -> Vec<Action> {
        let Some(mut running) = self.running.take() else {
            return Vec::new();
        };
        running.view.outcome = outcome;
        running.view.finished_at = Some(now_secs);
        self.last_end = Some(now);
        self.last_end_secs = Some(now_secs);
        self.remember(running.view.clone());
        vec![Action::Finished(running.view)]
    }

    fn remember(&mut self, run: ReconcileRun) {
        self.history.push_back(run);
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }

    /// True while a run is in progress.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// When [`tick`](Self::tick) next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let run = self.running.as_ref().map(|r| match r.view.kind {
            ReconcileKind::Explicit => r.next_send.min(r.deadline),
            ReconcileKind::Implicit => r.deadline,
        });
        let cooldown_end = self.last_end.map(|e| e + self.cfg.cooldown);
        let waiting = if !self.queued.is_empty() {
            cooldown_end
        } else {
            match (self.next_periodic, cooldown_end) {
                (Some(p), Some(c)) => Some(p.max(c)),
                (p, _) => p,
            }
        };
        match (run, waiting) {
            (Some(r), _) => Some(r),
            (None, w) => w,
        }
    }

    /// When the first queued run may start (see
    /// [`ReconciliationStatus::not_before`]): not before it was queued,
    /// nor before the cooldown after the last run ends.
    fn not_before(&self) -> Option<f64> {
        if self.running.is_some() {
            return None;
        }
        let first = self
            .queued
            .iter()
            .find(|q| q.kind == ReconcileKind::Explicit)
            .or(self.queued.first())?;
        let cooldown_end = self
            .last_end_secs
            .map(|end| end + self.cfg.cooldown.as_secs_f64());
        Some(cooldown_end.map_or(first.since, |end| end.max(first.since)))
    }

    /// The status shown on the overview.
    pub fn status(&self) -> ReconciliationStatus {
        ReconciliationStatus {
            running: self.running.as_ref().map(|r| r.view.clone()),
            queued: self.queued.iter().map(Self::placeholder).collect(),
            not_before: self.not_before(),
            history: self.history.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests;
