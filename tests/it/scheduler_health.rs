//! Health checks and container images through the whole stack: the
//! scheduler sends a service's `health_check` and `container`, the testbed
//! plays the agents, and today's replacement logic reacts.
//!
//! - An HTTP health check in process mode, against a real HTTP server run
//!   as the task by `mesos-appliance-executor`: once the server stops
//!   serving the health path, the executor reports the task unhealthy,
//!   kills it (TASK_KILLED with `healthy = false`), and the scheduler
//!   launches a replacement, which is healthy again.
//! - An image service on agents without image support fails with Mesos'
//!   reason (REASON_CONTAINER_LAUNCH_FAILED) and is retried with the
//!   restart backoff, not in a tight loop.

use crate::support;

use std::time::Duration;

use mesos_appliance::scheduler::Snapshot;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config, health_checked, running, services};

const WAIT: Duration = Duration::from_secs(60);

fn web_tasks(s: &Snapshot) -> Vec<&mesos_appliance::scheduler::TaskRecord> {
    s.tasks
        .iter()
        .filter(|t| t.service == "web")
        .map(|t| &**t)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_check_going_unhealthy_kills_the_task_and_it_is_replaced() {
    let tb = support::executor::process_testbed().await;
    // python3's http.server serves the sandbox: GET /healthy is 200 while
    // the file exists, 404 once the test removes it.
    let specs = services(json!([{"name": "web",
        "command": "touch healthy && exec python3 -m http.server $PORT0 --bind 127.0.0.1",
        "cpus": 0.1, "mem": 32, "ports": 1, "instances": 1, "executor": "appliance",
        "kill_grace_period": "2s",
        "health_check": {"type": "http", "port_index": 0, "path": "/healthy",
            "delay": "0s", "interval": "1s", "timeout": "2s", "grace_period": "15s",
            "consecutive_failures": 3}}]));
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;

    let s = replica
        .wait_for("web running", WAIT, |s| running(s, "web") == 1)
        .await;
    let first = web_tasks(&s)[0].task_id.clone();
    // The executor's health update reaches the master (and the scheduler).
    let deadline = tokio::time::Instant::now() + WAIT;
    while !tb
        .tasks()
        .iter()
        .any(|t| t.task_id == first && t.healthy == Some(true))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never healthy: {:?}",
            tb.tasks()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let executor_id = format!("mesos-appliance-executor.{first}");
    let sandbox = tb
        .executors()
        .into_iter()
        .find(|e| e.executor_id == executor_id)
        .expect("the task's executor")
        .sandbox;
    std::fs::remove_file(sandbox.join("healthy")).expect("the served file");

    let s = replica
        .wait_for("the unhealthy task replaced", WAIT, |s| {
            let tasks = web_tasks(s);
            tasks
                .iter()
                .any(|t| t.task_id == first && t.state.as_str_name() == "TASK_KILLED")
                && tasks
                    .iter()
                    .any(|t| t.task_id != first && t.state.as_str_name() == "TASK_RUNNING")
        })
        .await;
    let killed = s.tasks.iter().find(|t| t.task_id == first).unwrap();
    let last = killed.timeline.last().unwrap();
    assert_eq!(
        last.source.map(|s| s.as_str_name()),
        Some("SOURCE_EXECUTOR")
    );
    assert_eq!(
        last.message.as_deref(),
        Some("Command terminated with signal Terminated")
    );
    // The updates before it: the health check's reports.
    let reasons: Vec<Option<&str>> = killed
        .timeline
        .iter()
        .filter(|e| e.state.as_str_name() == "TASK_RUNNING")
        .map(|e| e.reason.map(|r| r.as_str_name()))
        .collect();
    assert!(
        reasons
            .iter()
            .filter(|r| **r == Some("REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"))
            .count()
            >= 4,
        "healthy once, then 3 failures: {reasons:?}"
    );
    assert!(
        tb.scheduler_calls("KILL").is_empty(),
        "the executor killed it, not the scheduler"
    );
    // The master saw the kill as the health check's: healthy = false.
    let state = support::mesos::master_state(&tb.url()).await;
    let completed = state["frameworks"][0]["completed_tasks"]
        .as_array()
        .expect("completed tasks");
    let task = completed
        .iter()
        .find(|t| t["id"] == first.as_str())
        .expect("the killed task");
    let statuses = task["statuses"].as_array().unwrap();
    let last = statuses.last().unwrap();
    assert_eq!(
        (last["state"].as_str(), last["healthy"].as_bool()),
        (Some("TASK_KILLED"), Some(false))
    );

    // The replacement serves its own sandbox and becomes healthy.
    let second = s
        .tasks
        .iter()
        .find(|t| {
            t.service == "web" && t.task_id != first && t.state.as_str_name() == "TASK_RUNNING"
        })
        .unwrap()
        .task_id
        .clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !tb
        .tasks()
        .iter()
        .any(|t| t.task_id == second && t.healthy == Some(true))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "replacement never healthy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_service_on_agents_without_image_support_backs_off() {
    let container = json!({"image": "registry.example:5000/team/web:1.4"});
    let tb = fails_with_backoff(
        container,
        "REASON_CONTAINER_LAUNCH_FAILED",
        "Failed to launch container: Unsupported container image type: DOCKER",
    )
    .await;
    // What the scheduler sent: the image, as Mesos takes it.
    let launches = tb.scheduler_calls("ACCEPT");
    let container = launches
        .iter()
        .flat_map(|c| {
            c.call["accept"]["operations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|op| {
            op["launch"]["task_infos"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|t| t["container"].is_object())
        .expect("a launch with a container")["container"]
        .clone();
    assert_eq!(
        container,
        json!({"type": "MESOS", "mesos": {"image": {"type": "DOCKER",
            "docker": {"name": "registry.example:5000/team/web:1.4"}, "cached": true}}})
    );
}

/// A Docker container on agents without the Docker containerizer: Mesos
/// reports REASON_EXECUTOR_TERMINATED, which `workload::counts_as_failure`
/// leaves to immediate replacement; `workload::counts_as_failure_of` counts
/// it (the task never started), once the core's `note_transition` uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_service_on_agents_without_docker_backs_off() {
    fails_with_backoff(
        json!({"docker": {"image": "nginx:1.27"}}),
        "REASON_EXECUTOR_TERMINATED",
        "Abnormal executor termination: unknown container",
    )
    .await;
}

/// Runs service `boxed` with `container` on two agents as Mesos starts them
/// by default (`--containerizers=mesos`, no `--image_providers`) next to a
/// plain service, and checks that its launches fail with `reason` and
/// `message` and are retried after 1 s, 2 s, 4 s.
async fn fails_with_backoff(container: serde_json::Value, reason: &str, message: &str) -> Testbed {
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let specs = services(json!([
        {"name": "boxed", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": 1,
         "container": container, "restart_backoff": "1s", "restart_backoff_max": "4s"},
        {"name": "plain", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": 1}
    ]));
    let replica = Replica::in_memory("r1", &tb.url(), specs, core_config()).await;
    let s = replica
        .wait_for("four failed launches of boxed", WAIT, |s| {
            s.tasks
                .iter()
                .filter(|t| t.service == "boxed" && t.state.as_str_name() == "TASK_FAILED")
                .count()
                >= 4
        })
        .await;
    assert_eq!(running(&s, "plain"), 1, "the plain service runs meanwhile");
    let mut failed: Vec<_> = s
        .tasks
        .iter()
        .filter(|t| t.service == "boxed" && t.state.as_str_name() == "TASK_FAILED")
        .collect();
    for t in &failed {
        let last = t.timeline.last().unwrap();
        assert_eq!(last.source.map(|s| s.as_str_name()), Some("SOURCE_AGENT"));
        assert_eq!(last.reason.map(|r| r.as_str_name()), Some(reason));
        assert_eq!(last.message.as_deref(), Some(message));
        assert!(
            !t.timeline
                .iter()
                .any(|e| e.state.as_str_name() == "TASK_RUNNING"),
            "never ran"
        );
    }
    // Launches wait 1 s, 2 s, 4 s after each failure: lower bounds, not timings.
    failed.sort_by(|a, b| a.launched_at.total_cmp(&b.launched_at));
    let gaps: Vec<f64> = failed
        .windows(2)
        .map(|w| w[1].launched_at - w[0].launched_at)
        .collect();
    assert!(
        gaps[0] >= 1.0 && gaps[1] >= 2.0 && gaps[2] >= 4.0,
        "{gaps:?}"
    );
    let service = s.services.iter().find(|x| x.spec.name == "boxed").unwrap();
    assert!(
        service.consecutive_failures >= 4,
        "{}",
        service.consecutive_failures
    );
    replica.stop().await;
    tb
}

/// A task's end: the time of the terminal entry of its timeline.
fn ended_at(t: &mesos_appliance::scheduler::TaskRecord) -> Option<f64> {
    t.is_terminal()
        .then(|| t.timeline.last().map(|e| e.at))
        .flatten()
}

/// Issue 24 C: instance 1 of `tally` fails its health check every time
/// while its siblings run healthy, another service is scaled between 1 and
/// 3 instances and an explicit reconciliation is asked for every second.
/// The restart backoff is the instance's own: the gaps between a failed
/// task's end and the next launch of instance 1 double up to the maximum
/// and stay there (1, 2, 4, 8, 8 s with `restart_backoff: 1s`,
/// `restart_backoff_max: 8s`), whatever the siblings, the churn and the
/// reconciliation answers do. The events name the failed health checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_failing_instance_keeps_its_backoff_while_others_churn() {
    use mesos_appliance::scheduler::{ReconcileKind, ReconcileRun, Request};
    use mesos_appliance::testbed::SimulatedHealth;
    use support::zookeeper::ZkServer;

    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(4)).await;
    tb.set_health("tally.1.", None, SimulatedHealth::Unhealthy);
    let churn = |instances: u32| {
        json!({"name": "churn", "command": "sleep 1000", "cpus": 0.1, "mem": 32,
            "instances": instances})
    };
    let specs = services(json!([
        {"name": "tally", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "ports": 1,
         "instances": 3, "restart_backoff": "1s", "restart_backoff_max": "8s",
         "health_check": {"type": "http", "port_index": 0, "path": "/health",
            "delay": "0s", "interval": "1s", "timeout": "1s", "grace_period": "0s",
            "consecutive_failures": 2}},
        churn(1)
    ]));
    let replica = Replica::start(&zk.connect_string(), "r1", &tb.url(), specs, core_config()).await;
    replica
        .wait_for("tally's healthy instances running", WAIT, |s| {
            running(s, "tally") >= 2
        })
        .await;

    // The churn: a reconciliation every second, a scale of `churn` every
    // other second.
    let handle = replica.handle.clone();
    let churning = tokio::spawn(async move {
        for round in 0u32.. {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = handle
                .request::<ReconcileRun>(
                    Duration::from_secs(5),
                    Request::Reconcile(ReconcileKind::Explicit),
                )
                .await;
            if round % 2 == 0 {
                let instances = if round % 4 == 0 { 3 } else { 1 };
                let _ = support::appliance::put_service(
                    &handle,
                    services(json!([churn(instances)])).remove(0),
                )
                .await;
            }
        }
    });

    // Six failed tasks of instance 1 give five gaps: 1, 2, 4, 8, 8 s.
    let s = replica
        .wait_for(
            "six failed tasks of tally.1",
            Duration::from_secs(120),
            |s| {
                s.tasks
                    .iter()
                    .filter(|t| t.task_id.as_str().starts_with("tally.1.") && t.is_terminal())
                    .count()
                    >= 6
            },
        )
        .await;
    churning.abort();
    let mut ones: Vec<_> = s
        .tasks
        .iter()
        .filter(|t| t.task_id.as_str().starts_with("tally.1."))
        .collect();
    ones.sort_by(|a, b| a.launched_at.total_cmp(&b.launched_at));
    let gaps: Vec<f64> = ones
        .windows(2)
        .filter_map(|w| Some(w[1].launched_at - ended_at(w[0])?))
        .take(5)
        .collect();
    eprintln!("gaps of tally.1: {gaps:?}");
    let expected = [1.0, 2.0, 4.0, 8.0, 8.0];
    assert!(
        gaps.iter()
            .zip(expected)
            .all(|(gap, want)| *gap >= want - 0.05 && *gap < want + 2.0),
        "gaps {gaps:?}, want about {expected:?}"
    );
    // The siblings ran healthy all along, and `churn` was scaled.
    let siblings_launched = s
        .tasks
        .iter()
        .filter(|t| t.service == "tally" && !t.task_id.as_str().starts_with("tally.1."))
        .count();
    assert_eq!(siblings_launched, 2, "instances 0 and 2 never failed");
    assert!(
        s.tasks.iter().filter(|t| t.service == "churn").count() >= 3,
        "churn was scaled up and down"
    );
    // Each failed task was killed by its executor after its health check
    // failed twice, and the events say so.
    for t in ones.iter().filter(|t| t.is_terminal()) {
        let last = t.timeline.last().unwrap();
        assert_eq!(
            (last.state.as_str_name(), last.healthy),
            ("TASK_KILLED", Some(false))
        );
    }
    let first = ones[0].task_id.as_str();
    let events: Vec<&str> = s
        .events
        .iter()
        .filter(|e| e.message.contains(first))
        .map(|e| e.message.as_str())
        .collect();
    assert!(
        events
            .iter()
            .any(|m| m.contains("killed after 2 failed health checks")),
        "{events:?}"
    );
    replica.stop().await;
}

/// Issue 24 C under a scheduler failover: instance 1 of `tally` keeps
/// failing its health check and has reached `restart_backoff_max` (8 s);
/// the leader stops (a failover stop) and the follower takes over. The
/// instance keeps failing, so its next launch should still wait the cap
/// after its last failed task ended: issue 24 asks that only the instance's
/// own stable, healthy run forgive its failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_keeps_a_failing_instance_s_backoff() {
    use mesos_appliance::testbed::SimulatedHealth;
    use support::zookeeper::ZkServer;

    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(4)).await;
    tb.set_health("tally.1.", None, SimulatedHealth::Unhealthy);
    let specs = services(json!([health_checked("tally", 3, "1s", "8s")]));
    let r1 = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        specs.clone(),
        core_config(),
    )
    .await;
    let failed_ones = |s: &Snapshot| {
        s.tasks
            .iter()
            .filter(|t| t.task_id.as_str().starts_with("tally.1.") && t.is_terminal())
            .count()
    };
    // Four failures: the next launch waits 8 s, the cap.
    let s = r1
        .wait_for("four failed tasks of tally.1", WAIT, |s| {
            failed_ones(s) >= 4
        })
        .await;
    let last_end = s
        .tasks
        .iter()
        .filter(|t| t.task_id.as_str().starts_with("tally.1."))
        .filter_map(|t| ended_at(t))
        .fold(0.0, f64::max);
    let r2 = Replica::start(&zk.connect_string(), "r2", &tb.url(), specs, core_config()).await;
    r1.stop().await;
    let s = r2
        .wait_for("r2 launched tally.1 again", WAIT, |s| {
            s.tasks
                .iter()
                .any(|t| t.task_id.as_str().starts_with("tally.1.") && t.launched_at > last_end)
        })
        .await;
    let next = s
        .tasks
        .iter()
        .filter(|t| t.task_id.as_str().starts_with("tally.1.") && t.launched_at > last_end)
        .map(|t| t.launched_at)
        .fold(f64::MAX, f64::min);
    let gap = next - last_end;
    assert!(
        gap >= 8.0 - 0.05,
        "tally.1 relaunched {gap:.1} s after its fourth failure, under the 8 s it had reached"
    );
    r2.stop().await;
}

/// An operator who lowers `restart_backoff_max` of a crash-looping service
/// (not a new spec: the failure count stays) expects the instance's wait to
/// be capped by the new maximum at once, not by the one it was computed
/// with: instance 0 failed once under a 60 s backoff; the backoff becomes
/// 1 s, at most 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_backoff_maximum_caps_the_pending_wait() {
    use mesos_appliance::testbed::SimulatedHealth;

    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    tb.set_health("tally.", None, SimulatedHealth::Unhealthy);
    let tally =
        |backoff: &str, max: &str| services(json!([health_checked("tally", 1, backoff, max)]));
    let replica = Replica::in_memory("r1", &tb.url(), tally("60s", "120s"), core_config()).await;
    replica
        .wait_for("tally.0 failed once", WAIT, |s| {
            s.tasks.iter().any(|t| t.is_terminal())
        })
        .await;
    replica
        .put_service(tally("1s", "2s").remove(0))
        .await
        .expect("service stored");
    replica
        .wait_for(
            "tally.0 launched again within the new maximum",
            Duration::from_secs(5),
            |s| s.tasks.len() >= 2,
        )
        .await;
    replica.stop().await;
}

/// After a scale-down, the instances beyond the new count are not wanted:
/// the services page should not show them in a restart backoff, nor let
/// their failures make the service's `consecutive_failures` and
/// `next_launch_after` (a scale-up keeps the instance's count, issue 24 C;
/// that is about what launches next, not what is shown meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaled_away_instance_shows_no_backoff() {
    use mesos_appliance::testbed::SimulatedHealth;

    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    tb.set_health("tally.1.", None, SimulatedHealth::Unhealthy);
    let tally =
        |instances: u32| services(json!([health_checked("tally", instances, "30s", "60s")]));
    let replica = Replica::in_memory("r1", &tb.url(), tally(2), core_config()).await;
    replica
        .wait_for("tally.1 in its backoff", WAIT, |s| {
            s.services.iter().any(|st| !st.backoff.is_empty())
        })
        .await;
    replica
        .put_service(tally(1).remove(0))
        .await
        .expect("service stored");
    let s = replica
        .wait_for("tally at one instance", WAIT, |s| {
            s.services
                .iter()
                .any(|st| st.spec.instances == 1 && st.running == 1 && st.killing == 0)
        })
        .await;
    let status = s
        .services
        .iter()
        .find(|st| st.spec.name == "tally")
        .unwrap();
    assert!(
        status.backoff.is_empty()
            && status.consecutive_failures == 0
            && status.next_launch_after.is_none(),
        "tally has one instance, yet shows backoff {:?}, consecutive_failures {}, next_launch_after {:?}",
        status.backoff,
        status.consecutive_failures,
        status.next_launch_after
    );
    replica.stop().await;
}
