//! Stores on a real ZooKeeper server: deployment compare-and-set races and
//! watch, framework-ID mismatch and fencing, 1,000 task records, malformed
//! records, digest ACLs, uninstall's delete-all, the records' stat.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mesos_appliance::coordination::{
    CoordinationError, Coordinator, DeploymentRecord, Expect, RecordKind, RecordStore, RecordWrite,
    RecordsStat, Strategy, Written,
};
use serde_json::json;
use support::replicas::{config, start, start_with, wait_follower_of, wait_leader};
use support::zookeeper::{ZkServer, raw_client};
use zookeeper_client as zk;

const T: Duration = Duration::from_secs(10);

fn record(deployment: &str, epoch: u64) -> DeploymentRecord {
    DeploymentRecord {
        deployment_id: deployment.to_string(),
        epoch,
        strategy: Strategy::Upgrade,
        teardown_done: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deployment_cas_race_has_one_winner_and_the_watch_tells_the_loser() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    let b = start(&zk.connect_string(), "b").await;
    assert_eq!(a.deployment().await.unwrap(), None);
    let first = a
        .write_deployment(&record("old", 1), Expect::Absent)
        .await
        .unwrap();
    assert_eq!(first.version, 0);
    assert!(matches!(
        b.write_deployment(&record("other", 1), Expect::Absent)
            .await,
        Err(CoordinationError::VersionConflict { .. })
    ));

    // Both read version 0 and race to take over; exactly one wins.
    let mut watch_a = a.watch_deployment();
    for round in 0..5 {
        let current = a.deployment().await.unwrap().unwrap();
        let epoch = current.value.epoch + 1;
        let (rec_a, rec_b) = (record("new-a", epoch), record("new-b", epoch));
        let (ra, rb) = tokio::join!(
            a.write_deployment(&rec_a, Expect::Version(current.version)),
            b.write_deployment(&rec_b, Expect::Version(current.version)),
        );
        let wins = [ra.is_ok(), rb.is_ok()];
        assert_eq!(
            wins.iter().filter(|w| **w).count(),
            1,
            "round {round}: {ra:?} {rb:?}"
        );
        let loser = if ra.is_ok() { rb } else { ra };
        assert!(matches!(
            loser,
            Err(CoordinationError::VersionConflict { .. })
        ));
        let winner = a.deployment().await.unwrap().unwrap();
        assert_eq!(winner.version, current.version + 1);
        assert_eq!(winner.value.epoch, epoch);
        // The watch on the other replica delivers the winner's record.
        let seen = support::wait_for(&mut watch_a, T, "deployment watch", |d| {
            d.as_ref().map(|d| d.version) == Some(winner.version)
        })
        .await;
        assert_eq!(seen.unwrap().value, winner.value);
    }
    // Unconditional overwrite, then the watch sees a deletion (uninstall).
    b.write_deployment(&record("forced", 9), Expect::Any)
        .await
        .unwrap();
    b.delete_all().await.unwrap();
    support::wait_for(&mut watch_a, T, "deployment gone", |d| d.is_none()).await;
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn framework_id_is_written_once_and_a_different_id_is_a_mismatch() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let b = start(&zk.connect_string(), "b").await;
    wait_follower_of(b.as_ref(), "a", T).await;

    assert_eq!(a.framework_id().await.unwrap(), None);
    let stored = a.store_framework_id("fw-1").await.unwrap();
    assert_eq!((stored.value.as_str(), stored.version), ("fw-1", 0));
    assert_eq!(a.store_framework_id("fw-1").await.unwrap(), stored);
    assert_eq!(
        a.store_framework_id("fw-2").await.unwrap_err(),
        CoordinationError::Mismatch {
            stored: "fw-1".into(),
            ours: "fw-2".into()
        }
    );
    // Followers read, but may not write.
    assert_eq!(b.framework_id().await.unwrap(), Some(stored.clone()));
    assert_eq!(
        b.store_framework_id("fw-1").await.unwrap_err(),
        CoordinationError::NotLeader
    );
    // Compare-and-set (re-registering as a new framework).
    assert!(matches!(
        a.replace_framework_id("fw-2", Expect::Version(5)).await,
        Err(CoordinationError::VersionConflict { .. })
    ));
    let replaced = a
        .replace_framework_id("fw-2", Expect::Version(0))
        .await
        .unwrap();
    assert_eq!(replaced.version, 1);
    // The value is plain UTF-8 (`docs/deployment-strategies.md#zookeeper-layout`),
    // readable by other tools.
    let raw = raw_client(&zk).await;
    assert_eq!(raw.get_data("/t/framework-id").await.unwrap().0, b"fw-2");
    assert!(a.delete_framework_id(Expect::Version(1)).await.unwrap());
    assert!(!a.delete_framework_id(Expect::Any).await.unwrap());
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_task_records_are_written_listed_and_deleted() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let c: Arc<dyn Coordinator> = a.clone();

    let writes = futures::stream::iter(0..1000)
        .map(|i| {
            let c = c.clone();
            async move {
                let key = format!("task-{i:04}");
                c.put_record(
                    RecordKind::Tasks,
                    &key,
                    &json!({"n": i, "state": "TASK_RUNNING"}),
                    Expect::Absent,
                )
                .await
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    assert!(
        writes.iter().all(|w| *w == Ok(0)),
        "{:?}",
        writes.iter().find(|w| w.is_err())
    );

    // A record someone else wrote badly is reported and skipped.
    let raw = raw_client(&zk).await;
    raw.create(
        "/t/tasks/garbage",
        b"{not json",
        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
    )
    .await
    .unwrap();

    let list = c.list_records(RecordKind::Tasks).await.unwrap();
    assert_eq!(list.records.len(), 1000);
    assert_eq!(list.malformed.len(), 1);
    assert_eq!(list.malformed[0].key, "garbage");
    for (i, (key, v)) in list.records.iter().enumerate() {
        assert_eq!(key, &format!("task-{i:04}"));
        assert_eq!(v.value["n"], i);
        assert_eq!(v.version, 0);
    }
    assert!(matches!(
        c.get_record(RecordKind::Tasks, "garbage").await,
        Err(CoordinationError::Malformed { .. })
    ));
    assert_eq!(c.delete_records(RecordKind::Tasks).await.unwrap(), 1001);
    assert!(
        c.list_records(RecordKind::Tasks)
            .await
            .unwrap()
            .records
            .is_empty()
    );
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn service_records_are_versioned_and_typed() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Service {
        name: String,
        instances: u32,
    }
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let c: Arc<dyn Coordinator> = a.clone();
    let services = RecordStore::<Service>::new(c.clone(), RecordKind::Services);
    let web = Service {
        name: "web".into(),
        instances: 2,
    };
    assert_eq!(services.put("web", &web, Expect::Absent).await.unwrap(), 0);
    assert!(matches!(
        services.put("web", &web, Expect::Absent).await,
        Err(CoordinationError::VersionConflict { .. })
    ));
    let scaled = Service {
        instances: 3,
        ..web
    };
    assert_eq!(
        services
            .put("web", &scaled, Expect::Version(0))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(
        services.put("web", &scaled, Expect::Version(0)).await,
        Err(CoordinationError::VersionConflict { .. })
    ));
    assert_eq!(services.put("web", &scaled, Expect::Any).await.unwrap(), 2);
    assert_eq!(services.put("db", &scaled, Expect::Any).await.unwrap(), 0);
    // JSON of another shape: reported by the typed store, not fatal.
    c.put_record(RecordKind::Services, "odd", &json!([1, 2]), Expect::Any)
        .await
        .unwrap();
    let list = services.list().await.unwrap();
    let names: Vec<&str> = list.records.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["db", "web"]);
    assert_eq!(list.malformed.len(), 1);
    assert_eq!(services.get("web").await.unwrap().unwrap().value, scaled);
    assert_eq!(services.get("none").await.unwrap(), None);
    assert!(matches!(
        services.delete("web", Expect::Version(0)).await,
        Err(CoordinationError::VersionConflict { .. })
    ));
    assert!(services.delete("web", Expect::Version(2)).await.unwrap());
    assert!(matches!(
        c.put_record(RecordKind::Services, "a/b", &json!({}), Expect::Any)
            .await,
        Err(CoordinationError::Invalid(_))
    ));
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn digest_credentials_protect_the_tree() {
    support::init_tracing();
    let zk = ZkServer::start();
    let authed = format!("alice:secret@{}", zk.connect_string());
    let a = start(&authed, "a").await;
    wait_leader(a.as_ref(), T).await;
    a.store_framework_id("fw-acl").await.unwrap();

    // Anonymous: may read (world read), may not write or delete.
    let anon = raw_client(&zk).await;
    assert_eq!(anon.get_data("/t/framework-id").await.unwrap().0, b"fw-acl");
    assert_eq!(
        anon.set_data("/t/framework-id", b"evil", None)
            .await
            .unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        anon.create(
            "/t/tasks/x",
            b"",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
        )
        .await
        .unwrap_err(),
        zk::Error::NoAuth
    );
    // A second replica with the same credentials works with the tree.
    let b = start(&authed, "b").await;
    wait_follower_of(b.as_ref(), "a", T).await;
    assert_eq!(b.framework_id().await.unwrap().unwrap().value, "fw-acl");
    // Wrong password: another digest identity, refused.
    let mut wrong = config(&format!("alice:guess@{}", zk.connect_string()), "w");
    wrong.join_election = false;
    let w = start_with(wrong).await;
    assert_eq!(
        w.write_deployment(&record("x", 1), Expect::Any)
            .await
            .unwrap_err(),
        CoordinationError::Unauthorized
    );
    w.close().await;
    a.close().await;
    b.close().await;

    // Fully private: not even readable anonymously.
    let mut private = config(&format!("bob:pw@{}", zk.connect_string()), "p");
    private.url.root = "/private".into();
    private.private_acl = true;
    let p = start_with(private).await;
    wait_leader(p.as_ref(), T).await;
    p.store_framework_id("fw-private").await.unwrap();
    assert_eq!(
        anon.get_data("/private/framework-id").await.unwrap_err(),
        zk::Error::NoAuth
    );
    p.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_all_removes_the_root_and_is_idempotent() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    a.store_framework_id("fw").await.unwrap();
    for i in 0..10 {
        a.put_record(RecordKind::Tasks, &format!("t{i}"), &json!(i), Expect::Any)
            .await
            .unwrap();
    }
    a.write_deployment(&record("d", 1), Expect::Any)
        .await
        .unwrap();
    a.close().await;

    // `uninstall` runs outside the election.
    let mut job = config(&zk.connect_string(), "uninstall");
    job.join_election = false;
    let u = start_with(job).await;
    assert_eq!(
        u.store_framework_id("x").await.unwrap_err(),
        CoordinationError::NotLeader
    );
    u.delete_all().await.unwrap();
    let raw = raw_client(&zk).await;
    assert_eq!(raw.check_stat("/t").await.unwrap(), None);
    u.delete_all().await.unwrap();
    u.close().await;
}

/// Batch writes travel as `multi`s of a few hundred operations; a write
/// whose precondition fails gets its own conflict while the others of its
/// `multi` are applied, and a replica that does not lead writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_writes_apply_each_write_on_its_own() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let put = |i: usize, expect| {
        RecordWrite::put(&format!("task-{i:04}"), &json!({"n": i}), expect).unwrap()
    };
    // 600 creates: three multis.
    let created = a
        .write_records(
            RecordKind::Tasks,
            (0..600).map(|i| put(i, Expect::Absent)).collect(),
        )
        .await;
    assert!(
        created.iter().all(|r| *r == Ok(Written::Version(0))),
        "{created:?}"
    );

    // Sets at version 0 (one at a stale version, one a create of an existing
    // record), deletes (one absent), all in one batch.
    let mut writes: Vec<RecordWrite> = (0..300).map(|i| put(i, Expect::Version(0))).collect();
    writes[10] = put(10, Expect::Version(7));
    writes.push(put(400, Expect::Absent));
    writes.push(RecordWrite::Delete {
        key: "task-0500".into(),
        expect: Expect::Version(0),
    });
    writes.push(RecordWrite::Delete {
        key: "task-9999".into(),
        expect: Expect::Any,
    });
    writes.push(put(9000, Expect::Any));
    let results = a.write_records(RecordKind::Tasks, writes).await;
    for (i, r) in results.iter().enumerate().take(300) {
        if i == 10 {
            assert!(
                matches!(r, Err(CoordinationError::VersionConflict { .. })),
                "{r:?}"
            );
        } else {
            assert_eq!(*r, Ok(Written::Version(1)), "write {i}");
        }
    }
    assert!(matches!(
        results[300],
        Err(CoordinationError::VersionConflict { .. })
    ));
    assert_eq!(
        results[301..],
        [
            Ok(Written::Deleted),
            Ok(Written::Absent),
            Ok(Written::Version(0))
        ]
    );
    let list = a.list_records(RecordKind::Tasks).await.unwrap();
    assert_eq!(list.records.len(), 600, "599 left and one created");
    let version = |key: &str| {
        list.records
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.version)
    };
    assert_eq!(
        (version("task-0010"), version("task-0011")),
        (Some(0), Some(1))
    );

    // A follower's batch fails as a whole, each write saying so.
    let b = start(&zk.connect_string(), "b").await;
    wait_follower_of(b.as_ref(), "a", T).await;
    let refused = b
        .write_records(
            RecordKind::Tasks,
            vec![put(1, Expect::Version(1)), put(2, Expect::Absent)],
        )
        .await;
    assert_eq!(
        refused,
        [
            Err(CoordinationError::NotLeader),
            Err(CoordinationError::NotLeader)
        ]
    );
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_member_node_is_gone_cannot_write() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let raw = raw_client(&zk).await;
    let nodes = raw.list_children("/t/election").await.unwrap();
    assert_eq!(nodes.len(), 1);
    // An operator (or a bug) deletes the leader's node; whether the leader
    // has noticed yet or not, its next write is fenced off (the multi-op
    // checks the member node), and nothing is written.
    raw.delete(&format!("/t/election/{}", nodes[0]), None)
        .await
        .unwrap();
    let write = a.store_framework_id("fw-late").await;
    assert_eq!(write.unwrap_err(), CoordinationError::NotLeader);
    assert_eq!(raw.check_stat("/t/framework-id").await.unwrap(), None);
    // It rejoins and, being alone, leads again after the hold-off.
    let mut rx = a.leadership();
    support::wait_for(&mut rx, T, "a leads again", |l| l.term() == Some(2)).await;
    a.close().await;
}

/// The stat of the task records changes its keys' version on each create
/// and delete, not on a rewrite; the same for both coordinators.
async fn check_records_stat(c: &dyn Coordinator) {
    let k = RecordKind::Tasks;
    let put =
        |key: &str, n: u32, expect| RecordWrite::put(key, &json!({ "n": n }), expect).unwrap();
    let empty = c.records_stat(k).await.unwrap();
    assert_eq!(empty.count, 0);
    let two = [put("t1", 0, Expect::Absent), put("t2", 0, Expect::Absent)];
    c.write_records(k, two.to_vec()).await;
    let two = c.records_stat(k).await.unwrap();
    assert_eq!(two.count, 2);
    assert!(two.keys_version > empty.keys_version);
    // Rewrites leave the stat alone.
    let written = c
        .write_records(k, vec![put("t1", 1, Expect::Version(0))])
        .await;
    assert!(
        matches!(written[..], [Ok(Written::Version(1))]),
        "{written:?}"
    );
    assert_eq!(c.records_stat(k).await.unwrap(), two);
    c.delete_record(k, "t2", Expect::Any).await.unwrap();
    let one = c.records_stat(k).await.unwrap();
    assert_eq!(one.count, 1);
    assert!(one.keys_version > two.keys_version);
    assert_ne!(one, RecordsStat::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_records_stat_versions_creates_and_deletes_not_rewrites() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    check_records_stat(a.as_ref()).await;
    let memory = mesos_appliance::coordination::memory::MemoryCoordinator::new(
        mesos_appliance::coordination::ReplicaInfo::new("http://m", "d", "v"),
    );
    check_records_stat(&memory).await;
}
