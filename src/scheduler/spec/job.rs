//! Jobs: work that runs to completion, now (a manual run) or on a cron
//! schedule. What a job's task runs is written exactly as for a service
//! (command, resources, environment, executor, URIs, container); the rest
//! says when it runs, how often it is retried, how long it may take and how
//! many finished runs are kept. Stored under `jobs/<name>`; the clock and
//! run rules are in `docs/jobs.md`.
//!
//! ```json
//! {"name": "report", "command": "./report.sh", "cpus": 0.1, "mem": 64,
//!  "env": {"TARGET": "daily"}, "uris": ["https://example.org/report.sh"],
//!  "schedule": {"cron": "0 30 2 * * *", "timezone": "Europe/Berlin",
//!               "starting_deadline": "5m", "concurrency": "forbid", "enabled": true},
//!  "retries": {"count": 2, "backoff": "10s"},
//!  "timeout": "1h", "history": 20}
//! ```
//!
//! `cron` is parsed by the `croner` crate: five fields (minute first) or
//! six (seconds first). `timezone` is an IANA name (the `chrono-tz`
//! database); the schedule is read in that zone's wall-clock time.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::command::{CommandSpec, UriSpec};
use super::container::ContainerSpec;
use super::errors::FieldError;
use super::service::{ExecutorKind, ServiceSpec};

/// Most retries of one run.
pub const MAX_RETRIES: u32 = 100;
/// Most finished runs kept per job.
pub const MAX_HISTORY: u32 = 1000;
/// Longest `cron` expression accepted (bytes).
pub const MAX_CRON_LEN: usize = 200;

/// The shortest `schedule.starting_deadline` accepted: the core records a
/// trigger at its housekeeping tick, up to a second after the trigger's
/// time (`docs/jobs.md#clock-rules`), so a shorter deadline would record
/// most triggers `missed`.
pub const MIN_STARTING_DEADLINE: Duration = Duration::from_secs(2);

/// What a trigger that comes while a run of the job is still going does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Concurrency {
    /// Start the new run beside the running ones.
    Allow,
    /// Start nothing: the trigger is recorded as `skipped: concurrency`.
    #[default]
    Forbid,
    /// Kill the running runs (recorded as `killed`), then start the new one.
    Replace,
}

impl Concurrency {
    /// The policy's JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Concurrency::Allow => "allow",
            Concurrency::Forbid => "forbid",
            Concurrency::Replace => "replace",
        }
    }
}

/// When a job runs on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// A cron expression: `min hour day month weekday`, or with a leading
    /// seconds field (six fields). Read in `timezone`.
    pub cron: String,
    /// An IANA time zone name (`Europe/Berlin`); `UTC` when left out.
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// How late after its trigger time a run may still start; a trigger
    /// that could not start within it is recorded as `missed` and never
    /// launched late.
    #[serde(default = "default_deadline", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub starting_deadline: Duration,
    /// What a trigger does while a run is still going.
    #[serde(default)]
    pub concurrency: Concurrency,
    /// `false`: no trigger fires (manual runs still start).
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// How a failed attempt is retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Attempts after the first, on a non-zero exit or a lost task
    /// (TASK_FAILED, TASK_LOST, TASK_DROPPED, TASK_GONE, TASK_ERROR).
    #[serde(default, deserialize_with = "super::bounds::retries")]
    pub count: u32,
    /// Delay before the first retry; it doubles per retry up to
    /// `backoff_max`.
    #[serde(default = "default_retry_backoff", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub backoff: Duration,
    /// Cap of the retry delay.
    #[serde(default = "default_retry_backoff_max", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub backoff_max: Duration,
}

impl Default for RetrySpec {
    fn default() -> RetrySpec {
        RetrySpec {
            count: 0,
            backoff: default_retry_backoff(),
            backoff_max: default_retry_backoff_max(),
        }
    }
}

impl RetrySpec {
    /// The delay before retry `n` (1 = the first retry): `backoff ×
    /// 2^(n-1)`, capped at `backoff_max`.
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 1u32 << n.saturating_sub(1).min(20);
        self.backoff.saturating_mul(factor).min(self.backoff_max)
    }
}

/// One job as users write it and as stored in ZooKeeper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// `[a-z0-9-]`, 1–63 characters, starting with a letter or digit; not
    /// the name of a service (task IDs start with it).
    pub name: String,
    /// The command each attempt runs.
    pub command: CommandSpec,
    /// CPUs per attempt (Mesos `cpus`), as for a service.
    #[serde(deserialize_with = "super::bounds::cpus")]
    pub cpus: f64,
    /// Memory per attempt in MB (Mesos `mem`), as for a service.
    #[serde(deserialize_with = "super::bounds::mem")]
    pub mem: f64,
    /// Disk per attempt in MB (Mesos `disk`).
    #[serde(default, deserialize_with = "super::bounds::disk")]
    pub disk: f64,
    /// Ports per attempt, as for a service (`PORT0`, …).
    #[serde(default, deserialize_with = "super::bounds::ports")]
    pub ports: u32,
    /// Environment variables for the task.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files to fetch into the sandbox: URL strings or [`UriSpec`] objects.
    #[serde(default, deserialize_with = "super::command::uris_or_urls")]
    pub uris: Vec<UriSpec>,
    /// Placement constraints, as for a service.
    #[serde(default)]
    pub constraints: Vec<String>,
    /// Time between SIGTERM and SIGKILL when an attempt is killed.
    #[serde(default = "default_grace", with = "crate::util::duration")]
    #[schema(value_type = String, example = "30s")]
    pub kill_grace_period: Duration,
    /// Which executor runs the attempts.
    #[serde(default)]
    pub executor: ExecutorKind,
    /// The image the attempts run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Box<ContainerSpec>>,
    /// When the job runs on its own; absent: only manual runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleSpec>,
    /// Retries of a failed attempt.
    #[serde(default)]
    pub retries: RetrySpec,
    /// A run still going this long after its first attempt was launched
    /// is killed and recorded as `timed_out`; absent: no limit.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::util::duration::option"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub timeout: Option<Duration>,
    /// Finished runs kept (older ones are deleted); 1 to [`MAX_HISTORY`].
    #[serde(
        default = "default_history",
        deserialize_with = "super::bounds::history"
    )]
    pub history: u32,
}

fn default_timezone() -> String {
    "UTC".into()
}

fn default_deadline() -> Duration {
    Duration::from_secs(60)
}

fn yes() -> bool {
    true
}

fn default_retry_backoff() -> Duration {
    Duration::from_secs(10)
}

fn default_retry_backoff_max() -> Duration {
    Duration::from_secs(300)
}

fn default_grace() -> Duration {
    Duration::from_secs(5)
}

fn default_history() -> u32 {
    10
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

impl JobSpec {
    /// What one attempt runs, as a one-instance service spec: the shape the
    /// launch path (`rules/taskinfo.rs`) and the validation of services
    /// share with jobs.
    pub fn task_spec(&self) -> ServiceSpec {
        ServiceSpec {
            name: self.name.clone(),
            command: self.command.clone(),
            cpus: self.cpus,
            mem: self.mem,
            disk: self.disk,
            ports: self.ports,
            instances: 1,
            env: self.env.clone(),
            uris: self.uris.clone(),
            constraints: self.constraints.clone(),
            restart_backoff: self.retries.backoff.max(Duration::from_millis(1)),
            restart_backoff_max: self
                .retries
                .backoff_max
                .max(self.retries.backoff)
                .max(Duration::from_millis(1)),
            kill_grace_period: self.kill_grace_period,
            executor: self.executor,
            health_check: None,
            container: self.container.clone(),
            upgrade: None,
            unreachable: None,
            restart_generation: 0,
            labels: Default::default(),
        }
    }

    /// Checks every field; returns all problems found (empty when valid).
    /// The task's fields are checked by [`ServiceSpec::validate`] (same
    /// field names), the schedule by `croner` and `chrono-tz`.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors: Vec<FieldError> = self
            .task_spec()
            .validate()
            .into_iter()
            // The retry delays stand in for the restart backoff: reported
            // below under their own names.
            .filter(|e| !e.field.starts_with("restart_backoff"))
            .collect();
        match self.schedule.as_ref().map(ScheduleSpec::parse) {
            Some(Err(e)) => errors.push(e),
            // A pattern no date matches (30 February) would never fire and
            // would make croner search up to the year 5000 on every
            // housekeeping tick: refused once here, where it is cheap.
            Some(Ok(parsed)) if parsed.next_after(0).is_none() => errors.push(problem(
                "schedule.cron",
                "matches no date (e.g. 30 February): it would never run",
            )),
            _ => {}
        }
        if self
            .schedule
            .as_ref()
            .is_some_and(|s| s.starting_deadline < MIN_STARTING_DEADLINE)
        {
            errors.push(problem(
                "schedule.starting_deadline",
                "at least 2s: triggers are recorded by a tick once a second, \
                 so a shorter deadline would mark most runs missed",
            ));
        }
        errors.extend(super::bounds::RETRIES.check("retries.count", f64::from(self.retries.count)));
        if self.retries.backoff.is_zero() || self.retries.backoff > self.retries.backoff_max {
            errors.push(problem(
                "retries.backoff",
                "must be positive and not above retries.backoff_max",
            ));
        }
        // Runs are checked against it by a once-a-second tick: a shorter
        // timeout could not be kept.
        if self.timeout.is_some_and(|t| t < Duration::from_secs(1)) {
            errors.push(problem("timeout", "must be at least 1s"));
        }
        errors.extend(super::bounds::HISTORY.check("history", f64::from(self.history)));
        errors
    }
}

/// A schedule whose cron expression and time zone parsed.
#[derive(Debug, Clone)]
pub struct ParsedSchedule {
    /// The cron pattern.
    pub cron: croner::Cron,
    /// The zone it is read in.
    pub timezone: chrono_tz::Tz,
}

/// The cron nicknames a schedule takes (any case), as croner reads them.
pub const NICKNAMES: [&str; 6] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@hourly",
];

/// What every refusal of `schedule.cron` says is supported
/// (`docs/jobs.md#spec`).
const SUPPORTED_SCHEDULES: &str = "a schedule is five fields (minute hour day-of-month month \
                                   day-of-week), six (seconds first), or one of @yearly, \
                                   @annually, @monthly, @weekly, @daily, @hourly";

impl ScheduleSpec {
    /// Parses `cron` (five fields, or six with seconds first) and
    /// `timezone`.
    ///
    /// # Errors
    /// A [`FieldError`] naming `schedule.cron` or `schedule.timezone`.
    pub fn parse(&self) -> Result<ParsedSchedule, FieldError> {
        if self.cron.len() > MAX_CRON_LEN {
            return Err(problem(
                "schedule.cron",
                format!("at most {MAX_CRON_LEN} characters"),
            ));
        }
        // What `docs/jobs.md#spec` promises, checked before croner sees
        // the pattern, so that what we do not support gets our answer:
        // croner also takes a seventh field (years), and passes an
        // unknown nickname (`@reboot`) on as a pattern.
        let trimmed = self.cron.trim();
        if trimmed.starts_with('@') {
            if !NICKNAMES.iter().any(|n| n.eq_ignore_ascii_case(trimmed)) {
                let why = if trimmed.eq_ignore_ascii_case("@reboot") {
                    "@reboot is not supported: a job has no boot to run at (start a run with \
                     POST /api/v1/jobs/{name}/runs)"
                        .to_string()
                } else {
                    format!("{trimmed:?} is not a nickname we support")
                };
                return Err(problem(
                    "schedule.cron",
                    format!("{why}; {SUPPORTED_SCHEDULES}"),
                ));
            }
        } else {
            let count = trimmed.split_whitespace().count();
            if !(5..=6).contains(&count) {
                let years = if count == 7 {
                    " (a year field is not supported)"
                } else {
                    ""
                };
                return Err(problem(
                    "schedule.cron",
                    format!("has {count} fields{years}; {SUPPORTED_SCHEDULES}"),
                ));
            }
        }
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(&self.cron)
            .map_err(|e| {
                problem(
                    "schedule.cron",
                    format!("not a cron expression ({e}); {SUPPORTED_SCHEDULES}"),
                )
            })?;
        let timezone: chrono_tz::Tz = self.timezone.parse().map_err(|_| {
            problem(
                "schedule.timezone",
                "not an IANA time zone name (e.g. UTC, Europe/Berlin)",
            )
        })?;
        Ok(ParsedSchedule { cron, timezone })
    }
}

impl ParsedSchedule {
    /// The first trigger strictly after `after` (seconds since the UNIX
    /// epoch, whole seconds), as seconds since the epoch; `None` when the
    /// pattern matches no later time (croner searches a bounded range).
    ///
    /// Daylight-saving rules are croner's (`docs/jobs.md#clock-rules`): a
    /// wall-clock time that does not exist (spring forward) fires once, at
    /// the first time after the gap; a fixed time that exists twice (fall
    /// back) fires once, at its first occurrence.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        use chrono::TimeZone as _;
        let start = self.timezone.timestamp_opt(after, 0).single()?;
        self.cron
            .find_next_occurrence(&start, false)
            .ok()
            .map(|t| t.timestamp())
    }
}

/// A [`JobSpec`] whose [`JobSpec::validate`] found nothing wrong: the one
/// the core accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidJobSpec(JobSpec);

impl ValidJobSpec {
    /// Validates `spec`.
    ///
    /// # Errors
    /// Every field error [`JobSpec::validate`] finds.
    pub fn new(spec: JobSpec) -> Result<ValidJobSpec, Vec<FieldError>> {
        let errors = spec.validate();
        if errors.is_empty() {
            Ok(ValidJobSpec(spec))
        } else {
            Err(errors)
        }
    }

    /// The spec.
    pub fn into_inner(self) -> JobSpec {
        self.0
    }

    /// The parsed schedule, if the job has one.
    pub fn schedule(&self) -> Option<ParsedSchedule> {
        // Validated: parsing cannot fail.
        self.0.schedule.as_ref().and_then(|s| s.parse().ok())
    }
}

impl std::ops::Deref for ValidJobSpec {
    type Target = JobSpec;

    fn deref(&self) -> &JobSpec {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    fn spec(extra: serde_json::Value) -> JobSpec {
        let mut value = serde_json::json!({
            "name": "report", "command": "sleep 1", "cpus": 0.1, "mem": 32
        });
        if let (Some(v), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            v.extend(extra.clone());
        }
        serde_json::from_value(value).unwrap()
    }

    fn fields(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn a_minimal_job_is_valid_with_the_defaults() {
        let job = spec(serde_json::json!({}));
        assert!(job.validate().is_empty(), "{:?}", job.validate());
        assert_eq!(job.history, 10);
        assert_eq!(job.retries.count, 0);
        assert!(job.schedule.is_none() && job.timeout.is_none());
        // Round trip through the stored JSON.
        let text = serde_json::to_string(&job).unwrap();
        assert_eq!(serde_json::from_str::<JobSpec>(&text).unwrap(), job);
    }

    #[test]
    fn a_timeout_under_a_second_is_refused() {
        for short in ["1ns", "999ms", "0s"] {
            let errors = spec(serde_json::json!({"timeout": short})).validate();
            assert_eq!(fields(&errors), ["timeout"], "{short}: {errors:?}");
        }
        assert!(
            spec(serde_json::json!({"timeout": "1s"}))
                .validate()
                .is_empty()
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let job = spec(serde_json::json!({
            "name": "Bad Name", "cpus": 0, "env": {"1X": "y"},
            "schedule": {"cron": "61 * * * *", "timezone": "Mars/Olympus"},
            "retries": {"count": 1000, "backoff": "0s"},
            "timeout": "0s", "history": 0
        }));
        let errors = job.validate();
        let names = fields(&errors);
        for field in [
            "name",
            "cpus",
            "env.1X",
            "schedule.cron",
            "retries.count",
            "retries.backoff",
            "timeout",
            "history",
        ] {
            assert!(names.contains(&field), "{field} not in {errors:?}");
        }
        let tz = spec(serde_json::json!({
            "schedule": {"cron": "* * * * *", "timezone": "Mars/Olympus"}
        }))
        .validate();
        assert_eq!(fields(&tz), ["schedule.timezone"]);
    }

    #[test]
    fn a_pattern_that_never_matches_or_has_seven_fields_is_refused() {
        // 30 February and 31 April never come: croner would search up to
        // the year 5000 on every housekeeping tick (`docs/jobs.md#spec`).
        for cron in [
            "0 0 30 2 *",
            "0 0 0 31 4 *",
            "0 0 0 1 1 * 2025",
            "* * * * * * *",
        ] {
            let errors = spec(serde_json::json!({"schedule": {"cron": cron}})).validate();
            assert_eq!(fields(&errors), ["schedule.cron"], "{cron}: {errors:?}");
        }
        for cron in [
            "0 0 29 2 *",
            "*/5 * * * *",
            "0 30 2 * * *",
            "@daily",
            "@Hourly",
        ] {
            let errors = spec(serde_json::json!({"schedule": {"cron": cron}})).validate();
            assert!(errors.is_empty(), "{cron}: {errors:?}");
        }
    }

    #[test]
    fn what_we_do_not_support_gets_our_message_naming_what_we_do() {
        for (cron, says) in [
            ("@reboot", "@reboot is not supported"),
            ("@REBOOT", "@reboot is not supported"),
            ("@midnight", "\"@midnight\" is not a nickname we support"),
            ("@every 5m", "\"@every 5m\" is not a nickname we support"),
            (
                "0 0 0 1 1 * 2025",
                "has 7 fields (a year field is not supported)",
            ),
            ("* * * *", "has 4 fields;"),
            ("* * * * * * * *", "has 8 fields;"),
            ("61 * * * *", "not a cron expression ("),
        ] {
            let errors = spec(serde_json::json!({"schedule": {"cron": cron}})).validate();
            assert_eq!(fields(&errors), ["schedule.cron"], "{cron}: {errors:?}");
            let message = &errors[0].message;
            assert!(message.contains(says), "{cron}: {message}");
            assert!(message.ends_with(SUPPORTED_SCHEDULES), "{cron}: {message}");
            // No run of source indentation leaked into the words (a line
            // break in a literal without its `\`).
            assert!(!message.contains("  "), "{cron}: {message:?}");
        }
    }

    #[test]
    fn a_starting_deadline_shorter_than_the_tick_is_refused() {
        // Triggers are recorded by a tick once a second: a deadline under
        // two seconds would record nearly every trigger `missed`.
        for d in ["0s", "1s", "1500ms"] {
            let errors = spec(serde_json::json!({
                "schedule": {"cron": "* * * * *", "starting_deadline": d}
            }))
            .validate();
            assert_eq!(fields(&errors), ["schedule.starting_deadline"], "{d}");
        }
        let ok = spec(serde_json::json!({
            "schedule": {"cron": "* * * * *", "starting_deadline": "2s"}
        }));
        assert!(ok.validate().is_empty());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let value = serde_json::json!({
            "name": "r", "command": "true", "cpus": 0.1, "mem": 32, "instances": 2
        });
        assert!(serde_json::from_value::<JobSpec>(value).is_err());
    }

    #[test]
    fn retry_delays_double_up_to_the_cap() {
        let r = RetrySpec {
            count: 5,
            backoff: Duration::from_secs(10),
            backoff_max: Duration::from_secs(35),
        };
        let d: Vec<u64> = (1..=4).map(|n| r.delay(n).as_secs()).collect();
        assert_eq!(d, [10, 20, 35, 35]);
    }

    fn schedule(cron: &str, tz: &str) -> ParsedSchedule {
        ScheduleSpec {
            cron: cron.into(),
            timezone: tz.into(),
            starting_deadline: Duration::from_secs(60),
            concurrency: Concurrency::Forbid,
            enabled: true,
        }
        .parse()
        .unwrap()
    }

    #[test]
    fn five_and_six_field_expressions_give_the_next_trigger() {
        let base = chrono::Utc
            .with_ymd_and_hms(2026, 12, 2, 20, 0, 10)
            .unwrap()
            .timestamp();
        assert_eq!(
            schedule("*/1 * * * *", "UTC").next_after(base),
            Some(base + 50)
        );
        assert_eq!(
            schedule("*/5 * * * * *", "UTC").next_after(base),
            Some(base + 5)
        );
    }

    #[test]
    fn a_wall_clock_time_missing_in_spring_fires_once_right_after_the_gap() {
        // Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST.
        let tz = chrono_tz::Europe::Berlin;
        let s = schedule("30 2 * * *", "Europe/Berlin");
        let before = tz
            .with_ymd_and_hms(2026, 3, 28, 23, 0, 0)
            .unwrap()
            .timestamp();
        let first = s.next_after(before).unwrap();
        let expected = tz.with_ymd_and_hms(2026, 3, 29, 3, 0, 0).unwrap();
        assert_eq!(first, expected.timestamp());
        // Once: the next is the next day's 02:30.
        let second = s.next_after(first).unwrap();
        let next_day = tz.with_ymd_and_hms(2026, 3, 30, 2, 30, 0).unwrap();
        assert_eq!(second, next_day.timestamp());
    }

    #[test]
    fn a_wall_clock_time_repeated_in_autumn_fires_once() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET.
        let tz = chrono_tz::Europe::Berlin;
        let s = schedule("30 2 * * *", "Europe/Berlin");
        let before = tz
            .with_ymd_and_hms(2026, 10, 25, 1, 0, 0)
            .unwrap()
            .timestamp();
        let first = s.next_after(before).unwrap();
        let cest = tz
            .with_ymd_and_hms(2026, 10, 25, 2, 30, 0)
            .earliest()
            .unwrap();
        assert_eq!(first, cest.timestamp());
        let second = s.next_after(first).unwrap();
        let next_day = tz.with_ymd_and_hms(2026, 10, 26, 2, 30, 0).unwrap();
        assert_eq!(second, next_day.timestamp());
    }
}
