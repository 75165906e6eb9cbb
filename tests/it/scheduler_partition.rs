//! Partition awareness end to end (`docs/partitions.md`), with real
//! `mesos-appliance` processes, a real ZooKeeper and the testbed master
//! (which sends a PARTITION_AWARE framework TASK_UNREACHABLE, and
//! TASK_RUNNING with REASON_AGENT_REREGISTERED when the agent returns, as
//! capture t of a real Mesos 1.12 master shows).
//!
//! Service `web`: 3 instances, `hostname:UNIQUE`, 4 agents, policy
//! `{inactive_after: 20s, expunge_after: 40s, kill_on_return: old}` — the
//! acceptance's own numbers:
//! - partitioned for 10 s: `unreachable`, nothing replaced, the same task
//!   RUNNING after it heals, the restart backoff unchanged;
//! - partitioned for 60 s: the replacement starts at 20 s ± 3 s on the
//!   fourth agent; on return the old task is killed within 5 s, the count
//!   is back to 3 and the audit names the killed copy;
//! - MARK_AGENT_GONE during a partition: the replacement starts at once;
//! - the leader killed 10 s into a partition: the new leader replaces at
//!   20 s from the first TASK_UNREACHABLE, not from its own start.

use crate::support;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::processes::*;
use support::truth::count;
use support::zookeeper::ZkServer;

/// The acceptance's `inactive_after`.
const INACTIVE_AFTER: Duration = Duration::from_secs(20);
/// How far from `INACTIVE_AFTER` the replacement may start.
const SLACK: Duration = Duration::from_secs(3);

/// ZooKeeper, a testbed with four agents, a folder for services files.
struct Partitioned {
    zk: ZkServer,
    tb: Testbed,
    dir: tempfile::TempDir,
}

impl Partitioned {
    async fn start() -> Partitioned {
        support::mesos::init();
        Partitioned {
            zk: ZkServer::start(),
            tb: Testbed::start(TestbedConfig::for_tests(4)).await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A replica of `web` with the acceptance's policy.
    fn args(&self) -> Vec<String> {
        let mut args = base_args(&self.zk.connect_string(), &self.tb.url(), "partition");
        let services = json!([{"name": "web", "command": "sleep 100000", "cpus": 0.1,
            "mem": 32, "instances": 3, "constraints": ["hostname:UNIQUE"],
            "unreachable": {"inactive_after": "20s", "expunge_after": "40s",
                            "kill_on_return": "old"}}]);
        let file = services_file(self.dir.path(), "services.json", &services);
        args.extend(["--services".into(), file.display().to_string()]);
        args
    }

    /// The master's live tasks: (task ID, agent ID, state name).
    fn tasks(&self) -> Vec<(String, String, String)> {
        self.tb
            .tasks()
            .into_iter()
            .filter(|t| !t.completed)
            .map(|t| (t.task_id, t.agent_id, t.state.as_str_name().to_string()))
            .collect()
    }

    /// Partitions the agent of the master's first task; returns that task
    /// and its agent.
    fn partition_one(&self) -> (String, String) {
        let (task, agent, _) = self.tasks().into_iter().next().expect("a task");
        assert!(self.tb.make_agent_unreachable(&agent));
        (task, agent)
    }

    /// Waits until the master has a task that was not among `before`;
    /// returns it with its agent and the time it took from `since`.
    async fn wait_new_task(
        &self,
        before: &[String],
        since: Instant,
        within: Duration,
    ) -> (String, String, Duration) {
        loop {
            if let Some((id, agent, _)) = self.tasks().into_iter().find(|t| !before.contains(&t.0))
            {
                return (id, agent, since.elapsed());
            }
            assert!(
                since.elapsed() < within,
                "no new task within {within:?}: {:?}",
                self.tasks()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn three_running(s: &Value) -> bool {
    framework_state(s) == "subscribed" && running_count(s) == 3
}

/// Instances with an unreachable task, per the state's counts.
fn unreachable(state: &Value) -> u64 {
    state["counts"]["unreachable_instances"]
        .as_u64()
        .unwrap_or(0)
}

/// `web` as `/api/v1/services` shows it (spec and counts).
async fn web(a: &Appliance) -> Value {
    let (status, body) = a.get("/api/v1/services").await.expect("services");
    assert_eq!(status, 200, "{body}");
    body["services"]
        .as_array()
        .and_then(|s| s.iter().find(|x| x["name"] == "web"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn ids(tasks: &[(String, String, String)]) -> Vec<String> {
    tasks.iter().map(|t| t.0.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_10s_the_instance_waits_and_the_same_task_runs_again() {
    let s = Partitioned::start().await;
    let a = Appliance::spawn("a", &s.args());
    a.wait_state("3 running", WAIT, three_running).await;
    let before = ids(&s.tasks());
    let (task, agent) = s.partition_one();
    a.wait_state("the instance unreachable", WAIT, |st| {
        unreachable(st) == 1 && count(st, "TASK_UNREACHABLE") == 1
    })
    .await;
    let w = web(&a).await;
    assert_eq!(
        (w["running"].as_u64(), w["unreachable"].as_u64()),
        (Some(2), Some(1)),
        "{w}"
    );
    let (_, detail) = a.get(&format!("/api/v1/tasks/{task}")).await.unwrap();
    assert!(detail["task"]["unreachable_since"].is_f64(), "{detail}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(ids(&s.tasks()), before, "nothing replaced within 10 s");
    assert!(s.tb.make_agent_reachable(&agent));
    a.wait_state("the same task RUNNING again", WAIT, |st| {
        three_running(st) && unreachable(st) == 0
    })
    .await;
    let (_, detail) = a.get(&format!("/api/v1/tasks/{task}")).await.unwrap();
    assert_eq!(detail["task"]["state"], "TASK_RUNNING", "{detail}");
    let w = web(&a).await;
    assert_eq!(w["consecutive_failures"], 0, "{w}");
    assert!(
        w["backoff"].as_array().is_none_or(|b| b.is_empty()),
        "restart backoff unchanged: {w}"
    );
    let mut after = ids(&s.tasks());
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(after, before, "the same three tasks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_60s_replaced_at_inactive_after_and_the_old_copy_killed_on_return() {
    let s = Partitioned::start().await;
    let a = Appliance::spawn("a", &s.args());
    a.wait_state("3 running", WAIT, three_running).await;
    let before = s.tasks();
    let used: Vec<String> = before.iter().map(|t| t.1.clone()).collect();
    let (old, agent) = s.partition_one();
    let t0 = Instant::now();
    let (new, on, took) = s
        .wait_new_task(&ids(&before), t0, INACTIVE_AFTER + SLACK)
        .await;
    assert!(
        took + SLACK >= INACTIVE_AFTER,
        "replacement {new} started after {took:?}, before inactive_after"
    );
    println!("replacement {new} started {took:?} after the partition");
    assert!(
        !used.contains(&on),
        "{new} runs on {on}, not on the fourth agent"
    );
    a.wait_state("3 running, one unreachable", WAIT, |st| {
        three_running(st) && unreachable(st) == 1
    })
    .await;
    assert_eq!(web(&a).await["consecutive_failures"], 0);
    // The rest of the 60 s partition.
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(t0.elapsed())).await;
    assert!(s.tb.make_agent_reachable(&agent));
    let back = Instant::now();
    loop {
        let live = s.tasks();
        if !live.iter().any(|t| t.0 == old) {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "the old task still runs 5 s after its return: {live:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("the old copy killed {:?} after its return", back.elapsed());
    a.wait_state("3 running", WAIT, three_running).await;
    assert_eq!(s.tasks().len(), 3, "{:?}", s.tasks());
    assert!(s.tasks().iter().any(|t| t.0 == new));
    assert_eq!(web(&a).await["consecutive_failures"], 0);
    let (status, audit) = a
        .get("/api/v1/audit?action=task.kill_on_return")
        .await
        .unwrap();
    assert_eq!(status, 200, "{audit}");
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["params"]["task_id"], old.as_str(), "{audit}");
    let reason = entries[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&new) && reason.contains("kill_on_return: old"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_agent_gone_during_a_partition_replaces_at_once() {
    let s = Partitioned::start().await;
    let a = Appliance::spawn("a", &s.args());
    a.wait_state("3 running", WAIT, three_running).await;
    let before = ids(&s.tasks());
    let (old, agent) = s.partition_one();
    a.wait_state("the instance unreachable", WAIT, |st| unreachable(st) == 1)
        .await;
    assert!(s.tb.mark_agent_gone(&agent));
    let t0 = Instant::now();
    let (_, _, took) = s.wait_new_task(&before, t0, Duration::from_secs(5)).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    a.wait_state("3 running, the old task gone", WAIT, |st| {
        three_running(st) && count(st, "TASK_GONE_BY_OPERATOR") == 1 && unreachable(st) == 0
    })
    .await;
    assert_eq!(web(&a).await["consecutive_failures"], 0);
    let (_, detail) = a.get(&format!("/api/v1/tasks/{old}")).await.unwrap();
    assert_eq!(detail["task"]["state"], "TASK_GONE_BY_OPERATOR", "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_replaces_at_inactive_after_from_the_first_unreachable() {
    let s = Partitioned::start().await;
    let a = Appliance::spawn("a", &s.args());
    a.wait_state("3 running", WAIT, three_running).await;
    let b = Appliance::spawn("b", &s.args());
    b.wait_state("b follows", WAIT, |st| {
        st["leadership"]["role"] == "follower"
    })
    .await;
    let before = ids(&s.tasks());
    let (_, _) = s.partition_one();
    let t0 = Instant::now();
    a.wait_state("the instance unreachable", WAIT, |st| unreachable(st) == 1)
        .await;
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(t0.elapsed())).await;
    a.signal(libc::SIGKILL);
    b.wait_state("b leads", WAIT, |st| framework_state(st) == "subscribed")
        .await;
    assert!(
        t0.elapsed() + SLACK < INACTIVE_AFTER,
        "b took over too late to tell: {:?}",
        t0.elapsed()
    );
    let (new, _, took) = s.wait_new_task(&before, t0, INACTIVE_AFTER + SLACK).await;
    println!("the new leader's replacement {new} started {took:?} after the partition");
    assert!(
        took + SLACK >= INACTIVE_AFTER,
        "{new} started {took:?} after the partition: the wait restarted or was skipped"
    );
    b.wait_state("3 running", WAIT, three_running).await;
}
