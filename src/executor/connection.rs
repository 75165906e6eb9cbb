//! The executor's HTTP side of the v1 executor API (`docs/executor-http-api.md`,
//! `src/slave/http.cpp` `Http::executor`, `docs/mesos-protocol.md#executor-api`): SUBSCRIBE opens a
//! long-lived `200` response carrying RecordIO-framed events; UPDATE and
//! MESSAGE calls go on other connections and are answered `202`. No
//! `Mesos-Stream-Id` on this API.
//!
//! Every remote call is bounded: connecting by [`CONNECT_TIMEOUT`], a call's
//! answer (and a SUBSCRIBE's response head) by [`CALL_TIMEOUT`]. The event
//! stream itself has no read timeout — the agent heartbeats executors only
//! every 30 minutes — but TCP keep-alive detects a dead peer, and a record
//! larger than [`MAX_EVENT_BYTES`] ends the stream.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tokio_util::codec::FramedRead;
use tokio_util::io::StreamReader;

use super::config::ExecutorConfig;
use crate::backoff::Backoff;
use crate::mesos::json;
use crate::mesos::media::Encoding;
use crate::mesos::recordio::{RecordIoCodec, RecordIoError};
use crate::mesos::v1::executor::{Call, Event};

/// Time allowed to open a TCP connection to the agent.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for a call's answer (the response head for SUBSCRIBE).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest event accepted: a LAUNCH carries one TaskInfo, whose `data` is
/// the biggest part; 4 MiB is generous.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;
/// Largest error body kept for logs.
const MAX_ERROR_BODY: usize = 1024;

/// Why talking to the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// Connecting, sending or reading failed (refused, reset, DNS, TLS).
    #[error("agent unreachable: {0}")]
    Transport(#[from] reqwest::Error),
    /// No answer within [`CALL_TIMEOUT`].
    #[error("agent did not answer within {0:?}")]
    Timeout(Duration),
    /// The agent refused the call, e.g. `503 Agent has not finished recovery`
    /// or `403 Executor is not subscribed`.
    #[error("agent answered {status}: {body}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// Start of the plain-text body.
        body: String,
    },
    /// The event stream was not valid RecordIO, or ended inside a record.
    #[error(transparent)]
    Framing(#[from] RecordIoError),
    /// A record was not a valid `mesos.v1.executor.Event`.
    #[error("undecodable event: {0}")]
    Decode(String),
}

/// Events of one subscription, in order; ends (`None`) when the agent closes
/// the stream cleanly, or yields one error when it breaks.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event, ConnectionError>> + Send>>;

/// A client for one agent's executor endpoint.
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    url: String,
    encoding: Encoding,
    auth: Option<String>,
}

impl AgentClient {
    /// A client for `http://<MESOS_AGENT_ENDPOINT>/api/v1/executor`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built. Install the rustls crypto
    /// provider first (see `docs/architecture.md#build-notes`): reqwest is built without one.
    pub fn new(config: &ExecutorConfig) -> Result<Self, ConnectionError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_keepalive(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(AgentClient {
            http,
            url: format!("http://{}/api/v1/executor", config.agent_endpoint),
            encoding: config.encoding,
            auth: config.auth_token.as_ref().map(|t| format!("Bearer {t}")),
        })
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn request(&self, call: &Call) -> reqwest::RequestBuilder {
        let body = match self.encoding {
            Encoding::Json => json::to_vec(call),
            Encoding::Protobuf => call.encode_to_vec(),
        };
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, self.encoding.media_type())
            .header(reqwest::header::ACCEPT, self.encoding.media_type())
            .body(body);
        if let Some(auth) = &self.auth {
            request = request.header(reqwest::header::AUTHORIZATION, auth);
        }
        request
    }

    /// Sends SUBSCRIBE; on `200` returns the decoded event stream.
    ///
    /// # Errors
    /// Transport failures, a timeout before the response head, or any
    /// status other than 200 (`Refused`).
    pub async fn subscribe(&self, call: &Call) -> Result<EventStream, ConnectionError> {
        let response = tokio::time::timeout(CALL_TIMEOUT, self.request(call).send())
            .await
            .map_err(|_| ConnectionError::Timeout(CALL_TIMEOUT))??;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(refused(status, response).await);
        }
        let encoding = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(Encoding::from_content_type)
            .unwrap_or(self.encoding);
        let bytes = response.bytes_stream().map_err(std::io::Error::other);
        let records = FramedRead::new(
            StreamReader::new(bytes),
            RecordIoCodec::new(MAX_EVENT_BYTES),
        );
        let events = records.map(move |record| {
            let record = record?;
            decode_event(encoding, &record)
        });
        Ok(Box::pin(events))
    }

    /// Sends a non-SUBSCRIBE call and expects `202 Accepted`.
    ///
    /// # Errors
    /// Transport failures, a timeout, or any other status (`Refused`).
    pub async fn call(&self, call: &Call) -> Result<(), ConnectionError> {
        let response = tokio::time::timeout(CALL_TIMEOUT, self.request(call).send())
            .await
            .map_err(|_| ConnectionError::Timeout(CALL_TIMEOUT))??;
        let status = response.status().as_u16();
        if status == 202 {
            return Ok(());
        }
        Err(refused(status, response).await)
    }
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error answer, within the
/// call timeout.
async fn refused(status: u16, response: reqwest::Response) -> ConnectionError {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    let read = async {
        while let Some(Ok(chunk)) = chunks.next().await {
            body.extend_from_slice(&chunk[..chunk.len().min(MAX_ERROR_BODY - body.len())]);
            if body.len() >= MAX_ERROR_BODY {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(CALL_TIMEOUT, read).await;
    ConnectionError::Refused {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Decodes one record in the subscription's encoding.
pub(crate) fn decode_event(encoding: Encoding, record: &[u8]) -> Result<Event, ConnectionError> {
    match encoding {
        Encoding::Protobuf => {
            Event::decode(record).map_err(|e| ConnectionError::Decode(e.to_string()))
        }
        Encoding::Json => {
            json::from_slice(record).map_err(|e| ConnectionError::Decode(e.to_string()))
        }
    }
}

/// Retry intervals between SUBSCRIBE attempts: exponential from 100 ms
/// (or `max` if smaller), doubling, each one capped at `max` and jittered
/// down by up to half, so that every interval stays within
/// `MESOS_SUBSCRIPTION_BACKOFF_MAX` as the agent requires
/// (`docs/executor-http-api.md`, "Backoff Strategies": a recovering agent
/// destroys executors that do not retry within that interval).
pub fn subscribe_backoff(max: Duration) -> Backoff {
    Backoff::jittered(Duration::from_millis(100).min(max), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_never_exceeds_the_maximum() {
        let max = Duration::from_secs(2);
        let mut backoff = subscribe_backoff(max);
        let delays: Vec<Duration> = (0..12).map(|_| backoff.next_delay()).collect();
        assert!(delays.iter().all(|d| *d <= max), "{delays:?}");
        assert!(delays[0] <= Duration::from_millis(100));
        assert!(delays[11] >= Duration::from_secs(1), "{delays:?}");
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(100));
        let mut tiny = subscribe_backoff(Duration::from_millis(10));
        assert!(tiny.next_delay() <= Duration::from_millis(10));
    }

    #[test]
    fn events_decode_in_both_encodings() {
        use crate::mesos::v1::executor::event;
        let event = Event {
            r#type: Some(event::Type::Message as i32),
            message: Some(event::Message {
                data: b"kamikaze".to_vec(),
            }),
            ..Default::default()
        };
        let pb = decode_event(Encoding::Protobuf, &event.encode_to_vec()).unwrap();
        assert_eq!(pb, event);
        let js = decode_event(
            Encoding::Json,
            br#"{"type":"MESSAGE","message":{"data":"a2FtaWthemU="}}"#,
        )
        .unwrap();
        assert_eq!(js, event);
        assert!(decode_event(Encoding::Json, b"{oops").is_err());
        assert!(decode_event(Encoding::Protobuf, &[0xff, 0xff]).is_err());
    }
}
