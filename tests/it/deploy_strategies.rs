//! The `hard` and `upgrade` strategies with real processes, ZooKeeper and the
//! testbed: `hard` fences the old deployment, tears its framework down once
//! and registers afresh (also when Mesos already removed it); `upgrade`
//! fences the old deployment, keeps the framework ID and replaces changed
//! tasks one at a time. And a leader SIGKILLed in the middle of launching
//! 50 tasks loses and duplicates nothing.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::{Value, json};
use support::processes::*;
use support::zookeeper::ZkServer;

struct Setup {
    zk: ZkServer,
    tb: Testbed,
    dir: tempfile::TempDir,
}

async fn setup(agents: usize) -> Setup {
    setup_with(TestbedConfig::for_tests(agents)).await
}

async fn setup_with(testbed: TestbedConfig) -> Setup {
    support::mesos::init();
    Setup {
        zk: ZkServer::start(),
        tb: Testbed::start(testbed).await.unwrap(),
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Setup {
    fn args(&self, deployment: &str, services: &Value, extra: &[&str]) -> Vec<String> {
        let mut args = base_args(&self.zk.connect_string(), &self.tb.url(), "strategy");
        let file = services_file(self.dir.path(), &format!("{deployment}.json"), services);
        args.extend([
            "--services".into(),
            file.display().to_string(),
            "--deployment-id".into(),
            deployment.into(),
        ]);
        with_flags(args, extra)
    }

    /// When the master recorded each task of `framework_id` TASK_RUNNING
    /// (the status timestamp, from `/master/state`).
    async fn running_since(&self, framework_id: &str) -> BTreeMap<String, f64> {
        let state = support::mesos::master_state(&self.tb.url()).await;
        let mut out = BTreeMap::new();
        for f in state["frameworks"].as_array().into_iter().flatten() {
            if f["id"] != framework_id {
                continue;
            }
            for t in ["tasks", "completed_tasks"]
                .iter()
                .flat_map(|k| f[*k].as_array().cloned().unwrap_or_default())
            {
                let running = t["statuses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|st| st["state"] == "TASK_RUNNING")
                    .and_then(|st| st["timestamp"].as_f64());
                if let (Some(id), Some(at)) = (t["id"].as_str(), running) {
                    out.insert(id.to_string(), at);
                }
            }
        }
        out
    }

    /// Running tasks on the master, per service (from the task ID prefix).
    fn running_per_service(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.tb.tasks() {
            if t.state.as_str_name() == "TASK_RUNNING" {
                let service = t.task_id.split('.').next().unwrap_or_default().to_string();
                out.entry(service).or_default().push(t.task_id);
            }
        }
        out
    }
}

/// One service `web`. Its replacements count as available 1 s after
/// TASK_RUNNING (`upgrade.min_healthy`, default 10 s; the rollout's own
/// rules are tested in scheduler_rollout.rs), so a three-instance upgrade
/// fits in the waits here.
fn web(command: &str, instances: u32) -> Value {
    json!([{"name": "web", "command": command, "cpus": 0.1, "mem": 32, "instances": instances,
            "upgrade": {"min_healthy": "1s"}}])
}

fn running(n: u64) -> impl Fn(&Value) -> bool {
    move |s: &Value| framework_state(s) == "subscribed" && running_count(s) == n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_fences_the_live_deployment_and_registers_a_fresh_framework() {
    let s = setup(2).await;
    let mut a = Appliance::spawn("a", &s.args("d1", &web("v1", 2), &[]));
    let old = framework_id(&a.wait_state("running", WAIT, running(2)).await).unwrap();
    let old_tasks: BTreeSet<String> = s.tb.tasks().into_iter().map(|t| t.task_id).collect();

    let b = Appliance::spawn(
        "b",
        &s.args(
            "d2",
            &web("v1", 2),
            &["--framework-deployment-strategy", "hard"],
        ),
    );
    let status = a.wait_exit(WAIT).await;
    assert_eq!(
        status.code(),
        Some(3),
        "fenced replicas exit with code 3\n{}",
        tail(&a.log(), 20)
    );
    assert!(a.log().contains("fenced"), "{}", tail(&a.log(), 20));
    let state = b
        .wait_state("fresh framework running", WAIT, running(2))
        .await;
    let new = framework_id(&state).unwrap();
    assert_ne!(new, old, "a fresh framework");
    let teardowns: Vec<_> =
        s.tb.calls()
            .into_iter()
            .filter(|c| c.api == "operator" && c.call_type == "TEARDOWN")
            .collect();
    assert_eq!(teardowns.len(), 1, "the old framework is torn down once");
    assert_eq!(teardowns[0].framework_id.as_deref(), Some(old.as_str()));
    assert!(s.tb.frameworks().iter().any(|f| f.id == old && f.completed));
    let now: BTreeSet<String> = s.tb.tasks().into_iter().map(|t| t.task_id).collect();
    assert!(
        now.is_disjoint(&old_tasks),
        "the old framework's tasks died with it"
    );
    assert_eq!(state["deployment"]["teardown_done"], true, "{state}");

    // A restart of the hard deployment does not tear down again.
    drop(b);
    let c = Appliance::spawn(
        "c",
        &s.args(
            "d2",
            &web("v1", 2),
            &["--framework-deployment-strategy", "hard"],
        ),
    );
    let state = c
        .wait_state("same framework adopted", WAIT, running(2))
        .await;
    assert_eq!(framework_id(&state).unwrap(), new);
    let teardowns =
        s.tb.calls()
            .into_iter()
            .filter(|c| c.api == "operator" && c.call_type == "TEARDOWN")
            .count();
    assert_eq!(teardowns, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_against_a_removed_framework_registers_without_entering_removed() {
    let s = setup(1).await;
    let mut a = Appliance::spawn(
        "a",
        &s.args("d1", &web("v1", 1), &["--failover-timeout", "1s"]),
    );
    let old = framework_id(&a.wait_state("running", WAIT, running(1)).await).unwrap();
    a.signal(libc::SIGTERM);
    a.wait_exit(WAIT).await;
    let deadline = std::time::Instant::now() + WAIT;
    while !s.tb.frameworks().iter().any(|f| f.id == old && f.completed) {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b = Appliance::spawn(
        "b",
        &s.args(
            "d2",
            &web("v1", 1),
            &["--framework-deployment-strategy", "hard"],
        ),
    );
    let state = b
        .wait_state("fresh framework running", WAIT, running(1))
        .await;
    assert_ne!(framework_id(&state).unwrap(), old);
    let subscribes: Vec<_> =
        s.tb.scheduler_calls("SUBSCRIBE")
            .into_iter()
            .filter(|c| c.framework_id.as_deref() == Some(old.as_str()))
            .collect();
    assert!(
        subscribes.len() <= 1,
        "the removed ID is not retried in a loop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_keeps_the_framework_and_rolls_changed_tasks_one_at_a_time() {
    // TASK_RUNNING comes a second after the launch, so "the next KILL waits
    // for the previous replacement to run" differs from "… to be launched".
    const LAUNCH_DELAY: Duration = Duration::from_secs(1);
    let s = setup_with(TestbedConfig {
        launch_delay: LAUNCH_DELAY,
        ..TestbedConfig::for_tests(2)
    })
    .await;
    let mut a = Appliance::spawn("a", &s.args("d1", &web("echo v1", 3), &[]));
    let fid = framework_id(&a.wait_state("running", WAIT, running(3)).await).unwrap();
    let old: BTreeSet<String> = s.tb.tasks().into_iter().map(|t| t.task_id).collect();

    let b = Appliance::spawn(
        "b",
        &s.args(
            "d2",
            &web("echo v2", 3),
            &["--framework-deployment-strategy", "upgrade"],
        ),
    );
    assert_eq!(
        a.wait_exit(WAIT).await.code(),
        Some(3),
        "the old deployment is fenced"
    );
    // Watch the master while the upgrade rolls: never more than one of the
    // three instances down.
    let deadline = std::time::Instant::now() + WAIT;
    let mut lowest = 3;
    loop {
        let running = s.running_per_service().remove("web").unwrap_or_default();
        lowest = lowest.min(running.len());
        if running.len() == 3 && running.iter().all(|t| !old.contains(t)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "upgrade did not finish; running {running:?}\n{}",
            tail(&b.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        lowest >= 2,
        "at most one instance down at a time (saw {lowest} running)"
    );
    let state = b.wait_state("subscribed", WAIT, running(3)).await;
    assert_eq!(
        framework_id(&state).unwrap(),
        fid,
        "upgrade keeps the framework ID"
    );
    let kills = s.tb.scheduler_calls("KILL");
    let killed: BTreeSet<String> = kills
        .iter()
        .map(|c| {
            c.call["kill"]["task_id"]["value"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(killed, old, "exactly the old tasks were replaced");
    let launched: Vec<Value> =
        s.tb.scheduler_calls("ACCEPT")
            .iter()
            .filter(|c| c.launched_task_ids().iter().any(|t| !old.contains(t)))
            .flat_map(|c| {
                c.call["accept"]["operations"][0]["launch"]["task_infos"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
    assert_eq!(launched.len(), 3);
    assert!(launched.iter().all(|t| t["command"]["value"] == "echo v2"));
    // One at a time: each KILL comes after the previous replacement's launch
    // and after the master saw that replacement TASK_RUNNING.
    let kill_seq: Vec<u64> = kills.iter().map(|c| c.seq).collect();
    let replacements: Vec<_> =
        s.tb.scheduler_calls("ACCEPT")
            .into_iter()
            .filter(|c| c.launched_task_ids().iter().any(|t| !old.contains(t)))
            .collect();
    let launch_seq: Vec<u64> = replacements.iter().map(|c| c.seq).collect();
    assert!(
        kill_seq[1] > launch_seq[0] && kill_seq[2] > launch_seq[1],
        "kills {kill_seq:?}, launches {launch_seq:?}"
    );
    let running_at = s.running_since(&fid).await;
    for (i, launch) in replacements.iter().enumerate().take(2) {
        let task = &launch.launched_task_ids()[0];
        let since = *running_at
            .get(task)
            .unwrap_or_else(|| panic!("{task} never TASK_RUNNING: {running_at:?}"));
        assert!(
            since - launch.at >= LAUNCH_DELAY.as_secs_f64() * 0.9,
            "{task}: RUNNING {:.3} s after its ACCEPT, expected the launch delay",
            since - launch.at
        );
        assert!(
            kills[i + 1].at >= since,
            "KILL of {} at {:.3} came before replacement {task} ran at {since:.3}",
            kills[i + 1].call["kill"]["task_id"]["value"],
            kills[i + 1].at,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_the_middle_of_launching_fifty_tasks_loses_and_duplicates_nothing() {
    let s = setup(5).await;
    let services = json!([
        {"name": "s0", "command": "x", "cpus": 0.1, "mem": 16, "instances": 10},
        {"name": "s1", "command": "x", "cpus": 0.1, "mem": 16, "instances": 10},
        {"name": "s2", "command": "x", "cpus": 0.1, "mem": 16, "instances": 10},
        {"name": "s3", "command": "x", "cpus": 0.1, "mem": 16, "instances": 10},
        {"name": "s4", "command": "x", "cpus": 0.1, "mem": 16, "instances": 10}
    ]);
    let follower_args = s.args("d1", &services, &[]);
    let a = Appliance::spawn("a", &s.args("d1", &services, &[]));
    // Kill a as soon as its first launch reached the master.
    let deadline = std::time::Instant::now() + WAIT;
    while !s
        .tb
        .scheduler_calls("ACCEPT")
        .iter()
        .any(|c| !c.launched_task_ids().is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no launch\n{}",
            tail(&a.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    a.signal(libc::SIGKILL);
    let running_at_kill: usize = s.running_per_service().values().map(Vec::len).sum();
    let launched_at_kill: usize =
        s.tb.scheduler_calls("ACCEPT")
            .iter()
            .map(|c| c.launched_task_ids().len())
            .sum();
    assert!(
        running_at_kill < 50,
        "killed in the middle of launching ({launched_at_kill} launched, {running_at_kill} running)"
    );
    println!("killed with {launched_at_kill} tasks launched and {running_at_kill} running");
    let b = Appliance::spawn("b", &follower_args);
    b.wait_state("50 running", Duration::from_secs(60), running(50))
        .await;
    let per_service = s.running_per_service();
    for svc in ["s0", "s1", "s2", "s3", "s4"] {
        let tasks = per_service.get(svc).cloned().unwrap_or_default();
        assert_eq!(tasks.len(), 10, "{svc}: {tasks:?}");
        let instances: BTreeSet<&str> =
            tasks.iter().map(|t| t.split('.').nth(1).unwrap()).collect();
        assert_eq!(instances.len(), 10, "{svc}: one task per instance");
    }
    let on_master =
        s.tb.tasks()
            .into_iter()
            .filter(|t| t.state.as_str_name() == "TASK_RUNNING")
            .count();
    assert_eq!(
        on_master, 50,
        "no stray duplicates (running at the kill: {running_at_kill})"
    );
}

/// `(name, command, instances)` of each service the replica runs, from
/// `/api/v1/services`.
async fn services_of(a: &Appliance) -> BTreeSet<(String, String, u64)> {
    let (status, body) = a.get("/api/v1/services").await.expect("services answer");
    assert_eq!(status, 200, "{body}");
    body["services"]
        .as_array()
        .expect("a list of services")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["spec"]["command"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                s["spec"]["instances"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn service_set(list: &[(&str, &str, u64)]) -> BTreeSet<(String, String, u64)> {
    list.iter()
        .map(|(n, c, i)| (n.to_string(), c.to_string(), *i))
        .collect()
}

/// Which `--services` file wins (README, "Deployment strategies"): under
/// `failover` the file only seeds an empty ZooKeeper — a new deployment
/// with another file keeps the stored services; under `upgrade` (and
/// `hard`, see `CoreConfig::replace_services`) the file replaces them,
/// services it does not list included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_file_seeds_under_failover_and_replaces_under_upgrade_and_hard() {
    let s = setup(2).await;
    let first = json!([
        {"name": "web", "command": "echo one", "cpus": 0.1, "mem": 32, "instances": 2},
        {"name": "worker", "command": "work", "cpus": 0.1, "mem": 32, "instances": 1}
    ]);
    let second = json!([
        {"name": "web", "command": "echo two", "cpus": 0.1, "mem": 32, "instances": 1},
        {"name": "batch", "command": "crunch", "cpus": 0.1, "mem": 32, "instances": 1}
    ]);
    let third = json!([
        {"name": "solo", "command": "alone", "cpus": 0.1, "mem": 32, "instances": 1}
    ]);
    let from_first = service_set(&[("web", "echo one", 2), ("worker", "work", 1)]);
    let from_second = service_set(&[("web", "echo two", 1), ("batch", "crunch", 1)]);

    let mut a = Appliance::spawn("a", &s.args("d1", &first, &[]));
    a.wait_state("first running", WAIT, running(3)).await;
    assert_eq!(services_of(&a).await, from_first);
    a.signal(libc::SIGTERM);
    assert!(a.wait_exit(WAIT).await.success());

    // failover, another deployment with another file: ZooKeeper wins.
    let mut b = Appliance::spawn("b", &s.args("d2", &second, &[]));
    b.wait_state("b subscribed", WAIT, |st| {
        framework_state(st) == "subscribed"
    })
    .await;
    assert_eq!(
        services_of(&b).await,
        from_first,
        "under failover the file is ignored when ZooKeeper holds services"
    );
    b.wait_state("b adopted the tasks", WAIT, running(3)).await;
    support::client::holds_for("nothing replaced", Duration::from_secs(2), || {
        s.tb.scheduler_calls("KILL").is_empty()
    })
    .await;
    assert_eq!(services_of(&b).await, from_first);
    b.signal(libc::SIGTERM);
    assert!(b.wait_exit(WAIT).await.success());

    // upgrade: the file replaces the stored services; `worker` goes.
    let mut c = Appliance::spawn(
        "c",
        &s.args(
            "d3",
            &second,
            &["--framework-deployment-strategy", "upgrade"],
        ),
    );
    c.wait_state("c subscribed", WAIT, |st| {
        framework_state(st) == "subscribed"
    })
    .await;
    assert_eq!(services_of(&c).await, from_second);
    // The master converges on the second file: one new `web`, one `batch`.
    let command_of = |task: &str| {
        s.tb.scheduler_calls("ACCEPT")
            .iter()
            .flat_map(|c| {
                c.call["accept"]["operations"][0]["launch"]["task_infos"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .find(|t| t["task_id"]["value"] == task)
            .map(|t| {
                t["command"]["value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let on_master = s.running_per_service();
        let shape: BTreeMap<&str, usize> = on_master
            .iter()
            .map(|(k, v)| (k.as_str(), v.len()))
            .collect();
        if shape == BTreeMap::from([("batch", 1), ("web", 1)])
            && command_of(&on_master["web"][0]).as_deref() == Some("echo two")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "running {on_master:?}\n{}",
            tail(&c.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.signal(libc::SIGTERM);
    assert!(c.wait_exit(WAIT).await.success());

    // hard: a fresh framework with the third file's services only.
    let d = Appliance::spawn(
        "d",
        &s.args("d4", &third, &["--framework-deployment-strategy", "hard"]),
    );
    d.wait_state("third running", WAIT, running(1)).await;
    assert_eq!(services_of(&d).await, service_set(&[("solo", "alone", 1)]));
}

/// Polls `GET path` on `a` until `done` holds for the JSON answer.
async fn wait_json(a: &Appliance, what: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some((200, body)) = a.get(path).await
            && done(&body)
        {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {:?}\n{}",
            a.get(path).await,
            tail(&a.log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `hard` tears the old framework down, its running job attempt with it,
/// and deletes the task records: the new deployment ends that run
/// `failed` (no retry left; naming the hard deployment) and launches its
/// attempt nowhere again (docs/jobs.md, "When the framework goes").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_ends_a_running_job_run_failed_and_launches_it_nowhere_again() {
    let s = setup(1).await;
    let mut a = Appliance::spawn("a", &s.args("d1", &web("v1", 1), &[]));
    a.wait_state("running", WAIT, running(1)).await;
    let job = json!({"command": "sleep 600", "cpus": 0.1, "mem": 32});
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = a
            .send(reqwest::Method::PUT, "/api/v1/jobs/batch", job.clone())
            .await;
        if status == 201 {
            break;
        }
        assert!(
            status == 409 && tokio::time::Instant::now() < deadline,
            "PUT job: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, run) = a.post("/api/v1/jobs/batch/runs", json!({})).await;
    assert_eq!(status, 201, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/jobs/batch/runs/{run_id}");
    let started = wait_json(&a, "run running", &path, |r| r["state"] == "running").await;
    let task_id = started["attempts"][0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();

    let b = Appliance::spawn(
        "b",
        &s.args(
            "d2",
            &web("v1", 1),
            &["--framework-deployment-strategy", "hard"],
        ),
    );
    a.wait_exit(WAIT).await;
    b.wait_state("fresh framework running", WAIT, running(1))
        .await;
    let ended = wait_json(&b, "run ended", &path, |r| r["state"] != "running").await;
    assert_eq!(ended["state"], "failed", "{ended}");
    assert!(
        ended["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("hard"),
        "{ended}"
    );
    // Given time to (wrongly) launch it again, the attempt ran once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let state = support::mesos::master_state(&s.tb.url()).await;
    let launches = ["frameworks", "completed_frameworks"]
        .iter()
        .flat_map(|k| state[*k].as_array().cloned().unwrap_or_default())
        .flat_map(|f| {
            ["tasks", "completed_tasks"]
                .iter()
                .flat_map(|k| f[*k].as_array().cloned().unwrap_or_default())
                .collect::<Vec<_>>()
        })
        .filter(|t| t["id"] == task_id.as_str())
        .count();
    assert_eq!(launches, 1, "{task_id} launched once: {state}");
    let ended = wait_json(&b, "run still ended", &path, |_| true).await;
    assert_eq!(ended["state"], "failed", "{ended}");
}
