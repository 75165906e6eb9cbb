//! The Jobs pages (`docs/jobs.md`, issue 28 §4): the browser twins of
//! `/api/v1/jobs…` ([`super::jobs`]).
//!
//! - `GET /jobs`: each job's schedule, next run, last run and its state,
//!   counts of the kept runs, and the Run now / Enable / Disable buttons.
//! - `GET /jobs/{name}`: the job's spec and its run history, each run with
//!   its attempts and links to each attempt's task and sandbox logs.
//! - `GET /jobs/{name}/runs/{run_id}`: one run, its attempts, and the tail
//!   of the latest attempt's `stdout` and `stderr` (read as the task logs
//!   page reads them, [`super::logs`]).
//! - `GET /jobs/{name}/runs/{run_id}/kill`: the confirmation page of a
//!   kill, naming the task that dies.
//!
//! The buttons post forms: `POST /jobs/{name}/run`, `/jobs/{name}/enable`,
//! `/jobs/{name}/disable` and `/jobs/{name}/runs/{run_id}/kill`. Each
//! passes the checks of every browser action ([`AdminForm`]: Origin, CSRF,
//! the admin session or the loopback rule, leadership, the reason's
//! length), sends the API's request to the core, writes the API's audit
//! entry (who, via the browser, and the typed reason), and redirects (303)
//! to the page that shows the outcome; a refusal is an HTML error page.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::AppState;
use super::actions::ask;
use super::error::AppError;
use super::extract::{AdminForm, PagePath};
use super::forms::ReasonForm;
use super::jobs::{JobRow, RunView};
use super::logs::{LogQuery, LogView};
use super::pages::{Chrome, with_cookie};
use crate::scheduler::commands::RunRequest;
use crate::scheduler::jobs::{JobStatus, RunRecord, Trigger};
use crate::scheduler::{Request, Snapshot};

/// A job's line on the Jobs page.
pub struct JobItem {
    /// The job's name.
    pub name: String,
    /// `*/1 * * * * (UTC)`, or `on demand`.
    pub schedule: String,
    /// It has a schedule.
    pub scheduled: bool,
    /// Its schedule fires.
    pub enabled: bool,
    /// `allow`, `forbid` or `replace`; empty without a schedule.
    pub concurrency: &'static str,
    /// The next trigger, seconds since the UNIX epoch.
    pub next_run_at: Option<f64>,
    /// The newest run.
    pub last: Option<RunItem>,
    /// Runs starting or running.
    pub active_runs: usize,
    /// `3 succeeded, 1 failed`, or empty.
    pub counts: String,
}

impl JobItem {
    fn new(job: &JobStatus, s: &Snapshot) -> JobItem {
        let row = JobRow::new(job, s);
        let schedule = match (&row.schedule, &row.timezone) {
            (Some(cron), Some(zone)) => format!("{cron} ({zone})"),
            (Some(cron), None) => cron.clone(),
            _ => "on demand".into(),
        };
        let counts = row
            .counts
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect::<Vec<_>>()
            .join(", ");
        JobItem {
            scheduled: row.schedule.is_some(),
            name: row.name,
            schedule,
            enabled: row.enabled,
            concurrency: row.concurrency.unwrap_or(""),
            next_run_at: row.next_run_at,
            last: job.runs.first().map(|r| RunItem::new(r, s)),
            active_runs: row.active_runs,
            counts,
        }
    }
}

/// A run as the pages show it.
pub struct RunItem {
    /// The run's ID.
    pub run_id: String,
    /// `schedule` or `manual, by alice: why`.
    pub trigger: String,
    /// The trigger time.
    pub trigger_at: f64,
    /// `starting`, `running`, `succeeded`, …
    pub state: &'static str,
    /// The CSS class of its badge ([`run_class`]).
    pub class: &'static str,
    /// Why it ended or was not started.
    pub reason: Option<String>,
    /// When it finished.
    pub finished_at: Option<f64>,
    /// Still starting or running (it can be killed).
    pub active: bool,
    /// A retry waits until then.
    pub retry_at: Option<f64>,
    /// Extra arguments of a manual run, joined.
    pub args: String,
    /// The attempts, oldest first.
    pub attempts: Vec<AttemptItem>,
}

/// One attempt as the pages show it.
pub struct AttemptItem {
    /// 1 for the first attempt.
    pub number: u32,
    /// Its task.
    pub task_id: String,
    /// The task's latest Mesos state, `—` before its first update.
    pub task_state: String,
    /// The exit status, when known.
    pub exit_status: Option<i32>,
    /// The terminal update's message.
    pub message: Option<String>,
    /// The agent's host, when known.
    pub hostname: Option<String>,
    /// First TASK_RUNNING.
    pub running_at: Option<f64>,
    /// The terminal update.
    pub ended_at: Option<f64>,
}

impl RunItem {
    fn new(run: &RunRecord, s: &Snapshot) -> RunItem {
        let view = RunView::new(run, s);
        let trigger = match &run.trigger {
            Trigger::Schedule { .. } => "schedule".to_string(),
            Trigger::Manual { by, reason, .. } => match reason {
                Some(why) => format!("manual, by {by}: {why}"),
                None => format!("manual, by {by}"),
            },
        };
        RunItem {
            run_id: view.run_id,
            trigger,
            trigger_at: run.trigger.at(),
            state: view.state.as_str(),
            class: run_class(view.state.as_str()),
            reason: view.reason,
            finished_at: view.finished_at,
            active: !view.state.is_finished(),
            retry_at: view.retry_at,
            args: view.args.join(" "),
            attempts: view
                .attempts
                .into_iter()
                .map(|a| AttemptItem {
                    number: a.attempt.number,
                    task_id: a.attempt.task_id.to_string(),
                    task_state: a.attempt.task_state.clone().unwrap_or_else(|| "—".into()),
                    exit_status: a.attempt.exit_status,
                    message: a.attempt.message.clone(),
                    hostname: a.hostname,
                    running_at: a.attempt.running_at,
                    ended_at: a.attempt.ended_at,
                })
                .collect(),
        }
    }
}

/// The CSS class of a run state's badge.
pub fn run_class(state: &str) -> &'static str {
    match state {
        "succeeded" | "running" => "ok",
        "starting" => "info",
        "skipped" | "missed" | "killed" => "warn",
        "failed" | "timed_out" => "bad",
        _ => "muted",
    }
}

fn find<'a>(s: &'a Snapshot, name: &str) -> Result<&'a JobStatus, AppError> {
    s.jobs
        .iter()
        .find(|j| j.record.spec.name == name)
        .ok_or_else(|| AppError::not_found(format!("no job {name:?}")).html())
}

fn find_run<'a>(job: &'a JobStatus, run_id: &str) -> Result<&'a RunRecord, AppError> {
    job.runs
        .iter()
        .find(|r| r.run_id == run_id)
        .map(|r| &**r)
        .ok_or_else(|| {
            AppError::not_found(format!(
                "job {:?} has no run {run_id:?} (only the last `history` finished runs are kept)",
                job.record.spec.name
            ))
            .html()
        })
}

#[derive(Template, WebTemplate)]
#[template(path = "jobs.html")]
struct JobsPage {
    chrome: Chrome,
    jobs: Vec<JobItem>,
    csrf: String,
}

/// `GET /jobs`.
pub async fn jobs(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let s = state.handle.snapshot();
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let page = JobsPage {
        chrome: Chrome::new(&state, &s, &headers, "jobs", "Jobs", "/api/v1/jobs"),
        jobs: s.jobs.iter().map(|j| JobItem::new(j, &s)).collect(),
        csrf,
    };
    with_cookie(page.into_response(), cookie)
}

#[derive(Template, WebTemplate)]
#[template(path = "job.html")]
struct JobPage {
    chrome: Chrome,
    job: JobItem,
    spec: String,
    runs: Vec<RunItem>,
    csrf: String,
}

/// `GET /jobs/{name}`.
pub async fn job(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(name): PagePath<String>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let job = find(&s, &name)?;
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let json = format!("/api/v1/jobs/{}", crate::util::segment(&name));
    let page = JobPage {
        chrome: Chrome::new(&state, &s, &headers, "jobs", format!("Job {name}"), json),
        job: JobItem::new(job, &s),
        spec: serde_json::to_string_pretty(&job.record.spec).unwrap_or_default(),
        runs: job.runs.iter().map(|r| RunItem::new(r, &s)).collect(),
        csrf,
    };
    Ok(with_cookie(page.into_response(), cookie))
}

/// One log tail on the run page: the read, or why it failed.
pub struct LogTail {
    /// `stdout` or `stderr`.
    pub file: &'static str,
    /// The read.
    pub log: Option<LogView>,
    /// Why there is none.
    pub error: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "job_run.html")]
struct RunPage {
    chrome: Chrome,
    job: String,
    run: RunItem,
    /// The attempt whose logs are shown (the latest with a task).
    shown: Option<String>,
    logs: Vec<LogTail>,
}

/// `GET /jobs/{name}/runs/{run_id}`.
pub async fn run(
    State(state): State<AppState>,
    request: axum::http::request::Parts,
    PagePath((name, run_id)): PagePath<(String, String)>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let job = find(&s, &name)?;
    let run = RunItem::new(find_run(job, &run_id)?, &s);
    let shown = run
        .attempts
        .iter()
        .rev()
        .find(|a| s.tasks.iter().any(|t| t.task_id.as_str() == a.task_id))
        .map(|a| a.task_id.clone());
    let mut logs = Vec::new();
    if let Some(task_id) = &shown {
        for file in ["stdout", "stderr"] {
            let api = format!(
                "/api/v1/tasks/{}/logs/{file}",
                crate::util::segment(task_id)
            );
            let (log, error) =
                match super::logs::load(&state, task_id, file, LogQuery::default(), &api).await {
                    Ok(log) => (Some(log), None),
                    Err(e) => (None, Some(format!("{}: {}", e.title, e.detail))),
                };
            logs.push(LogTail { file, log, error });
        }
    }
    let headers = &request.headers;
    let json = format!(
        "/api/v1/jobs/{}/runs/{}",
        crate::util::segment(&name),
        crate::util::segment(&run_id)
    );
    let title = format!("Run {run_id} of {name}");
    let chrome = Chrome::new(&state, &s, headers, "jobs", title, json);
    let chrome = if run.active { chrome } else { chrome.still() };
    let page = RunPage {
        chrome,
        job: name,
        run,
        shown,
        logs,
    };
    Ok(page.into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "job_kill.html")]
struct KillPage {
    chrome: Chrome,
    job: String,
    run: RunItem,
    csrf: String,
}

/// `GET /jobs/{name}/runs/{run_id}/kill`: the confirmation page, naming
/// the run's task that dies.
pub async fn confirm_kill(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath((name, run_id)): PagePath<(String, String)>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let job = find(&s, &name)?;
    let run = RunItem::new(find_run(job, &run_id)?, &s);
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let title = format!("Confirm: kill run {run_id} of {name}");
    let chrome = Chrome::new(&state, &s, &headers, "jobs", title, "").still();
    let page = KillPage {
        chrome,
        job: name,
        run,
        csrf,
    };
    Ok(with_cookie(page.into_response(), cookie))
}

/// The pages' routes (see the module doc).
pub(super) fn routes() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/jobs", get(jobs))
        .route("/jobs/{name}", get(job))
        .route("/jobs/{name}/run", post(post_run))
        .route("/jobs/{name}/enable", post(post_enable))
        .route("/jobs/{name}/disable", post(post_disable))
        .route("/jobs/{name}/runs/{run_id}", get(run))
        .route(
            "/jobs/{name}/runs/{run_id}/kill",
            get(confirm_kill).post(post_kill),
        )
}

fn to(path: String) -> Response {
    Redirect::to(&path).into_response()
}

fn job_path(name: &str) -> String {
    format!("/jobs/{}", crate::util::segment(name))
}

fn run_path(name: &str, run_id: &str) -> String {
    format!(
        "/jobs/{}/runs/{}",
        crate::util::segment(name),
        crate::util::segment(run_id)
    )
}

/// `POST /jobs/{name}/run`: Run now (no extra arguments); to the new run's page.
pub async fn post_run(
    PagePath(name): PagePath<String>,
    post: AdminForm<ReasonForm>,
) -> Result<Response, AppError> {
    let by = post.ctx.actor.name.clone();
    let request = RunRequest {
        job: name.clone(),
        args: Vec::new(),
        env: Default::default(),
        by: by.clone(),
        reason: post.ctx.reason.clone(),
    };
    let result = ask::<RunRecord>(&post.state, Request::StartRun(Box::new(request)))
        .await
        .map_err(|e| AppError::from_command(e, &post.path));
    let params = serde_json::json!({ "name": name, "args": 0, "env": [] });
    super::audit::record_result(
        &post.state,
        &post.ctx,
        "job.run",
        params,
        &result,
        StatusCode::OK,
        || {
            let id = result.as_ref().map(|r| r.run_id.as_str()).unwrap_or("");
            format!("job {name} run {id} (manual, by {by})")
        },
    )
    .await;
    let run = result.map_err(AppError::html)?;
    Ok(to(run_path(&name, &run.run_id)))
}

async fn set_enabled(
    name: String,
    post: AdminForm<ReasonForm>,
    enabled: bool,
) -> Result<Response, AppError> {
    let result = ask::<bool>(
        &post.state,
        Request::SetJobEnabled {
            name: name.clone(),
            enabled,
        },
    )
    .await
    .map_err(|e| AppError::from_command(e, &post.path));
    let (action, outcome) = if enabled {
        ("job.enable", "enabled")
    } else {
        ("job.disable", "disabled")
    };
    let params = serde_json::json!({ "name": name });
    super::audit::record_result(
        &post.state,
        &post.ctx,
        action,
        params,
        &result,
        StatusCode::OK,
        || format!("job {name} {outcome}"),
    )
    .await;
    result.map_err(AppError::html)?;
    Ok(to(job_path(&name)))
}

/// `POST /jobs/{name}/enable`: to the job's page.
pub async fn post_enable(
    PagePath(name): PagePath<String>,
    post: AdminForm<ReasonForm>,
) -> Result<Response, AppError> {
    set_enabled(name, post, true).await
}

/// `POST /jobs/{name}/disable`: to the job's page.
pub async fn post_disable(
    PagePath(name): PagePath<String>,
    post: AdminForm<ReasonForm>,
) -> Result<Response, AppError> {
    set_enabled(name, post, false).await
}

/// `POST /jobs/{name}/runs/{run_id}/kill` (from the confirmation page): to
/// the run's page.
pub async fn post_kill(
    PagePath((name, run_id)): PagePath<(String, String)>,
    post: AdminForm<ReasonForm>,
) -> Result<Response, AppError> {
    let by = match &post.ctx.reason {
        Some(why) => format!("killed by {}: {why}", post.ctx.actor.name),
        None => format!("killed by {}", post.ctx.actor.name),
    };
    let result = ask::<RunRecord>(
        &post.state,
        Request::KillRun {
            name: name.clone(),
            run_id: run_id.clone(),
            by,
        },
    )
    .await
    .map_err(|e| AppError::from_command(e, &post.path));
    let params = serde_json::json!({ "name": name, "run_id": run_id });
    super::audit::record_result(
        &post.state,
        &post.ctx,
        "job.kill",
        params,
        &result,
        StatusCode::OK,
        || format!("job {name} run {run_id} killed"),
    )
    .await;
    result.map_err(AppError::html)?;
    Ok(to(run_path(&name, &run_id)))
}
