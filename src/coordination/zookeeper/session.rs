//! Session lifecycle: connect, run the election on one session, rebuild the
//! client after expiry; and the `deployment` watch.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use super::{Inner, election, lease, map_zk, stores};
use crate::backoff::Backoff;
use crate::coordination::{CoordinationError, Leadership, Result};

/// First and largest pause between failed connection attempts.
const MIN_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Pause before retrying a failed read in a watch loop.
const RETRY: Duration = Duration::from_millis(200);

/// How a session's run ended.
pub(super) enum SessionEnd {
    /// The coordinator is closing.
    Shutdown,
    /// The session ended on its own (expired, auth failed, closed).
    Lost(zk::SessionState),
}

/// Opens a session (with digest auth if configured), waiting at most one
/// and a half session timeouts: the handshake takes two round trips (the
/// connect request, then the first ping), a whole session timeout at the
/// longest round trip the coordination layer must bear (half of it).
pub(super) async fn connect(inner: &Inner) -> Result<zk::Client> {
    let config = &inner.config;
    let connector = crate::util::zk::connector(&config.url, config.session_timeout);
    let hosts = config.url.connect_string();
    let connect = connector.connect(&hosts);
    let limit = config.session_timeout * 3 / 2;
    match tokio::time::timeout(limit, connect).await {
        Ok(Ok(client)) => {
            tracing::info!(
                session = format_args!("{:#x}", client.session_id().0),
                timeout_ms = client.session_timeout().as_millis() as u64,
                connection_timeout_ms =
                    crate::util::zk::connection_timeout(config.session_timeout).as_millis() as u64,
                url = %config.url,
                "ZooKeeper session established"
            );
            if let Some(warning) = timeout_warning(config.session_timeout, client.session_timeout())
            {
                tracing::warn!(
                    asked_ms = config.session_timeout.as_millis() as u64,
                    negotiated_ms = client.session_timeout().as_millis() as u64,
                    "{warning}"
                );
            }
            Ok(client)
        }
        Ok(Err(e)) => Err(map_zk(e, &config.url.root)),
        Err(_) => Err(CoordinationError::Unavailable(format!(
            "no ZooKeeper session with {} within {limit:?}",
            config.url
        ))),
    }
}

/// What to warn of when the server negotiated a session timeout other than
/// the one asked: ZooKeeper bounds the ask to `[minSessionTimeout,
/// maxSessionTimeout]` of its `zoo.cfg`, by default 2 and 20 × `tickTime`
/// (ZooKeeper Administrator's Guide, "Advanced Configuration"). A longer
/// one makes a failover (a dead leader's session expiring) take longer
/// than the operator planned; `None` when they agree (to the millisecond).
pub(super) fn timeout_warning(asked: Duration, negotiated: Duration) -> Option<String> {
    let (a, n) = (asked.as_millis(), negotiated.as_millis());
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    if n > a {
        Some(format!(
            "ZooKeeper gave a session timeout of {} where --zk-session-timeout asked {}: the \
             server raises an ask to its minSessionTimeout (by default 2 × tickTime), so a \
             failover waits {:.1}× as long as asked for a dead leader's session to expire; lower \
             the server's tickTime or minSessionTimeout, or ask for {} to say what you get",
            secs(negotiated),
            secs(asked),
            n as f64 / a.max(1) as f64,
            secs(negotiated),
        ))
    } else if n < a {
        Some(format!(
            "ZooKeeper gave a session timeout of {} where --zk-session-timeout asked {}: the \
             server lowers an ask to its maxSessionTimeout (by default 20 × tickTime); a \
             replica's session expires sooner than asked after a network stall",
            secs(negotiated),
            secs(asked),
        ))
    } else {
        None
    }
}

/// Creates the root (ancestors open, the root with our ACLs) and the
/// `election`, `services`, `tasks` and `drains` directories if absent.
/// Whether the root existed before is the answer.
pub(super) async fn ensure_paths(inner: &Inner, client: &zk::Client) -> Result<bool> {
    let root = &inner.paths.root;
    let root_existed = inner
        .timed(client.check_stat(root))
        .await
        .map_err(|e| map_zk(e, root))?
        .is_some();
    if let Some((parent, _)) = root.rsplit_once('/')
        && !parent.is_empty()
    {
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        inner
            .timed(client.mkdir(parent, &open))
            .await
            .map_err(|e| map_zk(e, parent))?;
    }
    let ours = zk::CreateMode::Persistent.with_acls(inner.acls);
    let dirs = [
        root.as_str(),
        &inner.paths.election,
        &inner.paths.services,
        &inner.paths.tasks,
        &inner.paths.drains,
        &inner.paths.jobs,
        &inner.paths.runs,
    ];
    for dir in dirs {
        // Check first: creating an existing node needs CREATE on its parent,
        // which a read-only identity lacks (ZooKeeper checks the ACL first).
        match inner.timed(client.check_stat(dir)).await {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => return Err(map_zk(e, dir)),
        }
        match inner.timed(client.create(dir, b"", &ours)).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(map_zk(e, dir)),
        }
    }
    Ok(root_existed)
}

/// The background task: one session after another until shutdown.
pub(super) async fn run(inner: Arc<Inner>, first: zk::Client) {
    let mut next = Some(first);
    let mut backoff = Backoff::jittered(MIN_BACKOFF, MAX_BACKOFF);
    loop {
        let client = match next.take() {
            Some(client) => client,
            None => {
                let started = tokio::time::Instant::now();
                let attempt = async {
                    let client = connect(&inner).await?;
                    ensure_paths(&inner, &client).await?;
                    Ok::<_, CoordinationError>(client)
                };
                let result = tokio::select! {
                    _ = inner.shutdown.cancelled() => break,
                    r = attempt => r,
                };
                match result {
                    Ok(client) => {
                        backoff.reset();
                        client
                    }
                    Err(e) => {
                        // The backoff spaces the attempts' starts: an attempt
                        // that timed out (no server with a quorum for the
                        // session timeout) has waited already, and waiting on
                        // would delay the session once the quorum is back.
                        let delay = backoff.next_delay();
                        tracing::warn!(error = %e, retry_in = ?delay.saturating_sub(started.elapsed()), "cannot open a ZooKeeper session");
                        tokio::select! {
                            _ = inner.shutdown.cancelled() => break,
                            _ = tokio::time::sleep_until(started + delay) => {}
                        }
                        continue;
                    }
                }
            }
        };
        inner.client.send_replace(Some(client.clone()));
        inner.forget_proof();
        let end = if inner.config.join_election {
            // The probes run as long as the election on this session.
            tokio::select! {
                end = election::run_session(&inner, &client) => end,
                never = lease::probe_session(&inner, &client) => match never {},
            }
        } else {
            wait_session_end(&inner, &client).await
        };
        match end {
            SessionEnd::Shutdown => {
                election::leave(&inner, &client).await;
                inner.client.send_replace(None);
                // Dropping the last clone closes the session.
                drop(client);
                break;
            }
            SessionEnd::Lost(state) => {
                tracing::warn!(
                    ?state,
                    session = format_args!("{:#x}", client.session_id().0),
                    "ZooKeeper session ended; rejoining with a new session"
                );
                inner.signal.publish(Leadership::Candidate);
                // The servers may still hold (or revive) it with our node.
                inner.abandoned.note(client.session_id());
                inner.set_member(None);
                inner.client.send_replace(None);
                drop(client);
                tokio::select! {
                    _ = inner.shutdown.cancelled() => break,
                    _ = tokio::time::sleep(MIN_BACKOFF) => {}
                }
            }
        }
    }
    inner.signal.publish(Leadership::Candidate);
}

/// For a coordinator outside the election: wait until the session ends.
async fn wait_session_end(inner: &Inner, client: &zk::Client) -> SessionEnd {
    let mut states = client.state_watcher();
    loop {
        let state = states.state();
        if state.is_terminated() {
            return SessionEnd::Lost(state);
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => return SessionEnd::Shutdown,
            _ = states.changed() => {}
        }
    }
}

/// The background task keeping [`Inner::deployment`] up to date: read the
/// `deployment` znode with a watch, publish, wait for the watch, a new
/// session or shutdown, repeat.
pub(super) async fn watch_deployment(inner: Arc<Inner>) {
    let mut clients = inner.client.subscribe();
    loop {
        let client = clients.borrow_and_update().clone();
        let wait = match client {
            None => None,
            Some(client) => match read_and_watch(&inner, &client).await {
                Ok(Some(watch)) => Some(watch),
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "deployment watch: read failed, retrying");
                    drop(client);
                    tokio::select! {
                        _ = inner.shutdown.cancelled() => break,
                        _ = tokio::time::sleep(RETRY) => {}
                        r = clients.changed() => if r.is_err() { break },
                    }
                    continue;
                }
            },
        };
        let node_event = async {
            match wait {
                // A session event (expiry) also wakes us; the next read
                // then fails until a new client is published.
                Some(watch) => {
                    watch.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = inner.shutdown.cancelled() => break,
            _ = node_event => {}
            r = clients.changed() => if r.is_err() { break },
        }
    }
}

/// Reads the deployment record, publishes it, and returns the watch to wait
/// on; `Ok(None)` means "read again now" (created between two reads).
async fn read_and_watch(inner: &Inner, client: &zk::Client) -> Result<Option<zk::OneshotWatcher>> {
    let path = &inner.paths.deployment;
    match inner.timed(client.get_and_watch_data(path)).await {
        Ok((data, stat, watch)) => {
            let record = stores::decode_deployment(path, &data, stat.version)
                .map_err(|e| tracing::warn!(error = %e, "deployment record unreadable"))
                .ok();
            inner.deployment.send_if_modified(|cur| {
                let changed = *cur != record;
                *cur = record;
                changed
            });
            Ok(Some(watch))
        }
        Err(zk::Error::NoNode) => match inner.timed(client.check_and_watch_stat(path)).await {
            Ok((None, watch)) => {
                inner
                    .deployment
                    .send_if_modified(|cur| cur.take().is_some());
                Ok(Some(watch))
            }
            Ok((Some(_), _)) => Ok(None),
            Err(e) => Err(map_zk(e, path)),
        },
        Err(e) => Err(map_zk(e, path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_other_than_asked_is_warned_of_with_both_figures() {
        let s = Duration::from_secs;
        assert_eq!(timeout_warning(s(2), s(2)), None);
        let w = timeout_warning(s(2), s(6)).expect("raised");
        for says in [
            "a session timeout of 6.0 s where --zk-session-timeout asked 2.0 s",
            "minSessionTimeout (by default 2 × tickTime)",
            "waits 3.0× as long",
        ] {
            assert!(w.contains(says), "{says}: {w}");
        }
        let w = timeout_warning(s(60), s(40)).expect("lowered");
        assert!(
            w.contains("40.0 s where --zk-session-timeout asked 60.0 s"),
            "{w}"
        );
        assert!(w.contains("maxSessionTimeout"), "{w}");
    }
}
