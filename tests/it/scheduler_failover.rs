//! The scheduler across its own failover, on a real ZooKeeper and the
//! testbed: a new leader adopts every task without launching or killing
//! anything; a status update whose ZooKeeper write fails is not
//! acknowledged (Mesos re-delivers it) and is acknowledged once stored;
//! explicit reconciliation after failover replaces a task the master never
//! heard of and the implicit one kills a task the store lost; a launch's
//! first TASK_RUNNING, acknowledged ahead of its write, is stored by the
//! next leader when that write failed.

use crate::support;

use std::time::Duration;

use mesos_appliance::scheduler::{FrameworkState, ServiceSpec};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::zookeeper::ZkServer;
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);

/// Replica `name` of `specs` on `zk` and master `tb`, with the tests' core
/// configuration.
async fn replica(zk: &ZkServer, name: &str, tb: &Testbed, specs: &[ServiceSpec]) -> Replica {
    Replica::start(
        &zk.connect_string(),
        name,
        &tb.url(),
        specs.to_vec(),
        core_config(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_leader_adopts_twenty_tasks_without_launching_or_killing() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(5)).await.unwrap();
    let specs = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.2, "mem": 64, "instances": 10, "executor": "appliance"},
        {"name": "worker", "command": "work", "cpus": 0.2, "mem": 64, "instances": 10}
    ]));
    let first = replica(&zk, "r1", &tb, &specs).await;
    let s = first
        .wait_for("20 running", WAIT, |s| {
            running(s, "web") == 10 && running(s, "worker") == 10
        })
        .await;
    let tasks_before: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    let fid = s.framework.id.clone().unwrap();
    let second = replica(&zk, "r2", &tb, &specs).await;
    second
        .wait_for("r2 follows", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && s.leader_url().is_some()
        })
        .await;
    let mark = tb.calls().len();

    first.stop().await;
    let s = second
        .wait_for("r2 adopted every task", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
                && running(s, "web") == 10
                && running(s, "worker") == 10
                && s.reconciliation.history.iter().any(|r| {
                    r.trigger.as_str() == "subscribed" && r.outcome.as_str() == "converged"
                })
        })
        .await;
    assert_eq!(
        s.framework.id.as_deref(),
        Some(fid.as_str()),
        "same framework ID"
    );
    let mut after: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    after.sort();
    let mut before = tasks_before.clone();
    before.sort();
    assert_eq!(after, before, "the same tasks, no new ones");
    let run = s
        .reconciliation
        .history
        .iter()
        .find(|r| r.trigger.as_str() == "subscribed")
        .unwrap();
    assert_eq!((run.asked, run.answered), (20, 20));

    let calls = &tb.calls()[mark..];
    let subscribes: Vec<_> = calls
        .iter()
        .filter(|c| c.call_type == "SUBSCRIBE")
        .collect();
    assert_eq!(subscribes.len(), 1, "one SUBSCRIBE, by the new leader");
    assert_eq!(subscribes[0].framework_id.as_deref(), Some(fid.as_str()));
    assert!(
        calls.iter().all(|c| c.call_type != "KILL"),
        "zero KILL calls"
    );
    let launched: Vec<String> = calls.iter().flat_map(|c| c.launched_task_ids()).collect();
    assert!(launched.is_empty(), "zero launches: {launched:?}");
    assert_eq!(tb.tasks().len(), 20);
    second.stop().await;
}

/// A new leader whose explicit reconciliation asks about 3 tasks at a time
/// (`ReconcilerConfig::explicit_slice`; 5,000 by default) adopts 20 tasks
/// on the testbed: its RECONCILE calls each name at most 3 (a retry names
/// the unanswered and the next slice), together every task, and the run
/// converges with all 20 answered, nothing launched or killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_reconciles_in_slices() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(5)).await.unwrap();
    let specs = services(json!([
        {"name": "worker", "command": "work", "cpus": 0.2, "mem": 64, "instances": 20}
    ]));
    let first = replica(&zk, "r1", &tb, &specs).await;
    first
        .wait_for("20 running", WAIT, |s| running(s, "worker") == 20)
        .await;
    let mut sliced = core_config();
    sliced.reconcile.explicit_slice = 3;
    let second = Replica::start(&zk.connect_string(), "r2", &tb.url(), specs, sliced).await;
    second
        .wait_for("r2 follows", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && s.leader_url().is_some()
        })
        .await;
    let mark = tb.calls().len();
    first.stop().await;
    let s = second
        .wait_for("r2 reconciled every task", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
                && s.reconciliation.history.iter().any(|r| {
                    r.trigger.as_str() == "subscribed" && r.outcome.as_str() == "converged"
                })
        })
        .await;
    let run = s
        .reconciliation
        .history
        .iter()
        .find(|r| r.trigger.as_str() == "subscribed")
        .unwrap();
    assert_eq!((run.asked, run.answered), (20, 20));
    assert!(
        run.calls >= 7,
        "20 tasks in slices of 3: {} calls",
        run.calls
    );
    let calls = &tb.calls()[mark..];
    let asked: Vec<Vec<String>> = calls
        .iter()
        .filter(|c| c.call_type == "RECONCILE")
        .map(|c| {
            c.call["reconcile"]["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["task_id"]["value"].as_str().map(str::to_string))
                .collect()
        })
        .collect();
    let explicit: Vec<&Vec<String>> = asked.iter().filter(|a| !a.is_empty()).collect();
    // The first slice names 3; a later call names at most the 4 asked and
    // unanswered (a slice and a half) and the next slice, on a retry.
    assert_eq!(explicit.first().map(|a| a.len()), Some(3), "{asked:?}");
    assert!(
        explicit.len() >= 7 && explicit.iter().all(|a| a.len() <= 7),
        "slices of at most 3: {asked:?}"
    );
    let mut named: Vec<&String> = explicit.iter().flat_map(|a| a.iter()).collect();
    named.sort();
    named.dedup();
    assert_eq!(named.len(), 20, "every task asked about: {asked:?}");
    assert!(
        calls.iter().all(|c| c.call_type != "KILL"),
        "zero KILL calls"
    );
    let launched: Vec<String> = calls.iter().flat_map(|c| c.launched_task_ids()).collect();
    assert!(launched.is_empty(), "zero launches: {launched:?}");
    second.stop().await;
}

/// Locks a znode so that only the `locker` identity may touch it.
async fn lock_znode(zk_connect: &str, path: &str) -> zk::Client {
    let client = zk::Client::connector()
        .with_auth("digest", b"locker:secret")
        .connect(zk_connect)
        .await
        .unwrap();
    client
        .set_acl(path, &zk::Acls::creator_all(), None)
        .await
        .unwrap();
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_is_acknowledged_only_after_it_is_stored() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let specs = services(
        json!([{"name": "one", "command": "x", "cpus": 0.1, "mem": 32, "instances": 1, "executor": "appliance"}]),
    );
    let replica = replica(&zk, "r1", &tb, &specs).await;
    let s = replica
        .wait_for("running", WAIT, |s| running(s, "one") == 1)
        .await;
    let task = s
        .tasks
        .iter()
        .find(|t| t.state.as_str_name() == "TASK_RUNNING")
        .unwrap()
        .clone();
    let locker = lock_znode(
        &zk.connect_string(),
        &format!("/appliance/tasks/{}", task.task_id),
    )
    .await;

    // The executor exits: TASK_FAILED with a uuid, which must be stored first.
    let results: Vec<mesos_appliance::scheduler::KamikazeResult> = replica
        .handle
        .request(
            Duration::from_secs(5),
            mesos_appliance::scheduler::Request::Kamikaze,
        )
        .await
        .unwrap();
    assert_eq!(results.len(), 1);
    replica
        .wait_for("the failed write is reported", WAIT, |s| {
            s.events
                .iter()
                .any(|e| e.message.contains("not acknowledged"))
        })
        .await;
    // Redelivered at least once (retry 1 s), never acknowledged while locked.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let acks_while_locked = tb
        .scheduler_calls("ACKNOWLEDGE")
        .into_iter()
        .filter(|c| c.call["acknowledge"]["task_id"]["value"] == task.task_id.as_str())
        .count();
    assert_eq!(
        acks_while_locked, 2,
        "STARTING and RUNNING only; the FAILED update is not acknowledged"
    );
    let pending = tb
        .tasks()
        .into_iter()
        .find(|t| t.task_id == task.task_id)
        .unwrap();
    assert_eq!(pending.unacknowledged_updates, 1);
    let failures = replica
        .snapshot()
        .events
        .iter()
        .filter(|e| e.message.contains("not acknowledged"))
        .count();
    assert!(
        failures >= 2,
        "the update was re-delivered: {failures} failed writes"
    );

    // Unlock: the next re-delivery is stored, then acknowledged.
    locker
        .set_acl(
            &format!("/appliance/tasks/{}", task.task_id),
            &zk::Acls::anyone_all(),
            None,
        )
        .await
        .unwrap();
    replica
        .wait_for("the failure is stored", WAIT, |s| {
            s.tasks
                .iter()
                .any(|t| t.task_id == task.task_id && t.state.as_str_name() == "TASK_FAILED")
        })
        .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while tb.tasks().iter().any(|t| t.task_id == task.task_id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the FAILED update was never acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    replica
        .wait_for("replaced", WAIT, |s| running(s, "one") == 1)
        .await;
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_after_failover_replaces_unknown_tasks_and_kills_unrecorded_ones() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(3)).await.unwrap();
    let specs =
        services(json!([{"name": "svc", "command": "x", "cpus": 0.1, "mem": 32, "instances": 3}]));
    let first = replica(&zk, "r1", &tb, &specs).await;
    let s = first
        .wait_for("3 running", WAIT, |s| running(s, "svc") == 3)
        .await;
    let agent = s.tasks[0].agent_id.clone();
    first.stop().await;

    // While no scheduler runs: the store loses one record, and gains one for
    // a task the master never saw (instance 2 now has a phantom twin).
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let delete_record_of = |instance: u32| {
        let task_id = s
            .tasks
            .iter()
            .find(|t| t.instance == instance)
            .unwrap()
            .task_id
            .to_string();
        let client = &client;
        async move {
            client
                .delete(&format!("/appliance/tasks/{task_id}"), None)
                .await
                .unwrap();
            task_id
        }
    };
    let lost_record = delete_record_of(0).await;
    let phantom = "svc.1.00000000-0000-4000-8000-000000000000";
    let replaced = delete_record_of(1).await;
    let mut record =
        serde_json::to_value(s.tasks.iter().find(|t| t.instance == 1).unwrap().as_ref()).unwrap();
    record["task_id"] = json!(phantom);
    record["agent_id"] = json!(agent);
    client
        .create(
            &format!("/appliance/tasks/{phantom}"),
            &serde_json::to_vec(&record).unwrap(),
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();

    // The first KILLs of one unrecorded task go unheeded: the leader keeps
    // at it, and says so.
    tb.ignore_kill(&lost_record);
    let second = replica(&zk, "r2", &tb, &specs).await;
    let s = second
        .wait_for("the unheeded kill is shown", WAIT, |s| {
            s.unrecorded_kills
                .iter()
                .any(|k| k.task_id == lost_record && k.attempts >= 2)
        })
        .await;
    assert!(s.tasks.iter().all(|t| t.task_id != lost_record));
    tb.clear_faults();
    let s = second
        .wait_for(
            "converged: 3 running, phantom lost, unrecorded tasks killed",
            WAIT,
            |s| {
                let phantom_lost = s
                    .tasks
                    .iter()
                    // TASK_GONE: the answer to a PARTITION_AWARE framework
                    // (`Master::reconcile`, `src/master/master.cpp`).
                    .any(|t| t.task_id == phantom && t.state.as_str_name() == "TASK_GONE");
                let master_tasks = tb.tasks();
                let unrecorded_gone = !master_tasks
                    .iter()
                    .any(|t| t.task_id == lost_record || t.task_id == replaced);
                phantom_lost
                    && unrecorded_gone
                    && running(s, "svc") == 3
                    && s.unrecorded_kills.is_empty()
            },
        )
        .await;
    let phantom_status = s.tasks.iter().find(|t| t.task_id == phantom).unwrap();
    assert_eq!(
        phantom_status.timeline.last().unwrap().message.as_deref(),
        Some("Reconciliation: Task is unknown to the agent")
    );
    let killed: Vec<String> = tb
        .scheduler_calls("KILL")
        .into_iter()
        .map(|c| {
            c.call["kill"]["task_id"]["value"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(
        killed.contains(&lost_record) && killed.contains(&replaced),
        "{killed:?}"
    );
    assert_eq!(
        tb.tasks()
            .iter()
            .filter(|t| t.state.as_str_name() == "TASK_RUNNING")
            .count(),
        3
    );
    second.stop().await;
}

/// A Mesos master failover under a running appliance
/// (`docs/mesos-protocol.md#master-failover`; the
/// reconciliation guide: reconcile after every re-registration). The stream
/// breaks, the leader re-subscribes with the same framework ID, and its
/// explicit reconciliation goes unanswered until the agents re-register
/// with the new master; then every task answers TASK_RUNNING. Nothing is
/// launched or killed on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesos_master_failover_loses_no_task() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(3)).await.unwrap();
    let specs =
        services(json!([{"name": "svc", "command": "x", "cpus": 0.1, "mem": 32, "instances": 6}]));
    let replica = replica(&zk, "r1", &tb, &specs).await;
    let s = replica
        .wait_for("6 running", WAIT, |s| running(s, "svc") == 6)
        .await;
    let fid = s.framework.id.clone().unwrap();
    let mut before: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    before.sort();
    let subscribed_runs = |s: &mesos_appliance::scheduler::Snapshot| {
        s.reconciliation
            .history
            .iter()
            .filter(|r| r.trigger.as_str() == "subscribed")
            .count()
    };
    let runs_before = subscribed_runs(&s);
    let mark = tb.calls().len();

    tb.simulate_master_failover(Duration::from_secs(2));
    let s = replica
        .wait_for("re-subscribed and reconciled", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
                && subscribed_runs(s) > runs_before
                && s.reconciliation
                    .history
                    .iter()
                    .rev()
                    .find(|r| r.trigger.as_str() == "subscribed")
                    .is_some_and(|r| r.outcome.as_str() == "converged" && r.answered == 6)
        })
        .await;
    assert_eq!(
        s.framework.id.as_deref(),
        Some(fid.as_str()),
        "same framework ID"
    );
    assert_eq!(running(&s, "svc"), 6);
    let mut after: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    after.sort();
    assert_eq!(after, before, "the same tasks");

    let calls = &tb.calls()[mark..];
    let subscribe = calls
        .iter()
        .position(|c| c.call_type == "SUBSCRIBE")
        .expect("re-subscribed");
    assert_eq!(calls[subscribe].framework_id.as_deref(), Some(fid.as_str()));
    assert!(
        calls[subscribe..]
            .iter()
            .any(|c| c.call_type == "RECONCILE"),
        "explicit reconciliation after re-subscribing"
    );
    assert!(calls.iter().all(|c| c.call_type != "KILL"), "no KILL");
    let launched: Vec<String> = calls.iter().flat_map(|c| c.launched_task_ids()).collect();
    assert!(launched.is_empty(), "no launches: {launched:?}");
    replica.stop().await;
}

/// A launch's first TASK_RUNNING is acknowledged ahead of its write
/// (`ahead_of_store` in `src/scheduler/core/machine/tasks.rs`): with the
/// task's znode locked between its creation and that update, the leader
/// shows it running and the master has its acknowledgement, while
/// ZooKeeper still says TASK_STAGING. The next leader reconciles the
/// record and stores TASK_RUNNING itself, launching and killing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_running_acknowledged_ahead_of_its_write_is_stored_by_the_next_leader() {
    let zk = ZkServer::start();
    // Two seconds from ACCEPT to TASK_STARTING: time to lock the record.
    let tb = Testbed::start(TestbedConfig {
        launch_delay: Duration::from_secs(2),
        ..TestbedConfig::for_tests(2)
    })
    .await
    .unwrap();
    let specs =
        services(json!([{"name": "one", "command": "x", "cpus": 0.1, "mem": 32, "instances": 1}]));
    let first = replica(&zk, "r1", &tb, &specs).await;
    let s = first
        .wait_for("a record", WAIT, |s| s.tasks.len() == 1)
        .await;
    let task = s.tasks[0].task_id.to_string();
    assert_eq!(s.tasks[0].state.as_str_name(), "TASK_STAGING");
    let path = format!("/appliance/tasks/{task}");
    let locker = lock_znode(&zk.connect_string(), &path).await;
    let stored_state = |data: &[u8]| {
        let record: serde_json::Value = serde_json::from_slice(data).unwrap();
        record["state"].as_str().unwrap_or("").to_string()
    };

    first
        .wait_for("running, its write refused", WAIT, |s| {
            running(s, "one") == 1
                && s.events
                    .iter()
                    .any(|e| e.message.contains("kept in memory"))
        })
        .await;
    let acks = |task: &str| {
        tb.scheduler_calls("ACKNOWLEDGE")
            .into_iter()
            .filter(|c| c.call["acknowledge"]["task_id"]["value"] == task)
            .count()
    };
    assert_eq!(acks(&task), 2, "STARTING and RUNNING acknowledged");
    let at_master = tb.tasks().into_iter().find(|t| t.task_id == task).unwrap();
    assert_eq!(at_master.unacknowledged_updates, 0);
    let (data, stat) = locker.get_data(&path).await.unwrap();
    assert_eq!(
        (stored_state(&data), stat.version),
        ("TASK_STAGING".to_string(), 0),
        "the store still holds the record as created"
    );

    // A failover stop; the next leader finds TASK_STAGING and asks the master.
    first.expect_disagreement("its TASK_RUNNING write is refused on purpose");
    first.stop().await;
    locker
        .set_acl(&path, &zk::Acls::anyone_all(), None)
        .await
        .unwrap();
    let accepts = tb.scheduler_calls("ACCEPT").len();
    let second = replica(&zk, "r2", &tb, &specs).await;
    let raw = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (data, _) = raw.get_data(&path).await.unwrap();
        if stored_state(&data) == "TASK_RUNNING" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the next leader never stored TASK_RUNNING"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = second
        .wait_for("the same task running", WAIT, |s| running(s, "one") == 1)
        .await;
    assert_eq!(s.tasks.len(), 1);
    assert_eq!(s.tasks[0].task_id.to_string(), task);
    assert_eq!(tb.scheduler_calls("ACCEPT").len(), accepts, "no launch");
    assert!(tb.scheduler_calls("KILL").is_empty(), "no kill");
    second.stop().await;
}
