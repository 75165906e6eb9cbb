//! Deployments: which one runs, and fencing older ones
//! (`docs/deployment-strategies.md#strategies`, `#fencing`).
//!
//! The `deployment` znode holds `{deployment_id, epoch, strategy,
//! teardown_done}`, written with compare-and-set only:
//! - a starting replica whose deployment already owns the record changes
//!   nothing: replicas of one deployment never fence each other;
//! - `failover` never takes the record over: a new deployment waits as a
//!   follower and leads only when the old leader is gone;
//! - `upgrade` and `hard` write their own ID with `epoch + 1`;
//! - `uninstall` does the same with an ID of its own.
//!
//! Every replica watches the record: a higher epoch under another
//! deployment ID means it is fenced — it steps down and exits (code 3).
//! Under `hard`, the first leader of the new deployment tears down earlier
//! frameworks once and records `teardown_done`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{CoordinationError, Coordinator, DeploymentRecord, Expect, Strategy};

/// Registers this replica's deployment; returns the record it observed (its
/// own, or the running deployment's under `failover`), and binds the fenced
/// writes to it ([`Coordinator::bind_deployment`]). Retries on
/// compare-and-set conflicts.
pub async fn register(
    coordinator: &dyn Coordinator,
    deployment_id: &str,
    strategy: Strategy,
) -> Result<DeploymentRecord, CoordinationError> {
    for _ in 0..20 {
        let current = coordinator.deployment().await?;
        let (record, expect) = match &current {
            None => (
                DeploymentRecord {
                    deployment_id: deployment_id.to_string(),
                    epoch: 1,
                    strategy,
                    teardown_done: false,
                },
                Expect::Absent,
            ),
            Some(v) if v.value.deployment_id == deployment_id || strategy == Strategy::Failover => {
                // Ours already, or `failover` runs under the running one.
                coordinator.bind_deployment(deployment_id, v);
                return Ok(v.value.clone());
            }
            Some(v) => (
                DeploymentRecord {
                    deployment_id: deployment_id.to_string(),
                    epoch: v.value.epoch + 1,
                    strategy,
                    teardown_done: false,
                },
                Expect::Version(v.version),
            ),
        };
        match coordinator.write_deployment(&record, expect).await {
            Ok(written) => {
                coordinator.bind_deployment(deployment_id, &written);
                if let Some(old) = current {
                    tracing::warn!(
                        old = %old.value.deployment_id,
                        new = %deployment_id,
                        epoch = written.value.epoch,
                        "{strategy:?} deployment fences the older one"
                    );
                }
                return Ok(written.value);
            }
            Err(CoordinationError::VersionConflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(CoordinationError::Unexpected(
        "the deployment record kept changing".into(),
    ))
}

/// True when `current` supersedes the deployment that observed `observed`
/// running as `ours`.
pub fn is_fenced(ours: &str, observed: &DeploymentRecord, current: &DeploymentRecord) -> bool {
    current.epoch > observed.epoch && current.deployment_id != ours
}

/// Cancels `fenced` once a newer deployment takes over.
pub async fn watch_fence(
    coordinator: Arc<dyn Coordinator>,
    observed: DeploymentRecord,
    ours: String,
    fenced: CancellationToken,
) {
    let mut rx = coordinator.watch_deployment();
    loop {
        let current = rx.borrow_and_update().clone();
        if let Some(current) = current
            && is_fenced(&ours, &observed, &current.value)
        {
            tracing::error!(
                by = %current.value.deployment_id,
                epoch = current.value.epoch,
                "fenced by a newer deployment"
            );
            fenced.cancel();
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::ReplicaInfo;
    use crate::coordination::memory::MemoryCoordinator;

    fn record(id: &str, epoch: u64) -> DeploymentRecord {
        DeploymentRecord {
            deployment_id: id.into(),
            epoch,
            strategy: Strategy::Upgrade,
            teardown_done: false,
        }
    }

    #[test]
    fn fencing_needs_a_newer_epoch_under_another_id() {
        let seen = record("d1", 1);
        assert!(!is_fenced("d1", &seen, &record("d1", 1)));
        assert!(
            !is_fenced("d1", &seen, &record("d1", 2)),
            "our own deployment"
        );
        assert!(is_fenced("d1", &seen, &record("d2", 2)));
        assert!(
            !is_fenced("d2", &seen, &record("d1", 1)),
            "failover replica of another deployment"
        );
    }

    #[tokio::test]
    async fn strategies_register_as_documented() {
        let c = MemoryCoordinator::new(ReplicaInfo::new("http://x", "d1", "t"));
        let first = register(&c, "d1", Strategy::Failover).await.unwrap();
        assert_eq!((first.deployment_id.as_str(), first.epoch), ("d1", 1));
        let same = register(&c, "d1", Strategy::Upgrade).await.unwrap();
        assert_eq!(same.epoch, 1, "replicas of one deployment change nothing");
        let waits = register(&c, "d2", Strategy::Failover).await.unwrap();
        assert_eq!(waits.deployment_id, "d1", "failover does not take over");
        let upgrade = register(&c, "d3", Strategy::Upgrade).await.unwrap();
        assert_eq!((upgrade.deployment_id.as_str(), upgrade.epoch), ("d3", 2));
        assert!(is_fenced("d1", &first, &upgrade));
    }
}
