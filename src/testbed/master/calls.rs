//! The testbed's log of every API call it received, for test assertions
//! (e.g. "zero KILL and zero LAUNCH calls after failover").
//!
//! A busy master receives a call per status update, so the log is kept
//! lean: each entry holds the call protobuf-encoded (a few hundred bytes;
//! an ACCEPT of N tasks about N × 100), the framework and stream IDs shared
//! between consecutive entries, and is turned into Mesos JSON only when
//! someone reads it. Recording costs an encode, not a JSON conversion.
//!
//! The log is a ring bounded twice: the newest [`MAX_CALLS`] calls, and
//! [`MAX_CALL_BYTES`] of kept bytes; the oldest go first and are counted
//! ([`CallLog::evicted`]). Entries are shared (`Arc`), so a reader copies
//! pointers under the master's lock and turns them into JSON after
//! releasing it ([`CallLog::page`], [`render`]): an inspection read never
//! holds the master while it renders (`docs/testbed.md#inspection`).
//! Besides the ring, the log counts every call it ever recorded by type
//! ([`CallLog::counts`]), evicted or not: what a benchmark compares between
//! two schedulers (how many ACCEPTs, DECLINEs, ACKNOWLEDGEs each needed).

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::Arc;

use prost::Message;
use serde::Serialize;

/// Calls kept at most; older ones are evicted first.
pub(crate) const MAX_CALLS: usize = 100_000;
/// Bytes kept at most (encoded calls plus a fixed cost per entry): 64 MiB.
pub(crate) const MAX_CALL_BYTES: usize = 64 * 1024 * 1024;
/// What an entry costs besides its encoded call, in bytes (an estimate:
/// the entry itself, its `Arc` and ring slot).
const ENTRY_OVERHEAD: usize = 128;
/// Calls in one page of `GET /testbed/calls` unless `limit` says otherwise.
pub(crate) const DEFAULT_PAGE: usize = 1_000;
/// The largest `limit` of `GET /testbed/calls`.
pub(crate) const MAX_PAGE: usize = 10_000;

/// One call as the testbed saw it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// Position in the log, from 0.
    pub seq: u64,
    /// Arrival time, seconds since the UNIX epoch.
    pub at: f64,
    /// Which API: `scheduler`, `operator` (`/api/v1`), `teardown`
    /// (`/master/teardown`) or `executor` (an agent's `/api/v1/executor`).
    pub api: String,
    /// The call's type name (`SUBSCRIBE`, `ACCEPT`, …), or `-` if unparsable.
    pub call_type: String,
    /// `Call.framework_id` (scheduler), or the framework torn down (operator).
    pub framework_id: Option<String>,
    /// The request's `Mesos-Stream-Id` header; for a SUBSCRIBE, the stream
    /// ID its answer issued (`None` when it was refused).
    pub stream_id: Option<String>,
    /// HTTP status of the answer.
    pub status: u16,
    /// Answered but lost on purpose (the drop-calls fault): not acted on.
    pub dropped: bool,
    /// The call in Mesos JSON, or `null` if the body did not parse.
    pub call: serde_json::Value,
}

impl CallRecord {
    /// The LAUNCH operations' task IDs of an ACCEPT call (empty otherwise).
    pub fn launched_task_ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        let operations = self.call["accept"]["operations"].as_array();
        for op in operations.into_iter().flatten() {
            for task in op["launch"]["task_infos"].as_array().into_iter().flatten() {
                if let Some(id) = task["task_id"]["value"].as_str() {
                    ids.push(id.to_string());
                }
            }
        }
        ids
    }
}

/// A call as kept: the message encoded, and how to show it as JSON.
#[derive(Debug)]
struct Body {
    encoded: Box<[u8]>,
    to_json: fn(&[u8]) -> serde_json::Value,
}

/// One entry of the log.
#[derive(Debug)]
pub(crate) struct Entry {
    pub seq: u64,
    at: f64,
    pub api: &'static str,
    call_type: &'static str,
    framework_id: Option<Arc<str>>,
    stream_id: Option<Arc<str>>,
    status: u16,
    /// See [`CallRecord::dropped`].
    pub dropped: bool,
    body: Option<Body>,
}

impl Entry {
    /// Bytes this entry counts against [`MAX_CALL_BYTES`].
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD + self.body.as_ref().map_or(0, |b| b.encoded.len())
    }

    /// The entry as a [`CallRecord`]: decodes the call and builds its JSON.
    pub(crate) fn record(&self) -> CallRecord {
        CallRecord {
            seq: self.seq,
            at: self.at,
            api: self.api.to_string(),
            call_type: self.call_type.to_string(),
            framework_id: self.framework_id.as_deref().map(str::to_string),
            stream_id: self.stream_id.as_deref().map(str::to_string),
            status: self.status,
            dropped: self.dropped,
            call: self
                .body
                .as_ref()
                .map(|b| (b.to_json)(&b.encoded))
                .unwrap_or_default(),
        }
    }
}

/// Mesos JSON of an encoded `M` (`null` if it does not decode, which a
/// message the testbed encoded itself always does).
fn json_of<M: Message + prost::Name + Default>(encoded: &[u8]) -> serde_json::Value {
    M::decode(encoded)
        .map(|m| crate::mesos::json::to_value(&m))
        .unwrap_or_default()
}

/// A bounded, append-only call log.
#[derive(Debug)]
pub(crate) struct CallLog {
    records: VecDeque<Arc<Entry>>,
    next: u64,
    /// Bytes the kept entries cost ([`Entry::cost`]).
    bytes: usize,
    /// Entries evicted to stay within the bounds.
    evicted: u64,
    /// Calls recorded so far, by type name, evicted ones included.
    counts: BTreeMap<&'static str, u64>,
    max_calls: usize,
    max_bytes: usize,
}

impl Default for CallLog {
    fn default() -> CallLog {
        CallLog::bounded(MAX_CALLS, MAX_CALL_BYTES)
    }
}

/// Which calls a reader wants: `call_type` (`None` for all), from sequence
/// number `since`, at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    pub call_type: Option<String>,
    pub since: u64,
    pub limit: usize,
}

/// A page of the log: shared entries, cheap to take under the lock.
#[derive(Debug)]
pub(crate) struct Page {
    /// Calls recorded so far by type name, evicted ones included.
    pub counts: BTreeMap<&'static str, u64>,
    pub entries: Vec<Arc<Entry>>,
    /// The `since` that reads on after this page, if more calls matched.
    pub next: Option<u64>,
    /// Calls evicted from the log so far.
    pub evicted: u64,
    /// The oldest sequence number still kept (the next one when empty).
    pub first: u64,
}

impl CallLog {
    /// A log keeping at most `max_calls` entries and `max_bytes` bytes
    /// (the newest entry is kept whatever its size).
    pub fn bounded(max_calls: usize, max_bytes: usize) -> CallLog {
        CallLog {
            records: VecDeque::new(),
            next: 0,
            bytes: 0,
            evicted: 0,
            counts: BTreeMap::new(),
            max_calls: max_calls.max(1),
            max_bytes,
        }
    }

    /// Calls evicted so far to keep within the bounds.
    #[cfg(test)]
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// `id` as shared text: the newest entry's copy when it is the same
    /// (consecutive calls mostly come from one subscription).
    fn share(
        &self,
        id: Option<String>,
        field: impl Fn(&Entry) -> &Option<Arc<str>>,
    ) -> Option<Arc<str>> {
        let id = id?;
        match self.records.back().and_then(|e| field(e).as_ref()) {
            Some(last) if **last == *id => Some(last.clone()),
            _ => Some(id.into()),
        }
    }

    /// Records a call answered with `status`: `call_type` is the call's type
    /// name (`None` when the body did not parse) and `call` the message.
    /// Returns the entry as stored.
    pub fn record<M: Message + prost::Name + Default>(
        &mut self,
        api: &'static str,
        call_type: Option<&'static str>,
        framework_id: Option<String>,
        stream_id: Option<String>,
        status: u16,
        call: Option<&M>,
    ) -> &mut Entry {
        let entry = Entry {
            seq: self.next,
            at: crate::util::unix_now_secs(),
            api,
            call_type: call_type.unwrap_or("-"),
            framework_id: self.share(framework_id, |e| &e.framework_id),
            stream_id: self.share(stream_id, |e| &e.stream_id),
            status,
            dropped: false,
            body: call.map(|m| Body {
                encoded: m.encode_to_vec().into_boxed_slice(),
                to_json: json_of::<M>,
            }),
        };
        self.next += 1;
        *self.counts.entry(entry.call_type).or_default() += 1;
        self.bytes += entry.cost();
        self.records.push_back(Arc::new(entry));
        while self.records.len() > self.max_calls
            || (self.bytes > self.max_bytes && self.records.len() > 1)
        {
            let old = self.records.pop_front().expect("not empty");
            self.bytes -= old.cost();
            self.evicted += 1;
        }
        let last = self.records.back_mut().expect("just pushed");
        Arc::get_mut(last).expect("a new entry is not shared yet")
    }

    /// Every kept entry (of type `call_type` if given), oldest first:
    /// pointers, to turn into records outside the master's lock.
    pub fn entries(&self, call_type: Option<&str>) -> Vec<Arc<Entry>> {
        self.records
            .iter()
            .filter(|e| call_type.is_none_or(|t| e.call_type == t))
            .cloned()
            .collect()
    }

    /// The entries `selection` asks for, oldest first.
    pub fn page(&self, selection: &Selection) -> Page {
        // Sequence numbers are consecutive: the first wanted is found by
        // offset, not by a scan.
        let first = self.next - self.records.len() as u64;
        let skip = selection.since.saturating_sub(first) as usize;
        let mut matching = self.records.iter().skip(skip).filter(|e| {
            selection
                .call_type
                .as_deref()
                .is_none_or(|t| e.call_type == t)
        });
        let entries: Vec<Arc<Entry>> = matching.by_ref().take(selection.limit).cloned().collect();
        let next = matching.next().map(|e| e.seq);
        Page {
            counts: self.counts.clone(),
            entries,
            next,
            evicted: self.evicted,
            first,
        }
    }
}

/// Every call type name the log can hold: the scheduler's, the operator
/// API's and the executor's `Call.Type` names, and `-` (a body that did
/// not parse).
pub(crate) fn known_types() -> Vec<&'static str> {
    use crate::mesos::v1::{executor, master, scheduler};
    let mut names = vec!["-"];
    for i in 0..64 {
        names.extend(scheduler::call::Type::try_from(i).map(|t| t.as_str_name()));
        names.extend(master::call::Type::try_from(i).map(|t| t.as_str_name()));
        names.extend(executor::call::Type::try_from(i).map(|t| t.as_str_name()));
    }
    names.sort_unstable();
    names.dedup();
    names
}

/// `page` as the JSON body of `GET /testbed/calls`:
/// `{"calls": [CallRecord…], "next": seq|null, "first": seq, "evicted": n,
/// "counts": {"ACCEPT": n, …}}` (`counts`: every call recorded so far by
/// type, whatever the selection).
/// Each record is decoded, written and dropped in turn, so the memory it
/// takes is the body plus one record. Run it off the async workers
/// (`spawn_blocking`) for a big page.
pub(crate) fn render(page: &Page) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + page.entries.len() * 256);
    out.extend_from_slice(b"{\"calls\":[");
    for (i, entry) in page.entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &entry.record()).expect("a record serializes");
    }
    let tail = serde_json::json!({
        "next": page.next,
        "first": page.first,
        "evicted": page.evicted,
        "counts": page.counts,
    });
    let tail = tail.to_string();
    // `tail` is `{…}`: its fields follow the array.
    write!(out, "],{}", &tail[1..]).expect("writing to a Vec");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::v1::scheduler::{Call, call};

    fn ack(framework: &str) -> Call {
        Call {
            framework_id: Some(crate::mesos::v1::FrameworkId {
                value: framework.into(),
            }),
            r#type: Some(call::Type::Acknowledge as i32),
            acknowledge: Some(call::Acknowledge {
                agent_id: crate::mesos::v1::AgentId { value: "a".into() },
                task_id: crate::mesos::v1::TaskId { value: "t".into() },
                uuid: vec![7; 16],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn records_read_back_as_mesos_json_and_filter_by_type() {
        let mut log = CallLog::default();
        let call = ack("f1");
        log.record(
            "scheduler",
            Some("ACKNOWLEDGE"),
            Some("f1".into()),
            Some("s".into()),
            202,
            Some(&call),
        );
        log.record::<Call>("scheduler", None, None, None, 400, None);
        let records = |t| {
            log.entries(t)
                .iter()
                .map(|e| e.record())
                .collect::<Vec<_>>()
        };
        let all = records(None);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].call, crate::mesos::json::to_value(&call));
        assert_eq!(all[0].call["acknowledge"]["task_id"]["value"], "t");
        assert_eq!(
            (all[0].framework_id.as_deref(), all[0].stream_id.as_deref()),
            (Some("f1"), Some("s"))
        );
        assert_eq!((all[1].seq, all[1].call_type.as_str()), (1, "-"));
        assert!(all[1].call.is_null());
        let acks = records(Some("ACKNOWLEDGE"));
        assert_eq!(acks.len(), 1);
        assert_eq!(acks[0].seq, 0);
        assert!(records(Some("SUBSCRIBE")).is_empty());
    }

    #[test]
    fn consecutive_entries_share_their_ids_and_the_log_is_bounded() {
        let mut log = CallLog::default();
        for i in 0..3 {
            let framework = if i == 2 { "f2" } else { "f1" };
            log.record(
                "scheduler",
                Some("ACKNOWLEDGE"),
                Some(framework.into()),
                None,
                202,
                Some(&ack(framework)),
            );
        }
        let ids: Vec<_> = log
            .records
            .iter()
            .map(|e| e.framework_id.clone().unwrap())
            .collect();
        assert!(Arc::ptr_eq(&ids[0], &ids[1]));
        assert_eq!(&*ids[2], "f2");
        for _ in 0..MAX_CALLS {
            log.record::<Call>("scheduler", None, None, None, 400, None);
        }
        assert_eq!(log.records.len(), MAX_CALLS);
        assert_eq!(log.records.front().unwrap().seq, 3);
        assert_eq!(log.evicted(), 3);
    }

    fn fill(log: &mut CallLog, n: usize) {
        for i in 0..n {
            let call_type = if i % 2 == 0 { "ACKNOWLEDGE" } else { "DECLINE" };
            log.record(
                "scheduler",
                Some(call_type),
                None,
                None,
                202,
                Some(&ack("f")),
            );
        }
    }

    #[test]
    fn the_log_keeps_the_newest_calls_within_its_byte_budget_and_counts_the_rest() {
        let cost = ENTRY_OVERHEAD + ack("f").encoded_len();
        let mut log = CallLog::bounded(1_000, 10 * cost);
        fill(&mut log, 25);
        assert_eq!(log.records.len(), 10);
        assert_eq!(log.evicted(), 15);
        assert!(log.bytes <= 10 * cost, "{} bytes", log.bytes);
        let seqs: Vec<u64> = log.entries(None).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (15..25).collect::<Vec<_>>());
        // A call bigger than the whole budget is still kept, alone.
        let mut log = CallLog::bounded(1_000, 1);
        fill(&mut log, 3);
        assert_eq!((log.records.len(), log.evicted()), (1, 2));
    }

    #[test]
    fn pages_follow_since_and_limit_and_say_where_to_go_on() {
        let mut log = CallLog::bounded(100, usize::MAX);
        fill(&mut log, 130);
        let select = |call_type: Option<&str>, since, limit| Selection {
            call_type: call_type.map(str::to_string),
            since,
            limit,
        };
        // seq 0..30 were evicted: since 0 starts at the oldest kept.
        let page = log.page(&select(None, 0, 40));
        assert_eq!((page.first, page.evicted), (30, 30));
        assert_eq!(page.entries.first().map(|e| e.seq), Some(30));
        assert_eq!(page.entries.len(), 40);
        assert_eq!(page.next, Some(70));
        let page = log.page(&select(Some("DECLINE"), 100, 10));
        let seqs: Vec<u64> = page.entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (101..120).step_by(2).collect::<Vec<_>>());
        assert_eq!(page.next, Some(121));
        let page = log.page(&select(None, 125, 10));
        assert_eq!((page.entries.len(), page.next), (5, None));
        assert!(log.page(&select(None, 500, 10)).entries.is_empty());
        let body: serde_json::Value = serde_json::from_slice(&render(&page)).unwrap();
        assert_eq!(body["calls"][0]["seq"], 125);
        assert_eq!(
            body["calls"][0]["call"]["acknowledge"]["task_id"]["value"],
            "t"
        );
        assert_eq!(
            (&body["next"], &body["first"], &body["evicted"]),
            (&serde_json::Value::Null, &30.into(), &30.into())
        );
        // The counts cover every call recorded, the 30 evicted ones too.
        assert_eq!(
            body["counts"],
            serde_json::json!({"ACKNOWLEDGE": 65, "DECLINE": 65})
        );
    }

    #[test]
    fn known_types_span_the_three_apis() {
        let known = known_types();
        for name in [
            "SUBSCRIBE",
            "ACCEPT",
            "GET_FRAMEWORKS",
            "TEARDOWN",
            "UPDATE",
            "-",
        ] {
            assert!(known.contains(&name), "{name}");
        }
        assert!(!known.contains(&"UNKNOWN_TYPE_X"));
    }
}
