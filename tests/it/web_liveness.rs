//! Ages stay live with the real core (ZooKeeper, the testbed): the master's
//! heartbeats republish the snapshot, so its last-event time keeps up while
//! nothing else changes, and the web layer measures the heartbeat age at
//! request time, so it grows as soon as the heartbeats stop — before the
//! client gives the subscription up.

use crate::support;

use std::time::Duration;

use mesos_appliance::scheduler::{FrameworkState, ReconcileKind};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::util::unix_now_secs;
use mesos_appliance::web::{AppState, WebConfig, router};
use support::appliance::{Replica, core_config};
use support::web::{get, send};
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_age_follows_the_master() {
    let zk = ZkServer::start();
    // Heartbeats every second: the client's heartbeat timeout is 5 s.
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    // No services: once subscribed, the core suppresses offers and only
    // heartbeats arrive.
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        Vec::new(),
        core_config(),
    )
    .await;
    // Subscribed, and the reconciliations that follow are over.
    replica
        .wait_for("subscribed and reconciled", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
                && s.reconciliation.running.is_none()
                && s.reconciliation
                    .history
                    .iter()
                    .any(|r| r.kind == ReconcileKind::Implicit)
        })
        .await;
    let state = AppState::new(
        WebConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:0"),
        replica.handle.clone(),
        replica.coordinator.clone(),
        replica.registry.clone(),
    );
    let heartbeat_age = || async {
        let v = send(router(state.clone()), get("/api/v1/state"))
            .await
            .json();
        v["framework"]["heartbeat_age_seconds"].as_f64().unwrap()
    };

    // Nothing but heartbeats (every second) arrives, and they keep the
    // snapshot's last event fresh.
    support::client::holds_for(
        "the snapshot's last event stays under 2.5 s old with heartbeats every second",
        Duration::from_secs(3),
        || {
            replica
                .snapshot()
                .framework
                .last_event_at
                .is_some_and(|last| unix_now_secs() - last < 2.5)
        },
    )
    .await;
    let age = heartbeat_age().await;
    assert!(age < 2.5, "{age}");

    tb.stop_heartbeats(None);
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    let mut age = heartbeat_age().await;
    while age < 2.5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        age = heartbeat_age().await;
    }
    assert!(
        age >= 2.5,
        "without heartbeats the age grows past 2.5 s: {age}"
    );
    assert_eq!(
        replica.snapshot().framework.state,
        FrameworkState::Subscribed,
        "still within the heartbeat timeout"
    );
    tb.resume_heartbeats();
    replica.stop().await;
}
