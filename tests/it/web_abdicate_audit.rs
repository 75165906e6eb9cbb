//! The `abdicate` action's audit entry on a running appliance (real
//! scheduler core, web layer and ZooKeeper, the testbed as master): the
//! entry is written before the replica steps down, so the end of the term
//! (which fences the appends) cannot lose it.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mesos_appliance::app::start_replica;
use mesos_appliance::coordination::deployment::register;
use mesos_appliance::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use mesos_appliance::coordination::{Coordinator, DeploymentRecord, Strategy};
use mesos_appliance::mesos::client::ClientConfig;
use mesos_appliance::mesos::detector::MasterSpec;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::util::zk::ZkUrl;
use mesos_appliance::web::WebConfig;
use serde_json::json;
use support::appliance::core_config;
use support::replicas::{SESSION, replica};
use support::zookeeper::{ZkServer, free_port};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_abdicate_entry_is_in_the_audit_log_after_the_step_down() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let zk_url = ZkUrl::parse(&format!("zk://{}/abdicate", zk.connect_string()), "x").unwrap();
    let mut info = replica("a");
    info.advertised_url = url.clone();
    let coordinator = Arc::new(
        ZkCoordinator::start(ZkConfig::new(zk_url, info).with_session_timeout(SESSION))
            .await
            .unwrap(),
    );
    // Registered as `serve` does, so the appends also check the deployment.
    let _: DeploymentRecord = register(coordinator.as_ref(), "d1", Strategy::Failover)
        .await
        .unwrap();
    let mut web = WebConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), url.clone());
    web.handler_timeout = Duration::from_secs(10);
    let stop = CancellationToken::new();
    let client = ClientConfig::new(MasterSpec::parse(&tb.url()).unwrap());
    let running = start_replica(
        core_config(),
        client,
        coordinator.clone(),
        Vec::new(),
        web,
        stop.clone(),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while running.handle.snapshot().framework.id.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "never subscribed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let http = reqwest::Client::new();
    let r = http
        .post(format!("{url}/api/v1/actions/abdicate"))
        .json(&json!({"reason": "moving the leader"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());

    // Read the log from ZooKeeper itself: any replica's view of it.
    let log = coordinator.audit_log(100).await.unwrap();
    let abdicate: Vec<_> = log
        .iter()
        .filter(|(_, e)| e["action"] == "abdicate")
        .collect();
    assert_eq!(abdicate.len(), 1, "the abdicate entry is written: {log:?}");
    let entry = &abdicate[0].1;
    assert_eq!(entry["ok"], true, "{entry}");
    assert_eq!(entry["reason"], "moving the leader", "{entry}");
    stop.cancel();
    coordinator.close().await;
}
