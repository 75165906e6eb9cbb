//! The service pages (`docs/services-pages.md`, issue 29 §1): create,
//! edit, scale, restart and delete a
//! service from the dashboard, the browser twins of `PUT` / `DELETE
//! /api/v1/services/{name}` ([`super::api`]).
//!
//! - `GET /services/{name}`: one service — counts, health, its rollout,
//!   its live tasks, its spec — and the Edit / Scale / Delete buttons.
//! - `GET /services/_new` and `GET /services/{name}/edit`: the editor, the
//!   spec JSON in a textarea (a sample, or the stored spec). (`_` is not
//!   allowed in a service name, so `_new` never shadows a service.)
//! - `POST /services/_new` and `POST /services/{name}/edit`: the editor's
//!   "Review": the text is validated by the API's own code
//!   ([`super::api::service_spec`]); refused, the editor again (400) with
//!   the text kept and each field error listed with its JSON path and, when
//!   it can be found, its line; accepted, the confirmation page: a line diff
//!   of the stored spec (pretty-printed) against the new one and the tasks
//!   the change replaces or kills.
//! - `POST /services/{name}/apply`: applies the reviewed spec (the
//!   `service.put` audit entry, as the API writes it) and redirects (303)
//!   to the service's page, which shows the rollout.
//! - `GET /services/{name}/scale[?instances=N]`: the number form, then the
//!   confirmation naming the tasks a scale-down kills (chosen by the
//!   scheduler's own rule, [`crate::scheduler::rules::workload::assess`]);
//!   `POST /services/{name}/scale` applies it (`service.scale`).
//! - `GET /services/{name}/delete`: the confirmation naming every task that
//!   dies; `POST` deletes (`service.delete`).
//! - `GET /services/{name}/restart`: the confirmation of a rolling restart,
//!   naming the tasks it replaces; it posts to `POST /actions/restart`
//!   ([`super::forms`]), the same command as `POST
//!   /api/v1/services/{name}/restart`.
//!
//! Every post passes the checks of every browser action ([`AdminForm`]:
//! Origin, CSRF, the admin session or the loopback rule, leadership, the
//! reason's length). A post carries `base`, the version of the stored spec
//! the page showed ([`spec_version`]): when the service changed since, 409
//! and nothing is done, so an operator never applies a diff they did not
//! see. Pages that lead to a change ask for a login first in token mode; on
//! a standby they link to the same page on the leader.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::AppState;
use super::actions::ask;
use super::api::{put_params, service_spec};
use super::auth::{self, Access, Peer};
use super::error::AppError;
use super::extract::{ActionForm, AdminForm, PagePath, PageQuery, not_an_object, parse_json};
use super::pages::{Chrome, can_act, with_cookie};
use super::views::{ServiceRow, ServicesView};
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::workload::assess;
use crate::scheduler::spec::ValidServiceSpec;
use crate::scheduler::spec::bounds;
use crate::scheduler::spec::service::MAX_INSTANCES;
use crate::scheduler::{FieldError, Request, ServiceSpec, Snapshot};

/// The spec the editor offers for a new service: a web server on its one
/// port with an HTTP health check, so that its rollouts are health-gated.
pub const SAMPLE_SPEC: &str = r#"{
  "name": "hello",
  "command": "python3 -m http.server $PORT0",
  "cpus": 0.1,
  "mem": 64,
  "instances": 2,
  "ports": 1,
  "health_check": {"type": "http", "port_index": 0, "path": "/"}
}
"#;

/// Most bytes of spec text the editor takes (the API's body limit is
/// axum's default, 2 MiB; a spec is a few hundred bytes).
pub const MAX_SPEC_TEXT: usize = 256 * 1024;

/// The `base` of a service that does not exist.
const ABSENT: &str = "absent";

/// The version of a stored spec ([`ServiceSpec::version`]), or `absent`:
/// what a confirmation page saw, checked again when it is posted.
pub fn spec_version(spec: Option<&ServiceSpec>) -> String {
    spec.map_or_else(|| ABSENT.to_string(), ServiceSpec::version)
}

/// The stored spec of `name`, if any.
fn stored<'a>(s: &'a Snapshot, name: &str) -> Option<&'a ServiceSpec> {
    s.services
        .iter()
        .map(|x| &x.spec)
        .find(|spec| spec.name == name)
}

fn find_row(s: &Snapshot, name: &str) -> Result<ServiceRow, AppError> {
    ServicesView::new(s)
        .services
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| AppError::absent(s, format_args!("service {name:?}")).html())
}

/// A task as the service pages list it.
pub struct TaskItem {
    /// Its ID.
    pub task_id: String,
    /// Its instance number.
    pub instance: u32,
    /// Its Mesos state, `TASK_RUNNING`.
    pub state: String,
    /// Its health check's last report.
    pub healthy: Option<bool>,
    /// Its agent's host.
    pub hostname: String,
    /// It runs the stored spec's shape (fingerprint).
    pub current: bool,
    /// Why it dies (confirmation pages), or empty.
    pub why: String,
}

impl TaskItem {
    fn new(t: &TaskRecord, fingerprint: &str, why: impl Into<String>) -> TaskItem {
        TaskItem {
            task_id: t.task_id.to_string(),
            instance: t.instance,
            state: t.state.as_str_name().to_string(),
            healthy: t.healthy,
            hostname: t.hostname.clone(),
            current: t.fingerprint == fingerprint,
            why: why.into(),
        }
    }
}

/// The service's live tasks (not terminal, no kill requested), by instance.
fn live_tasks<'a>(s: &'a Snapshot, name: &str) -> Vec<&'a TaskRecord> {
    let mut tasks: Vec<&TaskRecord> = s
        .tasks
        .iter()
        .map(|t| &**t)
        .filter(|t| t.service == name && !t.is_terminal() && t.kill.is_none())
        .collect();
    tasks.sort_by(|a, b| (a.instance, &a.task_id).cmp(&(b.instance, &b.task_id)));
    tasks
}

/// The tasks that die when `old` becomes `new` (`None`: deleted): the
/// ones a scale-down kills, by the scheduler's own choice
/// ([`assess`]); and, when the task shape changed, every other live task,
/// replaced one at a time by the rollout.
fn doomed(s: &Snapshot, old: Option<&ServiceSpec>, new: Option<&ServiceSpec>) -> Vec<TaskItem> {
    let Some(old) = old else {
        return Vec::new();
    };
    let fingerprint = old.fingerprint();
    let live = live_tasks(s, &old.name);
    let Some(new) = new else {
        return live
            .into_iter()
            .map(|t| TaskItem::new(t, &fingerprint, "killed: the service is deleted"))
            .collect();
    };
    let now = crate::util::unix_now_secs();
    let before: Vec<_> = assess(old, live.iter().copied(), now)
        .surplus
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let killed: Vec<_> = assess(new, live.iter().copied(), now)
        .surplus
        .into_iter()
        .filter(|(id, _)| !before.contains(id))
        .collect();
    let reshaped = new.fingerprint() != fingerprint;
    live.into_iter()
        .filter_map(|t| {
            if let Some((_, why)) = killed.iter().find(|(id, _)| *id == t.task_id) {
                Some(TaskItem::new(t, &fingerprint, format!("killed: {why}")))
            } else if reshaped {
                Some(TaskItem::new(
                    t,
                    &fingerprint,
                    "replaced by the rolling rollout (killed once its replacement is available)",
                ))
            } else {
                None
            }
        })
        .collect()
}

/// What a page that leads to a change answers instead of itself: the
/// login (coming back to `next`) in token mode without a session, a 403
/// page when actions are disabled; `None` when the page may show.
fn admin_page(state: &AppState, headers: &HeaderMap, next: &str) -> Option<Response> {
    if state.access == Access::Token && !state.keys.has_session(headers) {
        return Some(Redirect::to(&format!("/login?next={next}")).into_response());
    }
    auth::check_access(state.access, &state.keys, headers, Peer(None), true)
        .err()
        .map(|e| e.html().into_response())
}

fn service_path(name: &str) -> String {
    format!("/services/{}", crate::util::segment(name))
}

#[derive(Template, WebTemplate)]
#[template(path = "service.html")]
struct ServicePage {
    chrome: Chrome,
    svc: ServiceRow,
    tasks: Vec<TaskItem>,
    spec: String,
    can_act: bool,
    csrf: String,
}

/// `GET /services/{name}`.
pub async fn service(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(name): PagePath<String>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let svc = find_row(&s, &name)?;
    let fingerprint = svc.status.spec.fingerprint();
    let tasks = live_tasks(&s, &name)
        .into_iter()
        .map(|t| TaskItem::new(t, &fingerprint, ""))
        .collect();
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let json = format!("/api/v1/services/{}", crate::util::segment(&name));
    let page = ServicePage {
        chrome: Chrome::new(
            &state,
            &s,
            &headers,
            "services",
            format!("Service {name}"),
            json,
        ),
        spec: serde_json::to_string_pretty(&svc.status.spec).unwrap_or_default(),
        svc,
        tasks,
        can_act: can_act(&state, &headers),
        csrf,
    };
    Ok(with_cookie(page.into_response(), cookie))
}

/// A field error as the editor lists it.
pub struct ErrorItem {
    /// The JSON path (`health_check.interval`), `body` for the document.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The line of the text it is about (1-based), when found.
    pub line: Option<usize>,
    /// That line's text.
    pub excerpt: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "service_editor.html")]
struct EditorPage {
    chrome: Chrome,
    /// The service edited; `None` for a new one.
    name: Option<String>,
    text: String,
    base: String,
    /// Why the text was refused (the problem's detail), or empty.
    problem: String,
    /// The line of a syntax error, when the message names it.
    problem_line: Option<usize>,
    errors: Vec<ErrorItem>,
    action: String,
    csrf: String,
    leading: bool,
    leader_url: Option<String>,
}

/// Fields of the editor's and the confirmation's forms.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SpecForm {
    /// The CSRF token.
    pub csrf: String,
    /// The spec's JSON text.
    pub spec: String,
    /// [`spec_version`] of the stored spec the page showed.
    pub base: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

impl ActionForm for SpecForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
    fn reason(&self) -> &str {
        &self.reason
    }
}

fn editor(
    state: &AppState,
    headers: &HeaderMap,
    name: Option<String>,
    text: String,
    base: String,
    refused: Option<&AppError>,
) -> Response {
    let s = state.handle.snapshot();
    let (title, action) = match &name {
        Some(n) => (
            format!("Edit service {n}"),
            format!("{}/edit", service_path(n)),
        ),
        None => ("New service".to_string(), "/services/_new".to_string()),
    };
    let errors = refused
        .map(|e| {
            e.errors
                .iter()
                .map(|f| {
                    let line = locate(&text, &f.field);
                    ErrorItem {
                        field: f.field.clone(),
                        message: f.message.clone(),
                        line,
                        excerpt: line
                            .and_then(|n| text.lines().nth(n - 1))
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let problem = refused
        .filter(|e| e.errors.is_empty())
        .map(|e| e.detail.clone())
        .unwrap_or_default();
    let problem_line = syntax_line(&problem);
    let (csrf, cookie) = state.keys.csrf_for(headers, state.secure_cookies());
    let page = EditorPage {
        chrome: Chrome::new(state, &s, headers, "services", title, "").still(),
        name,
        text,
        base,
        problem,
        problem_line,
        errors,
        action,
        csrf,
        leading: s.leadership.is_leader(),
        leader_url: s.leader_url(),
    };
    let mut response = with_cookie(page.into_response(), cookie);
    if let Some(e) = refused {
        *response.status_mut() = e.status;
    }
    response
}

/// The line (1-based) of `text` a field error's JSON path points at: the
/// path's keys found in order (`health_check.path`: `"health_check"`, then
/// `"path"` after it); a syntax error's `line N` of its message. `None`
/// when not found.
pub fn locate(text: &str, field: &str) -> Option<usize> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let keys: Vec<&str> = field
        .split(['.', '[', ']'])
        .filter(|k| !k.is_empty() && !k.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    if field == "body" || keys.is_empty() {
        return None;
    }
    let mut at = None;
    let mut from = 0;
    for key in keys {
        let quoted = format!("\"{key}\"");
        match text[from..].find(&quoted) {
            Some(i) => {
                at = Some(from + i);
                from += i + quoted.len();
            }
            None => break,
        }
    }
    at.map(line_of)
}

/// A syntax error's line, from serde_json's `… at line N column M`.
fn syntax_line(detail: &str) -> Option<usize> {
    let rest = &detail[detail.rfind(" at line ")? + " at line ".len()..];
    rest.split(' ').next()?.parse().ok()
}

/// `GET /services/_new`: the editor with a sample spec.
pub async fn new_editor(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(to) = admin_page(&state, &headers, "/services/_new") {
        return to;
    }
    editor(
        &state,
        &headers,
        None,
        SAMPLE_SPEC.to_string(),
        String::new(),
        None,
    )
}

/// `GET /services/{name}/edit`: the editor with the stored spec.
pub async fn edit_editor(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(name): PagePath<String>,
) -> Result<Response, AppError> {
    if let Some(to) = admin_page(&state, &headers, &format!("{}/edit", service_path(&name))) {
        return Ok(to);
    }
    let s = state.handle.snapshot();
    let spec = stored(&s, &name)
        .ok_or_else(|| AppError::absent(&s, format_args!("service {name:?}")).html())?;
    let text = serde_json::to_string_pretty(spec).unwrap_or_default() + "\n";
    let base = spec_version(Some(spec));
    Ok(editor(&state, &headers, Some(name), text, base, None))
}

impl EditorPage {
    /// The textarea's height: the text's lines, 12 to 40, and two more.
    fn rows(&self) -> usize {
        self.text.lines().count().clamp(12, 40) + 2
    }
}

/// Validates the editor's text with the API's code: the spec, or the
/// refusal. `name` is the edited service's (`None`: the text names it);
/// `s` tells whether it is stored (a new name is held to the stricter rule).
fn validate(text: &str, name: Option<&str>, s: &Snapshot) -> Result<ValidServiceSpec, AppError> {
    if text.len() > MAX_SPEC_TEXT {
        return Err(AppError::bad_request(format!(
            "the spec is {} bytes; at most {MAX_SPEC_TEXT} are taken",
            text.len()
        )));
    }
    if text.trim().is_empty() {
        return Err(AppError::bad_request("the spec is empty"));
    }
    let value = match parse_json(text.as_bytes())? {
        serde_json::Value::Object(object) => object,
        other => return Err(not_an_object(&other)),
    };
    let name = match name {
        Some(n) => n.to_string(),
        None => match value.get("name") {
            Some(serde_json::Value::String(n)) => n.clone(),
            _ => {
                return Err(AppError::invalid(vec![FieldError {
                    field: "name".into(),
                    message: "required: the new service's name, a string".into(),
                }]));
            }
        },
    };
    service_spec(Some(value), &name, s)
}

/// One line of a diff.
pub struct DiffLine {
    /// `add`, `del`, `same`, or `gap` for unchanged lines left out.
    pub tag: &'static str,
    /// `+`, `-`, a space, or `…`.
    pub sign: &'static str,
    /// The line, without its end (`gap`: how many lines are left out).
    pub text: String,
}

/// Unchanged lines shown around each change.
const DIFF_CONTEXT: usize = 3;

/// The line diff of `old` against `new` ([`similar`]'s Myers diff): the
/// changed lines with [`DIFF_CONTEXT`] unchanged ones around each group,
/// the unchanged lines between groups as one `gap` line.
pub fn line_diff(old: &str, new: &str) -> Vec<DiffLine> {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    let mut shown_to = 0; // old-side lines covered so far
    for group in diff.grouped_ops(DIFF_CONTEXT) {
        let first = group.first().map_or(0, |op| op.old_range().start);
        if first > shown_to {
            out.push(DiffLine {
                tag: "gap",
                sign: "…",
                text: format!("{} unchanged line(s)", first - shown_to),
            });
        }
        for op in &group {
            for c in diff.iter_changes(op) {
                let (tag, sign) = match c.tag() {
                    ChangeTag::Insert => ("add", "+"),
                    ChangeTag::Delete => ("del", "-"),
                    ChangeTag::Equal => ("same", " "),
                };
                out.push(DiffLine {
                    tag,
                    sign,
                    text: c.value().trim_end_matches(['\n', '\r']).to_string(),
                });
            }
        }
        shown_to = group.last().map_or(shown_to, |op| op.old_range().end);
    }
    let total = old.lines().count();
    if !out.is_empty() && total > shown_to {
        out.push(DiffLine {
            tag: "gap",
            sign: "…",
            text: format!("{} unchanged line(s)", total - shown_to),
        });
    }
    out
}

#[derive(Template, WebTemplate)]
#[template(path = "service_confirm.html")]
struct ConfirmPage {
    chrome: Chrome,
    name: String,
    /// `apply`, `scale`, `delete` or `restart`.
    verb: &'static str,
    /// What happens, one sentence.
    intro: String,
    diff: Vec<DiffLine>,
    tasks: Vec<TaskItem>,
    /// Fields posted back (besides csrf and reason).
    hidden: Vec<(&'static str, String)>,
    /// Where the form posts; empty when there is nothing to confirm.
    action: String,
    button: String,
    /// The scale form's value, on the scale page.
    scale: Option<String>,
    error: Option<String>,
    csrf: String,
    leading: bool,
    leader_url: Option<String>,
}

impl ConfirmPage {
    fn new(
        state: &AppState,
        s: &Snapshot,
        headers: &HeaderMap,
        name: &str,
        title: String,
    ) -> (Self, Option<axum::http::HeaderValue>) {
        let (csrf, cookie) = state.keys.csrf_for(headers, state.secure_cookies());
        let page = ConfirmPage {
            chrome: Chrome::new(state, s, headers, "services", title, "").still(),
            name: name.to_string(),
            verb: "apply",
            intro: String::new(),
            diff: Vec::new(),
            tasks: Vec::new(),
            hidden: Vec::new(),
            action: String::new(),
            button: String::new(),
            scale: None,
            error: None,
            csrf,
            leading: s.leadership.is_leader(),
            leader_url: s.leader_url(),
        };
        (page, cookie)
    }

    fn respond(self, cookie: Option<axum::http::HeaderValue>, status: StatusCode) -> Response {
        let mut response = with_cookie(self.into_response(), cookie);
        *response.status_mut() = status;
        response
    }
}

async fn preview(post: AdminForm<SpecForm>, name: Option<String>) -> Result<Response, AppError> {
    let AdminForm {
        state,
        form,
        headers,
        ..
    } = post;
    let s = state.handle.snapshot();
    let mut spec = match validate(&form.spec, name.as_deref(), &s) {
        Ok(spec) => spec.into_inner(),
        Err(e) => {
            return Ok(editor(
                &state,
                &headers,
                name,
                form.spec,
                form.base,
                Some(&e),
            ));
        }
    };
    let old = stored(&s, &spec.name);
    // The restart generation is not in the spec's JSON; the core carries
    // the stored one over (`ServiceSpec::restart_generation`).
    if let Some(o) = old {
        spec.restart_generation = o.restart_generation;
    }
    let pretty = |spec: &ServiceSpec| serde_json::to_string_pretty(spec).unwrap_or_default() + "\n";
    let old_text = old.map(pretty).unwrap_or_default();
    let new_text = pretty(&spec);
    let title = match old {
        Some(_) => format!("Confirm: change service {}", spec.name),
        None => format!("Confirm: create service {}", spec.name),
    };
    let (mut page, cookie) = ConfirmPage::new(&state, &s, &headers, &spec.name, title);
    page.tasks = doomed(&s, old, Some(&spec));
    page.intro = match old {
        None => format!(
            "Creates service {} with {} instance(s).",
            spec.name, spec.instances
        ),
        Some(_) if old_text == new_text => {
            "The spec is the stored one: applying changes nothing.".to_string()
        }
        Some(o) if o.fingerprint() != spec.fingerprint() => format!(
            "Changes the shape of the tasks: a rolling rollout replaces each of the {} live \
             task(s), one at a time, each killed once its replacement is available (healthy, \
             with a health check).",
            live_tasks(&s, &spec.name).len()
        ),
        Some(_) => "Changes no task's shape: no task is replaced.".to_string(),
    };
    page.diff = line_diff(&old_text, &new_text);
    let base = spec_version(old);
    // An editor opened on another version of the spec (or a new service
    // whose name is taken meanwhile) is shown its diff against what is
    // stored now; the apply checks this version.
    if !form.base.is_empty() && form.base != base {
        page.error = Some(
            "The stored spec changed since the editor was opened: the diff below is against \
             the spec stored now."
                .into(),
        );
    }
    page.hidden = vec![("spec", new_text), ("base", base)];
    page.action = format!("{}/apply", service_path(&spec.name));
    page.button = match old {
        Some(_) => format!("Apply to {}", spec.name),
        None => format!("Create {}", spec.name),
    };
    Ok(page.respond(cookie, StatusCode::OK))
}

/// `POST /services/_new`: review a new service's spec.
pub async fn post_new(post: AdminForm<SpecForm>) -> Result<Response, AppError> {
    preview(post, None).await
}

/// `POST /services/{name}/edit`: review a changed spec.
pub async fn post_edit(
    PagePath(name): PagePath<String>,
    post: AdminForm<SpecForm>,
) -> Result<Response, AppError> {
    preview(post, Some(name)).await
}

/// 409 unless the stored spec of `name` is still the version `base`.
fn check_base(s: &Snapshot, name: &str, base: &str) -> Result<(), AppError> {
    let now = spec_version(stored(s, name));
    if base != now {
        return Err(AppError::conflict(format!(
            "service {name:?} changed since the confirmation page was shown (version {base:?}, \
             now {now:?}); nothing was done — review the change again"
        ))
        .html());
    }
    Ok(())
}

/// The core's request for `spec` made on a page that showed the stored
/// spec at version `base`: replaced only if it is still at that version
/// (`check_base` looked at this replica's snapshot; the core decides,
/// after any write of the service in flight), or created when the page
/// showed none.
fn put_at(spec: ValidServiceSpec, base: &str) -> Request {
    if base == ABSENT {
        return Request::PutService(Box::new(spec));
    }
    Request::ReplaceService {
        spec: Box::new(spec),
        expected: crate::scheduler::Expected::version(base),
    }
}

/// Writes the audit entry of a service change posted from a page, as the
/// API writes it.
async fn audit<F, T>(
    post: &AdminForm<F>,
    action: &str,
    params: serde_json::Value,
    result: &Result<T, AppError>,
    summary: impl FnOnce() -> String,
) {
    audit_as(post, action, params, result, StatusCode::OK, summary).await;
}

/// [`audit`] with the status of a success (201 for a created service, as
/// the API answers).
async fn audit_as<F, T>(
    post: &AdminForm<F>,
    action: &str,
    params: serde_json::Value,
    result: &Result<T, AppError>,
    ok: StatusCode,
    summary: impl FnOnce() -> String,
) {
    super::audit::record_result(&post.state, &post.ctx, action, params, result, ok, summary).await;
}

/// `POST /services/{name}/apply` (from the confirmation page): validates
/// the spec again, checks `base`, puts it; to the service's page.
pub async fn post_apply(
    PagePath(name): PagePath<String>,
    post: AdminForm<SpecForm>,
) -> Result<Response, AppError> {
    let s = post.state.handle.snapshot();
    let spec = validate(&post.form.spec, Some(&name), &s).map_err(AppError::html)?;
    check_base(&s, &name, &post.form.base)?;
    let params = put_params(&spec);
    let result = ask::<bool>(&post.state, put_at(spec, &post.form.base))
        .await
        .map_err(|e| AppError::from_command(e, &post.path));
    let (ok, outcome) = if matches!(result, Ok(true)) {
        (StatusCode::OK, "replaced")
    } else {
        (StatusCode::CREATED, "created")
    };
    audit_as(&post, "service.put", params, &result, ok, || {
        format!("service {name} {outcome}")
    })
    .await;
    result.map_err(AppError::html)?;
    Ok(Redirect::to(&service_path(&name)).into_response())
}

/// `?instances=` of the scale page.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ScaleQuery {
    /// The new instance count, as typed.
    pub instances: Option<String>,
}

/// An instance count as typed: 0 to [`MAX_INSTANCES`]; 400 else.
fn parse_instances(text: &str) -> Result<u32, AppError> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_INSTANCES)
        .ok_or_else(|| {
            AppError::invalid(vec![FieldError {
                field: "instances".into(),
                message: format!("{}, not {text:?}", bounds::INSTANCES.message()),
            }])
        })
}

/// `GET /services/{name}/scale[?instances=N]`: the number form; with
/// `instances`, the confirmation naming the tasks a scale-down kills (400
/// and the form again when it is not a count).
pub async fn scale_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(name): PagePath<String>,
    PageQuery(query): PageQuery<ScaleQuery>,
) -> Result<Response, AppError> {
    if let Some(to) = admin_page(&state, &headers, &format!("{}/scale", service_path(&name))) {
        return Ok(to);
    }
    let s = state.handle.snapshot();
    let old = stored(&s, &name)
        .ok_or_else(|| AppError::absent(&s, format_args!("service {name:?}")).html())?;
    let (mut page, cookie) =
        ConfirmPage::new(&state, &s, &headers, &name, format!("Scale service {name}"));
    page.verb = "scale";
    let Some(typed) = query.instances else {
        page.intro = format!("Service {name} has {} instance(s).", old.instances);
        page.scale = Some(old.instances.to_string());
        return Ok(page.respond(cookie, StatusCode::OK));
    };
    let n = match parse_instances(&typed) {
        Ok(n) => n,
        Err(e) => {
            page.intro = format!("Service {name} has {} instance(s).", old.instances);
            page.error = Some(e.detail.clone());
            page.scale = Some(typed);
            return Ok(page.respond(cookie, e.status));
        }
    };
    let mut new = old.clone();
    new.instances = n;
    page.tasks = doomed(&s, Some(old), Some(&new));
    page.intro = format!(
        "Scales service {name} from {} to {n} instance(s).{}",
        old.instances,
        if n > old.instances {
            " No task dies."
        } else if page.tasks.is_empty() {
            " No live task dies."
        } else {
            " These tasks are killed (the scheduler keeps the best ones):"
        }
    );
    page.hidden = vec![
        ("instances", n.to_string()),
        ("base", spec_version(Some(old))),
    ];
    page.action = format!("{}/scale", service_path(&name));
    page.button = format!("Scale {name} to {n}");
    Ok(page.respond(cookie, StatusCode::OK))
}

/// Fields of the scale and delete confirmations.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ChangeForm {
    /// The CSRF token.
    pub csrf: String,
    /// The new instance count (scale).
    pub instances: String,
    /// [`spec_version`] of the stored spec the page showed.
    pub base: String,
    /// Why (optional; recorded in the audit trail).
    pub reason: String,
}

impl ActionForm for ChangeForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
    fn reason(&self) -> &str {
        &self.reason
    }
}

/// `POST /services/{name}/scale`: puts the stored spec with the new
/// `instances` (400 when it is not a count, 404 without the service, 409
/// when the spec changed since the page); to the service's page.
pub async fn post_scale(
    PagePath(name): PagePath<String>,
    post: AdminForm<ChangeForm>,
) -> Result<Response, AppError> {
    let n = parse_instances(&post.form.instances).map_err(AppError::html)?;
    let s = post.state.handle.snapshot();
    let old = stored(&s, &name)
        .ok_or_else(|| AppError::absent(&s, format_args!("service {name:?}")).html())?;
    check_base(&s, &name, &post.form.base)?;
    let from = old.instances;
    let mut new = old.clone();
    new.instances = n;
    let spec = ValidServiceSpec::new(new).map_err(|e| AppError::invalid(e).html())?;
    let params = serde_json::json!({ "name": name, "instances": n, "from": from });
    let result = ask::<bool>(&post.state, put_at(spec, &post.form.base))
        .await
        .map_err(|e| AppError::from_command(e, &post.path));
    audit(&post, "service.scale", params, &result, || {
        format!("service {name} scaled from {from} to {n}")
    })
    .await;
    result.map_err(AppError::html)?;
    Ok(Redirect::to(&service_path(&name)).into_response())
}

/// `GET /services/{name}/delete`: the confirmation naming every task
/// that dies.
pub async fn delete_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(name): PagePath<String>,
) -> Result<Response, AppError> {
    if let Some(to) = admin_page(&state, &headers, &format!("{}/delete", service_path(&name))) {
        return Ok(to);
    }
    let s = state.handle.snapshot();
    let old = stored(&s, &name)
        .ok_or_else(|| AppError::absent(&s, format_args!("service {name:?}")).html())?;
    let (mut page, cookie) = ConfirmPage::new(
        &state,
        &s,
        &headers,
        &name,
        format!("Confirm: delete service {name}"),
    );
    page.verb = "delete";
    page.tasks = doomed(&s, Some(old), None);
    page.intro = format!(
        "Deletes service {name}: its spec leaves ZooKeeper and {} live task(s) are killed \
         (TERM, then KILL after its kill_grace_period).",
        page.tasks.len()
    );
    page.hidden = vec![("base", spec_version(Some(old)))];
    page.action = format!("{}/delete", service_path(&name));
    page.button = format!("Delete {name}");
    Ok(page.respond(cookie, StatusCode::OK))
}

/// `POST /services/{name}/delete`: 404 without the service, 409 when it
/// changed since the page; to the Services page.
pub async fn post_delete(
    PagePath(name): PagePath<String>,
    post: AdminForm<ChangeForm>,
) -> Result<Response, AppError> {
    let s = post.state.handle.snapshot();
    if stored(&s, &name).is_none() {
        return Err(AppError::absent(&s, format_args!("service {name:?}")).html());
    }
    check_base(&s, &name, &post.form.base)?;
    let killed = live_tasks(&s, &name).len();
    // The core checks the page's version again, after any write of the
    // service in flight: `check_base` read this replica's snapshot.
    let request = Request::DeleteService {
        name: name.clone(),
        expected: Some(crate::scheduler::Expected::version(&post.form.base)),
    };
    let result = ask::<bool>(&post.state, request)
        .await
        .map_err(|e| AppError::from_command(e, &post.path))
        .and_then(|deleted| {
            deleted
                .then_some(())
                .ok_or_else(|| AppError::not_found(format!("no service {name:?}")))
        });
    let params = serde_json::json!({ "name": name });
    audit(&post, "service.delete", params, &result, || {
        format!("service {name} deleted ({killed} live task(s) killed)")
    })
    .await;
    result.map_err(AppError::html)?;
    Ok(Redirect::to("/services").into_response())
}

/// `GET /services/{name}/restart`: the confirmation of a rolling restart
/// (every live task replaced, one at a time, health-gated, by the rollout
/// machinery), naming the tasks it replaces. It posts `service` and
/// `reason` to `POST /actions/restart`, the browser twin of `POST
/// /api/v1/services/{name}/restart`. No form while a rollout is under way
/// or halted, or without instances: the restart would be refused (409).
pub async fn restart_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(name): PagePath<String>,
) -> Result<Response, AppError> {
    if let Some(to) = admin_page(
        &state,
        &headers,
        &format!("{}/restart", service_path(&name)),
    ) {
        return Ok(to);
    }
    let s = state.handle.snapshot();
    let row = find_row(&s, &name)?;
    let (mut page, cookie) = ConfirmPage::new(
        &state,
        &s,
        &headers,
        &name,
        format!("Confirm: restart service {name}"),
    );
    page.verb = "restart";
    let fingerprint = row.status.spec.fingerprint();
    if row.status.rollout.is_some() {
        page.error = Some(format!(
            "A rollout of service {name} is under way or halted: let it finish, resume it or \
             roll it back before a restart."
        ));
        return Ok(page.respond(cookie, StatusCode::CONFLICT));
    }
    if row.status.spec.instances == 0 {
        page.error = Some(format!(
            "Service {name} has 0 instances: nothing to restart."
        ));
        return Ok(page.respond(cookie, StatusCode::CONFLICT));
    }
    page.tasks = live_tasks(&s, &name)
        .into_iter()
        .map(|t| {
            TaskItem::new(
                t,
                &fingerprint,
                "replaced by the rolling restart (killed once its replacement is available)",
            )
        })
        .collect();
    page.intro = format!(
        "Restarts service {name} without changing its spec: a rolling rollout replaces each of \
         its {} live task(s) one at a time, each killed only once its replacement is available \
         (RUNNING{} for the spec's upgrade.min_healthy). It halts past upgrade.deadline; resume \
         and roll back work as for any rollout.",
        page.tasks.len(),
        if row.status.spec.health_check.is_some() {
            " and healthy"
        } else {
            ""
        }
    );
    page.hidden = vec![("service", name.clone())];
    page.action = "/actions/restart".into();
    page.button = format!("Restart {name}");
    Ok(page.respond(cookie, StatusCode::OK))
}

/// The pages' routes (see the module doc).
pub(super) fn routes() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/services/_new", get(new_editor).post(post_new))
        .route("/services/{name}", get(service))
        .route("/services/{name}/edit", get(edit_editor).post(post_edit))
        .route("/services/{name}/apply", post(post_apply))
        .route("/services/{name}/scale", get(scale_page).post(post_scale))
        .route(
            "/services/{name}/delete",
            get(delete_page).post(post_delete),
        )
        .route("/services/{name}/restart", get(restart_page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_nested_keys_in_order() {
        let text =
            "{\n  \"name\": \"a\",\n  \"path\": 1,\n  \"health_check\": {\n    \"path\": 3\n  }\n}";
        assert_eq!(locate(text, "name"), Some(2));
        assert_eq!(locate(text, "health_check.path"), Some(5));
        assert_eq!(locate(text, "constraints[1]"), None);
        assert_eq!(locate(text, "body"), None);
    }

    #[test]
    fn syntax_line_reads_serde_json_positions() {
        assert_eq!(
            syntax_line("the body is not JSON: expected `,` or `}` at line 3 column 5"),
            Some(3)
        );
        assert_eq!(syntax_line("nothing here"), None);
    }

    /// A snapshot without services: every name is new.
    fn no_services() -> Snapshot {
        let replica = crate::coordination::ReplicaInfo::new("http://a:8080", "d1", "0.1.0");
        Snapshot::standby(replica, "f", "r", crate::coordination::Strategy::Failover)
    }

    #[test]
    fn instances_are_counts() {
        assert_eq!(parse_instances(" 3 ").unwrap(), 3);
        assert_eq!(parse_instances("0").unwrap(), 0);
        for bad in ["-1", "abc", "", "1.5", "10001"] {
            let e = parse_instances(bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}");
            assert_eq!(e.errors[0].field, "instances");
        }
    }

    #[test]
    fn a_rolling_restart_changes_the_version_a_page_saw() {
        let mut spec = validate(SAMPLE_SPEC, None, &no_services())
            .unwrap()
            .into_inner();
        let before = spec_version(Some(&spec));
        assert_eq!(before.len(), 16);
        spec.restart_generation = 1;
        let restarted = spec_version(Some(&spec));
        assert_ne!(
            before, restarted,
            "a restart since the page must be a change"
        );
        spec.restart_generation = 2;
        assert_ne!(restarted, spec_version(Some(&spec)));
        assert_eq!(spec_version(None), ABSENT);
    }

    #[test]
    fn the_sample_is_valid() {
        let spec = validate(SAMPLE_SPEC, None, &no_services()).unwrap();
        assert_eq!(spec.name, "hello");
        assert!(spec.health_check.is_some());
    }

    #[test]
    fn diff_marks_changed_lines() {
        let d = line_diff("a\nb\nc\n", "a\nB\nc\n");
        let tags: Vec<_> = d.iter().map(|l| (l.tag, l.text.as_str())).collect();
        assert_eq!(
            tags,
            [("same", "a"), ("del", "b"), ("add", "B"), ("same", "c")]
        );
    }

    #[test]
    fn diff_leaves_out_far_unchanged_lines() {
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("10\n", "ten\n");
        let d = line_diff(&old, &new);
        let tags: Vec<_> = d.iter().map(|l| (l.tag, l.text.as_str())).collect();
        assert_eq!(tags[0], ("gap", "7 unchanged line(s)"));
        assert_eq!(tags[1], ("same", "7"));
        assert!(tags.contains(&("del", "10")) && tags.contains(&("add", "ten")));
        assert_eq!(tags.last(), Some(&("gap", "6 unchanged line(s)")));
        assert!(line_diff("a\n", "a\n").is_empty(), "no change, no lines");
        assert_eq!(line_diff("", "x\n").len(), 1);
    }
}
