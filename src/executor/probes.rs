//! Running a task's health check ([`super::health::HealthPolicy`]): one
//! checker task per health-checked task, which waits the delay, probes, hands
//! each result to the executor's main loop and waits the interval, until the
//! main loop drops it (the task is being killed or has ended).
//!
//! Probes, as `src/checks/checker_process.cpp` runs them (with curl and
//! `mesos-tcp-connect`, here in-process): HTTP `GET` following redirects,
//! certificates not verified, the status of the final response decides and
//! its body is never read; TCP connect; a command run from the sandbox with
//! the executor's environment plus the command's, its process group
//! SIGKILLed when it outlives the timeout.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::health::{HealthPolicy, Probe};
use super::tasks::signal_group;
use crate::mesos::v1;

/// Redirects an HTTP check follows (curl's default limit with `-L`).
const MAX_REDIRECTS: usize = 50;

/// One check result for the main loop.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The task checked.
    pub task_id: String,
    /// `Ok` healthy, `Err` why not.
    pub outcome: Result<(), String>,
}

/// A running checker; dropping it stops checking.
#[derive(Debug)]
pub struct Checker(JoinHandle<()>);

impl Drop for Checker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts checking `task_id` by `policy`, results to `results`.
///
/// # Errors
/// When the HTTP client cannot be built (no TLS crypto provider installed).
pub fn start(
    task_id: &str,
    policy: HealthPolicy,
    sandbox: &Path,
    results: mpsc::UnboundedSender<CheckResult>,
) -> Result<Checker, String> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
        .danger_accept_invalid_certs(true)
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let task_id = task_id.to_string();
    let sandbox = sandbox.to_path_buf();
    Ok(Checker(tokio::spawn(async move {
        tokio::time::sleep(policy.delay).await;
        loop {
            let outcome = probe(&policy.probe, policy.timeout, &http, &sandbox).await;
            if let Err(why) = &outcome {
                tracing::warn!(%task_id, %why, "health check failed");
            }
            let result = CheckResult {
                task_id: task_id.clone(),
                outcome,
            };
            if results.send(result).is_err() {
                return;
            }
            tokio::time::sleep(policy.interval).await;
        }
    })))
}

/// Runs one check within `timeout` (none: unbounded, as Mesos' 0).
///
/// # Errors
/// Why the task is not healthy: the status, the connection or exit error,
/// or the timeout.
pub async fn probe(
    probe: &Probe,
    timeout: Option<Duration>,
    http: &reqwest::Client,
    sandbox: &Path,
) -> Result<(), String> {
    let run = async {
        match probe {
            Probe::Http { url } => http_check(http, url).await,
            Probe::Tcp { addr } => tokio::net::TcpStream::connect(addr)
                .await
                .map(drop)
                .map_err(|e| format!("TCP connection to {addr} failed: {e}")),
            Probe::Command(command) => command_check(command, sandbox).await,
        }
    };
    match timeout {
        Some(limit) => tokio::time::timeout(limit, run)
            .await
            .unwrap_or_else(|_| Err(format!("timed out after {limit:?}"))),
        None => run.await,
    }
}

async fn http_check(http: &reqwest::Client, url: &str) -> Result<(), String> {
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url} failed: {e}"))?;
    let status = response.status();
    // The body is dropped unread: only the status matters.
    drop(response);
    if (200..400).contains(&status.as_u16()) {
        Ok(())
    } else {
        // health_checker.cpp interpretCheckStatusInfo.
        Err(format!("Unexpected HTTP response code: {status}"))
    }
}

/// The command in its own process group; the group is SIGKILLed if the
/// check is abandoned (timeout) before the command ends.
async fn command_check(command: &v1::CommandInfo, sandbox: &Path) -> Result<(), String> {
    let value = command.value.clone().unwrap_or_default();
    let mut cmd = if command.shell.unwrap_or(true) {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(&value);
        cmd
    } else {
        let mut cmd = tokio::process::Command::new(&value);
        if let Some((argv0, rest)) = command.arguments.split_first() {
            cmd.arg0(argv0);
            cmd.args(rest);
        }
        cmd
    };
    let sandbox: PathBuf = sandbox.to_path_buf();
    cmd.current_dir(&sandbox)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("MESOS_EXECUTOR_AUTHENTICATION_TOKEN")
        .process_group(0)
        .kill_on_drop(true);
    for variable in command.environment.iter().flat_map(|e| e.variables.iter()) {
        if variable.r#type() != v1::environment::variable::Type::Secret {
            cmd.env(&variable.name, variable.value.as_deref().unwrap_or(""));
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("Failed to run the health check command '{value}': {e}"))?;
    let pid = child.id();
    let guard = GroupGuard(pid);
    let status = child
        .wait()
        .await
        .map_err(|e| format!("Failed to wait for the health check command: {e}"))?;
    std::mem::forget(guard);
    if status.success() {
        Ok(())
    } else {
        // health_checker.cpp: "Command " + WSTRINGIFY(status).
        Err(super::tasks::Exit::from_status(status).describe())
    }
}

/// SIGKILLs a check command's process group when the check is dropped
/// before the command ended (its timeout).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            signal_group(pid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    /// A one-shot HTTP server answering every request with `status`.
    async fn server(status: u16) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = socket.read(&mut buf).await;
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn http_is_healthy_from_200_to_399() {
        let dir = tempfile::tempdir().unwrap();
        let http = client();
        for (status, healthy) in [
            (200, true),
            (204, true),
            (399, true),
            (404, false),
            (500, false),
        ] {
            let addr = server(status).await;
            let probe = Probe::Http {
                url: format!("http://{addr}/health"),
            };
            let outcome =
                super::probe(&probe, Some(Duration::from_secs(5)), &http, dir.path()).await;
            assert_eq!(outcome.is_ok(), healthy, "{status}: {outcome:?}");
        }
        let addr = server(503).await;
        let outcome = super::probe(
            &Probe::Http {
                url: format!("http://{addr}/"),
            },
            None,
            &http,
            dir.path(),
        )
        .await;
        assert_eq!(
            outcome.unwrap_err(),
            "Unexpected HTTP response code: 503 Service Unavailable"
        );
    }

    #[tokio::test]
    async fn tcp_is_healthy_on_connect() {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap();
        let http = client();
        let timeout = Some(Duration::from_secs(5));
        assert!(
            super::probe(&Probe::Tcp { addr: open }, timeout, &http, dir.path())
                .await
                .is_ok()
        );
        drop(listener);
        // A socket bound to the port but not listening keeps it ours (no
        // other test can take it) while refusing connections.
        let closed = tokio::net::TcpSocket::new_v4().unwrap();
        if closed.bind(open).is_err() {
            return; // another test took the port in between: nothing to check
        }
        assert!(
            super::probe(&Probe::Tcp { addr: open }, timeout, &http, dir.path())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn commands_are_healthy_on_exit_0_and_killed_at_their_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let http = client();
        let shell = |line: &str| {
            Probe::Command(v1::CommandInfo {
                value: Some(line.into()),
                environment: Some(v1::Environment {
                    variables: vec![v1::environment::Variable {
                        name: "WANT".into(),
                        value: Some("ok".into()),
                        r#type: None,
                    }],
                }),
                ..Default::default()
            })
        };
        let timeout = Some(Duration::from_secs(10));
        assert!(
            super::probe(
                &shell("test \"$WANT\" = ok && touch ran"),
                timeout,
                &http,
                dir.path()
            )
            .await
            .is_ok()
        );
        assert!(dir.path().join("ran").exists(), "runs in the sandbox");
        assert_eq!(
            super::probe(&shell("exit 3"), timeout, &http, dir.path())
                .await
                .unwrap_err(),
            "Command exited with status 3"
        );
        let started = Instant::now();
        let outcome = super::probe(
            &shell("echo $$ > pid; exec sleep 30"),
            Some(Duration::from_millis(300)),
            &http,
            dir.path(),
        )
        .await;
        assert!(outcome.unwrap_err().starts_with("timed out after"));
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        // SAFETY: kill(2) with signal 0 only checks for existence.
        while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // SAFETY: as above.
        assert_ne!(
            unsafe { libc::kill(pid, 0) },
            0,
            "the timed-out check is killed"
        );
    }
}
