//! The web layer's connections as `serve` runs them: the header read
//! timeout, bounded and stalled bodies, the connection cap (idle
//! connections make room; live streams leave room for requests that end)
//! and the send timeout for clients that stop reading.

use crate::support;

use std::time::Duration;

use support::web::*;

/// `/api/v1/stream` of the server at `addr`, its first snapshot read.
async fn live_stream(
    addr: std::net::SocketAddr,
) -> impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin {
    use futures::StreamExt;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut live = Box::pin(
        reqwest::Client::new()
            .get(format!("http://{addr}/api/v1/stream"))
            .send()
            .await
            .unwrap()
            .bytes_stream(),
    );
    let first = live.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("event: snapshot"));
    live
}

#[tokio::test]
async fn clients_that_never_finish_their_headers_are_cut_off() {
    use mesos_appliance::web::serve;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut config = test_config();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.header_read_timeout = Duration::from_secs(1);
    let web = TestWeb::new(config, leader_snapshot("http://x", 1));
    let server = serve(web.state.clone(), std::future::pending())
        .await
        .unwrap();
    // A live stream is past its headers: the timeout does not touch it.
    use futures::StreamExt;
    let mut live = live_stream(server.addr).await;

    let started = std::time::Instant::now();
    // Half a request whose headers never end, and a connection that says
    // nothing at all.
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    for (name, conn) in [("slow", &mut slow), ("silent", &mut silent)] {
        let mut rest = Vec::new();
        // Closed (EOF or reset), whatever was written before.
        let closed =
            tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the {name} connection is still open");
    }
    let elapsed = started.elapsed();
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(4)).contains(&elapsed),
        "{elapsed:?}"
    );

    let mut s = web.snapshot();
    s.tasks = Default::default();
    s.at += 1.0;
    web.publish(s);
    let next = tokio::time::timeout(Duration::from_secs(5), live.next())
        .await
        .expect("the live stream outlives the header timeout")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&next).contains(r#""tasks":0"#));
}

/// Sends `request` on a new connection to `addr`; the answer until the
/// server closes the connection (at most 5 s), and how long it took.
async fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> (String, Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = std::time::Instant::now();
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut answer)).await;
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn oversized_and_stalled_bodies_are_answered_not_waited_for() {
    use mesos_appliance::web::serve;
    let mut config = test_config();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.header_read_timeout = Duration::from_secs(2);
    let web = TestWeb::new(config, leader_snapshot("http://x", 1));
    let server = serve(web.state.clone(), std::future::pending())
        .await
        .unwrap();
    // A declared length far above the limit, one byte sent: 413 at once,
    // whatever the route and method.
    for head in [
        "POST /api/v1/services/zz",
        "PUT /api/v1/services/zz",
        "POST /actions/kamikaze",
    ] {
        let request = format!(
            "{head} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: 99999999999\r\n\r\n{{"
        );
        let (answer, elapsed) = raw_exchange(server.addr, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{head}: {answer:?}");
        assert!(elapsed < Duration::from_secs(1), "{head}: {elapsed:?}");
    }
    // A body that stops coming: 408 once the timeout has passed.
    let (answer, elapsed) = raw_exchange(
        server.addr,
        b"PUT /api/v1/services/zz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 10\r\n\r\n{",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(answer.contains("problem+json"), "{answer:?}");
    assert!(
        (Duration::from_millis(1900)..Duration::from_secs(4)).contains(&elapsed),
        "{elapsed:?}"
    );
    // A whole body within the limit still goes through.
    let body = r#"{"command":"sleep 1","cpus":0.1,"mem":32,"instances":1}"#;
    let request = format!(
        "PUT /api/v1/services/zz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (answer, _) = raw_exchange(server.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer:?}");
}

#[tokio::test]
async fn at_the_connection_cap_idle_connections_make_room_and_live_streams_leave_room_for_requests()
{
    use futures::StreamExt;
    use mesos_appliance::web::serve;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut config = test_config();
    config.listen = "127.0.0.1:0".parse().unwrap();
    // Long enough that nothing here is freed by the timeout.
    config.header_read_timeout = Duration::from_secs(30);
    config.max_connections = 8;
    let web = TestWeb::new(config, leader_snapshot("http://x", 1));
    let server = serve(web.state.clone(), std::future::pending())
        .await
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // A slowloris: far more half-sent requests than the cap, held open.
    let mut stalled = Vec::new();
    for _ in 0..40 {
        let mut conn = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        stalled.push(conn);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The probe is served at once, again and again: each new connection
    // takes the place of a stalled one.
    healthz_answers_at_once(&client, server.addr, 20).await;
    // The stalled connections that made room were closed, not left hanging.
    let mut closed = 0;
    for conn in &mut stalled {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_millis(20), conn.read_to_end(&mut rest));
        if read.await.is_ok() {
            closed += 1;
        }
    }
    assert!(
        closed >= 20,
        "only {closed} stalled connections were closed"
    );
    drop(stalled);

    // Live streams take at most three quarters of the slots (6 of 8): the
    // next one, whichever stream it asks for, is refused with a problem
    // and Retry-After instead of locking every other client out.
    let mut streams = Vec::new();
    for _ in 0..6 {
        streams.push(live_stream(server.addr).await);
    }
    for path in ["/api/v1/stream", "/v2/events"] {
        let refused = client
            .get(format!("http://{}{path}", server.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 503, "{path}");
        assert_eq!(refused.headers()["retry-after"], "5", "{path}");
        let problem: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(
            problem["type"], "urn:mesos-appliance:problem:too-many-streams",
            "{path}"
        );
    }
    // The other slots serve requests that end, at once, again and again.
    healthz_answers_at_once(&client, server.addr, 10).await;
    // A stream that ends frees its place for the next.
    streams.pop();
    tokio::time::sleep(Duration::from_millis(200)).await;
    streams.push(live_stream(server.addr).await);
    // The streams still flow.
    let mut s = web.snapshot();
    s.at += 1.0;
    web.publish(s);
    for live in &mut streams {
        let next = tokio::time::timeout(Duration::from_secs(5), live.next()).await;
        assert!(matches!(next, Ok(Some(Ok(_)))), "a live stream was cut");
    }
}

#[tokio::test]
async fn a_client_that_stops_reading_a_response_is_cut_off_after_the_send_timeout() {
    use mesos_appliance::executor::info::ServedExecutor;
    use mesos_appliance::web::serve;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A response far larger than the socket buffers can hold (loopback's
    // send buffer grows to 4 MiB by default, net.ipv4.tcp_wmem).
    let file = tempfile::NamedTempFile::new().unwrap();
    let size = 48 << 20;
    std::fs::write(file.path(), vec![7u8; size]).unwrap();
    let mut config = test_config();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.executor_binary = Some(ServedExecutor::open(file.path()).unwrap());
    config.send_timeout = Duration::from_secs(1);
    let web = TestWeb::new(config, leader_snapshot("http://x", 1));
    let server = serve(web.state.clone(), std::future::pending())
        .await
        .unwrap();
    // Ask for it with a small receive window and read nothing for longer
    // than the send timeout.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(server.addr).await.unwrap();
    conn.write_all(b"GET /executor/mesos-appliance-executor HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // The server gave up: what it had sent, then the end of the connection
    // (before the whole body; a keep-alive connection would stay open).
    let mut got = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "still open after {} bytes", got.len());
    assert!(got.len() < size, "the whole body came: {} bytes", got.len());
    // Other clients are served as ever.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let health = reqwest::get(format!("http://{}/healthz", server.addr))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

/// `/healthz` on `addr` answers 200 within a second, `times` times in a row.
async fn healthz_answers_at_once(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    times: usize,
) {
    for _ in 0..times {
        let started = std::time::Instant::now();
        let health = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
}

/// A request head hyper refuses before the application sees it — a URI
/// past hyper's own limit (64 KiB), headers past its buffer, a request
/// line that does not parse — is answered with a problem document as
/// every other error, not a bare status with an empty body; a URI past
/// [`MAX_URI_BYTES`](mesos_appliance::web::query::MAX_URI_BYTES) only is
/// the application's 414 as before.
#[tokio::test]
async fn requests_hyper_refuses_get_problem_documents() {
    use mesos_appliance::web::serve;
    let mut config = test_config();
    config.listen = "127.0.0.1:0".parse().unwrap();
    let web = TestWeb::new(config, leader_snapshot("http://x", 1));
    let server = serve(web.state.clone(), std::future::pending())
        .await
        .unwrap();
    let body = |answer: &str| -> serde_json::Value {
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/problem+json"),
            "{head}"
        );
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
    };
    for (length, what) in [
        (10_000, "the application's limit"),
        (100_000, "hyper's limit"),
    ] {
        let request = format!(
            "GET /api/v1/tasks?q={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "x".repeat(length)
        );
        let (answer, _) = raw_exchange(server.addr, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 414"), "{what}: {answer:.200}");
        let v = body(&answer);
        assert_eq!(
            v["type"], "urn:mesos-appliance:problem:uri-too-long",
            "{what}"
        );
        assert_eq!(v["status"], 414);
    }
    let request = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "y".repeat(1 << 20)
    );
    let (answer, _) = raw_exchange(server.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:.200}");
    assert_eq!(body(&answer)["status"], 431);
    let (answer, _) = raw_exchange(server.addr, b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:.200}");
    assert_eq!(body(&answer)["status"], 400);
    // A request that parses on the same kind of connection is unchanged.
    let (answer, _) = raw_exchange(
        server.addr,
        b"GET /api/v1/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:.200}");
}
