//! The audit log on a real ZooKeeper server: one ordered log shared by
//! every replica (sequential znodes), kept after the writer's session ends
//! and after a restart, pruned to the newest `AUDIT_KEPT`, refused above
//! the entry size limit, and deleted with everything else. Appends are
//! fenced like the store writes: only the leader's are taken, and a deposed
//! leader's are refused.

use crate::support;

use std::time::Duration;

use mesos_appliance::coordination::{
    AUDIT_KEPT, CoordinationError, Coordinator, MAX_AUDIT_ENTRY_BYTES,
};
use serde_json::json;
use support::chaos_proxy::ChaosProxy;
use support::replicas::{start, wait_follower_of, wait_leader};
use support::zookeeper::{ZkServer, expire_session};

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_reads_one_audit_log_that_outlives_its_writers() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let b = start(&zk.connect_string(), "b").await;
    assert!(
        a.audit_log(10).await.unwrap().is_empty(),
        "no audit znode yet"
    );

    let first = a.append_audit(&json!({"i": 0, "by": "a"})).await.unwrap();
    let second = a.append_audit(&json!({"i": 1, "by": "a"})).await.unwrap();
    a.append_audit(&json!({"i": 2, "by": "a"})).await.unwrap();
    assert!(second > first);
    let from_a = a.audit_log(10).await.unwrap();
    let from_b = b.audit_log(10).await.unwrap();
    assert_eq!(from_a, from_b, "the same log on every replica");
    let order: Vec<u64> = from_a
        .iter()
        .map(|(_, v)| v["i"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [0, 1, 2]);
    assert_eq!(b.audit_log(2).await.unwrap(), from_a[1..].to_vec());

    // The leader goes (failover), then comes back as a new process
    // (restart): the log stays.
    a.close().await;
    let c = start(&zk.connect_string(), "c").await;
    assert_eq!(c.audit_log(10).await.unwrap(), from_a);
    // b leads now, and appends from here on.
    wait_leader(b.as_ref(), T).await;

    let huge = json!({ "reason": "x".repeat(MAX_AUDIT_ENTRY_BYTES) });
    assert!(matches!(
        b.append_audit(&huge).await,
        Err(CoordinationError::Invalid(_))
    ));

    // Pruned to the newest AUDIT_KEPT, oldest first out.
    for i in 3..AUDIT_KEPT + 5 {
        b.append_audit(&json!({ "i": i })).await.unwrap();
    }
    let log = c.audit_log(usize::MAX).await.unwrap();
    assert_eq!(log.len(), AUDIT_KEPT);
    assert_eq!(log[0].1["i"], 5);
    assert_eq!(log.last().unwrap().1["i"], AUDIT_KEPT + 4);
    assert!(log.windows(2).all(|w| w[0].0 < w[1].0));

    c.delete_all().await.unwrap();
    assert!(b.audit_log(10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deposed_leaders_audit_append_is_refused() {
    support::init_tracing();
    let zk = ZkServer::start();
    // a reaches ZooKeeper through a proxy, to be cut off while its session
    // is expired.
    let proxy = ChaosProxy::start(zk.addr()).await;
    let a = start(&proxy.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let b = start(&zk.connect_string(), "b").await;
    wait_follower_of(b.as_ref(), "a", T).await;
    a.append_audit(&json!({"by": "a", "when": "leading"}))
        .await
        .unwrap();
    assert!(
        matches!(
            b.append_audit(&json!({"by": "b", "when": "following"}))
                .await,
            Err(CoordinationError::NotLeader)
        ),
        "a follower's append is refused"
    );

    // a's session expires: b leads, and a comes back with a new session as
    // b's follower. Its appends are refused from then on.
    let old = a.session().unwrap();
    expire_session(&zk.connect_string(), old.clone(), &proxy).await;
    wait_leader(b.as_ref(), T).await;
    wait_follower_of(a.as_ref(), "b", T).await;
    assert_ne!(a.session().unwrap().id(), old.id(), "a new session");
    let deposed = a.append_audit(&json!({"by": "a", "when": "deposed"})).await;
    assert!(
        matches!(deposed, Err(CoordinationError::NotLeader)),
        "the deposed leader's append must be refused: {deposed:?}"
    );
    b.append_audit(&json!({"by": "b", "when": "leading"}))
        .await
        .unwrap();

    let log = a.audit_log(10).await.unwrap();
    let entries: Vec<(&str, &str)> = log
        .iter()
        .map(|(_, v)| (v["by"].as_str().unwrap(), v["when"].as_str().unwrap()))
        .collect();
    assert_eq!(entries, [("a", "leading"), ("b", "leading")]);
    a.close().await;
    b.close().await;
}
