//! Leading-master detection for `--master` (`docs/mesos-protocol.md#leader-redirects`,
//! `#zookeeper-master-detection`, capture k).
//!
//! Two kinds of `--master` ([`MasterSpec::parse`]):
//! - `http(s)://host:port[,host:port…]`: every listed master is asked
//!   `GET /master/redirect`, which any master — leader or not — answers with
//!   `307 Location: //<leader host>:<port>`, or `503 No leader elected`. The
//!   first 307 names the leader; its host:port is used with the scheme of the
//!   configured URL. The list is probed again on [`MasterDetector::redetect`]
//!   (the client asks after a 503, a refused connection or a lost stream).
//! - `zk://[user:pass@]host:port,…/path`: the masters' ZooKeeper group
//!   (`detector/zookeeper.rs`): the child with the lowest sequence number leads; the
//!   children are watched and the leader re-evaluated on every change.
//!
//! Either way the result is a `watch` channel of `Option<MasterAddress>`:
//! `None` means "no leader known right now" — a state to wait in, not an
//! error. A 307 seen by a caller may [`hint`](MasterDetector::hint) a leader
//! before the next detection confirms it.

mod spec;
mod zookeeper;

pub use spec::{DEFAULT_MASTER_PORT, MasterAddress, MasterSpec, MasterSpecError, Scheme};

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::LOCATION;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;

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
    /// Why the last detection found no leader (`http(s)` lists).
    problem: std::sync::Mutex<Option<String>>,
}

impl MasterDetector {
    /// Starts detecting the leader of `spec` in a background task.
    ///
    /// Must be called inside a tokio runtime. For `http(s)` lists the
    /// rustls crypto provider must be installed (see `docs/architecture.md#build-notes`).
    pub fn start(spec: MasterSpec, options: DetectorOptions, cancel: CancellationToken) -> Self {
        let (leader, _) = watch::channel(None);
        let inner = Arc::new(Inner {
            leader,
            redetect: Notify::new(),
            problem: std::sync::Mutex::new(None),
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
                problem: std::sync::Mutex::new(None),
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

    /// Why no leader is known, when the last detection of an `http(s)` list
    /// failed: each master and what it answered, e.g.
    /// `http://m1:5050: connection refused; http://m2:5050: answered 503`.
    /// `None` while a leader is known, and for ZooKeeper detection.
    pub fn problem(&self) -> Option<String> {
        if self.current().is_some() {
            return None;
        }
        self.inner
            .problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
        log_leader(&leader);
        *current = leader;
        true
    });
}

/// The leader last logged by any detector of this process.
static LOGGED_LEADER: Mutex<Option<MasterAddress>> = Mutex::new(None);

/// Logs a detected leader when it differs from the last one logged. A
/// replica runs several detectors (the scheduler client's, the operator
/// client's, a new one per re-subscription), each starting from "none
/// known": the change is one line, not one per detector.
fn log_leader(leader: &Option<MasterAddress>) {
    let mut logged = LOGGED_LEADER.lock().unwrap_or_else(PoisonError::into_inner);
    if *logged == *leader {
        tracing::debug!(leader = ?leader, "leading Mesos master (unchanged)");
        return;
    }
    tracing::info!(leader = ?leader, previous = ?*logged, "leading Mesos master");
    logged.clone_from(leader);
}

/// Probes the list until a leader is found, then waits for a redetect request.
async fn probe_loop(
    masters: Vec<MasterAddress>,
    options: DetectorOptions,
    inner: Arc<Inner>,
    cancel: CancellationToken,
) {
    // This task may run before the scheduler client (which installs the
    // provider too) is built.
    crate::mesos::ensure_tls_provider();
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
    let mut backoff = Backoff::jittered(options.backoff_min, options.backoff_max);
    loop {
        let found = tokio::select! {
            _ = cancel.cancelled() => return,
            found = probe_all(&http, &masters) => found,
        };
        let wait = match found {
            Ok(leader) => {
                backoff.reset();
                set_problem(&inner, None);
                publish(&inner.leader, Some(leader));
                None
            }
            Err(why) => {
                set_problem(&inner, Some(why));
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

/// Records why detection fails; logs it when it changes (not on every
/// retry).
fn set_problem(inner: &Inner, problem: Option<String>) {
    let mut current = inner.problem.lock().unwrap_or_else(|e| e.into_inner());
    if *current != problem {
        if let Some(why) = &problem {
            tracing::warn!("no leading Mesos master found: {why}");
        }
        *current = problem;
    }
}

/// Asks each master `GET /master/redirect`; the first `307` names the
/// leader. Otherwise, what each master did, joined by `; `.
pub(crate) async fn probe_all(
    http: &reqwest::Client,
    masters: &[MasterAddress],
) -> Result<MasterAddress, String> {
    let mut failures = Vec::new();
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
                    Some(leader) => return Ok(leader),
                    None => failures.push(format!(
                        "{master}: 307 from /master/redirect without a usable Location"
                    )),
                }
            }
            Ok(response) => failures.push(format!(
                "{master}: answered {} (no leader known)",
                response.status()
            )),
            Err(error) => failures.push(format!("{master}: {}", describe(&error))),
        }
    }
    Err(failures.join("; "))
}

/// A transport error with its innermost cause (reqwest's own text is only
/// "error sending request").
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_string()
    } else if error.is_connect() {
        "cannot connect".to_string()
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    let mut last = None;
    while let Some(s) = source {
        last = Some(s.to_string());
        source = s.source();
    }
    if let Some(last) = last {
        text.push_str(": ");
        text.push_str(&last);
    }
    text
}
