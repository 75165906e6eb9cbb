//! Read-only views of the master: the operator API's `GET_FRAMEWORKS`
//! response, the legacy `/master/state` and `/master/frameworks` JSON
//! (plain-string IDs, seconds as floats: `docs/mesos-protocol.md#legacy-endpoints`,
//! capture i),
//! and the typed views the testbed's library API and control API return.
//!
//! Sources in the Mesos tree: `src/master/readonly_handler.cpp` (the
//! `/state` and `/frameworks` handlers and their framework and agent
//! writers), `src/common/http.cpp` (the JSON of tasks, resources and
//! attributes), `src/master/http.cpp` (`getFrameworks` for GET_FRAMEWORKS)
//! and `include/mesos/v1/master/master.proto` (`Response.GetFrameworks`).

use serde::Serialize;
use serde_json::{Value, json};

use crate::mesos::resources::{self, Resources};
use crate::mesos::v1::master::response;
use crate::mesos::v1::{self, TaskState};
use crate::testbed::master::tasks::{Task, container_status};
use crate::testbed::master::{AgentState, Framework, Master};

/// A task as the testbed sees it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskView {
    /// Framework ID.
    pub framework_id: String,
    /// Task ID.
    pub task_id: String,
    /// Agent ID.
    pub agent_id: String,
    /// Executor ID (the task ID for the command executor).
    pub executor_id: String,
    /// Latest state known to the master (serialized by its Mesos name).
    #[serde(serialize_with = "state_name")]
    pub state: TaskState,
    /// True while the task's agent is unreachable.
    pub unreachable: bool,
    /// Updates the agent holds that the scheduler has not acknowledged.
    pub unacknowledged_updates: usize,
    /// The state of the latest update the scheduler acknowledged (by its
    /// Mesos name), `None` before the first: the testbed's own record.
    #[serde(serialize_with = "optional_state_name")]
    pub acknowledged: Option<TaskState>,
    /// `healthy` of the latest status the master has seen, if set.
    pub healthy: Option<bool>,
    /// The master no longer tracks the task: it ended (its terminal update
    /// acknowledged, its framework removed or its agent gone). `state` is
    /// its terminal state.
    pub completed: bool,
}

fn optional_state_name<S: serde::Serializer>(
    state: &Option<TaskState>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match state {
        Some(state) => s.serialize_str(state.as_str_name()),
        None => s.serialize_none(),
    }
}

fn state_name<S: serde::Serializer>(state: &TaskState, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state.as_str_name())
}

/// A framework as the testbed sees it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FrameworkView {
    /// Framework ID.
    pub id: String,
    /// `FrameworkInfo.name`.
    pub name: String,
    /// Has a live subscription.
    pub connected: bool,
    /// Learnt from agents after a master failover.
    pub recovered: bool,
    /// Removed (in the bounded completed list).
    pub completed: bool,
    /// `FrameworkInfo.failover_timeout` in seconds.
    pub failover_timeout_seconds: f64,
    /// Status updates re-sent to it because their acknowledgement came
    /// later than the agent's retry interval (`--status-update-retry-min`).
    pub updates_resent: u64,
}

/// An agent as the testbed sees it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AgentView {
    /// Agent ID (`<master-id>-S<n>`).
    pub id: String,
    /// Hostname.
    pub hostname: String,
    /// `registered`, `unreachable` or `recovering`.
    pub state: String,
    /// Executors running there: `(framework ID, executor ID, framework messages received)`.
    pub executors: Vec<(String, String, usize)>,
    /// Its containerizers (agent `--containerizers`).
    pub containerizers: Vec<crate::testbed::config::Containerizer>,
    /// Its Mesos containerizer's image providers (agent `--image_providers`).
    pub image_providers: Vec<crate::testbed::config::ImageProvider>,
}

fn task_view(t: &Task, unreachable: bool, completed: bool) -> TaskView {
    TaskView {
        framework_id: t.framework_id.clone(),
        task_id: t.task_id.value.clone(),
        agent_id: t.agent_id.clone(),
        executor_id: t.executor_id.clone(),
        state: t.state,
        unreachable,
        unacknowledged_updates: t.pending.len(),
        acknowledged: t.acknowledged,
        healthy: t.healthy,
        completed,
    }
}

/// The task lists of a framework in the legacy JSON, in the order
/// [`FrameworkDraft::tasks`] holds them.
const TASK_LISTS: [&str; 3] = ["tasks", "unreachable_tasks", "completed_tasks"];

/// A framework's legacy JSON without its task lists, and copies of the
/// tasks to render into them: taken under the master's lock (a clone per
/// task), rendered after it is released, so that a big `/master/state`
/// does not hold the master (`docs/testbed.md#inspection`).
pub(crate) struct FrameworkDraft {
    json: Value,
    tasks: [Vec<Task>; 3],
}

impl FrameworkDraft {
    /// Writes the framework's JSON to `out`, one task at a time: the
    /// memory it takes is the output and one task's JSON.
    fn write(&self, out: &mut Vec<u8>) {
        write_object(out, &self.json, |out| {
            for (key, tasks) in TASK_LISTS.iter().zip(&self.tasks) {
                write_array(out, key, tasks, |out, t| write_value(out, &task_json(t)));
            }
        });
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    serde_json::to_writer(out, value).expect("JSON values serialize");
}

/// Writes `head` (a non-empty object) to `out` with the fields `tail`
/// writes (each as `,"key":value`) added at its end.
fn write_object(out: &mut Vec<u8>, head: &Value, tail: impl FnOnce(&mut Vec<u8>)) {
    write_value(out, head);
    let close = out.pop();
    debug_assert_eq!(close, Some(b'}'));
    tail(out);
    out.push(b'}');
}

/// Writes `,"key":[…]` to `out`, each item by `item`.
fn write_array<T>(
    out: &mut Vec<u8>,
    key: &str,
    items: &[T],
    mut item: impl FnMut(&mut Vec<u8>, &T),
) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(out, it);
    }
    out.push(b']');
}

/// `/master/frameworks` (or the frameworks of `/master/state`) before its
/// tasks are rendered.
pub(crate) struct FrameworksDraft {
    active: Vec<FrameworkDraft>,
    completed: Vec<FrameworkDraft>,
}

impl FrameworksDraft {
    /// Writes `,"frameworks":[…],"completed_frameworks":[…]`.
    fn write_fields(&self, out: &mut Vec<u8>) {
        for (key, drafts) in [
            ("frameworks", &self.active),
            ("completed_frameworks", &self.completed),
        ] {
            write_array(out, key, drafts, |out, f| f.write(out));
        }
    }

    /// The `/master/frameworks` JSON.
    pub fn render(self) -> Vec<u8> {
        let mut out = Vec::new();
        write_object(&mut out, &json!({"unregistered_frameworks": []}), |out| {
            self.write_fields(out)
        });
        out
    }
}

/// `/master/state` before its tasks are rendered.
pub(crate) struct StateDraft {
    /// Every field but `frameworks` and `completed_frameworks`.
    json: Value,
    frameworks: FrameworksDraft,
}

impl StateDraft {
    /// The `/master/state` JSON.
    pub fn render(self) -> Vec<u8> {
        let mut out = Vec::new();
        write_object(&mut out, &self.json, |out| {
            self.frameworks.write_fields(out)
        });
        out
    }
}

fn task_json(t: &Task) -> Value {
    let container = t
        .statuses
        .iter()
        .any(|s| s.container)
        .then(|| crate::mesos::json::to_value(&container_status(t)));
    let statuses: Vec<Value> = t
        .statuses
        .iter()
        .map(|s| {
            let mut v = json!({"state": s.state.as_str_name(), "timestamp": s.timestamp});
            if s.container
                && let Some(cs) = &container
            {
                v["container_status"] = cs.clone();
            }
            // src/common/http.cpp: the task status model shows `healthy` when set.
            if let Some(healthy) = s.healthy {
                v["healthy"] = healthy.into();
            }
            v
        })
        .collect();
    let mut task = json!({
        "id": t.task_id.value,
        "name": t.name,
        "framework_id": t.framework_id,
        "executor_id": if t.custom_executor { t.executor_id.clone() } else { String::new() },
        "slave_id": t.agent_id,
        "state": t.state.as_str_name(),
        "resources": t.resources.to_state_json(),
        "role": "*",
        "statuses": statuses,
    });
    // What the master copied from the TaskInfo (`createTask` in
    // src/common/protobuf_utils.cpp), written when set as
    // src/common/http.cpp writes a Task: `labels` as an array of
    // {key, value}, `container` and `health_check` as their protobuf
    // JSON.
    let info = t.info();
    use crate::mesos::json::to_value;
    if let Some(labels) = &info.labels {
        let labels: Vec<Value> = labels.labels.iter().map(to_value).collect();
        task["labels"] = labels.into();
    }
    if let Some(container) = &info.container {
        task["container"] = to_value(container);
    }
    if let Some(check) = &info.health_check {
        task["health_check"] = to_value(check);
    }
    task
}

impl Master {
    /// Every live and unreachable task, sorted by framework and task ID.
    pub fn task_views(&self) -> Vec<TaskView> {
        let mut out: Vec<TaskView> = self
            .tasks
            .values()
            .map(|t| task_view(t, false, false))
            .chain(
                self.unreachable_tasks
                    .values()
                    .map(|t| task_view(t, true, false)),
            )
            .collect();
        out.sort_by(|a, b| (&a.framework_id, &a.task_id).cmp(&(&b.framework_id, &b.task_id)));
        out
    }

    /// Live and unreachable tasks, then the completed ones the master
    /// keeps: `GET /testbed/tasks`.
    pub fn all_task_views(&self) -> Vec<TaskView> {
        let mut tasks = self.task_views();
        tasks.extend(self.completed_task_views());
        tasks
    }

    /// The completed tasks the master keeps (up to
    /// `max_completed_tasks_per_framework` per framework, removed frameworks
    /// included), oldest first per framework, frameworks sorted by ID.
    pub fn completed_task_views(&self) -> Vec<TaskView> {
        let mut frameworks: Vec<&Framework> = self
            .frameworks
            .values()
            .chain(self.completed.iter())
            .collect();
        frameworks.sort_by(|a, b| a.id.cmp(&b.id));
        frameworks
            .into_iter()
            .flat_map(|f| f.completed_tasks.iter())
            .map(|t| task_view(t, false, true))
            .collect()
    }

    /// Active, inactive and completed frameworks.
    pub fn framework_views(&self) -> Vec<FrameworkView> {
        let view = |f: &Framework, completed: bool| FrameworkView {
            id: f.id.clone(),
            name: f.info.name.clone(),
            connected: f.connected(),
            recovered: f.recovered,
            completed,
            failover_timeout_seconds: f.info.failover_timeout.unwrap_or(0.0),
            updates_resent: f.updates_resent,
        };
        let mut out: Vec<FrameworkView> =
            self.frameworks.values().map(|f| view(f, false)).collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.extend(self.completed.iter().map(|f| view(f, true)));
        out
    }

    /// The simulated agents.
    pub fn agent_views(&self) -> Vec<AgentView> {
        self.agents
            .iter()
            .map(|a| AgentView {
                id: a.id.clone(),
                hostname: a.spec.hostname.clone(),
                state: match a.state {
                    AgentState::Registered => "registered",
                    AgentState::Unreachable { .. } => "unreachable",
                    AgentState::Recovering => "recovering",
                    AgentState::Gone => "gone",
                    AgentState::Down => "down",
                }
                .into(),
                containerizers: a.spec.containerizers.clone(),
                image_providers: a.spec.image_providers.clone(),
                executors: a
                    .executors
                    .iter()
                    .map(|((f, e), x)| (f.clone(), e.clone(), x.messages.len()))
                    .collect(),
            })
            .collect()
    }

    fn framework_resources(&self, framework_id: &str) -> (Resources, Resources) {
        let mut used = Resources::new();
        for t in self
            .tasks
            .values()
            .filter(|t| t.framework_id == framework_id && !t.released)
        {
            used.add(&t.resources);
        }
        // Command executors take no resources of their own.
        for agent in &self.agents {
            for (_, e) in agent.executors.custom_executors_of(framework_id) {
                used.add(&e.resources);
            }
        }
        let mut offered = Resources::new();
        for o in self
            .offers
            .values()
            .filter(|o| o.framework_id == framework_id)
        {
            offered.add(&o.resources);
        }
        (used, offered)
    }

    /// `GET_FRAMEWORKS` (operator API v1; `src/master/http.cpp`
    /// `getFrameworks`, message `Response.GetFrameworks` in
    /// `include/mesos/v1/master/master.proto`).
    pub fn get_frameworks(&self) -> response::GetFrameworks {
        let time = |secs: f64| v1::TimeInfo {
            nanoseconds: (secs * 1e9) as i64,
        };
        let entry = |f: &Framework| {
            let (used, offered) = self.framework_resources(&f.id);
            let role = if f.multi_role() { None } else { Some("*") };
            response::get_frameworks::Framework {
                framework_info: f.info.clone(),
                active: f.connected(),
                connected: f.connected(),
                registered_time: (f.registered_time > 0.0).then(|| time(f.registered_time)),
                reregistered_time: f.reregistered_time.map(time),
                unregistered_time: f.unregistered_time.map(time),
                offers: self
                    .offers
                    .values()
                    .filter(|o| o.framework_id == f.id)
                    .map(|o| o.proto.clone())
                    .collect(),
                allocated_resources: used.to_protos(role),
                offered_resources: offered.to_protos(role),
                recovered: f.recovered,
                offer_constraints: Some(Default::default()),
            }
        };
        let mut frameworks: Vec<&Framework> = self.frameworks.values().collect();
        frameworks.sort_by(|a, b| a.id.cmp(&b.id));
        response::GetFrameworks {
            frameworks: frameworks.into_iter().map(entry).collect(),
            completed_frameworks: self.completed.iter().map(entry).collect(),
        }
    }

    #[allow(deprecated)] // FrameworkInfo.role: shown as a real master shows it
    fn framework_draft(&self, f: &Framework) -> FrameworkDraft {
        let (used, offered) = self.framework_resources(&f.id);
        let mut total = used.clone();
        total.add(&offered);
        let of_framework = |tasks: &crate::testbed::master::task_table::TaskTable| -> Vec<Task> {
            let mine = tasks.values().filter(|t| t.framework_id == f.id);
            mine.cloned().collect()
        };
        let tasks = [
            of_framework(&self.tasks),
            of_framework(&self.unreachable_tasks),
            f.completed_tasks.iter().cloned().collect(),
        ];
        let offers: Vec<Value> = self
            .offers
            .iter()
            .filter(|(_, o)| o.framework_id == f.id)
            .map(|(id, o)| json!({"id": id, "framework_id": f.id, "slave_id": o.agent_id, "resources": o.resources.to_state_json()}))
            .collect();
        let executors: Vec<Value> = self
            .agents
            .iter()
            .flat_map(|a| {
                a.executors
                    .custom_executors_of(&f.id)
                    .map(move |(eid, e)| json!({"id": eid, "slave_id": a.id, "resources": e.resources.to_state_json(), "tasks": e.tasks}))
            })
            .collect();
        let capabilities: Vec<&str> = f
            .info
            .capabilities
            .iter()
            .map(|c| c.r#type().as_str_name())
            .collect();
        let mut out = json!({
            "id": f.id,
            "name": f.info.name,
            "user": f.info.user,
            "active": f.connected(),
            "connected": f.connected(),
            "recovered": f.recovered,
            "failover_timeout": f.info.failover_timeout.unwrap_or(0.0),
            "checkpoint": f.info.checkpoint.unwrap_or(false),
            "capabilities": capabilities,
            "registered_time": f.registered_time,
            "unregistered_time": f.unregistered_time.unwrap_or(0.0),
            "hostname": f.info.hostname.clone().unwrap_or_default(),
            "webui_url": f.info.webui_url.clone().unwrap_or_default(),
            "offered_resources": offered.to_state_json(),
            "used_resources": used.to_state_json(),
            "resources": total.to_state_json(),
            "offers": offers,
            "executors": executors,
            "offer_constraints": {},
        });
        if let Some(t) = f.reregistered_time {
            out["reregistered_time"] = json!(t);
        }
        if let Some(p) = &f.info.principal {
            out["principal"] = json!(p);
        }
        if f.multi_role() {
            out["roles"] = json!(f.info.roles);
        } else {
            out["role"] = json!(f.info.role.clone().unwrap_or_else(|| "*".into()));
        }
        FrameworkDraft { json: out, tasks }
    }

    /// `GET /master/frameworks[?framework_id=ID]` (`src/master/readonly_handler.cpp`;
    /// each framework as its full framework writer renders it), to render
    /// after the lock is released.
    pub fn frameworks_draft(&self, only: Option<&str>) -> FrameworksDraft {
        let keep = |f: &&Framework| only.is_none_or(|id| f.id == id);
        let mut active: Vec<&Framework> = self.frameworks.values().filter(keep).collect();
        active.sort_by(|a, b| a.id.cmp(&b.id));
        let drafts = |frameworks: Vec<&Framework>| -> Vec<FrameworkDraft> {
            frameworks
                .into_iter()
                .map(|f| self.framework_draft(f))
                .collect()
        };
        FrameworksDraft {
            active: drafts(active),
            completed: drafts(self.completed.iter().filter(keep).collect()),
        }
    }

    /// The registered agents (of ID `only` if given) as the agent writer of
    /// `src/master/readonly_handler.cpp` renders them, for `/master/state`
    /// and `/master/slaves`.
    pub fn slaves_json(&self, only: Option<&str>) -> Vec<Value> {
        self.agents
            .iter()
            .filter(|a| a.state == AgentState::Registered)
            .filter(|a| only.is_none_or(|id| a.id == id))
            .map(|a| {
                let attributes: serde_json::Map<String, Value> = a
                    .spec
                    .attributes
                    .iter()
                    .map(|at| (at.name.clone(), json!(resources::attribute_text(at))))
                    .collect();
                json!({
                    "id": a.id,
                    "hostname": a.spec.hostname,
                    "port": a.port,
                    "attributes": attributes,
                    "pid": format!("slave(1)@{}:{}", self.cfg.listen.ip(), a.port),
                    "registered_time": a.registered_time,
                    "resources": a.spec.resources.to_state_json(),
                    "used_resources": a.used.to_state_json(),
                    "offered_resources": a.offered.to_state_json(),
                    "reserved_resources": {},
                    "unreserved_resources": a.spec.resources.to_state_json(),
                    "active": true,
                    "deactivated": false,
                    "version": self.cfg.version,
                    "capabilities": ["MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT"],
                })
            })
            .collect()
    }

    /// `GET /master/state` (`src/master/readonly_handler.cpp`: agents as its
    /// agent writer renders them, frameworks as for `/master/frameworks`),
    /// to render after the lock is released.
    pub fn state_draft(&self) -> StateDraft {
        let slaves = self.slaves_json(None);
        let count = |pred: fn(&AgentState) -> bool| {
            self.agents.iter().filter(|a| pred(&a.state)).count() as f64
        };
        let json = json!({
            "version": self.cfg.version,
            "build_date": "",
            "build_time": 0.0,
            "build_user": "mesos-testbed",
            "start_time": self.start_time,
            "elected_time": self.elected_time,
            "id": self.info.id,
            "pid": self.info.pid,
            "hostname": self.info.hostname,
            "activated_slaves": count(|s| *s == AgentState::Registered),
            "deactivated_slaves": 0.0,
            "unreachable_slaves": count(|s| matches!(s, AgentState::Unreachable { .. })),
            "leader": self.info.pid,
            "leader_info": {
                "id": self.info.id,
                "pid": self.info.pid,
                "port": self.info.port,
                "hostname": self.info.hostname,
            },
            "log_dir": "",
            "flags": {},
            "capabilities": ["AGENT_UPDATE", "AGENT_DRAINING", "QUOTA_V2"],
            "slaves": slaves,
            "recovered_slaves": [],
            "orphan_tasks": [],
            "unregistered_frameworks": [],
        });
        StateDraft {
            json,
            frameworks: self.frameworks_draft(None),
        }
    }
}
