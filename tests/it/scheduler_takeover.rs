//! A follower's takeover on a real ZooKeeper and the testbed: the task
//! records it kept current while following (`standby`, `RecordMirror`) are
//! not read again when it is elected; only the records that changed since
//! are.

use crate::support;

use std::time::Duration;

use mesos_appliance::scheduler::FrameworkState;
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::zookeeper::{ZkServer, raw_client};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);

/// r2 follows r1, which runs 12 tasks, and shows all 12 in its standby
/// view (its mirror read them), and refreshes once more. Then one task record is made unreadable
/// (an ACL without READ; `setACL` changes no data and fires no watch):
/// a replica that reads every record on election cannot start its term
/// (it fails, retries and abdicates), while r2, which reads only what
/// changed, adopts all 12 tasks and reconciles them, launching and killing
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_does_not_read_again_the_records_it_kept_while_following() {
    let zk = ZkServer::start();
    let tb = mesos_appliance::testbed::Testbed::start(
        mesos_appliance::testbed::TestbedConfig::for_tests(3),
    )
    .await
    .unwrap();
    let specs = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.2, "mem": 64, "instances": 12}
    ]));
    let (connect, master) = (zk.connect_string(), tb.url());
    let start =
        |name: &'static str| Replica::start(&connect, name, &master, specs.to_vec(), core_config());
    let first = start("r1").await;
    let s = first
        .wait_for("12 running", WAIT, |s| running(s, "web") == 12)
        .await;
    let mut before: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    before.sort();
    let second = start("r2").await;
    let shown = second
        .wait_for("r2 follows and shows the 12 tasks", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && running(s, "web") == 12
        })
        .await
        .at;
    // The writes r2 saw came with watch events, read again at its next
    // refresh: from then on nothing changed.
    second
        .wait_for("r2 refreshed once more", WAIT, |s| s.at > shown)
        .await;

    let raw = raw_client(&zk).await;
    let hidden = format!("/appliance/tasks/{}", before[0]);
    let no_read = zk::Permission::WRITE
        | zk::Permission::CREATE
        | zk::Permission::DELETE
        | zk::Permission::ADMIN;
    raw.set_acl(
        &hidden,
        &[zk::Acl::new(no_read, zk::AuthId::anyone())],
        None,
    )
    .await
    .unwrap();
    assert!(
        matches!(raw.get_data(&hidden).await, Err(zk::Error::NoAuth)),
        "the record is unreadable"
    );
    let mark = tb.calls().len();

    // Its end-of-test checks read every record; this one they cannot.
    first.expect_disagreement("one task record is unreadable on purpose (an ACL without READ)");
    first.stop().await;
    let s = second
        .wait_for("r2 adopted every task", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
                && running(s, "web") == 12
                && s.reconciliation.history.iter().any(|r| {
                    r.trigger.as_str() == "subscribed" && r.outcome.as_str() == "converged"
                })
        })
        .await;
    let mut after: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    after.sort();
    assert_eq!(after, before, "the same tasks, no new ones");
    let calls = &tb.calls()[mark..];
    assert!(calls.iter().all(|c| c.call_type != "KILL"), "no KILL");
    assert!(
        calls.iter().all(|c| c.launched_task_ids().is_empty()),
        "no launch"
    );

    raw.set_acl(&hidden, &zk::Acls::anyone_all(), None)
        .await
        .unwrap();
    second.stop().await;
}
