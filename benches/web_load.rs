//! Load check of the web layer: a server with a 10,000-task snapshot, and a
//! load generator keeping 200 requests in flight.
//!
//! Scale knobs (environment): `WEB_LOAD_TASKS` (default 10,000),
//! `WEB_LOAD_CONCURRENCY` (requests in flight, default 200; 1 times one
//! request at a time as the scheduler bench's pages table does) and
//! `WEB_LOAD_REPUBLISH_MS` (default 0: never): every so many milliseconds
//! the server publishes a new snapshot in which 1% of the tasks changed
//! state and 0.5% more were launched, as a launch at scale does (one
//! snapshot every ~2 s at 100,000 tasks), so each view's per-snapshot work
//! is part of what is timed. `WEB_LOAD_PAGES=1` adds the scheduler bench's
//! page set (sorts, filters, text search, services, one task).
//!
//! `cargo bench --bench web_load` re-runs this binary as the server (a child
//! process, so its RSS is the server's alone), then measures, one endpoint
//! at a time, p50 / p99 / max latency and throughput of:
//! - `GET /healthz` (the baseline: no snapshot work),
//! - `GET /api/v1/state` (counts over all tasks),
//! - `GET /tasks` (the tasks page: 50 rows rendered from 10,000),
//! - `GET /tasks?sort=updated&order=desc&state=active` (filter and sort all),
//! - `GET /api/v1/tasks` (the JSON twin of the first page),
//!
//! then all of them mixed, with `/healthz`'s latency reported separately
//! (what a liveness probe sees while the dashboard is busy). Client and
//! server share the machine's cores. `WEB_LOAD_REQUESTS` sets the requests
//! per phase (default 20,000).

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A numeric knob from the environment.
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tasks() -> usize {
    knob("WEB_LOAD_TASKS", 10_000)
}

fn concurrency() -> usize {
    knob("WEB_LOAD_CONCURRENCY", 200).max(1)
}

fn main() {
    if std::env::var_os("WEB_LOAD_SERVE").is_some() {
        serve();
    } else {
        drive();
    }
}

/// Child: serve the router until stdin closes.
fn serve() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}");
        let mut config = mesos_appliance::web::WebConfig::new(addr, url.clone());
        config.handler_timeout = Duration::from_secs(5);
        let web = support::web::TestWeb::new(config, support::web::leader_snapshot(&url, tasks()));
        let every = knob("WEB_LOAD_REPUBLISH_MS", 0);
        if every > 0 {
            let snapshots = web.snapshots.clone();
            // A thread of its own, as the scheduler core's actor is.
            std::thread::spawn(move || republish(snapshots, Duration::from_millis(every as u64)));
        }
        let _server =
            mesos_appliance::web::serve_on(listener, web.state.clone(), std::future::pending())
                .await
                .unwrap();
        println!("LISTEN {addr}");
        std::io::stdout().flush().unwrap();
        // Until the parent closes our stdin.
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin()
                .read_line(&mut line)
                .map(|n| n > 0)
                .unwrap_or(false)
            {}
        })
        .await
        .unwrap();
    });
}

/// Publishes, every `every`, a copy of the latest snapshot in which 1% of
/// the tasks changed (state and update time: new records, the rest shared)
/// and 0.5% more tasks were launched, until the receivers are gone.
fn republish(
    snapshots: tokio::sync::watch::Sender<Arc<mesos_appliance::scheduler::Snapshot>>,
    every: Duration,
) {
    use mesos_appliance::mesos::v1::TaskState;
    let mut next = tasks();
    let mut round = 0usize;
    loop {
        std::thread::sleep(every);
        if snapshots.is_closed() {
            return;
        }
        round += 1;
        let mut s = (**snapshots.borrow()).clone();
        let n = s.tasks.len();
        let mut list: Vec<_> = s.tasks.iter().cloned().collect();
        let changed = (n / 100).max(1);
        for k in 0..changed {
            // Spread over the list, a different set each round.
            let i = (k * 100 + round * 37) % n;
            let mut t = (*list[i]).clone();
            t.state = if t.state == TaskState::TaskRunning {
                TaskState::TaskStarting
            } else {
                TaskState::TaskRunning
            };
            t.updated_at = support::web::now() + round as f64;
            list[i] = Arc::new(t);
        }
        let added = (n / 200).max(1);
        list.extend((next..next + added).map(|i| Arc::new(support::web::sample_task(i, 0))));
        next += added;
        list.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        s.tasks = list.into();
        s.at = support::web::now() + round as f64;
        snapshots.send_replace(Arc::new(s));
    }
}

fn rss_kib(pid: u32) -> (u64, u64) {
    let m = support::processes::memory(pid).unwrap_or_default();
    (m.rss_kib, m.hwm_kib)
}

/// Latencies of one phase, per path.
struct Phase {
    wall: Duration,
    latencies: Vec<(usize, Duration)>,
    errors: usize,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

async fn run_phase(client: &reqwest::Client, base: &str, paths: &[String], total: usize) -> Phase {
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency() {
        let client = client.clone();
        let next = next.clone();
        let errors = errors.clone();
        let urls: Vec<String> = paths.iter().map(|p| format!("{base}{p}")).collect();
        workers.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                let which = n % urls.len();
                let t = Instant::now();
                let ok = match client.get(&urls[which]).send().await {
                    Ok(r) => {
                        let status = r.status();
                        r.bytes().await.is_ok() && status.is_success()
                    }
                    Err(_) => false,
                };
                if ok {
                    out.push((which, t.elapsed()));
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            out
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    for w in workers {
        latencies.extend(w.await.unwrap());
    }
    Phase {
        wall: start.elapsed(),
        latencies,
        errors: errors.load(Ordering::Relaxed),
    }
}

fn report(label: &str, phase: &Phase, which: Option<usize>) {
    let mut lat: Vec<Duration> = phase
        .latencies
        .iter()
        .filter(|(w, _)| which.is_none_or(|x| x == *w))
        .map(|(_, d)| *d)
        .collect();
    lat.sort();
    // A part of a mixed phase has no rate of its own.
    let rate = match which {
        None => format!(
            "{:.0}",
            phase.latencies.len() as f64 / phase.wall.as_secs_f64()
        ),
        Some(_) => "-".to_string(),
    };
    println!(
        "{label:<58} {:>7} {:>9} {:>8} {:>8} {:>8} {:>6}",
        lat.len(),
        rate,
        ms(pct(&lat, 0.50)),
        ms(pct(&lat, 0.99)),
        ms(lat.last().copied().unwrap_or_default()),
        phase.errors,
    );
}

fn drive() {
    let total: usize = std::env::var("WEB_LOAD_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("WEB_LOAD_SERVE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("server child");
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("server output").unwrap();
        if let Some(addr) = line.strip_prefix("LISTEN ") {
            break addr.to_string();
        }
    };
    let base = format!("http://{addr}");
    let (idle_rss, _) = rss_kib(pid);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        // Sizes, and a warm-up that opens the connections.
        for path in ["/api/v1/state", "/tasks", "/api/v1/tasks"] {
            let body = client.get(format!("{base}{path}")).send().await.unwrap().bytes().await.unwrap();
            println!("{path}: {} bytes", body.len());
        }
        run_phase(&client, &base, &["/healthz".to_string()], 2_000).await;
        let task_id: String = client
            .get(format!("{base}/api/v1/tasks?per_page=1&page=77"))
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .ok()
            .and_then(|v| v["tasks"][0]["id"].as_str().map(str::to_string))
            .unwrap_or_default();

        println!(
            "\n{} tasks, {} requests in flight, {total} requests per phase, a new snapshot every {} ms (0: never); latency in ms\n",
            tasks(),
            concurrency(),
            knob("WEB_LOAD_REPUBLISH_MS", 0),
        );
        println!(
            "{:<58} {:>7} {:>9} {:>8} {:>8} {:>8} {:>6}",
            "phase / endpoint", "count", "req/s", "p50", "p99", "max", "errors"
        );
        let middle = (tasks() / 100).max(1);
        let mut single: Vec<String> = [
            "/healthz",
            "/api/v1/state",
            "/tasks",
            "/tasks?sort=updated&order=desc&state=active",
            "/api/v1/tasks",
        ]
        .map(str::to_string)
        .into();
        if knob("WEB_LOAD_PAGES", 0) > 0 {
            // The scheduler bench's page set (`benches/harness/appliance.rs`).
            single.extend([
                "/".to_string(),
                format!("/tasks?page={middle}"),
                format!("/tasks?sort=updated&order=desc&page={middle}"),
                "/tasks?sort=host&order=desc".to_string(),
                format!("/tasks?sort=launched&page={middle}"),
                "/tasks?service=batch&sort=state".to_string(),
                "/tasks?state=running&q=batch.1&sort=updated&order=desc".to_string(),
                "/api/v1/tasks?sort=host&per_page=100".to_string(),
                "/services".to_string(),
                format!("/tasks/{task_id}"),
            ]);
        }
        for path in &single {
            let phase = run_phase(&client, &base, std::slice::from_ref(path), total).await;
            report(&format!("GET {path}"), &phase, None);
        }
        let mixed = ["/healthz", "/api/v1/state", "/tasks", "/api/v1/tasks"].map(str::to_string);
        let phase = run_phase(&client, &base, &mixed, total).await;
        report("mixed (healthz, state, tasks page, tasks JSON)", &phase, None);
        for (i, path) in mixed.iter().enumerate() {
            report(&format!("  of which GET {path}"), &phase, Some(i));
        }
    });
    let (rss, hwm) = rss_kib(pid);
    println!(
        "\nserver RSS: {:.1} MiB idle with the snapshot loaded, {:.1} MiB after the load, peak {:.1} MiB",
        idle_rss as f64 / 1024.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
}
