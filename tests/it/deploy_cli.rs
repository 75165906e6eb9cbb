//! The binaries at their command lines: bad flag values are refused with
//! exit code 2 and a message naming the flag; start-up failures name the
//! address or directory; a replica that cannot listen never leads; logs
//! written to a file carry no colour codes and name the leading master once;
//! `demo` honours the flags its `--help` lists; the executor answers
//! `--help` and `--version`.

use crate::support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use support::processes::*;
use support::zookeeper::free_port;

const APPLIANCE: &str = env!("CARGO_BIN_EXE_mesos-appliance");
const TESTBED: &str = env!("CARGO_BIN_EXE_mesos-testbed");
const EXECUTOR: &str = env!("CARGO_BIN_EXE_mesos-appliance-executor");

/// Runs `program args…` to completion (it must not need more than a few
/// seconds), output captured.
fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run the binary")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_exit(output: &Output, code: i32, args: &[&str], names: &str) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {text}");
    assert!(text.contains(names), "{args:?}: {names:?} not in {text}");
}

#[test]
fn the_testbed_refuses_bad_flags_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["--zk", "nope"], "--zk"),
        (
            &[
                "--status-update-retry-min",
                "0s",
                "--status-update-retry-max",
                "0s",
            ],
            "--status-update-retry-min",
        ),
        (
            &[
                "--status-update-retry-min",
                "10s",
                "--status-update-retry-max",
                "1s",
            ],
            "--status-update-retry-max",
        ),
        (&["--allocation-interval", "0s"], "--allocation-interval"),
    ];
    for (args, names) in cases {
        assert_exit(
            &run(TESTBED, &[&["--port", "0"], *args].concat()),
            2,
            args,
            names,
        );
    }
}

#[test]
fn testbed_start_failures_name_the_address_or_the_directory() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let args = ["--port", &port];
    assert_exit(
        &run(TESTBED, &args),
        1,
        &args,
        &format!("cannot listen on 127.0.0.1:{port}"),
    );
    let args = [
        "--port",
        "0",
        "--run-executors",
        EXECUTOR,
        "--work-dir",
        "/proc/nope",
    ];
    let output = run(TESTBED, &args);
    assert_exit(&output, 1, &args, "/proc/nope");
    assert!(
        !stderr(&output).contains('\u{1b}'),
        "colour codes: {}",
        stderr(&output)
    );
}

#[test]
fn the_executor_answers_help_and_version() {
    let help = run(EXECUTOR, &["--help"]);
    assert_eq!(help.status.code(), Some(0), "{}", stderr(&help));
    let text = String::from_utf8_lossy(&help.stdout);
    // Every variable the executor reads is documented.
    let config = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/executor/config.rs"),
    )
    .unwrap();
    let config = config.split("#[cfg(test)]").next().unwrap();
    let read = regex::Regex::new(r#"lookup\("([A-Z_]+)"\)|"(MESOS_[A-Z_]+)""#).unwrap();
    let mut names = 0;
    for found in read.captures_iter(config) {
        let name = found.get(1).or(found.get(2)).unwrap().as_str();
        assert!(text.contains(name), "{name} missing from --help:\n{text}");
        names += 1;
    }
    assert!(names >= 10, "only {names} variables found in config.rs");
    let version = run(EXECUTOR, &["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("mesos-appliance-executor {}", env!("CARGO_PKG_VERSION"))
    );
    assert_exit(&run(EXECUTOR, &["--bogus"]), 2, &["--bogus"], "--bogus");
    // Without the agent's environment: the C++ library's message, exit 1.
    let bare = Command::new(EXECUTOR).env_clear().output().unwrap();
    assert_exit(&bare, 1, &[], "Expecting 'MESOS_FRAMEWORK_ID'");
}

#[test]
fn the_appliance_refuses_bad_flag_values() {
    let dead = format!("http://127.0.0.1:{}", free_port());
    // The start-up cases listen on a port this test holds, never on the
    // default 8080: a flag checked only after binding fails here with
    // "cannot listen", whatever else runs on the machine.
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let listen = held.local_addr().expect("its address").to_string();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--decline-refuse-seconds", "NaN"],
            "--decline-refuse-seconds",
        ),
        (&["--decline-refuse-seconds=-5"], "--decline-refuse-seconds"),
        (&["--framework-role", ""], "--framework-role"),
        (&["--framework-role", "a b"], "--framework-role"),
        (&["--framework-name", ""], "--framework-name"),
        (&["--advertised-url", "not a url"], "--advertised-url"),
        (
            &["--upgrade-max-unavailable", "0"],
            "--upgrade-max-unavailable",
        ),
        (&["demo", "--agents", "0"], "--agents"),
        (&["demo", "--master", "http://m:5050"], "--master"),
        (
            &["--zk", "zk://z:2181/x", "demo"],
            "--zk does not apply to demo",
        ),
        // Checked at start-up, before anything is bound or joined.
        (
            &[
                "--master",
                &dead,
                "--listen",
                &listen,
                "--executor-binary",
                "/nonexistent/executor",
            ],
            "/nonexistent/executor",
        ),
        (
            &[
                "--master",
                &dead,
                "--listen",
                &listen,
                "--executor-binary",
                "/",
            ],
            "--executor-binary /: not a file",
        ),
    ];
    for (args, names) in cases {
        assert_exit(&run(APPLIANCE, args), 2, args, names);
    }
    drop(held);
}

#[test]
fn flag_errors_say_each_thing_once_and_never_show_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let empty = empty.to_str().unwrap();
    let short = dir.path().join("short-token");
    std::fs::write(&short, "abc\n").unwrap();
    let short = short.to_str().unwrap();
    let spaced = dir.path().join("spaced-token");
    std::fs::write(&spaced, "# ops\nalice s3cr3t-0123456789abcdef\n").unwrap();
    let spaced = spaced.to_str().unwrap();

    for master in [
        "http://user:hunter2@127.0.0.1:1",
        "http://127.0.0.1:2,https://user:hunter2@127.0.0.1:1",
        "ftp://user:hunter2@127.0.0.1:1",
        "user:hunter2@127.0.0.1:1",
        "http://127.0.0.1:2,user:hunter2@127.0.0.1:1",
    ] {
        for args in [
            &["serve", "--master", master][..],
            &["uninstall", "--master", master],
        ] {
            let out = run(APPLIANCE, args);
            assert_exit(&out, 2, args, "user:***@127.0.0.1:1");
            assert!(
                !stderr(&out).contains("hunter2"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
    let out = run(APPLIANCE, &["--master", "zk://"]);
    assert_exit(
        &out,
        2,
        &["--master", "zk://"],
        "--master: no ZooKeeper host",
    );
    assert_eq!(
        stderr(&out).matches("--master").count(),
        1,
        "{}",
        stderr(&out)
    );

    let args = [
        "--master",
        "http://127.0.0.1:1",
        "--admin-token-file",
        empty,
    ];
    let out = run(APPLIANCE, &args);
    assert_exit(&out, 2, &args, "the admin token file holds no token");
    assert_eq!(stderr(&out).matches(empty).count(), 1, "{}", stderr(&out));

    // A `:` typed as a space: refused at start, naming the line, as `ctl`
    // refuses the same file (never sent as one token with a space).
    let args = [
        "--master",
        "http://127.0.0.1:1",
        "--admin-token-file",
        spaced,
    ];
    let out = run(APPLIANCE, &args);
    assert_exit(&out, 2, &args, "line 2: the token holds white space");
    assert!(!stderr(&out).contains("s3cr3t"), "{}", stderr(&out));

    // A short token is a warning, not an error: this run fails on --master.
    let args = ["--admin-token-file", short, "--master", "zk://"];
    let out = run(APPLIANCE, &args);
    assert_exit(&out, 2, &args, "shorter than 16 characters");
    assert!(stderr(&out).contains("WARN"), "{}", stderr(&out));
}

#[test]
fn durations_are_refused_when_negative_absurd_or_zero_where_zero_means_nothing() {
    // Negative ones are named as such (not as unknown flags); absurd ones
    // are refused before anything starts.
    for (args, says) in [
        (
            &["--failover-timeout", "-5s"][..],
            "negative durations are not allowed",
        ),
        (&["--offer-ttl", "-1"], "negative durations are not allowed"),
        (
            &["--failover-timeout", "500000000000years"],
            "at most 365 days",
        ),
        (
            &["--reconcile-initial-delay", "500000000000years"],
            "at most 365 days",
        ),
        (&["--zk-session-timeout", "0s"], "at least 1s"),
        (&["--offer-ttl", "0s"], "more than 0"),
        (&["--decline-refuse-seconds", "1e12"], "365 days"),
    ] {
        let out = run(APPLIANCE, args);
        assert_exit(&out, 2, args, args[0]);
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_replica_that_cannot_listen_never_leads() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let args = ["--master", &dead, "--listen", &addr];
    let output = run(APPLIANCE, &args);
    assert_exit(&output, 1, &args, &format!("cannot listen on {addr}"));
    assert!(
        !stderr(&output).contains("became leader"),
        "{}",
        stderr(&output)
    );
}

/// `--listen host:0` takes any free port; the replica then advertises
/// that port (Mesos' `webui_url`, the executor's URL, followers'
/// redirects), never port 0, which no client can reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_listening_on_port_0_advertises_the_port_it_got() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("demo.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(APPLIANCE)
        .args(["demo", "--agents", "1", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let printed = regex::Regex::new(r"(?m)^\s*dashboard:\s+(\S+)\s*$").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let url = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(found) = printed.captures(&text) {
            break found[1].to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no URL printed:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!url.ends_with(":0"), "{url}");
    let state: serde_json::Value = support::mesos::get_json(&format!("{url}/api/v1/state")).await;
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    assert_eq!(state["replica"]["advertised_url"], url.as_str(), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_honours_its_flags_and_counts_agents_right() {
    let mut demo = Appliance::spawn(
        "demo",
        &["demo", "--agents", "1", "--failover-timeout", "2h"].map(String::from),
    );
    let state = demo
        .wait_state("demo subscribed", WAIT, |s| {
            framework_state(s) == "subscribed"
        })
        .await;
    assert_eq!(state["framework"]["failover_timeout_seconds"], 7200.0);
    let log = demo.log();
    assert!(
        log.contains("(1 agent") && !log.contains("1 agents"),
        "{log}"
    );
    // The executor next to the binary is served at a URL naming its
    // content, so agents' fetcher caches never keep an old build.
    let served = mesos_appliance::executor::info::ServedExecutor::open(Path::new(EXECUTOR))
        .expect("the executor binary");
    let binary = support::mesos::client()
        .get(format!("{}{}", demo.url, served.url_path()))
        .send()
        .await
        .expect("GET the executor");
    assert_eq!(binary.status(), 200);
    let bytes = binary.bytes().await.unwrap();
    assert_eq!(
        bytes.len() as u64,
        std::fs::metadata(EXECUTOR).unwrap().len()
    );
    demo.signal(libc::SIGTERM);
    assert_eq!(
        demo.wait_exit(Duration::from_secs(20)).await.code(),
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_in_a_file_are_plain_and_name_the_leading_master_once() {
    support::mesos::init();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let a = Appliance::spawn(
        "plain",
        &[
            "--master".into(),
            tb.url(),
            "--framework-user".into(),
            "root".into(),
        ],
    );
    a.wait_state("subscribed", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    let log = a.log();
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file:\n{log}"
    );
    assert_eq!(
        log.matches("leading Mesos master").count(),
        1,
        "the leader is logged once:\n{log}"
    );
}

/// `mesos-testbed --port 0` with three agents named by a pattern: it prints
/// the URL it listens on, and a JSON SUBSCRIBE without `Accept` gets a JSON
/// RecordIO stream of SUBSCRIBED, HEARTBEAT, then one OFFERS event with an
/// offer per agent, carrying the pattern's hostnames, attributes and the
/// configured resources. SIGTERM stops it with exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_testbed_binary_serves_offers_of_its_named_agents() {
    use tokio::io::AsyncBufReadExt;
    support::mesos::init();
    let mut child = tokio::process::Command::new(TESTBED)
        .args([
            "--port",
            "0",
            "--agents",
            "3",
            "--agent-hostname",
            "node-{i}.cluster.test",
            "--agent-attributes",
            "rack:r{i};zone:z1",
            "--agent-resources",
            "cpus:2;mem:1024",
            "--allocation-interval",
            "100ms",
            "--heartbeat-interval",
            "1s",
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn mesos-testbed");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the testbed prints its address within 10 s")
        .unwrap()
        .expect("a line on stdout");
    let url = first
        .strip_prefix("mesos-testbed listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .trim()
        .to_string();
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not a loopback URL with a port: {url}"));
    assert_ne!(port, 0, "the real port, not the one asked for");

    // JSON body, no Accept header: the master answers in JSON.
    let body = serde_json::json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "root", "name": "cli-test"}}});
    let mut sub = support::mesos::subscribe_raw(
        &url,
        &[("Content-Type", "application/json")],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(sub.status, 200, "{}", sub.body);
    assert_eq!(sub.header_str("Content-Type"), Some("application/json"));
    assert!(!sub.stream_id.is_empty(), "Mesos-Stream-Id is set");
    let first = sub.next().await.expect("an event");
    assert_eq!(first["type"], "SUBSCRIBED", "{first}");
    assert!(first["subscribed"]["framework_id"]["value"].is_string());
    let second = sub.next().await.expect("an event");
    assert_eq!(second["type"], "HEARTBEAT", "{second}");
    let offers = sub.expect("OFFERS").await;
    let offers = offers["offers"]["offers"]
        .as_array()
        .expect("offers")
        .clone();
    assert_eq!(offers.len(), 3, "one offer per agent: {offers:?}");
    let mut hosts = Vec::new();
    for offer in &offers {
        let host = offer["hostname"].as_str().expect("hostname").to_string();
        let index = host
            .strip_prefix("node-")
            .and_then(|h| h.strip_suffix(".cluster.test"))
            .unwrap_or_else(|| panic!("{host} does not follow node-{{i}}.cluster.test"));
        let attribute = |name: &str| {
            offer["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["name"] == name)
                .map(|a| a["text"]["value"].clone())
        };
        assert_eq!(
            attribute("rack"),
            Some(format!("r{index}").into()),
            "{offer}"
        );
        assert_eq!(attribute("zone"), Some("z1".into()), "{offer}");
        let cpus = offer["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "cpus")
            .and_then(|r| r["scalar"]["value"].as_f64());
        assert_eq!(cpus, Some(2.0), "{offer}");
        hosts.push(host);
    }
    hosts.sort();
    assert_eq!(
        hosts,
        [
            "node-0.cluster.test",
            "node-1.cluster.test",
            "node-2.cluster.test"
        ]
    );

    // SIGTERM: a clean stop.
    // SAFETY: kill(2) on our own child's PID has no memory effects.
    unsafe {
        libc::kill(child.id().expect("running") as i32, libc::SIGTERM);
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the testbed stops within 10 s of SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// `mesos-testbed --help` documents every flag of its clap definition (the
/// list comes from `TestbedArgs` itself, so a new flag is covered too).
#[test]
fn the_testbed_help_lists_every_flag() {
    use clap::CommandFactory;
    let help = run(TESTBED, &["--help"]);
    assert_eq!(help.status.code(), Some(0), "{}", stderr(&help));
    let text = String::from_utf8_lossy(&help.stdout);
    let command = mesos_appliance::testbed::TestbedArgs::command();
    let flags: Vec<String> = command
        .get_arguments()
        .filter_map(|a| a.get_long())
        .map(|long| format!("--{long}"))
        .collect();
    assert!(
        flags.len() >= 20,
        "only {} flags derived: {flags:?}",
        flags.len()
    );
    for flag in ["--port", "--agent-hostname", "--agent-attributes"] {
        assert!(
            flags.iter().any(|f| f == flag),
            "{flag} not derived: {flags:?}"
        );
    }
    let listed = regex::Regex::new(r"(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)").unwrap();
    let documented: Vec<&str> = listed
        .captures_iter(&text)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    for flag in &flags {
        assert!(
            documented.contains(&flag.as_str()),
            "{flag} is not listed by --help:\n{text}"
        );
    }
}

/// The first command a newcomer runs: `demo` prints the dashboard URL it
/// serves on, runs both sample services (3 × `web`, 2 × `worker`) to
/// TASK_RUNNING as its JSON API shows, and Ctrl-C (SIGINT) stops it with
/// exit code 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_prints_its_url_runs_both_sample_services_and_stops_on_ctrl_c() {
    let mut demo = Appliance::spawn("demo", &["demo".to_string()]);
    let printed = regex::Regex::new(r"(?m)^\s*dashboard:\s+(\S+)\s*$").unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let url = loop {
        if let Some(found) = printed.captures(&demo.log()) {
            break found[1].to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no dashboard URL printed:\n{}",
            demo.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(url, demo.url, "the printed URL is the one it serves on");
    let running = |services: &serde_json::Value, name: &str| {
        services["services"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == name)
            .and_then(|s| s["running"].as_u64())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let services = demo.get("/api/v1/services").await.map(|(_, v)| v);
        let done = services
            .as_ref()
            .is_some_and(|s| running(s, "web") == 3 && running(s, "worker") == 2);
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sample services not running: {services:?}\n{}",
            tail(&demo.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, tasks) = demo.get("/api/v1/tasks").await.expect("tasks answer");
    assert_eq!(status, 200);
    for service in ["web", "worker"] {
        let states: Vec<&str> = tasks["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["service"] == service)
            .filter_map(|t| t["state"].as_str())
            .collect();
        let want = if service == "web" { 3 } else { 2 };
        assert_eq!(states, vec!["TASK_RUNNING"; want], "{service}: {tasks}");
    }

    // The demo's rollout (README): the second worker spec, applied with
    // `ctl … --wait` on the loopback listener, rolls out health-gated.
    let (_, worker) = demo.get("/api/v1/services/worker").await.unwrap();
    assert_eq!(worker["spec"]["health_check"]["type"], "http", "{worker}");
    let v2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo-worker-v2.json");
    let ctl = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesos-appliance"))
        .args(["ctl", "--url", &demo.url, "services", "apply", "-f"])
        .arg(&v2)
        .args(["--wait", "--timeout", "90s"])
        .env_remove("MESOS_APPLIANCE_TOKEN")
        .env_remove("MESOS_APPLIANCE_URL")
        .env_remove("MESOS_APPLIANCE_TOKEN_FILE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let o = tokio::time::timeout(Duration::from_secs(120), ctl)
        .await
        .expect("ctl ends")
        .expect("ctl runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("service worker: 2/2 running, 2 healthy: rollout complete"),
        "{out}"
    );

    demo.signal(libc::SIGINT);
    let status = demo.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "{}", tail(&demo.log(), 20));
    assert!(demo.log().contains("stopping"), "{}", tail(&demo.log(), 20));
}
