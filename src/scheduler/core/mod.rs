//! The leader's core for one leadership term: a pure state machine and the
//! thin runner that does its I/O.
//!
//! # Shape
//!
//! ```text
//!   Mesos stream ─┐                                   ┌─ ZooKeeper (batched writes, many in flight)
//!   commands ─────┤     Input      ┌─────────┐ Effect │─ Mesos calls (offer calls in order)
//!   timers ───────┼──────────────▶ │ Machine │ ──────▶│─ acknowledgements (concurrent)
//!   I/O results ──┘                └─────────┘        │─ operator API, client start/stop
//!        ▲                                            └─ snapshots, log, replies, end of term
//!        └──────────────── runner ◀───────────────────────────┘
//! ```
//!
//! [`Machine`] owns everything the leader knows — framework state, services,
//! task records, offers, kills, reconciliation, restart backoff — and is
//! driven by [`Input`]s: stream events (SUBSCRIBED, OFFERS, RESCIND, batched
//! UPDATEs, FAILURE, HEARTBEAT), the client's disconnections and stop, the
//! results of the I/O it asked for (store results with typed
//! [`CoordinationError`]s, call
//! results, operator answers, each by [`RequestId`]), commands (by
//! [`ReplyId`]) and ticks. Each input returns [`Effects`]: store these
//! records, make these calls, acknowledge these updates, publish this
//! snapshot, log this event, answer this command, wake me at T, end the
//! term. Time is passed in as [`tokio::time::Instant`]; the machine has no
//! `async`, no I/O, no clock of its own, so unit tests drive it with paused
//! time and no Java (`machine/tests`).
//!
//! The runner (`runner`) owns the clients and channels. It feeds inputs in
//! stream order, performs effects concurrently, and feeds their results
//! back as inputs. A slow ZooKeeper write never blocks reading the event
//! stream, commands or timers: the machine goes on and the write's answer
//! comes when it comes. After a batch of inputs the runner calls
//! [`Machine::settle`], which runs the deferred scheduling pass and the
//! throttled snapshot.
//!
//! # Rules kept across the seam
//!
//! - **Ack after store.** A status update is acknowledged only after its
//!   record is stored (the acknowledgement is an effect of the store's
//!   result); an update whose write fails is not acknowledged and the agent
//!   sends it again. Updates without a uuid are never acknowledged. The
//!   exceptions are a launch's first steps: the executor's TASK_STARTING
//!   over a stored TASK_STAGING is kept in memory and acknowledged at once
//!   (the next write stores it), and the first TASK_RUNNING is acknowledged
//!   at once while its write is sent (`machine/tasks.rs`, `ahead_of_store`).
//! - **Record before ACCEPT.** A launch's records are stored first; its
//!   offer's ACCEPT is emitted when they are, with the tasks whose records
//!   made it, and only on the subscription the offer came from.
//! - **One write per task in flight**, each a compare-and-set on the
//!   record's version; later work for the task queues behind it.
//! - **No needless writes.** An update that changes nothing the record
//!   stores (same state: a reconciliation echo, a re-sent update) is not
//!   written; the time it confirmed the record is kept in memory.
//! - **Subscribe first.** A new leader reads the framework ID and services
//!   (small), starts the client, and reads the task records beside it;
//!   nothing is launched, killed or explicitly reconciled, and no update is
//!   acknowledged, until the records are known.
//! - Kills retry with backoff and resume in a new term; reconciliation
//!   (explicit after every subscription with backoff and abort, periodic
//!   implicit, manual runs with IDs), SUPPRESS / REVIVE, decline filters,
//!   restart backoff, the rolling-upgrade order, the framework-ID
//!   compare-and-set and mismatch, `hard`'s teardown, `removed`,
//!   failed-over and fenced, the refusal to register beside a same-name
//!   framework and "wary" after failing over: as `docs/architecture.md`
//!   describes them, one module each under `machine`.
//!
//! # Extending it
//!
//! New knowledge enters as an input and leaves as effects: e.g. the truth
//! about a framework the master removed while no replica was connected is
//! the SUBSCRIBE error (or an operator answer listing it completed) whose
//! effects are record writes and no KILL (`machine/removed.rs`); health-gated rollouts are a rule over status updates
//! (`healthy`) inside the scheduling pass, with their timers in
//! [`Effects::wake_at`].

mod io;
mod machine;
mod runner;

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use io::{
    Ack, Answer, Effect, Effects, Input, MesosCall, OperatorAnswer, OperatorFailure, OperatorOp,
    ReplyId, Request, RequestId, StoreOp, StoreResult, SubscribedInfo,
};
pub use machine::{Machine, MaintenanceWindow, Stats, TermInfo};
pub use runner::run_term;

use super::metrics::Metrics;
use super::snapshot::Snapshot;
use super::spec::service::ServiceSpec;
use crate::coordination::{CoordinationError, Coordinator};
use crate::mesos::client::ClientConfig;

/// What the core needs from the rest of the process; shared by every term.
#[derive(Clone)]
pub struct CoreDeps {
    /// Election and stores.
    pub coordinator: Arc<dyn Coordinator>,
    /// How to reach the Mesos master.
    pub client: ClientConfig,
    /// Metrics to update.
    pub metrics: Metrics,
    /// Where snapshots go.
    pub snapshots: watch::Sender<Arc<Snapshot>>,
    /// Services to store when ZooKeeper holds none (`--services`).
    pub initial_services: Vec<ServiceSpec>,
    /// Cancelled when a newer deployment fences this replica (`upgrade`,
    /// `hard`, `uninstall`): the term ends and the state becomes `fenced`.
    pub fence: CancellationToken,
}

/// Why a term ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TermOutcome {
    /// The term token was cancelled (suspension, expiry, close).
    LeadershipLost,
    /// The operator asked this replica to step down.
    Abdicated,
    /// Another scheduler subscribed with our framework ID (ERROR "Framework
    /// failed over"): step down and back off.
    FailedOver,
    /// The framework ID differs from ours: two schedulers registered at
    /// once, or another deployment replaced it; this one loses
    /// (`docs/deployment-strategies.md#framework-id-mismatch`).
    Mismatch(Mismatch),
    /// The term could not start: a read or write at its start failed.
    StartupFailed(StartupError),
}

impl std::fmt::Display for TermOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TermOutcome::LeadershipLost => f.write_str("leadership lost"),
            TermOutcome::Abdicated => f.write_str("abdicated"),
            TermOutcome::FailedOver => {
                f.write_str("another scheduler subscribed with our framework ID")
            }
            TermOutcome::Mismatch(why) => write!(f, "framework ID mismatch: {why}"),
            TermOutcome::StartupFailed(why) => write!(f, "the term could not start: {why}"),
        }
    }
}

/// How our framework ID and another one disagree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// The master assigned an ID while ZooKeeper got another one meanwhile.
    #[error(
        "the master registered us as {assigned} but ZooKeeper holds {stored}: another scheduler registered at the same time"
    )]
    Registered {
        /// The ID the master gave us.
        assigned: String,
        /// The ID in ZooKeeper.
        stored: String,
    },
    /// SUBSCRIBED named an ID other than ours.
    #[error("subscribed as {assigned} while our framework ID is {ours}")]
    Subscribed {
        /// The ID the master named.
        assigned: String,
        /// Ours.
        ours: String,
    },
    /// ZooKeeper now holds another ID (a newer deployment, `hard`,
    /// `uninstall`).
    #[error("ZooKeeper now holds framework ID {stored} but we run {ours}")]
    Replaced {
        /// The ID in ZooKeeper.
        stored: String,
        /// Ours.
        ours: String,
    },
}

/// Why a term could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartupError {
    /// A read at the start failed.
    #[error("reading {what}: {source}")]
    Read {
        /// What was read.
        what: &'static str,
        /// ZooKeeper's error.
        source: CoordinationError,
    },
    /// `hard`: the master's framework list could not be had.
    #[error("hard deployment: listing frameworks on the master: {0}")]
    HardList(OperatorFailure),
    /// `hard`: an earlier framework could not be torn down.
    #[error("hard deployment: tearing down {id}: {source}")]
    HardTeardown {
        /// The framework.
        id: String,
        /// The operator call's failure.
        source: OperatorFailure,
    },
    /// `hard`: forgetting the earlier framework failed.
    #[error("hard deployment: {step}: {source}")]
    HardStore {
        /// The step.
        step: &'static str,
        /// ZooKeeper's error.
        source: CoordinationError,
    },
    /// The `--services` file could not be written.
    #[error("storing service {name} from the services file: {source}")]
    ServicesFile {
        /// The service.
        name: String,
        /// ZooKeeper's error.
        source: CoordinationError,
    },
}
