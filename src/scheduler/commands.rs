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

use super::jobs::RunRecord;
use super::rules::rollout::RolloutAction;
use super::snapshot::{ReconcileKind, ReconcileRun, Snapshot};
use super::spec::{FieldError, ValidJobSpec, ValidServiceSpec};
use crate::coordination::CoordinationError;
use crate::mesos::client::CallError;

/// The channel a command's [`Answer`] goes back on.
pub type Reply = oneshot::Sender<Answer>;

/// A [`Request`] from the web layer paired with the channel its [`Answer`]
/// goes back on. The runner keeps the channel and hands the machine the
/// request under a `ReplyId` (`core::io`); the machine's
/// answer goes back unchanged, so the web and the core speak one
/// vocabulary.
#[derive(Debug)]
pub struct Command {
    /// What is asked.
    pub request: Request,
    /// Where the answer goes.
    pub reply: Reply,
    /// When the web layer made it: the runner logs how long it waited for
    /// the core (target `command_timing`, `docs/benchmarks.md`).
    pub sent_at: std::time::Instant,
}

impl Command {
    /// A command asking `request`, and the receiving end of its answer.
    pub fn new(request: Request) -> (Command, oneshot::Receiver<Answer>) {
        let (reply, rx) = oneshot::channel();
        let sent_at = std::time::Instant::now();
        (
            Command {
                request,
                reply,
                sent_at,
            },
            rx,
        )
    }

    /// Answers the command (a requester that gave up is no error).
    pub fn answer(self, answer: Answer) {
        let _ = self.reply.send(answer);
    }

    /// Answers the command without carrying it out.
    pub fn refuse(self, error: CommandError) {
        self.answer(Answer::Refused(error));
    }
}

/// What the web layer can ask of the scheduler.
// PutService carries a whole spec (boxed: requests are moved through the
// machine's inputs, which stay small).
#[derive(Debug, Clone)]
pub enum Request {
    /// Start (or join) a reconciliation, coalesced with a running one;
    /// answered with [`Answer::Reconcile`].
    Reconcile(ReconcileKind),
    /// Send `kamikaze` to every executor of ours known from task records;
    /// answered with [`Answer::Kamikaze`], one result per executor.
    Kamikaze,
    /// Tear the framework down (TEARDOWN), then delete the stored framework
    /// ID and task records; the replica stays up, registered as nothing.
    /// Answered with [`Answer::Teardown`].
    Teardown,
    /// Step down as leader and rejoin the election at the back; answered
    /// ([`Answer::Done`]) once the core stopped.
    Abdicate,
    /// In state `removed`: clear the stale framework ID and task records and
    /// register as a new framework; answered ([`Answer::Done`]) once the new
    /// SUBSCRIBE was sent.
    Reregister,
    /// Create or replace a service, validated by the caller (where the
    /// operator gets every field error); answered with [`Answer::Service`],
    /// `true` if it replaced one.
    PutService(Box<ValidServiceSpec>),
    /// Replace a service only if its stored spec is still at version
    /// `expected` ([`ServiceSpec::version`](super::spec::ServiceSpec::version)):
    /// a change made on a spec read earlier (a scale from the CLI, a
    /// dashboard form, an HTTP `If-Match`), checked when the core takes
    /// it, after any write of the service in flight. Answered as
    /// [`Request::PutService`]; [`CommandError::NotFound`] without the
    /// service, [`CommandError::PreconditionFailed`] when it changed.
    ReplaceService {
        /// The new spec.
        spec: Box<ValidServiceSpec>,
        /// The version(s) it may replace.
        expected: Expected,
    },
    /// Delete a service, its tasks are killed; answered with
    /// [`Answer::Service`], `false` if there was no such service. With
    /// `expected` (a page's or HTTP `If-Match`'s version), only if the
    /// stored spec is still at one of those versions, checked as for
    /// [`Request::ReplaceService`] after any write of the service in
    /// flight: [`CommandError::PreconditionFailed`] when it changed,
    /// nothing deleted.
    DeleteService {
        /// The service.
        name: String,
        /// The version(s) it may delete; `None`: whatever is stored.
        expected: Option<Expected>,
    },
    /// Resume a halted rollout or roll back to the previous spec
    /// ([`super::rules::rollout`]); answered with [`Answer::Service`] (`true`)
    /// once the service record is stored. [`CommandError::NotFound`]
    /// without such a service, [`CommandError::Conflict`] when not halted
    /// (resume), or (rollback) without a rollout under way or halted,
    /// without a previous spec, or when `expected` is not the previous
    /// spec's fingerprint.
    Rollout {
        /// The service.
        name: String,
        /// What to do.
        action: RolloutAction,
        /// Rollback: the fingerprint of the spec to restore, as the
        /// operator saw it (`ServiceStatus::restore`); `None` skips the
        /// check.
        expected: Option<String>,
    },
    /// Start an SLA-aware drain of an agent (`docs/draining.md`); answered
    /// with [`Answer::Drain`] once the drain record is stored.
    /// [`CommandError::NotFound`] for an agent the leader does not know,
    /// [`CommandError::Conflict`] when a drain of it runs or is done (a
    /// cancelled one is replaced).
    StartDrain {
        /// The agent.
        agent_id: super::AgentId,
        /// The floor per service.
        min_healthy: super::drains::MinHealthy,
        /// Why, if given.
        reason: Option<String>,
        /// Who asks (the audit actor's name).
        by: String,
        /// The operator call once done.
        then: super::drains::ThenAction,
    },
    /// Cancel the drain of an agent; answered with [`Answer::Drain`] once
    /// stored. [`CommandError::NotFound`] when no drain of it runs or is
    /// done.
    CancelDrain {
        /// The agent.
        agent_id: super::AgentId,
        /// Who asks.
        by: String,
    },
    /// Create or replace a job, validated by the caller; answered with
    /// [`Answer::Service`], `true` if it replaced one.
    /// [`CommandError::Conflict`] when a service has the name.
    PutJob(Box<ValidJobSpec>),
    /// Delete a job and its runs (running attempts are killed); answered
    /// with [`Answer::Service`], `false` if there was no such job.
    DeleteJob(String),
    /// Enable or disable a job's schedule; answered with
    /// [`Answer::Service`] (`true`) once stored. [`CommandError::NotFound`]
    /// without such a job, [`CommandError::Conflict`] without a schedule.
    SetJobEnabled {
        /// The job.
        name: String,
        /// The new `schedule.enabled`.
        enabled: bool,
    },
    /// Start a run of a job now; answered with [`Answer::Run`] once its run
    /// record is stored (its task launches when an offer fits).
    StartRun(Box<RunRequest>),
    /// Kill a run; answered with [`Answer::Run`] once the kill is stored
    /// (the run becomes `killed` when its task ends).
    /// [`CommandError::Conflict`] when it already finished.
    KillRun {
        /// The job.
        name: String,
        /// The run.
        run_id: String,
        /// Who asks, and why (`killed by <who>[: <why>]`).
        by: String,
    },
}

impl Request {
    /// The request's name in logs (`kind` of the `command_timing` lines).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Reconcile(_) => "reconcile",
            Request::Kamikaze => "kamikaze",
            Request::Teardown => "teardown",
            Request::Abdicate => "abdicate",
            Request::Reregister => "reregister",
            Request::PutService(_) => "put_service",
            Request::ReplaceService { .. } => "replace_service",
            Request::DeleteService { .. } => "delete_service",
            Request::Rollout { .. } => "rollout",
            Request::StartDrain { .. } => "start_drain",
            Request::CancelDrain { .. } => "cancel_drain",
            Request::PutJob(_) => "put_job",
            Request::DeleteJob(_) => "delete_job",
            Request::SetJobEnabled { .. } => "set_job_enabled",
            Request::StartRun(_) => "start_run",
            Request::KillRun { .. } => "kill_run",
        }
    }
}

/// A manual run of a job ([`Request::StartRun`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    /// The job.
    pub job: String,
    /// Arguments appended to the job's command.
    pub args: Vec<String>,
    /// Environment added to the job's.
    pub env: std::collections::BTreeMap<String, String>,
    /// Who asked (the audit's user).
    pub by: String,
    /// Why, as given.
    pub reason: Option<String>,
}

/// Which stored spec versions a [`Request::ReplaceService`] may replace:
/// an HTTP `If-Match` (RFC 9110 §13.1.1) as the core checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Any stored spec (`If-Match: *`): the service must exist.
    Any,
    /// One of these versions (`If-Match: "3"` or `"3", "4"`); empty when
    /// only weak tags were given, which never match (strong comparison).
    OneOf(Vec<String>),
}

impl Expected {
    /// Exactly `version` (the version a page or a CLI read).
    pub fn version(version: impl Into<String>) -> Expected {
        Expected::OneOf(vec![version.into()])
    }

    /// Whether the stored spec at version `now` may be replaced.
    pub fn admits(&self, now: &str) -> bool {
        match self {
            Expected::Any => true,
            Expected::OneOf(versions) => versions.iter().any(|v| v == now),
        }
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Any => f.write_str("any version"),
            Expected::OneOf(versions) if versions.is_empty() => f.write_str("no strong entity tag"),
            Expected::OneOf(versions) if versions.len() == 1 => {
                write!(f, "version {}", versions[0])
            }
            Expected::OneOf(versions) => write!(f, "versions {}", versions.join(", ")),
        }
    }
}

/// The answer to a [`Request`].
#[derive(Debug, Clone)]
pub enum Answer {
    /// To [`Request::Reconcile`]: the run started (or the running one it
    /// was merged into).
    Reconcile(Result<ReconcileRun, CommandError>),
    /// To [`Request::Kamikaze`].
    Kamikaze(Result<Vec<KamikazeResult>, CommandError>),
    /// To [`Request::Teardown`].
    Teardown(Result<TeardownResult, CommandError>),
    /// To [`Request::Abdicate`] and [`Request::Reregister`].
    Done(Result<(), CommandError>),
    /// To [`Request::PutService`] and [`Request::ReplaceService`] (`true`: replaced),
    /// [`Request::DeleteService`] (`false`: no such service) and
    /// [`Request::Rollout`].
    Service(Result<bool, CommandError>),
    /// To [`Request::StartDrain`] and [`Request::CancelDrain`]: the drain
    /// as stored.
    Drain(Result<super::drains::DrainRecord, CommandError>),
    /// To [`Request::StartRun`] and [`Request::KillRun`]: the run record
    /// as stored.
    Run(Result<RunRecord, CommandError>),
    /// To any request that reached no core (this replica does not lead):
    /// never given by the machine itself.
    Refused(CommandError),
}

/// A type some [`Answer`] carries, so that [`SchedulerHandle::request`]
/// hands the requester the answer it asked for.
pub trait Answered: Sized {
    /// The result inside `answer`, or `None` when `answer` carries another
    /// type (a bug: the request and its answer do not pair).
    fn from_answer(answer: Answer) -> Option<Result<Self, CommandError>>;
}

/// `Answered` for the type each of these [`Answer`] variants carries.
macro_rules! answered {
    ($($answer:ty => $variant:ident),* $(,)?) => {$(
        impl Answered for $answer {
            fn from_answer(answer: Answer) -> Option<Result<Self, CommandError>> {
                match answer {
                    Answer::$variant(result) => Some(result),
                    Answer::Refused(e) => Some(Err(e)),
                    _ => None,
                }
            }
        }
    )*};
}

answered!(
    ReconcileRun => Reconcile,
    Vec<KamikazeResult> => Kamikaze,
    TeardownResult => Teardown,
    () => Done,
    bool => Service,
    super::drains::DrainRecord => Drain,
    RunRecord => Run,
);

/// How kamikaze went for one executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
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
    /// The leader cannot take the command yet (it is still reading what
    /// the command is about from ZooKeeper after becoming leader); nothing
    /// was done, and the same command may be sent again shortly.
    #[error("{0}")]
    NotReady(String),
    /// No answer within the handler timeout.
    #[error("the scheduler did not answer within {0:?}")]
    Timeout(Duration),
    /// A conditional change whose condition no longer holds (the service
    /// changed since it was read: [`Request::ReplaceService`]); nothing
    /// was done.
    #[error("{0}")]
    PreconditionFailed(String),
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

    /// Sends `request` and waits at most `timeout` for its answer, as the
    /// type `T` that request is answered with. Errors:
    /// [`CommandError::Timeout`], or [`CommandError::NotLeader`] when the
    /// scheduler is gone or lost leadership during the command — then with
    /// the new leader's URL once a snapshot names one (waiting for it
    /// within `timeout`), so the answer is the one a follower gives.
    pub async fn request<T: Answered>(
        &self,
        timeout: Duration,
        request: Request,
    ) -> Result<T, CommandError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let kind = request.name();
        let (command, rx) = Command::new(request);
        let sent_at = command.sent_at;
        let sent = tokio::time::timeout(timeout, self.commands.send(command)).await;
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
                Ok(Ok(answer)) => {
                    tracing::debug!(
                        target: "command_timing",
                        kind,
                        total_ms = sent_at.elapsed().as_secs_f64() * 1000.0,
                        "received"
                    );
                    T::from_answer(answer).unwrap_or_else(|| {
                        Err(CommandError::Conflict(
                            "internal error: mismatched answer".into(),
                        ))
                    })
                }
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
