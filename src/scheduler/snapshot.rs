//! The immutable picture of the scheduler that the web layer reads.
//!
//! The leader's core actor publishes a new [`Snapshot`] after each change; a
//! replica that does not lead publishes a *standby* snapshot built from
//! ZooKeeper (leader identity from the election, services and tasks from
//! their stores). Either way it travels on one `watch::Receiver<Arc<Snapshot>>`,
//! so handlers never lock scheduler state. Tasks are shared `Arc`s: a new
//! snapshot copies pointers, not records.
//!
//! Every type here serializes to the JSON of `docs/architecture.md#http-api` (`/api/v1/state`,
//! `/api/v1/tasks`, …), snake_case keys, times in seconds since the UNIX epoch.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use super::counts::{
    InstanceBackoff, LastFailure, OffersSummary, RestoreTarget, ServiceCounts, ServiceStatus,
};
use super::ids::{AgentId, TaskId};
use super::records::TaskRecord;
pub use super::rules::reconcile::{
    ReconcileKind, ReconcileOutcome, ReconcileRun, ReconcileTrigger, ReconciliationStatus,
};
use crate::coordination::{DeploymentRecord, Leadership, ReplicaInfo, Strategy};
use crate::mesos::v1::TaskState;

/// Where the framework stands, as `framework.state` in `/api/v1/state`
/// (`docs/architecture.md#http-api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FrameworkState {
    /// This replica does not lead.
    Standby,
    /// Leading; subscribing to the master (also between re-subscriptions).
    Subscribing,
    /// Leading and subscribed.
    Subscribed,
    /// Leading; the subscription broke and is being re-established.
    Disconnected,
    /// The master removed the framework (failover timeout passed or torn
    /// down); waiting for the reregister action or `--on-framework-removed`.
    Removed,
    /// Another scheduler took over the framework ID (ERROR "Framework
    /// failed over"); this replica stepped back.
    FailedOver,
    /// A newer deployment fenced this replica; it is stopping.
    Fenced,
}

impl FrameworkState {
    /// The snake_case name used in JSON and on the dashboard.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameworkState::Standby => "standby",
            FrameworkState::Subscribing => "subscribing",
            FrameworkState::Subscribed => "subscribed",
            FrameworkState::Disconnected => "disconnected",
            FrameworkState::Removed => "removed",
            FrameworkState::FailedOver => "failed_over",
            FrameworkState::Fenced => "fenced",
        }
    }
}

/// The framework as `/api/v1/state` shows it under `framework`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FrameworkStatus {
    /// The framework ID (plain string); `None` before the first SUBSCRIBED.
    pub id: Option<String>,
    /// `FrameworkInfo.name`.
    pub name: String,
    /// `FrameworkInfo.role`.
    pub role: String,
    /// See [`FrameworkState`].
    pub state: FrameworkState,
    /// Why the state is what it is, when that matters (removed, failed over,
    /// fenced, refusing to register, ...).
    pub reason: Option<String>,
    /// `FrameworkInfo.failover_timeout` in seconds.
    pub failover_timeout_seconds: f64,
    /// Base URL of the leading Mesos master, when known.
    pub master: Option<String>,
    /// That master's version (`MasterInfo.version`).
    pub master_version: Option<String>,
    /// When the current subscription began.
    pub subscribed_at: Option<f64>,
    /// When the newest event the leader applied (of any kind, heartbeats
    /// too) was read off the Mesos stream: a lagging leader's heartbeat age
    /// includes its lag.
    pub last_event_at: Option<f64>,
    /// Age of the oldest event read off the stream and not yet applied,
    /// seconds, as of the snapshot (0 when none waits).
    #[serde(default)]
    pub event_lag_seconds: f64,
    /// Events read off the stream and not yet applied.
    #[serde(default)]
    pub event_inbox_depth: usize,
    /// The inbox is full: the stream is not read meanwhile, so the lag is a
    /// lower bound.
    #[serde(default)]
    pub event_inbox_full: bool,
    /// The master's heartbeat interval in seconds.
    pub heartbeat_interval_seconds: Option<f64>,
    /// The silence (no event of any kind) after which the Mesos client
    /// declares the subscription dead, seconds: `k ×` the heartbeat interval
    /// ([`ClientConfig::heartbeat_timeout`](crate::mesos::client::ClientConfig::heartbeat_timeout)).
    /// Readiness fails past it.
    #[serde(default)]
    pub heartbeat_timeout_seconds: Option<f64>,
    /// The deployment strategy this replica runs with.
    pub strategy: Strategy,
}

/// Where an agent stands, as the leader last learnt it (from the master's
/// `GET_AGENTS` and from its scheduler events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Registered and offering: new tasks may go there.
    Active,
    /// Lost by the master (FAILURE, TASK_UNREACHABLE, or no longer listed).
    Unreachable,
    /// The operator's DRAIN_AGENT is killing its tasks.
    Draining,
    /// Drained: no tasks left, deactivated until REACTIVATE_AGENT.
    Drained,
    /// DEACTIVATE_AGENT: no offers; its tasks keep running.
    Deactivated,
    /// Removed for good (MARK_AGENT_GONE, or a drain with `mark_gone`).
    Gone,
    /// Not known here: a replica that does not lead does not ask the
    /// master; it lists an agent from the task records and drains stored
    /// in ZooKeeper only (`web::agents::AgentsView`).
    Unknown,
}

impl AgentState {
    /// True when new tasks may be placed on an agent in this state.
    pub fn takes_new_tasks(self) -> bool {
        self == AgentState::Active
    }

    /// The state's name as the pages show it.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Active => "active",
            AgentState::Unreachable => "unreachable",
            AgentState::Draining => "draining",
            AgentState::Drained => "drained",
            AgentState::Deactivated => "deactivated",
            AgentState::Gone => "gone",
            AgentState::Unknown => "unknown",
        }
    }
}

/// A maintenance window of an agent's machine (`Unavailability` in
/// `include/mesos/v1/mesos.proto`), as the leader last saw it on an offer
/// or inverse offer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MaintenanceWindow {
    /// When it starts, seconds since the UNIX epoch.
    pub start: f64,
    /// How long it lasts, seconds; `None` for open-ended.
    pub duration_seconds: Option<f64>,
}

/// One agent of the leader's agent table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AgentStatus {
    /// Agent ID.
    pub agent_id: AgentId,
    /// Hostname (empty until an offer or GET_AGENTS named it).
    pub hostname: String,
    /// Where it stands.
    pub state: AgentState,
    /// Since when this leader sees it in `state`, seconds since the UNIX
    /// epoch: the leader's own observation, so at the earliest when this
    /// leader first heard of the agent in its term (a failover starts it
    /// again). What the master says outlives a failover:
    /// `registered_time` and `reregistered_time`. `0` where the replica
    /// cannot know it (`state` `unknown`).
    pub since: f64,
    /// When the master registered the agent, seconds since the UNIX epoch
    /// (GET_AGENTS' `registered_time`, `include/mesos/v1/master/master.proto`
    /// `Response.GetAgents.Agent`); `null` until GET_AGENTS listed it in
    /// this leader's term, and on a replica that does not lead.
    #[serde(default)]
    pub registered_time: Option<f64>,
    /// When the agent last re-registered with the master (after an agent
    /// or master restart), GET_AGENTS' `reregistered_time`; `null` when it
    /// did not, or as `registered_time`.
    #[serde(default)]
    pub reregistered_time: Option<f64>,
    /// Its machine's maintenance window, when one is known: the leader
    /// learns it from offers and inverse offers that carry it (`null`
    /// says none was seen, not that none is scheduled).
    pub maintenance: Option<MaintenanceWindow>,
    /// This framework's live tasks there, sorted. Shared: a command's
    /// answer (a light snapshot) shows the last full snapshot's lists and
    /// copies one pointer per agent, not one per task.
    #[schema(value_type = Vec<TaskId>)]
    pub tasks: Arc<[TaskId]>,
    /// The appliance's SLA-aware drain of the agent, with its progress
    /// (`null`: none; `docs/draining.md`).
    #[serde(default)]
    pub drain: Option<crate::scheduler::drains::DrainStatus>,
}

/// An offer the leader holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OfferSummary {
    /// Offer ID.
    pub id: String,
    /// Agent ID.
    pub agent_id: String,
    /// Agent hostname.
    pub hostname: String,
    /// Offered CPUs.
    pub cpus: f64,
    /// Offered memory, MB.
    pub mem: f64,
    /// Offered disk, MB.
    pub disk: f64,
    /// Offered port ranges, Mesos text form (`[31000-32000]`).
    pub ports: String,
    /// When it arrived.
    pub received_at: f64,
    /// When it will be declined if unused (`--offer-ttl`); it is kept
    /// longer while a launch the leader paces waits for it.
    pub expires_at: f64,
}

/// What an [`EventEntry`] is about; `/api/v1/events?kind=` filters by it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// An operator action (reconcile, kamikaze, teardown, services…).
    Action,
    /// An agent lost or an executor exited.
    Agent,
    /// The subscription broke.
    Disconnected,
    /// Something failed: a refusal, a write, a call.
    Error,
    /// The framework's registration: refusals, removal, failover.
    Framework,
    /// A task is being killed.
    Kill,
    /// Tasks were launched.
    Launch,
    /// Leadership began or ended.
    Leadership,
    /// A framework message from an executor.
    Message,
    /// SUPPRESS / REVIVE.
    Offers,
    /// A reconciliation run ended.
    Reconcile,
    /// A service waits for offers it cannot get.
    Service,
    /// Subscribed to a master.
    Subscribed,
    /// A task ended on its own.
    Task,
}

impl EventKind {
    /// Every kind, sorted by name.
    pub const ALL: [EventKind; 14] = [
        EventKind::Action,
        EventKind::Agent,
        EventKind::Disconnected,
        EventKind::Error,
        EventKind::Framework,
        EventKind::Kill,
        EventKind::Launch,
        EventKind::Leadership,
        EventKind::Message,
        EventKind::Offers,
        EventKind::Reconcile,
        EventKind::Service,
        EventKind::Subscribed,
        EventKind::Task,
    ];

    /// The snake_case name used in JSON, URLs and on the pages.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Action => "action",
            EventKind::Agent => "agent",
            EventKind::Disconnected => "disconnected",
            EventKind::Error => "error",
            EventKind::Framework => "framework",
            EventKind::Kill => "kill",
            EventKind::Launch => "launch",
            EventKind::Leadership => "leadership",
            EventKind::Message => "message",
            EventKind::Offers => "offers",
            EventKind::Reconcile => "reconcile",
            EventKind::Service => "service",
            EventKind::Subscribed => "subscribed",
            EventKind::Task => "task",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something worth showing on the events page: ERRORs, failovers,
/// leadership changes, actions, subscriptions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventEntry {
    /// When, seconds since the UNIX epoch.
    pub at: f64,
    /// What it is about.
    pub kind: EventKind,
    /// What happened, in an operator's words.
    pub message: String,
}

/// Everything the web layer shows, as of `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Snapshot {
    /// When this snapshot was made.
    pub at: f64,
    /// This replica.
    pub replica: ReplicaInfo,
    /// This replica's place in the election (the leader's info on followers).
    pub leadership: Leadership,
    /// The framework.
    pub framework: FrameworkStatus,
    /// The deployment record, when known.
    pub deployment: Option<DeploymentRecord>,
    /// Services with their counts.
    pub services: Vec<ServiceStatus>,
    /// Task records, sorted by task ID. Shared: a snapshot that keeps the
    /// last task list (a command's answer between full snapshots) copies
    /// one pointer, not 100,000 (whose reference counts each touch another
    /// cache line).
    #[schema(value_type = Vec<TaskRecord>)]
    pub tasks: Arc<[Arc<TaskRecord>]>,
    /// Offers held (leader only). Shared: rebuilt only when the held
    /// offers change (1,000 offers' port ranges were formatted again for
    /// every snapshot, a command's answer included).
    #[schema(value_type = Vec<OfferSummary>)]
    pub offers: Arc<[OfferSummary]>,
    /// The agent table, by agent ID (leader only).
    #[serde(default)]
    pub agents: Vec<AgentStatus>,
    /// When the master last listed its agents to this leader (GET_AGENTS,
    /// seconds since the UNIX epoch). `None` before its first answer in
    /// this leader's term, when `agents` holds only those the offers and
    /// status updates named so far (often none), and on a replica that
    /// does not lead.
    #[serde(default)]
    pub agents_listed_at: Option<f64>,
    /// Reconciliation runs.
    pub reconciliation: ReconciliationStatus,
    /// Recent events, oldest first.
    pub events: Vec<EventEntry>,
    /// Kills of tasks this framework has no record of (reported by the
    /// master, e.g. in reconciliation), still awaiting a terminal update.
    #[serde(default)]
    pub unrecorded_kills: Vec<UnrecordedKill>,
    /// Jobs with their kept runs, by name (`docs/jobs.md`).
    #[serde(default)]
    pub jobs: Vec<super::jobs::JobStatus>,
    /// The stored records are not all read yet: `services` and `tasks`
    /// (and every count made of them) hold only what is read so far, not
    /// what is stored. True on a new leader until its term has loaded the
    /// services and the task records (`core::machine::startup`), at the
    /// moment a replica is elected, and on a replica that does not lead
    /// until its first read of the task records (`standby`).
    #[serde(default)]
    pub loading: bool,
}

/// A KILL the leader keeps re-sending for a task it has no record of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UnrecordedKill {
    /// The task ID the master reported.
    pub task_id: TaskId,
    /// Its agent, when the master said.
    pub agent_id: Option<AgentId>,
    /// Why it is being killed.
    pub reason: String,
    /// KILL calls sent so far.
    pub attempts: u32,
}

impl Snapshot {
    /// An empty standby snapshot for `replica` (before anything is known:
    /// [`Snapshot::loading`]).
    pub fn standby(
        replica: ReplicaInfo,
        framework_name: &str,
        role: &str,
        strategy: Strategy,
    ) -> Snapshot {
        Snapshot {
            at: crate::util::unix_now_secs(),
            replica,
            leadership: Leadership::Candidate,
            framework: FrameworkStatus {
                id: None,
                name: framework_name.to_string(),
                role: role.to_string(),
                state: FrameworkState::Standby,
                reason: None,
                failover_timeout_seconds: 0.0,
                master: None,
                master_version: None,
                subscribed_at: None,
                last_event_at: None,
                event_lag_seconds: 0.0,
                event_inbox_depth: 0,
                event_inbox_full: false,
                heartbeat_interval_seconds: None,
                heartbeat_timeout_seconds: None,
                strategy,
            },
            deployment: None,
            services: Vec::new(),
            tasks: Default::default(),
            offers: Arc::from([]),
            agents: Vec::new(),
            agents_listed_at: None,
            reconciliation: ReconciliationStatus::default(),
            events: Vec::new(),
            unrecorded_kills: Vec::new(),
            jobs: Vec::new(),
            loading: true,
        }
    }

    /// Number of tasks in each Mesos state, e.g. `[(TASK_RUNNING, 20)]`,
    /// sorted by state name.
    pub fn task_counts(&self) -> Vec<(TaskState, usize)> {
        let mut counts = std::collections::BTreeMap::<&str, (TaskState, usize)>::new();
        for t in self.tasks.iter() {
            counts
                .entry(t.state.as_str_name())
                .or_insert((t.state, 0))
                .1 += 1;
        }
        counts.into_values().collect()
    }

    /// The leader's advertised URL, when another replica leads.
    pub fn leader_url(&self) -> Option<String> {
        match &self.leadership {
            Leadership::Leader { .. } => Some(self.replica.advertised_url.clone()),
            Leadership::Follower { leader } => leader.as_ref().map(|l| l.advertised_url.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_are_listed_once_in_name_order() {
        for kind in EventKind::ALL {
            // A new variant must be added to ALL: this match stops compiling.
            match kind {
                EventKind::Action
                | EventKind::Agent
                | EventKind::Disconnected
                | EventKind::Error
                | EventKind::Framework
                | EventKind::Kill
                | EventKind::Launch
                | EventKind::Leadership
                | EventKind::Message
                | EventKind::Offers
                | EventKind::Reconcile
                | EventKind::Service
                | EventKind::Subscribed
                | EventKind::Task => {}
            }
            assert_eq!(EventKind::from_name(kind.as_str()), Some(kind));
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.as_str());
        }
        assert!(
            EventKind::ALL
                .windows(2)
                .all(|w| w[0].as_str() < w[1].as_str())
        );
    }

    #[test]
    fn reconcile_names_are_the_documented_strings() {
        let json = serde_json::to_value(ReconcileTrigger::AfterExplicit).unwrap();
        assert_eq!(json, "after explicit");
        let json = serde_json::to_value(ReconcileOutcome::Superseded).unwrap();
        assert_eq!(json, "superseded");
        assert!(ReconcileOutcome::Aborted.is_finished() && !ReconcileOutcome::Queued.is_finished());
    }
}
