//! The command line of `mesos-appliance ctl` and its exit codes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// The exit codes of `mesos-appliance ctl` (`docs/cli.md#exit-codes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done.
    Ok = 0,
    /// The API refused or failed (an RFC 9457 problem, printed).
    Api = 1,
    /// Bad flags, a bad spec file, or a file that cannot be read.
    Usage = 2,
    /// `apply --wait`: the rollout halted (its reason printed); `jobs run
    /// --wait`: the run ended other than `succeeded`.
    Halted = 3,
    /// No replica answered (or none led) within `--timeout`.
    Unreachable = 4,
    /// `apply --wait`: the rollout had not finished within `--timeout`.
    TimedOut = 5,
}

/// Parses a duration such as `30s`, `5m`, `1h 30m` as every duration is
/// ([`crate::util::parse_duration`]); zero is refused.
fn duration(text: &str) -> Result<Duration, String> {
    let d = crate::util::parse_duration(text)?;
    if d.is_zero() {
        return Err("must be more than 0".into());
    }
    if d > Duration::from_secs(7 * 24 * 3600) {
        return Err("at most 7 days".into());
    }
    Ok(d)
}

/// Talks to the JSON API of a mesos-appliance replica: services, tasks,
/// logs, events, the audit trail and agents.
///
/// Reads go to the leader when one is known (else any replica answers from
/// its own view); changes are sent to the leader, following a follower's
/// not-leader answer. A replica that does not answer is skipped for the
/// next one in --url; calls are retried with backoff until --timeout.
#[derive(Debug, Parser)]
#[command(
    name = "mesos-appliance ctl",
    bin_name = "mesos-appliance ctl",
    version,
    after_long_help = AFTER_HELP
)]
pub struct CtlArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: CtlCommand,
    /// Where and how to connect.
    #[command(flatten)]
    pub global: GlobalArgs,
}

const AFTER_HELP: &str = "\
Exit codes:
  0  done
  1  the API refused or failed (the problem is printed: error: <title>: <detail>)
  2  bad flags, or a spec file that cannot be read or parsed
  3  apply --wait: the rollout halted (the halt reason is printed)
  4  no replica answered, or none led, within --timeout
  5  apply --wait: the rollout did not finish within --timeout

The admin token is read from --token, MESOS_APPLIANCE_TOKEN or --token-file
(in that order) and is never printed.";

/// Flags of every subcommand.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Replica URL(s), e.g. http://sched-a:8080; comma-separated or repeated.
    /// Tried in order; the leader is found from any of them.
    #[arg(
        long = "url",
        env = "MESOS_APPLIANCE_URL",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub urls: Vec<String>,
    /// The admin token (see --admin-token-file of the replicas). Prefer the
    /// environment variable or --token-file: a flag shows in `ps`.
    #[arg(
        long,
        env = "MESOS_APPLIANCE_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<Secret>,
    /// A token file in the replicas' --admin-token-file format: lines
    /// `name:token` (or one token alone). With several, --token-name picks.
    #[arg(long, env = "MESOS_APPLIANCE_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// Which token of --token-file to send (its name before the `:`);
    /// needed when the file holds more than one.
    #[arg(long, env = "MESOS_APPLIANCE_TOKEN_NAME", global = true)]
    pub token_name: Option<String>,
    /// Print the API's JSON instead of tables (one document; `events` and
    /// `logs --follow` print one JSON object per line).
    #[arg(long, global = true)]
    pub json: bool,
    /// How long a command may retry unreachable or leaderless replicas, and
    /// how long `apply --wait` waits for the rollout [default: 30s; 10m
    /// with --wait].
    #[arg(long, value_parser = duration, global = true)]
    pub timeout: Option<Duration>,
    /// Timeout of one HTTP request.
    #[arg(long, value_parser = duration, default_value = "10s", global = true)]
    pub request_timeout: Duration,
}

/// A secret (the admin token): its `Debug` says `Secret(…)`, so that no
/// log or panic message shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl std::str::FromStr for Secret {
    type Err = String;
    fn from_str(s: &str) -> Result<Secret, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("the token is empty".into());
        }
        Ok(Secret(s.to_string()))
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Services: list, show, apply, scale, restart, delete.
    #[command(subcommand)]
    Services(ServicesCommand),
    /// The tasks the scheduler knows.
    Tasks(TasksArgs),
    /// A task's sandbox stdout or stderr (read through the appliance).
    Logs(LogsArgs),
    /// Stream events (server-sent events) until interrupted.
    Events(EventsArgs),
    /// The audit trail: who changed what, and why.
    Audit(AuditArgs),
    /// Agents: list, drain, cancel a drain.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Jobs: start a run now.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Print a shell completion script (bash, zsh, fish, …).
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `services …`.
#[derive(Debug, Subcommand)]
pub enum ServicesCommand {
    /// List the services with their counts and rollouts.
    #[command(alias = "ls")]
    List,
    /// Show one service: spec, counts, rollout, why it waits.
    Show {
        /// The service name.
        name: String,
    },
    /// Create or replace services from a spec file (one spec or an array).
    Apply(ApplyArgs),
    /// Change a service's instance count.
    Scale {
        /// The service name.
        name: String,
        /// The new instance count.
        instances: u32,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
    /// Replace every task of a service, one rollout step at a time.
    Restart {
        /// The service name.
        name: String,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
        /// Wait for the restart's rollout as `apply --wait` does.
        #[arg(long)]
        wait: bool,
    },
    /// Delete a service; its tasks are killed.
    #[command(alias = "rm")]
    Delete {
        /// The service name.
        name: String,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
}

/// `services apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The spec file (JSON: one service spec, or an array of them); `-` is
    /// standard input.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Wait until each service's rollout completes (exit 0), halts (exit 3)
    /// or --timeout passes (exit 5).
    #[arg(long)]
    pub wait: bool,
    /// Why (kept in the audit trail).
    #[arg(long)]
    pub why: Option<String>,
}

/// `tasks`.
#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Only this service's tasks.
    #[arg(long)]
    pub service: Option<String>,
    /// A task state (TASK_RUNNING, …), `active` or `terminal`.
    #[arg(long)]
    pub state: Option<String>,
}

/// Which sandbox file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFileArg {
    /// The task's standard output.
    Stdout,
    /// The task's standard error.
    Stderr,
}

impl LogFileArg {
    /// `stdout` or `stderr`, as in the API path.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFileArg::Stdout => "stdout",
            LogFileArg::Stderr => "stderr",
        }
    }
}

/// `logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The task ID.
    pub task: String,
    /// Which file.
    #[arg(value_enum, default_value = "stdout")]
    pub file: LogFileArg,
    /// Keep printing what is appended until interrupted.
    #[arg(short, long)]
    pub follow: bool,
    /// Bytes of the end of the file to print first.
    #[arg(long, default_value_t = 16 * 1024)]
    pub tail: u64,
}

/// `events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only events of these types (comma-separated or repeated).
    #[arg(long = "type", value_delimiter = ',')]
    pub types: Vec<String>,
    /// The stream's path: by default `/api/v1/events/stream`, or
    /// `/api/v1/stream` on replicas without it.
    #[arg(long)]
    pub path: Option<String>,
}

/// `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only entries by this token name.
    #[arg(long)]
    pub who: Option<String>,
    /// Only this action (e.g. service.put).
    #[arg(long)]
    pub action: Option<String>,
    /// How many entries, newest first (1 to the number kept).
    #[arg(long, default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..=crate::coordination::AUDIT_KEPT as u64))]
    pub limit: u64,
}

/// `agents …`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List the agents with their states and this framework's tasks.
    #[command(alias = "ls")]
    List,
    /// Start the appliance's SLA-aware drain of an agent
    /// (`POST /api/v1/agents/{id}/drain`, `docs/draining.md`).
    Drain {
        /// The agent ID.
        agent: String,
        /// The floor per service while its tasks move: a number of tasks or
        /// a share of its instances such as `50%`.
        #[arg(long)]
        min_healthy: String,
        /// What to ask the master once the agent is empty: `none`,
        /// `drain_agent` or `deactivate_agent`.
        #[arg(long, default_value = "none")]
        then: String,
        /// Why (kept in the drain and the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
    /// Cancel an agent's drain (`DELETE /api/v1/agents/{id}/drain`).
    Cancel {
        /// The agent ID.
        agent: String,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
}

/// `jobs …`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List the jobs: schedule, enabled, next and last run.
    #[command(alias = "ls")]
    List,
    /// Show one job: spec, schedule and its kept runs.
    Show {
        /// The job name.
        name: String,
    },
    /// Kill a run of a job (`POST /api/v1/jobs/{name}/runs/{run_id}/kill`).
    Kill {
        /// The job name.
        name: String,
        /// The run ID (`jobs show NAME` lists them).
        run: String,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
    /// Let the job's schedule fire again.
    Enable {
        /// The job name.
        name: String,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
    /// Stop the job's schedule from firing (manual runs still start).
    Disable {
        /// The job name.
        name: String,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
    },
    /// Start a run of a job now (`POST /api/v1/jobs/{name}/runs`,
    /// `docs/jobs.md`). Never retried once sent: a second run could start.
    Run {
        /// The job name.
        name: String,
        /// An argument appended to the job's command (repeatable).
        #[arg(long = "arg", allow_hyphen_values = true)]
        args: Vec<String>,
        /// `KEY=VALUE` added to the job's environment (repeatable).
        #[arg(long = "env", value_parser = key_value)]
        env: Vec<(String, String)>,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: Option<String>,
        /// Wait until the run finishes: exit 0 when it succeeded, 3 when it
        /// failed, was killed, timed out, skipped or missed, 5 past
        /// --timeout.
        #[arg(long)]
        wait: bool,
    },
}

/// Parses `KEY=VALUE`.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// Parses `argv` (program name, `ctl`, arguments).
///
/// # Errors
/// clap's usage error (or its `--help` / `--version` output).
pub fn parse(argv: Vec<std::ffi::OsString>) -> Result<CtlArgs, clap::Error> {
    // `mesos-appliance ctl …`: drop the program name; `ctl` stands in for it.
    CtlArgs::try_parse_from(argv.into_iter().skip(1))
}

/// The clap command (for completion scripts).
pub fn command() -> clap::Command {
    CtlArgs::command()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<CtlArgs, clap::Error> {
        parse(
            ["mesos-appliance", "ctl"]
                .iter()
                .chain(args)
                .map(Into::into)
                .collect(),
        )
    }

    #[test]
    fn urls_are_comma_separated_or_repeated_and_flags_go_anywhere() {
        let a = parse_args(&["--url", "http://a:1,http://b:2", "services", "list"]).unwrap();
        assert_eq!(a.global.urls, ["http://a:1", "http://b:2"]);
        let a = parse_args(&[
            "services",
            "list",
            "--url",
            "http://a:1",
            "--url",
            "http://b:2",
        ])
        .unwrap();
        assert_eq!(a.global.urls, ["http://a:1", "http://b:2"]);
        let a = parse_args(&["services", "apply", "-f", "x.json", "--wait", "--json"]).unwrap();
        assert!(a.global.json);
        assert!(matches!(
            a.command,
            CtlCommand::Services(ServicesCommand::Apply(ApplyArgs { wait: true, .. }))
        ));
    }

    #[test]
    fn bad_usage_is_a_usage_error() {
        let e = parse_args(&["services", "scale", "web", "many"]).unwrap_err();
        assert!(e.use_stderr());
        assert!(parse_args(&["--timeout", "0s", "tasks"]).is_err());
        assert!(parse_args(&["logs", "t1", "stdin"]).is_err());
        assert!(parse_args(&["jobs", "run", "backup", "--env", "NOEQUALS"]).is_err());
        assert!(
            parse_args(&["agents", "drain", "a1"]).is_err(),
            "--min-healthy is required"
        );
        // The audit keeps 1,000 entries; 0 or more is a usage error, not the
        // server's 400 (exit 1).
        assert!(parse_args(&["audit", "--limit", "0"]).is_err());
        assert!(parse_args(&["audit", "--limit", "1001"]).is_err());
        assert!(parse_args(&["audit", "--limit", "1000"]).is_ok());
        let a = parse_args(&["jobs", "run", "backup", "--arg", "-v", "--env", "A=b=c"]).unwrap();
        let CtlCommand::Jobs(JobsCommand::Run { args, env, .. }) = a.command else {
            panic!("not jobs run")
        };
        assert_eq!(args, ["-v"]);
        assert_eq!(env, [("A".to_string(), "b=c".to_string())]);
    }

    #[test]
    fn the_token_is_not_shown_in_debug_or_help() {
        let help = command().render_long_help().to_string();
        assert!(help.contains("MESOS_APPLIANCE_TOKEN"));
        let a = parse_args(&["--token", "s3cret-value", "tasks"]).unwrap();
        assert_eq!(a.global.token, Some(Secret("s3cret-value".into())));
        assert!(!format!("{a:?}").contains("s3cret"));
        command().debug_assert();
    }
}
