//! The agents' side of the testbed.

pub(super) mod agent_restart;
pub(super) mod containerizers;
pub(super) mod executor_api;
pub(super) mod executor_events;
pub(super) mod executors;
pub(super) mod health;
pub(super) mod sandboxes;
