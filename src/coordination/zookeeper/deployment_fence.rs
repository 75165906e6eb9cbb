//! The deployment record as a write fence: every fenced multi-op also
//! checks the version of the `deployment` record this replica's deployment
//! runs under, so a replica of a replaced deployment has no write accepted
//! once the newer deployment wrote its record — also before its own watch
//! delivered that record (`docs/election-model.md#the-deployment-fence`).
//!
//! The bound version follows the record while it does not fence us: the
//! deployment's own writes (`teardown_done`) and those of its sibling
//! replicas, seen here directly or through the deployment watch. A record
//! that fences us ([`is_fenced`]) is never followed.

use std::sync::Mutex;

use crate::coordination::deployment::is_fenced;
use crate::coordination::{DeploymentRecord, Versioned};

/// What this replica's deployment runs under.
#[derive(Debug, Clone)]
struct Binding {
    /// Our deployment ID.
    ours: String,
    /// The record seen when registering (under `failover`, the running
    /// deployment's): what [`is_fenced`] compares newer records with.
    observed: DeploymentRecord,
    /// The record's version the fenced writes check.
    version: i32,
}

/// The deployment binding of one coordinator; unbound (no check) until
/// [`DeploymentFence::bind`].
#[derive(Debug, Default)]
pub(super) struct DeploymentFence {
    binding: Mutex<Option<Binding>>,
}

impl DeploymentFence {
    /// Binds to `observed`, the record our deployment `ours` registered
    /// under.
    pub(super) fn bind(&self, ours: &str, observed: &Versioned<DeploymentRecord>) {
        *self.lock() = Some(Binding {
            ours: ours.to_string(),
            observed: observed.value.clone(),
            version: observed.version,
        });
    }

    /// Follows `record`, a newer state of the record, if it does not fence
    /// us. Versions only grow, so an older one (a late watch) is ignored.
    pub(super) fn follow(&self, record: &Versioned<DeploymentRecord>) {
        if let Some(binding) = self.lock().as_mut()
            && record.version > binding.version
            && !is_fenced(&binding.ours, &binding.observed, &record.value)
        {
            binding.version = record.version;
        }
    }

    /// The version the fenced writes must find; `None` when unbound.
    pub(super) fn version(&self) -> Option<i32> {
        self.lock().as_ref().map(|b| b.version)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Binding>> {
        // Every update is a plain assignment: a poisoned lock holds a valid value.
        self.binding.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::Strategy;

    fn record(id: &str, epoch: u64, version: i32) -> Versioned<DeploymentRecord> {
        Versioned {
            value: DeploymentRecord {
                deployment_id: id.into(),
                epoch,
                strategy: Strategy::Upgrade,
                teardown_done: false,
            },
            version,
        }
    }

    #[test]
    fn follows_its_own_deployment_never_a_newer_one() {
        let fence = DeploymentFence::default();
        assert_eq!(fence.version(), None, "unbound: no check");
        fence.follow(&record("A", 1, 3));
        assert_eq!(fence.version(), None, "following needs a binding");
        fence.bind("A", &record("A", 1, 0));
        fence.follow(&record("A", 1, 1));
        assert_eq!(fence.version(), Some(1), "teardown_done by our deployment");
        fence.follow(&record("A", 1, 0));
        assert_eq!(fence.version(), Some(1), "a late watch does not go back");
        fence.follow(&record("B", 2, 2));
        assert_eq!(fence.version(), Some(1), "a newer deployment fences us");
    }

    #[test]
    fn a_failover_replica_follows_the_running_deployment() {
        let fence = DeploymentFence::default();
        fence.bind("F", &record("A", 1, 4));
        fence.follow(&record("A", 1, 5));
        assert_eq!(fence.version(), Some(5));
        fence.follow(&record("C", 2, 6));
        assert_eq!(fence.version(), Some(5));
    }
}
