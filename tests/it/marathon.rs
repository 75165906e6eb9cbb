//! Coming from Marathon (`docs/marathon.md`):
//!
//! - `mesos-appliance import marathon` as a process on the fixtures of
//!   `tests/fixtures/marathon/` (written from Marathon's documented app
//!   schema) gives the expected specs and not-carried list
//!   (`tests/fixtures/marathon/expected/`), with its exit codes; an input
//!   that is not Marathon JSON is refused and nothing is written;
//! - with real `mesos-appliance` replicas, a real ZooKeeper and the testbed
//!   master: every imported spec is accepted by `PUT
//!   /api/v1/services/{name}`; a client that reads
//!   `/v2/apps?embed=apps.tasks` as marathon-lb does (`marathon_lb.py`
//!   and `utils.py` in mesosphere/marathon-lb, rewritten here from what
//!   they read) gets the tasks with their host and ports from the leader
//!   and from a follower; `/v2/events` sends a `status_update_event` when a
//!   task starts, and a follower redirects it to the leader.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::Cluster;
use support::processes::*;
use support::sse::SseReader;

const FIXTURES: [(&str, i32); 4] = [
    ("docker-http", 0),
    ("apps", 0),
    ("groups", 0),
    ("unsupported", 1),
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/marathon")
}

fn import(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mesos-appliance"))
        .arg("import")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run import")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_import_gives_the_expected_specs_and_not_carried_list() {
    let dir = tempfile::tempdir().unwrap();
    for (name, code) in FIXTURES {
        let input = fixtures().join(format!("{name}.json"));
        let out = dir.path().join(name);
        let o = import(&[
            "marathon",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(code), "{name}: {}", show(&o));
        let expected = fixtures().join("expected").join(name);
        for file in ["services.json", "not-carried.json"] {
            assert_eq!(
                read_json(&out.join(file)),
                read_json(&expected.join(file)),
                "{name}/{file}"
            );
        }
        // One file per spec, the same as in services.json.
        for spec in read_json(&out.join("services.json")).as_array().unwrap() {
            let one = out.join(format!("{}.json", spec["name"].as_str().unwrap()));
            assert_eq!(&read_json(&one), spec, "{name}: {}", one.display());
        }
        // Every note is on stderr too, one line each.
        let stderr = String::from_utf8_lossy(&o.stderr);
        for note in read_json(&out.join("not-carried.json")).as_array().unwrap() {
            let app = note["app"].as_str().unwrap();
            let why = note["why"].as_str().unwrap();
            assert!(
                stderr
                    .lines()
                    .any(|l| l.starts_with(app) && l.ends_with(why)),
                "{name}: {note} not on stderr:\n{stderr}"
            );
        }
        // `--out -` prints the same specs on stdout.
        let o = import(&["marathon", input.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(code), "{name}: {}", show(&o));
        let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            printed,
            read_json(&expected.join("services.json")),
            "{name}"
        );
    }
}

#[test]
fn input_that_is_not_marathon_json_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{ not json").unwrap();
    let ours = fixtures().join("not-marathon.json");
    for (input, says) in [
        (ours.as_path(), "not Marathon app JSON"),
        (junk.as_path(), "not JSON"),
        (
            Path::new("/nonexistent/apps.json"),
            "/nonexistent/apps.json",
        ),
    ] {
        let out = dir.path().join("out");
        let o = import(&[
            "marathon",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{}",
            show(&o)
        );
        assert!(
            !out.exists(),
            "{}: wrote {}",
            input.display(),
            out.display()
        );
    }
    let o = import(&["marathon"]);
    assert_eq!(o.status.code(), Some(2), "no file: {}", show(&o));
}

/// The backends marathon-lb builds from `GET /v2/apps?embed=apps.tasks`,
/// as `(app id, service port, host, task port)`: the apps in one of
/// `groups` (label `HAPROXY_GROUP`); their service ports from the bridged
/// container's `portMappings[].servicePort` or from
/// `portDefinitions[].port`; their tasks with a `host`, not in a state it
/// excludes (staging, starting, killing, terminal), and — when the app has
/// health checks — with an alive `healthCheckResults` entry; each task port
/// paired with the service port of its index.
fn marathon_lb_backends(apps: &Value, groups: &[&str]) -> Vec<(String, u64, String, u64)> {
    const EXCLUDED: [&str; 9] = [
        "TASK_STAGING",
        "TASK_STARTING",
        "TASK_KILLING",
        "TASK_FINISHED",
        "TASK_FAILED",
        "TASK_KILLED",
        "TASK_ERROR",
        "TASK_GONE",
        "TASK_DROPPED",
    ];
    let mut out = Vec::new();
    for app in apps["apps"].as_array().expect("apps") {
        let id = app["id"].as_str().expect("id").to_string();
        let app_groups: Vec<&str> = app["labels"]["HAPROXY_GROUP"]
            .as_str()
            .map(|g| g.split(',').collect())
            .unwrap_or_default();
        if !app_groups.iter().any(|g| groups.contains(g)) {
            continue;
        }
        let mut mode = "host";
        if app["container"]["docker"]["network"] == "BRIDGE" {
            mode = "container/bridge";
        }
        for n in app["networks"].as_array().into_iter().flatten() {
            mode = n["mode"].as_str().unwrap_or("container");
        }
        let from = |list: &Value, key: &str| -> Vec<u64> {
            list.as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p[key].as_u64())
                .collect()
        };
        let mut service_ports = Vec::new();
        if mode == "container/bridge" {
            service_ports = from(&app["container"]["portMappings"], "servicePort");
        }
        if service_ports.is_empty() {
            service_ports = from(&app["portDefinitions"], "port");
        }
        let checked = app["healthChecks"]
            .as_array()
            .is_some_and(|c| !c.is_empty());
        for task in app["tasks"].as_array().expect("tasks embedded") {
            let host = task["host"].as_str().unwrap_or_default();
            let state = task["state"].as_str().unwrap_or_default();
            if host.is_empty() || EXCLUDED.contains(&state) {
                continue;
            }
            let alive = task["healthCheckResults"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["alive"] == true);
            if checked && !alive {
                continue;
            }
            let ports = task["ports"].as_array().expect("ports");
            for (port, service) in ports.iter().zip(&service_ports) {
                out.push((
                    id.clone(),
                    *service,
                    host.to_string(),
                    port.as_u64().expect("a port"),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Polls `GET <path>` on `a` until `pred` holds; its JSON.
async fn get_until(a: &Appliance, path: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some((200, body)) = a.get(path).await
            && pred(&body)
        {
            return body;
        }
        if Instant::now() >= deadline {
            panic!(
                "{}: {what} not seen within {WAIT:?}; last: {:?}\n{}",
                a.name,
                a.get(path).await,
                tail(&a.log(), 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_read_v2_apps_tasks_and_events_from_any_replica() {
    let s = Cluster::start().await;
    let args = base_args(&s.zk.connect_string(), &s.tb.url(), "marathon");
    let a = Appliance::spawn("a", &args);
    a.wait_state("a subscribed", WAIT, |st| {
        framework_state(st) == "subscribed"
    })
    .await;
    let b = Appliance::spawn("b", &args);
    b.wait_state("b follows a", WAIT, |st| {
        st["leadership"]["role"] == "follower" && st["leadership"]["leader_url"] == a.url.as_str()
    })
    .await;

    // The events, read as marathon-lb asks for them, from the leader; a
    // follower redirects to it.
    let client = support::mesos::client();
    let events = "/v2/events?plan-format=light&event_type=status_update_event\
                  &event_type=health_status_changed_event&event_type=api_post_event";
    let response = client
        .get(format!("{}{events}", a.url))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = SseReader::from_response(response);
    let redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}{events}", b.url))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), 307);
    assert_eq!(
        redirect.headers()["location"],
        format!("{}{events}", a.url).as_str()
    );

    // Every imported spec is accepted by a replica's PUT, scaled to 0 so
    // that they do not crowd the testbed.
    let dir = tempfile::tempdir().unwrap();
    for (name, _) in FIXTURES {
        let input = fixtures().join(format!("{name}.json"));
        let o = import(&[
            "marathon",
            input.to_str().unwrap(),
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        for mut spec in read_json(&dir.path().join("services.json"))
            .as_array()
            .unwrap()
            .clone()
        {
            spec["instances"] = json!(0);
            let service = spec["name"].as_str().unwrap().to_string();
            let (status, body) = a
                .send(
                    reqwest::Method::PUT,
                    &format!("/api/v1/services/{service}"),
                    spec,
                )
                .await;
            assert!(
                status == 201 || status == 200,
                "{name} {service}: {status} {body}\n{}",
                show(&o)
            );
        }
    }

    // A service the way an import leaves it: labels, a service port, a
    // health check the testbed passes.
    let web = json!({"name": "web", "command": "sleep 1000", "cpus": 0.1, "mem": 32,
        "instances": 2, "ports": 2,
        "labels": {"HAPROXY_GROUP": "external", "MARATHON_SERVICE_PORT_0": "10001"},
        "health_check": {"type": "command", "command": "true", "delay": "0s",
            "interval": "1s", "timeout": "1s", "grace_period": "1s"}});
    let (status, body) = a
        .send(reqwest::Method::PUT, "/api/v1/services/web", web)
        .await;
    assert_eq!(status, 201, "{body}");

    let (event, skipped) = stream
        .until(WAIT, "a status_update_event of web", |e| {
            let d = e.json();
            e.event == "status_update_event"
                && d["appId"] == "/web"
                && d["taskStatus"] == "TASK_RUNNING"
        })
        .await;
    assert!(
        skipped.iter().all(|e| [
            "status_update_event",
            "health_status_changed_event",
            "api_post_event"
        ]
        .contains(&e.event.as_str())),
        "only the asked-for types: {skipped:#?}"
    );
    // The filter holds for the greeting too; unfiltered, it comes first.
    assert!(skipped.iter().all(|e| e.event != "event_stream_attached"));
    let all = client
        .get(format!("{}/v2/events", a.url))
        .send()
        .await
        .unwrap();
    let mut all = SseReader::from_response(all);
    let first = all.expect(WAIT, "the greeting").await;
    assert_eq!(first.event, "event_stream_attached");
    assert_eq!(first.json()["eventType"], "event_stream_attached");
    let d = event.json();
    assert_eq!(d["eventType"], "status_update_event");
    assert!(d["taskId"].as_str().unwrap().starts_with("web."), "{d}");
    assert!(!d["host"].as_str().unwrap().is_empty(), "{d}");
    assert_eq!(d["ports"].as_array().map(Vec::len), Some(2), "{d}");
    assert!(d["timestamp"].as_str().unwrap().ends_with('Z'), "{d}");
    assert!(
        skipped
            .iter()
            .any(|e| e.event == "api_post_event" && e.json()["appDefinition"]["id"] == "/web")
    );

    // marathon-lb's view, from the leader and from the follower, once
    // both tasks are healthy.
    for r in [&a, &b] {
        let apps = get_until(
            r,
            "/v2/apps?embed=apps.tasks",
            "two healthy web backends",
            |apps| marathon_lb_backends(apps, &["external"]).len() == 2,
        )
        .await;
        let backends = marathon_lb_backends(&apps, &["external"]);
        let snapshot = a.get("/api/v1/tasks").await.unwrap().1;
        for (app, service, host, port) in &backends {
            assert_eq!((app.as_str(), *service), ("/web", 10001));
            let task = snapshot["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["hostname"] == host.as_str() && t["ports"][0] == *port);
            assert!(
                task.is_some(),
                "{}: backend {host}:{port} is no task's: {snapshot}",
                r.name
            );
        }
        // The other group sees nothing; without embed, no tasks.
        assert!(marathon_lb_backends(&apps, &["internal"]).is_empty());
        let (_, plain) = r.get("/v2/apps").await.unwrap();
        assert!(
            plain["apps"]
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a.get("tasks").is_none())
        );
        // One app, and the tasks list.
        let (status, one) = r.get("/v2/apps/web").await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            one["app"]["tasks"].as_array().map(Vec::len),
            Some(2),
            "{one}"
        );
        assert_eq!(one["app"]["portDefinitions"][0]["port"], 10001);
        assert_eq!(one["app"]["healthChecks"][0]["protocol"], "COMMAND");
        let (status, missing) = r.get("/v2/apps/nope").await.unwrap();
        assert_eq!(
            (status, missing["message"].as_str()),
            (404, Some("App '/nope' does not exist"))
        );
        let (status, bogus) = r.get("/v2/tasks?status=bogus").await.unwrap();
        assert_eq!(status, 400, "{bogus}");
        assert!(
            bogus["message"]
                .as_str()
                .unwrap_or_default()
                .contains("bogus"),
            "{bogus}"
        );
        let (_, tasks) = r.get("/v2/tasks?status=running").await.unwrap();
        let web_tasks: Vec<&Value> = tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["appId"] == "/web")
            .collect();
        assert_eq!(web_tasks.len(), 2, "{tasks}");
        assert!(
            web_tasks
                .iter()
                .all(|t| t["state"] == "TASK_RUNNING" && t["startedAt"].is_string())
        );
    }
    drop(stream);

    // A new release of web: its rollout as Marathon's deployment events,
    // on the unfiltered stream opened above.
    let release = json!({"name": "web", "command": "sleep 2000", "cpus": 0.1, "mem": 32,
        "instances": 2, "ports": 2,
        "labels": {"HAPROXY_GROUP": "external", "MARATHON_SERVICE_PORT_0": "10001"},
        "health_check": {"type": "command", "command": "true", "delay": "0s",
            "interval": "1s", "timeout": "1s", "grace_period": "1s"},
        "upgrade": {"min_healthy": "1s", "deadline": "30s"}});
    let (status, body) = a
        .send(reqwest::Method::PUT, "/api/v1/services/web", release)
        .await;
    assert_eq!(status, 200, "{body}");
    let (info, _) = all
        .until(WAIT, "deployment_info of web", |e| {
            e.event == "deployment_info"
        })
        .await;
    let plan = &info.json()["plan"];
    assert_eq!(plan["steps"][0]["actions"][0]["app"], "/web", "{plan}");
    let (done, between) = all
        .until(Duration::from_secs(60), "deployment_success of web", |e| {
            e.event == "deployment_success"
        })
        .await;
    assert_eq!(done.json()["id"], plan["id"], "{:#?}", done);
    assert!(
        between.iter().all(|e| e.event != "deployment_failed"),
        "{between:#?}"
    );
}
