//! Leader election under `election/` (the ZooKeeper recipe,
//! `docs/deployment-strategies.md#leader-election`).
//!
//! Each replica holds one ephemeral sequential node `member-<seq>` carrying
//! its [`ReplicaInfo`] as JSON. The lowest sequence leads. Every other member
//! watches only its predecessor, so a departure wakes exactly one contender
//! (no herd effect). A follower further back reads the leader's node without
//! a watch and re-reads it every [`LEADER_REFRESH`], to keep
//! `Follower { leader }` current for redirects and the dashboard.
//!
//! Session states (zookeeper-client reports them on a state watcher, and a
//! pending node watch may fire with a session event instead):
//! - `Disconnected` while leading: the term ends and `Suspended` is published
//!   at once; ephemeral nodes live on until the session expires.
//! - `SyncConnected` again: re-evaluate; if still lowest, lead under a new
//!   term once the hold-off has passed. But a replica whose last term ended
//!   early and recently (`LeaderSignal::flapping` in `signal`) does not
//!   lead again while others are queued: it deletes its node and queues
//!   again, so that the next member leads at once instead of a replica
//!   whose terms end before its scheduler can act holding the lock through
//!   growing hold-offs.
//! - `Expired` (or `Closed`, `AuthFailed`): the session is over; the caller
//!   rebuilds the client and rejoins. The client may have given the session
//!   up on its own while the servers keep (or revive) it: the new session's
//!   join deletes the old session's node (`abandoned`) rather than queue
//!   behind it for another session timeout.
//!
//! A suspended replica keeps its node, and every reconnect attempt renews
//! its session, so a link that lets it reconnect but not lead (a long round
//! trip that is cut again and again) would keep everyone leaderless for
//! good. So once suspended for longer than the session timeout — when an
//! expired session would have let another replica lead — a replica deletes
//! its node first thing on reconnecting, and queues again.
//!
//! How long the connection may be silent before it counts as lost is
//! [`crate::util::zk::connection_timeout`]: three fifths of the session timeout. The
//! probes of `lease` keep answers arriving on a slow link, so a round trip
//! up to half the session timeout neither drops the connection nor
//! suspends a leader. A leader also suspends, connected or not, once no
//! answer has proven its session for the lease (four fifths of the session
//! timeout, `lease::leader_lease`): it stops before the session can expire.

use std::time::Duration;

use zookeeper_client as zk;

use super::session::SessionEnd;
use super::{Inner, abandoned, lease, map_zk};
use crate::coordination::{CoordinationError, Leadership, Member, ReplicaInfo, Result};

const MEMBER_PREFIX: &str = "member-";

/// Pause before retrying after a failed ZooKeeper call in the election loop.
const RETRY: Duration = Duration::from_millis(200);
/// The same when the ACLs refuse us: that will not fix itself soon.
const NO_AUTH_RETRY: Duration = Duration::from_secs(5);
/// How often a follower that is not next in line re-reads who leads.
pub(super) const LEADER_REFRESH: Duration = Duration::from_secs(2);

/// What to do after one round of the election loop.
enum Step {
    /// Evaluate again at once (something changed).
    Again,
    /// A call failed: pause this long, then evaluate again.
    Retry(Duration),
    /// Stop: shutdown or the session ended.
    End(SessionEnd),
}

/// Runs the election on one session until it ends or the coordinator closes.
pub(super) async fn run_session(inner: &Inner, client: &zk::Client) -> SessionEnd {
    let mut states = client.state_watcher();
    loop {
        if inner.shutdown.is_cancelled() {
            return SessionEnd::Shutdown;
        }
        let state = states.state();
        if state.is_terminated() {
            return SessionEnd::Lost(state);
        }
        if inner.signal.is_leading() && !lease::holds(inner, client.session_timeout()) {
            // Connected or not, nothing has proven the session for most of
            // its timeout: stop before the server could expire it.
            tracing::warn!(
                lease = ?lease::leader_lease(client.session_timeout()),
                "no answer from ZooKeeper proves our session within the lease while leading: suspended"
            );
            inner.signal.publish(Leadership::Suspended);
            inner.mark_lapsed();
        }
        if state == zk::SessionState::Disconnected {
            if inner.signal.is_leading() {
                tracing::warn!("ZooKeeper connection lost while leading: suspended");
                inner.signal.publish(Leadership::Suspended);
                inner.mark_lapsed();
            }
            tokio::select! {
                _ = inner.shutdown.cancelled() => return SessionEnd::Shutdown,
                _ = states.changed() => {}
            }
            continue;
        }
        let step = match round(inner, client, &mut states).await {
            Ok(step) => step,
            Err(zk::Error::NoAuth) => {
                tracing::warn!(
                    "ZooKeeper ACLs refuse our election node: check the zk:// credentials"
                );
                Step::Retry(NO_AUTH_RETRY)
            }
            Err(e) => {
                tracing::debug!(error = %e, "election round failed");
                Step::Retry(RETRY)
            }
        };
        match step {
            Step::Again => {}
            Step::End(end) => return end,
            Step::Retry(pause) => {
                tokio::select! {
                    _ = inner.shutdown.cancelled() => return SessionEnd::Shutdown,
                    _ = states.changed() => {}
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

/// One round: make sure we have a member node, find our place, publish it,
/// and wait for the event that can change it.
async fn round(
    inner: &Inner,
    client: &zk::Client,
    states: &mut zk::StateWatcher,
) -> Result<Step, zk::Error> {
    let me = match inner.member() {
        Some(me) => me,
        None => join(inner, client).await?,
    };
    if !inner.signal.is_leading()
        && inner
            .lapsed_for()
            .is_some_and(|lapse| lapse >= client.session_timeout())
    {
        // Suspended for longer than a session timeout, yet the session
        // lives on (every reconnect attempt renews it): while our node is
        // the lowest nobody leads. Give it up first thing, before a slow or
        // flapping link cuts this connection again; the delete reaches the
        // server even if its answer does not reach us.
        tracing::warn!(
            node = %me,
            "suspended for longer than the session timeout: giving up the election node \
             so that another replica leads"
        );
        release(inner, client, &me).await?;
        return Ok(Step::Again);
    }
    let sent = std::time::Instant::now();
    let members = sorted_members(inner, client).await?;
    inner.prove(sent);
    let my_seq = parse_sequence(me.rsplit('/').next().unwrap_or_default());
    let Some(pos) = members.iter().position(|(seq, _)| Some(*seq) == my_seq) else {
        // Our node is gone: abdication, an operator, or `uninstall`. The
        // term (if any) ends; the next round joins again at the back.
        if inner.signal.is_leading() {
            tracing::warn!(node = %me, "own member node deleted: stepping down");
        }
        inner.signal.publish(Leadership::Candidate);
        inner.clear_member_if(&me);
        return Ok(Step::Again);
    };

    if pos == 0 {
        if !inner.signal.is_leading() {
            if inner.signal.flapping() && members.len() > 1 {
                // Our last term ended before it had lasted: leading again
                // (after a growing hold-off) would likely end the same way,
                // with nobody acting meanwhile. Hand the lock to the next
                // member, whose link may be better, and queue again.
                tracing::warn!(
                    node = %me,
                    next = %members[1].1,
                    "the last term ended early: handing leadership to the next member"
                );
                release(inner, client, &me).await?;
                return Ok(Step::Again);
            }
            if let Some(wait) = inner.signal.hold_off_remaining() {
                if matches!(inner.signal.current(), Leadership::Follower { .. }) {
                    inner.signal.publish(Leadership::Candidate);
                }
                tracing::info!(?wait, "lowest member; holding off before leading");
                return Ok(
                    wait_for(inner, client.session_timeout(), states, None, Some(wait)).await,
                );
            }
            let term = inner.signal.begin_term();
            inner.end_lapse();
            tracing::info!(term, node = %me, "leading");
        }
        // Watch our own node: if someone deletes it we are deposed.
        let (stat, watch) = inner.timed(client.check_and_watch_stat(&me)).await?;
        if stat.is_none() {
            return Ok(Step::Again);
        }
        return Ok(wait_for(inner, client.session_timeout(), states, Some(watch), None).await);
    }

    if inner.signal.is_leading() {
        // Cannot happen with growing sequence numbers; be safe anyway.
        inner.signal.publish(Leadership::Candidate);
    }
    let predecessor = format!("{}/{}", inner.paths.election, members[pos - 1].1);
    let (data, _, predecessor_watch) =
        match inner.timed(client.get_and_watch_data(&predecessor)).await {
            Err(zk::Error::NoNode) => return Ok(Step::Again),
            r => r?,
        };
    let (leader_data, refresh) = if pos == 1 {
        (data, None)
    } else {
        let leader = format!("{}/{}", inner.paths.election, members[0].1);
        match inner.timed(client.get_data(&leader)).await {
            Err(zk::Error::NoNode) => return Ok(Step::Again),
            r => (r?.0, Some(LEADER_REFRESH)),
        }
    };
    let leader = serde_json::from_slice::<ReplicaInfo>(&leader_data).ok();
    inner.signal.publish(Leadership::Follower { leader });
    Ok(wait_for(
        inner,
        client.session_timeout(),
        states,
        Some(predecessor_watch),
        refresh,
    )
    .await)
}

/// Waits for a node watch, a session state change, a timer or shutdown.
/// Whatever fires, the next round re-reads everything.
async fn wait_for(
    inner: &Inner,
    session_timeout: Duration,
    states: &mut zk::StateWatcher,
    watch: Option<zk::OneshotWatcher>,
    timer: Option<Duration>,
) -> Step {
    async fn fire(watch: Option<zk::OneshotWatcher>) {
        match watch {
            Some(watch) => {
                watch.changed().await;
            }
            None => std::future::pending().await,
        }
    }
    let timer = async {
        match timer {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let leading = inner.signal.is_leading();
    tokio::select! {
        _ = inner.shutdown.cancelled() => Step::End(SessionEnd::Shutdown),
        _ = states.changed() => Step::Again,
        _ = fire(watch) => Step::Again,
        _ = timer => Step::Again,
        _ = lease::lapse(inner, session_timeout), if leading => Step::Again,
    }
}

/// Finds a member node this session already owns (a create whose answer
/// was lost with the connection) or creates one; records its path. On the
/// way, deletes the nodes of sessions our client gave up (`abandoned`).
async fn join(inner: &Inner, client: &zk::Client) -> Result<String, zk::Error> {
    let session = client.session_id();
    let given_up = inner.abandoned.snapshot();
    let mut own = None;
    for (_, name) in sorted_members(inner, client).await? {
        let path = format!("{}/{name}", inner.paths.election);
        match inner.timed(client.check_stat(&path)).await? {
            Some(stat) if stat.ephemeral_owner == session.0 => {
                own.get_or_insert(path);
            }
            Some(stat) if abandoned::is_stale(stat.ephemeral_owner, &given_up, session) => {
                abandoned::remove(inner, client, &path, &stat).await?;
            }
            _ => {}
        }
    }
    inner.abandoned.forget(&given_up);
    if let Some(path) = own {
        inner.set_member(Some(path.clone()));
        return Ok(path);
    }
    let data = serde_json::to_vec(&inner.config.replica).unwrap_or_default();
    let prefix = format!("{}/{MEMBER_PREFIX}", inner.paths.election);
    let mode = zk::CreateMode::EphemeralSequential.with_acls(inner.acls);
    let (_, seq) = inner.timed(client.create(&prefix, &data, &mode)).await?;
    let path = format!("{prefix}{seq}");
    tracing::debug!(node = %path, "joined the election");
    inner.set_member(Some(path.clone()));
    Ok(path)
}

/// Member node names sorted by sequence (others under `election/` ignored).
async fn sorted_members(
    inner: &Inner,
    client: &zk::Client,
) -> Result<Vec<(u64, String)>, zk::Error> {
    let children = inner
        .timed(client.list_children(&inner.paths.election))
        .await?;
    let mut members: Vec<(u64, String)> = children
        .into_iter()
        .filter_map(|name| parse_sequence(&name).map(|seq| (seq, name)))
        .collect();
    members.sort();
    Ok(members)
}

/// `member-0000000042` → 42.
fn parse_sequence(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(MEMBER_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The members with readable data, leader first.
pub(super) async fn members(inner: &Inner) -> Result<Vec<Member>> {
    let client = inner.client()?;
    let election = &inner.paths.election;
    let names = sorted_members(inner, &client)
        .await
        .map_err(|e| map_zk(e, election))?;
    let reads = names.iter().map(|(_, name)| {
        let path = format!("{election}/{name}");
        let client = &client;
        async move { (inner.timed(client.get_data(&path)).await, path) }
    });
    let mut out = Vec::with_capacity(names.len());
    for ((seq, _), (read, path)) in names.iter().zip(futures::future::join_all(reads).await) {
        match read {
            Ok((data, _)) => match serde_json::from_slice::<ReplicaInfo>(&data) {
                Ok(info) => out.push(Member {
                    sequence: *seq,
                    info,
                }),
                Err(e) => {
                    tracing::warn!(node = %path, error = %e, "unreadable member node skipped")
                }
            },
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(map_zk(e, &path)),
        }
    }
    Ok(out)
}

/// Ends the term and deletes our member node; the election loop sees the
/// node go and rejoins at the back.
pub(super) async fn abdicate(inner: &Inner) -> Result<()> {
    let client = inner.client()?;
    let me = inner.member().ok_or(CoordinationError::NotLeader)?;
    if !inner.signal.is_leading() {
        return Err(CoordinationError::NotLeader);
    }
    tracing::info!(node = %me, "abdicating");
    inner.signal.publish(Leadership::Candidate);
    release(inner, &client, &me)
        .await
        .map_err(|e| map_zk(e, &me))
}

/// Deletes our member node `me` (gone already is fine) and forgets it; the
/// next round joins again at the back of the queue.
async fn release(inner: &Inner, client: &zk::Client, me: &str) -> Result<(), zk::Error> {
    match inner.timed(client.delete(me, None)).await {
        Ok(()) | Err(zk::Error::NoNode) => {
            inner.clear_member_if(me);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// On shutdown: end the term and delete our member node so the successor
/// is notified now rather than after the session is closed.
pub(super) async fn leave(inner: &Inner, client: &zk::Client) {
    inner.signal.publish(Leadership::Candidate);
    let me = inner.take_member();
    if let Some(me) = me
        && client.state() == zk::SessionState::SyncConnected
    {
        match inner.timed(client.delete(&me, None)).await {
            Ok(()) | Err(zk::Error::NoNode) => tracing::info!(node = %me, "left the election"),
            Err(e) => {
                tracing::warn!(node = %me, error = %e, "could not delete member node; it goes with the session")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_sequence;

    #[test]
    fn sequences_parse_only_from_member_names() {
        assert_eq!(parse_sequence("member-0000000042"), Some(42));
        assert_eq!(parse_sequence("member-99999999999999999999"), None);
        assert_eq!(parse_sequence("member-"), None);
        assert_eq!(parse_sequence("member-+1"), None);
        assert_eq!(parse_sequence("latch-0000000001"), None);
    }
}
