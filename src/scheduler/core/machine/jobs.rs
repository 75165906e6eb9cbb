//! Jobs in the core (`docs/jobs.md`): their records, triggers, runs and
//! attempts.
//!
//! - The job and run records are read at the term's start, beside the task
//!   records; nothing fires or launches before both are known.
//! - A trigger (the first time of the schedule after the last stored
//!   trigger) becomes a run record written with `Expect::Absent` under the
//!   run ID its time gives ([`RunId::scheduled`]). Its first attempt's task
//!   ID is in that record; the scheduling pass places the attempt only once
//!   the record holding it is stored, and the task record is then written
//!   before the ACCEPT as for every task. A new leader thus finds either
//!   no run (it fires the trigger, or records it `missed`), or a run whose
//!   attempt has no task record (never launched: it launches it), or one
//!   whose task record exists (reconciled like every task). A deposed
//!   leader's writes are fenced, so it launches nothing.
//! - `forbid` records an overlapping trigger as `skipped`, `replace` kills
//!   the running runs first, `allow` starts beside them; a scheduled run
//!   not launched within `starting_deadline` of its trigger is `missed`.
//!   A `forbid` trigger is judged only once the master has spoken, in this
//!   subscription, of the tasks of the runs still going (a new leader's
//!   record of a run may be older than its task's end): until then, within
//!   its starting deadline, it waits.
//! - An attempt's terminal update ends the run (`succeeded`, `failed`,
//!   `killed`, `timed_out`) or records the next attempt with its retry
//!   time. Finished runs beyond `history` are deleted, oldest first.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Machine, Pending};
use crate::coordination::{CoordinationError, Expect, RecordList, Written};
use crate::mesos::is_terminal;
use crate::mesos::v1::{TaskState, task_status};
use crate::scheduler::commands::{Answer, CommandError, Request, RunRequest};
use crate::scheduler::core::io::{ReplyId, StoreOp, StoreResult};
use crate::scheduler::ids::TaskId;
use crate::scheduler::jobs::{
    self, Attempt, JobRecord, JobStatus, RunId, RunRecord, RunState, Trigger,
};
use crate::scheduler::records::TaskRecord;
use crate::scheduler::snapshot::EventKind;
use crate::scheduler::spec::command::CommandSpec;
use crate::scheduler::spec::job::{Concurrency, JobSpec, ValidJobSpec};
use crate::scheduler::spec::service::ServiceSpec;

/// Triggers one job fires per pass at most (a long outage of a job firing
/// every second records its missed triggers over several passes).
const TRIGGERS_PER_PASS: usize = 50;

/// The jobs of the term.
#[derive(Debug, Default)]
pub(super) struct Jobs {
    /// Both lists were read.
    pub(super) loaded: bool,
    jobs_read: Option<RecordList<JobRecord>>,
    runs_read: Option<RecordList<RunRecord>>,
    jobs: BTreeMap<String, JobEntry>,
    /// The framework's tasks vanished before the runs were read: why, to
    /// end the runs they held once they are
    /// ([`Machine::end_runs_lost_with_framework`]).
    lost_before_loaded: Option<String>,
}

#[derive(Debug)]
struct JobEntry {
    record: JobRecord,
    /// The stored version; `None` while the job is being created.
    version: Option<i32>,
    writing: bool,
    runs: BTreeMap<String, RunEntry>,
    /// The last trigger recorded (or being recorded), seconds since the
    /// UNIX epoch.
    last_trigger: Option<i64>,
}

#[derive(Debug)]
struct RunEntry {
    run: Arc<RunRecord>,
    /// The stored version; `None` before the first write succeeded.
    version: Option<i32>,
    writing: bool,
    /// Changed while a write was out: write again when it returns.
    again: bool,
    /// Attempts in the stored record: attempt `n` launches only when
    /// `stored_attempts >= n`.
    stored_attempts: usize,
    /// Commands answered with the run once the next write is stored.
    replies: Vec<ReplyId>,
}

impl RunEntry {
    fn new(run: RunRecord) -> RunEntry {
        RunEntry {
            run: Arc::new(run),
            version: None,
            writing: false,
            again: false,
            stored_attempts: 0,
            replies: Vec::new(),
        }
    }
}

/// What a job store request in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    ListJobs,
    ListRuns,
    PutJob {
        reply: Option<ReplyId>,
        record: Box<JobRecord>,
        replaced: bool,
    },
    DeleteJob {
        reply: ReplyId,
    },
    PutRun {
        job: String,
        run_id: String,
        record: Arc<RunRecord>,
    },
    DeleteRun,
}

impl Jobs {
    /// True when `name` is a job.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.jobs.contains_key(name)
    }

    /// The kill grace period of a job's tasks.
    pub(super) fn grace(&self, name: &str) -> Option<std::time::Duration> {
        self.jobs.get(name).map(|j| j.record.spec.kill_grace_period)
    }

    /// The jobs as the snapshot shows them.
    pub(super) fn statuses(&self) -> Vec<JobStatus> {
        if !self.loaded {
            return Vec::new();
        }
        jobs::statuses(
            self.jobs.values().map(|j| j.record.clone()),
            self.jobs
                .values()
                .flat_map(|j| j.runs.values().map(|r| r.run.clone())),
        )
    }
}

/// The attempt a task ID names: `<job>.<run-id>.<attempt>`.
fn attempt_of(task_id: &str) -> Option<(&str, &str, u32)> {
    let (job, rest) = task_id.split_once('.')?;
    let (run_id, n) = rest.rsplit_once('.')?;
    Some((job, run_id, n.parse().ok()?))
}

/// The task ID of attempt `n` of a run.
fn attempt_task_id(job: &str, run_id: &str, n: u32) -> TaskId {
    TaskId::from(format!("{job}.{run_id}.{n}"))
}

/// POSIX shell quoting of one argument: `'…'`, a quote as `'\''`.
fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// What a run's attempts run: the job's task with the run's extra
/// arguments and environment.
pub(super) fn run_task_spec(spec: &JobSpec, run: &RunRecord) -> ServiceSpec {
    let mut task = spec.task_spec();
    if !run.args.is_empty() {
        task.command = match task.command {
            CommandSpec::Shell(line) => {
                let args: Vec<String> = run.args.iter().map(|a| shell_quote(a)).collect();
                CommandSpec::Shell(format!("{line} {}", args.join(" ")))
            }
            CommandSpec::Argv(mut argv) => {
                argv.extend(run.args.iter().cloned());
                CommandSpec::Argv(argv)
            }
        };
    }
    task.env
        .extend(run.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    task
}

/// A job attempt the scheduling pass may place.
pub(super) struct JobDemand {
    /// `<job>.<run-id>`: the demand's name in the pass.
    pub(super) key: String,
    /// The attempt number.
    pub(super) attempt: u32,
    /// What it runs (named after the job).
    pub(super) spec: ServiceSpec,
}

impl Machine {
    /// Reads the job and run records (the term's start).
    pub(super) fn begin_jobs(&mut self) {
        self.store(StoreOp::ListJobs, Pending::Jobs(Step::ListJobs));
        self.store(StoreOp::ListRuns, Pending::Jobs(Step::ListRuns));
    }

    fn jobs_loaded(&mut self, now: Instant) {
        if self.jobs.jobs_read.is_none() || self.jobs.runs_read.is_none() {
            return;
        }
        let (Some(jobs), Some(runs)) = (self.jobs.jobs_read.take(), self.jobs.runs_read.take())
        else {
            return;
        };
        for (name, v) in jobs.records {
            self.jobs.jobs.insert(
                name,
                JobEntry {
                    record: v.value,
                    version: Some(v.version),
                    writing: false,
                    runs: BTreeMap::new(),
                    last_trigger: None,
                },
            );
        }
        let mut orphans = Vec::new();
        for (key, v) in runs.records {
            let run = v.value;
            let Some(job) = self.jobs.jobs.get_mut(&run.job) else {
                orphans.push(key);
                continue;
            };
            let mut entry = RunEntry::new(run);
            entry.version = Some(v.version);
            entry.stored_attempts = entry.run.attempts.len();
            job.runs.insert(entry.run.run_id.clone(), entry);
        }
        for job in self.jobs.jobs.values_mut() {
            job.last_trigger = jobs::last_trigger(job.runs.values().map(|r| r.run.as_ref()));
        }
        if self.hard_forgot_tasks() {
            self.end_runs_lost_with_framework(
                "framework torn down by a hard deployment".into(),
                now,
            );
        }
        if let Some(why) = self.jobs.lost_before_loaded.take() {
            self.end_runs_lost_with_framework(why, now);
        }
        // Runs of a job deleted while its runs were being deleted.
        for key in orphans {
            self.store(
                StoreOp::DeleteRun(key, Expect::Any),
                Pending::Jobs(Step::DeleteRun),
            );
        }
        self.jobs.loaded = true;
        // The pass waited for the jobs (`may_schedule`).
        self.needs_schedule = true;
        let n = self.jobs.jobs.len();
        if n > 0 {
            self.log(EventKind::Service, format!("{n} job(s) loaded"), now);
        }
        self.out.dirty = true;
    }

    /// The framework's tasks vanished wholesale (`docs/jobs.md#when-the-framework-goes`):
    /// an operator's teardown, the master removed the framework (then
    /// `reregister`), a `hard` deployment. Their task records are deleted
    /// (or about to be), so no update will ever move a run whose attempt
    /// was launched: each such attempt ends here, TASK_KILLED with `why`,
    /// and its run follows as for any killed attempt: `killed` when an
    /// operator or a timeout was killing it, retried when the job has a
    /// retry left, else `failed` with `why`. An attempt not launched yet
    /// (no task record, no update) stays: the new framework launches it.
    /// Called before the task records are forgotten; if the runs are not
    /// read yet, once they are.
    pub(super) fn end_runs_lost_with_framework(&mut self, why: String, now: Instant) {
        if !self.jobs.loaded && self.jobs.jobs.is_empty() {
            self.jobs.lost_before_loaded = Some(why);
            return;
        }
        let going: Vec<(String, String, _)> = self
            .jobs
            .jobs
            .iter()
            .flat_map(|(name, job)| {
                job.runs.values().filter_map(move |r| {
                    let a = r.run.current().filter(|_| !r.run.state.is_finished())?;
                    Some((name.clone(), r.run.run_id.clone(), a.clone()))
                })
            })
            .collect();
        for (job, run_id, attempt) in going {
            let n = attempt.number;
            let record = self
                .tasks
                .get(attempt.task_id.as_str())
                .map(|e| e.record.clone());
            if let Some(record) = record.as_ref().filter(|r| r.is_terminal()) {
                // Its end is stored: the run follows it.
                if self.apply_task_to_run(&job, &run_id, n, record, now) {
                    self.write_run(&job, &run_id);
                }
                continue;
            }
            let launched = record.is_some()
                || attempt
                    .task_state
                    .as_deref()
                    .and_then(TaskState::from_str_name)
                    .is_some_and(|s| !is_terminal(s));
            if !launched {
                continue;
            }
            if self.end_attempt(&job, &run_id, n, TaskState::TaskKilled, why.clone(), now) {
                self.write_run(&job, &run_id);
            }
        }
    }

    pub(super) fn on_jobs_stored(&mut self, step: Step, result: StoreResult, now: Instant) {
        match (step, result) {
            (Step::ListJobs, StoreResult::Jobs(r)) => match r {
                Ok(list) => {
                    self.jobs.jobs_read = Some(list);
                    self.jobs_loaded(now);
                }
                Err(e) => self.jobs_read_failed(e),
            },
            (Step::ListRuns, StoreResult::Runs(r)) => match r {
                Ok(list) => {
                    self.jobs.runs_read = Some(list);
                    self.jobs_loaded(now);
                }
                Err(e) => self.jobs_read_failed(e),
            },
            (
                Step::PutJob {
                    reply,
                    record,
                    replaced,
                },
                StoreResult::Written(w),
            ) => self.job_written(reply, *record, replaced, w, now),
            (Step::DeleteJob { reply }, StoreResult::Written(w)) => {
                let answer = w.map(|w| w == Written::Deleted).map_err(CommandError::from);
                self.reply(reply, Answer::Service(answer));
            }
            (
                Step::PutRun {
                    job,
                    run_id,
                    record,
                },
                StoreResult::Written(w),
            ) => self.run_written(&job, &run_id, record, w, now),
            (Step::DeleteRun, StoreResult::Written(w)) => {
                if let Err(e) = w {
                    tracing::warn!(error = %e, "could not delete a run record");
                }
            }
            (step, _) => self.warn(format!("unexpected store answer for {step:?}; ignored")),
        }
    }

    fn jobs_read_failed(&mut self, error: CoordinationError) {
        self.end_term(crate::scheduler::core::TermOutcome::StartupFailed(
            crate::scheduler::core::StartupError::Read {
                what: "jobs",
                source: error,
            },
        ));
    }

    /// A job command (see [`Request`]).
    pub(super) fn on_job_command(&mut self, reply: ReplyId, request: Request, now: Instant) {
        if !self.jobs.loaded {
            // Nothing was done: 503 with `Retry-After`, for clients to retry.
            let error = CommandError::NotReady(
                "the leader is still reading the jobs; try again in a moment".into(),
            );
            let answer = match request {
                Request::StartRun(_) | Request::KillRun { .. } => Answer::Run(Err(error)),
                _ => Answer::Service(Err(error)),
            };
            self.reply(reply, answer);
            return;
        }
        match request {
            Request::PutJob(spec) => self.put_job(reply, *spec, now),
            Request::DeleteJob(name) => self.delete_job(reply, &name, now),
            Request::SetJobEnabled { name, enabled } => {
                self.set_job_enabled(reply, &name, enabled, now)
            }
            Request::StartRun(run) => self.start_manual_run(reply, *run, now),
            Request::KillRun { name, run_id, by } => {
                let answer = self.kill_run(&name, &run_id, &by, now);
                match answer {
                    Ok(()) => {
                        if let Some(entry) = self.run_entry_mut(&name, &run_id) {
                            entry.replies.push(reply);
                        }
                        self.write_run(&name, &run_id);
                    }
                    Err(e) => self.reply(reply, Answer::Run(Err(e))),
                }
            }
            other => self.warn(format!("not a job command: {other:?}")),
        }
    }

    fn put_job(&mut self, reply: ReplyId, spec: ValidJobSpec, now: Instant) {
        let name = spec.name.clone();
        if self.services.contains(&name) {
            let error = CommandError::Conflict(format!("a service is named {name}"));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        }
        let at = self.unix(now);
        let (record, expect, replaced) = match self.jobs.jobs.get(&name) {
            Some(entry) if entry.writing || entry.version.is_none() => {
                let error = CommandError::Conflict(format!(
                    "a change of job {name} is being stored; try again"
                ));
                self.reply(reply, Answer::Service(Err(error)));
                return;
            }
            Some(entry) => (
                JobRecord {
                    spec: spec.into_inner(),
                    created_at: entry.record.created_at,
                    updated_at: at,
                },
                Expect::Version(entry.version.unwrap_or_default()),
                true,
            ),
            None => (
                JobRecord {
                    spec: spec.into_inner(),
                    created_at: at,
                    updated_at: at,
                },
                Expect::Absent,
                false,
            ),
        };
        self.write_job(Some(reply), record, expect, replaced);
    }

    fn write_job(
        &mut self,
        reply: Option<ReplyId>,
        record: JobRecord,
        expect: Expect,
        replaced: bool,
    ) {
        let name = record.spec.name.clone();
        match self.jobs.jobs.get_mut(&name) {
            Some(entry) => entry.writing = true,
            None => {
                self.jobs.jobs.insert(
                    name.clone(),
                    JobEntry {
                        record: record.clone(),
                        version: None,
                        writing: true,
                        runs: BTreeMap::new(),
                        last_trigger: None,
                    },
                );
            }
        }
        let record = Box::new(record);
        self.store(
            StoreOp::PutJob(record.clone(), expect),
            Pending::Jobs(Step::PutJob {
                reply,
                record,
                replaced,
            }),
        );
    }

    fn job_written(
        &mut self,
        reply: Option<ReplyId>,
        record: JobRecord,
        replaced: bool,
        written: Result<Written, CoordinationError>,
        now: Instant,
    ) {
        let name = record.spec.name.clone();
        let answer = match written {
            Ok(Written::Version(version)) => {
                if let Some(entry) = self.jobs.jobs.get_mut(&name) {
                    entry.record = record;
                    entry.version = Some(version);
                    entry.writing = false;
                }
                let what = if replaced { "replaced" } else { "created" };
                self.log(EventKind::Service, format!("job {name} {what}"), now);
                self.out.dirty = true;
                Ok(replaced)
            }
            other => {
                let created = self
                    .jobs
                    .jobs
                    .get(&name)
                    .is_some_and(|e| e.version.is_none());
                if created {
                    self.jobs.jobs.remove(&name);
                } else if let Some(entry) = self.jobs.jobs.get_mut(&name) {
                    entry.writing = false;
                }
                Err(match other {
                    Err(e) => CommandError::from(e),
                    Ok(w) => CommandError::Conflict(format!("unexpected write result {w:?}")),
                })
            }
        };
        if let Some(reply) = reply {
            self.reply(reply, Answer::Service(answer));
        }
    }

    fn delete_job(&mut self, reply: ReplyId, name: &str, now: Instant) {
        let Some(entry) = self.jobs.jobs.get(name) else {
            self.reply(reply, Answer::Service(Ok(false)));
            return;
        };
        if entry.writing || entry.version.is_none() {
            let error = CommandError::Conflict(format!(
                "a change of job {name} is being stored; try again"
            ));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        }
        let Some(entry) = self.jobs.jobs.remove(name) else {
            return;
        };
        // Its live attempts are killed; their task records stay until they
        // end, as a deleted service's.
        for run in entry.runs.values() {
            if let Some(a) = run.run.current()
                && self.tasks.contains(&a.task_id)
            {
                self.request_kill(&a.task_id, "job deleted", now);
            }
            self.store(
                StoreOp::DeleteRun(run.run.key(), Expect::Any),
                Pending::Jobs(Step::DeleteRun),
            );
        }
        self.store(
            StoreOp::DeleteJob(name.to_string(), Expect::Any),
            Pending::Jobs(Step::DeleteJob { reply }),
        );
        self.log(EventKind::Service, format!("job {name} deleted"), now);
        self.out.dirty = true;
    }

    fn set_job_enabled(&mut self, reply: ReplyId, name: &str, enabled: bool, now: Instant) {
        let at = self.unix(now);
        let Some(entry) = self.jobs.jobs.get(name) else {
            let error = CommandError::NotFound(format!("job {name}"));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        };
        if entry.writing || entry.version.is_none() {
            let error = CommandError::Conflict(format!(
                "a change of job {name} is being stored; try again"
            ));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        }
        let mut record = entry.record.clone();
        let Some(schedule) = record.spec.schedule.as_mut() else {
            let error = CommandError::Conflict(format!("job {name} has no schedule"));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        };
        if schedule.enabled == enabled {
            // Already so: no write. Moving `updated_at` would move the floor
            // of the next trigger (`jobs::next_trigger`) past a trigger the
            // tick has not recorded yet, and that trigger would get no run.
            self.reply(reply, Answer::Service(Ok(true)));
            return;
        }
        schedule.enabled = enabled;
        record.updated_at = at;
        let expect = Expect::Version(entry.version.unwrap_or_default());
        self.write_job(Some(reply), record, expect, true);
    }

    fn start_manual_run(&mut self, reply: ReplyId, request: RunRequest, now: Instant) {
        let at = self.unix(now);
        if !self.jobs.jobs.contains_key(&request.job) {
            let error = CommandError::NotFound(format!("job {}", request.job));
            self.reply(reply, Answer::Run(Err(error)));
            return;
        }
        let suffix = (self.ids.uuid().as_u128() & 0xff_ffff) as u32;
        let run_id = RunId::manual(at.floor() as i64, suffix);
        let trigger = Trigger::Manual {
            at,
            by: request.by.clone(),
            reason: request.reason.clone(),
        };
        let mut run = self.new_run(&request.job, run_id.clone(), trigger, at);
        run.args = request.args;
        run.env = request.env;
        self.log(
            EventKind::Service,
            format!(
                "job {} run {run_id} (manual, by {})",
                request.job, request.by
            ),
            now,
        );
        self.record_run(run, Some(reply));
    }

    /// A new run in `starting` with its first attempt.
    fn new_run(&self, job: &str, run_id: String, trigger: Trigger, at: f64) -> RunRecord {
        RunRecord {
            job: job.to_string(),
            attempts: vec![Attempt {
                number: 1,
                task_id: attempt_task_id(job, &run_id, 1),
                created_at: at,
                running_at: None,
                ended_at: None,
                task_state: None,
                exit_status: None,
                message: None,
            }],
            run_id,
            trigger,
            state: RunState::Starting,
            reason: None,
            created_at: at,
            finished_at: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            retry_at: None,
            kill: None,
        }
    }

    /// Records a new run: in memory now, stored with `Expect::Absent`.
    fn record_run(&mut self, run: RunRecord, reply: Option<ReplyId>) {
        let (job, run_id) = (run.job.clone(), run.run_id.clone());
        let Some(entry) = self.jobs.jobs.get_mut(&job) else {
            return;
        };
        let mut run = RunEntry::new(run);
        run.replies.extend(reply);
        entry.runs.insert(run_id.clone(), run);
        self.write_run(&job, &run_id);
        self.out.dirty = true;
    }

    fn run_entry_mut(&mut self, job: &str, run_id: &str) -> Option<&mut RunEntry> {
        self.jobs.jobs.get_mut(job)?.runs.get_mut(run_id)
    }

    /// Writes a run's record as it is in memory (again after the write
    /// out, if one is).
    fn write_run(&mut self, job: &str, run_id: &str) {
        let Some(entry) = self.run_entry_mut(job, run_id) else {
            return;
        };
        if entry.writing {
            entry.again = true;
            return;
        }
        entry.writing = true;
        entry.again = false;
        let expect = entry.version.map_or(Expect::Absent, Expect::Version);
        let record = entry.run.clone();
        self.store(
            StoreOp::PutRun(record.clone(), expect),
            Pending::Jobs(Step::PutRun {
                job: job.to_string(),
                run_id: run_id.to_string(),
                record,
            }),
        );
    }

    fn run_written(
        &mut self,
        job: &str,
        run_id: &str,
        record: Arc<RunRecord>,
        written: Result<Written, CoordinationError>,
        now: Instant,
    ) {
        let Some(entry) = self.run_entry_mut(job, run_id) else {
            return;
        };
        entry.writing = false;
        match written {
            Ok(Written::Version(version)) => {
                entry.version = Some(version);
                entry.stored_attempts = record.attempts.len();
                let replies = std::mem::take(&mut entry.replies);
                let again = entry.again;
                for reply in replies {
                    self.reply(reply, Answer::Run(Ok((*record).clone())));
                }
                if again {
                    self.write_run(job, run_id);
                }
                // A stored attempt may be placed now.
                self.needs_schedule = true;
                self.out.dirty = true;
                if record.state.is_finished() {
                    self.trim_history(job);
                }
            }
            other => {
                let error = match other {
                    Err(e) => e,
                    Ok(w) => CoordinationError::Invalid(format!("unexpected write result {w:?}")),
                };
                let replies = std::mem::take(&mut entry.replies);
                let never_stored = entry.version.is_none();
                if never_stored {
                    // Not stored: nothing of it may launch. A conflict means
                    // the run exists (another leader's write): the next term
                    // reads it; this one forgets it.
                    if let Some(j) = self.jobs.jobs.get_mut(job) {
                        j.runs.remove(run_id);
                    }
                } else if let Some(entry) = self.run_entry_mut(job, run_id) {
                    // Written again by the next pass.
                    entry.again = true;
                }
                let message = format!("could not store run {run_id} of job {job}: {error}");
                self.log(EventKind::Error, message, now);
                for reply in replies {
                    self.reply(reply, Answer::Run(Err(CommandError::from(error.clone()))));
                }
                if matches!(error, CoordinationError::NotLeader) {
                    self.end_term(crate::scheduler::core::TermOutcome::LeadershipLost);
                }
            }
        }
    }

    /// Changes a run in memory; the caller writes it.
    fn update_run(&mut self, job: &str, run_id: &str, change: impl FnOnce(&mut RunRecord)) {
        if let Some(entry) = self.run_entry_mut(job, run_id) {
            change(Arc::make_mut(&mut entry.run));
        }
    }

    /// Kills a run: marks it, kills its task, or (not launched) ends it.
    fn kill_run(
        &mut self,
        job: &str,
        run_id: &str,
        why: &str,
        now: Instant,
    ) -> Result<(), CommandError> {
        let at = self.unix(now);
        let Some(entry) = self.jobs.jobs.get(job).and_then(|j| j.runs.get(run_id)) else {
            return Err(CommandError::NotFound(format!("run {run_id} of job {job}")));
        };
        if entry.run.state.is_finished() {
            return Err(CommandError::Conflict(format!(
                "run {run_id} of job {job} is {}",
                entry.run.state.as_str()
            )));
        }
        // A second kill (a double click, a retry) changes nothing: 409, so
        // only the first is audited as done.
        if let Some(kill) = &entry.run.kill {
            return Err(CommandError::Conflict(format!(
                "run {run_id} of job {job} is already being killed ({kill})"
            )));
        }
        let task = entry.run.current().map(|a| a.task_id.clone()).filter(|t| {
            self.tasks
                .get(t.as_str())
                .is_some_and(|e| !e.record.is_terminal())
        });
        let timed_out = why.starts_with("timed out");
        self.update_run(job, run_id, |run| {
            run.kill = Some(why.to_string());
            if task.is_none() {
                run.state = if timed_out {
                    RunState::TimedOut
                } else {
                    RunState::Killed
                };
                run.reason = Some(why.to_string());
                run.finished_at = Some(at);
                run.retry_at = None;
            }
        });
        if let Some(task) = task {
            self.request_kill(&task, why, now);
        }
        self.out.dirty = true;
        Ok(())
    }

    /// A job task's stored record changed: its run follows.
    pub(super) fn job_task_changed(&mut self, record: &TaskRecord, now: Instant) {
        let Some((job, run_id, n)) = attempt_of(record.task_id.as_str()) else {
            return;
        };
        let (job, run_id) = (job.to_string(), run_id.to_string());
        if !self.jobs.jobs.contains_key(&job) {
            return;
        }
        if self.apply_task_to_run(&job, &run_id, n, record, now) {
            self.write_run(&job, &run_id);
        }
    }

    /// Applies a task record's state to its attempt and run; true when the
    /// run changed.
    fn apply_task_to_run(
        &mut self,
        job: &str,
        run_id: &str,
        n: u32,
        record: &TaskRecord,
        now: Instant,
    ) -> bool {
        let last = record.timeline.last();
        let message = last.and_then(|e| e.message.clone());
        // The master killed it with the framework (`removed`): the run
        // says so in the words of every wholesale end.
        let cause = last
            .filter(|e| e.reason == Some(task_status::Reason::FrameworkRemoved))
            .map(|e| {
                format!(
                    "framework removed by the master ({})",
                    e.message.as_deref().unwrap_or("no message")
                )
            });
        self.move_attempt(job, run_id, n, record.state, message, cause, now)
    }

    /// Attempt `n` of a run whose task vanished with the framework ends
    /// in `state`, `why` its message and (without a retry) the run's
    /// reason; true when the run changed.
    fn end_attempt(
        &mut self,
        job: &str,
        run_id: &str,
        n: u32,
        state: TaskState,
        why: String,
        now: Instant,
    ) -> bool {
        self.move_attempt(job, run_id, n, state, Some(why.clone()), Some(why), now)
    }

    /// Moves attempt `n` of a run to the task state `state` (`message`:
    /// the update's); a terminal state ends the run or records the next
    /// attempt. `cause`, when set, names why a failed run failed instead
    /// of the state and message. True when the run changed.
    #[allow(clippy::too_many_arguments)]
    fn move_attempt(
        &mut self,
        job: &str,
        run_id: &str,
        n: u32,
        state: TaskState,
        message: Option<String>,
        cause: Option<String>,
        now: Instant,
    ) -> bool {
        let at = self.unix(now);
        let Some(job_entry) = self.jobs.jobs.get(job) else {
            return false;
        };
        let spec = job_entry.record.spec.clone();
        let Some(entry) = job_entry.runs.get(run_id) else {
            return false;
        };
        let run = entry.run.as_ref();
        let Some(attempt) = run.attempts.get(n as usize - 1) else {
            return false;
        };
        let state_name = state.as_str_name().to_string();
        if attempt.task_state.as_deref() == Some(state_name.as_str()) {
            return false;
        }
        let current = run.attempts.len() == n as usize;
        let exit = message.as_deref().and_then(jobs::exit_status);
        let terminal = is_terminal(state);
        let mut lateness = None;
        let mut outcome = None;
        let mut change = run.clone();
        {
            let attempt = &mut change.attempts[n as usize - 1];
            attempt.task_state = Some(state_name);
            if state == TaskState::TaskRunning && attempt.running_at.is_none() {
                attempt.running_at = Some(at);
                if n == 1 {
                    lateness = Some((at - change.trigger.at()).max(0.0));
                }
            }
            if terminal {
                attempt.ended_at = Some(at);
                attempt.exit_status = exit;
                attempt.message = message.clone();
            }
        }
        if current && !change.state.is_finished() {
            if state == TaskState::TaskRunning {
                change.state = RunState::Running;
            } else if terminal {
                let failed = state != TaskState::TaskFinished;
                if let Some(kill) = change.kill.clone() {
                    change.state = if kill.starts_with("timed out") {
                        RunState::TimedOut
                    } else {
                        RunState::Killed
                    };
                    change.reason = Some(kill);
                    change.finished_at = Some(at);
                } else if !failed {
                    change.state = RunState::Succeeded;
                    change.reason = Some("exit status 0".into());
                    change.finished_at = Some(at);
                } else if n <= spec.retries.count {
                    let delay = spec.retries.delay(n);
                    change.state = RunState::Starting;
                    change.retry_at = Some(at + delay.as_secs_f64());
                    change.attempts.push(Attempt {
                        number: n + 1,
                        task_id: attempt_task_id(job, run_id, n + 1),
                        created_at: at,
                        running_at: None,
                        ended_at: None,
                        task_state: None,
                        exit_status: None,
                        message: None,
                    });
                } else {
                    change.state = RunState::Failed;
                    change.reason = Some(match (cause, exit, &message) {
                        (Some(cause), _, _) => cause,
                        (None, Some(code), _) => format!("exit status {code}"),
                        (None, None, Some(m)) => format!("{}: {m}", state.as_str_name()),
                        (None, None, None) => state.as_str_name().to_string(),
                    });
                    change.finished_at = Some(at);
                }
                if change.state.is_finished() {
                    outcome = Some(change.state);
                }
            }
        }
        if let Some(late) = lateness {
            self.stats.job_lateness.push((job.to_string(), late));
        }
        if let Some(state) = outcome {
            self.stats
                .job_outcomes
                .push((job.to_string(), state.as_str()));
            let reason = change.reason.clone().unwrap_or_default();
            self.log(
                EventKind::Task,
                format!("job {job} run {run_id} {}: {reason}", state.as_str()),
                now,
            );
        }
        self.update_run(job, run_id, |run| *run = change);
        self.out.dirty = true;
        true
    }

    /// The periodic work: triggers, deadlines, timeouts, retries, the
    /// runs' tasks, writes to repeat. Runs once both the jobs and the task
    /// records are known.
    pub(super) fn jobs_pass(&mut self, now: Instant) {
        if !self.jobs.loaded || !self.tasks.is_loaded() {
            return;
        }
        let at = self.unix(now);
        let now_secs = at.floor() as i64;
        let names: Vec<String> = self.jobs.jobs.keys().cloned().collect();
        for name in names {
            self.fire_triggers(&name, now_secs, now);
            self.watch_runs(&name, at, now);
        }
    }

    fn fire_triggers(&mut self, name: &str, now_secs: i64, now: Instant) {
        let at = self.unix(now);
        for _ in 0..TRIGGERS_PER_PASS {
            let Some(entry) = self.jobs.jobs.get(name) else {
                return;
            };
            if entry.version.is_none() {
                return;
            }
            let Some(next) = jobs::next_trigger(&entry.record, entry.last_trigger) else {
                return;
            };
            if next > now_secs {
                return;
            }
            let Some(schedule) = entry.record.spec.schedule.clone() else {
                return;
            };
            // `forbid` judges a trigger by the runs still going: not before
            // the master has told this subscription whether their tasks
            // are (a task that ended while no leader listened would skip
            // the trigger for nothing). The trigger waits, within its
            // starting deadline, and is judged once they are heard from.
            if schedule.concurrency == Concurrency::Forbid
                && at - next as f64 <= schedule.starting_deadline.as_secs_f64()
                && self.unheard_run(name).is_some()
            {
                return;
            }
            if let Some(e) = self.jobs.jobs.get_mut(name) {
                e.last_trigger = Some(next);
            }
            let run_id = RunId::scheduled(next);
            let trigger = Trigger::Schedule { at: next as f64 };
            let mut run = self.new_run(name, run_id.clone(), trigger, at);
            let late = at - next as f64;
            let active: Vec<String> = self.jobs.jobs[name]
                .runs
                .values()
                .filter(|r| !r.run.state.is_finished())
                .map(|r| r.run.run_id.clone())
                .collect();
            if late > schedule.starting_deadline.as_secs_f64() {
                run.state = RunState::Missed;
                run.reason = Some(format!(
                    "missed: not started within {} of its trigger",
                    humantime::format_duration(schedule.starting_deadline)
                ));
                run.finished_at = Some(at);
                run.attempts.clear();
            } else if !active.is_empty() && schedule.concurrency == Concurrency::Forbid {
                run.state = RunState::Skipped;
                run.reason = Some(format!(
                    "skipped: concurrency (run {} still going)",
                    active.join(", ")
                ));
                run.finished_at = Some(at);
                run.attempts.clear();
            } else if schedule.concurrency == Concurrency::Replace {
                for old in &active {
                    let why = format!("replaced by run {run_id}");
                    if self.kill_run(name, old, &why, now).is_ok() {
                        self.write_run(name, old);
                    }
                }
            }
            if run.state.is_finished() {
                self.stats
                    .job_outcomes
                    .push((name.to_string(), run.state.as_str()));
            }
            let what = match run.state {
                RunState::Starting => "fires".to_string(),
                other => format!("is {}", other.as_str()),
            };
            self.log(
                EventKind::Service,
                format!("job {name} trigger {run_id} {what}"),
                now,
            );
            self.record_run(run, None);
        }
    }

    /// A run of `name` still going whose task the master has not spoken
    /// of in this subscription (no update or reconciliation answer since it
    /// began, and no write of the record made in it): its run ID. `None`
    /// when every such task was heard from, or the run has no live task
    /// (a retry waiting). Not subscribed: any run with a live task.
    fn unheard_run(&self, name: &str) -> Option<String> {
        let since = self.framework.subscription.as_ref().map(|s| s.since);
        let heard = |e: &super::table::TaskEntry| {
            since
                .is_some_and(|s| e.confirmed_at.is_some_and(|c| c >= s) || e.record.updated_at >= s)
        };
        self.jobs
            .jobs
            .get(name)?
            .runs
            .values()
            .filter(|r| !r.run.state.is_finished())
            .find(|r| {
                r.run
                    .current()
                    .and_then(|a| self.tasks.get(a.task_id.as_str()))
                    .is_some_and(|e| !e.record.is_terminal() && !heard(e))
            })
            .map(|r| r.run.run_id.clone())
    }

    /// Deadlines, timeouts, retries and the runs' tasks.
    fn watch_runs(&mut self, name: &str, at: f64, now: Instant) {
        let Some(entry) = self.jobs.jobs.get(name) else {
            return;
        };
        let spec = entry.record.spec.clone();
        let deadline = spec.schedule.as_ref().map(|s| s.starting_deadline);
        let runs: Vec<(String, Arc<RunRecord>, bool)> = entry
            .runs
            .values()
            .filter(|r| !r.run.state.is_finished() || r.again)
            .map(|r| (r.run.run_id.clone(), r.run.clone(), r.again && !r.writing))
            .collect();
        for (run_id, run, rewrite) in runs {
            if rewrite {
                self.write_run(name, &run_id);
            }
            if run.state.is_finished() {
                continue;
            }
            let Some(attempt) = run.current() else {
                continue;
            };
            let task = self
                .tasks
                .get(attempt.task_id.as_str())
                .map(|e| e.record.clone());
            if let Some(task) = &task {
                // An update stored by an earlier term, or before the run
                // was read.
                let n = attempt.number;
                if self.apply_task_to_run(name, &run_id, n, task, now) {
                    self.write_run(name, &run_id);
                }
                continue;
            }
            if let Some(deadline) = deadline
                && past_starting_deadline(&spec, &run, at)
                && run.kill.is_none()
            {
                // Recorded but never launched in time: missed, not late.
                let reason = format!(
                    "missed: not started within {} of its trigger",
                    humantime::format_duration(deadline)
                );
                self.update_run(name, &run_id, |r| {
                    r.state = RunState::Missed;
                    r.reason = Some(reason.clone());
                    r.finished_at = Some(at);
                });
                self.stats.job_outcomes.push((name.to_string(), "missed"));
                self.log(
                    EventKind::Service,
                    format!("job {name} run {run_id} missed"),
                    now,
                );
                self.write_run(name, &run_id);
                continue;
            }
        }
        // Timeouts (launched or not).
        let launched: Vec<(String, TaskId)> = self
            .jobs
            .jobs
            .get(name)
            .map(|e| {
                e.runs
                    .values()
                    .filter(|r| !r.run.state.is_finished() && r.run.kill.is_none())
                    .filter(|r| {
                        spec.timeout
                            .is_some_and(|t| at - r.run.created_at > t.as_secs_f64())
                    })
                    .filter_map(|r| {
                        r.run
                            .current()
                            .map(|a| (r.run.run_id.clone(), a.task_id.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (run_id, _task) in launched {
            if let Some(timeout) = spec.timeout {
                let why = format!("timed out after {}", humantime::format_duration(timeout));
                if self.kill_run(name, &run_id, &why, now).is_ok() {
                    self.write_run(name, &run_id);
                }
            }
        }
    }

    /// Deletes the oldest finished runs beyond the job's `history` (never
    /// the newest scheduled run: the next trigger counts from it).
    fn trim_history(&mut self, job: &str) {
        let Some(entry) = self.jobs.jobs.get_mut(job) else {
            return;
        };
        let keep = entry.record.spec.history as usize;
        let newest_scheduled = entry
            .runs
            .keys()
            .filter(|id| RunId::scheduled_at(id).is_some())
            .max()
            .cloned();
        let finished: Vec<String> = entry
            .runs
            .values()
            .filter(|r| r.run.state.is_finished() && !r.writing && r.version.is_some())
            .map(|r| r.run.run_id.clone())
            .collect();
        if finished.len() <= keep {
            return;
        }
        let excess = finished.len() - keep;
        let doomed: Vec<RunEntry> = finished
            .into_iter()
            .filter(|id| Some(id) != newest_scheduled.as_ref())
            .take(excess)
            .filter_map(|id| entry.runs.remove(&id))
            .collect();
        for run in doomed {
            self.store(
                StoreOp::DeleteRun(run.run.key(), Expect::Any),
                Pending::Jobs(Step::DeleteRun),
            );
        }
    }

    /// The attempts the scheduling pass may place: stored, not launched
    /// (no task record), past their retry time, not killed.
    pub(super) fn job_demands(&self, now: Instant) -> Vec<JobDemand> {
        if !self.jobs.loaded {
            return Vec::new();
        }
        let at = self.unix(now);
        let mut out = Vec::new();
        for job in self.jobs.jobs.values() {
            for entry in job.runs.values() {
                let run = &entry.run;
                if run.state != RunState::Starting || run.kill.is_some() {
                    continue;
                }
                let Some(attempt) = run.current() else {
                    continue;
                };
                if entry.stored_attempts < attempt.number as usize
                    || run.retry_at.is_some_and(|t| t > at)
                    || self.tasks.contains(&attempt.task_id)
                    || past_starting_deadline(&job.record.spec, run, at)
                {
                    continue;
                }
                let mut spec = run_task_spec(&job.record.spec, run);
                spec.name = job.record.spec.name.clone();
                out.push(JobDemand {
                    key: run.key(),
                    attempt: attempt.number,
                    spec,
                });
            }
        }
        out
    }

    /// The task ID and spec of a placed job attempt (`key` is
    /// `<job>.<run-id>`), if it may still launch at `at` (seconds since
    /// the UNIX epoch): not past its starting deadline.
    pub(super) fn job_launch(
        &self,
        key: &str,
        attempt: u32,
        at: f64,
    ) -> Option<(TaskId, ServiceSpec)> {
        let (job, run_id) = key.split_once('.')?;
        let entry = self.jobs.jobs.get(job)?;
        let run = &entry.runs.get(run_id)?.run;
        let current = run.current()?;
        (current.number == attempt
            && run.state == RunState::Starting
            && run.kill.is_none()
            && !past_starting_deadline(&entry.record.spec, run, at))
        .then(|| {
            (
                current.task_id.clone(),
                run_task_spec(&entry.record.spec, run),
            )
        })
    }
}

/// True when `run`, a scheduled run of `spec` whose first attempt has not
/// launched, may no longer launch at `at` (seconds since the UNIX epoch):
/// past its schedule's `starting_deadline` after the trigger. It is then
/// `missed` (`docs/jobs.md`); the once-a-second tick records that, and
/// placement and launch refuse it meanwhile (a run was launched 1.2 s past
/// its deadline between two ticks: a fresh user's trial).
fn past_starting_deadline(spec: &JobSpec, run: &RunRecord, at: f64) -> bool {
    let (Trigger::Schedule { at: trigger }, Some(schedule), Some(attempt)) =
        (&run.trigger, &spec.schedule, run.current())
    else {
        return false;
    };
    attempt.number == 1 && at - trigger > schedule.starting_deadline.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_task_ids_name_job_run_and_attempt() {
        let id = attempt_task_id("report", "20261201T200000Z-m0000ab", 3);
        assert_eq!(id.as_str(), "report.20261201T200000Z-m0000ab.3");
        assert_eq!(
            attempt_of(id.as_str()),
            Some(("report", "20261201T200000Z-m0000ab", 3))
        );
        // A service task's ID is no attempt.
        assert_eq!(
            attempt_of("web.0.6f1c2d3e-0000-4000-8000-000000000000"),
            None
        );
    }

    #[test]
    fn extra_arguments_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "name": "r", "command": "echo", "cpus": 0.1, "mem": 32, "env": {"A": "1"}
        }))
        .unwrap();
        let mut run = RunRecord {
            job: "r".into(),
            run_id: "x".into(),
            trigger: Trigger::Schedule { at: 0.0 },
            state: RunState::Starting,
            reason: None,
            created_at: 0.0,
            finished_at: None,
            args: vec!["a b".into(), "$HOME".into()],
            env: [("B".to_string(), "2".to_string())].into(),
            attempts: vec![],
            retry_at: None,
            kill: None,
        };
        let task = run_task_spec(&spec, &run);
        assert_eq!(
            task.command,
            CommandSpec::Shell("echo 'a b' '$HOME'".into())
        );
        assert_eq!(task.env.len(), 2);
        run.args.clear();
        assert_eq!(
            run_task_spec(&spec, &run).command,
            CommandSpec::Shell("echo".into())
        );
    }
}
