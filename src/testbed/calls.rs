//! The testbed's log of every API call it received, for test assertions
//! (e.g. "zero KILL and zero LAUNCH calls after failover").

use std::collections::VecDeque;

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
    /// Which API: `scheduler`, `operator` (`/api/v1`) or `teardown` (`/master/teardown`).
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

/// A bounded, append-only call log.
#[derive(Debug, Default)]
pub(crate) struct CallLog {
    records: VecDeque<CallRecord>,
    next: u64,
}

impl CallLog {
    /// Appends a record, assigning its sequence number; returns it as stored.
    pub fn push(&mut self, mut record: CallRecord) -> &mut CallRecord {
        record.seq = self.next;
        self.next += 1;
        if self.records.len() >= MAX_CALLS {
            self.records.pop_front();
        }
        self.records.push_back(record);
        self.records.back_mut().expect("just pushed")
    }

    /// Records a call answered with `status`: `call_type` is the call's type
    /// name (`-` when the body did not parse) and `call` its Mesos JSON.
    /// Returns the record as stored.
    pub fn record<M: prost::Message + prost::Name>(
        &mut self,
        api: &str,
        call_type: Option<&str>,
        framework_id: Option<String>,
        stream_id: Option<String>,
        status: u16,
        call: Option<&M>,
    ) -> &mut CallRecord {
        self.push(CallRecord {
            seq: 0,
            at: crate::util::unix_now_secs(),
            api: api.to_string(),
            call_type: call_type.unwrap_or("-").to_string(),
            framework_id,
            stream_id,
            status,
            dropped: false,
            call: call.map(crate::mesos::json::to_value).unwrap_or_default(),
        })
    }

    /// All records, oldest first.
    pub fn all(&self) -> Vec<CallRecord> {
        self.records.iter().cloned().collect()
    }
}
