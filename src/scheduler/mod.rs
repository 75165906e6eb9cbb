//! The scheduler: the leader's core actor that runs the workload, and the
//! types the web layer reads and sends.
//!
//! Bottom to top (an entry imports only the ones above it in this list):
//!
//! - [`ids`]: task and agent IDs;
//! - [`spec`]: what an operator asks for (`ServiceSpec` and its parts,
//!   validation); a leaf;
//! - [`records`]: what ZooKeeper keeps of tasks and services;
//! - [`rules`]: the pure rules the core applies (offers, placement,
//!   workload, rollout, reconciliation, kills, `TaskInfo` building);
//! - [`counts`], [`snapshot`]: the immutable picture published after each
//!   change, and the per-service counts both leader and standby compute;
//! - [`commands`]: web → scheduler commands with replies, and
//!   [`SchedulerHandle`]; [`config`], [`metrics`];
//! - [`core`]: the leader's state machine for one term and the runner doing
//!   its I/O;
//! - [`standby`], [`supervisor`]: runs the core while the replica leads, a
//!   standby view otherwise.

pub mod commands;
pub mod config;
pub mod core;
pub mod counts;
pub mod drains;
pub mod ids;
pub mod jobs;
pub mod metrics;
pub mod records;
pub mod rules;
pub mod snapshot;
pub mod spec;
pub mod standby;
pub mod supervisor;

pub use commands::{
    Answer, Answered, Command, CommandError, Expected, KamikazeResult, Reply, Request,
    SchedulerHandle, TeardownResult,
};
pub use ids::{AgentId, TaskId};
pub use records::{KillRequest, StatusEntry, TaskRecord};
pub use snapshot::{
    EventEntry, EventKind, FrameworkState, FrameworkStatus, InstanceBackoff, OfferSummary,
    ReconcileKind, ReconcileOutcome, ReconcileRun, ReconcileTrigger, ReconciliationStatus,
    ServiceStatus, Snapshot, UnrecordedKill,
};
pub use spec::{CommandSpec, Constraint, ExecutorKind, FieldError, ServiceSpec, UriSpec};
