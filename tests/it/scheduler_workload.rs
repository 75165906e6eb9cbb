//! The scheduler core keeps the desired workload running on the testbed,
//! with its state in a real ZooKeeper: launch 20 instances of 3 services
//! over 5 agents, replace the tasks of a lost agent, and replace every task
//! whose executor obeyed `kamikaze`.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use mesos_appliance::scheduler::{FrameworkState, KamikazeResult, Request};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};

const WAIT: Duration = Duration::from_secs(30);

fn three_services() -> Vec<mesos_appliance::scheduler::ServiceSpec> {
    services(json!([
        {"name": "web", "command": "serve", "cpus": 0.2, "mem": 64, "ports": 1, "instances": 8, "executor": "appliance"},
        {"name": "worker", "command": ["work", "--hard"], "cpus": 0.5, "mem": 128, "instances": 8},
        {"name": "db", "command": "db", "cpus": 1, "mem": 512, "instances": 4, "constraints": ["hostname:UNIQUE"]}
    ]))
}

fn all_running(s: &mesos_appliance::scheduler::Snapshot) -> bool {
    running(s, "web") == 8 && running(s, "worker") == 8 && running(s, "db") == 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_instances_run_and_survive_agent_loss_and_kamikaze() {
    let tb = Testbed::start(TestbedConfig::for_tests(5)).await.unwrap();
    let replica = Replica::in_memory("r1", &tb.url(), three_services(), core_config()).await;

    let s = replica
        .wait_for("20 tasks running", WAIT, all_running)
        .await;
    assert_eq!(s.framework.state, FrameworkState::Subscribed);
    let fid = s.framework.id.clone().expect("framework ID");
    assert_eq!(
        replica
            .coordinator
            .framework_id()
            .await
            .unwrap()
            .unwrap()
            .value,
        fid,
        "the framework ID is stored"
    );
    let running_on_master = tb
        .tasks()
        .iter()
        .filter(|t| t.state.as_str_name() == "TASK_RUNNING")
        .count();
    assert_eq!(running_on_master, 20);
    let db_hosts: HashSet<&str> = s
        .tasks
        .iter()
        .filter(|t| t.service == "db")
        .map(|t| t.hostname.as_str())
        .collect();
    assert_eq!(db_hosts.len(), 4, "hostname:UNIQUE");
    assert!(s.tasks.iter().all(|t| {
        t.task_id
            .starts_with(&format!("{}.{}.", t.service, t.instance))
    }));
    let web_ports: HashSet<u64> = s
        .tasks
        .iter()
        .filter(|t| t.service == "web")
        .map(|t| t.ports[0])
        .collect();
    assert!(web_ports.len() >= 2 && web_ports.iter().all(|p| (31000..=32000).contains(p)));

    // Lose the agent with the most tasks: its tasks are replaced elsewhere.
    let busiest = tb
        .agents()
        .into_iter()
        .max_by_key(|a| tb.tasks().iter().filter(|t| t.agent_id == a.id).count())
        .unwrap();
    let lost: HashSet<String> = s
        .tasks
        .iter()
        .filter(|t| t.agent_id == busiest.id)
        .map(|t| t.task_id.to_string())
        .collect();
    assert!(!lost.is_empty());
    assert!(tb.make_agent_unreachable(&busiest.id));
    let s = replica
        .wait_for("lost tasks replaced", WAIT, |s| {
            all_running(s)
                && s.tasks
                    .iter()
                    .filter(|t| t.state.as_str_name() == "TASK_RUNNING")
                    .all(|t| t.agent_id != busiest.id)
        })
        .await;
    for id in &lost {
        let t = s
            .tasks
            .iter()
            .find(|t| &t.task_id == id)
            .expect("lost record kept");
        // PARTITION_AWARE: TASK_UNREACHABLE, replaced at once under the
        // default `unreachable` policy.
        assert_eq!(t.state.as_str_name(), "TASK_UNREACHABLE");
    }

    // Kamikaze: every executor of ours exits; its tasks are replaced.
    let web_before: HashSet<String> = s
        .tasks
        .iter()
        .filter(|t| t.service == "web" && t.state.as_str_name() == "TASK_RUNNING")
        .map(|t| t.task_id.to_string())
        .collect();
    let results: Vec<KamikazeResult> = replica
        .handle
        .request(Duration::from_secs(10), Request::Kamikaze)
        .await
        .expect("kamikaze accepted");
    assert_eq!(results.len(), 8, "one executor per web task: {results:?}");
    assert!(
        results
            .iter()
            .all(|r| r.accepted && r.executor_id.starts_with("mesos-appliance-executor.web."))
    );
    let s = replica
        .wait_for("web tasks replaced", WAIT, |s| {
            all_running(s)
                && s.tasks
                    .iter()
                    .filter(|t| t.service == "web" && t.state.as_str_name() == "TASK_RUNNING")
                    .all(|t| !web_before.contains(t.task_id.as_str()))
        })
        .await;
    for id in &web_before {
        let t = s.tasks.iter().find(|t| &t.task_id == id).unwrap();
        assert_eq!(t.state.as_str_name(), "TASK_FAILED");
        assert_eq!(
            t.timeline.last().unwrap().reason.map(|r| r.as_str_name()),
            Some("REASON_EXECUTOR_TERMINATED")
        );
    }
    let kills = tb.scheduler_calls("KILL");
    assert!(kills.is_empty(), "nothing needed killing: {kills:?}");
    replica.stop().await;
}

/// A command that exits at once still reaches TASK_RUNNING under our
/// executor (RUNNING is sent when the command starts), so the restart
/// backoff must keep doubling through such a crash loop instead of being
/// forgiven by each short-lived RUNNING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_backs_off_although_each_task_reaches_running() {
    let tb = support::executor::process_testbed().await;
    let specs = services(json!([{"name": "crash", "command": "sleep 0.2; exit 3",
        "cpus": 0.1, "mem": 8, "instances": 1, "executor": "appliance",
        "restart_backoff": "1s", "restart_backoff_max": "4s"}]));
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;

    let failures = |s: &mesos_appliance::scheduler::Snapshot| {
        s.services
            .iter()
            .find(|x| x.spec.name == "crash")
            .map_or(0, |x| x.consecutive_failures)
    };
    let s = replica
        .wait_for("three consecutive failures", WAIT, |s| failures(s) >= 3)
        .await;
    let reached_running = s
        .tasks
        .iter()
        .filter(|t| {
            t.service == "crash"
                && t.timeline
                    .iter()
                    .any(|e| e.state.as_str_name() == "TASK_RUNNING")
        })
        .count();
    assert!(
        reached_running >= 3,
        "each crashed task had reached TASK_RUNNING: {reached_running}"
    );
    // After the third failure the service waits 4 s: the fourth launch
    // comes at least that long after the third (a lower bound, not a timing).
    let s = replica
        .wait_for("a fourth launch", WAIT, |s| {
            s.tasks.iter().filter(|t| t.service == "crash").count() >= 4
        })
        .await;
    let mut launches: Vec<f64> = s
        .tasks
        .iter()
        .filter(|t| t.service == "crash")
        .map(|t| t.launched_at)
        .collect();
    launches.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = launches.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[0] >= 1.0 && gaps[1] >= 2.0 && gaps[2] >= 4.0,
        "{gaps:?}"
    );
    replica.stop().await;
}

/// A command that cannot be executed (a typo in the program's path) under
/// the default command executor: real Mesos reports TASK_RUNNING (its
/// launch helper started) and then TASK_FAILED "Command exited with status
/// 1" with "Failed to execute" on stderr; either that or an executor that
/// dies after TASK_STARTING must back off like any failure, with the
/// failure shown — never relaunch in a tight loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_be_executed_backs_off_and_says_why() {
    let tb = support::executor::process_testbed().await;
    let specs = services(
        json!([{"name": "typo", "command": ["/nonexistent/bin/serve"],
        "cpus": 0.1, "mem": 8, "instances": 1,
        "restart_backoff": "1s", "restart_backoff_max": "4s"}]),
    );
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;
    let status = |s: &mesos_appliance::scheduler::Snapshot| {
        s.services.iter().find(|x| x.spec.name == "typo").cloned()
    };
    let s = replica
        .wait_for("three consecutive failures", WAIT, |s| {
            status(s).is_some_and(|x| x.consecutive_failures >= 3)
        })
        .await;
    let failure = status(&s)
        .and_then(|x| x.last_failure)
        .expect("the last failure is shown");
    assert!(
        failure
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("exited with status 1"),
        "{failure:?}"
    );
    let mut launches: Vec<f64> = s
        .tasks
        .iter()
        .filter(|t| t.service == "typo")
        .map(|t| t.launched_at)
        .collect();
    launches.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = launches.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.len() >= 2 && gaps[0] >= 1.0 && gaps[1] >= 2.0,
        "relaunched without backing off: {gaps:?}"
    );
    replica.stop().await;
}

/// A changed spec forgets the old spec's failures (a fixed command must not
/// sit out the broken one's backoff), and deleting a service kills its
/// tasks with the service's own grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_spec_launches_at_once_and_a_deleted_service_keeps_its_grace() {
    let tb = support::executor::process_testbed().await;
    let broken = json!({"name": "flaky", "command": "exit 3", "cpus": 0.1, "mem": 8,
        "instances": 1, "executor": "appliance", "kill_grace_period": "30s",
        "restart_backoff": "10m", "restart_backoff_max": "1h"});
    let replica = Replica::in_memory(
        "r1",
        &tb.url(),
        services(json!([broken.clone()])),
        core_config(),
    )
    .await;
    replica
        .wait_for("backing off for 10 minutes", WAIT, |s| {
            s.services
                .iter()
                .any(|x| x.spec.name == "flaky" && x.next_launch_after.is_some())
        })
        .await;
    let mut fixed = broken.clone();
    fixed["command"] = json!("sleep 600");
    let spec = services(json!([fixed])).remove(0);
    replica.put_service(spec).await.unwrap();
    replica
        .wait_for("the fixed spec runs without waiting", WAIT, |s| {
            running(s, "flaky") == 1
        })
        .await;

    replica
        .handle
        .request::<bool>(
            Duration::from_secs(5),
            Request::DeleteService {
                name: "flaky".into(),
                expected: None,
            },
        )
        .await
        .unwrap();
    replica
        .wait_for("killed", WAIT, |s| running(s, "flaky") == 0)
        .await;
    let graces: Vec<serde_json::Value> = tb
        .scheduler_calls("KILL")
        .into_iter()
        .map(|c| c.call["kill"]["kill_policy"]["grace_period"]["nanoseconds"].clone())
        .collect();
    assert!(!graces.is_empty());
    assert!(
        graces
            .iter()
            .all(|g| g.as_i64() == Some(30_000_000_000) || g.as_str() == Some("30000000000")),
        "{graces:?}"
    );
    replica.stop().await;
}

/// A service larger than every agent is accepted, waits, and says why: the
/// resource no offer has enough of and the largest amount offered, on the
/// services status and once in the events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_no_agent_can_hold_says_why_it_waits() {
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let specs = services(json!([
        {"name": "small", "command": "x", "cpus": 0.5, "mem": 64, "instances": 1},
        {"name": "huge", "command": "x", "cpus": 64, "mem": 64, "instances": 2}
    ]));
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;
    let waiting = |s: &mesos_appliance::scheduler::Snapshot, name: &str| {
        s.services
            .iter()
            .find(|x| x.spec.name == name)
            .and_then(|x| x.waiting.clone())
    };
    let s = replica
        .wait_for("huge waits for cpus", WAIT, |s| {
            running(s, "small") == 1
                && waiting(s, "huge").is_some_and(|w| w.contains("needs cpus 64"))
        })
        .await;
    let why = waiting(&s, "huge").unwrap();
    assert!(
        why.contains("(largest offer: 4)") || why.contains("(largest offer: 3.5)"),
        "{why}"
    );
    assert_eq!(waiting(&s, "small"), None);
    // Offers are declined, expire and come back: still stuck, said once.
    let mark = mesos_appliance::util::unix_now_secs();
    let s = replica
        .wait_for("offers declined and offered again", WAIT, |s| {
            s.offers.iter().any(|o| o.received_at > mark)
        })
        .await;
    assert!(waiting(&s, "huge").is_some_and(|w| w.contains("needs cpus 64")));
    let said: Vec<_> = s
        .events
        .iter()
        .filter(|e| e.message.starts_with("service huge waits"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    replica.stop().await;
}
