//! The executor's configuration, read from the environment the Mesos agent
//! sets for it (`src/slave/slave.cpp` executorEnvironment,
//! `docs/executor-http-api.md` "Executor Environment Variables",
//! `docs/mesos-protocol.md#executor-environment`), and stout's duration strings (`5secs`, `15mins`, `2.5secs`).

use std::path::PathBuf;
use std::time::Duration;

use crate::mesos::media::Encoding;

/// Agent default of `--executor_shutdown_grace_period` (`src/slave/constants.hpp`).
pub const DEFAULT_SHUTDOWN_GRACE_PERIOD: Duration = Duration::from_secs(5);
/// Agent default of `--recovery_timeout`.
pub const DEFAULT_RECOVERY_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Agent default of `--executor_reregistration_timeout`, passed as
/// `MESOS_SUBSCRIPTION_BACKOFF_MAX`.
pub const DEFAULT_SUBSCRIPTION_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Why the environment is not usable; the text names the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A variable the agent always sets is missing (the C++ executor library
    /// exits with "Expecting 'X' to be set in the environment").
    #[error("Expecting '{0}' to be set in the environment")]
    Missing(&'static str),
    /// A variable is set but cannot be parsed.
    #[error("Failed to parse {name} '{value}': {reason}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Everything the executor needs to know at start.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorConfig {
    /// `MESOS_FRAMEWORK_ID`.
    pub framework_id: String,
    /// `MESOS_EXECUTOR_ID`.
    pub executor_id: String,
    /// `MESOS_AGENT_ENDPOINT`: the agent's `ip:port`.
    pub agent_endpoint: String,
    /// `MESOS_SLAVE_ID`, if set (the SUBSCRIBED event carries it too).
    pub agent_id: Option<String>,
    /// The sandbox, tasks' working directory: `MESOS_SANDBOX`, else
    /// `MESOS_DIRECTORY`, else the current directory.
    pub sandbox: PathBuf,
    /// `MESOS_CHECKPOINT` = `1`: the framework checkpoints, so the executor
    /// survives an agent restart by re-subscribing.
    pub checkpoint: bool,
    /// `MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD`: how long the agent waits for
    /// this executor to exit after SHUTDOWN (default 5 s).
    pub shutdown_grace_period: Duration,
    /// `MESOS_RECOVERY_TIMEOUT` (checkpointing only): how long to keep
    /// re-subscribing after losing the agent before giving up.
    pub recovery_timeout: Duration,
    /// `MESOS_SUBSCRIPTION_BACKOFF_MAX` (checkpointing only): upper bound of
    /// each interval between two SUBSCRIBE attempts.
    pub subscription_backoff_max: Duration,
    /// `MESOS_EXECUTOR_AUTHENTICATION_TOKEN`, sent as `Authorization: Bearer`.
    pub auth_token: Option<String>,
    /// Wire encoding towards the agent: protobuf, unless
    /// `MESOS_APPLIANCE_EXECUTOR_ENCODING=json` (ours, not Mesos').
    pub encoding: Encoding,
}

impl ExecutorConfig {
    /// Reads the process environment.
    ///
    /// # Errors
    /// As [`ExecutorConfig::from_lookup`].
    pub fn from_env() -> Result<Self, EnvError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Builds the configuration from `lookup(name)`. Like the C++ executor
    /// library (`src/executor/executor.cpp`), a checkpointing executor needs
    /// `MESOS_RECOVERY_TIMEOUT` and `MESOS_SUBSCRIPTION_BACKOFF_MAX`.
    ///
    /// # Errors
    /// A required variable is missing, or a value does not parse.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let required = |name: &'static str| {
            lookup(name)
                .filter(|v| !v.is_empty())
                .ok_or(EnvError::Missing(name))
        };
        let duration = |name: &'static str| -> Result<Option<Duration>, EnvError> {
            lookup(name)
                .map(|value| {
                    parse_duration(&value).map_err(|reason| EnvError::Invalid {
                        name,
                        value: value.clone(),
                        reason,
                    })
                })
                .transpose()
        };
        let checkpoint = match lookup("MESOS_CHECKPOINT").as_deref() {
            None | Some("0") | Some("") => false,
            Some("1") => true,
            Some(other) => {
                return Err(EnvError::Invalid {
                    name: "MESOS_CHECKPOINT",
                    value: other.to_string(),
                    reason: "expected 1 or 0".into(),
                });
            }
        };
        let (recovery_timeout, subscription_backoff_max) = if checkpoint {
            (
                duration("MESOS_RECOVERY_TIMEOUT")?
                    .ok_or(EnvError::Missing("MESOS_RECOVERY_TIMEOUT"))?,
                duration("MESOS_SUBSCRIPTION_BACKOFF_MAX")?
                    .ok_or(EnvError::Missing("MESOS_SUBSCRIPTION_BACKOFF_MAX"))?,
            )
        } else {
            (DEFAULT_RECOVERY_TIMEOUT, DEFAULT_SUBSCRIPTION_BACKOFF_MAX)
        };
        let encoding = match lookup("MESOS_APPLIANCE_EXECUTOR_ENCODING").as_deref() {
            None | Some("") | Some("protobuf") => Encoding::Protobuf,
            Some("json") => Encoding::Json,
            Some(other) => {
                return Err(EnvError::Invalid {
                    name: "MESOS_APPLIANCE_EXECUTOR_ENCODING",
                    value: other.to_string(),
                    reason: "expected protobuf or json".into(),
                });
            }
        };
        let sandbox = lookup("MESOS_SANDBOX")
            .or_else(|| lookup("MESOS_DIRECTORY"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(ExecutorConfig {
            framework_id: required("MESOS_FRAMEWORK_ID")?,
            executor_id: required("MESOS_EXECUTOR_ID")?,
            agent_endpoint: required("MESOS_AGENT_ENDPOINT")?,
            agent_id: lookup("MESOS_SLAVE_ID").filter(|v| !v.is_empty()),
            sandbox,
            checkpoint,
            shutdown_grace_period: duration("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD")?
                .unwrap_or(DEFAULT_SHUTDOWN_GRACE_PERIOD),
            recovery_timeout,
            subscription_backoff_max,
            auth_token: lookup("MESOS_EXECUTOR_AUTHENTICATION_TOKEN").filter(|v| !v.is_empty()),
            encoding,
        })
    }
}

/// stout's duration units and their length in nanoseconds
/// (`3rdparty/stout/include/stout/duration.hpp`).
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("secs", 1_000_000_000),
    ("mins", 60 * 1_000_000_000),
    ("hrs", 3_600 * 1_000_000_000),
    ("days", 86_400 * 1_000_000_000),
    ("weeks", 604_800 * 1_000_000_000),
];

/// Parses a stout duration: a non-negative decimal number (fractions allowed)
/// directly followed by one of `ns us ms secs mins hrs days weeks`, e.g.
/// `5secs`, `15mins`, `2.5secs`, `250ms`.
///
/// # Errors
/// A text saying what is wrong (no number, unknown unit, too large).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("missing unit in {text:?}"))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid number in {text:?}"))?;
    let nanos_per_unit = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, n)| *n)
        .ok_or_else(|| format!("unknown unit {unit:?} in {text:?}"))?;
    let nanos = value * nanos_per_unit as f64;
    // stout keeps an int64 of nanoseconds.
    if !nanos.is_finite() || nanos > i64::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

/// Writes a duration as stout's `operator<<` does: in the largest unit not
/// above it, e.g. `5secs`, `15mins`, `2.5secs`, `250ms`, `0ns`. The agent
/// sets the executor's duration variables this way; the testbed does too.
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    let (unit, per) = UNITS
        .iter()
        .rev()
        .find(|(_, per)| nanos >= *per)
        .copied()
        .unwrap_or(UNITS[0]);
    let value = nanos as f64 / per as f64;
    format!("{value}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn stout_durations_parse() {
        assert_eq!(parse_duration("5secs"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("15mins"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2.5secs"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1hrs"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2days"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("1weeks"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration(" 3secs "), Ok(Duration::from_secs(3)));
    }

    #[test]
    fn bad_durations_are_refused() {
        for bad in [
            "",
            "5",
            "secs",
            "5 secs",
            "5s",
            "-1secs",
            "1.2.3secs",
            "1e400weeks",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn durations_format_like_stout() {
        assert_eq!(format_duration(Duration::from_secs(5)), "5secs");
        assert_eq!(format_duration(Duration::from_secs(900)), "15mins");
        assert_eq!(format_duration(Duration::from_millis(2500)), "2.5secs");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::ZERO), "0ns");
        for d in [1, 999, 1_000, 1_500_000, 60_000_000_000, 5_400_000_000_000] {
            let d = Duration::from_nanos(d);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }

    fn config(vars: &[(&str, &str)]) -> Result<ExecutorConfig, EnvError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ExecutorConfig::from_lookup(|name| map.get(name).cloned())
    }

    const BASE: [(&str, &str); 3] = [
        ("MESOS_FRAMEWORK_ID", "fw-1"),
        ("MESOS_EXECUTOR_ID", "exec-a"),
        ("MESOS_AGENT_ENDPOINT", "127.0.0.1:5051"),
    ];

    #[test]
    fn the_agents_environment_of_capture_a_parses() {
        let mut vars = BASE.to_vec();
        vars.extend([
            ("MESOS_CHECKPOINT", "1"),
            ("MESOS_DIRECTORY", "/var/lib/mesos/run"),
            ("MESOS_SANDBOX", "/mnt/sandbox"),
            ("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "5secs"),
            ("MESOS_RECOVERY_TIMEOUT", "15mins"),
            ("MESOS_SUBSCRIPTION_BACKOFF_MAX", "2secs"),
            ("MESOS_SLAVE_ID", "m-S0"),
            ("MESOS_HTTP_COMMAND_EXECUTOR", "0"),
        ]);
        let c = config(&vars).unwrap();
        assert_eq!(c.framework_id, "fw-1");
        assert_eq!(c.executor_id, "exec-a");
        assert_eq!(c.agent_endpoint, "127.0.0.1:5051");
        assert_eq!(c.agent_id.as_deref(), Some("m-S0"));
        assert_eq!(c.sandbox, PathBuf::from("/mnt/sandbox"));
        assert!(c.checkpoint);
        assert_eq!(c.shutdown_grace_period, Duration::from_secs(5));
        assert_eq!(c.recovery_timeout, Duration::from_secs(900));
        assert_eq!(c.subscription_backoff_max, Duration::from_secs(2));
        assert_eq!(c.encoding, Encoding::Protobuf);
        assert_eq!(c.auth_token, None);
    }

    #[test]
    fn without_checkpointing_the_recovery_variables_are_optional() {
        let mut vars = BASE.to_vec();
        vars.extend([("MESOS_CHECKPOINT", "0"), ("MESOS_DIRECTORY", "/d")]);
        let c = config(&vars).unwrap();
        assert!(!c.checkpoint);
        assert_eq!(c.sandbox, PathBuf::from("/d"));
        assert_eq!(c.shutdown_grace_period, DEFAULT_SHUTDOWN_GRACE_PERIOD);
    }

    #[test]
    fn missing_and_invalid_variables_are_named() {
        assert_eq!(
            config(&BASE[..2]),
            Err(EnvError::Missing("MESOS_AGENT_ENDPOINT"))
        );
        let mut vars = BASE.to_vec();
        vars.push(("MESOS_CHECKPOINT", "true"));
        assert!(matches!(
            config(&vars),
            Err(EnvError::Invalid {
                name: "MESOS_CHECKPOINT",
                ..
            })
        ));
        let mut vars = BASE.to_vec();
        vars.push(("MESOS_CHECKPOINT", "1"));
        assert_eq!(
            config(&vars),
            Err(EnvError::Missing("MESOS_RECOVERY_TIMEOUT"))
        );
        let mut vars = BASE.to_vec();
        vars.push(("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "5s"));
        let err = config(&vars).unwrap_err().to_string();
        assert!(
            err.contains("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD '5s'"),
            "{err}"
        );
    }

    #[test]
    fn encoding_can_be_json() {
        let mut vars = BASE.to_vec();
        vars.push(("MESOS_APPLIANCE_EXECUTOR_ENCODING", "json"));
        assert_eq!(config(&vars).unwrap().encoding, Encoding::Json);
    }
}
