//! Record listings and the typed wrapper over the opaque JSON records.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{
    CoordinationError, Coordinator, Expect, RecordKind, RecordWrite, Result, Versioned, Written,
};

/// A record that could not be decoded; listed, logged, and skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedRecord {
    /// The record key (service name or task ID).
    pub key: String,
    /// Why it could not be decoded.
    pub reason: String,
}

/// The records of one kind, sorted by key, with the ones that could not be
/// decoded set apart.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordList<T> {
    /// `(key, record)` pairs sorted by key.
    pub records: Vec<(String, Versioned<T>)>,
    /// Records skipped because they could not be decoded.
    pub malformed: Vec<MalformedRecord>,
}

impl<T> Default for RecordList<T> {
    fn default() -> Self {
        RecordList {
            records: Vec::new(),
            malformed: Vec::new(),
        }
    }
}

/// The keys of the records of one kind created, rewritten or deleted since
/// [`Coordinator::watch_records`] began, as the coordinator delivered them.
pub trait RecordChanges: Send {
    /// Moves the keys delivered so far into `keys`, without waiting. A
    /// change committed before a read of the same coordinator that has
    /// returned is delivered by then (ZooKeeper sends a session's watch
    /// events and answers in the order of its transactions: "a client will
    /// see a watch event for a znode it is watching before seeing the new
    /// data", ZooKeeper Programmer's Guide, *ZooKeeper Watches*).
    ///
    /// `false` when changes may have been missed: the session ended or its
    /// connection dropped (ZooKeeper does not replay a persistent watch's
    /// events across a reconnection, ZOOKEEPER-4698), or the records'
    /// directory itself was created or deleted. The watch then tells
    /// nothing more; the caller reads every record again.
    fn drain(&mut self, keys: &mut std::collections::BTreeSet<String>) -> bool;
}

/// What [`Coordinator::visit_records`] hands each record to: its key, its
/// version and its stored bytes.
pub type RecordVisitor<'a> = dyn FnMut(String, i32, &[u8]) + Send + 'a;

/// Decodes one record's bytes as `T` into `list`, or notes it (and logs it
/// at `warn`) as malformed. Records are decoded from their bytes in one
/// step: through a `serde_json::Value` first, a task record cost twice the
/// time and a tree of small allocations per record (2.66 s of a 100,000-task
/// listing).
pub(super) fn decode_into<T: DeserializeOwned>(
    list: &mut RecordList<T>,
    kind: RecordKind,
    key: String,
    version: i32,
    bytes: &[u8],
) {
    match serde_json::from_slice(bytes) {
        Ok(value) => list.records.push((key, Versioned { value, version })),
        Err(e) => {
            tracing::warn!(kind = kind.dir(), %key, error = %e, "skipping malformed record");
            list.malformed.push(MalformedRecord {
                key,
                reason: e.to_string(),
            });
        }
    }
}

/// A typed view of one record collection: `T` is the scheduler's service
/// or task record, stored as JSON. Records that do not decode as `T` are
/// reported (and logged at `warn`), never fatal.
pub struct RecordStore<T> {
    coordinator: Arc<dyn Coordinator>,
    kind: RecordKind,
    _record: PhantomData<fn() -> T>,
}

impl<T> Clone for RecordStore<T> {
    fn clone(&self) -> Self {
        RecordStore {
            coordinator: self.coordinator.clone(),
            kind: self.kind,
            _record: PhantomData,
        }
    }
}

impl<T: Serialize + DeserializeOwned> RecordStore<T> {
    /// A view of `kind` through `coordinator`.
    pub fn new(coordinator: Arc<dyn Coordinator>, kind: RecordKind) -> Self {
        RecordStore {
            coordinator,
            kind,
            _record: PhantomData,
        }
    }

    /// One record; [`CoordinationError::Malformed`] if it does not decode.
    pub async fn get(&self, key: &str) -> Result<Option<Versioned<T>>> {
        let Some(raw) = self.coordinator.get_record(self.kind, key).await? else {
            return Ok(None);
        };
        match serde_json::from_value(raw.value) {
            Ok(value) => Ok(Some(Versioned {
                value,
                version: raw.version,
            })),
            Err(e) => Err(CoordinationError::Malformed {
                path: format!("{}/{key}", self.kind.dir()),
                reason: e.to_string(),
            }),
        }
    }

    /// Writes one record under a precondition (fenced); returns the version.
    pub async fn put(&self, key: &str, value: &T, expect: Expect) -> Result<i32> {
        let json = serde_json::to_value(value)
            .map_err(|e| CoordinationError::Invalid(format!("record does not serialize: {e}")))?;
        self.coordinator
            .put_record(self.kind, key, &json, expect)
            .await
    }

    /// All records that decode as `T`, sorted by key; the others are
    /// reported and logged. Each is decoded from its bytes as it is read.
    pub async fn list(&self) -> Result<RecordList<T>>
    where
        T: Send,
    {
        let kind = self.kind;
        let mut list = RecordList::default();
        self.coordinator
            .visit_records(kind, &mut |key, version, bytes| {
                decode_into(&mut list, kind, key, version, bytes)
            })
            .await?;
        Ok(list)
    }

    /// Deletes one record (fenced).
    pub async fn delete(&self, key: &str, expect: Expect) -> Result<bool> {
        self.coordinator.delete_record(self.kind, key, expect).await
    }

    /// Deletes every record of this kind (fenced).
    pub async fn delete_all(&self) -> Result<usize> {
        self.coordinator.delete_records(self.kind).await
    }

    /// Applies many writes in as few round trips as the coordinator can
    /// ([`Coordinator::write_records`]); one result per write, in order.
    pub async fn write_many(&self, writes: Vec<RecordWrite>) -> Vec<Result<Written>> {
        self.coordinator.write_records(self.kind, writes).await
    }
}
