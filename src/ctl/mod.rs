//! `mesos-appliance ctl`: the command-line client of the JSON API
//! (`docs/cli.md`). It talks HTTP to one or more replicas, follows the
//! not-leader answers to the leader, tries the next replica when one is
//! down, and prints human tables or, with `--json`, the API's own JSON.
//!
//! - [`args`]: the command line (clap) and the exit codes ([`Exit`]).
//! - [`client`]: the HTTP client: replicas, the admin token, leader
//!   following, retries within a deadline, RFC 9457 problems.
//! - [`commands`]: one function per subcommand.
//! - [`rollout`]: when `apply --wait` is done, halted or still waiting
//!   (pure, over `/api/v1/services/{name}`).
//! - [`sse`]: a bounded server-sent-events parser for `events`.
//! - [`render`]: the human tables.
//!
//! This layer reads the API's JSON as plain `serde_json::Value`s: it is a
//! client of the published API, not of the scheduler's Rust types, so it
//! imports nothing from the layers that serve the API.

pub mod args;
pub mod client;
pub mod commands;
pub mod render;
pub mod rollout;
pub mod sse;

pub use args::{CtlArgs, Exit};

use std::process::ExitCode;

/// Runs `mesos-appliance ctl` with `argv` (the program name first, then
/// `ctl`, then its arguments) and returns the process's exit code
/// ([`Exit`]). Usage errors print clap's message (exit 2; `--help` exits 0).
pub async fn main(argv: Vec<std::ffi::OsString>) -> ExitCode {
    let args = match args::parse(argv) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    let code = commands::run(args).await;
    ExitCode::from(code as u8)
}
