//! Task logs: the testbed's agent files API (as `src/files/files.cpp`
//! answers), and the web layer reading a log through a fake master and
//! agent that misbehave — hostile bytes (HTML, ANSI escapes, invalid
//! UTF-8) shown safely, a slow agent timed out, a 10 MiB answer refused,
//! a garbage-collected sandbox and an unreachable agent each named.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use mesos_appliance::testbed::TestbedConfig;
use mesos_appliance::web::WebConfig;
use serde_json::{Value, json};
use support::mesos::{call, get_json, launch, new_framework, subscribe};
use support::web::{TestWeb, get as get_request, leader_snapshot, test_config};

const AGENT_ID: &str = "fake-agent-S0";

/// What the fake master was asked: `/master/state` and `/master/slaves`
/// requests, and the `slave_id` of the last `/master/slaves`.
#[derive(Default)]
struct MasterReads {
    state: AtomicUsize,
    slaves: AtomicUsize,
    slave_id: std::sync::Mutex<Option<String>>,
}

/// A master and agent in one server: `/master/slaves` (and `/master/state`,
/// counted) names the agent at this address; the agent's state lists
/// executors `hostile`, `slow`, `huge`, `gone`, each with sandbox
/// `/sandbox/<id>`; `/files/read` misbehaves by executor.
async fn fake_cluster() -> String {
    fake_cluster_counting().await.0
}

/// [`fake_cluster`], and what its master was asked.
async fn fake_cluster_counting() -> (String, Arc<MasterReads>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reads = Arc::new(MasterReads::default());
    let master_state = json!({
        "slaves": [{"id": AGENT_ID, "hostname": "agent.test", "pid": format!("slave(1)@{addr}")}]
    });
    let slaves = master_state.clone();
    let (state_reads, slaves_reads) = (reads.clone(), reads.clone());
    let executors: Vec<Value> = ["hostile", "slow", "huge", "gone"]
        .iter()
        .map(|id| json!({"id": id, "directory": format!("/sandbox/{id}")}))
        .collect();
    let agent_state = json!({
        "id": AGENT_ID,
        "frameworks": [{"id": support::web::FRAMEWORK_ID, "executors": executors}]
    });
    let router = Router::new()
        .route(
            "/master/state",
            get(move || async move {
                state_reads.state.fetch_add(1, Ordering::SeqCst);
                axum::Json(master_state)
            }),
        )
        .route(
            "/master/slaves",
            get(
                move |Query(q): Query<std::collections::HashMap<String, String>>| async move {
                    slaves_reads.slaves.fetch_add(1, Ordering::SeqCst);
                    *slaves_reads.slave_id.lock().unwrap() = q.get("slave_id").cloned();
                    axum::Json(slaves)
                },
            ),
        )
        .route(
            "/slave(1)/state",
            get(move || async move { axum::Json(agent_state) }),
        )
        .route("/files/read", get(read));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}"), reads)
}

/// The bytes of the hostile log: HTML, ANSI colours, a terminal-title OSC,
/// invalid UTF-8, a NUL.
const HOSTILE: &[u8] =
    b"<script>alert('x')</script> \x1b[31mred\x1b[0m \x1b]0;pwned\x07 bad:\xff\xfe end\x00\n";

async fn read(Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    let path = q.get("path").cloned().unwrap_or_default();
    let size_only = q.get("offset").map(String::as_str) == Some("-1");
    if path.starts_with("/sandbox/hostile/") {
        if size_only {
            return axum::Json(json!({"data": "", "offset": HOSTILE.len()})).into_response();
        }
        // Raw bytes inside the JSON string, as rapidjson writes them.
        let mut body = b"{\"data\":\"".to_vec();
        for &b in HOSTILE {
            match b {
                b'"' => body.extend_from_slice(b"\\\""),
                b'\n' => body.extend_from_slice(b"\\n"),
                0 => body.extend_from_slice(b"\\u0000"),
                0x07 => body.extend_from_slice(b"\\u0007"),
                0x1b => body.extend_from_slice(b"\\u001B"),
                b => body.push(b),
            }
        }
        body.extend_from_slice(b"\",\"offset\":0}");
        return ([("content-type", "application/json")], body).into_response();
    }
    if path.starts_with("/sandbox/slow/") {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    if path.starts_with("/sandbox/huge/") {
        // 10 MiB, streamed without a length.
        let chunk = bytes::Bytes::from(vec![b'a'; 64 * 1024]);
        let stream =
            futures::stream::iter((0..160).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
        return Body::from_stream(stream).into_response();
    }
    StatusCode::NOT_FOUND.into_response()
}

/// A web layer whose snapshot leads, with the fake master and one task per
/// executor of the fake agent, reading logs with a 1 s agent timeout.
async fn web_over(master: &str) -> TestWeb {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 0);
    s.framework.master = Some(master.to_string());
    let mut task = support::web::sample_task(0, 0);
    task.agent_id = AGENT_ID.into();
    s.tasks = ["hostile", "slow", "huge", "gone"]
        .iter()
        .map(|id| {
            let mut t = task.clone();
            t.task_id = format!("t-{id}").into();
            t.executor_id = id.to_string();
            Arc::new(t)
        })
        .collect();
    let mut config: WebConfig = test_config();
    config.agent_timeout = Duration::from_secs(1);
    TestWeb::new(config, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_logs_are_shown_as_text_and_bad_agents_are_bounded() {
    support::mesos::init();
    let master = fake_cluster().await;
    let web = web_over(&master).await;

    // HTML, ANSI escapes and invalid UTF-8: JSON keeps the raw text (with
    // U+FFFD), `text` has no escapes; the page escapes everything.
    let r = web
        .send(get_request("/api/v1/tasks/t-hostile/logs/stdout"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let log = r.json();
    let data = log["data"].as_str().unwrap();
    assert!(
        data.contains("<script>") && data.contains("\u{FFFD}"),
        "{data:?}"
    );
    // The exact bytes, invalid ones included, in `data_base64`.
    {
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(log["data_base64"].as_str().expect("data_base64"))
            .unwrap();
        assert_eq!(raw, HOSTILE);
        assert_eq!(log["size"], HOSTILE.len());
    }
    let text = log["text"].as_str().unwrap();
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains("pwned"),
        "{text:?}"
    );
    assert!(
        text.contains("red") && text.contains("bad:\u{FFFD}"),
        "{text:?}"
    );
    let r = web.send(get_request("/tasks/t-hostile/logs/stdout")).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(
        html.contains("&#60;script&#62;alert(&#39;x&#39;)&#60;/script&#62; red"),
        "{html}"
    );
    assert!(!html.contains("<script>alert"), "unescaped");
    assert!(!html.contains('\u{1b}') && !html.contains('\u{0}'));

    // An agent that does not answer: cut off at the agent timeout.
    let started = Instant::now();
    let r = web
        .send(get_request("/api/v1/tasks/t-slow/logs/stdout"))
        .await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT, "{}", r.text());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        r.json()["detail"]
            .as_str()
            .unwrap()
            .contains("no complete answer within 1s")
    );

    // 10 MiB from the agent: refused past the read bound, not buffered.
    let r = web
        .send(get_request("/api/v1/tasks/t-huge/logs/stdout"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text());
    assert!(
        r.json()["detail"].as_str().unwrap().contains("more than"),
        "{}",
        r.text()
    );

    // A sandbox the agent no longer has: 410, said so on the page too.
    let r = web
        .send(get_request("/api/v1/tasks/t-gone/logs/stderr"))
        .await;
    assert_eq!(r.status, StatusCode::GONE, "{}", r.text());
    assert_eq!(r.json()["title"], "Sandbox garbage-collected");
    let r = web.send(get_request("/tasks/t-gone/logs/stderr")).await;
    assert_eq!(r.status, StatusCode::GONE);
    assert!(r.text().contains("garbage-collected"), "{}", r.text());

    // An offset past the end (or at u64::MAX) reads nothing and keeps the
    // file's real size, so that following waits for bytes that will come.
    for offset in ["1000000", "18446744073709551615"] {
        let r = web
            .send(get_request(&format!(
                "/api/v1/tasks/t-hostile/logs/stdout?offset={offset}"
            )))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let v = r.json();
        assert_eq!(v["size"], log["size"], "{v}");
        assert_eq!(v["next_offset"], log["size"], "{v}");
        assert_eq!(v["data"], "", "{v}");
    }

    // Bounded requests; unknown files and tasks.
    let r = web
        .send(get_request(
            "/api/v1/tasks/t-hostile/logs/stdout?length=70000",
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // A value that is no offset, or one given twice: the parameter named in
    // plain words (RFC 9457 `errors[]`), no serde message.
    for (query, field) in [
        ("offset=abc", "offset"),
        ("offset=-5", "offset"),
        ("length=1&length=2", "length"),
    ] {
        let r = web
            .send(get_request(&format!(
                "/api/v1/tasks/t-hostile/logs/stdout?{query}"
            )))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        let v = r.json();
        assert_eq!(v["errors"][0]["field"], field, "{query}: {v}");
        assert!(!v.to_string().contains("Failed to deserialize"), "{v}");
    }
    let r = web
        .send(get_request("/api/v1/tasks/t-hostile/logs/passwd"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = web
        .send(get_request("/api/v1/tasks/nope/logs/stdout"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // An agent (and master) nobody answers at: unreachable, named.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let web = web_over(&format!("http://{closed}")).await;
    let r = web
        .send(get_request("/api/v1/tasks/t-hostile/logs/stdout"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text());
    assert_eq!(r.json()["title"], "The agent is unreachable");
}

/// A log read looks the agent up by `/master/slaves?slave_id=`, once (then
/// from the cache), and never asks for the whole `/master/state`: at
/// 10,000 tasks that was a 17 MB answer per read, past the read timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_find_the_agent_without_the_master_state() {
    support::mesos::init();
    let (master, reads) = fake_cluster_counting().await;
    let web = web_over(&master).await;
    for file in ["stdout", "stderr", "stdout"] {
        let r = web
            .send(get_request(&format!("/api/v1/tasks/t-hostile/logs/{file}")))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    assert_eq!(reads.state.load(Ordering::SeqCst), 0, "/master/state read");
    assert_eq!(reads.slaves.load(Ordering::SeqCst), 1, "agent not cached");
    assert_eq!(
        reads.slave_id.lock().unwrap().as_deref(),
        Some(AGENT_ID),
        "the lookup names its agent"
    );
}

/// GETs `url` and returns the status and body.
async fn fetch(url: &str) -> (u16, Vec<u8>) {
    let r = support::mesos::client().get(url).send().await.unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_testbed_serves_sandboxes_like_an_agent() {
    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    let mut sub = subscribe(&tb.url(), new_framework("logs", 60.0)).await;
    let framework = sub.subscribed().await;
    let offer = sub.expect("OFFERS").await["offers"]["offers"][0].clone();
    let launched = call(
        &tb.url(),
        &sub.stream_id,
        launch(&framework, &offer, &[("log-task", 0.1, 32.0)]),
    )
    .await;
    assert_eq!(launched.status, 202);
    let state: Value = get_json(&format!("{}/master/state", tb.url())).await;
    // As on a real master: the agent's address, no sandbox directory.
    let pid = state["slaves"][0]["pid"].as_str().unwrap().to_string();
    assert!(!state.to_string().contains("\"directory\""));
    // `/master/slaves` lists the same agent; `slave_id` keeps only it.
    let agent_id = state["slaves"][0]["id"].as_str().unwrap().to_string();
    let slaves = |query: String| {
        let url = format!("{}/master/slaves{query}", tb.url());
        async move { get_json(&url).await }
    };
    let one = slaves(format!("?slave_id={agent_id}")).await;
    assert_eq!(one["slaves"], json!([state["slaves"][0]]), "{one}");
    assert_eq!(one["recovered_slaves"], json!([]));
    let none = slaves("?slave_id=nope".into()).await;
    assert_eq!(none["slaves"], json!([]));
    assert_eq!(slaves(String::new()).await["slaves"], state["slaves"]);
    let agent = format!("http://{}", pid.split_once('@').unwrap().1);
    let agent_state: Value = get_json(&format!("{agent}/slave(1)/state")).await;
    let fw = &agent_state["frameworks"][0];
    assert_eq!(fw["id"], framework.as_str());
    let executor = &fw["executors"][0];
    assert_eq!(executor["id"], "log-task");
    let dir = executor["directory"].as_str().unwrap().to_string();
    assert!(
        dir.contains("/frameworks/") && dir.contains("/runs/"),
        "{dir}"
    );

    let read = |q: String| fetch_read(agent.clone(), q);
    let path = format!("{dir}/stdout");
    let (status, body) = read(format!("path={path}&offset=-1")).await;
    assert_eq!(status, 200);
    let size0 = serde_json::from_slice::<Value>(&body).unwrap()["offset"]
        .as_u64()
        .unwrap();
    assert!(size0 > 0);
    let (_, body) = read(format!("path={path}&offset=0&length=20")).await;
    let first: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(first["offset"], 0);
    assert_eq!(first["data"].as_str().unwrap().len(), 20);
    // The generated log grows: one line a second.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, body) = read(format!("path={path}&offset=-1")).await;
        let size = serde_json::from_slice::<Value>(&body).unwrap()["offset"]
            .as_u64()
            .unwrap();
        if size > size0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the log did not grow past {size0}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Past the end: empty data at the offset asked.
    let (_, body) = read(format!("path={path}&offset=99999999")).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"data": "", "offset": 99999999})
    );
    // The errors of src/files/files.cpp.
    assert_eq!(read(format!("path={dir}/nope")).await.0, 404);
    assert_eq!(read("path=/etc/passwd".into()).await.0, 404);
    assert_eq!(read(format!("path={dir}/../../x")).await.0, 404);
    let (status, body) = read(format!("path={dir}")).await;
    assert_eq!(
        (status, body),
        (400, b"Cannot read a directory.\n".to_vec())
    );
    let (status, body) = read("offset=0".into()).await;
    assert_eq!(
        (status, body),
        (400, b"Expecting 'path=value' in query.\n".to_vec())
    );
    let (status, body) = read(format!("path={path}&offset=-2")).await;
    assert_eq!(
        (status, body),
        (400, b"Negative offset provided: -2.\n".to_vec())
    );
    assert_eq!(read(format!("path={path}&length=x")).await.0, 400);
    let _ = fetch(&format!("{agent}/state")).await;
    tb.shutdown().await;
}

async fn fetch_read(agent: String, query: String) -> (u16, Vec<u8>) {
    fetch(&format!("{agent}/files/read?{query}")).await
}

/// A task's `stdout` of 2-, 3- and 4-byte characters (`é`, `€`, `😀`), an
/// invalid sequence (`\xff\xfe`) and a character cut at the file's end,
/// written by a real process (testbed process mode). Read through
/// `/api/v1/tasks/{id}/logs/stdout` in chunks of 7, 1000, 4095 and 4096
/// bytes from `next_offset` to `size`, the concatenated bytes are the
/// file's, byte for byte; a chunk's `data` never splits a character.
const MULTIBYTE: &str = r#"i=0; while [ $i -lt 1500 ]; do printf 'a\303\251b\342\202\254c\360\237\230\200 %d\n' $i; i=$((i+1)); done; printf 'bad:\377\376 end \342\202'; sleep 600"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_reads_of_a_multibyte_log_give_the_file_byte_for_byte() {
    use base64::Engine;

    use support::appliance::{Served, services};
    use support::processes::WAIT;

    support::mesos::init();
    let mut tb_config = TestbedConfig::for_tests(1);
    tb_config.run_executors = Some(env!("CARGO_BIN_EXE_mesos-appliance-executor").into());
    let tb = support::testbed(tb_config).await;
    let specs = services(json!([
        {"name": "multibyte", "command": MULTIBYTE, "cpus": 0.1, "mem": 32, "instances": 1, "executor": "appliance", "kill_grace_period": "1s"}
    ]));
    let served = Served::start("chunks", &tb.url(), specs).await;
    let url = served.url.clone();
    let get = |path: String| {
        let url = format!("{url}{path}");
        async move { support::mesos::get_status_json(&url).await }
    };
    // The task runs and its log reaches its end marker (the cut `€`).
    let deadline = Instant::now() + WAIT;
    let (task, tail) = loop {
        let s = served.running.handle.snapshot();
        if let Some(t) = s
            .tasks
            .iter()
            .find(|t| t.state.as_str_name() == "TASK_RUNNING")
        {
            let (status, tail) = get(format!("/api/v1/tasks/{}/logs/stdout", t.task_id)).await;
            if status == 200 && tail["data"].as_str().is_some_and(|d| d.contains(" end ")) {
                break (t.task_id.to_string(), tail);
            }
        }
        assert!(Instant::now() < deadline, "no complete log");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The file itself, from the sandbox the agent names.
    let file = std::fs::read(tail["path"].as_str().unwrap()).unwrap();
    assert_eq!(tail["size"], file.len(), "{tail}");
    assert!(file.len() > 3 * 4096, "{}", file.len());
    assert!(file.ends_with(b" end \xe2\x82"));
    // A tail read starts on a character: its text has no U+FFFD but for
    // the invalid bytes and the cut character.
    let text = tail["data"].as_str().unwrap();
    assert!(!text.starts_with('\u{FFFD}'), "{text:?}");

    for length in [7u64, 1000, 4095, 4096] {
        let mut bytes = Vec::new();
        let mut offset = 0u64;
        let mut reads = 0;
        loop {
            let (status, chunk) = get(format!(
                "/api/v1/tasks/{task}/logs/stdout?offset={offset}&length={length}"
            ))
            .await;
            assert_eq!(status, 200, "{chunk}");
            assert_eq!(chunk["offset"], offset, "{chunk}");
            assert_eq!(chunk["size"], file.len(), "{chunk}");
            let n = chunk["length"].as_u64().unwrap();
            let next = chunk["next_offset"].as_u64().unwrap();
            assert_eq!(next, offset + n, "{chunk}");
            assert!(n <= length, "{chunk}");
            let data = chunk["data"].as_str().unwrap();
            let raw = match chunk["data_base64"].as_str() {
                Some(b64) => base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap(),
                None => data.as_bytes().to_vec(),
            };
            assert_eq!(raw.len() as u64, n, "{chunk}");
            let expected = &file[offset as usize..next as usize];
            assert_eq!(raw, expected, "length {length} at {offset}");
            // Valid UTF-8 bytes come as text, whole characters only.
            if std::str::from_utf8(expected).is_ok() {
                assert!(chunk.get("data_base64").is_none(), "{chunk}");
                assert_eq!(data.as_bytes(), expected);
            }
            bytes.extend_from_slice(&raw);
            if next >= chunk["size"].as_u64().unwrap() {
                break;
            }
            assert!(n > 0, "no progress at {offset}: {chunk}");
            offset = next;
            reads += 1;
            assert!(reads < 10_000);
        }
        assert_eq!(bytes, file, "chunks of {length}");
    }
    served.stop.cancel();
    tb.shutdown().await;
}
