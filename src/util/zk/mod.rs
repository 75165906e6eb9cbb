//! What every ZooKeeper client of this crate shares: the `--zk` and
//! `--master zk://…` URLs ([`url`]) and the connector built from one. The
//! ground floor, because the scheduler's coordination, the Mesos master
//! detector and the testbed's master election all connect to ZooKeeper.

pub mod url;

use std::time::Duration;

use zookeeper_client as zk;

pub use url::{ZkUrl, ZkUrlError, redact_password};

/// How long a client waits on a silent connection before it calls the
/// connection lost, for a session of `session_timeout`: three fifths of it
/// (6 s at the default 10 s).
///
/// zookeeper-client 0.11 defaults to two fifths (4 s at 10 s) and ignores a
/// value above three fifths of the negotiated session timeout (falling back
/// to that default), so three fifths is the most it honours. (The Java
/// client's read timeout is two thirds, the C client's — the one Mesos
/// masters use — too.) On its own the client pings only after an idle
/// spell, so a long round trip could still leave the line silent this long;
/// the probes of `coordination::zookeeper::lease` keep answers coming, which keeps a round trip up
/// to half the session timeout below this. Fencing does not rest on this
/// timeout but on the lease (`coordination::zookeeper::lease::leader_lease`): a leader suspends once
/// no answer has proven its session for four fifths of the session timeout.
pub fn connection_timeout(session_timeout: Duration) -> Duration {
    // The same arithmetic as zookeeper-client's check, so that it is honoured.
    session_timeout * 3 / 5
}

/// A zookeeper-client connector for `url`: `session_timeout`, the
/// [`connection_timeout`] that goes with it, and digest auth when the URL
/// has credentials. Used by every ZooKeeper client of this crate.
pub fn connector(url: &ZkUrl, session_timeout: Duration) -> zk::Connector {
    let mut connector = zk::Client::connector()
        .with_session_timeout(session_timeout)
        .with_connection_timeout(connection_timeout(session_timeout));
    if let Some(credentials) = &url.credentials {
        connector = connector.with_auth("digest", &credentials.digest_auth());
    }
    connector
}
