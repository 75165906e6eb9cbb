//! The Mesos wire: protobuf model, JSON mapping and RecordIO framing.
//!
//! - [`proto`]: prost types generated from our own `.proto` subset of Mesos v1.
//! - [`json`]: Mesos' JSON mapping of those types, both directions.
//! - [`recordio`]: the RecordIO codec used by event streams.
//! - [`media`]: the content types and header names of the v1 HTTP APIs.
//! - [`names`]: serde and `Display` of the Mesos enums by their Mesos names.
//! - [`resources`]: resource and attribute arithmetic (offers, placement).
//! - [`detector`]: leading-master detection from `--master` (URL list or `zk://`).
//! - [`client`]: the scheduler client — subscription driver, calls, typed errors.
//! - [`operator`]: the operator client — GET_FRAMEWORKS and TEARDOWN.
//! - [`sandbox`]: task sandbox files (`stdout`, `stderr`) through the agents' files API.

pub mod client;
pub mod detector;
pub mod json;
pub mod media;
pub mod names;
pub mod operator;
pub mod proto;
pub mod recordio;
pub mod resources;
pub mod sandbox;

pub use proto::v1;

/// Installs rustls' ring provider as the process default unless one is
/// installed. reqwest is built without a provider and panics when it builds
/// a client in a process that has none, so every client of this module
/// calls this first (a program using the crate need not know). Idempotent.
pub fn ensure_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// True for the terminal task states, as the master decides them
/// (`src/common/protobuf_utils.cpp` isTerminalState): FINISHED, FAILED,
/// KILLED, LOST, ERROR, DROPPED, GONE, GONE_BY_OPERATOR. TASK_LOST is
/// terminal for the master, yet a task reported lost can come back RUNNING
/// when its agent re-registers (`docs/mesos-protocol.md#a-lost-task-can-come-back`).
pub fn is_terminal(state: v1::TaskState) -> bool {
    use v1::TaskState::*;
    matches!(
        state,
        TaskFinished
            | TaskFailed
            | TaskKilled
            | TaskLost
            | TaskError
            | TaskDropped
            | TaskGone
            | TaskGoneByOperator
    )
}
