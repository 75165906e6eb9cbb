//! The in-memory coordinator: one replica, no ZooKeeper.
//!
//! Used by `demo` (`--zk` not given) and by unit tests of the layers above.
//! It leads at once (term 1) and keeps the ZooKeeper implementation's store
//! semantics: versions start at 0 and grow by one per write, compare-and-set
//! conflicts, the framework-ID mismatch, fencing (writes fail after
//! [`Coordinator::close`]). State lives as long as the object.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::signal::LeaderSignal;
use super::{
    CoordinationError, Coordinator, DeploymentRecord, Expect, Leadership, Member, RecordKind,
    RecordVisitor, RecordWrite, RecordsStat, ReplicaInfo, Result, Versioned, Written, check_key,
};

/// A single-replica [`Coordinator`] holding its state in memory.
pub struct MemoryCoordinator {
    replica: ReplicaInfo,
    signal: LeaderSignal,
    deployment: watch::Sender<Option<Versioned<DeploymentRecord>>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    closed: bool,
    framework_id: Option<Versioned<String>>,
    services: Records,
    tasks: Records,
    drains: Records,
    jobs: Records,
    runs: Records,
    /// The audit log, oldest first, and the next sequence number.
    audit: std::collections::VecDeque<(u64, Value)>,
    audit_next: u64,
}

/// The records of one kind, and the version of their set of keys: bumped
/// on each create and delete, as ZooKeeper bumps a directory's `cversion`.
#[derive(Default)]
struct Records {
    map: BTreeMap<String, Versioned<Value>>,
    keys_version: i64,
}

impl Records {
    fn get(&self, key: &str) -> Option<&Versioned<Value>> {
        self.map.get(key)
    }

    fn insert(&mut self, key: String, value: Versioned<Value>) {
        if self.map.insert(key, value).is_none() {
            self.keys_version += 1;
        }
    }

    fn remove(&mut self, key: &str) {
        if self.map.remove(key).is_some() {
            self.keys_version += 1;
        }
    }

    /// Deletes every record; returns how many.
    fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.map.clear();
        self.keys_version += i64::try_from(n).unwrap_or(i64::MAX);
        n
    }
}

impl State {
    fn records(&mut self, kind: RecordKind) -> &mut Records {
        match kind {
            RecordKind::Services => &mut self.services,
            RecordKind::Tasks => &mut self.tasks,
            RecordKind::Drains => &mut self.drains,
            RecordKind::Jobs => &mut self.jobs,
            RecordKind::Runs => &mut self.runs,
        }
    }
}

impl MemoryCoordinator {
    /// A coordinator for `replica`, already leading in term 1.
    pub fn new(replica: ReplicaInfo) -> MemoryCoordinator {
        let signal = LeaderSignal::new(Leadership::Candidate, Duration::ZERO);
        signal.begin_term();
        MemoryCoordinator {
            replica,
            signal,
            deployment: watch::Sender::new(None),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state for a fenced write: open and leading.
    fn fenced(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        let state = self.lock();
        if state.closed {
            return Err(CoordinationError::Closed);
        }
        if !self.signal.is_leading() {
            return Err(CoordinationError::NotLeader);
        }
        Ok(state)
    }

    fn open(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        let state = self.lock();
        if state.closed {
            return Err(CoordinationError::Closed);
        }
        Ok(state)
    }
}

/// Applies `expect` to the current version of `path`, returning the version
/// the write produces.
fn next_version(path: &str, current: Option<i32>, expect: Expect) -> Result<i32> {
    let conflict = || CoordinationError::VersionConflict {
        path: path.to_string(),
    };
    match (expect, current) {
        (Expect::Absent, None) | (Expect::Any, None) => Ok(0),
        (Expect::Absent, Some(_)) => Err(conflict()),
        (Expect::Version(v), Some(c)) if v == c => Ok(c + 1),
        (Expect::Version(_), _) => Err(conflict()),
        (Expect::Any, Some(c)) => Ok(c + 1),
    }
}

/// Applies `expect` to a delete: `Ok(true)` when the record goes.
fn check_delete(path: &str, current: Option<i32>, expect: Expect) -> Result<bool> {
    match (expect, current) {
        (Expect::Any, c) => Ok(c.is_some()),
        (Expect::Version(v), Some(c)) if v == c => Ok(true),
        _ => Err(CoordinationError::VersionConflict {
            path: path.to_string(),
        }),
    }
}

#[async_trait]
impl Coordinator for MemoryCoordinator {
    fn replica(&self) -> &ReplicaInfo {
        &self.replica
    }

    fn leadership(&self) -> watch::Receiver<Leadership> {
        self.signal.subscribe()
    }

    fn term_token(&self, term: u64) -> CancellationToken {
        self.signal.term_token(term)
    }

    async fn members(&self) -> Result<Vec<Member>> {
        let closed = self.open().is_err();
        Ok(if closed {
            Vec::new()
        } else {
            vec![Member {
                sequence: 0,
                info: self.replica.clone(),
            }]
        })
    }

    /// Ends the term; being the only member, the replica leads again at once
    /// under the next term (there is nobody to hand over to).
    async fn abdicate(&self) -> Result<()> {
        let _state = self.fenced()?;
        self.signal.publish(Leadership::Candidate);
        self.signal.begin_term();
        Ok(())
    }

    async fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.signal.publish(Leadership::Candidate);
    }

    async fn deployment(&self) -> Result<Option<Versioned<DeploymentRecord>>> {
        let _state = self.open()?;
        Ok(self.deployment.borrow().clone())
    }

    async fn write_deployment(
        &self,
        record: &DeploymentRecord,
        expect: Expect,
    ) -> Result<Versioned<DeploymentRecord>> {
        let _state = self.open()?;
        let current = self.deployment.borrow().as_ref().map(|v| v.version);
        let version = next_version("deployment", current, expect)?;
        let stored = Versioned {
            value: record.clone(),
            version,
        };
        self.deployment.send_replace(Some(stored.clone()));
        Ok(stored)
    }

    fn watch_deployment(&self) -> watch::Receiver<Option<Versioned<DeploymentRecord>>> {
        self.deployment.subscribe()
    }

    async fn framework_id(&self) -> Result<Option<Versioned<String>>> {
        Ok(self.open()?.framework_id.clone())
    }

    async fn store_framework_id(&self, id: &str) -> Result<Versioned<String>> {
        let mut state = self.fenced()?;
        match &state.framework_id {
            Some(stored) if stored.value == id => Ok(stored.clone()),
            Some(stored) => Err(CoordinationError::Mismatch {
                stored: stored.value.clone(),
                ours: id.to_string(),
            }),
            None => {
                let stored = Versioned {
                    value: id.to_string(),
                    version: 0,
                };
                state.framework_id = Some(stored.clone());
                Ok(stored)
            }
        }
    }

    async fn replace_framework_id(&self, id: &str, expect: Expect) -> Result<Versioned<String>> {
        let mut state = self.fenced()?;
        let current = state.framework_id.as_ref().map(|v| v.version);
        let version = next_version("framework-id", current, expect)?;
        let stored = Versioned {
            value: id.to_string(),
            version,
        };
        state.framework_id = Some(stored.clone());
        Ok(stored)
    }

    async fn delete_framework_id(&self, expect: Expect) -> Result<bool> {
        let mut state = self.fenced()?;
        let current = state.framework_id.as_ref().map(|v| v.version);
        let gone = check_delete("framework-id", current, expect)?;
        state.framework_id = None;
        Ok(gone)
    }

    async fn get_record(&self, kind: RecordKind, key: &str) -> Result<Option<Versioned<Value>>> {
        check_key(key)?;
        Ok(self.open()?.records(kind).get(key).cloned())
    }

    async fn put_record(
        &self,
        kind: RecordKind,
        key: &str,
        value: &Value,
        expect: Expect,
    ) -> Result<i32> {
        check_key(key)?;
        let mut state = self.fenced()?;
        let records = state.records(kind);
        let path = format!("{}/{key}", kind.dir());
        let version = next_version(&path, records.get(key).map(|v| v.version), expect)?;
        records.insert(
            key.to_string(),
            Versioned {
                value: value.clone(),
                version,
            },
        );
        Ok(version)
    }

    async fn visit_records(&self, kind: RecordKind, visit: &mut RecordVisitor<'_>) -> Result<()> {
        // The bytes a ZooKeeper read would give, so that a listing decodes
        // here as it does there; the lock is not held while visiting.
        let stored: Vec<(String, i32, Vec<u8>)> = {
            let mut state = self.open()?;
            state
                .records(kind)
                .map
                .iter()
                .map(|(k, v)| {
                    let bytes = serde_json::to_vec(&v.value).unwrap_or_default();
                    (k.clone(), v.version, bytes)
                })
                .collect()
        };
        for (key, version, bytes) in stored {
            visit(key, version, &bytes);
        }
        Ok(())
    }

    async fn delete_record(&self, kind: RecordKind, key: &str, expect: Expect) -> Result<bool> {
        check_key(key)?;
        let mut state = self.fenced()?;
        let records = state.records(kind);
        let path = format!("{}/{key}", kind.dir());
        let gone = check_delete(&path, records.get(key).map(|v| v.version), expect)?;
        records.remove(key);
        Ok(gone)
    }

    async fn delete_records(&self, kind: RecordKind) -> Result<usize> {
        let mut state = self.fenced()?;
        Ok(state.records(kind).clear())
    }

    async fn records_stat(&self, kind: RecordKind) -> Result<RecordsStat> {
        let mut state = self.open()?;
        let records = state.records(kind);
        Ok(RecordsStat {
            count: records.map.len(),
            keys_version: records.keys_version,
        })
    }

    async fn write_records(
        &self,
        kind: RecordKind,
        writes: Vec<RecordWrite>,
    ) -> Vec<Result<Written>> {
        let mut state = match self.fenced() {
            Ok(state) => state,
            Err(e) => return writes.iter().map(|_| Err(e.clone())).collect(),
        };
        let records = state.records(kind);
        writes
            .into_iter()
            .map(|write| {
                check_key(write.key())?;
                let path = format!("{}/{}", kind.dir(), write.key());
                match write {
                    RecordWrite::Put { key, json, expect } => {
                        let value: Value = serde_json::from_slice(&json).map_err(|e| {
                            CoordinationError::Invalid(format!("{path} is not JSON: {e}"))
                        })?;
                        let version =
                            next_version(&path, records.get(&key).map(|v| v.version), expect)?;
                        records.insert(key, Versioned { value, version });
                        Ok(Written::Version(version))
                    }
                    RecordWrite::Delete { key, expect } => {
                        let gone =
                            check_delete(&path, records.get(&key).map(|v| v.version), expect)?;
                        records.remove(&key);
                        Ok(if gone {
                            Written::Deleted
                        } else {
                            Written::Absent
                        })
                    }
                }
            })
            .collect()
    }

    async fn delete_all(&self) -> Result<()> {
        let mut state = self.open()?;
        state.framework_id = None;
        state.services.clear();
        state.tasks.clear();
        state.audit.clear();
        self.deployment.send_replace(None);
        Ok(())
    }

    async fn append_audit(&self, entry: &Value) -> Result<u64> {
        super::audit_bytes(entry)?;
        // Fenced like the ZooKeeper implementation's appends.
        let mut state = self.fenced()?;
        let seq = state.audit_next;
        state.audit_next += 1;
        state.audit.push_back((seq, entry.clone()));
        while state.audit.len() > super::AUDIT_KEPT {
            state.audit.pop_front();
        }
        Ok(seq)
    }

    async fn audit_log(&self, limit: usize) -> Result<Vec<(u64, Value)>> {
        let state = self.open()?;
        let skip = state.audit.len().saturating_sub(limit);
        Ok(state.audit.iter().skip(skip).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::coordination::{RecordStore, Strategy};

    fn coordinator() -> MemoryCoordinator {
        MemoryCoordinator::new(ReplicaInfo::new("http://127.0.0.1:8080", "d1", "0.1.0"))
    }

    #[tokio::test]
    async fn batch_writes_succeed_or_conflict_one_by_one() {
        let c = coordinator();
        let put = |key: &str, expect| RecordWrite::put(key, &json!({"k": key}), expect).unwrap();
        let first = c
            .write_records(
                RecordKind::Tasks,
                vec![put("a", Expect::Absent), put("b", Expect::Absent)],
            )
            .await;
        assert_eq!(first, [Ok(Written::Version(0)), Ok(Written::Version(0))]);
        let second = c
            .write_records(
                RecordKind::Tasks,
                vec![
                    put("a", Expect::Version(0)),
                    put("b", Expect::Version(5)),
                    RecordWrite::Delete {
                        key: "zz".into(),
                        expect: Expect::Any,
                    },
                    RecordWrite::Delete {
                        key: "b".into(),
                        expect: Expect::Version(0),
                    },
                ],
            )
            .await;
        assert_eq!(second[0], Ok(Written::Version(1)));
        assert!(matches!(
            second[1],
            Err(CoordinationError::VersionConflict { .. })
        ));
        assert_eq!(second[2..], [Ok(Written::Absent), Ok(Written::Deleted)]);
        c.close().await;
        let closed = c
            .write_records(RecordKind::Tasks, vec![put("c", Expect::Absent)])
            .await;
        assert_eq!(closed, [Err(CoordinationError::Closed)]);
    }

    #[tokio::test]
    async fn leads_at_once_and_abdication_starts_a_new_term() {
        let c = coordinator();
        let rx = c.leadership();
        assert_eq!(*rx.borrow(), Leadership::Leader { term: 1 });
        let token = c.term_token(1);
        c.abdicate().await.unwrap();
        assert!(token.is_cancelled());
        assert_eq!(*rx.borrow(), Leadership::Leader { term: 2 });
        assert!(!c.term_token(2).is_cancelled());
        let members = c.members().await.unwrap();
        assert_eq!(members.len(), 1);
        assert_eq!(&members[0].info, c.replica());
    }

    #[tokio::test]
    async fn close_ends_the_term_and_fences_writes() {
        let c = coordinator();
        let token = c.term_token(1);
        c.close().await;
        assert!(token.is_cancelled());
        assert_eq!(*c.leadership().borrow(), Leadership::Candidate);
        assert_eq!(
            c.store_framework_id("f").await.unwrap_err(),
            CoordinationError::Closed
        );
        assert_eq!(
            c.framework_id().await.unwrap_err(),
            CoordinationError::Closed
        );
    }

    #[tokio::test]
    async fn framework_id_write_if_absent_mismatch_and_cas() {
        let c = coordinator();
        assert_eq!(c.framework_id().await.unwrap(), None);
        let v = c.store_framework_id("fw-1").await.unwrap();
        assert_eq!((v.value.as_str(), v.version), ("fw-1", 0));
        assert_eq!(
            c.store_framework_id("fw-1").await.unwrap(),
            v,
            "same ID is fine"
        );
        assert_eq!(
            c.store_framework_id("fw-2").await.unwrap_err(),
            CoordinationError::Mismatch {
                stored: "fw-1".into(),
                ours: "fw-2".into()
            }
        );
        assert!(matches!(
            c.replace_framework_id("fw-2", Expect::Version(7)).await,
            Err(CoordinationError::VersionConflict { .. })
        ));
        let v2 = c
            .replace_framework_id("fw-2", Expect::Version(0))
            .await
            .unwrap();
        assert_eq!((v2.value.as_str(), v2.version), ("fw-2", 1));
        assert!(c.delete_framework_id(Expect::Any).await.unwrap());
        assert!(!c.delete_framework_id(Expect::Any).await.unwrap());
    }

    #[tokio::test]
    async fn deployment_cas_and_watch() {
        let c = coordinator();
        let mut watch = c.watch_deployment();
        let rec = DeploymentRecord {
            deployment_id: "d1".into(),
            epoch: 1,
            strategy: Strategy::Upgrade,
            teardown_done: false,
        };
        let v = c.write_deployment(&rec, Expect::Absent).await.unwrap();
        assert_eq!(v.version, 0);
        assert!(watch.has_changed().unwrap());
        assert_eq!(watch.borrow_and_update().as_ref().unwrap().value, rec);
        assert!(c.write_deployment(&rec, Expect::Absent).await.is_err());
        let next = DeploymentRecord {
            epoch: 2,
            ..rec.clone()
        };
        assert!(c.write_deployment(&next, Expect::Version(5)).await.is_err());
        assert_eq!(
            c.write_deployment(&next, Expect::Version(0))
                .await
                .unwrap()
                .version,
            1
        );
        assert_eq!(c.deployment().await.unwrap().unwrap().value.epoch, 2);
    }

    #[tokio::test]
    async fn records_are_versioned_listed_and_deleted() {
        let c = coordinator();
        let k = RecordKind::Tasks;
        assert_eq!(
            c.put_record(k, "t1", &json!({"a": 1}), Expect::Absent)
                .await
                .unwrap(),
            0
        );
        assert!(
            c.put_record(k, "t1", &json!({}), Expect::Absent)
                .await
                .is_err()
        );
        assert_eq!(
            c.put_record(k, "t1", &json!({"a": 2}), Expect::Version(0))
                .await
                .unwrap(),
            1
        );
        assert!(
            c.put_record(k, "t1", &json!({}), Expect::Version(0))
                .await
                .is_err()
        );
        assert_eq!(
            c.put_record(k, "t2", &json!(2), Expect::Any).await.unwrap(),
            0
        );
        assert!(
            c.put_record(k, "a/b", &json!(2), Expect::Any)
                .await
                .is_err()
        );
        let list = c.list_records(k).await.unwrap();
        let keys: Vec<_> = list.records.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["t1", "t2"]);
        assert!(
            c.list_records(RecordKind::Services)
                .await
                .unwrap()
                .records
                .is_empty()
        );
        assert!(c.delete_record(k, "t1", Expect::Version(0)).await.is_err());
        assert!(c.delete_record(k, "t1", Expect::Version(1)).await.unwrap());
        assert!(!c.delete_record(k, "t1", Expect::Any).await.unwrap());
        assert_eq!(c.delete_records(k).await.unwrap(), 1);
        assert_eq!(c.get_record(k, "t2").await.unwrap(), None);
    }

    #[tokio::test]
    async fn typed_store_skips_records_of_another_shape() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct Task {
            id: String,
            cpus: f64,
        }
        let c: Arc<dyn Coordinator> = Arc::new(coordinator());
        let store = RecordStore::<Task>::new(c.clone(), RecordKind::Tasks);
        let t = Task {
            id: "t1".into(),
            cpus: 0.5,
        };
        store.put("t1", &t, Expect::Absent).await.unwrap();
        c.put_record(RecordKind::Tasks, "bad", &json!({"id": 3}), Expect::Any)
            .await
            .unwrap();
        let list = store.list().await.unwrap();
        assert_eq!(list.records.len(), 1);
        assert_eq!(list.records[0].1.value, t);
        assert_eq!(list.malformed.len(), 1);
        assert_eq!(list.malformed[0].key, "bad");
        assert!(matches!(
            store.get("bad").await,
            Err(CoordinationError::Malformed { .. })
        ));
        assert_eq!(store.delete_all().await.unwrap(), 2);
    }

    #[tokio::test]
    async fn the_audit_log_keeps_the_newest_entries_in_order() {
        let c = coordinator();
        for i in 0..crate::coordination::AUDIT_KEPT + 5 {
            c.append_audit(&json!({ "i": i })).await.unwrap();
        }
        let log = c.audit_log(3).await.unwrap();
        let kept = crate::coordination::AUDIT_KEPT;
        let is: Vec<u64> = log.iter().map(|(_, v)| v["i"].as_u64().unwrap()).collect();
        assert_eq!(is, [kept as u64 + 2, kept as u64 + 3, kept as u64 + 4]);
        assert!(log.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(c.audit_log(usize::MAX).await.unwrap().len(), kept);
        let huge = json!({ "reason": "x".repeat(crate::coordination::MAX_AUDIT_ENTRY_BYTES) });
        assert!(matches!(
            c.append_audit(&huge).await,
            Err(CoordinationError::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn delete_all_forgets_everything() {
        let c = coordinator();
        c.store_framework_id("f").await.unwrap();
        c.put_record(RecordKind::Services, "s", &json!({}), Expect::Any)
            .await
            .unwrap();
        c.append_audit(&json!({"action": "x"})).await.unwrap();
        c.delete_all().await.unwrap();
        assert!(c.audit_log(10).await.unwrap().is_empty());
        assert_eq!(c.framework_id().await.unwrap(), None);
        assert!(
            c.list_records(RecordKind::Services)
                .await
                .unwrap()
                .records
                .is_empty()
        );
        c.delete_all().await.unwrap();
    }
}
