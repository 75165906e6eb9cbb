//! The pure rules the core applies: no I/O, no clock of their own (the
//! time comes in as an argument), no state beyond their own values. The
//! state machine in `core/machine/` calls them and turns their answers
//! into effects.
//!
//! - [`offers`]: the offer registry (which offers are held, until when);
//! - [`placement`]: which offer a task goes to (first fit, constraints,
//!   ports);
//! - [`workload`]: missing and surplus instances, what counts as a failure;
//! - [`restart`]: each instance's restart backoff;
//! - [`partition`]: unreachable and unknown tasks under a service's
//!   `unreachable` policy, and a task that returns;
//! - [`rollout`]: health-gated rolling replacement and when it halts;
//! - [`review`]: the scheduling pass's one read of a service's records
//!   (the workload's and the rollout's answers at once);
//! - [`reconcile`]: the reconciliation state machine;
//! - [`kills`]: kills re-sent until confirmed;
//! - [`taskinfo`]: a planned task → Mesos `TaskInfo`.

pub mod kills;
pub mod offers;
pub mod partition;
pub mod placement;
pub mod reconcile;
pub mod restart;
pub mod review;
pub mod rollout;
pub mod taskinfo;
pub mod workload;
