//! Injected faults (`docs/testbed.md#fault-api`): the state the fault API
//! (`testbed::api::control`) sets and the master's and agents' rules read.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::mesos::v1::scheduler::call;

/// Call types a real master answers 202 before acting on them
/// (`Master::Http::scheduler` in `src/master/http.cpp`): the ones a master
/// can lose after answering, which the drop-calls fault imitates.
pub(crate) const LOSABLE_CALLS: &[call::Type] = &[
    call::Type::Teardown,
    call::Type::Accept,
    call::Type::Decline,
    call::Type::AcceptInverseOffers,
    call::Type::DeclineInverseOffers,
    call::Type::Revive,
    call::Type::Kill,
    call::Type::Shutdown,
    call::Type::Acknowledge,
    call::Type::Reconcile,
    call::Type::Message,
    call::Type::Request,
    call::Type::Suppress,
];

/// The health a fault gives the checks of matching tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SimulatedHealth {
    /// Every check passes.
    Healthy,
    /// Every check fails.
    Unhealthy,
    /// Checks pass and fail in turn.
    Flapping,
}

/// A health fault: tasks whose ID starts with `task_id_prefix` and, if
/// `label` is set, that carry that label (`key`, `value`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HealthRule {
    pub task_id_prefix: String,
    pub label: Option<(String, String)>,
    pub health: SimulatedHealth,
}

/// A `task-exit` fault: a simulated task whose ID starts with
/// `task_id_prefix` (and that carries `label`, if set) exits with
/// `exit_code` `run` after its TASK_RUNNING (`master/finite.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExitRule {
    pub task_id_prefix: String,
    pub label: Option<(String, String)>,
    pub run: Duration,
    pub exit_code: u8,
}

/// Injected faults (see `api/control.rs`).
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// Heartbeats stopped for every framework.
    pub heartbeats_stopped: bool,
    /// Heartbeats stopped for these frameworks.
    pub heartbeats_stopped_for: Vec<String>,
    /// KILL of a task whose ID starts with one of these is ignored by its executor.
    pub ignore_kill: Vec<String>,
    /// A task whose ID starts with one of these stays in TASK_STAGING.
    pub hold_staging: Vec<String>,
    /// `/api/v1` answers 404, as on a master older than the v1 operator API
    /// (Mesos 1.1); the legacy endpoints still work.
    pub no_operator_api: bool,
    /// Scheduler calls still to lose, by call type name (`ACCEPT`): answered
    /// 202 and not acted on (`api/control.rs`).
    pub drop_calls: HashMap<String, u64>,
    /// Delay of every scheduler API answer (`api/scheduler_api.rs`).
    pub response_latency: Duration,
    /// Delay of every event on scheduler subscription streams, shared with
    /// the open streams (`master/stream.rs`).
    pub stream_latency: super::stream::SharedDelay,
    /// Results of simulated health checks, the last matching rule winning.
    pub health: Vec<HealthRule>,
    /// Run times and exit codes of simulated tasks, the last matching rule winning.
    pub exits: Vec<ExitRule>,
}

impl Faults {
    pub fn matches(prefixes: &[String], task_id: &str) -> bool {
        prefixes.iter().any(|p| task_id.starts_with(p.as_str()))
    }

    /// Forgets every fault; open streams lose their latency too.
    pub fn clear(&mut self) {
        let stream_latency = self.stream_latency.clone();
        stream_latency.set(Duration::ZERO);
        *self = Faults {
            stream_latency,
            ..Faults::default()
        };
    }

    /// Loses the next `count` scheduler calls of `call_type` (0: none).
    /// Errors (the 400 text) for a type a master does not answer 202 before
    /// acting on it (`scheduler_api::LOSABLE_CALLS`) or an absurd count.
    pub fn drop_next(&mut self, call_type: &str, count: u64) -> Result<(), String> {
        /// More is a typo.
        const MAX_DROPPED_CALLS: u64 = 1_000_000;
        let losable = LOSABLE_CALLS;
        if !losable.iter().any(|t| t.as_str_name() == call_type) {
            let names: Vec<&str> = losable.iter().map(|t| t.as_str_name()).collect();
            return Err(format!(
                "call_type {call_type:?} cannot be dropped; one of: {}",
                names.join(", ")
            ));
        }
        if count == 0 || count > MAX_DROPPED_CALLS {
            return Err(format!(
                "count must be 1 to {MAX_DROPPED_CALLS}, got {count}"
            ));
        }
        if count == 0 {
            self.drop_calls.remove(call_type);
        } else {
            self.drop_calls.insert(call_type.to_string(), count);
        }
        Ok(())
    }

    /// Delays scheduler stream events by `stream` (open streams too) and
    /// scheduler API answers by `response`.
    pub fn set_latency(&mut self, stream: Duration, response: Duration) {
        self.stream_latency.set(stream);
        self.response_latency = response;
    }

    /// Whether a scheduler call of `call_type` is to be lost; counts it.
    pub fn take_dropped_call(&mut self, call_type: &str) -> bool {
        match self.drop_calls.get_mut(call_type) {
            Some(left) if *left > 0 => {
                *left -= 1;
                if *left == 0 {
                    self.drop_calls.remove(call_type);
                }
                true
            }
            _ => false,
        }
    }
}
