//! A follower's mirror of the task records on a real ZooKeeper server
//! (`RecordMirror`, `Coordinator::watch_records`): once it has read every
//! record, a sync reads only the records created, rewritten or deleted
//! since, and holds what a full read holds; a watch lost with its session
//! makes the next sync read every record.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mesos_appliance::coordination::{
    Coordinator, Expect, RecordKind, RecordMirror, RecordWrite, Written,
};
use serde_json::{Value, json};
use support::chaos_proxy::ChaosProxy;
use support::replicas::{start, wait_follower_of, wait_leader};
use support::zookeeper::{ZkServer, expire_session, raw_client};
use zookeeper_client as zk;

const T: Duration = Duration::from_secs(10);
const K: RecordKind = RecordKind::Tasks;

fn put(key: &str, n: u32, expect: Expect) -> RecordWrite {
    RecordWrite::put(key, &json!({ "n": n }), expect).unwrap()
}

/// The records of a full read, as `(key, version, value)`.
async fn full_read(c: &dyn Coordinator) -> Vec<(String, i32, Value)> {
    as_rows(c.list_records(K).await.unwrap())
}

/// `list`'s records as `(key, version, value)`.
fn as_rows(list: mesos_appliance::coordination::RecordList<Value>) -> Vec<(String, i32, Value)> {
    list.records
        .into_iter()
        .map(|(key, v)| (key, v.version, v.value))
        .collect()
}

/// A leader `a` and a follower `b` that reaches ZooKeeper through a proxy
/// (to be cut off or slowed), `n` records the leader wrote (`t000`, …,
/// value 0), and the follower's mirror after its first, full read.
async fn proxied_follower(
    zk: &ZkServer,
    n: usize,
) -> (
    Arc<mesos_appliance::coordination::zookeeper::ZkCoordinator>,
    Arc<mesos_appliance::coordination::zookeeper::ZkCoordinator>,
    ChaosProxy,
    RecordMirror<Value>,
) {
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let proxy = ChaosProxy::start(zk.addr()).await;
    let b = start(&proxy.connect_string(), "b").await;
    wait_follower_of(b.as_ref(), "a", T).await;
    let writes: Vec<RecordWrite> = (0..n)
        .map(|i| put(&format!("t{i:03}"), 0, Expect::Absent))
        .collect();
    a.write_records(K, writes).await;
    let follower: Arc<dyn Coordinator> = b.clone();
    let mut mirror = RecordMirror::<Value>::new(follower, K);
    mirror.refresh(false, usize::MAX).await.unwrap();
    assert_eq!(mirror.reads(), n as u64);
    (a, b, proxy, mirror)
}

/// The leader writes 200 records; the follower's mirror reads them once.
/// Then the leader rewrites three (one twice), deletes two and creates
/// four, and someone writes a record that is not JSON: the follower's sync,
/// with no refresh in between, reads those ten and nothing else, and holds
/// exactly what a full read holds (versions included); the watch goes
/// with the mirror.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sync_reads_only_what_changed_and_holds_what_a_full_read_holds() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let b = start(&zk.connect_string(), "b").await;
    wait_follower_of(b.as_ref(), "a", T).await;
    let writes: Vec<RecordWrite> = (0..200)
        .map(|i| put(&format!("t{i:03}"), 0, Expect::Absent))
        .collect();
    let written = a.write_records(K, writes).await;
    assert!(written.iter().all(|w| w.is_ok()), "{written:?}");

    let follower: Arc<dyn Coordinator> = b.clone();
    let mut mirror = RecordMirror::<Value>::new(follower.clone(), K);
    mirror.refresh(false, usize::MAX).await.unwrap();
    assert!(mirror.is_watched(), "ZooKeeper 3.6+ watches the records");
    assert_eq!(mirror.reads(), 200);
    assert_eq!(mirror.records().count(), 200);

    let changes = vec![
        put("t000", 1, Expect::Version(0)),
        put("t001", 1, Expect::Version(0)),
        put("t002", 1, Expect::Version(0)),
        RecordWrite::Delete {
            key: "t003".into(),
            expect: Expect::Version(0),
        },
        RecordWrite::Delete {
            key: "t004".into(),
            expect: Expect::Any,
        },
        put("u1", 0, Expect::Absent),
        put("u2", 0, Expect::Absent),
        put("u3", 0, Expect::Absent),
        put("u4", 0, Expect::Absent),
    ];
    let written = a.write_records(K, changes).await;
    assert!(written.iter().all(|w| w.is_ok()), "{written:?}");
    let again = a
        .write_records(K, vec![put("t000", 2, Expect::Version(1))])
        .await;
    assert!(matches!(again[..], [Ok(Written::Version(2))]), "{again:?}");
    let raw = raw_client(&zk).await;
    raw.create(
        "/t/tasks/garbage",
        b"{not json",
        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
    )
    .await
    .unwrap();

    let watches = zk.four_letter("wchp").expect("wchp answers");
    assert!(
        watches.lines().any(|line| line.trim() == "/t/tasks"),
        "the mirror watches the records: {watches}"
    );
    let (list, read) = mirror.sync().await.unwrap();
    assert_eq!(read, 10, "three rewritten, two deleted, five created");
    assert_eq!(list.malformed.len(), 1);
    assert_eq!(list.malformed[0].key, "garbage");
    let synced = as_rows(list);
    assert_eq!(synced.len(), 202);
    assert_eq!(synced, full_read(follower.as_ref()).await);
    assert_eq!(synced[0], ("t000".to_string(), 2, json!({"n": 2})));
    // The sync consumed the mirror and its watch with it: the server no
    // longer sends b every write (b leads next, and writes them all).
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let watches = zk.four_letter("wchp").expect("wchp answers");
        if !watches.lines().any(|line| line.trim() == "/t/tasks") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the records' watch is still held: {watches}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.close().await;
    b.close().await;
}

/// A follower whose session expires loses its watch with it (a new session
/// carries no watch, and ZooKeeper does not replay what it missed): the
/// next sync reads every record, and holds what the store holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_lost_with_its_session_makes_the_sync_read_every_record() {
    support::init_tracing();
    let zk = ZkServer::start();
    // b's proxy is cut while its session is expired.
    let (a, b, proxy, mirror) = proxied_follower(&zk, 50).await;
    let follower: Arc<dyn Coordinator> = b.clone();

    let old = b.session().expect("b has a session");
    expire_session(&zk.connect_string(), old.clone(), &proxy).await;
    // Changed while b had no session: nothing tells b.
    let written = a
        .write_records(K, vec![put("t000", 1, Expect::Version(0))])
        .await;
    assert!(
        matches!(written[..], [Ok(Written::Version(1))]),
        "{written:?}"
    );
    wait_follower_of(b.as_ref(), "a", T).await;
    let deadline = tokio::time::Instant::now() + T;
    while b.session().is_none_or(|s| s.id() == old.id()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "b has no new session"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (list, read) = mirror.sync().await.unwrap();
    assert_eq!(read, 50, "every record read again");
    let synced = as_rows(list);
    assert_eq!(synced[0], ("t000".to_string(), 1, json!({"n": 1})));
    assert_eq!(synced, full_read(follower.as_ref()).await);
    a.close().await;
    b.close().await;
}

/// A refresh that a change of leadership interrupts (the supervisor drops
/// it mid-read) loses nothing: every changed record it had not applied
/// stays due, and the new leader's sync reads it. The follower's replies
/// are delayed so that the refresh is certainly dropped while its reads
/// are on their way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refresh_dropped_mid_read_leaves_its_changes_due() {
    support::init_tracing();
    let zk = ZkServer::start();
    let (a, b, proxy, mut mirror) = proxied_follower(&zk, 100).await;
    let follower: Arc<dyn Coordinator> = b.clone();

    let rewrites: Vec<RecordWrite> = (0..100)
        .map(|i| put(&format!("t{i:03}"), 1, Expect::Version(0)))
        .collect();
    let written = a.write_records(K, rewrites).await;
    assert!(written.iter().all(|w| w.is_ok()), "{written:?}");
    // A read on b's session after the writes: ZooKeeper delivers a watch
    // event before the answer of a later read that sees its change, so
    // every change is in b's hands now.
    follower.records_stat(K).await.unwrap();
    proxy.set_latency(Duration::ZERO, Duration::from_millis(600));
    let interrupted = tokio::time::timeout(
        Duration::from_millis(200),
        mirror.refresh(false, usize::MAX),
    )
    .await;
    assert!(
        interrupted.is_err(),
        "the refresh ended before it was dropped"
    );
    proxy.set_latency(Duration::ZERO, Duration::ZERO);

    let (list, read) = mirror.sync().await.unwrap();
    assert_eq!(read, 100, "every change the dropped refresh took is read");
    let synced = as_rows(list);
    assert_eq!(synced, full_read(follower.as_ref()).await);
    assert!(
        synced.iter().all(|(_, version, _)| *version == 1),
        "{synced:?}"
    );
    a.close().await;
    b.close().await;
}

/// A follower reads at most its budget of changed records while the
/// leader keeps writing, and the whole backlog at the first refresh after
/// the writes stop (no more new changes than its budget): a failover after
/// a launch then finds the mirror current.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_backlog_is_read_once_the_writes_stop() {
    support::init_tracing();
    let zk = ZkServer::start();
    // The proxy only forwards here.
    let (a, b, _proxy, mut mirror) = proxied_follower(&zk, 0).await;
    let follower: Arc<dyn Coordinator> = b.clone();

    let writes: Vec<RecordWrite> = (0..300)
        .map(|i| put(&format!("t{i:03}"), 0, Expect::Absent))
        .collect();
    let written = a.write_records(K, writes).await;
    assert!(written.iter().all(|w| w.is_ok()), "{written:?}");
    // Delivered before this read's answer (see above).
    follower.records_stat(K).await.unwrap();
    mirror.refresh(false, 50).await.unwrap();
    assert_eq!(mirror.reads(), 50, "300 new changes: the budget holds");
    mirror.refresh(false, 50).await.unwrap();
    assert_eq!(mirror.reads(), 300, "no new change: the backlog is read");
    let (list, read) = mirror.sync().await.unwrap();
    assert_eq!(read, 0, "nothing left for the new leader");
    assert_eq!(as_rows(list), full_read(follower.as_ref()).await);
    a.close().await;
    b.close().await;
}
