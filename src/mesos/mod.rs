//! The Mesos wire: protobuf model, JSON mapping and RecordIO framing.
//!
//! - [`proto`]: prost types generated from our own `.proto` subset of Mesos v1.
//! - [`json`]: Mesos' JSON mapping of those types, both directions.
//! - [`recordio`]: the RecordIO codec used by event streams.
//! - [`media`]: the content types and header names of the v1 HTTP APIs.
//! - [`resources`]: resource and attribute arithmetic (offers, placement).
//! - [`backoff`]: capped exponential backoff with jitter for every retry.
//! - [`detector`]: leading-master detection from `--master` (URL list or `zk://`).
//! - [`client`]: the scheduler client — subscription driver, calls, typed errors.
//! - [`operator`]: the operator client — GET_FRAMEWORKS and TEARDOWN.

pub mod backoff;
pub mod client;
pub mod detector;
pub mod json;
pub mod media;
pub mod operator;
pub mod proto;
pub mod recordio;
pub mod resources;

pub use proto::v1;
