//! The bodies of the fuzz targets in `fuzz/` (`docs/fuzzing.md`): one
//! function per target, taking the fuzzer's bytes, driving one decoder the
//! way the appliance drives it with untrusted input, and checking its
//! invariants:
//!
//! - no panic, whatever the bytes;
//! - memory bounded by the input: nothing decoded is larger than a small
//!   multiple of the bytes it came from, and a length announced by the
//!   peer is never allocated before its bytes arrive;
//! - unknown enum values and unknown fields are tolerated where Mesos' own
//!   decoders tolerate them (protobuf keeps unknown enum numbers and skips
//!   unknown fields; Mesos' JSON mapping, `stout/protobuf.hpp`, ignores
//!   unknown keys).
//!
//! A broken invariant panics, which the fuzzer reports as a crash. The
//! corpus replay in `cargo test` (this module's tests) calls the same
//! functions with every file of `fuzz/corpus/<target>/`, so a fixed crash
//! stays fixed on the stable toolchain. Not part of the appliance's API.

use std::sync::{Arc, LazyLock};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use prost::Message;
use tokio_util::codec::Decoder;

use crate::mesos::media::Encoding;
use crate::mesos::recordio::RecordIoCodec;

/// The names of the targets, as in `fuzz/Cargo.toml` and
/// `fuzz/corpus/<target>/`.
pub const TARGETS: [&str; 7] = [
    "recordio",
    "scheduler_event",
    "executor_event",
    "service_spec",
    "web_request",
    "files_read",
    "marathon_import",
];

/// Runs the target named `target` (one of [`TARGETS`]) on `data`; `false`
/// for an unknown name.
pub fn run(target: &str, data: &[u8]) -> bool {
    let body: fn(&[u8]) = match target {
        "recordio" => recordio,
        "scheduler_event" => scheduler_event,
        "executor_event" => executor_event,
        "service_spec" => service_spec,
        "web_request" => web_request,
        "files_read" => files_read,
        "marathon_import" => marathon_import,
        _ => return false,
    };
    body(data);
    true
}

/// The first byte of `data` (0 when empty) and the rest: the targets that
/// need a choice (an encoding, a chunk size) take it from the first byte,
/// so that the fuzzer mutates the choice with the payload.
fn split_first(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((first, rest)) => (*first, rest),
        None => (0, &[]),
    }
}

/// `data` cut into chunks of `size` bytes (at least 1), as HTTP chunks
/// arrive unrelated to record boundaries.
fn chunks(data: &[u8], size: usize) -> impl Iterator<Item = &[u8]> {
    data.chunks(size.max(1))
}

/// RecordIO framing ([`crate::mesos::recordio`]). The first byte picks the
/// chunk size (1 to 256 bytes) and the record limit (the low 4 bits: 2^n
/// bytes, 1 B to 32 KiB); the rest is the stream.
///
/// Invariants: the records decoded hold no more bytes than the stream
/// (their headers are not counted); the buffer never grows past the bytes
/// fed plus what was already there (an announced length, even 2^63, is
/// not reserved); a stream of the decoded records re-encoded decodes to the
/// same records.
pub fn recordio(data: &[u8]) {
    let (choice, stream) = split_first(data);
    let chunk_size = usize::from(choice) + 1;
    let limit = 1usize << (choice & 0x0f);
    let records = decode_records(stream, chunk_size, limit);
    let (records, _) = records;
    let total: usize = records.iter().map(Bytes::len).sum();
    assert!(
        total <= stream.len(),
        "{total} bytes decoded from a {}-byte stream",
        stream.len()
    );
    assert!(records.iter().all(|r| r.len() <= limit));
    // Re-encoded, the records decode again to themselves (one chunk).
    let mut wire = Vec::with_capacity(total + records.len() * 4);
    for record in &records {
        wire.extend_from_slice(&crate::mesos::recordio::encode_record(record));
    }
    let (again, error) = decode_records(&wire, wire.len(), limit);
    assert!(
        error.is_none(),
        "re-encoded records do not decode: {error:?}"
    );
    assert_eq!(again, records);
}

/// Decodes `stream` fed in chunks of `chunk_size` bytes with a record limit
/// of `limit`: the records up to the first error, and that error. Checks
/// that the codec's buffer stays within what was fed.
fn decode_records(
    stream: &[u8],
    chunk_size: usize,
    limit: usize,
) -> (Vec<Bytes>, Option<crate::mesos::recordio::RecordIoError>) {
    let mut codec = RecordIoCodec::new(limit);
    let mut buf = BytesMut::new();
    let mut records = Vec::new();
    for chunk in chunks(stream, chunk_size) {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => break,
                Err(e) => return (records, Some(e)),
            }
        }
        // The decoder reserves nothing of its own: the buffer holds at
        // most the stream (BytesMut may round its capacity up, so allow
        // a factor of two).
        assert!(
            buf.capacity() <= 2 * stream.len().max(64),
            "buffer capacity {} for a {}-byte stream",
            buf.capacity(),
            stream.len()
        );
    }
    match codec.decode_eof(&mut buf) {
        Ok(Some(record)) => records.push(record),
        Ok(None) => {}
        Err(e) => return (records, Some(e)),
    }
    (records, None)
}

/// An upper bound of the protobuf encoding of a message decoded from `n`
/// bytes. Protobuf re-encoding can grow a little: a packed repeated field
/// read into a field declared unpacked gets one tag per element (up to 3
/// bytes for a 1-byte element), and Mesos' JSON writes `-1` (2 bytes) for
/// a 10-byte varint. Nothing may grow more than that.
fn decoded_bound(n: usize) -> usize {
    8 * n + 16
}

/// Scheduler events ([`crate::mesos::client::decode::event_stream`] and
/// Mesos' JSON mapping, [`crate::mesos::json`]). The first byte's low bit
/// picks the encoding; the rest of it picks the chunk size.
///
/// - Protobuf: the rest is a RecordIO stream of `scheduler::Event`s, read
///   through the client's own decoding pipeline with a 64 KiB record limit.
/// - JSON: the rest is one event in Mesos' JSON mapping.
///
/// Invariants: no panic; the events decoded re-encode within
/// `decoded_bound` of the bytes they came from; a framing error ends the
/// stream (a record that is not an event does not).
pub fn scheduler_event(data: &[u8]) {
    use crate::mesos::v1::scheduler::Event;
    let (choice, rest) = split_first(data);
    if choice & 1 == 0 {
        let chunk_size = usize::from(choice >> 1) + 1;
        let body: Vec<Result<Bytes, std::io::Error>> = chunks(rest, chunk_size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let events =
            crate::mesos::client::decode::event_stream(futures::stream::iter(body), 64 * 1024);
        let results: Vec<_> = futures::executor::block_on(events.collect());
        let mut encoded = 0;
        for (i, result) in results.iter().enumerate() {
            match result {
                Ok(event) => {
                    let _ = event.r#type();
                    encoded += event.encoded_len();
                }
                // Framing errors end the stream; a record that does not
                // decode is reported and the stream goes on.
                Err(crate::mesos::client::StreamError::Framing(_)) => {
                    assert_eq!(i + 1, results.len(), "events after a framing error");
                }
                Err(_) => {}
            }
        }
        assert!(
            encoded <= decoded_bound(rest.len()),
            "{encoded} bytes of events from {} bytes",
            rest.len()
        );
    } else if let Ok(event) = crate::mesos::json::from_slice::<Event>(rest) {
        let _ = event.r#type();
        assert!(
            event.encoded_len() <= decoded_bound(rest.len()),
            "{} bytes of event from {} bytes of JSON",
            event.encoded_len(),
            rest.len()
        );
    }
}

/// Executor events, as the executor reads them from its agent
/// ([`crate::executor::connection`]) and what it reads of a LAUNCH or
/// LAUNCH_GROUP: each task's command (`TaskInfo.command`, or a
/// `CommandInfo` in `TaskInfo.data`, [`crate::executor::tasks::task_command`])
/// and health check ([`crate::executor::health::HealthPolicy::from_proto`]).
/// The first byte's low bit picks the encoding; the rest is one event.
///
/// Invariants: no panic; the event re-encodes within `decoded_bound`.
pub fn executor_event(data: &[u8]) {
    use crate::executor::health::HealthPolicy;
    use crate::mesos::v1::executor::event;
    let (choice, rest) = split_first(data);
    let encoding = if choice & 1 == 0 {
        Encoding::Protobuf
    } else {
        Encoding::Json
    };
    let Ok(event) = crate::executor::connection::decode_event(encoding, rest) else {
        return;
    };
    assert!(
        event.encoded_len() <= decoded_bound(rest.len()),
        "{} bytes of event from {} bytes",
        event.encoded_len(),
        rest.len()
    );
    let mut tasks = Vec::new();
    match event.r#type() {
        event::Type::Launch => tasks.extend(event.launch.iter().map(|l| &l.task)),
        event::Type::LaunchGroup => tasks.extend(
            event
                .launch_group
                .iter()
                .flat_map(|l| l.task_group.tasks.iter()),
        ),
        _ => {}
    }
    for task in tasks {
        let _ = crate::executor::tasks::task_command(task);
        if let Some(check) = &task.health_check {
            let _ = HealthPolicy::from_proto(check);
        }
    }
}

/// Service specs as an operator sends them: a body of `PUT
/// /api/v1/services/{name}` (strict JSON, [`crate::util::json::parse`], then
/// [`crate::scheduler::ServiceSpec`] and its validation) or, when the text
/// starts with `[`, a `--services` file
/// ([`crate::scheduler::spec::service::parse_services_file`]).
///
/// Invariants: no panic; a valid spec's stored form (the JSON the services
/// store writes) reads back as a spec.
pub fn service_spec(data: &[u8]) {
    use crate::scheduler::spec::ValidServiceSpec;
    use crate::scheduler::spec::service::parse_services_file;
    let specs = if data.first() == Some(&b'[') {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        parse_services_file(text).unwrap_or_default()
    } else {
        let Ok(value) = crate::util::json::parse::<serde_json::Value>(data) else {
            return;
        };
        let Ok(spec) = crate::util::json::from_value::<crate::scheduler::ServiceSpec>(value) else {
            return;
        };
        match ValidServiceSpec::new(spec) {
            Ok(valid) => vec![valid.into_inner()],
            Err(_) => Vec::new(),
        }
    };
    for spec in specs {
        let _ = spec.parsed_constraints();
        let stored = serde_json::to_vec(&spec).expect("a spec serializes");
        if let Err(e) = crate::util::json::parse::<crate::scheduler::ServiceSpec>(&stored) {
            panic!(
                "a valid spec's stored form does not read back: {e}: {}",
                String::from_utf8_lossy(&stored)
            );
        }
    }
}

/// The web layer's router as a leader with no tasks, and the runtime it
/// runs on. Built once: the fuzzer calls [`web_request`] many times a second.
struct Web {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
}

static WEB: LazyLock<Web> = LazyLock::new(|| {
    use crate::coordination::memory::MemoryCoordinator;
    use crate::coordination::{Leadership, ReplicaInfo, Strategy};
    use crate::scheduler::{FrameworkState, SchedulerHandle, Snapshot};
    use crate::web::{AppState, WebConfig, router};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    let replica = ReplicaInfo {
        replica_id: "replica-fuzz".into(),
        advertised_url: "http://127.0.0.1:8080".into(),
        deployment_id: "dep-fuzz".into(),
        version: "0.0.0".into(),
        started_at: 0,
    };
    let mut snapshot = Snapshot::standby(replica.clone(), "fuzz", "*", Strategy::Failover);
    snapshot.leadership = Leadership::Leader { term: 1 };
    snapshot.framework.state = FrameworkState::Subscribed;
    snapshot.framework.id = Some("fuzz-framework".into());
    let (_, snapshots) = tokio::sync::watch::channel(Arc::new(snapshot));
    // The command channel's receiver is dropped: a command would answer
    // "not the leader" at once (GET requests send none).
    let (commands, _) = tokio::sync::mpsc::channel(1);
    let router = runtime.block_on(async {
        let state = AppState::new(
            WebConfig::new(
                "127.0.0.1:0".parse().expect("a socket address"),
                "http://127.0.0.1:8080",
            ),
            SchedulerHandle::new(commands, snapshots),
            Arc::new(MemoryCoordinator::new(replica)),
            Arc::new(crate::scheduler::metrics::registry()),
        );
        router(state)
    });
    Web { runtime, router }
});

/// A GET of the web layer ([`crate::web::router`]: its paths, path
/// parameters and queries, [`crate::web::extract`] and
/// [`crate::web::query`]), on a leader with no tasks. The bytes are the
/// request target (path and query); targets that are not a URI are
/// refused by hyper before any handler and skipped here.
///
/// Invariants: no panic; no 500 (a path or query is refused with a 4xx;
/// the 502, 503 and 504 answers are about the cluster, such as `/readyz`
/// with no events, not about the request); an answer within a second.
pub fn web_request(data: &[u8]) {
    use tower::ServiceExt;
    let Ok(uri) = axum::http::Uri::try_from(data) else {
        return;
    };
    if uri.scheme().is_some() || !uri.path().starts_with('/') {
        return;
    }
    // The event stream never ends: its answer is a stream, not read here.
    let Ok(request) = axum::http::Request::get(uri).body(axum::body::Body::empty()) else {
        return;
    };
    let web = &*WEB;
    let response = web.runtime.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(1),
            web.router.clone().oneshot(request),
        )
        .await
    });
    let response = match response {
        Ok(Ok(response)) => response,
        Ok(Err(never)) => match never {},
        Err(_) => panic!("no answer within a second"),
    };
    assert_ne!(
        response.status(),
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "{} for GET {}",
        response.status(),
        String::from_utf8_lossy(data)
    );
}

/// The agent's `/files/read` answers ([`crate::mesos::sandbox`]): the first
/// answer (the size, read at offset -1) and the second (the data), and the
/// chunk made of them. Layout: byte 0 picks the read (bit 0: from an offset
/// or the tail; the offset is bytes 1..9, big-endian; bytes 9..11 the
/// length asked), bytes 11..13 the size answer's length `n` (big-endian),
/// then the size answer (`n` bytes) and the data answer (the rest).
///
/// Invariants: no panic; the chunk's length is at most the length asked
/// (capped at [`crate::mesos::sandbox::MAX_READ`]), its next offset is its
/// offset plus its length and the size at least that; the chunk is the
/// bytes answered less at most 3 at each end (a cut character), and a read
/// from an offset keeps its first byte (it always progresses).
pub fn files_read(data: &[u8]) {
    use crate::mesos::sandbox::{MAX_READ, chunk_of, files_answer, start_of};
    let Some((head, rest)) = data.split_at_checked(13) else {
        return;
    };
    let word = |range: std::ops::Range<usize>| {
        head[range]
            .iter()
            .fold(0u64, |n, b| (n << 8) | u64::from(*b))
    };
    let offset = (head[0] & 1 == 1).then(|| word(1..9));
    let length = word(9..11).min(MAX_READ);
    let first = (word(11..13) as usize).min(rest.len());
    let (size_answer, data_answer) = rest.split_at(first);
    let Ok((size, _)) = files_answer(200, size_answer) else {
        return;
    };
    let start = start_of(size, offset, length);
    let (at, bytes) = if start >= size || length == 0 {
        (start, Vec::new())
    } else {
        match files_answer(200, data_answer) {
            Ok(answer) => answer,
            Err(_) => return,
        }
    };
    let tail = offset.is_none() && at > 0;
    let chunk = chunk_of(
        size,
        at,
        bytes.clone(),
        length,
        tail,
        String::new(),
        String::new(),
    );
    assert!(chunk.length <= length, "{chunk:?}");
    assert_eq!(chunk.length, chunk.data.len() as u64);
    // The chunk is the bytes answered, less at most 3 at each end.
    let kept = bytes.len().min(length as usize);
    assert!(chunk.data.len() + 6 >= kept && chunk.data.len() <= kept);
    if !tail && kept > 0 {
        assert!(chunk.length > 0, "no progress: {chunk:?}");
        assert_eq!(&bytes[..chunk.data.len()], &chunk.data[..]);
    }
    assert_eq!(chunk.next_offset, chunk.offset.saturating_add(chunk.length));
    assert!(chunk.size >= chunk.next_offset, "{chunk:?}");
}

/// `mesos-appliance import marathon` ([`crate::marathon::import`]) on a
/// file the user gives: the JSON text.
///
/// Invariants: every spec made validates (as `PUT /api/v1/services`
/// would check it) and reads back from its stored form; every app ends
/// as a spec or a refusal, at most once refused.
pub fn marathon_import(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(out) = crate::marathon::import::import(text) else {
        return;
    };
    let mut refused = std::collections::BTreeSet::new();
    for note in &out.notes {
        if note.outcome == crate::marathon::Outcome::Refused {
            assert!(
                refused.insert(note.app.clone()),
                "{} refused twice",
                note.app
            );
        }
    }
    for spec in &out.specs {
        let errors = spec.validate();
        assert!(
            errors.is_empty(),
            "an imported spec does not validate: {errors:?}"
        );
        let stored = serde_json::to_vec(spec).expect("a spec serializes");
        let back: crate::scheduler::ServiceSpec =
            crate::util::json::parse(&stored).expect("a stored spec reads back");
        assert_eq!(&back, spec, "a spec's stored form reads back the same");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `fuzz/corpus/<target>/` (the minimised corpora and
    /// the crashes found, `docs/fuzzing.md`) goes through its target again.
    #[test]
    fn every_corpus_file_replays_without_breaking_an_invariant() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for target in TARGETS {
            let dir = root.join(target);
            let entries = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|entry| entry.expect("a directory entry").path());
            let mut files: Vec<_> = entries.collect();
            files.sort();
            assert!(!files.is_empty(), "{} has no corpus", dir.display());
            for file in files {
                let data = std::fs::read(&file).expect("a corpus file");
                let outcome = std::panic::catch_unwind(|| run(target, &data));
                assert!(
                    matches!(outcome, Ok(true)),
                    "{target}: {} breaks an invariant (replay: cargo fuzz run {target} {})",
                    file.display(),
                    file.display()
                );
            }
        }
    }

    #[test]
    fn a_length_prefix_of_2_to_the_63_allocates_nothing() {
        // Limit 32 KiB (choice 0x0f), chunks of 16 bytes.
        let mut data = vec![0x0f];
        data.extend_from_slice(b"9223372036854775808\nabc");
        recordio(&data);
        let (records, error) = decode_records(&data[1..], 16, 1 << 15);
        assert!(records.is_empty());
        assert!(matches!(
            error,
            Some(crate::mesos::recordio::RecordIoError::RecordTooLarge {
                announced: 9_223_372_036_854_775_808,
                ..
            })
        ));
    }

    #[test]
    fn unknown_enum_values_and_fields_are_tolerated() {
        use crate::mesos::v1::scheduler::Event;
        // type = 99 (no such event type) and field 1000 (no such field).
        let event = [0x08, 99, 0xc0, 0x3e, 0x01];
        let decoded = Event::decode(&event[..]).expect("decodes");
        assert_eq!(decoded.r#type, Some(99));
        scheduler_event(&[&[0u8][..], &crate::mesos::recordio::encode_record(&event)].concat());
        let json = br#"{"type":"HEARTBEAT","no_such_field":{"x":1}}"#;
        let decoded: Event = crate::mesos::json::from_slice(json).expect("decodes");
        assert_eq!(
            decoded.r#type(),
            crate::mesos::v1::scheduler::event::Type::Heartbeat
        );
    }
}
