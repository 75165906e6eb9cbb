//! The two reference schedulers as child processes: the minimal pymesos
//! scheduler (`pymesos_scheduler.py`) and the floor client (`floor.rs`),
//! each against its own fresh testbed.
//!
//! Both print, on stdout, one line per milestone:
//! - `running`: the last of the N tasks reached TASK_RUNNING (the client
//!   then sends one RECONCILE naming all N tasks);
//! - `reconciled <seconds>`: the last of the N answers arrived, `<seconds>`
//!   after the client started sending the RECONCILE call. The floor client
//!   then reconciles again, [`reconciles`](super::reconciles) runs in all,
//!   and the figure is their median; pymesos reconciles once.
//! - `phase <name> <seconds>`: a step of the launch reached, `<seconds>`
//!   after the client's start (`subscribed`, `offers`, `accepted`,
//!   `first-running`), shown under the table.
//!
//! Launch time is measured here, from spawning the process to reading
//! `running`: interpreter or runtime start, subscription, offers, launches
//! and the N × 2 acknowledged updates.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};

use super::testbed::TestbedProcess;
use super::{Figures, deadline_for};
use crate::support::processes::{cpu_time, memory, tail};

/// The task every benchmarked scheduler launches: `cpus` 0.01 (in
/// thousandths, Mesos' fixed-point precision), `mem` 1 MB, this command.
pub const TASK_CPUS_MILLIS: u32 = 10;
pub const TASK_MEM: u32 = 1;
pub const SERVICE_COMMAND: &str = "sleep 3600";

/// A reference scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `pymesos_scheduler.py` in the pymesos venv.
    Pymesos,
    /// The floor client: this binary with `--floor-client`.
    Floor,
}

impl Client {
    fn command(self, master: &str, tasks: usize) -> tokio::process::Command {
        let mut command = match self {
            Client::Pymesos => {
                let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("benches/harness/pymesos_scheduler.py");
                let mut c = tokio::process::Command::new(crate::support::pymesos::python());
                c.arg(script).arg(master.trim_start_matches("http://"));
                c
            }
            Client::Floor => {
                let mut c = tokio::process::Command::new(
                    std::env::current_exe().expect("the bench binary's path"),
                );
                c.arg("--floor-client").arg(master);
                c
            }
        };
        command.arg(tasks.to_string());
        command
    }
}

/// Runs `client` with `tasks` tasks against a fresh testbed of `agents`
/// agents; the error says which milestone was not reached, with the tail of
/// the client's stderr.
pub async fn run(client: Client, tasks: usize, agents: usize) -> Result<Figures, String> {
    let testbed = TestbedProcess::start(agents, &[]);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let stderr_path = dir.path().join("stderr");
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut child = client
        .command(&testbed.url, tasks)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {client:?}: {e}"))?;
    let pid = child.id().unwrap_or(0);
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let deadline = tokio::time::Instant::now() + deadline_for(tasks);
    let failed = |what: &str| {
        format!(
            "{client:?}: {what}; stderr:\n{}",
            tail(
                &std::fs::read_to_string(&stderr_path).unwrap_or_default(),
                20
            )
        )
    };
    let mut launch = None;
    let mut launch_cpu = Vec::new();
    let testbed_before = testbed.cpu_time();
    let mut runs = Vec::new();
    let wanted = match client {
        Client::Floor => super::reconciles(),
        Client::Pymesos => 1,
    };
    let mut phases = Vec::new();
    while runs.len() < wanted {
        let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Err(_) => return Err(failed("timed out")),
            Ok(Err(e)) => return Err(failed(&format!("stdout: {e}"))),
            Ok(Ok(None)) => return Err(failed("exited")),
            Ok(Ok(Some(line))) => line,
        };
        if line == "running" {
            launch = Some(started.elapsed());
            launch_cpu = vec![
                ("client", cpu_time(pid).unwrap_or_default()),
                ("testbed", testbed.cpu_time().saturating_sub(testbed_before)),
            ];
        } else if let Some((name, secs)) =
            line.strip_prefix("phase ").and_then(|p| p.split_once(' '))
        {
            if let Ok(secs) = secs.trim().parse::<f64>() {
                phases.push((name.to_string(), Duration::from_secs_f64(secs)));
            }
        } else if let Some(secs) = line.strip_prefix("reconciled ") {
            let secs = secs.trim().parse::<f64>().unwrap_or(f64::NAN);
            if !secs.is_finite() || secs < 0.0 {
                return Err(failed(&format!("said {line:?}")));
            }
            runs.push(Duration::from_secs_f64(secs));
        }
    }
    let figures = Figures {
        launch: launch.ok_or_else(|| failed("reconciled before running"))?,
        reconcile: super::median(&runs),
        reconcile_note: if runs.len() > 1 {
            format!("median of {} s", super::seconds_list(&runs))
        } else {
            String::new()
        },
        phases,
        memory: memory(pid).unwrap_or_default(),
        testbed_memory: testbed.memory(),
        cpu: cpu_time(pid).unwrap_or_default(),
        testbed_cpu: testbed.cpu_time(),
        launch_cpu,
        calls: testbed.call_counts(&reqwest::Client::new()).await,
        updates_resent: testbed.updates_resent(&reqwest::Client::new()).await,
        pages: Vec::new(),
    };
    let _ = child.kill().await;
    Ok(figures)
}
