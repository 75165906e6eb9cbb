//! What a follower shows on a real ZooKeeper and the testbed: its standby
//! view (`src/scheduler/standby.rs`) follows what its record mirror read,
//! a rewritten task record included.

use crate::support;

use std::time::Duration;

use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::scheduler::FrameworkState;
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(30);

/// r2 follows r1, which runs 3 tasks. The service is scaled to 2 through
/// r1 (as `PUT /api/v1/services/web` does): r1 kills one task, whose
/// record is rewritten (TASK_KILLED), neither created nor deleted, so the
/// records' count and keys stay the same. r2 shows it killed within two
/// refreshes (`standby::REFRESH`), not a minute later (`STALE_AFTER`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_shows_a_task_killed_through_the_leader_within_seconds() {
    let zk = ZkServer::start();
    let tb = mesos_appliance::testbed::Testbed::start(
        mesos_appliance::testbed::TestbedConfig::for_tests(3),
    )
    .await
    .unwrap();
    let spec = |instances: u32| {
        json!({"name": "web", "command": "serve", "cpus": 0.2, "mem": 64,
            "instances": instances})
    };
    let specs = services(json!([spec(3)]));
    let (connect, master) = (zk.connect_string(), tb.url());
    let start =
        |name: &'static str| Replica::start(&connect, name, &master, specs.to_vec(), core_config());
    let first = start("r1").await;
    first
        .wait_for("3 running", WAIT, |s| running(s, "web") == 3)
        .await;
    let second = start("r2").await;
    second
        .wait_for("r2 follows and shows the 3 tasks", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && running(s, "web") == 3
        })
        .await;

    let scaled = services(json!([spec(2)])).remove(0);
    first.put_service(scaled).await.expect("scaled to 2");
    let killed = |s: &mesos_appliance::scheduler::Snapshot| {
        s.tasks
            .iter()
            .find(|t| t.service == "web" && t.state == TaskState::TaskKilled)
            .map(|t| t.task_id.to_string())
    };
    let s = first
        .wait_for("r1 killed one task", WAIT, |s| killed(s).is_some())
        .await;
    let id = killed(&s).expect("a killed task");
    assert_eq!(s.tasks.len(), 3, "the killed task's record is kept");
    let shown = tokio::time::Instant::now();
    second
        .wait_for("r2 shows the task killed", Duration::from_secs(8), |s| {
            s.tasks
                .iter()
                .any(|t| t.task_id.as_str() == id && t.state == TaskState::TaskKilled)
        })
        .await;
    eprintln!("r2 showed {id} killed after {:?}", shown.elapsed());
    assert_eq!(running(&second.snapshot(), "web"), 2);

    second.stop().await;
    first.stop().await;
}
