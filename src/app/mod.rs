//! The `mesos-appliance` process: the command line ([`cli`]), a replica
//! (`serve`, [`serve`]), the `uninstall` job ([`uninstall`]) and the `demo`
//! ([`demo`]). This is where the layers are wired together: coordination,
//! the scheduler supervisor, the web layer, signals.

pub mod cli;
pub mod demo;
pub mod serve;
pub mod uninstall;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::coordination::{Coordinator, ReplicaInfo};
use crate::executor::info::ServedExecutor;
use crate::mesos::client::{ClientConfig, Credentials};
use crate::mesos::detector::MasterSpec;
use crate::scheduler::config::CoreConfig;
use crate::scheduler::core::CoreDeps;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::spec::service::{ServiceSpec, parse_services_file};
use crate::scheduler::{SchedulerHandle, supervisor};
use crate::web::{self, AppState, WebConfig};
use cli::{ClusterArgs, CommonArgs, Defaults};

/// A configuration problem, reported with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Reads and validates `--services`.
pub fn load_services(path: Option<&Path>) -> Result<Vec<ServiceSpec>, ConfigError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("--services {}: {e}", path.display())))?;
    parse_services_file(&text)
        .map_err(|e| ConfigError(format!("--services {}: {e}", path.display())))
}

/// The Mesos client settings from the flags (`--master`, `--principal`, `--secret-file`).
pub fn client_config(cluster: &ClusterArgs, master: &str) -> Result<ClientConfig, ConfigError> {
    // MasterSpecError names --master (and hides passwords) itself.
    let spec = MasterSpec::parse(master).map_err(|e| ConfigError(e.to_string()))?;
    let mut config = ClientConfig::new(spec);
    config.zk_session_timeout = cluster.zk_session_timeout();
    match (&cluster.principal, &cluster.secret_file) {
        (Some(principal), Some(file)) => {
            config.credentials = Some(
                Credentials::from_secret_file(principal.clone(), file)
                    .map_err(|e| ConfigError(format!("--secret-file {}: {e}", file.display())))?,
            );
        }
        (None, Some(_)) => return Err(ConfigError("--secret-file needs --principal".into())),
        _ => {}
    }
    Ok(config)
}

/// The core's settings from the flags; `defaults` fill in the timing flags
/// that were not given ([`Defaults::SERVE`] or [`Defaults::DEMO`]).
pub fn core_config(
    common: &CommonArgs,
    defaults: &Defaults,
    advertised_url: &str,
    executor_version: Option<&str>,
) -> CoreConfig {
    let mut c = CoreConfig::default();
    c.framework_name.clone_from(&common.framework_name);
    c.role.clone_from(&common.framework_role);
    if let Some(user) = &common.framework_user {
        c.user.clone_from(user);
    }
    c.failover_timeout = common.failover_timeout.unwrap_or(defaults.failover_timeout);
    c.hostname = hostname_of(advertised_url);
    c.webui_url = advertised_url.to_string();
    c.strategy = common.framework_deployment_strategy.into();
    c.on_framework_removed = common.on_framework_removed;
    c.upgrade_max_unavailable = common.upgrade_max_unavailable;
    c.maintenance_lead = common.maintenance_lead_time;
    c.offer_ttl = common.offer_ttl;
    c.transient_timeout = common.task_launch_timeout;
    c.offer_linger = common.offer_linger_ttl;
    c.decline_refuse_seconds = common
        .decline_refuse_seconds
        .unwrap_or(defaults.decline_refuse_seconds);
    c.min_revive_interval = common.min_revive_interval;
    c.reconcile.interval = common
        .reconcile_interval
        .unwrap_or(defaults.reconcile_interval);
    c.reconcile.initial_delay = common
        .reconcile_initial_delay
        .unwrap_or(defaults.reconcile_initial_delay);
    c.reconcile.cooldown = common.reconcile_cooldown;
    c.reconcile.explicit_max_backoff = common.explicit_reconcile_max_backoff;
    c.reconcile.explicit_abort_timeout = common.explicit_reconcile_abort_timeout;
    c.framework_id_refresh_interval = common.framework_id_refresh_interval;
    c.executor_url = executor_version.map(|version| {
        format!(
            "{advertised_url}{}",
            crate::executor::info::binary_path(version)
        )
    });
    c
}

/// The host of `url` for `FrameworkInfo.hostname`: an IPv6 address without
/// its brackets; `localhost` if the URL has none.
fn hostname_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The URL this replica advertises (see [`CommonArgs::advertised_url`]),
/// with a warning when it had to be guessed from this machine's name.
pub fn advertised_url(common: &CommonArgs) -> String {
    let url = common.advertised_url(crate::util::hostname);
    if common.advertised_url.is_none() && common.listen.ip().is_unspecified() {
        tracing::warn!(
            listen = %common.listen,
            advertised = %url,
            "--listen is a wildcard address: advertising this host's name; set --advertised-url \
             to the URL agents, users and other replicas reach this replica at"
        );
    }
    url
}

/// `--executor-binary` (which must be a file), or
/// `mesos-appliance-executor` next to this binary if it is there; hashed
/// once for its versioned URL ([`ServedExecutor`]).
///
/// # Errors
/// `--executor-binary` names something that is not a readable file.
pub fn executor_binary(common: &CommonArgs) -> Result<Option<ServedExecutor>, ConfigError> {
    let open = |path: &Path| {
        ServedExecutor::open(path)
            .map_err(|e| ConfigError(format!("--executor-binary {}: {e}", path.display())))
    };
    if let Some(path) = &common.executor_binary {
        return match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => open(path).map(Some),
            Ok(_) => Err(ConfigError(format!(
                "--executor-binary {}: not a file",
                path.display()
            ))),
            Err(e) => Err(ConfigError(format!(
                "--executor-binary {}: {e}",
                path.display()
            ))),
        };
    }
    let sibling = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(crate::scheduler::rules::taskinfo::EXECUTOR_BINARY));
    match sibling.filter(|path| path.is_file()) {
        Some(path) => open(&path).map(Some),
        None => Ok(None),
    }
}

/// The deployment ID: `--deployment-id`, or a hash of the version and the
/// settings that shape the workload (`docs/deployment-strategies.md#deployment-identity`).
pub fn deployment_id(
    common: &CommonArgs,
    cluster: &ClusterArgs,
    services: &[ServiceSpec],
) -> String {
    if let Some(id) = &cluster.deployment_id {
        return id.clone();
    }
    let failover_timeout = common
        .failover_timeout
        .unwrap_or(Defaults::SERVE.failover_timeout);
    let identity = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "framework": common.framework_name,
        "role": common.framework_role,
        "strategy": format!("{:?}", common.framework_deployment_strategy),
        "failover_timeout": failover_timeout.as_secs(),
        "services": services,
    });
    let text = identity.to_string();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// A running replica: scheduler supervisor and web server.
pub struct Running {
    /// The web layer's handle into the scheduler.
    pub handle: SchedulerHandle,
    /// The bound dashboard address.
    pub web_addr: std::net::SocketAddr,
    /// The dashboard's URL at that address: `https://…` under TLS, else
    /// `http://…`.
    pub dashboard_url: String,
    /// The supervisor task.
    pub supervisor: tokio::task::JoinHandle<()>,
    /// The web server task.
    pub web: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Cancel when a newer deployment fences this replica: the supervisor
    /// ends the term, shows the state `fenced` and returns.
    pub fence: CancellationToken,
}

/// Binds the dashboard's address. Replicas bind before they join the
/// election, so that one that cannot serve never leads.
///
/// # Errors
/// [`web::ServeError::Bind`], naming the address.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, web::ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| web::ServeError::Bind { addr, source })
}

/// Binds `--listen` ([`bind`]). When it asked for any free port (`:0`),
/// `common.listen` becomes the address bound, so that the URL this replica
/// advertises ([`advertised_url`]: Mesos' `webui_url`, the executor's URL,
/// followers' redirects) names the port that answers, not port 0.
///
/// # Errors
/// [`web::ServeError::Bind`], naming the address.
pub async fn bind_listen(common: &mut CommonArgs) -> Result<TcpListener, web::ServeError> {
    let listener = bind(common.listen).await?;
    if common.listen.port() == 0
        && let Ok(bound) = listener.local_addr()
    {
        common.listen = bound;
    }
    Ok(listener)
}

/// Binds `web_config.listen`, then starts the supervisor and the web layer
/// on `coordinator` as [`start_replica_on`] does.
pub async fn start_replica(
    core: CoreConfig,
    client: ClientConfig,
    coordinator: Arc<dyn Coordinator>,
    services: Vec<ServiceSpec>,
    web_config: WebConfig,
    shutdown: CancellationToken,
) -> Result<Running, web::ServeError> {
    let listener = bind(web_config.listen).await?;
    start_replica_on(
        listener,
        core,
        client,
        coordinator,
        services,
        web_config,
        shutdown,
    )
    .await
}

/// Starts the supervisor and the web layer (on `listener`) on
/// `coordinator`; both stop when `shutdown` is cancelled.
pub async fn start_replica_on(
    listener: TcpListener,
    core: CoreConfig,
    client: ClientConfig,
    coordinator: Arc<dyn Coordinator>,
    services: Vec<ServiceSpec>,
    web_config: WebConfig,
    shutdown: CancellationToken,
) -> Result<Running, web::ServeError> {
    let mut registry = crate::scheduler::metrics::registry();
    let metrics = Metrics::register(&mut registry);
    let offers = metrics.offers.clone();
    let deps = CoreDeps {
        snapshots: supervisor::snapshot_channel(&core, coordinator.replica().clone()),
        coordinator: coordinator.clone(),
        client,
        metrics,
        initial_services: services,
        fence: CancellationToken::new(),
    };
    let fence = deps.fence.clone();
    let scheme = if web_config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let (handle, supervisor_task) = supervisor::start(core, deps, shutdown.clone());
    let state = AppState::new(web_config, handle.clone(), coordinator, Arc::new(registry));
    // The charts' history: sampled on every replica, leader or not.
    web::history::spawn_sampler(
        state.history.clone(),
        handle.subscribe(),
        Some(offers),
        shutdown.clone(),
    );
    let stop = shutdown.clone();
    let server = match web::serve_on(listener, state, async move { stop.cancelled().await }).await {
        Ok(server) => server,
        Err(e) => {
            shutdown.cancel();
            return Err(e);
        }
    };
    Ok(Running {
        handle,
        web_addr: server.addr,
        dashboard_url: format!("{scheme}://{}", server.addr),
        supervisor: supervisor_task,
        web: server.task,
        fence,
    })
}

/// Describes how the supervisor task ended before it was asked to: a panic
/// (with its message) or a return.
pub(crate) fn supervisor_end(ended: Result<(), tokio::task::JoinError>) -> String {
    match ended {
        Ok(()) => "it returned".to_string(),
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            format!("panic: {message}")
        }
        Err(e) => e.to_string(),
    }
}

/// This replica's identity in the election.
pub fn replica_info(advertised_url: &str, deployment_id: &str) -> ReplicaInfo {
    ReplicaInfo::new(advertised_url, deployment_id, env!("CARGO_PKG_VERSION"))
}

/// Keeps SIGHUP from ending the process, whose default action it is.
/// Operators and tools send it to mean "reload" (`systemctl reload`,
/// logrotate); the only thing that reloads on it is the TLS certificate
/// ([`crate::web::tls::spawn_reload`]). Without TLS (`reloads_tls` false)
/// each SIGHUP is logged and otherwise ignored. Call it first thing in the
/// runtime: a SIGHUP before the handler exists still ends the process.
pub fn survive_hangup(reloads_tls: bool) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot handle SIGHUP: it will end this process");
        return;
    };
    if reloads_tls {
        // The handler stays installed for the life of the process (tokio
        // never restores the default action); the TLS task logs reloads.
        return;
    }
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP ignored: there is no TLS certificate to reload");
        }
    });
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use cli::{Cli, Job};

    #[tokio::test]
    async fn a_crashed_supervisor_is_described_with_its_panic() {
        let task = tokio::spawn(async { panic!("boom {}", 7) });
        assert_eq!(supervisor_end(task.await), "panic: boom 7");
        let task = tokio::spawn(async {});
        assert_eq!(supervisor_end(task.await), "it returned");
    }

    fn common(args: &[&str]) -> CommonArgs {
        match Cli::job_from(std::iter::once("mesos-appliance").chain(args.iter().copied())) {
            Ok(Job::Serve(common, _) | Job::Demo(common, _)) => common,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn framework_hostname_comes_from_the_advertised_url() {
        assert_eq!(hostname_of("http://box:18181"), "box");
        assert_eq!(hostname_of("https://box.example/appliance"), "box.example");
        assert_eq!(hostname_of("http://[::1]:18181"), "::1");
        assert_eq!(hostname_of("http://10.0.0.5:80"), "10.0.0.5");
    }

    #[test]
    fn timing_flags_fall_back_to_the_subcommand_defaults() {
        let c = core_config(&common(&[]), &Defaults::SERVE, "http://h:1", None);
        assert_eq!(c.executor_url, None);
        assert_eq!(c.failover_timeout, Defaults::SERVE.failover_timeout);
        assert_eq!(c.decline_refuse_seconds, 120.0);
        let c = core_config(
            &common(&["demo"]),
            &Defaults::DEMO,
            "http://h:1",
            Some("0.1.0-ab"),
        );
        assert_eq!(
            c.executor_url.as_deref(),
            Some("http://h:1/executor/0.1.0-ab/mesos-appliance-executor")
        );
        assert_eq!(c.failover_timeout, Duration::from_secs(3600));
        assert_eq!(c.reconcile.interval, Defaults::DEMO.reconcile_interval);
        assert_eq!(
            c.reconcile.initial_delay,
            Defaults::DEMO.reconcile_initial_delay
        );
        assert_eq!(c.decline_refuse_seconds, 10.0);
        let given = common(&[
            "demo",
            "--failover-timeout",
            "2h",
            "--reconcile-interval",
            "1m",
            "--reconcile-initial-delay",
            "5s",
            "--decline-refuse-seconds",
            "1.5",
        ]);
        let c = core_config(&given, &Defaults::DEMO, "http://h:1", None);
        assert_eq!(c.failover_timeout, Duration::from_secs(7200));
        assert_eq!(c.reconcile.interval, Duration::from_secs(60));
        assert_eq!(c.reconcile.initial_delay, Duration::from_secs(5));
        assert_eq!(c.decline_refuse_seconds, 1.5);
    }

    #[test]
    fn a_missing_executor_binary_is_a_configuration_error() {
        let e =
            executor_binary(&common(&["--executor-binary", "/nonexistent/executor"])).unwrap_err();
        assert!(
            e.0.contains("--executor-binary /nonexistent/executor"),
            "{}",
            e.0
        );
        let e = executor_binary(&common(&["--executor-binary", "/"])).unwrap_err();
        assert!(e.0.contains("not a file"), "{}", e.0);
        let file = tempfile::NamedTempFile::new().unwrap();
        let path = file.path().to_str().unwrap();
        let served = executor_binary(&common(&["--executor-binary", path]))
            .unwrap()
            .unwrap();
        assert_eq!(served.path, std::path::PathBuf::from(path));
        assert!(served.version.starts_with(env!("CARGO_PKG_VERSION")));
    }
}
