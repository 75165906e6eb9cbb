//! mesos-appliance: a highly available Apache Mesos framework scheduler, and
//! `mesos-testbed`, the stand-in Mesos master its tests and demo run against.
//!
//! Three binaries share this library: `mesos-appliance` (`src/main.rs`, the
//! scheduler replica and its `uninstall` and `demo` jobs),
//! `mesos-appliance-executor` (the executor Mesos agents run for our tasks)
//! and `mesos-testbed`.
//!
//! # A tour of the layout
//!
//! The modules are layers; read them bottom-up. A module imports its own
//! layer and the ones below it, never a sibling on its floor or a layer
//! above (`docs/architecture.md#layers`; `.ci/imports.py` checks it).
//!
//! - [`util`] and [`backoff`]: small shared helpers (clocks, host name,
//!   durations, JSON reading) and the one capped exponential backoff every
//!   retry uses.
//! - [`mesos`] and [`coordination`], siblings. [`mesos`] is the wire:
//!   [`mesos::proto`] holds the prost types generated from our own `.proto`
//!   subset of the Mesos v1 API (`proto/`); [`mesos::recordio`] frames
//!   event streams; [`mesos::json`] is Mesos' JSON mapping. On top:
//!   [`mesos::detector`] finds the leading master, [`mesos::client`] holds
//!   one subscription to it through disconnections and master failovers (a
//!   driver task, heartbeat supervision, calls with the current
//!   `Mesos-Stream-Id`), and [`mesos::operator`] lists and tears down
//!   frameworks. [`coordination`] is everything kept in ZooKeeper, behind
//!   one trait, [`coordination::Coordinator`]: the leader election (a
//!   `watch` of [`coordination::Leadership`], one cancellation token per
//!   term), the deployment fence ([`coordination::deployment`]), and
//!   fenced, versioned stores for the framework ID, services and task
//!   records. [`coordination::memory`] is the same contract in memory, for
//!   one replica.
//! - [`executor`] is `mesos-appliance-executor` (its state machine, task
//!   processes, the agent connection) and the `ExecutorInfo` that makes a
//!   task run under it.
//! - [`scheduler`] is the leader's brain. [`scheduler::spec`] is what an
//!   operator asks for, [`scheduler::records`] what ZooKeeper keeps, and
//!   [`scheduler::rules`] the pure rules (offers, placement, workload,
//!   rollout, reconciliation, kills, `TaskInfo` building).
//!   [`scheduler::core`] is one leadership term: a pure state machine and
//!   the runner doing its I/O. [`scheduler::supervisor`] runs on every
//!   replica and, while it leads, runs the core for that term. The core
//!   publishes an immutable [`scheduler::Snapshot`] after each change and
//!   takes [`scheduler::Command`]s through a [`scheduler::SchedulerHandle`].
//! - [`web`] and [`testbed`], siblings. [`web`] is the dashboard and JSON
//!   API (axum, askama templates in `templates/`, assets in `static/`):
//!   pages and their JSON twins render one snapshot; actions are commands
//!   to the core; plus health, readiness, metrics and a server-sent-event
//!   stream. [`testbed`] is `mesos-testbed`: a Mesos master in one
//!   process, with simulated agents, fault injection under `/testbed/`,
//!   optional ZooKeeper election and real executor processes.
//! - [`ctl`] is `mesos-appliance ctl`, the command-line client of the JSON
//!   API (on the floor of [`web`] and [`testbed`], importing neither: it
//!   reads the API's JSON).
//! - [`marathon`] is `mesos-appliance import marathon`: Marathon app
//!   definitions to service specs (on the floor of [`web`], importing
//!   only the specs below it).
//! - [`app`] wires the layers into processes: the command line, `serve`,
//!   `uninstall`, `demo`. Start reading here to follow a replica from its
//!   flags to its first SUBSCRIBE.
//! - `fuzzing` (hidden from these docs): the bodies of the fuzz targets in
//!   `fuzz/`, one function per decoder, and the replay of their corpora in
//!   `cargo test` (`docs/fuzzing.md`).
//!
//! # Where the reasons are written down
//!
//! The design documents live in `docs/` in the repository, and comments
//! cite them by section (`docs/mesos-protocol.md#acknowledgements`):
//!
//! - `docs/architecture.md`: the layers, the modules, where each rule
//!   lives, the data flow of a framework ID
//!   and of a status update, threads and tasks;
//! - `docs/deployment-strategies.md`: the deployment scenarios and
//!   strategies, the rules every strategy keeps, the ZooKeeper layout,
//!   fencing;
//! - `docs/mesos-protocol.md`: the Mesos facts the code relies on, each with
//!   its source in the Apache Mesos repository, and what a real master was
//!   seen doing ("capture *x*" in comments);
//! - `docs/testbed.md`: what the testbed imitates, its fault API, its gaps.
//!
//! Paths in comments that do not exist in this repository (e.g.
//! `docs/reconciliation.md`, `src/master/master.cpp`) are paths in the
//! [Apache Mesos repository](https://github.com/apache/mesos), version 1.12.

#![warn(missing_docs)]

pub mod app;
pub mod backoff;
pub mod coordination;
pub mod ctl;
pub mod executor;
#[doc(hidden)]
pub mod fuzzing;
pub mod marathon;
pub mod mesos;
pub mod scheduler;
pub mod testbed;
pub mod util;
pub mod web;
