//! Coordination: leader election, the deployment fence, and the stores for
//! the framework ID, services and tasks
//! (`docs/deployment-strategies.md#zookeeper-layout`, `#fencing`).
//!
//! Everything the scheduler and the web layer need from ZooKeeper goes
//! through one trait, [`Coordinator`], held as `Arc<dyn Coordinator>`. Two
//! implementations:
//! - [`zookeeper::ZkCoordinator`]: the real one, on a ZooKeeper ensemble named
//!   by `--zk zk://[user:pass@]h1:p1,h2:p2/path` ([`crate::util::zk::ZkUrl`]);
//! - [`memory::MemoryCoordinator`]: one replica, no ZooKeeper, used by `demo`
//!   and by unit tests of the layers above. It is never used to test the
//!   ZooKeeper implementation, which is tested against a real server.
//!
//! ## Layout under the root znode (`docs/deployment-strategies.md#zookeeper-layout`)
//!
//! | znode | kind | content |
//! |---|---|---|
//! | `election/member-<seq>` | ephemeral sequential | [`ReplicaInfo`] as JSON |
//! | `deployment` | persistent, versioned | [`DeploymentRecord`] as JSON |
//! | `framework-id` | persistent | the framework ID, plain UTF-8 |
//! | `services/<name>` | persistent | a service record, JSON ([`RecordKind::Services`]) |
//! | `tasks/<task-id>` | persistent | a task record, JSON ([`RecordKind::Tasks`]) |
//! | `drains/<agent-id>` | persistent | an agent's drain, JSON ([`RecordKind::Drains`]) |
//! | `jobs/<name>` | persistent | a job record, JSON ([`RecordKind::Jobs`]) |
//! | `runs/<job>.<run-id>` | persistent | a job's run record, JSON ([`RecordKind::Runs`]) |
//! | `audit/entry-<seq>` | persistent sequential | one audit entry, JSON; the last [`AUDIT_KEPT`] are kept |
//!
//! ## Leadership
//!
//! [`Coordinator::leadership`] is a `watch` channel of [`Leadership`]. Each
//! time the replica becomes leader it starts a new *term* (numbered from 1);
//! [`Coordinator::term_token`] gives the [`CancellationToken`] of a term,
//! cancelled the moment the term ends (suspension, expiry, abdication,
//! close). The scheduler hangs all leader-only work off that token. A term
//! ends *before* the new state is published, so a receiver that sees
//! `Suspended` knows the token is already cancelled.
//!
//! ## Fenced writes
//!
//! Writes only the leader may make — the framework ID, services and tasks —
//! are *fenced*: they fail with [`CoordinationError::NotLeader`] unless this
//! replica currently leads, and on ZooKeeper they are sent as one multi-op
//! that also checks the replica's own member node still exists. Sequence
//! numbers only grow, so a member node that still exists and was the lowest
//! is still the lowest: a deposed leader's late write fails instead of
//! clobbering the new leader's state. The deployment record is not fenced
//! (a starting replica of a new deployment writes it before it leads); it
//! relies on compare-and-set instead.

pub mod deployment;
pub mod memory;
mod mirror;
mod records;
mod signal;
pub mod zookeeper;

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use mirror::RecordMirror;
pub use records::{MalformedRecord, RecordChanges, RecordList, RecordStore, RecordVisitor};

/// What a replica publishes about itself in its election member node, and
/// what followers show about the leader. JSON with snake_case keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplicaInfo {
    /// Unique per process (a UUID unless configured).
    pub replica_id: String,
    /// URL other replicas and users reach this replica's dashboard and API at.
    pub advertised_url: String,
    /// The deployment this replica belongs to
    /// (`docs/deployment-strategies.md#deployment-identity`).
    pub deployment_id: String,
    /// The appliance version (`CARGO_PKG_VERSION` or build info).
    pub version: String,
    /// When the replica started, in seconds since the Unix epoch.
    pub started_at: u64,
}

impl ReplicaInfo {
    /// A replica with a random UUID as ID, started now.
    pub fn new(advertised_url: &str, deployment_id: &str, version: &str) -> ReplicaInfo {
        ReplicaInfo {
            replica_id: uuid::Uuid::new_v4().to_string(),
            advertised_url: advertised_url.to_string(),
            deployment_id: deployment_id.to_string(),
            version: version.to_string(),
            started_at: unix_now(),
        }
    }
}

/// One election member, as listed by [`Coordinator::members`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Member {
    /// The ZooKeeper sequence number of the member node; the lowest leads.
    pub sequence: u64,
    /// The member node's data.
    pub info: ReplicaInfo,
}

/// A replica's place in the election, published on a `watch` channel.
///
/// Serialized with a `role` tag: `{"role":"leader","term":3}`,
/// `{"role":"follower","leader":{…}}`, `{"role":"candidate"}`,
/// `{"role":"suspended"}` (the names `/api/v1/state` uses,
/// `docs/architecture.md#http-api`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Leadership {
    /// Not (yet) in the election: connecting, joining, waiting out the
    /// hold-off after losing leadership, or closed.
    Candidate,
    /// In the election behind another member.
    Follower {
        /// The leading member's info, `None` when its node carries no
        /// readable [`ReplicaInfo`].
        leader: Option<ReplicaInfo>,
    },
    /// This replica leads.
    Leader {
        /// Counts from 1 and grows each time this replica becomes leader
        /// (resuming after `Suspended` is a new term).
        term: u64,
    },
    /// The leader's ZooKeeper session is disconnected but not yet expired.
    /// The term has ended: stop every Mesos call. If the session comes back
    /// in time the replica leads again under a new term; if it expires it
    /// re-enters the election with a new session.
    Suspended,
}

impl Leadership {
    /// Whether this is `Leader`.
    pub fn is_leader(&self) -> bool {
        matches!(self, Leadership::Leader { .. })
    }

    /// The term when leading.
    pub fn term(&self) -> Option<u64> {
        match self {
            Leadership::Leader { term } => Some(*term),
            _ => None,
        }
    }

    /// `leader`, `follower`, `candidate` or `suspended`.
    pub fn role(&self) -> &'static str {
        match self {
            Leadership::Candidate => "candidate",
            Leadership::Follower { .. } => "follower",
            Leadership::Leader { .. } => "leader",
            Leadership::Suspended => "suspended",
        }
    }
}

/// `--framework-deployment-strategy` (`docs/deployment-strategies.md#strategies`).
/// Serialized lowercase.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Join the election and take over the stored framework ID.
    #[default]
    Failover,
    /// Fence older deployments, then take over the same framework ID.
    Upgrade,
    /// Fence older deployments, tear down earlier frameworks, start afresh.
    Hard,
}

/// Content of the `deployment` znode: which deployment owns the framework.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeploymentRecord {
    /// The owning deployment's ID (`--deployment-id`).
    pub deployment_id: String,
    /// Grows by one each time a new deployment takes over.
    pub epoch: u64,
    /// The strategy the owning deployment started with.
    pub strategy: Strategy,
    /// For `hard`: whether this deployment's teardown of earlier frameworks
    /// is done (it is done once per deployment, by its first leader).
    pub teardown_done: bool,
}

/// A value with the version of the znode it was read from or written to,
/// for compare-and-set. Versions are ZooKeeper's `dataVersion`: 0 when
/// created, +1 per write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Versioned<T> {
    /// The decoded content of the znode.
    pub value: T,
    /// The znode's `dataVersion` when this value was read or written.
    pub version: i32,
}

/// The precondition of a versioned write or delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The record must not exist (create).
    Absent,
    /// The record must exist with exactly this version (compare-and-set).
    Version(i32),
    /// No precondition (create or overwrite; delete if present).
    Any,
}

/// The record collections under the root: `services/`, `tasks/`,
/// `drains/`, `jobs/` and `runs/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKind {
    /// `services/<name>`: desired workload.
    Services,
    /// `tasks/<task-id>`: task records.
    Tasks,
    /// `drains/<agent-id>`: the appliance's drains of agents.
    Drains,
    /// `jobs/<name>`: job specs (`docs/jobs.md`).
    Jobs,
    /// `runs/<job>.<run-id>`: the runs of jobs, each written before its
    /// first attempt is launched (`docs/jobs.md#exactly-once`).
    Runs,
}

impl RecordKind {
    /// The znode directory name under the root.
    pub fn dir(self) -> &'static str {
        match self {
            RecordKind::Services => "services",
            RecordKind::Tasks => "tasks",
            RecordKind::Drains => "drains",
            RecordKind::Jobs => "jobs",
            RecordKind::Runs => "runs",
        }
    }
}

/// The records of one kind as a whole ([`Coordinator::records_stat`]): a
/// look that costs one read however many records there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordsStat {
    /// How many records there are.
    pub count: usize,
    /// Changes whenever a record is created or deleted, not when one is
    /// rewritten: ZooKeeper's `cversion` of the records' directory (`-1`
    /// when there is no directory yet).
    pub keys_version: i64,
}

/// One write of a batch ([`Coordinator::write_records`]).
#[derive(Debug, Clone, PartialEq)]
pub enum RecordWrite {
    /// Writes `key` under `expect`; `json` is the record's JSON text.
    Put {
        /// The record key (service name or task ID).
        key: String,
        /// The record, serialized ([`RecordWrite::put`] does it).
        json: Vec<u8>,
        /// The precondition.
        expect: Expect,
    },
    /// Deletes `key` under `expect` ([`Expect::Version`] or [`Expect::Any`]).
    Delete {
        /// The record key.
        key: String,
        /// The precondition.
        expect: Expect,
    },
}

impl RecordWrite {
    /// A put of `value` serialized as JSON. [`CoordinationError::Invalid`]
    /// when it does not serialize.
    pub fn put(key: &str, value: &impl Serialize, expect: Expect) -> Result<RecordWrite> {
        let json = serde_json::to_vec(value)
            .map_err(|e| CoordinationError::Invalid(format!("record does not serialize: {e}")))?;
        Ok(RecordWrite::Put {
            key: key.to_string(),
            json,
            expect,
        })
    }

    /// The key written.
    pub fn key(&self) -> &str {
        match self {
            RecordWrite::Put { key, .. } | RecordWrite::Delete { key, .. } => key,
        }
    }
}

/// What one write of a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The record was written; its new version.
    Version(i32),
    /// The record was deleted.
    Deleted,
    /// A delete under [`Expect::Any`] found nothing to delete.
    Absent,
}

/// Errors of the coordination layer. Callers branch on the kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinationError {
    /// A compare-and-set lost: the record's version is not the expected one,
    /// it exists when [`Expect::Absent`] was asked, or it is gone when a
    /// version was expected. Re-read and decide again.
    #[error("version conflict at {path}")]
    VersionConflict {
        /// The znode whose version did not match.
        path: String,
    },
    /// The stored framework ID differs from the one being written
    /// (`docs/deployment-strategies.md#framework-id-mismatch`: two schedulers
    /// registered at once; the caller aborts).
    #[error("framework ID mismatch: stored {stored:?}, ours {ours:?}")]
    Mismatch {
        /// The framework ID in ZooKeeper.
        stored: String,
        /// The one this replica tried to write.
        ours: String,
    },
    /// A fenced write was attempted by a replica that does not lead (or
    /// whose member node is gone: it was deposed).
    #[error("not the leader")]
    NotLeader,
    /// The ZooKeeper session expired during the call; the coordinator is
    /// building a new one and re-entering the election.
    #[error("ZooKeeper session expired")]
    SessionExpired,
    /// ZooKeeper did not answer in time or the connection is down. Transient.
    #[error("ZooKeeper unavailable: {0}")]
    Unavailable(String),
    /// ZooKeeper refused the credentials or the ACL forbids the operation.
    #[error("not authorized by ZooKeeper")]
    Unauthorized,
    /// A stored record cannot be decoded. Listing skips such records and
    /// reports them; a single-record read returns this error.
    #[error("malformed record at {path}: {reason}")]
    Malformed {
        /// The znode holding the record.
        path: String,
        /// Why it does not decode (the JSON parser's message).
        reason: String,
    },
    /// The caller passed something unusable (e.g. a record key with `/`).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The write would make a ZooKeeper request larger than the server
    /// accepts without a flag (`jute.maxbuffer`, 1,048,575 bytes by default;
    /// `docs/deployment-strategies.md#request-sizes`): refused before it is
    /// sent, as the server would close the connection instead of answering.
    /// Not transient: the record must shrink.
    #[error(
        "record too large for ZooKeeper: {bytes} bytes to write {path}, over the {limit}-byte \
         request limit (jute.maxbuffer)"
    )]
    TooLarge {
        /// The znode the write was for.
        path: String,
        /// The size of the request it would take, in bytes.
        bytes: usize,
        /// The largest request allowed, in bytes.
        limit: usize,
    },
    /// The coordinator was closed.
    #[error("coordinator closed")]
    Closed,
    /// Anything else ZooKeeper answered; the message says what.
    #[error("unexpected ZooKeeper error: {0}")]
    Unexpected(String),
}

/// Audit entries kept by [`Coordinator::append_audit`]; older ones are
/// pruned.
pub const AUDIT_KEPT: usize = 1000;

/// Largest audit entry accepted by [`Coordinator::append_audit`], bytes
/// of JSON (the web layer bounds every field well below it).
pub const MAX_AUDIT_ENTRY_BYTES: usize = 16 * 1024;

/// Result alias of this module.
pub type Result<T, E = CoordinationError> = std::result::Result<T, E>;

/// A ZooKeeper session's timeout: what `--zk-session-timeout` asked and
/// what the server gave ([`Coordinator::session_timeouts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTimeouts {
    /// Asked for.
    pub asked: std::time::Duration,
    /// Negotiated: the session expires after this long without contact.
    pub negotiated: std::time::Duration,
}

/// Election, deployment fence and stores, as one object held as
/// `Arc<dyn Coordinator>` by the scheduler and the web layer.
///
/// Every remote call has a timeout (the ZooKeeper implementation uses its
/// operation timeout, by default the session timeout) and answers
/// [`CoordinationError::Unavailable`] when it passes.
#[async_trait]
pub trait Coordinator: Send + Sync + 'static {
    /// This replica's own info (as published in its member node).
    fn replica(&self) -> &ReplicaInfo;

    /// The ZooKeeper session timeout asked for and the one the server
    /// negotiated (it bounds the ask to `[minSessionTimeout,
    /// maxSessionTimeout]`, by default 2 and 20 × `tickTime`), while a
    /// session is open; `None` without ZooKeeper.
    fn session_timeouts(&self) -> Option<SessionTimeouts> {
        None
    }

    /// The leadership signal. Transitions are rate-limited: a new term never
    /// starts sooner than the implementation's hold-off after the previous
    /// one ended.
    fn leadership(&self) -> watch::Receiver<Leadership>;

    /// The token of leadership term `term`: cancelled when that term ends.
    /// A term that already ended (or never started) gives a cancelled token,
    /// so `term_token(t)` after seeing `Leader { term: t }` is race-free.
    fn term_token(&self, term: u64) -> CancellationToken;

    /// The election members, sorted by sequence: the leader first. Members
    /// whose node data is unreadable are skipped (and logged).
    async fn members(&self) -> Result<Vec<Member>>;

    /// Steps down voluntarily: ends the term, deletes the member node and
    /// rejoins at the back of the queue. [`CoordinationError::NotLeader`]
    /// when not leading.
    async fn abdicate(&self) -> Result<()>;

    /// Leaves the election at once (deletes the member node, closes the
    /// session) so a follower takes over in milliseconds; keeps all other
    /// state. Idempotent; later calls fail with [`CoordinationError::Closed`].
    async fn close(&self);

    /// The `deployment` record, `None` when absent.
    async fn deployment(&self) -> Result<Option<Versioned<DeploymentRecord>>>;

    /// Writes the `deployment` record under a precondition (not fenced).
    async fn write_deployment(
        &self,
        record: &DeploymentRecord,
        expect: Expect,
    ) -> Result<Versioned<DeploymentRecord>>;

    /// Binds the fenced writes to the deployment record: from now on they
    /// are refused ([`CoordinationError::NotLeader`]) once the record has
    /// moved on to a deployment that fences `ours` (`observed` is the record
    /// `ours` registered under), also before [`Coordinator::watch_deployment`]
    /// has delivered it. Called by [`deployment::register`]. The default does
    /// nothing: an in-process coordinator has no other deployment to fear.
    fn bind_deployment(&self, ours: &str, observed: &Versioned<DeploymentRecord>) {
        let _ = (ours, observed);
    }

    /// The `deployment` record as it changes; replicas of a superseded
    /// deployment learn it here. `None` when absent or unreadable.
    fn watch_deployment(&self) -> watch::Receiver<Option<Versioned<DeploymentRecord>>>;

    /// The stored framework ID, `None` when absent.
    async fn framework_id(&self) -> Result<Option<Versioned<String>>>;

    /// Stores `id` if no framework ID is stored (fenced). Storing the same
    /// ID again returns the stored one; a different stored ID is
    /// [`CoordinationError::Mismatch`].
    async fn store_framework_id(&self, id: &str) -> Result<Versioned<String>>;

    /// Replaces the framework ID under a precondition (fenced
    /// compare-and-set), e.g. after re-registering as a new framework.
    async fn replace_framework_id(&self, id: &str, expect: Expect) -> Result<Versioned<String>>;

    /// Deletes the framework ID (fenced). `Ok(false)` when there was none.
    async fn delete_framework_id(&self, expect: Expect) -> Result<bool>;

    /// One record (services or tasks), `None` when absent. Bytes that are
    /// not JSON give [`CoordinationError::Malformed`].
    async fn get_record(
        &self,
        kind: RecordKind,
        key: &str,
    ) -> Result<Option<Versioned<serde_json::Value>>>;

    /// Writes one record under a precondition (fenced); returns the new
    /// version.
    async fn put_record(
        &self,
        kind: RecordKind,
        key: &str,
        value: &serde_json::Value,
        expect: Expect,
    ) -> Result<i32>;

    /// Reads every record of a kind in key order and hands each to `visit`
    /// as it arrives: its key, its version and its stored bytes (JSON, not
    /// checked here). A record deleted between the listing and its read is
    /// left out. The caller decodes each record once, straight into its
    /// type, and never holds every record's bytes at once
    /// ([`RecordStore::list`](records::RecordStore::list)).
    async fn visit_records(&self, kind: RecordKind, visit: &mut RecordVisitor<'_>) -> Result<()>;

    /// All records of a kind as JSON values, sorted by key; records that are
    /// not JSON are reported in [`RecordList::malformed`], never fatal.
    async fn list_records(&self, kind: RecordKind) -> Result<RecordList<serde_json::Value>> {
        let mut list = RecordList::default();
        self.visit_records(kind, &mut |key, version, bytes| {
            records::decode_into(&mut list, kind, key, version, bytes)
        })
        .await?;
        Ok(list)
    }

    /// How many records of a kind there are and the version of their set
    /// of keys, in one read (a standby replica skips reading every record
    /// while no record was created or deleted).
    async fn records_stat(&self, kind: RecordKind) -> Result<RecordsStat>;

    /// Starts watching the records of `kind`: from now on the key of every
    /// record created, rewritten or deleted is delivered to the returned
    /// [`RecordChanges`], which a follower uses to keep its copy of the
    /// records current without reading them all again
    /// ([`RecordMirror`]). `Ok(None)` when the implementation cannot watch
    /// (the in-memory coordinator, whose one replica never follows; a
    /// ZooKeeper server before 3.6, which has no persistent watches).
    async fn watch_records(&self, kind: RecordKind) -> Result<Option<Box<dyn RecordChanges>>> {
        let _ = kind;
        Ok(None)
    }

    /// Deletes one record (fenced). `Ok(false)` when it was absent (only with
    /// [`Expect::Any`]; with a version, absence is a conflict).
    async fn delete_record(&self, kind: RecordKind, key: &str, expect: Expect) -> Result<bool>;

    /// Deletes every record of a kind (fenced); returns how many.
    async fn delete_records(&self, kind: RecordKind) -> Result<usize>;

    /// Applies many writes of one kind (fenced), as few round trips as the
    /// implementation can: ZooKeeper sends them as `multi` transactions of
    /// a few hundred operations behind the leadership check. Each write
    /// stands alone: one whose precondition fails gets its
    /// [`CoordinationError::VersionConflict`] and does not stop the others,
    /// and a failure of the whole batch (not leader, ZooKeeper unavailable)
    /// is every write's error. Returns one result per write, in order.
    async fn write_records(
        &self,
        kind: RecordKind,
        writes: Vec<RecordWrite>,
    ) -> Vec<Result<Written>>;

    /// Appends `entry` to the audit log, an append-only log shared by every
    /// replica (`audit/entry-<seq>`, sequential znodes), and prunes it to
    /// the newest [`AUDIT_KEPT`] (ZooKeeper: after answering, so that the
    /// caller waits for one write). Fenced like the store writes: only the
    /// leader appends, and a leader deposed meanwhile (its election node
    /// gone) gets [`CoordinationError::NotLeader`], so the log never takes
    /// a deposed leader's entry after its successor's
    /// (`docs/election-model.md`). Returns the entry's sequence number
    /// (grows by at least one per entry).
    /// [`CoordinationError::Invalid`] for an entry above
    /// [`MAX_AUDIT_ENTRY_BYTES`].
    async fn append_audit(&self, entry: &serde_json::Value) -> Result<u64>;

    /// The newest `limit` audit entries (at most [`AUDIT_KEPT`]), oldest
    /// first, each with its sequence number. Entries that are not JSON are
    /// skipped (and logged).
    async fn audit_log(&self, limit: usize) -> Result<Vec<(u64, serde_json::Value)>>;

    /// Deletes the whole state: the root znode and everything under it,
    /// including other replicas' member nodes (`uninstall`). Not fenced;
    /// deleting nothing is success.
    async fn delete_all(&self) -> Result<()>;
}

/// Checks a record key is usable as one znode name.
pub(crate) fn check_key(key: &str) -> Result<()> {
    let bad = key.is_empty()
        || key == "."
        || key == ".."
        || key == "zookeeper"
        || key.chars().any(|c| c == '/' || c.is_control());
    if bad {
        return Err(CoordinationError::Invalid(format!(
            "record key {key:?} is not a valid znode name"
        )));
    }
    Ok(())
}

/// The JSON of an audit entry, refused when above [`MAX_AUDIT_ENTRY_BYTES`].
pub(crate) fn audit_bytes(entry: &serde_json::Value) -> Result<Vec<u8>> {
    let bytes = serde_json::to_vec(entry).unwrap_or_default();
    if bytes.len() > MAX_AUDIT_ENTRY_BYTES {
        return Err(CoordinationError::Invalid(format!(
            "an audit entry of {} bytes is above the limit of {MAX_AUDIT_ENTRY_BYTES}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_types_use_the_documented_json() {
        let info = ReplicaInfo {
            replica_id: "r1".into(),
            advertised_url: "http://a:8080".into(),
            deployment_id: "d1".into(),
            version: "0.1.0".into(),
            started_at: 1_700_000_000,
        };
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["advertised_url"], "http://a:8080");
        assert_eq!(json["started_at"], 1_700_000_000u64);
        let l = serde_json::to_value(Leadership::Leader { term: 3 }).unwrap();
        assert_eq!(l, serde_json::json!({"role": "leader", "term": 3}));
        let rec = DeploymentRecord {
            deployment_id: "d".into(),
            epoch: 2,
            strategy: Strategy::Hard,
            teardown_done: false,
        };
        let json = serde_json::to_value(&rec).unwrap();
        assert_eq!(json["strategy"], "hard");
        assert_eq!(json["teardown_done"], false);
        assert_eq!(
            serde_json::from_value::<DeploymentRecord>(json).unwrap(),
            rec
        );
    }

    #[test]
    fn keys_must_be_znode_names() {
        assert!(check_key("task-1.abc_2").is_ok());
        for bad in ["", ".", "..", "a/b", "a\nb", "zookeeper"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
