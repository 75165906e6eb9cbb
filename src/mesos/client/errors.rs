//! Typed errors of the scheduler client: ERROR-event classification, why a
//! client stopped or lost its stream, and why a call failed.

use std::fmt;
use std::time::Duration;

use crate::mesos::detector::MasterAddress;
use crate::mesos::recordio::RecordIoError;

/// What an `ERROR` event on the subscription stream means
/// (master.cpp `failoverFramework`, `subscribe`;
/// `docs/mesos-protocol.md#refusals-arrive-on-a-200-stream`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// `"Framework failed over"`: another scheduler subscribed with this
    /// framework ID and the master moved the framework to it. Never
    /// re-subscribe on your own: two instances would ping-pong.
    FailedOver,
    /// `"Framework has been removed"` (Mesos ≥ 1.0), or the pre-1.0 wording
    /// `"Completed framework attempted to re-register"`: the master tore the
    /// framework down (failover timeout, TEARDOWN) and refuses its ID.
    Removed,
    /// Any other refusal (e.g. `Changing framework's principal is not
    /// allowed.`, invalid roles, authorization), with the master's message.
    Other(String),
}

impl ErrorKind {
    /// Classifies an ERROR event's message. Matching is case-insensitive on
    /// the distinctive phrase, so punctuation or a prefix added by a future
    /// Mesos does not turn a removal into "other".
    pub fn classify(message: &str) -> ErrorKind {
        let lower = message.to_ascii_lowercase();
        if lower.contains("framework failed over") {
            ErrorKind::FailedOver
        } else if lower.contains("framework has been removed")
            || lower.contains("completed framework attempted to re-register")
        {
            ErrorKind::Removed
        } else {
            ErrorKind::Other(message.to_string())
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::FailedOver => f.write_str("framework failed over to another scheduler"),
            ErrorKind::Removed => f.write_str("framework has been removed by the master"),
            ErrorKind::Other(message) => write!(f, "master error: {message}"),
        }
    }
}

/// Why the client stopped for good (the last [`super::ClientEvent`] and the
/// final [`super::ConnectionState`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopReason {
    /// The cancellation token fired (e.g. leadership lost).
    #[error("cancelled")]
    Cancelled,
    /// The master sent an ERROR event; it closes the stream after it.
    #[error("{0}")]
    Error(ErrorKind),
    /// SUBSCRIBE was answered with a status that retrying cannot fix
    /// (400, 401, 403, 405, 406, 415…): wrong credentials, malformed
    /// FrameworkInfo. `body` is the master's text, truncated to
    /// `max_error_body_bytes`.
    #[error("SUBSCRIBE refused with {status}: {body}")]
    SubscribeRefused {
        /// HTTP status code.
        status: u16,
        /// Response body text.
        body: String,
    },
    /// The event receiver was dropped: nobody is listening.
    #[error("event receiver dropped")]
    ReceiverDropped,
}

/// Why a subscription was lost (or could not be made); the client retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DisconnectReason {
    /// The master ended the stream cleanly (e.g. after a TEARDOWN).
    #[error("the master closed the event stream")]
    EndOfStream,
    /// The connection broke or the stream could not be decoded.
    #[error("event stream failed: {0}")]
    StreamError(String),
    /// No record of any kind arrived for `silence` (k × heartbeat interval):
    /// a half-open connection or a hung master.
    #[error("no event for {silence:?} (heartbeat timeout)")]
    HeartbeatTimeout {
        /// The silence that was tolerated.
        silence: Duration,
    },
    /// Leader detection names another master (or none).
    #[error("the leading master changed to {}", .to.as_ref().map_or("none".to_string(), |m| m.to_string()))]
    LeaderChanged {
        /// The new leader, if any.
        to: Option<MasterAddress>,
    },
    /// A SUBSCRIBE attempt failed in a way worth retrying (503, 5xx,
    /// connection refused, timeout, redirect loop).
    #[error("SUBSCRIBE failed: {0}")]
    SubscribeFailed(String),
}

/// Why a call could not be delivered. Calls are never retried by the
/// client: they belong to one subscription, and after a re-subscription the
/// scheduler must decide again (offers are gone, a new stream ID applies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// There is no live subscription (connecting, disconnected or stopped).
    #[error("not subscribed to a Mesos master")]
    NotSubscribed,
    /// The call cannot be sent as given (SUBSCRIBE through `call`, or a
    /// `framework_id` other than the subscribed one).
    #[error("invalid call: {0}")]
    Invalid(String),
    /// The master answered something other than 202 (200 for
    /// UPDATE_FRAMEWORK): e.g. 400 `Framework cannot be found`, 403
    /// `Framework is not subscribed`, 503 `No leader elected`. `body` is the
    /// master's text (truncated to `max_error_body_bytes`).
    #[error("master answered {status}: {body}")]
    Rejected {
        /// HTTP status code.
        status: u16,
        /// Response body text.
        body: String,
    },
    /// No connection could be made (refused, unreachable, connect timeout);
    /// leader re-detection was requested.
    #[error("cannot connect to the master: {0}")]
    Connect(String),
    /// No complete answer within `call_timeout`.
    #[error("no answer within the call timeout")]
    Timeout,
    /// Redirect loop or an unusable `Location`.
    #[error("bad redirect: {0}")]
    Redirect(String),
    /// Any other transport failure.
    #[error("transport error: {0}")]
    Transport(String),
}

/// Why the event stream could not be read (see
/// [`super::decode::event_stream`]).
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// RecordIO framing failed or the transport broke.
    #[error(transparent)]
    Framing(#[from] RecordIoError),
    /// A record was not a protobuf `scheduler::Event`.
    #[error("undecodable event: {0}")]
    Decode(#[from] prost::DecodeError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_events_are_classified_by_wording() {
        let cases = [
            // master.cpp failoverFramework (capture d, verbatim).
            ("Framework failed over", ErrorKind::FailedOver),
            // master.cpp subscribe, Mesos ≥ 1.0 (captures g, m, verbatim).
            ("Framework has been removed", ErrorKind::Removed),
            // The pre-1.0 wording for a completed framework's ID.
            (
                "Completed framework attempted to re-register",
                ErrorKind::Removed,
            ),
            ("framework has been removed.", ErrorKind::Removed),
            (
                "Changing framework's principal is not allowed.",
                ErrorKind::Other("Changing framework's principal is not allowed.".into()),
            ),
            ("", ErrorKind::Other(String::new())),
            ("Something new", ErrorKind::Other("Something new".into())),
        ];
        for (message, want) in cases {
            assert_eq!(ErrorKind::classify(message), want, "{message:?}");
        }
    }
}
