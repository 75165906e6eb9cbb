//! What a service does when one of its tasks becomes unreachable (its
//! agent lost the network, `TASK_UNREACHABLE` to a `PARTITION_AWARE`
//! framework, `docs/high-availability-framework-guide.md` in apache/mesos):
//! the `unreachable` part of a spec. The rules that follow it are in
//! `rules/partition.rs`.
//!
//! ```json
//! {"unreachable": {"inactive_after": "20s", "expunge_after": "40s", "kill_on_return": "old"}}
//! ```
//!
//! Absent, the defaults keep the behaviour of a framework that is not
//! partition-aware: the instance is replaced at once, and when the old task
//! comes back it is the one killed.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::errors::FieldError;

/// Longest `inactive_after` / `expunge_after`: a week. A longer wait is a
/// typo, and the times stay far from any overflow.
pub const MAX_UNREACHABLE_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Which copy of an instance dies when a task that was unreachable comes
/// back and its instance's replacement runs too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KillOnReturn {
    /// The task that came back (the replacement stays).
    #[default]
    Old,
    /// The replacement (the task that came back stays).
    New,
}

impl std::fmt::Display for KillOnReturn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KillOnReturn::Old => "old",
            KillOnReturn::New => "new",
        })
    }
}

/// How long an unreachable task is waited for, and which copy dies when it
/// returns. Not part of the tasks' shape: changing it replaces no task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnreachablePolicy {
    /// How long an unreachable task still stands for its instance: no
    /// replacement starts before. Zero replaces at once.
    #[serde(default, with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub inactive_after: Duration,
    /// When an unreachable task is given up for good: it no longer shows as
    /// its instance's copy, and its record is forgotten like an ended
    /// task's. Not below `inactive_after`.
    #[serde(default, with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub expunge_after: Duration,
    /// Which copy dies when the task comes back while its replacement runs.
    #[serde(default)]
    pub kill_on_return: KillOnReturn,
}

impl UnreachablePolicy {
    /// Field-level problems (empty when valid).
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for (field, value) in [
            ("unreachable.inactive_after", self.inactive_after),
            ("unreachable.expunge_after", self.expunge_after),
        ] {
            if value > MAX_UNREACHABLE_WAIT {
                errors.push(FieldError {
                    field: field.into(),
                    message: "at most 7 days".into(),
                });
            }
        }
        if self.expunge_after < self.inactive_after {
            errors.push(FieldError {
                field: "unreachable.expunge_after".into(),
                message: "must not be below unreachable.inactive_after".into(),
            });
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_replace_at_once_and_keep_the_replacement() {
        let p: UnreachablePolicy = serde_json::from_str("{}").unwrap();
        assert_eq!(p, UnreachablePolicy::default());
        assert_eq!(p.inactive_after, Duration::ZERO);
        assert_eq!(p.kill_on_return, KillOnReturn::Old);
        assert!(p.validate().is_empty());
    }

    #[test]
    fn fields_are_checked() {
        let p: UnreachablePolicy = serde_json::from_value(serde_json::json!({
            "inactive_after": "20s", "expunge_after": "40s", "kill_on_return": "new"}))
        .unwrap();
        assert_eq!(p.expunge_after, Duration::from_secs(40));
        assert_eq!(p.kill_on_return, KillOnReturn::New);
        assert!(p.validate().is_empty());
        let back: UnreachablePolicy =
            serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        let bad: UnreachablePolicy = serde_json::from_value(serde_json::json!({
            "inactive_after": "1m", "expunge_after": "30s"}))
        .unwrap();
        assert_eq!(bad.validate()[0].field, "unreachable.expunge_after");
        let long: UnreachablePolicy = serde_json::from_value(serde_json::json!({
            "inactive_after": "8d", "expunge_after": "8d"}))
        .unwrap();
        assert_eq!(long.validate().len(), 2);
        assert!(
            serde_json::from_value::<UnreachablePolicy>(
                serde_json::json!({"kill_on_return": "both"})
            )
            .is_err()
        );
        assert!(
            serde_json::from_value::<UnreachablePolicy>(serde_json::json!({"inactive": "1s"}))
                .is_err()
        );
    }
}
