//! The ZooKeeper [`Coordinator`], on `zookeeper-client` 0.11.
//!
//! - `session`: the session lifecycle. One background task connects,
//!   runs the election on that session until it ends, and on expiry builds a
//!   new client (an expired `zookeeper_client::Client` is dead for good) and
//!   re-enters the election. A second task keeps the `deployment` watch.
//! - `election`: `election/member-<seq>` nodes, predecessor watches,
//!   suspension, hold-off, abdication.
//! - `lease`: probes that keep a slow connection busy, and the leader's
//!   proof that its session lives (a term ends without a recent one);
//! - `abandoned`: the sessions our client gave up, whose election nodes
//!   the next session deletes (the servers may revive such a session);
//! - `audit`: the audit log (sequential znodes, pruned to the newest entries);
//! - `record_watch`: a follower's persistent watch on a records directory;
//! - `stores`: deployment record, framework ID, services and tasks, with
//!   fenced multi-op writes;
//! - `deployment_fence`: the deployment record's version every fenced
//!   multi-op checks too.
//!
//! Every ZooKeeper call runs under [`ZkConfig::operation_timeout`]. Session
//! events are handled by every wait (a watch may fire with a session event
//! instead of a node event).
//!
//! ACLs: without credentials nodes are open (`world:anyone` all). With
//! `user:pass@` in the URL the client adds `digest` auth and creates the root
//! and everything under it `auth::cdrwa` (creator all) plus `world:anyone`
//! read, or creator-only with [`ZkConfig::private_acl`]. Ancestors of the root
//! (e.g. `/mesos-appliance`) are created open so other frameworks can share
//! them.

mod abandoned;
mod audit;
mod deployment_fence;
mod election;
mod lease;
mod record_watch;
pub mod request_size;
mod session;
mod stores;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use super::signal::LeaderSignal;
use super::{
    CoordinationError, Coordinator, DeploymentRecord, Expect, Leadership, Member, RecordKind,
    RecordVisitor, RecordWrite, RecordsStat, ReplicaInfo, Result, Versioned, Written,
};
use crate::util::zk::ZkUrl;

/// Default ZooKeeper session timeout (`--zk-session-timeout`,
/// `docs/architecture.md#command-line`).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Default base hold-off between leadership terms (see [`ZkConfig::hold_off`]).
pub const DEFAULT_HOLD_OFF: Duration = Duration::from_secs(1);

/// `auth` (the creating identity) all + `world:anyone` read.
static CREATOR_ALL_WORLD_READ: [zk::Acl; 2] = [
    zk::Acl::new_const(zk::Permission::ALL, "auth", ""),
    zk::Acl::new_const(zk::Permission::READ, "world", "anyone"),
];

/// How to reach ZooKeeper and how to behave there.
#[derive(Debug, Clone)]
pub struct ZkConfig {
    /// Hosts, credentials and root znode.
    pub url: ZkUrl,
    /// This replica's member-node data.
    pub replica: ReplicaInfo,
    /// Requested session timeout; the server clamps it to its
    /// `[minSessionTimeout, maxSessionTimeout]` (default 2–20 ticks). It
    /// bounds crash failover: a replica that dies without closing keeps its
    /// member node this long. Default 10 s. The connection timeout follows
    /// from it ([`crate::util::zk::connection_timeout`]); if the server clamps the session
    /// below the request, zookeeper-client falls back to two fifths of it.
    pub session_timeout: Duration,
    /// Timeout of every ZooKeeper call. Default: the session timeout.
    pub operation_timeout: Duration,
    /// Base hold-off before a new leadership term after one ended (doubling
    /// for terms that keep ending early; see the module doc of the signal).
    /// Default 1 s.
    pub hold_off: Duration,
    /// With credentials: create nodes creator-only (no world read).
    pub private_acl: bool,
    /// Join the election. `false` for one-shot jobs (`uninstall`) that only
    /// read and delete; they stay `Candidate` and cannot make fenced writes.
    pub join_election: bool,
}

impl ZkConfig {
    /// Defaults for `url` and `replica`: 10 s session, election joined.
    pub fn new(url: ZkUrl, replica: ReplicaInfo) -> ZkConfig {
        ZkConfig {
            url,
            replica,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            operation_timeout: DEFAULT_SESSION_TIMEOUT,
            hold_off: DEFAULT_HOLD_OFF,
            private_acl: false,
            join_election: true,
        }
    }

    /// Sets the session timeout and the operation timeout to `timeout`.
    pub fn with_session_timeout(mut self, timeout: Duration) -> ZkConfig {
        self.session_timeout = timeout;
        self.operation_timeout = timeout;
        self
    }
}

/// Znode paths under the root.
#[derive(Debug)]
pub(crate) struct Paths {
    root: String,
    election: String,
    deployment: String,
    framework_id: String,
    services: String,
    tasks: String,
    drains: String,
    jobs: String,
    runs: String,
    audit: String,
}

impl Paths {
    fn new(root: &str) -> Paths {
        Paths {
            root: root.to_string(),
            election: format!("{root}/election"),
            deployment: format!("{root}/deployment"),
            framework_id: format!("{root}/framework-id"),
            services: format!("{root}/services"),
            tasks: format!("{root}/tasks"),
            drains: format!("{root}/drains"),
            jobs: format!("{root}/jobs"),
            runs: format!("{root}/runs"),
            audit: format!("{root}/audit"),
        }
    }

    fn records(&self, kind: RecordKind) -> &str {
        match kind {
            RecordKind::Services => &self.services,
            RecordKind::Tasks => &self.tasks,
            RecordKind::Drains => &self.drains,
            RecordKind::Jobs => &self.jobs,
            RecordKind::Runs => &self.runs,
        }
    }
}

/// Our election member node.
#[derive(Debug, Default)]
struct OwnNode {
    /// Its full path; `None` before joining and after leaving.
    path: Option<String>,
    /// Since when it has held its place without leading after its term was
    /// suspended (a lapse: nobody leads while it is the lowest).
    lapsed_since: Option<std::time::Instant>,
}

/// State shared by the handle and the background tasks.
pub(crate) struct Inner {
    config: ZkConfig,
    paths: Paths,
    acls: zk::Acls<'static>,
    signal: LeaderSignal,
    /// The live session's client; `None` between sessions.
    client: watch::Sender<Option<zk::Client>>,
    /// Our member node in the live session.
    member: Mutex<OwnNode>,
    /// When the newest answered request of the live session was sent: the
    /// server heard the session at or after that instant (`lease`).
    proven_at: Mutex<Option<std::time::Instant>>,
    /// Sessions our client gave up (`abandoned`).
    abandoned: abandoned::Abandoned,
    deployment: watch::Sender<Option<Versioned<DeploymentRecord>>>,
    /// The deployment record's version our fenced writes check.
    deployment_fence: deployment_fence::DeploymentFence,
    shutdown: CancellationToken,
}

impl Inner {
    fn client(&self) -> Result<zk::Client> {
        if self.shutdown.is_cancelled() {
            return Err(CoordinationError::Closed);
        }
        self.client
            .borrow()
            .clone()
            .ok_or_else(|| CoordinationError::Unavailable("no ZooKeeper session".into()))
    }

    fn member(&self) -> Option<String> {
        self.own_node().path.clone()
    }

    fn set_member(&self, path: Option<String>) {
        *self.own_node() = OwnNode {
            path,
            lapsed_since: None,
        };
    }

    /// Forgets our member path if it is still `path` (a concurrent rejoin
    /// may already have replaced it).
    fn clear_member_if(&self, path: &str) {
        let mut node = self.own_node();
        if node.path.as_deref() == Some(path) {
            *node = OwnNode::default();
        }
    }

    /// Forgets our member path and returns it.
    fn take_member(&self) -> Option<String> {
        std::mem::take(&mut *self.own_node()).path
    }

    /// Notes that our node's term was suspended (from now, unless already).
    fn mark_lapsed(&self) {
        let mut node = self.own_node();
        if node.path.is_some() && node.lapsed_since.is_none() {
            node.lapsed_since = Some(std::time::Instant::now());
        }
    }

    /// Our node leads again: the lapse is over.
    fn end_lapse(&self) {
        self.own_node().lapsed_since = None;
    }

    /// How long our node has held its place since its term was suspended.
    fn lapsed_for(&self) -> Option<Duration> {
        self.own_node().lapsed_since.map(|since| since.elapsed())
    }

    /// Records that a request sent at `sent` was answered: the session
    /// lived at the server at or after then.
    fn prove(&self, sent: std::time::Instant) {
        let mut at = self.proven_at.lock().unwrap_or_else(|e| e.into_inner());
        if at.is_none_or(|at| at < sent) {
            *at = Some(sent);
        }
    }

    /// The newest proof of the live session, if any.
    fn proven_at(&self) -> Option<std::time::Instant> {
        *self.proven_at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new session: proofs of the old one prove nothing about it.
    fn forget_proof(&self) {
        *self.proven_at.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn own_node(&self) -> std::sync::MutexGuard<'_, OwnNode> {
        // Every update is one assignment: a poisoned lock holds a valid value.
        self.member.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one ZooKeeper call under the operation timeout; a timeout is
    /// reported as `zk::Error::Timeout`.
    async fn timed<T>(
        &self,
        call: impl Future<Output = std::result::Result<T, zk::Error>>,
    ) -> std::result::Result<T, zk::Error> {
        tokio::time::timeout(self.config.operation_timeout, call)
            .await
            .unwrap_or(Err(zk::Error::Timeout))
    }
}

/// Maps a ZooKeeper error on `path` to the layer's error.
pub(crate) fn map_zk(err: zk::Error, path: &str) -> CoordinationError {
    use zk::Error as E;
    match err {
        E::NoNode | E::NodeExists | E::BadVersion | E::NotEmpty => {
            CoordinationError::VersionConflict {
                path: path.to_string(),
            }
        }
        E::SessionExpired => CoordinationError::SessionExpired,
        E::ClientClosed => CoordinationError::Closed,
        E::NoAuth | E::AuthFailed | E::InvalidAcl => CoordinationError::Unauthorized,
        E::RuntimeInconsistent => CoordinationError::NotLeader,
        E::Timeout | E::ConnectionLoss | E::NoHosts | E::Throttled | E::SessionMoved => {
            CoordinationError::Unavailable(err.to_string())
        }
        // The crate reports broken connections as custom I/O errors.
        E::Custom(_) => CoordinationError::Unavailable(err.to_string()),
        other => CoordinationError::Unexpected(other.to_string()),
    }
}

/// A replica's coordinator on ZooKeeper. Create with [`ZkCoordinator::start`];
/// call [`Coordinator::close`] on shutdown so a follower takes over at once
/// (dropping it also leaves the election, in the background).
pub struct ZkCoordinator {
    inner: Arc<Inner>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    root_existed: bool,
}

impl ZkCoordinator {
    /// Connects (waiting up to the session timeout), creates the root and
    /// its directories if absent, and starts the election and the
    /// deployment watch in the background.
    ///
    /// Errors: [`CoordinationError::Unavailable`] when no server answers,
    /// [`CoordinationError::Unauthorized`] when the ACL of an existing root
    /// refuses us, [`CoordinationError::Invalid`] for a private ACL without
    /// credentials. Later outages are handled in the background.
    pub async fn start(config: ZkConfig) -> Result<ZkCoordinator> {
        let acls = match (&config.url.credentials, config.private_acl) {
            (None, false) => zk::Acls::anyone_all(),
            (None, true) => {
                return Err(CoordinationError::Invalid(
                    "private ACLs need credentials in the zk:// URL".into(),
                ));
            }
            (Some(_), false) => zk::Acls::new(&CREATOR_ALL_WORLD_READ),
            (Some(_), true) => zk::Acls::creator_all(),
        };
        let inner = Arc::new(Inner {
            paths: Paths::new(&config.url.root),
            acls,
            signal: LeaderSignal::new(Leadership::Candidate, config.hold_off),
            client: watch::Sender::new(None),
            member: Mutex::new(OwnNode::default()),
            proven_at: Mutex::new(None),
            abandoned: abandoned::Abandoned::default(),
            deployment: watch::Sender::new(None),
            deployment_fence: Default::default(),
            shutdown: CancellationToken::new(),
            config,
        });
        let client = session::connect(&inner).await?;
        let root_existed = session::ensure_paths(&inner, &client).await?;
        inner.client.send_replace(Some(client.clone()));
        let tasks = vec![
            tokio::spawn(session::run(inner.clone(), client)),
            tokio::spawn(session::watch_deployment(inner.clone())),
        ];
        Ok(ZkCoordinator {
            inner,
            tasks: Mutex::new(tasks),
            root_existed,
        })
    }

    /// Whether the root existed before [`ZkCoordinator::start`] created it.
    pub fn root_existed(&self) -> bool {
        self.root_existed
    }

    /// Deletes the whole subtree, root included, like
    /// [`Coordinator::delete_all`], and tells how many nodes it deleted,
    /// also when it failed partway.
    pub async fn delete_tree(&self) -> (usize, Result<()>) {
        let mut deleted = 0;
        let result = stores::delete_all_counting(&self.inner, &mut deleted).await;
        (deleted, result)
    }

    /// The live session, if any: its ID is what the dashboard shows, and
    /// tests use it to expire the session.
    pub fn session(&self) -> Option<zk::SessionInfo> {
        self.inner
            .client
            .borrow()
            .as_ref()
            .map(|c| c.session().clone())
    }

    /// The negotiated session timeout of the live session.
    pub fn session_timeout(&self) -> Option<Duration> {
        self.inner
            .client
            .borrow()
            .as_ref()
            .map(|c| c.session_timeout())
    }

    /// The root znode path.
    pub fn root(&self) -> &str {
        &self.inner.paths.root
    }

    /// The largest record, in JSON bytes, that creating `key` under `kind`
    /// can carry now: the fenced `multi` of that one create must fit in
    /// [`request_size::MAX_REQUEST`] bytes (a larger one is refused with
    /// [`CoordinationError::TooLarge`]). `None` while not a member of the
    /// election (no fenced write can be sent).
    pub fn max_record_bytes(&self, kind: RecordKind, key: &str) -> Option<usize> {
        let member = self.inner.member()?;
        let path = format!("{}/{key}", self.inner.paths.records(kind));
        let checks = request_size::check(&member)
            + self
                .inner
                .deployment_fence
                .version()
                .map_or(0, |_| request_size::check(&self.inner.paths.deployment));
        let empty =
            request_size::multi(checks + request_size::create(&path, &[], &self.inner.acls));
        request_size::MAX_REQUEST.checked_sub(empty)
    }
}

impl Drop for ZkCoordinator {
    fn drop(&mut self) {
        // The background task deletes the member node and closes the session.
        self.inner.shutdown.cancel();
    }
}

#[async_trait]
impl Coordinator for ZkCoordinator {
    fn replica(&self) -> &ReplicaInfo {
        &self.inner.config.replica
    }

    fn session_timeouts(&self) -> Option<crate::coordination::SessionTimeouts> {
        self.session_timeout()
            .map(|negotiated| crate::coordination::SessionTimeouts {
                asked: self.inner.config.session_timeout,
                negotiated,
            })
    }

    fn leadership(&self) -> watch::Receiver<Leadership> {
        self.inner.signal.subscribe()
    }

    fn term_token(&self, term: u64) -> CancellationToken {
        self.inner.signal.term_token(term)
    }

    async fn members(&self) -> Result<Vec<Member>> {
        election::members(&self.inner).await
    }

    async fn abdicate(&self) -> Result<()> {
        election::abdicate(&self.inner).await
    }

    async fn close(&self) {
        self.inner.shutdown.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for task in tasks {
            let _ = task.await;
        }
    }

    async fn deployment(&self) -> Result<Option<Versioned<DeploymentRecord>>> {
        stores::deployment(&self.inner).await
    }

    async fn write_deployment(
        &self,
        record: &DeploymentRecord,
        expect: Expect,
    ) -> Result<Versioned<DeploymentRecord>> {
        stores::write_deployment(&self.inner, record, expect).await
    }

    fn bind_deployment(&self, ours: &str, observed: &Versioned<DeploymentRecord>) {
        self.inner.deployment_fence.bind(ours, observed);
    }

    fn watch_deployment(&self) -> watch::Receiver<Option<Versioned<DeploymentRecord>>> {
        self.inner.deployment.subscribe()
    }

    async fn framework_id(&self) -> Result<Option<Versioned<String>>> {
        stores::framework_id(&self.inner).await
    }

    async fn store_framework_id(&self, id: &str) -> Result<Versioned<String>> {
        stores::store_framework_id(&self.inner, id).await
    }

    async fn replace_framework_id(&self, id: &str, expect: Expect) -> Result<Versioned<String>> {
        stores::replace_framework_id(&self.inner, id, expect).await
    }

    async fn delete_framework_id(&self, expect: Expect) -> Result<bool> {
        stores::delete_framework_id(&self.inner, expect).await
    }

    async fn get_record(
        &self,
        kind: RecordKind,
        key: &str,
    ) -> Result<Option<Versioned<serde_json::Value>>> {
        stores::get_record(&self.inner, kind, key).await
    }

    async fn put_record(
        &self,
        kind: RecordKind,
        key: &str,
        value: &serde_json::Value,
        expect: Expect,
    ) -> Result<i32> {
        stores::put_record(&self.inner, kind, key, value, expect).await
    }

    async fn visit_records(&self, kind: RecordKind, visit: &mut RecordVisitor<'_>) -> Result<()> {
        stores::visit_records(&self.inner, kind, visit).await
    }

    async fn records_stat(&self, kind: RecordKind) -> Result<RecordsStat> {
        stores::records_stat(&self.inner, kind).await
    }

    async fn watch_records(
        &self,
        kind: RecordKind,
    ) -> Result<Option<Box<dyn crate::coordination::RecordChanges>>> {
        record_watch::watch_records(&self.inner, kind).await
    }

    async fn delete_record(&self, kind: RecordKind, key: &str, expect: Expect) -> Result<bool> {
        stores::delete_record(&self.inner, kind, key, expect).await
    }

    async fn delete_records(&self, kind: RecordKind) -> Result<usize> {
        stores::delete_records(&self.inner, kind).await
    }

    async fn write_records(
        &self,
        kind: RecordKind,
        writes: Vec<RecordWrite>,
    ) -> Vec<Result<Written>> {
        stores::write_records(&self.inner, kind, writes).await
    }

    async fn append_audit(&self, entry: &serde_json::Value) -> Result<u64> {
        audit::append(&self.inner, entry).await
    }

    async fn audit_log(&self, limit: usize) -> Result<Vec<(u64, serde_json::Value)>> {
        audit::log(&self.inner, limit).await
    }

    async fn delete_all(&self) -> Result<()> {
        stores::delete_all(&self.inner).await
    }
}
