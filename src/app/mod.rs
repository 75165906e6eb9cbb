//! The `mesos-appliance` process: the command line ([`cli`]), a replica
//! (`serve`, [`serve`]), the `uninstall` job ([`uninstall`]) and the `demo`
//! ([`demo`]). This is where the layers are wired together: coordination,
//! the scheduler supervisor, the web layer, signals.

pub mod cli;
pub mod demo;
pub mod serve;
pub mod uninstall;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::coordination::{Coordinator, ReplicaInfo};
use crate::mesos::client::{ClientConfig, Credentials};
use crate::mesos::detector::MasterSpec;
use crate::scheduler::config::CoreConfig;
use crate::scheduler::core::CoreDeps;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::services::{ServiceSpec, parse_services_file};
use crate::scheduler::{SchedulerHandle, supervisor};
use crate::web::{self, AppState, WebConfig};
use cli::CommonArgs;

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
pub fn client_config(common: &CommonArgs, master: &str) -> Result<ClientConfig, ConfigError> {
    let spec = MasterSpec::parse(master).map_err(|e| ConfigError(format!("--master: {e}")))?;
    let mut config = ClientConfig::new(spec);
    config.zk_session_timeout = common.zk_session_timeout;
    match (&common.principal, &common.secret_file) {
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

/// The core's settings from the flags.
pub fn core_config(
    common: &CommonArgs,
    advertised_url: &str,
    executor_available: bool,
) -> CoreConfig {
    let mut c = CoreConfig::default();
    c.framework_name.clone_from(&common.framework_name);
    c.role.clone_from(&common.framework_role);
    if let Some(user) = &common.framework_user {
        c.user.clone_from(user);
    }
    c.principal.clone_from(&common.principal);
    c.failover_timeout = common.failover_timeout;
    c.hostname = hostname_of(advertised_url);
    c.webui_url = advertised_url.to_string();
    c.strategy = common.framework_deployment_strategy.into();
    c.on_framework_removed = common.on_framework_removed;
    c.upgrade_max_unavailable = common.upgrade_max_unavailable.max(1);
    c.offer_ttl = common.offer_ttl;
    c.offer_linger = common.offer_linger_ttl;
    c.decline_refuse_seconds = common.decline_refuse_seconds;
    c.reconcile.interval = common.reconcile_interval;
    c.reconcile.initial_delay = common.reconcile_initial_delay;
    c.reconcile.cooldown = common.reconcile_cooldown;
    c.reconcile.explicit_max_backoff = common.explicit_reconcile_max_backoff;
    c.reconcile.explicit_abort_timeout = common.explicit_reconcile_abort_timeout;
    c.framework_id_refresh_interval = common.framework_id_refresh_interval;
    c.executor_url = executor_available.then(|| {
        format!(
            "{advertised_url}/executor/{}",
            crate::scheduler::taskinfo::EXECUTOR_BINARY
        )
    });
    c
}

fn hostname_of(url: &str) -> String {
    url.split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', ':']).next())
        .filter(|h| !h.is_empty())
        .unwrap_or("localhost")
        .to_string()
}

/// `--executor-binary`, or `mesos-appliance-executor` next to this binary.
pub fn executor_binary(common: &CommonArgs) -> Option<PathBuf> {
    if let Some(path) = &common.executor_binary {
        return Some(path.clone());
    }
    let sibling = std::env::current_exe()
        .ok()?
        .with_file_name(crate::scheduler::taskinfo::EXECUTOR_BINARY);
    sibling.is_file().then_some(sibling)
}

/// The deployment ID: `--deployment-id`, or a hash of the version and the
/// settings that shape the workload (DESIGN.md §2a).
pub fn deployment_id(common: &CommonArgs, services: &[ServiceSpec]) -> String {
    if let Some(id) = &common.deployment_id {
        return id.clone();
    }
    let identity = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "framework": common.framework_name,
        "role": common.framework_role,
        "strategy": format!("{:?}", common.framework_deployment_strategy),
        "failover_timeout": common.failover_timeout.as_secs(),
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
    /// The supervisor task.
    pub supervisor: tokio::task::JoinHandle<()>,
    /// The web server task.
    pub web: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts the supervisor and the web layer on `coordinator`; both stop when
/// `shutdown` is cancelled.
#[allow(clippy::too_many_arguments)]
pub async fn start_replica(
    core: CoreConfig,
    client: ClientConfig,
    coordinator: Arc<dyn Coordinator>,
    services: Vec<ServiceSpec>,
    web_config: WebConfig,
    shutdown: CancellationToken,
) -> Result<Running, web::ServeError> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let deps = CoreDeps {
        snapshots: supervisor::snapshot_channel(&core, coordinator.replica().clone()),
        coordinator: coordinator.clone(),
        client,
        metrics,
        initial_services: services,
    };
    let (handle, supervisor_task) = supervisor::start(core, deps, shutdown.clone());
    let state = AppState::new(web_config, handle.clone(), coordinator, Arc::new(registry));
    let stop = shutdown.clone();
    let server = match web::serve(state, async move { stop.cancelled().await }).await {
        Ok(server) => server,
        Err(e) => {
            shutdown.cancel();
            return Err(e);
        }
    };
    Ok(Running {
        handle,
        web_addr: server.addr,
        supervisor: supervisor_task,
        web: server.task,
    })
}

/// This replica's identity in the election.
pub fn replica_info(advertised_url: &str, deployment_id: &str) -> ReplicaInfo {
    ReplicaInfo::new(advertised_url, deployment_id, env!("CARGO_PKG_VERSION"))
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
