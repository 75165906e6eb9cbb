//! `mesos-testbed`: a stand-in Apache Mesos master with simulated agents and
//! fault injection. See `mesos-testbed --help` and README.

use std::io::IsTerminal;

use clap::Parser;
use mesos_appliance::testbed::{Testbed, TestbedArgs};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in log files.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let args = TestbedArgs::parse();
    let config = match args.into_config() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("mesos-testbed: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    let testbed = match Testbed::start(config).await {
        Ok(testbed) => testbed,
        Err(error) => {
            eprintln!("mesos-testbed: {error:#}");
            return std::process::ExitCode::from(1);
        }
    };
    println!("mesos-testbed listening on {}", testbed.url());
    let stopped = testbed.stopped();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {
            testbed.shutdown().await;
            std::process::ExitCode::SUCCESS
        }
        _ = terminate() => {
            testbed.shutdown().await;
            std::process::ExitCode::SUCCESS
        }
        _ = stopped.cancelled() => {
            // As a Mesos master that lost its ZooKeeper session: exit 1.
            eprintln!("mesos-testbed: lost candidacy as a leader; exiting");
            std::process::ExitCode::from(1)
        }
    }
}

async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
