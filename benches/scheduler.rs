//! Side-by-side scheduler benchmark: `mesos-appliance` against a minimal
//! pymesos scheduler and against the testbed's own floor, in one run, on
//! this machine. Run it with
//!
//! ```text
//! cargo bench --bench scheduler                     # 10,000 tasks
//! cargo bench --bench scheduler -- 10000 20000 50000
//! BENCH_RUNS=floor,pymesos cargo bench --bench scheduler -- 20000
//! ```
//!
//! (`BENCH_SIZES=10000,20000` works too). CI does not run it: `cargo test`
//! does not run benchmarks.
//!
//! # What runs
//! At each size N, each scheduler gets a fresh `mesos-testbed` process (the
//! release binary; Mesos' defaults: 1 s allocation interval, agents of
//! `cpus:4;mem:8192;disk:65536;ports:[31000-32000]`, status update retries
//! from 10 s) with one agent per 100 tasks, at least 100 (1,000 at 100,000;
//! `BENCH_AGENTS` overrides), and launches N
//! tasks of `cpus` 0.01, `mem` 1, `sleep 3600` (command executor):
//! - `floor`: a do-nothing Rust client on the crate's own Mesos client
//!   (`harness/floor.rs`): it accepts every offer with as many tasks as fit
//!   and acknowledges every update, 32 acknowledgements in flight. No
//!   scheduler can beat it on this testbed: it is the limit to race. It
//!   and pymesos report their phases (subscribed, first offers, all tasks
//!   placed, first TASK_RUNNING), printed under the table: where the time
//!   goes.
//! - `pymesos`: a minimal pymesos 0.3.15 scheduler, Python, no persistence
//!   (`harness/pymesos_scheduler.py`); pymesos acknowledges every update
//!   itself, one call at a time on one connection, in JSON.
//! - `appliance`: the `mesos-appliance` release binary, one replica, with a
//!   real ZooKeeper (a fresh Debian server per run) and `--services` (N
//!   instances over services of at most 10,000), `serve` defaults otherwise
//!   (`--reconcile-cooldown 0s` so the manual run starts at once). Its
//!   phases (subscribed, first and last ACCEPT answered) are read from its
//!   log.
//! - `failover`: two appliance replicas of one deployment with a 4 s
//!   ZooKeeper session on a fresh ZooKeeper and testbed.
//! - `placement`: the placement function alone (no I/O), offers per second.
//!
//! `BENCH_RUNS` picks runs (default `floor,pymesos,appliance,failover,placement`).
//!
//! # What the figures mean
//! - **launch→RUNNING**: from starting the scheduler process until it has
//!   seen all N tasks TASK_RUNNING (for the appliance, until
//!   `/api/v1/state` counts N running; polled every 200 ms). It includes
//!   start-up, subscription, the offer rounds, the launches and the 2N
//!   acknowledged status updates (STARTING, RUNNING).
//! - **reconcile**: one explicit reconciliation of the N tasks, from asking
//!   until the last of the N answers (pymesos and floor: one RECONCILE call
//!   naming every task; appliance: from sending `POST
//!   /api/v1/actions/reconcile {"kind":"explicit"}` to the run's
//!   `finished_at`, which includes its ZooKeeper writes, checked to have
//!   asked and answered N; the run's own start → end is in the note).
//! - **RSS**: the scheduler process's `VmHWM` (peak) and `VmRSS` (now)
//!   after the reconciliation; for the appliance the leader process. The
//!   testbed's are shown too: the memory a master needs per task.
//! - **CPU**: CPU seconds (user + system) the scheduler process and its
//!   testbed used by then. On a busy machine wall times stretch, CPU
//!   seconds much less: they tell a slow scheduler from a starved one.
//! - **ratios**: appliance ÷ pymesos and appliance ÷ floor of the same run.
//!   Issue 12 asks for launch ≤ 0.5× pymesos, reconcile ≤ 1× pymesos, RSS
//!   ≤ 64 MiB at 10,000 tasks.
//! - **two replicas**: while the leader launches N tasks and then runs an
//!   explicit reconciliation of all N, every 100 ms each of four commands,
//!   each kind on its own and timed: `POST /api/v1/actions/reconcile`
//!   (the replicas keep the default 30 s `--reconcile-cooldown`: a probe
//!   joins or queues a run, as an operator's request would), a
//!   `PUT /api/v1/services/probe` (0 instances), a drain and its cancel of
//!   an agent holding no task, and a manual job run (issue 30: every command
//!   within 100 ms at p99 while tasks launch, reconcile or fail over; the
//!   appliance's handler gives up with 503 after its
//!   `--http-handler-timeout`, 10 s); the table splits them per phase
//!   (`docs/benchmarks.md#commands-and-pages-at-scale`);
//!   then, with all running and no reconciliation in progress, SIGKILL of
//!   the leader: time to the follower's SUBSCRIBE answered by the master
//!   (the testbed's call log), also as a multiple of the session timeout
//!   (it must expire first: ≥ 1×; issue 12 asks ≤ 1.2×), and to the end of
//!   its reconciliation of the N adopted tasks.
//! - **growth**: with several sizes, each time as a factor per doubling of
//!   N (1.0 is constant, 2.0 linear; issue 12 asks ≤ 2.2), each memory as
//!   KiB per added task (issue 12: ≤ 4 KiB for the appliance).
//!
//! Each run is one sample on a shared machine: the load averages before and
//! after are printed; compare ratios within a run rather than absolute
//! times across runs.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

mod harness;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use harness::report::{SizeResults, print_growth, print_size, thousands};
use harness::{appliance, clients};
use mesos_appliance::mesos::resources::Resources;
use mesos_appliance::mesos::v1;
use mesos_appliance::scheduler::rules::offers::OfferRegistry;
use mesos_appliance::scheduler::rules::placement::{Demand, plan};
use serde_json::json;

const RUNS: [&str; 5] = ["floor", "pymesos", "appliance", "failover", "placement"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--floor-client") {
        harness::floor::main(&args[1..]);
        return;
    }
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty()
        && let Ok(list) = std::env::var("BENCH_SIZES")
    {
        sizes = list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
    }
    if sizes.is_empty() {
        sizes = vec![10_000];
    }
    let runs: Vec<String> = std::env::var("BENCH_RUNS")
        .map(|r| r.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_else(|_| RUNS.iter().map(|s| s.to_string()).collect());
    if let Some(unknown) = runs.iter().find(|r| !RUNS.contains(&r.as_str())) {
        eprintln!("BENCH_RUNS: unknown run {unknown:?}; known: {RUNS:?}");
        std::process::exit(2);
    }
    let runtime = harness::runtime();
    runtime.block_on(side_by_side(&sizes, &runs));
}

async fn side_by_side(sizes: &[usize], runs: &[String]) {
    support::mesos::init();
    let wanted = |run: &str| runs.iter().any(|r| r == run);
    println!(
        "side-by-side scheduler benchmark; load average before: {}",
        harness::load_average()
    );
    let mut results = Vec::new();
    for &tasks in sizes {
        let agents = harness::agents_for(tasks);
        println!(
            "\n== {} tasks on {agents} agents (load average {}) ==",
            thousands(tasks),
            harness::load_average()
        );
        let mut r = SizeResults {
            tasks,
            ..Default::default()
        };
        if wanted("floor") {
            r.floor =
                Some(progress("floor", clients::run(clients::Client::Floor, tasks, agents)).await);
        }
        if wanted("pymesos") {
            r.pymesos = Some(
                progress(
                    "pymesos",
                    clients::run(clients::Client::Pymesos, tasks, agents),
                )
                .await,
            );
        }
        if wanted("appliance") {
            r.appliance = Some(progress("appliance", appliance::single(tasks, agents)).await);
        }
        if wanted("failover") {
            r.failover = Some(progress("two replicas", appliance::failover(tasks, agents)).await);
        }
        print_size(&r);
        results.push(r);
    }
    print_growth(&results);
    if wanted("placement") {
        placement();
    }
    println!("\nload average after: {}", harness::load_average());
}

async fn progress<T>(
    name: &str,
    run: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    let started = Instant::now();
    let load = harness::LoadWatch::start();
    let result = run.await;
    println!(
        "  {name}: {} in {:.0} s (load average {}; highest 1-min load during the run {:.2})",
        if result.is_ok() { "done" } else { "FAILED" },
        started.elapsed().as_secs_f64(),
        harness::load_average(),
        load.stop()
    );
    result
}

/// Placement alone: 100 offers of 16 CPUs, 1,600 instances pending.
fn placement() {
    let spec: mesos_appliance::scheduler::ServiceSpec = serde_json::from_value(
        json!({"name": "p", "command": "x", "cpus": 1, "mem": 64, "ports": 1, "instances": 1600}),
    )
    .expect("literal spec");
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
                        .expect("literal resources")
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
        "\nplacement alone: {:.0} offers/s ({:.0} tasks placed/s, {} per round)",
        (rounds * 100) as f64 / secs,
        placed as f64 / secs,
        placed / rounds
    );
}
