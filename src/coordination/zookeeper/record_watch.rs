//! A persistent recursive watch on a records directory
//! ([`Coordinator::watch_records`](crate::coordination::Coordinator::watch_records)):
//! ZooKeeper 3.6+ `addWatch` with `PERSISTENT_RECURSIVE` reports every
//! `NodeCreated`, `NodeDataChanged` and `NodeDeleted` under the directory
//! until the session ends, without re-arming (ZooKeeper Programmer's
//! Guide, *Persistent, Recursive Watches*).

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::FutureExt;
use zookeeper_client as zk;

use super::{Inner, map_zk};
use crate::coordination::{RecordChanges, RecordKind, Result};

/// Watches `kind`'s directory on the live session. `Ok(None)` when the
/// server does not know `addWatch` (before 3.6).
pub(super) async fn watch_records(
    inner: &Arc<Inner>,
    kind: RecordKind,
) -> Result<Option<Box<dyn RecordChanges>>> {
    let client = inner.client()?;
    let dir = inner.paths.records(kind);
    match inner
        .timed(client.watch(dir, zk::AddWatchMode::PersistentRecursive))
        .await
    {
        Ok(watcher) => Ok(Some(Box::new(DirWatch {
            watcher,
            prefix: format!("{dir}/"),
            session: client.session_id(),
            inner: inner.clone(),
            lost: false,
        }))),
        Err(zk::Error::Unimplemented) => Ok(None),
        Err(e) => Err(map_zk(e, dir)),
    }
}

/// One directory's persistent watch on one session.
struct DirWatch {
    watcher: zk::PersistentWatcher,
    /// `<dir>/`: a record's key is what follows it.
    prefix: String,
    /// The session the watch lives on: a new session (after an expiry)
    /// does not carry it.
    session: zk::SessionId,
    inner: Arc<Inner>,
    /// Set once changes may have been missed; never cleared.
    lost: bool,
}

impl RecordChanges for DirWatch {
    fn drain(&mut self, keys: &mut BTreeSet<String>) -> bool {
        if self.lost {
            return false;
        }
        let same_session = self
            .inner
            .client()
            .is_ok_and(|client| client.session_id() == self.session);
        if !same_session {
            self.lost = true;
            return false;
        }
        // Events wait in the client's channel: take those already there.
        // (`changed` is not called again after a session event, after
        // which it may panic.)
        while let Some(event) = self.watcher.changed().now_or_never() {
            let key = match event.event_type {
                zk::EventType::Session => None,
                _ => event
                    .path
                    .strip_prefix(&self.prefix)
                    .filter(|key| !key.is_empty() && !key.contains('/')),
            };
            match key {
                Some(key) => {
                    keys.insert(key.to_string());
                }
                // A session event (disconnected, expired, closed) or the
                // directory itself created or deleted.
                None => {
                    self.lost = true;
                    return false;
                }
            }
        }
        true
    }
}
