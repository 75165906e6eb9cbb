//! `mesos-appliance ctl` (`docs/cli.md`) as a process, against real
//! `mesos-appliance` replicas on a real ZooKeeper and the testbed master:
//!
//! - services list / show / apply / scale / delete, tables and `--json`,
//!   the audit entries they leave (who and why), a bad token and a bad
//!   spec as clear errors with their exit codes, no replica reachable;
//! - `apply --wait` exits 0 on a completed rollout and 3 with the API's
//!   halt reason for a release whose tasks never become healthy (the
//!   testbed's simulated health checks fail for its fingerprint, as in
//!   `scheduler_rollout`);
//! - `apply --wait` sent to a follower exits 0 although the leader is
//!   killed in the middle of the rollout;
//! - `services restart --wait` (a rolling restart) across a leader kill;
//! - `jobs list / show / run --wait / kill / enable / disable`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use mesos_appliance::testbed::SimulatedHealth;
use serde_json::{Value, json};
use support::cluster::Cluster;
use support::processes::*;

const TOKEN: &str = "ctl-test-token-0123456789abcdef";
const CTL_WAIT: Duration = Duration::from_secs(90);

impl Cluster {
    /// A replica's flags: no services, the admin token `ci:TOKEN`.
    fn ctl_args(&self, deployment: &str) -> Vec<String> {
        let tokens = self.dir.path().join("tokens");
        std::fs::write(&tokens, format!("ci:{TOKEN}\n")).unwrap();
        let mut args = base_args(&self.zk.connect_string(), &self.tb.url(), "ctl");
        args.extend([
            "--admin-token-file".into(),
            tokens.display().to_string(),
            "--deployment-id".into(),
            deployment.into(),
        ]);
        args
    }

    fn spec_file(&self, name: &str, spec: &Value) -> PathBuf {
        services_file(self.dir.path(), name, spec)
    }
}

/// `web` with two instances of `command`, a command health check every
/// second, `min_healthy` and a 6 s upgrade deadline.
fn web(command: &str, min_healthy: &str) -> Value {
    json!({"name": "web", "command": command, "cpus": 0.1, "mem": 32, "instances": 2,
        "restart_backoff": "1s", "restart_backoff_max": "4s", "kill_grace_period": "1s",
        "health_check": {"type": "command", "command": "true", "delay": "0s",
            "interval": "1s", "timeout": "1s", "grace_period": "1s",
            "consecutive_failures": 3},
        "upgrade": {"min_healthy": min_healthy, "deadline": "6s"}})
}

fn ctl_command(urls: &str, token: &str, args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesos-appliance"));
    c.arg("ctl")
        .args(["--url", urls])
        .args(args)
        .env("MESOS_APPLIANCE_TOKEN", token)
        .env_remove("MESOS_APPLIANCE_URL")
        .env_remove("MESOS_APPLIANCE_TOKEN_FILE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    c
}

/// Runs `mesos-appliance ctl --url URLS ARGS` with the token; its output.
async fn ctl(urls: &str, args: &[&str]) -> Output {
    ctl_as(urls, TOKEN, args).await
}

async fn ctl_as(urls: &str, token: &str, args: &[&str]) -> Output {
    let run = ctl_command(urls, token, args).output();
    tokio::time::timeout(CTL_WAIT + Duration::from_secs(30), run)
        .await
        .unwrap_or_else(|_| panic!("ctl {args:?} did not end"))
        .expect("run ctl")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts `o` exited with `code`; shows its output otherwise.
fn exits(o: &Output, code: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        stdout(o),
        stderr(o)
    );
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Polls `ctl ARGS --json` until `pred` holds.
async fn ctl_until(url: &str, args: &[&str], what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut all = args.to_vec();
        all.push("--json");
        let o = ctl(url, &all).await;
        if o.status.success() {
            let v = json_of(&o);
            if pred(&v) {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {}\n{}",
            stdout(&o),
            stderr(&o)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn running(tasks: &Value) -> usize {
    tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "TASK_RUNNING")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_are_listed_shown_applied_scaled_and_deleted() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("subscribed", WAIT, |st| framework_state(st) == "subscribed")
        .await;
    let url = a.url.as_str();

    // Create, and wait until both instances are healthy.
    let file = s.spec_file("web.json", &web("sleep 1000", "1s"));
    let o = ctl(
        url,
        &[
            "services",
            "apply",
            "-f",
            path(&file),
            "--wait",
            "--why",
            "first release",
        ],
    )
    .await;
    exits(&o, 0, "apply --wait of a new service");
    assert!(stdout(&o).contains("service web created"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("service web: 2/2 running, 2 healthy: rollout complete"),
        "{}",
        stdout(&o)
    );

    // Tables by default, the API's JSON with --json.
    let o = ctl(url, &["services", "list"]).await;
    exits(&o, 0, "services list");
    let table = stdout(&o);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("NAME") && lines[0].contains("ROLLOUT"),
        "{table}"
    );
    assert!(
        lines[1].contains("web") && lines[1].contains("sleep 1000"),
        "{table}"
    );
    let o = ctl(url, &["services", "list", "--json"]).await;
    exits(&o, 0, "services list --json");
    assert_eq!(json_of(&o)["services"][0]["name"], "web");
    let o = ctl(url, &["services", "show", "web", "--json"]).await;
    assert_eq!(json_of(&o)["spec"]["instances"], 2);
    let o = ctl(url, &["services", "show", "web"]).await;
    assert!(
        stdout(&o).contains("2 desired, 2 running"),
        "{}",
        stdout(&o)
    );
    let o = ctl(url, &["tasks", "--service", "web"]).await;
    exits(&o, 0, "tasks");
    assert_eq!(
        stdout(&o).matches("TASK_RUNNING").count(),
        2,
        "{}",
        stdout(&o)
    );

    // Scale to 3: the stored spec with a new count.
    let o = ctl(
        url,
        &["services", "scale", "web", "3", "--why", "more load"],
    )
    .await;
    exits(&o, 0, "scale");
    assert!(
        stdout(&o).contains("service web replaced"),
        "{}",
        stdout(&o)
    );
    ctl_until(url, &["tasks", "--service", "web"], "three running", |v| {
        running(v) == 3
    })
    .await;

    // Errors: a bad spec names its field, a bad token says so; both exit 1
    // and print no token.
    let bad = s.spec_file(
        "bad.json",
        &json!({"name": "bad", "command": "x", "cpus": 0, "mem": 32, "instances": 1}),
    );
    let o = ctl(url, &["services", "apply", "-f", path(&bad)]).await;
    exits(&o, 1, "an invalid spec");
    assert!(
        stderr(&o).starts_with("error: Invalid request: "),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("\n  cpus: "), "{}", stderr(&o));
    let o = ctl_as(url, "wrong-token", &["services", "delete", "web"]).await;
    exits(&o, 1, "a wrong token");
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    assert!(stderr(&o).contains("token"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("wrong-token") && !stderr(&o).contains(TOKEN));
    // A spec file that is not JSON: usage, nothing sent.
    let junk = s.dir.path().join("junk.json");
    std::fs::write(&junk, "{").unwrap();
    let o = ctl(url, &["services", "apply", "-f", path(&junk)]).await;
    exits(&o, 2, "a spec file that is not JSON");

    // The audit trail says who and why.
    let o = ctl(url, &["audit", "--json", "--action", "service.put"]).await;
    exits(&o, 0, "audit");
    let entries = json_of(&o)["entries"].as_array().unwrap().clone();
    let reasons: Vec<&str> = entries
        .iter()
        .filter(|e| e["ok"] == true)
        .map(|e| e["reason"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(reasons, ["more load", "first release"], "{entries:?}");
    assert!(entries.iter().all(|e| e["who"] == "ci"), "{entries:?}");
    let o = ctl(url, &["audit"]).await;
    assert!(stdout(&o).contains("service.put"), "{}", stdout(&o));

    // Delete: gone from the list; deleting again is the API's 404.
    let o = ctl(url, &["services", "delete", "web", "--why", "done"]).await;
    exits(&o, 0, "delete");
    assert_eq!(stdout(&o).trim(), "service web deleted");
    let o = ctl(url, &["services", "list", "--json"]).await;
    assert_eq!(json_of(&o)["services"], json!([]));
    let o = ctl(url, &["services", "delete", "web"]).await;
    exits(&o, 1, "deleting a deleted service");
    assert!(
        stderr(&o).to_lowercase().starts_with("error: not found"),
        "{}",
        stderr(&o)
    );

    // Nobody there: exit 4 within the timeout.
    let nobody = format!("http://127.0.0.1:{}", support::zookeeper::free_port());
    let started = Instant::now();
    let o = ctl(&nobody, &["services", "list", "--timeout", "1s"]).await;
    exits(&o, 4, "no replica");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(stderr(&o).contains("no replica answered"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_wait_exits_with_the_halt_reason_when_the_release_never_becomes_healthy() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("subscribed", WAIT, |st| framework_state(st) == "subscribed")
        .await;
    let old = s.spec_file("old.json", &web("sleep 1000", "1s"));
    let o = ctl(&a.url, &["services", "apply", "-f", path(&old), "--wait"]).await;
    exits(&o, 0, "the first release");

    // Every task of the new release fails its checks.
    let broken = web("sleep 2000", "1s");
    let fingerprint = support::appliance::services(json!([broken.clone()]))
        .remove(0)
        .fingerprint();
    s.tb.set_health(
        "web.",
        Some(("appliance.fingerprint", fingerprint.as_str())),
        SimulatedHealth::Unhealthy,
    );
    let file = s.spec_file("broken.json", &broken);
    let o = ctl(
        &a.url,
        &[
            "services",
            "apply",
            "-f",
            path(&file),
            "--wait",
            "--timeout",
            "60s",
        ],
    )
    .await;
    exits(&o, 3, "a release that never becomes healthy");
    let err = stderr(&o);
    assert!(
        err.contains("error: the rollout of service web halted: ") && err.contains("instance(s) 0"),
        "{err}"
    );
    // The old instance still runs: the halt kept it.
    let o = ctl(&a.url, &["services", "show", "web"]).await;
    assert!(stdout(&o).contains("Halted:"), "{}", stdout(&o));
}

/// Spawns `ctl services apply -f FILE --wait` against `url`; waits until
/// the leader `a` shows the rollout of `command` under way.
async fn apply_waiting(a: &Appliance, file: &Path, command: &str) -> tokio::process::Child {
    let child = ctl_command(
        &a.url,
        TOKEN,
        &[
            "services",
            "apply",
            "-f",
            path(file),
            "--wait",
            "--timeout",
            "80s",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn ctl");
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some((200, row)) = a.get("/api/v1/services/web").await
            && row["rollout"].is_object()
            && row["spec"]["command"] == command
        {
            return child;
        }
        assert!(Instant::now() < deadline, "no rollout of {command} began");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The waiting `ctl` ends within 40 s with exit 3 and `text` on stderr.
async fn ends_gone(waiting: tokio::process::Child, what: &str, text: &str) {
    let started = Instant::now();
    let o = tokio::time::timeout(CTL_WAIT, waiting.wait_with_output())
        .await
        .expect("ctl ends")
        .expect("ctl output");
    exits(&o, 3, what);
    assert!(stderr(&o).contains(text), "{}", stderr(&o));
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
}

/// `apply --wait` follows its own change only: a later change of the
/// service (whose rollout may halt) or its deletion ends the wait at once
/// with exit 3 and what happened — never a wait until `--timeout`, never
/// somebody else's halt reported as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_wait_ends_when_its_change_is_replaced_or_the_service_deleted() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("subscribed", WAIT, |st| framework_state(st) == "subscribed")
        .await;
    let old = s.spec_file("old.json", &web("sleep 1000", "1s"));
    let o = ctl(&a.url, &["services", "apply", "-f", path(&old), "--wait"]).await;
    exits(&o, 0, "the first release");

    // A slow release (3 s healthy per instance), then another change.
    let slow = s.spec_file("slow.json", &web("sleep 2000", "3s"));
    let waiting = apply_waiting(&a, &slow, "sleep 2000").await;
    let other = s.spec_file("other.json", &web("sleep 3000", "3s"));
    let o = ctl(&a.url, &["services", "apply", "-f", path(&other)]).await;
    exits(&o, 0, "the later change");
    ends_gone(
        waiting,
        "apply --wait whose change was replaced",
        "changed again by another request",
    )
    .await;

    // The same wait, and the service is deleted under it.
    let last = s.spec_file("last.json", &web("sleep 4000", "3s"));
    let waiting = apply_waiting(&a, &last, "sleep 4000").await;
    let o = ctl(&a.url, &["services", "delete", "web", "--why", "gone"]).await;
    exits(&o, 0, "delete");
    ends_gone(
        waiting,
        "apply --wait whose service was deleted",
        "service web was deleted",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_wait_on_a_follower_survives_the_leader_killed_mid_rollout() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("a subscribed", WAIT, |st| {
        framework_state(st) == "subscribed"
    })
    .await;
    let b = Appliance::spawn("b", &s.ctl_args("d1"));
    b.wait_state("b follows a", WAIT, |st| {
        st["leadership"]["role"] == "follower" && st["leadership"]["leader_url"] == a.url.as_str()
    })
    .await;
    let old = s.spec_file("old.json", &web("sleep 1000", "1s"));
    let o = ctl(&b.url, &["services", "apply", "-f", path(&old), "--wait"]).await;
    exits(&o, 0, "the first release, through the follower");

    // A release that takes a while: each replacement must stay healthy
    // for 3 s before the next instance is replaced.
    let new = s.spec_file("new.json", &web("sleep 2000", "3s"));
    let child = ctl_command(
        &b.url,
        TOKEN,
        &[
            "services",
            "apply",
            "-f",
            path(&new),
            "--wait",
            "--timeout",
            "80s",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn ctl");
    // Kill the leader once the rollout is under way.
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some((200, row)) = a.get("/api/v1/services/web").await
            && row["rollout"].is_object()
            && row["spec"]["command"] == "sleep 2000"
        {
            break;
        }
        assert!(Instant::now() < deadline, "no rollout began on a");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    a.signal(libc::SIGKILL);
    let o = tokio::time::timeout(CTL_WAIT, child.wait_with_output())
        .await
        .expect("ctl ends")
        .expect("ctl output");
    exits(&o, 0, "apply --wait through the leader's death");
    assert!(
        stdout(&o).contains("service web: 2/2 running, 2 healthy: rollout complete"),
        "{}",
        stdout(&o)
    );
    let state = b
        .wait_state("b leads", WAIT, |st| st["leadership"]["role"] == "leader")
        .await;
    assert_eq!(framework_state(&state), "subscribed");
    let row = b.get("/api/v1/services/web").await.unwrap().1;
    assert_eq!(row["spec"]["command"], "sleep 2000");
    assert!(row["rollout"].is_null(), "{row}");
}

/// A rolling restart (`POST /api/v1/services/{name}/restart`, through
/// `ctl services restart --wait` on a follower): the leader is SIGKILLed
/// mid-restart, the new leader continues it from the restart generation
/// stored in ZooKeeper, and every task is replaced exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_wait_on_a_follower_replaces_every_task_once_across_a_leader_kill() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("a subscribed", WAIT, |st| {
        framework_state(st) == "subscribed"
    })
    .await;
    let b = Appliance::spawn("b", &s.ctl_args("d1"));
    b.wait_state("b follows a", WAIT, |st| {
        st["leadership"]["role"] == "follower" && st["leadership"]["leader_url"] == a.url.as_str()
    })
    .await;
    // Each replacement must stay healthy for 3 s before the next goes.
    let file = s.spec_file("web.json", &web("sleep 1000", "3s"));
    let o = ctl(&b.url, &["services", "apply", "-f", path(&file), "--wait"]).await;
    exits(&o, 0, "the first release");
    let web_tasks = || -> std::collections::BTreeSet<String> {
        s.tb.tasks()
            .into_iter()
            .chain(s.tb.completed_tasks())
            .map(|t| t.task_id)
            .filter(|id| id.starts_with("web."))
            .collect()
    };
    let before = web_tasks();
    assert_eq!(before.len(), 2, "{before:?}");

    let child = ctl_command(
        &b.url,
        TOKEN,
        &[
            "services",
            "restart",
            "web",
            "--why",
            "rotate the certificates",
            "--wait",
            "--timeout",
            "80s",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn ctl");
    // Kill the leader once the restart's rollout is under way.
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some((200, row)) = a.get("/api/v1/services/web").await
            && row["rollout"].is_object()
            && row["restart_generation"] == 1
        {
            break;
        }
        assert!(Instant::now() < deadline, "no restart began on a");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    a.signal(libc::SIGKILL);
    let o = tokio::time::timeout(CTL_WAIT, child.wait_with_output())
        .await
        .expect("ctl ends")
        .expect("ctl output");
    exits(&o, 0, "restart --wait through the leader's death");
    assert!(
        stdout(&o).contains("service web: 2/2 running, 2 healthy: rollout complete"),
        "{}",
        stdout(&o)
    );
    b.wait_state("b leads", WAIT, |st| st["leadership"]["role"] == "leader")
        .await;
    let row = b.get("/api/v1/services/web").await.unwrap().1;
    assert_eq!(row["restart_generation"], 1, "{row}");
    assert!(row["rollout"].is_null(), "{row}");
    assert_eq!(
        row["spec"]["command"], "sleep 1000",
        "the spec is unchanged"
    );
    assert!(row["spec"].get("restart_generation").is_none(), "{row}");
    // Exactly one new task per instance, both running; the old ones ended.
    let after = web_tasks();
    let new: Vec<&String> = after.difference(&before).collect();
    assert_eq!(new.len(), 2, "replaced exactly once: {after:?}");
    let running: std::collections::BTreeSet<String> =
        s.tb.tasks()
            .into_iter()
            .filter(|t| t.task_id.starts_with("web.") && t.state.as_str_name() == "TASK_RUNNING")
            .map(|t| t.task_id)
            .collect();
    assert_eq!(
        running.iter().collect::<Vec<_>>(),
        new,
        "the new tasks run, the old ones do not"
    );
    // Audited with who and why (written by a, read from b).
    let o = ctl(&b.url, &["audit", "--json", "--action", "restart"]).await;
    exits(&o, 0, "audit");
    let audit = json_of(&o);
    let entry = &audit["entries"][0];
    assert_eq!(entry["who"], "ci", "{audit}");
    assert_eq!(entry["reason"], "rotate the certificates", "{audit}");
}

/// `PUT /api/v1/jobs/{name}` with the admin token.
async fn put_job(url: &str, job: &Value) {
    let name = job["name"].as_str().unwrap();
    let response = reqwest::Client::new()
        .put(format!("{url}/api/v1/jobs/{name}"))
        .bearer_auth(TOKEN)
        .json(job)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .expect("PUT sent");
    assert!(response.status().is_success(), "{}", response.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_shown_run_waited_for_killed_enabled_and_disabled() {
    let s = Cluster::start().await;
    // `quick` runs end 1 s after TASK_RUNNING with exit status 0, `flaky`
    // runs with 3; `slow` runs go on until killed.
    s.tb.set_task_exit("quick.", None, Duration::from_secs(1), 0);
    s.tb.set_task_exit("flaky.", None, Duration::from_secs(1), 3);
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("subscribed", WAIT, |st| framework_state(st) == "subscribed")
        .await;
    let url = a.url.as_str();
    for name in ["quick", "flaky", "slow"] {
        put_job(
            url,
            &json!({"name": name, "command": "sleep 1", "cpus": 0.1, "mem": 16,
                "schedule": {"cron": "0 0 1 1 *"}}),
        )
        .await;
    }
    let list = ctl_until(url, &["jobs", "list"], "three jobs", |v| {
        v["jobs"].as_array().is_some_and(|j| j.len() == 3)
    })
    .await;
    assert_eq!(list["jobs"][0]["enabled"], true, "{list}");
    let o = ctl(url, &["jobs", "list"]).await;
    exits(&o, 0, "jobs list");
    let table = stdout(&o);
    assert!(
        table.contains("NAME") && table.contains("quick") && table.contains("0 0 1 1 *"),
        "{table}"
    );

    // Disable and enable, audited.
    let o = ctl(url, &["jobs", "disable", "quick", "--why", "freeze"]).await;
    exits(&o, 0, "disable");
    assert_eq!(stdout(&o).trim(), "job quick disabled");
    let o = ctl(url, &["jobs", "show", "quick", "--json"]).await;
    assert_eq!(json_of(&o)["enabled"], false);
    let o = ctl(url, &["jobs", "enable", "quick"]).await;
    exits(&o, 0, "enable");
    assert_eq!(stdout(&o).trim(), "job quick enabled");

    // run --wait: 0 for a run that succeeds, 3 with the state otherwise.
    let o = ctl(url, &["jobs", "run", "quick", "--wait", "--why", "now"]).await;
    exits(&o, 0, "a run that succeeds");
    assert!(stdout(&o).contains("succeeded"), "{}", stdout(&o));
    let o = ctl(url, &["jobs", "run", "flaky", "--wait"]).await;
    exits(&o, 3, "a run that fails");
    assert!(stderr(&o).contains("ended failed"), "{}", stderr(&o));

    // kill: the run started by `run` ends killed.
    let o = ctl(url, &["jobs", "run", "slow", "--json"]).await;
    exits(&o, 0, "run slow");
    let run_id = json_of(&o)["run_id"].as_str().unwrap().to_string();
    ctl_until(url, &["jobs", "show", "slow"], "slow running", |v| {
        v["runs"][0]["state"] == "running"
    })
    .await;
    let o = ctl(url, &["jobs", "kill", "slow", &run_id, "--why", "enough"]).await;
    exits(&o, 0, "kill");
    assert!(
        stdout(&o).contains(&format!("job slow run {run_id} being killed")),
        "{}",
        stdout(&o)
    );
    ctl_until(url, &["jobs", "show", "slow"], "slow killed", |v| {
        v["runs"][0]["state"] == "killed"
    })
    .await;
    let o = ctl(url, &["jobs", "show", "slow"]).await;
    exits(&o, 0, "show");
    let shown = stdout(&o);
    assert!(
        shown.contains(&run_id) && shown.contains("killed"),
        "{shown}"
    );
    // An unknown job is the API's 404, exit 1.
    let o = ctl(url, &["jobs", "show", "nope"]).await;
    exits(&o, 1, "unknown job");
}

/// `PUT /api/v1/services/web` with the admin token and, when given, an
/// `If-Match` header: status and JSON answer.
async fn put_web(url: &str, spec: &Value, if_match: Option<&str>) -> (u16, Value) {
    let mut request = support::mesos::client()
        .put(format!("{url}/api/v1/services/web"))
        .bearer_auth(TOKEN)
        .json(spec)
        .timeout(Duration::from_secs(15));
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    let response = request.send().await.expect("PUT sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET /api/v1/services/web`: the body and the `ETag` header.
async fn get_web(url: &str) -> (Value, String) {
    let response = support::mesos::client()
        .get(format!("{url}/api/v1/services/web"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("GET sent");
    let etag = response
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (response.json().await.unwrap_or(Value::Null), etag)
}

/// A change made on a spec read earlier never undoes a change made since
/// (the fresh-user trial's fault: `services scale` read a follower's older
/// spec during a failover and put it back through the new leader, undoing
/// an acknowledged change of `env`). The API's `If-Match` refuses it with
/// 412 and writes nothing; `ctl services scale` sends the version it read,
/// so it keeps every other field of the newest spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_on_an_older_spec_never_undoes_a_newer_one() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.ctl_args("d1"));
    a.wait_state("subscribed", WAIT, |st| framework_state(st) == "subscribed")
        .await;
    let url = a.url.as_str();
    let mut spec = web("sleep 1000", "1s");
    spec["env"] = json!({"V": "2"});
    assert_eq!(put_web(url, &spec, None).await.0, 201);

    // The version read, in the body and as the ETag.
    let (row, etag) = get_web(url).await;
    let old = row["version"].as_str().expect("a version").to_string();
    assert_eq!(etag, format!("\"{old}\""));

    // Someone's change (V=3), acknowledged.
    spec["env"] = json!({"V": "3"});
    assert_eq!(put_web(url, &spec, None).await.0, 200);

    // A change made on the older read: 412, nothing written.
    let mut stale = spec.clone();
    stale["env"] = json!({"V": "2"});
    stale["instances"] = json!(6);
    let (status, problem) = put_web(url, &stale, Some(&format!("\"{old}\""))).await;
    assert_eq!(status, 412, "{problem}");
    assert!(
        problem["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("precondition-failed")),
        "{problem}"
    );
    let (row, _) = get_web(url).await;
    assert_eq!(row["spec"]["env"]["V"], "3", "{row}");
    assert_eq!(row["spec"]["instances"], 2, "{row}");
    // A list without the stored version, or the stored version as a weak
    // tag (If-Match compares strongly, RFC 9110 §13.1.1): 412 too; an
    // unquoted version is malformed: 400, not 412.
    let (_, now) = get_web(url).await;
    for stale_tag in ["\"a\", \"b\"".to_string(), format!("W/{now}")] {
        assert_eq!(
            put_web(url, &stale, Some(&stale_tag)).await.0,
            412,
            "{stale_tag}"
        );
    }
    let unquoted = now.trim_matches('"').to_string();
    assert_eq!(
        put_web(url, &stale, Some(&unquoted)).await.0,
        400,
        "{unquoted}"
    );
    let (row, _) = get_web(url).await;
    assert_eq!(row["spec"]["instances"], 2, "nothing written: {row}");
    // A list holding the stored version replaces the service.
    let mut listed = spec.clone();
    listed["instances"] = json!(1);
    let tags = format!("\"a\", {now}");
    assert_eq!(put_web(url, &listed, Some(&tags)).await.0, 200, "{tags}");

    // `ctl services scale` reads, changes and puts on the version read.
    let o = ctl(url, &["services", "scale", "web", "3"]).await;
    exits(&o, 0, "scale");
    let (row, _) = get_web(url).await;
    assert_eq!(row["spec"]["instances"], 3, "{row}");
    assert_eq!(row["spec"]["env"]["V"], "3", "the newest env kept: {row}");

    // `If-Match: *` replaces whatever is stored, and never creates. On a
    // service that does not exist, `*` and a tag are both false: 412, not
    // 404 (RFC 9110 §13.1.1; without the header the PUT would create it).
    assert_eq!(put_web(url, &spec, Some("*")).await.0, 200);
    let (row, _) = get_web(url).await;
    assert_eq!(row["spec"]["instances"], 2, "{row}");
    let mut other = spec.clone();
    other["name"] = json!("api");
    for tag in ["*", "\"x\""] {
        let response = support::mesos::client()
            .put(format!("{url}/api/v1/services/api"))
            .bearer_auth(TOKEN)
            .header("if-match", tag)
            .json(&other)
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .expect("PUT sent");
        assert_eq!(response.status().as_u16(), 412, "{tag}");
        let problem: Value = response.json().await.unwrap_or(Value::Null);
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains("does not exist")),
            "{tag}: {problem}"
        );
    }
    let missing = support::mesos::client()
        .get(format!("{url}/api/v1/services/api"))
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .expect("GET sent");
    assert_eq!(missing.status().as_u16(), 404, "nothing was created");

    // A DELETE made on an older read: 412 and the service stays; on the
    // version stored it deletes; on a service that is gone it is 404, as
    // without the header (RFC 9110 §13.2.1).
    let (_, now) = get_web(url).await;
    assert_eq!(put_web(url, &listed, None).await.0, 200);
    let (status, problem) = delete_web(url, Some(&now)).await;
    assert_eq!(status, 412, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("nothing was deleted")),
        "{problem}"
    );
    let (row, now) = get_web(url).await;
    assert_eq!(row["spec"]["instances"], 1, "not deleted: {row}");
    assert_eq!(delete_web(url, Some(&now)).await.0, 200);
    assert_eq!(delete_web(url, Some("*")).await.0, 404);
}

/// `DELETE /api/v1/services/web`, with `if_match` as `If-Match`: status
/// and body.
async fn delete_web(url: &str, if_match: Option<&str>) -> (u16, Value) {
    let mut request = support::mesos::client()
        .delete(format!("{url}/api/v1/services/web"))
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(15));
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    let response = request.send().await.expect("DELETE sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}
