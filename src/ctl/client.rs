//! The HTTP client of `mesos-appliance ctl`: one or more replicas, the
//! admin token, the leader, retries.
//!
//! - **Leader.** Changes must reach the leader: a follower answers them
//!   `503` with the problem type `not-leader` and the leader's URL in
//!   `leader_url` (`docs/architecture.md#http-api`); the client sends the
//!   same request there. Reads go to the leader too once it is known
//!   (found from `GET /api/v1/state`, `leadership.role` and
//!   `leadership.leader_url`), so that counts are the leader's own; with no
//!   leader known any replica answers from its view.
//! - **Replicas down.** A replica that cannot be reached (connection
//!   refused, reset, no answer within `--request-timeout`) is skipped for
//!   the next one; the known leader is forgotten when it stops answering.
//! - **Retries.** When no replica gave a final answer (all unreachable, or
//!   none leads, or `502`/`503`/`504`), the round is retried with a
//!   jittered capped backoff ([`crate::backoff`], 200 ms to 2 s) until the
//!   command's deadline; then [`CtlError::Unreachable`]. GET, PUT of a
//!   whole spec and DELETE are idempotent, so a retry after a lost answer
//!   does no harm (a repeated DELETE may answer 404). A POST (a drain, a
//!   job run) is sent again only when it certainly did not arrive (the
//!   connection was refused, or a follower answered not-leader); after a
//!   lost answer, a 502 or a 504 the command stops and says it may have
//!   been carried out.
//! - **Errors.** Any other non-2xx answer is an RFC 9457 problem
//!   (`type`, `title`, `detail`, `errors[]`), turned into [`CtlError::Api`].
//! - **Bounds.** Bodies are read up to [`MAX_BODY`]; each request has a
//!   timeout; the token goes only in `Authorization: Bearer` and never into
//!   an error message.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use serde_json::Value;
use tokio::time::Instant;

use super::args::{Exit, GlobalArgs, Secret};
use crate::backoff::Backoff;
use crate::util::tokens::{choose_token, read_token_file};

/// Largest response body read, bytes.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// Hops along `leader_url` answers within one round (a stale follower may
/// point at a replica that itself no longer leads).
const MAX_HOPS: usize = 3;

/// Why a command failed; each maps to an exit code ([`CtlError::exit`]).
#[derive(Debug, Clone, PartialEq)]
pub enum CtlError {
    /// The API answered a problem document.
    Api {
        /// HTTP status.
        status: u16,
        /// The problem's `title`.
        title: String,
        /// Its `detail`.
        detail: String,
        /// Field errors (`errors[]`): field, message.
        errors: Vec<(String, String)>,
    },
    /// Bad input on this side (a spec file, an argument).
    Usage(String),
    /// No replica answered, or none led, before the deadline.
    Unreachable(String),
    /// `apply --wait`: the rollout of `service` halted.
    Halted {
        /// The service.
        service: String,
        /// The halt's reason, as the API gives it.
        reason: String,
    },
    /// `apply --wait`: not finished before the deadline.
    TimedOut(String),
    /// `--wait`: what it waits for was deleted or replaced by a later
    /// change (what happened, in words).
    Gone(String),
    /// `jobs run --wait`: the run ended other than `succeeded`.
    RunEnded {
        /// The job.
        job: String,
        /// The run ID.
        run: String,
        /// Its final state (`failed`, `killed`, …).
        state: String,
        /// Why, as the API gives it.
        reason: String,
    },
}

impl CtlError {
    /// The exit code.
    pub fn exit(&self) -> Exit {
        match self {
            CtlError::Api { .. } => Exit::Api,
            CtlError::Usage(_) => Exit::Usage,
            CtlError::Unreachable(_) => Exit::Unreachable,
            CtlError::Halted { .. } => Exit::Halted,
            CtlError::TimedOut(_) => Exit::TimedOut,
            CtlError::RunEnded { .. } | CtlError::Gone(_) => Exit::Halted,
        }
    }

    /// What `url` answered with a non-2xx `status`, as an [`CtlError::Api`]:
    /// a problem document as [`CtlError::from_answer`] reads it; anything
    /// else (a bare `404 Not Found` of another server) names the URL and
    /// says it is not a mesos-appliance API, rather than printing
    /// `error: Not Found: ` alone.
    pub fn from_answer_at(status: u16, url: &str, body: &Value) -> CtlError {
        let problem = body.get("title").is_some_and(Value::is_string)
            || body.get("type").is_some_and(Value::is_string);
        if problem {
            return CtlError::from_answer(status, body);
        }
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("HTTP error");
        let said = match body {
            Value::String(s) if !s.trim().is_empty() => {
                let s: String = s.trim().chars().take(200).collect();
                format!(" It said: {s:?}")
            }
            _ => String::new(),
        };
        CtlError::Api {
            status,
            title: format!("{url} answered HTTP {status} {reason}"),
            detail: format!(
                "not a mesos-appliance API (no problem document): check that --url names a \
                 replica's dashboard URL.{said}"
            ),
            errors: Vec::new(),
        }
    }

    /// A problem document (or anything else a server answered) as an
    /// [`CtlError::Api`].
    pub fn from_answer(status: u16, body: &Value) -> CtlError {
        let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
        let title = text("title").unwrap_or_else(|| {
            reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("HTTP error")
                .to_string()
        });
        let detail = text("detail").unwrap_or_else(|| match body {
            Value::String(s) => s.chars().take(500).collect(),
            _ => format!("HTTP {status}"),
        });
        let errors = body
            .get("errors")
            .and_then(Value::as_array)
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| {
                        let s =
                            |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                        (s("field"), s("message"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        CtlError::Api {
            status,
            title,
            detail,
            errors,
        }
    }
}

impl std::fmt::Display for CtlError {
    /// The error as printed; the password of any URL in it (`--url
    /// http://alice:pw@…`) is hidden ([`crate::util::redact_password`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = String::new();
        self.write_unredacted(&mut text)?;
        f.write_str(&crate::util::redact_password(&text))
    }
}

impl CtlError {
    fn write_unredacted(&self, f: &mut impl std::fmt::Write) -> std::fmt::Result {
        match self {
            CtlError::Api {
                title,
                detail,
                errors,
                ..
            } => {
                // A detail that repeats the title ("Not found" / "not found:
                // job x") is printed alone.
                if detail.to_lowercase().starts_with(&title.to_lowercase()) {
                    write!(f, "error: {detail}")?;
                } else {
                    write!(f, "error: {title}: {detail}")?;
                }
                for (field, message) in errors {
                    write!(f, "\n  {field}: {message}")?;
                }
                Ok(())
            }
            CtlError::Usage(m) => write!(f, "error: {m}"),
            CtlError::Unreachable(m) => write!(f, "error: no replica answered: {m}"),
            CtlError::Halted { service, reason } => {
                write!(
                    f,
                    "error: the rollout of service {service} halted: {reason}"
                )
            }
            CtlError::TimedOut(m) | CtlError::Gone(m) => write!(f, "error: {m}"),
            CtlError::RunEnded {
                job,
                run,
                state,
                reason,
            } => write!(f, "error: job {job} run {run} ended {state}: {reason}"),
        }
    }
}

/// The client. Cheap to share by reference; the known leader is kept
/// behind a mutex.
pub struct Client {
    http: reqwest::Client,
    /// Streams (SSE, `logs --follow`) have no overall timeout.
    streaming: reqwest::Client,
    replicas: Vec<String>,
    token: Option<Secret>,
    leader: Mutex<Option<String>>,
    /// How long a command (or one step of a stream) may retry.
    timeout: Duration,
    /// When retries stop ([`Client::renew`] moves it).
    deadline: Mutex<Instant>,
}

impl Client {
    /// A client for `global`'s replicas and token; retries until
    /// `timeout` from now.
    ///
    /// # Errors
    /// [`CtlError::Usage`] for a URL that is not `http(s)://…` or a token
    /// file that cannot be read or is empty.
    pub fn new(global: &GlobalArgs, timeout: Duration) -> Result<Client, CtlError> {
        let mut replicas = Vec::new();
        for url in global
            .urls
            .iter()
            .map(|u| u.trim())
            .filter(|u| !u.is_empty())
        {
            let parsed =
                url::Url::parse(url).map_err(|e| CtlError::Usage(format!("--url {url}: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(CtlError::Usage(format!(
                    "--url {url}: must be an http:// or https:// URL"
                )));
            }
            let url = url.trim_end_matches('/').to_string();
            if !replicas.contains(&url) {
                replicas.push(url);
            }
        }
        if replicas.is_empty() {
            return Err(CtlError::Usage("--url: no replica URL given".into()));
        }
        let token = match (&global.token, &global.token_file) {
            (Some(token), _) => Some(token.clone()),
            (None, Some(path)) => {
                let usage =
                    |e: String| CtlError::Usage(format!("--token-file {}: {e}", path.display()));
                let tokens = read_token_file(path).map_err(usage)?;
                let token = choose_token(&tokens, global.token_name.as_deref()).map_err(usage)?;
                Some(Secret(token.token.clone()))
            }
            (None, None) => None,
        };
        let user_agent = concat!("mesos-appliance-ctl/", env!("CARGO_PKG_VERSION"));
        let connect = global.request_timeout.min(Duration::from_secs(5));
        let build = |timeout: Option<Duration>| {
            let b = reqwest::Client::builder()
                .user_agent(user_agent)
                .connect_timeout(connect)
                // reqwest drops `Authorization` on a redirect to another host.
                .redirect(reqwest::redirect::Policy::limited(5));
            let b = match timeout {
                Some(t) => b.timeout(t),
                None => b.read_timeout(Duration::from_secs(60)),
            };
            b.build()
                .map_err(|e| CtlError::Usage(format!("cannot build the HTTP client: {e}")))
        };
        Ok(Client {
            http: build(Some(global.request_timeout))?,
            streaming: build(None)?,
            replicas,
            token,
            leader: Mutex::new(None),
            timeout,
            deadline: Mutex::new(Instant::now() + timeout),
        })
    }

    /// When retries stop.
    pub fn deadline(&self) -> Instant {
        self.deadline
            .lock()
            .map(|d| *d)
            .unwrap_or_else(|_| Instant::now())
    }

    /// Gives the next calls the whole timeout again (streams that run
    /// until interrupted renew it after each success).
    pub fn renew(&self) {
        if let Ok(mut d) = self.deadline.lock() {
            *d = Instant::now() + self.timeout;
        }
    }

    fn known_leader(&self) -> Option<String> {
        self.leader.lock().ok().and_then(|l| l.clone())
    }

    fn set_leader(&self, url: Option<String>) {
        if let Ok(mut l) = self.leader.lock() {
            *l = url.map(|u| u.trim_end_matches('/').to_string());
        }
    }

    /// Where to send the next request, in order: the known leader, then
    /// the replicas of `--url`.
    fn targets(&self) -> VecDeque<String> {
        let mut targets: VecDeque<String> = self.replicas.iter().cloned().collect();
        if let Some(leader) = self.known_leader() {
            targets.retain(|t| *t != leader);
            targets.push_front(leader);
        }
        targets
    }

    /// Finds the leader from the first replica that answers
    /// `GET /api/v1/state` (its role, else its `leader_url`). No error:
    /// without a leader, reads go to any replica.
    async fn discover_leader(&self) {
        for base in self.targets() {
            let Ok((200, state)) = self
                .once(&Method::GET, &base, "/api/v1/state", None, &[])
                .await
            else {
                continue;
            };
            let leadership = &state["leadership"];
            if leadership["role"] == "leader" {
                self.set_leader(Some(base));
            } else {
                let url = leadership["leader_url"].as_str().map(str::to_string);
                self.set_leader(url);
            }
            return;
        }
    }

    /// One request to `base` + `path`: status and JSON body (a body that is
    /// not JSON is a JSON string of its first bytes). `Err` when the
    /// replica could not be reached or did not answer in time.
    async fn once(
        &self,
        method: &Method,
        base: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> Result<(u16, Value), Failed> {
        let url = format!("{base}{path}");
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header("accept", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(&token.0);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| Failed {
            why: describe(&url, &e),
            // A refused connection carried nothing; anything later may have.
            maybe_done: !e.is_connect(),
        })?;
        let status = response.status().as_u16();
        let bytes = read_bounded(response, MAX_BODY).await.map_err(|e| Failed {
            why: format!("{url}: {e}"),
            maybe_done: true,
        })?;
        let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            Value::String(String::from_utf8_lossy(&bytes[..bytes.len().min(2000)]).into_owned())
        });
        Ok((status, value))
    }

    /// Sends `method path` (with a JSON `body`) to the leader, or to any
    /// replica for a read when none is known, following not-leader answers
    /// and retrying until the deadline (module docs). Returns the 2xx
    /// answer's status and body.
    ///
    /// # Errors
    /// [`CtlError::Api`] for a final non-2xx answer;
    /// [`CtlError::Unreachable`] when the deadline passed first.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), CtlError> {
        self.call_with(method, path, body, &[]).await
    }

    /// [`Client::call`] with request `headers` as well (an `If-Match`).
    ///
    /// # Errors
    /// As [`Client::call`].
    pub async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> Result<(u16, Value), CtlError> {
        // POST starts something (a drain, a job run): sent again after an
        // answer was lost, it could start a second one.
        let idempotent = method != Method::POST;
        let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(2));
        let mut last = String::from("nothing tried");
        loop {
            if self.known_leader().is_none() {
                self.discover_leader().await;
            }
            let mut queue = self.targets();
            let mut tried: Vec<String> = Vec::new();
            let mut hops = 0;
            while let Some(base) = queue.pop_front() {
                if tried.contains(&base) {
                    continue;
                }
                tried.push(base.clone());
                let (status, answer) = match self.once(&method, &base, path, body, headers).await {
                    Ok(answer) => answer,
                    Err(e) => {
                        if self.known_leader().as_deref() == Some(base.as_str()) {
                            self.set_leader(None);
                        }
                        if e.maybe_done && !idempotent {
                            return Err(CtlError::Unreachable(format!(
                                "{}; the request may have been carried out: \
                                 check before sending it again",
                                e.why
                            )));
                        }
                        last = e.why;
                        continue;
                    }
                };
                if status == 503 && is_problem(&answer, "not-leader") {
                    last = format!("{base}: {}", detail_of(&answer));
                    match answer["leader_url"].as_str() {
                        Some(url) if hops < MAX_HOPS => {
                            hops += 1;
                            let url = url.trim_end_matches('/').to_string();
                            self.set_leader(Some(url.clone()));
                            tried.retain(|t| *t != url);
                            queue.push_front(url);
                        }
                        _ => self.set_leader(None),
                    }
                    continue;
                }
                // The leader refused before doing anything (still reading
                // ZooKeeper after a failover): safe to send again, a POST
                // too.
                if status == 503 && is_problem(&answer, "not-ready") {
                    last = format!("{base}: {}", detail_of(&answer));
                    continue;
                }
                if matches!(status, 502..=504) && idempotent {
                    last = format!("{base}: HTTP {status}: {}", detail_of(&answer));
                    continue;
                }
                if (200..300).contains(&status) {
                    return Ok((status, answer));
                }
                return Err(CtlError::from_answer_at(
                    status,
                    &format!("{base}{path}"),
                    &answer,
                ));
            }
            let delay = backoff.next_delay();
            if Instant::now() + delay >= self.deadline() {
                return Err(CtlError::Unreachable(last));
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// `GET path`: the body.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub async fn get(&self, path: &str) -> Result<Value, CtlError> {
        self.call(Method::GET, path, None).await.map(|(_, v)| v)
    }

    /// Opens a long-lived GET (an event stream) at the leader or the first
    /// replica that answers 2xx, with `headers`; retried as
    /// [`Client::call`] until the deadline.
    ///
    /// # Errors
    /// [`CtlError::Api`] for a final non-2xx answer (a 404 too: the caller
    /// may try another path); [`CtlError::Unreachable`].
    pub async fn open_stream(
        &self,
        path: &str,
        headers: &[(&str, String)],
    ) -> Result<reqwest::Response, CtlError> {
        let deadline = self.deadline();
        let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(2));
        let mut last = String::from("nothing tried");
        loop {
            if self.known_leader().is_none() {
                self.discover_leader().await;
            }
            for base in self.targets() {
                let url = format!("{base}{path}");
                let mut request = self
                    .streaming
                    .get(&url)
                    .header("accept", "text/event-stream");
                for (name, value) in headers {
                    request = request.header(*name, value);
                }
                if let Some(token) = &self.token {
                    request = request.bearer_auth(&token.0);
                }
                let response =
                    match tokio::time::timeout(Duration::from_secs(10), request.send()).await {
                        Ok(Ok(r)) => r,
                        Ok(Err(e)) => {
                            last = describe(&url, &e);
                            self.forget_if_leader(&base);
                            continue;
                        }
                        Err(_) => {
                            last = format!("{url}: no answer within 10s");
                            self.forget_if_leader(&base);
                            continue;
                        }
                    };
                let status = response.status().as_u16();
                if (200..300).contains(&status) {
                    return Ok(response);
                }
                let bytes = read_bounded(response, 64 * 1024).await.unwrap_or_default();
                let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                    Value::String(
                        String::from_utf8_lossy(&bytes[..bytes.len().min(2000)]).into_owned(),
                    )
                });
                if matches!(status, 502..=504) {
                    last = format!("{url}: HTTP {status}: {}", detail_of(&body));
                    if let Some(leader) = body["leader_url"].as_str() {
                        self.set_leader(Some(leader.to_string()));
                    }
                    continue;
                }
                return Err(CtlError::from_answer_at(status, &url, &body));
            }
            let delay = backoff.next_delay();
            if Instant::now() + delay >= deadline {
                return Err(CtlError::Unreachable(last));
            }
            tokio::time::sleep(delay).await;
        }
    }

    fn forget_if_leader(&self, base: &str) {
        if self.known_leader().as_deref() == Some(base) {
            self.set_leader(None);
        }
    }
}

/// A request that got no answer: why, and whether it may have reached
/// the server (anything but a refused connection).
struct Failed {
    why: String,
    maybe_done: bool,
}

/// True when `body` is a problem document of kind `kind`
/// (`urn:mesos-appliance:problem:<kind>`).
pub fn is_problem(body: &Value, kind: &str) -> bool {
    body["type"]
        .as_str()
        .is_some_and(|t| t.rsplit(':').next() == Some(kind))
}

fn detail_of(body: &Value) -> String {
    body["detail"]
        .as_str()
        .or(body.as_str())
        .unwrap_or("")
        .chars()
        .take(300)
        .collect()
}

/// A transport error without the request's headers (which hold the token).
fn describe(url: &str, e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "no answer in time"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut cause = String::new();
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if cause.is_empty() {
        format!("{url}: {what}")
    } else {
        format!("{url}: {what} ({cause})")
    }
}

/// Reads `response`'s body, at most `max` bytes.
async fn read_bounded(response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("reading the answer: {e}"))?;
        if body.len() + chunk.len() > max {
            return Err(format!("the answer is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `s` percent-encoded for one path segment.
pub fn segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `s` percent-encoded for a query value.
pub fn query_value(s: &str) -> String {
    segment(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn problems_print_title_detail_and_field_errors() {
        let e = CtlError::from_answer(
            400,
            &json!({"type": "urn:mesos-appliance:problem:invalid", "title": "Invalid request",
                "status": 400, "detail": "cpus: must be more than 0",
                "errors": [{"field": "cpus", "message": "must be more than 0"}]}),
        );
        assert_eq!(
            e.to_string(),
            "error: Invalid request: cpus: must be more than 0\n  cpus: must be more than 0"
        );
        assert_eq!(e.exit(), Exit::Api);
        // Not a problem document: the status's reason and the text.
        let e = CtlError::from_answer(502, &json!("Bad gateway from nginx"));
        assert_eq!(e.to_string(), "error: Bad gateway from nginx");
        let e = CtlError::from_answer(
            404,
            &json!({"type": "urn:mesos-appliance:problem:not-found", "title": "Not found",
                "status": 404, "detail": "not found: job nope"}),
        );
        assert_eq!(e.to_string(), "error: not found: job nope");
    }

    #[test]
    fn problem_kinds_are_read_from_the_type_uri() {
        let body = json!({"type": "urn:mesos-appliance:problem:not-leader"});
        assert!(is_problem(&body, "not-leader"));
        assert!(!is_problem(&body, "leader"));
        assert!(!is_problem(&json!("text"), "not-leader"));
    }

    /// A leader still reading the jobs answers a run 503 `not-ready`
    /// (`docs/jobs.md`): nothing was done, so the POST is sent again within
    /// the timeout, and the second answer is the run.
    #[tokio::test]
    async fn a_post_refused_as_not_ready_is_sent_again() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let posts = std::sync::Arc::new(AtomicUsize::new(0));
        let seen = posts.clone();
        let app = axum::Router::new()
            .route(
                "/api/v1/state",
                axum::routing::get(|| async {
                    axum::Json(json!({"leadership": {"role": "leader"}}))
                }),
            )
            .route(
                "/api/v1/jobs/report/runs",
                axum::routing::post(move || {
                    let n = seen.fetch_add(1, Ordering::SeqCst);
                    async move {
                        use axum::response::IntoResponse;
                        if n == 0 {
                            let problem = json!({
                                "type": "urn:mesos-appliance:problem:not-ready",
                                "title": "Not ready yet", "status": 503,
                                "detail": "the leader is still reading the jobs"});
                            (
                                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                                axum::Json(problem),
                            )
                                .into_response()
                        } else {
                            let run = json!({"run_id": "r1", "state": "starting"});
                            (axum::http::StatusCode::CREATED, axum::Json(run)).into_response()
                        }
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let global = GlobalArgs {
            request_timeout: Duration::from_secs(5),
            ..global(url)
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::new(&global, Duration::from_secs(10)).unwrap();
        let (status, run) = client
            .call(Method::POST, "/api/v1/jobs/report/runs", Some(&json!({})))
            .await
            .unwrap();
        assert_eq!((status, run["run_id"].as_str()), (201, Some("r1")));
        assert_eq!(posts.load(Ordering::SeqCst), 2);
    }

    fn global(url: String) -> GlobalArgs {
        GlobalArgs {
            urls: vec![url],
            token: None,
            token_file: None,
            token_name: None,
            json: false,
            timeout: None,
            request_timeout: Duration::from_secs(2),
        }
    }

    /// `--url` with user information: no error shows the password,
    /// however it names the URL (a refused connection, an answer).
    #[tokio::test]
    async fn errors_hide_the_password_of_a_url() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A port nothing listens on: bound, then closed.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("http://alice:SECRET@127.0.0.1:{port}");
        let client = Client::new(&global(url), Duration::from_millis(300)).unwrap();
        let e = client.get("/api/v1/services").await.unwrap_err();
        let shown = e.to_string();
        assert!(matches!(e, CtlError::Unreachable(_)), "{e:?}");
        assert!(shown.contains("http://alice:***@127.0.0.1:"), "{shown}");
        assert!(!shown.contains("SECRET"), "{shown}");
        for e in [
            CtlError::from_answer(500, &json!("see http://bob:pw1@example.org/x")),
            CtlError::Usage("--url http://bob:pw1@h:1/: bad".into()),
            CtlError::TimedOut("waiting on https://bob:pw1@h".into()),
        ] {
            let shown = e.to_string();
            assert!(
                !shown.contains("pw1") && shown.contains("bob:***@"),
                "{shown}"
            );
        }
    }

    /// A server that is not a replica (a bare `404 Not Found`, no problem
    /// document): the error names the URL asked and says so, instead of
    /// `error: Not Found: `.
    #[tokio::test]
    async fn a_bare_404_names_the_url_and_says_it_is_not_the_api() {
        let app = axum::Router::new().fallback(|| async { axum::http::StatusCode::NOT_FOUND });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = format!("http://alice:SECRET@{addr}");
        let client = Client::new(&global(url), Duration::from_secs(5)).unwrap();
        let e = client.get("/api/v1/services").await.unwrap_err();
        assert!(matches!(e, CtlError::Api { status: 404, .. }), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!(
                "error: http://alice:***@{addr}/api/v1/services answered HTTP 404 Not Found: \
                 not a mesos-appliance API"
            )),
            "{shown}"
        );
        assert!(!shown.contains("SECRET"), "{shown}");
        // A problem document is still read as one.
        let e = CtlError::from_answer_at(
            404,
            "http://h/api/v1/jobs/x",
            &json!({"title": "Not found", "detail": "not found: job x"}),
        );
        assert_eq!(e.to_string(), "error: not found: job x");
    }

    #[test]
    fn names_are_encoded_as_one_path_segment() {
        assert_eq!(segment("web"), "web");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
