//! The scheduler: the leader's core actor that runs the workload, and the
//! types the web layer reads and sends.
//!
//! - [`services`]: the desired workload (`ServiceSpec`), validation, constraints;
//! - [`records`]: the task record persisted in ZooKeeper;
//! - [`snapshot`]: the immutable picture published after each change;
//! - [`commands`]: web → scheduler commands with replies, and [`SchedulerHandle`];
//! - [`core`]: the leader's state machine for one term (events, launches,
//!   kills, reconciliation, commands, snapshots) and the runner doing its I/O;
//! - [`deployment`]: deployment registration and fencing
//!   (`docs/deployment-strategies.md#fencing`);
//! - [`supervisor`]: runs the core while the replica leads, a standby view
//!   otherwise;
//! - [`offers`], [`placement`], [`reconcile`], [`kills`], [`workload`],
//!   [`rollout`] (health-gated rolling replacement),
//!   [`taskinfo`]: the core's pure parts; [`config`], [`metrics`].

pub mod commands;
pub mod config;
pub mod containers;
pub mod core;
pub mod counts;
pub mod deployment;
pub mod health;
pub mod ids;
pub mod image_ref;
pub mod kills;
pub mod metrics;
pub mod offers;
pub mod placement;
pub mod reconcile;
pub mod records;
pub mod rollout;
pub mod services;
pub mod snapshot;
pub mod standby;
pub mod supervisor;
pub mod taskinfo;
pub mod workload;

pub use commands::{
    Answer, Answered, Command, CommandError, KamikazeResult, Reply, Request, SchedulerHandle,
    TeardownResult,
};
pub use ids::{AgentId, TaskId};
pub use records::{KillRequest, StatusEntry, TaskRecord};
pub use services::{CommandSpec, Constraint, ExecutorKind, FieldError, ServiceSpec, UriSpec};
pub use snapshot::{
    EventEntry, EventKind, FrameworkState, FrameworkStatus, OfferSummary, ReconcileKind,
    ReconcileOutcome, ReconcileRun, ReconcileTrigger, ReconciliationStatus, ServiceStatus,
    Snapshot, UnrecordedKill,
};
