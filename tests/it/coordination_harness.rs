//! The ZooKeeper test harness itself, checked against the real server with
//! the bare `zookeeper-client` crate: a server starts and serves, a session
//! can be expired on demand, the chaos proxy cuts, restores and slows down a
//! client, and a restarted server keeps its data. And the replica
//! harness's end-of-test checks (`support::checks`) fail on a deliberate
//! disagreement, and keep quiet when a test opts out.

use crate::support;

use std::time::Duration;

use support::chaos_proxy::ChaosProxy;
use support::zookeeper::{ZkServer, expire_session};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(2);

async fn client(connect: &str) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(SESSION)
        .connect(connect)
        .await
        .expect("connect")
}

/// Creates `path` holding `data`, open to anyone.
async fn create(client: &zk::Client, path: &str, data: &[u8], mode: zk::CreateMode) {
    let options = mode.with_acls(zk::Acls::anyone_all());
    client.create(path, data, &options).await.expect("create");
}

/// A client that reaches `server` through a chaos proxy.
async fn proxied_client(server: &ZkServer) -> (ChaosProxy, zk::Client) {
    let proxy = ChaosProxy::start(server.addr()).await;
    let client = client(&proxy.connect_string()).await;
    (proxy, client)
}

async fn wait_state(client: &zk::Client, want: zk::SessionState, timeout: Duration) {
    let mut sw = client.state_watcher();
    let r = tokio::time::timeout(timeout, async {
        loop {
            let st = sw.state();
            if st == want {
                return;
            }
            if st.is_terminated() {
                panic!("session ended in {st:?} while waiting for {want:?}");
            }
            sw.changed().await;
        }
    })
    .await;
    assert!(r.is_ok(), "state {want:?} not reached within {timeout:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_serves_and_negotiates_short_sessions() {
    let server = ZkServer::start();
    let srvr = server.four_letter("srvr");
    assert!(
        srvr.as_deref()
            .unwrap_or_default()
            .contains("Mode: standalone"),
        "{srvr:?}"
    );
    let c = client(&server.connect_string()).await;
    assert_eq!(
        c.session_timeout(),
        SESSION,
        "server must allow a 2 s session timeout"
    );
    create(&c, "/x", b"1", zk::CreateMode::Persistent).await;
    assert_eq!(c.get_data("/x").await.unwrap().0, b"1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_session_removes_ephemerals_and_victim_sees_expired() {
    let server = ZkServer::start();
    let (proxy, victim) = proxied_client(&server).await;
    let observer = client(&server.connect_string()).await;
    create(&victim, "/e", b"", zk::CreateMode::Ephemeral).await;
    let (_, _, watch) = observer.get_and_watch_data("/e").await.unwrap();

    let mut victim_states = victim.state_watcher();
    expire_session(&server.connect_string(), victim.session().clone(), &proxy).await;

    let ev = tokio::time::timeout(Duration::from_secs(5), watch.changed())
        .await
        .expect("observer notified");
    assert_eq!(ev.event_type, zk::EventType::NodeDeleted);
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let st = victim_states.changed().await;
            if st.is_terminated() {
                return st;
            }
        }
    })
    .await
    .expect("victim learns its session ended");
    assert_eq!(end, zk::SessionState::Expired);
    assert_eq!(
        victim.get_data("/").await.unwrap_err(),
        zk::Error::SessionExpired
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_break_disconnects_and_restore_reconnects() {
    let server = ZkServer::start();
    let (proxy, c) = proxied_client(&server).await;
    create(&c, "/p", b"", zk::CreateMode::Ephemeral).await;

    proxy.break_link();
    wait_state(&c, zk::SessionState::Disconnected, Duration::from_secs(3)).await;
    proxy.restore();
    wait_state(&c, zk::SessionState::SyncConnected, Duration::from_secs(5)).await;
    // Cut shorter than the session timeout: the session and its ephemeral live.
    assert!(c.check_stat("/p").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_latency_delays_each_direction_without_adding_up() {
    let server = ZkServer::start();
    let (proxy, c) = proxied_client(&server).await;
    create(&c, "/l", b"", zk::CreateMode::Persistent).await;
    proxy.set_latency(Duration::from_millis(300), Duration::from_millis(200));
    // Ten reads in flight at once take one round trip, not ten.
    let t0 = std::time::Instant::now();
    let reads = (0..10).map(|_| c.check_stat("/l"));
    for read in futures::future::join_all(reads).await {
        assert!(read.unwrap().is_some());
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_millis(1500),
        "ten pipelined reads over a 500 ms round trip took {took:?}"
    );
    proxy.set_latency(Duration::ZERO, Duration::ZERO);
    let t0 = std::time::Instant::now();
    c.check_stat("/l").await.unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(400),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_data_and_port() {
    let mut server = ZkServer::start();
    let c = client(&server.connect_string()).await;
    create(&c, "/keep", b"v", zk::CreateMode::Persistent).await;
    server.restart();
    let c2 = client(&server.connect_string()).await;
    assert_eq!(c2.get_data("/keep").await.unwrap().0, b"v");
}

/// Drops `replica` (named `r1`) and asserts that its end-of-test checks
/// panicked, naming it and saying `expected`.
fn assert_drop_fails_with(replica: support::appliance::Replica, expected: &str) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(replica)));
    let payload = result.expect_err("the end-of-test checks did not fail");
    let failure = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| "a panic without a message".into());
    assert!(failure.contains("replica r1"), "{failure}");
    assert!(failure.contains(expected), "{failure}");
}

/// ZooKeeper, a one-agent testbed and one replica with one `sleep` task,
/// once the master has seen that task's TASK_RUNNING acknowledged; and the
/// task's ID.
async fn one_acknowledged_task() -> (
    ZkServer,
    mesos_appliance::testbed::Testbed,
    support::appliance::Replica,
    String,
) {
    use support::appliance::{Replica, core_config, running, services};
    let zk = ZkServer::start();
    let tb = support::testbed(mesos_appliance::testbed::TestbedConfig::for_tests(1)).await;
    let specs = services(serde_json::json!([
        {"name": "web", "command": "sleep 1000", "cpus": 0.1, "mem": 16, "instances": 1}
    ]));
    let replica = Replica::start(&zk.connect_string(), "r1", &tb.url(), specs, core_config()).await;
    let s = replica
        .wait_for("1 running", Duration::from_secs(30), |s| {
            running(s, "web") == 1
        })
        .await;
    let id = s.tasks[0].task_id.to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !tb.tasks().iter().any(|t| {
        t.task_id == id
            && t.acknowledged == Some(mesos_appliance::mesos::v1::TaskState::TaskRunning)
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "RUNNING not acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (zk, tb, replica, id)
}

/// The "no ACK before its store" check of a replica's drop: a record
/// deleted behind the leader's back after its RUNNING was acknowledged is an
/// acknowledged update the store does not reflect.
#[tokio::test]
async fn the_drop_check_finds_an_acknowledged_update_missing_from_the_store() {
    let (zk, _tb, replica, id) = one_acknowledged_task().await;
    let raw = client(&zk.connect_string()).await;
    raw.delete(&format!("/appliance/tasks/{id}"), None)
        .await
        .expect("delete the record");

    assert_drop_fails_with(
        replica,
        &format!(
            "the master saw TASK_RUNNING of task {id} acknowledged, but no task record is stored"
        ),
    );
}

/// The truth check of a replica's drop: the master ends a task (its agent
/// marked gone) and the replica, whose runtime this test holds, never hears
/// of it: it still shows the task TASK_RUNNING.
#[tokio::test]
async fn the_drop_check_finds_a_task_shown_live_that_the_master_ended() {
    let (_zk, tb, replica, id) = one_acknowledged_task().await;
    let agent = tb.agents()[0].id.clone();
    // No await from here on: the replica cannot take the update in.
    assert!(tb.mark_agent_gone(&agent));

    assert_drop_fails_with(
        replica,
        &format!(
            "r1: task {id} shown TASK_RUNNING, the master has it completed TASK_GONE_BY_OPERATOR"
        ),
    );
}

/// The opt-out: a replica told to expect a disagreement drops quietly.
#[tokio::test]
async fn a_replica_told_to_expect_a_disagreement_drops_without_checking() {
    let (_zk, tb, replica, _) = one_acknowledged_task().await;
    let agent = tb.agents()[0].id.clone();
    assert!(tb.mark_agent_gone(&agent));
    replica.expect_disagreement("this test ends a task behind the replica's back");
    drop(replica);
}
