//! The `master/` room: the testbed master's state — frameworks, agents,
//! executors, offers and tasks, the timer heap, and event delivery to
//! subscription streams — and the master's rules on it, one file each:
//! `frameworks` (subscription, failover, removal), `allocator` (offers and
//! filters), `launch` (ACCEPT and task validation), `tasks` and
//! `task_table`, `updates` (status update streams), `operations` (KILL,
//! RECONCILE, MESSAGE, SHUTDOWN, executor exits), `unreachable` and `gone`
//! (agents lost and removed), `election` (ZooKeeper), `calls` (the call
//! log), `stream` (RecordIO streams), and the data the other rooms act on:
//! `faults` and `processes`.
//!
//! This room imports only `config` and `http`. What the agents do (real
//! executor processes, simulated health checks, containerizers) the master
//! asks for through the `agent_side::AgentSide` trait, which the `agents/`
//! room implements.
//!
//! Everything lives in one [`Master`] behind a mutex that is never held across
//! an `.await`; events are queued to subscription streams while it is held, so
//! their order is the order of the state changes. Timed behaviour (offers,
//! heartbeats, agents' progress, status update retries, failover timeouts) is
//! data in a timer heap, driven by one task in `mod.rs`.
//!
//! Sources: `src/master/master.cpp` (`subscribe`, `_subscribe`,
//! `failoverFramework`, `exited`, `frameworkFailoverTimeout`,
//! `removeFramework`), `docs/mesos-protocol.md#subscribe-and-the-framework-lifecycle`
//! and the real-master captures d, g, h, m, n.

pub(super) mod agent_side;
pub(super) mod allocator;
pub(super) mod calls;
pub mod drain;
pub(super) mod election;
pub(super) mod executor_table;
pub(super) mod faults;
pub(super) mod finite;
pub(super) mod frameworks;
pub(super) mod gone;
pub(super) mod launch;
pub(super) mod maintenance;
pub(super) mod operations;
pub(super) mod partition;
pub(super) mod processes;
pub(super) mod stream;
pub(super) mod task_table;
pub(super) mod tasks;
pub(super) mod unreachable;
pub(super) mod updates;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use self::agent_side::AgentSide;
use self::calls::CallLog;
use self::executor_table::ExecutorTable;
pub(crate) use self::faults::Faults;
use self::stream::Subscription;
use self::task_table::TaskTable;
use crate::mesos::resources::Resources;
use crate::mesos::v1;
use crate::mesos::v1::scheduler::{Event, event};
use crate::testbed::config::{AgentSpec, TestbedConfig};

/// The shared handle to the master state.
pub(crate) type Shared = Arc<Mutex<Master>>;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub(crate) struct App(pub(crate) Shared);

impl App {
    /// Locks the master; a poisoned lock is recovered (a panicking handler
    /// must not take the testbed down).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Master> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) use crate::util::{unix_now_nanos as now_nanos, unix_now_secs as now_secs};

/// An event of `kind` with no body.
pub(crate) fn bare_event(kind: event::Type) -> Event {
    Event {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// `ERROR{message}`.
pub(crate) fn error_event(message: &str) -> Event {
    Event {
        r#type: Some(event::Type::Error as i32),
        error: Some(event::Error {
            message: message.to_string(),
        }),
        ..Default::default()
    }
}

/// `UPDATE{status}`.
pub(crate) fn update_event(status: v1::TaskStatus) -> Event {
    Event {
        r#type: Some(event::Type::Update as i32),
        update: Some(event::Update { status }),
        ..Default::default()
    }
}

/// A scheduled piece of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Timer {
    /// An allocation round; `periodic` ones schedule the next round.
    Allocate { periodic: bool },
    /// The next HEARTBEAT of one subscription.
    Heartbeat {
        framework_id: String,
        stream_id: String,
    },
    /// A simulated executor starts a task (STAGING → STARTING → RUNNING).
    AgentLaunch {
        framework_id: String,
        task_id: String,
    },
    /// Re-send an unacknowledged status update.
    StatusRetry {
        framework_id: String,
        task_id: String,
        uuid: Vec<u8>,
    },
    /// A disconnected framework's failover timeout expires.
    FailoverTimeout {
        framework_id: String,
        generation: u64,
    },
    /// An agent re-registers after a simulated master failover.
    AgentReregister { agent_id: String, epoch: u64 },
    /// Process mode: executor registration, shutdown and agent restarts.
    Executor(processes::ExecutorTimer),
    /// A simulated executor's next health check of a task.
    HealthCheck {
        framework_id: String,
        task_id: String,
    },
    /// A simulated task's command exits (the `task-exit` fault, `master/finite.rs`).
    SimulatedExit {
        framework_id: String,
        task_id: String,
        /// The executor container that ran it: a later task of the same ID is not ended.
        container_id: String,
        exit_code: u8,
    },
}

#[derive(Debug, PartialEq, Eq)]
struct TimerEntry {
    at: Instant,
    seq: u64,
    timer: Timer,
}

impl Ord for TimerEntry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Whether this master may serve the APIs (`docs/mesos-protocol.md#leader-redirects`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Leadership {
    /// Serves every call.
    Leading,
    /// Redirects (307) to `//host:port`.
    Following { leader: String },
    /// Answers 503 `No leader elected`.
    NoLeader,
}

/// Decline filter: `resources` on an agent are not offered again to the
/// framework until `until` (hierarchical allocator's refused-resources filter).
#[derive(Debug, Clone)]
pub(crate) struct OfferFilter {
    pub resources: Resources,
    pub until: Instant,
}

/// A framework known to the master (active or not).
#[derive(Debug)]
pub(crate) struct Framework {
    pub id: String,
    pub info: v1::FrameworkInfo,
    /// The live subscription; `None` while disconnected.
    pub sub: Option<Subscription>,
    /// Learnt from a re-registering agent after a master failover.
    pub recovered: bool,
    pub registered_time: f64,
    pub reregistered_time: Option<f64>,
    pub unregistered_time: Option<f64>,
    /// Bumped on every (dis)connection so stale failover timers are ignored.
    pub generation: u64,
    pub suppressed: bool,
    /// Decline filters by agent ID, as the hierarchical allocator keeps
    /// them per framework and agent (`offerFilters` in `hierarchical.cpp`):
    /// an allocation round reads only the agent's own.
    pub filters: HashMap<String, Vec<OfferFilter>>,
    pub completed_tasks: VecDeque<self::tasks::Task>,
    /// Status updates of its tasks the agents sent again because their
    /// acknowledgement did not come within the retry interval (a sign the
    /// scheduler acknowledges late; `GET /testbed/frameworks`).
    pub updates_resent: u64,
}

impl Framework {
    pub(crate) fn new(id: String, info: v1::FrameworkInfo) -> Self {
        Framework {
            id,
            info,
            sub: None,
            recovered: false,
            registered_time: now_secs(),
            reregistered_time: None,
            unregistered_time: None,
            generation: 0,
            suppressed: false,
            filters: HashMap::new(),
            completed_tasks: VecDeque::new(),
            updates_resent: 0,
        }
    }

    /// True when the framework declared `capability`.
    pub fn has_capability(&self, capability: v1::framework_info::capability::Type) -> bool {
        self.info
            .capabilities
            .iter()
            .any(|c| c.r#type() == capability)
    }

    /// PARTITION_AWARE frameworks get TASK_UNREACHABLE / GONE / UNKNOWN / DROPPED
    /// where others get TASK_LOST (`docs/mesos-protocol.md#task-states`,
    /// `#explicit-reconciliation`).
    pub fn partition_aware(&self) -> bool {
        self.has_capability(v1::framework_info::capability::Type::PartitionAware)
    }

    /// MULTI_ROLE frameworks see `allocation_info` instead of `role` on resources.
    pub fn multi_role(&self) -> bool {
        self.has_capability(v1::framework_info::capability::Type::MultiRole)
    }

    /// Connected frameworks have a live subscription.
    pub fn connected(&self) -> bool {
        self.sub.is_some()
    }
}

/// Where a simulated agent stands with the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentState {
    /// Registered and reachable.
    Registered,
    /// Marked unreachable (fault injection); its tasks are unreachable.
    Unreachable { since_nanos: i64 },
    /// Known from the registry after a master failover but not re-registered
    /// yet: explicit reconciliation of its tasks gets no answer.
    Recovering,
    /// Marked gone by the operator (`master/gone.rs`): removed for good.
    Gone,
    /// Removed because its machine is DOWN for maintenance
    /// (`master/maintenance.rs`): back, without tasks, once it is UP.
    Down,
}

/// A simulated executor on an agent.
#[derive(Debug, Clone)]
pub(crate) struct Executor {
    /// `None` for the command executor (one per task, executor ID = task ID).
    pub info: Option<v1::ExecutorInfo>,
    pub resources: Resources,
    pub tasks: Vec<String>,
    pub container_id: String,
    pub pid: u32,
    /// Framework messages received (other than `kamikaze`).
    pub messages: Vec<Vec<u8>>,
}

/// A simulated agent.
#[derive(Debug)]
pub(crate) struct Agent {
    pub id: String,
    pub spec: AgentSpec,
    pub port: u16,
    pub registered_time: f64,
    pub state: AgentState,
    /// Resources of live tasks and custom executors.
    pub used: Resources,
    /// Resources in outstanding offers.
    pub offered: Resources,
    /// Executors by (framework ID, executor ID).
    pub executors: ExecutorTable,
}

impl Agent {
    /// Resources neither used nor offered.
    pub fn available(&self) -> Resources {
        let mut free = self.spec.resources.clone();
        free.subtract(&self.used);
        free.subtract(&self.offered);
        free
    }
}

/// The whole master.
pub(crate) struct Master {
    pub cfg: TestbedConfig,
    pub info: v1::MasterInfo,
    pub start_time: f64,
    pub elected_time: f64,
    pub leadership: Leadership,
    pub frameworks: HashMap<String, Framework>,
    pub completed: VecDeque<Framework>,
    pub agents: Vec<Agent>,
    /// Index in `agents` by agent ID (agents never change ID).
    pub(crate) agent_indexes: HashMap<String, usize>,
    /// Live tasks (including terminal ones whose update is not acknowledged).
    pub tasks: TaskTable,
    /// Tasks on unreachable agents.
    pub unreachable_tasks: TaskTable,
    /// Agents deactivated or drained by the operator (`master/drain.rs`).
    pub(crate) holds: self::drain::AgentHolds,
    pub offers: HashMap<String, self::allocator::OfferRecord>,
    pub calls: CallLog,
    pub faults: Faults,
    /// The maintenance schedule, inverse offers and DOWN machines.
    pub(crate) maintenance: maintenance::Maintenance,
    /// Incremented by every simulated master failover.
    pub epoch: u64,
    /// Frameworks' infos remembered across a simulated master failover, to
    /// recover them when their agents re-register.
    pub recovery_infos: HashMap<String, v1::FrameworkInfo>,
    pub(crate) next_framework: u64,
    pub(crate) next_offer: u64,
    /// Process mode: real executor processes and the agents' endpoints.
    pub(crate) processes: processes::Processes,
    timers: BinaryHeap<Reverse<TimerEntry>>,
    timer_seq: u64,
    pub wake: Arc<Notify>,
    /// Weak self-reference handed to subscription streams.
    pub this: Weak<Mutex<Master>>,
}

impl Master {
    /// A master for `cfg` with its agents registered. `port` is the port the
    /// HTTP server actually listens on.
    pub fn new(cfg: TestbedConfig, port: u16) -> Self {
        let id = uuid::Uuid::new_v4().to_string();
        let ip = cfg.listen.ip();
        let hostname = cfg.hostname.clone().unwrap_or_else(|| ip.to_string());
        let info = master_info(&id, &hostname, ip, port, &cfg.version);
        let now = now_secs();
        let agents = cfg
            .agents
            .iter()
            .enumerate()
            .map(|(i, spec)| Agent {
                id: format!("{id}-S{i}"),
                spec: spec.clone(),
                port: 5051u16.saturating_add(i as u16),
                registered_time: now,
                state: AgentState::Registered,
                used: Resources::new(),
                offered: Resources::new(),
                executors: ExecutorTable::default(),
            })
            .collect::<Vec<Agent>>();
        let agent_indexes = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id.clone(), i))
            .collect();
        Master {
            cfg,
            info,
            start_time: now,
            elected_time: now,
            leadership: Leadership::Leading,
            frameworks: HashMap::new(),
            completed: VecDeque::new(),
            agents,
            agent_indexes,
            tasks: TaskTable::default(),
            unreachable_tasks: TaskTable::default(),
            holds: Default::default(),
            offers: HashMap::new(),
            calls: CallLog::default(),
            faults: Faults::default(),
            maintenance: Default::default(),
            epoch: 0,
            recovery_infos: HashMap::new(),
            next_framework: 0,
            next_offer: 0,
            processes: Default::default(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            wake: Arc::new(Notify::new()),
            this: Weak::new(),
        }
    }

    /// The master's `host:port` as advertised.
    pub fn advertised(&self) -> String {
        let addr = self.info.address.as_ref();
        format!(
            "{}:{}",
            addr.and_then(|a| a.hostname.clone()).unwrap_or_default(),
            self.info.port
        )
    }

    // ---- timers -----------------------------------------------------------

    /// Schedules `timer` after `delay`.
    pub fn schedule(&mut self, delay: Duration, timer: Timer) {
        // A delay too long to represent (a failover timeout of centuries) never fires.
        let Some(at) = Instant::now().checked_add(delay) else {
            return;
        };
        self.timer_seq += 1;
        self.timers.push(Reverse(TimerEntry {
            at,
            seq: self.timer_seq,
            timer,
        }));
        self.wake.notify_one();
    }

    /// When the next timer is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse(e)| e.at)
    }

    /// Runs the timers due at `now`, oldest first, at most `limit` of them;
    /// true when more are due. The caller holds the master's lock for the
    /// whole batch: 100,000 launches due at once would otherwise keep every
    /// call (an ACCEPT, an ACKNOWLEDGE) waiting until all had run. A real
    /// master's actor likewise takes its messages one at a time, calls and
    /// agents' messages interleaved in arrival order
    /// (`3rdparty/libprocess/src/process.cpp`, `ProcessManager::resume`).
    pub fn run_due_timers(&mut self, now: Instant, limit: usize) -> bool {
        for _ in 0..limit {
            match self.timers.peek() {
                Some(Reverse(entry)) if entry.at <= now => {}
                _ => return false,
            }
            let Some(Reverse(entry)) = self.timers.pop() else {
                return false;
            };
            self.fire(entry.timer);
        }
        self.timers.peek().is_some_and(|Reverse(e)| e.at <= now)
    }

    fn fire(&mut self, timer: Timer) {
        match timer {
            Timer::Allocate { periodic } => {
                if self.leadership == Leadership::Leading {
                    self.allocate();
                    self.allocate_inverse_offers();
                }
                if periodic {
                    let interval = self.cfg.allocation_interval;
                    self.schedule(interval, Timer::Allocate { periodic: true });
                }
            }
            Timer::Heartbeat {
                framework_id,
                stream_id,
            } => self.heartbeat(&framework_id, &stream_id),
            Timer::AgentLaunch {
                framework_id,
                task_id,
            } => self.executor_starts_task(&framework_id, &task_id),
            Timer::StatusRetry {
                framework_id,
                task_id,
                uuid,
            } => self.retry_status_update(&framework_id, &task_id, &uuid),
            Timer::FailoverTimeout {
                framework_id,
                generation,
            } => {
                // master.cpp frameworkFailoverTimeout: only if still disconnected
                // since the disconnection that armed this timer.
                let expired = self
                    .frameworks
                    .get(&framework_id)
                    .is_some_and(|f| !f.connected() && f.generation == generation);
                if expired {
                    tracing::info!(%framework_id, "framework failover timeout, removing framework");
                    self.remove_framework(&framework_id);
                }
            }
            Timer::AgentReregister { agent_id, epoch } => {
                if epoch == self.epoch {
                    self.agent_reregisters(&agent_id);
                }
            }
            Timer::Executor(timer) => self.agent_timer(timer),
            Timer::HealthCheck {
                framework_id,
                task_id,
            } => self.agent_health_check(&framework_id, &task_id),
            Timer::SimulatedExit {
                framework_id,
                task_id,
                container_id,
                exit_code,
            } => self.simulated_exit(&framework_id, &task_id, &container_id, exit_code),
        }
    }

    // ---- events -------------------------------------------------------------

    /// Sends each framework its batch (from [`push_batch`]) as one event
    /// that `event` builds: one OFFERS or INVERSE_OFFERS per framework and
    /// allocation round, as the allocator's offer callback does
    /// (src/master/allocator/mesos/hierarchical.cpp).
    pub(crate) fn send_batches<T>(
        &mut self,
        batches: Vec<(String, Vec<T>)>,
        event: impl Fn(Vec<T>) -> Event,
    ) {
        for (framework_id, items) in batches {
            self.send(&framework_id, &event(items));
        }
    }

    /// Queues `event` on the framework's stream. A framework that is not
    /// connected does not get it (master.cpp drops events for disconnected
    /// frameworks); one whose queue is full is disconnected.
    pub fn send(&mut self, framework_id: &str, event: &Event) -> bool {
        let Some(framework) = self.frameworks.get(framework_id) else {
            return false;
        };
        let Some(sub) = &framework.sub else {
            return false;
        };
        if sub.send(event) {
            return true;
        }
        tracing::warn!(%framework_id, "subscription queue full or closed; disconnecting");
        self.disconnect(framework_id, true);
        false
    }

    /// One HEARTBEAT on the framework's current stream, then the next one
    /// an interval later — the master's per-subscription heartbeater
    /// (`src/common/heartbeater.hpp`, started by `Framework::heartbeat` in
    /// `src/master/framework.cpp` with `DEFAULT_HEARTBEAT_INTERVAL` from
    /// `src/master/constants.hpp`). A timer
    /// for a stream that was replaced or closed ends the series.
    pub(crate) fn heartbeat(&mut self, framework_id: &str, stream_id: &str) {
        let current = self
            .frameworks
            .get(framework_id)
            .and_then(|f| f.sub.as_ref())
            .is_some_and(|s| s.stream_id == stream_id);
        if !current {
            return;
        }
        let stopped = self.faults.heartbeats_stopped
            || self
                .faults
                .heartbeats_stopped_for
                .iter()
                .any(|f| f == framework_id);
        if !stopped {
            self.send(framework_id, &bare_event(event::Type::Heartbeat));
        }
        self.schedule(
            self.cfg.heartbeat_interval,
            Timer::Heartbeat {
                framework_id: framework_id.to_string(),
                stream_id: stream_id.to_string(),
            },
        );
    }

    /// The framework of a live or unreachable task, if the master knows it.
    pub fn framework(&self, framework_id: &str) -> Option<&Framework> {
        self.frameworks.get(framework_id)
    }
}

/// Adds `item` to `framework_id`'s batch (one event per framework and
/// allocation round, in the order frameworks first got something).
pub(crate) fn push_batch<T>(batches: &mut Vec<(String, Vec<T>)>, framework_id: String, item: T) {
    match batches.iter_mut().find(|(f, _)| *f == framework_id) {
        Some((_, items)) => items.push(item),
        None => batches.push((framework_id, vec![item])),
    }
}

/// Appends to a bounded queue, dropping the oldest entry when full.
pub(crate) fn push_bounded<T>(queue: &mut VecDeque<T>, item: T, limit: usize) {
    queue.push_back(item);
    while queue.len() > limit {
        queue.pop_front();
    }
}

/// MasterInfo as a real master fills it (capture a): `ip` is the IPv4 address
/// in network byte order read as a native little-endian integer.
pub(crate) fn master_info(
    id: &str,
    hostname: &str,
    ip: std::net::IpAddr,
    port: u16,
    version: &str,
) -> v1::MasterInfo {
    let ip_u32 = match ip {
        std::net::IpAddr::V4(v4) => u32::from_le_bytes(v4.octets()),
        std::net::IpAddr::V6(_) => 0,
    };
    use v1::master_info::capability::Type;
    v1::MasterInfo {
        id: id.to_string(),
        ip: ip_u32,
        port: port as u32,
        pid: Some(format!("master@{ip}:{port}")),
        hostname: Some(hostname.to_string()),
        version: Some(version.to_string()),
        address: Some(v1::Address {
            hostname: Some(hostname.to_string()),
            ip: Some(ip.to_string()),
            port: port as i32,
        }),
        capabilities: [Type::AgentUpdate, Type::AgentDraining, Type::QuotaV2]
            .into_iter()
            .map(|t| v1::master_info::Capability {
                r#type: Some(t as i32),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_timers_run_in_bounded_batches() {
        let mut master = Master::new(TestbedConfig::for_tests(1), 5050);
        for i in 0..5 {
            master.schedule(
                Duration::ZERO,
                Timer::AgentLaunch {
                    framework_id: "f".into(),
                    task_id: format!("t{i}"),
                },
            );
        }
        master.schedule(
            Duration::from_secs(3600),
            Timer::Allocate { periodic: false },
        );
        let now = Instant::now();
        assert!(master.run_due_timers(now, 2), "3 of 5 still due");
        assert_eq!(master.timers.len(), 4);
        assert!(
            !master.run_due_timers(now, 3),
            "the last 3 run, none left due"
        );
        assert_eq!(master.timers.len(), 1, "the timer not due stays");
        assert!(!master.run_due_timers(now, 3));
        assert_eq!(master.timers.len(), 1);
    }
}
