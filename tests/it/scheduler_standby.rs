//! What a follower and a new leader show on a real ZooKeeper and the
//! testbed: the standby view (`src/scheduler/standby.rs`) follows what its
//! record mirror read, a rewritten task record included; and what is not
//! read yet is shown as loading (`Snapshot::loading`), never as none.

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

/// r2 follows r1, which runs 3 tasks, then takes over. Every snapshot r2
/// publishes from its start to its first full view as leader either
/// shows the services and tasks or says they are loading: never a
/// confident "no services, no tasks" while the store holds them (a new
/// leader showed 0 of each for 0.1–0.2 s while subscribing, before its
/// load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_shows_loading_not_zero_before_its_load() {
    let zk = ZkServer::start();
    let tb = mesos_appliance::testbed::Testbed::start(
        mesos_appliance::testbed::TestbedConfig::for_tests(3),
    )
    .await
    .unwrap();
    let specs = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.2, "mem": 64, "instances": 3}
    ]));
    let (connect, master) = (zk.connect_string(), tb.url());
    let start =
        |name: &'static str| Replica::start(&connect, name, &master, specs.to_vec(), core_config());
    let first = start("r1").await;
    first
        .wait_for("3 running", WAIT, |s| running(s, "web") == 3)
        .await;
    let second = start("r2").await;
    // Every snapshot r2 publishes, as a reader sees them.
    let mut rx = second.handle.subscribe();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            let s = rx.borrow_and_update().clone();
            let leads = s.framework.state == FrameworkState::Subscribed;
            if (s.tasks.is_empty() || s.services.is_empty()) && !s.loading {
                seen.push(format!(
                    "{:?} ({:?}): {} services, {} tasks, not loading",
                    s.framework.state,
                    s.leadership.role(),
                    s.services.len(),
                    s.tasks.len()
                ));
            }
            if leads && running(&s, "web") == 3 && !s.loading {
                return seen;
            }
            if rx.changed().await.is_err() {
                return seen;
            }
        }
    });
    second
        .wait_for("r2 follows and shows the 3 tasks", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && running(s, "web") == 3
        })
        .await;
    first.stop().await;
    let seen = tokio::time::timeout(WAIT, watcher)
        .await
        .expect("r2 took over and loaded")
        .expect("the watcher");
    assert!(seen.is_empty(), "shown as none while stored: {seen:#?}");
    second.stop().await;
}
