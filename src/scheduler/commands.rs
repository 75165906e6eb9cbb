//! Commands from the web layer to the scheduler, each with a reply channel.
//!
//! The web layer holds a [`SchedulerHandle`]: it reads snapshots and sends
//! commands. Only a leader's core acts on commands; on a replica that does
//! not lead (or whose core is not running) a command is answered at once with
//! [`CommandError::NotLeader`] carrying the leader's URL, so the web layer
//! can answer 503 with it (`docs/architecture.md#commands`).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};

use super::snapshot::{ReconcileKind, ReconcileRun, Snapshot};
use super::spec::{FieldError, ServiceSpec};
use crate::coordination::CoordinationError;
use crate::mesos::client::CallError;

/// The reply end of a command.
pub type Reply<T> = oneshot::Sender<Result<T, CommandError>>;

/// What the web layer can ask of the scheduler.
// PutService carries a whole spec (240 bytes): commands are rare (one per
// operator action) and moved once through a channel, so boxing it would
// only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Command {
    /// Start a reconciliation now (coalesced with a running one).
    Reconcile {
        /// Explicit or implicit.
        kind: ReconcileKind,
        /// The run started (or the running one it was merged into).
        reply: Reply<ReconcileRun>,
    },
    /// Send `kamikaze` to every executor of ours known from task records.
    Kamikaze {
        /// One result per executor.
        reply: Reply<Vec<KamikazeResult>>,
    },
    /// Tear the framework down (TEARDOWN), then delete the stored framework
    /// ID and task records; the replica stays up, registered as nothing.
    Teardown {
        /// What was torn down.
        reply: Reply<TeardownResult>,
    },
    /// Step down as leader and rejoin the election at the back.
    Abdicate {
        /// Answered once the core stopped.
        reply: Reply<()>,
    },
    /// In state `removed`: clear the stale framework ID and task records and
    /// register as a new framework.
    Reregister {
        /// Answered once the new SUBSCRIBE was sent.
        reply: Reply<()>,
    },
    /// Create or replace a service.
    PutService {
        /// The new spec (validated by the core too).
        spec: ServiceSpec,
        /// `true` if it replaced an existing service.
        reply: Reply<bool>,
    },
    /// Delete a service; its tasks are killed.
    DeleteService {
        /// The service name.
        name: String,
        /// `false` if there was no such service.
        reply: Reply<bool>,
    },
    /// Resume a halted rollout or roll back to the previous spec
    /// ([`super::rules::rollout`]). [`CommandError::NotFound`] without such a
    /// service, [`CommandError::Conflict`] when not halted (resume), or
    /// (rollback) without a rollout under way or halted, without a
    /// previous spec, or when `expected` is not the previous spec's
    /// fingerprint.
    Rollout {
        /// The service name.
        name: String,
        /// What to do.
        action: super::rules::rollout::RolloutAction,
        /// Rollback: the fingerprint of the spec to restore, as the
        /// operator saw it (`ServiceStatus::restore`); `None` skips the
        /// check.
        expected: Option<String>,
        /// Answered once the service record is stored (`true`).
        reply: Reply<bool>,
    },
}

/// How kamikaze went for one executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KamikazeResult {
    /// Agent ID.
    pub agent_id: super::AgentId,
    /// Agent hostname.
    pub hostname: String,
    /// Executor ID.
    pub executor_id: String,
    /// The master accepted the MESSAGE call (202). Delivery itself is not
    /// acknowledged by Mesos (`docs/mesos-protocol.md#framework-messages`).
    pub accepted: bool,
    /// The refusal, when not accepted.
    pub error: Option<String>,
}

/// What a teardown removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeardownResult {
    /// The framework torn down.
    pub framework_id: String,
    /// Task records deleted (the tasks die with the framework).
    pub tasks: usize,
}

/// Why a command was not carried out.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    /// This replica does not lead; `leader_url` is the leader's, if known.
    #[error("not the leader{}", leader_url.as_ref().map(|u| format!("; the leader is {u}")).unwrap_or_default())]
    NotLeader {
        /// The leader's advertised URL.
        leader_url: Option<String>,
    },
    /// Leadership was lost while the command ran (a fenced write refused,
    /// the term ended). [`SchedulerHandle::request`] answers it as
    /// [`CommandError::NotLeader`] with the new leader's URL.
    #[error("leadership was lost during the command")]
    LeadershipLost,
    /// The command does not apply now (e.g. reregister while subscribed).
    #[error("{0}")]
    Conflict(String),
    /// The request is invalid.
    #[error("invalid: {}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldError>),
    /// No such thing (service).
    #[error("not found: {0}")]
    NotFound(String),
    /// Mesos refused the call or could not be reached.
    #[error("Mesos: {0}")]
    Mesos(CallError),
    /// ZooKeeper failed; the kind tells a version conflict (someone else
    /// wrote the record) from an outage.
    #[error("ZooKeeper: {0}")]
    Store(CoordinationError),
    /// No answer within the handler timeout.
    #[error("the scheduler did not answer within {0:?}")]
    Timeout(Duration),
}

/// A store failure as a command's answer: losing leadership during the
/// write is [`CommandError::LeadershipLost`]; anything else keeps its kind.
impl From<CoordinationError> for CommandError {
    fn from(error: CoordinationError) -> Self {
        match error {
            CoordinationError::NotLeader => CommandError::LeadershipLost,
            other => CommandError::Store(other),
        }
    }
}

/// The web layer's way into the scheduler: snapshots to read, commands to
/// send. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SchedulerHandle {
    commands: mpsc::Sender<Command>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
}

impl SchedulerHandle {
    /// A handle over a command channel and a snapshot channel.
    pub fn new(commands: mpsc::Sender<Command>, snapshots: watch::Receiver<Arc<Snapshot>>) -> Self {
        SchedulerHandle {
            commands,
            snapshots,
        }
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshots.borrow().clone()
    }

    /// A receiver that wakes on every new snapshot (for live pages).
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }

    /// Sends a command built by `make` and waits at most `timeout` for its
    /// reply. Errors: [`CommandError::Timeout`], or [`CommandError::NotLeader`]
    /// when the scheduler is gone or lost leadership during the command —
    /// then with the new leader's URL once a snapshot names one (waiting for
    /// it within `timeout`), so the answer is the one a follower gives.
    pub async fn request<T>(
        &self,
        timeout: Duration,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, CommandError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let (tx, rx) = oneshot::channel();
        let sent = tokio::time::timeout(timeout, self.commands.send(make(tx))).await;
        let result = match sent {
            Err(_) => return Err(CommandError::Timeout(timeout)),
            // The supervisor is gone: the process is stopping.
            Ok(Err(_)) => Err(CommandError::NotLeader {
                leader_url: self.snapshot().leader_url(),
            }),
            Ok(Ok(())) => match tokio::time::timeout_at(deadline, rx).await {
                Err(_) => return Err(CommandError::Timeout(timeout)),
                // The term ended with the command unanswered.
                Ok(Err(_)) => Err(CommandError::LeadershipLost),
                Ok(Ok(result)) => result,
            },
        };
        match result {
            Err(CommandError::LeadershipLost) => Err(CommandError::NotLeader {
                leader_url: self.leader_url_after_loss(deadline).await,
            }),
            other => other,
        }
    }

    /// The leader's URL once this replica no longer leads and a snapshot
    /// names another leader; `None` if none does by `deadline`.
    async fn leader_url_after_loss(&self, deadline: tokio::time::Instant) -> Option<String> {
        let mut rx = self.snapshots.clone();
        let known = |s: &Snapshot| {
            (!s.leadership.is_leader())
                .then(|| s.leader_url())
                .flatten()
        };
        loop {
            if let Some(url) = known(&rx.borrow_and_update()) {
                return Some(url);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return None,
            }
        }
    }
}
