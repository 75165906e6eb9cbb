//! End to end in headless Chromium: two replicas (real scheduler core, real
//! web layer, real ZooKeeper) against the testbed in process mode, so the
//! `web` service's tasks run under the real `mesos-appliance-executor`.
//! Overview with framework ID and leader, tasks page, reconcile, kamikaze
//! through its confirmation page with the tasks replaced, the follower's
//! standby banner, and teardown deleting the stored framework ID and task
//! records. Screenshots: `$CARGO_TARGET_DIR/screenshots/e2e-*.png`.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mesos_appliance::app::{Running, start_replica};
use mesos_appliance::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use mesos_appliance::coordination::{Coordinator, RecordKind};
use mesos_appliance::mesos::client::ClientConfig;
use mesos_appliance::mesos::detector::MasterSpec;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::util::zk::ZkUrl;
use mesos_appliance::web::WebConfig;
use serde_json::json;
use support::appliance::{core_config, services};
use support::browser::Browser;
use support::checks::{Checks, Store, View};
use support::replicas::{SESSION, replica};
use support::zookeeper::{ZkServer, free_port};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

struct Replica {
    url: String,
    running: Running,
    coordinator: Arc<ZkCoordinator>,
    stop: CancellationToken,
    /// The end-of-test checks every replica harness runs on drop.
    checks: Checks,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let failure = self.checks.at_drop();
        self.stop.cancel();
        if let Some(failure) = failure {
            panic!("{failure}");
        }
    }
}

async fn replica_on(zk: &ZkServer, tb: &Testbed, name: &str) -> Replica {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let zk_url = ZkUrl::parse(&format!("zk://{}/e2e", zk.connect_string()), "x").unwrap();
    let store = Store::Zk(zk_url.clone());
    let mut info = replica(name);
    info.advertised_url = url.clone();
    let coordinator = Arc::new(
        ZkCoordinator::start(ZkConfig::new(zk_url, info).with_session_timeout(SESSION))
            .await
            .unwrap(),
    );
    let mut core = core_config();
    core.framework_name = "e2e".into();
    core.snapshot_interval = Duration::from_millis(100);
    let specs = services(json!([
        {"name": "web", "command": "sleep 600", "cpus": 0.1, "mem": 32, "instances": 3, "executor": "appliance", "kill_grace_period": "1s"},
        {"name": "worker", "command": "sleep 600", "cpus": 0.1, "mem": 32, "instances": 2}
    ]));
    let mut web = WebConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), url.clone());
    web.handler_timeout = Duration::from_secs(10);
    let stop = CancellationToken::new();
    let client = ClientConfig::new(MasterSpec::parse(&tb.url()).unwrap());
    let running = start_replica(core, client, coordinator.clone(), specs, web, stop.clone())
        .await
        .unwrap();
    let checks = Checks::new(
        name,
        &tb.url(),
        View::Snapshot(running.handle.clone()),
        store,
    );
    Replica {
        url,
        running,
        coordinator,
        stop,
        checks,
    }
}

fn running_web(r: &Replica) -> Vec<String> {
    r.running
        .handle
        .snapshot()
        .tasks
        .iter()
        .filter(|t| t.service == "web" && t.state.as_str_name() == "TASK_RUNNING")
        .map(|t| t.task_id.to_string())
        .collect()
}

async fn wait(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} not reached within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_steers_the_real_scheduler_from_the_dashboard() {
    support::mesos::init();
    let zk = ZkServer::start();
    let mut tb_config = TestbedConfig::for_tests(2);
    tb_config.run_executors = Some(env!("CARGO_BIN_EXE_mesos-appliance-executor").into());
    let tb = Testbed::start(tb_config).await.unwrap();
    let leader = replica_on(&zk, &tb, "a").await;
    wait("five tasks running", || {
        let s = leader.running.handle.snapshot();
        s.tasks
            .iter()
            .filter(|t| t.state.as_str_name() == "TASK_RUNNING")
            .count()
            == 5
    })
    .await;
    let follower = replica_on(&zk, &tb, "b").await;
    let fid = leader
        .running
        .handle
        .snapshot()
        .framework
        .id
        .clone()
        .unwrap();

    let b = Browser::start().await;
    b.goto(&format!("{}/", leader.url)).await;
    assert_eq!(b.text("#overview-framework-id").await, fid);
    assert_eq!(b.text("#leader").await, leader.url);
    assert_eq!(b.text("#role").await, "leader");
    b.screenshot("e2e-01-overview").await;

    b.goto(&format!("{}/tasks", leader.url)).await;
    assert_eq!(b.count("tr.task").await, 5);
    b.screenshot("e2e-02-tasks").await;

    // Reconcile from the actions page.
    b.goto(&format!("{}/actions", leader.url)).await;
    b.click("#reconcile-explicit").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    b.screenshot("e2e-03-reconcile").await;
    assert!(!tb.scheduler_calls("RECONCILE").is_empty());

    // Kamikaze through its confirmation page: the real executors exit and
    // their tasks are replaced.
    let before = running_web(&leader);
    assert_eq!(before.len(), 3);
    b.goto(&format!("{}/actions", leader.url)).await;
    b.click("#kamikaze-link").await;
    b.wait_for_path("/actions/kamikaze").await;
    assert_eq!(b.text("#confirm-framework-id").await, fid);
    b.type_into("#confirm-name", "e2e").await;
    b.screenshot("e2e-04-kamikaze-confirm").await;
    b.click("#confirm-submit").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    assert_eq!(b.count("#result-executors tbody tr").await, 3);
    b.screenshot("e2e-05-kamikaze-result").await;
    wait("web tasks replaced", || {
        let now = running_web(&leader);
        now.len() == 3 && now.iter().all(|t| !before.contains(t))
    })
    .await;
    // Each executor reported its own task before exiting: that update is
    // the terminal one, and it does not count against the service's restart
    // backoff (the replacements came at once).
    let snapshot = leader.running.handle.snapshot();
    for id in &before {
        let task = snapshot.tasks.iter().find(|t| &t.task_id == id).unwrap();
        let last = task.timeline.last().unwrap();
        assert_eq!(
            (
                task.state.as_str_name(),
                last.source.map_or("", |s| s.as_str_name())
            ),
            ("TASK_FAILED", "SOURCE_EXECUTOR"),
            "{task:?}"
        );
        assert!(last.message.as_deref().unwrap_or("").contains("kamikaze"));
    }
    b.goto(&format!(
        "{}/tasks?service=web&state=TASK_FAILED",
        leader.url
    ))
    .await;
    b.screenshot("e2e-06-replaced").await;

    // The follower's page: standby banner naming the leader.
    wait("the follower knows the leader", || {
        follower.running.handle.snapshot().leader_url().as_deref() == Some(leader.url.as_str())
    })
    .await;
    b.goto(&format!("{}/", follower.url)).await;
    let banner = b.text("#banners").await;
    assert!(
        banner.contains(&format!("STANDBY — leader is {}", leader.url)),
        "{banner}"
    );
    assert_eq!(b.text("#role").await, "follower");
    b.screenshot("e2e-07-follower").await;

    // Teardown from the dashboard deletes the stored ID and task records.
    b.goto(&format!("{}/actions/teardown", leader.url)).await;
    assert_eq!(b.text("#confirm-framework-id").await, fid);
    b.type_into("#confirm-name", "e2e").await;
    b.click("#confirm-submit").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    b.screenshot("e2e-08-teardown").await;
    assert!(tb.frameworks().iter().any(|f| f.id == fid && f.completed));
    assert!(leader.coordinator.framework_id().await.unwrap().is_none());
    assert!(
        leader
            .coordinator
            .list_records(RecordKind::Tasks)
            .await
            .unwrap()
            .records
            .is_empty()
    );
    b.goto(&format!("{}/", leader.url)).await;
    assert!(
        b.text("#banners").await.contains("REMOVED"),
        "{}",
        b.text("#banners").await
    );
    b.screenshot("e2e-09-removed").await;
    b.close().await;
}
