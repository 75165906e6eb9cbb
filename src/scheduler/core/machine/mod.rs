//! The leader's state machine: [`Machine`]. See the [module doc of the
//! core](super) for the contract; this file holds the state and the dispatch
//! of inputs and results. The rules live in the child
//! modules:
//!
//! - `startup`: the term's first reads, `hard`'s teardown, the services
//!   file, loading the task records;
//! - `framework`: the Mesos client's life: the same-name check, "wary",
//!   SUBSCRIBED, disconnection, refusals, the framework-ID checks, forgetting
//!   the framework (teardown, reregister);
//! - `removed`: a framework the master removed: live records become
//!   TASK_KILLED as the master recorded them, without a KILL;
//! - `service_table`: the known services, each with its per-term state
//!   (backoff, rollout deadline, cached pass and snapshot results), and the
//!   service writes in flight;
//! - `tasks`: status updates and the answers to task writes,
//!   acknowledgements (the table and its per-task write queue: `table`);
//! - `kill_marks`: a kill or a new instance number stored in the record
//!   before it is acted on;
//! - `schedule`: the scheduling pass, placement and launches;
//! - `agents`: the agent table (drained, deactivated, lost agents) and
//!   the offers of agents that take no new task;
//! - `calls`: what follows on the wire: ACCEPT once the records are
//!   stored, DECLINE, SUPPRESS, REVIVE, KILLs, and their answers;
//! - `revive`: when a new need for offers must REVIVE;
//! - `housekeeping`: offer expiry, stuck tasks, old records;
//! - `partition`: unreachable and unknown tasks, a copy back from a
//!   partition (the rules: `rules/partition.rs`);
//! - `lag`: how far behind the Mesos stream the machine is;
//! - `health_log`: health changes on the events page, coalesced per task;
//! - `commands`: the web layer's commands;
//! - `jobs`: job records, triggers, runs and their attempts (`docs/jobs.md`);
//! - `maintenance`: offers with `unavailability`, answers to inverse
//!   offers, tasks moved off an agent before its window;
//! - `drains`: the appliance's SLA-aware drain of an agent (stored, held,
//!   done, cancelled); `evacuation`: the rule that moves tasks off an agent
//!   (replacement first, kill once it is available, a floor kept), shared
//!   by maintenance and drains;
//! - `rollout`: health-gated rollouts' deadline, halt, resume, rollback;
//! - `view`: the snapshot; `tally`: its per-service counts kept as the
//!   records change;
//! - `why`: each service's last failure and the offers it was not
//!   launched on, by reason ("why isn't it running?");
//! - `outbox`: the effects a step collects, and its close (`finish`).

mod agents;
mod aging;
mod audit;
mod by_agent;
mod calls;
mod commands;
mod drains;
mod evacuation;
mod forget;
mod framework;
mod health_log;
mod housekeeping;
mod jobs;
mod kill_marks;
mod lag;
mod maintenance;
mod outbox;
mod pacing;
mod partition;
mod reconciliation;
mod removed;
mod revive;
mod rollout;
mod schedule;
mod service_table;
mod startup;
mod stats;
mod table;
mod tally;
mod tasks;
mod view;
mod why;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::io::{Effect, Effects, Input, RequestId};
use super::{Mismatch, TermOutcome};
use crate::coordination::{ReplicaInfo, Strategy};
use crate::mesos::v1;
use crate::scheduler::config::CoreConfig;
use crate::scheduler::ids::AgentId;
use crate::scheduler::ids::IdSource;
use crate::scheduler::rules::kills::KillQueue;
use crate::scheduler::rules::offers::OfferRegistry;
use crate::scheduler::rules::reconcile::Reconciler;
use crate::scheduler::snapshot::{EventKind, FrameworkState};
use crate::scheduler::spec::service::ServiceSpec;
use outbox::Outbox;

use framework::Framework;
pub use maintenance::Window as MaintenanceWindow;
use service_table::ServiceTable;
use startup::Startup;
pub use stats::Stats;
use table::TaskTable;

/// Events kept for the events page.
const EVENT_LOG_LEN: usize = 500;
/// Housekeeping period: offer expiry, stuck tasks, record clean-up, the
/// scheduling pass when nothing else triggered one.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// What a term starts from, besides the configuration.
#[derive(Debug, Clone)]
pub struct TermInfo {
    /// The leadership term (from 1).
    pub term: u64,
    /// This replica, for snapshots.
    pub replica: ReplicaInfo,
    /// The previous term ended because another scheduler took the framework
    /// ID: check on the master that nobody drives it before subscribing.
    pub wary: bool,
    /// `--services`, written when ZooKeeper holds none (or always, with
    /// `replace_services`).
    pub initial_services: Vec<ServiceSpec>,
    /// Where task IDs come from: seeded in tests, from the OS in production.
    pub ids: IdSource,
    /// The ID of this term's first reconciliation run: the runner continues
    /// the previous term's count ([`Machine::next_run_id`]), so run IDs stay
    /// unique in the process (the pages' history keeps a watermark on them).
    pub first_run_id: u64,
}

/// Maps the machine's monotonic time to wall-clock seconds, for records and
/// pages: fixed at the start of the term, so paused time drives both.
#[derive(Debug, Clone, Copy)]
struct Clock {
    base: Instant,
    base_unix: f64,
}

impl Clock {
    fn unix(&self, now: Instant) -> f64 {
        if now >= self.base {
            self.base_unix + (now - self.base).as_secs_f64()
        } else {
            self.base_unix - (self.base - now).as_secs_f64()
        }
    }
}

/// What a request in flight was for: the machine's side of a
/// [`RequestId`]. The variants' data is what the answer needs.
#[derive(Debug)]
enum Pending {
    Startup(startup::Step),
    Framework(framework::Step),
    Task(tasks::Step),
    Schedule(schedule::Step),
    Command(commands::Step),
    /// A maintenance call or audit entry: its answer changes nothing.
    Maintenance,
    /// A GET_AGENTS (`agents`).
    Agents,
    /// A drain's read, write or `then` call (`drains`).
    Drain(drains::Step),
    /// A job or run record (`jobs`).
    Jobs(jobs::Step),
}

/// The leader's state for one term, driven by [`Input`]s. See the module
/// doc of [the core](super).
pub struct Machine {
    cfg: CoreConfig,
    term: TermInfo,
    /// Counts for the metrics, taken by the runner.
    stats: Stats,
    clock: Clock,
    out: Outbox,
    pending: HashMap<RequestId, Pending>,
    startup: Startup,
    framework: Framework,
    /// The known services with their state, and the service writes.
    services: ServiceTable,
    /// The jobs with their runs.
    jobs: jobs::Jobs,
    tasks: TaskTable,
    kills: KillQueue,
    offers: OfferRegistry,
    agent_attributes: HashMap<AgentId, Vec<v1::Attribute>>,
    /// Agents' maintenance windows and the agents being emptied.
    maintenance: maintenance::Maintenance,
    agents: agents::AgentTable,
    /// The appliance's drains of agents.
    drains: drains::Drains,
    reconciler: Reconciler,
    /// The task ID source of the term.
    ids: IdSource,
    /// SUPPRESS is in effect (or on its way).
    suppressed: bool,
    /// New needs for offers and the filters that may hide them.
    revive: revive::ReviveWatch,
    launches: schedule::Launches,
    /// The task list of the last full snapshot (a command's answer
    /// publishes it again with what the command changed).
    shown_tasks: std::sync::Arc<[std::sync::Arc<crate::scheduler::records::TaskRecord>]>,
    /// The table's [`TaskTable::stored_generation`] when `shown_tasks`
    /// and `shown_agent_tasks` were built (`None`: never).
    shown_tasks_at: Option<u64>,
    /// The held offers as last shown, with the registry's generation then
    /// (`OfferRegistry::generation`).
    shown_offers: (
        u64,
        std::sync::Arc<[crate::scheduler::snapshot::OfferSummary]>,
    ),
    /// The live tasks of `shown_tasks` by agent (`TaskTable::tasks_by_agent`).
    shown_agent_tasks: HashMap<AgentId, std::sync::Arc<[crate::scheduler::ids::TaskId]>>,
    /// Each drained agent's tasks and how far each has moved, as the last
    /// full snapshot found them (`drains::drain_tasks`): the light ones
    /// between show them with the drain's record as it is now.
    shown_drain_tasks: HashMap<AgentId, Vec<crate::scheduler::drains::DrainTask>>,
    /// Each service's tasks launched and not running yet, and the last
    /// update of the one so longest, as the last full snapshot found them
    /// (`view.rs`).
    shown_starting: HashMap<String, (u32, f64)>,
    kamikazes: commands::Kamikazes,
    health_log: health_log::HealthLog,
    /// A scheduling pass is due at the next [`Machine::settle`] (once
    /// `cfg.schedule_interval` has passed since the last one).
    needs_schedule: bool,
    /// When the last scheduling pass ran.
    last_schedule: Option<Instant>,
    /// Records the last scheduling pass read (it paces the next one).
    last_pass_records: usize,
    /// Where the next scheduling pass resumes, and its record budget.
    pass: schedule::PassBound,
    next_housekeeping: Instant,
    last_publish: Option<Instant>,
    /// When applied events were read off the stream, and those waiting.
    lag: lag::EventLag,
    /// The term is ending: nothing more is started.
    ending: bool,
    /// Last failures and passed-over offers, per service (`why`).
    why: why::Why,
}

impl Machine {
    /// A machine for one term, its clock anchored at `now` = `now_unix`
    /// (seconds since the UNIX epoch). Call [`Machine::start`] next.
    pub fn new(cfg: CoreConfig, term: TermInfo, now: Instant, now_unix: f64) -> Machine {
        let kills = KillQueue::new(cfg.kill_retry_min, cfg.kill_retry_max);
        Machine {
            offers: OfferRegistry::new(cfg.offer_ttl, cfg.offer_linger),
            reconciler: Reconciler::new(cfg.reconcile.clone(), now)
                .with_first_run_id(term.first_run_id),
            ids: term.ids.clone(),
            framework: Framework::new(term.wary, now + cfg.framework_id_refresh_interval),
            kills,
            clock: Clock {
                base: now,
                base_unix: now_unix,
            },
            term,
            stats: Stats::default(),
            out: Outbox::default(),
            pending: HashMap::new(),
            startup: Startup::default(),
            services: ServiceTable::default(),
            jobs: jobs::Jobs::default(),
            tasks: TaskTable::default(),
            agent_attributes: HashMap::new(),
            maintenance: Default::default(),
            agents: Default::default(),
            drains: Default::default(),
            suppressed: false,
            revive: Default::default(),
            launches: schedule::Launches::default(),
            shown_tasks: Default::default(),
            shown_tasks_at: None,
            shown_offers: (u64::MAX, std::sync::Arc::from([])),
            shown_agent_tasks: HashMap::new(),
            shown_drain_tasks: HashMap::new(),
            shown_starting: HashMap::new(),
            kamikazes: commands::Kamikazes::default(),
            health_log: Default::default(),
            needs_schedule: false,
            last_schedule: None,
            last_pass_records: 0,
            pass: schedule::PassBound::default(),
            next_housekeeping: now + HOUSEKEEPING,
            last_publish: None,
            lag: lag::EventLag::default(),
            ending: false,
            why: why::Why::default(),
            cfg,
        }
    }

    /// Begins the term: the first reads (framework ID, services, and the
    /// deployment under `hard`). Nothing O(tasks) happens before the
    /// client subscribes: the task records are read next to it.
    pub fn start(&mut self, now: Instant) -> Effects {
        self.log(
            EventKind::Leadership,
            format!("became leader (term {})", self.term.term),
            now,
        );
        self.out.publish_now = true;
        self.begin_startup(now);
        self.finish(now)
    }

    /// The ID the next reconciliation run of this term would get: the
    /// next term starts its count there.
    pub fn next_run_id(&self) -> u64 {
        self.reconciler.next_run_id()
    }

    /// Handles one input.
    pub fn handle(&mut self, input: Input, now: Instant) -> Effects {
        if self.ending {
            // Only the final snapshot is left to make (`end`).
            return Effects::default();
        }
        match input {
            Input::Subscribed(info) => {
                self.lag.applied(now);
                self.agents.poll_soon();
                self.on_subscribed(info, now);
            }
            Input::Offers(offers) => {
                self.lag.applied(now);
                self.agents_from_offers(&offers, now);
                self.on_offers(offers, now);
            }
            Input::Rescind(offer_id) => {
                self.lag.applied(now);
                self.on_rescind(&offer_id, now);
            }
            Input::InverseOffers(offers) => {
                self.lag.applied(now);
                self.on_inverse_offers(offers, now);
            }
            Input::RescindInverseOffer(id) => {
                self.lag.applied(now);
                self.on_rescind_inverse_offer(&id, now);
            }
            Input::Updates(statuses) => {
                self.lag.applied(now);
                for status in &statuses {
                    self.agents_from_update(status, now);
                }
                self.on_updates(statuses, now);
            }
            Input::AgentLost(agent_id) => {
                self.lag.applied(now);
                self.agent_failed(&agent_id, now);
                self.on_agent_lost(&agent_id, now);
            }
            Input::ExecutorExited {
                agent_id,
                executor_id,
                status,
            } => {
                self.lag.applied(now);
                self.log(
                    EventKind::Agent,
                    format!(
                        "executor {executor_id} on agent {agent_id} exited (wait status {})",
                        status.unwrap_or(0)
                    ),
                    now,
                );
            }
            Input::FrameworkMessage { executor_id, bytes } => {
                self.lag.applied(now);
                self.log(
                    EventKind::Message,
                    format!("framework message from executor {executor_id} ({bytes} bytes)"),
                    now,
                );
            }
            Input::Heartbeat | Input::OtherEvent => {
                // Only `last_event_at` changed; the snapshot shows it.
                self.lag.applied(now);
                self.out.dirty = true;
            }
            Input::Disconnected(reason) => self.on_disconnected(reason, now),
            Input::ClientStopped(reason) => self.on_client_stopped(reason, now),
            Input::Stored { id, result } => match self.pending.remove(&id) {
                Some(Pending::Startup(step)) => self.on_startup_stored(step, result, now),
                Some(Pending::Framework(step)) => self.on_framework_stored(step, result, now),
                Some(Pending::Task(step)) => self.on_task_stored(step, result, now),
                Some(Pending::Command(step)) => self.on_command_stored(step, result, now),
                Some(Pending::Drain(step)) => self.on_drain_stored(step, result, now),
                Some(Pending::Jobs(step)) => self.on_jobs_stored(step, result, now),
                Some(other) => self.unexpected(id, &other),
                None => {}
            },
            Input::Called { id, result } => match self.pending.remove(&id) {
                Some(Pending::Schedule(step)) => self.on_called(step, result, now),
                Some(Pending::Command(step)) => self.on_command_called(step, result, now),
                Some(Pending::Maintenance) => {
                    if let Err(e) = result {
                        tracing::warn!(error = %e, "maintenance call failed");
                    }
                }
                Some(other) => self.unexpected(id, &other),
                None => {}
            },
            Input::Operator { id, answer } => match self.pending.remove(&id) {
                Some(Pending::Startup(step)) => self.on_startup_operator(step, answer, now),
                Some(Pending::Framework(step)) => self.on_framework_operator(step, answer, now),
                Some(Pending::Agents) => self.on_agents_listed(answer, now),
                Some(Pending::Drain(step)) => self.on_drain_operator(step, answer, now),
                Some(other) => self.unexpected(id, &other),
                None => {}
            },
            Input::Command { id, request } => self.on_command(id, request, now),
            Input::Tick => self.on_tick(now),
        }
        self.finish(now)
    }

    /// Runs what was deferred while inputs kept coming: the scheduling pass
    /// (at most one per batch of inputs, however many asked for it, and at
    /// most one per `cfg.schedule_interval`: a pass reads every record, and
    /// a launch of N tasks brings 2N updates and 2N stored writes) and the
    /// throttled snapshot. The runner calls it when its queue is empty or
    /// after a bounded batch; a pass put off is due at [`Effects::wake_at`].
    /// Both are paced by the records they read (see `pacing`).
    pub fn settle(&mut self, now: Instant) -> Effects {
        if !self.ending && self.needs_schedule && self.schedule_due(now) <= now {
            self.needs_schedule = false;
            self.last_schedule = Some(now);
            self.schedule(now);
        }
        self.finish(now)
    }

    /// When the next scheduling pass may run: `cfg.schedule_interval`
    /// after the last one, or longer after one that read many records
    /// (`pacing`).
    fn schedule_due(&self, now: Instant) -> Instant {
        let pause = pacing::interval(
            self.cfg.schedule_interval,
            self.last_pass_records,
            pacing::PASS_PER_RECORD,
        );
        self.last_schedule.map_or(now, |t| t + pause)
    }

    /// The pause between snapshots: `cfg.snapshot_interval`, or longer
    /// with many records (`pacing`).
    fn snapshot_pause(&self) -> std::time::Duration {
        pacing::interval(
            self.cfg.snapshot_interval,
            self.tasks.len(),
            pacing::SNAPSHOT_PER_RECORD,
        )
    }

    /// Ends the term: the client stops, the state shows why, the last
    /// snapshot goes out. Whatever is still in flight is dropped (updates
    /// not acknowledged are sent again by the agents; the next leader reads
    /// the store).
    pub fn end(&mut self, outcome: &TermOutcome, now: Instant) -> Effects {
        self.ending = true;
        self.out.items.clear();
        self.out.acks.clear();
        self.out.items.push(Effect::StopClient);
        self.stats.framework_subscribed = false;
        match outcome {
            // on_client_stopped already said why.
            TermOutcome::FailedOver => {}
            TermOutcome::Mismatch(why) => self.set_state(
                FrameworkState::FailedOver,
                Some(format!("framework ID mismatch: {why}")),
            ),
            _ => self.set_state(FrameworkState::Standby, None),
        }
        self.log(
            EventKind::Leadership,
            format!("term {} ended: {outcome}", self.term.term),
            now,
        );
        self.out.publish_now = true;
        let mut effects = self.finish(now);
        // Only the leader reports rollouts, health and its event lag
        // (after the last snapshot, which sets them).
        self.inbox(None, 0, false, now);
        effects.wake_at = None;
        effects
    }

    /// True once the term is ending.
    pub fn is_ending(&self) -> bool {
        self.ending
    }

    /// Timers: reconciliation, kills, client restarts, the framework-ID
    /// check, housekeeping.
    fn on_tick(&mut self, now: Instant) {
        self.load_slice(now);
        self.reconcile_tick(now);
        self.send_due_kills(now);
        self.poll_agents(now);
        self.drains_tick(now);
        if self.framework.restart_at.is_some_and(|t| now >= t) {
            self.start_client(now);
        }
        // A deferred REVIVE's interval is over: the pass sends it if work
        // is still pending.
        if self.may_schedule()
            && self
                .revive
                .deferred_until(self.cfg.min_revive_interval)
                .is_some_and(|t| now >= t)
        {
            self.needs_schedule = true;
        }
        if now >= self.framework.next_check {
            self.framework.next_check = now + self.cfg.framework_id_refresh_interval;
            self.check_framework_id();
        }
        if now >= self.next_housekeeping {
            self.next_housekeeping = now + HOUSEKEEPING;
            self.housekeeping(now);
            self.jobs_pass(now);
        }
    }

    /// The FrameworkInfo to subscribe with (the stored ID, if any).
    fn framework_info(&self) -> v1::FrameworkInfo {
        v1::FrameworkInfo {
            user: self.cfg.user.clone(),
            name: self.cfg.framework_name.clone(),
            id: self.framework.id.as_ref().map(|id| id.to_proto()),
            failover_timeout: Some(self.cfg.failover_timeout.as_secs_f64()),
            checkpoint: Some(true),
            #[allow(deprecated)]
            role: Some(self.cfg.role.clone()),
            hostname: Some(self.cfg.hostname.clone()),
            principal: self.cfg.principal.clone(),
            webui_url: (!self.cfg.webui_url.is_empty()).then(|| self.cfg.webui_url.clone()),
            // PARTITION_AWARE: an agent that loses the master turns our
            // tasks TASK_UNREACHABLE, not TASK_LOST, and they come back as
            // they were when it returns; each service's `unreachable`
            // policy decides how long to wait (`rules/partition.rs`,
            // `docs/high-availability-framework-guide.md` in apache/mesos).
            capabilities: vec![v1::framework_info::Capability {
                r#type: Some(v1::framework_info::capability::Type::PartitionAware as i32),
            }],
            labels: None,
            roles: Vec::new(),
        }
    }

    fn is_hard(&self) -> bool {
        self.cfg.strategy == Strategy::Hard
    }

    /// Ends the term over a framework-ID mismatch.
    fn mismatch(&mut self, why: Mismatch) {
        self.end_term(TermOutcome::Mismatch(why));
    }
}
