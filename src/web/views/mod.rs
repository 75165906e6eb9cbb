//! View models: what a page shows and its JSON twin returns, built from one
//! [`Snapshot`]. Each `*View` serializes to the JSON of `docs/architecture.md#http-api` (keys in
//! snake_case, times in seconds since the UNIX epoch) and is also the data
//! of the page's template, so the two never disagree.
//!
//! Ages (heartbeat age, uptimes, readiness's silence check, "3s ago" on the
//! pages) are measured against the request's time, never the snapshot's: a
//! snapshot is republished only when something changes, so it may be old.
//!
//! [`tasks`] holds the tasks views, [`lists`] the smaller ones; both are
//! re-exported here. [`derived`] holds what is computed once per snapshot
//! for them, [`index`] the task list's sort and filter index within it.

pub mod derived;
pub mod index;
pub mod lists;
pub mod tasks;

pub use derived::*;
pub use lists::*;
pub use tasks::*;

use std::collections::BTreeMap;

use serde::Serialize;

use super::format;
use crate::coordination::{DeploymentRecord, Leadership, ReplicaInfo, Strategy};
use crate::scheduler::{FieldError, FrameworkState, ReconcileRun, Snapshot};

/// Tasks per page unless `per_page` says otherwise.
pub const DEFAULT_PER_PAGE: usize = 50;
/// Largest `per_page` (enough for every task of a service at
/// [`MAX_INSTANCES`](crate::scheduler::spec::service::MAX_INSTANCES)).
pub const MAX_PER_PAGE: usize = 10_000;
/// Events listed unless `limit` says otherwise.
pub const DEFAULT_EVENTS: usize = 200;

/// `framework` in `/api/v1/state`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FrameworkView {
    /// The framework ID, `null` before the first SUBSCRIBED.
    pub id: Option<String>,
    /// `FrameworkInfo.name`.
    pub name: String,
    /// `FrameworkInfo.role`.
    pub role: String,
    /// `standby`, `subscribing`, `subscribed`, `disconnected`, `removed`,
    /// `failed_over` or `fenced`.
    pub state: &'static str,
    /// Why, for the states that need one.
    pub reason: Option<String>,
    /// `FrameworkInfo.failover_timeout`, seconds.
    pub failover_timeout_seconds: f64,
    /// The leading Mesos master's base URL.
    pub master: Option<String>,
    /// Its version.
    pub master_version: Option<String>,
    /// When the current subscription began.
    pub subscribed_at: Option<f64>,
    /// When the newest event the leader applied (heartbeats included) was
    /// read off the Mesos stream.
    pub last_event_at: Option<f64>,
    /// Seconds since then, as of this request: the master's silence plus
    /// the leader's lag in applying what it sent.
    pub heartbeat_age_seconds: Option<f64>,
    /// Age of the oldest event read off the stream and not yet applied,
    /// seconds, as of the snapshot (0 when none waits).
    pub event_lag_seconds: f64,
    /// Events read off the stream and not yet applied.
    pub event_inbox_depth: usize,
    /// The inbox is full: the stream is not read meanwhile (the lag is a
    /// lower bound).
    pub event_inbox_full: bool,
    /// The master's heartbeat interval, seconds.
    pub heartbeat_interval_seconds: Option<f64>,
    /// The silence after which the subscription counts as dead, seconds
    /// (readiness fails past it).
    pub heartbeat_timeout_seconds: Option<f64>,
    /// The deployment strategy.
    pub strategy: Strategy,
}

/// `leadership` in `/api/v1/state`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LeadershipView {
    /// `leader`, `follower`, `candidate` or `suspended`.
    pub role: &'static str,
    /// The leader's advertised URL (this replica's when it leads), when known.
    pub leader_url: Option<String>,
    /// The leader's replica ID, when known.
    pub leader_replica_id: Option<String>,
    /// The leadership term, when this replica leads.
    pub term: Option<u64>,
}

/// `counts` in `/api/v1/state`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Counts {
    /// Task records.
    pub tasks: usize,
    /// Task records not in a terminal state.
    pub active_tasks: usize,
    /// Task records per Mesos state name.
    pub tasks_by_state: BTreeMap<String, usize>,
    /// Services.
    pub services: usize,
    /// Desired instances over all services.
    pub desired_instances: u64,
    /// Instances whose task is unreachable (waited for or replaced, not
    /// given up) over all services.
    pub unreachable_instances: u64,
    /// Offers held.
    pub offers: usize,
    /// The stored records are not all read yet (a new leader before its
    /// load, a follower before its first read): the lists and counts hold
    /// what is read so far, not what is stored ([`crate::scheduler::Snapshot::loading`]).
    pub loading: bool,
}

/// Readiness, as `/readyz` answers it and the overview shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Readiness {
    /// Leader and subscribed (with events arriving), or follower of a known
    /// (live) leader.
    pub ready: bool,
    /// Why (not) ready, in an operator's words.
    pub reason: String,
}

/// The running, the queued and the last reconciliation.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReconcileSummary {
    /// The run in progress.
    pub running: Option<ReconcileRun>,
    /// Runs waiting for the running one or the cooldown (at most one per
    /// kind; explicit starts first), each with outcome `queued` and
    /// `started_at` the time it was queued.
    pub queued: Vec<ReconcileRun>,
    /// The earliest time (seconds since the UNIX epoch) the first queued
    /// run may start: the end of the cooldown after the last run. `null`
    /// when nothing is queued or a run is in progress (the queue waits
    /// for its end, then the cooldown).
    pub not_before: Option<f64>,
    /// The newest finished run.
    pub last: Option<ReconcileRun>,
}

/// `/api/v1/state` and the overview page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StateView {
    /// The framework.
    pub framework: FrameworkView,
    /// This replica's place in the election.
    pub leadership: LeadershipView,
    /// The deployment record, when known.
    pub deployment: Option<DeploymentRecord>,
    /// Counts.
    pub counts: Counts,
    /// This replica.
    pub replica: ReplicaInfo,
    /// Reconciliation.
    pub reconciliation: ReconcileSummary,
    /// Readiness (as `/readyz`).
    pub readiness: Readiness,
    /// When the snapshot was made.
    pub snapshot_at: f64,
    /// This replica's ZooKeeper session timeout, asked and negotiated;
    /// `null` without ZooKeeper or while no session is open.
    pub zookeeper_session: Option<ZkSessionView>,
}

/// A ZooKeeper session's timeout as `/api/v1/state` shows it: a negotiated
/// one above the asked one means a failover takes that much longer
/// (the server's minSessionTimeout, by default 2 × tickTime).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ZkSessionView {
    /// `--zk-session-timeout`, seconds.
    pub asked_timeout_seconds: f64,
    /// What the server gave, seconds: the session expires after this
    /// long without contact.
    pub timeout_seconds: f64,
}

impl From<crate::coordination::SessionTimeouts> for ZkSessionView {
    fn from(t: crate::coordination::SessionTimeouts) -> Self {
        ZkSessionView {
            asked_timeout_seconds: t.asked.as_secs_f64(),
            timeout_seconds: t.negotiated.as_secs_f64(),
        }
    }
}

/// Seconds from `last_event_at` to `now` (a request's time), never negative.
pub fn event_age(last_event_at: Option<f64>, now: f64) -> Option<f64> {
    last_event_at.map(|t| (now - t).max(0.0))
}

/// Whether `s` passes `/readyz` at time `now`: the invariant "leader ⇔
/// subscribed" holds, the subscription has not been silent (no event, not
/// even a heartbeat) for longer than the heartbeat timeout — after which
/// the Mesos client itself treats the connection as dead — the leader is
/// not further behind the stream (its event lag) than that same bound,
/// and a follower follows a live leader (its election node exists).
pub fn readiness(s: &Snapshot, now: f64) -> Readiness {
    let fw = &s.framework;
    let silence = event_age(fw.last_event_at, now)
        .zip(fw.heartbeat_timeout_seconds)
        .filter(|(age, timeout)| age > timeout);
    let lagging = fw
        .heartbeat_timeout_seconds
        .filter(|timeout| fw.event_lag_seconds > *timeout);
    let (ready, reason) = match &s.leadership {
        _ if fw.state == FrameworkState::Fenced => (
            false,
            format!(
                "fenced: {}",
                fw.reason
                    .as_deref()
                    .unwrap_or("a newer deployment took over")
            ),
        ),
        Leadership::Leader { .. } if fw.state == FrameworkState::Subscribed => match silence {
            None => match lagging {
                None => (true, "leader, subscribed to the master".to_string()),
                Some(timeout) => (
                    false,
                    format!(
                        "leader, but {} behind the master's event stream ({} event(s) read and \
                         not yet applied{}), longer than the heartbeat timeout of {}",
                        format::duration(fw.event_lag_seconds),
                        fw.event_inbox_depth,
                        if fw.event_inbox_full {
                            "; the inbox is full, so more wait unread"
                        } else {
                            ""
                        },
                        format::duration(timeout)
                    ),
                ),
            },
            Some((age, timeout)) => (
                false,
                format!(
                    "leader, but the master has sent nothing (not even a heartbeat) for {}, \
                     longer than the heartbeat timeout of {}",
                    format::duration(age),
                    format::duration(timeout)
                ),
            ),
        },
        Leadership::Leader { .. } => (
            false,
            format!(
                "leader, but the framework is {}{}",
                fw.state.as_str(),
                fw.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        ),
        Leadership::Follower { leader: Some(l) } => {
            (true, format!("standby, following {}", l.advertised_url))
        }
        Leadership::Follower { leader: None } => (
            false,
            "standby, but the leader's identity is unreadable".to_string(),
        ),
        Leadership::Candidate => (false, "not in the leader election yet".to_string()),
        Leadership::Suspended => (
            false,
            "ZooKeeper session suspended: not acting until it reconnects".to_string(),
        ),
    };
    Readiness { ready, reason }
}

impl FrameworkView {
    /// The strategy's name (`failover`, `upgrade`, `hard`).
    pub fn strategy_name(&self) -> &'static str {
        match self.strategy {
            Strategy::Failover => "failover",
            Strategy::Upgrade => "upgrade",
            Strategy::Hard => "hard",
        }
    }
}

impl StateView {
    /// The view of `s`, whose aggregates are `d`, with ages as of `now`
    /// (the request's time: the snapshot may be older).
    pub fn new(s: &Snapshot, d: &Derived, now: f64) -> StateView {
        let fw = &s.framework;
        let leader = match &s.leadership {
            Leadership::Leader { .. } => Some(&s.replica),
            Leadership::Follower { leader } => leader.as_ref(),
            _ => None,
        };
        StateView {
            framework: FrameworkView {
                id: fw.id.clone(),
                name: fw.name.clone(),
                role: fw.role.clone(),
                state: fw.state.as_str(),
                reason: fw.reason.clone(),
                failover_timeout_seconds: fw.failover_timeout_seconds,
                master: fw.master.as_deref().map(crate::util::redact_password),
                master_version: fw.master_version.clone(),
                subscribed_at: fw.subscribed_at,
                last_event_at: fw.last_event_at,
                heartbeat_age_seconds: event_age(fw.last_event_at, now),
                event_lag_seconds: fw.event_lag_seconds,
                event_inbox_depth: fw.event_inbox_depth,
                event_inbox_full: fw.event_inbox_full,
                heartbeat_interval_seconds: fw.heartbeat_interval_seconds,
                heartbeat_timeout_seconds: fw.heartbeat_timeout_seconds,
                strategy: fw.strategy,
            },
            leadership: LeadershipView {
                role: s.leadership.role(),
                leader_url: leader.map(|l| l.advertised_url.clone()),
                leader_replica_id: leader.map(|l| l.replica_id.clone()),
                term: s.leadership.term(),
            },
            deployment: s.deployment.clone(),
            counts: Counts {
                tasks: s.tasks.len(),
                active_tasks: d.active_tasks,
                tasks_by_state: d.task_counts.iter().cloned().collect(),
                services: s.services.len(),
                desired_instances: s.services.iter().map(|x| u64::from(x.spec.instances)).sum(),
                unreachable_instances: s.services.iter().map(|x| u64::from(x.unreachable)).sum(),
                offers: s.offers.len(),
                loading: s.loading,
            },
            replica: s.replica.clone(),
            reconciliation: ReconcileSummary {
                running: s.reconciliation.running.clone(),
                queued: s.reconciliation.queued.clone(),
                not_before: s.reconciliation.not_before,
                last: s.reconciliation.history.last().cloned(),
            },
            readiness: readiness(s, now),
            snapshot_at: s.at,
            zookeeper_session: None,
        }
    }
}

fn non_empty(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn field(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_string(),
        message: message.into(),
    }
}

fn parse_number(
    name: &str,
    value: &Option<String>,
    default: usize,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> usize {
    match non_empty(value) {
        None => default,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                let range = if max == usize::MAX {
                    "≥ 1".to_string()
                } else {
                    format!("from 1 to {max}")
                };
                errors.push(field(name, format!("must be a whole number {range}")));
                default
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscribed leader's snapshot whose newest applied event was read
    /// at 100 s, with a heartbeat timeout of 75 s.
    fn leader() -> Snapshot {
        let replica = ReplicaInfo::new("http://unit.test", "d1", "test");
        let mut s = Snapshot::standby(replica, "fw", "*", Strategy::Failover);
        s.leadership = Leadership::Leader { term: 1 };
        s.framework.state = FrameworkState::Subscribed;
        s.framework.last_event_at = Some(100.0);
        s.framework.heartbeat_timeout_seconds = Some(75.0);
        s
    }

    #[test]
    fn a_leader_behind_the_stream_past_the_heartbeat_timeout_is_not_ready() {
        let mut s = leader();
        s.framework.event_lag_seconds = 70.0;
        s.framework.event_inbox_depth = 64;
        assert!(readiness(&s, 101.0).ready, "within the bound");
        s.framework.event_lag_seconds = 100.0;
        s.framework.event_inbox_full = true;
        let r = readiness(&s, 101.0);
        assert!(!r.ready);
        assert!(
            r.reason.contains("behind the master's event stream"),
            "{}",
            r.reason
        );
        assert!(r.reason.contains("64 event(s)") && r.reason.contains("inbox is full"));
        // Silence is reported first: the heartbeat age includes the lag.
        assert!(readiness(&s, 200.0).reason.contains("has sent nothing"));
    }
}
