//! The core actor: one tokio task that owns all scheduler state for one
//! leadership term and reacts to Mesos events, timers and commands.
//!
//! It runs only while its replica leads: [`run_term`] is called with the
//! term's cancellation token and returns when the term ends (leadership
//! lost, abdication, framework failed over, framework-ID mismatch). Nothing
//! it spawns outlives the term: the Mesos client hangs off a child token,
//! and offers, kills and reconciliation state die with the `Core`.
//!
//! After each change the core publishes an immutable [`Snapshot`] (throttled
//! to `snapshot_interval`); web handlers never touch its state.
//!
//! Parts: `events` (SUBSCRIBED, OFFERS, UPDATE, …), `launch` (placement,
//! launches, kills, suppress/revive, timers), `commands` (actions from the
//! web layer), `view` (snapshots).

mod commands;
mod events;
mod launch;
mod startup;
mod updates;
mod view;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::commands::Command;
use super::config::CoreConfig;
use super::kills::KillQueue;
use super::metrics::Metrics;
use super::offers::OfferRegistry;
use super::reconcile::Reconciler;
use super::records::TaskRecord;
use super::services::ServiceSpec;
use super::snapshot::{EventEntry, FrameworkState, Snapshot};
use super::workload::Backoff;
use crate::coordination::{Coordinator, RecordKind, RecordStore};
use crate::mesos::client::{ClientConfig, ClientEvent, SchedulerClient, Subscription};
use crate::mesos::operator::OperatorClient;
use crate::mesos::v1;
use crate::util::unix_now_secs;

/// Events kept for the events page.
const EVENT_LOG_LEN: usize = 500;
/// How long to wait before re-subscribing after a refusal that is not
/// "removed" or "failed over" (so a misconfiguration cannot cause a loop).
const REFUSED_RETRY: Duration = Duration::from_secs(60);

/// What the core needs from the rest of the process; shared by every term.
#[derive(Clone)]
pub struct CoreDeps {
    /// Election and stores.
    pub coordinator: Arc<dyn Coordinator>,
    /// How to reach the Mesos master.
    pub client: ClientConfig,
    /// Metrics to update.
    pub metrics: Metrics,
    /// Where snapshots go.
    pub snapshots: watch::Sender<Arc<Snapshot>>,
    /// Services to store when ZooKeeper holds none (`--services`).
    pub initial_services: Vec<ServiceSpec>,
    /// Cancelled when a newer deployment fences this replica (`upgrade`,
    /// `hard`, `uninstall`): the term ends and the state becomes `fenced`.
    pub fence: CancellationToken,
}

/// Why a term ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TermOutcome {
    /// The term token was cancelled (suspension, expiry, close).
    LeadershipLost,
    /// The operator asked this replica to step down.
    Abdicated,
    /// Another scheduler subscribed with our framework ID (ERROR "Framework
    /// failed over"): step down and back off.
    FailedOver,
    /// The stored framework ID differs from ours: two schedulers registered
    /// at once; this one loses (DESIGN.md §3).
    Mismatch(String),
    /// The stores could not be read at the start of the term.
    StoreUnavailable(String),
}

impl std::fmt::Display for TermOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TermOutcome::LeadershipLost => f.write_str("leadership lost"),
            TermOutcome::Abdicated => f.write_str("abdicated"),
            TermOutcome::FailedOver => {
                f.write_str("another scheduler subscribed with our framework ID")
            }
            TermOutcome::Mismatch(why) => write!(f, "framework ID mismatch: {why}"),
            TermOutcome::StoreUnavailable(why) => write!(f, "ZooKeeper stores unreadable: {why}"),
        }
    }
}

/// One known task: its record (shared with snapshots) and ZooKeeper version.
#[derive(Debug, Clone)]
pub(crate) struct TaskEntry {
    pub record: Arc<TaskRecord>,
    pub version: i32,
}

/// Everything one term owns.
pub(crate) struct Core {
    pub cfg: CoreConfig,
    pub deps: CoreDeps,
    pub term_token: CancellationToken,
    /// The current Mesos client (replaced on re-registration), its events and
    /// its cancellation token.
    pub client: Option<(SchedulerClient, CancellationToken)>,
    pub client_events: Option<mpsc::Receiver<ClientEvent>>,
    /// When to start a client again after a refusal.
    pub restart_client_at: Option<Instant>,
    pub operator: OperatorClient,
    pub framework_id: Option<String>,
    pub state: FrameworkState,
    pub reason: Option<String>,
    pub subscription: Option<Subscription>,
    pub services: BTreeMap<String, ServiceSpec>,
    pub backoff: HashMap<String, Backoff>,
    /// Services with instances that found no offer in the last pass, and
    /// why (see [`crate::scheduler::placement::shortfall`]).
    pub waiting: HashMap<String, crate::scheduler::placement::Shortfall>,
    pub tasks: BTreeMap<crate::scheduler::TaskId, TaskEntry>,
    pub kills: KillQueue,
    pub offers: OfferRegistry,
    pub agent_attributes: HashMap<crate::scheduler::AgentId, Vec<v1::Attribute>>,
    pub reconciler: Reconciler,
    pub suppressed: bool,
    pub events_log: VecDeque<EventEntry>,
    pub next_fid_check: Instant,
    pub next_housekeeping: Instant,
    pub dirty: bool,
    /// A scheduling pass is due after the current batch of events.
    pub needs_schedule: bool,
    pub last_publish: Option<Instant>,
    pub task_store: RecordStore<TaskRecord>,
    pub service_store: RecordStore<ServiceSpec>,
    /// Set when the term must end with this outcome.
    pub outcome: Option<TermOutcome>,
    /// The previous term ended because another scheduler took our framework
    /// ID: before subscribing, check that nobody drives it now.
    pub wary: bool,
}

/// Runs the core for leadership `term` until it ends. `commands` is lent
/// for the term and handed back when it returns. `wary`: this replica's
/// previous term ended because another scheduler took the framework ID, so
/// this one first checks on the master that nobody drives it now.
pub async fn run_term(
    cfg: &CoreConfig,
    deps: &CoreDeps,
    term: u64,
    term_token: CancellationToken,
    commands: &mut mpsc::Receiver<Command>,
    wary: bool,
) -> TermOutcome {
    let mut core = match Core::load(cfg.clone(), deps.clone(), term_token.clone()).await {
        Ok(core) => core,
        Err(e) => return TermOutcome::StoreUnavailable(e),
    };
    core.wary = wary;
    deps.metrics.leader.set(1);
    core.log("leadership", format!("became leader (term {term})"));
    core.publish(true);
    core.start_client().await;
    let outcome = core.run(commands).await;
    core.stop_client();
    deps.metrics.leader.set(0);
    deps.metrics.framework_subscribed.set(0);
    match &outcome {
        // on_stopped already says why.
        TermOutcome::FailedOver => {}
        TermOutcome::Mismatch(why) => core.set_state(
            FrameworkState::FailedOver,
            Some(format!("framework ID mismatch: {why}")),
        ),
        _ => core.set_state(FrameworkState::Standby, None),
    }
    core.log("leadership", format!("term {term} ended: {outcome}"));
    core.publish(true);
    outcome
}

/// The kill queue of a new term: every task a previous term marked for
/// killing and has not seen end gets its KILL again (KILL is never
/// acknowledged and may be lost, mesos-notes §11.18), or a replaced task
/// would run on beside its replacement.
fn resume_kills(
    cfg: &CoreConfig,
    services: &BTreeMap<String, ServiceSpec>,
    tasks: &BTreeMap<crate::scheduler::TaskId, TaskEntry>,
    now: Instant,
) -> KillQueue {
    let mut kills = KillQueue::new(cfg.kill_retry_min, cfg.kill_retry_max);
    for (task_id, entry) in tasks {
        let record = &entry.record;
        let Some(kill) = record.kill.as_ref().filter(|_| !record.is_terminal()) else {
            continue;
        };
        let grace = services
            .get(&record.service)
            .map_or(launch::DEFAULT_KILL_GRACE, |s| s.kill_grace_period);
        let agent = (!record.agent_id.is_empty()).then(|| record.agent_id.clone());
        kills.request(task_id, agent, &kill.reason, grace, now);
    }
    kills
}

impl Core {
    /// Reads the framework ID, services and tasks from the stores.
    async fn load(
        cfg: CoreConfig,
        deps: CoreDeps,
        term_token: CancellationToken,
    ) -> Result<Core, String> {
        let coordinator = deps.coordinator.clone();
        let task_store = RecordStore::<TaskRecord>::new(coordinator.clone(), RecordKind::Tasks);
        let service_store =
            RecordStore::<ServiceSpec>::new(coordinator.clone(), RecordKind::Services);
        let operator = OperatorClient::start(&deps.client, term_token.child_token());
        if cfg.strategy == crate::coordination::Strategy::Hard {
            startup::hard_teardown(coordinator.as_ref(), &operator, &cfg).await?;
        }
        let framework_id = coordinator
            .framework_id()
            .await
            .map_err(|e| format!("reading the framework ID: {e}"))?
            .map(|v| v.value);
        let mut services = BTreeMap::new();
        let listed = service_store
            .list()
            .await
            .map_err(|e| format!("reading services: {e}"))?;
        for (name, spec) in listed.records {
            if spec.value.validate().is_empty() {
                services.insert(name, spec.value);
            }
        }
        let seed = services.is_empty() && listed.malformed.is_empty();
        if seed || (cfg.replace_services && !deps.initial_services.is_empty()) {
            startup::apply_services_file(&service_store, &mut services, &deps.initial_services)
                .await?;
        }
        let mut tasks = BTreeMap::new();
        let listed = task_store
            .list()
            .await
            .map_err(|e| format!("reading task records: {e}"))?;
        for (id, record) in listed.records {
            tasks.insert(
                id.into(),
                TaskEntry {
                    record: Arc::new(record.value),
                    version: record.version,
                },
            );
        }
        let now = Instant::now();
        let kills = resume_kills(&cfg, &services, &tasks, now);
        Ok(Core {
            kills,
            offers: OfferRegistry::new(cfg.offer_ttl, cfg.offer_linger),
            reconciler: Reconciler::new(cfg.reconcile.clone(), now),
            next_fid_check: now + cfg.framework_id_refresh_interval,
            next_housekeeping: now + Duration::from_secs(1),
            cfg,
            deps,

            term_token,
            client: None,
            client_events: None,
            restart_client_at: None,
            operator,
            framework_id,
            state: FrameworkState::Subscribing,
            reason: None,
            subscription: None,
            services,
            backoff: HashMap::new(),
            waiting: HashMap::new(),
            tasks,
            agent_attributes: HashMap::new(),
            suppressed: false,
            events_log: VecDeque::new(),
            dirty: true,
            needs_schedule: false,
            last_publish: None,
            task_store,
            service_store,
            outcome: None,
            wary: false,
        })
    }

    /// The loop: events, commands and timers until the term ends.
    async fn run(&mut self, commands: &mut mpsc::Receiver<Command>) -> TermOutcome {
        loop {
            if let Some(outcome) = self.outcome.take() {
                return outcome;
            }
            self.publish(false);
            let deadline = self.next_deadline();
            let sleep = tokio::time::sleep_until(deadline.into());
            tokio::select! {
                biased;
                _ = self.term_token.cancelled() => return TermOutcome::LeadershipLost,
                event = recv_event(&mut self.client_events) => match event {
                    Some(event) => self.on_event_batch(event).await,
                    None => self.client_events = None,
                },
                command = commands.recv() => match command {
                    Some(command) => self.on_command(command).await,
                    // The web layer is gone: the process is stopping.
                    None => return TermOutcome::LeadershipLost,
                },
                _ = sleep => self.on_timers().await,
            }
        }
    }

    /// Handles `first` and whatever else is already queued (up to a limit),
    /// keeping stream order: consecutive status updates are handled as one
    /// batch; then one scheduling pass if anything asked for it.
    async fn on_event_batch(&mut self, first: ClientEvent) {
        const BATCH: usize = 1024;
        let mut updates = Vec::new();
        let mut next = Some(first);
        let mut handled = 0;
        while let Some(event) = next.take() {
            handled += 1;
            match event {
                ClientEvent::Event(e)
                    if e.r#type() == crate::mesos::v1::scheduler::event::Type::Update =>
                {
                    if let Some(update) = e.update {
                        updates.push(update.status);
                    }
                }
                other => {
                    if !updates.is_empty() {
                        self.on_updates(std::mem::take(&mut updates)).await;
                    }
                    self.on_client_event(other).await;
                }
            }
            if handled < BATCH && self.outcome.is_none() {
                next = self
                    .client_events
                    .as_mut()
                    .and_then(|rx| rx.try_recv().ok());
            }
        }
        if !updates.is_empty() {
            self.on_updates(updates).await;
        }
        if self.needs_schedule && self.outcome.is_none() {
            self.needs_schedule = false;
            self.schedule().await;
        }
    }

    /// The FrameworkInfo to subscribe with (the stored ID, if any).
    pub fn framework_info(&self) -> v1::FrameworkInfo {
        v1::FrameworkInfo {
            user: self.cfg.user.clone(),
            name: self.cfg.framework_name.clone(),
            id: self
                .framework_id
                .as_ref()
                .map(|id| v1::FrameworkId { value: id.clone() }),
            failover_timeout: Some(self.cfg.failover_timeout.as_secs_f64()),
            checkpoint: Some(true),
            #[allow(deprecated)]
            role: Some(self.cfg.role.clone()),
            hostname: Some(self.cfg.hostname.clone()),
            principal: self.cfg.principal.clone(),
            webui_url: (!self.cfg.webui_url.is_empty()).then(|| self.cfg.webui_url.clone()),
            capabilities: Vec::new(),
            labels: None,
            roles: Vec::new(),
        }
    }

    /// Stops the current Mesos client at once (its stream closes).
    pub fn stop_client(&mut self) {
        if let Some((_, cancel)) = self.client.take() {
            cancel.cancel();
        }
        self.client_events = None;
        self.subscription = None;
        self.deps.metrics.framework_subscribed.set(0);
    }

    /// The running client, if subscribed.
    pub fn client(&self) -> Option<&SchedulerClient> {
        self.client.as_ref().map(|(c, _)| c)
    }

    /// Appends to the events page (and the log).
    pub fn log(&mut self, kind: &str, message: String) {
        if kind == "error" {
            tracing::warn!(kind, "{message}");
        } else {
            tracing::info!(kind, "{message}");
        }
        self.events_log.push_back(EventEntry {
            at: unix_now_secs(),
            kind: crate::scheduler::EventKind::from_name(kind)
                .unwrap_or(crate::scheduler::EventKind::Error),
            message,
        });
        while self.events_log.len() > EVENT_LOG_LEN {
            self.events_log.pop_front();
        }
        self.dirty = true;
    }

    /// Sets the framework state (and why).
    pub fn set_state(&mut self, state: FrameworkState, reason: Option<String>) {
        if self.state != state || self.reason != reason {
            self.state = state;
            self.reason = reason;
            self.dirty = true;
        }
    }

    /// Replaces a task record in memory.
    pub fn put_task(&mut self, record: TaskRecord, version: i32) {
        self.tasks.insert(
            record.task_id.clone(),
            TaskEntry {
                record: Arc::new(record),
                version,
            },
        );
        self.dirty = true;
    }

    fn next_deadline(&self) -> Instant {
        let now = Instant::now();
        let mut next = self.next_housekeeping.min(self.next_fid_check);
        for candidate in [
            self.reconciler.next_deadline(),
            self.kills.next_deadline(),
            self.restart_client_at,
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(candidate);
        }
        if self.dirty {
            let publish_at = self
                .last_publish
                .map(|t| t + self.cfg.snapshot_interval)
                .unwrap_or(now);
            next = next.min(publish_at);
        }
        next.max(now)
    }
}

async fn recv_event(events: &mut Option<mpsc::Receiver<ClientEvent>>) -> Option<ClientEvent> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
