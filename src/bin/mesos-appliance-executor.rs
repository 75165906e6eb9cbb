//! `mesos-appliance-executor`: the appliance's Mesos executor. Started by a
//! Mesos agent (or `mesos-testbed --run-executors`) with the `MESOS_*`
//! environment; see `mesos_appliance::executor`. Logs go to stderr (the
//! sandbox's `stderr` file under an agent); `RUST_LOG` filters them.

use std::process::ExitCode;

use mesos_appliance::executor::{self, ExecutorConfig};

fn main() -> ExitCode {
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
            eprintln!("mesos-appliance-executor: {error}");
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
