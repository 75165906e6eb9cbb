//! The public event stream, `GET /api/v1/events/stream` (`docs/events.md`):
//! - in process, over the scripted core of [`support::web`]: the `type`
//!   filter, an unknown type, a slow consumer ended with a `disconnect`
//!   that says why, a follower's 307 to the leader;
//! - with real `mesos-appliance` processes, a real ZooKeeper and the
//!   testbed master: a client reading events from the leader resumes with
//!   `Last-Event-ID` and gets exactly the events it missed; it is then cut
//!   off while the leader is SIGKILLed, reconnects to the new leader
//!   through the follower's URL, and gets an explicit `resync` with an ID
//!   above every earlier one, then the new leader's events; a leader
//!   stopped with SIGTERM ends its streams with `leadership` `lost` and a
//!   `disconnect` saying why.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::scheduler::{Snapshot, StatusEntry};
use serde_json::json;
use support::cluster::Cluster;
use support::processes::*;
use support::sse::{Read, SseEvent, SseReader};
use support::web::{TestWeb, follower_snapshot, get, leader_snapshot, test_config};
use tower::ServiceExt;

const PATH: &str = "/api/v1/events/stream";
const QUICK: Duration = Duration::from_secs(5);

/// `s` with task `i` given one more status update (and `healthy`).
fn updated(s: &Snapshot, i: usize, state: TaskState, healthy: Option<bool>) -> Snapshot {
    let mut s = s.clone();
    let mut task = (*s.tasks[i]).clone();
    let at = task.updated_at + 1.0;
    task.timeline.push(StatusEntry {
        at,
        state,
        source: None,
        reason: None,
        message: Some(format!("update at {at}")),
        healthy,
    });
    task.state = state;
    task.updated_at = at;
    if healthy.is_some() {
        task.healthy = healthy;
        task.healthy_since = Some(at);
    }
    let mut tasks = s.tasks.to_vec();
    tasks[i] = Arc::new(task);
    s.tasks = tasks.into();
    s.at += 1.0;
    s
}

async fn open(web: &TestWeb, path: &str) -> SseReader {
    let response = web.router().oneshot(get(path)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    SseReader::from_body(response.into_body())
}

#[tokio::test]
async fn the_type_filter_sends_only_the_types_asked_for() {
    let web = TestWeb::leader();
    let mut all = open(&web, PATH).await;
    let mut health = open(&web, &format!("{PATH}?type=health,leadership")).await;
    let s = web.snapshot();
    let s = updated(&s, 0, TaskState::TaskKilling, None);
    web.publish(s.clone());
    let s = updated(&s, 1, TaskState::TaskRunning, Some(false));
    web.publish(s);

    let (first, _) = all
        .until(QUICK, "unfiltered", |e| e.event == "task_status")
        .await;
    assert_eq!(first.json()["state"], "TASK_KILLING");
    let task_1 = web.snapshot().tasks[1].task_id.to_string();
    let (h, _) = all
        .until(QUICK, "unfiltered health", |e| e.event == "health")
        .await;
    assert_eq!(h.json()["task_id"], task_1.as_str());

    // The filtered stream's first event is the health change: the two
    // task_status events before it were left out.
    let e = health.expect(QUICK, "filtered").await;
    assert_eq!(
        (e.event.as_str(), e.json()["healthy"].clone()),
        ("health", json!(false))
    );
    assert_eq!(e.id, h.id, "the same event has the same ID on every stream");

    let bad = web.send(get(&format!("{PATH}?type=health,task"))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let body = bad.json();
    assert_eq!(body["errors"][0]["field"], "type");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("\"task\""),
        "{body}"
    );
    let bad = web.send(get(&format!("{PATH}?kind=health"))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["errors"][0]["field"], "kind");
    // `type` repeated is the same as a comma list; anything else repeated
    // is a field error in plain words.
    let mut repeated = open(&web, &format!("{PATH}?type=health&type=leadership")).await;
    let s = web.snapshot();
    web.publish(updated(&s, 1, TaskState::TaskRunning, Some(true)));
    let e = repeated.expect(QUICK, "repeated type").await;
    assert_eq!(e.event, "health");
    let bad = web
        .send(get(&format!("{PATH}?last_event_id=1&last_event_id=2")))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let body = bad.json();
    assert_eq!(body["errors"][0]["field"], "last_event_id", "{body}");
    assert!(
        !body.to_string().contains("Failed to deserialize"),
        "{body}"
    );
}

#[tokio::test]
async fn a_slow_consumer_is_told_why_it_is_disconnected() {
    let mut config = test_config();
    config.events.max_lag = 4;
    let web = TestWeb::new(config, leader_snapshot("http://127.0.0.1:8080", 20));
    let mut slow = open(&web, PATH).await;
    let mut fast = open(&web, PATH).await;
    // Twelve events; the fast client reads each as it comes, the slow one
    // reads nothing.
    let mut s = web.snapshot();
    for i in 0..12 {
        s = updated(&s, i, TaskState::TaskKilling, None);
        web.publish(s.clone());
        let e = fast.expect(QUICK, "fast consumer").await;
        assert_eq!(e.event, "task_status");
        assert_eq!(e.json()["task_id"], s.tasks[i].task_id.to_string().as_str());
    }

    let e = slow.expect(QUICK, "slow consumer").await;
    assert_eq!(e.event, "disconnect", "{e:?}");
    let data = e.json();
    let reason = data["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("consumer too slow, 12 events behind"),
        "{reason}"
    );
    assert_eq!(data["behind"], 12);
    assert!(
        matches!(slow.next(QUICK).await, Read::End),
        "closed after the reason"
    );
}

#[tokio::test]
async fn a_follower_redirects_to_the_leader_with_the_query() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot("http://127.0.0.1:8080", "http://10.0.0.7:8080", 3),
    );
    let path = format!("{PATH}?type=audit&last_event_id=00000000040000000017");
    let response = web.send(get(&path)).await;
    assert_eq!(response.status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        response.header("location"),
        Some(format!("http://10.0.0.7:8080{path}").as_str())
    );
}

// ---- Real processes ----

fn services(instances: u32) -> serde_json::Value {
    json!({"name": "web", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": instances})
}

impl Cluster {
    fn event_args(&self) -> Vec<String> {
        let mut args = base_args(&self.zk.connect_string(), &self.tb.url(), "events");
        let file = services_file(self.dir.path(), "services.json", &json!([services(1)]));
        args.extend(["--services".into(), file.display().to_string()]);
        args
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn connect(url: &str, last: Option<&str>) -> reqwest::Response {
    let mut request = client().get(format!("{url}{PATH}"));
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    request.send().await.expect("the replica answers")
}

async fn scale(replica: &Appliance, instances: u32) {
    let response = client()
        .put(format!("{}/api/v1/services/web", replica.url))
        .json(&services(instances))
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{:?}",
        response.text().await
    );
}

fn running_web(instances: u64) -> impl Fn(&serde_json::Value) -> bool {
    move |s| framework_state(s) == "subscribed" && running_count(s) == instances
}

fn id_of(e: &SseEvent) -> String {
    e.id.clone().unwrap_or_else(|| panic!("an ID on {e:?}"))
}

fn assert_increasing(ids: &[String]) {
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
        assert!(w[0].parse::<u128>().unwrap() < w[1].parse::<u128>().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_resumes_after_a_gap_and_is_told_to_resync_after_a_failover() {
    let s = Cluster::start().await;
    let a = Appliance::spawn("a", &s.event_args());
    a.wait_state("a leads with web running", WAIT, running_web(1))
        .await;
    let b = Appliance::spawn("b", &s.event_args());
    b.wait_state("b follows", WAIT, |st| {
        st["leadership"]["role"] == "follower"
    })
    .await;

    // The follower sends the client to the leader.
    let redirect = connect(&b.url, None).await;
    assert_eq!(redirect.status().as_u16(), 307);
    let location = redirect.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(location, format!("{}{PATH}", a.url));

    // Events as they happen: scaling up shows the service change, its new
    // tasks' updates and the audit entry.
    let mut events = SseReader::from_response(connect(&a.url, None).await);
    scale(&a, 3).await;
    let mut seen: Vec<SseEvent> = Vec::new();
    let mut running = 0;
    while running < 2 || !seen.iter().any(|e| e.event == "audit") {
        let e = match events.next(WAIT).await {
            Read::Event(e) => e,
            other => panic!("{other:?} after {seen:#?}\n{}", tail(&a.log(), 30)),
        };
        if e.event == "task_status" && e.json()["state"] == "TASK_RUNNING" {
            running += 1;
        }
        seen.push(e);
    }
    let kinds: Vec<&str> = seen.iter().map(|e| e.event.as_str()).collect();
    assert!(kinds.contains(&"service"), "{kinds:?}");
    let audit = seen.iter().find(|e| e.event == "audit").unwrap();
    assert_eq!(audit.json()["action"], "service.put");
    let ids: Vec<String> = seen.iter().map(id_of).collect();
    assert_increasing(&ids);
    let last = ids.last().unwrap().clone();
    drop(events);

    // Disconnected while the service grows: the resume replays exactly the
    // events after `last`, from the next sequence number on.
    scale(&a, 4).await;
    a.wait_state("4 running", WAIT, running_web(4)).await;
    let mut events = SseReader::from_response(connect(&a.url, Some(&last)).await);
    let first = events.expect(QUICK, "the first replayed event").await;
    assert_ne!(first.event, "resync", "{first:?}");
    assert_eq!(
        id_of(&first).parse::<u128>().unwrap(),
        last.parse::<u128>().unwrap() + 1,
        "no event missed"
    );
    let (fourth, replayed) = events
        .until(QUICK, "the fourth task running", |e| {
            e.event == "task_status" && e.json()["state"] == "TASK_RUNNING"
        })
        .await;
    let mut ids = vec![last.clone(), id_of(&first)];
    ids.extend(replayed.iter().map(id_of));
    ids.push(id_of(&fourth));
    assert_increasing(&ids);
    let last = id_of(&fourth);
    drop(events);

    // The leader dies while the client is away (~2 s: the session timeout);
    // the client comes back through the follower's URL.
    let cut = tokio::time::Instant::now();
    a.signal(libc::SIGKILL);
    b.wait_state("b leads", WAIT, running_web(4)).await;
    assert_eq!(b.state().await.unwrap()["leadership"]["role"], "leader");
    let response = loop {
        let response = connect(&b.url, Some(&last)).await;
        if response.status().as_u16() == 200 {
            break response;
        }
        assert!(
            cut.elapsed() < WAIT,
            "b does not serve: {}",
            response.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        cut.elapsed() >= Duration::from_secs(1),
        "{:?}",
        cut.elapsed()
    );
    let mut events = SseReader::from_response(response);
    let resync = events.expect(QUICK, "the resync").await;
    assert_eq!(resync.event, "resync", "{resync:?}");
    let data = resync.json();
    assert_eq!(data["last_event_id"], last.as_str());
    assert!(
        data["reason"].as_str().unwrap().contains("earlier leader"),
        "{data}"
    );
    let resumed = id_of(&resync);
    assert_increasing(&[last.clone(), resumed.clone()]);
    assert_eq!(data["resume_after"], resumed.as_str());

    // The new leader's events follow, numbered above the resync.
    scale(&b, 2).await;
    let (killed, skipped) = events
        .until(WAIT, "a task killed by the scale-down", |e| {
            e.event == "task_status" && e.json()["state"] == "TASK_KILLED"
        })
        .await;
    let mut ids = vec![resumed];
    ids.extend(skipped.iter().map(id_of));
    ids.push(id_of(&killed));
    assert_increasing(&ids);
}

/// Reads `events` until it ends; panics after `WAIT` or on a timeout.
async fn to_the_end(events: &mut SseReader, what: &str) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    loop {
        match events.next(WAIT).await {
            Read::Event(e) => seen.push(e),
            Read::End => return seen,
            Read::Timeout => panic!("{what}: no end within {WAIT:?} after {seen:#?}"),
        }
    }
}

/// `docs/events.md`, "a reason before an end": a leader stopped with
/// SIGTERM ends every stream, filtered or not, with the `leadership` `lost`
/// event and then a `disconnect` that says why, before the stream closes.
/// The dashboard's pulse (`/api/v1/stream`) ends with a `shutdown` event
/// that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_by_sigterm_ends_its_streams_with_a_reason() {
    let s = Cluster::start().await;
    let mut a = Appliance::spawn("a", &s.event_args());
    a.wait_state("a leads with web running", WAIT, running_web(1))
        .await;
    let mut all = SseReader::from_response(connect(&a.url, None).await);
    let response = client()
        .get(format!("{}{PATH}?type=leadership", a.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut leadership = SseReader::from_response(response);
    // Both streams are subscribed: the journal's receiver is taken before
    // the 200 is sent.
    let response = client()
        .get(format!("{}/api/v1/stream", a.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut pulse = SseReader::from_response(response);

    a.signal(libc::SIGTERM);
    let seen = to_the_end(&mut pulse, "/api/v1/stream").await;
    let last = seen.last().expect("events on the pulse");
    assert_eq!(last.event, "shutdown", "{seen:#?}");
    assert!(
        last.json()["reason"]
            .as_str()
            .is_some_and(|r| r.contains("shutting down")),
        "{seen:#?}"
    );
    for (events, what) in [
        (&mut all, "the stream"),
        (&mut leadership, "?type=leadership"),
    ] {
        let seen = to_the_end(events, what).await;
        let kinds: Vec<&str> = seen.iter().map(|e| e.event.as_str()).collect();
        let n = kinds.len();
        assert!(n >= 2, "{what}: {kinds:?}\n{}", tail(&a.log(), 30));
        assert_eq!(
            (kinds[n - 2], seen[n - 2].json()["change"].clone()),
            ("leadership", json!("lost")),
            "{what}: {seen:#?}"
        );
        assert_eq!(kinds[n - 1], "disconnect", "{what}: {seen:#?}");
        let data = seen[n - 1].json();
        assert!(
            data["reason"].as_str().unwrap().contains("shutting down"),
            "{what}: {data}"
        );
        assert_eq!(
            data["last_event_id"],
            json!(seen[n - 2].id),
            "{what}: {data}"
        );
    }
    assert!(a.wait_exit(WAIT).await.success());
}
