//! Event-stream decoding throughput of the scheduler client.
//!
//! `cargo bench --bench event_decoding` feeds a RecordIO stream of protobuf
//! events, cut into 16 KiB chunks as a network would deliver them, through
//! `mesos::client::decode::event_stream` — the exact path the client reads
//! its subscription with (chunks → RecordIO records → `scheduler::Event`) —
//! and prints events/s and MB/s for:
//! - OFFERS events of 100 offers each (every offer as a real 1.12 master
//!   writes it: four resources, agent URL; capture a);
//! - UPDATE events (TASK_RUNNING from the executor with uuid and container
//!   status; capture b).
//!
//! Best of `RUNS` runs after one warm-up run.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use mesos_appliance::mesos::client::decode::event_stream;
use mesos_appliance::mesos::json;
use mesos_appliance::mesos::recordio::{DEFAULT_MAX_RECORD_BYTES, encode_record};
use mesos_appliance::mesos::v1::scheduler::Event;
use prost::Message;
use serde_json::{Value, json};

const RUNS: usize = 5;
const CHUNK: usize = 16 * 1024;

fn offer(n: usize) -> Value {
    let master = "26a9bc4c-b6a0-4cbd-bce5-4c8e9cadba80";
    json!({
        "id": {"value": format!("{master}-O{n}")},
        "framework_id": {"value": format!("{master}-0000")},
        "agent_id": {"value": format!("{master}-S{n}")},
        "hostname": format!("agent-{n}.example.org"),
        "url": {"scheme": "http", "address": {"hostname": format!("agent-{n}.example.org"), "ip": "10.0.3.17", "port": 5051}, "path": "/slave(1)"},
        "resources": [
            {"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 31000, "end": 32000}]}, "role": "*"},
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 2.0}, "role": "*"},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 2048.0}, "role": "*"},
            {"name": "disk", "type": "SCALAR", "scalar": {"value": 252899.0}, "role": "*"}
        ],
        "attributes": [{"name": "rack", "type": "TEXT", "text": {"value": format!("r{}", n % 8)}}]
    })
}

fn offers_event(first: usize) -> Event {
    let offers: Vec<Value> = (first..first + 100).map(offer).collect();
    let value = json!({"type": "OFFERS", "offers": {"offers": offers}});
    json::from_slice(value.to_string().as_bytes()).expect("valid OFFERS")
}

fn update_event(n: usize) -> Event {
    let value = json!({"type": "UPDATE", "update": {"status": {
        "task_id": {"value": format!("web.instance-{n}")},
        "state": "TASK_RUNNING",
        "source": "SOURCE_EXECUTOR",
        "agent_id": {"value": "26a9bc4c-b6a0-4cbd-bce5-4c8e9cadba80-S0"},
        "executor_id": {"value": format!("web.instance-{n}")},
        "timestamp": 1795971891.446521,
        "uuid": "RFIfEo7FTCq8KITnJxQnYA==",
        "container_status": {
            "container_id": {"value": "99116c10-7f6f-4d88-b844-9f54ec142f78"},
            "network_infos": [{"ip_addresses": [{"protocol": "IPv4", "ip_address": "127.0.0.1"}]}],
            "executor_pid": 13679
        }
    }}});
    json::from_slice(value.to_string().as_bytes()).expect("valid UPDATE")
}

/// The wire: `events` as RecordIO records, cut into `CHUNK`-byte chunks.
fn wire(events: &[Event]) -> (Vec<Bytes>, usize) {
    let mut all = Vec::new();
    for event in events {
        all.extend_from_slice(&encode_record(&event.encode_to_vec()));
    }
    let total = all.len();
    let all = Bytes::from(all);
    let chunks = (0..total)
        .step_by(CHUNK)
        .map(|i| all.slice(i..(i + CHUNK).min(total)))
        .collect();
    (chunks, total)
}

async fn decode(chunks: &[Bytes]) -> (usize, Duration) {
    let stream = futures::stream::iter(chunks.iter().cloned().map(Ok::<_, std::io::Error>));
    let start = Instant::now();
    let mut events = std::pin::pin!(event_stream(stream, DEFAULT_MAX_RECORD_BYTES));
    let mut count = 0;
    while let Some(event) = events.next().await {
        std::hint::black_box(event.expect("decodes"));
        count += 1;
    }
    (count, start.elapsed())
}

async fn bench(name: &str, events: Vec<Event>) {
    let (chunks, bytes) = wire(&events);
    let _ = decode(&chunks).await;
    let mut best = Duration::MAX;
    for _ in 0..RUNS {
        let (count, took) = decode(&chunks).await;
        assert_eq!(count, events.len());
        best = best.min(took);
    }
    let secs = best.as_secs_f64();
    println!(
        "{name:<22} {:>6} events, {:>6} B/event: {:>10.0} events/s, {:>7.1} MB/s",
        events.len(),
        bytes / events.len(),
        events.len() as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        bench(
            "OFFERS × 100 offers",
            (0..2_000).map(|i| offers_event(i * 100)).collect(),
        )
        .await;
        bench("UPDATE", (0..200_000).map(update_event).collect()).await;
    });
}
