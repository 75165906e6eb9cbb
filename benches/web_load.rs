//! Load check of the web layer: a server with a 10,000-task snapshot, and a
//! load generator keeping 200 requests in flight.
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

const TASKS: usize = 10_000;
const CONCURRENCY: usize = 200;

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
        let web = support::web::TestWeb::new(config, support::web::leader_snapshot(&url, TASKS));
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

async fn run_phase(client: &reqwest::Client, base: &str, paths: &[&str], total: usize) -> Phase {
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
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
            .pool_max_idle_per_host(CONCURRENCY)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        // Sizes, and a warm-up that opens the connections.
        for path in ["/api/v1/state", "/tasks", "/api/v1/tasks"] {
            let body = client.get(format!("{base}{path}")).send().await.unwrap().bytes().await.unwrap();
            println!("{path}: {} bytes", body.len());
        }
        run_phase(&client, &base, &["/healthz"], 2_000).await;

        println!(
            "\n{TASKS} tasks, {CONCURRENCY} requests in flight, {total} requests per phase; latency in ms\n"
        );
        println!(
            "{:<58} {:>7} {:>9} {:>8} {:>8} {:>8} {:>6}",
            "phase / endpoint", "count", "req/s", "p50", "p99", "max", "errors"
        );
        let single = [
            "/healthz",
            "/api/v1/state",
            "/tasks",
            "/tasks?sort=updated&order=desc&state=active",
            "/api/v1/tasks",
        ];
        for path in single {
            let phase = run_phase(&client, &base, &[path], total).await;
            report(&format!("GET {path}"), &phase, None);
        }
        let mixed = ["/healthz", "/api/v1/state", "/tasks", "/api/v1/tasks"];
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
