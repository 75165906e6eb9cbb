//! Test support shared by the integration tests (and the benchmarks, which
//! include this folder with `#[path]`).
//!
//! - [`zookeeper`]: a real standalone ZooKeeper server per test
//!   ([`zookeeper::ZkServer`]), plus [`zookeeper::expire_session`];
//! - [`zookeeper_ensemble`]: a real three-server ZooKeeper ensemble
//!   ([`zookeeper_ensemble::ZkEnsemble`]) to stop, kill and restart;
//! - [`zk_write_hold`]: a ZooKeeper proxy that holds write requests
//!   ([`zk_write_hold::ZkWriteHold`]);
//! - [`chaos_proxy`]: a TCP proxy that cuts a client off
//!   ([`chaos_proxy::ChaosProxy`]);
//! - [`replicas`]: coordinator replicas on that server, a timestamped
//!   recorder of their leadership transitions, and waits with deadlines;
//! - [`appliance`]: in-process appliance replicas (coordinator + scheduler);
//! - [`executor`]: launching tasks on the real `mesos-appliance-executor`
//!   through the testbed's process mode, and `/proc` inspection;
//! - [`mesos`]: raw HTTP calls and subscription streams against a Mesos
//!   master (the in-process `mesos-testbed`);
//! - [`client`]: a fast configuration for the scheduler/operator clients, an
//!   event receiver with deadlines, and call-log summaries;
//! - [`web`]: the web layer over a scripted core and sample snapshots, and
//!   request helpers for `oneshot`;
//! - [`browser`]: headless Chromium through chromedriver and fantoccini;
//! - [`processes`]: real `mesos-appliance` processes;
//! - [`checks`]: what every replica harness checks when it drops (the
//!   truth check of [`truth`], and no ACK before its store), with the
//!   per-test opt-out;
//! - [`pymesos`]: a venv with pymesos, the independent Python client;
//! - [`schemathesis`]: a venv with schemathesis, the schema-driven API tester;
//! - [`sse`]: a server-sent-events reader.
//!
//! Every test binary compiles this module on its own, so not every helper is
//! used everywhere.
#![allow(dead_code)]

pub mod appliance;
pub mod browser;
pub mod chaos_proxy;
pub mod checks;
pub mod client;
pub mod cluster;
pub mod executor;
pub mod mesos;
pub mod processes;
pub mod pymesos;
pub mod replicas;
pub mod schemathesis;
pub mod sse;
pub mod truth;
pub mod web;
pub mod zk_write_hold;
pub mod zookeeper;
pub mod zookeeper_ensemble;

use std::time::Duration;

/// Installs a `tracing` subscriber writing to the test's captured output,
/// filtered by `RUST_LOG` (default: `warn`). Safe to call many times.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// Waits until `cond` holds for the value of a watch channel, or panics with
/// `what` after `timeout`. The returned value is the one that matched.
pub async fn wait_for<T: Clone>(
    rx: &mut tokio::sync::watch::Receiver<T>,
    timeout: Duration,
    what: &str,
    cond: impl FnMut(&T) -> bool,
) -> T {
    match tokio::time::timeout(timeout, rx.wait_for(cond)).await {
        Ok(Ok(v)) => v.clone(),
        Ok(Err(_)) => panic!("{what}: channel closed"),
        Err(_) => panic!("{what}: not within {timeout:?}"),
    }
}

/// An in-process `mesos-testbed` started from `config` (with the crypto
/// provider and tracing installed): the one way tests start a testbed.
pub async fn testbed(
    config: mesos_appliance::testbed::TestbedConfig,
) -> mesos_appliance::testbed::Testbed {
    mesos::init();
    mesos_appliance::testbed::Testbed::start(config)
        .await
        .expect("testbed starts")
}
