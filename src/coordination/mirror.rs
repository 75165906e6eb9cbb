//! A follower's copy of one kind of record, kept current by a watch, so
//! that on election only what changed since its last refresh is read.
//!
//! A new leader must know every task record before it launches, kills or
//! reconciles (`src/scheduler/core/machine/startup.rs`).
//! Reading 100,000 of them from ZooKeeper took 11 s on this machine
//! (`docs/benchmarks.md`, *ZooKeeper at 100,000 tasks*), all of it between
//! the election and the first reconciliation. A follower already reads
//! them for its standby view; with a watch on their directory
//! ([`Coordinator::watch_records`]) it reads each again only when it
//! changed, and a new leader's read is the changes since the last refresh.
//!
//! The rule "never act on a record not read" holds: every record held was
//! read on this session, each change the watch reports is read again, and
//! [`RecordMirror::sync`] first makes a read on the session, after which
//! every change committed before it (the previous leader's last write
//! included: its fence failed once its member node went, before this
//! replica was elected) has been delivered ([`RecordChanges::drain`]).
//! When the watch may have missed a change, every record is read again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::records::{MalformedRecord, RecordChanges, RecordList, decode_into};
use super::{CoordinationError, Coordinator, RecordKind, Result, Versioned};

/// Records read at once when reading the changed ones (the same pipelining
/// as a full listing, a few hundred answers of about 600 bytes in flight).
const READ_WINDOW: usize = 256;

/// The records of one kind as last read, kept current by a watch where
/// the coordinator has one.
pub struct RecordMirror<T> {
    coordinator: Arc<dyn Coordinator>,
    kind: RecordKind,
    records: BTreeMap<String, Versioned<Arc<T>>>,
    /// Keys whose bytes did not decode as `T`, with why.
    malformed: BTreeMap<String, String>,
    /// `None` before the first refresh, after a lost watch, and when the
    /// coordinator cannot watch.
    watch: Option<Box<dyn RecordChanges>>,
    /// Every record was read since the watch began.
    complete: bool,
    /// Keys reported changed and not read since.
    dirty: BTreeSet<String>,
    /// Records read from the store since creation (full and changed reads).
    reads: u64,
    /// Changes of the records held: see [`RecordMirror::generation`].
    generation: u64,
}

impl<T: DeserializeOwned + Clone + Send + Sync> RecordMirror<T> {
    /// An empty mirror of `kind` through `coordinator`; the first
    /// [`RecordMirror::refresh`] starts the watch and reads every record.
    pub fn new(coordinator: Arc<dyn Coordinator>, kind: RecordKind) -> RecordMirror<T> {
        RecordMirror {
            coordinator,
            kind,
            records: BTreeMap::new(),
            malformed: BTreeMap::new(),
            watch: None,
            complete: false,
            dirty: BTreeSet::new(),
            reads: 0,
            generation: 0,
        }
    }

    /// True when a watch keeps the records current: [`RecordMirror::sync`]
    /// then reads only the changes.
    pub fn is_watched(&self) -> bool {
        self.watch.is_some() && self.complete
    }

    /// How many records were read from the store since creation.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// A number that grows whenever the records held may have changed: a
    /// full read, or a record read again because the watch reported it
    /// created, rewritten or deleted. A view built from
    /// [`RecordMirror::records`] at one generation is as current as the
    /// mirror while the generation stays the same. A rewritten record (a
    /// task's new state) changes it, though it changes neither the
    /// records' count nor their keys.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The records held, by key.
    pub fn records(&self) -> impl Iterator<Item = &Arc<T>> {
        self.records.values().map(|v| &v.value)
    }

    /// Brings the records up to date with the changes delivered so far.
    /// Watched: reads at most `changed_at_most` of the changed records (the
    /// others stay due for the next refresh). Otherwise (never read, a
    /// watch lost, none possible): starts a watch if it can and reads every
    /// record, unless no watch is possible and `full_if_unwatched` is
    /// false (a caller that paces full reads itself). On an error the
    /// records are kept and the changes not read stay due.
    ///
    /// A follower paces its reads with `changed_at_most`: while a leader
    /// launches, every task record changes several times in a few seconds,
    /// and one read per change (one request each, where the leader writes
    /// 250 per `multi`) kept ZooKeeper busy enough to slow the launch
    /// 2–3-fold (`docs/benchmarks.md`, *A new leader's read of the task
    /// records*). Read late, a record's several changes cost one read.
    /// The pace holds only while the writes go on: when the records newly
    /// reported changed since the last refresh are no more than
    /// `changed_at_most`, the writer is quiet and the whole backlog is
    /// read. A new leader reads what is still due before it reconciles;
    /// after a 100,000-task launch, at one read a millisecond, 55,198
    /// records were still due and the new leader's read took 5.7 s
    /// (`docs/benchmarks.md`, *A follower that catches up*).
    pub async fn refresh(&mut self, full_if_unwatched: bool, changed_at_most: usize) -> Result<()> {
        if let Some(watch) = &mut self.watch {
            let before = self.dirty.len();
            if watch.drain(&mut self.dirty) && self.complete {
                let quiet = self.dirty.len() - before <= changed_at_most;
                let at_most = if quiet { usize::MAX } else { changed_at_most };
                return self.read_changed(at_most).await;
            }
            tracing::info!(
                kind = self.kind.dir(),
                "the records' watch may have missed changes; reading every record"
            );
            self.watch = None;
            self.complete = false;
        }
        self.watch = self.coordinator.watch_records(self.kind).await?;
        if self.watch.is_none() && !full_if_unwatched {
            return Ok(());
        }
        self.read_all().await
    }

    /// The records as the store holds them now, for a replica that was just
    /// elected: a read on the session (after which every change committed
    /// before it has been delivered), then [`RecordMirror::refresh`] reads
    /// what changed (every record when not watched). The records go to the
    /// caller, shared with nobody where possible (no copy of each), with
    /// how many records this sync read from the store.
    pub async fn sync(mut self) -> Result<(RecordList<T>, u64)> {
        let before = self.reads;
        self.coordinator.records_stat(self.kind).await?;
        self.refresh(true, usize::MAX).await?;
        let records = std::mem::take(&mut self.records)
            .into_iter()
            .map(|(key, v)| {
                let value = Arc::try_unwrap(v.value).unwrap_or_else(|shared| (*shared).clone());
                (
                    key,
                    Versioned {
                        value,
                        version: v.version,
                    },
                )
            })
            .collect();
        let malformed = std::mem::take(&mut self.malformed)
            .into_iter()
            .map(|(key, reason)| MalformedRecord { key, reason })
            .collect();
        Ok((RecordList { records, malformed }, self.reads - before))
    }

    /// Reads every record (the watch, if any, began before: a change during
    /// the read is delivered and read again next time).
    async fn read_all(&mut self) -> Result<()> {
        let kind = self.kind;
        let mut list = RecordList::<T>::default();
        self.coordinator
            .visit_records(kind, &mut |key, version, bytes| {
                decode_into(&mut list, kind, key, version, bytes)
            })
            .await?;
        self.reads += (list.records.len() + list.malformed.len()) as u64;
        self.records = list
            .records
            .into_iter()
            .map(|(key, v)| {
                let value = Arc::new(v.value);
                (
                    key,
                    Versioned {
                        value,
                        version: v.version,
                    },
                )
            })
            .collect();
        self.malformed = list
            .malformed
            .into_iter()
            .map(|m| (m.key, m.reason))
            .collect();
        self.dirty.clear();
        self.complete = true;
        self.generation += 1;
        Ok(())
    }

    /// Reads up to `at_most` of the records whose keys the watch delivered:
    /// a record read is its newest state, a record absent is deleted.
    ///
    /// A key leaves `dirty` only once its read is applied: the supervisor
    /// drops a standby refresh when this replica is elected, and a key
    /// taken out before its read and dropped with the refresh would leave
    /// the mirror trusted ([`RecordMirror::is_watched`]) and stale, the new
    /// leader acting on a record it never read. A key the watch reports
    /// again meanwhile comes back at the next drain.
    async fn read_changed(&mut self, at_most: usize) -> Result<()> {
        use futures::StreamExt;
        if self.dirty.is_empty() || at_most == 0 {
            return Ok(());
        }
        let keys: Vec<String> = self.dirty.iter().take(at_most).cloned().collect();
        let kind = self.kind;
        let coordinator = self.coordinator.clone();
        let mut reads = futures::stream::iter(keys)
            .map(move |key| {
                let coordinator = coordinator.clone();
                async move {
                    let read = coordinator.get_record(kind, &key).await;
                    (key, read)
                }
            })
            .buffered(READ_WINDOW);
        while let Some((key, read)) = reads.next().await {
            match read {
                Ok(read) => {
                    self.reads += 1;
                    self.apply(&key, read);
                }
                // Not JSON: set apart, as a full listing does.
                Err(CoordinationError::Malformed { reason, .. }) => {
                    self.reads += 1;
                    self.generation += 1;
                    self.records.remove(key.as_str());
                    self.malformed.insert(key.clone(), reason);
                }
                // The keys not applied stay due for the next refresh.
                Err(e) => return Err(e),
            }
            self.dirty.remove(&key);
        }
        Ok(())
    }

    /// One changed record as read: `None` when it is gone.
    fn apply(&mut self, key: &str, read: Option<Versioned<serde_json::Value>>) {
        // A key is read only when the watch reported it changed; the same
        // version read again (deleted and created anew) may hold new data.
        self.generation += 1;
        let Some(read) = read else {
            self.records.remove(key);
            self.malformed.remove(key);
            return;
        };
        match serde_json::from_value::<T>(read.value) {
            Ok(value) => {
                self.malformed.remove(key);
                self.records.insert(
                    key.to_string(),
                    Versioned {
                        value: Arc::new(value),
                        version: read.version,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(kind = self.kind.dir(), %key, error = %e, "skipping malformed record");
                self.records.remove(key);
                self.malformed.insert(key.to_string(), e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::memory::MemoryCoordinator;
    use crate::coordination::{Expect, RecordWrite, ReplicaInfo};
    use serde_json::{Value, json};

    /// Without a watch (the in-memory coordinator has none) the copy is
    /// never trusted: it is not handed to a term, a refresh that may not
    /// read everything reads nothing, and a sync reads every record again,
    /// so a change made after the last read is seen.
    #[tokio::test]
    async fn without_a_watch_a_sync_reads_every_record() {
        let coordinator: Arc<dyn Coordinator> = Arc::new(MemoryCoordinator::new(ReplicaInfo::new(
            "http://unit.test",
            "d1",
            "test",
        )));
        let put = |key: &str, n: u32, expect| {
            RecordWrite::put(key, &json!({ "n": n }), expect).expect("serializes")
        };
        let k = RecordKind::Tasks;
        coordinator
            .write_records(
                k,
                vec![put("a", 0, Expect::Absent), put("b", 0, Expect::Absent)],
            )
            .await;
        let mut mirror = RecordMirror::<Value>::new(coordinator.clone(), k);
        mirror.refresh(false, usize::MAX).await.expect("refreshed");
        assert_eq!(mirror.reads(), 0, "no full read unless asked");
        assert_eq!(mirror.generation(), 0, "nothing read, nothing changed");
        mirror.refresh(true, usize::MAX).await.expect("refreshed");
        assert_eq!(mirror.reads(), 2);
        assert!(mirror.generation() > 0, "a full read may change any record");
        assert!(!mirror.is_watched());
        coordinator
            .write_records(k, vec![put("a", 1, Expect::Version(0))])
            .await;
        let (list, read) = mirror.sync().await.expect("synced");
        assert_eq!(read, 2, "every record read again");
        assert_eq!(list.records[0].1.value, json!({ "n": 1 }));
        assert_eq!(list.records[0].1.version, 1);
    }
}
