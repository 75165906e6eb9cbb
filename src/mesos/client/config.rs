//! [`ClientConfig`] and the master credentials.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::mesos::detector::{DetectorOptions, MasterAddress, MasterSpec, Scheme};
use crate::mesos::recordio::DEFAULT_MAX_RECORD_BYTES;

/// HTTP basic-authentication credentials for the master (`--principal`,
/// `--secret-file`; Mesos `--authenticate_http_frameworks`, realm
/// `mesos-master-scheduler`). The secret never appears in `Debug` output,
/// logs or error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The principal (user name); also what `FrameworkInfo.principal` must be.
    pub principal: String,
    secret: String,
}

impl Credentials {
    /// Credentials from a principal and its secret.
    pub fn new(principal: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            principal: principal.into(),
            secret: secret.into(),
        }
    }

    /// Reads the secret from `path` (`--secret-file`); one trailing line
    /// break (`\n` or `\r\n`) is dropped, as editors add one.
    ///
    /// # Errors
    /// The file cannot be read or is not UTF-8.
    pub fn from_secret_file(principal: impl Into<String>, path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        let secret = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(&text);
        Ok(Self::new(principal, secret))
    }

    /// The secret, for the `Authorization` header only.
    pub(crate) fn secret(&self) -> &str {
        &self.secret
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("principal", &self.principal)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Everything the scheduler and operator clients need. [`ClientConfig::new`]
/// fills the defaults below; fields are public so callers (the CLI, tests)
/// override what they need.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Where the masters are (`--master`).
    pub master: MasterSpec,
    /// Basic authentication to the master, if it requires it.
    pub credentials: Option<Credentials>,
    /// `k`: the stream is closed and re-subscribed when no record of any kind
    /// (heartbeats included) arrived for `k ×` the heartbeat interval that
    /// SUBSCRIBED announced. Default 5 (the scheduler HTTP API guide's rule).
    pub heartbeat_timeout_factor: u32,
    /// Heartbeat interval assumed until SUBSCRIBED says otherwise (Mesos'
    /// fixed `DEFAULT_HEARTBEAT_INTERVAL`, 15 s): the first record of a new
    /// stream must arrive within `k ×` this.
    pub default_heartbeat_interval: Duration,
    /// First re-subscription / retry delay (before jitter). Default 500 ms.
    pub backoff_min: Duration,
    /// Cap of the exponential backoff. Default 15 s (`docs/mesos-protocol.md#heartbeats`).
    pub backoff_max: Duration,
    /// TCP (and TLS) connect timeout of every request. Default 5 s.
    pub connect_timeout: Duration,
    /// Whole-request timeout of a scheduler or operator call, and the time a
    /// SUBSCRIBE may take to answer with its headers. The event stream
    /// itself has no request timeout: heartbeat supervision guards it.
    /// Default 30 s.
    pub call_timeout: Duration,
    /// Largest RecordIO record (one event) accepted, in bytes; a larger
    /// announced record ends the stream. Also bounds an operator response.
    /// Default 16 MiB.
    pub max_record_bytes: usize,
    /// Largest error body kept from a refusal, in bytes (the rest is not
    /// read). Default 64 KiB.
    pub max_error_body_bytes: usize,
    /// Capacity of the event channel, in events: when the consumer falls this
    /// far behind, the client stops reading the stream (TCP backpressure)
    /// instead of buffering. Default 64.
    pub event_buffer: usize,
    /// Deliver HEARTBEAT events as [`super::ClientEvent::Event`] too.
    /// Default false: they only feed the heartbeat supervision.
    pub forward_heartbeats: bool,
    /// How long an operator call keeps retrying 503s, refused connections
    /// and leaderless periods before giving up. Default 60 s.
    pub operator_retry_for: Duration,
    /// Session timeout of the detector's ZooKeeper session (`zk://` masters).
    /// Default 10 s.
    pub zk_session_timeout: Duration,
}

impl ClientConfig {
    /// Defaults for `master`.
    pub fn new(master: MasterSpec) -> Self {
        Self {
            master,
            credentials: None,
            heartbeat_timeout_factor: 5,
            default_heartbeat_interval: Duration::from_secs(15),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(30),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            max_error_body_bytes: 64 * 1024,
            event_buffer: 64,
            forward_heartbeats: false,
            operator_retry_for: Duration::from_secs(60),
            zk_session_timeout: Duration::from_secs(10),
        }
    }

    /// The options of the [`MasterDetector`](crate::mesos::detector::MasterDetector)
    /// a client starts for itself.
    pub fn detector_options(&self) -> DetectorOptions {
        DetectorOptions {
            connect_timeout: self.connect_timeout,
            probe_timeout: self.call_timeout,
            backoff_min: self.backoff_min,
            backoff_max: self.backoff_max,
            zk_session_timeout: self.zk_session_timeout,
        }
    }

    /// The silence after which the stream is declared dead, for a heartbeat
    /// interval of `interval`.
    pub fn heartbeat_timeout(&self, interval: Duration) -> Duration {
        interval.saturating_mul(self.heartbeat_timeout_factor.max(1))
    }
}

/// A master on `localhost:5050`, Mesos' default.
impl Default for ClientConfig {
    fn default() -> Self {
        let local = MasterAddress::new(Scheme::Http, "localhost", 5050).expect("literal address");
        Self::new(MasterSpec::Urls(vec![local]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_never_shows() {
        let config = ClientConfig {
            credentials: Some(Credentials::new("fw", "hunter2")),
            ..ClientConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("principal: \"fw\""), "{shown}");
    }

    #[test]
    fn secret_file_loses_one_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "s3cret\n").unwrap();
        assert_eq!(
            Credentials::from_secret_file("p", &path).unwrap().secret(),
            "s3cret"
        );
        std::fs::write(&path, "a b\r\n").unwrap();
        assert_eq!(
            Credentials::from_secret_file("p", &path).unwrap().secret(),
            "a b"
        );
        assert!(Credentials::from_secret_file("p", &dir.path().join("missing")).is_err());
    }

    #[test]
    fn heartbeat_timeout_is_k_intervals() {
        let config = ClientConfig::default();
        assert_eq!(
            config.heartbeat_timeout(Duration::from_secs(15)),
            Duration::from_secs(75)
        );
    }
}
