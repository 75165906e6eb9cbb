//! Audit entries the scheduler writes on its own (no operator asked):
//! a `kill_on_return` kill (`docs/partitions.md`), an answer to an inverse
//! offer (README, "Maintenance windows"). They use the web layer's audit entry
//! shape, with `who: "scheduler"`, so the Audit page and
//! `/api/v1/audit` show them beside the operators' actions. The append is
//! fenced like every other write: only the leader's entries land.

use tokio::time::Instant;

use super::{Machine, Pending, tasks};
use crate::scheduler::core::io::StoreOp;

/// One decision of the scheduler's, for the audit log.
pub(super) struct Decision {
    /// How the decision was reached (`policy`, `maintenance`).
    pub method: &'static str,
    /// The action's name, e.g. `task.kill_on_return`.
    pub action: &'static str,
    /// What it applied to (task, agent, inverse offer …), as JSON.
    pub params: serde_json::Value,
    /// Why, in words.
    pub reason: String,
    /// The HTTP-like status the entry carries (200 done, 202 accepted).
    pub status: u16,
    /// What was done, in words.
    pub outcome: String,
}

impl Machine {
    /// Appends `decision` to the audit log; a failed append is logged as
    /// a warning (the decision itself stands).
    pub(super) fn audit(&mut self, decision: Decision, now: Instant) {
        let entry = serde_json::json!({
            "at": self.unix(now),
            "who": "scheduler",
            "method": decision.method,
            "client": "leader",
            "via": "scheduler",
            "action": decision.action,
            "params": decision.params,
            "reason": decision.reason,
            "ok": true,
            "status": decision.status,
            "outcome": decision.outcome,
            "replica": self.term.replica.advertised_url,
            "framework_id": self.framework.id.as_ref().map(|id| id.as_str().to_string()),
        });
        self.store(
            StoreOp::AppendAudit(Box::new(entry)),
            Pending::Task(tasks::Step::Audit),
        );
    }
}
