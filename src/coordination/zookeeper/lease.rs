//! The leader's proof that its session lives, and the probes that keep the
//! connection busy enough to survive a long round trip.
//!
//! Two things bound how long a ZooKeeper link may be slow:
//!
//! - zookeeper-client calls a connection lost (and the election suspends a
//!   leader) once nothing has arrived on it for [`crate::util::zk::connection_timeout`]
//!   (three fifths of the session timeout `T`). On its own it sends one ping
//!   at a time, a ping interval after its last send, so when a round trip
//!   `R` sets in the line is silent for up to the ping interval plus `R`:
//!   6 s at `R` = 3 s, 8 s at `R` = 5 s, and a 5 s round trip suspended the
//!   leader. [`probe_session`] sends a cheap read every [`probe_interval`]
//!   (`T`/40) without waiting for the answers before, so on a link that
//!   only delays, answers keep arriving that often and the silence is at
//!   most `R` + `T`/40: below `3T/5` for every `R` up to `T`/2, with `T`/20
//!   to spare (0.5 s at 10 s). A reconnect needs one round trip for the
//!   handshake and one for its first ping, each silence again below
//!   `3T/5`, so it succeeds too.
//! - Fencing: the server expires a session no sooner than `T` after it last
//!   heard from the client. Every answered request proves the server heard
//!   us at or after the instant we sent it ([`Inner::prove`] keeps the
//!   newest such instant). A leader without a proof newer than
//!   [`leader_lease`] (`4T/5`) suspends, also while the connection looks
//!   up, so it stops launching at least `T`/5 (2 s at 10 s) before the
//!   session can expire at the server and another replica lead — whatever
//!   the latency and however it is split between the two directions. Under
//!   a round trip up to `T`/2 the proof is at most `R` + `T`/40 old, well
//!   inside the lease.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use zookeeper_client as zk;

use super::Inner;

/// Probes in flight at most; beyond that a probe is skipped. 64 probes
/// cover 1.6 session timeouts, more than a live session can leave open.
const MAX_PROBES_IN_FLIGHT: usize = 64;

/// How often [`probe_session`] sends a probe: a fortieth of the session
/// timeout (250 ms at 10 s), at least 20 ms.
pub fn probe_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 40).max(Duration::from_millis(20))
}

/// How long a leader's term survives its newest proof of a live session:
/// four fifths of the session timeout (8 s at 10 s). The fifth left is the
/// time a suspended leader has to stop launching before the server may
/// expire its session.
pub fn leader_lease(session_timeout: Duration) -> Duration {
    session_timeout * 4 / 5
}

/// Whether an answer from the server means it heard this session: any
/// answer but the session's end proves it.
fn answered<T>(result: &Result<T, zk::Error>) -> bool {
    matches!(
        result,
        Ok(_) | Err(zk::Error::NoNode) | Err(zk::Error::NoAuth)
    )
}

/// Runs for the life of one session: every [`probe_interval`] while
/// connected, asks whether the root exists (a read the connected server
/// answers from memory) without waiting for earlier probes, and records
/// each answered probe's send instant as a proof of the session. Never
/// ends: dropped with the session's election.
pub(super) async fn probe_session(inner: &Inner, client: &zk::Client) -> Infallible {
    let session_timeout = client.session_timeout();
    let mut tick = tokio::time::interval(probe_interval(session_timeout));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight = FuturesUnordered::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if client.state() == zk::SessionState::SyncConnected
                    && in_flight.len() < MAX_PROBES_IN_FLIGHT
                {
                    let sent = Instant::now();
                    // The request is queued now; the future only awaits the answer.
                    let probe = client.check_stat(&inner.paths.root);
                    in_flight.push(async move {
                        (sent, tokio::time::timeout(session_timeout, probe).await)
                    });
                }
            }
            Some((sent, result)) = in_flight.next(), if !in_flight.is_empty() => {
                if let Ok(result) = result
                    && answered(&result)
                {
                    inner.prove(sent);
                }
            }
        }
    }
}

/// Whether the live session's newest proof is within the [`leader_lease`].
pub(super) fn holds(inner: &Inner, session_timeout: Duration) -> bool {
    inner
        .proven_at()
        .is_some_and(|at| at.elapsed() < leader_lease(session_timeout))
}

/// Completes once the lease has run out: no proof newer than the
/// [`leader_lease`]. Proofs arriving meanwhile push the end back.
pub(super) async fn lapse(inner: &Inner, session_timeout: Duration) {
    let lease = leader_lease(session_timeout);
    loop {
        let Some(at) = inner.proven_at() else { return };
        let end = at + lease;
        if Instant::now() >= end {
            return;
        }
        tokio::time::sleep_until(end.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_and_lease_fit_a_round_trip_of_half_the_session() {
        let t = Duration::from_secs(10);
        let rtt = t / 2;
        // The longest silence on a link that only delays: below the
        // connection timeout, so the connection is not called lost.
        assert!(rtt + probe_interval(t) < crate::util::zk::connection_timeout(t));
        // The oldest the newest proof gets: inside the lease.
        assert!(rtt + probe_interval(t) < leader_lease(t));
        // And the lease ends a fifth of the session before any expiry.
        assert_eq!(t - leader_lease(t), Duration::from_secs(2));
        assert_eq!(
            probe_interval(Duration::from_millis(400)),
            Duration::from_millis(20)
        );
    }

    #[test]
    fn only_answers_from_the_server_prove_the_session() {
        assert!(answered(&Ok(())));
        assert!(answered::<()>(&Err(zk::Error::NoNode)));
        assert!(!answered::<()>(&Err(zk::Error::ConnectionLoss)));
        assert!(!answered::<()>(&Err(zk::Error::SessionExpired)));
        assert!(!answered::<()>(&Err(zk::Error::Timeout)));
    }
}
