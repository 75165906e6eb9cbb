//! Events from two successive scheduler snapshots: what changed for tasks,
//! health, services, rollouts and agents (`docs/events.md#event-types`).
//!
//! The core publishes a snapshot after each change it makes
//! (`docs/architecture.md#snapshots`); the hub compares each with the one
//! before. A task's status updates come from its timeline (the updates
//! that changed the record, [`TaskRecord::timeline`]), so updates applied
//! between two snapshots the hub saw are each reported, as long as fewer
//! than [`TIMELINE_LEN`](crate::scheduler::records::TIMELINE_LEN) arrived
//! in between; other kinds report the state they changed to.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::EventType;
use crate::scheduler::records::{StatusEntry, TaskRecord};
use crate::scheduler::rules::rollout::RolloutStatus;
use crate::scheduler::snapshot::AgentStatus;
use crate::scheduler::{ServiceStatus, Snapshot};

/// `task_status`: one status update of a task (or its launch).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TaskStatusData {
    /// When the update was received (or the task launched), seconds since
    /// the UNIX epoch.
    pub at: f64,
    /// Task ID.
    pub task_id: String,
    /// Its service.
    pub service: String,
    /// Its instance number.
    pub instance: u32,
    /// The Mesos state, e.g. `TASK_RUNNING`.
    pub state: String,
    /// The Mesos reason, e.g. `REASON_COMMAND_EXECUTOR_FAILED`.
    pub reason: Option<String>,
    /// The update's message.
    pub message: Option<String>,
    /// `SOURCE_MASTER`, `SOURCE_AGENT`, `SOURCE_EXECUTOR`.
    pub source: Option<String>,
    /// The agent's ID.
    pub agent_id: String,
    /// The agent's hostname.
    pub hostname: String,
    /// `TaskStatus.healthy` when the update carried it.
    pub healthy: Option<bool>,
}

/// `health`: a task's health check result changed.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HealthData {
    /// Since when, seconds since the UNIX epoch.
    pub at: f64,
    /// Task ID.
    pub task_id: String,
    /// Its service.
    pub service: String,
    /// `true`, `false`, or `null` (no result yet).
    pub healthy: Option<bool>,
    /// The value before.
    pub was: Option<bool>,
}

/// `service`: a service was added, changed or removed.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ServiceData {
    /// When the hub saw it, seconds since the UNIX epoch.
    pub at: f64,
    /// The service's name.
    pub service: String,
    /// `added`, `updated` or `removed`.
    pub change: &'static str,
    /// Desired instances (`null` when removed).
    pub instances: Option<u32>,
    /// The spec's fingerprint (`null` when removed); a new one means a
    /// rolling replacement of its tasks.
    pub fingerprint: Option<String>,
}

/// `deployment`: a service's rollout started, progressed, halted, resumed
/// or ended.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DeploymentData {
    /// When the hub saw it (a halt: when it halted), seconds since the
    /// UNIX epoch.
    pub at: f64,
    /// The service's name.
    pub service: String,
    /// `started`, `step`, `halted`, `resumed` or `done`.
    pub change: &'static str,
    /// Desired instances.
    pub desired: u32,
    /// Instances whose task runs the current spec.
    pub replaced: u32,
    /// Of those, the available ones.
    pub healthy: u32,
    /// Live tasks still on another spec.
    pub remaining: u32,
    /// Why it halted (`halted` only).
    pub reason: Option<String>,
}

/// `agent`: an agent appeared, changed state or left the agent table.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AgentData {
    /// Since when, seconds since the UNIX epoch.
    pub at: f64,
    /// Agent ID.
    pub agent_id: String,
    /// Hostname (may be empty).
    pub hostname: String,
    /// `added`, `removed`, or the state it changed to (`active`,
    /// `unreachable`, `draining`, `drained`, `deactivated`, `gone`).
    pub change: &'static str,
    /// Its state now (the last known state when removed).
    pub state: &'static str,
}

/// One event found by [`diff`].
pub type Found = (EventType, serde_json::Value);

fn push<T: Serialize>(out: &mut Vec<Found>, kind: EventType, data: &T) {
    if let Ok(value) = serde_json::to_value(data) {
        out.push((kind, value));
    }
}

fn status(task: &TaskRecord, entry: Option<&StatusEntry>) -> TaskStatusData {
    TaskStatusData {
        at: entry.map_or(task.launched_at, |e| e.at),
        task_id: task.task_id.to_string(),
        service: task.service.clone(),
        instance: task.instance,
        state: entry
            .map_or(task.state, |e| e.state)
            .as_str_name()
            .to_string(),
        reason: entry
            .and_then(|e| e.reason)
            .map(|r| r.as_str_name().to_string()),
        message: entry.and_then(|e| e.message.clone()),
        source: entry
            .and_then(|e| e.source)
            .map(|s| s.as_str_name().to_string()),
        agent_id: task.agent_id.to_string(),
        hostname: task.hostname.clone(),
        healthy: entry.and_then(|e| e.healthy),
    }
}

/// The timeline entries of `now` that `before` did not have yet.
fn new_entries<'a>(before: &TaskRecord, now: &'a TaskRecord) -> &'a [StatusEntry] {
    let Some(last) = before.timeline.last() else {
        return &now.timeline;
    };
    match now.timeline.iter().rposition(|e| e == last) {
        Some(i) => &now.timeline[i + 1..],
        // The last one seen has rotated out: everything later than it.
        None => {
            let first = now.timeline.partition_point(|e| e.at <= last.at);
            &now.timeline[first..]
        }
    }
}

/// The events of the task lists: in `now`'s order, each task compared with
/// its record in `before`. A snapshot that shares the task list of the one
/// before (a command's answer) has none to compare; otherwise both lists
/// are walked side by side, as the leader lists them in task ID order, and
/// a record still shared with `before` (`Arc::ptr_eq`: unchanged) costs a
/// comparison of IDs. Lists out of order (none the leader makes) are
/// matched by a map instead.
fn tasks<'a>(before: &'a Snapshot, now: &'a Snapshot, out: &mut Vec<TaskEvent<'a>>) {
    if Arc::ptr_eq(&before.tasks, &now.tasks) {
        return;
    }
    if ascending(&before.tasks) && ascending(&now.tasks) {
        let mut old = before.tasks.iter().peekable();
        for task in now.tasks.iter() {
            while old.next_if(|p| p.task_id < task.task_id).is_some() {}
            let prior = old.next_if(|p| p.task_id == task.task_id);
            task_events(prior, task, out);
        }
        return;
    }
    let old: HashMap<&str, &'a Arc<TaskRecord>> = before
        .tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t))
        .collect();
    for task in now.tasks.iter() {
        task_events(old.get(task.task_id.as_str()).copied(), task, out);
    }
}

/// True when `list` is strictly ascending by task ID (each ID once).
fn ascending(list: &[Arc<TaskRecord>]) -> bool {
    list.windows(2).all(|w| w[0].task_id < w[1].task_id)
}

/// The events of `task` against its record in the snapshot before.
fn task_events<'a>(
    prior: Option<&'a Arc<TaskRecord>>,
    task: &'a Arc<TaskRecord>,
    out: &mut Vec<TaskEvent<'a>>,
) {
    if prior.is_some_and(|p| Arc::ptr_eq(p, task)) {
        return;
    }
    let entries: &[StatusEntry] = match prior {
        Some(p) => new_entries(p, task),
        None => &task.timeline,
    };
    if entries.is_empty() {
        // A launch (no update yet), or a change not from an update
        // (e.g. a state restored from the store): report the state.
        if prior.is_none_or(|p| p.state != task.state) {
            out.push(TaskEvent::Status(task, None));
        }
    }
    for entry in entries {
        out.push(TaskEvent::Status(task, Some(entry)));
    }
    let was = prior.and_then(|p| p.healthy);
    if task.healthy != was && (prior.is_some() || task.healthy.is_some()) {
        out.push(TaskEvent::Health(task, was));
    }
}

/// A task's event found by [`tasks`], made into its JSON only if it is
/// kept ([`diff_tail`]).
enum TaskEvent<'a> {
    /// `task_status` of one update (`None`: the task's state).
    Status(&'a TaskRecord, Option<&'a StatusEntry>),
    /// `health`, with the value before.
    Health(&'a TaskRecord, Option<bool>),
}

impl TaskEvent<'_> {
    fn make(self, out: &mut Vec<Found>) {
        match self {
            TaskEvent::Status(task, entry) => {
                push(out, EventType::TaskStatus, &status(task, entry));
            }
            TaskEvent::Health(task, was) => {
                let data = HealthData {
                    at: task.healthy_since.unwrap_or(task.updated_at),
                    task_id: task.task_id.to_string(),
                    service: task.service.clone(),
                    healthy: task.healthy,
                    was,
                };
                push(out, EventType::Health, &data);
            }
        }
    }
}

fn deployment(
    at: f64,
    name: &str,
    change: &'static str,
    r: &RolloutStatus,
    reason: Option<String>,
) -> DeploymentData {
    DeploymentData {
        at,
        service: name.to_string(),
        change,
        desired: r.desired,
        replaced: r.replaced,
        healthy: r.healthy,
        remaining: r.remaining,
        reason,
    }
}

fn services(before: &Snapshot, now: &Snapshot, out: &mut Vec<Found>) {
    let old: HashMap<&str, &ServiceStatus> = before
        .services
        .iter()
        .map(|s| (s.spec.name.as_str(), s))
        .collect();
    let at = now.at;
    for s in &now.services {
        let name = s.spec.name.as_str();
        let prior = old.get(name);
        let change = match prior {
            None => Some("added"),
            Some(p) if p.spec != s.spec => Some("updated"),
            Some(_) => None,
        };
        if let Some(change) = change {
            let data = ServiceData {
                at,
                service: name.to_string(),
                change,
                instances: Some(s.spec.instances),
                fingerprint: Some(s.spec.fingerprint()),
            };
            push(out, EventType::Service, &data);
        }
        let was = prior.and_then(|p| p.rollout.as_ref());
        match (was, &s.rollout) {
            (None, Some(r)) => {
                push(
                    out,
                    EventType::Deployment,
                    &deployment(at, name, "started", r, None),
                );
                if let Some(halt) = &r.halted {
                    let data = deployment(halt.at, name, "halted", r, Some(halt.reason.clone()));
                    push(out, EventType::Deployment, &data);
                }
            }
            (Some(w), Some(r)) => {
                match (&w.halted, &r.halted) {
                    (None, Some(halt)) => {
                        let data =
                            deployment(halt.at, name, "halted", r, Some(halt.reason.clone()));
                        push(out, EventType::Deployment, &data);
                    }
                    (Some(_), None) => {
                        push(
                            out,
                            EventType::Deployment,
                            &deployment(at, name, "resumed", r, None),
                        );
                    }
                    _ => {}
                }
                let moved = (w.desired, w.replaced, w.healthy, w.remaining)
                    != (r.desired, r.replaced, r.healthy, r.remaining);
                if moved {
                    push(
                        out,
                        EventType::Deployment,
                        &deployment(at, name, "step", r, None),
                    );
                }
            }
            (Some(w), None) => {
                let mut done = deployment(at, name, "done", w, None);
                done.replaced = s.spec.instances;
                done.healthy = s.spec.instances;
                done.desired = s.spec.instances;
                done.remaining = 0;
                push(out, EventType::Deployment, &done);
            }
            (None, None) => {}
        }
    }
    let current: std::collections::HashSet<&str> =
        now.services.iter().map(|s| s.spec.name.as_str()).collect();
    for s in &before.services {
        if !current.contains(s.spec.name.as_str()) {
            let data = ServiceData {
                at,
                service: s.spec.name.clone(),
                change: "removed",
                instances: None,
                fingerprint: None,
            };
            push(out, EventType::Service, &data);
        }
    }
}

fn agents(before: &Snapshot, now: &Snapshot, out: &mut Vec<Found>) {
    let old: HashMap<&str, &AgentStatus> = before
        .agents
        .iter()
        .map(|a| (a.agent_id.as_str(), a))
        .collect();
    for a in &now.agents {
        let change = match old.get(a.agent_id.as_str()) {
            None => "added",
            Some(p) if p.state != a.state => a.state.as_str(),
            Some(_) => continue,
        };
        let data = AgentData {
            at: a.since,
            agent_id: a.agent_id.to_string(),
            hostname: a.hostname.clone(),
            change,
            state: a.state.as_str(),
        };
        push(out, EventType::Agent, &data);
    }
    let current: std::collections::HashSet<&str> =
        now.agents.iter().map(|a| a.agent_id.as_str()).collect();
    for a in &before.agents {
        if !current.contains(a.agent_id.as_str()) {
            let data = AgentData {
                at: now.at,
                agent_id: a.agent_id.to_string(),
                hostname: a.hostname.clone(),
                change: "removed",
                state: a.state.as_str(),
            };
            push(out, EventType::Agent, &data);
        }
    }
}

/// The events from `before` to `now`, in this order: tasks (in task ID
/// order; each task's updates in the order received), services and their
/// rollouts, agents.
pub fn diff(before: &Snapshot, now: &Snapshot) -> Vec<Found> {
    diff_tail(before, now, usize::MAX).1
}

/// [`diff`]'s newest `keep` events, with how many older ones were found
/// and not made. The journal keeps a few thousand events and a stream may
/// lag a thousand, so older events of one change are lost to every
/// client: a new leader's first full snapshot, its whole table against
/// none, found about 300,000 task events at 100,000 tasks, and making
/// each into JSON took a tenth of its CPU during the failover
/// (`docs/benchmarks.md`, *A follower that catches up*).
pub fn diff_tail(before: &Snapshot, now: &Snapshot, keep: usize) -> (u64, Vec<Found>) {
    let mut found = Vec::new();
    tasks(before, now, &mut found);
    let mut made = Vec::new();
    services(before, now, &mut made);
    agents(before, now, &mut made);
    let skip = (found.len() + made.len()).saturating_sub(keep);
    let skip_tasks = skip.min(found.len());
    let mut out = Vec::with_capacity(found.len() - skip_tasks + made.len());
    for event in found.into_iter().skip(skip_tasks) {
        event.make(&mut out);
    }
    out.extend(made.into_iter().skip(skip - skip_tasks));
    (u64::try_from(skip).unwrap_or(u64::MAX), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::{ReplicaInfo, Strategy};
    use serde_json::json;

    fn empty() -> Snapshot {
        let replica = ReplicaInfo::new("http://a:8080", "d1", "0.1.0");
        Snapshot::standby(replica, "f", "r", Strategy::Failover)
    }

    fn entry(at: f64, state: &str, healthy: Option<bool>) -> serde_json::Value {
        json!({"at": at, "state": state, "source": "SOURCE_EXECUTOR", "healthy": healthy})
    }

    fn task(
        id: &str,
        state: &str,
        timeline: Vec<serde_json::Value>,
        healthy: Option<bool>,
    ) -> Arc<TaskRecord> {
        let record = json!({
            "task_id": id, "service": "web", "instance": 0, "fingerprint": "f0",
            "agent_id": "S1", "hostname": "agent-1", "executor": "command",
            "executor_id": id, "ports": [], "state": state, "launched_at": 10.0,
            "updated_at": 11.0, "timeline": timeline, "healthy": healthy,
            "healthy_since": healthy.map(|_| 12.0),
        });
        Arc::new(serde_json::from_value(record).expect("a task record"))
    }

    fn kinds(found: &[Found]) -> Vec<(&'static str, String)> {
        found
            .iter()
            .map(|(k, d)| {
                let what = d["change"].as_str().or(d["state"].as_str()).unwrap_or("");
                (k.as_str(), what.to_string())
            })
            .collect()
    }

    /// The tail of a change is its newest events, the same as the whole
    /// diff's last ones, with the older ones counted: a new leader's whole
    /// table (three updates and a health result per task) against none.
    #[test]
    fn the_tail_is_the_newest_events_and_counts_the_rest() {
        let tasks: Vec<Arc<TaskRecord>> = (0..10)
            .map(|i| {
                let timeline = vec![
                    entry(10.0, "TASK_STARTING", None),
                    entry(11.0, "TASK_RUNNING", None),
                    entry(12.0, "TASK_RUNNING", Some(true)),
                ];
                task(&format!("web.{i:02}"), "TASK_RUNNING", timeline, Some(true))
            })
            .collect();
        let mut now = empty();
        now.tasks = tasks.into();
        now.services = Vec::new();
        let whole = diff(&empty(), &now);
        assert_eq!(whole.len(), 40);
        for keep in [0, 1, 7, 39, 40, 41] {
            let (skipped, tail) = diff_tail(&empty(), &now, keep);
            let kept = keep.min(40);
            assert_eq!(skipped, (40 - kept) as u64, "keep {keep}");
            assert_eq!(tail, whole[40 - kept..], "keep {keep}");
        }
    }

    /// The leader's lists are in task ID order and walked side by side;
    /// lists out of order are matched by a map: both find the same events,
    /// for tasks launched between others, changed, unchanged and gone.
    #[test]
    fn lists_in_task_id_order_give_the_events_a_map_finds() {
        let old: Vec<Arc<TaskRecord>> = (0..40)
            .map(|i| task(&format!("web.{i:02}"), "TASK_STAGING", vec![], None))
            .collect();
        let mut now: Vec<Arc<TaskRecord>> = Vec::new();
        for (i, t) in old.iter().enumerate() {
            match i % 5 {
                // Gone.
                0 => {}
                // Changed: one update more.
                1 => now.push(task(
                    t.task_id.as_str(),
                    "TASK_RUNNING",
                    vec![entry(11.0, "TASK_RUNNING", Some(true))],
                    Some(true),
                )),
                // Launched after it (its ID sorts between two old ones).
                2 => {
                    now.push(t.clone());
                    let id = format!("{}.new", t.task_id);
                    now.push(task(&id, "TASK_STAGING", vec![], None));
                }
                _ => now.push(t.clone()),
            }
        }
        let snapshot = |tasks: Vec<Arc<TaskRecord>>| {
            let mut s = empty();
            s.tasks = tasks.into();
            s
        };
        let (before, after) = (snapshot(old.clone()), snapshot(now));
        let walked = diff(&before, &after);
        let mut reversed = old;
        reversed.reverse();
        let mapped = diff(&snapshot(reversed), &after);
        assert_eq!(walked, mapped);
        // 8 changed (a status update and a health change each), 8 launched.
        let count = |kind: &str| kinds(&walked).iter().filter(|(k, _)| *k == kind).count();
        assert_eq!((count("task_status"), count("health")), (16, 8));
        // A snapshot sharing the list of the one before has no task event.
        let mut shared = empty();
        shared.tasks = after.tasks.clone();
        assert!(diff(&after, &shared).is_empty());
    }

    #[test]
    fn each_new_status_update_of_a_task_is_one_event_in_order() {
        let mut a = empty();
        a.tasks = vec![task("web.0.x", "TASK_STAGING", vec![], None)].into();
        let mut b = empty();
        b.tasks = vec![task(
            "web.0.x",
            "TASK_RUNNING",
            vec![
                entry(11.0, "TASK_STARTING", None),
                entry(11.5, "TASK_RUNNING", None),
            ],
            None,
        )]
        .into();
        let found = diff(&a, &b);
        assert_eq!(
            kinds(&found),
            [
                ("task_status", "TASK_STARTING".into()),
                ("task_status", "TASK_RUNNING".into())
            ]
        );
        let d = &found[1].1;
        assert_eq!(
            (
                d["task_id"].as_str(),
                d["service"].as_str(),
                d["agent_id"].as_str()
            ),
            (Some("web.0.x"), Some("web"), Some("S1"))
        );
        // Unchanged records (the same Arc) give nothing; a new task with
        // no update yet is its launch.
        assert!(diff(&b, &b).is_empty());
        let found = diff(&empty(), &a);
        assert_eq!(kinds(&found), [("task_status", "TASK_STAGING".into())]);
    }

    #[test]
    fn updates_after_the_last_one_seen_are_found_when_the_timeline_rotated() {
        let mut a = empty();
        a.tasks = vec![task(
            "t",
            "TASK_RUNNING",
            vec![
                entry(1.0, "TASK_STARTING", None),
                entry(2.0, "TASK_RUNNING", None),
            ],
            None,
        )]
        .into();
        let mut b = empty();
        b.tasks = vec![task(
            "t",
            "TASK_FAILED",
            vec![
                entry(3.0, "TASK_KILLING", None),
                entry(4.0, "TASK_FAILED", None),
            ],
            None,
        )]
        .into();
        assert_eq!(
            kinds(&diff(&a, &b)),
            [
                ("task_status", "TASK_KILLING".into()),
                ("task_status", "TASK_FAILED".into())
            ]
        );
    }

    #[test]
    fn a_health_change_is_a_health_event() {
        let running = vec![entry(2.0, "TASK_RUNNING", None)];
        let mut a = empty();
        a.tasks = vec![task("t", "TASK_RUNNING", running.clone(), None)].into();
        let mut b = empty();
        let mut healthy = running.clone();
        healthy.push(entry(3.0, "TASK_RUNNING", Some(true)));
        b.tasks = vec![task("t", "TASK_RUNNING", healthy, Some(true))].into();
        let found = diff(&a, &b);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].1["healthy"], true);
        assert_eq!(found[1].0, EventType::Health);
        assert_eq!(
            (found[1].1["healthy"].clone(), found[1].1["was"].clone()),
            (json!(true), json!(null))
        );
    }

    fn service(rollout: serde_json::Value) -> ServiceStatus {
        serde_json::from_value(json!({
            "spec": {"name": "web", "command": "serve", "cpus": 0.1, "mem": 32, "instances": 2},
            "running": 2, "starting": 0, "killing": 0, "unreachable": 0,
            "consecutive_failures": 0, "next_launch_after": null, "backoff": [],
            "healthy": 0, "unhealthy": 0, "rollout": rollout, "can_roll_back": false,
            "restore": null
        }))
        .expect("a service status")
    }

    #[test]
    fn services_and_rollouts_report_their_changes() {
        let mut a = empty();
        let mut b = empty();
        b.services = vec![service(json!(null))];
        assert_eq!(kinds(&diff(&a, &b)), [("service", "added".into())]);
        a.services = b.services.clone();
        let progress = |replaced: u32, halted: serde_json::Value| json!({"desired": 2, "replaced": replaced, "healthy": replaced, "remaining": 2 - replaced, "halted": halted});
        b.services = vec![service(progress(0, json!(null)))];
        assert_eq!(kinds(&diff(&a, &b)), [("deployment", "started".into())]);
        let mut c = empty();
        c.services = vec![service(progress(
            1,
            json!({"at": 5.0, "reason": "instance 1 not healthy"}),
        ))];
        let found = diff(&b, &c);
        assert_eq!(
            kinds(&found),
            [
                ("deployment", "halted".into()),
                ("deployment", "step".into())
            ]
        );
        assert_eq!(found[0].1["reason"], "instance 1 not healthy");
        let mut d = empty();
        d.services = vec![service(json!(null))];
        assert_eq!(kinds(&diff(&c, &d)), [("deployment", "done".into())]);
        assert_eq!(kinds(&diff(&d, &empty())), [("service", "removed".into())]);
    }

    #[test]
    fn agents_report_added_state_changes_and_removed() {
        let agent = |state: &str| -> AgentStatus {
            serde_json::from_value(json!({
                "agent_id": "S1", "hostname": "agent-1", "state": state, "since": 3.0,
                "maintenance": null, "tasks": []
            }))
            .expect("an agent")
        };
        let a = empty();
        let mut b = empty();
        b.agents = vec![agent("active")];
        let mut c = empty();
        c.agents = vec![agent("draining")];
        assert_eq!(kinds(&diff(&a, &b)), [("agent", "added".into())]);
        assert_eq!(kinds(&diff(&b, &c)), [("agent", "draining".into())]);
        let found = diff(&c, &a);
        assert_eq!(kinds(&found), [("agent", "removed".into())]);
        assert_eq!(found[0].1["state"], "draining");
    }
}
