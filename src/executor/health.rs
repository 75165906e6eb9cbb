//! Task health checks as Mesos' built-in executors run them
//! (`docs/health-checks.md`, `src/checks/health_checker.cpp`,
//! `src/checks/checker_process.cpp`): what a `HealthCheck` asks for
//! ([`HealthPolicy`]) and how results are interpreted ([`HealthState`]).
//! Running the probes is [`super::probes`]; reporting and killing is the
//! executor's main loop. The testbed's simulated executors interpret their
//! imitated results with the same [`HealthState`].
//!
//! The rules, from `health_checker.cpp`:
//! - the first check runs `delay_seconds` after the task started, each next
//!   one `interval_seconds` after the previous one finished; a check that
//!   takes longer than `timeout_seconds` (0: no limit) fails;
//! - until the first success, failures within `grace_period_seconds` of the
//!   start are ignored (the grace period includes the delay);
//! - an update goes out on the first success, on the first success after
//!   failures, and on every counted failure — `TASK_RUNNING` with `healthy`
//!   and `REASON_TASK_HEALTH_CHECK_STATUS_UPDATED`;
//! - after `consecutive_failures` counted failures in a row the executor
//!   kills the task (with its kill policy); the terminal update carries
//!   `healthy = false` (`src/launcher/executor.cpp` reaped).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::mesos::v1::{self, health_check};

/// The shortest interval between two checks the executor keeps: Mesos
/// allows 0 (its docs advise against it), which would spin.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// What one check does.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// `GET url`; healthy on a final status 200–399 (redirects followed,
    /// certificates not verified — curl's `-L -k` in `checker_process.cpp`).
    Http {
        /// `scheme://127.0.0.1:port/path` (`[::1]` for IPv6).
        url: String,
    },
    /// Healthy when a TCP connection to `addr` succeeds.
    Tcp {
        /// `127.0.0.1:port` (`[::1]:port` for IPv6).
        addr: SocketAddr,
    },
    /// Healthy when the command exits 0 (`user` and `uris` are ignored, as
    /// by Mesos).
    Command(v1::CommandInfo),
}

/// A task's `HealthCheck`, read with Mesos' defaults for absent fields.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthPolicy {
    /// The check.
    pub probe: Probe,
    /// Before the first check (default 15 s).
    pub delay: Duration,
    /// Between the end of one check and the start of the next (default
    /// 10 s; at least [`MIN_INTERVAL`]).
    pub interval: Duration,
    /// Longest check; `None` when `timeout_seconds` is 0 (default 20 s).
    pub timeout: Option<Duration>,
    /// Failures before the first success are ignored this long after the
    /// start (default 10 s).
    pub grace_period: Duration,
    /// Counted failures in a row that kill the task (default 3).
    pub consecutive_failures: u32,
}

/// Checks a `HealthCheck` as the master does before accepting a task
/// (`src/common/validation.cpp` validateHealthCheck); the error is Mesos'
/// wording, which the master prefixes with `Task uses invalid health check: `.
///
/// # Errors
/// The first problem found.
pub fn validate(check: &v1::HealthCheck) -> Result<(), String> {
    use health_check::Type;
    let Some(kind) = check.r#type else {
        return Err("HealthCheck must specify 'type'".into());
    };
    match Type::try_from(kind).unwrap_or(Type::Unknown) {
        Type::Command => {
            let Some(command) = &check.command else {
                return Err("Expecting 'command' to be set for COMMAND health check".into());
            };
            if command.value.is_none() {
                let what = if command.shell.unwrap_or(true) {
                    "'shell command'"
                } else {
                    "'executable path'"
                };
                return Err(format!("Command health check must contain {what}"));
            }
        }
        Type::Http => {
            let Some(http) = &check.http else {
                return Err("Expecting 'http' to be set for HTTP health check".into());
            };
            if let Some(scheme) = &http.scheme
                && scheme != "http"
                && scheme != "https"
            {
                return Err(format!("Unsupported HTTP health check scheme: '{scheme}'"));
            }
            if let Some(path) = &http.path
                && !path.starts_with('/')
            {
                return Err(format!(
                    "The path '{path}' of HTTP health check must start with '/'"
                ));
            }
        }
        Type::Tcp => {
            if check.tcp.is_none() {
                return Err("Expecting 'tcp' to be set for TCP health check".into());
            }
        }
        Type::Unknown => {
            return Err(format!(
                "'{}' is not a valid health check type",
                Type::try_from(kind).map_or("UNKNOWN", |t| t.as_str_name())
            ));
        }
    }
    for (name, value) in [
        ("delay_seconds", check.delay_seconds),
        ("grace_period_seconds", check.grace_period_seconds),
        ("interval_seconds", check.interval_seconds),
        ("timeout_seconds", check.timeout_seconds),
    ] {
        if value.is_some_and(|v| v < 0.0) {
            return Err(format!("Expecting '{name}' to be non-negative"));
        }
    }
    Ok(())
}

/// Seconds as a duration; NaN, negative and huge values are clamped to
/// `[0, MAX_DURATION]`.
fn seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value.max(0.0))
        .unwrap_or(crate::util::MAX_DURATION)
        .min(crate::util::MAX_DURATION)
}

fn loopback(protocol: Option<i32>) -> IpAddr {
    if protocol == Some(v1::network_info::Protocol::IPv6 as i32) {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

impl HealthPolicy {
    /// Reads `check` (validated with [`validate`]) with Mesos' defaults.
    ///
    /// # Errors
    /// [`validate`]'s, or a port above 65535.
    pub fn from_proto(check: &v1::HealthCheck) -> Result<HealthPolicy, String> {
        validate(check)?;
        let port = |port: u32| {
            u16::try_from(port).map_err(|_| format!("Health check port {port} is not a TCP port"))
        };
        let probe = match check.r#type() {
            health_check::Type::Http => {
                let http = check.http.as_ref().ok_or("no 'http'")?;
                let addr = SocketAddr::new(loopback(http.protocol), port(http.port)?);
                let scheme = http.scheme.as_deref().unwrap_or("http");
                Probe::Http {
                    // No path is "/" (Mesos: an empty path, so the URL's root).
                    url: format!("{scheme}://{addr}{}", http.path.as_deref().unwrap_or("/")),
                }
            }
            health_check::Type::Tcp => {
                let tcp = check.tcp.as_ref().ok_or("no 'tcp'")?;
                Probe::Tcp {
                    addr: SocketAddr::new(loopback(tcp.protocol), port(tcp.port)?),
                }
            }
            _ => Probe::Command(check.command.clone().ok_or("no 'command'")?),
        };
        let timeout = seconds(check.timeout_seconds());
        Ok(HealthPolicy {
            probe,
            delay: seconds(check.delay_seconds()),
            interval: seconds(check.interval_seconds()).max(MIN_INTERVAL),
            timeout: (!timeout.is_zero()).then_some(timeout),
            grace_period: seconds(check.grace_period_seconds()),
            consecutive_failures: check.consecutive_failures(),
        })
    }
}

/// What the executor reports after a check result, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthReport {
    /// The value of `TaskStatus.healthy` to send.
    pub healthy: bool,
    /// Counted failures in a row (0 when healthy).
    pub consecutive_failures: u32,
    /// Kill the task now.
    pub kill: bool,
}

/// The interpretation of one task's check results (`HealthChecker`'s
/// `success` and `failure` in `health_checker.cpp`).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthState {
    started: Instant,
    grace_period: Duration,
    limit: u32,
    /// No success yet.
    initializing: bool,
    failures: u32,
}

impl HealthState {
    /// Checking starts at `started` (the task's launch).
    pub fn new(policy: &HealthPolicy, started: Instant) -> HealthState {
        HealthState {
            started,
            grace_period: policy.grace_period,
            limit: policy.consecutive_failures,
            initializing: true,
            failures: 0,
        }
    }

    /// A check passed: a healthy report on the first success and on the
    /// first one after failures, `None` otherwise.
    pub fn success(&mut self) -> Option<HealthReport> {
        let report = (self.initializing || self.failures > 0).then_some(HealthReport {
            healthy: true,
            consecutive_failures: 0,
            kill: false,
        });
        self.initializing = false;
        self.failures = 0;
        report
    }

    /// A check failed at `now`: ignored (`None`) within the grace period
    /// before the first success; otherwise an unhealthy report, which says
    /// to kill once `consecutive_failures` are reached.
    pub fn failure(&mut self, now: Instant) -> Option<HealthReport> {
        if self.initializing
            && !self.grace_period.is_zero()
            && now.saturating_duration_since(self.started) <= self.grace_period
        {
            return None;
        }
        self.failures = self.failures.saturating_add(1);
        Some(HealthReport {
            healthy: false,
            consecutive_failures: self.failures,
            kill: self.failures >= self.limit,
        })
    }

    /// A result: `Ok` passed, `Err` failed.
    pub fn record(&mut self, outcome: &Result<(), String>, now: Instant) -> Option<HealthReport> {
        match outcome {
            Ok(()) => self.success(),
            Err(_) => self.failure(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(port: u32, path: Option<&str>) -> v1::HealthCheck {
        v1::HealthCheck {
            r#type: Some(health_check::Type::Http as i32),
            http: Some(health_check::HttpCheckInfo {
                port,
                path: path.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn absent_fields_take_mesos_defaults() {
        let policy = HealthPolicy::from_proto(&http(8080, Some("/health"))).unwrap();
        assert_eq!(
            policy.probe,
            Probe::Http {
                url: "http://127.0.0.1:8080/health".into()
            }
        );
        assert_eq!(policy.delay, Duration::from_secs(15));
        assert_eq!(policy.interval, Duration::from_secs(10));
        assert_eq!(policy.timeout, Some(Duration::from_secs(20)));
        assert_eq!(policy.grace_period, Duration::from_secs(10));
        assert_eq!(policy.consecutive_failures, 3);
        let mut check = http(8080, None);
        check.timeout_seconds = Some(0.0);
        check.interval_seconds = Some(0.0);
        check.http.as_mut().unwrap().protocol = Some(v1::network_info::Protocol::IPv6 as i32);
        check.http.as_mut().unwrap().scheme = Some("https".into());
        let policy = HealthPolicy::from_proto(&check).unwrap();
        assert_eq!(policy.timeout, None, "0 is no timeout");
        assert_eq!(policy.interval, MIN_INTERVAL);
        assert_eq!(
            policy.probe,
            Probe::Http {
                url: "https://[::1]:8080/".into()
            },
            "no path is the root, explicitly"
        );
    }

    #[test]
    fn validation_words_errors_as_the_master_does() {
        let cases = [
            (
                v1::HealthCheck::default(),
                "HealthCheck must specify 'type'",
            ),
            (
                v1::HealthCheck {
                    r#type: Some(health_check::Type::Command as i32),
                    ..Default::default()
                },
                "Expecting 'command' to be set for COMMAND health check",
            ),
            (
                v1::HealthCheck {
                    r#type: Some(health_check::Type::Command as i32),
                    command: Some(v1::CommandInfo::default()),
                    ..Default::default()
                },
                "Command health check must contain 'shell command'",
            ),
            (
                v1::HealthCheck {
                    r#type: Some(health_check::Type::Tcp as i32),
                    ..Default::default()
                },
                "Expecting 'tcp' to be set for TCP health check",
            ),
            (
                v1::HealthCheck {
                    r#type: Some(health_check::Type::Unknown as i32),
                    ..Default::default()
                },
                "'UNKNOWN' is not a valid health check type",
            ),
            (
                http(80, Some("health")),
                "The path 'health' of HTTP health check must start with '/'",
            ),
        ];
        for (check, message) in cases {
            assert_eq!(validate(&check).unwrap_err(), message);
        }
        let mut check = http(80, None);
        check.http.as_mut().unwrap().scheme = Some("ftp".into());
        assert_eq!(
            validate(&check).unwrap_err(),
            "Unsupported HTTP health check scheme: 'ftp'"
        );
        let mut check = http(80, None);
        check.interval_seconds = Some(-1.0);
        assert_eq!(
            validate(&check).unwrap_err(),
            "Expecting 'interval_seconds' to be non-negative"
        );
        assert!(HealthPolicy::from_proto(&http(70_000, None)).is_err());
    }

    fn policy(grace: u64, limit: u32) -> HealthPolicy {
        HealthPolicy {
            probe: Probe::Tcp {
                addr: "127.0.0.1:1".parse().unwrap(),
            },
            delay: Duration::ZERO,
            interval: Duration::from_secs(1),
            timeout: None,
            grace_period: Duration::from_secs(grace),
            consecutive_failures: limit,
        }
    }

    #[test]
    fn failures_in_the_grace_period_are_ignored_until_the_first_success() {
        let t0 = Instant::now();
        let mut state = HealthState::new(&policy(10, 3), t0);
        assert_eq!(state.failure(t0 + Duration::from_secs(5)), None);
        assert_eq!(state.failure(t0 + Duration::from_secs(10)), None);
        let report = state.failure(t0 + Duration::from_secs(11)).unwrap();
        assert_eq!((report.healthy, report.consecutive_failures), (false, 1));
        // After a success the grace period no longer applies.
        let mut state = HealthState::new(&policy(10, 3), t0);
        assert!(state.success().unwrap().healthy);
        let report = state.failure(t0 + Duration::from_secs(1)).unwrap();
        assert!(!report.healthy && !report.kill);
    }

    #[test]
    fn healthy_is_reported_on_changes_and_every_failure_is_reported() {
        let t0 = Instant::now();
        let mut state = HealthState::new(&policy(0, 3), t0);
        let results: Vec<Option<(bool, u32, bool)>> = [true, true, false, false, true, true]
            .into_iter()
            .map(|ok| {
                if ok {
                    state.success()
                } else {
                    state.failure(t0)
                }
                .map(|r| (r.healthy, r.consecutive_failures, r.kill))
            })
            .collect();
        assert_eq!(
            results,
            [
                Some((true, 0, false)),
                None,
                Some((false, 1, false)),
                Some((false, 2, false)),
                Some((true, 0, false)),
                None
            ]
        );
    }

    #[test]
    fn the_limit_of_consecutive_failures_kills() {
        let t0 = Instant::now();
        let mut state = HealthState::new(&policy(0, 2), t0);
        assert!(!state.record(&Err("x".into()), t0).unwrap().kill);
        let report = state.record(&Err("x".into()), t0).unwrap();
        assert_eq!((report.consecutive_failures, report.kill), (2, true));
    }
}
