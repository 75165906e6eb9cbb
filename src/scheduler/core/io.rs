//! The machine's vocabulary: what goes in ([`Input`]), what comes out
//! ([`Effect`]), and the requests and results that pair them by ID.
//!
//! Everything here is plain data: no channels, no clients, no futures. The
//! runner turns effects into I/O and the outcomes back into inputs; a unit
//! test plays the runner's part by hand.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::coordination::{
    CoordinationError, DeploymentRecord, Expect, RecordList, Versioned, Written,
};
use crate::mesos::client::{CallError, DisconnectReason, StopReason};
use crate::mesos::operator::{Frameworks, OperatorError};
use crate::mesos::v1;
// The requests and answers are the web layer's own vocabulary: the
// machine takes and gives them unchanged.
pub use crate::scheduler::commands::{Answer, Request};
use crate::scheduler::ids::{AgentId, FrameworkId, TaskId};
use crate::scheduler::jobs::{JobRecord, RunRecord};
use crate::scheduler::records::ServiceRecord;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::reconcile::TaskList;
use crate::scheduler::snapshot::{EventEntry, Snapshot};

use super::TermOutcome;

/// Pairs an effect that wants an answer (a store operation, a Mesos call,
/// an operator call) with the input that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Pairs a command with its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplyId(pub u64);

/// What happens to the machine. Stream events arrive in stream order;
/// results arrive whenever their I/O ends.
#[derive(Debug, Clone)]
pub enum Input {
    /// SUBSCRIBED on a (new) event stream.
    Subscribed(SubscribedInfo),
    /// OFFERS.
    Offers(Vec<v1::Offer>),
    /// RESCIND of an offer.
    Rescind(String),
    /// INVERSE_OFFERS: agents to give back before their maintenance window.
    InverseOffers(Vec<v1::InverseOffer>),
    /// RESCIND_INVERSE_OFFER.
    RescindInverseOffer(String),
    /// UPDATEs, consecutive ones of the stream in one batch.
    Updates(Vec<v1::TaskStatus>),
    /// FAILURE of an agent: its offers are void.
    AgentLost(AgentId),
    /// FAILURE of an executor.
    ExecutorExited {
        /// Its agent.
        agent_id: AgentId,
        /// The executor.
        executor_id: String,
        /// Its wait status, when the master said.
        status: Option<i32>,
    },
    /// MESSAGE from an executor.
    FrameworkMessage {
        /// The executor.
        executor_id: String,
        /// Size of its data.
        bytes: usize,
    },
    /// HEARTBEAT.
    Heartbeat,
    /// Any other event (it shows the stream is alive).
    OtherEvent,
    /// The stream broke; the client is subscribing again.
    Disconnected(DisconnectReason),
    /// The client stopped for good.
    ClientStopped(StopReason),
    /// A store operation ended.
    Stored {
        /// The [`Effect::Store`] it answers.
        id: RequestId,
        /// What came back.
        result: StoreResult,
    },
    /// A Mesos call was answered (202) or failed.
    Called {
        /// The [`Effect::Call`] it answers.
        id: RequestId,
        /// `Ok` when the master accepted it.
        result: Result<(), CallError>,
    },
    /// An operator-API call ended.
    Operator {
        /// The [`Effect::Operator`] it answers.
        id: RequestId,
        /// What came back.
        answer: OperatorAnswer,
    },
    /// A command from the web layer.
    Command {
        /// Answer with [`Effect::Reply`] under this ID.
        id: ReplyId,
        /// What is asked.
        request: Request,
    },
    /// The time given by the last [`Effects::wake_at`] came.
    Tick,
}

impl Input {
    /// The input's name in logs (the `kind` of `command_timing`'s `step`
    /// lines): a command's request name, else the variant's.
    pub fn name(&self) -> &'static str {
        match self {
            Input::Subscribed(_) => "subscribed",
            Input::Offers(_) => "offers",
            Input::Rescind(_) => "rescind",
            Input::InverseOffers(_) => "inverse_offers",
            Input::RescindInverseOffer(_) => "rescind_inverse_offer",
            Input::Updates(_) => "updates",
            Input::AgentLost(_) => "agent_lost",
            Input::ExecutorExited { .. } => "executor_exited",
            Input::FrameworkMessage { .. } => "framework_message",
            Input::Heartbeat => "heartbeat",
            Input::OtherEvent => "other_event",
            Input::Disconnected(_) => "disconnected",
            Input::ClientStopped(_) => "client_stopped",
            Input::Stored { .. } => "stored",
            Input::Called { .. } => "called",
            Input::Operator { .. } => "operator",
            Input::Command { request, .. } => request.name(),
            Input::Tick => "tick",
        }
    }
}

/// What SUBSCRIBED told, as data.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribedInfo {
    /// The framework ID the master assigned or confirmed.
    pub framework_id: FrameworkId,
    /// The master's base URL.
    pub master: String,
    /// Its version (`MasterInfo.version`), when given.
    pub master_version: Option<String>,
    /// `heartbeat_interval_seconds`.
    pub heartbeat_interval: Duration,
    /// The silence after which the client gives the stream up.
    pub heartbeat_timeout: Duration,
}

/// A store operation. Task writes go to ZooKeeper in batches; the others
/// one by one, next to them.
#[derive(Debug, Clone)]
pub enum StoreOp {
    /// Read the framework ID ([`StoreResult::FrameworkId`]).
    ReadFrameworkId,
    /// Store a new framework ID ([`StoreResult::Written`]; a different stored
    /// ID is [`CoordinationError::Mismatch`]).
    StoreFrameworkId(FrameworkId),
    /// Delete the framework ID ([`StoreResult::Written`]).
    DeleteFrameworkId,
    /// Read the deployment record ([`StoreResult::Deployment`]).
    ReadDeployment,
    /// Write the deployment record ([`StoreResult::Written`]).
    WriteDeployment(DeploymentRecord, Expect),
    /// List the services ([`StoreResult::Services`]).
    ListServices,
    /// Write a service's record ([`StoreResult::Written`]).
    PutService(Box<ServiceRecord>, Expect),
    /// Delete a service ([`StoreResult::Written`]).
    DeleteService(String, Expect),
    /// List the task records ([`StoreResult::Tasks`]).
    ListTasks,
    /// Read one task record ([`StoreResult::Task`]).
    ReadTask(TaskId),
    /// Write a task record ([`StoreResult::Written`]); batched.
    PutTask(Arc<TaskRecord>, Expect),
    /// Delete a task record ([`StoreResult::Written`]); batched.
    DeleteTask(TaskId, Expect),
    /// Delete every task record ([`StoreResult::Count`]).
    DeleteAllTasks,
    /// Append an entry (the JSON of the web layer's audit entry) to the
    /// audit log ([`StoreResult::Written`], the entry's sequence number as
    /// its version): what the scheduler decided on its own that an
    /// operator must be able to find.
    AppendAudit(Box<serde_json::Value>),
    /// List the agents' drains ([`StoreResult::Drains`]).
    ListDrains,
    /// Write an agent's drain ([`StoreResult::Written`]), fenced.
    PutDrain(Box<crate::scheduler::drains::DrainRecord>, Expect),
    /// List the job records ([`StoreResult::Jobs`]).
    ListJobs,
    /// Write a job record ([`StoreResult::Written`]).
    PutJob(Box<JobRecord>, Expect),
    /// Delete a job record ([`StoreResult::Written`]).
    DeleteJob(String, Expect),
    /// List the run records ([`StoreResult::Runs`]).
    ListRuns,
    /// Write a run record ([`StoreResult::Written`]): a new run's with
    /// [`Expect::Absent`] before its first attempt launches.
    PutRun(Arc<RunRecord>, Expect),
    /// Delete a run record by key `<job>.<run-id>` ([`StoreResult::Written`]).
    DeleteRun(String, Expect),
}

impl StoreOp {
    /// A write an operator's command makes (a service, a drain, a job or a
    /// run, the audit log), as opposed to the leader's own reads, checks
    /// and task writes (the store lane keeps task batches small while these
    /// come, `runner/store.rs`).
    pub fn is_command_write(&self) -> bool {
        matches!(
            self,
            StoreOp::PutService(..)
                | StoreOp::DeleteService(..)
                | StoreOp::PutDrain(..)
                | StoreOp::PutJob(..)
                | StoreOp::DeleteJob(..)
                | StoreOp::PutRun(..)
                | StoreOp::AppendAudit(..)
        )
    }
}

/// What a store operation gave, errors typed.
#[derive(Debug, Clone)]
pub enum StoreResult {
    /// The framework ID, if stored.
    FrameworkId(Result<Option<FrameworkId>, CoordinationError>),
    /// The deployment record, if any.
    Deployment(Result<Option<Versioned<DeploymentRecord>>, CoordinationError>),
    /// The stored services (undecodable ones listed apart).
    Services(Result<RecordList<ServiceRecord>, CoordinationError>),
    /// The stored task records (undecodable ones listed apart).
    Tasks(Result<RecordList<TaskRecord>, CoordinationError>),
    /// One task record, if present (boxed: records are large).
    Task(Box<Result<Option<Versioned<TaskRecord>>, CoordinationError>>),
    /// The stored job records.
    Jobs(Result<RecordList<JobRecord>, CoordinationError>),
    /// The stored run records.
    Runs(Result<RecordList<RunRecord>, CoordinationError>),
    /// A write or delete.
    Written(Result<Written, CoordinationError>),
    /// A bulk delete: how many went.
    Count(Result<usize, CoordinationError>),
    /// The stored drains (undecodable ones listed apart).
    Drains(Result<RecordList<crate::scheduler::drains::DrainRecord>, CoordinationError>),
}

/// A Mesos scheduler call. Offer calls (ACCEPT, DECLINE, SUPPRESS, REVIVE)
/// reach the master in the order emitted; the others may overtake them.
#[derive(Debug, Clone, PartialEq)]
pub enum MesosCall {
    /// ACCEPT one offer with these operations; the rest is refused for
    /// `refuse_seconds`.
    Accept {
        /// The offer.
        offer_id: String,
        /// LAUNCH operations.
        operations: Vec<v1::offer::Operation>,
        /// Filter for the unused resources, seconds.
        refuse_seconds: f64,
    },
    /// DECLINE offers; `None` is the master's default filter (5 s).
    Decline {
        /// The offers.
        offer_ids: Vec<String>,
        /// Filter, seconds.
        refuse_seconds: Option<f64>,
    },
    /// KILL a task with a grace period.
    Kill {
        /// The task.
        task_id: TaskId,
        /// Its agent, when known.
        agent_id: Option<AgentId>,
        /// SIGTERM → SIGKILL grace period.
        grace: Duration,
    },
    /// RECONCILE these tasks (empty: implicit).
    Reconcile(TaskList),
    /// SUPPRESS offers.
    Suppress,
    /// REVIVE offers.
    Revive,
    /// MESSAGE to an executor.
    Message {
        /// Its agent.
        agent_id: AgentId,
        /// The executor.
        executor_id: String,
        /// The bytes.
        data: Vec<u8>,
    },
    /// TEARDOWN the framework.
    Teardown,
    /// ACCEPT_INVERSE_OFFERS (`accept`) or DECLINE_INVERSE_OFFERS.
    AnswerInverseOffers {
        /// The inverse offers.
        inverse_offer_ids: Vec<String>,
        /// Accept or decline.
        accept: bool,
        /// Filter: no new inverse offer for the agent for this long, seconds.
        refuse_seconds: f64,
    },
}

/// An acknowledgement of a status update (only updates with a uuid).
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// The agent that sent it.
    pub agent_id: AgentId,
    /// The task.
    pub task_id: TaskId,
    /// The update's uuid.
    pub uuid: Vec<u8>,
}

/// An operator-API call to the master.
#[derive(Debug, Clone, PartialEq)]
pub enum OperatorOp {
    /// GET_FRAMEWORKS, given up after `within` when set.
    ListFrameworks {
        /// How long to wait at most.
        within: Option<Duration>,
    },
    /// TEARDOWN of a framework ID.
    Teardown(String),
    /// GET_AGENTS, given up after `within`.
    ListAgents {
        /// How long to wait at most.
        within: Duration,
    },
    /// DRAIN_AGENT of an agent (no grace period override, not marked
    /// gone), given up after `within`.
    DrainAgent {
        /// The agent.
        agent: AgentId,
        /// How long to wait at most.
        within: Duration,
    },
    /// DEACTIVATE_AGENT of an agent, given up after `within`.
    DeactivateAgent {
        /// The agent.
        agent: AgentId,
        /// How long to wait at most.
        within: Duration,
    },
    /// REACTIVATE_AGENT of an agent (deactivated, or drained by the
    /// master), given up after `within`.
    ReactivateAgent {
        /// The agent.
        agent: AgentId,
        /// How long to wait at most.
        within: Duration,
    },
}

/// Why an operator call gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OperatorFailure {
    /// The master refused or could not be reached.
    #[error(transparent)]
    Failed(OperatorError),
    /// No answer within the wait asked for; `no_leader` says why when no
    /// leading master is known.
    #[error("gave up after {} s{}", after.as_secs(), no_leader.as_ref().map(|w| format!(" (no leading master: {w})")).unwrap_or_default())]
    TimedOut {
        /// The wait.
        after: Duration,
        /// The leader detector's problem, if any.
        no_leader: Option<String>,
    },
}

/// What an operator call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum OperatorAnswer {
    /// GET_FRAMEWORKS.
    Frameworks(Result<Frameworks, OperatorFailure>),
    /// TEARDOWN.
    TornDown(Result<(), OperatorFailure>),
    /// GET_AGENTS.
    Agents(Result<Vec<crate::mesos::operator::Agent>, OperatorFailure>),
    /// DRAIN_AGENT, DEACTIVATE_AGENT or REACTIVATE_AGENT.
    AgentCalled(Result<(), OperatorFailure>),
}

/// What the machine asks for.
#[derive(Debug, Clone)]
pub enum Effect {
    /// A store operation; answered by [`Input::Stored`].
    Store {
        /// Pairs the answer.
        id: RequestId,
        /// The operation.
        op: StoreOp,
    },
    /// A Mesos call; answered by [`Input::Called`].
    Call {
        /// Pairs the answer.
        id: RequestId,
        /// The call.
        call: MesosCall,
    },
    /// Acknowledge these updates (their records are stored); not answered.
    Acknowledge(Vec<Ack>),
    /// An operator-API call; answered by [`Input::Operator`].
    Operator {
        /// Pairs the answer.
        id: RequestId,
        /// The call.
        op: OperatorOp,
    },
    /// Start the Mesos client (stopping any running one) with this
    /// FrameworkInfo.
    StartClient(Box<v1::FrameworkInfo>),
    /// Stop the Mesos client: its stream closes, its calls fail.
    StopClient,
    /// Publish this snapshot (the runner adds the election's view).
    Publish(Box<Snapshot>),
    /// An event for the log (the machine keeps it for the events page).
    Log(EventEntry),
    /// A line for the log only (retries, transient failures).
    Warn(String),
    /// Answer command `id`.
    Reply {
        /// The command.
        id: ReplyId,
        /// Its answer.
        answer: Answer,
    },
    /// End the term with this outcome; the runner then calls
    /// [`Machine::end`](super::Machine::end).
    EndTerm(TermOutcome),
}

/// The effects of one input, and when to send [`Input::Tick`] next.
#[derive(Debug, Default)]
pub struct Effects {
    /// In the order the machine decided them.
    pub items: Vec<Effect>,
    /// The next timer, if any.
    pub wake_at: Option<Instant>,
}
