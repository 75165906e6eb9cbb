//! The testbed's log of every API call it received, for test assertions
//! (e.g. "zero KILL and zero LAUNCH calls after failover").
//!
//! A busy master receives a call per status update, so the log is kept
//! lean: each entry holds the call protobuf-encoded (a few hundred bytes;
//! an ACCEPT of N tasks about N × 100), the framework and stream IDs shared
//! between consecutive entries, and is turned into Mesos JSON only when
//! someone reads it. Recording costs an encode, not a JSON conversion.

use std::collections::VecDeque;
use std::sync::Arc;

use prost::Message;
use serde::Serialize;

/// Calls kept; older ones are dropped first.
const MAX_CALLS: usize = 100_000;

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
    seq: u64,
    at: f64,
    api: &'static str,
    call_type: &'static str,
    framework_id: Option<Arc<str>>,
    stream_id: Option<Arc<str>>,
    status: u16,
    /// See [`CallRecord::dropped`].
    pub dropped: bool,
    body: Option<Body>,
}

impl Entry {
    fn record(&self) -> CallRecord {
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
#[derive(Debug, Default)]
pub(crate) struct CallLog {
    records: VecDeque<Entry>,
    next: u64,
}

impl CallLog {
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
        if self.records.len() >= MAX_CALLS {
            self.records.pop_front();
        }
        self.records.push_back(entry);
        self.records.back_mut().expect("just pushed")
    }

    /// All records, oldest first.
    pub fn all(&self) -> Vec<CallRecord> {
        self.records.iter().map(Entry::record).collect()
    }

    /// The records of calls of type `call_type` (e.g. `SUBSCRIBE`), oldest
    /// first; only those are turned into JSON.
    pub fn of_type(&self, call_type: &str) -> Vec<CallRecord> {
        self.records
            .iter()
            .filter(|e| e.call_type == call_type)
            .map(Entry::record)
            .collect()
    }
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
        let all = log.all();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].call, crate::mesos::json::to_value(&call));
        assert_eq!(all[0].call["acknowledge"]["task_id"]["value"], "t");
        assert_eq!(
            (all[0].framework_id.as_deref(), all[0].stream_id.as_deref()),
            (Some("f1"), Some("s"))
        );
        assert_eq!((all[1].seq, all[1].call_type.as_str()), (1, "-"));
        assert!(all[1].call.is_null());
        let acks = log.of_type("ACKNOWLEDGE");
        assert_eq!(acks.len(), 1);
        assert_eq!(acks[0].seq, 0);
        assert!(log.of_type("SUBSCRIBE").is_empty());
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
    }
}
