//! Marathon app definitions to service specs (`docs/marathon.md#the-import`).
//!
//! The input is read as JSON values, and each app object is taken apart
//! field by field: a field is *carried* (it becomes a part of the spec),
//! *changed* (carried with another meaning or form, said in a [`Note`]),
//! *not carried* (a [`Note`] says why), or — when it holds Marathon's
//! default or an empty value (`null`, `""`, `[]`, `{}`, `0`, `false`) —
//! passed over, as it asks for nothing. Whatever key is left in an object
//! once its known fields are taken is listed as unknown: nothing is
//! dropped silently.
//!
//! Marathon's app schema and defaults are those of its REST API
//! documentation (`docs/docs/rest-api.md`, `application-basics.md`,
//! `health-checks.md`, `ports.md`, `constraints.md`,
//! `configure-task-handling.md` in mesosphere/marathon).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::scheduler::spec::command::UriSpec;
use crate::scheduler::spec::container::{
    ContainerSpec, DockerNetwork, DockerSpec, ParameterSpec, PortMappingSpec, VolumeMode,
    VolumeSpec,
};
use crate::scheduler::spec::health::{HealthCheckKind, HealthCheckSpec, MAX_CONSECUTIVE_FAILURES};
use crate::scheduler::spec::service::new_name_problem;
use crate::scheduler::spec::unreachable::{MAX_UNREACHABLE_WAIT, UnreachablePolicy};
use crate::scheduler::spec::{CommandSpec, ExecutorKind, ServiceSpec};

/// Largest input read, bytes: a `GET /v2/apps` of a few thousand apps.
pub const MAX_INPUT_BYTES: usize = 64 * 1024 * 1024;

/// Most apps in one input.
pub const MAX_APPS: usize = 10_000;

pub use crate::scheduler::spec::service::SERVICE_PORT_LABEL;

/// What happened to one field of one app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Left out of the spec.
    NotCarried,
    /// Carried, but in another form or with another meaning.
    Changed,
    /// The whole app: no spec was made (it does not validate, its name
    /// clashes, or it has no command).
    Refused,
}

/// One entry of the not-carried list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// The app's Marathon ID as written (absolute).
    pub app: String,
    /// The field's JSON path within the app (`healthChecks[1].protocol`);
    /// empty for the whole app.
    pub field: String,
    /// See [`Outcome`].
    pub outcome: Outcome,
    /// Why, in a sentence.
    pub why: String,
}

/// The result of an import: the specs (each valid by
/// [`ServiceSpec::validate`]) and the notes, in input order.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// One spec per app that could be carried over.
    pub specs: Vec<ServiceSpec>,
    /// Every field not carried or changed, and every refused app.
    pub notes: Vec<Note>,
}

impl Imported {
    /// Apps refused.
    pub fn refused(&self) -> usize {
        self.notes
            .iter()
            .filter(|n| n.outcome == Outcome::Refused)
            .count()
    }
}

/// Why an input is not read at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    /// Not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not an app, an array of apps, a `GET /v2/apps` answer or
    /// a group.
    #[error("not Marathon app JSON: {0}")]
    NotMarathon(String),
}

/// Reads `text` — one app object, an array of apps, `GET /v2/apps` output
/// (`{"apps": [...]}`) or a group (`{"id": "/g", "apps": [...], "groups":
/// [...]}`) — and turns each app into a service spec.
///
/// # Errors
/// [`ImportError`] when the text is not JSON, or not one of those shapes.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(ImportError::NotMarathon(format!(
            "larger than {MAX_INPUT_BYTES} bytes"
        )));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| ImportError::NotJson(e.to_string()))?;
    let mut apps = Vec::new();
    collect(value, "/", &mut apps, 0)?;
    if apps.is_empty() {
        return Err(ImportError::NotMarathon("no apps in it".into()));
    }
    if apps.len() > MAX_APPS {
        return Err(ImportError::NotMarathon(format!(
            "{} apps; at most {MAX_APPS}",
            apps.len()
        )));
    }
    let mut out = Imported::default();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (id, app) in apps {
        let mut notes = Vec::new();
        let result = convert(&id, app, &mut notes);
        out.notes.extend(notes);
        let refuse = |why: String| Note {
            app: id.clone(),
            field: String::new(),
            outcome: Outcome::Refused,
            why,
        };
        match result {
            Err(why) => out.notes.push(refuse(why)),
            Ok(spec) => {
                let errors = spec.validate();
                if !errors.is_empty() {
                    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    out.notes.push(refuse(format!(
                        "the spec made of it does not validate: {}",
                        errors.join("; ")
                    )));
                } else if let Some(first) = names.get(&spec.name) {
                    out.notes.push(refuse(format!(
                        "its service name {:?} is already the name of {first}",
                        spec.name
                    )));
                } else {
                    names.insert(spec.name.clone(), id.clone());
                    out.specs.push(spec);
                }
            }
        }
    }
    Ok(out)
}

/// Deepest group nesting read.
const MAX_DEPTH: usize = 32;

/// Finds the apps in `value` (see [`import`]), their IDs made absolute
/// against the group `base`.
fn collect(
    value: Value,
    base: &str,
    apps: &mut Vec<(String, Map<String, Value>)>,
    depth: usize,
) -> Result<(), ImportError> {
    if depth > MAX_DEPTH {
        return Err(ImportError::NotMarathon(format!(
            "groups nested deeper than {MAX_DEPTH}"
        )));
    }
    match value {
        Value::Array(items) => {
            for (i, item) in items.into_iter().enumerate() {
                match item {
                    Value::Object(object) => collect(Value::Object(object), base, apps, depth + 1)
                        .map_err(|e| match e {
                            ImportError::NotMarathon(why) => {
                                ImportError::NotMarathon(format!("[{i}]: {why}"))
                            }
                            other => other,
                        })?,
                    _ => {
                        return Err(ImportError::NotMarathon(format!(
                            "[{i}] is not an app object"
                        )));
                    }
                }
            }
            Ok(())
        }
        Value::Object(mut object) => {
            let is_list = matches!(object.get("apps"), Some(Value::Array(_)))
                || matches!(object.get("groups"), Some(Value::Array(_)));
            if !is_list {
                return app_of(object, base, apps).map_err(ImportError::NotMarathon);
            }
            // `GET /v2/apps` output, or a group (`GET /v2/groups`).
            let group = match object.remove("id") {
                Some(Value::String(id)) => absolute(&id, base),
                None => base.to_string(),
                Some(_) => {
                    return Err(ImportError::NotMarathon(
                        "a group's id is not a string".into(),
                    ));
                }
            };
            for key in ["apps", "groups"] {
                if let Some(list) = object.remove(key) {
                    collect(list, &group, apps, depth + 1)?;
                }
            }
            Ok(())
        }
        _ => Err(ImportError::NotMarathon(
            "expected an app object, an array of apps, or {\"apps\": [...]}".into(),
        )),
    }
}

/// Fields only Marathon's own answers carry (status, not definition).
const STATUS_FIELDS: [&str; 14] = [
    "version",
    "versionInfo",
    "tasksStaged",
    "tasksRunning",
    "tasksHealthy",
    "tasksUnhealthy",
    "deployments",
    "tasks",
    "lastTaskFailure",
    "readinessCheckResults",
    "taskStats",
    "overdue",
    "queue",
    "counts",
];

fn app_of(
    app: Map<String, Value>,
    base: &str,
    apps: &mut Vec<(String, Map<String, Value>)>,
) -> Result<(), String> {
    let id = match app.get("id") {
        Some(Value::String(id)) if !id.trim_matches('/').is_empty() => absolute(id, base),
        Some(_) => return Err("an app's \"id\" must be a non-empty string".into()),
        None => {
            return Err(
                "an app object needs an \"id\" (this looks like something else; \
                 a Marathon app has \"id\" and e.g. \"cmd\", \"container\", \"instances\")"
                    .into(),
            );
        }
    };
    const APP_KEYS: [&str; 9] = [
        "cmd",
        "args",
        "container",
        "instances",
        "cpus",
        "mem",
        "portDefinitions",
        "healthChecks",
        "constraints",
    ];
    if !APP_KEYS.iter().any(|k| app.contains_key(*k)) {
        return Err(format!(
            "app {id:?} has none of {}: not a Marathon app",
            APP_KEYS.join(", ")
        ));
    }
    apps.push((id, app));
    Ok(())
}

/// `id` made absolute against the group `base` (Marathon resolves a
/// relative ID against its group; `..` goes up one).
fn absolute(id: &str, base: &str) -> String {
    let mut parts: Vec<&str> = if id.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|p| !p.is_empty()).collect()
    };
    for part in id.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            parts.pop();
        } else {
            parts.push(part);
        }
    }
    format!("/{}", parts.join("/"))
}

/// The service name of a Marathon ID: the path's segments joined with
/// `-`, dots as `-` (`/prod/api.v2` → `prod-api-v2`).
///
/// # Errors
/// A name [`new_name_problem`] refuses: not 1-63 of `[a-z0-9-]`, or not
/// starting and ending with a letter or digit (Marathon IDs may be longer,
/// or hold `_` in old versions).
pub fn service_name(id: &str) -> Result<String, String> {
    let name = id
        .split('/')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
        .replace('.', "-");
    match new_name_problem(&name) {
        None => Ok(name),
        Some(problem) => Err(format!(
            "its service name {name:?} (the ID's segments joined with '-') {}",
            problem.message
        )),
    }
}

/// Takes one app apart; notes go to `notes`.
struct App<'a> {
    id: &'a str,
    notes: &'a mut Vec<Note>,
}

impl App<'_> {
    fn note(&mut self, field: impl Into<String>, outcome: Outcome, why: impl Into<String>) {
        self.notes.push(Note {
            app: self.id.to_string(),
            field: field.into(),
            outcome,
            why: why.into(),
        });
    }

    fn not_carried(&mut self, field: impl Into<String>, why: impl Into<String>) {
        self.note(field, Outcome::NotCarried, why);
    }

    fn changed(&mut self, field: impl Into<String>, why: impl Into<String>) {
        self.note(field, Outcome::Changed, why);
    }

    /// Lists the keys left in `object` (at `path`): unknown, or known and
    /// not carried for `why` (by key).
    fn rest(&mut self, path: &str, object: Map<String, Value>, known: &[(&str, &str)]) {
        for (key, value) in object {
            if is_empty(&value) {
                continue;
            }
            let field = join(path, &key);
            match known.iter().find(|(k, _)| *k == key) {
                Some((_, why)) => self.not_carried(field, *why),
                None => self.not_carried(
                    field,
                    "unknown field: not in Marathon's app schema as read here",
                ),
            }
        }
    }

    /// A number at `key`, noted when of another type.
    fn number(&mut self, object: &mut Map<String, Value>, path: &str, key: &str) -> Option<f64> {
        match object.remove(key)? {
            Value::Number(n) => n.as_f64(),
            Value::Null => None,
            other => {
                self.not_carried(
                    join(path, key),
                    format!("not a number but {}", kind(&other)),
                );
                None
            }
        }
    }

    /// A whole number of seconds at `key` as a duration.
    fn seconds(
        &mut self,
        object: &mut Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<Duration> {
        let value = self.number(object, path, key)?;
        if !(0.0..=crate::util::MAX_DURATION.as_secs_f64()).contains(&value) {
            self.not_carried(join(path, key), format!("{value} seconds is out of range"));
            return None;
        }
        Some(Duration::from_secs_f64(value))
    }

    fn string(&mut self, object: &mut Map<String, Value>, path: &str, key: &str) -> Option<String> {
        match object.remove(key)? {
            Value::String(s) => Some(s),
            Value::Null => None,
            other => {
                self.not_carried(
                    join(path, key),
                    format!("not a string but {}", kind(&other)),
                );
                None
            }
        }
    }

    fn boolean(&mut self, object: &mut Map<String, Value>, path: &str, key: &str) -> Option<bool> {
        match object.remove(key)? {
            Value::Bool(b) => Some(b),
            Value::Null => None,
            other => {
                self.not_carried(
                    join(path, key),
                    format!("not true or false but {}", kind(&other)),
                );
                None
            }
        }
    }

    fn object(
        &mut self,
        object: &mut Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<Map<String, Value>> {
        match object.remove(key)? {
            Value::Object(o) => Some(o),
            Value::Null => None,
            other => {
                self.not_carried(
                    join(path, key),
                    format!("not an object but {}", kind(&other)),
                );
                None
            }
        }
    }

    fn array(
        &mut self,
        object: &mut Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<Vec<Value>> {
        match object.remove(key)? {
            Value::Array(a) => Some(a),
            Value::Null => None,
            other => {
                self.not_carried(
                    join(path, key),
                    format!("not an array but {}", kind(&other)),
                );
                None
            }
        }
    }

    /// `map` as string pairs; other values are noted.
    fn strings(
        &mut self,
        path: &str,
        map: Map<String, Value>,
        other_why: &str,
    ) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (key, value) in map {
            match value {
                Value::String(s) => {
                    out.insert(key, s);
                }
                _ => self.not_carried(join(path, &key), other_why),
            }
        }
        out
    }
}

/// What a JSON value is, for notes: never the value itself (it may be a
/// secret).
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Marathon's defaults (`docs/docs/rest-api.md`, `health-checks.md`,
/// `configure-task-handling.md` in mesosphere/marathon).
mod defaults {
    pub const CPUS: f64 = 1.0;
    pub const MEM: f64 = 128.0;
    pub const INSTANCES: u32 = 1;
    pub const BACKOFF_SECONDS: f64 = 1.0;
    pub const MAX_LAUNCH_DELAY_SECONDS: f64 = 300.0;
    /// Marathon sets no kill policy then; Mesos' command executor waits
    /// 3 s (`src/launcher/executor.cpp` in apache/mesos).
    pub const KILL_GRACE_SECONDS: f64 = 3.0;
    pub const CHECK_GRACE: u64 = 300;
    pub const CHECK_INTERVAL: u64 = 60;
    pub const CHECK_TIMEOUT: u64 = 20;
    pub const CHECK_DELAY: u64 = 15;
    pub const CHECK_FAILURES: u32 = 3;
    pub const INACTIVE_AFTER: u64 = 300;
    pub const EXPUNGE_AFTER: u64 = 600;
}

/// The app's fields that the appliance has no place for, and why.
const NOT_CARRIED: [(&str, &str); 18] = [
    (
        "user",
        "tasks run as the user of the appliance's framework (--framework-user)",
    ),
    (
        "acceptedResourceRoles",
        "the appliance takes the offers of its framework role",
    ),
    (
        "role",
        "the appliance takes the offers of its framework role",
    ),
    (
        "gpus",
        "the appliance asks for cpus, mem, disk and ports only",
    ),
    (
        "executor",
        "tasks run under the command executor or mesos-appliance-executor (the spec's executor)",
    ),
    ("dependencies", "services start independently"),
    (
        "readinessChecks",
        "a rollout waits for the health check and upgrade.min_healthy instead",
    ),
    ("residency", "no persistent volumes or reservations"),
    (
        "secrets",
        "no secret store: set such values on the agents or in the spec by hand",
    ),
    ("storeUrls", "not supported"),
    (
        "ipAddress",
        "no IP-per-task networks (use container.docker with a USER network)",
    ),
    ("tty", "not supported"),
    ("resourceLimits", "tasks are limited to what they ask for"),
    ("executorResources", "not supported"),
    (
        "check",
        "Mesos checks (not health checks) are not supported",
    ),
    (
        "requirePorts",
        "ports are taken from the offers, never fixed",
    ),
    ("networks", "not carried"),
    ("pod", "pods are not supported"),
];

/// The spec of one app, or why none can be made.
fn convert(
    id: &str,
    mut app: Map<String, Value>,
    notes: &mut Vec<Note>,
) -> Result<ServiceSpec, String> {
    app.remove("id");
    let name = service_name(id)?;
    let mut a = App { id, notes };
    if format!("/{name}") != id {
        a.changed(
            "id",
            format!("the service is named {name:?} (groups and dots become '-')"),
        );
    }
    let status: Vec<&str> = STATUS_FIELDS
        .iter()
        .copied()
        .filter(|k| app.remove(*k).is_some_and(|v| !is_empty(&v)))
        .collect();
    if !status.is_empty() {
        a.not_carried(
            status.join(", "),
            "the running app's status in Marathon, not a part of its definition",
        );
    }

    let mut labels = a
        .object(&mut app, "", "labels")
        .map(|l| a.strings("labels", l, "a label's value must be a string"))
        .unwrap_or_default();

    // The container first: with Docker, `args` mean something else.
    let mut ports_from_mappings: Option<u32> = None;
    let networks = a.array(&mut app, "", "networks").unwrap_or_default();
    let container = match a.object(&mut app, "", "container") {
        Some(c) => container(&mut a, c, &networks, &mut labels, &mut ports_from_mappings),
        None => {
            if networks_other_than_host(&networks) {
                a.not_carried("networks", "only a Docker container's network is carried");
            }
            None
        }
    };
    let docker = container.as_ref().is_some_and(|c| c.docker.is_some());

    let cmd = a
        .string(&mut app, "", "cmd")
        .filter(|c| !c.trim().is_empty());
    let args = a.array(&mut app, "", "args").unwrap_or_default();
    let args: Vec<String> = args
        .into_iter()
        .filter_map(|v| match v {
            Value::String(s) => Some(s),
            _ => None,
        })
        .collect();
    let command = match (cmd, args.is_empty()) {
        (Some(_), false) => {
            return Err("it has both cmd and args (Marathon refuses that too)".into());
        }
        (Some(line), true) => CommandSpec::Shell(line),
        (None, false) => {
            if docker {
                a.changed(
                    "args",
                    "Marathon passes args to the image's entrypoint; here args[0] is run as \
                     the program (docker --entrypoint) with the rest as its arguments",
                );
            }
            CommandSpec::Argv(args)
        }
        (None, true) => {
            return Err(
                "it has neither cmd nor args: a service runs a command (Marathon ran the \
                 image's entrypoint); give cmd or args"
                    .into(),
            );
        }
    };

    let cpus = a.number(&mut app, "", "cpus").unwrap_or(defaults::CPUS);
    let mem = a.number(&mut app, "", "mem").unwrap_or(defaults::MEM);
    let disk = a.number(&mut app, "", "disk").unwrap_or(0.0);
    let instances = match a.number(&mut app, "", "instances") {
        None => defaults::INSTANCES,
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= f64::from(u32::MAX) => n as u32,
        Some(n) => return Err(format!("instances {n} is not a whole number")),
    };

    let env = match a.object(&mut app, "", "env") {
        Some(env) => a.strings(
            "env",
            env,
            "a secret reference: the appliance has no secret store (set the variable by hand)",
        ),
        None => BTreeMap::new(),
    };

    // Ports: from portDefinitions (or the older `ports`) unless a bridged
    // container maps them.
    let definitions = a.array(&mut app, "", "portDefinitions");
    let legacy = a.array(&mut app, "", "ports");
    let ports = match ports_from_mappings {
        Some(n) => {
            if definitions.as_ref().is_some_and(|d| !d.is_empty()) {
                a.not_carried(
                    "portDefinitions",
                    "a bridged container's portMappings give the ports",
                );
            }
            n
        }
        None => match definitions {
            Some(defs) => {
                if let Some(legacy) = legacy.filter(|l| !l.is_empty()) {
                    let same = legacy.len() == defs.len()
                        && legacy
                            .iter()
                            .zip(&defs)
                            .all(|(p, d)| Some(p) == d.get("port"));
                    if !same {
                        a.not_carried("ports", "portDefinitions are given too; they are used");
                    }
                }
                port_definitions(&mut a, defs, &mut labels)
            }
            None => {
                let legacy = legacy.unwrap_or_default();
                for (i, port) in legacy.iter().enumerate() {
                    service_port(
                        &mut a,
                        &format!("ports[{i}]"),
                        i,
                        port.as_u64(),
                        &mut labels,
                    );
                }
                legacy.len() as u32
            }
        },
    };

    let health_check = match a.array(&mut app, "", "healthChecks") {
        Some(checks) => health_checks(&mut a, checks),
        None => None,
    };

    let constraints = match a.array(&mut app, "", "constraints") {
        Some(list) => constraints(&mut a, list),
        None => Vec::new(),
    };

    let mut uris = Vec::new();
    if let Some(fetch) = a.array(&mut app, "", "fetch") {
        for (i, item) in fetch.into_iter().enumerate() {
            let path = format!("fetch[{i}]");
            let Value::Object(mut item) = item else {
                a.not_carried(path, "not an object");
                continue;
            };
            let Some(value) = a.string(&mut item, &path, "uri") else {
                a.not_carried(path, "no uri");
                continue;
            };
            let uri = UriSpec {
                value,
                executable: a.boolean(&mut item, &path, "executable").unwrap_or(false),
                extract: a.boolean(&mut item, &path, "extract").unwrap_or(true),
                cache: a.boolean(&mut item, &path, "cache").unwrap_or(false),
            };
            uris.push(uri);
            a.rest(
                &path,
                item,
                &[
                    ("outputFile", "the fetcher keeps the URI's file name"),
                    ("destPath", "the fetcher keeps the URI's file name"),
                ],
            );
        }
    }
    if let Some(old) = a.array(&mut app, "", "uris") {
        for (i, uri) in old.into_iter().enumerate() {
            match uri {
                Value::String(value) => uris.push(UriSpec {
                    value,
                    executable: false,
                    extract: true,
                    cache: false,
                }),
                _ => a.not_carried(format!("uris[{i}]"), "not a string"),
            }
        }
    }

    let backoff = a
        .number(&mut app, "", "backoffSeconds")
        .unwrap_or(defaults::BACKOFF_SECONDS);
    let max_delay = a
        .number(&mut app, "", "maxLaunchDelaySeconds")
        .unwrap_or(defaults::MAX_LAUNCH_DELAY_SECONDS);
    if let Some(factor) = a.number(&mut app, "", "backoffFactor")
        && factor != 2.0
    {
        a.not_carried(
            "backoffFactor",
            format!("the restart delay doubles per failure here (factor 2, not {factor})"),
        );
    }
    let cap = crate::util::MAX_DURATION.as_secs_f64();
    let restart_backoff = Duration::from_secs_f64(backoff.clamp(0.001, cap));
    let restart_backoff_max =
        Duration::from_secs_f64(max_delay.clamp(0.001, cap)).max(restart_backoff);
    let kill_grace_period = a
        .seconds(&mut app, "", "taskKillGracePeriodSeconds")
        .unwrap_or(Duration::from_secs_f64(defaults::KILL_GRACE_SECONDS));

    if app.contains_key("upgradeStrategy") {
        let strategy = a
            .object(&mut app, "", "upgradeStrategy")
            .unwrap_or_default();
        let value = |key: &str| strategy.get(key).and_then(Value::as_f64);
        a.not_carried(
            "upgradeStrategy",
            format!(
                "(minimumHealthCapacity {}, maximumOverCapacity {}) the appliance replaces \
                 outdated tasks by killing them, at most --upgrade-max-unavailable at a time \
                 (a flag of the replicas), and never runs tasks above the instance count",
                value("minimumHealthCapacity").unwrap_or(1.0),
                value("maximumOverCapacity").unwrap_or(1.0)
            ),
        );
    }

    let unreachable = match app.remove("unreachableStrategy") {
        None | Some(Value::Null) => Some(UnreachablePolicy {
            inactive_after: Duration::from_secs(defaults::INACTIVE_AFTER),
            expunge_after: Duration::from_secs(defaults::EXPUNGE_AFTER),
            ..UnreachablePolicy::default()
        }),
        Some(Value::String(s)) if s == "disabled" => {
            a.not_carried(
                "unreachableStrategy",
                "\"disabled\" (never replace): the appliance replaces an unreachable task \
                 after at most 7 days; the spec keeps the defaults (replace at once)",
            );
            None
        }
        Some(Value::Object(mut s)) => {
            let inactive = a
                .seconds(&mut s, "unreachableStrategy", "inactiveAfterSeconds")
                .unwrap_or(Duration::from_secs(defaults::INACTIVE_AFTER));
            let expunge = a
                .seconds(&mut s, "unreachableStrategy", "expungeAfterSeconds")
                .unwrap_or(Duration::from_secs(defaults::EXPUNGE_AFTER));
            a.rest("unreachableStrategy", s, &[]);
            if inactive > MAX_UNREACHABLE_WAIT || expunge > MAX_UNREACHABLE_WAIT {
                a.changed(
                    "unreachableStrategy",
                    "waits above 7 days are cut to 7 days",
                );
            }
            Some(UnreachablePolicy {
                inactive_after: inactive.min(MAX_UNREACHABLE_WAIT),
                expunge_after: expunge.min(MAX_UNREACHABLE_WAIT),
                ..UnreachablePolicy::default()
            })
        }
        Some(other) => {
            a.not_carried(
                "unreachableStrategy",
                format!("neither an object nor \"disabled\" but {}", kind(&other)),
            );
            None
        }
    };

    if let Some(selection) = a.string(&mut app, "", "killSelection")
        && selection != "YOUNGEST_FIRST"
    {
        a.not_carried(
            "killSelection",
            format!("{selection}: a scale-down kills the worst tasks first (unhealthy, not running, …), then the highest instance"),
        );
    }

    a.rest("", app, &NOT_CARRIED);

    Ok(ServiceSpec {
        name,
        command,
        cpus,
        mem,
        disk,
        ports,
        instances,
        env,
        uris,
        constraints,
        restart_backoff,
        restart_backoff_max,
        kill_grace_period,
        executor: ExecutorKind::Command,
        health_check: health_check.map(Box::new),
        container: container.map(Box::new),
        upgrade: None,
        unreachable,
        labels,
        restart_generation: 0,
    })
}

/// Carries port `i`'s Marathon service port as the
/// [`SERVICE_PORT_LABEL`] label.
fn service_port(
    a: &mut App<'_>,
    path: &str,
    i: usize,
    port: Option<u64>,
    labels: &mut BTreeMap<String, String>,
) {
    match port {
        Some(port) if (1..=65_535).contains(&port) => {
            labels.insert(format!("{SERVICE_PORT_LABEL}{i}"), port.to_string());
            a.changed(
                path.to_string(),
                format!(
                    "service port {port} is kept as the label {SERVICE_PORT_LABEL}{i} (/v2/apps \
                     shows it to load balancers); the task's port comes from the offer"
                ),
            );
        }
        Some(0) => a.not_carried(
            path.to_string(),
            format!(
                "service port 0 (Marathon picks one): none is picked here; for marathon-lb \
                 give the service the label {SERVICE_PORT_LABEL}{i}"
            ),
        ),
        _ => {}
    }
}

fn port_definitions(
    a: &mut App<'_>,
    defs: Vec<Value>,
    labels: &mut BTreeMap<String, String>,
) -> u32 {
    let count = defs.len() as u32;
    for (i, def) in defs.into_iter().enumerate() {
        let path = format!("portDefinitions[{i}]");
        let Value::Object(mut def) = def else {
            a.not_carried(path, "not an object");
            continue;
        };
        let port = a.number(&mut def, &path, "port");
        service_port(a, &path, i, port.map(|p| p as u64), labels);
        if let Some(protocol) = a.string(&mut def, &path, "protocol")
            && protocol != "tcp"
        {
            a.not_carried(join(&path, "protocol"), format!("{protocol}: ports are taken alike for every protocol; only the Docker port mappings say one"));
        }
        a.rest(
            &path,
            def,
            &[
                ("name", "ports have no names here"),
                ("labels", "ports have no labels here"),
            ],
        );
    }
    count
}

fn container(
    a: &mut App<'_>,
    mut c: Map<String, Value>,
    networks: &[Value],
    labels: &mut BTreeMap<String, String>,
    ports: &mut Option<u32>,
) -> Option<ContainerSpec> {
    let path = "container";
    let kind = a
        .string(&mut c, path, "type")
        .unwrap_or_else(|| "DOCKER".into());
    let mut docker = a.object(&mut c, path, "docker").unwrap_or_default();
    let dpath = "container.docker";
    let image = a.string(&mut docker, dpath, "image");
    let force = a
        .boolean(&mut docker, dpath, "forcePullImage")
        .unwrap_or(false);
    let mut out = ContainerSpec {
        image: None,
        force_pull: false,
        docker: None,
        volumes: Vec::new(),
        environment: BTreeMap::new(),
    };
    if let Some(volumes) = a.array(&mut c, path, "volumes") {
        for (i, v) in volumes.into_iter().enumerate() {
            let vpath = format!("container.volumes[{i}]");
            let Value::Object(mut v) = v else {
                a.not_carried(vpath, "not an object");
                continue;
            };
            let container_path = a.string(&mut v, &vpath, "containerPath");
            let host_path = a.string(&mut v, &vpath, "hostPath");
            let mode = a.string(&mut v, &vpath, "mode");
            match (container_path, host_path) {
                (Some(container_path), Some(host_path)) => out.volumes.push(VolumeSpec {
                    container_path,
                    host_path,
                    mode: if mode.as_deref() == Some("RW") {
                        VolumeMode::Rw
                    } else {
                        VolumeMode::Ro
                    },
                }),
                _ => a.not_carried(
                    vpath.clone(),
                    "only host-path volumes (containerPath, hostPath) are carried",
                ),
            }
            a.rest(
                &vpath,
                v,
                &[
                    ("persistent", "no persistent volumes"),
                    ("external", "no external volumes"),
                    ("secret", "no secret volumes"),
                ],
            );
        }
    }
    match (kind.as_str(), image) {
        ("MESOS", Some(image)) => {
            out.image = Some(image);
            out.force_pull = force;
            if networks_other_than_host(networks) {
                a.not_carried(
                    "networks",
                    "a Mesos-containerizer image runs on the agent's network here",
                );
            }
        }
        ("DOCKER", Some(image)) => {
            out.docker = Some(docker_spec(
                a,
                &mut c,
                &mut docker,
                image,
                force,
                networks,
                labels,
                ports,
            ));
        }
        ("DOCKER" | "MESOS", None) => {
            if !out.volumes.is_empty() {
                a.not_carried(
                    "container.volumes",
                    "volumes are carried with an image only",
                );
            }
            return finish(a, c, docker, None);
        }
        (other, _) => {
            a.not_carried("container.type", format!("{other}: only DOCKER and MESOS"));
            return finish(a, c, docker, None);
        }
    }
    finish(a, c, docker, Some(out))
}

/// True when `networks` asks for more than the agent's network.
fn networks_other_than_host(networks: &[Value]) -> bool {
    networks
        .iter()
        .any(|n| n.get("mode").and_then(Value::as_str) != Some("host"))
}

/// The Docker containerizer's part: network, port mappings (which give
/// the service's port count), parameters.
#[allow(clippy::too_many_arguments)]
fn docker_spec(
    a: &mut App<'_>,
    c: &mut Map<String, Value>,
    docker: &mut Map<String, Value>,
    image: String,
    force_pull_image: bool,
    networks: &[Value],
    labels: &mut BTreeMap<String, String>,
    ports: &mut Option<u32>,
) -> DockerSpec {
    let (path, dpath) = ("container", "container.docker");
    let mut spec = DockerSpec {
        image,
        network: DockerNetwork::Host,
        network_name: None,
        port_mappings: Vec::new(),
        force_pull_image,
        parameters: Vec::new(),
    };
    // The network: Marathon 1.5's `networks`, or the older
    // `container.docker.network`.
    let legacy = a.string(docker, dpath, "network");
    let first = networks.first().and_then(Value::as_object);
    let mode = first.and_then(|n| n.get("mode")).and_then(Value::as_str);
    spec.network = match (mode, legacy.as_deref()) {
        (Some("container/bridge"), _) | (None, Some("BRIDGE")) => DockerNetwork::Bridge,
        (Some("container"), _) | (None, Some("USER")) => {
            spec.network_name = first
                .and_then(|n| n.get("name"))
                .and_then(Value::as_str)
                .map(str::to_string);
            DockerNetwork::User
        }
        (None, Some("NONE")) => DockerNetwork::None,
        _ => DockerNetwork::Host,
    };
    if networks.len() > 1 {
        a.not_carried("networks", "only the first network is carried");
    }
    let mappings = match (
        a.array(c, path, "portMappings"),
        a.array(docker, dpath, "portMappings"),
    ) {
        (Some(m), _) => Some(("container.portMappings", m)),
        (None, Some(m)) => Some(("container.docker.portMappings", m)),
        (None, None) => None,
    };
    if let Some((mpath, mappings)) = mappings {
        if matches!(spec.network, DockerNetwork::Bridge | DockerNetwork::User) {
            *ports = Some(mappings.len() as u32);
            for (i, m) in mappings.into_iter().enumerate() {
                let ppath = format!("{mpath}[{i}]");
                let Value::Object(mut m) = m else {
                    a.not_carried(ppath, "not an object");
                    continue;
                };
                let container_port =
                    a.number(&mut m, &ppath, "containerPort").unwrap_or(0.0) as u32;
                let protocol = a.string(&mut m, &ppath, "protocol").filter(|p| p != "tcp");
                if let Some(host) = a.number(&mut m, &ppath, "hostPort")
                    && host != 0.0
                {
                    a.not_carried(
                        join(&ppath, "hostPort"),
                        format!("{host}: host ports come from the offers, never fixed"),
                    );
                }
                let service = a.number(&mut m, &ppath, "servicePort");
                service_port(
                    a,
                    &join(&ppath, "servicePort"),
                    i,
                    service.map(|p| p as u64),
                    labels,
                );
                spec.port_mappings.push(PortMappingSpec {
                    container_port,
                    protocol,
                });
                a.rest(
                    &ppath,
                    m,
                    &[
                        ("name", "ports have no names here"),
                        ("labels", "ports have no labels here"),
                        ("networkNames", "not supported"),
                    ],
                );
            }
        } else if !mappings.is_empty() {
            a.not_carried(
                mpath,
                "port mappings apply to BRIDGE and USER networks only",
            );
        }
    }
    if let Some(params) = a.array(docker, dpath, "parameters") {
        for (i, p) in params.into_iter().enumerate() {
            let pair = p
                .as_object()
                .and_then(|p| Some((p.get("key")?.as_str()?, p.get("value")?.as_str()?)));
            match pair {
                Some((key, value)) => spec.parameters.push(ParameterSpec {
                    key: key.into(),
                    value: value.into(),
                }),
                None => a.not_carried(
                    format!("container.docker.parameters[{i}]"),
                    "not a {key, value} pair of strings",
                ),
            }
        }
    }
    spec
}

/// Lists what is left of `container` and its `docker`.
fn finish(
    a: &mut App<'_>,
    c: Map<String, Value>,
    docker: Map<String, Value>,
    out: Option<ContainerSpec>,
) -> Option<ContainerSpec> {
    a.rest(
        "container.docker",
        docker,
        &[
            ("privileged", "privileged containers are not supported"),
            (
                "pullConfig",
                "no registry credentials: the agents must be able to pull",
            ),
            (
                "credential",
                "no registry credentials: the agents must be able to pull",
            ),
            (
                "network",
                "a Docker network is carried with a DOCKER container only",
            ),
            (
                "portMappings",
                "port mappings are carried for Docker BRIDGE and USER networks only",
            ),
        ],
    );
    a.rest(
        "container",
        c,
        &[
            ("linuxInfo", "not supported"),
            ("appc", "AppC images are not supported"),
            (
                "portMappings",
                "port mappings are carried for Docker BRIDGE and USER networks only",
            ),
        ],
    );
    out
}

fn health_checks(a: &mut App<'_>, checks: Vec<Value>) -> Option<HealthCheckSpec> {
    let mut chosen = None;
    for (i, check) in checks.into_iter().enumerate() {
        let path = format!("healthChecks[{i}]");
        if chosen.is_some() {
            a.not_carried(
                path,
                "a service has one health check; the first usable one is carried",
            );
            continue;
        }
        let Value::Object(mut check) = check else {
            a.not_carried(path, "not an object");
            continue;
        };
        let protocol = a
            .string(&mut check, &path, "protocol")
            .unwrap_or_else(|| "HTTP".into());
        let (kind, scheme) = match protocol.as_str() {
            "MESOS_HTTP" => (HealthCheckKind::Http, None),
            "MESOS_HTTPS" => (HealthCheckKind::Http, Some("https")),
            "MESOS_TCP" => (HealthCheckKind::Tcp, None),
            "COMMAND" => (HealthCheckKind::Command, None),
            "HTTP" | "HTTPS" | "TCP" => {
                a.changed(
                    join(&path, "protocol"),
                    format!(
                        "{protocol}: Marathon ran this check itself, from the leader; here the \
                         task's executor runs it against 127.0.0.1 (as MESOS_{protocol})"
                    ),
                );
                match protocol.as_str() {
                    "HTTP" => (HealthCheckKind::Http, None),
                    "HTTPS" => (HealthCheckKind::Http, Some("https")),
                    _ => (HealthCheckKind::Tcp, None),
                }
            }
            other => {
                a.not_carried(path.clone(), format!("protocol {other} is not known"));
                a.rest(&path, check, &[]);
                continue;
            }
        };
        let network = kind != HealthCheckKind::Command;
        let port = a
            .number(&mut check, &path, "port")
            .filter(|p| *p != 0.0)
            .map(|p| p as u32);
        let port_index = a.number(&mut check, &path, "portIndex").map(|p| p as u32);
        let path_value = a.string(&mut check, &path, "path");
        let command = match a.object(&mut check, &path, "command") {
            Some(mut c) => {
                let value = a.string(&mut c, &join(&path, "command"), "value");
                a.rest(&join(&path, "command"), c, &[]);
                value.map(CommandSpec::Shell)
            }
            None => None,
        };
        let secs = |a: &mut App<'_>, check: &mut Map<String, Value>, key: &str, default: u64| {
            a.seconds(check, &path, key)
                .unwrap_or(Duration::from_secs(default))
        };
        let grace_period = secs(a, &mut check, "gracePeriodSeconds", defaults::CHECK_GRACE);
        let interval = secs(a, &mut check, "intervalSeconds", defaults::CHECK_INTERVAL);
        let timeout = secs(a, &mut check, "timeoutSeconds", defaults::CHECK_TIMEOUT);
        let delay = secs(a, &mut check, "delaySeconds", defaults::CHECK_DELAY);
        let failures = match a.number(&mut check, &path, "maxConsecutiveFailures") {
            None => defaults::CHECK_FAILURES,
            Some(0.0) => {
                a.changed(
                    join(&path, "maxConsecutiveFailures"),
                    format!(
                        "0 (never kill): the most a check here allows is {MAX_CONSECUTIVE_FAILURES}"
                    ),
                );
                MAX_CONSECUTIVE_FAILURES
            }
            Some(n) => n as u32,
        };
        if a.boolean(&mut check, &path, "ignoreHttp1xx") == Some(true) {
            a.not_carried(
                join(&path, "ignoreHttp1xx"),
                "a 1xx answer counts as a failure here",
            );
        }
        if let Some(ip) = a.string(&mut check, &path, "ipProtocol")
            && ip != "IPv4"
        {
            a.not_carried(
                join(&path, "ipProtocol"),
                format!("{ip}: checks go to 127.0.0.1"),
            );
        }
        a.rest(&path, check, &[]);
        chosen = Some(HealthCheckSpec {
            kind,
            port_index: (network && port.is_none()).then(|| port_index.unwrap_or(0)),
            port: if network { port } else { None },
            path: if kind == HealthCheckKind::Http {
                path_value
            } else {
                None
            },
            scheme: scheme.map(str::to_string),
            command: if network { None } else { command },
            grace_period,
            interval,
            timeout,
            delay,
            consecutive_failures: failures,
        });
    }
    chosen
}

fn constraints(a: &mut App<'_>, list: Vec<Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        let path = format!("constraints[{i}]");
        // `["hostname", "UNIQUE"]`, or the older `"hostname:UNIQUE"`.
        let parts: Vec<String> = match &item {
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect(),
            Value::String(text) => text.splitn(3, ':').map(str::to_string).collect(),
            _ => Vec::new(),
        };
        let field = parts
            .first()
            .map(|f| f.trim_start_matches('@').to_string())
            .unwrap_or_default();
        let op = parts.get(1).map(String::as_str).unwrap_or_default();
        let value = parts.get(2).map(String::as_str);
        let shown = item.to_string();
        if field.is_empty() {
            a.not_carried(path, format!("{shown}: not a constraint"));
            continue;
        }
        match (op, value) {
            ("UNIQUE", _) => out.push(format!("{field}:UNIQUE")),
            ("LIKE" | "UNLIKE", Some(regex)) => out.push(format!("{field}:{op}:{regex}")),
            ("CLUSTER" | "IS", Some(v)) if !v.is_empty() => {
                out.push(format!("{field}:LIKE:{}", regex::escape(v)));
                a.changed(path, format!("{shown}: as {field}:LIKE:{}", regex::escape(v)));
            }
            ("CLUSTER", _) => a.not_carried(
                path,
                format!("{shown}: CLUSTER without a value (all on the first task's value) is not supported by placement"),
            ),
            ("MAX_PER", Some("1")) => {
                out.push(format!("{field}:UNIQUE"));
                a.changed(path, format!("{shown}: as {field}:UNIQUE"));
            }
            ("GROUP_BY" | "MAX_PER", _) => a.not_carried(
                path,
                format!("{shown}: placement supports UNIQUE, LIKE and UNLIKE (and CLUSTER, IS, MAX_PER 1 through them)"),
            ),
            _ => a.not_carried(path, format!("{shown}: not a constraint placement supports")),
        }
    }
    out
}

#[cfg(test)]
mod tests;
