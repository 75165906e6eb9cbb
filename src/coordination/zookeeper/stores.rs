//! The deployment record, framework ID, and service and task records.
//!
//! Fenced writes (framework ID, records, audit entries) are multi-ops whose
//! first operation checks that our member node exists and whose second
//! checks the version of the deployment record we run under
//! (`deployment_fence`); ZooKeeper applies all or nothing, so a deposed
//! leader's write, or one of a replaced deployment, fails with `NotLeader`.

use serde_json::Value;
use zookeeper_client as zk;

use super::request_size::{self, MAX_REQUEST};
use super::{Inner, map_zk};
use crate::coordination::{
    CoordinationError, DeploymentRecord, Expect, RecordKind, RecordVisitor, RecordWrite,
    RecordsStat, Result, Versioned, Written, check_key,
};

/// Reads in flight at once when listing records (the client pipelines
/// them on its one connection; each answer is about 600 bytes, so the
/// window holds well under 1 MB of answers).
const READ_WINDOW: usize = 1_024;
/// Deletes per multi-op when clearing a collection.
const DELETE_BATCH: usize = 200;
/// Attempts of an unconditional write racing with creates and deletes.
const ANY_ATTEMPTS: usize = 5;
/// Operations per `multi` of a batch write, and their bytes as encoded
/// ([`request_size`]): half the server's request limit
/// ([`MAX_REQUEST`]), so that a batch never waits long behind another
/// on the wire. A single write larger than that goes in a `multi` of its
/// own, up to [`MAX_REQUEST`]; beyond, it is refused
/// ([`CoordinationError::TooLarge`]).
const MULTI_OPS: usize = 250;
const MULTI_BYTES: usize = MAX_REQUEST / 2;
/// Times one `multi` is retried without the operations that failed before
/// the rest of its chunk goes one write at a time.
const MULTI_ATTEMPTS: usize = 4;

pub(super) fn decode_deployment(
    path: &str,
    data: &[u8],
    version: i32,
) -> Result<Versioned<DeploymentRecord>> {
    serde_json::from_slice(data)
        .map(|value| Versioned { value, version })
        .map_err(|e| CoordinationError::Malformed {
            path: path.to_string(),
            reason: e.to_string(),
        })
}

pub(super) async fn deployment(inner: &Inner) -> Result<Option<Versioned<DeploymentRecord>>> {
    let path = &inner.paths.deployment;
    match read(inner, path).await? {
        Some((data, version)) => decode_deployment(path, &data, version).map(Some),
        None => Ok(None),
    }
}

pub(super) async fn write_deployment(
    inner: &Inner,
    record: &DeploymentRecord,
    expect: Expect,
) -> Result<Versioned<DeploymentRecord>> {
    let client = inner.client()?;
    let path = &inner.paths.deployment;
    let data = serde_json::to_vec(record).unwrap_or_default();
    let version = write_unfenced(inner, &client, path, &data, expect).await?;
    let written = Versioned {
        value: record.clone(),
        version,
    };
    // Our own deployment's write (`teardown_done`): the next fenced write
    // must check the new version, not wait for the watch to deliver it.
    inner.deployment_fence.follow(&written);
    Ok(written)
}

pub(super) async fn framework_id(inner: &Inner) -> Result<Option<Versioned<String>>> {
    let path = &inner.paths.framework_id;
    match read(inner, path).await? {
        None => Ok(None),
        Some((data, version)) => match String::from_utf8(data) {
            Ok(id) => Ok(Some(Versioned {
                value: id.trim().to_string(),
                version,
            })),
            Err(_) => Err(CoordinationError::Malformed {
                path: path.clone(),
                reason: "framework ID is not UTF-8".into(),
            }),
        },
    }
}

pub(super) async fn store_framework_id(inner: &Inner, id: &str) -> Result<Versioned<String>> {
    match replace_framework_id(inner, id, Expect::Absent).await {
        Err(CoordinationError::VersionConflict { .. }) => match framework_id(inner).await? {
            Some(stored) if stored.value == id => Ok(stored),
            Some(stored) => Err(CoordinationError::Mismatch {
                stored: stored.value,
                ours: id.to_string(),
            }),
            // Deleted between our create and our read: a race with another
            // writer; let the caller retry.
            None => Err(CoordinationError::VersionConflict {
                path: inner.paths.framework_id.clone(),
            }),
        },
        other => other,
    }
}

pub(super) async fn replace_framework_id(
    inner: &Inner,
    id: &str,
    expect: Expect,
) -> Result<Versioned<String>> {
    if id.is_empty() || id.trim() != id {
        return Err(CoordinationError::Invalid(format!("framework ID {id:?}")));
    }
    let version = write_fenced(inner, &inner.paths.framework_id, id.as_bytes(), expect).await?;
    Ok(Versioned {
        value: id.to_string(),
        version,
    })
}

pub(super) async fn delete_framework_id(inner: &Inner, expect: Expect) -> Result<bool> {
    delete_fenced(inner, &inner.paths.framework_id, expect).await
}

pub(super) async fn get_record(
    inner: &Inner,
    kind: RecordKind,
    key: &str,
) -> Result<Option<Versioned<Value>>> {
    check_key(key)?;
    let path = record_path(inner, kind, key);
    match read(inner, &path).await? {
        None => Ok(None),
        Some((data, version)) => serde_json::from_slice(&data)
            .map(|value| Some(Versioned { value, version }))
            .map_err(|e| CoordinationError::Malformed {
                path,
                reason: e.to_string(),
            }),
    }
}

pub(super) async fn put_record(
    inner: &Inner,
    kind: RecordKind,
    key: &str,
    value: &Value,
    expect: Expect,
) -> Result<i32> {
    check_key(key)?;
    let data = serde_json::to_vec(value).unwrap_or_default();
    write_fenced(inner, &record_path(inner, kind, key), &data, expect).await
}

pub(super) async fn delete_record(
    inner: &Inner,
    kind: RecordKind,
    key: &str,
    expect: Expect,
) -> Result<bool> {
    check_key(key)?;
    delete_fenced(inner, &record_path(inner, kind, key), expect).await
}

/// The stat of the records' directory: its child count and `cversion`
/// (ZooKeeper bumps it on each child created or deleted, not on a child's
/// data written).
pub(super) async fn records_stat(inner: &Inner, kind: RecordKind) -> Result<RecordsStat> {
    let client = inner.client()?;
    let dir = inner.paths.records(kind);
    match inner.timed(client.check_stat(dir)).await {
        Ok(Some(stat)) => Ok(RecordsStat {
            count: usize::try_from(stat.num_children).unwrap_or(0),
            keys_version: i64::from(stat.cversion),
        }),
        Ok(None) => Ok(RecordsStat {
            count: 0,
            keys_version: -1,
        }),
        Err(e) => Err(map_zk(e, dir)),
    }
}

pub(super) async fn visit_records(
    inner: &Inner,
    kind: RecordKind,
    visit: &mut RecordVisitor<'_>,
) -> Result<()> {
    use futures::StreamExt;
    let client = inner.client()?;
    let dir = inner.paths.records(kind);
    let mut names = match inner.timed(client.list_children(dir)).await {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(()),
        Err(e) => return Err(map_zk(e, dir)),
    };
    names.sort();
    // A sliding window of reads: the next read goes as soon as one answers
    // (answers come back in order on the session), never waiting for the
    // slowest of a batch.
    let client = &client;
    let mut reads = futures::stream::iter(names)
        .map(|name| async move {
            let path = format!("{dir}/{name}");
            let read = inner.timed(client.get_data(&path)).await;
            (name, path, read)
        })
        .buffered(READ_WINDOW);
    while let Some((name, path, read)) = reads.next().await {
        match read {
            Ok((data, stat)) => visit(name, stat.version, &data),
            // Deleted since the listing.
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(map_zk(e, &path)),
        }
    }
    Ok(())
}

pub(super) async fn delete_records(inner: &Inner, kind: RecordKind) -> Result<usize> {
    let client = inner.client()?;
    let dir = inner.paths.records(kind);
    let names = match inner.timed(client.list_children(dir)).await {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(0),
        Err(e) => return Err(map_zk(e, dir)),
    };
    let mut deleted = 0;
    for chunk in names.chunks(DELETE_BATCH) {
        let paths: Vec<String> = chunk.iter().map(|n| format!("{dir}/{n}")).collect();
        let bytes = paths.iter().map(|p| request_size::delete(p)).sum();
        let batch = fenced_multi(inner, dir, bytes, |w| {
            for path in &paths {
                w.add_delete(path, None)?;
            }
            Ok(())
        })
        .await;
        match batch {
            Ok(_) => deleted += paths.len(),
            // One of them went meanwhile: delete one by one.
            Err(CoordinationError::VersionConflict { .. }) => {
                for path in &paths {
                    if delete_fenced(inner, path, Expect::Any).await? {
                        deleted += 1;
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// Deletes the root and everything under it, deepest nodes first, each
/// level's deletes in flight together. Retries when a concurrent create
/// makes a node non-empty.
pub(super) async fn delete_all(inner: &Inner) -> Result<()> {
    delete_all_counting(inner, &mut 0).await
}

/// [`delete_all`], counting the nodes deleted in `deleted`.
pub(super) async fn delete_all_counting(inner: &Inner, deleted: &mut usize) -> Result<()> {
    let client = inner.client()?;
    let root = &inner.paths.root;
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Breadth-first listing: levels[d] holds the nodes at depth d.
        let mut levels: Vec<Vec<String>> = vec![vec![root.clone()]];
        loop {
            let mut next = Vec::new();
            for parent in levels.last().into_iter().flatten() {
                match inner.timed(client.list_children(parent)).await {
                    Ok(children) => {
                        next.extend(children.into_iter().map(|c| format!("{parent}/{c}")))
                    }
                    Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(map_zk(e, parent)),
                }
            }
            if next.is_empty() {
                break;
            }
            levels.push(next);
        }
        let mut retry = false;
        for level in levels.iter().rev() {
            let deletes = level.iter().map(|path| {
                let client = &client;
                async move { (inner.timed(client.delete(path, None)).await, path) }
            });
            let mut failed = None;
            for (result, path) in futures::future::join_all(deletes).await {
                match result {
                    Ok(()) => *deleted += 1,
                    Err(zk::Error::NoNode) => {}
                    Err(zk::Error::NotEmpty) if attempt < 3 => retry = true,
                    Err(e) => failed = failed.or(Some(map_zk(e, path))),
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if retry {
                break;
            }
        }
        if !retry {
            tracing::info!(root = %root, "deleted the whole coordination state");
            return Ok(());
        }
    }
}

fn record_path(inner: &Inner, kind: RecordKind, key: &str) -> String {
    format!("{}/{key}", inner.paths.records(kind))
}

/// Data and version of `path`, `None` when absent.
async fn read(inner: &Inner, path: &str) -> Result<Option<(Vec<u8>, i32)>> {
    let client = inner.client()?;
    match inner.timed(client.get_data(path)).await {
        Ok((data, stat)) => Ok(Some((data, stat.version))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(map_zk(e, path)),
    }
}

/// A versioned write without fencing (the deployment record).
async fn write_unfenced(
    inner: &Inner,
    client: &zk::Client,
    path: &str,
    data: &[u8],
    expect: Expect,
) -> Result<i32> {
    let create = zk::CreateMode::Persistent.with_acls(inner.acls);
    for _ in 0..ANY_ATTEMPTS {
        let result = match expect {
            Expect::Absent => inner
                .timed(client.create(path, data, &create))
                .await
                .map(|_| 0),
            Expect::Version(v) => inner
                .timed(client.set_data(path, data, Some(v)))
                .await
                .map(|s| s.version),
            Expect::Any => match inner.timed(client.set_data(path, data, None)).await {
                Err(zk::Error::NoNode) => inner
                    .timed(client.create(path, data, &create))
                    .await
                    .map(|_| 0),
                r => r.map(|s| s.version),
            },
        };
        match (expect, result) {
            // Created or deleted in between: try again.
            (Expect::Any, Err(zk::Error::NodeExists | zk::Error::NoNode)) => continue,
            (_, r) => return r.map_err(|e| map_zk(e, path)),
        }
    }
    Err(CoordinationError::VersionConflict {
        path: path.to_string(),
    })
}

/// A versioned write fenced on our member node; returns the new version.
async fn write_fenced(inner: &Inner, path: &str, data: &[u8], expect: Expect) -> Result<i32> {
    let create = zk::CreateMode::Persistent.with_acls(inner.acls);
    for _ in 0..ANY_ATTEMPTS {
        let (set, version) = match expect {
            Expect::Absent => (false, None),
            Expect::Version(v) => (true, Some(v)),
            Expect::Any => (true, None),
        };
        let bytes = if set {
            request_size::set_data(path, data)
        } else {
            request_size::create(path, data, &inner.acls)
        };
        let result = fenced_multi(inner, path, bytes, |w| {
            if set {
                w.add_set_data(path, data, version)
            } else {
                w.add_create(path, data, &create)
            }
        })
        .await;
        match (expect, result) {
            (_, Ok(results)) => {
                return Ok(match results.into_iter().next() {
                    Some(zk::MultiWriteResult::SetData { stat }) => stat.version,
                    _ => 0,
                });
            }
            // Absent: create instead (a concurrent create makes us loop).
            (Expect::Any, Err(CoordinationError::VersionConflict { .. })) => {
                let bytes = request_size::create(path, data, &inner.acls);
                match fenced_multi(inner, path, bytes, |w| w.add_create(path, data, &create)).await
                {
                    Ok(_) => return Ok(0),
                    Err(CoordinationError::VersionConflict { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
            (_, Err(e)) => return Err(e),
        }
    }
    Err(CoordinationError::VersionConflict {
        path: path.to_string(),
    })
}

/// A delete fenced on our member node; `Ok(false)` when absent under
/// [`Expect::Any`].
async fn delete_fenced(inner: &Inner, path: &str, expect: Expect) -> Result<bool> {
    let version = match expect {
        Expect::Version(v) => Some(v),
        Expect::Any => None,
        Expect::Absent => {
            return Err(CoordinationError::Invalid(
                "delete with Expect::Absent".into(),
            ));
        }
    };
    let bytes = request_size::delete(path);
    match fenced_multi(inner, path, bytes, |w| w.add_delete(path, version)).await {
        Ok(_) => Ok(true),
        Err(CoordinationError::VersionConflict { .. }) if expect == Expect::Any => {
            // The only conflict a delete without version has is NoNode.
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Runs `build`'s operations as one multi-op behind a check that our member
/// node exists and, once bound, that the deployment record is at the version
/// our deployment runs under. `NotLeader` when we do not lead or a check
/// fails. `operations` is the size of `build`'s operations as encoded
/// ([`request_size`]); a request that would exceed [`MAX_REQUEST`] is not
/// sent: [`CoordinationError::TooLarge`].
pub(super) async fn fenced_multi(
    inner: &Inner,
    path: &str,
    operations: usize,
    build: impl FnOnce(&mut zk::CheckWriter<'_>) -> std::result::Result<(), zk::Error>,
) -> Result<Vec<zk::MultiWriteResult>> {
    fenced_multi_ops(inner, path, operations, build)
        .await
        .map_err(|failure| match failure {
            MultiFailure::Whole(e) => e,
            MultiFailure::Operation { source, .. } => map_zk(source, path),
        })
}

/// Why a fenced multi-op failed.
enum MultiFailure {
    /// Operation `index` (0-based, after the leadership and deployment
    /// checks) failed, so
    /// none was applied.
    Operation { index: usize, source: zk::Error },
    /// The request failed as a whole (not leader, timeout, connection).
    Whole(CoordinationError),
}

/// [`fenced_multi`], telling which operation failed.
async fn fenced_multi_ops(
    inner: &Inner,
    path: &str,
    operations: usize,
    build: impl FnOnce(&mut zk::CheckWriter<'_>) -> std::result::Result<(), zk::Error>,
) -> std::result::Result<Vec<zk::MultiWriteResult>, MultiFailure> {
    let client = inner.client().map_err(MultiFailure::Whole)?;
    if !inner.signal.is_leading() {
        return Err(MultiFailure::Whole(CoordinationError::NotLeader));
    }
    let member = inner
        .member()
        .ok_or(MultiFailure::Whole(CoordinationError::NotLeader))?;
    let mut writer = client
        .new_check_writer(&member, None)
        .map_err(|e| MultiFailure::Whole(map_zk(e, &member)))?;
    // The newest record the watch saw may be a sibling's write of our own
    // deployment (`teardown_done`): follow it before checking.
    if let Some(seen) = inner.deployment.borrow().as_ref() {
        inner.deployment_fence.follow(seen);
    }
    let deployment = inner.deployment_fence.version();
    let checks = request_size::check(&member)
        + deployment.map_or(0, |_| request_size::check(&inner.paths.deployment));
    let bytes = request_size::multi(checks + operations);
    if bytes > MAX_REQUEST {
        return Err(MultiFailure::Whole(CoordinationError::TooLarge {
            path: path.to_string(),
            bytes,
            limit: MAX_REQUEST,
        }));
    }
    if let Some(version) = deployment {
        writer
            .add_check_version(&inner.paths.deployment, version)
            .map_err(|e| MultiFailure::Whole(map_zk(e, &inner.paths.deployment)))?;
    }
    // Operations of `build` start after the deployment check.
    let first = usize::from(deployment.is_some());
    build(&mut writer)
        .map_err(|e| MultiFailure::Whole(CoordinationError::Invalid(e.to_string())))?;
    match inner.timed(async { Ok(writer.commit().await) }).await {
        Err(e) => Err(MultiFailure::Whole(map_zk(e, path))),
        // The deployment check's own result comes first: callers read the
        // results of `build`'s operations only.
        Ok(Ok(mut results)) => Ok(results.split_off(first.min(results.len()))),
        Ok(Err(zk::CheckWriteError::CheckFailed { source })) => match source {
            zk::Error::NoNode | zk::Error::BadVersion => {
                tracing::warn!(node = %member, "fenced write refused: member node gone");
                Err(MultiFailure::Whole(CoordinationError::NotLeader))
            }
            other => Err(MultiFailure::Whole(map_zk(other, path))),
        },
        Ok(Err(zk::CheckWriteError::OperationFailed { index, source })) if index < first => {
            tracing::warn!(
                node = %inner.paths.deployment,
                version = ?deployment,
                error = %source,
                "fenced write refused: the deployment record moved on (a newer deployment took over)"
            );
            Err(MultiFailure::Whole(CoordinationError::NotLeader))
        }
        Ok(Err(zk::CheckWriteError::OperationFailed { index, source })) => {
            Err(MultiFailure::Operation {
                index: index - first,
                source,
            })
        }
        Ok(Err(zk::CheckWriteError::RequestFailed { source })) => {
            Err(MultiFailure::Whole(map_zk(source, path)))
        }
    }
}

/// Batch writes ([`crate::coordination::Coordinator::write_records`]):
/// creates, versioned sets and deletes go in fenced `multi`s of at most
/// [`MULTI_OPS`] operations and [`MULTI_BYTES`] bytes. A `multi` is all or
/// nothing, so when one operation fails (a precondition) that write gets
/// its error and the `multi` is sent again without it; after
/// [`MULTI_ATTEMPTS`] the rest of its chunk goes one write at a time.
/// Unconditional puts ([`Expect::Any`]) go one at a time, as they may need
/// a create after a failed set.
pub(super) async fn write_records(
    inner: &Inner,
    kind: RecordKind,
    writes: Vec<RecordWrite>,
) -> Vec<Result<Written>> {
    let dir = inner.paths.records(kind);
    let mut results: Vec<Option<Result<Written>>> = vec![None; writes.len()];
    let mut batched = Vec::new();
    for (i, write) in writes.iter().enumerate() {
        if let Err(e) = check_key(write.key()) {
            results[i] = Some(Err(e));
            continue;
        }
        match write {
            RecordWrite::Delete {
                expect: Expect::Absent,
                ..
            } => {
                results[i] = Some(Err(CoordinationError::Invalid(
                    "delete with Expect::Absent".into(),
                )));
            }
            RecordWrite::Put {
                key,
                json,
                expect: Expect::Any,
            } => {
                let path = format!("{dir}/{key}");
                results[i] = Some(
                    write_fenced(inner, &path, json, Expect::Any)
                        .await
                        .map(Written::Version),
                );
            }
            _ => batched.push(i),
        }
    }
    let sizes: Vec<usize> = writes
        .iter()
        .map(|w| operation_size(inner, dir, w))
        .collect();
    for chunk in chunks(&sizes, &batched) {
        write_chunk(inner, dir, &writes, &sizes, chunk, &mut results).await;
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(CoordinationError::Unexpected("write not run".into()))))
        .collect()
}

/// The size of `write`'s operation in a `multi` ([`request_size`]).
fn operation_size(inner: &Inner, dir: &str, write: &RecordWrite) -> usize {
    let path = format!("{dir}/{}", write.key());
    match write {
        RecordWrite::Put {
            json,
            expect: Expect::Absent,
            ..
        } => request_size::create(&path, json, &inner.acls),
        RecordWrite::Put { json, .. } => request_size::set_data(&path, json),
        RecordWrite::Delete { .. } => request_size::delete(&path),
    }
}

/// Splits `indexes` into runs that fit one `multi`: at most [`MULTI_OPS`]
/// operations of at most [`MULTI_BYTES`] together (`sizes`, by write); a
/// larger write alone.
fn chunks(sizes: &[usize], indexes: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0;
    for &i in indexes {
        let size = sizes[i];
        match out.last_mut() {
            Some(last) if last.len() < MULTI_OPS && bytes + size <= MULTI_BYTES => {
                last.push(i);
                bytes += size;
            }
            _ => {
                out.push(vec![i]);
                bytes = size;
            }
        }
    }
    out
}

/// Writes one chunk (see [`write_records`]), filling `results`.
async fn write_chunk(
    inner: &Inner,
    dir: &str,
    writes: &[RecordWrite],
    sizes: &[usize],
    mut pending: Vec<usize>,
    results: &mut [Option<Result<Written>>],
) {
    let create = zk::CreateMode::Persistent.with_acls(inner.acls);
    let path = |i: usize| format!("{dir}/{}", writes[i].key());
    for _ in 0..MULTI_ATTEMPTS {
        if pending.is_empty() {
            return;
        }
        let bytes = pending.iter().map(|&i| sizes[i]).sum();
        let outcome = fenced_multi_ops(inner, dir, bytes, |w| {
            for &i in &pending {
                let p = path(i);
                match &writes[i] {
                    RecordWrite::Put {
                        json,
                        expect: Expect::Absent,
                        ..
                    } => w.add_create(&p, json, &create)?,
                    RecordWrite::Put { json, expect, .. } => {
                        let version = match expect {
                            Expect::Version(v) => Some(*v),
                            _ => None,
                        };
                        w.add_set_data(&p, json, version)?
                    }
                    RecordWrite::Delete { expect, .. } => {
                        let version = match expect {
                            Expect::Version(v) => Some(*v),
                            _ => None,
                        };
                        w.add_delete(&p, version)?
                    }
                }
            }
            Ok(())
        })
        .await;
        match outcome {
            Ok(done) => {
                for (&i, result) in pending.iter().zip(done) {
                    results[i] = Some(Ok(match result {
                        zk::MultiWriteResult::SetData { stat } => Written::Version(stat.version),
                        zk::MultiWriteResult::Create { .. } => Written::Version(0),
                        _ => Written::Deleted,
                    }));
                }
                return;
            }
            Err(MultiFailure::Whole(e)) => {
                for &i in &pending {
                    results[i] = Some(Err(e.clone()));
                }
                return;
            }
            Err(MultiFailure::Operation { index, source }) => {
                let Some(&failed) = pending.get(index) else {
                    break;
                };
                let absent_delete = matches!(
                    (&writes[failed], &source),
                    (
                        RecordWrite::Delete {
                            expect: Expect::Any,
                            ..
                        },
                        zk::Error::NoNode
                    )
                );
                results[failed] = Some(if absent_delete {
                    Ok(Written::Absent)
                } else {
                    Err(map_zk(source, &path(failed)))
                });
                pending.remove(index);
            }
        }
    }
    // Conflicts keep coming: the rest one by one.
    for i in pending {
        let p = path(i);
        results[i] = Some(match &writes[i] {
            RecordWrite::Put { json, expect, .. } => write_fenced(inner, &p, json, *expect)
                .await
                .map(Written::Version),
            RecordWrite::Delete { expect, .. } => {
                delete_fenced(inner, &p, *expect).await.map(|gone| {
                    if gone {
                        Written::Deleted
                    } else {
                        Written::Absent
                    }
                })
            }
        });
    }
}
