//! Testbed masters electing a leader through a real ZooKeeper, as Mesos
//! masters do (`docs/mesos-protocol.md#zookeeper-master-detection`, captures j, k):
//! `json.info_` znodes with
//! sorted-key MasterInfo JSON, the lowest sequence leads, a non-leader
//! redirects or answers 503, and a master whose session expires stops.

use crate::support;

use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::Value;
use support::mesos::*;
use support::zookeeper::ZkServer;
use zookeeper_client as zk;

async fn master(zk: &ZkServer, path: &str) -> Testbed {
    init();
    let mut config = TestbedConfig::for_tests(1);
    config.zk = Some(format!("zk://{}{path}", zk.connect_string()));
    config.zk_session_timeout = Duration::from_secs(2);
    Testbed::start(config).await.unwrap()
}

async fn wait_leading(tb: &Testbed) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !tb.is_leading() {
        assert!(tokio::time::Instant::now() < deadline, "testbed never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn no_redirects() -> reqwest::Client {
    init();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn lowest_sequence_leads_and_the_other_redirects() {
    let zk = ZkServer::start();
    let first = master(&zk, "/mesos").await;
    wait_leading(&first).await;
    let second = master(&zk, "/mesos").await;
    // Wait until the follower knows the leader.
    let deadline = tokio::time::Instant::now() + WAIT;
    let location = loop {
        let answer = no_redirects()
            .post(format!("{}/api/v1/scheduler", second.url()))
            .header("Content-Type", "application/json")
            .body(new_framework("k", 60.0).to_string())
            .send()
            .await
            .unwrap();
        if answer.status() == 307 {
            assert_eq!(answer.headers()["content-length"], "0");
            break answer.headers()["location"].to_str().unwrap().to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "follower never redirected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        location,
        format!("//{}/master/api/v1/scheduler", first.addr())
    );
    let operator = no_redirects()
        .post(format!("{}/api/v1", second.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        operator.headers()["location"],
        format!("//{}/master/api/v1", first.addr()).as_str()
    );
    let state = no_redirects()
        .get(format!("{}/master/state", second.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        state.headers()["location"],
        format!("//{}/master/state", first.addr()).as_str()
    );
    let redirect = no_redirects()
        .get(format!("{}/master/redirect", second.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        redirect.headers()["location"],
        format!("//{}", first.addr()).as_str()
    );
    assert!(!second.is_leading());

    // The znodes look like a real master's.
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let mut children = client.list_children("/mesos").await.unwrap();
    children.sort();
    assert_eq!(children.len(), 2);
    assert!(
        children
            .iter()
            .all(|c| c.starts_with("json.info_") && c.len() == "json.info_".len() + 10)
    );
    let (data, _) = client
        .get_data(&format!("/mesos/{}", children[0]))
        .await
        .unwrap();
    let text = String::from_utf8(data).unwrap();
    assert!(
        text.starts_with("{\"address\":{\"hostname\":"),
        "sorted keys: {text}"
    );
    let info: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(info["id"], first.master_id());
    assert_eq!(info["port"], first.addr().port());

    // The leader stops: the follower takes over.
    first.shutdown().await;
    wait_leading(&second).await;
    let mut sub = subscribe(&second.url(), new_framework("k", 60.0)).await;
    assert_eq!(sub.status, 200);
    sub.subscribed().await;
}

#[tokio::test]
async fn no_leader_means_503() {
    // A master that cannot reach ZooKeeper knows no leader (capture k).
    init();
    let mut config = TestbedConfig::for_tests(1);
    config.zk = Some(format!(
        "zk://127.0.0.1:{}/mesos",
        support::zookeeper::free_port()
    ));
    let lonely = Testbed::start(config).await.unwrap();
    let answer = post(
        &format!("{}/api/v1/scheduler", lonely.url()),
        &[("Content-Type", "application/json")],
        new_framework("x", 1.0).to_string(),
    )
    .await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (503, "No leader elected")
    );
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let state = client()
        .get(format!("{}/master/state", lonely.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(state.status(), 503);
}

#[tokio::test]
async fn a_master_whose_session_expires_stops() {
    let mut zk = ZkServer::start();
    let tb = master(&zk, "/mesos").await;
    wait_leading(&tb).await;
    let (mut sub, _) = connected(&tb.url(), "s", 60.0).await;
    zk.stop();
    // Session timeout 2 s: the client declares the session expired and the
    // master commits suicide; its streams are cut without a terminating chunk.
    tokio::time::timeout(Duration::from_secs(15), tb.stopped().cancelled())
        .await
        .expect("testbed stopped");
    assert!(matches!(sub.expect_end().await, End::Broken(_)));
}
