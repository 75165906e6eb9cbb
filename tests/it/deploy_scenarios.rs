//! The four deployment scenarios
//! (`docs/deployment-strategies.md#the-four-deployment-scenarios`) with real `mesos-appliance`
//! processes, a real ZooKeeper and the testbed master: a clean start; a
//! second deployment while the old leader lives (it waits, no ping-pong);
//! the old scheduler killed within the failover timeout (same framework ID,
//! every task adopted, no kill); the failover timeout passed (state
//! `removed`, no restart loop, `/readyz` failing, no task shown live, then
//! re-registration). After each, `/api/v1/tasks` is compared with the
//! master's tasks: none is shown live that the master ended or forgot
//! ([`support::truth`]).

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::cluster::Cluster;
use support::processes::*;
use support::truth::{assert_agrees_with_master, count};

fn services() -> serde_json::Value {
    json!([
        {"name": "web", "command": "serve", "cpus": 0.1, "mem": 32, "instances": 3, "executor": "appliance"},
        {"name": "worker", "command": "work", "cpus": 0.1, "mem": 32, "instances": 2}
    ])
}

impl Cluster {
    fn args(&self, deployment: &str, extra: &[&str]) -> Vec<String> {
        let mut args = base_args(&self.zk.connect_string(), &self.tb.url(), "scenario");
        let file = services_file(self.dir.path(), "services.json", &services());
        args.extend([
            "--services".into(),
            file.display().to_string(),
            "--deployment-id".into(),
            deployment.into(),
        ]);
        with_flags(args, extra)
    }

    fn subscribes(&self) -> usize {
        self.tb.scheduler_calls("SUBSCRIBE").len()
    }
}

fn all_running(s: &serde_json::Value) -> bool {
    framework_state(s) == "subscribed" && running_count(s) == 5
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_1_clean_start_and_2_a_second_deployment_waits() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.args("d1", &[]));
    let state = a.wait_state("services running", WAIT, all_running).await;
    assert_eq!(state["leadership"]["role"], "leader");
    assert_eq!(a.get("/readyz").await.unwrap().0, 200);
    let fid = framework_id(&state).unwrap();

    // SIGHUP (logrotate, `systemctl reload`) ends no replica: without TLS
    // there is nothing to reload, and it is said so.
    let mut a = a;
    a.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !a.log().contains("SIGHUP ignored") {
        assert!(
            a.running(),
            "SIGHUP ended the replica:\n{}",
            tail(&a.log(), 20)
        );
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            tail(&a.log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(a.running());
    assert_eq!(a.get("/readyz").await.unwrap().0, 200);

    // Scenario 2: a new deployment while the old leader lives.
    let b = Appliance::spawn("b", &s.args("d2", &[]));
    let standby = b
        .wait_state("b follows a", WAIT, |st| {
            st["leadership"]["role"] == "follower"
                && st["leadership"]["leader_url"] == a.url.as_str()
        })
        .await;
    assert_eq!(framework_state(&standby), "standby");
    assert_eq!(
        framework_id(&standby).as_deref(),
        Some(fid.as_str()),
        "followers read the ID from ZooKeeper"
    );
    assert_eq!(
        b.get("/readyz").await.unwrap().0,
        200,
        "a follower of a live leader is ready"
    );
    support::client::holds_for(
        "no ping-pong: only a subscribed, once",
        Duration::from_secs(3),
        || s.subscribes() == 1,
    )
    .await;
    let still = a.state().await.unwrap();
    assert!(all_running(&still));
    // Actions on the follower point at the leader.
    let (status, body) = b
        .post("/api/v1/actions/reconcile", json!({"kind": "explicit"}))
        .await;
    assert_eq!(status, 503);
    assert_eq!(body["leader_url"], a.url.as_str(), "{body}");
    assert_agrees_with_master(&a, &s.tb, WAIT).await;
    assert_agrees_with_master(&b, &s.tb, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_3_killed_scheduler_is_replaced_with_the_same_framework_id() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.args("d1", &[]));
    let state = a.wait_state("services running", WAIT, all_running).await;
    let fid = framework_id(&state).unwrap();
    let tasks_before: Vec<String> = s.tb.tasks().into_iter().map(|t| t.task_id).collect();
    let mark = s.tb.calls().len();

    a.signal(libc::SIGKILL);
    let b = Appliance::spawn("b", &s.args("d2", &[]));
    let state = b
        .wait_state("b adopted every task", WAIT, |st| {
            all_running(st)
                && st["reconciliation"]["last"]["trigger"] == "subscribed"
                && st["reconciliation"]["last"]["outcome"] == "converged"
        })
        .await;
    assert_eq!(framework_id(&state).as_deref(), Some(fid.as_str()));
    let calls = &s.tb.calls()[mark..];
    let subscribe: Vec<_> = calls
        .iter()
        .filter(|c| c.call_type == "SUBSCRIBE")
        .collect();
    assert_eq!(subscribe.len(), 1);
    assert_eq!(
        subscribe[0].framework_id.as_deref(),
        Some(fid.as_str()),
        "re-subscribed with the stored ID"
    );
    assert!(calls.iter().all(|c| c.call_type != "KILL"), "zero kills");
    assert!(
        calls.iter().all(|c| c.launched_task_ids().is_empty()),
        "zero launches"
    );
    let mut after: Vec<String> = s.tb.tasks().into_iter().map(|t| t.task_id).collect();
    after.sort();
    let mut before = tasks_before;
    before.sort();
    assert_eq!(after, before);
    assert_agrees_with_master(&b, &s.tb, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_4_removed_framework_waits_then_reregisters() {
    let s = Cluster::start().await;
    let mut a = Appliance::spawn("a", &s.args("d1", &["--failover-timeout", "1s"]));
    let state = a.wait_state("services running", WAIT, all_running).await;
    let old = framework_id(&state).unwrap();
    a.signal(libc::SIGTERM);
    assert!(
        a.wait_exit(Duration::from_secs(10)).await.success(),
        "a failover stop exits 0"
    );
    // The master removes the framework after its 1 s failover timeout.
    let deadline = std::time::Instant::now() + WAIT;
    while !s.tb.frameworks().iter().any(|f| f.id == old && f.completed) {
        assert!(
            std::time::Instant::now() < deadline,
            "the master never removed the framework"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        s.tb.calls().iter().all(|c| c.call_type != "TEARDOWN"),
        "a failover stop never tears down"
    );

    let b = Appliance::spawn("b", &s.args("d2", &["--failover-timeout", "60s"]));
    let state = b
        .wait_state("state removed", WAIT, |st| framework_state(st) == "removed")
        .await;
    assert!(
        state["framework"]["reason"]
            .as_str()
            .unwrap()
            .contains("removed"),
        "{state}"
    );
    let (status, ready) = b.get("/readyz").await.unwrap();
    assert_eq!(status, 503);
    assert!(ready.to_string().contains("removed"), "{ready}");
    // The master killed the five tasks with the framework: none is shown
    // live, every record says TASK_KILLED.
    assert_agrees_with_master(&b, &s.tb, WAIT).await;
    let state = b
        .wait_state("records settled", WAIT, |st| count(st, "TASK_KILLED") == 5)
        .await;
    assert_eq!(running_count(&state), 0, "{state}");
    let subscribes = s.subscribes();
    support::client::holds_for("no restart loop", Duration::from_secs(3), || {
        s.subscribes() == subscribes
    })
    .await;

    let (status, body) = b.post("/api/v1/actions/reregister", json!({})).await;
    assert!(
        status == 200 || status == 202,
        "reregister answered {status}: {body}"
    );
    let state = b
        .wait_state("a fresh framework runs the services", WAIT, all_running)
        .await;
    let new = framework_id(&state).unwrap();
    assert_ne!(new, old);
    assert_eq!(b.get("/readyz").await.unwrap().0, 200);
    assert_agrees_with_master(&b, &s.tb, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_4_with_automatic_reregistration() {
    let s = Cluster::start().await;
    let mut a = Appliance::spawn("a", &s.args("d1", &["--failover-timeout", "1s"]));
    let old = framework_id(&a.wait_state("running", WAIT, all_running).await).unwrap();
    a.signal(libc::SIGTERM);
    a.wait_exit(Duration::from_secs(10)).await;
    let deadline = std::time::Instant::now() + WAIT;
    while !s.tb.frameworks().iter().any(|f| f.id == old && f.completed) {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b = Appliance::spawn(
        "b",
        &s.args("d2", &["--on-framework-removed", "reregister"]),
    );
    let state = b
        .wait_state("re-registered on its own", WAIT, all_running)
        .await;
    assert_ne!(framework_id(&state).unwrap(), old);
    assert_agrees_with_master(&b, &s.tb, WAIT).await;
}

/// `docs/deployment-strategies.md#a-framework-of-the-same-name`: with no
/// framework ID stored but a framework of the same
/// name (and principal) active on the master, a `failover` replica refuses
/// to register a new one — that would orphan the other's tasks — and says
/// why; it sends no SUBSCRIBE and is not ready. `hard` is the exception: it
/// tears the other framework down and registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_framework_of_the_same_name_and_no_stored_id_refuses_to_register() {
    let s = Cluster::start().await;
    // Another scheduler of the same name and user, subscribed directly (raw
    // JSON SUBSCRIBE); its stream stays open for the whole test.
    let (mut foreign, foreign_id) = support::mesos::connected(&s.tb.url(), "scenario", 60.0).await;
    let mark = s.tb.calls().last().map_or(0, |c| c.seq);

    let mut a = Appliance::spawn("a", &s.args("d1", &[]));
    let state = a
        .wait_state("refusal shown", WAIT, |st| {
            st["leadership"]["role"] == "leader"
                && st["framework"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(&foreign_id))
        })
        .await;
    let reason = state["framework"]["reason"].as_str().unwrap();
    assert!(reason.contains("refusing to register"), "{reason}");
    assert_ne!(framework_state(&state), "subscribed", "{state}");
    assert_eq!(
        framework_id(&state),
        None,
        "no framework ID minted: {state}"
    );
    let (status, ready) = a.get("/readyz").await.unwrap();
    assert_ne!(status, 200, "{ready}");
    assert!(
        ready.to_string().contains("refusing to register"),
        "{ready}"
    );

    let ours = || -> Vec<String> {
        s.tb.calls()
            .into_iter()
            .filter(|c| c.seq > mark && c.api == "scheduler")
            .map(|c| c.call_type)
            .collect()
    };
    support::client::holds_for(
        "the appliance makes no scheduler call (SUBSCRIBE…)",
        Duration::from_secs(3),
        || ours().is_empty(),
    )
    .await;
    assert!(
        s.tb.frameworks()
            .iter()
            .any(|f| f.id == foreign_id && f.connected && !f.completed),
        "the other framework is untouched"
    );
    assert_ne!(
        a.get("/readyz").await.unwrap().0,
        200,
        "still not ready after waiting"
    );
    assert!(a.running());

    // `hard` does not refuse: the other framework is torn down, a new one
    // registered.
    let b = Appliance::spawn(
        "b",
        &s.args("d2", &["--framework-deployment-strategy", "hard"]),
    );
    assert_eq!(a.wait_exit(WAIT).await.code(), Some(3), "a is fenced");
    let state = b
        .wait_state("hard registered", WAIT, |st| {
            framework_state(st) == "subscribed"
        })
        .await;
    let new = framework_id(&state).unwrap();
    assert_ne!(new, foreign_id);
    assert!(
        s.tb.frameworks()
            .iter()
            .any(|f| f.id == foreign_id && f.completed),
        "the other framework was torn down"
    );
    let _ = foreign.expect_end().await;
    assert_agrees_with_master(&b, &s.tb, WAIT).await;
}
