//! Scheduler core benchmark (run: `cargo bench --bench scheduler`): one
//! in-process replica on a real ZooKeeper against an in-process testbed.
//!
//! 1. launch 10,000 tasks over 100 simulated agents: wall time to all
//!    RUNNING, offers received per second meanwhile, process RSS;
//! 2. explicit reconciliation of the 10,000 tasks: time to converge;
//! 3. placement alone: offers planned per second (100 offers, pending work).
//!
//! The testbed runs in the same process, so RSS includes it.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mesos_appliance::mesos::resources::Resources;
use mesos_appliance::mesos::v1;
use mesos_appliance::scheduler::offers::OfferRegistry;
use mesos_appliance::scheduler::placement::{Demand, plan};
use mesos_appliance::scheduler::{Command, ReconcileKind};
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::zookeeper::ZkServer;

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    support::mesos::init();
    let zk = ZkServer::start();
    // The testbed runs as its own process so that RSS below is the scheduler's.
    let testbed_bin = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("mesos-testbed");
    let mut testbed = std::process::Command::new(&testbed_bin)
        .args([
            "--port",
            "0",
            "--agents",
            "100",
            "--agent-resources",
            "cpus:16;mem:8192;disk:1000;ports:[31000-32000]",
        ])
        .args([
            "--allocation-interval",
            "200ms",
            "--heartbeat-interval",
            "5s",
        ])
        .args([
            "--status-update-retry-min",
            "30s",
            "--status-update-retry-max",
            "60s",
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("mesos-testbed binary (cargo bench builds it)");
    let url = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(testbed.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim().rsplit(' ').next().unwrap().to_string()
    };
    let specs =
        services(json!((0..10).map(|i| json!({
        "name": format!("svc{i}"), "command": "x", "cpus": 0.1, "mem": 8, "instances": 1000
    })).collect::<Vec<_>>()));
    let mut core = core_config();
    core.snapshot_interval = Duration::from_millis(500);
    core.offer_ttl = Duration::from_secs(5);
    core.decline_refuse_seconds = 1.0;
    core.reconcile.explicit_abort_timeout = Duration::from_secs(300);
    core.reconcile.explicit_max_backoff = Duration::from_secs(4);
    let rss_before = rss_mb();
    let started = Instant::now();
    let replica = Replica::start(&zk.connect_string(), "bench", &url, specs, core).await;
    let all_running = |s: &mesos_appliance::scheduler::Snapshot| {
        (0..10).all(|i| running(s, &format!("svc{i}")) == 1000)
    };
    replica
        .wait_for("10,000 running", Duration::from_secs(900), all_running)
        .await;
    let launch = started.elapsed();
    println!(
        "launch 10,000 tasks over 100 agents: {:.1} s wall, {:.0} tasks/s",
        launch.as_secs_f64(),
        10_000.0 / launch.as_secs_f64()
    );
    println!(
        "  scheduler process RSS {:.0} MB (was {:.0} MB before it started)",
        rss_mb(),
        rss_before
    );

    let t0 = Instant::now();
    let run = replica
        .handle
        .request(Duration::from_secs(10), |reply| Command::Reconcile {
            kind: ReconcileKind::Explicit,
            reply,
        })
        .await
        .expect("reconcile accepted");
    // It may be queued behind the runs that followed the subscription.
    println!("  reconciliation request: {}", run.outcome);
    let s = replica
        .wait_for(
            "explicit reconciliation converged",
            Duration::from_secs(600),
            |s| {
                s.reconciliation
                    .history
                    .iter()
                    .any(|r| r.trigger.as_str() == "manual" && r.outcome.as_str() != "running")
            },
        )
        .await;
    let done = s
        .reconciliation
        .history
        .iter()
        .rev()
        .find(|r| r.trigger.as_str() == "manual")
        .unwrap();
    assert_eq!(done.asked, 10_000, "{done:?}");
    let duration = done.finished_at.unwrap_or(done.started_at) - done.started_at;
    println!(
        "explicit reconciliation of 10,000 tasks: {duration:.2} s to {} ({} answered, {} call(s)); {:.2} s from the request",
        done.outcome,
        done.answered,
        done.calls,
        t0.elapsed().as_secs_f64(),
    );
    replica.stop().await;
    let _ = testbed.kill();
    let _ = testbed.wait();

    // Placement alone: 100 offers of 16 CPUs, 1,600 instances pending.
    let spec: mesos_appliance::scheduler::ServiceSpec = serde_json::from_value(
        json!({"name": "p", "command": "x", "cpus": 1, "mem": 64, "ports": 1, "instances": 1600}),
    )
    .unwrap();
    let rounds = 200;
    let t0 = Instant::now();
    let mut placed = 0;
    for round in 0..rounds {
        let mut registry = OfferRegistry::new(Duration::from_secs(60), Duration::from_secs(60));
        for i in 0..100 {
            registry.add(
                v1::Offer {
                    id: v1::OfferId {
                        value: format!("o{round}-{i}"),
                    },
                    agent_id: v1::AgentId {
                        value: format!("a{i}"),
                    },
                    hostname: format!("h{i}"),
                    resources: Resources::parse("cpus:16;mem:8192;ports:[31000-32000]")
                        .unwrap()
                        .to_protos(None),
                    ..Default::default()
                },
                tokio::time::Instant::now(),
                0.0,
            );
        }
        let demand = Demand {
            spec: &spec,
            missing: (0..1600).collect(),
            occupied: vec![],
            executor_resources: Resources::new(),
        };
        placed += plan(&[demand], &mut registry, &HashMap::new()).len();
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "placement: {:.0} offers/s ({:.0} tasks placed/s, {} per round)",
        (rounds * 100) as f64 / secs,
        placed as f64 / secs,
        placed / rounds
    );
}
