//! Failover benchmark (run: `cargo bench --bench failover`): two real
//! `mesos-appliance` replicas of one deployment on a real ZooKeeper with a
//! 4 s session timeout, against an in-process testbed. The leader gets
//! SIGKILL (its session must expire) or SIGTERM (a failover stop: it leaves
//! the election at once); the time runs from the signal to the follower's
//! SUBSCRIBE being answered by the master. 10 runs each; median and max, also
//! as ratios of the session timeout.
//!
//! The replicas are the release binaries next to this bench (cargo bench
//! builds them).

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::util::unix_now_secs;
use serde_json::json;
use support::zookeeper::{ZkServer, free_port};

const SESSION: Duration = Duration::from_secs(4);
const RUNS: usize = 10;

fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    dir.join("mesos-appliance")
}

struct Replica {
    child: Child,
    url: String,
}

fn spawn(zk: &str, master: &str, services: &str) -> Replica {
    let port = free_port();
    let child = Command::new(binary())
        .args([
            "--zk",
            &format!("zk://{zk}/bench"),
            "--zk-session-timeout",
            "4s",
            "--master",
            master,
        ])
        .args([
            "--framework-name",
            "failover-bench",
            "--framework-user",
            "root",
            "--deployment-id",
            "d1",
        ])
        .args([
            "--services",
            services,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mesos-appliance (build it: cargo build --release)");
    Replica {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

async fn role(client: &reqwest::Client, r: &Replica) -> String {
    let state: Option<serde_json::Value> =
        match client.get(format!("{}/api/v1/state", r.url)).send().await {
            Ok(resp) => resp.json().await.ok(),
            Err(_) => None,
        };
    state
        .map(|s| {
            format!(
                "{}/{}",
                s["leadership"]["role"].as_str().unwrap_or(""),
                s["framework"]["state"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_default()
}

async fn wait_role(client: &reqwest::Client, r: &Replica, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while role(client, r).await != want {
        assert!(Instant::now() < deadline, "replica never became {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stats(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
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
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services.json");
    std::fs::write(
        &services,
        json!([{"name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": 4}])
            .to_string(),
    )
    .unwrap();
    let services = services.display().to_string();
    let client = reqwest::Client::new();

    for (name, signal) in [("SIGKILL", libc::SIGKILL), ("SIGTERM", libc::SIGTERM)] {
        let mut samples = Vec::new();
        let mut leader = spawn(&zk.connect_string(), &tb.url(), &services);
        wait_role(&client, &leader, "leader/subscribed").await;
        for _ in 0..RUNS {
            let follower = spawn(&zk.connect_string(), &tb.url(), &services);
            wait_role(&client, &follower, "follower/standby").await;
            let before = tb.scheduler_calls("SUBSCRIBE").len();
            let t0 = unix_now_secs();
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(leader.child.id() as i32, signal) };
            let deadline = Instant::now() + Duration::from_secs(60);
            let at = loop {
                if let Some(c) = tb
                    .scheduler_calls("SUBSCRIBE")
                    .into_iter()
                    .skip(before)
                    .find(|c| c.status == 200)
                {
                    break c.at;
                }
                assert!(Instant::now() < deadline, "no SUBSCRIBE after {name}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            samples.push(at - t0);
            let _ = leader.child.kill();
            let _ = leader.child.wait();
            wait_role(&client, &follower, "leader/subscribed").await;
            leader = follower;
        }
        stats(&format!("leader {name} -> follower SUBSCRIBED"), samples);
        let _ = leader.child.kill();
        let _ = leader.child.wait();
        tokio::time::sleep(SESSION + Duration::from_secs(1)).await;
    }
}
