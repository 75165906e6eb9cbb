//! `mesos-appliance`: a highly available Apache Mesos framework scheduler.
//! See `mesos-appliance --help`, README and `mesos_appliance::app`.

use std::process::ExitCode;

use clap::Parser;
use mesos_appliance::app::cli::{Cli, Command};
use mesos_appliance::app::{demo, serve, uninstall};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,zookeeper_client=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // reqwest is built with rustls and no default crypto provider (STACK.md §1).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        None | Some(Command::Serve) => serve::run(cli.common).await,
        Some(Command::Uninstall(args)) => uninstall::run(cli.common, args).await,
        Some(Command::Demo(args)) => demo::run(cli.common, args).await,
    }
}
