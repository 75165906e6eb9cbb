//! Services: the desired workload. A service is a named command with
//! resources and an instance count; the scheduler keeps that many tasks of it
//! running. Specs come from `--services FILE` (a JSON array) when ZooKeeper
//! holds none, are stored under `services/<name>`, and change through the
//! core's commands. Invalid specs are refused with field-level errors.
//!
//! ```json
//! {"name": "web", "command": "python3 -m http.server $PORT0", "cpus": 0.1, "mem": 64,
//!  "instances": 3, "ports": 1, "env": {"GREETING": "hi"},
//!  "constraints": ["hostname:UNIQUE", "rack:LIKE:r[12]"],
//!  "restart_backoff": "1s", "restart_backoff_max": "1m", "kill_grace_period": "5s",
//!  "executor": "command",
//!  "health_check": {"type": "http", "port_index": 0, "path": "/"},
//!  "container": {"image": "python:3.12-alpine"},
//!  "unreachable": {"inactive_after": "20s", "expunge_after": "40s", "kill_on_return": "old"}}
//! ```
//!
//! `health_check` is [`super::health::HealthCheckSpec`], `container`
//! [`super::container::ContainerSpec`], `unreachable`
//! [`super::unreachable::UnreachablePolicy`]; all are optional and left out
//! of the stored JSON when absent.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bounds;
use super::command::{CommandSpec, UriSpec, check_uri};
use super::container::ContainerSpec;
use super::errors::FieldError;
use super::health::HealthCheckSpec;
use super::unreachable::UnreachablePolicy;
use super::upgrade::UpgradePolicy;

/// Longest service name: names become task-ID prefixes and znode names.
pub const MAX_NAME_LEN: usize = 63;
/// Most instances of one service.
pub const MAX_INSTANCES: u32 = 10_000;
/// Largest `cpus`, `mem` or `disk` (MB) one task may ask for: far above any
/// agent, low enough that an amount is never an absurd float. A task larger
/// than every agent is accepted and reported as waiting, with the largest
/// offer, on the services page.
pub const MAX_SCALAR: f64 = 1_000_000.0;

/// Which executor runs the service's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// The Mesos command executor (one per task).
    #[default]
    Command,
    /// `mesos-appliance-executor`, fetched from the appliance; obeys `kamikaze`.
    Appliance,
}

/// A placement constraint, written `field:OPERATOR[:value]` where `field` is
/// `hostname` or an agent attribute name (Marathon's notation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// At most one instance per distinct value of the field.
    Unique {
        /// `hostname` or an attribute name.
        field: String,
    },
    /// The field's value matches the regex entirely.
    Like {
        /// `hostname` or an attribute name.
        field: String,
        /// The regex as written; it is anchored at both ends when matched.
        regex: String,
    },
    /// The field's value does not match the regex entirely.
    Unlike {
        /// `hostname` or an attribute name.
        field: String,
        /// The regex as written; it is anchored at both ends when matched.
        regex: String,
    },
}

/// Why a constraint does not parse; each names the constraint as written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConstraintError {
    /// No field before the operator.
    #[error("{0:?}: missing field (hostname or an attribute name)")]
    MissingField(String),
    /// The regex of LIKE / UNLIKE does not compile.
    #[error("{text:?}: bad regex: {error}")]
    BadRegex {
        /// The constraint.
        text: String,
        /// The regex engine's complaint.
        error: regex::Error,
    },
    /// LIKE / UNLIKE without a regex.
    #[error("{text:?}: {op} needs a regex")]
    NeedsRegex {
        /// The constraint.
        text: String,
        /// The operator.
        op: String,
    },
    /// UNIQUE with a value.
    #[error("{0:?}: UNIQUE takes no value")]
    UniqueWithValue(String),
    /// Another operator.
    #[error("{0:?}: operator must be UNIQUE, LIKE or UNLIKE")]
    Operator(String),
}

impl Constraint {
    /// Parses `hostname:UNIQUE`, `rack:LIKE:r[12]`, `rack:UNLIKE:r3`.
    pub fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        let mut parts = text.splitn(3, ':');
        let field = parts.next().unwrap_or_default().trim();
        let op = parts.next().unwrap_or_default().trim();
        let value = parts.next().map(str::trim);
        if field.is_empty() {
            return Err(ConstraintError::MissingField(text.to_string()));
        }
        let field = field.to_string();
        match (op, value) {
            ("UNIQUE", None) => Ok(Constraint::Unique { field }),
            ("LIKE" | "UNLIKE", Some(regex)) if !regex.is_empty() => {
                regex::Regex::new(&format!("^(?:{regex})$")).map_err(|error| {
                    ConstraintError::BadRegex {
                        text: text.to_string(),
                        error,
                    }
                })?;
                let regex = regex.to_string();
                Ok(if op == "LIKE" {
                    Constraint::Like { field, regex }
                } else {
                    Constraint::Unlike { field, regex }
                })
            }
            ("LIKE" | "UNLIKE", _) => Err(ConstraintError::NeedsRegex {
                text: text.to_string(),
                op: op.to_string(),
            }),
            ("UNIQUE", Some(_)) => Err(ConstraintError::UniqueWithValue(text.to_string())),
            _ => Err(ConstraintError::Operator(text.to_string())),
        }
    }
}

/// One service as users write it and as stored in ZooKeeper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    /// `[a-z0-9-]`, 1–63 characters, starting and ending with a letter or
    /// digit ([`new_name_problem`]; a stored name may end with `-`).
    pub name: String,
    /// The command each task runs.
    pub command: CommandSpec,
    /// CPUs per task (Mesos `cpus`), 0.01 to 1000000 ([`bounds::CPUS`]).
    #[serde(deserialize_with = "bounds::cpus")]
    pub cpus: f64,
    /// Memory per task in MB (Mesos `mem`), 1 to 1000000 ([`bounds::MEM`]).
    #[serde(deserialize_with = "bounds::mem")]
    pub mem: f64,
    /// Disk per task in MB (Mesos `disk`), 0 to 1000000.
    #[serde(default, deserialize_with = "bounds::disk")]
    pub disk: f64,
    /// Ports per task (at most 100), taken from offered `ports` ranges;
    /// exported to the task as `PORT0`, `PORT1`, … and `PORTS`
    /// (comma-separated).
    #[serde(default, deserialize_with = "bounds::ports")]
    pub ports: u32,
    /// Desired number of running tasks, 0 to 10000 ([`bounds::INSTANCES`]).
    #[serde(deserialize_with = "bounds::instances")]
    pub instances: u32,
    /// Environment variables for the task.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files to fetch into the sandbox: URL strings or [`UriSpec`] objects.
    #[serde(default, deserialize_with = "super::command::uris_or_urls")]
    pub uris: Vec<UriSpec>,
    /// Placement constraints (see [`Constraint::parse`]).
    #[serde(default)]
    pub constraints: Vec<String>,
    /// First delay before restarting a failed task of this service; doubles
    /// per consecutive failure of the same instance up to
    /// `restart_backoff_max`. An instance's count resets once one of its
    /// tasks has stayed TASK_RUNNING (and healthy, with a health check) for
    /// `restart_backoff_max` (at least 10 seconds; see
    /// [`crate::scheduler::rules::restart::RestartBackoff`]).
    #[serde(default = "default_backoff", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub restart_backoff: Duration,
    /// Cap of the restart backoff.
    #[serde(default = "default_backoff_max", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub restart_backoff_max: Duration,
    /// Time between SIGTERM and SIGKILL when a task is killed (Mesos `KillPolicy`).
    #[serde(default = "default_grace", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub kill_grace_period: Duration,
    /// Which executor runs the tasks.
    #[serde(default)]
    pub executor: ExecutorKind,
    /// The tasks' health check, run by their executor (boxed: most
    /// services have none, and specs travel in commands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<Box<HealthCheckSpec>>,
    /// The image the tasks run in (boxed as `health_check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Box<ContainerSpec>>,
    /// How a rolling replacement waits for health (absent: the defaults of
    /// [`UpgradePolicy`]); not part of the fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradePolicy>,
    /// What happens when a task becomes unreachable (absent: the
    /// defaults of [`UnreachablePolicy`], replace at once); not part of
    /// the fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<UnreachablePolicy>,
    /// The restart generation: how many rolling restarts were asked for
    /// (`POST /api/v1/services/{name}/restart`, `docs/health-checks.md`). Not
    /// part of the spec users write or read (never in the spec's JSON):
    /// stored beside it in the service record
    /// ([`ServiceRecord`](crate::scheduler::records::ServiceRecord)), carried
    /// over when a spec replaces it, and part of the fingerprint when not 0,
    /// so a restart makes every task outdated and the rollout replaces them.
    #[serde(skip)]
    pub restart_generation: u64,
    /// Free-form key/value metadata for tools that read services (load
    /// balancers reading the Marathon-compatible `/v2/apps`, e.g.
    /// `HAPROXY_GROUP`; `docs/marathon.md`). Not sent to Mesos and not part
    /// of the fingerprint: changing labels replaces no task. At most
    /// [`MAX_LABELS`] entries, keys up to [`MAX_LABEL_KEY`] bytes, values up
    /// to [`MAX_LABEL_VALUE`] bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Most labels of one service.
pub const MAX_LABELS: usize = 64;
/// Longest label key, bytes.
pub const MAX_LABEL_KEY: usize = 128;
/// Longest label value, bytes.
pub const MAX_LABEL_VALUE: usize = 1024;
/// The label that carries port `i`'s Marathon service port
/// (`MARATHON_SERVICE_PORT_<i>`, e.g. `"10001"`): `mesos-appliance import
/// marathon` writes it, and the Marathon-compatible `/v2/apps` shows it as
/// `portDefinitions[i].port` or `container.portMappings[i].servicePort`,
/// the port marathon-lb binds its frontend to (`docs/marathon.md`).
pub const SERVICE_PORT_LABEL: &str = "MARATHON_SERVICE_PORT_";

fn default_backoff() -> Duration {
    Duration::from_secs(1)
}

fn default_backoff_max() -> Duration {
    Duration::from_secs(60)
}

fn default_grace() -> Duration {
    Duration::from_secs(5)
}

/// The name rule of [`ServiceSpec::validate`], which also checks the specs
/// read back from ZooKeeper: 1-63 of `[a-z0-9-]`, not starting with `-`.
/// Looser than [`new_name_problem`], so that a service stored before the
/// edge refused a trailing `-` still loads, runs, scales and deletes.
fn stored_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
}

/// Why `name` may not name a service that a change creates (the API's
/// `PUT`, the dashboard's editor, a Marathon import), under field `name`;
/// `None` when it may. The rule is a DNS label's (RFC 1123 section 2.1,
/// narrowing RFC 1035 section 2.3.1 to lower case): 1-63 of `[a-z0-9-]`,
/// starting and ending with a letter or digit, since a name becomes the
/// start of every task ID and a ZooKeeper node name, and is what a
/// DNS-based service discovery names the tasks by. A stored name is only
/// held to [`ServiceSpec::validate`]'s looser rule.
pub fn new_name_problem(name: &str) -> Option<FieldError> {
    (!stored_name_ok(name) || name.ends_with('-')).then(|| {
        problem(
            "name",
            format!(
                "must be 1-{MAX_NAME_LEN} of [a-z0-9-], starting and ending with a letter or digit"
            ),
        )
    })
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

impl ServiceSpec {
    /// Checks every field; returns all problems found (empty when valid).
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if !stored_name_ok(&self.name) {
            errors.push(problem(
                "name",
                format!("must be 1-{MAX_NAME_LEN} of [a-z0-9-], not starting with '-'"),
            ));
        }
        match &self.command {
            CommandSpec::Shell(line) if line.trim().is_empty() => {
                errors.push(problem("command", "must not be empty"))
            }
            CommandSpec::Argv(argv) if argv.is_empty() || argv[0].is_empty() => {
                errors.push(problem("command", "argv must name a program"))
            }
            _ => {}
        }
        errors.extend(bounds::CPUS.check("cpus", self.cpus));
        errors.extend(bounds::MEM.check("mem", self.mem));
        errors.extend(bounds::DISK.check("disk", self.disk));
        errors.extend(bounds::PORTS.check("ports", f64::from(self.ports)));
        errors.extend(bounds::INSTANCES.check("instances", f64::from(self.instances)));
        for key in self.env.keys() {
            let ok = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                errors.push(problem(format!("env.{key}"), "not a valid variable name"));
            }
        }
        for (i, uri) in self.uris.iter().enumerate() {
            if let Err(e) = check_uri(&uri.value) {
                errors.push(problem(format!("uris[{i}]"), e.to_string()));
            }
            // Fetched next to the executor binary (see `taskinfo`): a file of
            // the same name would replace it in the sandbox.
            let path = uri.value.split(['?', '#']).next().unwrap_or("");
            let basename = path.trim_end_matches('/').rsplit('/').next();
            if self.executor == ExecutorKind::Appliance
                && basename == Some(crate::executor::info::EXECUTOR_BINARY)
            {
                errors.push(problem(
                    format!("uris[{i}]"),
                    "its file name would replace mesos-appliance-executor in the sandbox",
                ));
            }
        }
        for (i, text) in self.constraints.iter().enumerate() {
            if let Err(e) = Constraint::parse(text) {
                errors.push(problem(format!("constraints[{i}]"), e.to_string()));
            }
        }
        if self.restart_backoff.is_zero() || self.restart_backoff > self.restart_backoff_max {
            errors.push(problem(
                "restart_backoff",
                "must be positive and not above restart_backoff_max",
            ));
        }
        if let Some(check) = &self.health_check {
            errors.extend(check.validate(self.ports));
        }
        if let Some(container) = &self.container {
            errors.extend(container.validate(self.ports, &self.env));
        }
        if let Some(upgrade) = &self.upgrade {
            errors.extend(upgrade.validate());
        }
        if let Some(unreachable) = &self.unreachable {
            errors.extend(unreachable.validate());
        }
        if self.labels.len() > MAX_LABELS {
            errors.push(problem("labels", format!("at most {MAX_LABELS} labels")));
        }
        for (key, value) in &self.labels {
            if key.is_empty() || key.len() > MAX_LABEL_KEY || key.chars().any(char::is_control) {
                errors.push(problem(
                    format!("labels.{key}"),
                    format!("keys are 1-{MAX_LABEL_KEY} bytes without control characters"),
                ));
            } else if value.len() > MAX_LABEL_VALUE {
                errors.push(problem(
                    format!("labels.{key}"),
                    format!("at most {MAX_LABEL_VALUE} bytes"),
                ));
            }
        }
        errors
    }

    /// The parsed constraints (invalid ones are skipped; call [`validate`](Self::validate) first).
    pub fn parsed_constraints(&self) -> Vec<Constraint> {
        self.constraints
            .iter()
            .filter_map(|c| Constraint::parse(c).ok())
            .collect()
    }

    /// The spec's `upgrade`, or the defaults.
    pub fn upgrade_policy(&self) -> UpgradePolicy {
        self.upgrade.clone().unwrap_or_default()
    }

    /// The spec's `unreachable`, or the defaults.
    pub fn unreachable_policy(&self) -> UnreachablePolicy {
        self.unreachable.clone().unwrap_or_default()
    }

    /// A short, stable fingerprint of everything that shapes a task (all but
    /// `instances`, the restart backoff, `upgrade` and `unreachable`; with
    /// the restart generation): tasks launched from an older
    /// fingerprint are replaced by a rolling upgrade.
    pub fn fingerprint(&self) -> String {
        let mut shape = self.clone();
        shape.instances = 0;
        shape.restart_backoff = Duration::ZERO;
        shape.restart_backoff_max = Duration::ZERO;
        shape.upgrade = None;
        shape.unreachable = None;
        shape.labels.clear();
        let mut text = serde_json::to_string(&shape).unwrap_or_default();
        if self.restart_generation > 0 {
            // Skipped by serde: mixed in only when set, so the fingerprint
            // of a service never restarted is what it always was.
            text.push_str(&format!("\u{0}restart={}", self.restart_generation));
        }
        fnv1a(&text)
    }

    /// The version of the whole spec: 16 hex digits, FNV-1a of its JSON
    /// and of its restart generation when not 0 (the JSON leaves that
    /// out, yet a rolling restart is a change). Any change to the spec
    /// changes it. A change made on what was read is conditioned on it
    /// (`Request::ReplaceService`, HTTP `If-Match` against the `ETag` of
    /// `GET /api/v1/services/{name}`), so that it cannot undo a change it
    /// did not see.
    pub fn version(&self) -> String {
        let mut text = serde_json::to_string(self).unwrap_or_default();
        if self.restart_generation != 0 {
            text.push_str(&format!("\nrestart_generation={}", self.restart_generation));
        }
        fnv1a(&text)
    }
}

/// Why a `--services` file is refused.
#[derive(Debug, thiserror::Error)]
pub enum ServicesFileError {
    /// Not a JSON array of service specs, a key given twice, or a field
    /// that does not parse; the error names its path (`[2].cpus`).
    #[error("not a JSON array of services: {0}")]
    NotJson(#[from] crate::util::json::JsonError),
    /// Specs that do not validate, or names used twice.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<ServiceProblem>),
}

/// One problem of a `--services` file, naming the service by index.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServiceProblem {
    /// A field does not validate.
    #[error("services[{index}] ({name}): {error}")]
    Field {
        /// Position in the file.
        index: usize,
        /// The service.
        name: String,
        /// The field and why.
        error: FieldError,
    },
    /// The name is used by an earlier service.
    #[error("services[{index}]: duplicate name {name:?}")]
    Duplicate {
        /// Position in the file.
        index: usize,
        /// The name.
        name: String,
    },
}

/// Parses a `--services` file: a JSON array of specs, each validated, names
/// unique. Errors name the service (by index and name) and the field.
pub fn parse_services_file(text: &str) -> Result<Vec<ServiceSpec>, ServicesFileError> {
    let specs: Vec<ServiceSpec> = crate::util::json::parse(text.as_bytes())?;
    let mut problems = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        for error in spec.validate() {
            problems.push(ServiceProblem::Field {
                index,
                name: spec.name.clone(),
                error,
            });
        }
        if specs[..index].iter().any(|s| s.name == spec.name) {
            problems.push(ServiceProblem::Duplicate {
                index,
                name: spec.name.clone(),
            });
        }
    }
    if problems.is_empty() {
        Ok(specs)
    } else {
        Err(ServicesFileError::Invalid(problems))
    }
}

/// FNV-1a of `text` as 16 hex digits: stable across builds and platforms,
/// unlike std's hasher.
fn fnv1a(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> ServiceSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn minimal_spec_gets_defaults() {
        let s = spec(
            serde_json::json!({"name": "web", "command": "sleep 1", "cpus": 0.1, "mem": 32, "instances": 2}),
        );
        assert!(s.validate().is_empty());
        assert_eq!(s.executor, ExecutorKind::Command);
        assert_eq!(s.restart_backoff, Duration::from_secs(1));
        assert_eq!(s.kill_grace_period, Duration::from_secs(5));
    }

    #[test]
    fn a_new_name_ends_with_a_letter_or_digit_and_a_stored_one_may_not() {
        for good in ["a", "a-b", "web-2", "0", &"x".repeat(MAX_NAME_LEN)] {
            assert_eq!(new_name_problem(good), None, "{good}");
        }
        for bad in [
            "a-",
            "-a",
            "",
            "A",
            "a_b",
            "a.b",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            let problem = new_name_problem(bad).unwrap_or_else(|| panic!("{bad:?}"));
            assert_eq!(problem.field, "name");
        }
        // Stored before the edge refused it: it still validates (loads).
        let stored = spec(serde_json::json!({"name": "a-", "command": "x", "cpus": 1,
            "mem": 1, "instances": 1}));
        assert!(stored.validate().is_empty());
    }

    #[test]
    fn field_errors_name_each_field() {
        let s = spec(
            serde_json::json!({"name": "Bad Name", "command": "", "cpus": 0, "mem": 0,
            "instances": 1, "constraints": ["hostname:UNIQUE", "rack:LIKE:(", "x:NEAR"], "env": {"1X": "y"}}),
        );
        let fields: Vec<String> = s.validate().into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "name",
                "command",
                "cpus",
                "mem",
                "env.1X",
                "constraints[1]",
                "constraints[2]"
            ]
        );
    }

    #[test]
    fn durations_are_bounded_and_name_their_field() {
        for field in [
            "restart_backoff",
            "restart_backoff_max",
            "kill_grace_period",
        ] {
            for (value, says) in [
                ("500000000000years", "at most 365 days"),
                ("-5s", "negative durations are not allowed"),
                ("soon", "expected a duration"),
            ] {
                let mut json = serde_json::json!({"name": "a", "command": "x", "cpus": 1,
                    "mem": 1, "instances": 1});
                json[field] = value.into();
                let err = crate::util::json::from_value::<ServiceSpec>(json).unwrap_err();
                assert_eq!(err.path, field);
                let err = err.to_string();
                assert!(err.contains(says), "{err}");
            }
        }
        let s = spec(
            serde_json::json!({"name": "a", "command": "x", "cpus": 1, "mem": 1,
            "instances": 1, "restart_backoff": "2s", "restart_backoff_max": "365days",
            "kill_grace_period": "1m 30s"}),
        );
        assert_eq!(s.restart_backoff_max, crate::util::MAX_DURATION);
        assert_eq!(s.kill_grace_period, Duration::from_secs(90));
        let back: ServiceSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn labels_are_bounded_and_not_part_of_the_shape() {
        let a = spec(
            serde_json::json!({"name": "a", "command": "x", "cpus": 1, "mem": 1,
            "instances": 1, "labels": {"HAPROXY_GROUP": "external"}}),
        );
        assert!(a.validate().is_empty());
        let mut b = a.clone();
        b.labels.clear();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert!(serde_json::to_value(&b).unwrap().get("labels").is_none());
        b.labels.insert(String::new(), "x".into());
        b.labels
            .insert("big".into(), "v".repeat(MAX_LABEL_VALUE + 1));
        let fields: Vec<String> = b.validate().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["labels.", "labels.big"]);
        for i in 0..=MAX_LABELS {
            b.labels.insert(format!("k{i}"), String::new());
        }
        assert!(b.validate().iter().any(|e| e.field == "labels"));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err =
            serde_json::from_value::<ServiceSpec>(serde_json::json!({"name": "a", "command": "x",
            "cpus": 1, "mem": 1, "instances": 1, "instnaces": 2}))
            .unwrap_err();
        assert!(err.to_string().contains("instnaces"));
    }

    #[test]
    fn constraints_parse() {
        assert_eq!(
            Constraint::parse("hostname:UNIQUE").unwrap(),
            Constraint::Unique {
                field: "hostname".into()
            }
        );
        assert!(matches!(
            Constraint::parse("rack:LIKE:r[12]").unwrap(),
            Constraint::Like { .. }
        ));
        assert!(Constraint::parse("rack:LIKE").is_err());
        assert!(Constraint::parse(":UNIQUE").is_err());
    }

    #[test]
    fn fingerprint_ignores_instances_only() {
        let a = spec(
            serde_json::json!({"name": "a", "command": ["sleep", "1"], "cpus": 0.1, "mem": 32, "instances": 1}),
        );
        let mut b = a.clone();
        b.instances = 9;
        assert_eq!(a.fingerprint(), b.fingerprint());
        b.mem = 64.0;
        assert_ne!(a.fingerprint(), b.fingerprint());
        // Specs without a health check or container keep the fingerprint
        // they had before these fields existed: no upgrade of every task.
        let stored = serde_json::to_value(&a).unwrap();
        assert!(stored.get("health_check").is_none() && stored.get("container").is_none());
        let mut c = a.clone();
        c.health_check =
            Some(serde_json::from_value(serde_json::json!({"type": "tcp", "port": 80})).unwrap());
        assert_ne!(a.fingerprint(), c.fingerprint());
    }

    #[test]
    fn health_check_and_container_are_validated_with_the_spec() {
        let s = spec(
            serde_json::json!({"name": "a", "command": "x", "cpus": 1, "mem": 1,
            "instances": 1, "ports": 1, "env": {"A": "1"},
            "health_check": {"type": "http", "port_index": 1},
            "container": {"image": "Bad", "environment": {"A": "2"}}}),
        );
        let fields: Vec<String> = s.validate().into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "health_check.port_index",
                "container.image",
                "container.environment.A"
            ]
        );
        let mut json = serde_json::json!({"name": "a", "command": "x", "cpus": 1, "mem": 1,
            "instances": 1, "health_check": {"type": "tcp", "port": 80, "timeout": "-1s"}});
        let err = crate::util::json::from_value::<ServiceSpec>(json.clone()).unwrap_err();
        assert_eq!(err.path, "health_check.timeout", "{err}");
        json["health_check"]["timeout"] = "1s".into();
        let back: ServiceSpec = serde_json::from_value(json).unwrap();
        let again: ServiceSpec =
            serde_json::from_str(&serde_json::to_string(&back).unwrap()).unwrap();
        assert_eq!(back, again);
    }

    #[test]
    fn services_file_checks_names_and_fields() {
        let ok = r#"[{"name":"a","command":"x","cpus":0.1,"mem":32,"instances":1}]"#;
        assert_eq!(parse_services_file(ok).unwrap().len(), 1);
        let dup = r#"[{"name":"a","command":"x","cpus":0.1,"mem":32,"instances":1},
                      {"name":"a","command":"y","cpus":0.1,"mem":32,"instances":1}]"#;
        let error = parse_services_file(dup).unwrap_err();
        assert!(
            matches!(&error, ServicesFileError::Invalid(p) if matches!(p[..], [ServiceProblem::Duplicate { index: 1, .. }])),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("services[1]: duplicate name \"a\"")
        );
        assert!(parse_services_file("{}").is_err());
        // A key given twice, and a bad field, are named by their path.
        let twice = r#"[{"name":"a","command":"x","cpus":0.1,"mem":32,"instances":1,
                        "env":{"A":"1","A":"2"}}]"#;
        let error = parse_services_file(twice).unwrap_err().to_string();
        assert!(error.contains("[0].env.A: given more than once"), "{error}");
        let slow = r#"[{"name":"a","command":"x","cpus":0.1,"mem":32,"instances":1,
                       "health_check":{"type":"tcp","port":1,"interval":"soon"}}]"#;
        let error = parse_services_file(slow).unwrap_err().to_string();
        assert!(error.contains("[0].health_check.interval: "), "{error}");
    }
}
