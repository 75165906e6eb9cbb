//! Settings of the scheduler core, with the defaults the CLI documents.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::rules::reconcile::ReconcilerConfig;
use crate::coordination::Strategy;

/// What to do when the master says the framework was removed
/// (`docs/deployment-strategies.md#removed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OnFrameworkRemoved {
    /// Enter state `removed` and wait for the operator's reregister action.
    #[default]
    Wait,
    /// Clear the stale ID and task records and register a new framework.
    Reregister,
}

/// Tasks whose launch (record write, then ACCEPT) may be under way at
/// once. A pass places at most this many, less those still launching, and
/// the next pass places more: one pass placing tens of thousands at once
/// would take that long, and queue that many writes ahead of the
/// launches' ACCEPTs. A launch under way holds its placement and a shared
/// spec ([`PendingTask`]), its `TaskInfo` is built at the ACCEPT. 4,000
/// (was 2,000 while each held its `TaskInfo`) ended the ACCEPTs of a
/// 50,000-task launch in about 5.5 s instead of 10–11 s
/// (`docs/benchmarks.md`, "Launches ahead of the store"). The core's
/// [`CoreConfig::launching_max`] (tests set it low).
pub const LAUNCHING_MAX: usize = 4_000;

/// Task records a new term loads into its table per step of the core: the
/// rest wait for the next step, and a command waits behind one slice, not
/// behind the whole list (100,000 records in one step took 335 ms on a
/// loaded machine, `docs/benchmarks.md` "Records loaded in slices"). The
/// core's [`CoreConfig::load_per_step`] (tests set it low).
pub const LOAD_PER_STEP: usize = 10_000;

/// Everything the core needs to know that does not come from ZooKeeper.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// `FrameworkInfo.name`.
    pub framework_name: String,
    /// `FrameworkInfo.role`.
    pub role: String,
    /// `FrameworkInfo.user`: the Unix user tasks run as on the agents.
    pub user: String,
    /// `FrameworkInfo.principal` (also the HTTP basic-auth principal).
    pub principal: Option<String>,
    /// `FrameworkInfo.failover_timeout`: how long the master keeps the
    /// framework (and its tasks) after the scheduler disconnects.
    pub failover_timeout: Duration,
    /// `FrameworkInfo.hostname`.
    pub hostname: String,
    /// `FrameworkInfo.webui_url` (this replica's advertised URL).
    pub webui_url: String,
    /// The deployment strategy (`docs/deployment-strategies.md#strategies`).
    pub strategy: Strategy,
    /// This replica's deployment ID (`--deployment-id`).
    pub deployment_id: String,
    /// Make the `--services` file authoritative: each new leader writes its
    /// specs over the stored ones and deletes stored services it does not
    /// list (`upgrade` and `hard`). Otherwise the file only seeds an empty
    /// store (`failover`).
    pub replace_services: bool,
    /// Behaviour when the framework was removed.
    pub on_framework_removed: OnFrameworkRemoved,
    /// Tasks whose service spec changed are replaced one by one, with at most
    /// this many desired instances not running at a time
    /// (`--upgrade-max-unavailable`).
    pub upgrade_max_unavailable: u32,
    /// No new task goes to an agent whose maintenance window starts within
    /// this long (`--maintenance-lead-time`): services never finish, so a
    /// task placed there would be killed by the window.
    pub maintenance_lead: Duration,
    /// Unused offers are declined after this long (`--offer-ttl`).
    pub offer_ttl: Duration,
    /// Gone offers are remembered this long (`--offer-linger-ttl`).
    pub offer_linger: Duration,
    /// Tasks whose launch may be under way at once ([`LAUNCHING_MAX`]).
    pub launching_max: usize,
    /// Task records loaded per step at a term's start ([`LOAD_PER_STEP`]).
    pub load_per_step: usize,
    /// Filter sent with declines when nothing is pending
    /// (`--decline-refuse-seconds`), in seconds.
    pub decline_refuse_seconds: f64,
    /// The least time between two REVIVEs of one subscription
    /// (`--min-revive-interval`): a need for offers that arises sooner is
    /// revived for at the interval's end. The subscription's first REVIVE
    /// is never delayed. Zero: no bound.
    pub min_revive_interval: Duration,
    /// Reconciliation timing (`--reconcile-*`, `--explicit-reconcile-*`).
    pub reconcile: ReconcilerConfig,
    /// The stored framework ID is re-read this often and compared
    /// (`--framework-id-refresh-interval`).
    pub framework_id_refresh_interval: Duration,
    /// First KILL retry; doubles up to `kill_retry_max`.
    pub kill_retry_min: Duration,
    /// Cap of the KILL retry backoff.
    pub kill_retry_max: Duration,
    /// A task in TASK_STAGING or TASK_STARTING longer than this (since its
    /// last update) is killed and replaced (`--task-launch-timeout`).
    pub transient_timeout: Duration,
    /// Terminal task records are deleted from ZooKeeper after this long.
    pub terminal_retention: Duration,
    /// URL the Mesos fetcher downloads `mesos-appliance-executor` from
    /// (`<advertised URL>/executor/<version>/mesos-appliance-executor`).
    pub executor_url: Option<String>,
    /// Resources of one `mesos-appliance-executor` (one per task).
    pub executor_cpus: f64,
    /// Memory of one `mesos-appliance-executor`, MB.
    pub executor_mem: f64,
    /// Snapshots are published at most this often.
    pub snapshot_interval: Duration,
    /// The scheduling pass runs at most this often. It reads every task
    /// record, so while updates stream in (tens of thousands during a
    /// launch or a reconciliation) it is paced rather than run after every
    /// batch of inputs, which would cost O(tasks) per batch.
    pub schedule_interval: Duration,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            framework_name: "mesos-appliance".into(),
            role: "*".into(),
            user: std::env::var("USER").unwrap_or_else(|_| "root".into()),
            principal: None,
            failover_timeout: Duration::from_secs(7 * 24 * 3600),
            hostname: "localhost".into(),
            webui_url: String::new(),
            strategy: Strategy::Failover,
            deployment_id: String::new(),
            replace_services: false,
            on_framework_removed: OnFrameworkRemoved::Wait,
            upgrade_max_unavailable: 1,
            maintenance_lead: Duration::from_secs(3600),
            offer_ttl: Duration::from_secs(10),
            offer_linger: Duration::from_secs(120),
            launching_max: LAUNCHING_MAX,
            load_per_step: LOAD_PER_STEP,
            decline_refuse_seconds: 120.0,
            min_revive_interval: Duration::from_secs(1),
            reconcile: ReconcilerConfig {
                interval: Duration::from_secs(15 * 60),
                initial_delay: Duration::from_secs(60),
                cooldown: Duration::from_secs(30),
                explicit_max_backoff: Duration::from_secs(60),
                explicit_abort_timeout: Duration::from_secs(300),
                implicit_window: Duration::from_secs(10),
                explicit_slice: crate::scheduler::rules::reconcile::EXPLICIT_SLICE,
            },
            framework_id_refresh_interval: Duration::from_secs(30),
            kill_retry_min: Duration::from_secs(5),
            kill_retry_max: Duration::from_secs(60),
            transient_timeout: Duration::from_secs(300),
            terminal_retention: Duration::from_secs(3600),
            executor_url: None,
            executor_cpus: 0.05,
            executor_mem: 32.0,
            snapshot_interval: Duration::from_millis(200),
            schedule_interval: Duration::from_millis(100),
        }
    }
}
