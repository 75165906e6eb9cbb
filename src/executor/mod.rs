//! `mesos-appliance-executor`: a Mesos v1 HTTP executor
//! (`docs/executor-http-api.md`, `docs/mesos-protocol.md#executor-api`) that runs each task's
//! command as a child process group and obeys the appliance's framework
//! messages.
//!
//! Modules:
//! - [`config`]: the environment the agent sets (`MESOS_FRAMEWORK_ID`,
//!   `MESOS_AGENT_ENDPOINT`, `MESOS_CHECKPOINT`, stout durations, …);
//! - [`connection`]: SUBSCRIBE and its RecordIO event stream, UPDATE calls,
//!   the re-subscription backoff;
//! - [`tasks`]: task processes, kills with a grace period (SIGTERM, then
//!   SIGKILL to the process group);
//! - [`runtime`]: the main loop — subscription, reconnection, signals —
//!   driving the state in `state.rs` (events and task exits);
//! - [`info`]: the `ExecutorInfo` a scheduler puts into its tasks to have
//!   them run by this executor;
//! - [`health`] and [`probes`]: `TaskInfo.health_check`, read and
//!   interpreted as Mesos' built-in executors do, and the HTTP, TCP and
//!   command probes that run it.
//!
//! Behaviour per event:
//!
//! | event | what the executor does |
//! |---|---|
//! | SUBSCRIBED | remembers the agent ID and whether the framework wants TASK_KILLING |
//! | LAUNCH | TASK_STARTING, starts the command (from `TaskInfo.command` or a `CommandInfo` in `TaskInfo.data`) and its health checker (if `TaskInfo.health_check`), TASK_RUNNING — or TASK_FAILED if it cannot start |
//! | health check result | TASK_RUNNING with `healthy` and REASON_TASK_HEALTH_CHECK_STATUS_UPDATED on the first success, the first success after failures and every failure past the grace period; after `consecutive_failures` failures in a row the task is killed as by KILL, and its TASK_KILLED carries `healthy = false` |
//! | process exit | TASK_FINISHED (status 0), TASK_FAILED (other status or signal), TASK_KILLED (after a kill; `healthy = false` when the health check killed it) |
//! | KILL | (TASK_KILLING if the framework has TASK_KILLING_STATE), SIGTERM to the task's process group, SIGKILL after the kill policy's grace period (event's, else task's, else `MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD`) |
//! | ACKNOWLEDGED | forgets that update (the agent has it) |
//! | MESSAGE `kamikaze` | SIGKILLs every task's process group, reports each TASK_FAILED (SOURCE_EXECUTOR, REASON_EXECUTOR_TERMINATED, a message naming kamikaze), waits up to 2 s for the agent's ACKNOWLEDGED, exits 1 — the scheduler gets those updates and FAILURE status 256; the agent itself fails only tasks whose update it did not get |
//! | other MESSAGE | logged and ignored |
//! | SHUTDOWN, SIGTERM | kills every task with a grace shorter than the shutdown grace period, reports TASK_KILLED, exits 0 once they are acknowledged (or when the grace period is over) |
//! | ERROR | treated as a lost subscription |
//! | stream lost | checkpointing: re-subscribe with the unacknowledged updates and tasks for up to `MESOS_RECOVERY_TIMEOUT`; otherwise kill the tasks and exit 1 |
//!
//! When its last task has ended and the agent has acknowledged every update,
//! the executor exits 0, as Mesos' default executor does.

pub mod config;
pub mod connection;
pub mod health;
pub mod info;
pub mod probes;
pub mod runtime;
mod state;
pub mod tasks;

pub use config::{EnvError, ExecutorConfig};
pub use runtime::{KAMIKAZE, run};
