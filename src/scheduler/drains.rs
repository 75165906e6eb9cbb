//! The SLA-aware drain of an agent by the appliance (`docs/draining.md`):
//! the stored record (`drains/<agent_id>` in ZooKeeper), its floor, and the
//! progress the snapshot shows.
//!
//! A drain empties one agent without letting any service fall below its
//! floor: each instance there gets a replacement on another agent first,
//! and the old task is killed only once the replacement is available
//! (RUNNING and healthy, as a rollout judges it). The rule itself is the
//! core's (`core/machine/evacuation.rs`, shared with maintenance windows);
//! this module holds the shapes.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ids::{AgentId, TaskId};

/// The floor a drain keeps for every service with tasks on the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinHealthy {
    /// At least this many available (RUNNING and healthy) tasks.
    Count(u32),
    /// At least this share of the service's `instances`, in percent (0 to
    /// 100), rounded up.
    Percent(u32),
}

/// The schema of the JSON a [`MinHealthy`] is written and read as: a
/// non-negative integer (a count), or `"P%"` (a share of `instances`).
impl utoipa::PartialSchema for MinHealthy {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(r"^[0-9]+%$")),
            )
            .description(Some(
                "At least this many available tasks (an integer), or this share of the \
                 service's instances (\"P%\", 0 to 100, rounded up)",
            ))
            .into()
    }
}

impl utoipa::ToSchema for MinHealthy {}

impl MinHealthy {
    /// The floor for a service of `instances` instances: N, or
    /// ⌈P × instances / 100⌉.
    pub fn floor(self, instances: u32) -> u32 {
        match self {
            MinHealthy::Count(n) => n,
            MinHealthy::Percent(p) => {
                let product = u64::from(p) * u64::from(instances);
                u32::try_from(product.div_ceil(100)).unwrap_or(u32::MAX)
            }
        }
    }

    /// Reads the JSON the API takes: a non-negative integer, or a string
    /// `"P%"` with P an integer from 0 to 100, digits only and nothing
    /// around it (white space is refused, as in every duration and
    /// percentage: [`crate::util::refuse_padding`]). The error says what
    /// is expected.
    pub fn from_json(value: &serde_json::Value) -> Result<MinHealthy, String> {
        const EXPECTED: &str =
            r#"must be a non-negative integer (tasks) or a string "P%" with P from 0 to 100"#;
        if let serde_json::Value::String(s) = value {
            crate::util::refuse_padding(s, "75%")?;
        }
        match value {
            serde_json::Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(MinHealthy::Count)
                .ok_or_else(|| EXPECTED.to_string()),
            serde_json::Value::String(s) => s
                .strip_suffix('%')
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<u32>().ok())
                .filter(|p| *p <= 100)
                .map(MinHealthy::Percent)
                .ok_or_else(|| EXPECTED.to_string()),
            _ => Err(EXPECTED.to_string()),
        }
    }
}

impl std::fmt::Display for MinHealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MinHealthy::Count(n) => write!(f, "{n}"),
            MinHealthy::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// JSON: a number (`3`) or a string (`"75%"`), as the API takes it.
impl Serialize for MinHealthy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MinHealthy::Count(n) => s.serialize_u32(*n),
            MinHealthy::Percent(_) => s.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for MinHealthy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        MinHealthy::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// What follows a drain once every task moved: an operator call on the
/// master (`include/mesos/v1/master/master.proto`, `DRAIN_AGENT`,
/// `DEACTIVATE_AGENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThenAction {
    /// Nothing: the agent stays held by the appliance only.
    #[default]
    None,
    /// `DRAIN_AGENT` (the master kills what else runs there).
    DrainAgent,
    /// `DEACTIVATE_AGENT` (the master offers it to nobody).
    DeactivateAgent,
}

impl ThenAction {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            ThenAction::None => "none",
            ThenAction::DrainAgent => "drain_agent",
            ThenAction::DeactivateAgent => "deactivate_agent",
        }
    }

    /// Reads the API's name; the error lists the names.
    pub fn parse(name: &str) -> Result<ThenAction, String> {
        match name {
            "none" => Ok(ThenAction::None),
            "drain_agent" => Ok(ThenAction::DrainAgent),
            "deactivate_agent" => Ok(ThenAction::DeactivateAgent),
            _ => Err(r#"must be "none", "drain_agent" or "deactivate_agent""#.into()),
        }
    }
}

/// Where a drain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DrainState {
    /// Tasks are being moved off; the agent takes no new task.
    Running,
    /// Every task moved; the agent still takes no new task until the
    /// drain is cancelled.
    Done,
    /// Cancelled by an operator: the agent takes tasks again.
    Cancelled,
}

impl DrainState {
    /// True while the agent is held (no new task goes there).
    pub fn holds(self) -> bool {
        matches!(self, DrainState::Running | DrainState::Done)
    }

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            DrainState::Running => "running",
            DrainState::Done => "done",
            DrainState::Cancelled => "cancelled",
        }
    }
}

/// One drain, as stored at `drains/<agent_id>` (JSON, versioned writes by
/// the leader only). A new leader reads it and goes on where the last one
/// stopped: the moves are known from the task records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DrainRecord {
    /// The agent drained.
    pub agent_id: AgentId,
    /// The floor kept for every service with tasks there.
    pub min_healthy: MinHealthy,
    /// Why (the operator's words), if given.
    #[serde(default)]
    pub reason: Option<String>,
    /// Who started it (the audit trail's actor name).
    pub by: String,
    /// When it started, seconds since the UNIX epoch.
    pub started_at: f64,
    /// The operator call once done.
    #[serde(default)]
    pub then: ThenAction,
    /// Where it stands.
    pub state: DrainState,
    /// When it became done or cancelled, seconds since the UNIX epoch.
    #[serde(default)]
    pub finished_at: Option<f64>,
    /// Who cancelled it, when cancelled.
    #[serde(default)]
    pub cancelled_by: Option<String>,
    /// The `then` call was answered by the master (a new leader does not
    /// send it again).
    #[serde(default)]
    pub then_called: bool,
    /// The `then` call's failure, if it failed.
    #[serde(default)]
    pub then_error: Option<String>,
    /// Cancelled after its `then` call: the master's `REACTIVATE_AGENT`
    /// was answered (a new leader does not send it again).
    #[serde(default)]
    pub reactivated: bool,
    /// The `REACTIVATE_AGENT` call's failure, if it failed.
    #[serde(default)]
    pub reactivate_error: Option<String>,
    /// `REACTIVATE_AGENT` calls answered so far (refusals included).
    #[serde(default)]
    pub reactivate_tries: u32,
    /// The last `REACTIVATE_AGENT` was refused while the master's agent
    /// was still DRAINING (`Master::Http::_reactivateAgent` in
    /// `src/master/http.cpp`): the leader sends it again once GET_AGENTS
    /// shows the agent DRAINED, a bounded number of times within a bounded
    /// time (`docs/draining.md`, "The API").
    #[serde(default)]
    pub reactivate_retry: bool,
    /// How it stood when it ended (became done, or was cancelled while
    /// running): shown from then on instead of the task records, which go
    /// on changing (`None` while running, and in records stored before
    /// this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<DrainEnd>,
}

/// The most tasks a drain's end keeps ([`DrainEnd`]): the record stays
/// far below ZooKeeper's request limit (`jute.maxbuffer`, 1 MiB) for an
/// agent with thousands of tasks — each kept task is a few hundred bytes
/// at most (its reason is cut at [`ENDED_REASON_CHARS`]).
pub const ENDED_TASKS_KEPT: usize = 100;

/// The longest reason of a kept task, in characters.
pub const ENDED_REASON_CHARS: usize = 300;

/// How a drain stood when it ended, stored with its record: its counts,
/// exact, and at most [`ENDED_TASKS_KEPT`] of its tasks (blocked, waiting,
/// ended and stopped ones before moved ones), by task ID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DrainEnd {
    /// Tasks moved.
    pub moved: usize,
    /// Tasks whose replacement was not available yet.
    pub waiting: usize,
    /// Tasks that could not move.
    pub blocked: usize,
    /// Tasks killed without a replacement, not by the drain.
    pub stopped: usize,
    /// Tasks that ended on the agent without a kill since the drain began
    /// ([`DrainProgress::Ended`]; 0 in ends stored before it was counted).
    #[serde(default)]
    pub ended: usize,
    /// The tasks kept.
    pub tasks: Vec<DrainTask>,
    /// How many tasks were not kept.
    #[serde(default)]
    pub left_out: usize,
}

impl DrainEnd {
    /// The end of a drain whose tasks were `tasks` (see the type's doc).
    pub fn new(mut tasks: Vec<DrainTask>) -> DrainEnd {
        let count = |p: DrainProgress| tasks.iter().filter(|t| t.progress == p).count();
        let (moved, waiting, blocked, stopped, ended) = (
            count(DrainProgress::Moved),
            count(DrainProgress::WaitingForHealth),
            count(DrainProgress::Blocked),
            count(DrainProgress::Stopped),
            count(DrainProgress::Ended),
        );
        let rank = |p: DrainProgress| match p {
            DrainProgress::Blocked => 0,
            DrainProgress::WaitingForHealth => 1,
            DrainProgress::Ended => 2,
            DrainProgress::Stopped => 3,
            DrainProgress::Moved => 4,
        };
        tasks.sort_by(|a, b| (rank(a.progress), &a.task_id).cmp(&(rank(b.progress), &b.task_id)));
        let left_out = tasks.len().saturating_sub(ENDED_TASKS_KEPT);
        tasks.truncate(ENDED_TASKS_KEPT);
        for task in &mut tasks {
            if let Some(reason) = &mut task.reason
                && reason.chars().count() > ENDED_REASON_CHARS
            {
                *reason = reason.chars().take(ENDED_REASON_CHARS).collect::<String>() + "…";
            }
        }
        tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        DrainEnd {
            moved,
            waiting,
            blocked,
            stopped,
            ended,
            tasks,
            left_out,
        }
    }
}

/// How one task of the drained agent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DrainProgress {
    /// Its replacement is available elsewhere and it was killed (or is
    /// being killed).
    Moved,
    /// Its replacement runs elsewhere but is not available yet.
    WaitingForHealth,
    /// Nothing moves: no replacement could be placed, killing it would
    /// take its service below the floor, or it is a job's task, whose run
    /// the drain waits for (see `reason`).
    Blocked,
    /// Killed (or being killed) since the drain began, not by the drain's
    /// move: its service no longer wants its instance (a scale-down) or
    /// was deleted, or another rule killed it (a maintenance window moved
    /// it first, a failed health check); `reason` is the kill's.
    Stopped,
    /// Ended on the agent since the drain began without being killed:
    /// lost with its agent (the master's TASK_LOST, TASK_GONE_BY_OPERATOR
    /// of an agent put DOWN for maintenance), or finished or failed on its
    /// own; `reason` is its last status (state, reason, message).
    Ended,
}

/// One task of the drained agent in the progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DrainTask {
    /// The task on the drained agent.
    pub task_id: TaskId,
    /// Its service.
    pub service: String,
    /// Its instance.
    pub instance: u32,
    /// Where it stands.
    pub progress: DrainProgress,
    /// The instance's copy on another agent, when there is one.
    pub replacement: Option<TaskId>,
    /// Why it waits, is blocked, was stopped or ended (`None` once moved).
    pub reason: Option<String>,
}

/// A drain with its progress: `drain` of an `/api/v1/agents` entry and of
/// the snapshot's agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DrainStatus {
    /// Where it stands.
    pub state: DrainState,
    /// The floor, as given (`3` or `"75%"`).
    pub min_healthy: MinHealthy,
    /// Why, if given.
    pub reason: Option<String>,
    /// Who started it.
    pub by: String,
    /// When it started, seconds since the UNIX epoch.
    pub started_at: f64,
    /// When it became done or was cancelled.
    pub finished_at: Option<f64>,
    /// The operator call once done.
    pub then: ThenAction,
    /// The `then` call was answered.
    pub then_called: bool,
    /// The `then` call's failure.
    pub then_error: Option<String>,
    /// Cancelled after its `then` call: `REACTIVATE_AGENT` was answered.
    #[serde(default)]
    pub reactivated: bool,
    /// The `REACTIVATE_AGENT` call's failure: the agent may still be
    /// deactivated or drained at the master (`docs/draining.md`).
    #[serde(default)]
    pub reactivate_error: Option<String>,
    /// `REACTIVATE_AGENT` calls answered so far (refusals included).
    #[serde(default)]
    pub reactivate_tries: u32,
    /// Refused while the master's agent was still DRAINING: it is sent
    /// again once GET_AGENTS shows the agent DRAINED (`docs/draining.md`).
    #[serde(default)]
    pub reactivate_retry: bool,
    /// Tasks moved.
    pub moved: usize,
    /// Tasks whose replacement is not available yet.
    pub waiting: usize,
    /// Tasks that cannot move now.
    pub blocked: usize,
    /// Tasks killed without a replacement: no longer wanted by their
    /// service ([`DrainProgress::Stopped`]).
    #[serde(default)]
    pub stopped: usize,
    /// Tasks that ended there without a kill since the drain began: lost
    /// with the agent, or finished or failed ([`DrainProgress::Ended`]).
    #[serde(default)]
    pub ended: usize,
    /// This framework's tasks of the agent, moved or still there, by task
    /// ID; of a drain that ended, those kept when it ended
    /// ([`DrainEnd`]).
    pub tasks: Vec<DrainTask>,
    /// Tasks of a drain that ended not listed in `tasks` (counted above).
    #[serde(default)]
    pub tasks_left_out: usize,
}

impl DrainStatus {
    /// The status of `record` with `tasks` (the counts are theirs); of a
    /// drain that ended, its end as stored (`tasks` unused).
    pub fn new(record: &DrainRecord, tasks: Vec<DrainTask>) -> DrainStatus {
        if let Some(end) = &record.ended {
            return DrainStatus {
                moved: end.moved,
                waiting: end.waiting,
                blocked: end.blocked,
                stopped: end.stopped,
                ended: end.ended,
                tasks: end.tasks.clone(),
                tasks_left_out: end.left_out,
                ..DrainStatus::new(
                    &DrainRecord {
                        ended: None,
                        ..record.clone()
                    },
                    Vec::new(),
                )
            };
        }
        let count = |p: DrainProgress| tasks.iter().filter(|t| t.progress == p).count();
        DrainStatus {
            state: record.state,
            min_healthy: record.min_healthy,
            reason: record.reason.clone(),
            by: record.by.clone(),
            started_at: record.started_at,
            finished_at: record.finished_at,
            then: record.then,
            then_called: record.then_called,
            then_error: record.then_error.clone(),
            reactivated: record.reactivated,
            reactivate_error: record.reactivate_error.clone(),
            reactivate_tries: record.reactivate_tries,
            reactivate_retry: record.reactivate_retry,
            moved: count(DrainProgress::Moved),
            waiting: count(DrainProgress::WaitingForHealth),
            blocked: count(DrainProgress::Blocked),
            stopped: count(DrainProgress::Stopped),
            ended: count(DrainProgress::Ended),
            tasks,
            tasks_left_out: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn min_healthy_reads_counts_and_percentages() {
        assert_eq!(MinHealthy::from_json(&json!(3)), Ok(MinHealthy::Count(3)));
        assert_eq!(
            MinHealthy::from_json(&json!("75%")),
            Ok(MinHealthy::Percent(75))
        );
        for bad in [
            json!(-1),
            json!(1.5),
            json!("101%"),
            json!("75"),
            json!(null),
            json!("75 %"),
            json!("+75%"),
            json!("%"),
        ] {
            assert!(MinHealthy::from_json(&bad).is_err(), "{bad}");
        }
        for padded in [" 50%", "50% ", "\t50%"] {
            let e = MinHealthy::from_json(&json!(padded)).unwrap_err();
            assert!(e.contains("has white space around it"), "{padded:?}: {e}");
        }
        assert_eq!(
            serde_json::to_value(MinHealthy::Count(3)).unwrap(),
            json!(3)
        );
        assert_eq!(
            serde_json::to_value(MinHealthy::Percent(75)).unwrap(),
            json!("75%")
        );
    }

    #[test]
    fn percentages_round_up() {
        assert_eq!(MinHealthy::Percent(75).floor(4), 3);
        assert_eq!(MinHealthy::Percent(50).floor(3), 2);
        assert_eq!(MinHealthy::Percent(100).floor(3), 3);
        assert_eq!(MinHealthy::Percent(0).floor(3), 0);
        assert_eq!(MinHealthy::Count(3).floor(10), 3);
    }

    /// An end stored before [`DrainProgress::Ended`] was counted reads
    /// with none ended.
    #[test]
    fn an_end_stored_before_ended_tasks_reads() {
        let end: DrainEnd = serde_json::from_value(json!({
            "moved": 1, "waiting": 0, "blocked": 0, "stopped": 0, "tasks": []
        }))
        .unwrap();
        assert_eq!((end.moved, end.ended, end.left_out), (1, 0, 0));
    }

    /// A drain's end keeps its counts exact and at most
    /// [`ENDED_TASKS_KEPT`] tasks, the ones that did not move first, with
    /// their reasons cut: an agent with thousands of tasks stays far
    /// below ZooKeeper's 1 MiB.
    #[test]
    fn a_drains_end_is_bounded() {
        let task = |i: usize, progress| DrainTask {
            task_id: TaskId::from(format!("svc.{i}.{}", "x".repeat(60))),
            service: "svc".into(),
            instance: i as u32,
            progress,
            replacement: Some(TaskId::from(format!("svc.{i}.y"))),
            reason: Some("r".repeat(5000)),
        };
        let mut tasks: Vec<DrainTask> = (0..4000).map(|i| task(i, DrainProgress::Moved)).collect();
        tasks.extend((4000..4010).map(|i| task(i, DrainProgress::Blocked)));
        let end = DrainEnd::new(tasks);
        assert_eq!((end.moved, end.blocked), (4000, 10));
        assert_eq!(end.tasks.len(), ENDED_TASKS_KEPT);
        assert_eq!(end.left_out, 4010 - ENDED_TASKS_KEPT);
        let blocked = end
            .tasks
            .iter()
            .filter(|t| t.progress == DrainProgress::Blocked)
            .count();
        assert_eq!(blocked, 10);
        let bytes = serde_json::to_vec(&end).unwrap().len();
        assert!(bytes < 100_000, "{bytes}");
    }
}
