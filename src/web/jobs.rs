//! The jobs API (`docs/jobs.md#api`): job specs, their runs, run now,
//! kill, enable and disable. Reads answer from the latest snapshot and are
//! open; changes need the admin rights of service changes ([`super::auth`])
//! and are audited with who and why.
//!
//! | method | path | answers |
//! |---|---|---|
//! | GET | `/api/v1/jobs` | 200 [`JobsView`] |
//! | GET | `/api/v1/jobs/{name}` | 200 [`JobView`]; 404 |
//! | PUT | `/api/v1/jobs/{name}` | 201 created, 200 replaced; 400 field errors; 401; 403; 409 a service has the name; 415; 503 |
//! | DELETE | `/api/v1/jobs/{name}` | 200; 404; 401; 403; 503 |
//! | POST | `/api/v1/jobs/{name}/{enable,disable}` | 200; 404; 409 no schedule |
//! | POST | `/api/v1/jobs/{name}/runs` | 201 [`RunView`]; 400; 404 |
//! | GET | `/api/v1/jobs/{name}/runs` | 200 [`RunsView`]; 404 |
//! | GET | `/api/v1/jobs/{name}/runs/{run_id}` | 200 [`RunView`]; 404 |
//! | POST | `/api/v1/jobs/{name}/runs/{run_id}/kill` | 200 [`RunView`]; 404; 409 finished |

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::actions::ask;
use super::error::AppError;
use super::extract::{
    ActionBody, AdminChange, ApiPath, JsonBody, NoFields, json_field_error, named_spec_body,
};
use super::query::{NoQuery, StrictQuery};
use crate::scheduler::FieldError;
use crate::scheduler::commands::RunRequest;
use crate::scheduler::jobs::{Attempt, JobStatus, RunRecord, RunState, Trigger};
use crate::scheduler::spec::job::{JobSpec, ValidJobSpec};
use crate::scheduler::{Request, Snapshot};

/// Most extra arguments of a manual run.
pub const MAX_RUN_ARGS: usize = 100;
/// Most extra environment variables of a manual run.
pub const MAX_RUN_ENV: usize = 100;
/// Longest extra argument or environment value (bytes).
pub const MAX_RUN_VALUE: usize = 4096;

/// `GET /api/v1/jobs`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobsView {
    /// The jobs, by name.
    pub jobs: Vec<JobRow>,
}

/// One job without its runs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobRow {
    /// The job.
    pub name: String,
    /// Its spec as stored.
    pub spec: JobSpec,
    /// The cron expression, `None` without a schedule.
    pub schedule: Option<String>,
    /// The schedule's time zone.
    pub timezone: Option<String>,
    /// True when the schedule fires (`false` also without a schedule).
    pub enabled: bool,
    /// The schedule's concurrency policy.
    pub concurrency: Option<&'static str>,
    /// The next trigger, seconds since the UNIX epoch.
    pub next_run_at: Option<f64>,
    /// The newest run.
    pub last_run: Option<RunView>,
    /// Runs starting or running.
    pub active_runs: usize,
    /// Finished kept runs by state (`succeeded`, `failed`, …).
    pub counts: BTreeMap<&'static str, usize>,
}

/// `GET /api/v1/jobs/{name}`: the row and its runs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobView {
    /// The row.
    #[serde(flatten)]
    pub row: JobRow,
    /// The kept runs, newest first.
    pub runs: Vec<RunView>,
}

/// `GET /api/v1/jobs/{name}/runs`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunsView {
    /// The job.
    pub job: String,
    /// The kept runs, newest first.
    pub runs: Vec<RunView>,
}

/// One run as the API shows it: the record, and per attempt where its
/// task ran and its sandbox logs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunView {
    /// The job.
    pub job: String,
    /// The run ID.
    pub run_id: String,
    /// What started it.
    pub trigger: Trigger,
    /// Its state.
    pub state: RunState,
    /// Why it ended or was not started.
    pub reason: Option<String>,
    /// When it was recorded.
    pub created_at: f64,
    /// When it finished.
    pub finished_at: Option<f64>,
    /// Extra arguments (manual runs).
    pub args: Vec<String>,
    /// Extra environment (manual runs).
    pub env: BTreeMap<String, String>,
    /// When a retry waiting for its backoff is due.
    pub retry_at: Option<f64>,
    /// The attempts, oldest first.
    pub attempts: Vec<AttemptView>,
}

/// One attempt, with its task's agent and log links.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AttemptView {
    /// The stored attempt.
    #[serde(flatten)]
    pub attempt: Attempt,
    /// The agent its task was launched on, once known.
    pub agent_id: Option<String>,
    /// That agent's host name.
    pub hostname: Option<String>,
    /// The sandbox log pages of its task (`/tasks/{id}/logs/{file}`).
    pub logs: BTreeMap<&'static str, String>,
}

impl RunView {
    /// The view of `run`, its attempts' tasks looked up in `s`.
    pub fn new(run: &RunRecord, s: &Snapshot) -> RunView {
        let attempts = run
            .attempts
            .iter()
            .map(|a| {
                let task = s
                    .tasks
                    .binary_search_by(|t| t.task_id.as_str().cmp(a.task_id.as_str()))
                    .ok()
                    .map(|i| &s.tasks[i]);
                let link = |file: &str| format!("/tasks/{}/logs/{file}", a.task_id);
                AttemptView {
                    attempt: a.clone(),
                    agent_id: task.map(|t| t.agent_id.to_string()),
                    hostname: task.map(|t| t.hostname.clone()),
                    logs: [("stdout", link("stdout")), ("stderr", link("stderr"))].into(),
                }
            })
            .collect();
        RunView {
            job: run.job.clone(),
            run_id: run.run_id.clone(),
            trigger: run.trigger.clone(),
            state: run.state,
            reason: run.reason.clone(),
            created_at: run.created_at,
            finished_at: run.finished_at,
            args: run.args.clone(),
            env: run.env.clone(),
            retry_at: run.retry_at,
            attempts,
        }
    }
}

impl JobRow {
    /// The row of `job`.
    pub fn new(job: &JobStatus, s: &Snapshot) -> JobRow {
        let spec = &job.record.spec;
        let schedule = spec.schedule.as_ref();
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for run in job.runs.iter().filter(|r| r.state.is_finished()) {
            *counts.entry(run.state.as_str()).or_default() += 1;
        }
        JobRow {
            name: spec.name.clone(),
            spec: spec.clone(),
            schedule: schedule.map(|s| s.cron.clone()),
            timezone: schedule.map(|s| s.timezone.clone()),
            enabled: schedule.is_some_and(|s| s.enabled),
            concurrency: schedule.map(|s| s.concurrency.as_str()),
            next_run_at: job.next_run_at,
            last_run: job.runs.first().map(|r| RunView::new(r, s)),
            active_runs: job.runs.iter().filter(|r| !r.state.is_finished()).count(),
            counts,
        }
    }
}

fn find<'a>(s: &'a Snapshot, name: &str) -> Result<&'a JobStatus, AppError> {
    s.jobs
        .iter()
        .find(|j| j.record.spec.name == name)
        .ok_or_else(|| AppError::not_found(format!("no job {name:?}")))
}

/// `GET /api/v1/jobs`.
#[utoipa::path(
    get,
    path = "/api/v1/jobs",
    tag = "jobs",
    responses((status = 200, description = "The jobs", body = JobsView), crate::web::error::responses::BadRequest)
)]
pub async fn list(State(state): State<AppState>, _: StrictQuery<NoQuery>) -> Json<JobsView> {
    let s = state.handle.snapshot();
    Json(JobsView {
        jobs: s.jobs.iter().map(|j| JobRow::new(j, &s)).collect(),
    })
}

/// `GET /api/v1/jobs/{name}`.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{name}",
    tag = "jobs",
    params(("name" = String, Path, description = "The job")),
    responses((status = 200, description = "The job and its runs", body = JobView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound)
)]
pub async fn get(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<JobView>, AppError> {
    let s = state.handle.snapshot();
    let job = find(&s, &name)?;
    Ok(Json(JobView {
        row: JobRow::new(job, &s),
        runs: job.runs.iter().map(|r| RunView::new(r, &s)).collect(),
    }))
}

/// `GET /api/v1/jobs/{name}/runs`.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{name}/runs",
    tag = "jobs",
    params(("name" = String, Path, description = "The job")),
    responses((status = 200, description = "The job's runs", body = RunsView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound)
)]
pub async fn runs(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<RunsView>, AppError> {
    let s = state.handle.snapshot();
    let job = find(&s, &name)?;
    Ok(Json(RunsView {
        job: name,
        runs: job.runs.iter().map(|r| RunView::new(r, &s)).collect(),
    }))
}

/// `GET /api/v1/jobs/{name}/runs/{run_id}`.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{name}/runs/{run_id}",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), ("run_id" = String, Path, description = "The run")),
    responses((status = 200, description = "The run", body = RunView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound)
)]
pub async fn run(
    State(state): State<AppState>,
    ApiPath((name, run_id)): ApiPath<(String, String)>,
) -> Result<Json<RunView>, AppError> {
    let s = state.handle.snapshot();
    let job = find(&s, &name)?;
    let run = job
        .runs
        .iter()
        .find(|r| r.run_id == run_id)
        .ok_or_else(|| AppError::not_found(format!("job {name:?} has no run {run_id:?}")))?;
    Ok(Json(RunView::new(run, &s)))
}

/// What a job change answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobChange {
    /// The job.
    pub name: String,
    /// `created`, `replaced`, `deleted`, `enabled` or `disabled`.
    pub outcome: &'static str,
}

/// `PUT /api/v1/jobs/{name}[?reason=…]`: create or replace a job. The body
/// is a job spec; `name` may be left out (taken from the path) but must
/// match it when given. 201 created, 200 replaced, 400 field errors.
#[utoipa::path(
    put,
    path = "/api/v1/jobs/{name}",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), crate::web::extract::ReasonQuery),
    request_body(content = JobSpec, description = "The job spec; `name` may be left out", content_type = "application/json"),
    responses((status = 200, description = "Replaced", body = JobChange), (status = 201, description = "Created", body = JobChange), crate::web::error::responses::BadRequest, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn put(
    ApiPath(name): ApiPath<String>,
    AdminChange { admin, ctx }: AdminChange,
    JsonBody(body): JsonBody,
) -> Result<Response, AppError> {
    let value = named_spec_body(body, &name, "job spec")?;
    let spec: JobSpec = crate::util::json::from_value(value).map_err(json_field_error)?;
    let spec = ValidJobSpec::new(spec).map_err(AppError::invalid)?;
    let params = serde_json::json!({
        "name": spec.name,
        "schedule": spec.schedule.as_ref().map(|s| &s.cron),
        "cpus": spec.cpus,
        "mem": spec.mem,
    });
    let state = &admin.state;
    let result = ask::<bool>(state, Request::PutJob(Box::new(spec)))
        .await
        .map_err(|e| AppError::from_command(e, &admin.path));
    let (status, outcome) = match &result {
        Ok(true) => (StatusCode::OK, "replaced"),
        Ok(false) => (StatusCode::CREATED, "created"),
        Err(e) => (e.status, "failed"),
    };
    super::audit::record_result(state, &ctx, "job.put", params, &result, status, || {
        format!("job {name} {outcome}")
    })
    .await;
    result?;
    Ok((status, Json(JobChange { name, outcome })).into_response())
}

/// `DELETE /api/v1/jobs/{name}[?reason=…]`: delete a job and its runs
/// (running attempts are killed). 404 without such a job.
#[utoipa::path(
    delete,
    path = "/api/v1/jobs/{name}",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), crate::web::extract::ReasonQuery),
    responses((status = 200, description = "Deleted", body = JobChange), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn delete(
    ApiPath(name): ApiPath<String>,
    AdminChange { admin, ctx }: AdminChange,
    _: ActionBody<NoFields>,
) -> Result<Json<JobChange>, AppError> {
    let state = &admin.state;
    let result = ask::<bool>(state, Request::DeleteJob(name.clone()))
        .await
        .map_err(|e| AppError::from_command(e, &admin.path))
        .and_then(|deleted| {
            deleted
                .then_some(())
                .ok_or_else(|| AppError::not_found(format!("no job {name:?}")))
        });
    let params = serde_json::json!({ "name": name });
    super::audit::record_result(
        state,
        &ctx,
        "job.delete",
        params,
        &result,
        StatusCode::OK,
        || format!("job {name} deleted"),
    )
    .await;
    result?;
    Ok(Json(JobChange {
        name,
        outcome: "deleted",
    }))
}

async fn set_enabled(
    name: String,
    AdminChange { admin, ctx }: AdminChange,
    enabled: bool,
) -> Result<Json<JobChange>, AppError> {
    let state = &admin.state;
    let outcome = if enabled { "enabled" } else { "disabled" };
    let result = ask::<bool>(
        state,
        Request::SetJobEnabled {
            name: name.clone(),
            enabled,
        },
    )
    .await
    .map_err(|e| AppError::from_command(e, &admin.path));
    let action = if enabled { "job.enable" } else { "job.disable" };
    let params = serde_json::json!({ "name": name });
    super::audit::record_result(state, &ctx, action, params, &result, StatusCode::OK, || {
        format!("job {name} {outcome}")
    })
    .await;
    result?;
    Ok(Json(JobChange { name, outcome }))
}

/// `POST /api/v1/jobs/{name}/enable[?reason=…]`: 409 for a job without
/// a schedule (nothing to enable).
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{name}/enable",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), crate::web::extract::ReasonQuery),
    responses((status = 200, description = "Enabled", body = JobChange), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn enable(
    ApiPath(name): ApiPath<String>,
    change: AdminChange,
    _: ActionBody<NoFields>,
) -> Result<Json<JobChange>, AppError> {
    set_enabled(name, change, true).await
}

/// `POST /api/v1/jobs/{name}/disable[?reason=…]`: 409 for a job without
/// a schedule (nothing to disable).
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{name}/disable",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), crate::web::extract::ReasonQuery),
    responses((status = 200, description = "Disabled", body = JobChange), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn disable(
    ApiPath(name): ApiPath<String>,
    change: AdminChange,
    _: ActionBody<NoFields>,
) -> Result<Json<JobChange>, AppError> {
    set_enabled(name, change, false).await
}

/// The optional body of `POST /api/v1/jobs/{name}/runs`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// Arguments appended to the job's command.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment added to the job's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl RunBody {
    fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let problem = |field: String, message: &str| FieldError {
            field,
            message: message.into(),
        };
        if self.args.len() > MAX_RUN_ARGS {
            errors.push(problem("args".into(), "at most 100 arguments"));
        }
        for (i, a) in self.args.iter().enumerate() {
            if a.len() > MAX_RUN_VALUE || a.contains('\0') {
                errors.push(problem(format!("args[{i}]"), "at most 4096 bytes, no NUL"));
            }
        }
        if self.env.len() > MAX_RUN_ENV {
            errors.push(problem("env".into(), "at most 100 variables"));
        }
        for (k, v) in &self.env {
            let ok = !k.is_empty()
                && !k.starts_with(|c: char| c.is_ascii_digit())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                errors.push(problem(format!("env.{k}"), "not a valid variable name"));
            } else if v.len() > MAX_RUN_VALUE || v.contains('\0') {
                errors.push(problem(format!("env.{k}"), "at most 4096 bytes, no NUL"));
            }
        }
        errors
    }
}

/// `POST /api/v1/jobs/{name}/runs[?reason=…]`: start a run now. The body
/// is optional ([`RunBody`]). 201 with the run once its record is stored;
/// the audit entry says "manual, by <who>".
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{name}/runs",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), crate::web::extract::ReasonQuery),
    request_body(content = Option<RunBody>, content_type = "application/json"),
    responses((status = 201, description = "The run, stored", body = RunView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn start_run(
    ApiPath(name): ApiPath<String>,
    AdminChange { admin, ctx }: AdminChange,
    ActionBody(body): ActionBody<RunBody>,
) -> Result<Response, AppError> {
    let errors = body.validate();
    if !errors.is_empty() {
        return Err(AppError::invalid(errors));
    }
    let by = ctx.actor.name.clone();
    let params = serde_json::json!({
        "name": name,
        "args": body.args.len(),
        "env": body.env.keys().collect::<Vec<_>>(),
    });
    let state = &admin.state;
    let request = RunRequest {
        job: name.clone(),
        args: body.args,
        env: body.env,
        by: by.clone(),
        reason: ctx.reason.clone(),
    };
    let result = ask::<RunRecord>(state, Request::StartRun(Box::new(request)))
        .await
        .map_err(|e| AppError::from_command(e, &admin.path));
    super::audit::record_result(
        state,
        &ctx,
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
    let run = result?;
    let view = RunView::new(&run, &state.handle.snapshot());
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// `POST /api/v1/jobs/{name}/runs/{run_id}/kill[?reason=…]`: kill a run.
/// 200 with the run (still `starting` or `running` until its task ends).
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{name}/runs/{run_id}/kill",
    tag = "jobs",
    params(("name" = String, Path, description = "The job"), ("run_id" = String, Path, description = "The run"), crate::web::extract::ReasonQuery),
    responses((status = 200, description = "The run, being killed", body = RunView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, crate::web::error::responses::Conflict, crate::web::error::responses::AdminRefusals),
    security(("admin_token" = []), ())
)]
pub async fn kill_run(
    ApiPath((name, run_id)): ApiPath<(String, String)>,
    AdminChange { admin, ctx }: AdminChange,
    _: ActionBody<NoFields>,
) -> Result<Json<RunView>, AppError> {
    let by = match &ctx.reason {
        Some(why) => format!("killed by {}: {why}", ctx.actor.name),
        None => format!("killed by {}", ctx.actor.name),
    };
    let state = &admin.state;
    let result = ask::<RunRecord>(
        state,
        Request::KillRun {
            name: name.clone(),
            run_id: run_id.clone(),
            by,
        },
    )
    .await
    .map_err(|e| AppError::from_command(e, &admin.path));
    let params = serde_json::json!({ "name": name, "run_id": run_id });
    super::audit::record_result(
        state,
        &ctx,
        "job.kill",
        params,
        &result,
        StatusCode::OK,
        || format!("job {name} run {run_id} killed"),
    )
    .await;
    let run = result?;
    Ok(Json(RunView::new(&run, &state.handle.snapshot())))
}
