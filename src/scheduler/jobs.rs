//! What ZooKeeper keeps of jobs (`docs/jobs.md`): the job record under
//! `jobs/<name>` (the spec) and one run record per run under
//! `runs/<job>.<run-id>`.
//!
//! A run record is written, fenced and with [`Expect::Absent`]
//! (`crate::coordination::Expect`), *before* its first attempt's task is
//! launched, as a task record is written before its ACCEPT. A scheduled
//! run's ID is derived from its trigger time alone ([`RunId::scheduled`]), so
//! a second firing of the same trigger (by this leader, a new one, or a
//! deposed one) collides with the stored record and launches nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::TaskId;
use super::spec::job::JobSpec;

/// A job as stored under `jobs/<name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobRecord {
    /// The spec, as validated when it was put.
    pub spec: JobSpec,
    /// When the job was created, seconds since the UNIX epoch.
    pub created_at: f64,
    /// When the spec last changed (put, enable, disable).
    pub updated_at: f64,
}

/// The state of a run (`docs/jobs.md#run-states`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Recorded; an attempt is waiting for an offer, for its retry delay,
    /// or for its first TASK_RUNNING.
    Starting,
    /// An attempt's task is TASK_RUNNING.
    Running,
    /// An attempt ended with TASK_FINISHED (exit status 0).
    Succeeded,
    /// The last attempt failed (non-zero exit, lost, dropped, error) and no
    /// retry is left.
    Failed,
    /// Killed by an operator, or replaced under `concurrency: replace`.
    Killed,
    /// Killed past the job's `timeout`.
    TimedOut,
    /// Not started: a run was going under `concurrency: forbid`.
    Skipped,
    /// Not started within `starting_deadline` of its trigger.
    Missed,
}

impl RunState {
    /// True once the run is over (nothing of it runs or will run).
    pub fn is_finished(self) -> bool {
        !matches!(self, RunState::Starting | RunState::Running)
    }

    /// The state's JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Killed => "killed",
            RunState::TimedOut => "timed_out",
            RunState::Skipped => "skipped",
            RunState::Missed => "missed",
        }
    }

    /// Every state, in the order of [`RunState::as_str`]'s list (metrics).
    pub const ALL: [RunState; 8] = [
        RunState::Starting,
        RunState::Running,
        RunState::Succeeded,
        RunState::Failed,
        RunState::Killed,
        RunState::TimedOut,
        RunState::Skipped,
        RunState::Missed,
    ];
}

/// What started a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// The job's schedule, at `at` (the cron time, seconds since the UNIX
    /// epoch; not when the leader noticed it).
    Schedule {
        /// The trigger time.
        at: f64,
    },
    /// `POST /api/v1/jobs/{name}/runs`.
    Manual {
        /// When it was asked for.
        at: f64,
        /// Who asked (the audit's user: the token's name or `admin`).
        by: String,
        /// Why, as given (`?reason=`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Trigger {
    /// The trigger time (the scheduled time, or when a manual run was
    /// asked for).
    pub fn at(&self) -> f64 {
        match self {
            Trigger::Schedule { at } | Trigger::Manual { at, .. } => *at,
        }
    }
}

/// One attempt of a run: one Mesos task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Attempt {
    /// 1 for the first attempt, 2 for the first retry, …
    pub number: u32,
    /// The task's ID, chosen before the run record holding it is written.
    pub task_id: TaskId,
    /// When the attempt was recorded (its task may launch later, when an
    /// offer fits), seconds since the UNIX epoch.
    pub created_at: f64,
    /// The first TASK_RUNNING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_at: Option<f64>,
    /// The terminal update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<f64>,
    /// The task's latest Mesos state by name (`TASK_FINISHED`); absent
    /// before its first update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_state: Option<String>,
    /// The exit status, when the terminal update carried one (the command
    /// executor puts it in the message: `src/launcher/executor.cpp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// The terminal update's message or reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One run of a job, as stored under `runs/<job>.<run-id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunRecord {
    /// The job.
    pub job: String,
    /// The run's ID ([`RunId`]).
    pub run_id: String,
    /// What started it.
    pub trigger: Trigger,
    /// Where it is.
    pub state: RunState,
    /// Why it ended (or was not started): `exit status 3`, `skipped:
    /// concurrency`, `missed: no leader could launch within 1m`, `killed by
    /// alice: …`, `timed out after 10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the record was created, seconds since the UNIX epoch.
    pub created_at: f64,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    /// Arguments appended to the job's command (manual runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment added to the job's (manual runs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The attempts, oldest first.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// When the next attempt is due (a retry waiting for its backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<f64>,
    /// Set while the scheduler wants the run's task killed: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<String>,
}

impl RunRecord {
    /// The record's key under `runs/`: `<job>.<run-id>` (job names have no
    /// dot).
    pub fn key(&self) -> String {
        run_key(&self.job, &self.run_id)
    }

    /// The attempt now in flight (the last one), if the run has one.
    pub fn current(&self) -> Option<&Attempt> {
        self.attempts.last()
    }
}

/// A job as the snapshot shows it: the same on the leader and on every
/// standby replica, which computes it from the same records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobStatus {
    /// The stored record.
    pub record: JobRecord,
    /// The next trigger time, seconds since the UNIX epoch; `None` without
    /// an enabled schedule.
    pub next_run_at: Option<f64>,
    /// The kept runs, newest first.
    pub runs: Vec<std::sync::Arc<RunRecord>>,
}

/// The jobs as the snapshot shows them, from the stored job and run
/// records (in any order): by name, each with its runs newest first and
/// its next trigger. Leader and standby replicas both build it with this.
pub fn statuses(
    jobs: impl IntoIterator<Item = JobRecord>,
    runs: impl IntoIterator<Item = std::sync::Arc<RunRecord>>,
) -> Vec<JobStatus> {
    let mut by_job: BTreeMap<String, Vec<std::sync::Arc<RunRecord>>> = BTreeMap::new();
    for run in runs {
        by_job.entry(run.job.clone()).or_default().push(run);
    }
    let mut out: Vec<JobStatus> = jobs
        .into_iter()
        .map(|record| {
            let mut runs = by_job.remove(&record.spec.name).unwrap_or_default();
            runs.sort_by(|a, b| b.run_id.cmp(&a.run_id));
            let last = last_trigger(runs.iter().map(|r| r.as_ref()));
            let next_run_at = next_trigger(&record, last).map(|t| t as f64);
            JobStatus {
                record,
                next_run_at,
                runs,
            }
        })
        .collect();
    out.sort_by(|a, b| a.record.spec.name.cmp(&b.record.spec.name));
    out
}

/// The last trigger time the job's runs record (the newest scheduled run
/// ID), seconds since the UNIX epoch.
pub fn last_trigger<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Option<i64> {
    runs.into_iter()
        .filter_map(|r| RunId::scheduled_at(&r.run_id))
        .max()
}

/// The next trigger of `record`'s schedule: the first after the last
/// stored trigger, and after the record's last change (a trigger before a
/// job was created or enabled never fires). `None` without an enabled,
/// valid schedule. See `docs/jobs.md#clock-rules`.
pub fn next_trigger(record: &JobRecord, last: Option<i64>) -> Option<i64> {
    let schedule = record.spec.schedule.as_ref().filter(|s| s.enabled)?;
    let parsed = schedule.parse().ok()?;
    let floor = record.updated_at.floor() as i64;
    parsed.next_after(last.map_or(floor, |l| l.max(floor)))
}

/// The key of a run record: `<job>.<run-id>`.
pub fn run_key(job: &str, run_id: &str) -> String {
    format!("{job}.{run_id}")
}

/// Run IDs: a UTC time stamp `YYYYMMDDTHHMMSSZ`, so that they sort by
/// trigger time. A scheduled run's ID is its trigger time alone; a manual
/// run's adds `-m` and a random suffix.
pub struct RunId;

impl RunId {
    /// The ID of the run of the trigger at `at` (seconds since the UNIX
    /// epoch): the same for every replica that computes it.
    pub fn scheduled(at: i64) -> String {
        stamp(at)
    }

    /// The ID of a manual run asked for at `at`; `suffix` tells apart
    /// runs asked for in the same second.
    pub fn manual(at: i64, suffix: u32) -> String {
        format!("{}-m{suffix:06x}", stamp(at))
    }

    /// The trigger time of a scheduled run's ID, `None` for a manual run
    /// or another string.
    pub fn scheduled_at(run_id: &str) -> Option<i64> {
        chrono::NaiveDateTime::parse_from_str(run_id, "%Y%m%dT%H%M%SZ")
            .ok()
            .map(|t| t.and_utc().timestamp())
    }
}

fn stamp(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map(|t| t.format("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_else(|| format!("{at}"))
}

/// The exit status in a command executor's terminal message ("Command
/// exited with status 3", `src/launcher/executor.cpp` in apache/mesos,
/// `CommandExecutor::reaped`), if it names one.
pub fn exit_status(message: &str) -> Option<i32> {
    let rest = message.split("exited with status ").nth(1)?;
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduled_run_ids_are_the_trigger_time_and_sort_by_it() {
        let a = RunId::scheduled(1_796_155_200);
        assert_eq!(a, "20261201T200000Z");
        assert_eq!(RunId::scheduled_at(&a), Some(1_796_155_200));
        let b = RunId::scheduled(1_796_155_260);
        assert!(a < b);
        let m = RunId::manual(1_796_155_200, 0xab);
        assert_eq!(m, "20261201T200000Z-m0000ab");
        assert_eq!(RunId::scheduled_at(&m), None);
        assert!(a < m && m < b);
    }

    #[test]
    fn the_command_executors_exit_status_is_read() {
        assert_eq!(exit_status("Command exited with status 3"), Some(3));
        assert_eq!(
            exit_status("Command exited with status 127 (pid: 9)"),
            Some(127)
        );
        assert_eq!(exit_status("Command terminated with signal Killed"), None);
    }

    #[test]
    fn a_run_record_round_trips_as_documented() {
        let run = RunRecord {
            job: "report".into(),
            run_id: RunId::scheduled(1_796_155_200),
            trigger: Trigger::Schedule {
                at: 1_796_155_200.0,
            },
            state: RunState::TimedOut,
            reason: Some("timed out after 1m".into()),
            created_at: 1_796_155_200.2,
            finished_at: Some(1_796_155_261.0),
            args: vec![],
            env: BTreeMap::new(),
            attempts: vec![],
            retry_at: None,
            kill: None,
        };
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["state"], "timed_out");
        assert_eq!(json["trigger"]["kind"], "schedule");
        assert_eq!(run.key(), "report.20261201T200000Z");
        assert_eq!(serde_json::from_value::<RunRecord>(json).unwrap(), run);
    }
}
