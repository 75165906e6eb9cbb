//! Maintenance windows through the whole stack (real ZooKeeper, testbed):
//!
//! - a window on one agent starting in 2 minutes: the scheduler accepts the
//!   inverse offer, its task there moves off well before the window (a
//!   replacement on another agent first, then the old task is killed), and
//!   no new task lands on that agent;
//! - an inverse offer that would break a service's floor (both instances on
//!   the machine, nowhere to go) is declined, with the reason in the audit
//!   log, and the master's maintenance status shows the DECLINE;
//! - declined with somewhere to go, the tasks still move off, start first.

use crate::support;

use std::time::{Duration, Instant};

use mesos_appliance::scheduler::{ServiceSpec, Snapshot};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::appliance::{Replica, core_config, services};
use support::mesos::operator;
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(60);

/// `instances` tasks of `web`, `hostname:UNIQUE` when `spread`; available
/// after 1 s RUNNING.
fn web(instances: u32, spread: bool) -> ServiceSpec {
    let constraints: Vec<&str> = if spread {
        vec!["hostname:UNIQUE"]
    } else {
        vec![]
    };
    services(
        json!([{"name": "web", "command": "sleep 1000", "cpus": 0.1, "mem": 32,
        "instances": instances, "constraints": constraints,
        "restart_backoff": "1s", "restart_backoff_max": "4s", "kill_grace_period": "1s",
        "upgrade": {"min_healthy": "1s", "deadline": "6s"}}]),
    )
    .remove(0)
}

/// Live (not being killed) RUNNING tasks of `web`: (agent ID, hostname).
fn running(s: &Snapshot) -> Vec<(String, String)> {
    s.tasks
        .iter()
        .filter(|t| t.service == "web" && t.kill.is_none())
        .filter(|t| t.state.as_str_name() == "TASK_RUNNING")
        .map(|t| (t.agent_id.to_string(), t.hostname.clone()))
        .collect()
}

/// Live tasks of `web` on `agent` (any state, also those being killed).
fn live_on(s: &Snapshot, agent: &str) -> usize {
    s.tasks
        .iter()
        .filter(|t| t.service == "web" && t.agent_id == agent)
        .filter(|t| !mesos_appliance::mesos::is_terminal(t.state))
        .count()
}

/// A window of 10 minutes on machine `hostname` starting in `secs`.
fn window(hostname: &str, secs: u64) -> Value {
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        + Duration::from_secs(secs);
    json!({"type": "UPDATE_MAINTENANCE_SCHEDULE", "update_maintenance_schedule": {"schedule": {
        "windows": [{"machine_ids": [{"hostname": hostname, "ip": "127.0.0.1"}],
            "unavailability": {"start": {"nanoseconds": start.as_nanos() as i64},
                "duration": {"nanoseconds": 600_000_000_000i64}}}]}}})
}

async fn start(agents: usize, spec: ServiceSpec) -> (ZkServer, Testbed, Replica) {
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(agents)).await;
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        vec![spec],
        core_config(),
    )
    .await;
    (zk, tb, replica)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_move_off_an_agent_before_its_window_and_nothing_new_lands_there() {
    let (_zk, tb, replica) = start(3, web(2, true)).await;
    let s = replica
        .wait_for("two running tasks", WAIT, |s| running(s).len() == 2)
        .await;
    let (agent, hostname) = running(&s)[0].clone();
    // Both available (1 s) before the window is posted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answer = operator(&tb.url(), window(&hostname, 120)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let posted = Instant::now();
    let s = replica
        .wait_for(
            "the task moved off the agent",
            Duration::from_secs(15),
            |s| live_on(s, &agent) == 0 && running(s).len() == 2,
        )
        .await;
    let moved_in = posted.elapsed();
    assert!(
        running(&s).iter().all(|(a, _)| *a != agent),
        "{:?}",
        running(&s)
    );
    assert!(
        s.events.iter().any(|e| e.message.contains("accepted")),
        "{:?}",
        s.events
    );
    // Nothing new lands there while the window is near.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(live_on(&replica.snapshot(), &agent), 0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("moved off in {moved_in:?}");
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inverse_offer_that_would_break_the_floor_is_declined_with_the_reason_in_the_audit() {
    // One agent: both instances run there, so moving off leaves none.
    let (_zk, tb, replica) = start(1, web(2, false)).await;
    replica
        .wait_for("two running tasks", WAIT, |s| running(s).len() == 2)
        .await;
    let answer = operator(&tb.url(), window("agent-0", 120)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let deadline = Instant::now() + Duration::from_secs(15);
    let entry = loop {
        assert!(Instant::now() < deadline, "no audit entry of a decline");
        let log = replica.coordinator.audit_log(50).await.unwrap();
        if let Some((_, entry)) = log
            .into_iter()
            .find(|(_, e)| e["action"] == "maintenance.decline_inverse_offer")
        {
            break entry;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let reason = entry["reason"].as_str().unwrap();
    assert!(reason.contains("service web would keep 0"), "{reason}");
    let status = operator(&tb.url(), json!({"type": "GET_MAINTENANCE_STATUS"})).await;
    let status: Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(
        status["get_maintenance_status"]["status"]["draining_machines"][0]["statuses"][0]["status"],
        "DECLINE"
    );
    // Nothing was killed.
    assert_eq!(running(&replica.snapshot()).len(), 2);
    replica.stop().await;
}

/// Trial 4's fault: every instance of a service on the agent whose window
/// is posted. The inverse offer is declined (the floor would break if the
/// agent went now), but the tasks move anyway, start first — never fewer
/// than two running — and none is left there long before the window (it
/// used to keep declining, and the window killed both at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_whose_instances_all_run_on_the_agent_moves_off_before_its_window() {
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(3)).await;
    // All agents but the first drained at the master until both instances
    // run on the first.
    let agents: Vec<String> = tb.agents().into_iter().map(|a| a.id).collect();
    let (first, others) = (agents[0].clone(), agents[1..].to_vec());
    for agent in &others {
        let drain = json!({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": agent}}});
        let answer = operator(&tb.url(), drain).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        vec![web(2, false)],
        core_config(),
    )
    .await;
    let s = replica
        .wait_for("two running on the first agent", WAIT, |s| {
            running(s).len() == 2 && live_on(s, &first) == 2
        })
        .await;
    let hostname = running(&s)[0].1.clone();
    for agent in &others {
        let reactivate =
            json!({"type": "REACTIVATE_AGENT", "reactivate_agent": {"agent_id": {"value": agent}}});
        let answer = operator(&tb.url(), reactivate).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    // Both available (1 s) before the window is posted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answer = operator(&tb.url(), window(&hostname, 120)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);

    let deadline = Instant::now() + WAIT;
    let mut fewest = usize::MAX;
    loop {
        let s = replica.snapshot();
        fewest = fewest.min(running(&s).len());
        if live_on(&s, &first) == 0 && running(&s).len() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still on {first}: {:?}",
            running(&s)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(fewest >= 2, "an instance was down while moving: {fewest}");
    let log = replica.coordinator.audit_log(50).await.unwrap();
    let decline = log
        .iter()
        .find(|(_, e)| e["action"] == "maintenance.decline_inverse_offer")
        .map(|(_, e)| e["reason"].as_str().unwrap_or_default().to_string())
        .expect("the first answer declines");
    assert!(
        decline.contains("would keep 0") && decline.contains("moving the tasks off first"),
        "{decline}"
    );
    replica.stop().await;
}
