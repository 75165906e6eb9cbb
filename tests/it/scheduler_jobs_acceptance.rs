//! The jobs acceptance of `docs/jobs.md` with real parts: a real ZooKeeper,
//! the testbed master (running commands for real in process mode, or
//! ending simulated tasks with the `task-exit` fault,
//! `docs/testbed.md#finite-tasks`), and replicas in process or as real
//! `mesos-appliance` processes:
//! - a failed command is retried `retries.count` times with its backoff,
//!   then the run is `failed` with the exit status; a run past `timeout`
//!   is killed (TASK_KILLED on the master) and `timed_out`;
//! - `replace` kills the running run and starts the new one; `allow` runs
//!   both;
//! - a `forbid` job whose command outlives its period, the leader process
//!   SIGKILLed about 1 s before a trigger: one launch per trigger that was
//!   not skipped (per the master's call log), the overlapping ones
//!   `skipped: concurrency`, the same history and next run time on every
//!   replica;
//! - a `forbid` job's run that ended while no leader listened (the leader
//!   SIGKILLed at its task's TASK_RUNNING, the next leader's
//!   reconciliations lost): the next trigger launches, not skipped;
//! - the leader process cut from ZooKeeper for three sessions across
//!   triggers: no launch on its Mesos stream after the cut, the cut's
//!   triggers run once (by the next leader), and both replicas agree on
//!   the history and the tasks afterwards.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use mesos_appliance::scheduler::commands::RunRequest;
use mesos_appliance::scheduler::jobs::{JobStatus, RunId, RunRecord, RunState};
use mesos_appliance::scheduler::spec::job::{JobSpec, ValidJobSpec};
use mesos_appliance::scheduler::{FrameworkState, Request, Snapshot};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::appliance::{Replica, core_config};
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(40);

fn job(value: Value) -> Box<ValidJobSpec> {
    let spec: JobSpec = serde_json::from_value(value).unwrap();
    Box::new(ValidJobSpec::new(spec).unwrap())
}

/// A replica on its own ZooKeeper and `tb`, leading and subscribed.
async fn leader(zk: &ZkServer, tb: &Testbed) -> Replica {
    let r = Replica::start(&zk.connect_string(), "r1", &tb.url(), vec![], core_config()).await;
    r.wait_for("r1 leads", WAIT, |s| {
        s.framework.state == FrameworkState::Subscribed
    })
    .await;
    r
}

async fn put_job(replica: &Replica, spec: Box<ValidJobSpec>) {
    let _: bool = replica
        .handle
        .request(Duration::from_secs(10), Request::PutJob(spec))
        .await
        .expect("the job is stored");
}

async fn run_now(replica: &Replica, name: &str) -> RunRecord {
    replica
        .handle
        .request(
            Duration::from_secs(10),
            Request::StartRun(Box::new(RunRequest {
                job: name.into(),
                args: vec![],
                env: BTreeMap::new(),
                by: "test".into(),
                reason: None,
            })),
        )
        .await
        .expect("the run is stored")
}

fn job_status<'a>(s: &'a Snapshot, name: &str) -> Option<&'a JobStatus> {
    s.jobs.iter().find(|j| j.record.spec.name == name)
}

fn run_of(s: &Snapshot, name: &str, run_id: &str) -> Option<RunRecord> {
    job_status(s, name)?
        .runs
        .iter()
        .find(|r| r.run_id == run_id)
        .map(|r| r.as_ref().clone())
}

/// The runs of `name` by run ID: state.
fn states(s: &Snapshot, name: &str) -> BTreeMap<String, RunState> {
    job_status(s, name)
        .map(|j| j.runs.iter().map(|r| (r.run_id.clone(), r.state)).collect())
        .unwrap_or_default()
}

/// The master's launches: (time, task ID), in order.
fn launches(tb: &Testbed) -> Vec<(f64, String)> {
    tb.calls()
        .iter()
        .flat_map(|c| c.launched_task_ids().into_iter().map(move |t| (c.at, t)))
        .collect()
}

/// A process-mode testbed with one agent: commands run for real.
async fn process_testbed() -> Testbed {
    support::testbed(TestbedConfig::for_tests_with_executor(
        1,
        support::executor::executor_binary(),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_command_is_retried_with_backoff_then_failed_with_its_exit_status() {
    let zk = ZkServer::start();
    let tb = process_testbed().await;
    let r = leader(&zk, &tb).await;
    put_job(
        &r,
        job(
            json!({"name": "flaky", "command": "exit 3", "cpus": 0.1, "mem": 32,
                   "retries": {"count": 2, "backoff": "1s", "backoff_max": "10s"}}),
        ),
    )
    .await;
    let run = run_now(&r, "flaky").await;
    let s = r
        .wait_for("the run failed", WAIT, |s| {
            run_of(s, "flaky", &run.run_id).is_some_and(|r| r.state == RunState::Failed)
        })
        .await;
    let done = run_of(&s, "flaky", &run.run_id).unwrap();
    assert_eq!(done.reason.as_deref(), Some("exit status 3"), "{done:#?}");
    assert_eq!(
        done.attempts.len(),
        3,
        "the first and two retries: {done:#?}"
    );
    for a in &done.attempts {
        assert_eq!(a.task_state.as_deref(), Some("TASK_FAILED"), "{a:?}");
        assert_eq!(a.exit_status, Some(3), "{a:?}");
    }
    // On the master: the three attempts' tasks, each launched once, the
    // retries after 1 s and 2 s (`backoff × 2^(n-1)`).
    let launched = launches(&tb);
    let ids: Vec<&str> = launched.iter().map(|(_, t)| t.as_str()).collect();
    let want: Vec<String> = (1..=3)
        .map(|n| format!("flaky.{}.{n}", run.run_id))
        .collect();
    assert_eq!(ids, want, "one launch per attempt");
    for (n, backoff) in [(1usize, 1.0), (2, 2.0)] {
        let ended = done.attempts[n - 1].ended_at.unwrap();
        let next = launched[n].0;
        assert!(
            next - ended >= backoff - 0.05 && next - ended < backoff + 5.0,
            "attempt {} launched {:.2} s after attempt {n} ended, backoff {backoff} s",
            n + 1,
            next - ended
        );
    }
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_timeout_is_killed_and_timed_out() {
    let zk = ZkServer::start();
    let tb = process_testbed().await;
    let r = leader(&zk, &tb).await;
    put_job(
        &r,
        job(
            json!({"name": "slow", "command": "sleep 60", "cpus": 0.1, "mem": 32,
                   "retries": {"count": 2, "backoff": "1s"}, "timeout": "2s"}),
        ),
    )
    .await;
    let run = run_now(&r, "slow").await;
    let s = r
        .wait_for("the run timed out", WAIT, |s| {
            run_of(s, "slow", &run.run_id).is_some_and(|r| r.state.is_finished())
        })
        .await;
    let done = run_of(&s, "slow", &run.run_id).unwrap();
    assert_eq!(done.state, RunState::TimedOut, "{done:#?}");
    assert_eq!(done.reason.as_deref(), Some("timed out after 2s"));
    assert_eq!(
        done.attempts.len(),
        1,
        "a timeout is not retried: {done:#?}"
    );
    let took = done.finished_at.unwrap() - done.created_at;
    assert!(
        (2.0..8.0).contains(&took),
        "ended {took:.2} s after it was recorded"
    );
    assert_eq!(
        done.attempts[0].task_state.as_deref(),
        Some("TASK_KILLED"),
        "{done:#?}"
    );
    // The master was asked to kill it, and the real command died of the
    // signal (the command executor's message).
    let task_id = format!("slow.{}.1", run.run_id);
    assert!(
        tb.calls().iter().any(
            |c| c.call_type == "KILL" && c.call["kill"]["task_id"]["value"] == task_id.as_str()
        ),
        "a KILL for {task_id}"
    );
    assert!(
        done.attempts[0]
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("Command terminated with signal")),
        "{done:#?}"
    );
    r.stop().await;
}

/// The `replace` / `allow` scenarios: a job `name` every 3 s whose
/// simulated task never ends; waits for the second trigger's run to be
/// recorded and its task launched; returns the snapshot and the launches.
async fn two_triggers(concurrency: &str) -> (Snapshot, Vec<(f64, String)>) {
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let r = leader(&zk, &tb).await;
    put_job(
        &r,
        job(
            json!({"name": "batch", "command": "sleep 3600", "cpus": 0.1, "mem": 32,
                   "schedule": {"cron": "*/3 * * * * *", "starting_deadline": "10s",
                                "concurrency": concurrency}}),
        ),
    )
    .await;
    // `replace`: the first run killed by the second, which runs (a third
    // trigger comes 3 s later).
    let first_state = if concurrency == "replace" {
        RunState::Killed
    } else {
        RunState::Running
    };
    let s = r
        .wait_for("two triggers, the second running", WAIT, |s| {
            let st = states(s, "batch");
            let mut oldest = st.values();
            oldest.next() == Some(&first_state) && oldest.next() == Some(&RunState::Running)
        })
        .await;
    let s = s.as_ref().clone();
    let launched = launches(&tb);
    r.stop().await;
    (s, launched)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_kills_the_running_run_and_starts_the_new_one() {
    let (s, launched) = two_triggers("replace").await;
    let job = job_status(&s, "batch").unwrap();
    // Newest first.
    let (new, old) = (&job.runs[job.runs.len() - 2], &job.runs[job.runs.len() - 1]);
    assert_eq!(old.state, RunState::Killed, "{old:#?}");
    assert_eq!(
        old.reason.as_deref(),
        Some(format!("replaced by run {}", new.run_id).as_str())
    );
    assert_eq!(new.state, RunState::Running);
    assert_eq!(
        old.attempts[0].task_state.as_deref(),
        Some("TASK_KILLED"),
        "{old:#?}"
    );
    let ids: Vec<String> = launched.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(
        ids[..2],
        [
            format!("batch.{}.1", old.run_id),
            format!("batch.{}.1", new.run_id)
        ],
        "each run launched once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_runs_both() {
    let (s, launched) = two_triggers("allow").await;
    let job = job_status(&s, "batch").unwrap();
    let (new, old) = (&job.runs[job.runs.len() - 2], &job.runs[job.runs.len() - 1]);
    assert_eq!(
        (old.state, new.state),
        (RunState::Running, RunState::Running)
    );
    let ids: Vec<String> = launched.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(
        ids[..2],
        [
            format!("batch.{}.1", old.run_id),
            format!("batch.{}.1", new.run_id)
        ]
    );
}

/// `GET /api/v1/jobs/report` of a process replica, `None` while it does
/// not answer 200.
async fn report_view(a: &support::processes::Appliance) -> Option<Value> {
    match a.get("/api/v1/jobs/report").await {
        Some((200, v)) => Some(v),
        _ => None,
    }
}

/// The parts of a job view every replica must agree on: the runs (ID,
/// trigger, state, reason, attempts' task IDs and states) and the next run
/// time.
fn agreed(view: &Value) -> Value {
    let runs: Vec<Value> = view["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            json!({"run_id": r["run_id"], "trigger": r["trigger"], "state": r["state"],
                   "reason": r["reason"],
                   "attempts": r["attempts"].as_array().into_iter().flatten()
                       .map(|a| json!([a["task_id"], a["task_state"]])).collect::<Vec<_>>()})
        })
        .collect();
    json!({"next_run_at": view["next_run_at"], "runs": runs})
}

/// Polls `replicas` until their [`agreed`] views are equal (and hold
/// `min_runs` runs or more); returns that view.
async fn same_on_every_replica(
    replicas: &[&support::processes::Appliance],
    min_runs: usize,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut views = Vec::new();
        for a in replicas {
            views.push(report_view(a).await.map(|v| agreed(&v)));
        }
        if let Some(Some(first)) = views.first()
            && first["runs"]
                .as_array()
                .is_some_and(|r| r.len() >= min_runs)
            && views.iter().all(|v| v.as_ref() == Some(first))
        {
            return first.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replicas never agreed: {views:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until `replicas` show the same tasks (ID and state, from
/// `GET /api/v1/tasks`): the task records behind the runs agree too.
async fn same_tasks_on_every_replica(replicas: &[&support::processes::Appliance]) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut views = Vec::new();
        for a in replicas {
            let mut tasks = match a.get("/api/v1/tasks").await {
                Some((200, v)) => support::truth::shown(&v),
                _ => Vec::new(),
            };
            tasks.sort();
            views.push(tasks);
        }
        if views.iter().all(|v| *v == views[0]) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replicas show different tasks: {views:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `mesos-appliance` processes on `zk` and `tb` (framework `group`): a
/// leader, then `standbys` standbys, and the leader's `report` job:
/// `command` every 3 s, `forbid`, a 20 s starting deadline, 100 runs kept.
async fn forbid_job(
    zk: &ZkServer,
    tb: &Testbed,
    group: &str,
    standbys: usize,
    command: &str,
) -> (
    support::processes::Appliance,
    Vec<support::processes::Appliance>,
) {
    use support::processes::{Appliance, base_args, framework_state};
    let args = base_args(&zk.connect_string(), &tb.url(), group);
    let a = Appliance::spawn("a", &args);
    a.wait_state("a leads", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    let names = ["b", "c", "d"];
    let others: Vec<Appliance> = names[..standbys]
        .iter()
        .map(|n| Appliance::spawn(n, &args))
        .collect();
    for r in &others {
        r.wait_state("standby", WAIT, |s| framework_state(s) == "standby")
            .await;
    }
    let (status, body) = a
        .send(
            reqwest::Method::PUT,
            "/api/v1/jobs/report",
            json!({"name": "report", "command": command, "cpus": 0.1, "mem": 32,
                   "schedule": {"cron": "*/3 * * * * *", "starting_deadline": "20s",
                                "concurrency": "forbid"},
                   "history": 100}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    (a, others)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbid_with_the_leader_process_sigkilled_before_a_trigger_launches_once_per_run() {
    use support::processes::{Appliance, framework_state};
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    // The job's tasks end 5 s after TASK_RUNNING: longer than the 3 s
    // period, shorter than two.
    tb.set_task_exit("report.", None, Duration::from_secs(5), 0);
    let (a, standbys) = forbid_job(&zk, &tb, "jobs-acc", 2, "sleep 5").await;
    let [b, c] = <[Appliance; 2]>::try_from(standbys)
        .ok()
        .expect("two standbys");
    // Two runs and a skipped trigger between them, then stop the leader
    // about 1 s before the next trigger.
    let deadline = tokio::time::Instant::now() + WAIT;
    let next = loop {
        let view = report_view(&a).await.unwrap_or(Value::Null);
        let runs = view["runs"].as_array().cloned().unwrap_or_default();
        let count = |state: &str| runs.iter().filter(|r| r["state"] == state).count();
        if count("succeeded") >= 1
            && count("skipped") >= 1
            && let Some(next) = view["next_run_at"].as_f64()
        {
            break next;
        }
        assert!(tokio::time::Instant::now() < deadline, "{view:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    // The next trigger at least 1.5 s away (a later one of the 3 s period
    // when this one is too close to aim at).
    let next = if next - now() < 1.5 { next + 3.0 } else { next };
    let wait = next - 1.0 - now();
    if wait > 0.0 {
        // Sleeping until a wall-clock instant is the scenario itself.
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    let killed_at = now();
    a.signal(libc::SIGKILL);
    println!(
        "leader SIGKILLed {:.2} s before the trigger {next}",
        next - killed_at
    );
    // The next leader takes over after a's session expires and fires what
    // came meanwhile.
    let deadline = tokio::time::Instant::now() + WAIT;
    let new_leader = loop {
        let mut found = None;
        for r in [&b, &c] {
            if r.state()
                .await
                .is_some_and(|s| framework_state(&s) == "subscribed")
            {
                found = Some(r);
            }
        }
        if let Some(r) = found {
            break r;
        }
        assert!(tokio::time::Instant::now() < deadline, "no new leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "{} leads {:.2} s after the kill",
        new_leader.name,
        now() - killed_at
    );
    // Four more triggers under the new leader, the replicas agreeing.
    let before = report_view(new_leader).await.unwrap()["runs"]
        .as_array()
        .map_or(0, Vec::len);
    let agreed_view = same_on_every_replica(&[&b, &c], before + 4).await;
    assert!(
        agreed_view["next_run_at"].as_f64().is_some(),
        "{agreed_view:#}"
    );
    // Stop the schedule; once the last run ended, compare everything.
    let (status, body) = new_leader
        .post("/api/v1/jobs/report/disable", json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let view = report_view(new_leader).await.unwrap_or(Value::Null);
        if view["active_runs"] == 0 && view["next_run_at"].is_null() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{view:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = same_on_every_replica(&[&b, &c], before + 4).await;
    same_tasks_on_every_replica(&[&b, &c]).await;
    let runs = last["runs"].as_array().unwrap();
    let trigger_id = RunId::scheduled(next as i64);
    assert!(
        runs.iter().any(|r| r["run_id"] == trigger_id.as_str()),
        "the trigger {trigger_id} of the failover gap has its run: {last:#}"
    );
    let mut launched: Vec<String> = launches(&tb).into_iter().map(|(_, t)| t).collect();
    let mut want: Vec<String> = Vec::new();
    for r in runs {
        let id = r["run_id"].as_str().unwrap();
        match r["state"].as_str().unwrap() {
            "succeeded" => want.push(format!("report.{id}.1")),
            "skipped" => assert!(
                r["reason"]
                    .as_str()
                    .is_some_and(|w| w.starts_with("skipped: concurrency")),
                "{r}"
            ),
            other => panic!("run {id} is {other}: {last:#}"),
        }
    }
    let skipped = runs.iter().filter(|r| r["state"] == "skipped").count();
    assert!(skipped >= 2, "overlapping triggers skipped: {last:#}");
    launched.sort();
    want.sort();
    assert_eq!(
        launched, want,
        "exactly one launch per trigger that was not skipped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_from_zookeeper_across_a_trigger_launches_nothing_after_the_cut() {
    use support::chaos_proxy::ChaosProxy;
    use support::processes::{Appliance, base_args, framework_state};
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    // Each run ends 1 s after TASK_RUNNING: every trigger launches.
    tb.set_task_exit("report.", None, Duration::from_secs(1), 0);
    // a reaches ZooKeeper through a proxy the test cuts.
    let proxy = ChaosProxy::start(zk.addr()).await;
    let a = Appliance::spawn(
        "a",
        &base_args(&proxy.addr().to_string(), &tb.url(), "jobs-cut"),
    );
    a.wait_state("a leads", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    let b = Appliance::spawn("b", &base_args(&zk.connect_string(), &tb.url(), "jobs-cut"));
    b.wait_state("b follows", WAIT, |s| framework_state(s) == "standby")
        .await;
    let (status, body) = a
        .send(
            reqwest::Method::PUT,
            "/api/v1/jobs/report",
            json!({"name": "report", "command": "sleep 1", "cpus": 0.1, "mem": 32,
                   "schedule": {"cron": "*/3 * * * * *", "starting_deadline": "20s",
                                "concurrency": "forbid"},
                   "history": 100}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let succeeded = |v: &Value| {
        v["runs"].as_array().map_or(0, |r| {
            r.iter().filter(|r| r["state"] == "succeeded").count()
        })
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while report_view(&a).await.map_or(0, |v| succeeded(&v)) < 2 {
        assert!(tokio::time::Instant::now() < deadline, "a ran nothing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // a's stream: the one its SUBSCRIBE opened.
    let a_stream = tb
        .calls()
        .iter()
        .find(|c| c.call_type == "SUBSCRIBE")
        .and_then(|c| c.stream_id.clone())
        .expect("a subscribed");
    // Cut a from ZooKeeper for three sessions (2 s each): b leads once a's
    // session expired, and at least one trigger passes during the cut.
    let cut_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    proxy.break_link();
    b.wait_state("b leads", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    tokio::time::sleep(
        Duration::from_secs(6).saturating_sub(Duration::from_secs_f64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
                - cut_at,
        )),
    )
    .await;
    proxy.restore();
    a.wait_state("a follows again", WAIT, |s| framework_state(s) == "standby")
        .await;
    let before = report_view(&b).await.unwrap()["runs"]
        .as_array()
        .map_or(0, Vec::len);
    let _ = same_on_every_replica(&[&a, &b], before + 2).await;
    let (status, body) = b.post("/api/v1/jobs/report/disable", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let deadline = tokio::time::Instant::now() + WAIT;
    while report_view(&b)
        .await
        .is_none_or(|v| v["active_runs"] != 0 || !v["next_run_at"].is_null())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "b's runs never ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = same_on_every_replica(&[&a, &b], before + 2).await;
    same_tasks_on_every_replica(&[&a, &b]).await;
    // No launch on a's stream after the cut.
    let late: Vec<String> = tb
        .calls()
        .iter()
        .filter(|c| c.at >= cut_at && c.stream_id.as_deref() == Some(a_stream.as_str()))
        .flat_map(|c| c.launched_task_ids())
        .collect();
    assert!(late.is_empty(), "the deposed leader launched {late:?}");
    // A trigger of the cut has its run, launched by b.
    let in_cut: Vec<&Value> = last["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            RunId::scheduled_at(r["run_id"].as_str().unwrap_or_default())
                .is_some_and(|t| (t as f64) > cut_at && (t as f64) < cut_at + 6.0)
        })
        .collect();
    assert!(
        in_cut.iter().any(|r| r["state"] == "succeeded"),
        "a trigger during the cut ran: {last:#}"
    );
    // One launch per run, every run launched (or skipped, never twice).
    let mut launched: Vec<String> = launches(&tb).into_iter().map(|(_, t)| t).collect();
    let mut want: Vec<String> = Vec::new();
    for r in last["runs"].as_array().unwrap() {
        let id = r["run_id"].as_str().unwrap();
        match r["state"].as_str().unwrap() {
            "succeeded" => want.push(format!("report.{id}.1")),
            "skipped" => {}
            other => panic!("run {id} is {other}: {last:#}"),
        }
    }
    launched.sort();
    want.sort();
    assert_eq!(launched, want, "exactly one launch per run: {last:#}");
}

/// A `forbid` job whose run ends while no leader listens: the next
/// leader does not skip the next trigger for concurrency with a run it
/// only knows as running from ZooKeeper (`docs/jobs.md`, `concurrency`:
/// the trigger waits for the master's word on the running runs' tasks,
/// within `starting_deadline`; `machine::jobs`'s `unheard_run`). The
/// leader process is SIGKILLed as soon as a run's task is RUNNING; the
/// task ends a second later, before the next trigger, and the master
/// keeps its TASK_FINISHED for the next subscription (its status update
/// retry; the next leader's reconciliations are lost). The first trigger
/// after that run launches; each launch is one run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbid_after_a_run_ended_while_no_leader_listened_launches_the_next_trigger() {
    use support::processes::framework_state;
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    tb.set_task_exit("report.", None, Duration::from_secs(1), 0);
    let (a, mut standbys) = forbid_job(&zk, &tb, "jobs-unheard", 1, "sleep 1").await;
    let b = standbys.remove(0);
    // A run whose task is RUNNING at the master: the leader dies at once.
    let deadline = tokio::time::Instant::now() + WAIT;
    let ran = loop {
        let running = tb
            .tasks()
            .into_iter()
            .find(|t| {
                !t.completed
                    && t.task_id.starts_with("report.")
                    && t.state.as_str_name() == "TASK_RUNNING"
            })
            .map(|t| t.task_id);
        if let Some(task) = running {
            // The next leader's reconciliations are lost: the master's
            // word on the run's task comes from its status update retry
            // alone, seconds after the next leader's first tick.
            tb.drop_calls("RECONCILE", 20)
                .expect("RECONCILE is losable");
            a.signal(libc::SIGKILL);
            break task;
        }
        assert!(tokio::time::Instant::now() < deadline, "no run RUNNING");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let run_id = ran
        .split('.')
        .nth(1)
        .expect("report.<run>.<attempt>")
        .to_string();
    let at = RunId::scheduled_at(&run_id).expect("a scheduled run") as f64;
    println!("leader SIGKILLed with {ran} RUNNING");
    b.wait_state("b leads", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    // Two triggers after that run, decided by b.
    let deadline = tokio::time::Instant::now() + WAIT;
    let runs = loop {
        let view = report_view(&b).await.unwrap_or(Value::Null);
        let mut runs: Vec<Value> = view["runs"].as_array().cloned().unwrap_or_default();
        runs.retain(|r| r["trigger"]["at"].as_f64().is_some_and(|t| t > at));
        runs.sort_by(|x, y| {
            x["trigger"]["at"]
                .as_f64()
                .partial_cmp(&y["trigger"]["at"].as_f64())
                .unwrap()
        });
        if runs.len() >= 2 {
            break runs;
        }
        assert!(tokio::time::Instant::now() < deadline, "{view:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for r in &runs {
        println!("run {} {} {}", r["run_id"], r["state"], r["reason"]);
    }
    assert_ne!(
        runs[0]["state"], "skipped",
        "the first trigger after {run_id} (whose task ended 1 s after RUNNING) was skipped: \
         {runs:#?}"
    );
    let launched: Vec<String> = launches(&tb).into_iter().map(|(_, t)| t).collect();
    let mut once = launched.clone();
    once.sort();
    once.dedup();
    assert_eq!(
        once.len(),
        launched.len(),
        "a task launched twice: {launched:?}"
    );
}
