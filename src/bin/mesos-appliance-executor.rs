//! `mesos-appliance-executor`: the appliance's Mesos executor. Started by a
//! Mesos agent (or `mesos-testbed --run-executors`) with the `MESOS_*`
//! environment; see `mesos_appliance::executor`. Logs go to stderr (the
//! sandbox's `stderr` file under an agent); `RUST_LOG` filters them.

use std::process::ExitCode;

use clap::Parser;
use mesos_appliance::executor::{self, ExecutorConfig};

/// The Mesos executor of mesos-appliance: runs each task's command as a
/// child process group and obeys the appliance's framework messages
/// (kamikaze). A Mesos agent starts it with the environment below; it takes
/// no arguments.
#[derive(Debug, Parser)]
#[command(name = "mesos-appliance-executor", version, after_help = ENVIRONMENT)]
struct Cli {}

/// The environment the executor reads (`ExecutorConfig::from_lookup`).
const ENVIRONMENT: &str = "\
Environment (set by the Mesos agent):
  MESOS_FRAMEWORK_ID                    framework ID (required)
  MESOS_EXECUTOR_ID                     executor ID (required)
  MESOS_AGENT_ENDPOINT                  agent's ip:port to subscribe to (required)
  MESOS_SLAVE_ID                        agent ID (optional; SUBSCRIBED carries it too)
  MESOS_SANDBOX, MESOS_DIRECTORY        tasks' working directory [default: current directory]
  MESOS_CHECKPOINT                      1: re-subscribe after losing the agent
  MESOS_RECOVERY_TIMEOUT                with checkpointing (required): how long to retry
  MESOS_SUBSCRIPTION_BACKOFF_MAX        with checkpointing (required): cap between attempts
  MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD  time to exit after SHUTDOWN [default: 5secs]
  MESOS_EXECUTOR_AUTHENTICATION_TOKEN   sent as Authorization: Bearer (optional)
  MESOS_APPLIANCE_EXECUTOR_ENCODING     protobuf (default) or json, towards the agent
  RUST_LOG                              log filter [default: info]

Durations are Mesos' (5secs, 15mins, 250ms).

Exit codes: 0 when its tasks ended, after SHUTDOWN or SIGTERM; 1 on a missing
or bad environment, a lost agent, or a kamikaze message; 2 on bad arguments.";

fn main() -> ExitCode {
    Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let config = match ExecutorConfig::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("mesos-appliance-executor: {error} (see --help)");
            return ExitCode::from(1);
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Two worker threads are plenty for one agent connection and a few
    // children, and keep the executor's footprint small.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mesos-appliance-executor: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(executor::run(config));
    // Don't wait for the blocking pool (a stuck DNS lookup, say).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}
