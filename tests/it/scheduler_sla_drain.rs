//! The appliance's SLA-aware drain end to end (`docs/draining.md`): two
//! `mesos-appliance` processes, a real ZooKeeper and the testbed master
//! (which simulates the tasks' HTTP health checks and reports them healthy).
//!
//! Service `web`: 4 instances, `hostname:UNIQUE`, an HTTP health check, on
//! 5 agents. `POST /api/v1/agents/{id}/drain {"min_healthy": 3}`:
//! - the healthy count (the master's RUNNING and healthy tasks of `web`,
//!   sampled every 50 ms) never drops below 3;
//! - the leader is SIGKILLed a second into the drain; the new leader
//!   continues it (same `started_at` and `by`: not restarted, not lost)
//!   and finishes it: the replacement on the free agent, then the kill;
//! - the drained agent gets no new task until the drain is cancelled; after
//!   `DELETE …/drain`, a fifth instance (UNIQUE: the drained agent is the
//!   only free host) lands there.

use crate::support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use mesos_appliance::testbed::{SimulatedHealth, Testbed, TestbedConfig};
use reqwest::Method;
use serde_json::{Value, json};
use support::processes::*;
use support::zookeeper::ZkServer;

/// `web` with `instances`, UNIQUE hosts, an HTTP health check; a task is
/// available once healthy for 4 s (so that the drain is still under way
/// when the leader dies).
fn web(instances: u32) -> Value {
    let mut spec = support::appliance::health_checked("web", instances, "1s", "4s");
    spec["constraints"] = json!(["hostname:UNIQUE"]);
    spec["upgrade"] = json!({"min_healthy": "4s", "deadline": "60s"});
    spec["kill_grace_period"] = json!("1s");
    spec
}

/// The master's live tasks of `web`: (task ID, agent ID, RUNNING and
/// healthy).
fn web_tasks(tb: &Testbed) -> Vec<(String, String, bool)> {
    tb.tasks()
        .into_iter()
        .filter(|t| !t.completed && t.task_id.starts_with("web."))
        .map(|t| {
            let up = t.state.as_str_name() == "TASK_RUNNING" && t.healthy == Some(true);
            (t.task_id, t.agent_id, up)
        })
        .collect()
}

fn healthy(tb: &Testbed) -> usize {
    web_tasks(tb).iter().filter(|t| t.2).count()
}

/// The `drain` of `agent` in `/api/v1/agents`.
async fn drain_of(a: &Appliance, agent: &str) -> Value {
    let Some((200, body)) = a.get("/api/v1/agents").await else {
        return Value::Null;
    };
    body["agents"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["agent_id"] == agent))
        .map(|e| e["drain"].clone())
        .unwrap_or(Value::Null)
}

async fn wait_drain(
    a: &Appliance,
    agent: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let drain = drain_of(a, agent).await;
        if pred(&drain) {
            return drain;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}: {what} not reached; drain {drain}\n--- log ---\n{}",
            a.name,
            tail(&a.log(), 60)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Watches the master every 50 ms while a drain runs: the lowest count of
/// healthy `web` tasks, and whether a task not in `known` landed on the
/// drained agent.
struct Watch {
    lowest: Arc<AtomicUsize>,
    landed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start(tb: &Arc<Testbed>, agent: &str, known: HashSet<String>) -> Watch {
        let lowest = Arc::new(AtomicUsize::new(usize::MAX));
        let landed = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (tb, lowest, landed, stop) =
                (tb.clone(), lowest.clone(), landed.clone(), stop.clone());
            let agent = agent.to_string();
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let tasks = web_tasks(&tb);
                    let up = tasks.iter().filter(|t| t.2).count();
                    lowest.fetch_min(up, Ordering::SeqCst);
                    if tasks.iter().any(|t| t.1 == agent && !known.contains(&t.0)) {
                        landed.store(true, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        Watch {
            lowest,
            landed,
            stop,
            task,
        }
    }

    /// Stops watching: (the lowest healthy count, whether a task landed).
    async fn stop(self) -> (usize, bool) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        (
            self.lowest.load(Ordering::SeqCst),
            self.landed.load(Ordering::SeqCst),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_keeps_min_healthy_survives_a_failover_and_holds_the_agent_until_cancelled() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Arc::new(Testbed::start(TestbedConfig::for_tests(5)).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args(&zk.connect_string(), &tb.url(), "sla-drain");
    let file = services_file(dir.path(), "services.json", &json!([web(4)]));
    args.extend(["--services".into(), file.display().to_string()]);

    let a = Appliance::spawn("a", &args);
    a.wait_state("4 running", WAIT, |s| {
        framework_state(s) == "subscribed" && running_count(s) == 4
    })
    .await;
    let b = Appliance::spawn("b", &args);
    b.wait_state("b follows", WAIT, |s| s["leadership"]["role"] == "follower")
        .await;
    // All four healthy at the master.
    let deadline = std::time::Instant::now() + WAIT;
    while healthy(&tb) < 4 {
        assert!(std::time::Instant::now() < deadline, "{:?}", web_tasks(&tb));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = web_tasks(&tb);
    let (old_task, agent, _) = before[0].clone();
    let known: HashSet<String> = before.iter().map(|t| t.0.clone()).collect();

    let watch = Watch::start(&tb, &agent, known);

    // Validation first: field errors in the problem shape; an unknown
    // agent is 404.
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": "140%", "then": "reboot"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert_eq!(fields, ["min_healthy", "then"], "{body}");
    let (status, body) = a
        .post(
            "/api/v1/agents/no-such-agent/drain",
            json!({"min_healthy": 3}),
        )
        .await;
    assert_eq!(status, 404, "{body}");

    let (status, started) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 3, "reason": "kernel upgrade"}),
        )
        .await;
    assert_eq!(status, 202, "{started}");
    let started_at = started["drain"]["started_at"].as_f64().expect("started_at");
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 3}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let drain = wait_drain(&a, &agent, "the drain shown", |d| d["state"] == "running").await;
    assert_eq!(drain["reason"], "kernel upgrade");

    // The leader dies in the middle of the drain (the replacement needs
    // 4 s healthy before the old task may go).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        web_tasks(&tb).iter().any(|t| t.0 == old_task),
        "the old task went before the failover: {:?}",
        web_tasks(&tb)
    );
    a.signal(libc::SIGKILL);
    b.wait_state("b leads", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    let done = wait_drain(&b, &agent, "the drain done by b", |d| d["state"] == "done").await;
    assert_eq!(done["started_at"].as_f64(), Some(started_at), "{done}");
    assert_eq!(done["moved"], 1, "{done}");
    assert!(web_tasks(&tb).iter().all(|t| t.1 != agent));
    b.wait_state("4 running", WAIT, |s| running_count(s) == 4)
        .await;
    // Held while done.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (lowest, landed) = watch.stop().await;
    assert!(!landed, "a task landed on the drained agent");
    println!("lowest healthy count during the drain: {lowest}");
    assert!(lowest >= 3, "the healthy count fell to {lowest}");

    // Cancelled: a fifth instance can only go to the drained agent.
    let (status, body) = b
        .send(
            Method::DELETE,
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"reason": "upgrade done"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let audit = b.get("/api/v1/audit").await.expect("audit").1;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .map(|l| l.iter().filter_map(|e| e["action"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        actions.contains(&"drain") && actions.contains(&"cancel_drain"),
        "{audit}"
    );
    let (status, body) = b.send(Method::PUT, "/api/v1/services/web", web(5)).await;
    assert!(status == 200 || status == 201, "{status} {body}");
    let deadline = std::time::Instant::now() + WAIT;
    while !web_tasks(&tb).iter().any(|t| t.1 == agent) {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing landed on {agent} after the cancel: {:?}",
            web_tasks(&tb)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `web`'s three instances on agent-0 (a LIKE constraint, 4 agents),
/// available; agent-0 drained with `min_healthy`; then a new spec (a new
/// command, `instances`, UNIQUE hosts anywhere). The master's healthy
/// count of `web` never falls below `floor`, the drain ends, and
/// `instances` tasks run, none on agent-0.
async fn new_spec_during_a_drain(group: &str, min_healthy: Value, instances: u32, floor: usize) {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Arc::new(Testbed::start(TestbedConfig::for_tests(4)).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args(&zk.connect_string(), &tb.url(), group);
    let mut old = web(3);
    old["constraints"] = json!(["hostname:LIKE:agent-0"]);
    let file = services_file(dir.path(), "services.json", &json!([old]));
    args.extend(["--services".into(), file.display().to_string()]);
    let a = Appliance::spawn("a", &args);
    let deadline = std::time::Instant::now() + WAIT;
    while healthy(&tb) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}\n{}",
            web_tasks(&tb),
            tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Available: healthy for the upgrade's `min_healthy` (4 s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let agent = web_tasks(&tb)[0].1.clone();
    let known: HashSet<String> = web_tasks(&tb).into_iter().map(|t| t.0).collect();
    let watch = Watch::start(&tb, &agent, known);
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({ "min_healthy": min_healthy }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // The new spec's tasks fail their health checks for 3 s: a copy is
    // not available meanwhile, and no old task may go.
    tb.set_health("web.", Some(("release", "2")), SimulatedHealth::Unhealthy);
    let mut new = web(instances);
    new["command"] = json!("sleep 2000");
    new["labels"] = json!({"release": "2"});
    let (status, body) = a.send(Method::PUT, "/api/v1/services/web", new).await;
    assert!(status == 200 || status == 201, "{status} {body}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    tb.set_health("web.", Some(("release", "2")), SimulatedHealth::Healthy);
    let done = wait_drain(&a, &agent, "the drain done", |d| d["state"] == "done").await;
    let (lowest, landed) = watch.stop().await;
    println!("lowest healthy count: {lowest}; drain {done}");
    // Each task the new spec still wants moved, copy first: none killed by
    // the rollout ("replaced by a newer service spec").
    let moved = done["tasks"]
        .as_array()
        .map_or(0, |l| l.iter().filter(|t| t["progress"] == "moved").count());
    assert_eq!(moved, instances.min(3) as usize, "{done}");
    assert!(!landed, "a task landed on the drained agent");
    assert!(
        lowest >= floor,
        "the healthy count fell to {lowest}: {done}"
    );
    let live = web_tasks(&tb);
    assert_eq!(live.len(), instances as usize, "{live:?}");
    assert!(live.iter().all(|t| t.1 != agent), "{live:?}");
}

/// A rollout's kill counts against a drain's floor (a property of the
/// core found it: `machine::tests::leavers`): a new spec of one instance
/// during a drain of `min_healthy: 1`. Instances 1 and 2 are no longer
/// wanted: one of them stays, healthy, until the new instance 0 is
/// available. (Before, the rollout's kill and both unwanted ones went in
/// one pass, and the healthy count fell to 0.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_spec_that_scales_down_during_a_drain_keeps_its_floor() {
    new_spec_during_a_drain("drain-rollout", json!(1), 1, 1).await;
}

/// A new spec during a drain of `min_healthy: 100%` moves each leaving
/// task copy first: three stay healthy throughout (a fresh user's trial:
/// the rollout killed one first, leaving the service one below the
/// floor for a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_spec_during_a_full_floor_drain_moves_copy_first() {
    new_spec_during_a_drain("drain-rollout-full", json!("100%"), 3, 3).await;
}
