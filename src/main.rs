//! `mesos-appliance`: a highly available Apache Mesos framework scheduler.
//! See `mesos-appliance --help`, README and `mesos_appliance::app`.

use std::io::IsTerminal;
use std::process::ExitCode;

use mesos_appliance::app::cli::{Cli, Job, LogFormat};
use mesos_appliance::app::{demo, serve, uninstall};

fn main() -> ExitCode {
    one_malloc_arena();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
        .block_on(run())
}

/// One glibc malloc arena for every thread (`mallopt(M_ARENA_MAX, 1)`,
/// before any thread starts). By default glibc gives threads arenas of
/// their own, up to 8 per core (`malloc(3)`, `mallopt(3)`: `M_ARENA_MAX`),
/// and memory freed in one is not reused by another: at 10,000 tasks the
/// replica's peak RSS was 69 MiB with them and 60–62 MiB with one
/// (`benches/memory.py`). The allocations that matter are the core actor's
/// and the runtime's few threads share them; glibc's per-thread cache
/// keeps small allocations off the arena lock. A `MALLOC_ARENA_MAX` in the
/// environment is left to glibc (it reads it itself).
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: `mallopt` only sets a tunable of the C allocator; called
        // before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

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
