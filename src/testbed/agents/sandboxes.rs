//! The agents' sandboxes as a real agent serves them: the files API
//! (`GET /files/read`) and the agent's `GET /state` with each executor's
//! sandbox `directory`, on every agent's own port.
//!
//! A real master's `/master/state` does not carry sandbox directories; a
//! client finds an agent there (`slaves[].pid`, `slave(1)@ip:port`), asks
//! that agent's `/state` for `frameworks[].executors[].directory` (or
//! `completed_executors`), then reads files under it (the web UI does the
//! same: `src/webui/app/controllers.js`, `AgentTaskAndExecutorRerouterCtrl`;
//! the directory is written by the agent's `ExecutorWriter` in
//! `src/slave/http.cpp`).
//!
//! `/files/read` follows `FilesProcess::__read` and `_read` in
//! `src/files/files.cpp` (Mesos docs `sandbox.md`):
//! - `path` is required (400 `Expecting 'path=value' in query.`);
//! - `offset` and `length` are integers ≥ -1 (400 otherwise); `offset=-1`
//!   answers the file's size as `offset` with empty `data`; `length`
//!   missing or -1 reads to the end; reads are capped at 16 pages
//!   ([`MAX_READ`]);
//! - an offset at or past the end answers `{"data": "", "offset": <offset>}`;
//! - an unknown path (outside an attached sandbox, or a file that does not
//!   exist) is 404 with an empty body; a directory is 400
//!   `Cannot read a directory.`;
//! - the body is `{"data": …, "offset": …}`, with the data's bytes written
//!   as rapidjson writes them (stout's `jsonify`): `"`, `\` and control
//!   characters escaped, every other byte as it is — so a file that is not
//!   UTF-8 gives a body that is not UTF-8 either.
//!
//! Which paths exist:
//! - process mode: the real sandbox of each live executor process and of
//!   recently exited ones (attached as on an agent, by their real path);
//! - simulated executors: a directory under `/var/lib/mesos/slaves/…`
//!   (the layout of `src/slave/paths.cpp`) holding `stdout` — a generated
//!   log that grows by one line a second from the task's launch — and a
//!   short `stderr`. Their sandbox goes with the executor, as if garbage
//!   collected at once.

use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::testbed::http::text;
use crate::testbed::master::App;
use crate::testbed::master::{Master, now_secs};

/// Largest read: 16 pages of 4 KiB (`src/files/files.cpp`).
pub const MAX_READ: u64 = 16 * 4096;

/// Root of the simulated agents' work directory.
const SIMULATED_WORK_DIR: &str = "/var/lib/mesos";

/// The agent an endpoint serves.
#[derive(Clone)]
pub(crate) struct AgentFiles {
    pub app: App,
    pub agent_index: usize,
}

/// The sandbox routes of one agent.
pub(crate) fn routes(app: App, agent_index: usize) -> Router {
    Router::new()
        .route("/files/read", get(read))
        .route("/files/read.json", get(read))
        .route("/state", get(state))
        .route("/state.json", get(state))
        .route("/slave(1)/state", get(state))
        .route("/slave(1)/state.json", get(state))
        .with_state(AgentFiles { app, agent_index })
}

/// Simulated mode: an endpoint per agent serving only [`routes`]; the
/// agents' advertised ports become theirs.
pub(crate) fn serve_simulated(
    app: &App,
    ip: std::net::IpAddr,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    let count = app.lock().agents.len();
    for index in 0..count {
        let listener = std::net::TcpListener::bind(SocketAddr::new(ip, 0))?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let port = listener.local_addr()?.port();
        app.lock().agents[index].port = port;
        let router = routes(app.clone(), index);
        let stop = stop.clone();
        tokio::spawn(async move {
            let server = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await });
            if let Err(error) = server.await {
                tracing::error!(%error, "agent files endpoint failed");
            }
        });
    }
    Ok(())
}

/// One executor sandbox of an agent, as its `/state` lists it.
struct Sandbox {
    framework_id: String,
    executor_id: String,
    container_id: String,
    directory: String,
    /// The real directory (process mode); `None` for a simulated one.
    real: Option<PathBuf>,
    /// Simulated: when its task was launched, and the task ID.
    launched: f64,
    task_id: String,
    completed: bool,
}

fn simulated_directory(agent: &str, framework: &str, executor: &str, container: &str) -> String {
    format!(
        "{SIMULATED_WORK_DIR}/slaves/{agent}/frameworks/{framework}/executors/{executor}/runs/{container}"
    )
}

impl Master {
    /// The sandboxes of agent `index`: live executors, then exited
    /// executor processes whose sandbox is still on disk.
    fn sandboxes(&self, index: usize) -> Vec<Sandbox> {
        let Some(agent) = self.agents.get(index) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for ((framework_id, executor_id), executor) in agent.executors.iter() {
            let process = self
                .processes
                .live
                .values()
                .find(|p| {
                    p.agent_index == index
                        && p.framework_id == *framework_id
                        && p.executor_id == *executor_id
                })
                .map(|p| p.sandbox.clone())
                .or_else(|| {
                    executor.info.is_none().then(|| {
                        self.command_sandbox(
                            index,
                            framework_id,
                            executor_id,
                            &executor.container_id,
                        )
                    })?
                });
            let task_id = executor.tasks.first().cloned().unwrap_or_default();
            let launched = self
                .tasks
                .get(&(framework_id.clone(), task_id.clone()))
                .and_then(|t| t.statuses.front())
                .map(|s| s.timestamp)
                .unwrap_or_else(now_secs);
            out.push(Sandbox {
                framework_id: framework_id.clone(),
                executor_id: executor_id.clone(),
                container_id: executor.container_id.clone(),
                directory: match &process {
                    Some(real) => real.display().to_string(),
                    None => simulated_directory(
                        &agent.id,
                        framework_id,
                        executor_id,
                        &executor.container_id,
                    ),
                },
                real: process,
                launched,
                task_id,
                completed: false,
            });
        }
        for view in &self.processes.finished {
            if view.agent_id == agent.id && view.sandbox.is_dir() {
                out.push(Sandbox {
                    framework_id: view.framework_id.clone(),
                    executor_id: view.executor_id.clone(),
                    container_id: view.container_id.clone(),
                    directory: view.sandbox.display().to_string(),
                    real: Some(view.sandbox.clone()),
                    launched: 0.0,
                    task_id: String::new(),
                    completed: true,
                });
            }
        }
        out
    }

    /// `GET /state` of agent `index`: its frameworks with their executors
    /// and sandbox directories (`src/slave/http.cpp`, `ExecutorWriter`).
    fn agent_state_json(&self, index: usize) -> Value {
        let Some(agent) = self.agents.get(index) else {
            return json!({});
        };
        let mut frameworks: std::collections::BTreeMap<String, (Vec<Value>, Vec<Value>)> =
            Default::default();
        for s in self.sandboxes(index) {
            let executor = json!({
                "id": s.executor_id,
                "container": s.container_id,
                "directory": s.directory,
                "tasks": if s.task_id.is_empty() { json!([]) } else { json!([{ "id": s.task_id }]) },
            });
            let entry = frameworks.entry(s.framework_id).or_default();
            if s.completed {
                entry.1.push(executor);
            } else {
                entry.0.push(executor);
            }
        }
        let frameworks: Vec<Value> = frameworks
            .into_iter()
            .map(|(id, (executors, completed))| {
                json!({ "id": id, "executors": executors, "completed_executors": completed })
            })
            .collect();
        json!({
            "id": agent.id,
            "hostname": agent.spec.hostname,
            "pid": format!("slave(1)@{}:{}", self.cfg.listen.ip(), agent.port),
            "version": self.cfg.version,
            "frameworks": frameworks,
            "completed_frameworks": [],
        })
    }
}

async fn state(State(files): State<AgentFiles>) -> Response {
    let body = files.app.lock().agent_state_json(files.agent_index);
    axum::Json(body).into_response()
}

/// An `offset` or `length` query value: an integer ≥ -1; the 400 body
/// otherwise.
fn number(name: &str, value: Option<&String>) -> Result<Option<i64>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| format!("Failed to parse {name}: Failed to convert '{value}' to number.\n"))?;
    if n < -1 {
        return Err(format!("Negative {name} provided: {n}.\n"));
    }
    Ok(Some(n))
}

/// What a path names on an agent.
enum Target {
    /// A real file (process mode).
    File(PathBuf),
    /// A generated file's whole content (simulated).
    Generated(Vec<u8>),
    /// A simulated `stdout`: `lines` fixed-width lines of a task launched
    /// at `launched` (only the lines asked for are generated).
    Lines {
        task_id: String,
        launched: f64,
        lines: u64,
    },
    /// A directory: 400.
    Directory,
}

async fn read(
    State(files): State<AgentFiles>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let Some(path) = query.get("path").filter(|p| !p.is_empty()) else {
        return text(
            StatusCode::BAD_REQUEST,
            "Expecting 'path=value' in query.\n",
        );
    };
    let offset = match number("offset", query.get("offset")) {
        Ok(n) => n.unwrap_or(-1),
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let length = match number("length", query.get("length")) {
        Ok(n) => n.filter(|&n| n >= 0),
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let target = files.app.lock().resolve(files.agent_index, path);
    let Some(target) = target else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let read = match target {
        Target::Directory => {
            return text(StatusCode::BAD_REQUEST, "Cannot read a directory.\n");
        }
        Target::Generated(bytes) => Ok(slice(&bytes, offset, length)),
        Target::Lines {
            task_id,
            launched,
            lines,
        } => Ok(lines_slice(&task_id, launched, lines, offset, length)),
        Target::File(path) => tokio::task::spawn_blocking(move || read_file(&path, offset, length))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e))),
    };
    match read {
        Ok((at, data)) => (
            [(header::CONTENT_TYPE, "application/json")],
            body(at, &data),
        )
            .into_response(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => StatusCode::NOT_FOUND.into_response(),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Failed to read file: {e}.\n"),
        ),
    }
}

/// The offset answered and the bytes read from `total`.
fn slice(total: &[u8], offset: i64, length: Option<i64>) -> (u64, Vec<u8>) {
    let size = total.len() as u64;
    if offset == -1 {
        return (size, Vec::new());
    }
    let start = (offset as u64).min(size);
    let want = length.map_or(size - start, |l| l as u64).min(MAX_READ);
    let end = (start + want).min(size);
    (offset as u64, total[start as usize..end as usize].to_vec())
}

fn read_file(path: &Path, offset: i64, length: Option<i64>) -> std::io::Result<(u64, Vec<u8>)> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    if offset == -1 {
        return Ok((size, Vec::new()));
    }
    let start = offset as u64;
    if start >= size {
        return Ok((start, Vec::new()));
    }
    let want = length.map_or(size - start, |l| l as u64).min(MAX_READ);
    file.seek(SeekFrom::Start(start))?;
    let mut data = Vec::new();
    file.take(want).read_to_end(&mut data)?;
    Ok((start, data))
}

/// `{"data":…,"offset":…}` with the data's bytes as rapidjson writes them
/// (see the module doc).
fn body(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 32);
    out.extend_from_slice(b"{\"data\":\"");
    for &b in data {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 => out.extend_from_slice(format!("\\u{b:04X}").as_bytes()),
            b => out.push(b),
        }
    }
    out.extend_from_slice(format!("\",\"offset\":{offset}}}").as_bytes());
    out
}

/// One fixed-width line of a simulated task's `stdout`.
fn simulated_line(task_id: &str, launched: f64, n: u64) -> String {
    let at = crate::util::format_time(launched + n as f64);
    format!("{at} {task_id} simulated output line {n:08}\n")
}

/// A read of a simulated `stdout` of `lines` lines, generating only the
/// lines the range covers.
fn lines_slice(
    task_id: &str,
    launched: f64,
    lines: u64,
    offset: i64,
    length: Option<i64>,
) -> (u64, Vec<u8>) {
    let width = simulated_line(task_id, launched, 0).len() as u64;
    let size = width * lines;
    if offset == -1 {
        return (size, Vec::new());
    }
    let start = (offset as u64).min(size);
    let end = (start + length.map_or(size - start, |l| l as u64).min(MAX_READ)).min(size);
    let mut out = Vec::new();
    for n in start / width..end.div_ceil(width) {
        out.extend_from_slice(simulated_line(task_id, launched, n).as_bytes());
    }
    let skip = (start % width) as usize;
    let take = (end - start) as usize;
    (
        offset as u64,
        out.get(skip..skip + take).unwrap_or_default().to_vec(),
    )
}

impl Master {
    /// What `path` names on agent `index`, `None` when nothing (404).
    fn resolve(&self, index: usize, path: &str) -> Option<Target> {
        let path = path.trim_end_matches('/');
        if Path::new(path)
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return None;
        }
        for sandbox in self.sandboxes(index) {
            let dir = sandbox.directory.trim_end_matches('/');
            let rest = if path == dir {
                ""
            } else if let Some(rest) = path.strip_prefix(dir).and_then(|r| r.strip_prefix('/')) {
                rest
            } else {
                continue;
            };
            return match &sandbox.real {
                Some(real) => {
                    let full = if rest.is_empty() {
                        real.clone()
                    } else {
                        real.join(rest)
                    };
                    if full.is_dir() {
                        Some(Target::Directory)
                    } else if full.is_file() {
                        Some(Target::File(full))
                    } else {
                        None
                    }
                }
                None => match rest {
                    "" => Some(Target::Directory),
                    "stdout" => Some(Target::Lines {
                        lines: (now_secs() - sandbox.launched).max(0.0) as u64 + 1,
                        task_id: sandbox.task_id,
                        launched: sandbox.launched,
                    }),
                    "stderr" => Some(Target::Generated(
                        format!(
                            "Received SUBSCRIBED event\nSubscribed executor on {}\nReceived \
                             LAUNCH event\nStarting task {}\n",
                            self.agents[index].spec.hostname, sandbox.task_id
                        )
                        .into_bytes(),
                    )),
                    _ => None,
                },
            };
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_escape_like_rapidjson_and_keep_other_bytes() {
        let out = body(7, b"a\"b\\\n\x01<\xff");
        assert_eq!(
            out,
            b"{\"data\":\"a\\\"b\\\\\\n\\u0001<\xff\",\"offset\":7}".to_vec()
        );
    }

    #[test]
    fn slices_follow_files_cpp() {
        let file = b"0123456789";
        assert_eq!(slice(file, -1, None), (10, vec![]));
        assert_eq!(slice(file, 8, None), (8, b"89".to_vec()));
        assert_eq!(slice(file, 2, Some(3)), (2, b"234".to_vec()));
        assert_eq!(slice(file, 20, Some(3)), (20, vec![]));
        let big = vec![b'x'; 200_000];
        assert_eq!(slice(&big, 0, None).1.len() as u64, MAX_READ);
    }

    #[test]
    fn simulated_logs_are_generated_by_range() {
        let at = 1_700_000_000.0;
        let a = simulated_line("t1", at, 0);
        let b = simulated_line("t1", at, 12_345);
        assert_eq!(a.len(), b.len());
        let whole: Vec<u8> = (0..5)
            .flat_map(|n| simulated_line("t1", at, n).into_bytes())
            .collect();
        assert_eq!(lines_slice("t1", at, 5, -1, None).0, whole.len() as u64);
        for (offset, length) in [
            (0, None),
            (3, Some(50)),
            (70, Some(1)),
            (whole.len() as i64 - 2, None),
        ] {
            let (at_, data) = lines_slice("t1", at, 5, offset, length);
            assert_eq!(at_, offset as u64);
            assert_eq!(data, slice(&whole, offset, length).1, "{offset} {length:?}");
        }
    }
}
