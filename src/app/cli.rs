//! The `mesos-appliance` command line (`docs/architecture.md#command-line`). Every flag can also be
//! given as an environment variable `MESOS_APPLIANCE_<FLAG>` (upper case,
//! `-` as `_`). The cluster flags ([`ClusterArgs`]: `--master`, `--zk`, …)
//! belong to `serve` and `uninstall`, before or after the subcommand; `demo`
//! runs its own testbed and refuses them. [`Cli::job_from`] resolves a
//! command line into the [`Job`] to run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::coordination::Strategy;
use crate::scheduler::config::OnFrameworkRemoved;

/// Exit codes, for operators and orchestrators.
pub mod exit {
    /// Stopped on request (SIGTERM, Ctrl-C) — a failover stop; or the job succeeded.
    pub const OK: u8 = 0;
    /// A runtime failure (ZooKeeper or the web listener could not be set up,
    /// or the scheduler crashed: the process exits so another replica leads).
    pub const FAILURE: u8 = 1;
    /// Bad flags or configuration (also clap's usage errors).
    pub const USAGE: u8 = 2;
    /// Fenced: a newer deployment (`upgrade` or `hard`) took over; do not
    /// restart this replica with the same configuration.
    pub const FENCED: u8 = 3;
    /// `uninstall` could not finish: before deleting anything from
    /// ZooKeeper, or partway through deleting the subtree (the message
    /// says which).
    pub const UNINSTALL_FAILED: u8 = 4;
}

/// `--listen`: `ip:port`, or `host:port` resolved once at start-up to
/// the host's first IPv4 address (else its first address), so that
/// `localhost:8080` works as people type it.
fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(text)
        .map_err(|e| format!("not ip:port or host:port that resolves: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| "the host resolves to no address".to_string())
}

/// A duration flag: [`crate::util::parse_duration`] (not negative, at most
/// 365 days). clap names the flag in its error. Duration flags take values
/// starting with `-` (`allow_hyphen_values`), so that `-5s` is refused by
/// this parser, not mistaken for a flag.
fn duration(text: &str) -> Result<Duration, String> {
    crate::util::parse_duration(text)
}

/// A duration flag where zero means nothing sensible (a timer that fires
/// all the time, a timeout that always expires).
fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d.is_zero() {
        return Err(format!("{:?}: must be more than 0", text.trim()));
    }
    Ok(d)
}

/// Shortest `--zk-session-timeout`: ZooKeeper servers refuse (or round up)
/// anything near zero, and the client pings every third of it.
pub const MIN_ZK_SESSION_TIMEOUT: Duration = Duration::from_secs(1);

/// `--zk-session-timeout`: at least [`MIN_ZK_SESSION_TIMEOUT`].
fn zk_session_timeout(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d < MIN_ZK_SESSION_TIMEOUT {
        return Err(format!("{:?}: must be at least 1s", text.trim()));
    }
    Ok(d)
}

/// Shortest `--task-launch-timeout`: the leader looks for tasks stuck in
/// TASK_STAGING or TASK_STARTING once a second (its housekeeping), so a
/// shorter timeout would not be kept.
pub const MIN_TASK_LAUNCH_TIMEOUT: Duration = Duration::from_secs(1);

/// `--task-launch-timeout`: at least [`MIN_TASK_LAUNCH_TIMEOUT`] (zero
/// would kill every task as it is launched), at most 365 days.
fn task_launch_timeout(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d < MIN_TASK_LAUNCH_TIMEOUT {
        return Err(format!(
            "{:?}: must be at least 1s (a task launched is given at least that long to start)",
            text.trim()
        ));
    }
    Ok(d)
}

/// `--decline-refuse-seconds`: a finite number of seconds, from 0 to 365
/// days (Mesos `Filters.refuse_seconds`).
fn refuse_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| "expected a number of seconds".to_string())?;
    let max = crate::util::MAX_DURATION.as_secs_f64();
    if !seconds.is_finite() || seconds < 0.0 || seconds > max {
        return Err(format!(
            "expected a finite number of seconds, from 0 to {max} (365 days)"
        ));
    }
    Ok(seconds)
}

/// `--framework-name`: not empty, no control characters.
fn framework_name(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("the framework name cannot be empty".into());
    }
    if text.chars().any(char::is_control) {
        return Err("the framework name cannot contain control characters".into());
    }
    Ok(text.to_string())
}

/// `--framework-role`: a Mesos role name (Mesos `roles::validate`, docs
/// "Roles"): `*`, or `/`-separated components, none of them empty, `.`,
/// `..` or `*`, none starting with `-`, without whitespace or control
/// characters (Mesos forbids ASCII whitespace and DEL).
pub fn role(text: &str) -> Result<String, String> {
    if text == "*" {
        return Ok(text.to_string());
    }
    if text.is_empty() {
        return Err("the role cannot be empty (the default role is `*`)".into());
    }
    if text.starts_with('/') || text.ends_with('/') {
        return Err("a role cannot start or end with a slash".into());
    }
    for component in text.split('/') {
        let problem = match component {
            "" => Some("cannot contain two adjacent slashes".to_string()),
            "." | ".." | "*" => Some(format!("cannot have {component:?} as a component")),
            c if c.starts_with('-') => Some(format!("component {c:?} starts with '-'")),
            c if c.chars().any(|ch| ch.is_whitespace() || ch.is_control()) => Some(format!(
                "component {c:?} contains whitespace or a control character"
            )),
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(format!("a role {problem}"));
        }
    }
    Ok(text.to_string())
}

/// `--advertised-url`: an absolute `http(s)://host[:port][/path]` URL
/// without credentials, query or fragment; returned normalised, without a
/// trailing slash (paths are appended to it).
pub fn advertised_url(text: &str) -> Result<String, String> {
    const EXPECTED: &str = "expected an absolute URL, http(s)://host[:port]";
    let url = reqwest::Url::parse(text).map_err(|e| format!("{e}; {EXPECTED}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("the scheme must be http or https; {EXPECTED}"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("no host; {EXPECTED}"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials do not belong in a URL others see".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("a query or fragment cannot be a base URL".into());
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
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
    pub command: Option<CliCommand>,
    /// The cluster, when given before the subcommand (or without one).
    #[command(flatten)]
    pub cluster: ClusterArgs,
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
reregister action, unless --on-framework-removed=reregister or the strategy
is hard (which always registers afresh).

Jobs:
  mesos-appliance uninstall [--dry-run]   fence every replica, tear the framework(s)
                                          down, delete the ZooKeeper subtree
  mesos-appliance demo                    embedded mesos-testbed + dashboard
  mesos-appliance ctl --help              the API client: services, tasks, logs, events
  mesos-appliance import marathon FILE    Marathon app JSON to service specs (docs/marathon.md)

Durations: 500ms, 30s, 5m, 2h, 7days, 1h 30m; at most 365 days, never negative.

Exit codes:
  0  stopped on request (a failover stop), or the job succeeded
  1  runtime failure
  2  bad flags or configuration
  3  fenced by a newer deployment (do not restart with the same configuration)
  4  uninstall failed: before deleting anything, or partway through deleting
     the ZooKeeper subtree (its message says which; run it again once fixed)";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Run a replica of the scheduler (the default).
    Serve(ClusterArgs),
    /// One-shot job: fence all replicas, tear down every framework of this
    /// name, delete the ZooKeeper subtree, print a summary.
    Uninstall(UninstallArgs),
    /// Run the appliance against an embedded mesos-testbed with sample
    /// services, in-memory state and the dashboard on --listen. The cluster
    /// flags (--master, --zk, --principal, …) do not apply.
    Demo(DemoArgs),
    /// The API client for operators and scripts: services, tasks, jobs,
    /// agents, audit, events against any replica (`mesos-appliance ctl
    /// --help`; docs/cli.md). Must come first: it has its own flags.
    #[command(disable_help_flag = true)]
    Ctl(ForeignArgs),
    /// Convert Marathon apps to service specs (`mesos-appliance import
    /// marathon --help`; docs/marathon.md). Must come first.
    #[command(disable_help_flag = true)]
    Import(ForeignArgs),
}

/// The arguments of a command with its own parser (`ctl`, `import`), run
/// before this one sees the command line (`main.rs`); listed here for
/// `--help` only.
#[derive(Debug, Args)]
pub struct ForeignArgs {
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// Flags of `uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Tear down frameworks found only by name and role even when the --zk
    /// root stores no framework ID (without it, uninstall refuses: a
    /// mistyped --zk root must not remove someone's running framework).
    #[arg(long)]
    pub force: bool,
    /// How long to wait for the master to list the torn-down frameworks as completed.
    #[arg(long, default_value = "60s", value_parser = duration, allow_hyphen_values = true)]
    pub wait: Duration,
    /// The cluster, when given after `uninstall`.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Flags given on the command line that `uninstall` ignores (e.g.
    /// `--services`): it warns about each.
    #[arg(skip)]
    pub ignored: Vec<String>,
}

/// Largest `demo --agents`.
pub const MAX_DEMO_AGENTS: u16 = 100;

/// Flags of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Simulated agents of the embedded testbed (1 to 100).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_DEMO_AGENTS)))]
    pub agents: u16,
}

/// ZooKeeper session timeout unless `--zk-session-timeout` says otherwise.
pub const DEFAULT_ZK_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The Mesos cluster and the ZooKeeper ensemble a replica works in, for
/// `serve` and `uninstall` (the demo brings its own). Accepted before the
/// subcommand and after it; after it wins (see [`ClusterArgs::or`]).
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// Mesos master: `http(s)://host:port[,host:port…]` or `zk://[user:pass@]host:port,…/mesos`.
    #[arg(long, env = "MESOS_APPLIANCE_MASTER")]
    pub master: Option<String>,
    /// Coordination root: `zk://[user:pass@]h1:2181,h2:2181/path` (without a
    /// path: /mesos-appliance/`<framework-name>`). Without --zk: in-memory
    /// state, one replica only.
    #[arg(long, env = "MESOS_APPLIANCE_ZK")]
    pub zk: Option<String>,
    /// ZooKeeper session timeout, at least 1s; bounds failover after a crash. A leader
    /// keeps leading through ZooKeeper round trips up to about half of it [default: 10s].
    #[arg(long, value_parser = zk_session_timeout, allow_hyphen_values = true, env = "MESOS_APPLIANCE_ZK_SESSION_TIMEOUT")]
    pub zk_session_timeout: Option<Duration>,
    /// With zk:// credentials: create znodes readable only by them (default: world-readable).
    #[arg(long, env = "MESOS_APPLIANCE_ZK_PRIVATE_ACL")]
    pub zk_private_acl: bool,
    /// Principal for HTTP authentication to the master (also FrameworkInfo.principal).
    #[arg(long, env = "MESOS_APPLIANCE_PRINCIPAL")]
    pub principal: Option<String>,
    /// File holding the secret for --principal (first line; never logged).
    #[arg(long, env = "MESOS_APPLIANCE_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
    /// Deployment identity [default: a hash of the version and the effective configuration].
    #[arg(long, env = "MESOS_APPLIANCE_DEPLOYMENT_ID")]
    pub deployment_id: Option<String>,
}

impl ClusterArgs {
    /// These flags (given after the subcommand) over `outer` (given before it).
    pub fn or(self, outer: ClusterArgs) -> ClusterArgs {
        ClusterArgs {
            master: self.master.or(outer.master),
            zk: self.zk.or(outer.zk),
            zk_session_timeout: self.zk_session_timeout.or(outer.zk_session_timeout),
            zk_private_acl: self.zk_private_acl || outer.zk_private_acl,
            principal: self.principal.or(outer.principal),
            secret_file: self.secret_file.or(outer.secret_file),
            deployment_id: self.deployment_id.or(outer.deployment_id),
        }
    }

    /// `--zk-session-timeout`, else [`DEFAULT_ZK_SESSION_TIMEOUT`].
    pub fn zk_session_timeout(&self) -> Duration {
        self.zk_session_timeout
            .unwrap_or(DEFAULT_ZK_SESSION_TIMEOUT)
    }
}

/// Defaults of the flags whose default depends on the subcommand: a replica
/// in a real cluster wants long timers, the demo short ones. A value given
/// on the command line or in the environment always wins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Defaults {
    /// `--failover-timeout`.
    pub failover_timeout: Duration,
    /// `--reconcile-interval`.
    pub reconcile_interval: Duration,
    /// `--reconcile-initial-delay`.
    pub reconcile_initial_delay: Duration,
    /// `--decline-refuse-seconds`, in seconds.
    pub decline_refuse_seconds: f64,
}

impl Defaults {
    /// `serve` (and the deployment ID's hash): one week, 15 min, 1 min, 120 s.
    pub const SERVE: Defaults = Defaults {
        failover_timeout: Duration::from_secs(7 * 86_400),
        reconcile_interval: Duration::from_secs(15 * 60),
        reconcile_initial_delay: Duration::from_secs(60),
        decline_refuse_seconds: 120.0,
    };
    /// `demo`: one hour, 5 min, 30 s, 10 s.
    pub const DEMO: Defaults = Defaults {
        failover_timeout: Duration::from_secs(3600),
        reconcile_interval: Duration::from_secs(300),
        reconcile_initial_delay: Duration::from_secs(30),
        decline_refuse_seconds: 10.0,
    };
}

/// Settings shared by every subcommand.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Framework name (FrameworkInfo.name).
    #[arg(
        long,
        global = true,
        default_value = "mesos-appliance",
        value_parser = framework_name,
        env = "MESOS_APPLIANCE_FRAMEWORK_NAME"
    )]
    pub framework_name: String,
    /// Framework role (FrameworkInfo.role): `*` or a Mesos role name such as `web/prod`.
    #[arg(
        long,
        global = true,
        default_value = "*",
        value_parser = role,
        env = "MESOS_APPLIANCE_FRAMEWORK_ROLE"
    )]
    pub framework_role: String,
    /// Unix user tasks run as on the agents (FrameworkInfo.user) [default: $USER, else root].
    #[arg(long, global = true, env = "MESOS_APPLIANCE_FRAMEWORK_USER")]
    pub framework_user: Option<String>,
    /// How long Mesos keeps the framework and its tasks after the scheduler
    /// disconnects [default: 1week; demo: 1h].
    #[arg(long, global = true, value_parser = duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_FAILOVER_TIMEOUT")]
    pub failover_timeout: Option<Duration>,
    /// What a new deployment does to an old one: failover, upgrade or hard
    /// (details: `mesos-appliance --help`).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "failover",
        env = "MESOS_APPLIANCE_FRAMEWORK_DEPLOYMENT_STRATEGY"
    )]
    pub framework_deployment_strategy: StrategyArg,
    /// When Mesos says the framework was removed: wait for the operator, or
    /// reregister (the `hard` strategy always reregisters).
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
        value_parser = listen_addr,
        env = "MESOS_APPLIANCE_LISTEN"
    )]
    pub listen: SocketAddr,
    /// URL other replicas, users and the Mesos fetcher reach this replica at,
    /// `http(s)://host:port` [default: from --listen; this host's name when
    /// --listen is 0.0.0.0 or `[::]`].
    #[arg(long, global = true, value_parser = advertised_url, env = "MESOS_APPLIANCE_ADVERTISED_URL")]
    pub advertised_url: Option<String>,
    /// File of admin tokens for actions (`Authorization: Bearer …`), one
    /// `name:token` per line (the name is what the audit trail shows), or
    /// a single token alone. Without it, actions are allowed only when
    /// listening on loopback.
    #[arg(long, global = true, env = "MESOS_APPLIANCE_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Serve the dashboard and API over HTTPS with this PEM certificate
    /// chain (with --tls-key); both are read again on SIGHUP.
    #[arg(
        long,
        global = true,
        requires = "tls_key",
        env = "MESOS_APPLIANCE_TLS_CERT"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        global = true,
        requires = "tls_cert",
        env = "MESOS_APPLIANCE_TLS_KEY"
    )]
    pub tls_key: Option<PathBuf>,
    /// Log lines as human-readable text or as one JSON object per line.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "MESOS_APPLIANCE_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// How long one call to a Mesos agent (or master) for a task's log may
    /// take, body included.
    #[arg(long, global = true, default_value = "5s", value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_AGENT_TIMEOUT")]
    pub agent_timeout: Duration,
    /// Allow unauthenticated actions on a non-loopback address (dangerous).
    #[arg(long, global = true, env = "MESOS_APPLIANCE_INSECURE_ACTIONS")]
    pub insecure_actions: bool,
    /// JSON file of services, stored in ZooKeeper (in memory without --zk)
    /// when it holds none.
    #[arg(long, global = true, env = "MESOS_APPLIANCE_SERVICES")]
    pub services: Option<PathBuf>,
    /// Implicit reconciliation period (Mesos reconciliation guide) [default: 15m; demo: 5m].
    #[arg(long, global = true, value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_RECONCILE_INTERVAL")]
    pub reconcile_interval: Option<Duration>,
    /// Delay before the first periodic reconciliation [default: 1m; demo: 30s].
    #[arg(long, global = true, value_parser = duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_RECONCILE_INITIAL_DELAY")]
    pub reconcile_initial_delay: Option<Duration>,
    /// Minimum pause between two reconciliation runs.
    #[arg(long, global = true, default_value = "30s", value_parser = duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_RECONCILE_COOLDOWN")]
    pub reconcile_cooldown: Duration,
    /// Cap of the backoff between explicit RECONCILE calls.
    #[arg(long, global = true, default_value = "1m", value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_EXPLICIT_RECONCILE_MAX_BACKOFF")]
    pub explicit_reconcile_max_backoff: Duration,
    /// An explicit reconciliation gives up (listing the unanswered tasks) after this long.
    #[arg(long, global = true, default_value = "5m", value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_EXPLICIT_RECONCILE_ABORT_TIMEOUT")]
    pub explicit_reconcile_abort_timeout: Duration,
    /// Rolling replacement of tasks whose service spec changed: at most this
    /// many desired instances down at a time (1 or more).
    #[arg(
        long,
        global = true,
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..),
        env = "MESOS_APPLIANCE_UPGRADE_MAX_UNAVAILABLE"
    )]
    pub upgrade_max_unavailable: u32,
    /// No new task is placed on an agent whose maintenance window (an
    /// offer's `unavailability`) starts within this long.
    #[arg(long, global = true, default_value = "1h", value_parser = duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_MAINTENANCE_LEAD_TIME")]
    pub maintenance_lead_time: Duration,
    /// Unused offers are declined after this long (more than 0).
    #[arg(long, global = true, default_value = "10s", value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_OFFER_TTL")]
    pub offer_ttl: Duration,
    /// Offers that left are remembered this long (late RESCINDs, duplicates).
    #[arg(long, global = true, default_value = "2m", value_parser = duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_OFFER_LINGER_TTL")]
    pub offer_linger_ttl: Duration,
    /// Filter sent with declines when no work is pending, in seconds (finite,
    /// 0 or more) [default: 120; demo: 10].
    #[arg(long, global = true, value_parser = refuse_seconds, allow_hyphen_values = true, env = "MESOS_APPLIANCE_DECLINE_REFUSE_SECONDS")]
    pub decline_refuse_seconds: Option<f64>,
    /// The least time between two REVIVEs: a need for offers that arises
    /// sooner waits for the interval's end (0: no bound). A subscription's
    /// first REVIVE is never delayed.
    #[arg(long, global = true, default_value = "1s", value_parser = duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_MIN_REVIVE_INTERVAL")]
    pub min_revive_interval: Duration,
    /// How often the stored framework ID is re-read and compared with ours.
    #[arg(long, global = true, default_value = "30s", value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_FRAMEWORK_ID_REFRESH_INTERVAL")]
    pub framework_id_refresh_interval: Duration,
    /// A task still in TASK_STAGING or TASK_STARTING this long after its
    /// last update is killed and replaced (Marathon's
    /// `task_launch_timeout`); a drain waiting on such a replacement says
    /// when (at least 1s).
    #[arg(long, global = true, default_value = "5m", value_parser = task_launch_timeout, allow_hyphen_values = true, env = "MESOS_APPLIANCE_TASK_LAUNCH_TIMEOUT")]
    pub task_launch_timeout: Duration,
    /// How long an action's HTTP handler waits for the scheduler (then 503).
    #[arg(long, global = true, default_value = "10s", value_parser = positive_duration, allow_hyphen_values = true, env = "MESOS_APPLIANCE_HTTP_HANDLER_TIMEOUT")]
    pub http_handler_timeout: Duration,
    /// The mesos-appliance-executor binary served to the Mesos fetcher
    /// [default: next to this binary].
    #[arg(long, global = true, env = "MESOS_APPLIANCE_EXECUTOR_BINARY")]
    pub executor_binary: Option<PathBuf>,
}

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's JSON layer).
    Json,
}

/// `--framework-deployment-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    /// Join the election; the leader adopts the stored framework ID and its tasks.
    Failover,
    /// Fence older deployments, keep the framework ID, roll changed services.
    Upgrade,
    /// Fence older deployments, tear down earlier frameworks of this name, register afresh.
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
    /// `--advertised-url`, or `http://<listen>` (`https://` with
    /// `--tls-cert`; IPv6 in brackets); for an unspecified address
    /// (`0.0.0.0`, `[::]`) `hostname` names this machine instead, as other
    /// hosts cannot use the address itself.
    pub fn advertised_url(&self, hostname: impl FnOnce() -> Option<String>) -> String {
        if let Some(url) = &self.advertised_url {
            return url.clone();
        }
        let scheme = if self.tls_cert.is_some() {
            "https"
        } else {
            "http"
        };
        if self.listen.ip().is_unspecified() {
            let host = hostname().unwrap_or_else(|| "localhost".to_string());
            return format!("{scheme}://{host}:{}", self.listen.port());
        }
        format!("{scheme}://{}", self.listen)
    }
}

/// What to run, with its effective settings.
#[derive(Debug)]
pub enum Job {
    /// A replica (`serve`, or no subcommand).
    Serve(CommonArgs, ClusterArgs),
    /// `uninstall`.
    Uninstall(CommonArgs, ClusterArgs, UninstallArgs),
    /// `demo`.
    Demo(CommonArgs, DemoArgs),
}

impl Cli {
    /// Parses `args` (the program name first) into the job to run. Cluster
    /// flags given after `serve` / `uninstall` win over those before it;
    /// given on the command line before `demo`, they are refused.
    ///
    /// # Errors
    /// clap's usage errors (exit code 2, or 0 for `--help` and `--version`).
    pub fn job_from<I, T>(args: I) -> Result<Job, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Cli::clap_command().try_get_matches_from(args)?;
        let cli = Cli::from_arg_matches(&matches)?;
        Ok(match cli.command {
            None => Job::Serve(cli.common, cli.cluster),
            Some(CliCommand::Serve(cluster)) => Job::Serve(cli.common, cluster.or(cli.cluster)),
            Some(CliCommand::Uninstall(mut args)) => {
                let sub = matches.subcommand_matches("uninstall");
                for (id, flag) in UNINSTALL_WARNS {
                    let given = |m: &ArgMatches| {
                        m.try_get_raw(id).is_ok_and(|v| v.is_some())
                            && m.value_source(id) == Some(ValueSource::CommandLine)
                    };
                    if given(&matches) || sub.is_some_and(given) {
                        args.ignored.push(flag.to_string());
                    }
                }
                let cluster = std::mem::take(&mut args.cluster).or(cli.cluster);
                Job::Uninstall(cli.common, cluster, args)
            }
            Some(CliCommand::Demo(args)) => {
                if let Some(flag) = cluster_flag_on_command_line(&matches) {
                    return Err(Cli::command().error(
                        clap::error::ErrorKind::ArgumentConflict,
                        format!(
                            "--{flag} does not apply to demo: it runs an embedded \
                             mesos-testbed with in-memory state"
                        ),
                    ));
                }
                Job::Demo(cli.common, args)
            }
            Some(CliCommand::Ctl(_) | CliCommand::Import(_)) => {
                let name = matches.subcommand_name().unwrap_or("ctl");
                return Err(Cli::command().error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "`{name}` has its own flags and must come first: \
                         mesos-appliance {name} [its flags] …"
                    ),
                ));
            }
        })
    }
}

/// The [`CommonArgs`] `uninstall` uses: it finds the frameworks to remove
/// by name and role. The others are accepted (replicas' environment
/// variables may be set where it runs) but left out of `uninstall --help`,
/// as is `--deployment-id`.
const UNINSTALL_USES: [&str; 2] = ["framework_name", "framework_role"];

/// Flags `uninstall` ignores with a warning when given on the command line:
/// they look like they would change what it does.
const UNINSTALL_WARNS: [(&str, &str); 2] = [
    ("services", "--services"),
    (
        "framework_deployment_strategy",
        "--framework-deployment-strategy",
    ),
];

/// `uninstall --help` on `--zk`.
const UNINSTALL_ZK_HELP: &str = "Coordination root of the replicas to remove: \
     `zk://[user:pass@]h1:2181,h2:2181/path` (without a path: \
     /mesos-appliance/<framework-name>); they are fenced and the whole subtree is \
     deleted. Without --zk: only the frameworks on the master are torn down";

/// `demo --help` on `--services`: the demo has no ZooKeeper.
const DEMO_SERVICES_HELP: &str =
    "JSON file of services to run instead of the sample ones (kept in memory)";

impl Cli {
    /// The clap command: [`Cli::command`] with the settings `uninstall`
    /// ignores hidden from its help, and `--services` described for the
    /// demo in `demo --help`. (Each subcommand gets its own copy of a
    /// global flag; giving it one first, clap copies nothing over it.)
    pub fn clap_command() -> clap::Command {
        let command = Cli::command();
        let globals: Vec<clap::Arg> = command
            .get_arguments()
            .filter(|arg| arg.is_global_set())
            .cloned()
            .collect();
        command.mut_subcommands(|sub| match sub.get_name() {
            "uninstall" => globals
                .iter()
                .filter(|arg| !UNINSTALL_USES.contains(&arg.get_id().as_str()))
                .fold(sub, |sub, arg| sub.arg(arg.clone().hide(true)))
                .mut_arg("deployment_id", |arg| arg.hide(true))
                .mut_arg("zk", |arg| {
                    arg.help(UNINSTALL_ZK_HELP).long_help(UNINSTALL_ZK_HELP)
                }),
            "demo" => match globals.iter().find(|arg| arg.get_id() == "services") {
                Some(services) => sub.arg(
                    services
                        .clone()
                        .help(DEMO_SERVICES_HELP)
                        .long_help(DEMO_SERVICES_HELP),
                ),
                None => sub,
            },
            _ => sub,
        })
    }
}

/// The first [`ClusterArgs`] flag given on the command line (not from the
/// environment) before the subcommand.
fn cluster_flag_on_command_line(matches: &ArgMatches) -> Option<String> {
    let flags = ClusterArgs::augment_args(clap::Command::new("cluster"));
    flags
        .get_arguments()
        .find(|arg| matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine))
        .and_then(|arg| arg.get_long().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn job(args: &[&str]) -> Result<Job, clap::Error> {
        Cli::job_from(std::iter::once("mesos-appliance").chain(args.iter().copied()))
    }

    fn refused(args: &[&str]) -> clap::Error {
        match job(args) {
            Ok(job) => panic!("{args:?} accepted: {job:?}"),
            Err(e) => {
                assert_eq!(e.exit_code(), i32::from(exit::USAGE), "{e}");
                e
            }
        }
    }

    fn serve(args: &[&str]) -> (CommonArgs, ClusterArgs) {
        match job(args).unwrap() {
            Job::Serve(common, cluster) => (common, cluster),
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn decline_refuse_seconds_must_be_finite_and_not_negative() {
        for bad in ["NaN", "nan", "inf", "-inf", "-5", "-0.5", "soon", ""] {
            let e = refused(&[&format!("--decline-refuse-seconds={bad}")]);
            assert!(e.to_string().contains("--decline-refuse-seconds"), "{e}");
        }
        for (good, seconds) in [("0", 0.0), ("5", 5.0), ("2.5", 2.5), ("86400", 86400.0)] {
            let (common, _) = serve(&["--decline-refuse-seconds", good]);
            assert_eq!(common.decline_refuse_seconds, Some(seconds));
        }
        assert_eq!(serve(&[]).0.decline_refuse_seconds, None);
    }

    /// Every duration flag, with the subcommand it belongs to.
    const DURATION_FLAGS: [&str; 14] = [
        "--failover-timeout",
        "--reconcile-interval",
        "--reconcile-initial-delay",
        "--reconcile-cooldown",
        "--explicit-reconcile-max-backoff",
        "--explicit-reconcile-abort-timeout",
        "--offer-ttl",
        "--offer-linger-ttl",
        "--framework-id-refresh-interval",
        "--http-handler-timeout",
        "--zk-session-timeout",
        "--task-launch-timeout",
        "uninstall --wait",
        "demo --failover-timeout",
    ];

    fn with_value(flag: &str, value: &str) -> Vec<String> {
        let mut args: Vec<String> = flag.split(' ').map(str::to_string).collect();
        args.push(value.to_string());
        args
    }

    #[test]
    fn durations_are_bounded_for_every_flag() {
        for flag in DURATION_FLAGS {
            let name = flag.rsplit(' ').next().unwrap();
            for (value, says) in [
                ("500000000000years", "at most 365 days"),
                ("366days", "at most 365 days"),
                ("-5s", "negative durations are not allowed"),
                ("-5", "negative durations are not allowed"),
            ] {
                let args = with_value(flag, value);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let e = refused(&args).to_string();
                assert!(e.contains(name) && e.contains(says), "{args:?}: {e}");
            }
            let args = with_value(flag, "365days");
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            job(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn zero_is_refused_where_it_means_nothing() {
        for flag in [
            "--offer-ttl",
            "--reconcile-interval",
            "--explicit-reconcile-max-backoff",
            "--explicit-reconcile-abort-timeout",
            "--framework-id-refresh-interval",
            "--http-handler-timeout",
        ] {
            let e = refused(&[flag, "0s"]).to_string();
            assert!(e.contains(flag) && e.contains("more than 0"), "{e}");
        }
        for short in ["0s", "999ms"] {
            let e = refused(&["--zk-session-timeout", short]).to_string();
            assert!(e.contains("at least 1s"), "{e}");
            let e = refused(&["--task-launch-timeout", short]).to_string();
            assert!(
                e.contains("--task-launch-timeout") && e.contains("at least 1s"),
                "{e}"
            );
        }
        assert_eq!(
            serve(&["--task-launch-timeout", "3s"])
                .0
                .task_launch_timeout,
            Duration::from_secs(3)
        );
        assert_eq!(serve(&[]).0.task_launch_timeout, Duration::from_secs(300));
        let (_, cluster) = serve(&["--zk-session-timeout", "1s"]);
        assert_eq!(cluster.zk_session_timeout(), MIN_ZK_SESSION_TIMEOUT);
        // Zero is meaningful here: Mesos removes the framework at once.
        assert_eq!(
            serve(&["--failover-timeout", "0s"]).0.failover_timeout,
            Some(Duration::ZERO)
        );
        let e = refused(&["--decline-refuse-seconds", "31536001"]).to_string();
        assert!(e.contains("365 days"), "{e}");
        let e = refused(&["--decline-refuse-seconds", "-5"]).to_string();
        assert!(e.contains("0 or more") || e.contains("from 0"), "{e}");
        assert_eq!(
            serve(&["--decline-refuse-seconds", "31536000"])
                .0
                .decline_refuse_seconds,
            Some(31_536_000.0)
        );
    }

    #[test]
    fn roles_follow_the_mesos_naming_rules() {
        for good in [
            "*",
            "web",
            "web/prod",
            "a.b",
            "a-b",
            "a_b",
            "..a",
            "team/web.x",
        ] {
            assert_eq!(role(good).as_deref(), Ok(good), "{good:?}");
        }
        for bad in [
            "", ".", "..", "-x", "a/-x", "/a", "a/", "a//b", "a/./b", "a/../b", "a/*", "*/a",
            "a b", "a\tb", "a\nb", "a\u{7f}b", "a\u{1}b",
        ] {
            assert!(role(bad).is_err(), "{bad:?} accepted");
        }
        let e = refused(&["--framework-role", ""]);
        assert!(e.to_string().contains("cannot be empty"), "{e}");
        refused(&["--framework-role=-x"]);
        refused(&["--framework-role", ".."]);
        assert_eq!(serve(&[]).0.framework_role, "*");
    }

    #[test]
    fn the_framework_name_cannot_be_empty() {
        for bad in ["", "  ", "a\u{0}b"] {
            refused(&["--framework-name", bad]);
        }
        assert_eq!(serve(&[]).0.framework_name, "mesos-appliance");
        assert_eq!(serve(&["--framework-name", "web"]).0.framework_name, "web");
    }

    #[test]
    fn the_advertised_url_is_an_absolute_http_url() {
        for bad in [
            "not a url",
            "localhost:8080",
            "/path",
            "ftp://host:21",
            "http://",
            "http://user:secret@host:8080",
            "http://host:8080/?a=b",
            "http://host:8080/#top",
        ] {
            let e = refused(&["--advertised-url", bad]);
            assert!(e.to_string().contains("--advertised-url"), "{e}");
        }
        for (given, used) in [
            ("http://host:8080", "http://host:8080"),
            ("http://host:8080/", "http://host:8080"),
            (
                "https://Host.example/appliance/",
                "https://host.example/appliance",
            ),
            ("http://[::1]:8080", "http://[::1]:8080"),
        ] {
            let (common, _) = serve(&["--advertised-url", given]);
            assert_eq!(common.advertised_url(|| None), used);
        }
    }

    #[test]
    fn the_default_advertised_url_is_reachable_from_other_hosts() {
        let url = |listen: &str, host: Option<&str>| {
            serve(&["--listen", listen])
                .0
                .advertised_url(|| host.map(str::to_string))
        };
        assert_eq!(url("127.0.0.1:8080", Some("box")), "http://127.0.0.1:8080");
        assert_eq!(url("[::1]:18181", Some("box")), "http://[::1]:18181");
        assert_eq!(url("0.0.0.0:18181", Some("box")), "http://box:18181");
        assert_eq!(url("[::]:18181", Some("box")), "http://box:18181");
        assert_eq!(url("0.0.0.0:18181", None), "http://localhost:18181");
    }

    #[test]
    fn maintenance_lead_time_defaults_to_an_hour() {
        assert_eq!(
            serve(&[]).0.maintenance_lead_time,
            Duration::from_secs(3600)
        );
        assert_eq!(
            serve(&["--maintenance-lead-time", "10m"])
                .0
                .maintenance_lead_time,
            Duration::from_secs(600)
        );
    }

    #[test]
    fn upgrade_max_unavailable_zero_is_refused() {
        let e = refused(&["--upgrade-max-unavailable", "0"]);
        assert!(e.to_string().contains("--upgrade-max-unavailable"), "{e}");
        assert_eq!(serve(&[]).0.upgrade_max_unavailable, 1);
        assert_eq!(
            serve(&["--upgrade-max-unavailable", "3"])
                .0
                .upgrade_max_unavailable,
            3
        );
    }

    #[test]
    fn cluster_flags_go_before_or_after_serve_and_uninstall() {
        let (_, cluster) = serve(&["--master", "http://m:5050", "--zk-session-timeout", "3s"]);
        assert_eq!(cluster.master.as_deref(), Some("http://m:5050"));
        assert_eq!(cluster.zk_session_timeout(), Duration::from_secs(3));
        let (_, cluster) = serve(&["serve", "--master", "http://m:5050"]);
        assert_eq!(cluster.master.as_deref(), Some("http://m:5050"));
        assert_eq!(cluster.zk_session_timeout(), DEFAULT_ZK_SESSION_TIMEOUT);
        let (_, cluster) = serve(&[
            "--master",
            "http://a:1",
            "--zk-private-acl",
            "serve",
            "--master",
            "http://b:1",
        ]);
        assert_eq!(
            cluster.master.as_deref(),
            Some("http://b:1"),
            "after the subcommand wins"
        );
        assert!(cluster.zk_private_acl);
        for args in [
            &["--zk", "zk://z:2181/a", "uninstall", "--wait", "2s"][..],
            &["uninstall", "--zk", "zk://z:2181/a", "--wait", "2s"][..],
        ] {
            match job(args).unwrap() {
                Job::Uninstall(_, cluster, uninstall) => {
                    assert_eq!(cluster.zk.as_deref(), Some("zk://z:2181/a"));
                    assert_eq!(uninstall.wait, Duration::from_secs(2));
                    assert!(uninstall.ignored.is_empty());
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn uninstall_notes_the_flags_it_ignores_and_describes_its_own_zk() {
        for args in [
            &["--services", "/s.json", "uninstall"][..],
            &[
                "uninstall",
                "--framework-deployment-strategy",
                "hard",
                "--services",
                "/s.json",
            ],
        ] {
            match job(args).unwrap() {
                Job::Uninstall(_, _, uninstall) => {
                    assert!(
                        uninstall.ignored.contains(&"--services".to_string()),
                        "{args:?}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
        let help = Cli::clap_command()
            .find_subcommand_mut("uninstall")
            .unwrap()
            .render_help()
            .to_string();
        assert!(help.contains("subtree is deleted"), "{help}");
        assert!(!help.contains("in-memory"), "{help}");
    }

    #[test]
    fn demo_refuses_the_cluster_flags_and_lists_only_what_it_honours() {
        let e = refused(&["demo", "--master", "http://m:5050"]);
        assert_eq!(e.kind(), ErrorKind::UnknownArgument, "{e}");
        let e = refused(&["--zk", "zk://z:2181/a", "demo"]);
        assert!(e.to_string().contains("--zk does not apply to demo"), "{e}");
        let help = refused_help(&["demo", "--help"]);
        for honoured in [
            "--agents",
            "--listen",
            "--failover-timeout",
            "--services",
            "--framework-name",
        ] {
            assert!(
                help.contains(honoured),
                "{honoured} missing from demo --help"
            );
        }
        for ignored in [
            "--master",
            "--zk",
            "--zk-session-timeout",
            "--principal",
            "--secret-file",
            "--deployment-id",
        ] {
            assert!(
                !help.contains(&format!("{ignored} ")),
                "{ignored} listed in demo --help"
            );
        }
        let serve_help = refused_help(&["--help"]);
        for flag in [
            "--master",
            "--zk",
            "--principal",
            "--deployment-id",
            "--failover-timeout",
        ] {
            assert!(serve_help.contains(flag), "{flag} missing from --help");
        }
    }

    fn refused_help(args: &[&str]) -> String {
        match job(args) {
            Err(e) if e.kind() == ErrorKind::DisplayHelp => e.to_string(),
            other => panic!("no help: {other:?}"),
        }
    }

    #[test]
    fn each_subcommand_help_stands_alone_and_lists_what_applies() {
        for args in [
            &["--help"][..],
            &["serve", "--help"],
            &["demo", "--help"],
            &["uninstall", "--help"],
        ] {
            let help = refused_help(args);
            assert!(!help.contains("below"), "{args:?}: {help}");
        }
        let demo = refused_help(&["demo", "--help"]);
        let services = demo
            .split("--services")
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap();
        assert!(
            services.contains("instead of the sample ones"),
            "{services}"
        );
        assert!(!services.contains("ZooKeeper"), "{services}");
        assert!(refused_help(&["--help"]).contains("stored in ZooKeeper"));
        let uninstall = refused_help(&["uninstall", "--help"]);
        for applies in [
            "--dry-run",
            "--wait",
            "--master",
            "--zk ",
            "--principal",
            "--framework-name",
            "--framework-role",
        ] {
            assert!(
                uninstall.contains(applies),
                "{applies} missing: {uninstall}"
            );
        }
        for ignored in [
            "--listen",
            "--admin-token-file",
            "--offer-ttl",
            "--services",
            "--failover-timeout",
            "--reconcile-interval",
            "--executor-binary",
            "--deployment-id",
        ] {
            assert!(
                !uninstall.contains(ignored),
                "{ignored} listed: {uninstall}"
            );
        }
        // Hidden, still accepted (a replica's environment may set them).
        match job(&["uninstall", "--listen", "127.0.0.1:1", "--offer-ttl", "5s"]).unwrap() {
            Job::Uninstall(common, _, _) => assert_eq!(common.offer_ttl, Duration::from_secs(5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn listen_takes_a_host_name_that_resolves() {
        match job(&["--listen", "localhost:9090"]).unwrap() {
            Job::Serve(common, _) => assert_eq!(common.listen, "127.0.0.1:9090".parse().unwrap()),
            other => panic!("{other:?}"),
        }
        assert!(job(&["--listen", "localhost"]).is_err(), "no port");
        assert!(job(&["--listen", "no-such-host.invalid:80"]).is_err());
    }

    #[test]
    fn help_lists_ctl_and_import_which_must_come_first() {
        let help = refused_help(&["--help"]);
        for command in ["  ctl ", "  import "] {
            assert!(help.contains(command), "{command} missing: {help}");
        }
        for args in [
            &["--zk", "zk://h/x", "ctl", "tasks"][..],
            &["--zk", "zk://h/x", "import", "marathon", "f.json"],
        ] {
            let e = job(args).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ArgumentConflict, "{args:?}");
            assert!(e.to_string().contains("must come first"), "{e}");
        }
    }

    #[test]
    fn demo_agents_are_one_or_more() {
        refused(&["demo", "--agents", "0"]);
        refused(&["demo", "--agents", "101"]);
        for (given, agents) in [(None, 3), (Some("1"), 1), (Some("100"), 100)] {
            let args: Vec<&str> = match given {
                Some(n) => vec!["demo", "--agents", n],
                None => vec!["demo"],
            };
            match job(&args).unwrap() {
                Job::Demo(_, demo) => assert_eq!(demo.agents, agents),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn demo_keeps_explicit_timing_flags() {
        match job(&[
            "demo",
            "--failover-timeout",
            "2h",
            "--decline-refuse-seconds",
            "0",
        ])
        .unwrap()
        {
            Job::Demo(common, _) => {
                assert_eq!(common.failover_timeout, Some(Duration::from_secs(7200)));
                assert_eq!(common.decline_refuse_seconds, Some(0.0));
                assert_eq!(common.reconcile_interval, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn help_states_the_defaults_in_force() {
        let help = refused_help(&["--help"]);
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for (text, serve, demo) in [
            (
                "[default: 1week; demo: 1h]",
                Defaults::SERVE.failover_timeout,
                Defaults::DEMO.failover_timeout,
            ),
            (
                "[default: 15m; demo: 5m]",
                Defaults::SERVE.reconcile_interval,
                Defaults::DEMO.reconcile_interval,
            ),
            (
                "[default: 1m; demo: 30s]",
                Defaults::SERVE.reconcile_initial_delay,
                Defaults::DEMO.reconcile_initial_delay,
            ),
        ] {
            assert!(flat.contains(text), "{text} missing from --help");
            let (s, d) = text
                .trim_matches(['[', ']'])
                .trim_start_matches("default: ")
                .split_once("; demo: ")
                .unwrap();
            assert_eq!(humantime::parse_duration(s).unwrap(), serve, "{text}");
            assert_eq!(humantime::parse_duration(d).unwrap(), demo, "{text}");
        }
        assert!(flat.contains("[default: 120; demo: 10]"));
        assert_eq!(Defaults::SERVE.decline_refuse_seconds, 120.0);
        assert_eq!(Defaults::DEMO.decline_refuse_seconds, 10.0);
        assert!(flat.contains("[default: 10s]"));
        assert_eq!(DEFAULT_ZK_SESSION_TIMEOUT, Duration::from_secs(10));
    }
}
