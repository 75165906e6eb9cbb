//! Reading a task's sandbox files (`stdout`, `stderr`) from its agent, as
//! the Mesos web UI does (Mesos docs `sandbox.md`):
//!
//! 1. the master's `/master/slaves?slave_id=<agent ID>` names the agent:
//!    `slaves[].pid` is `slave(1)@ip:port`, the agent's own HTTP address
//!    (`Master::ReadOnlyHandler::slaves` in `src/master/readonly_handler.cpp`,
//!    `docs/endpoints/master/slaves.md`; the `slave_id` filter is there in
//!    Mesos 1.x). Its answer is one agent, where `/master/state` would carry
//!    every task of the cluster (17 MB at 10,000 tasks);
//! 2. the agent's `/slave(1)/state` gives the executor's sandbox
//!    `directory` (`frameworks[].executors[]`, or `completed_executors`;
//!    `src/slave/http.cpp`, `ExecutorWriter` — a master's state does not
//!    carry it);
//! 3. the agent's `/files/read?path=<directory>/stdout&offset=&length=`
//!    answers `{"data", "offset"}` (`src/files/files.cpp`): `offset=-1`
//!    gives the file's size, reads are capped at 16 pages, an unknown path
//!    is 404 (the sandbox was garbage-collected).
//!
//! Every call is bounded in time ([`SandboxClient::timeout`], the whole
//! request, body included) and in size (the body is read up to a limit and
//! refused past it). `files/read` writes the file's bytes into JSON as
//! they are, so a log that is not UTF-8 gives a body that is not UTF-8;
//! it is decoded lossily (invalid bytes become U+FFFD) before parsing. The
//! agent address and sandbox directory are cached for a minute; a miss
//! asks again, and an agent that cannot be reached is forgotten, so that
//! the next read looks its address up afresh.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

/// The largest read asked of an agent: 64 KiB (also the agent's own cap,
/// 16 pages of 4 KiB).
pub const MAX_READ: u64 = 64 * 1024;
/// Largest `/files/read` body accepted: the data JSON-escaped at worst
/// (6 bytes per control byte), with room to spare.
const MAX_READ_BODY: usize = 8 * MAX_READ as usize;
/// Largest `/master/slaves` body accepted: one agent, with room for a
/// master that ignores the filter on a cluster of a few hundred agents.
const MAX_SLAVES_BODY: usize = 4 * 1024 * 1024;
/// Largest agent `/state` body accepted (one agent's executors and tasks).
const MAX_STATE_BODY: usize = 64 * 1024 * 1024;
/// How long agent addresses and sandbox directories are reused.
const CACHE_FOR: Duration = Duration::from_secs(60);
/// Cached entries at most (then the cache starts over).
const CACHE_ENTRIES: usize = 4096;

/// Which sandbox file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFile {
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
}

impl LogFile {
    /// `stdout` or `stderr`.
    pub fn name(self) -> &'static str {
        match self {
            LogFile::Stdout => "stdout",
            LogFile::Stderr => "stderr",
        }
    }

    /// Parses `stdout` or `stderr`.
    pub fn parse(text: &str) -> Option<LogFile> {
        match text {
            "stdout" => Some(LogFile::Stdout),
            "stderr" => Some(LogFile::Stderr),
            _ => None,
        }
    }
}

/// Where a task's sandbox is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRef {
    /// The leading master's base URL.
    pub master: String,
    /// Agent ID.
    pub agent_id: String,
    /// Framework ID.
    pub framework_id: String,
    /// Executor ID (the task ID for the command executor).
    pub executor_id: String,
}

/// One read of a sandbox file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Byte offset of `data` in the file.
    pub offset: u64,
    /// The bytes read, decoded lossily (invalid UTF-8 as U+FFFD); raw
    /// text, not escaped for HTML.
    pub data: String,
    /// Bytes read (of the file, before decoding).
    pub length: u64,
    /// The file's size when read.
    pub size: u64,
    /// Where the next read starts (`offset + length`).
    pub next_offset: u64,
    /// The agent's files URL read (without the query).
    pub agent: String,
    /// The file's path on the agent.
    pub path: String,
}

/// Why a sandbox file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// No leading master is known (not subscribed).
    #[error("no leading Mesos master is known right now")]
    NoMaster,
    /// The master does not list the agent (removed, or unreachable).
    #[error("the master does not list agent {0}: it was removed or is unreachable")]
    UnknownAgent(String),
    /// The agent no longer has the sandbox (404, or not in its state).
    #[error("the sandbox is gone: {0}")]
    Gone(String),
    /// A call could not be made or did not finish (refused, reset, timeout).
    #[error("{what} is unreachable: {reason}")]
    Unreachable {
        /// What was called, with its URL.
        what: String,
        /// Why.
        reason: String,
    },
    /// A body above its size limit.
    #[error("{what} answered more than {limit} bytes; refused")]
    TooLarge {
        /// What was called.
        what: String,
        /// The limit.
        limit: usize,
    },
    /// An answer that is not what the API documents.
    #[error("{what} answered {detail}")]
    Unexpected {
        /// What was called.
        what: String,
        /// What it answered.
        detail: String,
    },
}

impl SandboxError {
    /// `no-master`, `unknown-agent`, `gone`, `unreachable`, `too-large` or
    /// `unexpected`.
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::NoMaster => "no-master",
            SandboxError::UnknownAgent(_) => "unknown-agent",
            SandboxError::Gone(_) => "gone",
            SandboxError::Unreachable { .. } => "unreachable",
            SandboxError::TooLarge { .. } => "too-large",
            SandboxError::Unexpected { .. } => "unexpected",
        }
    }
}

/// Values looked up lately, with when.
type Cache<K> = Mutex<HashMap<K, (Instant, String)>>;

/// Reads sandbox files; cheap to share (`Arc`), one per web layer.
#[derive(Debug)]
pub struct SandboxClient {
    http: reqwest::Client,
    /// Each call's deadline, body included.
    pub timeout: Duration,
    /// Agent base URLs by (master, agent ID).
    agents: Cache<(String, String)>,
    /// Sandbox directories by (agent URL, framework ID, executor ID).
    directories: Cache<(String, String, String)>,
}

impl SandboxClient {
    /// A client whose calls each take at most `timeout`.
    pub fn new(timeout: Duration) -> SandboxClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        SandboxClient {
            http,
            timeout,
            agents: Mutex::default(),
            directories: Mutex::default(),
        }
    }

    /// GETs `url` and returns its status and body, at most `limit` bytes,
    /// within [`SandboxClient::timeout`].
    async fn get(
        &self,
        what: &str,
        url: &str,
        limit: usize,
    ) -> Result<(u16, Vec<u8>), SandboxError> {
        let unreachable = |reason: String| SandboxError::Unreachable {
            what: format!("{what} ({url})"),
            reason,
        };
        let call = async {
            let response = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = response.status().as_u16();
            if response.content_length().is_some_and(|n| n > limit as u64) {
                return Err(SandboxError::TooLarge {
                    what: what.to_string(),
                    limit,
                });
            }
            let mut body = Vec::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| unreachable(error_chain(&e)))?;
                if body.len() + chunk.len() > limit {
                    return Err(SandboxError::TooLarge {
                        what: what.to_string(),
                        limit,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok((status, body))
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(unreachable(format!(
                    "no complete answer within {}s",
                    self.timeout.as_secs_f64()
                )))
            })
    }

    /// The agent's base URL (`http://ip:port`) from the master's
    /// `/master/slaves?slave_id=` (see the module doc).
    async fn agent_url(&self, sandbox: &SandboxRef) -> Result<String, SandboxError> {
        let key = (sandbox.master.clone(), sandbox.agent_id.clone());
        if let Some(url) = cached(&self.agents, &key) {
            return Ok(url);
        }
        let url = format!(
            "{}/master/slaves?slave_id={}",
            sandbox.master.trim_end_matches('/'),
            crate::util::segment(&sandbox.agent_id)
        );
        let (status, body) = self.get("the master", &url, MAX_SLAVES_BODY).await?;
        let state = json_of("the master's agents", status, &body)?;
        let slaves = state["slaves"].as_array().cloned().unwrap_or_default();
        let agent = slaves
            .iter()
            .find(|s| s["id"] == sandbox.agent_id.as_str())
            .ok_or_else(|| SandboxError::UnknownAgent(sandbox.agent_id.clone()))?;
        let address = agent["pid"]
            .as_str()
            .and_then(|pid| pid.split_once('@'))
            .map(|(_, addr)| addr.to_string())
            .ok_or_else(|| SandboxError::Unexpected {
                what: "the master's agents".into(),
                detail: format!("no pid for agent {}", sandbox.agent_id),
            })?;
        let url = format!("http://{address}");
        remember(&self.agents, key, url.clone());
        Ok(url)
    }

    /// The executor's sandbox directory from the agent's state.
    async fn directory(&self, agent: &str, sandbox: &SandboxRef) -> Result<String, SandboxError> {
        let key = (
            agent.to_string(),
            sandbox.framework_id.clone(),
            sandbox.executor_id.clone(),
        );
        if let Some(dir) = cached(&self.directories, &key) {
            return Ok(dir);
        }
        let url = format!("{agent}/slave(1)/state");
        let (status, body) = self.get("the agent", &url, MAX_STATE_BODY).await?;
        let state = json_of("the agent's state", status, &body)?;
        let frameworks = ["frameworks", "completed_frameworks"]
            .iter()
            .flat_map(|k| state[*k].as_array().cloned().unwrap_or_default());
        let directory = frameworks
            .filter(|f| f["id"] == sandbox.framework_id.as_str())
            .flat_map(|f| {
                ["executors", "completed_executors"]
                    .iter()
                    .flat_map(|k| f[*k].as_array().cloned().unwrap_or_default())
                    .collect::<Vec<_>>()
            })
            .find(|e| e["id"] == sandbox.executor_id.as_str())
            .and_then(|e| e["directory"].as_str().map(str::to_string))
            .ok_or_else(|| {
                SandboxError::Gone(format!(
                    "agent {} no longer lists executor {} of framework {} (it was \
                     garbage-collected, or never started)",
                    sandbox.agent_id, sandbox.executor_id, sandbox.framework_id
                ))
            })?;
        remember(&self.directories, key, directory.clone());
        Ok(directory)
    }

    /// Reads `file` of `sandbox`: `length` bytes (at most [`MAX_READ`])
    /// from `offset`, or, without an offset, the last `length` bytes.
    ///
    /// # Errors
    /// [`SandboxError`]: no master, unknown agent, sandbox gone,
    /// unreachable or too slow, too large, unexpected answers.
    pub async fn read(
        &self,
        sandbox: &SandboxRef,
        file: LogFile,
        offset: Option<u64>,
        length: u64,
    ) -> Result<Chunk, SandboxError> {
        if sandbox.master.is_empty() {
            return Err(SandboxError::NoMaster);
        }
        let length = length.min(MAX_READ);
        let agent = self.agent_url(sandbox).await?;
        let result = self.read_from(&agent, sandbox, file, offset, length).await;
        if let Err(SandboxError::Unreachable { .. }) = result {
            // The agent may have moved (restarted on another port).
            let key = (sandbox.master.clone(), sandbox.agent_id.clone());
            forget(&self.agents, &key);
        }
        result
    }

    /// [`SandboxClient::read`] from the agent at `agent`.
    async fn read_from(
        &self,
        agent: &str,
        sandbox: &SandboxRef,
        file: LogFile,
        offset: Option<u64>,
        length: u64,
    ) -> Result<Chunk, SandboxError> {
        let directory = self.directory(agent, sandbox).await?;
        let path = format!("{}/{}", directory.trim_end_matches('/'), file.name());
        let files = format!("{agent}/files/read");
        let read =
            |offset: i64, length: u64| self.read_at(&files, &path, agent, sandbox, offset, length);
        let (size, _) = read(-1, 0).await?;
        let start = start_of(size, offset, length);
        let (at, data) = if start >= size || length == 0 {
            (start, String::new())
        } else {
            read(start as i64, length).await?
        };
        Ok(chunk_of(size, at, data, length, files, path))
    }

    /// One `/files/read` call: the offset answered and the data.
    async fn read_at(
        &self,
        files: &str,
        path: &str,
        agent: &str,
        sandbox: &SandboxRef,
        offset: i64,
        length: u64,
    ) -> Result<(u64, String), SandboxError> {
        let url = format!(
            "{files}?path={}&offset={offset}&length={length}",
            crate::util::segment(path)
        );
        let (status, body) = self.get("the agent", &url, MAX_READ_BODY).await?;
        if status == 404 {
            self.forget(agent, sandbox);
            return Err(SandboxError::Gone(format!(
                "agent {} has no file {path} any more (the sandbox was garbage-collected)",
                sandbox.agent_id
            )));
        }
        files_answer(status, &body)
    }

    fn forget(&self, agent: &str, sandbox: &SandboxRef) {
        let key = (
            agent.to_string(),
            sandbox.framework_id.clone(),
            sandbox.executor_id.clone(),
        );
        forget(&self.directories, &key);
    }
}

/// Where the read of `length` bytes from `offset` (`None`: the last
/// `length` bytes) starts in a file of `size` bytes. An offset past the
/// end reads nothing at the end: the size stays the file's, so a follower
/// waits for bytes that will come.
pub(crate) fn start_of(size: u64, offset: Option<u64>, length: u64) -> u64 {
    match offset {
        Some(offset) => offset.min(size),
        None => size.saturating_sub(length),
    }
}

/// The chunk read at `at` (the agent's answered offset) of a file of
/// `size` bytes (the size answered first), asking for `length` bytes.
pub(crate) fn chunk_of(
    size: u64,
    at: u64,
    data: String,
    length: u64,
    agent: String,
    path: String,
) -> Chunk {
    // Decoded lossily, the text may hold more bytes than were read;
    // the file's bytes read are what the agent answered, bounded.
    let read_bytes = raw_len(&data).min(length);
    // The offset is the agent's word: near 2^64 the end saturates rather
    // than overflowing.
    let end = at.saturating_add(read_bytes);
    Chunk {
        offset: at,
        length: read_bytes,
        size: size.max(end),
        next_offset: end,
        data,
        agent,
        path,
    }
}

/// A `/files/read` answer other than 404: its `offset` and `data`
/// (`src/files/files.cpp`, `FilesProcess::_read`).
pub(crate) fn files_answer(status: u16, body: &[u8]) -> Result<(u64, String), SandboxError> {
    let value = json_of("the agent's files API", status, body)?;
    match (value["offset"].as_u64(), value["data"].as_str()) {
        (Some(at), Some(data)) => Ok((at, data.to_string())),
        _ => Err(SandboxError::Unexpected {
            what: "the agent's files API".into(),
            detail: "no data and offset".into(),
        }),
    }
}

/// Bytes the agent read, from the decoded text: each U+FFFD stands for
/// one invalid byte (the lossy decoding replaces each maximal invalid
/// sequence, at most 3 bytes, by one; counting one is a lower bound, so
/// the next read may repeat a byte or two but never skips any).
fn raw_len(text: &str) -> u64 {
    text.chars()
        .map(|c| {
            if c == '\u{FFFD}' {
                1
            } else {
                c.len_utf8() as u64
            }
        })
        .sum()
}

fn cached<K: std::hash::Hash + Eq>(cache: &Cache<K>, key: &K) -> Option<String> {
    let cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .get(key)
        .filter(|(at, _)| at.elapsed() < CACHE_FOR)
        .map(|(_, v)| v.clone())
}

fn forget<K: std::hash::Hash + Eq>(cache: &Cache<K>, key: &K) {
    cache.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
}

fn remember<K: std::hash::Hash + Eq>(cache: &Cache<K>, key: K, value: String) {
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(key, (Instant::now(), value));
}

/// The body as JSON, after checking the status; invalid UTF-8 is replaced
/// (see the module doc).
fn json_of(what: &str, status: u16, body: &[u8]) -> Result<serde_json::Value, SandboxError> {
    let text = String::from_utf8_lossy(body);
    if status != 200 {
        let excerpt: String = text.chars().take(200).collect();
        return Err(SandboxError::Unexpected {
            what: what.to_string(),
            detail: format!("HTTP {status}: {}", excerpt.trim()),
        });
    }
    serde_json::from_str(&text).map_err(|e| SandboxError::Unexpected {
        what: what.to_string(),
        detail: format!("a body that is not JSON ({e})"),
    })
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_bytes_count_once_each() {
        let text = String::from_utf8_lossy(b"ab\xffc\xe2\x82").into_owned();
        assert_eq!(raw_len(&text), 5);
        assert_eq!(raw_len("é"), 2);
    }

    #[test]
    fn file_names() {
        assert_eq!(LogFile::parse("stdout"), Some(LogFile::Stdout));
        assert_eq!(LogFile::parse("stderr").map(LogFile::name), Some("stderr"));
        assert_eq!(LogFile::parse("../etc"), None);
    }

    /// An agent answering an offset near 2^64 (seen while writing the
    /// `files_read` fuzz target): the chunk's end stays at 2^64 - 1
    /// rather than overflowing.
    #[test]
    fn an_answered_offset_at_the_end_of_u64_does_not_overflow() {
        let (at, data) = files_answer(200, br#"{"offset":18446744073709551615,"data":"ab"}"#)
            .expect("a files/read answer");
        let chunk = chunk_of(10, at, data, 2, String::new(), String::new());
        assert_eq!(chunk.offset, u64::MAX);
        assert_eq!(chunk.next_offset, u64::MAX);
        assert_eq!(chunk.size, u64::MAX);
    }

    #[test]
    fn reads_start_at_the_offset_or_the_tail_within_the_file() {
        assert_eq!(start_of(100, Some(10), 5), 10);
        assert_eq!(start_of(100, Some(500), 5), 100);
        assert_eq!(start_of(100, None, 30), 70);
        assert_eq!(start_of(10, None, 30), 0);
    }
}
