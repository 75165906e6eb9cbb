//! `mesos-appliance demo`: the appliance on an embedded default — an
//! in-process `mesos-testbed` with a few agents, the in-memory coordinator,
//! two sample services with health checks, two sample jobs (one cron every minute, one on
//! demand) and the dashboard on `--listen`. When
//! `mesos-appliance-executor` sits next to the binary, the testbed runs it
//! for real for the `web` service (so kamikaze kills real processes);
//! otherwise it simulates it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cli::{CommonArgs, Defaults, DemoArgs, exit};
use super::serve::web_config;
use super::{
    advertised_url, bind_listen, core_config, load_services, replica_info, start_replica_on,
    stop_signal,
};
use crate::coordination::memory::MemoryCoordinator;
use crate::mesos::client::ClientConfig;
use crate::mesos::detector::MasterSpec;
use crate::scheduler::ServiceSpec;
use crate::scheduler::spec::job::{JobSpec, ValidJobSpec};
use crate::testbed::{AgentSpec, DEFAULT_AGENT_RESOURCES, Testbed, TestbedConfig};

/// The demo's `worker` service: also `examples/demo-worker.json`, which
/// `examples/demo-worker-v2.json` replaces in the demo's rollout
/// (`README.md`, "What the demo shows").
pub const DEMO_WORKER: &str = include_str!("../../examples/demo-worker.json");

/// The HTTP health check of the demo's services: on their first port, every
/// 2 s; a replacement must stay healthy 3 s before the next one goes.
fn http_check() -> serde_json::Value {
    serde_json::json!({"type": "http", "port_index": 0, "path": "/health",
        "delay": "1s", "interval": "2s", "timeout": "1s", "grace_period": "5s",
        "consecutive_failures": 3})
}

/// The demo's services when `--services` is not given. Both have an HTTP
/// health check, answered by the testbed's simulated checks
/// (`docs/testbed.md#containers-and-health-checks`: healthy unless a
/// `/testbed/faults/health` rule says otherwise). In process mode
/// (`real_executors`) `mesos-appliance-executor` runs `web`'s check for
/// real, and `web` serves no HTTP: it gets a command check instead.
pub fn sample_services(real_executors: bool) -> Vec<ServiceSpec> {
    let web_check = if real_executors {
        serde_json::json!({"type": "command", "command": "true", "interval": "2s",
            "timeout": "1s", "grace_period": "5s"})
    } else {
        http_check()
    };
    let worker: serde_json::Value =
        serde_json::from_str(DEMO_WORKER).expect("examples/demo-worker.json is JSON");
    serde_json::from_value(serde_json::json!([
        {
            "name": "web",
            "command": "while true; do echo \"$(date) $APPLIANCE_SERVICE.$APPLIANCE_INSTANCE serving on port $PORT0\"; sleep 5; done",
            "cpus": 0.1, "mem": 32, "ports": 1, "instances": 3,
            "executor": "appliance", "kill_grace_period": "2s",
            "health_check": web_check,
            "upgrade": {"min_healthy": "3s", "deadline": "2m"}
        },
        worker
    ]))
    .expect("sample services are valid")
}

/// The demo's jobs: `report` every minute (cron), `backup` on demand.
/// Their commands end, so a newcomer sees runs succeed: for real when the
/// testbed runs commands (process mode), otherwise after the run time
/// [`demo_task_exits`] gives the simulated tasks.
pub fn sample_jobs() -> Vec<JobSpec> {
    serde_json::from_value(serde_json::json!([
        {
            "name": "report",
            "command": "echo \"report of $(date -u +%H:%M) starting\"; sleep 3; echo \"report done\"",
            "cpus": 0.1, "mem": 32,
            "schedule": {"cron": "*/1 * * * *", "timezone": "UTC", "concurrency": "forbid"},
            "history": 20
        },
        {
            "name": "backup",
            "command": "for step in snapshot copy verify; do echo \"backup: $step\"; sleep 1; done",
            "cpus": 0.1, "mem": 32,
            "retries": {"count": 1, "backoff": "5s"},
            "timeout": "5m"
        }
    ]))
    .expect("sample jobs are valid")
}

/// Without process mode the testbed runs nothing: the demo jobs' tasks
/// (task IDs `<job>.<run>.<attempt>`) end after 3 s with exit status 0
/// (the testbed's `task-exit` fault, `docs/testbed.md#finite-tasks`).
fn demo_task_exits(testbed: &Testbed) {
    for job in sample_jobs() {
        testbed.set_task_exit(&format!("{}.", job.name), None, Duration::from_secs(3), 0);
    }
}

/// Stores the demo jobs once this replica leads (the memory coordinator
/// starts empty), retrying for a minute.
fn put_sample_jobs(handle: crate::scheduler::SchedulerHandle) {
    tokio::spawn(async move {
        for spec in sample_jobs() {
            let name = spec.name.clone();
            let Ok(valid) = ValidJobSpec::new(spec) else {
                continue;
            };
            let mut stored = false;
            for _ in 0..120 {
                let request = crate::scheduler::Request::PutJob(Box::new(valid.clone()));
                match handle
                    .request::<bool>(Duration::from_secs(2), request)
                    .await
                {
                    Ok(_) => {
                        stored = true;
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
            if !stored {
                tracing::warn!(job = %name, "the demo could not store its sample job");
            }
        }
    });
}

/// Runs the demo until Ctrl-C or SIGTERM.
pub async fn run(common: CommonArgs, args: DemoArgs) -> ExitCode {
    match demo(common, args).await {
        Ok(()) => ExitCode::from(exit::OK),
        Err((code, message)) => {
            eprintln!("mesos-appliance demo: {message}");
            ExitCode::from(code)
        }
    }
}

async fn demo(mut common: CommonArgs, args: DemoArgs) -> Result<(), (u8, String)> {
    // First: the port bound is the one advertised (`--listen host:0`).
    let listener = bind_listen(&mut common)
        .await
        .map_err(|e| (exit::FAILURE, e.to_string()))?;
    let advertised = advertised_url(&common);
    let web = web_config(&common, &advertised).map_err(|e| (exit::USAGE, e.0))?;
    let executor = web.executor_binary.as_ref().map(|e| e.path.clone());
    let services = match &common.services {
        Some(path) => load_services(Some(path)).map_err(|e| (exit::USAGE, e.0))?,
        None => sample_services(executor.is_some()),
    };
    let testbed = TestbedConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        agents: (0..args.agents)
            .map(|i| {
                AgentSpec::new(&format!("agent-{i}"), DEFAULT_AGENT_RESOURCES)
                    .with_attributes(&format!("rack:r{}", i % 2))
            })
            .collect(),
        heartbeat_interval: Duration::from_secs(5),
        status_update_retry_min: Duration::from_secs(2),
        status_update_retry_max: Duration::from_secs(30),
        run_executors: executor.clone(),
        ..TestbedConfig::default()
    };
    let testbed = Testbed::start(testbed).await.map_err(|e| {
        (
            exit::FAILURE,
            format!("starting the embedded testbed: {e:#}"),
        )
    })?;

    // Without the binary the testbed simulates the executor and fetches
    // nothing; the URL still names this build's version.
    let version = web.executor_binary.as_ref().map_or_else(
        || env!("CARGO_PKG_VERSION").to_string(),
        |e| e.version.clone(),
    );
    let core = core_config(&common, &Defaults::DEMO, &advertised, Some(&version));
    let client = ClientConfig::new(
        MasterSpec::parse(&testbed.url()).map_err(|e| (exit::FAILURE, e.to_string()))?,
    );
    let coordinator = Arc::new(MemoryCoordinator::new(replica_info(&advertised, "demo")));
    let shutdown = CancellationToken::new();
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
    .map_err(|e| (exit::FAILURE, e.to_string()))?;
    if executor.is_none() {
        demo_task_exits(&testbed);
    }
    put_sample_jobs(running.handle.clone());
    println!("mesos-appliance demo");
    println!("  dashboard:     {}", running.dashboard_url);
    println!(
        "  mesos-testbed: {} ({} agent{}{})",
        testbed.url(),
        args.agents,
        if args.agents == 1 { "" } else { "s" },
        if executor.is_some() {
            ", real executors"
        } else {
            ""
        }
    );
    println!("  Ctrl-C stops.");
    let mut supervisor = running.supervisor;
    let crashed = tokio::select! {
        _ = stop_signal() => None,
        ended = &mut supervisor => Some(super::supervisor_end(ended)),
    };
    if let Some(why) = &crashed {
        tracing::error!("the scheduler stopped unexpectedly ({why}); stopping the demo");
    } else {
        println!("stopping");
    }
    shutdown.cancel();
    if crashed.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(10), supervisor).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), running.web).await;
    testbed.shutdown().await;
    match crashed {
        Some(why) => Err((
            exit::FAILURE,
            format!("the scheduler stopped unexpectedly: {why}"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod job_tests {
    use super::*;

    #[test]
    fn the_sample_jobs_are_valid_one_cron_one_on_demand() {
        let jobs = sample_jobs();
        for job in &jobs {
            assert!(
                ValidJobSpec::new(job.clone()).is_ok(),
                "{}: {:?}",
                job.name,
                ValidJobSpec::new(job.clone()).err()
            );
        }
        let cron: Vec<_> = jobs.iter().filter_map(|j| j.schedule.as_ref()).collect();
        assert_eq!(cron.len(), 1);
        assert_eq!(cron[0].cron, "*/1 * * * *");
    }
}
