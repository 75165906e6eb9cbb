//! What an operator asks for: the desired workload as specs, and their
//! validation. A leaf of `scheduler/`: nothing here imports the records,
//! the rules or the core, so a spec can be parsed and validated (by the
//! web layer, from a services file) without them.
//!
//! - [`service`]: `ServiceSpec`, a long-running service of N instances,
//!   its constraints, and the services file;
//! - [`command`]: what a task runs, and the files fetched for it;
//! - [`container`]: the container a task runs in (Mesos or Docker), and
//!   [`image_ref`], Docker image references;
//! - [`health`]: the health check a task is launched with;
//! - [`upgrade`]: how a service's tasks are replaced after a change;
//! - [`unreachable`](mod@unreachable): how long an unreachable task is waited for, and which
//!   copy dies when it returns;
//! - [`errors`]: `FieldError`, one problem with one field;
//! - [`valid`]: `ValidServiceSpec`, a spec that passed its validation (the
//!   one the core accepts).
//!
//! - [`job`]: `JobSpec`, work that runs to completion (now or on a cron
//!   schedule); what its task runs is written as for a service.

pub mod bounds;
pub mod command;
pub mod container;
pub mod errors;
pub mod health;
pub mod image_ref;
pub mod job;
pub mod service;
pub mod unreachable;
pub mod upgrade;
pub mod valid;

pub use command::{CommandSpec, UriSpec};
pub use errors::FieldError;
pub use job::{JobSpec, ValidJobSpec};
pub use service::{Constraint, ExecutorKind, ServiceSpec};
pub use valid::ValidServiceSpec;
