//! HTTP plumbing shared by the scheduler and operator clients: two reqwest
//! clients (one for long-lived event streams, one for short calls), basic
//! authentication, manual `307` handling that remembers the leader, and
//! bounded body reads.
//!
//! Redirects are not auto-followed by reqwest: a 307 must also tell the
//! detector who leads now, and a real master's `Location` is
//! protocol-relative with the delegate-prefixed path
//! (`//localhost:5050/master/api/v1/scheduler`, capture k).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION};
use reqwest::{Method, StatusCode};

use super::config::ClientConfig;
use crate::mesos::detector::MasterAddress;

/// [`crate::mesos::media::STREAM_ID_HEADER`] as a header name, made once
/// (header names are case-insensitive; `from_static` wants lower case).
const STREAM_ID: HeaderName = HeaderName::from_static("mesos-stream-id");

/// 307s followed for one request before giving up (a leader redirects once;
/// more means masters disagree about who leads).
pub(crate) const MAX_REDIRECTS: usize = 4;

/// Idle keep-alive connections the calls client keeps to one master: as
/// many as the runner's launch lanes keep in flight together (64
/// acknowledgements and 32 offer calls, `src/scheduler/core/runner/calls.rs`
/// checks that they fit). A connection beyond this bound is closed when its
/// call ends, and a call finding none idle opens a new one: with 16 kept,
/// every burst of acknowledgements above 16 closed and reopened its
/// connections, about 1,900 connections at 10,000 tasks (one call in ten
/// paid a connect, an accept and hyper's connection setup on both sides);
/// with as many kept as the lanes use, the launch opens each once. A kept
/// connection holds hyper's read and write buffers (~37 KB, 5 MB for ~134
/// in `benches/memory.py`); a busy launch has them all open anyway, so the
/// high-water mark does not grow with this bound.
pub(crate) const MAX_IDLE_CALL_CONNECTIONS: usize = 96;

/// The two HTTP clients and what every request carries.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    /// For SUBSCRIBE: no request timeout (it would cut the stream), no pooling.
    stream: reqwest::Client,
    /// For calls: a whole-request timeout.
    calls: reqwest::Client,
    /// `Authorization: Basic …` of the credentials, encoded once and marked
    /// sensitive (kept out of logs), instead of once per call.
    authorization: Option<HeaderValue>,
    call_timeout: Duration,
    max_error_body: usize,
}

/// One POST to a master.
pub(crate) struct Request<'a> {
    /// Endpoint path, e.g. `/api/v1/scheduler`.
    pub path: &'a str,
    /// Exact `Content-Type` (the master compares strings).
    pub content_type: &'a str,
    /// `Accept`, set explicitly (reqwest's `*/*` would get JSON back).
    pub accept: Option<&'a str>,
    /// `Mesos-Stream-Id` for non-SUBSCRIBE scheduler calls, built once per
    /// subscription ([`stream_id_header`]).
    pub stream_id: Option<&'a HeaderValue>,
    pub body: Bytes,
    /// SUBSCRIBE: use the stream client.
    pub long_lived: bool,
}

/// A stream ID as a header value; `None` if it has bytes a header cannot
/// carry (a master's stream ID is a UUID).
pub(crate) fn stream_id_header(stream_id: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(stream_id).ok()
}

/// A response other than 307, and the master that gave it.
pub(crate) struct Answer {
    pub response: reqwest::Response,
    pub master: MasterAddress,
}

/// Why no answer was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// Connection refused / unreachable / connect timeout.
    Connect(String),
    /// No response headers within the call timeout.
    Timeout,
    /// Redirect loop or unusable Location.
    Redirect(String),
    /// Anything else.
    Transport(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "cannot connect: {e}"),
            SendError::Timeout => f.write_str("no answer within the call timeout"),
            SendError::Redirect(e) => write!(f, "bad redirect: {e}"),
            SendError::Transport(e) => write!(f, "transport error: {e}"),
        }
    }
}

impl Http {
    /// Builds both clients: HTTP/1.1 only, no redirect following, connect
    /// timeout on both, request timeout on calls only, TLS with the system
    /// roots. Installs rustls' ring provider first if none is installed
    /// (reqwest is built without one and would panic).
    pub fn new(config: &ClientConfig) -> Result<Self, reqwest::Error> {
        crate::mesos::ensure_tls_provider();
        let base = || {
            reqwest::Client::builder()
                .http1_only()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(config.connect_timeout)
                .tcp_nodelay(true)
        };
        let stream = base()
            // Keepalive probes let the kernel notice a dead peer; the
            // heartbeat supervision is what actually decides.
            .tcp_keepalive(Duration::from_secs(30))
            .pool_max_idle_per_host(0)
            .build()?;
        let calls = base()
            .timeout(config.call_timeout)
            .pool_max_idle_per_host(MAX_IDLE_CALL_CONNECTIONS)
            .build()?;
        Ok(Self {
            stream,
            calls,
            authorization: config.credentials.as_ref().and_then(basic_authorization),
            call_timeout: config.call_timeout,
            max_error_body: config.max_error_body_bytes,
        })
    }

    /// The configured error-body limit, in bytes.
    pub fn max_error_body(&self) -> usize {
        self.max_error_body
    }

    /// POSTs `request` to `request.path` on `master`; see [`Http::post_to`].
    pub async fn post(
        &self,
        master: &MasterAddress,
        request: &Request<'_>,
        on_redirect: impl FnMut(&MasterAddress),
    ) -> Result<Answer, SendError> {
        self.post_to(master, master.endpoint(request.path), request, on_redirect)
            .await
    }

    /// POSTs `request` to `url` (an endpoint of `master`, built once by a
    /// caller that sends many), following up to [`MAX_REDIRECTS`] 307s
    /// (each new leader is passed to `on_redirect`). Waits at most the call
    /// timeout for response headers, also for a stream.
    pub async fn post_to(
        &self,
        master: &MasterAddress,
        mut url: reqwest::Url,
        request: &Request<'_>,
        mut on_redirect: impl FnMut(&MasterAddress),
    ) -> Result<Answer, SendError> {
        let mut master = master.clone();
        for _ in 0..=MAX_REDIRECTS {
            let built = self.build(url, request);
            let response = if request.long_lived {
                // The stream client has no request timeout (it would cut
                // the stream): the headers' wait is bounded here.
                match tokio::time::timeout(self.call_timeout, self.stream.execute(built)).await {
                    Err(_) => return Err(SendError::Timeout),
                    Ok(sent) => sent,
                }
            } else {
                // The calls client's own timeout bounds the whole request.
                self.calls.execute(built).await
            };
            let response = response.map_err(|error| classify(&error))?;
            if response.status() != StatusCode::TEMPORARY_REDIRECT {
                return Ok(Answer { response, master });
            }
            let requested = response.url();
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let unusable =
                || SendError::Redirect(format!("unusable Location {location:?} from {master}"));
            let target = MasterAddress::follow(requested, location).ok_or_else(unusable)?;
            let leader = MasterAddress::of_url(&target).ok_or_else(unusable)?;
            tracing::info!(from = %master, to = %leader, path = target.path(), "following 307 to the leading master");
            on_redirect(&leader);
            master = leader;
            url = target;
        }
        Err(SendError::Redirect(format!(
            "more than {MAX_REDIRECTS} redirects, last to {master}"
        )))
    }
}

impl Http {
    /// The request as sent: exact `Content-Type`, explicit `Accept`, the
    /// stream ID, basic auth.
    fn build(&self, url: reqwest::Url, request: &Request<'_>) -> reqwest::Request {
        let mut built = reqwest::Request::new(Method::POST, url);
        let headers = built.headers_mut();
        // The media types are the crate's constants, valid header values;
        // one that is not is left out and the master refuses the call.
        if let Ok(value) = HeaderValue::from_str(request.content_type) {
            headers.insert(CONTENT_TYPE, value);
        }
        if let Some(Ok(value)) = request.accept.map(HeaderValue::from_str) {
            headers.insert(ACCEPT, value);
        }
        if let Some(stream_id) = request.stream_id {
            headers.insert(STREAM_ID, stream_id.clone());
        }
        if let Some(authorization) = &self.authorization {
            headers.insert(AUTHORIZATION, authorization.clone());
        }
        *built.body_mut() = Some(request.body.clone().into());
        built
    }
}

/// `Basic base64(principal:secret)` (RFC 7617), sensitive. Always `Some`:
/// base64 is ASCII.
fn basic_authorization(credentials: &super::Credentials) -> Option<HeaderValue> {
    use base64::Engine;
    let pair = format!("{}:{}", credentials.principal, credentials.secret());
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Sorts a reqwest error into connect / timeout / other, with its causes.
pub(crate) fn classify(error: &reqwest::Error) -> SendError {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_connect() {
        SendError::Connect(text)
    } else if error.is_timeout() {
        SendError::Timeout
    } else {
        SendError::Transport(text)
    }
}

/// Reads at most `limit` bytes of a body; `Err(read)` with what was read
/// when the body is longer (the rest is not read; the connection is dropped).
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Bytes, Bytes> {
    let mut body = BytesMut::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    let take = limit - body.len();
                    body.extend_from_slice(&chunk[..take]);
                    return Err(body.freeze());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.freeze()),
            // A body cut short still says something about the refusal.
            Err(_) => return Ok(body.freeze()),
        }
    }
}

/// An error body as text, at most `limit` bytes, marked when truncated.
pub(crate) async fn error_text(response: reqwest::Response, limit: usize) -> String {
    match read_limited(response, limit).await {
        Ok(body) => String::from_utf8_lossy(&body).into_owned(),
        Err(partial) => format!(
            "{}… (truncated at {limit} bytes)",
            String::from_utf8_lossy(&partial)
        ),
    }
}

/// A local HTTP/1.1 master for tests that answers every POST with an empty
/// 202 once `together` requests have arrived, and counts its connections.
#[cfg(test)]
pub(crate) mod counting_server {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;

    use super::{Http, Request};
    use crate::mesos::detector::{MasterAddress, Scheme};

    /// The server's address and counts.
    pub(crate) struct Server {
        pub master: MasterAddress,
        /// Connections accepted so far.
        pub accepted: Arc<AtomicUsize>,
        /// Connections open now.
        pub open: Arc<AtomicUsize>,
    }

    /// Starts the server; each request is answered once `together`
    /// requests (its own included) have arrived since the last answers.
    pub(crate) async fn start(together: usize) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let arrived = Arc::new(tokio::sync::Barrier::new(together));
        let (server_accepted, server_open) = (accepted.clone(), open.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                server_accepted.fetch_add(1, Ordering::SeqCst);
                server_open.fetch_add(1, Ordering::SeqCst);
                let (open, arrived) = (server_open.clone(), arrived.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_request| {
                        let arrived = arrived.clone();
                        async move {
                            arrived.wait().await;
                            let mut answer = hyper::Response::new(String::new());
                            *answer.status_mut() = hyper::StatusCode::ACCEPTED;
                            Ok::<_, std::convert::Infallible>(answer)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Server {
            master: MasterAddress::new(Scheme::Http, "127.0.0.1", port).unwrap(),
            accepted,
            open,
        }
    }

    /// Sends `calls` POSTs at once through `http` and reads every answer to
    /// its end (so that its connection goes back to the pool).
    pub(crate) async fn calls_at_once(http: &Http, server: &Server, calls: usize) {
        let request = Request {
            path: "/api/v1/scheduler",
            content_type: "application/json",
            accept: None,
            stream_id: None,
            body: Bytes::from_static(b"{}"),
            long_lived: false,
        };
        let answers = futures::future::join_all(
            (0..calls).map(|_| http.post(&server.master, &request, |_| {})),
        )
        .await;
        for answer in answers {
            answer.expect("answered").response.bytes().await.unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::client::Credentials;
    use crate::mesos::media::PROTOBUF;

    #[test]
    fn calls_carry_exact_media_types_the_stream_id_and_basic_auth() {
        let config = ClientConfig {
            credentials: Some(Credentials::new("fw-principal", "s3cret")),
            ..ClientConfig::default()
        };
        let http = Http::new(&config).unwrap();
        let request = Request {
            path: "/api/v1/scheduler",
            content_type: PROTOBUF,
            accept: Some(PROTOBUF),
            stream_id: Some(&stream_id_header("stream-1").unwrap()),
            body: Bytes::from_static(b"\x08\x04"),
            long_lived: false,
        };
        let url = reqwest::Url::parse("http://m:5050/api/v1/scheduler").unwrap();
        let built = http.build(url, &request);
        let header = |name: &str| built.headers().get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("content-type"), Some("application/x-protobuf"));
        assert_eq!(header("accept"), Some("application/x-protobuf"));
        assert_eq!(header("mesos-stream-id"), Some("stream-1"));
        // base64("fw-principal:s3cret")
        assert_eq!(
            header("authorization"),
            Some("Basic ZnctcHJpbmNpcGFsOnMzY3JldA==")
        );
        assert!(built.headers()["authorization"].is_sensitive());
        assert_eq!(built.method(), reqwest::Method::POST);
        assert_eq!(
            built.body().and_then(|b| b.as_bytes()),
            Some(&b"\x08\x04"[..])
        );
    }

    /// Many calls at once open as many connections; when they end, the
    /// calls client keeps at most [`MAX_IDLE_CALL_CONNECTIONS`] of them
    /// and closes the others (reqwest's default kept all of them).
    #[tokio::test]
    async fn calls_keep_a_bounded_number_of_idle_connections() {
        use std::sync::atomic::Ordering;

        const CALLS: usize = MAX_IDLE_CALL_CONNECTIONS + 32;
        // Every call is held until all have arrived: one connection each.
        let server = counting_server::start(CALLS).await;
        let http = Http::new(&ClientConfig::default()).unwrap();
        counting_server::calls_at_once(&http, &server, CALLS).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while server.open.load(Ordering::SeqCst) > MAX_IDLE_CALL_CONNECTIONS
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            server.open.load(Ordering::SeqCst),
            MAX_IDLE_CALL_CONNECTIONS
        );
        assert_eq!(server.accepted.load(Ordering::SeqCst), CALLS);
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_the_limit() {
        let response =
            |body: &'static str| reqwest::Response::from(axum::http::Response::new(body));
        assert_eq!(
            read_limited(response("short"), 10).await,
            Ok(Bytes::from_static(b"short"))
        );
        assert_eq!(
            read_limited(response("exactly10!"), 10).await,
            Ok(Bytes::from_static(b"exactly10!"))
        );
        assert_eq!(
            read_limited(response("much too long"), 4).await,
            Err(Bytes::from_static(b"much"))
        );
        assert_eq!(
            error_text(response("No leader elected, and more"), 17).await,
            "No leader elected… (truncated at 17 bytes)"
        );
    }
}
