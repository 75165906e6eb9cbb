//! The deployment record as a write fence on a real ZooKeeper server: a
//! replica of a replaced deployment that has not yet noticed the newer
//! record is refused on every fenced write, while the deployment's own
//! writes to the record (`teardown_done`) keep its replicas writing
//! (`docs/election-model.md#the-deployment-fence`).

use crate::support;

use std::time::Duration;

use mesos_appliance::coordination::deployment::register;
use mesos_appliance::coordination::{
    CoordinationError, Coordinator, DeploymentRecord, Expect, RecordKind, Strategy,
};
use serde_json::json;
use support::replicas::{start, wait_follower_of, wait_leader};
use support::zookeeper::{ZkServer, raw_client};

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replaced_deployments_leader_is_refused_before_it_notices_the_new_record() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    let observed = register(a.as_ref(), "A", Strategy::Upgrade).await.unwrap();
    assert_eq!((observed.deployment_id.as_str(), observed.epoch), ("A", 1));
    wait_leader(a.as_ref(), T).await;
    a.put_record(RecordKind::Tasks, "t1", &json!({"n": 1}), Expect::Absent)
        .await
        .expect("the current deployment's leader writes");

    // Deployment B takes over behind A's back: written by another client,
    // so A's coordinator has not acted on it (nothing here watches for the
    // fence and stops A, as the replica's fence watch would, later).
    let raw = raw_client(&zk).await;
    let (_, stat) = raw.get_data("/t/deployment").await.unwrap();
    let b = DeploymentRecord {
        deployment_id: "B".into(),
        epoch: 2,
        strategy: Strategy::Upgrade,
        teardown_done: false,
    };
    raw.set_data(
        "/t/deployment",
        &serde_json::to_vec(&b).unwrap(),
        Some(stat.version),
    )
    .await
    .unwrap();

    assert!(
        a.leadership().borrow().is_leader(),
        "A still believes it leads"
    );
    let write = a
        .put_record(RecordKind::Tasks, "t1", &json!({"n": 2}), Expect::Any)
        .await;
    assert!(
        matches!(write, Err(CoordinationError::NotLeader)),
        "a replaced deployment's write must be refused: {write:?}"
    );
    let framework = a.store_framework_id("fw-of-A").await;
    assert!(
        matches!(framework, Err(CoordinationError::NotLeader)),
        "{framework:?}"
    );
    let audit = a.append_audit(&json!({"action": "late"})).await;
    assert!(
        matches!(audit, Err(CoordinationError::NotLeader)),
        "{audit:?}"
    );
    let (data, _) = raw.get_data("/t/tasks/t1").await.unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&data).unwrap(),
        json!({"n": 1})
    );
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_deployments_own_record_writes_keep_its_replicas_writing() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a1 = start(&zk.connect_string(), "a1").await;
    let first = register(a1.as_ref(), "A", Strategy::Hard).await.unwrap();
    wait_leader(a1.as_ref(), T).await;
    let a2 = start(&zk.connect_string(), "a2").await;
    register(a2.as_ref(), "A", Strategy::Hard).await.unwrap();
    wait_follower_of(a2.as_ref(), "a1", T).await;

    // The leader records its teardown, as under `hard`: a new version of
    // the record, still deployment A.
    let current = a1.deployment().await.unwrap().unwrap();
    let done = DeploymentRecord {
        teardown_done: true,
        ..first
    };
    a1.write_deployment(&done, Expect::Version(current.version))
        .await
        .unwrap();
    a1.put_record(RecordKind::Tasks, "t1", &json!({"n": 1}), Expect::Absent)
        .await
        .expect("the writer of the record follows its own write");
    // The results are those of the writes, not of the checks before them.
    let set = a1
        .put_record(
            RecordKind::Tasks,
            "t1",
            &json!({"n": 1}),
            Expect::Version(0),
        )
        .await;
    assert_eq!(set.ok(), Some(1), "a set answers the record's new version");
    let audit = a1.append_audit(&json!({"action": "teardown"})).await;
    assert!(audit.is_ok(), "{audit:?}");

    // The sibling takes over and writes too: it follows the record of its
    // own deployment (through the watch) instead of being fenced by it.
    a1.close().await;
    wait_leader(a2.as_ref(), T).await;
    a2.put_record(
        RecordKind::Tasks,
        "t1",
        &json!({"n": 2}),
        Expect::Version(1),
    )
    .await
    .expect("a replica of the same deployment still writes");
    a2.close().await;
}
