//! Failover benchmark (run: `cargo bench --bench failover`): two real
//! `mesos-appliance` replicas of one deployment on a real ZooKeeper with a
//! 4 s session timeout, against a `mesos-testbed` process, with a few tasks.
//! The leader gets SIGKILL (its session must expire) or SIGTERM (a failover
//! stop: it leaves the election at once); the time runs from the signal to
//! the follower's SUBSCRIBE being answered by the master. 10 runs each;
//! median and max, also as ratios of the session timeout.
//!
//! The same failover with N tasks, and what it costs per task, is part of
//! the side-by-side benchmark (`benches/scheduler.rs`, run `failover`).

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[allow(dead_code)]
mod harness;

use std::time::{Duration, Instant};

use harness::appliance::{SESSION, replica_args, wait_role};
use harness::testbed::TestbedProcess;
use mesos_appliance::util::unix_now_secs;
use serde_json::json;
use support::processes::{Appliance, services_file};
use support::zookeeper::ZkServer;

const RUNS: usize = 10;

fn stats(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let median = (samples[samples.len() / 2] + samples[(samples.len() - 1) / 2]) / 2.0;
    let max = samples[samples.len() - 1];
    let t = SESSION.as_secs_f64();
    println!(
        "{name}: median {:.0} ms ({:.2} x session timeout), max {:.0} ms ({:.2} x); samples {:?}",
        median * 1000.0,
        median / t,
        max * 1000.0,
        max / t,
        samples
            .iter()
            .map(|s| (s * 1000.0).round() as u64)
            .collect::<Vec<_>>()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    support::mesos::init();
    let zk = ZkServer::start();
    let testbed = TestbedProcess::start(2, &[]);
    let dir = tempfile::tempdir().unwrap();
    let services = services_file(
        dir.path(),
        "services.json",
        &json!([{"name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": 4}]),
    );
    let args = replica_args(&zk.connect_string(), &testbed.url, &services, &[]);
    let http = support::mesos::client();
    let wait = Duration::from_secs(60);

    for (name, signal) in [("SIGKILL", libc::SIGKILL), ("SIGTERM", libc::SIGTERM)] {
        let mut samples = Vec::new();
        let mut leader = Appliance::spawn("replica", &args);
        wait_role(&leader, "leader/subscribed", wait).await.unwrap();
        for _ in 0..RUNS {
            let mut follower = Appliance::spawn("replica", &args);
            wait_role(&follower, "follower/standby", wait)
                .await
                .unwrap();
            let before = testbed.subscribed_at(&http).await.unwrap().len();
            let t0 = unix_now_secs();
            leader.signal(signal);
            let deadline = Instant::now() + wait;
            let at = loop {
                if let Some(at) = testbed.subscribed_at(&http).await.unwrap().get(before) {
                    break *at;
                }
                assert!(Instant::now() < deadline, "no SUBSCRIBE after {name}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            samples.push(at - t0);
            leader.signal(libc::SIGKILL);
            let _ = leader.wait_exit(Duration::from_secs(10)).await;
            wait_role(&follower, "leader/subscribed", wait)
                .await
                .unwrap();
            std::mem::swap(&mut leader, &mut follower);
        }
        stats(&format!("leader {name} -> follower SUBSCRIBED"), samples);
        leader.signal(libc::SIGKILL);
        tokio::time::sleep(SESSION + Duration::from_secs(1)).await;
    }
}
