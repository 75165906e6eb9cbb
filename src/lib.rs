//! mesos-appliance: a highly available Apache Mesos framework scheduler, and
//! `mesos-testbed`, the stand-in Mesos master its tests and demo run against.
//!
//! Modules, by layer:
//! - [`mesos`]: the wire — protobuf model, JSON mapping, RecordIO.
//! - [`coordination`]: leader election, deployment fence, framework-ID, service and
//!   task stores, on ZooKeeper or in memory.
//! - [`testbed`]: `mesos-testbed`, a stand-in Mesos master with simulated agents
//!   and fault injection.

pub mod coordination;
pub mod mesos;
pub mod testbed;
