//! Task logs: the tail of a task's sandbox `stdout` or `stderr`, read by
//! the appliance from the task's agent ([`crate::mesos::sandbox`]), so the
//! browser never needs to reach the agent.
//!
//! - `GET /api/v1/tasks/{id}/logs/{stdout|stderr}?offset=&length=`: one
//!   read as [`LogView`]; without `offset`, the last `length` bytes;
//!   `length` defaults to [`DEFAULT_LENGTH`] and is at most
//!   [`MAX_READ`] (400 above). Follow a log by asking again from
//!   `next_offset`. Errors: 404 unknown task or file, 400 bad query, 410
//!   sandbox gone (garbage-collected), 502 agent or master unreachable or
//!   answering nonsense, 503 no master known, 504 no answer in time.
//! - `GET /tasks/{id}/logs/{stdout|stderr}?offset=`: the same as a page,
//!   paged by offset ("earlier" / "later" links), followed live by
//!   `app.js` when it shows the end of the file. The task page embeds both
//!   tails the same way.
//!
//! Chunks: a read ends on a UTF-8 character boundary (a character cut by
//! `length` is left for the next read, so `length` in the answer may be up
//! to 3 bytes less than asked; a tail read also starts on a character;
//! [`crate::mesos::sandbox::utf8_end`]). `size` is the file's size when
//! read (the agent's answer to `offset=-1`, `src/files/files.cpp`), and
//! `next_offset` is `offset + length`: a client that asks again from
//! `next_offset` until it reaches `size` and concatenates the chunks' bytes
//! gets the file byte for byte, for any `length`.
//!
//! The bytes of a chunk: `data` is the chunk as text. When the chunk is not
//! valid UTF-8 (a log with invalid bytes, or a read that starts inside a
//! character), `data` has U+FFFD for each invalid sequence and
//! `data_base64` (standard alphabet, padded; RFC 4648 §4) carries the exact
//! bytes; it is absent otherwise. So a byte-exact client takes
//! `data_base64` when present, else `data`'s UTF-8 bytes.
//!
//! On a follower both read the leader's JSON API (the leader knows the
//! master). Nothing from a log reaches HTML unescaped: [`display_text`]
//! drops ANSI escape sequences and shows other control characters as
//! `\u{FFFD}`, and invalid UTF-8 is shown as U+FFFD.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::error::AppError;
use super::extract::{ApiPath, ApiQuery, PagePath, PageQuery};
use super::pages::Chrome;
use crate::mesos::sandbox::{LogFile, MAX_READ, SandboxError, SandboxRef};

/// Bytes read when `length` is not given: 16 KiB.
pub const DEFAULT_LENGTH: u64 = 16 * 1024;

/// `offset` and `length` of a log read.
#[derive(Debug, Default, Clone, Copy, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct LogQuery {
    /// Byte offset to read from; the tail when absent.
    pub offset: Option<u64>,
    /// Bytes to read (1 to [`MAX_READ`]).
    pub length: Option<u64>,
}

/// One read of a task's log: `/api/v1/tasks/{id}/logs/{file}`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LogView {
    /// The task.
    pub task_id: String,
    /// `stdout` or `stderr`.
    pub file: LogFile,
    /// Byte offset of `data` in the file.
    pub offset: u64,
    /// Bytes read: at most the `length` asked, up to 3 bytes less so as to
    /// end on a character (see the module doc).
    pub length: u64,
    /// The file's size when read.
    pub size: u64,
    /// Where to read next to follow the file.
    pub next_offset: u64,
    /// The bytes read as text, invalid UTF-8 replaced by U+FFFD (raw
    /// otherwise: escape before showing).
    pub data: String,
    /// The bytes read, base64 (RFC 4648 §4), when they are not valid
    /// UTF-8 (`data` is then lossy); absent when `data` is exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_base64: Option<String>,
    /// `data` for display: ANSI escapes removed, other control characters
    /// (but newline and tab) replaced by U+FFFD.
    pub text: String,
    /// The agent's files API read from.
    pub agent: String,
    /// The file's path on the agent.
    pub path: String,
}

impl LogView {
    /// Whether this read reached the end of the file.
    pub fn at_end(&self) -> bool {
        self.next_offset >= self.size
    }

    /// The offset of the read before this one, if any.
    pub fn earlier(&self) -> Option<u64> {
        (self.offset > 0).then(|| self.offset.saturating_sub(self.length.max(DEFAULT_LENGTH)))
    }
}

/// `data` made safe to show (see the module doc): CSI (`ESC [ … final`)
/// and OSC (`ESC ] … BEL` or `ESC \`) sequences and carriage returns are
/// dropped; any other control character but newline and tab becomes
/// U+FFFD. The result is still plain text, to be HTML-escaped.
pub fn display_text(data: &str) -> String {
    let mut out = String::with_capacity(data.len());
    let mut chars = data.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    // Parameters and intermediates, then one final byte.
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\r' => {}
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Reads the log `file` of task `id` (see the module doc); `path` is the
/// request's path and query (for the leader).
pub async fn load(
    state: &AppState,
    id: &str,
    file: &str,
    query: LogQuery,
    path_and_query: &str,
) -> Result<LogView, AppError> {
    let s = state.handle.snapshot();
    let task = s
        .tasks
        .iter()
        .find(|t| t.task_id == id)
        .cloned()
        .ok_or_else(|| AppError::not_found(format!("no task {id:?}")))?;
    let file = LogFile::parse(file).ok_or_else(|| {
        AppError::not_found(format!(
            "no log file {file:?}; the logs are stdout and stderr"
        ))
    })?;
    let length = query.length.unwrap_or(DEFAULT_LENGTH);
    if length == 0 || length > MAX_READ {
        return Err(AppError::bad_request(format!(
            "length must be from 1 to {MAX_READ} bytes"
        )));
    }
    if let Some(leader) = super::leader::other_leader(state, path_and_query)? {
        let api = format!(
            "/api/v1/tasks/{}/logs/{}?{}",
            crate::util::segment(id),
            file.name(),
            serde_urlencoded::to_string([
                ("offset", query.offset.map(|o| o.to_string())),
                ("length", Some(length.to_string())),
            ])
            .unwrap_or_default()
        );
        let (status, body) = super::leader::get_json(state, &leader, &api).await?;
        if !status.is_success() {
            return Err(super::leader::problem(status, &body));
        }
        return serde_json::from_value(body).map_err(|e| {
            AppError::new(
                StatusCode::BAD_GATEWAY,
                "leader-answer",
                "The leader answered an error",
                format!("the leader's log answer does not parse: {e}"),
            )
        });
    }
    let sandbox = SandboxRef {
        master: s.framework.master.clone().unwrap_or_default(),
        agent_id: task.agent_id.to_string(),
        framework_id: s.framework.id.clone().unwrap_or_default(),
        executor_id: task.executor_id.clone(),
    };
    let chunk = state
        .sandboxes
        .read(&sandbox, file, query.offset, length)
        .await
        .map_err(|e| sandbox_error(e, &task.hostname))?;
    let (data, data_base64) = match String::from_utf8(chunk.data) {
        Ok(text) => (text, None),
        Err(e) => {
            let bytes = e.into_bytes();
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            (String::from_utf8_lossy(&bytes).into_owned(), Some(b64))
        }
    };
    Ok(LogView {
        task_id: id.to_string(),
        file,
        offset: chunk.offset,
        length: chunk.length,
        size: chunk.size,
        next_offset: chunk.next_offset,
        text: display_text(&data),
        data,
        data_base64,
        agent: chunk.agent,
        path: chunk.path,
    })
}

fn sandbox_error(e: SandboxError, hostname: &str) -> AppError {
    let detail = e.to_string();
    match e {
        SandboxError::NoMaster => AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no-master",
            "No Mesos master known",
            format!("{detail}; logs are read through the master's list of agents"),
        ),
        SandboxError::Gone(_) => AppError::new(
            StatusCode::GONE,
            "sandbox-gone",
            "Sandbox garbage-collected",
            detail,
        ),
        SandboxError::Unreachable { reason, .. } if reason.starts_with("no complete answer") => {
            AppError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "agent-timeout",
                "The agent did not answer in time",
                format!("agent on {hostname}: {detail}"),
            )
        }
        _ => AppError::new(
            StatusCode::BAD_GATEWAY,
            "agent-unreachable",
            "The agent is unreachable",
            format!("agent on {hostname}: {detail}"),
        ),
    }
}

/// `GET /api/v1/tasks/{id}/logs/{file}`.
#[utoipa::path(
    get,
    path = "/api/v1/tasks/{id}/logs/{file}",
    tag = "tasks",
    params(("id" = String, Path, description = "The task ID"), ("file" = LogFile, Path, description = "`stdout` or `stderr`"), LogQuery),
    responses((status = 200, description = "One read of the file", body = LogView), crate::web::error::responses::BadRequest, crate::web::error::responses::NotFound, (status = 410, description = "The sandbox is gone", body = crate::web::error::Problem, content_type = "application/problem+json"), crate::web::error::responses::Upstream, crate::web::error::responses::Unavailable)
)]
pub async fn api(
    State(state): State<AppState>,
    uri: Uri,
    ApiPath((id, file)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<LogQuery>,
) -> Result<Json<LogView>, AppError> {
    let here = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    Ok(Json(load(&state, &id, &file, query, here).await?))
}

#[derive(Template, WebTemplate)]
#[template(path = "task_log.html")]
struct LogPage {
    chrome: Chrome,
    task_id: String,
    file: &'static str,
    log: Option<LogView>,
    error: Option<String>,
    api: String,
}

/// `GET /tasks/{id}/logs/{file}`: the log as a page (see the module doc).
/// A failed read shows its reason on the page, with the error's status.
pub async fn page(
    State(state): State<AppState>,
    request: axum::http::request::Parts,
    PagePath((id, file)): PagePath<(String, String)>,
    PageQuery(query): PageQuery<LogQuery>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    if !s.tasks.iter().any(|t| t.task_id == id) {
        return Err(AppError::not_found(format!("no task {id:?}")).html());
    }
    let Some(log_file) = LogFile::parse(&file) else {
        return Err(AppError::not_found(format!(
            "no log file {file:?}; the logs are stdout and stderr"
        ))
        .html());
    };
    let uri = &request.uri;
    let here = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let result = load(&state, &id, &file, query, here).await;
    let seg = crate::util::segment(&id);
    let mut chrome = Chrome::new(
        &state,
        &s,
        &request.headers,
        "tasks",
        format!("{} of {id}", log_file.name()),
        "",
    )
    .still();
    let api = format!("/api/v1/tasks/{seg}/logs/{}", log_file.name());
    chrome.json = api.clone();
    let (log, error, status) = match result {
        Ok(log) => (Some(log), None, StatusCode::OK),
        Err(e) if e.status == StatusCode::BAD_REQUEST => return Err(e.html()),
        Err(e) => (None, Some(format!("{}: {}", e.title, e.detail)), e.status),
    };
    let page = LogPage {
        chrome,
        task_id: id,
        file: log_file.name(),
        log,
        error,
        api,
    };
    let mut response = page.into_response();
    *response.status_mut() = status;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_and_controls_are_not_shown() {
        let raw = "\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}ok\r\n\u{0}\u{8}<b>\tx\u{1b}";
        assert_eq!(display_text(raw), "red ok\n\u{FFFD}\u{FFFD}<b>\tx");
        assert_eq!(display_text("\u{1b}]8;;http://x\u{1b}\\link"), "link");
    }
}
