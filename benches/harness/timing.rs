//! Where the commands' time went: the replica's `command_timing` log lines
//! (`src/scheduler/core/runner/timing.rs` says what each one measures),
//! split by the phases of a [`failover`](super::appliance::failover) run.

/// The `RUST_LOG` of a replica whose command timings are read.
pub const RUST_LOG: &str = "info,zookeeper_client=warn,command_timing=debug";

/// One `command_timing` line.
#[derive(Debug, Clone)]
pub struct Line {
    /// When it was logged (Unix seconds).
    pub at: f64,
    /// `answered`, `received`, `stored`, `result` or `round`.
    pub what: String,
    /// The `*_ms` fields.
    pub ms: Vec<(String, f64)>,
}

/// The `command_timing` lines of `log` (each line starts with its RFC 3339
/// time; fields are `key=value`).
pub fn parse(log: &str) -> Vec<Line> {
    const MARK: &str = "command_timing: ";
    log.lines()
        .filter_map(|line| {
            let stamp = line.split_whitespace().next()?;
            let time = humantime::parse_rfc3339(stamp).ok()?;
            let at = time
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_secs_f64();
            let rest = &line[line.find(MARK)? + MARK.len()..];
            let mut words = rest.split_whitespace();
            let what = words.next()?.to_string();
            let mut ms = Vec::new();
            for word in words {
                let Some((key, value)) = word.split_once('=') else {
                    continue;
                };
                if let Ok(v) = value.parse::<f64>() {
                    ms.push((key.to_string(), v));
                }
            }
            Some(Line { at, what, ms })
        })
        .collect()
}

/// The values of field `key` in the lines of `what` within `[from, to)`
/// (Unix seconds).
fn values(lines: &[Line], what: &str, key: &str, from: f64, to: f64) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l.what == what && l.at >= from && l.at < to)
        .flat_map(|l| l.ms.iter().filter(|(k, _)| k == key).map(|(_, v)| *v))
        .collect()
}

/// `n p50/p99/max` of `v` (milliseconds).
fn stats(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "—".into();
    }
    v.sort_by(f64::total_cmp);
    let at = |q: usize| v[((v.len() * q).div_ceil(100)).saturating_sub(1)];
    format!(
        "{} {:.1}/{:.1}/{:.1}",
        v.len(),
        at(50),
        at(99),
        v[v.len() - 1]
    )
}

/// The rows [`print`] shows: label, the `command_timing` line's kind and
/// the field read from it.
const ROWS: [(&str, &str, &str); 8] = [
    ("queued for the core", "answered", "queued_ms"),
    ("in the core", "answered", "core_ms"),
    ("send → answer in handler", "received", "total_ms"),
    ("ZooKeeper write (not tasks)", "stored", "write_ms"),
    ("result waited for the core", "result", "waited_ms"),
    ("slow rounds: drain", "round", "drain_ms"),
    ("slow rounds: settle", "round", "settle_ms"),
    ("slow rounds: longest step", "round", "step_ms"),
];

/// Prints, per phase (`(name, from, to)`, Unix seconds), where the
/// commands' time went: sent → taken by the core (`queued`), taken →
/// answered (`core`), sent → answer in the handler (`handler`), the
/// commands' ZooKeeper writes (`write`), the core's delay in reading
/// their results (`result`), and the rounds of the core over 10 ms, split
/// into inputs drained and settle (pass and snapshot), with each one's
/// longest step (what a command arriving meanwhile waits for at most,
/// besides the settle).
pub fn print(lines: &[Line], phases: &[(&str, f64, f64)]) {
    println!("  where the commands' time went (command_timing log; n p50/p99/max ms):");
    for (phase, from, to) in phases {
        let (from, to) = (*from, *to);
        println!("    {phase}:");
        for (label, what, field) in ROWS {
            let v = values(lines, what, field, from, to);
            println!("      {label:<30} {}", stats(v));
        }
    }
}
