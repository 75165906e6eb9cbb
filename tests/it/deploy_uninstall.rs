//! `mesos-appliance uninstall` with real processes, ZooKeeper and the
//! testbed: `--dry-run` changes nothing; the job fences both replicas, tears
//! the framework down, deletes the ZooKeeper subtree and exits 0; a second
//! run finds nothing and exits 0; a framework of the same name that
//! ZooKeeper does not know goes too; an unreachable or refusing (401)
//! master fails it (exit 4) with nothing deleted.

use crate::support;

use std::process::{Command, Output};
use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::processes::*;
use support::zookeeper::ZkServer;
use zookeeper_client as zk;

/// Runs `mesos-appliance uninstall` (off the async workers) and waits.
async fn uninstall(zk: &str, master: &str, extra: &[&str]) -> Output {
    let (zk, master) = (zk.to_string(), master.to_string());
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || uninstall_blocking(&zk, &master, &extra))
        .await
        .expect("uninstall thread")
}

fn uninstall_blocking(zk: &str, master: &str, extra: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mesos-appliance"))
        .args([
            "--zk",
            &format!("zk://{zk}/appliance"),
            "--zk-session-timeout",
            "2s",
            "--master",
            master,
        ])
        .args(["--framework-name", "gone", "uninstall", "--wait", "15s"])
        .args(extra)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run uninstall")
}

async fn root_exists(zk: &str) -> bool {
    let client = zk::Client::connect(zk).await.unwrap();
    client.check_stat("/appliance").await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_fences_tears_down_and_deletes_everything_once() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = services_file(
        dir.path(),
        "s.json",
        &json!([{"name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": 2}]),
    );
    let mut args = base_args(&zk.connect_string(), &tb.url(), "gone");
    args.extend([
        "--services".into(),
        file.display().to_string(),
        "--deployment-id".into(),
        "d1".into(),
    ]);
    let mut a = Appliance::spawn("a", &args);
    let state = a
        .wait_state("running", WAIT, |s| running_count(s) == 2)
        .await;
    let fid = framework_id(&state).unwrap();
    let mut b = Appliance::spawn("b", &args);
    b.wait_state("b follows", WAIT, |s| s["leadership"]["role"] == "follower")
        .await;
    // A framework of the same name and role that ZooKeeper does not know
    // (say, from an earlier installation on another ZooKeeper path).
    let (_stray_stream, stray) = support::mesos::connected(&tb.url(), "gone", 60.0).await;
    // One audited action, which uninstall shows before deleting it.
    let (status, _) = a
        .post(
            "/api/v1/actions/reconcile",
            json!({"reason": "last check before removal"}),
        )
        .await;
    assert_eq!(status, 202);

    let dry = uninstall(&zk.connect_string(), &tb.url(), &["--dry-run"]).await;
    let out = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(out.contains(&format!("tear down framework {fid}")), "{out}");
    assert!(
        out.contains(&format!("tear down framework {stray}")),
        "{out}"
    );
    assert!(out.contains("dry run: nothing changed"), "{out}");
    assert!(out.contains("replicas in the election: 2"), "{out}");
    assert!(out.contains("task records: 2"), "{out}");
    assert!(out.contains("(named \"gone\" on the master)"), "{out}");
    assert!(
        out.contains("audit trail: 1 entry (deleted with the rest)"),
        "{out}"
    );
    assert!(
        out.contains("reconcile ok") && out.contains("reason: \"last check before removal\""),
        "{out}"
    );
    assert!(a.running() && b.running());
    assert!(root_exists(&zk.connect_string()).await);
    assert!(tb.frameworks().iter().any(|f| f.id == fid && !f.completed));

    let run = uninstall(&zk.connect_string(), &tb.url(), &[]).await;
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(a.wait_exit(Duration::from_secs(10)).await.code(), Some(3));
    assert_eq!(b.wait_exit(Duration::from_secs(10)).await.code(), Some(3));
    assert!(
        out.contains("uninstalled: 2 framework(s) torn down"),
        "{out}"
    );
    assert!(out.contains("last check before removal"), "{out}");
    assert!(
        out.contains("fenced: 2 replica(s) in the election stepped down"),
        "{out}"
    );
    for id in [&fid, &stray] {
        assert!(
            tb.frameworks().iter().any(|f| &f.id == id && f.completed),
            "the master lists {id} as completed"
        );
    }
    assert!(tb.tasks().is_empty());
    assert!(
        !root_exists(&zk.connect_string()).await,
        "the subtree is gone"
    );

    let again = uninstall(&zk.connect_string(), &tb.url(), &[]).await;
    let out = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(out.contains("frameworks to tear down: none"), "{out}");
    assert!(out.contains("nothing to delete"), "{out}");
    assert!(!out.contains("deleted ZooKeeper subtree"), "{out}");
    assert!(!root_exists(&zk.connect_string()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_stopped_partway_says_so() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for path in ["/appliance/services/s1", "/appliance/tasks/t1"] {
        client.mkdir(path, &open).await.unwrap();
    }
    // tasks/ read-only: its child cannot be deleted, services/s1 can.
    client
        .set_acl("/appliance/tasks", &zk::Acls::anyone_read(), None)
        .await
        .unwrap();
    let run = uninstall(&zk.connect_string(), &tb.url(), &[]).await;
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(4), "{err}");
    assert!(err.contains("stopped partway"), "{err}");
    assert!(err.contains("run uninstall again"), "{err}");
    assert!(!err.contains("nothing was deleted"), "{err}");
    assert!(
        client
            .check_stat("/appliance/services/s1")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_with_the_master_unreachable_deletes_nothing() {
    support::mesos::init();
    let zk = ZkServer::start();
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    client
        .mkdir(
            "/appliance/tasks",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let dead = format!("http://127.0.0.1:{}", support::zookeeper::free_port());
    let run = tokio::task::spawn_blocking({
        let zk = zk.connect_string();
        move || {
            Command::new(env!("CARGO_BIN_EXE_mesos-appliance"))
                .args([
                    "--zk",
                    &format!("zk://{zk}/appliance"),
                    "--master",
                    &dead,
                    "--framework-name",
                    "gone",
                ])
                .args(["uninstall", "--wait", "2s"])
                .env("RUST_BACKTRACE", "0")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(
        run.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stderr).contains("nothing was deleted"));
    assert!(
        client
            .check_stat("/appliance/tasks")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_refused_by_the_master_deletes_nothing() {
    support::mesos::init();
    let zk = ZkServer::start();
    let mut config = TestbedConfig::for_tests(1);
    config.credentials = Some(vec![("ops".into(), "s3cret".into())]);
    let tb = Testbed::start(config).await.unwrap();
    let client = zk::Client::connect(&zk.connect_string()).await.unwrap();
    client
        .mkdir(
            "/appliance/tasks",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    // No --principal: the master answers 401 to the operator calls.
    let run = uninstall(&zk.connect_string(), &tb.url(), &[]).await;
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(4), "{err}");
    assert!(err.contains("401"), "{err}");
    assert!(err.contains("nothing was deleted"), "{err}");
    assert!(
        client
            .check_stat("/appliance/tasks")
            .await
            .unwrap()
            .is_some()
    );
}

/// A mistyped `--zk` root stores no framework ID: the same-name framework
/// the master runs may be anybody's, so uninstall refuses (exit 4, nothing
/// torn down, nothing created) until `--force` says it is to go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_refuses_same_name_frameworks_that_the_root_does_not_store() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let (_stream, id) = support::mesos::connected(&tb.url(), "gone", 60.0).await;
    let live = |tb: &Testbed| tb.frameworks().iter().any(|f| f.id == id && !f.completed);

    let dry = uninstall(&zk.connect_string(), &tb.url(), &["--dry-run"]).await;
    let out = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{out}");
    assert!(
        out.contains("refusing: the master runs 1 framework(s) of this name and role")
            && out.contains("ZooKeeper has no /appliance (is --zk right?)"),
        "{out}"
    );

    let run = uninstall(&zk.connect_string(), &tb.url(), &[]).await;
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(4), "{err}");
    assert!(err.contains("pass --force") && err.contains(&id), "{err}");
    assert!(live(&tb), "the framework still runs");
    assert!(!root_exists(&zk.connect_string()).await, "nothing created");

    let forced = uninstall(&zk.connect_string(), &tb.url(), &["--force"]).await;
    let out = String::from_utf8_lossy(&forced.stdout);
    assert!(
        forced.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert!(
        out.contains("uninstalled: 1 framework(s) torn down"),
        "{out}"
    );
    assert!(!live(&tb));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_on_an_empty_zookeeper_leaves_it_empty() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let dry = uninstall(&zk.connect_string(), &tb.url(), &["--dry-run"]).await;
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(!root_exists(&zk.connect_string()).await, "nothing created");
}
