//! How a service's tasks are replaced after its spec changes: the
//! `upgrade` part of a spec. The rules that follow it are in
//! `rules/rollout.rs`.
//!
//! ```json
//! {"upgrade": {"min_healthy": "10s", "deadline": "5m"}}
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::errors::FieldError;

/// Default of `upgrade.min_healthy`: long enough that a release which
/// crashes right after starting does not pass for available.
pub const DEFAULT_MIN_HEALTHY: Duration = Duration::from_secs(10);
/// Default of `upgrade.deadline`: Mesos' default health check (15 s delay,
/// 10 s interval, 3 failures) reports within about a minute; five leave
/// room for slow starts and image pulls.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// How a service's tasks are replaced after its spec changes. Not part of
/// the tasks' shape: changing it replaces no task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpgradePolicy {
    /// How long a replacement must stay RUNNING (and healthy, with a
    /// check) before it counts as available.
    #[serde(default = "default_min_healthy", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub min_healthy: Duration,
    /// How long an instance may stay not available during a rollout before
    /// the rollout halts; above `min_healthy`.
    #[serde(default = "default_deadline", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub deadline: Duration,
}

impl Default for UpgradePolicy {
    fn default() -> Self {
        UpgradePolicy {
            min_healthy: DEFAULT_MIN_HEALTHY,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

fn default_min_healthy() -> Duration {
    DEFAULT_MIN_HEALTHY
}

fn default_deadline() -> Duration {
    DEFAULT_DEADLINE
}

impl UpgradePolicy {
    /// Field-level problems (empty when valid).
    pub fn validate(&self) -> Vec<FieldError> {
        if self.deadline <= self.min_healthy {
            return vec![FieldError {
                field: "upgrade.deadline".into(),
                message: "must be above upgrade.min_healthy".into(),
            }];
        }
        Vec::new()
    }
}
