//! Failover and task-store benchmarks on a real ZooKeeper server.
//!
//! `cargo bench --bench coordination` prints:
//! - failover after a clean close: the leader calls `close()` (what SIGTERM
//!   does), time until the follower publishes `Leader`;
//! - failover after an abandoned session (the SIGKILL equivalent): the
//!   leader's link is cut by the chaos proxy, so its TCP connection closes
//!   but the session lives on the server until it times out;
//! - task-store writes per second (fenced multi-op creates), sequential and
//!   with 64 writes in flight.
//!
//! Median and max over `RUNS` runs each; the negotiated session timeout is
//! printed with them. Uses the test harness in `tests/support`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mesos_appliance::coordination::{Coordinator, Expect, RecordKind};
use support::chaos_proxy::ChaosProxy;
use support::replicas::{config, start_with, wait_follower_of, wait_leader};
use support::zookeeper::ZkServer;

const RUNS: usize = 12;
const WRITES: usize = 2000;
const T: Duration = Duration::from_secs(20);

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let zk = ZkServer::start();
    let mut close = Vec::new();
    let mut abandon = Vec::new();
    let mut negotiated = None;
    for run in 0..RUNS {
        let (ms, timeout) = failover(&zk, run, false).await;
        negotiated = Some(timeout);
        close.push(ms);
        abandon.push(failover(&zk, run, true).await.0);
    }
    let timeout = negotiated.unwrap_or_default();
    report("failover, clean close", &mut close, timeout);
    report("failover, abandoned session", &mut abandon, timeout);

    for in_flight in [1, 64] {
        let per_sec = writes(&zk, in_flight).await;
        println!(
            "task-store writes, {in_flight:>2} in flight: {per_sec:>8.0} records/s ({WRITES} records)"
        );
    }
}

/// One failover; returns milliseconds to the follower's `Leader` and the
/// negotiated session timeout.
async fn failover(zk: &ZkServer, run: usize, abandon: bool) -> (f64, Duration) {
    let root = format!("/bench/{}-{run}", if abandon { "abandon" } else { "close" });
    let proxy = ChaosProxy::start(zk.addr()).await;
    let mut ca = config(&proxy.connect_string(), "a");
    ca.url.root = root.clone();
    let mut cb = config(&zk.connect_string(), "b");
    cb.url.root = root;
    let a = start_with(ca).await;
    wait_leader(a.as_ref(), T).await;
    let b = start_with(cb).await;
    wait_follower_of(b.as_ref(), "a", T).await;
    let timeout = a.session_timeout().unwrap_or_default();

    let mut rx = b.leadership();
    let t0 = Instant::now();
    if abandon {
        proxy.break_link();
    } else {
        a.close().await;
    }
    support::wait_for(&mut rx, T, "follower leads", |l| l.is_leader()).await;
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    a.close().await;
    b.close().await;
    (ms, timeout)
}

async fn writes(zk: &ZkServer, in_flight: usize) -> f64 {
    let mut c = config(&zk.connect_string(), "w");
    c.url.root = format!("/bench/writes-{in_flight}");
    let leader = start_with(c).await;
    wait_leader(leader.as_ref(), T).await;
    let coordinator: Arc<dyn Coordinator> = leader.clone();
    let t0 = Instant::now();
    let results: Vec<_> = futures::stream::iter(0..WRITES)
        .map(|i| {
            let c = coordinator.clone();
            async move {
                let record = serde_json::json!({
                    "id": format!("task-{i}"), "service": "web", "state": "TASK_RUNNING",
                    "agent_id": "agent-1", "hostname": "host-1.example", "updated": 1_700_000_000 + i,
                });
                c.put_record(RecordKind::Tasks, &format!("task-{i:05}"), &record, Expect::Absent)
                    .await
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let elapsed = t0.elapsed();
    assert!(results.iter().all(|r| r.is_ok()), "a write failed");
    leader.close().await;
    WRITES as f64 / elapsed.as_secs_f64()
}

fn report(what: &str, samples: &mut [f64], timeout: Duration) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let median = if samples.len().is_multiple_of(2) {
        (samples[samples.len() / 2 - 1] + samples[samples.len() / 2]) / 2.0
    } else {
        samples[samples.len() / 2]
    };
    let max = samples.last().copied().unwrap_or_default();
    let all: Vec<String> = samples.iter().map(|s| format!("{s:.0}")).collect();
    println!(
        "{what}: median {median:.1} ms, max {max:.1} ms over {} runs (session timeout {timeout:?}); all: {}",
        samples.len(),
        all.join(" ")
    );
}
