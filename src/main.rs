//! `mesos-appliance`: a highly available Apache Mesos framework scheduler.
//!
//! The scheduler itself arrives with the next issues; for now the binary
//! documents itself.

use clap::Parser;

/// A highly available Apache Mesos framework scheduler with a dashboard.
///
/// Replicas elect one leader through ZooKeeper; only the leader subscribes to
/// Mesos. The framework ID, services and task records live in ZooKeeper.
#[derive(Debug, Parser)]
#[command(name = "mesos-appliance", version)]
struct Cli {}

fn main() {
    Cli::parse();
    println!(
        "mesos-appliance: the scheduler is not built yet; see README and `mesos-testbed --help`"
    );
}
