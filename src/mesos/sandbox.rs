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
//!    answers `{"data", "offset"}` and nothing else (`src/files/files.cpp`,
//!    `FilesProcess::__read`): there is no size field; `offset=-1` answers
//!    the file's size *as* `offset` with empty data, so every read is two
//!    calls (size, then bytes). Reads are capped at 16 pages, an unknown
//!    path is 404 (the sandbox was garbage-collected).
//!
//! Every call is bounded in time ([`SandboxClient::timeout`], the whole
//! request, body included) and in size (the body is read up to a limit and
//! refused past it). `files/read` writes the file's bytes into JSON as
//! they are, so a log that is not UTF-8 gives a body that is not UTF-8;
//! the `data` string is taken as bytes ([`files_answer`]), so a chunk
//! carries the file's exact bytes, valid UTF-8 or not.
//!
//! A chunk ends on a UTF-8 character boundary ([`utf8_end`]): a multi-byte
//! character cut by `length` is left for the next read, so a chunk may be
//! up to 3 bytes shorter than asked, and a client that concatenates chunks
//! from `next_offset` never sees half a character. A read without an
//! offset (the tail) also starts on a character ([`utf8_start`]). The
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Chunk {
    /// Byte offset of `data` in the file.
    pub offset: u64,
    /// The file's bytes read, exactly (not necessarily UTF-8; ends on a
    /// character boundary, see the module doc).
    pub data: Vec<u8>,
    /// Bytes read: `data.len()`.
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
            (start, Vec::new())
        } else {
            read(start as i64, length).await?
        };
        let tail = offset.is_none() && at > 0;
        Ok(chunk_of(size, at, data, length, tail, files, path))
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
    ) -> Result<(u64, Vec<u8>), SandboxError> {
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
/// `size` bytes (the size answered first), asking for `length` bytes;
/// `tail`: a read of the file's end, which may start inside a character
/// ([`utf8_start`]). The data is cut to at most `length` bytes and to a
/// character boundary ([`utf8_end`]).
pub(crate) fn chunk_of(
    size: u64,
    at: u64,
    mut data: Vec<u8>,
    length: u64,
    tail: bool,
    agent: String,
    path: String,
) -> Chunk {
    data.truncate(usize::try_from(length).unwrap_or(usize::MAX));
    let skip = if tail { utf8_start(&data) } else { 0 };
    let mut data = data.split_off(skip);
    data.truncate(utf8_end(&data));
    // The offset is the agent's word: near 2^64 the end saturates rather
    // than overflowing.
    let at = at.saturating_add(skip as u64);
    let end = at.saturating_add(data.len() as u64);
    Chunk {
        offset: at,
        length: data.len() as u64,
        size: size.max(end),
        next_offset: end,
        data,
        agent,
        path,
    }
}

/// Where `bytes` (a read of a file) should end so as not to split a
/// character: `bytes.len()`, or the start of a multi-byte UTF-8 sequence
/// cut short by the end of `bytes` (1 to 3 bytes before it, RFC 3629 §3).
/// Invalid bytes are not characters and end anywhere, so a file that is
/// not UTF-8 still reads to its end; and when `bytes` holds nothing but
/// the cut sequence (a read shorter than the character, or a file that
/// ends with half a character) it is answered whole, so that a reader
/// always gets past it.
pub fn utf8_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // The last byte that is not a continuation byte (10xxxxxx), among the
    // last 3: a lead byte whose sequence may be cut.
    let Some(lead) = (len.saturating_sub(3)..len)
        .rev()
        .find(|&i| bytes[i] & 0xC0 != 0x80)
    else {
        return len;
    };
    match std::str::from_utf8(&bytes[lead..]) {
        // An incomplete sequence: valid so far, cut by the end.
        Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() && lead > 0 => lead,
        _ => len,
    }
}

/// Where a read that may have started inside a character (the tail of a
/// file) should start: after at most 3 leading continuation bytes, when a
/// character starts right after them; 0 otherwise (the bytes are then
/// invalid ones of the file, kept).
pub fn utf8_start(bytes: &[u8]) -> usize {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0xC0 == 0x80)
        .count();
    if skip > 0 && skip < bytes.len() && bytes[skip] & 0xC0 != 0x80 {
        skip
    } else {
        0
    }
}

/// A `/files/read` answer other than 404: its `offset` and `data`
/// (`src/files/files.cpp`, `FilesProcess::__read`), the data as the
/// bytes the agent wrote (JSON escapes decoded, every other byte kept,
/// UTF-8 or not).
pub(crate) fn files_answer(status: u16, body: &[u8]) -> Result<(u64, Vec<u8>), SandboxError> {
    let unexpected = |detail: String| SandboxError::Unexpected {
        what: "the agent's files API".into(),
        detail,
    };
    if status != 200 {
        return Err(status_error("the agent's files API", status, body));
    }
    match serde_json::from_slice::<FilesRead>(body) {
        Ok(read) => Ok((read.offset, read.data.0)),
        Err(e) if e.is_data() => Err(unexpected(format!("no data and offset ({e})"))),
        Err(e) => Err(unexpected(format!("a body that is not JSON ({e})"))),
    }
}

/// The body of a `/files/read` answer.
#[derive(Deserialize)]
struct FilesRead {
    offset: u64,
    data: RawBytes,
}

/// A JSON string taken as bytes: serde_json hands a string to
/// `deserialize_bytes` without checking that it is UTF-8 (its documented
/// behaviour for byte buffers).
struct RawBytes(Vec<u8>);

impl<'de> Deserialize<'de> for RawBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawBytes, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawBytes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<RawBytes, E> {
                Ok(RawBytes(v.to_vec()))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawBytes, E> {
                Ok(RawBytes(v.as_bytes().to_vec()))
            }
        }
        d.deserialize_bytes(Visitor)
    }
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
    if status != 200 {
        return Err(status_error(what, status, body));
    }
    let text = String::from_utf8_lossy(body);
    serde_json::from_str(&text).map_err(|e| SandboxError::Unexpected {
        what: what.to_string(),
        detail: format!("a body that is not JSON ({e})"),
    })
}

/// An answer other than 200, with the start of its body.
fn status_error(what: &str, status: u16, body: &[u8]) -> SandboxError {
    let text = String::from_utf8_lossy(body);
    let excerpt: String = text.chars().take(200).collect();
    SandboxError::Unexpected {
        what: what.to_string(),
        detail: format!("HTTP {status}: {}", excerpt.trim()),
    }
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
    fn answers_keep_the_files_bytes_utf8_or_not() {
        // Raw bytes inside the JSON string, as rapidjson writes them.
        let body = b"{\"data\":\"ab\\n\xffc\xe2\x82\xac\xf0\x9f\",\"offset\":3}";
        let (at, data) = files_answer(200, body).expect("an answer");
        assert_eq!(at, 3);
        assert_eq!(data, b"ab\n\xffc\xe2\x82\xac\xf0\x9f");
        // Read at 3 asking 9 bytes: the cut 4-byte character is left for
        // the next read; the invalid byte is kept.
        let chunk = chunk_of(100, at, data, 9, false, String::new(), String::new());
        assert_eq!(chunk.data, b"ab\n\xffc\xe2\x82\xac");
        assert_eq!((chunk.length, chunk.next_offset), (8, 11));
        assert!(files_answer(200, b"{\"offset\":1}").is_err());
        assert!(files_answer(200, b"not json").is_err());
        assert!(files_answer(500, b"oops").is_err());
    }

    #[test]
    fn chunks_end_and_tails_start_on_characters() {
        let s = "aé€😀".as_bytes(); // 1, 2, 3 and 4 bytes
        assert_eq!(utf8_end(s), s.len());
        assert_eq!(utf8_end(&s[..2]), 1); // half of é
        assert_eq!(utf8_end(&s[..4]), 3); // a third of €
        assert_eq!(utf8_end(&s[..5]), 3);
        assert_eq!(utf8_end(&s[..7]), 6); // a quarter of 😀
        assert_eq!(utf8_end(&s[..9]), 6);
        // Only the cut character: answered whole, so that reads progress.
        assert_eq!(utf8_end(&s[6..8]), 2);
        // Invalid bytes end anywhere.
        assert_eq!(utf8_end(b"a\xff"), 2);
        assert_eq!(utf8_end(b"a\x80\x80\x80"), 4);
        assert_eq!(utf8_end(b"a\xe2\x28"), 3);
        assert_eq!(utf8_end(b""), 0);
        // A tail read starting inside 😀 starts after it.
        let t = "€😀b".as_bytes();
        assert_eq!(utf8_start(&t[4..]), 3);
        assert_eq!(utf8_start(&t[1..]), 2);
        assert_eq!(utf8_start(t), 0);
        // Continuation bytes with no character after them: kept.
        assert_eq!(utf8_start(&t[4..7]), 0);
        assert_eq!(utf8_start(b"\x80\x80\x80\x80a"), 0);
        let tail = chunk_of(8, 4, t[4..].to_vec(), 4, true, String::new(), String::new());
        assert_eq!((tail.offset, tail.length, tail.next_offset), (7, 1, 8));
        assert_eq!(tail.data, b"b");
    }

    proptest::proptest! {
        /// Any bytes, read in chunks of any length from `next_offset`:
        /// the concatenation is the bytes, each chunk is at most `length`
        /// bytes, reads always progress, and a chunk of valid UTF-8 text
        /// (with `length` ≥ 4, the longest character) is valid UTF-8.
        #[test]
        fn chunks_concatenate_to_the_file_and_split_no_character(
            text in ".{0,200}",
            noise in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 0..3),
            length in 1u64..40,
        ) {
            let mut file = text.into_bytes();
            let valid = noise.is_empty();
            for (at, byte) in noise {
                let i = at.index(file.len() + 1);
                file.insert(i, byte);
            }
            let size = file.len() as u64;
            let mut out = Vec::new();
            let mut offset = 0u64;
            while offset < size {
                let end = (offset + length).min(size) as usize;
                let read = file[offset as usize..end].to_vec();
                let chunk = chunk_of(size, offset, read, length, false, String::new(), String::new());
                proptest::prop_assert!(chunk.length <= length);
                proptest::prop_assert!(chunk.length > 0, "no progress at {offset}");
                proptest::prop_assert_eq!(chunk.next_offset, offset + chunk.length);
                if valid && length >= 4 {
                    proptest::prop_assert!(std::str::from_utf8(&chunk.data).is_ok());
                }
                out.extend_from_slice(&chunk.data);
                offset = chunk.next_offset;
            }
            proptest::prop_assert_eq!(out, file);
        }

        /// The end is never more than 3 bytes back, and what it leaves
        /// out is the start of one character, cut.
        #[test]
        fn the_end_cuts_only_a_partial_character(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12)) {
            let end = utf8_end(&bytes);
            proptest::prop_assert!(end <= bytes.len() && bytes.len() - end <= 3);
            if end < bytes.len() {
                let e = std::str::from_utf8(&bytes[end..]).unwrap_err();
                proptest::prop_assert!(e.valid_up_to() == 0 && e.error_len().is_none());
            }
            let start = utf8_start(&bytes);
            proptest::prop_assert!(start <= 3 && start <= bytes.len());
        }
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
        let chunk = chunk_of(10, at, data, 2, false, String::new(), String::new());
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
