//! The smaller views: offers, events, services, replicas, and what the
//! destructive actions would hit.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{DEFAULT_EVENTS, non_empty, parse_number};
use crate::coordination::{Leadership, Member, ReplicaInfo};
use crate::scheduler::{
    AgentId, EventEntry, EventKind, ExecutorKind, FieldError, OfferSummary, ServiceStatus,
    Snapshot, TaskId,
};
use crate::web::error::AppError;

/// `/api/v1/offers` and the offers page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
            offers: s.offers.to_vec(),
            leading: s.leadership.is_leader(),
        }
    }
}

/// Query of `/events` and `/api/v1/events`: `kind` (exact, one of
/// [`EventKind::ALL`]; anything else is 400) and `limit` (1–1000, default 200).
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// Only events of this kind.
    pub kind: Option<String>,
    /// How many of the newest events to list (text: checked when parsed).
    pub limit: Option<String>,
}

/// `/api/v1/events` and the events page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
        let kind = non_empty(&query.kind);
        let wanted = kind.as_deref().and_then(EventKind::from_name);
        if let Some(k) = &kind
            && wanted.is_none()
        {
            let names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
            errors.push(FieldError {
                field: "kind".into(),
                message: format!("no event kind {k:?}; kinds are {}", names.join(", ")),
            });
        }
        if !errors.is_empty() {
            return Err(AppError::invalid(errors));
        }
        let events = s
            .events
            .iter()
            .rev()
            .filter(|e| wanted.is_none_or(|k| e.kind == k))
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ServiceRow {
    /// The service name.
    pub name: String,
    /// The stored spec's version ([`ServiceSpec::version`]
    /// (crate::scheduler::spec::ServiceSpec::version), 16 hex digits): a
    /// `PUT /api/v1/services/{name}` made from this spec sends it as
    /// `If-Match` so that it cannot undo a change made meanwhile (412).
    /// The `ETag` of `GET /api/v1/services/{name}` carries it too.
    pub version: String,
    /// Spec and counts.
    #[serde(flatten)]
    pub status: ServiceStatus,
}

impl ServiceRow {
    /// The command as one line.
    pub fn command_text(&self) -> String {
        self.status.spec.command.display()
    }
}

/// `/api/v1/services` and the services page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ServicesView {
    /// Services, sorted by name.
    pub services: Vec<ServiceRow>,
    /// The stored records are not all read yet (a new leader before its
    /// load, a follower before its first read): the list holds what is
    /// read so far, not what is stored
    /// ([`Snapshot::loading`](crate::scheduler::Snapshot::loading)).
    pub loading: bool,
}

impl ServicesView {
    /// The view of `s`.
    pub fn new(s: &Snapshot) -> ServicesView {
        let mut services: Vec<ServiceRow> = s
            .services
            .iter()
            .map(|x| {
                let mut status = x.clone();
                // Unauthenticated readers: the fetcher's credentials stay hidden.
                for uri in &mut status.spec.uris {
                    uri.value = crate::util::zk::redact_password(&uri.value);
                }
                ServiceRow {
                    name: x.spec.name.clone(),
                    version: x.spec.version(),
                    status,
                }
            })
            .collect();
        services.sort_by(|a, b| a.name.cmp(&b.name));
        ServicesView {
            services,
            loading: s.loading,
        }
    }
}

/// One election member in `/api/v1/replicas`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReplicasView {
    /// Election members, the leader first.
    pub replicas: Vec<ReplicaRow>,
    /// Why the list is incomplete (ZooKeeper unreachable); then the rows
    /// come from this replica's snapshot.
    pub error: Option<String>,
}

impl ReplicasView {
    /// Rows from the election `members` (sorted by sequence, the lowest
    /// leads), or from the snapshot alone after `error`; uptimes as of `now`.
    pub fn new(s: &Snapshot, members: Result<Vec<Member>, String>, now: f64) -> ReplicasView {
        let now = now as u64;
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
        let members = members.and_then(|m| {
            if m.is_empty() {
                Err("no election members listed: this replica is not in the election".to_string())
            } else {
                Ok(m)
            }
        });
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

/// Task IDs a confirmation page names (per executor, and for teardown in
/// all); the rest are counted ("and 64 more").
pub const BLAST_TASKS_LISTED: usize = 50;

/// One executor that kamikaze would address.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ExecutorRow {
    /// Agent ID.
    pub agent_id: AgentId,
    /// Agent hostname.
    pub hostname: String,
    /// Executor ID.
    pub executor_id: String,
    /// `appliance` executors obey kamikaze; the Mesos `command` executor
    /// ignores framework messages.
    pub executor: ExecutorKind,
    /// Its active tasks.
    pub tasks: usize,
    /// Their IDs, sorted; the first [`BLAST_TASKS_LISTED`].
    pub task_ids: Vec<TaskId>,
}

impl ExecutorRow {
    /// Active tasks on it that [`ExecutorRow::task_ids`] leaves out.
    pub fn unlisted_tasks(&self) -> usize {
        self.tasks - self.task_ids.len()
    }
}

/// What the destructive actions would hit, for the actions page and the
/// confirmation pages.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Blast {
    /// The framework ID teardown would remove.
    pub framework_id: Option<String>,
    /// The framework name to type in.
    pub framework_name: String,
    /// Active (non-terminal) tasks: all die on teardown.
    pub active_tasks: usize,
    /// Their IDs, sorted; the first [`BLAST_TASKS_LISTED`].
    pub task_ids: Vec<TaskId>,
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
        let mut task_ids = Vec::new();
        // The snapshot's tasks are sorted by ID, so the lists are too.
        for t in s.tasks.iter().filter(|t| !t.is_terminal()) {
            active_tasks += 1;
            if task_ids.len() < BLAST_TASKS_LISTED {
                task_ids.push(t.task_id.clone());
            }
            let row = executors
                .entry((t.agent_id.as_str(), &t.executor_id))
                .or_insert_with(|| ExecutorRow {
                    agent_id: t.agent_id.clone(),
                    hostname: t.hostname.clone(),
                    executor_id: t.executor_id.clone(),
                    executor: t.executor,
                    tasks: 0,
                    task_ids: Vec::new(),
                });
            row.tasks += 1;
            if row.task_ids.len() < BLAST_TASKS_LISTED {
                row.task_ids.push(t.task_id.clone());
            }
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
            task_ids,
            executors,
            kamikaze_tasks,
        }
    }

    /// Active tasks that [`Blast::task_ids`] leaves out.
    pub fn unlisted_tasks(&self) -> usize {
        self.active_tasks - self.task_ids.len()
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
