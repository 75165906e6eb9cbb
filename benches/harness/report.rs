//! Tables of the side-by-side benchmark: one per size, then the growth
//! across sizes.

use std::time::Duration;

use super::Figures;
use super::appliance::{FailoverFigures, SESSION};
use crate::support::processes::Memory;

/// Everything measured at one size; `None` for a run not selected.
#[derive(Debug, Default)]
pub struct SizeResults {
    /// N.
    pub tasks: usize,
    pub floor: Option<Result<Figures, String>>,
    pub pymesos: Option<Result<Figures, String>>,
    pub appliance: Option<Result<Figures, String>>,
    pub failover: Option<Result<FailoverFigures, String>>,
}

fn ok<T>(run: &Option<Result<T, String>>) -> Option<&T> {
    run.as_ref().and_then(|r| r.as_ref().ok())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn mem(m: &Memory) -> String {
    format!("{:6.1} / {:6.1}", mib(m.hwm_kib), mib(m.rss_kib))
}

/// `1,234,567`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The table of one size, then the failover run's figures.
pub fn print_size(r: &SizeResults) {
    println!(
        "\n{:<22} {:>14} {:>12} {:>21} {:>21} {:>16}",
        "scheduler",
        "launch→RUNNING",
        "reconcile",
        "RSS MiB HWM / now",
        "testbed MiB HWM / now",
        "CPU s / testbed"
    );
    for (name, run) in [
        ("floor (Rust client)", &r.floor),
        ("pymesos", &r.pymesos),
        ("appliance", &r.appliance),
    ] {
        match run {
            None => {}
            Some(Err(error)) => println!("{name:<22} FAILED: {error}"),
            Some(Ok(f)) => println!(
                "{name:<22} {:>12.2} s {:>10.3} s {:>21} {:>21} {:>7.1} / {:>6.1}{}",
                f.launch.as_secs_f64(),
                f.reconcile.as_secs_f64(),
                mem(&f.memory),
                mem(&f.testbed_memory),
                f.cpu.as_secs_f64(),
                f.testbed_cpu.as_secs_f64(),
                if f.reconcile_note.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", f.reconcile_note)
                }
            ),
        }
    }
    for (name, run) in [
        ("floor", &r.floor),
        ("pymesos", &r.pymesos),
        ("appliance", &r.appliance),
    ] {
        if let Some(f) = ok(run).filter(|f| !f.launch_cpu.is_empty()) {
            let total: Duration = f.launch_cpu.iter().map(|(_, d)| *d).sum();
            let each: Vec<String> = f
                .launch_cpu
                .iter()
                .map(|(p, d)| format!("{p} {:.1}", d.as_secs_f64()))
                .collect();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            println!(
                "  {name} launch CPU s: {} = {:.1} CPU-s, at least {:.2} s on {cores} cores \
                 (launch {:.2} s)",
                each.join(" + "),
                total.as_secs_f64(),
                total.as_secs_f64() / cores as f64,
                f.launch.as_secs_f64()
            );
        }
    }
    for (name, run) in [
        ("floor", &r.floor),
        ("pymesos", &r.pymesos),
        ("appliance", &r.appliance),
    ] {
        if let Some(f) = ok(run).filter(|f| !f.calls.is_empty()) {
            let calls: Vec<String> = f.calls.iter().map(|(t, n)| format!("{t} {n}")).collect();
            let resent = match f.updates_resent {
                Some(n) => format!("; status updates re-sent unacknowledged: {n}"),
                None => String::new(),
            };
            println!(
                "  {name} calls to its testbed: {}{resent}",
                calls.join(", ")
            );
        }
    }
    for (name, run) in [
        ("floor", &r.floor),
        ("pymesos", &r.pymesos),
        ("appliance", &r.appliance),
    ] {
        if let Some(f) = ok(run).filter(|f| !f.phases.is_empty()) {
            let steps: Vec<String> = f
                .phases
                .iter()
                .map(|(p, at)| format!("{p} {:.2} s", at.as_secs_f64()))
                .collect();
            println!("  {name} phases: {}", steps.join(", "));
        }
    }
    if let Some(a) = ok(&r.appliance).filter(|a| !a.pages.is_empty()) {
        print_pages(
            "appliance pages after the reconciliation (one request at a time)",
            &a.pages,
        );
    }
    if let Some(a) = ok(&r.appliance) {
        for (name, peer) in [("pymesos", ok(&r.pymesos)), ("floor", ok(&r.floor))] {
            let Some(p) = peer else { continue };
            let ratio = |x: f64, y: f64| if y > 0.0 { x / y } else { f64::NAN };
            println!(
                "{:<22} {:>13.2}× {:>11.2}× {:>10.2}× (HWM)",
                format!("appliance / {name}"),
                ratio(a.launch.as_secs_f64(), p.launch.as_secs_f64()),
                ratio(a.reconcile.as_secs_f64(), p.reconcile.as_secs_f64()),
                ratio(a.memory.hwm_kib as f64, p.memory.hwm_kib as f64),
            );
        }
    }
    match &r.failover {
        None => {}
        Some(Err(error)) => println!("two replicas: FAILED: {error}"),
        Some(Ok(f)) => {
            let session = SESSION.as_secs_f64();
            println!(
                "two replicas ({} s session): launch {:.2} s, then explicit reconciliation {:.2} s, while probed",
                SESSION.as_secs(),
                f.launch.as_secs_f64(),
                f.probed_reconcile.as_secs_f64()
            );
            print_commands(f);
            let p = &f.phases;
            super::timing::print(
                &f.timings,
                &[
                    ("launch", p.started, p.launched),
                    ("reconcile", p.launched, p.reconciled),
                    (
                        "SUBSCRIBED → reconciled",
                        p.subscribed,
                        p.adopted.max(p.subscribed),
                    ),
                ],
            );
            println!(
                "  SIGKILL leader → follower SUBSCRIBED {:.2} s ({:.2} × session); → all reconciled {:.2} s ({}); new leader RSS {} MiB",
                f.subscribed.as_secs_f64(),
                f.subscribed.as_secs_f64() / session,
                f.reconciled.as_secs_f64(),
                f.reconciled_note,
                mem(&f.memory).trim()
            );
            if !f.pages.is_empty() {
                print_pages(
                    "new leader's pages after it reconciled (one request at a time)",
                    &f.pages,
                );
            }
        }
    }
}

/// p99 of `samples` in milliseconds (NaN without samples).
fn p99_ms(samples: &[Duration]) -> f64 {
    let mut s = samples.to_vec();
    s.sort();
    let at = (s.len() * 99).div_ceil(100).saturating_sub(1);
    s.get(at).map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}

/// Each page's p99, `/api/v1/state` also as a multiple of `/healthz`'s
/// (issue 30 asks ≤ 3×, and every page ≤ 100 ms).
fn print_pages(title: &str, pages: &[(String, Vec<Duration>)]) {
    println!("  {title}:");
    let healthz = pages
        .iter()
        .find(|(p, _)| p == "/healthz")
        .map(|(_, s)| p99_ms(s));
    for (path, samples) in pages {
        let ratio = match (path.as_str(), healthz) {
            ("/api/v1/state", Some(h)) if h > 0.0 => {
                format!(" ({:.1}× /healthz)", p99_ms(samples) / h)
            }
            _ => String::new(),
        };
        let mut sorted = samples.clone();
        sorted.sort();
        let max = sorted.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
        println!(
            "    {path:<52} {:>3} answers, p99 {:>7.1} ms, max {:>7.1} ms{ratio}",
            samples.len(),
            p99_ms(samples),
            max
        );
    }
}

/// Each kind of command per phase: the launch (leader subscribed → all
/// running), the explicit reconciliation (→ all answered), the failover
/// before the follower subscribed (SIGKILL → SUBSCRIBED: refusals while it
/// does not lead), and after it (SUBSCRIBED → all adopted tasks
/// reconciled). Issue 30 asks p99 ≤ 100 ms in every phase but the gap.
fn print_commands(f: &FailoverFigures) {
    let p = &f.phases;
    println!(
        "  commands, each kind every 100 ms: answers, p50 / p99 / max ms, over 100 ms, failures"
    );
    println!(
        "    {:<18} {:>34} {:>34} {:>34} {:>34}",
        "",
        "launch",
        "reconcile",
        "failover: SIGKILL → SUBSCRIBED",
        "failover: SUBSCRIBED → reconciled"
    );
    for (i, kind) in super::appliance::COMMANDS.iter().enumerate() {
        let at_leader = f.commands.get(i).map(|(_, l)| l);
        let at_follower = f.failover_commands.get(i).map(|(_, l)| l);
        let cells = [
            (at_leader, p.started, p.launched),
            (at_leader, p.launched, p.reconciled),
            (at_follower, p.killed, p.subscribed),
            (at_follower, p.subscribed, p.adopted.max(p.subscribed)),
        ];
        let mut line = format!("    {kind:<18}");
        let mut failures = Vec::new();
        for (which, (l, from, to)) in cells.iter().enumerate() {
            let Some(l) = l else {
                line.push_str(&format!(" {:>34}", "—"));
                continue;
            };
            let (took, failed) = l.between(*from, *to);
            line.push_str(&format!(" {:>34}", cell(&took, failed.len())));
            if !failed.is_empty() {
                failures.push(format!("{}: {}", which, summary(&failed)));
            }
        }
        println!("{line}");
        if !failures.is_empty() {
            println!("      failures by phase (0..3): {}", failures.join("; "));
        }
    }
}

/// `n, p50 / p99 / max ms, k>100, f fail`.
fn cell(took: &[Duration], failed: usize) -> String {
    if took.is_empty() {
        return format!("0 answers, {failed} fail");
    }
    let mut s = took.to_vec();
    s.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let over = s
        .iter()
        .filter(|d| **d > Duration::from_millis(100))
        .count();
    format!(
        "{} {:.0}/{:.0}/{:.0} >100:{over} f:{failed}",
        s.len(),
        ms(&s[s.len() / 2]),
        p99_ms(&s),
        ms(&s[s.len() - 1])
    )
}

/// Failures counted by kind: `503 ×12, 409 ×1`.
fn summary(failed: &[String]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for f in failed {
        let f: String = f.chars().take(60).collect();
        match counts.iter_mut().find(|(k, _)| *k == f) {
            Some((_, n)) => *n += 1,
            None => counts.push((f, 1)),
        }
    }
    counts
        .iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One measure across sizes: its values, and its growth between
/// neighbouring sizes as a factor per doubling of the task count
/// (`(b/a)^(1/log2(nb/na))`), or for memory as KiB per added task.
fn growth_row(
    name: &str,
    results: &[SizeResults],
    value: impl Fn(&SizeResults) -> Option<f64>,
    unit: &str,
    per_task: bool,
) {
    let values: Vec<Option<f64>> = results.iter().map(&value).collect();
    if values.iter().all(Option::is_none) {
        return;
    }
    let mut line = format!("{name:<30}");
    for v in &values {
        match v {
            Some(v) => line.push_str(&format!(" {:>9.2}{unit:<2}", v)),
            None => line.push_str(&format!(" {:>11}", "—")),
        }
    }
    for pair in results.windows(2).zip(values.windows(2)) {
        let ([a, b], [Some(va), Some(vb)]) = pair else {
            line.push_str(&format!(" {:>12}", "—"));
            continue;
        };
        if per_task {
            let kib = (vb - va) * 1024.0 / (b.tasks as f64 - a.tasks as f64);
            line.push_str(&format!(" {kib:>7.2} KiB/t"));
        } else {
            let doublings = (b.tasks as f64 / a.tasks as f64).log2();
            line.push_str(&format!(" {:>11.2}×", (vb / va).powf(1.0 / doublings)));
        }
    }
    println!("{line}");
}

/// The growth table (only with more than one size).
pub fn print_growth(results: &[SizeResults]) {
    if results.len() < 2 {
        return;
    }
    let mut header = format!("\n{:<30}", "growth");
    for r in results {
        header.push_str(&format!(" {:>11}", thousands(r.tasks)));
    }
    for pair in results.windows(2) {
        header.push_str(&format!(
            " {:>12}",
            format!("{}k→{}k", pair[0].tasks / 1000, pair[1].tasks / 1000)
        ));
    }
    println!("{header}");
    println!("(times: × per doubling of tasks; memory: KiB per added task)");
    type Pick = fn(&SizeResults) -> Option<&Figures>;
    let runs: [(&str, Pick); 3] = [
        ("floor", |r| ok(&r.floor)),
        ("pymesos", |r| ok(&r.pymesos)),
        ("appliance", |r| ok(&r.appliance)),
    ];
    for (name, pick) in runs {
        let secs = |d: Duration| Some(d.as_secs_f64());
        growth_row(
            &format!("{name} launch"),
            results,
            |r| pick(r).and_then(|f| secs(f.launch)),
            "s",
            false,
        );
        growth_row(
            &format!("{name} reconcile"),
            results,
            |r| pick(r).and_then(|f| secs(f.reconcile)),
            "s",
            false,
        );
        growth_row(
            &format!("{name} RSS HWM"),
            results,
            |r| pick(r).map(|f| mib(f.memory.hwm_kib)),
            "M",
            true,
        );
        growth_row(
            &format!("{name}'s testbed RSS HWM"),
            results,
            |r| pick(r).map(|f| mib(f.testbed_memory.hwm_kib)),
            "M",
            true,
        );
        growth_row(
            &format!("{name} CPU"),
            results,
            |r| pick(r).and_then(|f| secs(f.cpu)),
            "s",
            false,
        );
        growth_row(
            &format!("{name}'s testbed CPU"),
            results,
            |r| pick(r).and_then(|f| secs(f.testbed_cpu)),
            "s",
            false,
        );
    }
    fn failover(r: &SizeResults) -> Option<&FailoverFigures> {
        ok(&r.failover)
    }
    growth_row(
        "failover → SUBSCRIBED",
        results,
        |r| failover(r).map(|f| f.subscribed.as_secs_f64()),
        "s",
        false,
    );
    growth_row(
        "failover → all reconciled",
        results,
        |r| failover(r).map(|f| f.reconciled.as_secs_f64()),
        "s",
        false,
    );
}
