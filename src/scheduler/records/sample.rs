//! The one task record the unit tests start from, so that a new field of
//! [`TaskRecord`] is given a default in one place, not in every fixture.

use super::TaskRecord;
use crate::mesos::v1::TaskState;
use crate::scheduler::spec::ExecutorKind;

impl TaskRecord {
    /// Task `id` of `service` in `state`, with plain values for the rest:
    /// instance 0, no fingerprint, on agent `a` (hostname `h`), run by the
    /// command executor as `id`, no ports, launched and updated at 0 s, and
    /// no kill, timeline, health or partition. A test sets what it is
    /// about with struct update syntax:
    /// `TaskRecord { instance: 2, ..TaskRecord::sample("t", "web", state) }`.
    pub(crate) fn sample(id: &str, service: &str, state: TaskState) -> TaskRecord {
        TaskRecord {
            task_id: id.into(),
            service: service.into(),
            instance: 0,
            fingerprint: String::new(),
            agent_id: "a".into(),
            hostname: "h".into(),
            executor: ExecutorKind::Command,
            executor_id: id.into(),
            ports: Vec::new(),
            state,
            launched_at: 0.0,
            updated_at: 0.0,
            kill: None,
            timeline: Vec::new(),
            healthy: None,
            healthy_since: None,
            health_checked: None,
            partition: None,
        }
    }
}
