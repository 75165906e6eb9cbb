//! The election nodes of sessions this replica gave up.
//!
//! zookeeper-client declares a session expired on its own once it has not
//! reached a server for the session timeout (a quorum loss, a partition),
//! and the replica opens a new session. The servers may not have expired
//! the old one: a new ensemble leader revives every session it finds with a
//! fresh timeout. The old session's election node then stays for one more
//! session timeout, and while it is the lowest nobody leads, although no
//! client will ever use that session again (the client that gave it up is
//! dead for good and sends nothing more).
//!
//! So the session loop notes every session that ended ([`Abandoned::note`]),
//! and the next session, when it joins the election, deletes the member
//! nodes whose `ephemeralOwner` is one of them, each with a delete on the
//! version it read: a node of another session is never touched (its owner
//! differs), and one that changed since it was read is left alone. That a
//! different node could take the same path between the read and the delete
//! would need `election/` itself deleted and created again (sequence
//! numbers under one parent never repeat); the version check then still
//! refuses a node whose data was written.
//!
//! Fencing is not weakened: the old session's term ended (and its fenced
//! writes stopped) when its client gave it up, and fenced writes check the
//! node of the live session only.

use std::collections::VecDeque;
use std::sync::Mutex;

use zookeeper_client as zk;

use super::Inner;

/// How many given-up sessions are remembered at most: more than can end
/// between two joins (each session's first round joins).
const MAX_ABANDONED: usize = 8;

/// Sessions this replica's clients gave up, whose election nodes the
/// servers may still hold.
#[derive(Debug, Default)]
pub(super) struct Abandoned {
    ids: Mutex<VecDeque<i64>>,
}

impl Abandoned {
    /// Notes that the session `id` ended for our client.
    pub(super) fn note(&self, id: zk::SessionId) {
        let mut ids = self.lock();
        if !ids.contains(&id.0) {
            if ids.len() == MAX_ABANDONED {
                ids.pop_front();
            }
            ids.push_back(id.0);
        }
    }

    /// The sessions noted so far.
    pub(super) fn snapshot(&self) -> Vec<i64> {
        self.lock().iter().copied().collect()
    }

    /// Forgets `ids`: a live session has looked at every member node since
    /// they ended, and a dead client cannot create another one.
    pub(super) fn forget(&self, ids: &[i64]) {
        self.lock().retain(|id| !ids.contains(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<i64>> {
        // Every update leaves a valid list: a poisoned lock holds one.
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether a member node whose `ephemeralOwner` is `owner` belongs to one
/// of the `abandoned` sessions (and not to the `live` one).
pub(super) fn is_stale(owner: i64, abandoned: &[i64], live: zk::SessionId) -> bool {
    owner != 0 && owner != live.0 && abandoned.contains(&owner)
}

/// Deletes the stale member node at `path` if it still has the version of
/// `stat`. Gone already, or changed since, is fine.
pub(super) async fn remove(
    inner: &Inner,
    client: &zk::Client,
    path: &str,
    stat: &zk::Stat,
) -> Result<(), zk::Error> {
    match inner.timed(client.delete(path, Some(stat.version))).await {
        Ok(()) => {
            tracing::info!(
                node = %path,
                session = format_args!("{:#x}", stat.ephemeral_owner),
                "deleted the election node of a session we gave up"
            );
            Ok(())
        }
        Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_a_bounded_list_of_sessions_and_forgets_the_checked_ones() {
        let abandoned = Abandoned::default();
        for id in 1..=(MAX_ABANDONED as i64 + 2) {
            abandoned.note(zk::SessionId(id));
        }
        abandoned.note(zk::SessionId(MAX_ABANDONED as i64 + 2));
        let ids = abandoned.snapshot();
        assert_eq!(ids.len(), MAX_ABANDONED);
        assert_eq!(ids.first(), Some(&3), "the oldest go first");
        abandoned.note(zk::SessionId(100));
        abandoned.forget(&ids);
        assert_eq!(
            abandoned.snapshot(),
            vec![100],
            "noted after the look: kept"
        );
    }

    #[test]
    fn only_nodes_of_abandoned_sessions_are_stale() {
        let live = zk::SessionId(7);
        let abandoned = [5, 6];
        assert!(is_stale(5, &abandoned, live));
        assert!(!is_stale(7, &abandoned, live), "our live session's node");
        assert!(!is_stale(8, &abandoned, live), "another replica's node");
        assert!(!is_stale(0, &[0], live), "a persistent node");
        assert!(!is_stale(7, &[7], live), "the live session is never stale");
    }
}
