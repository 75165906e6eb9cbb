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
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};

use super::config::ClientConfig;
use crate::mesos::detector::MasterAddress;
use crate::mesos::media::STREAM_ID_HEADER;

/// 307s followed for one request before giving up (a leader redirects once;
/// more means masters disagree about who leads).
pub(crate) const MAX_REDIRECTS: usize = 4;

/// Idle keep-alive connections the calls client keeps to one master.
/// A launch puts up to a few hundred calls in flight at once (the runner's
/// acknowledgement, offer and call lanes), and reqwest keeps every
/// connection that answered one of them by default, each with its hyper
/// read and write buffers: about 5 MB for the ~134 connections left idle at
/// 10,000 tasks (`benches/memory.py`). A connection beyond this bound is
/// closed when its call ends; a busy lane still reuses the ones kept.
pub(crate) const MAX_IDLE_CALL_CONNECTIONS: usize = 16;

/// The two HTTP clients and what every request carries.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    /// For SUBSCRIBE: no request timeout (it would cut the stream), no pooling.
    stream: reqwest::Client,
    /// For calls: a whole-request timeout.
    calls: reqwest::Client,
    credentials: Option<super::Credentials>,
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
    /// `Mesos-Stream-Id` for non-SUBSCRIBE scheduler calls.
    pub stream_id: Option<&'a str>,
    pub body: Bytes,
    /// SUBSCRIBE: use the stream client.
    pub long_lived: bool,
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
            credentials: config.credentials.clone(),
            call_timeout: config.call_timeout,
            max_error_body: config.max_error_body_bytes,
        })
    }

    /// The configured error-body limit, in bytes.
    pub fn max_error_body(&self) -> usize {
        self.max_error_body
    }

    /// POSTs `request` to `master`, following up to [`MAX_REDIRECTS`] 307s
    /// (each new leader is passed to `on_redirect`). Waits at most the call
    /// timeout for response headers, also for a stream.
    pub async fn post(
        &self,
        master: &MasterAddress,
        request: &Request<'_>,
        mut on_redirect: impl FnMut(&MasterAddress),
    ) -> Result<Answer, SendError> {
        let client = if request.long_lived {
            &self.stream
        } else {
            &self.calls
        };
        let mut master = master.clone();
        let mut url = master.endpoint(request.path);
        for _ in 0..=MAX_REDIRECTS {
            let builder = self.build(client, url.clone(), request);
            let response = match tokio::time::timeout(self.call_timeout, builder.send()).await {
                Err(_) => return Err(SendError::Timeout),
                Ok(Err(error)) => return Err(classify(&error)),
                Ok(Ok(response)) => response,
            };
            if response.status() != StatusCode::TEMPORARY_REDIRECT {
                return Ok(Answer { response, master });
            }
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let target = MasterAddress::follow(&url, &location).ok_or_else(|| {
                SendError::Redirect(format!("unusable Location {location:?} from {master}"))
            })?;
            let leader = MasterAddress::of_url(&target).ok_or_else(|| {
                SendError::Redirect(format!("unusable Location {location:?} from {master}"))
            })?;
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
    fn build(
        &self,
        client: &reqwest::Client,
        url: reqwest::Url,
        request: &Request<'_>,
    ) -> reqwest::RequestBuilder {
        let mut builder = client
            .post(url)
            .header(CONTENT_TYPE, request.content_type)
            .body(request.body.clone());
        if let Some(accept) = request.accept {
            builder = builder.header(ACCEPT, accept);
        }
        if let Some(stream_id) = request.stream_id {
            builder = builder.header(STREAM_ID_HEADER, stream_id);
        }
        if let Some(credentials) = &self.credentials {
            builder = builder.basic_auth(&credentials.principal, Some(credentials.secret()));
        }
        builder
    }
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
            stream_id: Some("stream-1"),
            body: Bytes::from_static(b"\x08\x04"),
            long_lived: false,
        };
        let url = reqwest::Url::parse("http://m:5050/api/v1/scheduler").unwrap();
        let built = http.build(&http.calls, url, &request).build().unwrap();
        let header = |name: &str| built.headers().get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("content-type"), Some("application/x-protobuf"));
        assert_eq!(header("accept"), Some("application/x-protobuf"));
        assert_eq!(header("mesos-stream-id"), Some("stream-1"));
        // base64("fw-principal:s3cret")
        assert_eq!(
            header("authorization"),
            Some("Basic ZnctcHJpbmNpcGFsOnMzY3JldA==")
        );
        assert_eq!(built.method(), reqwest::Method::POST);
    }

    /// Many calls at once open as many connections; when they end, the
    /// calls client keeps at most [`MAX_IDLE_CALL_CONNECTIONS`] of them
    /// and closes the others (reqwest's default kept all of them).
    #[tokio::test]
    async fn calls_keep_a_bounded_number_of_idle_connections() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        use hyper::server::conn::http1;
        use hyper_util::rt::TokioIo;

        use crate::mesos::detector::Scheme;

        const CALLS: usize = 64;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicUsize::new(0));
        // Every call is held until all have arrived: one connection each.
        let arrived = Arc::new(tokio::sync::Barrier::new(CALLS));
        let server_open = open.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let open = server_open.clone();
                let arrived = arrived.clone();
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_request| {
                        let arrived = arrived.clone();
                        async move {
                            arrived.wait().await;
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(String::new()))
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        let http = Http::new(&ClientConfig::default()).unwrap();
        let master = MasterAddress::new(Scheme::Http, "127.0.0.1", port).unwrap();
        let request = Request {
            path: "/api/v1/scheduler",
            content_type: "application/json",
            accept: None,
            stream_id: None,
            body: Bytes::from_static(b"{}"),
            long_lived: false,
        };
        let answers =
            futures::future::join_all((0..CALLS).map(|_| http.post(&master, &request, |_| {})))
                .await;
        for answer in answers {
            let answer = answer.expect("answered");
            // The body is read to its end: the connection goes back to the pool.
            answer.response.bytes().await.unwrap();
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while open.load(Ordering::SeqCst) > MAX_IDLE_CALL_CONNECTIONS
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(open.load(Ordering::SeqCst), MAX_IDLE_CALL_CONNECTIONS);
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
