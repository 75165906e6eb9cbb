//! Raw HTTP helpers for talking to a Mesos master (the in-process testbed)
//! the way any v1 client would: JSON or protobuf calls, and subscription
//! streams decoded from RecordIO into Mesos JSON values.

use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use mesos_appliance::mesos::json;
use mesos_appliance::mesos::recordio::RecordIoCodec;
use mesos_appliance::mesos::v1::scheduler::Event;
use prost::Message;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::codec::Decoder;

/// How long a test waits for an expected event.
pub const WAIT: Duration = Duration::from_secs(10);

/// Installs the rustls crypto provider reqwest needs and test logging (once
/// per process).
pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    super::init_tracing();
}

/// A plain HTTP client without connection reuse surprises.
pub fn client() -> reqwest::Client {
    init();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("client builds")
}

/// How long [`get_json`] and [`get_status_json`] wait for a whole answer.
const GET_TIMEOUT: Duration = Duration::from_secs(30);

/// `GET url`'s JSON body, whatever the status. Panics, naming `url`, when no
/// answer comes within 30 s or the body is not JSON.
pub async fn get_json(url: &str) -> Value {
    let (_, body) = get_answer(url).await;
    serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "GET {url}: not JSON ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    })
}

/// `GET url`'s status and JSON body (`Value::Null` when the body is not
/// JSON), for tests that check refusals. Panics, naming `url`, when no
/// answer comes within 30 s.
pub async fn get_status_json(url: &str) -> (u16, Value) {
    let (status, body) = get_answer(url).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn get_answer(url: &str) -> (u16, bytes::Bytes) {
    let response = client()
        .get(url)
        .timeout(GET_TIMEOUT)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let body = response
        .bytes()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: body: {e}"));
    (status, body)
}

/// The master's `GET /master/state` JSON (`master` is its base URL).
pub async fn master_state(master: &str) -> Value {
    get_json(&format!("{master}/master/state")).await
}

/// An HTTP answer: status, headers and body text.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// POSTs `body` with the given headers and returns the whole answer.
pub async fn post(url: &str, headers: &[(&str, &str)], body: impl Into<reqwest::Body>) -> Answer {
    let mut request = client().post(url).body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().await.unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}

/// A JSON scheduler call (`Content-Type: application/json`), with a stream ID.
pub async fn call(master: &str, stream_id: &str, body: Value) -> Answer {
    post(
        &format!("{master}/api/v1/scheduler"),
        &[
            ("Content-Type", "application/json"),
            ("Mesos-Stream-Id", stream_id),
        ],
        body.to_string(),
    )
    .await
}

/// An operator API call (`POST /api/v1`) in JSON.
pub async fn operator(master: &str, body: Value) -> Answer {
    post(
        &format!("{master}/api/v1"),
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
        ],
        body.to_string(),
    )
    .await
}

/// How a subscription stream ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The terminating chunk arrived.
    Clean,
    /// The connection broke (no terminating chunk) or RecordIO was invalid.
    Broken(String),
}

/// A subscription: the response head and a channel of decoded events.
pub struct Subscription {
    pub status: u16,
    pub headers: HeaderMap,
    pub stream_id: String,
    pub body: String,
    events: mpsc::UnboundedReceiver<Result<Value, End>>,
    /// Events received but skipped by `expect`, in order.
    pub seen: Vec<Value>,
    /// The task reading the response body; aborted on drop, which closes the
    /// connection as a scheduler that hangs up does.
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

impl Subscription {
    /// A response header as text.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The next event (any type), or the end of the stream.
    pub async fn next(&mut self) -> Result<Value, End> {
        match tokio::time::timeout(WAIT, self.events.recv()).await {
            Ok(Some(item)) => item,
            Ok(None) => Err(End::Clean),
            Err(_) => panic!("no event within {WAIT:?}; seen so far: {:?}", self.seen),
        }
    }

    /// The next event within `wait`, or `None` if none arrived.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Result<Value, End>> {
        tokio::time::timeout(wait, self.events.recv())
            .await
            .ok()
            .map(|item| item.unwrap_or(Err(End::Clean)))
    }

    /// The first event matching `wanted` within [`WAIT`], skipping (and
    /// keeping in `seen`) others; panics naming `what` otherwise.
    async fn wait_for(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_within(left).await {
                Some(Ok(event)) if wanted(&event) => return event,
                Some(Ok(event)) => self.seen.push(event),
                Some(Err(end)) => {
                    panic!(
                        "stream ended ({end:?}) while waiting for {what}; seen {:?}",
                        self.seen
                    )
                }
                None => panic!("no {what} within {WAIT:?}; seen {:?}", self.seen),
            }
        }
    }

    /// The next event of type `kind`, skipping others.
    pub async fn expect(&mut self, kind: &str) -> Value {
        self.wait_for(kind, |e| e["type"] == kind).await
    }

    /// The first offer of an OFFERS event: one already skipped into `seen`
    /// (offers stay valid until used, declined or rescinded) or the next one.
    pub async fn next_offer(&mut self) -> Value {
        if let Some(i) = self.seen.iter().position(|e| e["type"] == "OFFERS") {
            let event = self.seen.remove(i);
            return event["offers"]["offers"][0].clone();
        }
        self.expect("OFFERS").await["offers"]["offers"][0].clone()
    }

    /// The status of the next UPDATE for `task_id`, skipping other events.
    pub async fn expect_update(&mut self, task_id: &str) -> Value {
        let what = format!("update of {task_id}");
        let event = self
            .wait_for(&what, |e| {
                e["type"] == "UPDATE" && e["update"]["status"]["task_id"]["value"] == task_id
            })
            .await;
        event["update"]["status"].clone()
    }

    /// Waits (at most [`WAIT`]) for the end of the stream, skipping events;
    /// returns how it ended.
    pub async fn expect_end(&mut self) -> End {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_within(left).await {
                Some(Ok(event)) => self.seen.push(event),
                Some(Err(end)) => return end,
                None => panic!("stream did not end within {WAIT:?}; seen {:?}", self.seen),
            }
        }
    }

    /// Asserts that no event of type `kind` arrives within `wait`.
    pub async fn expect_none(&mut self, kind: &str, wait: Duration) {
        self.expect_none_but(kind, wait, |_| false).await
    }

    /// Asserts that no event of type `kind` arrives within `wait`, except
    /// those `allowed` accepts (e.g. the redelivery of an update whose
    /// ACKNOWLEDGE was still on its way: the master retries until the ack
    /// arrives).
    pub async fn expect_none_but(
        &mut self,
        kind: &str,
        wait: Duration,
        allowed: impl Fn(&Value) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return;
            }
            match self.next_within(left).await {
                None => return,
                Some(Ok(event)) if event["type"] == kind && !allowed(&event) => {
                    panic!("unexpected {kind}: {event}")
                }
                Some(Ok(event)) => self.seen.push(event),
                Some(Err(_)) => return,
            }
        }
    }

    /// The framework ID from the SUBSCRIBED event.
    pub async fn subscribed(&mut self) -> String {
        let event = self.expect("SUBSCRIBED").await;
        event["subscribed"]["framework_id"]["value"]
            .as_str()
            .expect("framework id")
            .to_string()
    }
}

/// Opens a subscription with a JSON or protobuf body and `Accept`.
pub async fn subscribe_raw(master: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Subscription {
    let mut request = client()
        .post(format!("{master}/api/v1/scheduler"))
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.expect("subscribe sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let stream_id = headers
        .get("Mesos-Stream-Id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let protobuf = headers
        .get("Content-Type")
        .is_some_and(|v| v == "application/x-protobuf");
    let (tx, rx) = mpsc::unbounded_channel();
    let mut body = String::new();
    let mut reader = None;
    if status == 200 {
        let mut chunks = response.bytes_stream();
        reader = Some(tokio::spawn(async move {
            let mut codec = RecordIoCodec::default();
            let mut buf = BytesMut::new();
            loop {
                match chunks.next().await {
                    Some(Ok(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        loop {
                            match codec.decode(&mut buf) {
                                Ok(Some(record)) => {
                                    let value = if protobuf {
                                        Event::decode(&record[..])
                                            .map(|e| json::to_value(&e))
                                            .map_err(|e| End::Broken(e.to_string()))
                                    } else {
                                        serde_json::from_slice(&record)
                                            .map_err(|e| End::Broken(e.to_string()))
                                    };
                                    let _ = tx.send(value);
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    let _ = tx.send(Err(End::Broken(e.to_string())));
                                    return;
                                }
                            }
                        }
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Err(End::Broken(e.to_string())));
                        return;
                    }
                    None => {
                        let end = if buf.is_empty() {
                            End::Clean
                        } else {
                            End::Broken("truncated record".into())
                        };
                        let _ = tx.send(Err(end));
                        return;
                    }
                }
            }
        }));
    } else {
        body = response.text().await.unwrap_or_default();
    }
    Subscription {
        status,
        headers,
        stream_id,
        body,
        events: rx,
        seen: Vec::new(),
        reader,
    }
}

/// SUBSCRIBE in JSON with `Accept: application/json`.
pub async fn subscribe(master: &str, body: Value) -> Subscription {
    subscribe_raw(
        master,
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
        ],
        body.to_string().into_bytes(),
    )
    .await
}

/// The SUBSCRIBE body of a new framework.
pub fn new_framework(name: &str, failover_timeout: f64) -> Value {
    json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "root", "name": name, "failover_timeout": failover_timeout}}})
}

/// The SUBSCRIBE body re-using framework ID `id`.
pub fn existing_framework(name: &str, id: &str, failover_timeout: f64) -> Value {
    json!({"type": "SUBSCRIBE", "framework_id": {"value": id}, "subscribe": {"framework_info": {
        "id": {"value": id}, "user": "root", "name": name, "failover_timeout": failover_timeout}}})
}

/// A connected framework: subscription plus its ID.
pub async fn connected(master: &str, name: &str, failover_timeout: f64) -> (Subscription, String) {
    let mut sub = subscribe(master, new_framework(name, failover_timeout)).await;
    assert_eq!(
        sub.status, 200,
        "subscribe answered {}: {}",
        sub.status, sub.body
    );
    let id = sub.subscribed().await;
    (sub, id)
}

/// An ACCEPT of `offer` launching command tasks `(task_id, cpus, mem)`.
pub fn launch(framework_id: &str, offer: &Value, tasks: &[(&str, f64, f64)]) -> Value {
    let agent = offer["agent_id"].clone();
    let task_infos: Vec<Value> = tasks
        .iter()
        .map(|(id, cpus, mem)| {
            json!({
            "name": id, "task_id": {"value": id}, "agent_id": agent,
            "resources": [
                {"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
                {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}}],
            "command": {"shell": true, "value": "sleep 1000"}})
        })
        .collect();
    json!({"framework_id": {"value": framework_id}, "type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": task_infos}}],
        "filters": {"refuse_seconds": 5.0}}})
}

/// ACKNOWLEDGE of a status that carries a uuid.
pub fn acknowledge(framework_id: &str, status: &Value) -> Value {
    json!({"framework_id": {"value": framework_id}, "type": "ACKNOWLEDGE", "acknowledge": {
        "agent_id": status["agent_id"], "task_id": status["task_id"], "uuid": status["uuid"]}})
}
