//! The audit log: `audit/entry-<seq>` persistent sequential znodes under
//! the root, one JSON entry each. ZooKeeper numbers them, so every replica
//! appends to one ordered log without coordinating; the newest
//! [`AUDIT_KEPT`] are kept (pruned after the append has answered; readers
//! take the newest anyway). The `audit` znode is created on first use (an
//! older deployment's root has none). Appends are fenced like the store
//! writes: only the leader's are taken (see [`append`]).

use std::sync::Arc;

use serde_json::Value;
use zookeeper_client as zk;

use super::stores::fenced_multi;
use super::{Inner, map_zk};
use crate::coordination::{AUDIT_KEPT, CoordinationError, Result, audit_bytes};

/// Prefix of the entries' znode names.
const ENTRY_PREFIX: &str = "entry-";
/// Reads issued at once (the client pipelines them).
const READ_BATCH: usize = 256;

/// The sequence number in an entry's znode name.
fn sequence(name: &str) -> Option<u64> {
    name.strip_prefix(ENTRY_PREFIX)?.parse().ok()
}

/// The entries' names, sorted by sequence number; empty when the `audit`
/// znode does not exist yet.
async fn entries(inner: &Inner, client: &zk::Client) -> Result<Vec<(u64, String)>> {
    let dir = &inner.paths.audit;
    let names = match inner.timed(client.list_children(dir)).await {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(map_zk(e, dir)),
    };
    let mut entries: Vec<(u64, String)> = names
        .into_iter()
        .filter_map(|n| sequence(&n).map(|s| (s, n)))
        .collect();
    entries.sort();
    Ok(entries)
}

/// Creates the entry and answers; pruning runs apart (spawned), and only
/// once the log can hold more than [`AUDIT_KEPT`] entries: an action's
/// answer waits for one write, not for a listing of the log and deletes
/// queued behind the leader's task writes.
///
/// The create is fenced like the store writes (`stores::fenced_multi`):
/// only the leader appends, and ZooKeeper refuses the append of a leader
/// whose election node has gone (`NotLeader`), so a deposed leader's
/// entry never lands after its successor's.
pub(super) async fn append(inner: &Arc<Inner>, entry: &Value) -> Result<u64> {
    let data = audit_bytes(entry)?;
    let client = inner.client()?;
    let dir = &inner.paths.audit;
    let prefix = format!("{dir}/{ENTRY_PREFIX}");
    let seq = match create_entry(inner, &prefix, &data).await {
        // The one conflict a sequential create meets: no `audit` znode
        // yet. Creating the empty directory needs no fence.
        Err(CoordinationError::VersionConflict { .. }) => {
            let plain = zk::CreateMode::Persistent.with_acls(inner.acls);
            match inner.timed(client.create(dir, &[], &plain)).await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(map_zk(e, dir)),
            }
            create_entry(inner, &prefix, &data).await
        }
        other => other,
    }?;
    // Sequence numbers start at 0: up to entry AUDIT_KEPT - 1 nothing can
    // be in excess.
    if seq >= AUDIT_KEPT as u64 {
        let inner = inner.clone();
        tokio::spawn(async move { prune(&inner, &client).await });
    }
    Ok(seq)
}

/// The fenced sequential create of one entry; its sequence number.
async fn create_entry(inner: &Inner, prefix: &str, data: &[u8]) -> Result<u64> {
    let sequential = zk::CreateMode::PersistentSequential.with_acls(inner.acls);
    // The request names the prefix; the server appends the sequence.
    let bytes = super::request_size::create(prefix, data, &inner.acls);
    let results = fenced_multi(inner, prefix, bytes, |w| {
        w.add_create(prefix, data, &sequential)
    })
    .await?;
    match results.into_iter().next() {
        Some(zk::MultiWriteResult::Create { path, .. }) => {
            path.rsplit('/').next().and_then(sequence).ok_or_else(|| {
                CoordinationError::Unexpected(format!("audit entry created as {path}"))
            })
        }
        other => Err(CoordinationError::Unexpected(format!(
            "a create answered {other:?}"
        ))),
    }
}

/// Deletes the oldest entries beyond [`AUDIT_KEPT`]. Replicas may prune
/// at once; an entry already gone is fine. Failures are logged only: the
/// next append prunes again.
async fn prune(inner: &Inner, client: &zk::Client) {
    let entries = match entries(inner, client).await {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the audit log to prune it");
            return;
        }
    };
    let excess = entries.len().saturating_sub(AUDIT_KEPT);
    let deletes = entries[..excess].iter().map(|(_, name)| {
        let path = format!("{}/{name}", inner.paths.audit);
        async move { (inner.timed(client.delete(&path, None)).await, path) }
    });
    for (result, path) in futures::future::join_all(deletes).await {
        match result {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => tracing::warn!(node = %path, error = %e, "cannot prune an audit entry"),
        }
    }
}

pub(super) async fn log(inner: &Inner, limit: usize) -> Result<Vec<(u64, Value)>> {
    let client = inner.client()?;
    let entries = entries(inner, &client).await?;
    let limit = limit.min(AUDIT_KEPT);
    let newest = &entries[entries.len().saturating_sub(limit)..];
    let mut out = Vec::with_capacity(newest.len());
    for chunk in newest.chunks(READ_BATCH) {
        let reads = chunk.iter().map(|(_, name)| {
            let path = format!("{}/{name}", inner.paths.audit);
            let client = &client;
            async move { (inner.timed(client.get_data(&path)).await, path) }
        });
        for ((seq, _), (read, path)) in chunk.iter().zip(futures::future::join_all(reads).await) {
            match read {
                Ok((data, _)) => match serde_json::from_slice(&data) {
                    Ok(value) => out.push((*seq, value)),
                    Err(e) => {
                        tracing::warn!(node = %path, error = %e, "skipping a malformed audit entry")
                    }
                },
                // Pruned since the listing.
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(map_zk(e, &path)),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::sequence;

    #[test]
    fn sequence_numbers_come_from_the_znode_names() {
        assert_eq!(sequence("entry-0000000042"), Some(42));
        assert_eq!(sequence("entry-x"), None);
        assert_eq!(sequence("other"), None);
    }
}
