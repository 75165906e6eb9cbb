//! `mesos-appliance serve`: one replica. It registers its deployment (and
//! fences older ones under `upgrade` and `hard`), joins the election, runs
//! the scheduler while it leads, serves the dashboard, and on SIGTERM or
//! Ctrl-C performs a failover stop: the subscription closes, the replica
//! leaves the election at once, ZooKeeper state is kept, no TEARDOWN is sent.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cli::{ClusterArgs, CommonArgs, Defaults, exit};
use super::{
    ConfigError, advertised_url, bind_listen, client_config, core_config, deployment_id,
    executor_binary, load_services, replica_info, start_replica_on, stop_signal,
};
use crate::coordination::Coordinator;
use crate::coordination::deployment;
use crate::coordination::memory::MemoryCoordinator;
use crate::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use crate::util::tokens::read_token_file;
use crate::util::zk::ZkUrl;
use crate::web::{MIN_ADMIN_TOKEN_CHARS, WebConfig};

/// Runs a replica until a stop signal or a fence; returns the exit code.
pub async fn run(common: CommonArgs, cluster: ClusterArgs) -> ExitCode {
    match run_inner(common, cluster).await {
        Ok(code) => ExitCode::from(code),
        Err(Failure::Config(e)) => {
            eprintln!("mesos-appliance: {e}");
            ExitCode::from(exit::USAGE)
        }
        Err(Failure::Runtime(e)) => {
            eprintln!("mesos-appliance: {e}");
            ExitCode::from(exit::FAILURE)
        }
    }
}

enum Failure {
    Config(String),
    Runtime(String),
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Failure::Config(e.0)
    }
}

/// The web layer's settings from the flags.
pub fn web_config(common: &CommonArgs, advertised_url: &str) -> Result<WebConfig, ConfigError> {
    let mut web = WebConfig::new(common.listen, advertised_url);
    if let Some(path) = &common.admin_token_file {
        let tokens = read_token_file(path)
            .map_err(|e| ConfigError(format!("--admin-token-file {}: {e}", path.display())))?;
        for token in tokens
            .iter()
            .filter(|t| t.token.chars().count() < MIN_ADMIN_TOKEN_CHARS)
        {
            tracing::warn!(
                file = %path.display(),
                name = %token.name,
                "an admin token is shorter than {MIN_ADMIN_TOKEN_CHARS} characters: easy to \
                 guess; use a long random one (e.g. `openssl rand -hex 32`)"
            );
        }
        web.admin_tokens = tokens;
    }
    web.insecure_actions = common.insecure_actions;
    web.handler_timeout = common.http_handler_timeout;
    web.agent_timeout = common.agent_timeout;
    if let (Some(cert), Some(key)) = (&common.tls_cert, &common.tls_key) {
        let files = crate::web::tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        };
        // Refuse to start with a pair that does not load.
        crate::web::tls::load(&files).map_err(ConfigError)?;
        web.tls = Some(files);
    }
    web.executor_binary = executor_binary(common)?;
    if !web.actions_protected_on(common.listen) {
        return Err(ConfigError(format!(
            "--listen {} is not a loopback address and actions would be unprotected: \
             give --admin-token-file (or, knowingly, --insecure-actions)",
            common.listen
        )));
    }
    Ok(web)
}

async fn run_inner(mut common: CommonArgs, cluster: ClusterArgs) -> Result<u8, Failure> {
    let master = cluster.master.clone().ok_or_else(|| {
        ConfigError("--master is required (http://host:port or zk://host:port/mesos)".into())
    })?;
    let zk = cluster
        .zk
        .as_deref()
        .map(|url| ZkUrl::parse(url, &common.framework_name))
        .transpose()
        .map_err(|e| ConfigError(format!("--zk: {e}")))?;
    let services = load_services(common.services.as_deref())?;
    // Every flag is checked before anything is bound: a refused flag is
    // refused (exit 2) whether or not its port is free. The URL is set
    // once bound.
    let mut web = web_config(&common, "")?;
    let client = client_config(&cluster, &master)?;
    // Before the election (a replica that cannot serve must never lead),
    // and before the URL is advertised: with `--listen host:0` it names
    // the port bound.
    let listener = bind_listen(&mut common)
        .await
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    let advertised = advertised_url(&common);
    web.listen = common.listen;
    web.advertised_url.clone_from(&advertised);
    let deployment = deployment_id(&common, &cluster, &services);
    let mut core = core_config(
        &common,
        &Defaults::SERVE,
        &advertised,
        web.executor_binary.as_ref().map(|e| e.version.as_str()),
    );
    core.principal.clone_from(&cluster.principal);
    core.deployment_id.clone_from(&deployment);
    let replica = replica_info(&advertised, &deployment);
    tracing::info!(replica = %replica.replica_id, %deployment, strategy = ?core.strategy, "starting replica");

    let coordinator: Arc<dyn Coordinator> = match zk {
        None => {
            tracing::warn!("no --zk: in-memory state, one replica only; state is lost on exit");
            Arc::new(MemoryCoordinator::new(replica))
        }
        Some(url) => {
            let mut config =
                ZkConfig::new(url, replica).with_session_timeout(cluster.zk_session_timeout());
            config.private_acl = cluster.zk_private_acl;
            Arc::new(
                ZkCoordinator::start(config)
                    .await
                    .map_err(|e| Failure::Runtime(format!("ZooKeeper: {e}")))?,
            )
        }
    };

    let shutdown = CancellationToken::new();
    let observed = deployment::register(coordinator.as_ref(), &deployment, core.strategy)
        .await
        .map_err(|e| Failure::Runtime(format!("registering deployment {deployment}: {e}")))?;
    // upgrade and hard: this deployment's services file is authoritative.
    core.replace_services = core.strategy != crate::coordination::Strategy::Failover;
    let running = start_replica_on(
        listener,
        core,
        client,
        coordinator.clone(),
        services,
        web,
        shutdown.clone(),
    )
    .await
    .map_err(|e| Failure::Runtime(e.to_string()))?;
    println!("mesos-appliance: dashboard on {}", running.dashboard_url);
    // Watching starts after registering: the watch reads the current record
    // first, so a fence in between is not missed.
    let fence = tokio::spawn(deployment::watch_fence(
        coordinator.clone(),
        observed,
        deployment.clone(),
        running.fence.clone(),
    ));

    let mut supervisor = running.supervisor;
    let mut supervisor_done = false;
    let code = tokio::select! {
        _ = stop_signal() => {
            tracing::info!("stop requested: failover stop (the next replica takes over; no TEARDOWN)");
            exit::OK
        }
        _ = running.fence.cancelled() => {
            tracing::error!("fenced: a newer deployment took over; exiting with code {}", exit::FENCED);
            exit::FENCED
        }
        // A crashed scheduler must not keep this replica's election node:
        // exiting closes the session and the next replica takes over.
        ended = &mut supervisor => {
            supervisor_done = true;
            tracing::error!(
                "the scheduler stopped unexpectedly ({}); exiting so that another replica leads",
                super::supervisor_end(ended)
            );
            exit::FAILURE
        }
    };
    // Fenced: the supervisor ends the term and publishes `fenced` before the
    // rest stops.
    if code == exit::FENCED {
        supervisor_done = tokio::time::timeout(Duration::from_secs(10), &mut supervisor)
            .await
            .is_ok();
    }
    shutdown.cancel();
    fence.abort();
    if !supervisor_done {
        let _ = tokio::time::timeout(Duration::from_secs(10), supervisor).await;
    }
    coordinator.close().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), running.web).await;
    Ok(code)
}
