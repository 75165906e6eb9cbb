//! A service's `health_check`: how users write it, its field-level
//! validation, and the Mesos `HealthCheck` it becomes in each `TaskInfo`
//! (`TaskInfo.health_check`, run by the task's executor — the command
//! executor or `mesos-appliance-executor` alike; `docs/health-checks.md`).
//!
//! ```json
//! {"type": "http", "port_index": 0, "path": "/health", "scheme": "http",
//!  "delay": "15s", "grace_period": "10s", "interval": "10s", "timeout": "20s",
//!  "consecutive_failures": 3}
//! {"type": "tcp", "port": 8080}
//! {"type": "command", "command": "curl -fs localhost:$PORT0/ready"}
//! ```
//!
//! Defaults are Mesos' (`HealthCheck` in `include/mesos/v1/mesos.proto`):
//! delay 15 s, interval 10 s, timeout 20 s, grace period 10 s, 3
//! consecutive failures. HTTP and TCP checks go to `127.0.0.1` on the
//! task's port `port_index` (`PORT<i>`; with a Docker BRIDGE or USER
//! network the container port that port is mapped to) or the fixed `port`.
//! A command check gets the task's environment (`PORT0`, …) and runs from
//! the sandbox; exit 0 is healthy.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::command::CommandSpec;
use super::errors::FieldError;
use crate::mesos::v1::{self, health_check};

/// Most consecutive failures a check may allow before the kill.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 1000;
/// Shortest `interval` and `timeout`. Mesos refuses only negative values
/// (`validation::healthCheck` in `src/checks/health_checker.cpp`) and
/// defaults to 10 s and 20 s (`docs/health-checks.md`); a check every few
/// milliseconds loads the agent, and every flap is a status update to the
/// scheduler, so anything under a second is refused.
pub const MIN_PERIOD: Duration = Duration::from_secs(1);

/// The kind of check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthCheckKind {
    /// `GET scheme://127.0.0.1:port/path`; healthy on 200–399.
    Http,
    /// Healthy when a TCP connection to `127.0.0.1:port` succeeds.
    Tcp,
    /// Healthy when the command exits 0.
    Command,
}

/// A service's health check (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckSpec {
    /// `http`, `tcp` or `command`.
    #[serde(rename = "type")]
    pub kind: HealthCheckKind,
    /// HTTP and TCP: index into the service's ports (`PORT<i>`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::bounds::port_index"
    )]
    pub port_index: Option<u32>,
    /// HTTP and TCP: a fixed port instead of `port_index`, 1 to 65535.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::bounds::port"
    )]
    pub port: Option<u32>,
    /// HTTP: the request path, starting with `/` (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// HTTP: `http` (default) or `https` (certificates are not verified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// COMMAND: a shell line or an argv array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandSpec>,
    /// Failures before the first success are ignored this long after the
    /// task started (it includes `delay`).
    #[serde(default = "default_grace", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub grace_period: Duration,
    /// From the end of one check to the start of the next; at least
    /// [`MIN_PERIOD`].
    #[serde(default = "default_interval", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub interval: Duration,
    /// Longest check, which then counts as a failure; at least
    /// [`MIN_PERIOD`].
    #[serde(default = "default_timeout", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub timeout: Duration,
    /// Before the first check, from the task's start.
    #[serde(default = "default_delay", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub delay: Duration,
    /// Failures in a row (past the grace period) after which the executor
    /// kills the task; 1 to [`MAX_CONSECUTIVE_FAILURES`].
    #[serde(
        default = "default_failures",
        deserialize_with = "super::bounds::consecutive_failures"
    )]
    pub consecutive_failures: u32,
}

fn default_grace() -> Duration {
    Duration::from_secs(10)
}

fn default_interval() -> Duration {
    Duration::from_secs(10)
}

fn default_timeout() -> Duration {
    Duration::from_secs(20)
}

fn default_delay() -> Duration {
    Duration::from_secs(15)
}

fn default_failures() -> u32 {
    3
}

fn problem(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: format!("health_check.{field}"),
        message: message.into(),
    }
}

impl HealthCheckSpec {
    /// Checks every field against a service with `ports` ports; returns the
    /// problems found (fields named `health_check.<field>`).
    pub fn validate(&self, ports: u32) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let network = matches!(self.kind, HealthCheckKind::Http | HealthCheckKind::Tcp);
        if network {
            match (self.port_index, self.port) {
                (None, None) | (Some(_), Some(_)) => errors.push(problem(
                    "port_index",
                    "give either port_index (one of the service's ports) or port",
                )),
                (Some(i), None) if i >= ports => {
                    errors.push(problem("port_index", super::bounds::PORT_INDEX))
                }
                (None, Some(p)) if !super::bounds::PORT.admits(f64::from(p)) => {
                    errors.push(problem("port", super::bounds::PORT.message()))
                }
                _ => {}
            }
            if self.command.is_some() {
                errors.push(problem("command", "only for command checks"));
            }
        } else {
            for (field, set) in [
                ("port_index", self.port_index.is_some()),
                ("port", self.port.is_some()),
            ] {
                if set {
                    errors.push(problem(field, "only for http and tcp checks"));
                }
            }
            match &self.command {
                None => errors.push(problem("command", "a command check needs a command")),
                Some(CommandSpec::Shell(line)) if line.trim().is_empty() => {
                    errors.push(problem("command", "must not be empty"))
                }
                Some(CommandSpec::Argv(argv)) if argv.first().is_none_or(String::is_empty) => {
                    errors.push(problem("command", "argv must name a program"))
                }
                _ => {}
            }
        }
        let http = self.kind == HealthCheckKind::Http;
        if let Some(path) = &self.path {
            if !http {
                errors.push(problem("path", "only for http checks"));
            } else if !path.starts_with('/')
                || path.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                // Mesos refuses a path not starting with '/' (validation.cpp).
                errors.push(problem(
                    "path",
                    "must start with '/' and have no spaces or control characters",
                ));
            }
        }
        if let Some(scheme) = &self.scheme {
            if !http {
                errors.push(problem("scheme", "only for http checks"));
            } else if scheme != "http" && scheme != "https" {
                errors.push(problem("scheme", "must be http or https"));
            }
        }
        // Mesos reads a timeout of 0 as "no timeout"; every check here has
        // one.
        for (field, value) in [("interval", self.interval), ("timeout", self.timeout)] {
            if value < MIN_PERIOD {
                errors.push(problem(field, "must be at least 1s"));
            }
        }
        let failures = super::bounds::CONSECUTIVE_FAILURES;
        if !failures.admits(f64::from(self.consecutive_failures)) {
            errors.push(problem("consecutive_failures", failures.message()));
        }
        errors
    }

    /// The Mesos `HealthCheck`: every field set explicitly (no proto
    /// default is relied on). `port` is the port HTTP and TCP checks go to
    /// (resolved by the caller from `port_index` or `port`); `environment`
    /// is the task's, given to a command check.
    pub fn to_proto(&self, port: u32, environment: &v1::Environment) -> v1::HealthCheck {
        let mut check = v1::HealthCheck {
            delay_seconds: Some(self.delay.as_secs_f64()),
            interval_seconds: Some(self.interval.as_secs_f64()),
            timeout_seconds: Some(self.timeout.as_secs_f64()),
            consecutive_failures: Some(self.consecutive_failures),
            grace_period_seconds: Some(self.grace_period.as_secs_f64()),
            ..Default::default()
        };
        match self.kind {
            HealthCheckKind::Http => {
                check.r#type = Some(health_check::Type::Http as i32);
                check.http = Some(health_check::HttpCheckInfo {
                    port,
                    path: Some(self.path.clone().unwrap_or_else(|| "/".into())),
                    scheme: Some(self.scheme.clone().unwrap_or_else(|| "http".into())),
                    statuses: Vec::new(),
                    protocol: None,
                });
            }
            HealthCheckKind::Tcp => {
                check.r#type = Some(health_check::Type::Tcp as i32);
                check.tcp = Some(health_check::TcpCheckInfo {
                    port,
                    protocol: None,
                });
            }
            HealthCheckKind::Command => {
                check.r#type = Some(health_check::Type::Command as i32);
                let (value, shell, arguments) = match &self.command {
                    Some(CommandSpec::Shell(line)) => (line.clone(), true, Vec::new()),
                    Some(CommandSpec::Argv(argv)) => (
                        argv.first().cloned().unwrap_or_default(),
                        false,
                        argv.clone(),
                    ),
                    None => (String::new(), true, Vec::new()),
                };
                check.command = Some(v1::CommandInfo {
                    environment: Some(environment.clone()),
                    value: Some(value),
                    shell: Some(shell),
                    arguments,
                    ..Default::default()
                });
            }
        }
        check
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: serde_json::Value) -> HealthCheckSpec {
        serde_json::from_value(json).unwrap()
    }

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn defaults_are_mesos_and_every_field_is_sent() {
        let spec = check(serde_json::json!({"type": "http", "port_index": 0}));
        assert!(spec.validate(1).is_empty());
        let proto = spec.to_proto(31000, &v1::Environment::default());
        assert_eq!(proto.r#type(), health_check::Type::Http);
        let http = proto.http.unwrap();
        assert_eq!(
            (http.port, http.path.as_deref(), http.scheme.as_deref()),
            (31000, Some("/"), Some("http"))
        );
        assert_eq!(
            (
                proto.delay_seconds,
                proto.interval_seconds,
                proto.timeout_seconds,
                proto.grace_period_seconds,
                proto.consecutive_failures
            ),
            (Some(15.0), Some(10.0), Some(20.0), Some(10.0), Some(3))
        );
    }

    #[test]
    fn command_checks_get_the_task_environment() {
        let spec = check(serde_json::json!({"type": "command",
            "command": ["/bin/check", "--port", "8080"], "interval": "1500ms"}));
        assert!(spec.validate(0).is_empty());
        let env = v1::Environment {
            variables: vec![v1::environment::Variable {
                name: "PORT0".into(),
                value: Some("31000".into()),
                r#type: None,
            }],
        };
        let proto = spec.to_proto(0, &env);
        let command = proto.command.unwrap();
        assert_eq!(command.value.as_deref(), Some("/bin/check"));
        assert_eq!((command.shell, command.arguments.len()), (Some(false), 3));
        assert_eq!(command.environment, Some(env));
        assert_eq!(proto.interval_seconds, Some(1.5));
        let flood = check(serde_json::json!({"type": "command", "command": "true",
            "interval": "1ms", "timeout": "999ms"}));
        assert_eq!(
            fields(flood.validate(0)),
            ["health_check.interval", "health_check.timeout"]
        );
        assert!(proto.http.is_none() && proto.tcp.is_none());
    }

    #[test]
    fn field_errors_name_each_field() {
        let bad = check(serde_json::json!({"type": "http", "port_index": 2,
            "path": "health", "scheme": "ftp", "command": "x", "interval": "0s",
            "timeout": "0s", "consecutive_failures": 0}));
        assert_eq!(
            fields(bad.validate(2)),
            [
                "health_check.port_index",
                "health_check.command",
                "health_check.path",
                "health_check.scheme",
                "health_check.interval",
                "health_check.timeout",
                "health_check.consecutive_failures"
            ]
        );
        let both = check(serde_json::json!({"type": "tcp", "port_index": 0, "port": 80}));
        assert_eq!(fields(both.validate(1)), ["health_check.port_index"]);
        let neither = check(serde_json::json!({"type": "tcp"}));
        assert_eq!(fields(neither.validate(1)), ["health_check.port_index"]);
        let port = check(serde_json::json!({"type": "tcp", "port": 70000}));
        assert_eq!(fields(port.validate(0)), ["health_check.port"]);
        let command = check(serde_json::json!({"type": "command", "port": 80, "path": "/"}));
        assert_eq!(
            fields(command.validate(0)),
            [
                "health_check.port",
                "health_check.command",
                "health_check.path"
            ]
        );
    }

    #[test]
    fn durations_name_their_field_and_unknown_fields_are_refused() {
        for key in ["grace_period", "interval", "timeout", "delay"] {
            let mut json = serde_json::json!({"type": "tcp", "port": 80});
            json[key] = "soon".into();
            let err = crate::util::json::from_value::<HealthCheckSpec>(json).unwrap_err();
            assert_eq!(err.path, key);
            assert!(err.message.contains("expected a duration"), "{err}");
        }
        let err = serde_json::from_value::<HealthCheckSpec>(
            serde_json::json!({"type": "tcp", "port": 80, "max_failures": 3}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("max_failures"), "{err}");
    }
}
