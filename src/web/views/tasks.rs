//! The tasks page and its JSON twins: one page of task rows (filters,
//! sorting, paging) and one task with its status-update timeline.

use serde::{Deserialize, Serialize};

use super::index::{Filter, StateIs};
use super::{DEFAULT_PER_PAGE, Derived, MAX_PER_PAGE, field, non_empty, parse_number};
use crate::mesos::v1::TaskState;
use crate::scheduler::{
    AgentId, ExecutorKind, KillRequest, Snapshot, StatusEntry, TaskId, TaskRecord, UnrecordedKill,
};
use crate::web::error::AppError;

/// One task in `/api/v1/tasks` and on the tasks page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TaskRow {
    /// The task ID.
    pub id: TaskId,
    /// Its service.
    pub service: String,
    /// Its instance number.
    pub instance: u32,
    /// Mesos state name, e.g. `TASK_RUNNING`.
    pub state: String,
    /// Agent ID.
    pub agent_id: AgentId,
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
    /// Its health check's last report (absent: none yet, no check, or
    /// the task is terminal or being killed: [`TaskRecord::health`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// Since when `healthy` holds (absent with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<f64>,
    /// While the task is TASK_UNREACHABLE: since when, as stored with its
    /// record (the `unreachable` policy counts from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<f64>,
}

impl TaskRow {
    fn new(t: &TaskRecord) -> TaskRow {
        TaskRow {
            id: t.task_id.clone(),
            service: t.service.clone(),
            instance: t.instance,
            state: t.state.as_str_name().to_string(),
            agent_id: t.agent_id.clone(),
            hostname: t.hostname.clone(),
            executor: t.executor,
            executor_id: t.executor_id.clone(),
            ports: t.ports.clone(),
            launched: t.launched_at,
            updated: t.updated_at,
            kill: t.kill.clone(),
            healthy: t.health(),
            healthy_since: t.health().and(t.healthy_since),
            unreachable_since: (t.state == TaskState::TaskUnreachable)
                .then(|| crate::scheduler::rules::partition::unreachable_since(t)),
        }
    }

    /// `healthy`, `unhealthy` or `""` (no report).
    pub fn health(&self) -> &'static str {
        health_name(self.healthy)
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
/// - `state`: a Mesos task state, with or without its `TASK_` prefix, in
///   any case (`TASK_RUNNING`, `running`), `active` (not terminal) or
///   `terminal`; anything else is 400, listing the states;
/// - `q`: substring of the task ID, agent ID or hostname;
/// - `sort`: `id` (default), `service`, `state`, `host`, `updated`, `launched`;
/// - `order`: `asc` (default) or `desc`;
/// - `page`: from 1; `per_page`: 1–10000, default 50.
///
/// Empty values count as absent (HTML forms send them).
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskQuery {
    /// Exact service name.
    pub service: Option<String>,
    /// A task state, `active` or `terminal`.
    pub state: Option<String>,
    /// `healthy`, `unhealthy` or `unknown` (no report).
    pub health: Option<String>,
    /// Substring of the task ID, agent ID or hostname.
    pub q: Option<String>,
    /// The sort key.
    pub sort: Option<String>,
    /// `asc` or `desc`.
    pub order: Option<String>,
    /// The page, from 1.
    pub page: Option<String>,
    /// Tasks per page.
    pub per_page: Option<String>,
}

/// The filters in effect, echoed in `/api/v1/tasks`.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct TaskFilter {
    /// The service filter, when given.
    pub service: Option<String>,
    /// `active`, `terminal` or a Mesos task state's full name.
    pub state: Option<String>,
    /// `healthy`, `unhealthy` or `unknown`.
    pub health: Option<String>,
    /// The substring filter, when given.
    pub q: Option<String>,
}

/// `/api/v1/tasks` and the tasks page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TasksView {
    /// This page of matching tasks.
    pub tasks: Vec<TaskRow>,
    /// All task records.
    pub total: usize,
    /// The stored records are not all read yet (a new leader before its
    /// load, a follower before its first read): the list holds what is
    /// read so far, not what is stored
    /// ([`Snapshot::loading`](crate::scheduler::Snapshot::loading)).
    pub loading: bool,
    /// Records matching the filters.
    pub matched: usize,
    /// This page, from 1.
    pub page: usize,
    /// Page size.
    pub per_page: usize,
    /// Number of pages (at least 1).
    pub pages: usize,
    /// Sort key.
    pub sort: SortKey,
    /// `asc` or `desc`.
    pub order: Order,
    /// Filters in effect.
    pub filter: TaskFilter,
    /// Tasks without a record that the leader is killing (rogue tasks the
    /// master reported), whatever the filters.
    pub unrecorded_kills: Vec<UnrecordedKill>,
    /// Service names to filter by (page only).
    #[serde(skip)]
    pub service_names: Vec<String>,
    /// Task counts per state (page only).
    #[serde(skip)]
    pub state_counts: Vec<(String, usize)>,
}

/// What the task list is sorted by (`sort=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    /// The task ID (the snapshot's own order; the default).
    Id,
    /// Service, then instance.
    Service,
    /// The Mesos task state's name.
    State,
    /// The agent's host name.
    Host,
    /// The last status update's time.
    Updated,
    /// The launch time.
    Launched,
}

impl SortKey {
    /// How many keys there are.
    pub const COUNT: usize = 6;
    /// Every key.
    pub const ALL: [SortKey; SortKey::COUNT] = [
        SortKey::Id,
        SortKey::Service,
        SortKey::State,
        SortKey::Host,
        SortKey::Updated,
        SortKey::Launched,
    ];

    /// The key as `sort=` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Id => "id",
            SortKey::Service => "service",
            SortKey::State => "state",
            SortKey::Host => "host",
            SortKey::Updated => "updated",
            SortKey::Launched => "launched",
        }
    }

    fn parse(text: &str) -> Option<SortKey> {
        SortKey::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

impl std::fmt::Display for SortKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sort direction (`order=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Ascending (the default).
    Asc,
    /// Descending.
    Desc,
}

impl Order {
    /// The direction as `order=` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Asc => "asc",
            Order::Desc => "desc",
        }
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every Mesos task state's name, in the protobuf enum's order (prost
/// generates no list, so the enum's values are tried).
fn task_states() -> impl Iterator<Item = &'static str> {
    (0..=i32::from(u8::MAX))
        .filter_map(|n| TaskState::try_from(n).ok())
        .map(|s| s.as_str_name())
}

/// `healthy`, `unhealthy`, or `""` without a report.
fn health_name(healthy: Option<bool>) -> &'static str {
    match healthy {
        Some(true) => "healthy",
        Some(false) => "unhealthy",
        None => "",
    }
}

impl TaskFilter {
    /// The filter over task records this echo stands for (its values are
    /// the ones [`TasksView::new`] accepted).
    fn compile(&self) -> Filter {
        Filter {
            service: self.service.clone(),
            state: self.state.as_deref().map(|name| match name {
                "active" => StateIs::Active,
                "terminal" => StateIs::Terminal,
                name => StateIs::Exactly(
                    TaskState::from_str_name(name).unwrap_or(TaskState::TaskUnknown),
                ),
            }),
            health: self.health.as_deref().map(|h| match h {
                "healthy" => Some(true),
                "unhealthy" => Some(false),
                _ => None,
            }),
            q: self.q.clone(),
        }
    }
}

/// The `state` filter `name` stands for: `active`, `terminal`, or a Mesos
/// task state's full name (from `TASK_RUNNING` or `running`, any case).
fn state_filter(name: &str) -> Option<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    match upper.as_str() {
        "ACTIVE" => return Some("active"),
        "TERMINAL" => return Some("terminal"),
        _ => {}
    }
    let full = if upper.starts_with("TASK_") {
        upper
    } else {
        format!("TASK_{upper}")
    };
    TaskState::from_str_name(&full).map(|s| s.as_str_name())
}

impl TasksView {
    /// The view of `s` (aggregates `d`) under `query`; 400 with field
    /// errors for bad values.
    pub fn new(s: &Snapshot, d: &Derived, query: &TaskQuery) -> Result<TasksView, AppError> {
        let mut errors = Vec::new();
        let state = non_empty(&query.state).and_then(|name| {
            let state = state_filter(&name);
            if state.is_none() {
                errors.push(field(
                    "state",
                    format!(
                        "no state {name:?}: active, terminal or a Mesos task state (the TASK_ \
                         prefix and case are optional): {}",
                        task_states().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            state.map(str::to_string)
        });
        let health = non_empty(&query.health).and_then(|h| {
            let known = ["healthy", "unhealthy", "unknown"].contains(&h.as_str());
            if !known {
                errors.push(field("health", "healthy, unhealthy or unknown"));
            }
            known.then_some(h)
        });
        let filter = TaskFilter {
            service: non_empty(&query.service),
            state,
            health,
            q: non_empty(&query.q),
        };
        let sort = match non_empty(&query.sort) {
            None => SortKey::Id,
            Some(k) => SortKey::parse(&k).unwrap_or_else(|| {
                let keys: Vec<&str> = SortKey::ALL.iter().map(|k| k.as_str()).collect();
                errors.push(field("sort", format!("one of {}", keys.join(", "))));
                SortKey::Id
            }),
        };
        let order = match non_empty(&query.order).as_deref() {
            None | Some("asc") => Order::Asc,
            Some("desc") => Order::Desc,
            Some(_) => {
                errors.push(field("order", "asc or desc"));
                Order::Asc
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

        let start = (page - 1).saturating_mul(per_page);
        // Sorting and filtering read the snapshot's index (made once per
        // snapshot, `super::index`); only the page's rows are made.
        let index = &d.index;
        let selection = index.select(&filter.compile(), sort, order, start, per_page);
        let tasks = selection
            .page
            .iter()
            .filter_map(|&p| index.tasks().get(p as usize))
            .map(|t| TaskRow::new(t))
            .collect();
        Ok(TasksView {
            tasks,
            total: index.tasks().len(),
            loading: s.loading,
            matched: selection.matched,
            page,
            per_page,
            pages: selection.matched.div_ceil(per_page).max(1),
            sort,
            order,
            filter,
            unrecorded_kills: s.unrecorded_kills.clone(),
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
            ("health", self.filter.health.as_deref().unwrap_or("")),
            ("q", self.filter.q.as_deref().unwrap_or("")),
            (
                "sort",
                if self.sort == SortKey::Id {
                    ""
                } else {
                    self.sort.as_str()
                },
            ),
            (
                "order",
                if self.order == Order::Asc {
                    ""
                } else {
                    self.order.as_str()
                },
            ),
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
        let order = if self.sort.as_str() == key && self.order == Order::Asc {
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
        match (self.sort.as_str() == key, self.order) {
            (true, Order::Asc) => "▲",
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TaskDetailView {
    /// The task.
    pub task: TaskRow,
    /// Fingerprint of the spec it was launched from.
    pub fingerprint: String,
    /// How its health check ended it ("killed after 3 failed health
    /// checks"), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_kill: Option<String>,
    /// While TASK_UNREACHABLE, where it stands under its service's
    /// `unreachable` policy as of the snapshot: `unreachable` (waited for),
    /// `inactive` (replaced) or `expunged` (given up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<&'static str>,
    /// Its recent status updates, newest first.
    pub timeline: Vec<StatusEntry>,
}

impl TaskDetailView {
    /// The task `id` of `s`; 404 when unknown (503 while `s` is loading,
    /// [`AppError::absent`]).
    pub fn new(s: &Snapshot, id: &str) -> Result<TaskDetailView, AppError> {
        let found = s
            .tasks
            .binary_search_by(|t| t.task_id.as_str().cmp(id))
            .ok()
            .map(|i| &s.tasks[i])
            // Tolerate a snapshot that is not sorted after all.
            .or_else(|| s.tasks.iter().find(|t| t.task_id == id));
        let t = found.ok_or_else(|| AppError::absent(s, format_args!("task {id:?}")))?;
        let spec = s
            .services
            .iter()
            .find(|x| x.spec.name == t.service)
            .map(|x| &x.spec);
        let policy = spec.map(|s| s.unreachable_policy()).unwrap_or_default();
        Ok(TaskDetailView {
            task: TaskRow::new(t),
            fingerprint: t.fingerprint.clone(),
            health_kill: t.health_kill(spec),
            partition: crate::scheduler::rules::partition::standing(t, &policy, s.at)
                .map(|p| p.as_str()),
            timeline: t.timeline.iter().rev().cloned().collect(),
        })
    }

    /// The timeline's health check reports (the health timeline), newest
    /// first.
    pub fn health_timeline(&self) -> Vec<&StatusEntry> {
        self.timeline
            .iter()
            .filter(|u| u.is_health_report())
            .collect()
    }
}
