//! The core's safety nets, on a real ZooKeeper and the testbed: a task stuck
//! in TASK_STAGING is killed and replaced; a KILL the executor ignores is
//! retried with backoff until it works; a framework ID replaced in ZooKeeper
//! behind the leader's back makes it step down instead of fighting; the
//! Prometheus gauges say who holds the subscription.

use crate::support;

use std::time::Duration;

use mesos_appliance::scheduler::spec::ValidServiceSpec;
use mesos_appliance::scheduler::{FrameworkState, ReconcileRun, Request, TaskId};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::mesos::{connected, existing_framework, subscribe};
use support::zookeeper::ZkServer;
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);

/// One service `name` of `instances` tiny tasks.
fn service(name: &str, instances: u32) -> Vec<mesos_appliance::scheduler::ServiceSpec> {
    services(
        json!([{"name": name, "command": "x", "cpus": 0.1, "mem": 32, "instances": instances}]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_staging_task_is_killed_and_replaced() {
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    // The first launch of instance 0 sticks in TASK_STAGING.
    tb.hold_staging("stuck.0.");
    let mut core = core_config();
    core.transient_timeout = Duration::from_secs(2);
    let specs = services(
        json!([{"name": "stuck", "command": "x", "cpus": 0.1, "mem": 32, "instances": 1}]),
    );
    let replica = Replica::in_memory("r1", &tb.url(), specs, core).await;
    let s = replica
        .wait_for("the task is staging", WAIT, |s| {
            s.tasks
                .iter()
                .any(|t| t.state.as_str_name() == "TASK_STAGING")
        })
        .await;
    let first = s.tasks[0].task_id.clone();
    // The ACCEPT follows the stored record: wait until the master holds it.
    support::client::eventually("the master holds the task", WAIT, || {
        tb.tasks().iter().any(|t| t.task_id == first.as_str())
    })
    .await;
    tb.clear_faults();
    let s = replica
        .wait_for("replaced", WAIT, |s| running(s, "stuck") == 1)
        .await;
    let old = s.tasks.iter().find(|t| t.task_id == first).unwrap();
    assert_eq!(old.state.as_str_name(), "TASK_KILLED");
    assert!(
        old.kill
            .as_ref()
            .unwrap()
            .reason
            .contains("stuck in TASK_STAGING"),
        "{:?}",
        old.kill
    );
    replica.stop().await;
}

/// Starts replica "r1" running `many` × 2, then scales it to 1 while the
/// executor of instance 1 ignores KILL. Returns the replica and the specs.
/// On `zk` when given, else on the in-memory coordinator.
async fn scale_down_past_an_ignored_kill(
    zk: Option<&ZkServer>,
    tb: &Testbed,
) -> (Replica, Vec<mesos_appliance::scheduler::ServiceSpec>) {
    let specs = service("many", 2);
    let replica = match zk {
        Some(zk) => {
            Replica::start(
                &zk.connect_string(),
                "r1",
                &tb.url(),
                specs.clone(),
                core_config(),
            )
            .await
        }
        None => Replica::in_memory("r1", &tb.url(), specs.clone(), core_config()).await,
    };
    replica
        .wait_for("2 running", WAIT, |s| running(s, "many") == 2)
        .await;
    tb.ignore_kill("many.1.");
    let mut spec = specs[0].clone();
    spec.instances = 1;
    let replaced: bool = replica
        .handle
        .request(
            Duration::from_secs(5),
            Request::PutService(Box::new(ValidServiceSpec::new(spec).unwrap())),
        )
        .await
        .unwrap();
    assert!(replaced);
    (replica, specs)
}

/// Waits until instance 1's kill was sent `attempts` times; its task ID.
async fn kill_of_instance_1(replica: &Replica, attempts: u32) -> TaskId {
    let s = replica
        .wait_for(&format!("kill pending ({attempts})"), WAIT, |s| {
            s.tasks
                .iter()
                .any(|t| t.instance == 1 && t.kill.as_ref().is_some_and(|k| k.attempts >= attempts))
        })
        .await;
    let victim = s.tasks.iter().find(|t| t.instance == 1).unwrap();
    victim.task_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_kill_is_retried_with_backoff() {
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    // Scale down: instance 1 must go, but its executor ignores KILL.
    let (replica, _) = scale_down_past_an_ignored_kill(None, &tb).await;
    let victim = kill_of_instance_1(&replica, 3).await;
    let kills: Vec<f64> = tb
        .scheduler_calls("KILL")
        .into_iter()
        .filter(|c| c.call["kill"]["task_id"]["value"] == victim.as_str())
        .map(|c| c.at)
        .collect();
    assert!(kills.len() >= 3);
    assert!(
        kills[2] - kills[1] > kills[1] - kills[0] + 0.5,
        "backoff grows: {kills:?}"
    );
    tb.clear_faults();
    replica
        .wait_for("killed", WAIT, |s| {
            s.tasks
                .iter()
                .any(|t| t.task_id == victim && t.state.as_str_name() == "TASK_KILLED")
        })
        .await;
    assert_eq!(running(&replica.snapshot(), "many"), 1);
    replica.stop().await;
}

/// A kill the old leader asked for and never saw happen is asked for again
/// by the next leader: the kill mark lives in the task record, the retry
/// queue in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_kill_survives_a_leader_failover() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let (first, specs) = scale_down_past_an_ignored_kill(Some(&zk), &tb).await;
    let victim = kill_of_instance_1(&first, 1).await;
    let second = Replica::start(&zk.connect_string(), "r2", &tb.url(), specs, core_config()).await;
    second
        .wait_for("r2 follows", WAIT, |s| {
            s.framework.state == FrameworkState::Standby
        })
        .await;
    first.stop().await;
    tb.clear_faults();
    let mark = tb.calls().len();
    second
        .wait_for("the next leader killed it", WAIT, |s| {
            s.tasks
                .iter()
                .any(|t| t.task_id == victim && t.state.as_str_name() == "TASK_KILLED")
        })
        .await;
    let kills_by_second = tb.calls()[mark..]
        .iter()
        .filter(|c| c.call_type == "KILL" && c.call["kill"]["task_id"]["value"] == victim.as_str())
        .count();
    assert!(
        kills_by_second >= 1,
        "the next leader sent KILL for {victim}"
    );
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_framework_id_makes_the_leader_step_down() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let specs = service("one", 1);
    let replica = Replica::start(&zk.connect_string(), "r1", &tb.url(), specs, core_config()).await;
    replica
        .wait_for("running", WAIT, |s| running(s, "one") == 1)
        .await;
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    client
        .set_data("/appliance/framework-id", b"someone-else-0000", None)
        .await
        .unwrap();
    let s = replica
        .wait_for("stepped down", WAIT, |s| {
            s.framework.state == FrameworkState::FailedOver
        })
        .await;
    let reason = s.framework.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("mismatch") && reason.contains("someone-else-0000"),
        "{reason}"
    );
    assert!(
        s.events
            .iter()
            .any(|e| e.message.contains("someone-else-0000")),
        "the mismatch is logged: {:?}",
        s.events
    );
    // It did not overwrite the stored ID.
    let (data, _) = client.get_data("/appliance/framework-id").await.unwrap();
    assert_eq!(data, b"someone-else-0000");
    replica.stop().await;
}

/// ERROR "Framework failed over" (another scheduler subscribed with our
/// ID): the leader stops acting and says so; it does not resubscribe at once
/// (`docs/deployment-strategies.md#failed-over`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_scheduler_taking_our_id_shows_failed_over_and_no_resubscribe() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let specs = service("one", 1);
    let replica = Replica::start(&zk.connect_string(), "r1", &tb.url(), specs, core_config()).await;
    let s = replica
        .wait_for("running", WAIT, |s| running(s, "one") == 1)
        .await;
    let fid = s.framework.id.clone().unwrap();
    let mark = tb.calls().len();
    let _rogue = subscribe(&tb.url(), existing_framework("appliance-test", &fid, 60.0)).await;
    let s = replica
        .wait_for("failed over", WAIT, |s| {
            s.framework.state == FrameworkState::FailedOver
        })
        .await;
    assert!(
        s.framework
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("another scheduler")),
        "{:?}",
        s.framework.reason
    );
    // Within the step-down pause (10 s) nothing is sent to the master (the
    // rogue only holds its stream open). A call the replica sent before
    // the master's ERROR reached it may still be on its way (one call
    // landed 12 ms after the state showed FailedOver, once, in CI; which
    // kind was not logged): the mark is the log once it has been quiet
    // for 200 ms, far less than the window a retry loop or a second
    // SUBSCRIBE would show in.
    // At most a second: calls that keep coming are a retry loop, which the
    // check below then names.
    let mut stepped_back = tb.calls().len();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = tb.calls().len();
        if now == stepped_back {
            break;
        }
        stepped_back = now;
    }
    support::client::holds_for(
        "no call after stepping back",
        Duration::from_secs(3),
        || tb.calls().len() == stepped_back,
    )
    .await;
    assert_eq!(
        replica.snapshot().framework.state,
        FrameworkState::FailedOver
    );
    // After the pause it gives up leadership; alone in the election it leads
    // again, sees the framework connected through the other scheduler and
    // does not take it back.
    let s = replica
        .wait_for("leads again but keeps off", WAIT, |s| {
            s.framework
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("connected to the master through another scheduler"))
        })
        .await;
    assert_eq!(s.framework.state, FrameworkState::FailedOver);
    let subscribes = tb.calls()[mark..]
        .iter()
        .filter(|c| c.call_type == "SUBSCRIBE")
        .count();
    assert_eq!(subscribes, 1, "only the other scheduler's SUBSCRIBE");
    replica.stop().await;
}

/// `hard` registers afresh by itself when the master says the stored
/// framework was removed, even with `--on-framework-removed=wait`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_reregisters_by_itself_when_the_framework_was_removed() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    // A framework the master removes as soon as it disconnects.
    let (sub, removed) = connected(&tb.url(), "appliance-test", 0.0).await;
    drop(sub);
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    client.create("/appliance", b"", &open).await.unwrap();
    client
        .create("/appliance/framework-id", removed.as_bytes(), &open)
        .await
        .unwrap();
    let mut core = core_config();
    core.strategy = mesos_appliance::coordination::Strategy::Hard;
    let specs = service("one", 1);
    let replica = Replica::start(&zk.connect_string(), "r1", &tb.url(), specs, core).await;
    let s = replica
        .wait_for("a fresh framework runs the service", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed && running(s, "one") == 1
        })
        .await;
    let fresh = s.framework.id.clone().unwrap();
    assert_ne!(fresh, removed);
    assert!(
        s.events
            .iter()
            .any(|e| e.message.contains("has been removed")),
        "{:?}",
        s.events
    );
    let (stored, _) = client.get_data("/appliance/framework-id").await.unwrap();
    assert_eq!(stored, fresh.as_bytes());
    replica.stop().await;
}

/// A fenced leader ends its term at once and says `fenced` (the process
/// then exits with code 3); its tasks keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_leader_stops_acting_and_says_fenced() {
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let specs = service("one", 1);
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;
    replica
        .wait_for("running", WAIT, |s| running(s, "one") == 1)
        .await;
    let mark = tb.calls().len();
    replica.fence.cancel();
    let s = replica
        .wait_for("fenced", WAIT, |s| {
            s.framework.state == FrameworkState::Fenced
        })
        .await;
    assert!(s.framework.reason.is_some());
    support::client::holds_for(
        "no call but DECLINE after the fence",
        Duration::from_secs(1),
        || tb.calls()[mark..].iter().all(|c| c.call_type == "DECLINE"),
    )
    .await;
    assert_eq!(tb.tasks().len(), 1, "tasks keep running");
    replica.stop().await;
}

/// A disconnected framework of the same name keeps its tasks until its
/// failover timeout passes: with no stored ID, registering anew would
/// orphan them, so the leader refuses
/// (`docs/deployment-strategies.md#a-framework-of-the-same-name`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inactive_framework_of_the_same_name_also_blocks_registration() {
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let (sub, other) = connected(&tb.url(), "appliance-test", 600.0).await;
    drop(sub);
    let specs = service("one", 1);
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;
    let s = replica
        .wait_for("refuses", WAIT, |s| {
            s.framework
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("refusing to register"))
        })
        .await;
    let reason = s.framework.reason.clone().unwrap();
    assert!(
        reason.contains(&other) && reason.contains("inactive"),
        "{reason}"
    );
    assert!(
        tb.scheduler_calls("SUBSCRIBE").len() == 1,
        "only the other framework subscribed"
    );
    replica.stop().await;
}

/// Wrong or missing credentials are not a silent retry loop: the reason and
/// an error event name the flags to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_name_the_flags_to_check() {
    let mut config = TestbedConfig::for_tests(1);
    config.credentials = Some(vec![("ops".into(), "s3cret".into())]);
    let tb = Testbed::start(config).await.unwrap();
    let specs = service("one", 1);
    // The harness sends no credentials.
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;
    let s = replica
        .wait_for("says why", WAIT, |s| {
            s.framework
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("check --principal and --secret-file"))
        })
        .await;
    assert!(
        s.events
            .iter()
            .any(|e| e.kind.as_str() == "error"
                && e.message.contains("refused our credentials (401")),
        "{:?}",
        s.events
    );
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_gauge_sums_to_one_over_replicas() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let specs = service("one", 1);
    let a = Replica::start(
        &zk.connect_string(),
        "a",
        &tb.url(),
        specs.clone(),
        core_config(),
    )
    .await;
    a.wait_for("running", WAIT, |s| running(s, "one") == 1)
        .await;
    let b = Replica::start(&zk.connect_string(), "b", &tb.url(), specs, core_config()).await;
    b.wait_for("follows", WAIT, |s| {
        s.leader_url().is_some() && s.framework.state == FrameworkState::Standby
    })
    .await;
    let text = |r: &Replica| {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r.registry).unwrap();
        out
    };
    assert!(
        text(&a).contains("mesos_appliance_framework_subscribed 1"),
        "{}",
        text(&a)
    );
    assert!(
        text(&b).contains("mesos_appliance_framework_subscribed 0"),
        "{}",
        text(&b)
    );
    assert!(text(&a).contains("leader 1") && text(&b).contains("leader 0"));
    assert!(text(&a).contains("mesos_appliance_status_updates_total{state=\"TASK_RUNNING\",source=\"SOURCE_EXECUTOR\",reason=\"none\"} 1"), "{}", text(&a));
    a.stop().await;
    b.wait_for("b leads", WAIT, |s| {
        s.framework.state == FrameworkState::Subscribed
    })
    .await;
    assert!(text(&b).contains("mesos_appliance_framework_subscribed 1"));
    b.stop().await;
}

/// Explicit reconciliation asked over and over while hundreds of tasks
/// launch (a dashboard button pressed repeatedly, a script): a task whose
/// ACCEPT the master has not processed yet must not be asked about (the
/// master answers TASK_GONE), or its instance is launched again while the
/// first task starts anyway. At the end every instance runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_reconciliation_during_a_launch_never_runs_an_instance_twice() {
    const INSTANCES: usize = 300;
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let specs = services(json!([
        {"name": "many", "command": "x", "cpus": 0.01, "mem": 1, "instances": INSTANCES}
    ]));
    let mut core = core_config();
    core.reconcile.cooldown = Duration::ZERO;
    let replica = Replica::start(&zk.connect_string(), "r1", &tb.url(), specs, core).await;
    let handle = replica.handle.clone();
    let asking = tokio::spawn(async move {
        let mut asked = 0;
        for _ in 0..2_000 {
            let answer = handle
                .request::<ReconcileRun>(
                    Duration::from_secs(5),
                    Request::Reconcile(mesos_appliance::scheduler::ReconcileKind::Explicit),
                )
                .await;
            asked += usize::from(answer.is_ok());
            tokio::time::sleep(Duration::from_millis(5)).await;
            if running(&handle.snapshot(), "many") >= INSTANCES {
                break;
            }
        }
        asked
    });
    replica
        .wait_for("all running", Duration::from_secs(60), |s| {
            running(s, "many") >= INSTANCES
        })
        .await;
    assert!(asking.await.unwrap() > 10, "reconciliation was asked for");
    // Late starts of doubly launched tasks would show up now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let live_on_master = tb
        .tasks()
        .iter()
        .filter(|t| !mesos_appliance::mesos::is_terminal(t.state))
        .count();
    let s = replica.snapshot();
    let live_records = s.tasks.iter().filter(|t| !t.is_terminal()).count();
    assert_eq!(
        (live_on_master, live_records, running(&s, "many")),
        (INSTANCES, INSTANCES, INSTANCES),
        "one task per instance on the master and in the records"
    );
    replica.stop().await;
}
