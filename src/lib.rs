//! mesos-appliance: a highly available Apache Mesos framework scheduler, and
//! `mesos-testbed`, the stand-in Mesos master its tests and demo run against.
//!
//! Modules, by layer:
//! - [`app`]: the `mesos-appliance` process — CLI, serve, demo, uninstall.
//! - [`mesos`]: the wire — protobuf model, JSON mapping, RecordIO, resources.
//! - [`executor`]: `mesos-appliance-executor`, our Mesos executor, and the
//!   `ExecutorInfo` helper schedulers use to launch tasks under it.
//! - [`coordination`]: leader election, deployment fence, framework-ID, service and
//!   task stores, on ZooKeeper or in memory.
//! - [`scheduler`]: the leader's core actor and the snapshot / command types
//!   the web layer uses.
//! - [`testbed`]: `mesos-testbed`, a stand-in Mesos master with simulated agents
//!   and fault injection.
//! - [`web`]: the dashboard and JSON API (axum, askama templates in
//!   `templates/`, assets in `static/`), health, readiness and metrics; it
//!   reads scheduler snapshots and sends commands.
//! - [`util`]: small shared helpers (clocks).

pub mod app;
pub mod coordination;
pub mod executor;
pub mod mesos;
pub mod scheduler;
pub mod testbed;
pub mod util;
pub mod web;
