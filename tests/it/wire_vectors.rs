//! Our `.proto` files against binary protobuf captured from a real Mesos 1.12
//! master (`tests/data/real-mesos/`): every record decodes, every field the
//! master sent is known to our schema (no unknown fields anywhere), and the
//! values match the capture's index.

use bytes::BytesMut;
use mesos_appliance::mesos::json;
use mesos_appliance::mesos::recordio::RecordIoCodec;
use mesos_appliance::mesos::v1::master::{Response, response};
use mesos_appliance::mesos::v1::scheduler::{Event, event};
use mesos_appliance::mesos::v1::{TaskState, task_status};
use prost::{Message, Name};
use prost_reflect::{DynamicMessage, Value};
use tokio_util::codec::Decoder;

const STREAM: &[u8] = include_bytes!("../data/real-mesos/pb-scheduler-stream.recordio");
const FRAMEWORKS_PB: &[u8] = include_bytes!("../data/real-mesos/pb-get-frameworks-response.bin");
const FRAMEWORKS_JSON: &str = include_str!("../data/real-mesos/pb-get-frameworks-response.json");

fn records() -> Vec<bytes::Bytes> {
    let mut codec = RecordIoCodec::default();
    let mut buf = BytesMut::from(STREAM);
    let mut out = Vec::new();
    while let Some(r) = codec.decode_eof(&mut buf).unwrap() {
        out.push(r);
    }
    out
}

/// Paths of fields our schema does not know, anywhere in the message.
fn unknown_fields<M: Name>(bytes: &[u8]) -> Vec<String> {
    fn walk(msg: &DynamicMessage, path: &str, out: &mut Vec<String>) {
        for unknown in msg.unknown_fields() {
            out.push(format!("{path}#{}", unknown.number()));
        }
        for (field, value) in msg.fields() {
            let here = format!("{path}.{}", field.name());
            match value {
                Value::Message(m) => walk(m, &here, out),
                Value::List(items) => {
                    for item in items {
                        if let Value::Message(m) = item {
                            walk(m, &here, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let msg = DynamicMessage::decode(json::descriptor::<M>(), bytes).unwrap();
    let mut out = Vec::new();
    walk(&msg, "", &mut out);
    out
}

#[test]
fn every_field_of_the_real_event_stream_is_in_our_schema() {
    let records = records();
    assert_eq!(records.len(), 9);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            unknown_fields::<Event>(record),
            Vec::<String>::new(),
            "record {i}"
        );
        assert!(json::missing_required_fields(&Event::decode(&record[..]).unwrap()).is_empty());
    }
}

#[test]
fn real_event_stream_decodes_to_the_captured_values() {
    let events: Vec<Event> = records()
        .iter()
        .map(|r| Event::decode(&r[..]).unwrap())
        .collect();
    let types: Vec<event::Type> = events.iter().map(|e| e.r#type()).collect();
    use event::Type::*;
    assert_eq!(
        types,
        [
            Subscribed, Heartbeat, Offers, Update, Update, Update, Update, Update, Offers
        ]
    );

    let subscribed = events[0].subscribed.as_ref().unwrap();
    assert_eq!(
        subscribed.framework_id.value,
        "ca36052a-c7a2-49bc-b081-dff129c36e6a-0013"
    );
    assert_eq!(subscribed.heartbeat_interval_seconds, Some(15.0));
    let master = subscribed.master_info.as_ref().unwrap();
    assert_eq!(master.version(), "1.12.0");
    assert_eq!(master.address.as_ref().unwrap().port, 5050);

    let offer = &events[2].offers.as_ref().unwrap().offers[0];
    assert_eq!(offer.id.value, "ca36052a-c7a2-49bc-b081-dff129c36e6a-O16");
    assert_eq!(
        offer.agent_id.value,
        "ca36052a-c7a2-49bc-b081-dff129c36e6a-S0"
    );
    assert_eq!(offer.hostname, "localhost");
    let names: Vec<&str> = offer.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["ports", "cpus", "mem", "disk"]);
    let ports = offer.resources[0].ranges.as_ref().unwrap();
    assert_eq!((ports.range[0].begin, ports.range[0].end), (31000, 32000));

    let status = |i: usize| events[i].update.as_ref().unwrap().status.clone();
    let starting = status(3);
    assert_eq!(starting.task_id.value, "pb-task-1");
    assert_eq!(starting.state(), TaskState::TaskStarting);
    assert_eq!(starting.source(), task_status::Source::Executor);
    assert_eq!(starting.uuid.as_ref().map(Vec::len), Some(16));
    assert!(starting.container_status.is_some());
    assert_eq!(status(4).state(), TaskState::TaskRunning);

    let reconciled = status(5);
    assert_eq!(reconciled.state(), TaskState::TaskRunning);
    assert_eq!(reconciled.source(), task_status::Source::Master);
    assert_eq!(reconciled.reason(), task_status::Reason::Reconciliation);
    assert_eq!(reconciled.uuid, None);
    assert_eq!(reconciled.message(), "Reconciliation: Latest task state");

    let unknown = status(6);
    assert_eq!(unknown.task_id.value, "no-such");
    assert_eq!(unknown.state(), TaskState::TaskLost);
    assert_eq!(unknown.message(), "Reconciliation: Task is unknown");

    let killed = status(7);
    assert_eq!(killed.state(), TaskState::TaskKilled);
    assert_eq!(
        killed.message(),
        "Command terminated with signal Terminated"
    );
    assert_eq!(killed.uuid.as_ref().map(Vec::len), Some(16));
}

#[test]
fn real_get_frameworks_response_is_fully_understood() {
    assert_eq!(
        unknown_fields::<Response>(FRAMEWORKS_PB),
        Vec::<String>::new()
    );
    let response = Response::decode(FRAMEWORKS_PB).unwrap();
    assert_eq!(response.r#type(), response::Type::GetFrameworks);
    let frameworks = response.get_frameworks.as_ref().unwrap();
    assert_eq!(frameworks.frameworks.len(), 1);
    let live = &frameworks.frameworks[0];
    assert_eq!(live.framework_info.name, "pb-capture");
    assert!(live.active && live.connected && !live.recovered);
    assert!(!frameworks.completed_frameworks.is_empty());
    assert!(
        frameworks
            .completed_frameworks
            .iter()
            .all(|f| !f.active && f.unregistered_time.is_some())
    );
}

#[test]
fn our_json_mapping_reads_the_masters_json_answer() {
    let response: Response = json::from_slice(FRAMEWORKS_JSON.as_bytes()).unwrap();
    let frameworks = response.get_frameworks.unwrap();
    assert_eq!(frameworks.frameworks[0].framework_info.name, "pb-capture");
    assert_eq!(frameworks.completed_frameworks.len(), 13);
    // And writes it back with the same keys and values.
    let original: serde_json::Value = serde_json::from_str(FRAMEWORKS_JSON).unwrap();
    let ours = json::to_value(&Response {
        r#type: Some(response::Type::GetFrameworks as i32),
        get_frameworks: Some(frameworks),
        ..Default::default()
    });
    assert_eq!(ours, original);
}
