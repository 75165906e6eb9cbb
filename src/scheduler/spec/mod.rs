//! What an operator asks for: the desired workload as specs, and their
//! validation. A leaf of `scheduler/`: nothing here imports the records,
//! the rules or the core, so a spec can be read, parsed and validated
//! (by the web layer, by a services file) without them.
//!
//! - [`service`]: `ServiceSpec`, a long-running service of N instances,
//!   its constraints and the services file;
//! - [`container`]: the container a task runs in (Mesos or Docker);
//! - [`health`]: the health check a task is launched with;
//! - [`image_ref`]: Docker image references.
//!
//! A second kind of workload (a job spec: run to completion, on a
//! schedule) belongs here too, beside `service`, sharing its parts.

pub mod container;
pub mod health;
pub mod image_ref;
pub mod service;
