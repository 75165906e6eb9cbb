//! Human tables of `mesos-appliance ctl` (`comfy-table`, plain text without
//! borders so that `grep` and `awk` work on them). Each function takes the
//! API's JSON answer and leaves out what it does not know.
//!
//! Columns line up by display width: comfy-table pads by it (a CJK
//! character or an emoji takes two columns), and [`command`] cuts by it.
//! Text the API got from users (an audit reason, a name) may hold control
//! characters; a tab or a line break would move or split a row, and an
//! escape sequence would act on the terminal, so [`s`] shows each as its
//! Rust escape (`\t`, `\n`, `\u{1b}`).

use comfy_table::{ContentArrangement, Table, presets};
use serde_json::Value;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::util::unix_now_secs;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    t
}

/// The table's text with each line's trailing padding cut.
fn text(t: &Table) -> String {
    t.lines()
        .map(|line| line.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell: a string as it is, but for control characters (escaped, see
/// the module doc); `-` for null; other JSON as JSON.
fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.chars().any(char::is_control) => s
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_debug().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Display columns a cell may take before [`cut`] shortens it.
const MAX_CELL_WIDTH: usize = 40;

/// `text` shortened to at most `width` display columns, `…` (one column)
/// standing for what is cut.
fn cut(text: String, width: usize) -> String {
    if text.width() <= width {
        return text;
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width.saturating_sub(1) {
            break;
        }
        used += w;
        out.push(c);
    }
    out + "…"
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// `at` (seconds since the UNIX epoch) as an age: `5s`, `3m`, `2h`, `4d`
/// (`0s` for a time to come; [`when`] tells those apart).
pub fn age(at: &Value) -> String {
    let Some(at) = at.as_f64() else {
        return "-".into();
    };
    span((unix_now_secs() - at).max(0.0) as u64)
}

/// `at` (seconds since the UNIX epoch) from now: `in 54s` or `3m ago`.
/// A maintenance window to come read "from 0s", as if it had begun (a
/// fresh user's trial).
pub fn when(at: &Value) -> String {
    let Some(at) = at.as_f64() else {
        return "-".into();
    };
    let ahead = at - unix_now_secs();
    if ahead >= 1.0 {
        format!("in {}", span(ahead as u64))
    } else {
        format!("{} ago", span((-ahead).max(0.0) as u64))
    }
}

/// `secs` in its largest whole unit: `5s`, `3m`, `2h`, `4d`.
fn span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

/// The rollout column of a service: `-`, `3/4 replaced`, `HALTED`.
fn rollout(row: &Value) -> String {
    let r = &row["rollout"];
    if r.is_null() {
        "-".into()
    } else if !r["halted"].is_null() {
        "HALTED".into()
    } else {
        format!("{}/{} replaced", n(&r["replaced"]), n(&r["desired"]))
    }
}

fn command(spec: &Value) -> String {
    let text = match &spec["command"] {
        Value::Array(argv) => argv.iter().map(s).collect::<Vec<_>>().join(" "),
        other => s(other),
    };
    cut(text, MAX_CELL_WIDTH)
}

/// `services list`.
pub fn services(view: &Value) -> String {
    let mut t = table(&[
        "NAME",
        "INSTANCES",
        "RUNNING",
        "STARTING",
        "HEALTHY",
        "ROLLOUT",
        "COMMAND",
    ]);
    for row in view["services"].as_array().into_iter().flatten() {
        let spec = &row["spec"];
        let healthy = if spec["health_check"].is_null() {
            "-".to_string()
        } else {
            n(&row["healthy"]).to_string()
        };
        t.add_row(vec![
            s(&row["name"]),
            n(&spec["instances"]).to_string(),
            n(&row["running"]).to_string(),
            n(&row["starting"]).to_string(),
            healthy,
            rollout(row),
            command(spec),
        ]);
    }
    text(&t)
}

/// `services show NAME`.
pub fn service(row: &Value) -> String {
    let spec = &row["spec"];
    let mut out = format!(
        "Service:    {}\nCommand:    {}\nResources:  cpus {} mem {} MB disk {} MB ports {}\n\
         Instances:  {} desired, {} running, {} starting, {} being killed, {} unreachable\n",
        s(&row["name"]),
        command(spec),
        s(&spec["cpus"]),
        s(&spec["mem"]),
        s(&spec["disk"]),
        s(&spec["ports"]),
        n(&spec["instances"]),
        n(&row["running"]),
        n(&row["starting"]),
        n(&row["killing"]),
        n(&row["unreachable"]),
    );
    if !spec["health_check"].is_null() {
        out += &format!(
            "Health:     {} healthy, {} unhealthy ({} check)\n",
            n(&row["healthy"]),
            n(&row["unhealthy"]),
            s(&spec["health_check"]["type"])
        );
    }
    let r = &row["rollout"];
    if !r.is_null() {
        out += &format!(
            "Rollout:    {}/{} replaced, {} available, {} outdated\n",
            n(&r["replaced"]),
            n(&r["desired"]),
            n(&r["healthy"]),
            n(&r["remaining"])
        );
        if !r["halted"].is_null() {
            out += &format!(
                "Halted:     {} ago: {}\n",
                age(&r["halted"]["at"]),
                s(&r["halted"]["reason"])
            );
        }
    }
    if n(&row["consecutive_failures"]) > 0 {
        out += &format!("Failures:   {} in a row\n", n(&row["consecutive_failures"]));
    }
    if let Some(waiting) = row["waiting"].as_str() {
        out += &format!("Waiting:    {waiting}\n");
    }
    out
}

/// `tasks`.
pub fn tasks(view: &Value) -> String {
    let mut t = table(&[
        "ID", "SERVICE", "INSTANCE", "STATE", "HEALTH", "HOST", "PORTS", "UPDATED",
    ]);
    for task in view["tasks"].as_array().into_iter().flatten() {
        let health = match task["healthy"].as_bool() {
            Some(true) => "healthy",
            Some(false) => "unhealthy",
            None => "-",
        };
        let ports = task["ports"]
            .as_array()
            .map(|p| p.iter().map(s).collect::<Vec<_>>().join(","))
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "-".into());
        t.add_row(vec![
            s(&task["id"]),
            s(&task["service"]),
            s(&task["instance"]),
            s(&task["state"]),
            health.to_string(),
            s(&task["hostname"]),
            ports,
            age(&task["updated"]),
        ]);
    }
    let mut out = text(&t);
    let (matched, shown) = (
        n(&view["matched"]),
        view["tasks"].as_array().map_or(0, Vec::len),
    );
    if matched as usize > shown {
        out += &format!("\n({shown} of {matched} shown)");
    }
    out
}

/// `audit`.
pub fn audit(view: &Value) -> String {
    let mut t = table(&["SEQ", "AGE", "WHO", "ACTION", "STATUS", "REASON", "OUTCOME"]);
    for e in view["entries"].as_array().into_iter().flatten() {
        t.add_row(vec![
            s(&e["seq"]),
            age(&e["at"]),
            s(&e["who"]),
            s(&e["action"]),
            s(&e["status"]),
            s(&e["reason"]),
            s(&e["outcome"]),
        ]);
    }
    let mut out = text(&t);
    if let Some(error) = view["error"].as_str() {
        out += &format!("\n(incomplete: {error})");
    }
    out
}

/// An agent's drain (`drain` of `/api/v1/agents`, `docs/draining.md`):
/// `-`, or its state and task counts (only its state when the replica
/// asked cannot know the counts: `progress_unknown`).
fn drain(d: &Value, progress_unknown: bool) -> String {
    if d.is_null() {
        return "-".into();
    }
    if progress_unknown && d["state"] == "running" {
        return "running (progress: ask the leader)".into();
    }
    let some = |key: &str, word: &str| {
        d[key]
            .as_u64()
            .filter(|n| *n > 0)
            .map_or(String::new(), |n| format!(", {n} {word}"))
    };
    format!(
        "{}: {} moved, {} waiting, {} blocked{}{}",
        s(&d["state"]),
        n(&d["moved"]),
        n(&d["waiting"]),
        n(&d["blocked"]),
        some("stopped", "stopped"),
        some("ended", "ended there")
    )
}

/// `agents list`. A replica that does not lead names the fields it
/// cannot know (`unknown_fields`): they are shown `-`.
pub fn agents(view: &Value) -> String {
    let unknown = |field: &str| {
        view["unknown_fields"]
            .as_array()
            .is_some_and(|l| l.iter().any(|f| f == field))
    };
    let since_unknown = unknown("agents[].since");
    let progress_unknown = unknown("agents[].drain.moved");
    let mut t = table(&[
        "ID",
        "HOST",
        "STATE",
        "SINCE",
        "TASKS",
        "MAINTENANCE",
        "DRAIN",
    ]);
    for a in view["agents"].as_array().into_iter().flatten() {
        let maintenance = match &a["maintenance"] {
            Value::Null => "-".to_string(),
            m => match when(&m["start"]) {
                w if w.starts_with("in ") => format!("starts {w}"),
                w => format!("began {w}"),
            },
        };
        t.add_row(vec![
            s(&a["agent_id"]),
            s(&a["hostname"]),
            s(&a["state"]),
            if since_unknown {
                "-".into()
            } else {
                age(&a["since"])
            },
            a["tasks"].as_array().map_or(0, Vec::len).to_string(),
            maintenance,
            drain(&a["drain"], progress_unknown),
        ]);
    }
    text(&t)
}

/// `at` (seconds since the UNIX epoch) as a time to come: `in 5s`, `in 3m`;
/// `-` without one, `now` once due.
fn due(at: &Value) -> String {
    let Some(at) = at.as_f64() else {
        return "-".into();
    };
    let secs = (at - unix_now_secs()).max(0.0) as u64;
    match secs {
        0 => "now".into(),
        1..60 => format!("in {secs}s"),
        60..3600 => format!("in {}m", secs / 60),
        3600..86400 => format!("in {}h", secs / 3600),
        _ => format!("in {}d", secs / 86400),
    }
}

/// `jobs list`.
pub fn jobs(view: &Value) -> String {
    let mut t = table(&["NAME", "SCHEDULE", "ENABLED", "NEXT", "ACTIVE", "LAST RUN"]);
    for j in view["jobs"].as_array().into_iter().flatten() {
        let last = &j["last_run"];
        let last = if last.is_null() {
            "-".to_string()
        } else {
            format!("{} {} ago", s(&last["state"]), age(&last["created_at"]))
        };
        t.add_row(vec![
            s(&j["name"]),
            s(&j["schedule"]),
            if j["schedule"].is_null() {
                "-".into()
            } else {
                s(&j["enabled"])
            },
            due(&j["next_run_at"]),
            n(&j["active_runs"]).to_string(),
            last,
        ]);
    }
    text(&t)
}

/// `jobs show NAME`: the job, then its kept runs.
pub fn job(view: &Value) -> String {
    let spec = &view["spec"];
    let mut out = format!(
        "Job:        {}\nCommand:    {}\nSchedule:   {}{}\nNext run:   {}\n",
        s(&view["name"]),
        command(spec),
        s(&view["schedule"]),
        if view["schedule"].is_null() {
            String::new()
        } else if view["enabled"] == true {
            " (enabled)".into()
        } else {
            " (disabled)".into()
        },
        due(&view["next_run_at"]),
    );
    let mut t = table(&["RUN", "TRIGGER", "STATE", "AGE", "ATTEMPTS", "REASON"]);
    for r in view["runs"].as_array().into_iter().flatten() {
        let trigger = match (&r["trigger"]["kind"], &r["trigger"]["by"]) {
            (kind, Value::Null) => s(kind),
            (kind, by) => format!("{} by {}", s(kind), s(by)),
        };
        t.add_row(vec![
            s(&r["run_id"]),
            trigger,
            s(&r["state"]),
            age(&r["created_at"]),
            r["attempts"].as_array().map_or(0, Vec::len).to_string(),
            s(&r["reason"]),
        ]);
    }
    out += "\n";
    out += &text(&t);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_maintenance_window_to_come_starts_in_and_one_begun_began_ago() {
        let now = unix_now_secs();
        let view = json!({"agents": [
            {"agent_id": "S0", "hostname": "h0", "state": "active", "since": now - 5.0,
             "tasks": [], "maintenance": {"start": now + 54.5}, "drain": null},
            {"agent_id": "S1", "hostname": "h1", "state": "active", "since": now - 5.0,
             "tasks": [], "maintenance": {"start": now - 180.0}, "drain": null}]});
        let text = agents(&view);
        assert!(text.contains("starts in 54s"), "{text}");
        assert!(text.contains("began 3m ago"), "{text}");
        assert_eq!(when(&json!(null)), "-");
    }

    #[test]
    fn services_show_counts_and_rollouts() {
        let view = json!({"services": [
            {"name": "web", "spec": {"command": ["sleep", "100"], "instances": 2,
                "health_check": {"type": "http"}}, "running": 2, "starting": 0, "healthy": 1,
                "rollout": {"desired": 2, "replaced": 1, "halted": null}},
            {"name": "batch", "spec": {"command": "x".repeat(60), "instances": 1},
                "running": 0, "starting": 1, "rollout": {"halted": {"reason": "r"}}}]});
        let text = services(&view);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert!(lines[0].starts_with("NAME"), "{text}");
        assert!(lines[1].contains("1/2 replaced") && lines[1].contains("sleep 100"));
        assert!(
            lines[2].contains("HALTED") && lines[2].contains('…'),
            "{text}"
        );
        assert!(
            text.lines().all(|l| !l.ends_with(' ')),
            "no trailing padding"
        );
    }

    #[test]
    fn agents_show_their_drains() {
        let view = json!({"agents": [
            {"agent_id": "S0", "hostname": "a0", "state": "active", "tasks": ["t1"]},
            {"agent_id": "S1", "hostname": "a1", "state": "active", "tasks": [],
                "drain": {"state": "running", "moved": 2, "waiting": 1, "blocked": 0}}]});
        let text = agents(&view);
        assert!(
            text.contains("running: 2 moved, 1 waiting, 0 blocked"),
            "{text}"
        );
        // Tasks stopped (no longer wanted) are shown once there are some.
        let view = json!({"agents": [
            {"agent_id": "S1", "hostname": "a1", "state": "active", "tasks": [],
                "drain": {"state": "done", "moved": 0, "waiting": 0, "blocked": 0, "stopped": 1}}]});
        let text = agents(&view);
        assert!(
            text.contains("done: 0 moved, 0 waiting, 0 blocked, 1 stopped"),
            "{text}"
        );
        // So are tasks that ended there without a kill (lost with the
        // agent, finished, failed).
        let view = json!({"agents": [
            {"agent_id": "S1", "hostname": "a1", "state": "active", "tasks": [],
                "drain": {"state": "done", "moved": 0, "waiting": 0, "blocked": 0,
                    "stopped": 0, "ended": 6}}]});
        let text = agents(&view);
        assert!(
            text.contains("done: 0 moved, 0 waiting, 0 blocked, 6 ended there"),
            "{text}"
        );
        // A replica that does not lead: what it cannot know is not shown.
        let view = json!({"leading": false, "as_of": 1.0,
            "unknown_fields": ["agents[].state", "agents[].since", "agents[].drain.moved"],
            "agents": [{"agent_id": "S1", "hostname": "", "state": "unknown", "since": 0.0,
                "tasks": [], "drain": {"state": "running", "moved": 0, "waiting": 0, "blocked": 0}}]});
        let text = agents(&view);
        assert!(
            text.contains("running (progress: ask the leader)"),
            "{text}"
        );
        assert!(!text.contains("0 moved") && !text.contains("d "), "{text}");
    }

    #[test]
    fn a_halted_service_shows_its_reason() {
        let row = json!({"name": "web", "spec": {"command": "a", "instances": 2},
            "rollout": {"desired": 2, "replaced": 1, "healthy": 0, "remaining": 1,
                "halted": {"at": unix_now_secs() - 5.0, "reason": "instance(s) 0 not healthy"}},
            "waiting": "no offer"});
        let text = service(&row);
        assert!(
            text.contains("Halted:     5s ago: instance(s) 0 not healthy"),
            "{text}"
        );
        assert!(text.contains("Waiting:    no offer"));
    }

    /// The display column each line of `text` has `needle` at.
    fn columns_of(text: &str, needle: &str) -> Vec<usize> {
        text.lines()
            .map(|l| {
                l[..l
                    .find(needle)
                    .unwrap_or_else(|| panic!("{needle} in {l:?}"))]
                    .width()
            })
            .collect()
    }

    #[test]
    fn audit_rows_stay_one_line_and_aligned_whatever_the_users_wrote() {
        let entry = |who: &str, reason: &str| {
            json!({"seq": 1, "at": unix_now_secs(), "who": who, "action": "service.put",
                "status": 200, "reason": reason, "outcome": "OUT"})
        };
        let view = json!({"entries": [
            entry("alice", "plain"),
            entry("山田太郎", "デプロイ🚀"),
            entry("bob\tby tab", "line\nbreak \u{1b}[2J"),
        ]});
        let text = audit(&view);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            text.contains(r"bob\tby tab") && text.contains(r"line\nbreak \u{1b}[2J"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "no escape reaches the terminal");
        let at = columns_of(&text, "OUT");
        assert!(at.iter().all(|&c| c == at[0]), "{at:?}\n{text}");
    }

    #[test]
    fn a_long_command_is_cut_by_display_width() {
        let view = |command: String| json!({"services": [{"name": "web", "spec": {"command": command, "instances": 1}}]});
        for command in ["x".repeat(60), "漢".repeat(30), "🚀".repeat(25)] {
            let text = services(&view(command.clone()));
            let row = text.lines().nth(1).unwrap();
            let cell = row.split_whitespace().find(|w| w.ends_with('…')).unwrap();
            // A wide character that would end past the limit is cut too.
            let width = cell.width();
            assert!(
                (MAX_CELL_WIDTH - 1..=MAX_CELL_WIDTH).contains(&width),
                "{command}: {width}: {text}"
            );
        }
        let short = "漢".repeat(20);
        assert!(services(&view(short.clone())).contains(&short));
    }
}
