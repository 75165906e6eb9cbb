//! View models: what a page shows and its JSON twin returns, built from one
//! [`Snapshot`]. Each `*View` serializes to the JSON of DESIGN.md §5 (keys in
//! snake_case, times in seconds since the UNIX epoch) and is also the data
//! of the page's template, so the two never disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::error::AppError;
use crate::coordination::{DeploymentRecord, Leadership, Member, ReplicaInfo, Strategy};
use crate::scheduler::{
    EventEntry, ExecutorKind, FieldError, FrameworkState, KillRequest, OfferSummary, ReconcileRun,
    ServiceStatus, Snapshot, StatusEntry, TaskRecord,
};

/// Tasks per page unless `per_page` says otherwise.
pub const DEFAULT_PER_PAGE: usize = 50;
/// Largest `per_page` (enough for every task of a service at
/// [`MAX_INSTANCES`](crate::scheduler::services::MAX_INSTANCES)).
pub const MAX_PER_PAGE: usize = 10_000;
/// Events listed unless `limit` says otherwise.
pub const DEFAULT_EVENTS: usize = 200;

/// Aggregates over all tasks of one snapshot, computed once per snapshot
/// (see [`App::derived`](super::App::derived)): with 10,000 tasks, counting
/// them per request cost more than rendering a page.
#[derive(Debug, Clone)]
pub struct Derived {
    /// Task records per Mesos state name, sorted by name.
    pub task_counts: Vec<(String, usize)>,
    /// Task records not in a terminal state.
    pub active_tasks: usize,
    /// Service names from the specs and the task records, sorted.
    pub service_names: Vec<String>,
}

impl Derived {
    /// The aggregates of `s`.
    pub fn new(s: &Snapshot) -> Derived {
        let mut names: BTreeSet<&str> = s.services.iter().map(|x| x.spec.name.as_str()).collect();
        let mut last = "";
        for t in &s.tasks {
            if t.service != last {
                names.insert(&t.service);
                last = &t.service;
            }
        }
        Derived {
            task_counts: s.task_counts(),
            active_tasks: s.tasks.iter().filter(|t| !t.is_terminal()).count(),
            service_names: names.into_iter().map(str::to_string).collect(),
        }
    }
}

/// `framework` in `/api/v1/state`.
#[derive(Debug, Clone, Serialize)]
pub struct FrameworkView {
    /// The framework ID, `null` before the first SUBSCRIBED.
    pub id: Option<String>,
    /// `FrameworkInfo.name`.
    pub name: String,
    /// `FrameworkInfo.role`.
    pub role: String,
    /// `standby`, `subscribing`, `subscribed`, `disconnected`, `removed`,
    /// `failed_over` or `fenced`.
    pub state: &'static str,
    /// Why, for the states that need one.
    pub reason: Option<String>,
    /// `FrameworkInfo.failover_timeout`, seconds.
    pub failover_timeout_seconds: f64,
    /// The leading Mesos master's base URL.
    pub master: Option<String>,
    /// Its version.
    pub master_version: Option<String>,
    /// When the current subscription began.
    pub subscribed_at: Option<f64>,
    /// When the last event (heartbeats included) arrived.
    pub last_event_at: Option<f64>,
    /// Seconds since then, as of the snapshot.
    pub heartbeat_age_seconds: Option<f64>,
    /// The master's heartbeat interval, seconds.
    pub heartbeat_interval_seconds: Option<f64>,
    /// The deployment strategy.
    pub strategy: Strategy,
}

/// `leadership` in `/api/v1/state`.
#[derive(Debug, Clone, Serialize)]
pub struct LeadershipView {
    /// `leader`, `follower`, `candidate` or `suspended`.
    pub role: &'static str,
    /// The leader's advertised URL (this replica's when it leads), when known.
    pub leader_url: Option<String>,
    /// The leader's replica ID, when known.
    pub leader_replica_id: Option<String>,
    /// The leadership term, when this replica leads.
    pub term: Option<u64>,
}

/// `counts` in `/api/v1/state`.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    /// Task records.
    pub tasks: usize,
    /// Task records not in a terminal state.
    pub active_tasks: usize,
    /// Task records per Mesos state name.
    pub tasks_by_state: BTreeMap<String, usize>,
    /// Services.
    pub services: usize,
    /// Desired instances over all services.
    pub desired_instances: u64,
    /// Offers held.
    pub offers: usize,
}

/// Readiness, as `/readyz` answers it and the overview shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    /// Leader and subscribed, or follower of a known (live) leader.
    pub ready: bool,
    /// Why (not) ready, in an operator's words.
    pub reason: String,
}

/// The last and the running reconciliation.
#[derive(Debug, Clone, Serialize)]
pub struct ReconcileSummary {
    /// The run in progress.
    pub running: Option<ReconcileRun>,
    /// The newest finished run.
    pub last: Option<ReconcileRun>,
}

/// `/api/v1/state` and the overview page.
#[derive(Debug, Clone, Serialize)]
pub struct StateView {
    /// The framework.
    pub framework: FrameworkView,
    /// This replica's place in the election.
    pub leadership: LeadershipView,
    /// The deployment record, when known.
    pub deployment: Option<DeploymentRecord>,
    /// Counts.
    pub counts: Counts,
    /// This replica.
    pub replica: ReplicaInfo,
    /// Reconciliation.
    pub reconciliation: ReconcileSummary,
    /// Readiness (as `/readyz`).
    pub readiness: Readiness,
    /// When the snapshot was made.
    pub snapshot_at: f64,
}

/// Whether `s` passes `/readyz`: the invariant "leader ⇔ subscribed" holds,
/// and a follower follows a live leader (its election node exists).
pub fn readiness(s: &Snapshot) -> Readiness {
    let fw = &s.framework;
    let (ready, reason) = match &s.leadership {
        Leadership::Leader { .. } if fw.state == FrameworkState::Subscribed => {
            (true, "leader, subscribed to the master".to_string())
        }
        Leadership::Leader { .. } => (
            false,
            format!(
                "leader, but the framework is {}{}",
                fw.state.as_str(),
                fw.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        ),
        Leadership::Follower { leader: Some(l) } => {
            (true, format!("standby, following {}", l.advertised_url))
        }
        Leadership::Follower { leader: None } => (
            false,
            "standby, but the leader's identity is unreadable".to_string(),
        ),
        Leadership::Candidate => (false, "not in the leader election yet".to_string()),
        Leadership::Suspended => (
            false,
            "ZooKeeper session suspended: not acting until it reconnects".to_string(),
        ),
    };
    Readiness { ready, reason }
}

impl FrameworkView {
    /// The strategy's name (`failover`, `upgrade`, `hard`).
    pub fn strategy_name(&self) -> &'static str {
        match self.strategy {
            Strategy::Failover => "failover",
            Strategy::Upgrade => "upgrade",
            Strategy::Hard => "hard",
        }
    }
}

impl StateView {
    /// The view of `s`, whose aggregates are `d`.
    pub fn new(s: &Snapshot, d: &Derived) -> StateView {
        let fw = &s.framework;
        let leader = match &s.leadership {
            Leadership::Leader { .. } => Some(&s.replica),
            Leadership::Follower { leader } => leader.as_ref(),
            _ => None,
        };
        StateView {
            framework: FrameworkView {
                id: fw.id.clone(),
                name: fw.name.clone(),
                role: fw.role.clone(),
                state: fw.state.as_str(),
                reason: fw.reason.clone(),
                failover_timeout_seconds: fw.failover_timeout_seconds,
                master: fw.master.clone(),
                master_version: fw.master_version.clone(),
                subscribed_at: fw.subscribed_at,
                last_event_at: fw.last_event_at,
                heartbeat_age_seconds: fw.last_event_at.map(|t| (s.at - t).max(0.0)),
                heartbeat_interval_seconds: fw.heartbeat_interval_seconds,
                strategy: fw.strategy,
            },
            leadership: LeadershipView {
                role: s.leadership.role(),
                leader_url: leader.map(|l| l.advertised_url.clone()),
                leader_replica_id: leader.map(|l| l.replica_id.clone()),
                term: s.leadership.term(),
            },
            deployment: s.deployment.clone(),
            counts: Counts {
                tasks: s.tasks.len(),
                active_tasks: d.active_tasks,
                tasks_by_state: d.task_counts.iter().cloned().collect(),
                services: s.services.len(),
                desired_instances: s.services.iter().map(|x| u64::from(x.spec.instances)).sum(),
                offers: s.offers.len(),
            },
            replica: s.replica.clone(),
            reconciliation: ReconcileSummary {
                running: s.reconciliation.running.clone(),
                last: s.reconciliation.history.last().cloned(),
            },
            readiness: readiness(s),
            snapshot_at: s.at,
        }
    }
}

/// One task in `/api/v1/tasks` and on the tasks page.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    /// The task ID.
    pub id: String,
    /// Its service.
    pub service: String,
    /// Its instance number.
    pub instance: u32,
    /// Mesos state name, e.g. `TASK_RUNNING`.
    pub state: String,
    /// Agent ID.
    pub agent_id: String,
    /// Agent hostname.
    pub hostname: String,
    /// `command` or `appliance`.
    pub executor: ExecutorKind,
    /// Executor ID.
    pub executor_id: String,
    /// Host ports.
    pub ports: Vec<u64>,
    /// Launch time.
    pub launched: f64,
    /// Time of the latest status update.
    pub updated: f64,
    /// Set while the scheduler is killing it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill: Option<KillRequest>,
}

impl TaskRow {
    fn new(t: &TaskRecord) -> TaskRow {
        TaskRow {
            id: t.task_id.clone(),
            service: t.service.clone(),
            instance: t.instance,
            state: t.state.clone(),
            agent_id: t.agent_id.clone(),
            hostname: t.hostname.clone(),
            executor: t.executor,
            executor_id: t.executor_id.clone(),
            ports: t.ports.clone(),
            launched: t.launched_at,
            updated: t.updated_at,
            kill: t.kill.clone(),
        }
    }

    /// The ports as `31000,31001` (empty when none).
    pub fn ports_text(&self) -> String {
        self.ports
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Query parameters of `/tasks` and `/api/v1/tasks`, all optional:
/// - `service`: exact service name;
/// - `state`: a Mesos state name (`TASK_RUNNING`), `active` (not terminal)
///   or `terminal`;
/// - `q`: substring of the task ID, agent ID or hostname;
/// - `sort`: `id` (default), `service`, `state`, `host`, `updated`, `launched`;
/// - `order`: `asc` (default) or `desc`;
/// - `page`: from 1; `per_page`: 1–10000, default 50.
///
/// Empty values count as absent (HTML forms send them).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TaskQuery {
    pub service: Option<String>,
    pub state: Option<String>,
    pub q: Option<String>,
    pub sort: Option<String>,
    pub order: Option<String>,
    pub page: Option<String>,
    pub per_page: Option<String>,
}

/// The filters in effect, echoed in `/api/v1/tasks`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskFilter {
    pub service: Option<String>,
    pub state: Option<String>,
    pub q: Option<String>,
}

/// `/api/v1/tasks` and the tasks page.
#[derive(Debug, Clone, Serialize)]
pub struct TasksView {
    /// This page of matching tasks.
    pub tasks: Vec<TaskRow>,
    /// All task records.
    pub total: usize,
    /// Records matching the filters.
    pub matched: usize,
    /// This page, from 1.
    pub page: usize,
    /// Page size.
    pub per_page: usize,
    /// Number of pages (at least 1).
    pub pages: usize,
    /// Sort key.
    pub sort: &'static str,
    /// `asc` or `desc`.
    pub order: &'static str,
    /// Filters in effect.
    pub filter: TaskFilter,
    /// Service names to filter by (page only).
    #[serde(skip)]
    pub service_names: Vec<String>,
    /// Task counts per state (page only).
    #[serde(skip)]
    pub state_counts: Vec<(String, usize)>,
}

const SORT_KEYS: [&str; 6] = ["id", "service", "state", "host", "updated", "launched"];

fn non_empty(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn field(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_string(),
        message: message.into(),
    }
}

fn parse_number(
    name: &str,
    value: &Option<String>,
    default: usize,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> usize {
    match non_empty(value) {
        None => default,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                errors.push(field(name, format!("must be a number from 1 to {max}")));
                default
            }
        },
    }
}

impl TasksView {
    /// The view of `s` (aggregates `d`) under `query`; 400 with field
    /// errors for bad values.
    pub fn new(s: &Snapshot, d: &Derived, query: &TaskQuery) -> Result<TasksView, AppError> {
        let mut errors = Vec::new();
        let filter = TaskFilter {
            service: non_empty(&query.service),
            state: non_empty(&query.state),
            q: non_empty(&query.q),
        };
        if let Some(state) = &filter.state
            && !(state == "active" || state == "terminal" || state.starts_with("TASK_"))
        {
            errors.push(field("state", "a Mesos state name, active or terminal"));
        }
        let sort = match non_empty(&query.sort) {
            None => "id",
            Some(k) => SORT_KEYS
                .iter()
                .copied()
                .find(|s| *s == k)
                .unwrap_or_else(|| {
                    errors.push(field("sort", format!("one of {}", SORT_KEYS.join(", "))));
                    "id"
                }),
        };
        let order = match non_empty(&query.order).as_deref() {
            None | Some("asc") => "asc",
            Some("desc") => "desc",
            Some(_) => {
                errors.push(field("order", "asc or desc"));
                "asc"
            }
        };
        let page = parse_number("page", &query.page, 1, usize::MAX, &mut errors);
        let per_page = parse_number(
            "per_page",
            &query.per_page,
            DEFAULT_PER_PAGE,
            MAX_PER_PAGE,
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(AppError::invalid(errors));
        }

        let needle = filter.q.as_deref();
        let unfiltered = filter.service.is_none() && filter.state.is_none() && needle.is_none();
        let start = (page - 1).saturating_mul(per_page);
        // The snapshot holds tasks sorted by ID: the default view is a slice.
        if unfiltered && sort == "id" {
            let n = s.tasks.len();
            let rows: Vec<TaskRow> = if order == "asc" {
                s.tasks
                    .iter()
                    .skip(start)
                    .take(per_page)
                    .map(|t| TaskRow::new(t))
                    .collect()
            } else {
                s.tasks
                    .iter()
                    .rev()
                    .skip(start)
                    .take(per_page)
                    .map(|t| TaskRow::new(t))
                    .collect()
            };
            return Ok(TasksView {
                tasks: rows,
                total: n,
                matched: n,
                page,
                per_page,
                pages: n.div_ceil(per_page).max(1),
                sort,
                order,
                filter,
                service_names: d.service_names.clone(),
                state_counts: d.task_counts.clone(),
            });
        }
        let mut matched: Vec<&Arc<TaskRecord>> = s
            .tasks
            .iter()
            .filter(|t| filter.service.as_ref().is_none_or(|x| &t.service == x))
            .filter(|t| match filter.state.as_deref() {
                None => true,
                Some("active") => !t.is_terminal(),
                Some("terminal") => t.is_terminal(),
                Some(state) => t.state == state,
            })
            .filter(|t| {
                needle.is_none_or(|n| {
                    t.task_id.contains(n) || t.hostname.contains(n) || t.agent_id.contains(n)
                })
            })
            .collect();
        // Other keys sort stably and fall back on the ID order.
        match sort {
            "service" => {
                matched.sort_by(|a, b| (&a.service, a.instance).cmp(&(&b.service, b.instance)))
            }
            "state" => matched.sort_by(|a, b| a.state.cmp(&b.state)),
            "host" => matched.sort_by(|a, b| a.hostname.cmp(&b.hostname)),
            "updated" => matched.sort_by(|a, b| a.updated_at.total_cmp(&b.updated_at)),
            "launched" => matched.sort_by(|a, b| a.launched_at.total_cmp(&b.launched_at)),
            _ => {}
        }
        if order == "desc" {
            matched.reverse();
        }
        let pages = matched.len().div_ceil(per_page).max(1);
        let tasks = matched
            .iter()
            .skip(start)
            .take(per_page)
            .map(|t| TaskRow::new(t))
            .collect();
        Ok(TasksView {
            tasks,
            total: s.tasks.len(),
            matched: matched.len(),
            page,
            per_page,
            pages,
            sort,
            order,
            filter,
            service_names: d.service_names.clone(),
            state_counts: d.task_counts.clone(),
        })
    }

    /// The query string of this view with `changes` applied (`""` removes a
    /// key); defaults are left out. Starts with `?` unless empty.
    pub fn query(&self, changes: &[(&str, &str)]) -> String {
        let page = self.page.to_string();
        let per_page = self.per_page.to_string();
        let mut pairs: Vec<(&str, &str)> = vec![
            ("service", self.filter.service.as_deref().unwrap_or("")),
            ("state", self.filter.state.as_deref().unwrap_or("")),
            ("q", self.filter.q.as_deref().unwrap_or("")),
            ("sort", if self.sort == "id" { "" } else { self.sort }),
            ("order", if self.order == "asc" { "" } else { self.order }),
            ("page", if self.page == 1 { "" } else { &page }),
            (
                "per_page",
                if self.per_page == DEFAULT_PER_PAGE {
                    ""
                } else {
                    &per_page
                },
            ),
        ];
        for (k, v) in changes {
            if let Some(pair) = pairs.iter_mut().find(|(key, _)| key == k) {
                pair.1 = v;
            }
        }
        pairs.retain(|(_, v)| !v.is_empty());
        if pairs.is_empty() {
            String::new()
        } else {
            format!(
                "?{}",
                serde_urlencoded::to_string(&pairs).unwrap_or_default()
            )
        }
    }

    /// Link to sort by `key`: toggles the order when already sorted by it.
    pub fn sort_link(&self, key: &str) -> String {
        let order = if self.sort == key && self.order == "asc" {
            "desc"
        } else {
            ""
        };
        let key = if key == "id" { "" } else { key };
        format!(
            "/tasks{}",
            self.query(&[("sort", key), ("order", order), ("page", "")])
        )
    }

    /// `▲`/`▼` after the column this view is sorted by.
    pub fn sort_mark(&self, key: &str) -> &'static str {
        match (self.sort == key, self.order) {
            (true, "asc") => "▲",
            (true, _) => "▼",
            _ => "",
        }
    }

    /// Link to page `page`.
    pub fn page_link(&self, page: impl std::borrow::Borrow<usize>) -> String {
        let page = *page.borrow();
        let page = if page <= 1 {
            String::new()
        } else {
            page.to_string()
        };
        format!("/tasks{}", self.query(&[("page", &page)]))
    }

    /// Link to the tasks in `state` (other filters kept, page reset).
    pub fn state_link(&self, state: &str) -> String {
        format!("/tasks{}", self.query(&[("state", state), ("page", "")]))
    }

    /// Whether `name` is the service filtered by.
    pub fn service_selected(&self, name: &str) -> bool {
        self.filter.service.as_deref() == Some(name)
    }

    /// Whether `state` is the state filtered by.
    pub fn state_selected(&self, state: &str) -> bool {
        self.filter.state.as_deref() == Some(state)
    }

    /// The text filter (empty when none).
    pub fn q(&self) -> &str {
        self.filter.q.as_deref().unwrap_or("")
    }

    /// Index (from 1) of the first task on this page.
    pub fn first_index(&self) -> usize {
        if self.tasks.is_empty() {
            0
        } else {
            (self.page - 1) * self.per_page + 1
        }
    }

    /// Index of the last task on this page.
    pub fn last_index(&self) -> usize {
        self.first_index() + self.tasks.len().saturating_sub(1)
    }
}

/// `/api/v1/tasks/{id}` and the task page.
#[derive(Debug, Clone, Serialize)]
pub struct TaskDetailView {
    /// The task.
    pub task: TaskRow,
    /// Fingerprint of the spec it was launched from.
    pub fingerprint: String,
    /// Its recent status updates, newest first.
    pub timeline: Vec<StatusEntry>,
}

impl TaskDetailView {
    /// The task `id` of `s`; 404 when unknown.
    pub fn new(s: &Snapshot, id: &str) -> Result<TaskDetailView, AppError> {
        let found = s
            .tasks
            .binary_search_by(|t| t.task_id.as_str().cmp(id))
            .ok()
            .map(|i| &s.tasks[i])
            // Tolerate a snapshot that is not sorted after all.
            .or_else(|| s.tasks.iter().find(|t| t.task_id == id));
        let t = found.ok_or_else(|| AppError::not_found(format!("no task {id:?}")))?;
        Ok(TaskDetailView {
            task: TaskRow::new(t),
            fingerprint: t.fingerprint.clone(),
            timeline: t.timeline.iter().rev().cloned().collect(),
        })
    }
}

/// `/api/v1/offers` and the offers page.
#[derive(Debug, Clone, Serialize)]
pub struct OffersView {
    /// Offers held by the leader (none on followers).
    pub offers: Vec<OfferSummary>,
    /// Whether this replica leads (followers hold no offers).
    pub leading: bool,
}

impl OffersView {
    /// The view of `s`.
    pub fn new(s: &Snapshot) -> OffersView {
        OffersView {
            offers: s.offers.clone(),
            leading: s.leadership.is_leader(),
        }
    }
}

/// Query of `/events` and `/api/v1/events`: `kind` (exact) and `limit`
/// (1–1000, default 200).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventQuery {
    pub kind: Option<String>,
    pub limit: Option<String>,
}

/// `/api/v1/events` and the events page.
#[derive(Debug, Clone, Serialize)]
pub struct EventsView {
    /// Recent events, newest first.
    pub events: Vec<EventEntry>,
    /// The kind filter in effect.
    pub kind: Option<String>,
    /// Kinds present (page only).
    #[serde(skip)]
    pub kinds: Vec<String>,
}

impl EventsView {
    /// The view of `s` under `query`.
    pub fn new(s: &Snapshot, query: &EventQuery) -> Result<EventsView, AppError> {
        let mut errors = Vec::new();
        let limit = parse_number("limit", &query.limit, DEFAULT_EVENTS, 1000, &mut errors);
        if !errors.is_empty() {
            return Err(AppError::invalid(errors));
        }
        let kind = non_empty(&query.kind);
        let events = s
            .events
            .iter()
            .rev()
            .filter(|e| kind.as_ref().is_none_or(|k| &e.kind == k))
            .take(limit)
            .cloned()
            .collect();
        let kinds: BTreeSet<&str> = s.events.iter().map(|e| e.kind.as_str()).collect();
        Ok(EventsView {
            events,
            kind,
            kinds: kinds.into_iter().map(str::to_string).collect(),
        })
    }
}

/// One service in `/api/v1/services`: `name`, `spec`, and the counts.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceRow {
    /// The service name.
    pub name: String,
    /// Spec and counts.
    #[serde(flatten)]
    pub status: ServiceStatus,
}

impl ServiceRow {
    /// The command as one line.
    pub fn command_text(&self) -> String {
        match &self.status.spec.command {
            crate::scheduler::CommandSpec::Shell(line) => line.clone(),
            crate::scheduler::CommandSpec::Argv(argv) => {
                serde_json::to_string(argv).unwrap_or_default()
            }
        }
    }
}

/// `/api/v1/services` and the services page.
#[derive(Debug, Clone, Serialize)]
pub struct ServicesView {
    /// Services, sorted by name.
    pub services: Vec<ServiceRow>,
}

impl ServicesView {
    /// The view of `s`.
    pub fn new(s: &Snapshot) -> ServicesView {
        let mut services: Vec<ServiceRow> = s
            .services
            .iter()
            .map(|x| ServiceRow {
                name: x.spec.name.clone(),
                status: x.clone(),
            })
            .collect();
        services.sort_by(|a, b| a.name.cmp(&b.name));
        ServicesView { services }
    }
}

/// One election member in `/api/v1/replicas`.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaRow {
    /// Replica ID.
    pub replica_id: String,
    /// Its dashboard and API.
    pub advertised_url: String,
    /// Its deployment.
    pub deployment_id: String,
    /// Its version.
    pub version: String,
    /// Start time.
    pub started_at: u64,
    /// Seconds since then.
    pub uptime_seconds: u64,
    /// Its election sequence number (`null` when not read from ZooKeeper).
    pub sequence: Option<u64>,
    /// Whether it leads.
    pub leader: bool,
    /// Whether it is the replica answering this request.
    pub this: bool,
    /// Its ZooKeeper session as far as known: `alive` (its member node
    /// exists), or for this replica its own view (`leading`, `following`,
    /// `suspended`, `connecting`).
    pub session: String,
    /// Its Mesos subscription (`framework.state`), known for this replica.
    pub subscription: Option<&'static str>,
}

/// `/api/v1/replicas` and the replicas page.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicasView {
    /// Election members, the leader first.
    pub replicas: Vec<ReplicaRow>,
    /// Why the list is incomplete (ZooKeeper unreachable); then the rows
    /// come from this replica's snapshot.
    pub error: Option<String>,
}

impl ReplicasView {
    /// Rows from the election `members` (sorted by sequence, the lowest
    /// leads), or from the snapshot alone after `error`.
    pub fn new(s: &Snapshot, members: Result<Vec<Member>, String>) -> ReplicasView {
        let now = s.at as u64;
        let me = &s.replica;
        let own_session = match &s.leadership {
            Leadership::Leader { .. } => "leading",
            Leadership::Follower { .. } => "following",
            Leadership::Suspended => "suspended",
            Leadership::Candidate => "connecting",
        };
        let row = |info: &ReplicaInfo, sequence: Option<u64>, leader: bool| {
            let this = info.replica_id == me.replica_id;
            ReplicaRow {
                replica_id: info.replica_id.clone(),
                advertised_url: info.advertised_url.clone(),
                deployment_id: info.deployment_id.clone(),
                version: info.version.clone(),
                started_at: info.started_at,
                uptime_seconds: now.saturating_sub(info.started_at),
                sequence,
                leader,
                this,
                session: if this { own_session } else { "alive" }.to_string(),
                subscription: this.then(|| s.framework.state.as_str()),
            }
        };
        match members {
            Ok(mut members) => {
                members.sort_by_key(|m| m.sequence);
                let replicas = members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| row(&m.info, Some(m.sequence), i == 0))
                    .collect();
                ReplicasView {
                    replicas,
                    error: None,
                }
            }
            Err(error) => {
                let mut replicas = Vec::new();
                match &s.leadership {
                    Leadership::Leader { .. } => replicas.push(row(me, None, true)),
                    Leadership::Follower { leader: Some(l) } => {
                        replicas.push(row(l, None, true));
                        replicas.push(row(me, None, false));
                    }
                    _ => replicas.push(row(me, None, false)),
                }
                ReplicasView {
                    replicas,
                    error: Some(error),
                }
            }
        }
    }
}

/// One executor that kamikaze would address.
#[derive(Debug, Clone, Serialize)]
pub struct ExecutorRow {
    /// Agent ID.
    pub agent_id: String,
    /// Agent hostname.
    pub hostname: String,
    /// Executor ID.
    pub executor_id: String,
    /// `appliance` executors obey kamikaze; the Mesos `command` executor
    /// ignores framework messages.
    pub executor: ExecutorKind,
    /// Its active tasks.
    pub tasks: usize,
}

/// What the destructive actions would hit, for the actions page and the
/// confirmation pages.
#[derive(Debug, Clone, Serialize)]
pub struct Blast {
    /// The framework ID teardown would remove.
    pub framework_id: Option<String>,
    /// The framework name to type in.
    pub framework_name: String,
    /// Active (non-terminal) tasks: all die on teardown.
    pub active_tasks: usize,
    /// Executors of active tasks.
    pub executors: Vec<ExecutorRow>,
    /// Active tasks on executors that obey kamikaze (they die).
    pub kamikaze_tasks: usize,
}

impl Blast {
    /// What teardown and kamikaze would hit in `s`.
    pub fn new(s: &Snapshot) -> Blast {
        let mut executors: BTreeMap<(&str, &str), ExecutorRow> = BTreeMap::new();
        let mut active_tasks = 0;
        for t in s.tasks.iter().filter(|t| !t.is_terminal()) {
            active_tasks += 1;
            executors
                .entry((&t.agent_id, &t.executor_id))
                .or_insert_with(|| ExecutorRow {
                    agent_id: t.agent_id.clone(),
                    hostname: t.hostname.clone(),
                    executor_id: t.executor_id.clone(),
                    executor: t.executor,
                    tasks: 0,
                })
                .tasks += 1;
        }
        let executors: Vec<ExecutorRow> = executors.into_values().collect();
        let kamikaze_tasks = executors
            .iter()
            .filter(|e| e.executor == ExecutorKind::Appliance)
            .map(|e| e.tasks)
            .sum();
        Blast {
            framework_id: s.framework.id.clone(),
            framework_name: s.framework.name.clone(),
            active_tasks,
            executors,
            kamikaze_tasks,
        }
    }

    /// Executors that obey kamikaze.
    pub fn kamikaze_executors(&self) -> usize {
        self.kamikaze_rows().count()
    }

    /// The executors that obey kamikaze.
    pub fn kamikaze_rows(&self) -> impl Iterator<Item = &ExecutorRow> {
        self.executors
            .iter()
            .filter(|e| e.executor == ExecutorKind::Appliance)
    }

    /// Active tasks on the Mesos command executor (kamikaze spares them).
    pub fn command_tasks(&self) -> usize {
        self.active_tasks - self.kamikaze_tasks
    }
}
