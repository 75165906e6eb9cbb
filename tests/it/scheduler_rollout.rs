//! Health-gated rolling upgrades through the whole stack, on a real
//! ZooKeeper: the testbed's simulated executors run the services' health
//! checks (`POST /testbed/faults/health` decides their results), and the
//! scheduler replaces tasks only once their replacements are healthy.
//!
//! - A healthy upgrade replaces instance 0, waits until its replacement has
//!   been healthy for `upgrade.min_healthy`, then instance 1.
//! - An upgrade whose tasks never become healthy halts past
//!   `upgrade.deadline` with the old instance still running; the rollback
//!   restores the old spec (read back from ZooKeeper, with no previous
//!   spec left: a second rollback cannot roll forward) and its tasks
//!   become healthy again.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mesos_appliance::coordination::RecordKind;
use mesos_appliance::scheduler::records::ServiceRecord;
use mesos_appliance::scheduler::rules::rollout::RolloutAction;
use mesos_appliance::scheduler::{Request, ServiceSpec, Snapshot, TaskRecord};
use mesos_appliance::testbed::{SimulatedHealth, Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config, services};
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(60);

/// Two instances of `command` with a command health check every second;
/// min_healthy 1 s, deadline 6 s.
fn web(command: &str) -> ServiceSpec {
    services(
        json!([{"name": "web", "command": command, "cpus": 0.1, "mem": 32,
        "instances": 2, "restart_backoff": "1s", "restart_backoff_max": "4s",
        "kill_grace_period": "1s",
        "health_check": {"type": "command", "command": "true", "delay": "0s",
            "interval": "1s", "timeout": "1s", "grace_period": "1s",
            "consecutive_failures": 3},
        "upgrade": {"min_healthy": "1s", "deadline": "6s"}}]),
    )
    .remove(0)
}

/// Live tasks of `web` that run `spec` and are healthy, by instance.
fn healthy_of<'a>(s: &'a Snapshot, spec: &ServiceSpec) -> Vec<&'a TaskRecord> {
    let fingerprint = spec.fingerprint();
    let mut tasks: Vec<&TaskRecord> = s
        .tasks
        .iter()
        .filter(|t| t.service == "web" && t.fingerprint == fingerprint)
        .filter(|t| t.state.as_str_name() == "TASK_RUNNING" && t.kill.is_none())
        .filter(|t| t.healthy == Some(true))
        .map(|t| &**t)
        .collect();
    tasks.sort_by_key(|t| t.instance);
    tasks
}

/// A replica on a real ZooKeeper and a two-agent testbed running
/// `web("sleep 1000")`, once both its instances are healthy; the snapshot
/// then.
async fn running_old() -> (ZkServer, Testbed, Replica, ServiceSpec, Arc<Snapshot>) {
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let old = web("sleep 1000");
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        vec![old.clone()],
        core_config(),
    )
    .await;
    let s = replica
        .wait_for("two healthy tasks", WAIT, |s| {
            healthy_of(s, &old).len() == 2
        })
        .await;
    (zk, tb, replica, old, s)
}

async fn stored(replica: &Replica) -> ServiceRecord {
    let raw = replica
        .coordinator
        .get_record(RecordKind::Services, "web")
        .await
        .expect("ZooKeeper answers")
        .expect("the service is stored");
    serde_json::from_value(raw.value).expect("a service record")
}

async fn rollout(replica: &Replica, action: RolloutAction) {
    let answer = replica
        .handle
        .request::<bool>(
            Duration::from_secs(10),
            Request::Rollout {
                name: "web".into(),
                action,
                expected: None,
            },
        )
        .await;
    assert_eq!(answer, Ok(true), "{action:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_upgrade_completes_in_order() {
    let (_zk, _tb, replica, old, _) = running_old().await;
    let new = web("sleep 2000");
    assert_eq!(replica.put_service(new.clone()).await, Ok(true));
    let s = replica
        .wait_for("the upgrade done", WAIT, |s| {
            healthy_of(s, &new).len() == 2 && s.services.iter().all(|x| x.rollout.is_none())
        })
        .await;
    let replaced = healthy_of(&s, &new);
    let (new0, new1) = (replaced[0], replaced[1]);
    let since0 = new0.healthy_since.expect("healthy since");
    assert!(
        new1.launched_at >= since0 + 1.0,
        "instance 1 was replaced only after instance 0's replacement was healthy for 1 s: \
         launched {} vs healthy since {since0}",
        new1.launched_at
    );
    assert!(
        !s.events.iter().any(|e| e.message.contains("halted")),
        "{:?}",
        s.events
    );
    let record = stored(&replica).await;
    assert_eq!((record.spec, record.previous.as_deref()), (new, Some(&old)));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_that_never_becomes_healthy_halts_and_rolls_back() {
    let (zk, tb, replica, old, s) = running_old().await;
    let old1 = healthy_of(&s, &old)[1].task_id.clone();
    // Every task of the new release fails its checks.
    let broken = web("sleep 2000");
    let fingerprint = broken.fingerprint();
    tb.set_health(
        "web.",
        Some(("appliance.fingerprint", fingerprint.as_str())),
        SimulatedHealth::Unhealthy,
    );
    assert_eq!(replica.put_service(broken.clone()).await, Ok(true));
    let s = replica
        .wait_for("the rollout halted", WAIT, |s| {
            s.services
                .iter()
                .any(|x| x.rollout.as_ref().is_some_and(|r| r.halted.is_some()))
        })
        .await;
    let halt = s.services[0].rollout.clone().unwrap().halted.unwrap();
    assert!(halt.reason.contains("instance(s) 0"), "{}", halt.reason);
    assert!(
        s.events
            .iter()
            .any(|e| e.message.contains("rollout of service web halted")),
        "{:?}",
        s.events
    );
    // Shown as soon as decided; stored right after.
    let deadline = tokio::time::Instant::now() + WAIT;
    while stored(&replica).await.halted.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the halt is stored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A follower tells the same from ZooKeeper's records: health, the
    // halted rollout's progress and what a rollback would restore.
    let follower =
        Replica::start(&zk.connect_string(), "r2", &tb.url(), vec![], core_config()).await;
    let seen = follower
        .wait_for("the follower's counts", WAIT, |f| {
            let Some(x) = f.services.first() else {
                return false;
            };
            let r = x.rollout.as_ref();
            x.healthy >= 1
                && r.is_some_and(|r| r.halted.is_some() && r.remaining >= 1)
                && x.restore.as_ref().map(|t| t.fingerprint.clone()) == Some(old.fingerprint())
        })
        .await;
    assert!(seen.services[0].can_roll_back);
    follower.stop().await;
    // The old instance 1 runs, not marked for a kill; that it stays so
    // however long the halt lasts is the machine's rule, shown with paused
    // time (`a_replacement_that_never_becomes_healthy_halts_the_rollout`
    // in src/scheduler/core/machine/tests/rollout.rs), and the end of this
    // test sees it was never replaced.
    let kept = s.tasks.iter().find(|t| t.task_id == old1).unwrap();
    assert_eq!(kept.state.as_str_name(), "TASK_RUNNING");
    assert!(kept.kill.is_none());

    rollout(&replica, RolloutAction::Rollback).await;
    let record = stored(&replica).await;
    assert_eq!(record.spec, old, "the old spec is back in ZooKeeper");
    assert_eq!(record.previous, None, "a rollback does not toggle");
    assert!(record.halted.is_none());
    let s = replica
        .wait_for("the old spec healthy again", WAIT, |s| {
            healthy_of(s, &old).len() == 2 && s.services.iter().all(|x| x.rollout.is_none())
        })
        .await;
    assert!(
        healthy_of(&s, &old).iter().any(|t| t.task_id == old1),
        "instance 1 was never replaced"
    );
    assert!(
        !s.tasks
            .iter()
            .any(|t| t.fingerprint == fingerprint && !t.is_terminal()),
        "no task of the broken spec is left"
    );
    replica.stop().await;
}
