//! Real `mesos-appliance` processes for the deployment tests: spawn one with
//! flags, read its JSON API, send it SIGTERM or SIGKILL, wait for its exit.
//! Output goes to a log file that failing assertions print.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::checks::{Checks, Store, View};
use super::zookeeper::free_port;

/// How long tests wait for a replica to reach a state.
pub const WAIT: Duration = Duration::from_secs(30);

/// A `mesos-appliance` child process.
pub struct Appliance {
    /// A name for messages.
    pub name: String,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
    /// The end-of-test checks of a scheduler replica (`None` for the
    /// subcommands: `demo`, `uninstall`, …), run on drop while it runs.
    checks: Option<Checks>,
}

/// Flags every test replica gets: ZooKeeper, master, fast timers.
pub fn base_args(zk: &str, master: &str, framework: &str) -> Vec<String> {
    [
        "--zk",
        &format!("zk://{zk}/appliance"),
        "--zk-session-timeout",
        "2s",
        "--master",
        master,
        "--framework-name",
        framework,
        "--framework-user",
        "root",
        "--failover-timeout",
        "60s",
        "--offer-ttl",
        "2s",
        "--decline-refuse-seconds",
        "5",
        "--reconcile-initial-delay",
        "10m",
        "--reconcile-cooldown",
        "500ms",
        "--explicit-reconcile-max-backoff",
        "2s",
        "--explicit-reconcile-abort-timeout",
        "20s",
        "--framework-id-refresh-interval",
        "2s",
    ]
    .into_iter()
    .map(str::to_string)
    .collect()
}

/// Applies `--flag value` pairs from `extra`, replacing flags already in
/// `args` (clap refuses repeated flags); a flag followed by another flag or
/// nothing is added alone.
pub fn with_flags(mut args: Vec<String>, extra: &[&str]) -> Vec<String> {
    let mut i = 0;
    while i < extra.len() {
        let flag = extra[i];
        let value = extra.get(i + 1).filter(|v| !v.starts_with("--"));
        if let Some(pos) = args.iter().position(|a| a == flag) {
            let has_value = args.get(pos + 1).is_some_and(|v| !v.starts_with("--"));
            args.drain(pos..pos + if has_value { 2 } else { 1 });
        }
        args.push(flag.to_string());
        if let Some(v) = value {
            args.push(v.to_string());
            i += 1;
        }
        i += 1;
    }
    args
}

/// Writes `services` (JSON) to a file in `dir`; returns its path.
pub fn services_file(dir: &Path, name: &str, services: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(services).unwrap()).unwrap();
    path
}

impl Appliance {
    /// Spawns `mesos-appliance <args> --listen 127.0.0.1:<free port>`.
    pub fn spawn(name: &str, args: &[String]) -> Appliance {
        Appliance::spawn_logging(name, args, "info,zookeeper_client=warn")
    }

    /// [`Appliance::spawn`] with `rust_log` as its `RUST_LOG` (a benchmark
    /// reading debug lines of one target).
    pub fn spawn_logging(name: &str, args: &[String], rust_log: &str) -> Appliance {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = dir.path().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        // `BENCH_APPLIANCE` names another binary (a benchmark comparing
        // versions); the tests never set it.
        let binary = std::env::var_os("BENCH_APPLIANCE")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mesos-appliance").into());
        let child = Command::new(binary)
            .args(args)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", rust_log)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn mesos-appliance");
        let url = format!("http://127.0.0.1:{port}");
        Appliance {
            checks: replica_checks(name, &url, args),
            name: name.to_string(),
            url,
            child: Some(child),
            log,
            _dir: dir,
        }
    }

    /// The process's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// `GET <path>` as JSON, `None` while the server does not answer.
    pub async fn get(&self, path: &str) -> Option<(u16, Value)> {
        let response = super::mesos::client()
            .get(format!("{}{path}", self.url))
            .timeout(Duration::from_secs(3))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        Some((status, body))
    }

    /// `POST <path>` with a JSON body; status and JSON answer.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = super::mesos::client()
            .post(format!("{}{path}", self.url))
            .json(&body)
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .expect("POST sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `method <path>` with a JSON body (PUT, DELETE, …); status and JSON
    /// answer.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let response = super::mesos::client()
            .request(method, format!("{}{path}", self.url))
            .json(&body)
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .expect("request sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `/api/v1/state`.
    pub async fn state(&self) -> Option<Value> {
        self.get("/api/v1/state").await.map(|(_, v)| v)
    }

    /// Waits until `/api/v1/state` satisfies `pred`; panics with the log otherwise.
    pub async fn wait_state(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_get("/api/v1/state", what, within, pred).await
    }

    /// Waits until the JSON answer of `GET <path>` satisfies `pred`
    /// (polled every 100 ms; no answer is `null`) and returns it; panics
    /// after `within` with the last answer and the log's tail.
    pub async fn wait_get(
        &self,
        path: &str,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.get(path).await.map(|(_, v)| v).unwrap_or(Value::Null);
            if pred(&answer) {
                return answer;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: {what} not reached within {within:?}; {path}: {answer}\n--- log ---\n{}",
                    self.name,
                    tail(&self.log(), 60)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends a signal (`libc::SIGTERM`, `libc::SIGKILL`, …). Before one
    /// that stops the process (SIGTERM, SIGINT) or freezes it (SIGSTOP: it
    /// answers nothing from then on) the end-of-test checks
    /// ([`super::checks`]) run, as on drop: this is where the replica's
    /// life as the tests see it ends. SIGKILL is a crash at the moment the
    /// test chose, so nothing delays it: the drop then runs the store check
    /// alone ([`Checks::after_exit`]).
    pub fn signal(&self, signal: i32) {
        if [libc::SIGTERM, libc::SIGINT, libc::SIGSTOP].contains(&signal)
            && let Some(failure) = self.checks.as_ref().and_then(Checks::at_drop)
        {
            panic!(
                "{failure}\n--- log of {} ---\n{}",
                self.name,
                tail(&self.log(), 40)
            );
        }
        let pid = self.pid() as i32;
        if pid > 0 {
            // SAFETY: kill(2) on our own child's PID has no memory effects.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    /// Waits for the process to exit; panics with the log after `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: did not exit within {within:?}\n--- log ---\n{}",
                    self.name,
                    tail(&self.log(), 60)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

/// The checks of a replica spawned with `args`: one with a `--master`
/// and no subcommand. Its records are read from `--zk` when it has one.
fn replica_checks(name: &str, url: &str, args: &[String]) -> Option<Checks> {
    if args.first().is_some_and(|a| !a.starts_with("--")) {
        return None;
    }
    let flag = |f: &str| {
        let at = args.iter().rposition(|a| a == f)?;
        args.get(at + 1).cloned()
    };
    let master = flag("--master")?;
    let framework = flag("--framework-name").unwrap_or_default();
    let store = flag("--zk")
        .and_then(|zk| mesos_appliance::util::zk::ZkUrl::parse(&zk, &framework).ok())
        .map_or(Store::Unreadable, Store::Zk);
    Some(Checks::new(
        name,
        &master,
        View::Api(url.to_string()),
        store,
    ))
}

impl Appliance {
    /// Turns this replica's end-of-test checks off (the truth check and
    /// the "no ACK before its store" check, [`super::checks`]) because the
    /// scenario breaks them on purpose; `why` is printed at the end.
    pub fn expect_disagreement(&self, why: &str) {
        if let Some(checks) = &self.checks {
            checks.expect_disagreement(why);
        }
    }
}

impl Drop for Appliance {
    fn drop(&mut self) {
        let running = self
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        let failure = match &self.checks {
            Some(checks) if running => checks.at_drop(),
            Some(checks) => checks.after_exit(),
            None => None,
        };
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(failure) = failure {
            panic!(
                "{failure}\n--- log of {} ---\n{}",
                self.name,
                tail(&self.log(), 40)
            );
        }
    }
}

/// Resident memory of a process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now, KiB.
    pub rss_kib: u64,
    /// `VmHWM`: the most it was ever resident, KiB.
    pub hwm_kib: u64,
}

/// [`Memory`] of `pid`; `None` when the process is gone or `/proc` is unreadable.
pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some(Memory {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// CPU time `pid` has used so far (user and system, from `/proc/<pid>/stat`);
/// `None` when the process is gone.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name `(…)`: state is the 3rd field, utime
    // and stime the 14th and 15th.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    Some(Duration::from_millis((utime + stime) * 1000 / ticks))
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `framework.state` of a state document.
pub fn framework_state(state: &Value) -> &str {
    state["framework"]["state"].as_str().unwrap_or("")
}

/// `framework.id` of a state document.
pub fn framework_id(state: &Value) -> Option<String> {
    state["framework"]["id"].as_str().map(str::to_string)
}

/// Running tasks per the state's counts.
pub fn running_count(state: &Value) -> u64 {
    state["counts"]["tasks_by_state"]["TASK_RUNNING"]
        .as_u64()
        .unwrap_or(0)
}
