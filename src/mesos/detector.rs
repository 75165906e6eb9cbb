//! Leading-master detection for `--master` (mesos-notes §1, §7, §12 capture k).
//!
//! Two kinds of `--master` ([`MasterSpec::parse`]):
//! - `http(s)://host:port[,host:port…]`: every listed master is asked
//!   `GET /master/redirect`, which any master — leader or not — answers with
//!   `307 Location: //<leader host>:<port>`, or `503 No leader elected`. The
//!   first 307 names the leader; its host:port is used with the scheme of the
//!   configured URL. The list is probed again on [`MasterDetector::redetect`]
//!   (the client asks after a 503, a refused connection or a lost stream).
//! - `zk://[user:pass@]host:port,…/path`: the masters' ZooKeeper group
//!   ([`zookeeper`]): the child with the lowest sequence number leads; the
//!   children are watched and the leader re-evaluated on every change.
//!
//! Either way the result is a `watch` channel of `Option<MasterAddress>`:
//! `None` means "no leader known right now" — a state to wait in, not an
//! error. A 307 seen by a caller may [`hint`](MasterDetector::hint) a leader
//! before the next detection confirms it.

mod zookeeper;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::LOCATION;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use crate::coordination::url::{ZkUrl, ZkUrlError};

/// The port a Mesos master listens on unless told otherwise (`MasterInfo.port`).
pub const DEFAULT_MASTER_PORT: u16 = 5050;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP (what Mesos masters serve by default).
    Http,
    /// HTTP over TLS, verified against the system's root certificates.
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A master's base URL, `scheme://host:port` (no path): where its endpoints
/// (`/api/v1/scheduler`, `/api/v1`, `/master/redirect`) live.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MasterAddress {
    url: Url,
}

impl MasterAddress {
    /// The base URL of a master at `host:port`; `None` if `host` is not a
    /// valid host name or IP literal (IPv6 in brackets).
    pub fn new(scheme: Scheme, host: &str, port: u16) -> Option<Self> {
        let url = Url::parse(&format!("{}://{host}:{port}/", scheme.as_str())).ok()?;
        (url.host_str().is_some() && url.path() == "/" && url.username().is_empty())
            .then_some(Self { url })
    }

    /// The master an absolute URL points at (its path is dropped).
    pub fn of_url(url: &Url) -> Option<Self> {
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return None,
        };
        Self::new(scheme, url.host_str()?, url.port_or_known_default()?)
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> Scheme {
        if self.url.scheme() == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        }
    }

    /// `host:port` (IPv6 hosts in brackets).
    pub fn authority(&self) -> String {
        let host = self.url.host_str().unwrap_or_default();
        let port = self
            .url
            .port_or_known_default()
            .unwrap_or(DEFAULT_MASTER_PORT);
        format!("{host}:{port}")
    }

    /// The URL of `path` (which starts with `/`) on this master.
    pub fn endpoint(&self, path: &str) -> Url {
        let mut url = self.url.clone();
        url.set_path(path);
        url
    }

    /// Where a `307` answer to a request for `requested` points: a
    /// protocol-relative `Location` (`//host:port/path`, what masters send)
    /// keeps the scheme of the request and takes host, port and path from
    /// the Location; an absolute one is taken as given; a path-only one
    /// stays on this master. A Location without a path keeps the requested
    /// path. `None` if the Location does not parse or is not http(s).
    pub fn follow(requested: &Url, location: &str) -> Option<Url> {
        let mut target = requested.join(location.trim()).ok()?;
        if !matches!(target.scheme(), "http" | "https") || target.host_str().is_none() {
            return None;
        }
        if target.path() == "/" && !location.trim_end().ends_with('/') {
            target.set_path(requested.path());
        }
        Some(target)
    }
}

impl fmt::Display for MasterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.url.scheme(), self.authority())
    }
}

impl fmt::Debug for MasterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterAddress({self})")
    }
}

/// A parsed `--master` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterSpec {
    /// Masters to ask `GET /master/redirect`, in order.
    Urls(Vec<MasterAddress>),
    /// The masters' ZooKeeper group; `scheme` is used for the masters found
    /// there (ZooKeeper does not say; Mesos masters serve plain HTTP unless
    /// built with SSL support).
    Zk {
        /// The ZooKeeper ensemble, credentials and group path.
        url: ZkUrl,
        /// Scheme of the masters' URLs.
        scheme: Scheme,
    },
}

/// Why a `--master` value did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterSpecError {
    /// Nothing given.
    #[error(
        "--master is empty: expected http(s)://host:port[,host:port…] or zk://host:port,…/path"
    )]
    Empty,
    /// A scheme other than http, https or zk.
    #[error("--master {0:?}: expected http://, https:// or zk://")]
    Scheme(String),
    /// A list entry that is not `host[:port]`.
    #[error(
        "--master entry {0:?}: expected host:port (port 1-65535, default 5050), no path or credentials"
    )]
    Host(String),
    /// A malformed ZooKeeper URL.
    #[error("--master: {0}")]
    Zk(#[from] ZkUrlError),
}

impl MasterSpec {
    /// Parses `--master`:
    /// - `zk://[user:pass@]h1:2181,h2:2181/mesos` (path default `/`);
    /// - `http(s)://h1:5050[,h2:5050…]`; each entry may repeat its own
    ///   scheme (`http://a:5050,https://b:5050`); a missing port is 5050; a
    ///   trailing `/` is allowed, any other path is refused (Mesos endpoints
    ///   live at fixed paths);
    /// - bare `host:port[,…]` means http, as Mesos agents accept it.
    pub fn parse(value: &str) -> Result<MasterSpec, MasterSpecError> {
        let value = value.trim();
        if value.is_empty() {
            return Err(MasterSpecError::Empty);
        }
        if value.starts_with("zk://") {
            return Ok(MasterSpec::Zk {
                url: ZkUrl::parse_mesos(value)?,
                scheme: Scheme::Http,
            });
        }
        if let Some((scheme, _)) = value.split_once("://")
            && !matches!(scheme, "http" | "https")
        {
            return Err(MasterSpecError::Scheme(value.to_string()));
        }
        let mut scheme = Scheme::Http;
        let mut masters = Vec::new();
        for entry in value.split(',').map(str::trim) {
            let mut rest = entry;
            if let Some(r) = entry.strip_prefix("http://") {
                (scheme, rest) = (Scheme::Http, r);
            } else if let Some(r) = entry.strip_prefix("https://") {
                (scheme, rest) = (Scheme::Https, r);
            }
            let authority = rest.strip_suffix('/').unwrap_or(rest);
            masters.push(
                parse_authority(scheme, authority)
                    .ok_or_else(|| MasterSpecError::Host(entry.to_string()))?,
            );
        }
        Ok(MasterSpec::Urls(masters))
    }
}

fn parse_authority(scheme: Scheme, authority: &str) -> Option<MasterAddress> {
    if authority.is_empty() || authority.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal without a port: the last ':' is inside the brackets.
        Some((host, port)) if !port.contains(']') => {
            (host, port.parse::<u16>().ok().filter(|p| *p != 0)?)
        }
        _ => (authority, DEFAULT_MASTER_PORT),
    };
    MasterAddress::new(scheme, host, port)
}

/// Timeouts and retry pacing of a [`MasterDetector`].
#[derive(Debug, Clone)]
pub struct DetectorOptions {
    /// TCP connect timeout of a `/master/redirect` probe.
    pub connect_timeout: Duration,
    /// Whole-request timeout of one probe.
    pub probe_timeout: Duration,
    /// First and largest pause between rounds that found no leader, and
    /// between ZooKeeper reconnection attempts.
    pub backoff_min: Duration,
    /// See `backoff_min`.
    pub backoff_max: Duration,
    /// ZooKeeper session timeout of the detector's own session.
    pub zk_session_timeout: Duration,
}

impl Default for DetectorOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(10),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(15),
            zk_session_timeout: Duration::from_secs(10),
        }
    }
}

/// A running leader detection. Cheap to clone; the background task stops on
/// the `cancel` token given to [`MasterDetector::start`].
#[derive(Clone)]
pub struct MasterDetector {
    inner: Arc<Inner>,
}

struct Inner {
    leader: watch::Sender<Option<MasterAddress>>,
    redetect: Notify,
}

impl MasterDetector {
    /// Starts detecting the leader of `spec` in a background task.
    ///
    /// Must be called inside a tokio runtime. For `http(s)` lists the
    /// rustls crypto provider must be installed (see `STACK.md`).
    pub fn start(spec: MasterSpec, options: DetectorOptions, cancel: CancellationToken) -> Self {
        let (leader, _) = watch::channel(None);
        let inner = Arc::new(Inner {
            leader,
            redetect: Notify::new(),
        });
        let task_inner = inner.clone();
        match spec {
            MasterSpec::Urls(masters) => {
                tokio::spawn(probe_loop(masters, options, task_inner, cancel));
            }
            MasterSpec::Zk { url, scheme } => {
                tokio::spawn(async move {
                    zookeeper::run(
                        url,
                        scheme,
                        options,
                        &task_inner.leader,
                        &task_inner.redetect,
                        cancel,
                    )
                    .await;
                });
            }
        }
        MasterDetector { inner }
    }

    /// A detector that always names `master` (until a 307 [`hint`](Self::hint)s
    /// otherwise): for a single master without ZooKeeper, a load balancer in
    /// front of the masters, or a test that must reach one particular master
    /// first. [`redetect`](Self::redetect) does nothing.
    pub fn fixed(master: MasterAddress) -> Self {
        let (leader, _) = watch::channel(Some(master));
        MasterDetector {
            inner: Arc::new(Inner {
                leader,
                redetect: Notify::new(),
            }),
        }
    }

    /// The leading master as detected: `None` while none is known.
    pub fn leader(&self) -> watch::Receiver<Option<MasterAddress>> {
        self.inner.leader.subscribe()
    }

    /// The leader known right now.
    pub fn current(&self) -> Option<MasterAddress> {
        self.inner.leader.borrow().clone()
    }

    /// Asks for a fresh detection (after a 503, a refused connection or a
    /// lost stream): an `http(s)` list is probed again at once; a ZooKeeper
    /// group is re-read. The result is published on [`leader`](Self::leader)
    /// when it differs from the current value.
    pub fn redetect(&self) {
        self.inner.redetect.notify_one();
    }

    /// Publishes `leader`, learnt from a 307 `Location`, until the next
    /// detection says otherwise.
    pub fn hint(&self, leader: MasterAddress) {
        publish(&self.inner.leader, Some(leader));
    }
}

impl fmt::Debug for MasterDetector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterDetector")
            .field("leader", &*self.inner.leader.borrow())
            .finish()
    }
}

/// Sends `leader` if it differs from the current value (no spurious wake-ups).
fn publish(tx: &watch::Sender<Option<MasterAddress>>, leader: Option<MasterAddress>) {
    tx.send_if_modified(|current| {
        if *current == leader {
            return false;
        }
        tracing::info!(leader = ?leader, previous = ?current, "leading Mesos master");
        *current = leader;
        true
    });
}

/// Probes the list until a leader is found, then waits for a redetect request.
async fn probe_loop(
    masters: Vec<MasterAddress>,
    options: DetectorOptions,
    inner: Arc<Inner>,
    cancel: CancellationToken,
) {
    let http = match reqwest::Client::builder()
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(options.connect_timeout)
        .timeout(options.probe_timeout)
        .build()
    {
        Ok(http) => http,
        Err(error) => {
            tracing::error!(%error, "cannot build the HTTP client of the master detector");
            return;
        }
    };
    let mut backoff = Backoff::new(options.backoff_min, options.backoff_max);
    loop {
        let found = tokio::select! {
            _ = cancel.cancelled() => return,
            found = probe_all(&http, &masters) => found,
        };
        let wait = match found {
            Some(leader) => {
                backoff.reset();
                publish(&inner.leader, Some(leader));
                None
            }
            None => {
                publish(&inner.leader, None);
                Some(backoff.next_delay())
            }
        };
        let sleep = async {
            match wait {
                Some(delay) => tokio::time::sleep(delay).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = inner.redetect.notified() => {}
            _ = sleep => {}
        }
    }
}

/// Asks each master `GET /master/redirect`; the first `307` names the leader.
pub(crate) async fn probe_all(
    http: &reqwest::Client,
    masters: &[MasterAddress],
) -> Option<MasterAddress> {
    for master in masters {
        let url = master.endpoint("/master/redirect");
        match http.get(url.clone()).send().await {
            Ok(response) if response.status() == reqwest::StatusCode::TEMPORARY_REDIRECT => {
                let leader = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|location| MasterAddress::follow(&url, location))
                    .and_then(|target| MasterAddress::of_url(&target));
                match leader {
                    Some(leader) => return Some(leader),
                    None => {
                        tracing::warn!(%master, "307 from /master/redirect without a usable Location")
                    }
                }
            }
            Ok(response) => {
                tracing::debug!(%master, status = %response.status(), "master knows no leader")
            }
            Err(error) => tracing::debug!(%master, %error, "master unreachable"),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> MasterAddress {
        match MasterSpec::parse(s).unwrap() {
            MasterSpec::Urls(mut v) => v.remove(0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_url_lists() {
        let MasterSpec::Urls(list) =
            MasterSpec::parse("http://m1:5050,m2:5051, https://m3/").unwrap()
        else {
            panic!()
        };
        let shown: Vec<String> = list.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            shown,
            ["http://m1:5050", "http://m2:5051", "https://m3:5050"]
        );
        assert_eq!(addr("10.0.0.1:80").to_string(), "http://10.0.0.1:80");
        assert_eq!(addr("https://[::1]:5050").authority(), "[::1]:5050");
        assert_eq!(addr("[::1]").authority(), "[::1]:5050");
    }

    #[test]
    fn parses_zk_urls_with_the_mesos_default_path() {
        let MasterSpec::Zk { url, scheme } =
            MasterSpec::parse("zk://u:p@z1:2181,z2:2181/mesos").unwrap()
        else {
            panic!()
        };
        assert_eq!((url.root.as_str(), scheme), ("/mesos", Scheme::Http));
        let MasterSpec::Zk { url, .. } = MasterSpec::parse("zk://z1:2181").unwrap() else {
            panic!()
        };
        assert_eq!(url.root, "/");
    }

    #[test]
    fn refuses_bad_specs_clearly() {
        let cases = [
            ("", MasterSpecError::Empty),
            ("ftp://m:1", MasterSpecError::Scheme("ftp://m:1".into())),
            ("http://m:0", MasterSpecError::Host("http://m:0".into())),
            (
                "http://m:5050/api",
                MasterSpecError::Host("http://m:5050/api".into()),
            ),
            (
                "http://u:p@m:5050",
                MasterSpecError::Host("http://u:p@m:5050".into()),
            ),
            ("http://m:1,,n:2", MasterSpecError::Host("".into())),
            ("zk://", MasterSpecError::Zk(ZkUrlError::NoHosts)),
        ];
        for (spec, want) in cases {
            assert_eq!(MasterSpec::parse(spec), Err(want), "{spec}");
        }
        assert!(
            !MasterSpec::parse("zk://u:hunter2@z:0/m")
                .unwrap_err()
                .to_string()
                .contains("hunter2")
        );
    }

    #[test]
    fn follows_redirect_locations_like_a_browser_keeping_the_scheme() {
        let asked = Url::parse("https://m2:5051/api/v1/scheduler").unwrap();
        let cases = [
            // What a real 1.12 master sends (capture k): the delegate-prefixed path.
            (
                "//localhost:5050/master/api/v1/scheduler",
                "https://localhost:5050/master/api/v1/scheduler",
            ),
            // No path: keep the requested one.
            ("//m1:5050", "https://m1:5050/api/v1/scheduler"),
            (
                "http://m1:5050/api/v1/scheduler",
                "http://m1:5050/api/v1/scheduler",
            ),
            (
                "/master/api/v1/scheduler",
                "https://m2:5051/master/api/v1/scheduler",
            ),
        ];
        for (location, want) in cases {
            assert_eq!(
                MasterAddress::follow(&asked, location).unwrap().as_str(),
                want,
                "{location}"
            );
        }
        assert!(MasterAddress::follow(&asked, "ftp://x/").is_none());
        let leader =
            MasterAddress::of_url(&MasterAddress::follow(&asked, "//m1:5050").unwrap()).unwrap();
        assert_eq!(leader.to_string(), "https://m1:5050");
        assert_eq!(
            leader.endpoint("/api/v1").as_str(),
            "https://m1:5050/api/v1"
        );
    }
}
