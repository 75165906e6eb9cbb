//! `mesos-appliance import marathon FILE [--out DIR|-]`: Marathon app
//! definitions to service specs, and the list of what was not carried
//! over (`docs/marathon.md`).
//!
//! - [`import`](mod@import): the mapping, app by app and field by field.
//!
//! The Marathon-compatible read API (`/v2/apps`, `/v2/tasks`,
//! `/v2/events`) is in the web layer, `web/marathon_compat.rs`.
//!
//! On the floor of `web` and `ctl`: it reads the service spec
//! (`scheduler::spec`) and its validation, nothing that serves.

pub mod import;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use import::{ImportError, Imported, Note, Outcome};

/// `mesos-appliance import`.
#[derive(Debug, Parser)]
#[command(
    name = "mesos-appliance import",
    about = "Turn other schedulers' definitions into service specs",
    after_help = "Exit codes:\n  0  every app became a valid service spec\n  1  some app was refused \
                  (the others are written)\n  2  bad flags, an unreadable file, or not Marathon app JSON"
)]
pub struct ImportArgs {
    /// What to import.
    #[command(subcommand)]
    pub from: From,
}

/// The sources.
#[derive(Debug, Subcommand)]
pub enum From {
    /// Marathon app JSON: one app, an array of apps, `GET /v2/apps` output
    /// or a group. Writes one service spec per app and lists every field
    /// not carried over (on stderr, and as not-carried.json with --out DIR).
    Marathon {
        /// The file (`-` for stdin).
        file: PathBuf,
        /// A directory to write `<service>.json` per spec,
        /// `services.json` (all specs, a `--services` file) and
        /// `not-carried.json`; `-` prints the specs as one JSON array on
        /// stdout.
        #[arg(long, default_value = "-")]
        out: PathBuf,
    },
}

/// The exit codes (see `ImportArgs`' help).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every app carried.
    Ok = 0,
    /// Some app refused.
    Refused = 1,
    /// Bad flags or input.
    Usage = 2,
}

/// Runs `mesos-appliance import …` with `argv` (the program name first,
/// then `import`, then its arguments).
pub fn main(argv: Vec<std::ffi::OsString>) -> ExitCode {
    let args = argv.into_iter().skip(1);
    let args = match ImportArgs::try_parse_from(args) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    let From::Marathon { file, out } = args.from;
    let code = match run(&file, &out) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            Exit::Usage
        }
    };
    ExitCode::from(code as u8)
}

/// Reads `file`, imports it and writes the result to `out` (a directory,
/// or `-` for stdout); the notes go to stderr.
///
/// # Errors
/// The message of an unreadable file, an input that is not Marathon JSON,
/// or an unwritable output.
pub fn run(file: &std::path::Path, out: &std::path::Path) -> Result<Exit, String> {
    let text = read(file)?;
    let imported = import::import(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut stderr = std::io::stderr().lock();
    for note in &imported.notes {
        let _ = writeln!(stderr, "{}", line(note));
    }
    let _ = writeln!(
        stderr,
        "{} service spec(s), {} field(s) not carried or changed, {} app(s) refused",
        imported.specs.len(),
        imported.notes.len() - imported.refused(),
        imported.refused()
    );
    if out.as_os_str() == "-" {
        println!("{}", pretty(&imported.specs));
    } else {
        std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
        let write = |name: &str, text: String| {
            let path = out.join(name);
            std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
        };
        for spec in &imported.specs {
            write(&format!("{}.json", spec.name), pretty(spec))?;
        }
        write("services.json", pretty(&imported.specs))?;
        write("not-carried.json", pretty(&imported.notes))?;
    }
    Ok(if imported.refused() > 0 {
        Exit::Refused
    } else {
        Exit::Ok
    })
}

/// A note as one line: `/prod/web healthChecks[1]: not carried: why`.
pub fn line(note: &Note) -> String {
    let outcome = match note.outcome {
        Outcome::NotCarried => "not carried",
        Outcome::Changed => "changed",
        Outcome::Refused => "REFUSED",
    };
    if note.field.is_empty() {
        format!("{}: {outcome}: {}", note.app, note.why)
    } else {
        format!("{} {}: {outcome}: {}", note.app, note.field, note.why)
    }
}

fn read(file: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let limit = import::MAX_INPUT_BYTES as u64 + 1;
    let mut text = String::new();
    let result = if file.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    result.map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(text)
}

/// `value` as pretty JSON.
fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}
