//! `mesos-appliance` runs: the release binary with a real ZooKeeper (a
//! fresh Debian server per run, `support::zookeeper`) and `--services`,
//! against a fresh testbed. Everything is read from outside, through the
//! replica's JSON API, as an operator would.
//!
//! - [`single`]: one replica; launch, then a manual explicit
//!   reconciliation (`POST /api/v1/actions/reconcile {"kind":"explicit"}`,
//!   followed at `/api/v1/actions/results/{id}`);
//! - [`failover`]: two replicas with a 4 s session; command latency while
//!   the tasks launch, then SIGKILL of the leader.

use std::path::Path;
use std::time::{Duration, Instant};

use mesos_appliance::util::unix_now_secs;
use serde_json::{Value, json};

use super::clients::{SERVICE_COMMAND, TASK_CPUS_MILLIS, TASK_MEM};
use super::testbed::TestbedProcess;
use super::timing;
use super::{Figures, deadline_for, median, poll, reconciles, seconds_list};
use crate::support::processes::{
    Appliance, cpu_time, framework_state, memory, running_count, tail,
};
use crate::support::zookeeper::ZkServer;

/// The ZooKeeper session timeout of the replicas.
pub const SESSION: Duration = Duration::from_secs(4);
/// Most instances of one service (`scheduler::spec::service::MAX_INSTANCES`):
/// larger runs use several services.
const PER_SERVICE: usize = mesos_appliance::scheduler::spec::service::MAX_INSTANCES as usize;
/// How often a replica's state is polled.
const POLL: Duration = Duration::from_millis(200);
/// How often each kind of timed command is sent while the tasks launch
/// and reconcile.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// Commands of each kind sent, at most.
const MAX_PROBES: usize = 20_000;

/// The services of a run: `tasks` instances over as few services as allowed.
pub fn services(tasks: usize) -> Value {
    let count = tasks.div_ceil(PER_SERVICE).max(1);
    let list: Vec<Value> = (0..count)
        .map(|i| {
            let instances = (tasks - i * PER_SERVICE).min(PER_SERVICE);
            json!({
                "name": format!("svc{i}"), "command": SERVICE_COMMAND,
                "cpus": TASK_CPUS_MILLIS as f64 / 1000.0, "mem": TASK_MEM,
                "instances": instances,
            })
        })
        .collect();
    Value::Array(list)
}

/// The flags of every benchmarked replica: real ZooKeeper with a 4 s
/// session, the testbed, the services; everything else the `serve`
/// defaults, plus `extra`.
pub fn replica_args(zk: &str, master: &str, services: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--zk",
        &format!("zk://{zk}/bench"),
        "--zk-session-timeout",
        &format!("{}s", SESSION.as_secs()),
        "--master",
        master,
        "--framework-name",
        "bench",
        "--framework-user",
        "root",
        "--deployment-id",
        "bench",
        "--services",
        &services.display().to_string(),
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `leadership.role/framework.state` of a replica (`""` while it does not answer).
pub async fn role(replica: &Appliance) -> String {
    match replica.state().await {
        Some(s) => format!(
            "{}/{}",
            s["leadership"]["role"].as_str().unwrap_or(""),
            framework_state(&s)
        ),
        None => String::new(),
    }
}

/// Waits until [`role`] is `want` (e.g. `leader/subscribed`).
pub async fn wait_role(replica: &Appliance, want: &str, within: Duration) -> Result<(), String> {
    let reached = poll(within, Duration::from_millis(50), || async {
        Ok((role(replica).await == want).then_some(()))
    })
    .await?;
    match reached {
        Some(()) => Ok(()),
        None => Err(failure(
            replica,
            &format!(
                "not {want} within {within:?} (is {:?})",
                role(replica).await
            ),
        )),
    }
}

fn failure(replica: &Appliance, what: &str) -> String {
    format!(
        "{}: {what}\n--- log ---\n{}",
        replica.name,
        tail(&replica.log(), 30)
    )
}

/// Waits until `replica`'s `/api/v1/state` counts `tasks` tasks
/// TASK_RUNNING (at most [`deadline_for`] `tasks`).
pub async fn wait_all_running(replica: &Appliance, tasks: usize) -> Result<(), String> {
    let running = || async {
        replica
            .state()
            .await
            .map(|s| running_count(&s) as usize)
            .unwrap_or(0)
    };
    let all = poll(deadline_for(tasks), POLL, || async {
        Ok((running().await >= tasks).then_some(()))
    })
    .await?;
    match all {
        Some(()) => Ok(()),
        None => Err(failure(
            replica,
            &format!("{} of {tasks} running", running().await),
        )),
    }
}

/// One request with a 30 s timeout: status, JSON answer and latency.
async fn request(
    method: reqwest::Method,
    url: String,
    body: Value,
) -> Result<(u16, Value, Duration), String> {
    let started = Instant::now();
    let response = crate::support::mesos::client()
        .request(method, url)
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let took = started.elapsed();
    let status = response.status().as_u16();
    Ok((status, response.json().await.unwrap_or(Value::Null), took))
}

/// A finished reconciliation run as the API shows it.
pub struct Run {
    /// When it started (Unix seconds, the appliance's clock).
    pub started_at: f64,
    /// When its last answer came or it gave up.
    pub finished_at: f64,
    /// Tasks asked about.
    pub asked: u64,
    /// Tasks answered.
    pub answered: u64,
    /// How it ended.
    pub outcome: String,
    /// Why it ran (`subscribed` for the run every subscription starts).
    pub trigger: String,
}

impl Run {
    fn from(run: &Value) -> Option<Run> {
        Some(Run {
            started_at: run["started_at"].as_f64()?,
            finished_at: run["finished_at"].as_f64()?,
            asked: run["asked"].as_u64().unwrap_or(0),
            answered: run["answered"].as_u64().unwrap_or(0),
            outcome: run["outcome"].as_str().unwrap_or("").to_string(),
            trigger: run["trigger"].as_str().unwrap_or("").to_string(),
        })
    }

    fn took(&self) -> Duration {
        Duration::from_secs_f64((self.finished_at - self.started_at).max(0.0))
    }

    /// The run asked about at least `tasks` tasks (the job-run probes of
    /// [`failover`] add a few) and heard from all it asked about.
    fn check(&self, tasks: usize) -> Result<(), String> {
        if (self.asked as usize) < tasks || self.answered != self.asked {
            return Err(format!(
                "reconciliation {}: asked {}, answered {} of {tasks}",
                self.outcome, self.asked, self.answered
            ));
        }
        Ok(())
    }
}

/// One replica: launch `tasks` tasks, then manual explicit reconciliations
/// one after another ([`reconciles`]). A reconciliation's time is the
/// operator's: from sending the request to the run's last answer (the
/// appliance's own clock on this machine); the figure is the median run,
/// and the note gives every run and the last one's own start → end.
pub async fn single(tasks: usize, agents: usize) -> Result<Figures, String> {
    let zk = tokio::task::spawn_blocking(ZkServer::start_production)
        .await
        .map_err(|e| e.to_string())?;
    let testbed = TestbedProcess::start(agents, &[]);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let services =
        crate::support::processes::services_file(dir.path(), "services.json", &services(tasks));
    // No cooldown: the manual run is not queued for the 30 s after the
    // subscription's own run (the run itself is the same either way).
    let args = replica_args(
        &zk.connect_string(),
        &testbed.url,
        &services,
        &["--reconcile-cooldown", "0s"],
    );
    let zk_cpu = || zk.pid().and_then(cpu_time).unwrap_or_default();
    let (zk_before, testbed_before) = (zk_cpu(), testbed.cpu_time());
    let started = Instant::now();
    let started_unix = unix_now_secs();
    let replica = Appliance::spawn("appliance", &args);
    wait_all_running(&replica, tasks).await?;
    let launch = started.elapsed();
    let launch_cpu = vec![
        ("replica", cpu_time(replica.pid()).unwrap_or_default()),
        ("testbed", testbed.cpu_time().saturating_sub(testbed_before)),
        ("ZooKeeper", zk_cpu().saturating_sub(zk_before)),
    ];
    let phases = log_phases(&replica.log(), started_unix);

    // Each run from the request to its last answer; the figure is their
    // median (one run's time swings by a third on this 2-core machine).
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..reconciles() {
        let (asked_at, run) = reconcile_all(&replica, tasks, 0.0).await?;
        runs.push(Duration::from_secs_f64(
            (run.finished_at - asked_at).max(0.0),
        ));
        last = Some(run);
    }
    let Some(run) = last else {
        return Err("no reconciliation ran".into());
    };
    let reconcile = median(&runs);
    let pages = time_pages(&replica.url, tasks).await;
    Ok(Figures {
        launch,
        reconcile,
        reconcile_note: format!(
            "{}, the last run itself {:.3} s; median of {} s",
            run.outcome,
            run.took().as_secs_f64(),
            seconds_list(&runs)
        ),
        phases,
        memory: memory(replica.pid()).unwrap_or_default(),
        testbed_memory: testbed.memory(),
        cpu: cpu_time(replica.pid()).unwrap_or_default(),
        testbed_cpu: testbed.cpu_time(),
        launch_cpu,
        calls: testbed.call_counts(&reqwest::Client::new()).await,
        updates_resent: testbed.updates_resent(&reqwest::Client::new()).await,
        pages,
    })
}

/// Requests of each page timed by [`time_pages`].
const PAGE_SAMPLES: usize = 50;

/// Times the dashboard's pages and the JSON state against `/healthz`, one
/// request at a time, [`PAGE_SAMPLES`] each: the overview, the tasks page
/// (first page, a middle page, sorted by update time, host and launch
/// time, filtered by service, state and text), the JSON task list sorted by
/// host, the services page, one task's page, `/api/v1/state` and
/// `/healthz`.
async fn time_pages(url: &str, tasks: usize) -> Vec<(String, Vec<Duration>)> {
    let http = crate::support::mesos::client();
    let middle = (tasks / 100).max(1);
    let task_id = http
        .get(format!("{url}/api/v1/tasks?per_page=1"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok();
    let task_id = match task_id {
        Some(r) => r
            .json::<Value>()
            .await
            .ok()
            .and_then(|v| v["tasks"][0]["id"].as_str().map(|s| s.to_string())),
        None => None,
    }
    .unwrap_or_else(|| "none".into());
    let paths = [
        "/healthz".to_string(),
        "/api/v1/state".to_string(),
        "/".to_string(),
        "/tasks".to_string(),
        format!("/tasks?page={middle}"),
        format!("/tasks?sort=updated&order=desc&page={middle}"),
        "/tasks?sort=host&order=desc".to_string(),
        format!("/tasks?sort=launched&page={middle}"),
        "/tasks?service=svc0&sort=state".to_string(),
        "/tasks?state=running&q=svc1&sort=updated&order=desc".to_string(),
        "/api/v1/tasks?sort=host&per_page=100".to_string(),
        "/services".to_string(),
        format!("/tasks/{task_id}"),
    ];
    let mut out = Vec::new();
    for path in paths {
        let mut samples = Vec::with_capacity(PAGE_SAMPLES);
        for _ in 0..PAGE_SAMPLES {
            let started = Instant::now();
            let answer = http
                .get(format!("{url}{path}"))
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            if let Ok(answer) = answer
                && answer.status().is_success()
                && answer.bytes().await.is_ok()
            {
                samples.push(started.elapsed());
            }
        }
        out.push((path, samples));
    }
    out
}

/// Asks `replica` for an explicit reconciliation and waits for its end: the
/// time it was asked (Unix seconds) and the run. A run that started before
/// `not_before` (Unix seconds: one the request joined, asking about fewer
/// tasks) is waited out and the request made again. The run must have
/// asked about and heard from all `tasks`.
///
/// The run is followed by its ID in `/api/v1/state` (`reconciliation.running`,
/// then `reconciliation.last`), not at the action's result: the appliance
/// keeps the latest 100 action results, and while the probes of [`failover`]
/// run, ten reconcile actions a second push a queued run's result out long
/// before its run ends.
async fn reconcile_all(
    replica: &Appliance,
    tasks: usize,
    not_before: f64,
) -> Result<(f64, Run), String> {
    let deadline = Instant::now() + deadline_for(tasks);
    loop {
        let asked_at = unix_now_secs();
        let (status, record, _) = request(
            reqwest::Method::POST,
            format!("{}/api/v1/actions/reconcile", replica.url),
            json!({"kind": "explicit"}),
        )
        .await?;
        let run_id = record["reconcile"]["id"].as_u64();
        let Some(run_id) = run_id.filter(|_| status == 202) else {
            return Err(failure(
                replica,
                &format!("reconcile answered {status}: {record}"),
            ));
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let finished = poll(left, Duration::from_millis(50), || async {
            let Some(state) = replica.state().await else {
                return Ok(None);
            };
            let summary = &state["reconciliation"];
            let (last, running) = (&summary["last"], &summary["running"]);
            let explicit = |run: &Value| run["kind"] == "explicit";
            // An explicit run at or after the one named is still going.
            if explicit(running) && running["id"].as_u64() >= Some(run_id) {
                return Ok(None);
            }
            // The run named, or the explicit run it became (a queued
            // request's run may be superseded or folded into the next
            // subscription's run, which then carries another number): the
            // newest explicit run that ended; `check` below tells one that
            // asked about too few tasks.
            match last["id"].as_u64() {
                Some(id) if id >= run_id && explicit(last) => Ok(Run::from(last)),
                // A later implicit run ended after it: its end was missed.
                Some(id) if id > run_id => Err(format!(
                    "the explicit reconciliation (run {run_id} or after) ended unseen \
                     (last is implicit run {id})"
                )),
                _ => Ok(None),
            }
        })
        .await?;
        let run = finished.ok_or_else(|| failure(replica, "the reconciliation did not finish"))?;
        if run.started_at >= not_before {
            run.check(tasks)?;
            return Ok((asked_at, run));
        }
    }
}

/// Waits for the end of the explicit reconciliation that `replica` started
/// on a subscription at or after `since` (Unix seconds), and checks that it
/// asked about and heard from all `tasks`. It is the newest finished run
/// (`reconciliation.last`) until the implicit run that follows it, which
/// waits for the cooldown (`--reconcile-cooldown`, 30 s by default).
pub async fn reconciled_after(
    replica: &Appliance,
    since: f64,
    tasks: usize,
    within: Duration,
) -> Result<Run, String> {
    let run = poll(within, Duration::from_millis(20), || async {
        Ok(replica
            .state()
            .await
            .and_then(|state| Run::from(&state["reconciliation"]["last"]))
            .filter(|run| run.started_at >= since && run.trigger == "subscribed"))
    })
    .await?
    .ok_or_else(|| failure(replica, "no reconciliation after the failover"))?;
    run.check(tasks)?;
    Ok(run)
}

/// One timed command: when it was sent (Unix seconds), how long its answer
/// took, and its status.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Sent at (Unix seconds, this machine's clock).
    pub at: f64,
    /// Request → whole answer read.
    pub took: Duration,
    /// The HTTP status.
    pub status: u16,
}

/// Latencies of one kind of command.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    /// Each answer, in the order sent.
    pub samples: Vec<Sample>,
    /// Requests with no answer, with when they were sent.
    pub errors: Vec<(f64, String)>,
}

impl Latencies {
    fn record(&mut self, at: f64, answer: Result<(u16, Value, Duration), String>) {
        match answer {
            Ok((status, _, took)) => self.samples.push(Sample { at, took, status }),
            Err(error) => self.errors.push((at, error)),
        }
    }

    /// The latencies of the commands sent in `[from, to)` (Unix seconds),
    /// and the failures among them (answers other than 2xx as their status,
    /// requests with no answer as the error).
    pub fn between(&self, from: f64, to: f64) -> (Vec<Duration>, Vec<String>) {
        let within = |at: f64| at >= from && at < to;
        let mut took = Vec::new();
        let mut failures = Vec::new();
        for s in self.samples.iter().filter(|s| within(s.at)) {
            took.push(s.took);
            if !(200..300).contains(&s.status) {
                failures.push(s.status.to_string());
            }
        }
        failures.extend(
            self.errors
                .iter()
                .filter(|(at, _)| within(*at))
                .map(|(_, e)| e.clone()),
        );
        (took, failures)
    }
}

/// The kinds of command timed (see [`probe`]).
pub const COMMANDS: [&str; 4] = ["reconcile action", "service PUT", "drain", "job run"];

/// Latencies per kind of command, in the order of [`COMMANDS`].
pub type CommandLatencies = Vec<(&'static str, Latencies)>;

/// When the phases of a [`failover`] run began and ended, Unix seconds
/// (this machine's clock): commands are reported per phase.
#[derive(Debug, Clone, Default)]
pub struct Phases {
    /// The leader subscribed: the probes start.
    pub started: f64,
    /// All tasks TASK_RUNNING on the leader.
    pub launched: f64,
    /// The explicit reconciliation of all tasks answered.
    pub reconciled: f64,
    /// The leader's SIGKILL.
    pub killed: f64,
    /// The follower's SUBSCRIBE answered by the master.
    pub subscribed: f64,
    /// The follower's reconciliation of all adopted tasks finished.
    pub adopted: f64,
}

/// What [`failover`] measured.
#[derive(Debug, Clone)]
pub struct FailoverFigures {
    /// Launch to all running on the leader (while being probed).
    pub launch: Duration,
    /// Each kind of command at the leader while the tasks launched and
    /// reconciled ([`COMMANDS`]).
    pub commands: CommandLatencies,
    /// The same at the follower from the leader's SIGKILL until the
    /// follower reconciled every task (before it leads, its answers are
    /// quick refusals: counted among the failures).
    pub failover_commands: CommandLatencies,
    /// When each phase began and ended.
    pub phases: Phases,
    /// The explicit reconciliation of all tasks after the launch, asked
    /// (or, when it was queued behind the cooldown, started) → all
    /// answered, while probed.
    pub probed_reconcile: Duration,
    /// SIGKILL of the leader → the follower's SUBSCRIBE answered by the master.
    pub subscribed: Duration,
    /// SIGKILL → the follower's reconciliation after SUBSCRIBED converged.
    pub reconciled: Duration,
    /// Its outcome and size.
    pub reconciled_note: String,
    /// The new leader's memory after that.
    pub memory: crate::support::processes::Memory,
    /// The new leader's pages once it reconciled every task (as
    /// [`Figures::pages`](super::Figures::pages)).
    pub pages: Vec<(String, Vec<Duration>)>,
    /// Both replicas' `command_timing` lines ([`timing`]).
    pub timings: Vec<timing::Line>,
}

/// The agent the drain probes drain and cancel: the testbed's first, made
/// unreachable before the launch so that no task lands there and a drain
/// moves nothing (a drain of an agent with tasks would start replacements:
/// a different benchmark). Waits until `replica` knows it, then marks it
/// unreachable at the testbed (`POST /testbed/agents/{id}/unreachable`).
async fn spare_agent(replica: &Appliance, testbed: &TestbedProcess) -> Result<String, String> {
    let http = crate::support::mesos::client();
    let agents: Value = http
        .get(format!("{}/testbed/agents", testbed.url))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let id = agents["agents"][0]["id"]
        .as_str()
        .ok_or("the testbed lists no agent")?
        .to_string();
    let known = poll(
        Duration::from_secs(30),
        Duration::from_millis(20),
        || async {
            let listed = http
                .get(format!("{}/api/v1/agents", replica.url))
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .ok();
            let body = match listed {
                Some(r) => r.text().await.unwrap_or_default(),
                None => String::new(),
            };
            Ok(body.contains(&format!("\"{id}\"")).then_some(()))
        },
    )
    .await?;
    if known.is_none() {
        return Err(failure(replica, &format!("agent {id} not known in 30 s")));
    }
    http.post(format!("{}/testbed/agents/{id}/unreachable", testbed.url))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(id)
}

/// The job the job-run probes run: each run's task is killed after 1 s
/// (`timeout`), 5 finished runs are kept.
fn probe_job() -> Value {
    json!({"command": SERVICE_COMMAND, "cpus": 0.01, "mem": 1, "timeout": "1s", "history": 5})
}

/// Two replicas of one deployment: A starts first and leads, B follows.
/// While the tasks launch, and then while an explicit reconciliation of
/// all of them runs, every [`PROBE_EVERY`] each of [`COMMANDS`] (see
/// [`probe`]), timed. Once all run and no reconciliation is in progress, A
/// gets SIGKILL (its ZooKeeper session must expire before B is elected);
/// the same commands go to B until it has reconciled every task.
pub async fn failover(tasks: usize, agents: usize) -> Result<FailoverFigures, String> {
    let zk = tokio::task::spawn_blocking(ZkServer::start_production)
        .await
        .map_err(|e| e.to_string())?;
    let testbed = TestbedProcess::start(agents, &[]);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // No service at the start: the spare agent is made unreachable before
    // any task could land there (with the services in the file, the launch
    // began at the subscription and put tasks on it, so every drain probe
    // moved tasks); the services are PUT then, and the launch is timed
    // from the first PUT.
    let services_path =
        crate::support::processes::services_file(dir.path(), "services.json", &json!([]));
    // The default cooldown (30 s between runs): a reconcile probe is an
    // operator's command, answered at once with the run it joined or
    // queued, not a load generator starting a run of every task back to
    // back.
    let args = replica_args(&zk.connect_string(), &testbed.url, &services_path, &[]);
    let mut leader = Appliance::spawn_logging("replica-a", &args, timing::RUST_LOG);
    wait_role(&leader, "leader/subscribed", Duration::from_secs(60)).await?;
    let spare = spare_agent(&leader, &testbed).await?;
    let started = Instant::now();
    for service in services(tasks).as_array().into_iter().flatten() {
        let name = service["name"].as_str().unwrap_or_default();
        let (status, answer, _) = request(
            reqwest::Method::PUT,
            format!("{}/api/v1/services/{name}", leader.url),
            service.clone(),
        )
        .await?;
        if !(200..300).contains(&status) {
            return Err(failure(&leader, &format!("PUT {name}: {status} {answer}")));
        }
    }
    let (status, answer, _) = request(
        reqwest::Method::PUT,
        format!("{}/api/v1/jobs/probe-job", leader.url),
        probe_job(),
    )
    .await?;
    if !(200..300).contains(&status) {
        return Err(failure(&leader, &format!("PUT job: {status} {answer}")));
    }
    let follower = Appliance::spawn_logging("replica-b", &args, timing::RUST_LOG);
    let mut phases = Phases {
        started: unix_now_secs(),
        ..Default::default()
    };

    let done = tokio_util::sync::CancellationToken::new();
    let probes = tokio::spawn(probe(leader.url.clone(), spare.clone(), done.clone()));
    let launched = wait_all_running(&leader, tasks).await;
    let launch = started.elapsed();
    phases.launched = unix_now_secs();
    // Then an explicit reconciliation of all of them, still probed (the
    // probes' own requests join it or start the next run).
    let all = match launched {
        Ok(()) => reconcile_all(&leader, tasks, unix_now_secs()).await,
        Err(e) => Err(e),
    };
    phases.reconciled = unix_now_secs();
    done.cancel();
    let commands = probes.await.map_err(|e| e.to_string())?;
    let (asked_at, run) = all?;
    // From its start when it waited for the cooldown after a run a probe
    // started: the run is timed, not the cooldown.
    let probed_reconcile =
        Duration::from_secs_f64((run.finished_at - asked_at.max(run.started_at)).max(0.0));
    wait_role(&follower, "follower/standby", Duration::from_secs(60)).await?;
    // Let the reconciliations the probes asked for end first.
    let quiet = Instant::now() + deadline_for(tasks);
    while let Some(state) = leader.state().await
        && !state["reconciliation"]["running"].is_null()
        && Instant::now() < quiet
    {
        tokio::time::sleep(POLL).await;
    }

    let http = crate::support::mesos::client();
    let killed_at = unix_now_secs();
    phases.killed = killed_at;
    leader.signal(libc::SIGKILL);
    // The same commands at the follower from the SIGKILL until it has
    // reconciled every task (before it leads, its answers are quick
    // refusals: counted, with their status, among the failures).
    let done = tokio_util::sync::CancellationToken::new();
    let failover_probes = tokio::spawn(probe(follower.url.clone(), spare, done.clone()));
    let _ = leader.wait_exit(Duration::from_secs(10)).await;
    let deadline = Instant::now() + deadline_for(tasks);
    let left = || deadline.saturating_duration_since(Instant::now());
    let subscribed = testbed
        .subscribed_since(&http, killed_at, left())
        .await
        .map_err(|e| {
            failure(
                &follower,
                &format!("no SUBSCRIBE after the leader's SIGKILL: {e}"),
            )
        })?
        - killed_at;
    phases.subscribed = killed_at + subscribed.max(0.0);
    let run = reconciled_after(&follower, killed_at, tasks, left()).await;
    phases.adopted = unix_now_secs();
    done.cancel();
    let failover_commands = failover_probes.await.map_err(|e| e.to_string())?;
    let run = run?;
    let pages = time_pages(&follower.url, tasks).await;
    let mut timings = timing::parse(&leader.log());
    timings.extend(timing::parse(&follower.log()));
    Ok(FailoverFigures {
        commands,
        failover_commands,
        phases,
        launch,
        probed_reconcile,
        subscribed: Duration::from_secs_f64(subscribed.max(0.0)),
        reconciled: Duration::from_secs_f64((run.finished_at - killed_at).max(0.0)),
        reconciled_note: format!("{} of {} tasks", run.outcome, run.asked),
        memory: memory(follower.pid()).unwrap_or_default(),
        pages,
        timings,
    })
}

/// The timed commands, each kind every [`PROBE_EVERY`] on its own until
/// `done` (a slow one does not hold another back), in the order of
/// [`COMMANDS`]:
/// - `POST /api/v1/actions/reconcile {"kind": "explicit"}`;
/// - `PUT /api/v1/services/probe` (0 instances);
/// - `POST /api/v1/agents/{spare}/drain` then `DELETE` of it, alternately
///   (each a fenced ZooKeeper write; the agent holds no task);
/// - `POST /api/v1/jobs/probe-job/runs` (a manual run: its run record is
///   stored before the answer).
async fn probe(
    url: String,
    spare: String,
    done: tokio_util::sync::CancellationToken,
) -> CommandLatencies {
    use reqwest::Method;
    let reconcile = probe_one(
        vec![(
            Method::POST,
            format!("{url}/api/v1/actions/reconcile"),
            json!({"kind": "explicit"}),
        )],
        done.clone(),
    );
    let put = probe_one(
        vec![(
            Method::PUT,
            format!("{url}/api/v1/services/probe"),
            json!({"command": SERVICE_COMMAND, "cpus": 0.01, "mem": 1, "instances": 0}),
        )],
        done.clone(),
    );
    let drain_url = format!("{url}/api/v1/agents/{spare}/drain");
    let drain = probe_one(
        vec![
            (
                Method::POST,
                drain_url.clone(),
                json!({"min_healthy": 0, "reason": "bench"}),
            ),
            (Method::DELETE, drain_url, json!({"reason": "bench"})),
        ],
        done.clone(),
    );
    let run = probe_one(
        vec![(
            Method::POST,
            format!("{url}/api/v1/jobs/probe-job/runs"),
            json!({}),
        )],
        done,
    );
    let (a, b, c, d) = tokio::join!(reconcile, put, drain, run);
    COMMANDS.into_iter().zip([a, b, c, d]).collect()
}

/// Sends `requests` in turn, one every [`PROBE_EVERY`], until `done`.
async fn probe_one(
    requests: Vec<(reqwest::Method, String, Value)>,
    done: tokio_util::sync::CancellationToken,
) -> Latencies {
    let mut latencies = Latencies::default();
    for (method, url, body) in requests.iter().cycle().take(MAX_PROBES) {
        if done.is_cancelled() {
            break;
        }
        let at = unix_now_secs();
        latencies.record(at, request(method.clone(), url.clone(), body.clone()).await);
        tokio::select! {
            _ = done.cancelled() => break,
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
    latencies
}

/// The phases of a replica's launch read from its log (each line starts
/// with its RFC 3339 time), from `started_unix` (Unix seconds):
/// `subscribed`, `first-accept` and `accepted` (the first and the last
/// ACCEPT the master answered, logged as `launched N task(s) on offer`).
/// A phase whose line is missing is left out.
fn log_phases(log: &str, started_unix: f64) -> Vec<(String, Duration)> {
    let at = |line: &str| -> Option<Duration> {
        let stamp = line.split_whitespace().next()?;
        let time = humantime::parse_rfc3339(stamp).ok()?;
        let unix = time.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(Duration::from_secs_f64(
            (unix.as_secs_f64() - started_unix).max(0.0),
        ))
    };
    let first = |marker: &str| log.lines().find(|l| l.contains(marker)).and_then(at);
    let last = |marker: &str| log.lines().rev().find(|l| l.contains(marker)).and_then(at);
    [
        ("subscribed", first("kind=subscribed")),
        ("first-accept", first("kind=launch")),
        ("accepted", last("kind=launch")),
    ]
    .into_iter()
    .filter_map(|(name, at)| Some((name.to_string(), at?)))
    .collect()
}
