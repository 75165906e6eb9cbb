//! ZooKeeper's request limit on a real server (`jute.maxbuffer`, 1,048,575
//! bytes by default: `NIOServerCnxn.readLength` closes the connection of a
//! longer request). The sizes computed by
//! `coordination::zookeeper::request_size` are exact: a request of exactly
//! the limit is written, one byte more is lost with the connection; the
//! stores write a record just under it, refuse one just over it before
//! sending (the session stays as it was), and split batches by bytes.

use crate::support;

use std::time::Duration;

use mesos_appliance::coordination::zookeeper::request_size::{self, MAX_REQUEST};
use mesos_appliance::coordination::{
    CoordinationError, Coordinator, Expect, RecordKind, RecordWrite, Written,
};
use serde_json::Value;
use support::replicas::{start, wait_leader};
use support::zookeeper::{ZkServer, raw_client};
use zookeeper_client as zk;

const T: Duration = Duration::from_secs(10);

/// A JSON string of exactly `bytes` bytes once encoded.
fn json_of(bytes: usize) -> Value {
    Value::String("x".repeat(bytes - 2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_takes_a_request_of_exactly_the_limit_and_drops_one_byte_more() {
    support::init_tracing();
    let zk = ZkServer::start();
    let client = raw_client(&zk).await;
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let data_for = |path: &str, request: usize| {
        let empty = request_size::multi(request_size::create(path, &[], &zk::Acls::anyone_all()));
        vec![b'x'; request - empty]
    };
    let at = data_for("/at", MAX_REQUEST);
    let mut writer = client.new_multi_writer();
    writer.add_create("/at", &at, &open).unwrap();
    writer
        .commit()
        .await
        .expect("a request of exactly jute.maxbuffer is taken");
    assert_eq!(client.get_data("/at").await.unwrap().0.len(), at.len());

    let over = data_for("/over", MAX_REQUEST + 1);
    let mut writer = client.new_multi_writer();
    writer.add_create("/over", &over, &open).unwrap();
    let lost = writer.commit().await;
    assert!(lost.is_err(), "one byte over jute.maxbuffer: {lost:?}");
    // The server closed the connection instead of answering; nothing written.
    let mut absent = None;
    for _ in 0..50 {
        match client.check_stat("/over").await {
            Ok(stat) => {
                absent = Some(stat.is_none());
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(absent, Some(true), "the oversized create was not applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_record_just_under_the_limit_is_written_and_one_byte_more_is_refused_before_sending() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let session = a.session().expect("a session").id();
    let most = a
        .max_record_bytes(RecordKind::Services, "big-1")
        .expect("a member");
    assert!(most > 1_040_000, "{most} bytes: nearly all of the 1 MiB");

    let written = a
        .put_record(
            RecordKind::Services,
            "big-1",
            &json_of(most),
            Expect::Absent,
        )
        .await;
    assert_eq!(written, Ok(0), "a record of {most} bytes fits");
    let back = a
        .get_record(RecordKind::Services, "big-1")
        .await
        .unwrap()
        .expect("written");
    assert_eq!(back.value, json_of(most));

    let refused = a
        .put_record(
            RecordKind::Services,
            "big-2",
            &json_of(most + 1),
            Expect::Absent,
        )
        .await;
    match refused {
        Err(CoordinationError::TooLarge { bytes, limit, path }) => {
            assert_eq!((bytes, limit), (MAX_REQUEST + 1, MAX_REQUEST));
            assert!(path.ends_with("/services/big-2"), "{path}");
        }
        other => panic!("a record one byte over: {other:?}"),
    }
    // Refused before sending: same session, still leading, writes go on.
    assert_eq!(a.session().map(|s| s.id()), Some(session));
    assert!(a.leadership().borrow().is_leader());
    assert_eq!(
        a.put_record(RecordKind::Services, "small", &json_of(10), Expect::Absent)
            .await,
        Ok(0)
    );
    assert_eq!(
        a.get_record(RecordKind::Services, "big-2").await.unwrap(),
        None
    );
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_over_the_limit_is_split_by_bytes_and_an_oversized_record_in_it_is_refused_alone() {
    support::init_tracing();
    let zk = ZkServer::start();
    let a = start(&zk.connect_string(), "a").await;
    wait_leader(a.as_ref(), T).await;
    let session = a.session().expect("a session").id();
    let most = a.max_record_bytes(RecordKind::Tasks, "t-0").unwrap();
    // Five records of 300 kB: 1.5 MB in one batch, more than one request
    // can carry; and one just over the limit among them.
    let mut writes: Vec<RecordWrite> = (0..5)
        .map(|i| RecordWrite::put(&format!("t-{i}"), &json_of(300_000), Expect::Absent).unwrap())
        .collect();
    writes.insert(
        2,
        RecordWrite::put("t-9", &json_of(most + 1), Expect::Absent).unwrap(),
    );
    let results = a.write_records(RecordKind::Tasks, writes).await;
    assert!(
        matches!(results[2], Err(CoordinationError::TooLarge { .. })),
        "{:?}",
        results[2]
    );
    let others: Vec<_> = results
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(others, vec![Ok(Written::Version(0)); 5]);
    assert_eq!(a.session().map(|s| s.id()), Some(session));
    let list = a.list_records(RecordKind::Tasks).await.unwrap();
    let keys: Vec<&str> = list.records.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["t-0", "t-1", "t-2", "t-3", "t-4"]);
    a.close().await;
}
