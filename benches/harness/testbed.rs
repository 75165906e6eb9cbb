//! A fresh `mesos-testbed` process per run (the release binary next to the
//! bench), so that its memory is measured apart from the scheduler's.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use crate::support::processes::{Memory, cpu_time, memory};

/// A running `mesos-testbed`, killed on drop.
pub struct TestbedProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

impl TestbedProcess {
    /// Starts `mesos-testbed --port 0 --agents <agents>` plus `extra` flags
    /// and returns once it listens. Everything else is the testbed's
    /// default, which is Mesos': 1 s allocation interval, 15 s heartbeats,
    /// status update retries from 10 s, agents of
    /// `cpus:4;mem:8192;disk:65536;ports:[31000-32000]`. Its warnings go to
    /// this process's stderr. `BENCH_TESTBED` names another binary (to
    /// compare testbed versions).
    ///
    /// Panics (bench support) when the binary does not start or listen.
    pub fn start(agents: usize, extra: &[&str]) -> TestbedProcess {
        let binary = std::env::var_os("BENCH_TESTBED")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mesos-testbed").into());
        let mut child = Command::new(binary)
            .args(["--port", "0", "--agents", &agents.to_string()])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("mesos-testbed starts (cargo bench builds it)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("mesos-testbed prints where it listens");
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://"))
            .unwrap_or_else(|| panic!("mesos-testbed said {line:?}"))
            .to_string();
        TestbedProcess { child, url }
    }

    /// The testbed's resident memory now.
    pub fn memory(&self) -> Memory {
        memory(self.child.id()).unwrap_or_default()
    }

    /// The CPU time the testbed used so far.
    pub fn cpu_time(&self) -> std::time::Duration {
        cpu_time(self.child.id()).unwrap_or_default()
    }

    /// The JSON answer of `GET <path>` (within 5 s), or why there is none.
    async fn get_json(
        &self,
        http: &reqwest::Client,
        path: &str,
    ) -> Result<serde_json::Value, String> {
        http.get(format!("{}{path}", self.url))
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())
    }

    /// How many calls of each type the testbed received so far, by type
    /// name (`counts` of `GET /testbed/calls`); empty if it did not answer.
    pub async fn call_counts(&self, http: &reqwest::Client) -> Vec<(String, u64)> {
        let Ok(body) = self.get_json(http, "/testbed/calls?limit=1").await else {
            return Vec::new();
        };
        body["counts"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(t, n)| Some((t.clone(), n.as_u64()?)))
            .collect()
    }

    /// Status updates the agents sent again so far because their
    /// acknowledgement came later than the retry interval, summed over the
    /// frameworks (`updates_resent` of `GET /testbed/frameworks`); `None`
    /// if the testbed did not answer.
    pub async fn updates_resent(&self, http: &reqwest::Client) -> Option<u64> {
        let body = self.get_json(http, "/testbed/frameworks").await.ok()?;
        body["frameworks"]
            .as_array()?
            .iter()
            .map(|f| f["updates_resent"].as_u64())
            .sum()
    }

    /// Arrival times (UNIX seconds) of the SUBSCRIBE calls the testbed
    /// answered with 200, oldest first (`GET /testbed/calls?type=SUBSCRIBE`).
    pub async fn subscribed_at(&self, http: &reqwest::Client) -> Result<Vec<f64>, String> {
        let calls = self.get_json(http, "/testbed/calls?type=SUBSCRIBE").await?;
        Ok(calls["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["call_type"] == "SUBSCRIBE" && c["status"] == 200)
            .filter_map(|c| c["at"].as_f64())
            .collect())
    }

    /// The arrival time of the first SUBSCRIBE answered 200 at or after
    /// `since` (UNIX seconds), polled every 10 ms for at most `within`.
    pub async fn subscribed_since(
        &self,
        http: &reqwest::Client,
        since: f64,
        within: std::time::Duration,
    ) -> Result<f64, String> {
        super::poll(within, std::time::Duration::from_millis(10), || async {
            Ok(self
                .subscribed_at(http)
                .await?
                .into_iter()
                .find(|at| *at >= since))
        })
        .await?
        .ok_or_else(|| format!("none within {within:?}"))
    }
}

impl Drop for TestbedProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
