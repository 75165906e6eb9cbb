//! `mesos-appliance`: a highly available Apache Mesos framework scheduler.
//! See `mesos-appliance --help`, README and `mesos_appliance::app`.

use std::io::IsTerminal;
use std::process::ExitCode;

use mesos_appliance::app::cli::{Cli, Job, LogFormat};
use mesos_appliance::app::{demo, serve, uninstall};

fn main() -> ExitCode {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
        .block_on(run())
}

/// The allocator: jemalloc (`tikv-jemallocator`), with one arena and
/// freed pages returned at once ([`MALLOC_CONF`]). Against glibc's malloc
/// with one arena, a 100,000-task launch and five explicit reconciliations
/// took 28 % less CPU and a 22 % faster reconciliation, with a 13 % lower
/// peak RSS; at 10,000 tasks the peak was the same and the CPU 15 % lower
/// (`docs/benchmarks.md`, "The allocator"). glibc spent a quarter of the
/// replica's CPU in `malloc`, `free` and `malloc_consolidate`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options (`jemalloc(3)`, "TUNING" and `opt.*`), NUL-ended:
/// - `narenas:1`: one arena for every thread. With one per thread
///   (jemalloc's default: four per core) memory one thread frees is not
///   reused by another, and the peak grows with the runtime's threads;
/// - `dirty_decay_ms:0,muzzy_decay_ms:0`: pages freed go back to the
///   system at once, so the resident set follows the heap (the memory
///   targets are peaks of RSS, `docs/benchmarks.md`).
///
/// `_RJEM_MALLOC_CONF` in the environment adds to them (the prefixed
/// build's `MALLOC_CONF`).
static MALLOC_OPTIONS: [u8; 44] = *b"narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0\0";

/// The options as jemalloc reads them, before `main`: its `malloc_conf`
/// global (`tikv_jemalloc_sys::malloc_conf`, prefixed `_rjem_` by the
/// crate's build), a C string pointer.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &u8 = &MALLOC_OPTIONS[0];

async fn run() -> ExitCode {
    // `mesos-appliance ctl …`: the API client, with its own flags and no logs.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "ctl") {
        let _ = rustls::crypto::ring::default_provider().install_default();
        return mesos_appliance::ctl::main(argv).await;
    }
    // `mesos-appliance import marathon FILE`: a file conversion, no logs.
    if argv.get(1).is_some_and(|a| a == "import") {
        return mesos_appliance::marathon::main(argv);
    }
    let job = Cli::job_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let common = match &job {
        Job::Serve(common, _) | Job::Uninstall(common, _, _) | Job::Demo(common, _) => common,
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,zookeeper_client=warn".into()),
        )
        .with_writer(std::io::stderr);
    match common.log_format {
        // One JSON object per line, for log shippers.
        LogFormat::Json => logs.json().init(),
        // Colours only for a person at a terminal, not in log files.
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    // reqwest is built with rustls and no default crypto provider
    // (`docs/architecture.md#build-notes`).
    let _ = rustls::crypto::ring::default_provider().install_default();
    mesos_appliance::app::survive_hangup(common.tls_cert.is_some());
    match job {
        Job::Serve(common, cluster) => serve::run(common, cluster).await,
        Job::Uninstall(common, cluster, args) => uninstall::run(common, cluster, args).await,
        Job::Demo(common, args) => demo::run(common, args).await,
    }
}
