//! A lost instance after a scheduler failover gets its offer at once
//! (`docs/mesos-protocol.md#suppress-and-revive`), with real
//! `mesos-appliance` processes, a real ZooKeeper and the testbed: 4 agents,
//! service `sleepers` of 3 instances on distinct hosts, the leader's decline
//! filter 120 s. The leader declined the free agent's offer for 120 s and
//! sent SUPPRESS; it dies (or hangs, its stream left open); the agent of
//! instance 0 becomes unreachable while no replica works; the next leader
//! learns TASK_UNREACHABLE from its reconciliation (the appliance is
//! PARTITION_AWARE; its default `unreachable` policy replaces at once) and
//! must run the replacement
//! within 5 s, although the previous leader's filter hides the only agent
//! that fits:
//! - SIGKILL: the master deactivates the framework when its stream closes,
//!   which drops the filter (`deactivateFramework` in
//!   `src/master/allocator/mesos/hierarchical.cpp`);
//! - SIGSTOP: the stream stays open, the new SUBSCRIBE is a failover that
//!   keeps the filter (`Master::failoverFramework` in `src/master/master.cpp`),
//!   and only the new leader's REVIVE brings the offer.

use crate::support;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::cluster::Cluster;
use support::processes::*;
use support::truth::count;

/// The decline filter the leader used.
const REFUSE_SECONDS: &str = "120";

/// The replacement's deadline after the reconciliation that reports the loss.
const REPLACED_WITHIN: Duration = Duration::from_secs(5);

impl Cluster {
    /// ZooKeeper, a testbed of four agents and a folder.
    async fn with_four_agents() -> Cluster {
        support::mesos::init();
        Cluster {
            zk: support::zookeeper::ZkServer::start(),
            tb: Testbed::start(TestbedConfig::for_tests(4)).await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A replica of `sleepers`: 3 instances, `hostname:UNIQUE`, a 120 s
    /// decline filter.
    fn sleepers_args(&self) -> Vec<String> {
        let mut args = base_args(&self.zk.connect_string(), &self.tb.url(), "revive");
        let services = json!([{"name": "sleepers", "command": "sleep 100000", "cpus": 0.1,
            "mem": 32, "instances": 3, "constraints": ["hostname:UNIQUE"]}]);
        let file = services_file(self.dir.path(), "services.json", &services);
        args.extend(["--services".into(), file.display().to_string()]);
        with_flags(args, &["--decline-refuse-seconds", REFUSE_SECONDS])
    }

    /// Waits until the master has a DECLINE with a 120 s filter and a
    /// SUPPRESS from `fid`.
    async fn wait_declined_and_suppressed(&self, fid: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let calls = self.tb.calls();
            let mine = calls
                .iter()
                .filter(|c| c.framework_id.as_deref() == Some(fid) && c.status == 202);
            let declined = mine.clone().any(|c| {
                c.call_type == "DECLINE"
                    && c.call["decline"]["filters"]["refuse_seconds"] == json!(120.0)
            });
            let suppressed = mine.clone().any(|c| c.call_type == "SUPPRESS");
            if declined && suppressed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no DECLINE(120 s) and SUPPRESS from {fid}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The master's ID of instance 0's task and its agent.
fn instance_zero(tb: &Testbed) -> (String, String) {
    let task = tb
        .tasks()
        .into_iter()
        .find(|t| t.task_id.starts_with("sleepers.0."))
        .expect("instance 0 at the master");
    (task.task_id, task.agent_id)
}

/// How the previous leader goes away.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Departure {
    /// SIGKILL: its stream closes.
    Killed,
    /// SIGSTOP: its stream stays open until the next leader's SUBSCRIBE.
    Stopped,
}

async fn lost_instance_is_replaced_at_once(departure: Departure) {
    let s = Cluster::with_four_agents().await;
    let a = Appliance::spawn("a", &s.sleepers_args());
    let state = a
        .wait_state("3 running", WAIT, |st| {
            framework_state(st) == "subscribed" && running_count(st) == 3
        })
        .await;
    let fid = framework_id(&state).unwrap();
    s.wait_declined_and_suppressed(&fid).await;
    let (lost_task, lost_agent) = instance_zero(&s.tb);

    match departure {
        Departure::Killed => {
            a.signal(libc::SIGKILL);
            let deadline = Instant::now() + WAIT;
            while s.tb.frameworks().iter().any(|f| f.id == fid && f.connected) {
                assert!(Instant::now() < deadline, "the stream never closed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Departure::Stopped => a.signal(libc::SIGSTOP),
    }
    // No replica works now: the stopped one holds its stream but reads
    // nothing, and its ZooKeeper session runs out.
    assert!(s.tb.make_agent_unreachable(&lost_agent));
    s.zk.wait_no_children("/appliance/election", WAIT).await;
    if departure == Departure::Stopped {
        assert!(
            s.tb.frameworks().iter().any(|f| f.id == fid && f.connected),
            "the stopped leader's stream is still open"
        );
    }
    let mark = s.tb.calls().last().map_or(0, |c| c.seq);

    let b = Appliance::spawn("b", &s.sleepers_args());
    // The first RECONCILE of b's subscription reports the loss.
    let deadline = Instant::now() + WAIT;
    let reconciled_at = loop {
        let reconcile = s.tb.calls().into_iter().find(|c| {
            c.seq > mark && c.call_type == "RECONCILE" && c.call.to_string().contains(&lost_task)
        });
        if let Some(call) = reconcile {
            break call.at;
        }
        if Instant::now() >= deadline {
            let calls: Vec<String> =
                s.tb.calls()
                    .iter()
                    .filter(|c| c.seq > mark)
                    .map(|c| format!("{} {}", c.call_type, c.status))
                    .collect();
            panic!(
                "b never reconciled {lost_task}; calls since: {calls:?}\nstate: {:?}\n{}",
                b.state().await.map(|st| st["framework"].clone()),
                tail(&b.log(), 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let replaced_at = loop {
        let replacement = s.tb.tasks().into_iter().find(|t| {
            t.task_id.starts_with("sleepers.0.")
                && t.task_id != lost_task
                && t.state == mesos_appliance::mesos::v1::TaskState::TaskRunning
        });
        if replacement.is_some() {
            break now_unix();
        }
        let waited = now_unix() - reconciled_at;
        assert!(
            waited < REPLACED_WITHIN.as_secs_f64() + 5.0,
            "no replacement {waited:.1} s after the reconciliation; calls since: {:?}\n{}",
            s.tb.calls()
                .iter()
                .filter(|c| c.seq > mark)
                .map(|c| c.call_type.clone())
                .collect::<Vec<_>>(),
            tail(&b.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let after = replaced_at - reconciled_at;
    println!("{departure:?}: replacement RUNNING {after:.2} s after the reconciliation");
    assert!(
        after < REPLACED_WITHIN.as_secs_f64(),
        "replacement RUNNING {after:.2} s after the reconciliation"
    );
    let state = b
        .wait_state("3 running, instance 0's task unreachable", WAIT, |st| {
            running_count(st) == 3 && count(st, "TASK_UNREACHABLE") == 1
        })
        .await;
    assert_eq!(framework_id(&state).as_deref(), Some(fid.as_str()));
    if departure == Departure::Stopped {
        a.signal(libc::SIGKILL);
    }
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Issue 24 A: the leader SIGKILLed; the master drops its filters when its
/// stream closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_instance_is_replaced_at_once_after_the_leader_was_killed() {
    lost_instance_is_replaced_at_once(Departure::Killed).await;
}

/// Issue 24 A with standing filters: the leader SIGSTOPped, its stream left
/// open, so the next SUBSCRIBE is a failover that keeps its 120 s filter and
/// only the next leader's REVIVE brings the free agent's offer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_instance_is_replaced_at_once_while_the_old_leaders_filters_stand() {
    lost_instance_is_replaced_at_once(Departure::Stopped).await;
}
