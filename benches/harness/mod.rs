//! The harness of the scheduler benchmarks (`scheduler.rs`, `failover.rs`):
//! the processes they run and what they read from them. Every scheduler
//! under test is a process of its own, against a fresh `mesos-testbed`
//! process of its own, so each one's memory is its own.
//!
//! - [`testbed`]: the `mesos-testbed` process;
//! - [`clients`]: the pymesos scheduler and the floor client, and the line
//!   protocol they print;
//! - [`floor`]: the floor client itself;
//! - [`appliance`]: `mesos-appliance` runs, one replica or two with a
//!   failover;
//! - [`report`]: the tables printed.

pub mod appliance;
pub mod clients;
pub mod floor;
pub mod report;
pub mod testbed;
pub mod timing;

use std::time::Duration;

use crate::support::processes::Memory;

/// What one scheduler achieved against its testbed.
#[derive(Debug, Clone)]
pub struct Figures {
    /// Process start → all N tasks TASK_RUNNING.
    pub launch: Duration,
    /// Explicit reconciliation of the N tasks: asked → all answered.
    pub reconcile: Duration,
    /// Anything to know about that reconciliation.
    pub reconcile_note: String,
    /// Steps of the launch and when each was reached from the start (the
    /// reference clients report them).
    pub phases: Vec<(String, Duration)>,
    /// The scheduler process (the leader) after reconciling.
    pub memory: Memory,
    /// Its testbed at that time.
    pub testbed_memory: Memory,
    /// CPU time the scheduler process used by then (user + system).
    pub cpu: Duration,
    /// CPU time its testbed used by then.
    pub testbed_cpu: Duration,
    /// CPU time each process spent from the start to all RUNNING (the
    /// launch), by process: the scheduler, its testbed, and the appliance's
    /// ZooKeeper server. Their sum over the machine's cores bounds the
    /// launch's wall time from below (`docs/benchmarks.md`, "The launch's
    /// CPU budget").
    pub launch_cpu: Vec<(&'static str, Duration)>,
    /// Calls the testbed received by the end of the run, by type.
    pub calls: Vec<(String, u64)>,
    /// Status updates the testbed's agents re-sent by the end of the run,
    /// unacknowledged after their retry interval (`None`: not known).
    pub updates_resent: Option<u64>,
    /// Pages and JSON endpoints timed after the reconciliation (the
    /// appliance only): each one's path and latencies.
    pub pages: Vec<(String, Vec<Duration>)>,
}

/// The highest 1-minute load average seen while a run went on, sampled
/// every second from `/proc/loadavg` (the machine is shared: a figure from
/// a loaded machine says so).
pub struct LoadWatch {
    peak: std::sync::Arc<std::sync::Mutex<f64>>,
    done: tokio_util::sync::CancellationToken,
}

impl LoadWatch {
    /// Starts sampling.
    pub fn start() -> LoadWatch {
        let peak = std::sync::Arc::new(std::sync::Mutex::new(0.0f64));
        let done = tokio_util::sync::CancellationToken::new();
        let (p, d) = (peak.clone(), done.clone());
        tokio::spawn(async move {
            loop {
                if let Some(one) = load_average()
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    && let Ok(mut peak) = p.lock()
                {
                    *peak = peak.max(one);
                }
                tokio::select! {
                    _ = d.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
        LoadWatch { peak, done }
    }

    /// Stops sampling: the highest 1-minute load average seen.
    pub fn stop(self) -> f64 {
        self.done.cancel();
        self.peak.lock().map(|p| *p).unwrap_or(f64::NAN)
    }
}

/// The runtime every benchmark process runs on: two worker threads, as
/// the machine the figures are compared on has two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Explicit reconciliations of every task timed one after another by the
/// floor client and by one appliance replica (`BENCH_RECONCILES`, 5 by
/// default; pymesos makes one, its run takes tens of seconds at 100,000):
/// each reports the median run, since one run's time swings by a third on
/// a 2-core machine.
pub fn reconciles() -> usize {
    std::env::var("BENCH_RECONCILES")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(5)
}

/// The median of `samples` (the upper one of an even count; zero if none).
pub fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// `samples` in seconds, as `a / b / c`.
pub fn seconds_list(samples: &[Duration]) -> String {
    let each: Vec<String> = samples
        .iter()
        .map(|d| format!("{:.3}", d.as_secs_f64()))
        .collect();
    each.join(" / ")
}

/// Asks `probe` every `every` until it finds something, for at most
/// `within`: `Ok(None)` past the deadline; a probe's error ends the wait.
pub async fn poll<T, F, Fut>(
    within: Duration,
    every: Duration,
    mut probe: F,
) -> Result<Option<T>, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, String>>,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(found) = probe().await? {
            return Ok(Some(found));
        }
        if std::time::Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(every).await;
    }
}

/// How long any milestone of a run with `tasks` tasks may take before the
/// run is reported as failed: 2 minutes plus 20 ms per task (`BENCH_TIMEOUT`,
/// in seconds, overrides).
pub fn deadline_for(tasks: usize) -> Duration {
    if let Some(secs) = std::env::var("BENCH_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        return Duration::from_secs(secs);
    }
    Duration::from_secs(120) + Duration::from_millis(20 * tasks as u64)
}

/// Agents of each testbed for `tasks` tasks: one per 100 tasks, at least
/// 100 (10,000 tasks on 100 agents, 50,000 on 500, 100,000 on 1,000, as
/// issue 30 asks; `BENCH_AGENTS` overrides).
pub fn agents_for(tasks: usize) -> usize {
    std::env::var("BENCH_AGENTS")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| tasks.div_ceil(100).max(100))
}

/// The machine's load averages (1, 5, 15 min), from `/proc/loadavg`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
