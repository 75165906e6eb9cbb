//! The leader and a slow or contested ZooKeeper: a write held for seconds
//! holds up neither the event stream nor commands; a service record
//! written behind the leader's back answers 409; losing leadership during a
//! write answers as a follower does (503 with the new leader's `Location`).

use crate::support;

use std::time::Duration;

use axum::http::StatusCode;
use mesos_appliance::coordination::{CoordinationError, Leadership};
use mesos_appliance::scheduler::{CommandError, ReconcileKind, ReconcileRun, Request, ServiceSpec};
use mesos_appliance::testbed::TestbedConfig;
use mesos_appliance::web::error::AppError;
use serde_json::json;
use support::appliance::{Replica, core_config, put_service, running, services, zk_config};
use support::zk_write_hold::ZkWriteHold;
use support::zookeeper::ZkServer;
use tokio::time::Instant;
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);
/// How long ZooKeeper holds each write in these tests (the issue asks for
/// 2 s; a little more leaves room for a loaded machine, with heartbeats
/// every second).
const HOLD: Duration = Duration::from_secs(3);

fn web(instances: u32) -> ServiceSpec {
    services(json!([
        {"name": "web", "command": "sleep 1000", "cpus": 0.1, "mem": 16, "instances": instances}
    ]))
    .remove(0)
}

/// A replica whose ZooKeeper traffic goes through `hold`, with a session
/// long enough that held writes do not time out.
async fn replica_behind(hold: &ZkWriteHold, name: &str, master: &str) -> Replica {
    let config =
        zk_config(&hold.connect_string(), name).with_session_timeout(Duration::from_secs(8));
    Replica::start_with(config, master, vec![web(2)], core_config()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_holds_up_neither_the_stream_nor_commands() {
    let zk = ZkServer::start();
    let hold = ZkWriteHold::start(zk.addr()).await;
    // Heartbeats every second.
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let replica = replica_behind(&hold, "r1", &tb.url()).await;
    replica
        .wait_for("2 running", WAIT, |s| running(s, "web") == 2)
        .await;

    hold.hold(HOLD);
    let started = Instant::now();
    let slow = tokio::spawn({
        let handle = replica.handle.clone();
        async move { put_service(&handle, web(3)).await }
    });
    // While the service write is held: heartbeats keep coming in...
    let before = replica
        .snapshot()
        .framework
        .last_event_at
        .expect("events seen");
    replica
        .wait_for("a later heartbeat", HOLD, |s| {
            s.framework
                .last_event_at
                .is_some_and(|at| at >= before + 0.9)
        })
        .await;
    assert!(
        !slow.is_finished(),
        "the heartbeat was read while the write was held"
    );
    // ...and commands are answered at once.
    let mut answers = Vec::new();
    for _ in 0..5 {
        let asked = Instant::now();
        let run = replica
            .handle
            .request::<ReconcileRun>(
                Duration::from_secs(5),
                Request::Reconcile(ReconcileKind::Implicit),
            )
            .await
            .expect("reconciliation accepted");
        answers.push(asked.elapsed());
        assert_eq!(run.kind, ReconcileKind::Implicit);
    }
    assert!(!slow.is_finished(), "the write is still held");
    assert!(
        started.elapsed() < HOLD,
        "all of this happened while the write was held"
    );
    let best = answers.iter().min().unwrap();
    assert!(*best < Duration::from_millis(100), "{answers:?}");
    assert!(
        answers.iter().all(|a| *a < Duration::from_secs(1)),
        "{answers:?}"
    );
    // The write lands, and the third instance runs.
    assert_eq!(slow.await.unwrap(), Ok(true));
    assert!(started.elapsed() >= HOLD - Duration::from_millis(100));
    hold.hold(Duration::ZERO);
    replica
        .wait_for("3 running", WAIT, |s| running(s, "web") == 3)
        .await;
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_written_behind_the_leaders_back_answers_409() {
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        vec![web(1)],
        core_config(),
    )
    .await;
    replica
        .wait_for("1 running", WAIT, |s| running(s, "web") == 1)
        .await;
    // Someone rewrites the record in ZooKeeper.
    let raw = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let (data, _) = raw.get_data("/appliance/services/web").await.unwrap();
    raw.set_data("/appliance/services/web", &data, None)
        .await
        .unwrap();

    let error = replica.put_service(web(2)).await.unwrap_err();
    assert!(
        matches!(
            error,
            CommandError::Store(CoordinationError::VersionConflict { .. })
        ),
        "{error:?}"
    );
    let answer = AppError::from_command(error, "/api/v1/services/web");
    assert_eq!(answer.status, StatusCode::CONFLICT);
    // The leader read the services again: the next write goes through.
    let deadline = Instant::now() + WAIT;
    loop {
        match replica.put_service(web(2)).await {
            Ok(replaced) => {
                assert!(replaced);
                break;
            }
            Err(e) if Instant::now() < deadline => {
                tracing::info!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    replica
        .wait_for("2 running", WAIT, |s| running(s, "web") == 2)
        .await;
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_leadership_during_a_write_answers_as_a_follower() {
    let zk = ZkServer::start();
    let hold = ZkWriteHold::start(zk.addr()).await;
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let a = replica_behind(&hold, "a", &tb.url()).await;
    a.wait_for("a runs 2", WAIT, |s| running(s, "web") == 2)
        .await;
    let b = Replica::start(
        &zk.connect_string(),
        "b",
        &tb.url(),
        vec![web(2)],
        core_config(),
    )
    .await;
    b.wait_for("b follows", WAIT, |s| {
        matches!(&s.leadership, Leadership::Follower { leader: Some(l) } if l.replica_id == "a")
    })
    .await;

    let before = hold.held_writes();
    hold.hold(HOLD);
    let write = tokio::spawn({
        let handle = a.handle.clone();
        async move { put_service(&handle, web(3)).await }
    });
    // While it is held, A's member node goes: B leads, A's write is fenced.
    hold.wait_held_write(before, HOLD).await;
    let raw = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let members = raw.list_children("/appliance/election").await.unwrap();
    let mut members: Vec<String> = members;
    members.sort();
    raw.delete(&format!("/appliance/election/{}", members[0]), None)
        .await
        .unwrap();
    let error = write.await.unwrap().unwrap_err();
    let CommandError::NotLeader { leader_url } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(leader_url.as_deref(), Some("http://b.test:8080"));
    let answer = AppError::from_command(error, "/api/v1/services/web");
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        answer.location.as_deref(),
        Some("http://b.test:8080/api/v1/services/web")
    );
    hold.hold(Duration::ZERO);
    a.stop().await;
    b.stop().await;
}

/// A launch stores each task's record twice, not three times: created
/// (TASK_STAGING, before the ACCEPT), then TASK_RUNNING, which carries the
/// executor's TASK_STARTING that was acknowledged without a write
/// (`tasks::start_kept_in_memory`). Read from ZooKeeper itself: every task
/// record is at version 1 with STARTING then RUNNING in its timeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_writes_each_record_twice_with_starting_carried_by_running() {
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        vec![web(4)],
        core_config(),
    )
    .await;
    let s = replica
        .wait_for("4 running", WAIT, |s| running(s, "web") == 4)
        .await;
    let raw = zk::Client::connect(&zk.connect_string()).await.unwrap();
    for task in s.tasks.iter() {
        let path = format!("/appliance/tasks/{}", task.task_id);
        let (data, stat) = raw.get_data(&path).await.unwrap();
        let record: serde_json::Value = serde_json::from_slice(&data).unwrap();
        let states: Vec<&str> = record["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["state"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            (stat.version, record["state"].as_str(), states),
            (
                1,
                Some("TASK_RUNNING"),
                vec!["TASK_STARTING", "TASK_RUNNING"]
            ),
            "{path}: {record}"
        );
    }
    replica.stop().await;
}
