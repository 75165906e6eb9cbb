//! A read-only, Marathon-compatible subset of `/v2` for the load balancers
//! and service registries that follow Marathon (marathon-lb, Traefik's
//! Marathon provider, …); `docs/marathon.md#the-v2-subset`.
//!
//! | method | path | answers |
//! |---|---|---|
//! | GET | `/v2/apps?embed=apps.tasks` | `{"apps": [app]}`, each service as a Marathon app; its tasks only with `embed=apps.tasks` |
//! | GET | `/v2/apps/{id}` | `{"app": app}` with its tasks; 404 `{"message": …}` |
//! | GET | `/v2/apps/{id}/tasks` | `{"tasks": [task]}`, the app's |
//! | GET | `/v2/tasks?status=running` | `{"tasks": [task]}` |
//! | GET | `/v2/events?event_type=…` | server-sent events with Marathon's names (`event_stream_attached`, `status_update_event`, `health_status_changed_event`, `deployment_info`, `deployment_success`, `deployment_failed`, `api_post_event`, `app_terminated_event`); 307 to the leader on a follower |
//!
//! The fields are those of Marathon's REST API (`docs/docs/rest-api.md`,
//! `event-bus.md` in mesosphere/marathon) that marathon-lb
//! (`marathon_lb.py`, `utils.py`: `id`, `labels`, `portDefinitions[].port`,
//! `container.portMappings[].servicePort`, `networks[].mode`,
//! `healthChecks[]`, and per task `id`, `host`, `ports`, `ipAddresses`,
//! `state`, `healthCheckResults[].alive`) and Traefik's Marathon provider
//! read. Reads are served by every replica from its snapshot; the event
//! stream comes from the leader's journal ([`super::event_stream`]).
//!
//! An app's ID is `/` + the service name; its service ports are the
//! labels `MARATHON_SERVICE_PORT_<i>` (the import writes them), absent
//! otherwise. Query parameters other than those above are ignored, as
//! Marathon ignores them. Any other method is 405 and any other `/v2` path
//! 404, both with Marathon's `{"message": …}` body.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{OriginalUri, Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde::Serialize;
use tokio::sync::broadcast;

use super::AppState;
use super::event_stream::journal::{Item, Stored};
use crate::scheduler::records::TaskRecord;
use crate::scheduler::spec::container::DockerNetwork;
use crate::scheduler::spec::health::{HealthCheckKind, HealthCheckSpec};
use crate::scheduler::spec::service::SERVICE_PORT_LABEL;
use crate::scheduler::{ServiceStatus, Snapshot};

/// How long a leader's `/v2/events` waits for the event journal to open
/// (right after an election) before answering 503.
pub const READY_WAIT: Duration = Duration::from_millis(500);

/// The routes of the subset (merged into [`super::router`]).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/apps", get(apps).fallback(read_only))
        .route("/v2/apps/{*id}", get(app).fallback(read_only))
        .route("/v2/tasks", get(tasks).fallback(read_only))
        .route("/v2/events", get(events).fallback(read_only))
        .route("/v2", any(unknown))
        // `{*rest}` matches no empty rest: `/v2/` would be the HTML 404.
        .route("/v2/", any(unknown))
        .route("/v2/{*rest}", any(unknown))
}

/// Any other method on a `/v2` path: 405 with Marathon's error body (the
/// subset is read-only; deploy with the services API).
async fn read_only() -> Response {
    let mut response = (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(MarathonError {
            message: "this Marathon subset is read-only: only GET is served; change services \
                      through /api/v1/services (docs/marathon.md)"
                .into(),
        }),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET"));
    response
}

/// A `/v2` path outside the subset: 404 with Marathon's error body.
async fn unknown(OriginalUri(uri): OriginalUri) -> Response {
    not_found(format!(
        "{} is not served: this Marathon subset has GET /v2/apps, /v2/apps/{{id}}, \
         /v2/apps/{{id}}/tasks, /v2/tasks and /v2/events (docs/marathon.md)",
        uri.path()
    ))
}

/// `GET /v2/apps`.
#[derive(Debug, Clone, Serialize)]
pub struct AppsAnswer {
    /// Every service.
    pub apps: Vec<MarathonApp>,
}

/// `GET /v2/apps/{id}`.
#[derive(Debug, Clone, Serialize)]
pub struct AppAnswer {
    /// The service.
    pub app: MarathonApp,
}

/// `GET /v2/tasks`.
#[derive(Debug, Clone, Serialize)]
pub struct TasksAnswer {
    /// The live tasks.
    pub tasks: Vec<MarathonTask>,
}

/// Marathon's error body (`{"message": …}`).
#[derive(Debug, Clone, Serialize)]
pub struct MarathonError {
    /// What is wrong.
    pub message: String,
}

/// A service as a Marathon app (the fields of Marathon's `App`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarathonApp {
    /// `/` + the service name.
    pub id: String,
    /// A shell command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    /// An argv command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// CPUs per task.
    pub cpus: f64,
    /// Memory per task, MB.
    pub mem: f64,
    /// Disk per task, MB.
    pub disk: f64,
    /// Desired tasks.
    pub instances: u32,
    /// Environment.
    pub env: BTreeMap<String, String>,
    /// The service's labels.
    pub labels: BTreeMap<String, String>,
    /// The container, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<MarathonContainer>,
    /// `[{"mode": "host" | "container/bridge" | "container"}]`.
    pub networks: Vec<MarathonNetwork>,
    /// One per port of a task on the agent's network (empty with a
    /// bridged container, whose `portMappings` say it).
    pub port_definitions: Vec<PortDefinition>,
    /// Always false: ports come from offers.
    pub require_ports: bool,
    /// The health check, if any (Marathon's MESOS_* kinds).
    pub health_checks: Vec<MarathonHealthCheck>,
    /// `[[field, operator, value?]]`.
    pub constraints: Vec<Vec<String>>,
    /// The spec's fingerprint.
    pub version: String,
    /// Tasks not yet running.
    pub tasks_staged: u32,
    /// Running tasks.
    pub tasks_running: u32,
    /// Tasks whose health check last passed.
    pub tasks_healthy: u32,
    /// Tasks whose health check last failed.
    pub tasks_unhealthy: u32,
    /// The rollout under way, if any.
    pub deployments: Vec<DeploymentRef>,
    /// The live tasks (with `embed=apps.tasks`, and in `/v2/apps/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<MarathonTask>>,
}

/// A container as Marathon shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarathonContainer {
    /// `DOCKER` (Docker containerizer) or `MESOS` (an image for the Mesos
    /// containerizer).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The image.
    pub docker: MarathonDocker,
    /// Bridged ports: container port, service port.
    pub port_mappings: Vec<PortMapping>,
}

/// `container.docker`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarathonDocker {
    /// The image reference.
    pub image: String,
    /// `HOST`, `BRIDGE`, `USER` or `NONE` (Docker containerizer only; the
    /// field of Marathon before 1.5, still read by marathon-lb).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<&'static str>,
    /// Pull even if present.
    pub force_pull_image: bool,
}

/// `container.portMappings[]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    /// The container's port.
    pub container_port: u32,
    /// Always 0: the host port comes from an offer (see the task's
    /// `ports`).
    pub host_port: u32,
    /// The service port (from the `MARATHON_SERVICE_PORT_<i>` label).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_port: Option<u32>,
    /// `tcp` or `udp`.
    pub protocol: String,
}

/// `networks[]`.
#[derive(Debug, Clone, Serialize)]
pub struct MarathonNetwork {
    /// `host`, `container/bridge` or `container`.
    pub mode: &'static str,
    /// The Docker network of `container`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `portDefinitions[]`.
#[derive(Debug, Clone, Serialize)]
pub struct PortDefinition {
    /// The service port (from the `MARATHON_SERVICE_PORT_<i>` label);
    /// absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Always `tcp`.
    pub protocol: &'static str,
}

/// `healthChecks[]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarathonHealthCheck {
    /// `MESOS_HTTP`, `MESOS_HTTPS`, `MESOS_TCP` or `COMMAND`.
    pub protocol: &'static str,
    /// Index into the task's ports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_index: Option<u32>,
    /// A fixed port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// HTTP path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// COMMAND's command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandValue>,
    /// Seconds.
    pub grace_period_seconds: u64,
    /// Seconds.
    pub interval_seconds: u64,
    /// Seconds.
    pub timeout_seconds: u64,
    /// Seconds.
    pub delay_seconds: u64,
    /// Failures before the kill.
    pub max_consecutive_failures: u32,
}

/// `{"value": command}`.
#[derive(Debug, Clone, Serialize)]
pub struct CommandValue {
    /// The command line (an argv as its JSON array).
    pub value: String,
}

/// `deployments[]`.
#[derive(Debug, Clone, Serialize)]
pub struct DeploymentRef {
    /// `<service>-<fingerprint>`.
    pub id: String,
}

/// A task as Marathon shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarathonTask {
    /// The Mesos task ID.
    pub id: String,
    /// Its app, `/` + the service name.
    pub app_id: String,
    /// The agent's hostname.
    pub host: String,
    /// The host ports taken from the offer.
    pub ports: Vec<u64>,
    /// The app's service ports (known ones).
    pub service_ports: Vec<u32>,
    /// The agent's address when its hostname is an IP literal (no DNS
    /// lookup is made); empty otherwise.
    pub ip_addresses: Vec<IpAddress>,
    /// The Mesos state, e.g. `TASK_RUNNING`.
    pub state: String,
    /// Launch time (RFC 3339).
    pub staged_at: String,
    /// Since when it runs (RFC 3339); `null` unless TASK_RUNNING.
    pub started_at: Option<String>,
    /// The fingerprint of the spec it was launched from.
    pub version: String,
    /// The agent ID.
    pub slave_id: String,
    /// The agent ID (newer name).
    pub agent_id: String,
    /// One result when its health check has reported; empty before (and
    /// without a check).
    pub health_check_results: Vec<HealthCheckResult>,
}

/// `ipAddresses[]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IpAddress {
    /// The address.
    pub ip_address: String,
    /// `IPv4` or `IPv6`.
    pub protocol: &'static str,
}

/// `healthCheckResults[]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckResult {
    /// The last result.
    pub alive: bool,
    /// 0 when alive; else at least 1 (the executor reports changes only).
    pub consecutive_failures: u32,
    /// When it became healthy (RFC 3339), if it is.
    pub first_success: Option<String>,
    /// When it became unhealthy, if it is.
    pub last_failure: Option<String>,
    /// The task.
    pub task_id: String,
}

fn time(at: f64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_secs_f64(at.max(0.0));
    humantime::format_rfc3339_millis(t).to_string()
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The service ports of a service, by port index (`None` when unknown).
fn service_ports(status: &ServiceStatus) -> Vec<Option<u32>> {
    let spec = &status.spec;
    (0..spec.ports)
        .map(|i| {
            spec.labels
                .get(&format!("{SERVICE_PORT_LABEL}{i}"))
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|p| (1..=65_535).contains(p))
        })
        .collect()
}

fn health_check(check: &HealthCheckSpec) -> MarathonHealthCheck {
    let protocol = match (check.kind, check.scheme.as_deref()) {
        (HealthCheckKind::Http, Some("https")) => "MESOS_HTTPS",
        (HealthCheckKind::Http, _) => "MESOS_HTTP",
        (HealthCheckKind::Tcp, _) => "MESOS_TCP",
        (HealthCheckKind::Command, _) => "COMMAND",
    };
    MarathonHealthCheck {
        protocol,
        port_index: check.port_index,
        port: check.port,
        path: match check.kind {
            HealthCheckKind::Http => Some(check.path.clone().unwrap_or_else(|| "/".into())),
            _ => None,
        },
        command: check
            .command
            .as_ref()
            .map(|c| CommandValue { value: c.display() }),
        grace_period_seconds: check.grace_period.as_secs(),
        interval_seconds: check.interval.as_secs(),
        timeout_seconds: check.timeout.as_secs(),
        delay_seconds: check.delay.as_secs(),
        max_consecutive_failures: check.consecutive_failures,
    }
}

/// The constraints as `[field, operator, value?]`.
fn constraints(texts: &[String]) -> Vec<Vec<String>> {
    texts
        .iter()
        .map(|t| t.splitn(3, ':').map(str::to_string).collect())
        .collect()
}

fn app_of(status: &ServiceStatus, tasks: Option<Vec<MarathonTask>>) -> MarathonApp {
    let spec = &status.spec;
    let service = service_ports(status);
    let (cmd, args) = match &spec.command {
        crate::scheduler::CommandSpec::Shell(line) => (Some(line.clone()), None),
        crate::scheduler::CommandSpec::Argv(argv) => (None, Some(argv.clone())),
    };
    let mut networks = vec![MarathonNetwork {
        mode: "host",
        name: None,
    }];
    let mut container = None;
    let mut bridged = false;
    if let Some(c) = &spec.container {
        if let Some(d) = &c.docker {
            let (mode, legacy) = match d.network {
                DockerNetwork::Host => ("host", "HOST"),
                DockerNetwork::Bridge => ("container/bridge", "BRIDGE"),
                DockerNetwork::User => ("container", "USER"),
                DockerNetwork::None => ("host", "NONE"),
            };
            bridged = matches!(d.network, DockerNetwork::Bridge | DockerNetwork::User);
            networks = vec![MarathonNetwork {
                mode,
                name: d.network_name.clone(),
            }];
            container = Some(MarathonContainer {
                kind: "DOCKER",
                docker: MarathonDocker {
                    image: d.image.clone(),
                    network: Some(legacy),
                    force_pull_image: d.force_pull_image,
                },
                port_mappings: d
                    .port_mappings
                    .iter()
                    .enumerate()
                    .map(|(i, m)| PortMapping {
                        container_port: m.container_port,
                        host_port: 0,
                        service_port: service.get(i).copied().flatten(),
                        protocol: m.protocol.clone().unwrap_or_else(|| "tcp".into()),
                    })
                    .collect(),
            });
        } else if let Some(image) = &c.image {
            container = Some(MarathonContainer {
                kind: "MESOS",
                docker: MarathonDocker {
                    image: image.clone(),
                    network: None,
                    force_pull_image: c.force_pull,
                },
                port_mappings: Vec::new(),
            });
        }
    }
    let port_definitions = if bridged {
        Vec::new()
    } else {
        service
            .iter()
            .map(|port| PortDefinition {
                port: *port,
                protocol: "tcp",
            })
            .collect()
    };
    let version = spec.fingerprint();
    MarathonApp {
        id: format!("/{}", spec.name),
        cmd,
        args,
        cpus: spec.cpus,
        mem: spec.mem,
        disk: spec.disk,
        instances: spec.instances,
        env: spec.env.clone(),
        labels: spec.labels.clone(),
        container,
        networks,
        port_definitions,
        require_ports: false,
        health_checks: spec.health_check.iter().map(|c| health_check(c)).collect(),
        constraints: constraints(&spec.constraints),
        tasks_staged: status.starting,
        tasks_running: status.running,
        tasks_healthy: status.healthy,
        tasks_unhealthy: status.unhealthy,
        deployments: status
            .rollout
            .iter()
            .map(|_| DeploymentRef {
                id: format!("{}-{version}", spec.name),
            })
            .collect(),
        version,
        tasks,
    }
}

fn ip_addresses(host: &str) -> Vec<IpAddress> {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![IpAddress {
            ip_address: ip.to_string(),
            protocol: if ip.is_ipv4() { "IPv4" } else { "IPv6" },
        }],
        Err(_) => Vec::new(),
    }
}

fn task_of(task: &TaskRecord, service_ports: &[Option<u32>]) -> MarathonTask {
    let id = task.task_id.to_string();
    let health = task.health().map(|alive| HealthCheckResult {
        alive,
        consecutive_failures: u32::from(!alive),
        first_success: alive.then(|| task.healthy_since.map(time)).flatten(),
        last_failure: (!alive).then(|| task.healthy_since.map(time)).flatten(),
        task_id: id.clone(),
    });
    MarathonTask {
        app_id: format!("/{}", task.service),
        host: task.hostname.clone(),
        ports: task.ports.clone(),
        service_ports: service_ports.iter().flatten().copied().collect(),
        ip_addresses: ip_addresses(&task.hostname),
        state: task.state.as_str_name().to_string(),
        staged_at: time(task.launched_at),
        started_at: task.running_since().map(time),
        version: task.fingerprint.clone(),
        slave_id: task.agent_id.to_string(),
        agent_id: task.agent_id.to_string(),
        health_check_results: health.into_iter().collect(),
        id,
    }
}

/// The live tasks of `status`'s service, from `by_service` (see
/// [`live_by_service`]).
fn live_tasks(
    by_service: &HashMap<&str, Vec<&TaskRecord>>,
    status: &ServiceStatus,
) -> Vec<MarathonTask> {
    let ports = service_ports(status);
    by_service
        .get(status.spec.name.as_str())
        .into_iter()
        .flatten()
        .map(|t| task_of(t, &ports))
        .collect()
}

/// The snapshot's live (not terminal) tasks by service, in one pass over
/// them.
fn live_by_service(s: &Snapshot) -> HashMap<&str, Vec<&TaskRecord>> {
    let mut out: HashMap<&str, Vec<&TaskRecord>> = HashMap::new();
    for t in s.tasks.iter().filter(|t| !t.is_terminal()) {
        out.entry(t.service.as_str()).or_default().push(t);
    }
    out
}

/// The query's `(key, value)` pairs (at most 64 looked at).
fn pairs(query: Option<&str>) -> Vec<(String, String)> {
    let query = query.unwrap_or_default();
    url::form_urlencoded::parse(query.as_bytes())
        .take(64)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Whether `embed` asks for the apps' tasks (`apps.tasks`, or the older
/// `apps.failures` that includes them).
fn embeds_tasks(pairs: &[(String, String)]) -> bool {
    pairs
        .iter()
        .any(|(k, v)| k == "embed" && (v == "apps.tasks" || v == "apps.failures"))
}

/// `GET /v2/apps`.
pub async fn apps(State(state): State<AppState>, RawQuery(query): RawQuery) -> Json<AppsAnswer> {
    let pairs = pairs(query.as_deref());
    let with_tasks = embeds_tasks(&pairs);
    let id_filter = pairs
        .iter()
        .find(|(k, _)| k == "id")
        .map(|(_, v)| v.trim_matches('/').to_string());
    let s = state.handle.snapshot();
    let by_service = if with_tasks {
        live_by_service(&s)
    } else {
        HashMap::new()
    };
    let apps = s
        .services
        .iter()
        .filter(|st| {
            id_filter
                .as_deref()
                .is_none_or(|f| st.spec.name.contains(f))
        })
        .map(|st| app_of(st, with_tasks.then(|| live_tasks(&by_service, st))))
        .collect();
    Json(AppsAnswer { apps })
}

fn not_found(message: String) -> Response {
    (StatusCode::NOT_FOUND, Json(MarathonError { message })).into_response()
}

/// `GET /v2/apps/{id}`, and `GET /v2/apps/{id}/tasks` (`{"tasks": […]}`,
/// the app's live tasks). A service name has no `/`, so an ID ending in
/// `/tasks` always means the latter.
pub async fn app(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    // The rejection's own answer is plain text; Marathon's clients read
    // `{"message"}`.
    let Ok(Path(id)) = id else {
        let message = "the app ID is not UTF-8 once percent-decoded".to_string();
        return (StatusCode::BAD_REQUEST, Json(MarathonError { message })).into_response();
    };
    let id = id.trim_matches('/');
    let (name, just_tasks) = match id.strip_suffix("/tasks") {
        Some(name) => (name.trim_end_matches('/'), true),
        None => (id, false),
    };
    let s = state.handle.snapshot();
    let Some(st) = s.services.iter().find(|st| st.spec.name == name) else {
        return not_found(format!("App '/{name}' does not exist"));
    };
    let tasks = live_tasks(&live_by_service(&s), st);
    if just_tasks {
        Json(TasksAnswer { tasks }).into_response()
    } else {
        Json(AppAnswer {
            app: app_of(st, Some(tasks)),
        })
        .into_response()
    }
}

/// Which tasks `GET /v2/tasks?status=` keeps: Marathon's REST reference
/// names `running` and `staging`; no `status` keeps them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusFilter {
    All,
    Running,
    Staging,
}

impl StatusFilter {
    /// Reads the `status` parameter (any case); `Err` names an unknown
    /// value and the known ones.
    fn parse(value: Option<&str>) -> Result<StatusFilter, String> {
        match value.map(str::to_ascii_lowercase).as_deref() {
            None => Ok(StatusFilter::All),
            Some("running") => Ok(StatusFilter::Running),
            Some("staging") => Ok(StatusFilter::Staging),
            Some(other) => Err(format!(
                "unknown status '{other}': use running or staging, or leave it out for all tasks"
            )),
        }
    }

    fn keeps(self, state: &str) -> bool {
        match self {
            StatusFilter::All => true,
            StatusFilter::Running => state == "TASK_RUNNING",
            StatusFilter::Staging => state == "TASK_STAGING" || state == "TASK_STARTING",
        }
    }
}

/// `GET /v2/tasks` (`?status=running` keeps TASK_RUNNING only, `staging`
/// the tasks not yet running; any other value is a 400 with Marathon's
/// `{"message"}` body).
pub async fn tasks(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let pairs = pairs(query.as_deref());
    let status = pairs
        .iter()
        .find(|(k, _)| k == "status")
        .map(|(_, v)| v.as_str());
    let filter = match StatusFilter::parse(status) {
        Ok(filter) => filter,
        Err(message) => {
            return (StatusCode::BAD_REQUEST, Json(MarathonError { message })).into_response();
        }
    };
    let s = state.handle.snapshot();
    let by_service = live_by_service(&s);
    let mut tasks = Vec::new();
    for st in &s.services {
        tasks.extend(
            live_tasks(&by_service, st)
                .into_iter()
                .filter(|t| filter.keeps(&t.state)),
        );
    }
    Json(TasksAnswer { tasks }).into_response()
}

/// `GET /v2/events`: see the module doc.
pub async fn events(
    State(state): State<AppState>,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
) -> Result<Response, super::AppError> {
    let path_and_query = uri.path_and_query().map_or("/v2/events", |p| p.as_str());
    if let Some(leader) = super::leader::other_leader(&state, path_and_query)? {
        let location = format!("{}{path_and_query}", leader.trim_end_matches('/'));
        let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        return Ok(response);
    }
    let wanted: Vec<String> = pairs(query.as_deref())
        .into_iter()
        .filter(|(k, _)| k == "event_type")
        .map(|(_, v)| v)
        .collect();
    super::event_stream::start(&state);
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    let begun = loop {
        if let Some(begun) = state.events.journal().subscribe(None) {
            break begun;
        }
        if tokio::time::Instant::now() >= deadline {
            let mut e = super::AppError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "events-not-ready",
                "The event stream is not ready",
                "this replica is taking over leadership; the stream opens once it leads",
            );
            e.retry_after = Some(1);
            return Err(e);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let attached = serde_json::json!({
        "eventType": "event_stream_attached",
        "timestamp": now(),
        "remoteAddress": serde_json::Value::Null,
    });
    let feed = Feed {
        state: state.clone(),
        live: begun.live,
        wanted,
        first: Some(attached),
    };
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok::<_, Infallible>(event), feed))
    });
    let stream = futures::StreamExt::take_until(stream, state.shutdown.clone().cancelled_owned());
    let keep_alive = KeepAlive::new()
        .interval(state.events.keep_alive())
        .text("keep-alive");
    Ok((
        [("x-accel-buffering", "no")],
        Sse::new(stream).keep_alive(keep_alive),
    )
        .into_response())
}

struct Feed {
    state: AppState,
    live: broadcast::Receiver<Item>,
    wanted: Vec<String>,
    first: Option<serde_json::Value>,
}

impl Feed {
    fn wants(&self, name: &str) -> bool {
        self.wanted.is_empty() || self.wanted.iter().any(|w| w == name)
    }

    async fn next(&mut self) -> Option<Event> {
        if let Some(first) = self.first.take()
            && self.wants("event_stream_attached")
        {
            return Some(sse_event(&first));
        }
        loop {
            match self.live.recv().await {
                Ok(Item::Event(stored)) => {
                    let s = self.state.handle.snapshot();
                    if let Some(event) = translate(&stored, &s)
                        && event["eventType"].as_str().is_some_and(|n| self.wants(n))
                    {
                        return Some(sse_event(&event));
                    }
                }
                // Leadership lost, a slow consumer (Marathon disconnects
                // those too), events not kept, or the end: the client
                // reconnects.
                Ok(Item::End(_) | Item::Skipped(_)) | Err(_) => return None,
            }
        }
    }
}

fn sse_event(data: &serde_json::Value) -> Event {
    let name = data["eventType"].as_str().unwrap_or("message").to_string();
    Event::default().event(name).data(data.to_string())
}

/// The Marathon event of a journalled event, `None` for the kinds Marathon
/// has no name for (agents, leadership, audit).
pub fn translate(stored: &Stored, s: &Snapshot) -> Option<serde_json::Value> {
    let data: serde_json::Value = serde_json::from_str(&stored.data).ok()?;
    let text = |key: &str| data[key].as_str().unwrap_or_default().to_string();
    let at = data["at"].as_f64().map_or_else(now, time);
    let service = text("service");
    let app_id = format!("/{service}");
    let status = || s.services.iter().find(|st| st.spec.name == service);
    let version = || status().map(|st| st.spec.fingerprint()).unwrap_or_default();
    Some(match stored.kind {
        "task_status" => {
            let task_id = text("task_id");
            // Tasks are sorted by ID (`Snapshot::tasks`).
            let record = s
                .tasks
                .binary_search_by(|t| t.task_id.as_str().cmp(task_id.as_str()))
                .ok()
                .map(|i| &s.tasks[i]);
            let host = text("hostname");
            serde_json::json!({
                "eventType": "status_update_event",
                "timestamp": at,
                "slaveId": text("agent_id"),
                "taskId": task_id,
                "taskStatus": text("state"),
                "message": data["message"].as_str().unwrap_or_default(),
                "appId": app_id,
                "host": host,
                "ipAddresses": ip_addresses(&host),
                "ports": record.map(|t| t.ports.clone()).unwrap_or_default(),
                "version": record.map_or_else(version, |t| t.fingerprint.clone()),
            })
        }
        "health" => {
            let task_id = text("task_id");
            let version = version();
            serde_json::json!({
                "eventType": "health_status_changed_event",
                "timestamp": at,
                "appId": app_id,
                "taskId": task_id,
                "instanceId": task_id,
                "version": version,
                "alive": data["healthy"].as_bool().unwrap_or(false),
            })
        }
        "deployment" => {
            let version = version();
            let id = format!("{service}-{version}");
            let plan = serde_json::json!({
                "id": id,
                "version": version,
                "steps": [{"actions": [{"action": "RestartApplication", "app": app_id}]}],
            });
            match data["change"].as_str().unwrap_or_default() {
                "done" => serde_json::json!({
                    "eventType": "deployment_success", "timestamp": at, "id": id, "plan": plan}),
                "halted" => serde_json::json!({
                    "eventType": "deployment_failed", "timestamp": at, "id": id, "plan": plan,
                    "reason": data["reason"]}),
                _ => serde_json::json!({
                    "eventType": "deployment_info", "timestamp": at, "plan": plan,
                    "currentStep": {"actions": [{"action": "RestartApplication", "app": app_id}]}}),
            }
        }
        "service" => match data["change"].as_str().unwrap_or_default() {
            "removed" => serde_json::json!({
                "eventType": "app_terminated_event", "timestamp": at, "appId": app_id}),
            _ => serde_json::json!({
                "eventType": "api_post_event",
                "timestamp": at,
                "clientIp": serde_json::Value::Null,
                "uri": format!("/v2/apps/{service}"),
                "appDefinition": status().map(|st| app_of(st, None)),
            }),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_pairs_and_embed() {
        let p = pairs(Some("embed=apps.tasks&embed=apps.deployments&label=x%3Dy"));
        assert!(embeds_tasks(&p));
        assert_eq!(p[2], ("label".into(), "x=y".into()));
        assert!(!embeds_tasks(&pairs(Some("embed=apps.counts"))));
        assert!(!embeds_tasks(&pairs(None)));
    }

    #[test]
    fn the_status_filter_knows_marathons_two_values() {
        assert_eq!(StatusFilter::parse(None), Ok(StatusFilter::All));
        assert_eq!(
            StatusFilter::parse(Some("RUNNING")),
            Ok(StatusFilter::Running)
        );
        let staging = StatusFilter::parse(Some("staging")).unwrap();
        assert!(staging.keeps("TASK_STARTING") && !staging.keeps("TASK_RUNNING"));
        let err = StatusFilter::parse(Some("bogus")).unwrap_err();
        assert!(
            err.contains("'bogus'") && err.contains("running or staging"),
            "{err}"
        );
    }

    #[test]
    fn ip_addresses_only_for_ip_literals() {
        assert_eq!(ip_addresses("10.0.0.5")[0].ip_address, "10.0.0.5");
        assert_eq!(ip_addresses("::1")[0].protocol, "IPv6");
        assert!(ip_addresses("agent-1.example").is_empty());
    }

    #[test]
    fn times_are_rfc3339_with_milliseconds() {
        assert_eq!(time(1.5), "1970-01-01T00:00:01.500Z");
    }

    fn stored(kind: &'static str, data: serde_json::Value) -> Stored {
        Stored {
            id: super::super::event_stream::journal::EventId { epoch: 1, seq: 1 },
            kind,
            data: data.to_string(),
        }
    }

    #[test]
    fn journalled_events_get_marathon_names() {
        let replica = crate::coordination::ReplicaInfo::new("http://a:1", "d", "v");
        let mut s = Snapshot::standby(replica, "f", "*", crate::coordination::Strategy::Failover);
        let spec: crate::scheduler::ServiceSpec = serde_json::from_value(serde_json::json!({
            "name": "web", "command": "x", "cpus": 1, "mem": 1, "instances": 1, "ports": 1,
            "labels": {"MARATHON_SERVICE_PORT_0": "10001"}}))
        .unwrap();
        let version = spec.fingerprint();
        s.services.push(
            serde_json::from_value(serde_json::json!({
            "spec": spec, "running": 1, "starting": 0, "killing": 0, "unreachable": 0,
            "consecutive_failures": 0, "next_launch_after": null, "backoff": [],
            "healthy": 0, "unhealthy": 0, "can_roll_back": false}))
            .unwrap(),
        );
        let e = translate(
            &stored(
                "task_status",
                serde_json::json!({"at": 1.5, "task_id": "web.0.x",
                "service": "web", "instance": 0, "state": "TASK_RUNNING", "agent_id": "A",
                "hostname": "10.0.0.7", "message": null}),
            ),
            &s,
        )
        .unwrap();
        assert_eq!(e["eventType"], "status_update_event");
        assert_eq!(e["timestamp"], "1970-01-01T00:00:01.500Z");
        assert_eq!(e["appId"], "/web");
        assert_eq!(e["taskStatus"], "TASK_RUNNING");
        assert_eq!(e["slaveId"], "A");
        assert_eq!(e["ipAddresses"][0]["ipAddress"], "10.0.0.7");
        let e = translate(
            &stored(
                "health",
                serde_json::json!({"at": 2.0, "task_id": "web.0.x",
                "service": "web", "healthy": true, "was": null}),
            ),
            &s,
        )
        .unwrap();
        assert_eq!(
            (e["eventType"].as_str(), e["alive"].as_bool()),
            (Some("health_status_changed_event"), Some(true))
        );
        for (change, name) in [
            ("started", "deployment_info"),
            ("step", "deployment_info"),
            ("resumed", "deployment_info"),
            ("done", "deployment_success"),
            ("halted", "deployment_failed"),
        ] {
            let e = translate(
                &stored(
                    "deployment",
                    serde_json::json!({"at": 3.0, "service": "web",
                    "change": change, "desired": 1, "replaced": 0, "healthy": 0,
                    "remaining": 1, "reason": "slow"}),
                ),
                &s,
            )
            .unwrap();
            assert_eq!(e["eventType"], name, "{change}");
            assert_eq!(e["plan"]["id"], format!("web-{version}"));
        }
        let e = translate(
            &stored(
                "service",
                serde_json::json!({"at": 4.0, "service": "web",
                "change": "added", "instances": 1, "fingerprint": version}),
            ),
            &s,
        )
        .unwrap();
        assert_eq!(e["eventType"], "api_post_event");
        assert_eq!(e["appDefinition"]["portDefinitions"][0]["port"], 10001);
        let e = translate(
            &stored(
                "service",
                serde_json::json!({"at": 4.0, "service": "old",
                "change": "removed", "instances": null, "fingerprint": null}),
            ),
            &s,
        )
        .unwrap();
        assert_eq!(
            (e["eventType"].as_str(), e["appId"].as_str()),
            (Some("app_terminated_event"), Some("/old"))
        );
        for kind in ["agent", "leadership", "audit"] {
            assert!(translate(&stored(kind, serde_json::json!({"at": 1.0})), &s).is_none());
        }
    }

    #[test]
    fn constraints_split_into_marathon_triples() {
        assert_eq!(
            constraints(&["hostname:UNIQUE".into(), "rack:LIKE:r[12]:x".into()]),
            vec![vec!["hostname", "UNIQUE"], vec!["rack", "LIKE", "r[12]:x"]]
        );
    }
}
