//! The `mesos-appliance` command line (DESIGN.md §5). Every flag can also be
//! given as an environment variable `MESOS_APPLIANCE_<FLAG>` (upper case,
//! `-` as `_`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::coordination::Strategy;
use crate::scheduler::config::OnFrameworkRemoved;

/// Exit codes, for operators and orchestrators.
pub mod exit {
    /// Stopped on request (SIGTERM, Ctrl-C) — a failover stop; or the job succeeded.
    pub const OK: u8 = 0;
    /// A runtime failure (ZooKeeper or the web listener could not be set up).
    pub const FAILURE: u8 = 1;
    /// Bad flags or configuration (also clap's usage errors).
    pub const USAGE: u8 = 2;
    /// Fenced: a newer deployment (`upgrade` or `hard`) took over; do not
    /// restart this replica with the same configuration.
    pub const FENCED: u8 = 3;
    /// `uninstall` could not finish; nothing was deleted from ZooKeeper.
    pub const UNINSTALL_FAILED: u8 = 4;
}

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| e.to_string())
}

/// A highly available Apache Mesos framework scheduler with a dashboard.
///
/// Replicas elect one leader through ZooKeeper; only the leader subscribes to
/// Mesos. The framework ID, the services and the task records live in
/// ZooKeeper, so a new leader recovers and reconciles instead of starting
/// blind. Stopping a replica (SIGTERM, Ctrl-C) is a failover stop: the next
/// replica takes over within milliseconds and no task dies.
#[derive(Debug, Parser)]
#[command(name = "mesos-appliance", version, after_long_help = AFTER_HELP)]
pub struct Cli {
    /// What to run (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Settings shared by every subcommand.
    #[command(flatten)]
    pub common: CommonArgs,
}

const AFTER_HELP: &str = "\
Deployment strategies (--framework-deployment-strategy):
  failover  (default) Join the election; the leader subscribes with the stored
            framework ID and adopts the running tasks. Replicas of another
            deployment wait as followers and never fight the current leader.
  upgrade   Fence replicas of older deployments (they exit with code 3), then
            take over the same framework ID; tasks keep running; services whose
            spec changed are replaced as a rolling update.
  hard      Fence older deployments, then, once per deployment, tear down every
            earlier framework of this name (stored ID, and active or inactive
            ones of the same name and role on the master), delete the stored
            framework ID and task records, and register a fresh framework.

Framework removed by Mesos (failover timeout passed): the replica enters state
`removed` (/readyz fails with the reason) and waits for the dashboard's
reregister action, unless --on-framework-removed=reregister.

Jobs:
  mesos-appliance uninstall [--dry-run]   fence every replica, tear the framework(s)
                                          down, delete the ZooKeeper subtree
  mesos-appliance demo                    embedded mesos-testbed + dashboard

Exit codes:
  0  stopped on request (a failover stop), or the job succeeded
  1  runtime failure
  2  bad flags or configuration
  3  fenced by a newer deployment (do not restart with the same configuration)
  4  uninstall failed (nothing deleted from ZooKeeper)";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a replica of the scheduler (the default).
    Serve,
    /// One-shot job: fence all replicas, tear down every framework of this
    /// name, delete the ZooKeeper subtree, print a summary.
    Uninstall(UninstallArgs),
    /// Run the appliance against an embedded mesos-testbed with sample
    /// services, in-memory state and the dashboard on --listen.
    Demo(DemoArgs),
}

/// Flags of `uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the master to list the torn-down frameworks as completed.
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub wait: Duration,
}

/// Flags of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Simulated agents of the embedded testbed.
    #[arg(long, default_value_t = 3)]
    pub agents: usize,
}

/// Settings shared by every subcommand.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Mesos master: `http(s)://host:port[,host:port…]` or `zk://[user:pass@]host:port,…/mesos`.
    #[arg(long, global = true, env = "MESOS_APPLIANCE_MASTER")]
    pub master: Option<String>,
    /// Coordination root: `zk://[user:pass@]h1:2181,h2:2181/path` (without a
    /// path: /mesos-appliance/<framework-name>). Without --zk: in-memory
    /// state, one replica only.
    #[arg(long, global = true, env = "MESOS_APPLIANCE_ZK")]
    pub zk: Option<String>,
    /// ZooKeeper session timeout; bounds failover after a crash.
    #[arg(long, global = true, default_value = "10s", value_parser = duration, env = "MESOS_APPLIANCE_ZK_SESSION_TIMEOUT")]
    pub zk_session_timeout: Duration,
    /// With zk:// credentials: create znodes readable only by them (default: world-readable).
    #[arg(long, global = true, env = "MESOS_APPLIANCE_ZK_PRIVATE_ACL")]
    pub zk_private_acl: bool,
    /// Framework name (FrameworkInfo.name).
    #[arg(
        long,
        global = true,
        default_value = "mesos-appliance",
        env = "MESOS_APPLIANCE_FRAMEWORK_NAME"
    )]
    pub framework_name: String,
    /// Framework role (FrameworkInfo.role).
    #[arg(
        long,
        global = true,
        default_value = "*",
        env = "MESOS_APPLIANCE_FRAMEWORK_ROLE"
    )]
    pub framework_role: String,
    /// Unix user tasks run as on the agents (FrameworkInfo.user) [default: $USER, else root].
    #[arg(long, global = true, env = "MESOS_APPLIANCE_FRAMEWORK_USER")]
    pub framework_user: Option<String>,
    /// Principal for HTTP authentication to the master (also FrameworkInfo.principal).
    #[arg(long, global = true, env = "MESOS_APPLIANCE_PRINCIPAL")]
    pub principal: Option<String>,
    /// File holding the secret for --principal (first line; never logged).
    #[arg(long, global = true, env = "MESOS_APPLIANCE_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
    /// How long Mesos keeps the framework and its tasks after the scheduler disconnects.
    #[arg(long, global = true, default_value = "1week", value_parser = duration, env = "MESOS_APPLIANCE_FAILOVER_TIMEOUT")]
    pub failover_timeout: Duration,
    /// What a new deployment does to an old one: failover, upgrade or hard (see below).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "failover",
        env = "MESOS_APPLIANCE_FRAMEWORK_DEPLOYMENT_STRATEGY"
    )]
    pub framework_deployment_strategy: StrategyArg,
    /// Deployment identity [default: a hash of the version and the effective configuration].
    #[arg(long, global = true, env = "MESOS_APPLIANCE_DEPLOYMENT_ID")]
    pub deployment_id: Option<String>,
    /// When Mesos says the framework was removed: wait for the operator, or reregister.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "wait",
        env = "MESOS_APPLIANCE_ON_FRAMEWORK_REMOVED"
    )]
    pub on_framework_removed: OnFrameworkRemoved,
    /// Dashboard and API address.
    #[arg(
        long,
        global = true,
        default_value = "127.0.0.1:8080",
        env = "MESOS_APPLIANCE_LISTEN"
    )]
    pub listen: SocketAddr,
    /// URL other replicas, users and the Mesos fetcher reach this replica at [default: from --listen].
    #[arg(long, global = true, env = "MESOS_APPLIANCE_ADVERTISED_URL")]
    pub advertised_url: Option<String>,
    /// File holding the admin token for actions (`Authorization: Bearer …`).
    /// Without it, actions are allowed only when listening on loopback.
    #[arg(long, global = true, env = "MESOS_APPLIANCE_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Allow unauthenticated actions on a non-loopback address (dangerous).
    #[arg(long, global = true, env = "MESOS_APPLIANCE_INSECURE_ACTIONS")]
    pub insecure_actions: bool,
    /// JSON file of services, stored in ZooKeeper when it holds none.
    #[arg(long, global = true, env = "MESOS_APPLIANCE_SERVICES")]
    pub services: Option<PathBuf>,
    /// Implicit reconciliation period (Mesos reconciliation guide).
    #[arg(long, global = true, default_value = "15m", value_parser = duration, env = "MESOS_APPLIANCE_RECONCILE_INTERVAL")]
    pub reconcile_interval: Duration,
    /// Delay before the first periodic reconciliation.
    #[arg(long, global = true, default_value = "1m", value_parser = duration, env = "MESOS_APPLIANCE_RECONCILE_INITIAL_DELAY")]
    pub reconcile_initial_delay: Duration,
    /// Minimum pause between two reconciliation runs.
    #[arg(long, global = true, default_value = "30s", value_parser = duration, env = "MESOS_APPLIANCE_RECONCILE_COOLDOWN")]
    pub reconcile_cooldown: Duration,
    /// Cap of the backoff between explicit RECONCILE calls.
    #[arg(long, global = true, default_value = "1m", value_parser = duration, env = "MESOS_APPLIANCE_EXPLICIT_RECONCILE_MAX_BACKOFF")]
    pub explicit_reconcile_max_backoff: Duration,
    /// An explicit reconciliation gives up (listing the unanswered tasks) after this long.
    #[arg(long, global = true, default_value = "5m", value_parser = duration, env = "MESOS_APPLIANCE_EXPLICIT_RECONCILE_ABORT_TIMEOUT")]
    pub explicit_reconcile_abort_timeout: Duration,
    /// Rolling replacement of tasks whose service spec changed: at most this
    /// many desired instances down at a time.
    #[arg(
        long,
        global = true,
        default_value_t = 1,
        env = "MESOS_APPLIANCE_UPGRADE_MAX_UNAVAILABLE"
    )]
    pub upgrade_max_unavailable: u32,
    /// Unused offers are declined after this long.
    #[arg(long, global = true, default_value = "10s", value_parser = duration, env = "MESOS_APPLIANCE_OFFER_TTL")]
    pub offer_ttl: Duration,
    /// Offers that left are remembered this long (late RESCINDs, duplicates).
    #[arg(long, global = true, default_value = "2m", value_parser = duration, env = "MESOS_APPLIANCE_OFFER_LINGER_TTL")]
    pub offer_linger_ttl: Duration,
    /// Filter (seconds) sent with declines when no work is pending.
    #[arg(
        long,
        global = true,
        default_value_t = 120.0,
        env = "MESOS_APPLIANCE_DECLINE_REFUSE_SECONDS"
    )]
    pub decline_refuse_seconds: f64,
    /// How often the stored framework ID is re-read and compared with ours.
    #[arg(long, global = true, default_value = "30s", value_parser = duration, env = "MESOS_APPLIANCE_FRAMEWORK_ID_REFRESH_INTERVAL")]
    pub framework_id_refresh_interval: Duration,
    /// How long an action's HTTP handler waits for the scheduler (then 503).
    #[arg(long, global = true, default_value = "10s", value_parser = duration, env = "MESOS_APPLIANCE_HTTP_HANDLER_TIMEOUT")]
    pub http_handler_timeout: Duration,
    /// The mesos-appliance-executor binary served to the Mesos fetcher
    /// [default: next to this binary].
    #[arg(long, global = true, env = "MESOS_APPLIANCE_EXECUTOR_BINARY")]
    pub executor_binary: Option<PathBuf>,
}

/// `--framework-deployment-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    /// See the strategies section below.
    Failover,
    /// See the strategies section below.
    Upgrade,
    /// See the strategies section below.
    Hard,
}

impl From<StrategyArg> for Strategy {
    fn from(s: StrategyArg) -> Strategy {
        match s {
            StrategyArg::Failover => Strategy::Failover,
            StrategyArg::Upgrade => Strategy::Upgrade,
            StrategyArg::Hard => Strategy::Hard,
        }
    }
}

impl CommonArgs {
    /// `--advertised-url`, or `http://<listen>` (with `localhost` for an
    /// unspecified address, which other hosts cannot use — set the flag then).
    pub fn advertised_url(&self) -> String {
        if let Some(url) = &self.advertised_url {
            return url.trim_end_matches('/').to_string();
        }
        let host = if self.listen.ip().is_unspecified() {
            "localhost".to_string()
        } else {
            self.listen.ip().to_string()
        };
        format!("http://{host}:{}", self.listen.port())
    }
}
