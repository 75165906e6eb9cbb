//! What ZooKeeper keeps of the workload.
//!
//! - The task record: what the scheduler knows of one task, persisted under
//!   `tasks/<task-id>` in ZooKeeper before the task is launched and after
//!   every status update (before that update is acknowledged:
//!   `docs/deployment-strategies.md#rules-every-strategy-keeps`), so that
//!   a new leader recovers every task it must reconcile; [`is_live`].
//! - The service record under `services/<name>`: the spec, the spec it
//!   replaced, whether a rollout is under way, and a rollout's [`Halt`].

use serde::{Deserialize, Serialize};

use super::ids::{AgentId, TaskId};
use super::spec::{ExecutorKind, ServiceSpec};
use crate::mesos::names;
use crate::mesos::v1::{TaskState, TaskStatus, task_status};

/// Status updates kept per task record (the timeline shown on its page).
pub const TIMELINE_LEN: usize = 20;

/// One status update as recorded in a task's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StatusEntry {
    /// When the scheduler received it, seconds since the UNIX epoch.
    pub at: f64,
    /// The Mesos state, stored by name (`TASK_RUNNING`).
    #[serde(deserialize_with = "names::lenient_task_state")]
    #[schema(value_type = String, example = "TASK_RUNNING")]
    pub state: TaskState,
    /// Who produced it (`SOURCE_MASTER`, `SOURCE_AGENT`, `SOURCE_EXECUTOR`);
    /// stored as `""` when the update named none.
    #[serde(
        default,
        serialize_with = "names::source_or_empty",
        deserialize_with = "names::lenient_source"
    )]
    #[schema(value_type = String, example = "SOURCE_EXECUTOR")]
    pub source: Option<task_status::Source>,
    /// The Mesos reason, stored by name (`REASON_RECONCILIATION`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "names::lenient_reason"
    )]
    #[schema(value_type = Option<String>, example = "REASON_COMMAND_EXECUTOR_FAILED")]
    pub reason: Option<task_status::Reason>,
    /// The update's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `TaskStatus.healthy`, when the update carried it: the result of the
    /// task's health check (`docs/health-checks.md` in apache/mesos).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

impl StatusEntry {
    /// The entry for a Mesos status update received at `at`.
    pub fn from_status(status: &TaskStatus, at: f64) -> StatusEntry {
        StatusEntry {
            at,
            state: status.state(),
            source: status
                .source
                .and_then(|s| task_status::Source::try_from(s).ok()),
            reason: status
                .reason
                .and_then(|r| task_status::Reason::try_from(r).ok()),
            message: status.message.clone(),
            healthy: status.healthy,
        }
    }

    /// True for a report of the task's health check
    /// (`REASON_TASK_HEALTH_CHECK_STATUS_UPDATED`, or a terminal update
    /// carrying `healthy`: the kill after too many failures).
    pub fn is_health_report(&self) -> bool {
        self.healthy.is_some()
    }
}

/// Why the scheduler wants a task dead, and how often it asked Mesos.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KillRequest {
    /// Why: `scaled down`, `replaced by upgrade`, `stuck in TASK_STAGING`, …
    pub reason: String,
    /// First request, seconds since the UNIX epoch.
    pub requested_at: f64,
    /// KILL calls sent so far ("kill pending (n)" on the dashboard).
    pub attempts: u32,
}

impl KillRequest {
    /// A kill asked for at `at` (seconds since the UNIX epoch), no KILL
    /// sent yet.
    pub fn new(reason: String, at: f64) -> KillRequest {
        KillRequest {
            reason,
            requested_at: at,
            attempts: 0,
        }
    }
}

/// One task, as stored in ZooKeeper and shown by the dashboard and
/// `/api/v1/tasks`. JSON with snake_case keys; IDs and Mesos enums as
/// strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskRecord {
    /// `<service>.<instance>.<uuid>`.
    pub task_id: TaskId,
    /// The service it belongs to.
    pub service: String,
    /// Its instance number within the service, from 0.
    pub instance: u32,
    /// [`ServiceSpec::fingerprint`](super::spec::service::ServiceSpec::fingerprint)
    /// of the spec it was launched from.
    pub fingerprint: String,
    /// The agent it was launched on.
    pub agent_id: AgentId,
    /// That agent's hostname.
    pub hostname: String,
    /// Which executor runs it.
    pub executor: ExecutorKind,
    /// The executor ID (the task ID for the command executor).
    pub executor_id: String,
    /// Host ports assigned from the offer.
    #[serde(default)]
    pub ports: Vec<u64>,
    /// Latest Mesos state (`TASK_STAGING` until the first update). A stored
    /// name this build does not know reads as `TASK_UNKNOWN`.
    #[serde(deserialize_with = "names::lenient_task_state")]
    #[schema(value_type = String, example = "TASK_RUNNING")]
    pub state: TaskState,
    /// Launch time, seconds since the UNIX epoch.
    pub launched_at: f64,
    /// Time of the latest update that changed the record, seconds since the
    /// UNIX epoch.
    pub updated_at: f64,
    /// Set while the scheduler wants the task killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<KillRequest>,
    /// Recent status updates that changed the record, oldest first (at most
    /// [`TIMELINE_LEN`]).
    #[serde(default)]
    pub timeline: Vec<StatusEntry>,
    /// The task's health as its executor last reported it
    /// (`TaskStatus.healthy`): absent until a check result arrives, and for
    /// services without a health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// Since when `healthy` holds its value, seconds since the UNIX epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<f64>,
    /// Whether the task was launched with a health check
    /// (`TaskInfo.health_check`): a rollout judges each task by the check
    /// it runs, not by its service's current spec. Absent in records
    /// written before this field existed ([`TaskRecord::launched_checked`]
    /// then derives it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_checked: Option<bool>,
    /// Set from the task's first TASK_UNREACHABLE on: when it became
    /// unreachable and, once it was heard from again, when. The
    /// `unreachable` policy's timers count from here, so a new leader
    /// continues them (`rules/partition.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionMark>,
}

/// When a task became unreachable, and when it came back (see
/// [`TaskRecord::partition`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PartitionMark {
    /// The scheduler's receipt of the first TASK_UNREACHABLE, seconds since
    /// the UNIX epoch (a repeated one, e.g. a reconciliation answer, keeps
    /// it).
    pub unreachable_since: f64,
    /// The first live update after it (the agent re-registered, Mesos
    /// sends TASK_RUNNING with REASON_AGENT_REREGISTERED), seconds since the
    /// UNIX epoch; `None` while the task stays unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned_at: Option<f64>,
}

impl TaskRecord {
    /// When the task's current run of TASK_RUNNING began, seconds since the
    /// UNIX epoch: the earliest entry of the timeline's trailing
    /// TASK_RUNNING updates (health reports are TASK_RUNNING too), or
    /// `updated_at` when the timeline no longer reaches back that far.
    /// `None` unless the task is TASK_RUNNING.
    pub fn running_since(&self) -> Option<f64> {
        if self.state != TaskState::TaskRunning {
            return None;
        }
        let since = self
            .timeline
            .iter()
            .rev()
            .take_while(|e| e.state == TaskState::TaskRunning)
            .last()
            .map(|e| e.at);
        Some(since.unwrap_or(self.updated_at))
    }

    /// How the task ended when its own health check killed it — its
    /// terminal update is TASK_KILLED carrying `healthy = false`, as the
    /// Mesos command executor sends it after the counted failures
    /// (`src/launcher/executor.cpp` in apache/mesos) — in an operator's
    /// words: "killed after 3 failed health checks". `None` for any other
    /// end, and while the task lives.
    ///
    /// The count is the check's `consecutive_failures` from `spec` when the
    /// task was launched from that spec (same fingerprint: the executor
    /// kills at exactly that count); otherwise the unhealthy reports in a
    /// row the timeline ends with (the executor sends one per counted
    /// failure; the timeline is bounded, so it may count fewer).
    pub fn health_kill(&self, spec: Option<&super::ServiceSpec>) -> Option<String> {
        let (last, before) = self.timeline.split_last()?;
        if self.state != TaskState::TaskKilled || last.healthy != Some(false) {
            return None;
        }
        let limit = spec
            .and_then(|spec| spec.health_check.as_ref().map(|c| (spec, c)))
            .filter(|(spec, _)| spec.fingerprint() == self.fingerprint)
            .map(|(_, check)| check.consecutive_failures);
        let failures = limit.unwrap_or_else(|| {
            let reports = before
                .iter()
                .rev()
                .filter(|e| e.state != TaskState::TaskKilling)
                .take_while(|e| e.healthy == Some(false));
            u32::try_from(reports.count()).unwrap_or(u32::MAX)
        });
        Some(match failures {
            0 => "killed after failed health checks".to_string(),
            1 => "killed after 1 failed health check".to_string(),
            n => format!("killed after {n} failed health checks"),
        })
    }

    /// The task's last status in words, as the record holds it: its state,
    /// and the Mesos reason and message of the timeline's last entry when
    /// that entry is of the state (`TASK_LOST, REASON_AGENT_REMOVED: agent
    /// removed`).
    pub fn last_status(&self) -> String {
        let mut words = self.state.as_str_name().to_string();
        if let Some(last) = self.timeline.last().filter(|e| e.state == self.state) {
            if let Some(reason) = last.reason {
                words += ", ";
                words += reason.as_str_name();
            }
            if let Some(message) = last.message.as_deref().filter(|m| !m.is_empty()) {
                words += ": ";
                words += message;
            }
        }
        words
    }

    /// True once the task reached a terminal state.
    pub fn is_terminal(&self) -> bool {
        crate::mesos::is_terminal(self.state)
    }

    /// True when the task was launched with a health check. For a record
    /// without [`TaskRecord::health_checked`]: `current_checked` (whether
    /// the service's current spec has one) when the task runs that spec
    /// (`current_fingerprint`), else whether a check ever reported.
    pub fn launched_checked(&self, current_fingerprint: &str, current_checked: bool) -> bool {
        self.launched_checked_if(|| self.fingerprint == current_fingerprint, current_checked)
    }

    /// [`TaskRecord::launched_checked`] where `runs_current` says whether
    /// the task runs the current spec, asked only of a record without
    /// [`TaskRecord::health_checked`] (a caller that knows it already
    /// compares no fingerprint again).
    pub fn launched_checked_if(
        &self,
        runs_current: impl FnOnce() -> bool,
        current_checked: bool,
    ) -> bool {
        self.health_checked.unwrap_or_else(|| {
            if runs_current() {
                current_checked
            } else {
                self.healthy.is_some()
            }
        })
    }

    /// The task's health as pages, filters and counts show it: a terminal
    /// task, or one being killed, is not healthy whatever its check last
    /// said (`None`); its last report stays in the timeline.
    pub fn health(&self) -> Option<bool> {
        if self.is_terminal() || self.kill.is_some() {
            None
        } else {
            self.healthy
        }
    }

    /// True when `status` would change what this record stores: a new
    /// state, or a health check's report (the executor sends one only when
    /// the task's health changes, `docs/health-checks.md` in apache/mesos).
    /// An update that repeats the stored state — a reconciliation answer, an
    /// agent re-sending an update whose acknowledgement was lost — changes
    /// nothing and is not written again.
    pub fn changed_by(&self, status: &TaskStatus) -> bool {
        let reason = status.reason;
        status.state() != self.state
            || reason == Some(task_status::Reason::TaskHealthCheckStatusUpdated as i32)
            // The explicit reconciliation that confirms a TASK_UNKNOWN is
            // what lets its instance go (`rules/partition.rs`): it is
            // stored, once.
            || (self.state == TaskState::TaskUnknown
                && reason == Some(task_status::Reason::Reconciliation as i32)
                && !self.unknown_confirmed())
    }

    /// True when the task is TASK_UNKNOWN and an explicit reconciliation
    /// answer (REASON_RECONCILIATION) said so last.
    pub fn unknown_confirmed(&self) -> bool {
        self.state == TaskState::TaskUnknown
            && self.timeline.last().is_some_and(|e| {
                e.state == TaskState::TaskUnknown
                    && e.reason == Some(task_status::Reason::Reconciliation)
            })
    }

    /// Keeps [`TaskRecord::partition`] after the state became
    /// `self.state` at `at`: the first TASK_UNREACHABLE (again, after a
    /// return) starts a mark, the first live update after it ends it.
    fn note_partition(&mut self, at: f64) {
        let unreachable = self.state == TaskState::TaskUnreachable;
        let open = self.partition.is_some_and(|m| m.returned_at.is_none());
        if unreachable && !open {
            self.partition = Some(PartitionMark {
                unreachable_since: at,
                returned_at: None,
            });
        } else if open
            && matches!(
                self.state,
                TaskState::TaskRunning | TaskState::TaskStarting | TaskState::TaskKilling
            )
            && let Some(mark) = &mut self.partition
        {
            mark.returned_at = Some(at);
        }
    }

    /// Records an update: state, time, health (when the update carries it,
    /// with the time it changed) and a timeline entry (bounded). A
    /// terminal task has no health: `healthy` is cleared (the last report
    /// stays in the timeline).
    pub fn apply(&mut self, status: &TaskStatus, at: f64) {
        self.state = status.state();
        self.updated_at = at;
        if self.is_terminal() {
            if self.healthy.take().is_some() {
                self.healthy_since = Some(at);
            }
        } else if let Some(healthy) = status.healthy
            && self.healthy != Some(healthy)
        {
            self.healthy = Some(healthy);
            self.healthy_since = Some(at);
        }
        self.note_partition(at);
        if self.timeline.len() >= TIMELINE_LEN {
            let excess = self.timeline.len() + 1 - TIMELINE_LEN;
            self.timeline.drain(..excess);
        }
        // Exactly as long as the entries: most tasks keep two or three
        // (TASK_STARTING, TASK_RUNNING), and the doubling growth of `push`
        // would reserve four, about 130 bytes more per task for as long
        // as the record lives (`benches/memory.py`).
        self.timeline.reserve_exact(1);
        self.timeline.push(StatusEntry::from_status(status, at));
    }
}

/// A task counts as live while it is not terminal and not being killed.
pub fn is_live(task: &TaskRecord) -> bool {
    !task.is_terminal() && task.kill.is_none()
}

/// Why and since when a rollout is halted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Halt {
    /// Seconds since the UNIX epoch.
    pub at: f64,
    /// E.g. `instance 0 not healthy for 10s within 5m`.
    pub reason: String,
}

/// A service as stored under `services/<name>`: the spec's own fields,
/// plus the spec it replaced (what a rollback restores), whether a rollout
/// began and is not complete yet, a halted rollout and the restart
/// generation. Records written before these existed are plain specs and
/// read as such; the spec's fields are as strict as in [`ServiceSpec`] (an
/// unknown field is refused).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceRecord {
    /// The desired spec (with its restart generation).
    pub spec: ServiceSpec,
    /// The spec before the last change of the tasks' shape (fingerprint),
    /// with restart generation 0 (a rollback keeps the current one).
    pub previous: Option<Box<ServiceSpec>>,
    /// True from a change of shape (or a rollback) until its rollout is
    /// complete
    /// ([`Progress::under_way`](super::rules::rollout::Progress::under_way));
    /// absent (false) in records written before it existed.
    pub rolling_out: bool,
    /// Set while the rollout to `spec` is halted.
    pub halted: Option<Halt>,
}

/// What a stored record holds besides the spec (the spec's
/// `restart_generation`, which its own JSON leaves out, is stored here as
/// `restart_generation`, absent when 0).
#[derive(Serialize, Deserialize)]
struct Extras {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous: Option<Box<ServiceSpec>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    rolling_out: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    halted: Option<Halt>,
    #[serde(default, skip_serializing_if = "is_zero")]
    restart_generation: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The record's keys besides the spec's.
const EXTRA_KEYS: [&str; 4] = ["previous", "rolling_out", "halted", "restart_generation"];

impl Serialize for ServiceRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let spec = serde_json::to_value(&self.spec).map_err(S::Error::custom)?;
        let extras = serde_json::to_value(Extras {
            previous: self.previous.clone(),
            rolling_out: self.rolling_out,
            halted: self.halted.clone(),
            restart_generation: self.spec.restart_generation,
        })
        .map_err(S::Error::custom)?;
        let mut map = s.serialize_map(None)?;
        for object in [spec, extras] {
            if let serde_json::Value::Object(fields) = object {
                for (key, value) in fields {
                    map.serialize_entry(&key, &value)?;
                }
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ServiceRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut object = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let mut extras = serde_json::Map::new();
        for key in EXTRA_KEYS {
            if let Some(value) = object.remove(key) {
                extras.insert(key.to_string(), value);
            }
        }
        let extras: Extras = serde_json::from_value(extras.into()).map_err(D::Error::custom)?;
        let mut spec: ServiceSpec =
            serde_json::from_value(object.into()).map_err(D::Error::custom)?;
        spec.restart_generation = extras.restart_generation;
        Ok(ServiceRecord {
            spec,
            previous: extras.previous,
            rolling_out: extras.rolling_out,
            halted: extras.halted,
        })
    }
}

impl ServiceRecord {
    /// A record of `spec` alone.
    pub fn new(spec: ServiceSpec) -> ServiceRecord {
        ServiceRecord {
            spec,
            previous: None,
            rolling_out: false,
            halted: None,
        }
    }

    /// The record after `spec` replaces this one's: a new shape keeps the
    /// old spec as `previous`, begins a rollout and clears a halt; a change
    /// of anything else (instances, backoff) keeps all three — except that
    /// scaling to 0 ends a rollout (nothing is left to replace).
    pub fn replaced_by(&self, spec: ServiceSpec) -> ServiceRecord {
        let mut spec = spec;
        // A restart is the record's, not the user's: it carries over.
        spec.restart_generation = self.spec.restart_generation;
        let live = spec.instances > 0;
        if spec.fingerprint() == self.spec.fingerprint() {
            ServiceRecord {
                spec,
                previous: self.previous.clone(),
                rolling_out: self.rolling_out && live,
                halted: self.halted.clone().filter(|_| live),
            }
        } else {
            ServiceRecord {
                spec,
                previous: Some(Box::new(ServiceSpec {
                    restart_generation: 0,
                    ..self.spec.clone()
                })),
                rolling_out: live,
                halted: None,
            }
        }
    }

    /// The record after a rolling restart was asked for: the restart
    /// generation goes up by one (so every task's fingerprint is outdated)
    /// and a rollout begins; the previous spec stays what a rollback
    /// restores.
    pub fn restarted(&self) -> ServiceRecord {
        let mut spec = self.spec.clone();
        spec.restart_generation = spec.restart_generation.saturating_add(1);
        ServiceRecord {
            spec,
            previous: self.previous.clone(),
            rolling_out: true,
            halted: None,
        }
    }

    /// The record once its rollout is complete (or a stored halt found
    /// stale): no rollout, no halt.
    pub fn completed(&self) -> ServiceRecord {
        ServiceRecord {
            rolling_out: false,
            halted: None,
            ..self.clone()
        }
    }

    /// The record after a rollback: the previous spec comes back (with
    /// the current instance count), and none is kept as previous — a
    /// rollback does not toggle: a second one has nothing to restore
    /// rather than rolling forward to the release just abandoned. `None`
    /// without a previous spec.
    pub fn rolled_back(&self) -> Option<ServiceRecord> {
        let mut back = (**self.previous.as_ref()?).clone();
        back.instances = self.spec.instances;
        back.restart_generation = self.spec.restart_generation;
        Some(ServiceRecord {
            rolling_out: back.instances > 0,
            spec: back,
            previous: None,
            halted: None,
        })
    }
}

#[cfg(test)]
mod sample;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_earlier_versions_still_decode() {
        let json = serde_json::json!({
            "task_id": "web.0.1", "service": "web", "instance": 0, "fingerprint": "f",
            "agent_id": "a1", "hostname": "h1", "executor": "command", "executor_id": "web.0.1",
            "ports": [31000], "state": "TASK_RUNNING", "launched_at": 1.0, "updated_at": 2.0,
            "timeline": [
                {"at": 1.5, "state": "TASK_STARTING", "source": "SOURCE_EXECUTOR"},
                {"at": 2.0, "state": "TASK_RUNNING", "source": "", "reason": "REASON_RECONCILIATION"}
            ]
        });
        let record: TaskRecord = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(record.state, TaskState::TaskRunning);
        assert_eq!(
            record.timeline[0].source,
            Some(task_status::Source::Executor)
        );
        assert_eq!(record.timeline[1].source, None);
        assert_eq!(
            record.timeline[1].reason,
            Some(task_status::Reason::Reconciliation)
        );
        assert_eq!(
            serde_json::to_value(&record).unwrap(),
            json,
            "same shape back"
        );
    }

    #[test]
    fn the_timeline_keeps_the_last_entries_in_exact_capacity() {
        let json = serde_json::json!({
            "task_id": "web.0.1", "service": "web", "instance": 0, "fingerprint": "f",
            "agent_id": "a1", "hostname": "h1", "executor": "command", "executor_id": "web.0.1",
            "state": "TASK_STAGING", "launched_at": 1.0, "updated_at": 1.0
        });
        let mut record: TaskRecord = serde_json::from_value(json).unwrap();
        for n in 1..=TIMELINE_LEN + 5 {
            let state = if n % 2 == 0 {
                TaskState::TaskRunning
            } else {
                TaskState::TaskStarting
            };
            let status = TaskStatus {
                state: state as i32,
                ..Default::default()
            };
            // As the core does: a clone of the stored record takes the update.
            record = record.clone();
            record.apply(&status, n as f64);
            assert_eq!(record.timeline.len(), n.min(TIMELINE_LEN));
            assert_eq!(
                record.timeline.capacity(),
                record.timeline.len(),
                "no spare entries after update {n}"
            );
            assert_eq!(record.timeline.last().map(|e| e.at), Some(n as f64));
        }
        assert_eq!(record.timeline[0].at, 6.0, "the oldest were dropped");
    }

    #[test]
    fn a_terminal_task_has_no_health() {
        let json = serde_json::json!({
            "task_id": "web.0.1", "service": "web", "instance": 0, "fingerprint": "f",
            "agent_id": "a1", "hostname": "h1", "executor": "command", "executor_id": "web.0.1",
            "state": "TASK_RUNNING", "launched_at": 1.0, "updated_at": 2.0,
            "healthy": true, "healthy_since": 2.0
        });
        let mut record: TaskRecord = serde_json::from_value(json).unwrap();
        assert_eq!(record.health(), Some(true));
        record.kill = Some(KillRequest {
            reason: "scaled down".into(),
            requested_at: 3.0,
            attempts: 0,
        });
        assert_eq!(record.health(), None, "being killed");
        let killed = TaskStatus {
            state: TaskState::TaskKilled as i32,
            healthy: Some(true),
            ..Default::default()
        };
        record.apply(&killed, 4.0);
        assert_eq!((record.healthy, record.healthy_since), (None, Some(4.0)));
        assert_eq!(record.timeline[0].healthy, Some(true), "the report stays");
    }

    #[test]
    fn the_partition_mark_keeps_the_first_unreachable_and_the_return() {
        let json = serde_json::json!({
            "task_id": "web.0.1", "service": "web", "instance": 0, "fingerprint": "f",
            "agent_id": "a1", "hostname": "h1", "executor": "command", "executor_id": "web.0.1",
            "state": "TASK_RUNNING", "launched_at": 1.0, "updated_at": 2.0
        });
        let mut record: TaskRecord = serde_json::from_value(json).unwrap();
        let update = |state: TaskState| TaskStatus {
            state: state as i32,
            ..Default::default()
        };
        record.apply(&update(TaskState::TaskUnreachable), 10.0);
        // A reconciliation answer repeats it: the first time stays.
        record.apply(&update(TaskState::TaskUnreachable), 15.0);
        let mark = |r: &TaskRecord| r.partition.map(|m| (m.unreachable_since, m.returned_at));
        assert_eq!(mark(&record), Some((10.0, None)));
        record.apply(&update(TaskState::TaskRunning), 20.0);
        assert_eq!(mark(&record), Some((10.0, Some(20.0))));
        let stored = serde_json::to_value(&record).unwrap();
        assert_eq!(stored["partition"]["unreachable_since"], 10.0);
        assert_eq!(
            serde_json::from_value::<TaskRecord>(stored).unwrap(),
            record
        );
        // A second partition starts a new mark.
        record.apply(&update(TaskState::TaskUnreachable), 30.0);
        assert_eq!(mark(&record), Some((30.0, None)));
        // TASK_UNKNOWN is no return; a confirming reconciliation is stored.
        record.apply(&update(TaskState::TaskUnknown), 31.0);
        assert_eq!(mark(&record), Some((30.0, None)));
        let confirm = TaskStatus {
            reason: Some(task_status::Reason::Reconciliation as i32),
            ..update(TaskState::TaskUnknown)
        };
        assert!(record.changed_by(&confirm) && !record.unknown_confirmed());
        record.apply(&confirm, 32.0);
        assert!(record.unknown_confirmed() && !record.changed_by(&confirm));
    }

    #[test]
    fn stored_records_keep_the_previous_spec_and_read_plain_specs() {
        let a: ServiceSpec = serde_json::from_value(serde_json::json!({
            "name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": 2, "ports": 1}))
        .unwrap();
        let plain: ServiceRecord =
            serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
        assert_eq!(plain, ServiceRecord::new(a.clone()));
        let mut b = a.clone();
        b.mem = 64.0;
        assert!(!plain.rolling_out, "a first launch is no rollout");
        let upgraded = plain.replaced_by(b.clone());
        assert_eq!(upgraded.previous.as_deref(), Some(&a));
        assert!(upgraded.rolling_out, "a new shape begins a rollout");
        let mut halted = upgraded.clone();
        halted.halted = Some(Halt {
            at: 1.0,
            reason: "r".into(),
        });
        let json = serde_json::to_value(&halted).unwrap();
        assert_eq!(json["mem"], 64.0);
        assert_eq!(json["previous"]["mem"], 32.0);
        let back: ServiceRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, halted);
        // Scaling keeps the halt and the previous spec; a new shape clears it.
        let mut scaled = b.clone();
        scaled.instances = 5;
        let kept = halted.replaced_by(scaled);
        assert_eq!(
            (kept.halted.clone(), kept.rolling_out),
            (halted.halted.clone(), true)
        );
        // Scaling to 0 ends the rollout, halt and all.
        let mut none = b.clone();
        none.instances = 0;
        let ended = halted.replaced_by(none);
        assert_eq!((ended.halted.clone(), ended.rolling_out), (None, false));
        assert_eq!(halted.completed().halted, None);
        assert!(!halted.completed().rolling_out);
        let rolled = halted.rolled_back().unwrap();
        assert_eq!((rolled.spec.mem, rolled.halted.clone()), (32.0, None));
        assert!(rolled.rolling_out, "a rollback rolls out the previous spec");
        assert_eq!(rolled.previous, None, "a rollback does not toggle");
        assert!(ServiceRecord::new(a).rolled_back().is_none());
        // A stored record still refuses unknown fields of the spec.
        let odd = serde_json::json!({"name": "web", "command": "x", "cpus": 0.1, "mem": 32,
            "instances": 1, "instnaces": 2});
        assert!(serde_json::from_value::<ServiceRecord>(odd).is_err());
    }

    #[test]
    fn a_restart_is_stored_beside_the_spec_and_outdates_its_fingerprint() {
        let a: ServiceSpec = serde_json::from_value(serde_json::json!({
            "name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": 2}))
        .unwrap();
        let plain = ServiceRecord::new(a.clone());
        let restarted = plain.restarted();
        assert_eq!(restarted.spec.restart_generation, 1);
        assert!(restarted.rolling_out && restarted.halted.is_none());
        assert_ne!(restarted.spec.fingerprint(), a.fingerprint());
        // Never in the spec's own JSON; in the record, and read back.
        let spec_json = serde_json::to_value(&restarted.spec).unwrap();
        assert!(spec_json.get("restart_generation").is_none());
        let json = serde_json::to_value(&restarted).unwrap();
        assert_eq!(json["restart_generation"], 1);
        assert!(
            serde_json::to_value(&plain)
                .unwrap()
                .get("restart_generation")
                .is_none()
        );
        let back: ServiceRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, restarted);
        assert_eq!(back.spec.fingerprint(), restarted.spec.fingerprint());
        // A PUT of the same spec keeps the generation: no second restart,
        // no undoing it; a user cannot set it in the spec.
        let again = back.replaced_by(a.clone());
        assert_eq!(again.spec.fingerprint(), restarted.spec.fingerprint());
        let sneaky = serde_json::json!({"name": "web", "command": "x", "cpus": 0.1, "mem": 32,
            "instances": 1, "restart_generation": 7});
        assert!(serde_json::from_value::<ServiceSpec>(sneaky).is_err());
        // A new shape keeps the generation; its previous spec is stored
        // without one, and a rollback keeps the current generation.
        let mut b = a.clone();
        b.mem = 64.0;
        let upgraded = again.replaced_by(b);
        assert_eq!(upgraded.spec.restart_generation, 1);
        assert_eq!(upgraded.previous.as_deref(), Some(&a));
        let rolled = upgraded.rolled_back().unwrap();
        assert_eq!(rolled.spec.restart_generation, 1);
    }
}
