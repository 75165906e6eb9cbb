//! The testbed master's HTTP APIs.

pub(super) mod control;
pub(super) mod operator_api;
pub(super) mod scheduler_api;
pub(super) mod views;
