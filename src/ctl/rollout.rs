//! When `apply --wait` is done: a pure judgment of one service's row of
//! `GET /api/v1/services/{name}` against the spec that was applied.
//!
//! The API's rules this reads (`docs/deployment-strategies.md`, and the
//! rollout rules in `src/scheduler/rules/rollout.rs`): `rollout` is present
//! while a rollout is under way (outdated tasks live, or a change of shape
//! not yet available everywhere) and carries `halted` (`at`, `reason`) once
//! an instance stayed unavailable past `upgrade.deadline`; an initial launch
//! or a scale has no `rollout`, so for those the counts decide.
//!
//! - **NotShown**: the row does not show the applied spec (yet, or any
//!   more: the caller tells a slow replica from a later change).
//! - **Halted**: the row shows it and `rollout.halted` is set.
//! - **Done**: the row shows the applied spec (the fields that shape the
//!   tasks and the instance count agree, [`APPLIED_FIELDS`]), no rollout,
//!   `running` equals the desired `instances` with nothing being killed,
//!   and with a health check `healthy` reaches `instances` too.
//! - **Waiting** otherwise, with a one-line summary.

use serde_json::Value;

/// Where a service stands for `apply --wait`.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Complete: the line to print.
    Done(String),
    /// Halted: the API's reason.
    Halted(String),
    /// Under way: a summary of the counts.
    Waiting(String),
    /// The row does not show the applied spec: not read yet by this
    /// replica, or replaced by a later change (the caller tells which).
    NotShown(String),
}

/// The fields of the applied spec that must agree with the row's `spec`
/// before the row is taken to show it (the others are policies or may be
/// written differently, such as durations).
pub const APPLIED_FIELDS: [&str; 9] = [
    "command",
    "instances",
    "cpus",
    "mem",
    "disk",
    "ports",
    "env",
    "container",
    "health_check",
];

/// JSON equality with numbers compared as numbers (`32` equals `32.0`)
/// and durations as durations (`"60s"` equals `"1m"`).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) if x != y => {
            match (humantime::parse_duration(x), humantime::parse_duration(y)) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// True when `row` (a service of the API) shows `applied` (the spec that
/// was PUT), by [`APPLIED_FIELDS`] given in `applied` (and, when `applied`
/// has a `restart_generation`, the row's is at least that). Objects given in
/// `applied` are compared by the keys they give (the API adds defaults).
pub fn shows(row: &Value, applied: &Value) -> bool {
    let spec = &row["spec"];
    // `services restart --wait` gives the generation it waits for.
    if let Some(want) = applied.get("restart_generation").and_then(Value::as_u64)
        && row["restart_generation"].as_u64().unwrap_or(0) < want
    {
        return false;
    }
    APPLIED_FIELDS
        .iter()
        .all(|field| match applied.get(*field) {
            None => true,
            Some(want) => subset(want, &spec[*field]),
        })
}

/// `want` is found in `have`: objects by `want`'s keys, the rest by
/// [`same`].
fn subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, v)| {
            v.is_null() && !h.contains_key(k) || h.get(k).is_some_and(|x| subset(v, x))
        }),
        _ => same(want, have),
    }
}

fn count(row: &Value, key: &str) -> u64 {
    row[key].as_u64().unwrap_or(0)
}

/// Judges `row` for `applied` ([`Verdict`], module docs).
pub fn judge(row: &Value, applied: &Value) -> Verdict {
    let name = row["name"].as_str().unwrap_or("?");
    let rollout = &row["rollout"];
    let desired = row["spec"]["instances"].as_u64().unwrap_or(0);
    let (running, healthy, killing) = (
        count(row, "running"),
        count(row, "healthy"),
        count(row, "killing"),
    );
    let checked = !row["spec"]["health_check"].is_null();
    let waiting = row["waiting"]
        .as_str()
        .map(|w| format!("; waiting: {w}"))
        .unwrap_or_default();
    // A halt is ours only once the row shows our change: a halt of a
    // later change is somebody else's.
    if !shows(row, applied) {
        return Verdict::NotShown(format!("service {name}: the change is not shown yet"));
    }
    if let Some(halt) = rollout.get("halted").filter(|h| !h.is_null()) {
        let reason = halt["reason"].as_str().unwrap_or("no reason given");
        return Verdict::Halted(reason.to_string());
    }
    if !rollout.is_null() {
        return Verdict::Waiting(format!(
            "service {name}: rollout {}/{} replaced, {} available, {} outdated{waiting}",
            count(rollout, "replaced"),
            count(rollout, "desired"),
            count(rollout, "healthy"),
            count(rollout, "remaining"),
        ));
    }
    let enough_healthy = !checked || healthy >= desired;
    if running == desired && killing == 0 && enough_healthy {
        let health = if checked {
            format!(", {healthy} healthy")
        } else {
            String::new()
        };
        return Verdict::Done(format!(
            "service {name}: {running}/{desired} running{health}"
        ));
    }
    let health = if checked {
        format!(", {healthy} healthy")
    } else {
        String::new()
    };
    Verdict::Waiting(format!(
        "service {name}: {running}/{desired} running{health}, {killing} being killed{waiting}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(spec: Value, counts: Value) -> Value {
        let mut row = json!({"name": "web", "spec": spec, "running": 0, "starting": 0,
            "killing": 0, "healthy": 0, "unhealthy": 0, "rollout": null});
        for (k, v) in counts.as_object().unwrap() {
            row[k] = v.clone();
        }
        row
    }

    fn spec(command: &str, instances: u32, checked: bool) -> Value {
        let mut s = json!({"name": "web", "command": command, "cpus": 0.1, "mem": 32.0,
            "instances": instances, "env": {}, "restart_backoff": "1s"});
        if checked {
            s["health_check"] = json!({"type": "command", "command": "true", "interval": "1s"});
        }
        s
    }

    #[test]
    fn a_halt_is_reported_with_its_reason_whatever_else() {
        let applied = json!({"command": "sleep 2", "instances": 2});
        let r = row(
            spec("sleep 2", 2, false),
            json!({"rollout": {"desired": 2, "replaced": 1, "healthy": 0, "remaining": 1,
                "halted": {"at": 1.0, "reason": "instance(s) 0 not available for 6s"}}}),
        );
        assert_eq!(
            judge(&r, &applied),
            Verdict::Halted("instance(s) 0 not available for 6s".into())
        );
    }

    #[test]
    fn a_halt_of_another_change_is_not_ours() {
        let applied = json!({"command": "sleep 2", "instances": 2});
        let r = row(
            spec("sleep 3", 2, false),
            json!({"rollout": {"desired": 2, "replaced": 0, "healthy": 0, "remaining": 2,
                "halted": {"at": 1.0, "reason": "instance(s) 0 not available for 6s"}}}),
        );
        assert!(matches!(judge(&r, &applied), Verdict::NotShown(_)));
    }

    #[test]
    fn done_needs_the_applied_spec_no_rollout_and_every_instance_up() {
        let applied = json!({"name": "web", "command": "sleep 2", "cpus": 0.1, "mem": 32,
            "instances": 2, "restart_backoff": "1000ms"});
        // The old spec still shows: waiting, however healthy it looks.
        let old = row(spec("sleep 1", 2, false), json!({"running": 2}));
        assert!(matches!(judge(&old, &applied), Verdict::NotShown(_)));
        // New spec, rollout under way.
        let rolling = row(
            spec("sleep 2", 2, false),
            json!({"running": 2, "rollout": {"desired": 2, "replaced": 1, "healthy": 1,
                "remaining": 1, "halted": null}}),
        );
        let Verdict::Waiting(line) = judge(&rolling, &applied) else {
            panic!()
        };
        assert!(line.contains("1/2 replaced"), "{line}");
        // An initial launch: counts decide.
        let one = row(spec("sleep 2", 2, false), json!({"running": 1}));
        assert!(matches!(judge(&one, &applied), Verdict::Waiting(_)));
        let both = row(spec("sleep 2", 2, false), json!({"running": 2}));
        assert_eq!(
            judge(&both, &applied),
            Verdict::Done("service web: 2/2 running".into())
        );
        // A scale-down is done once the extra tasks are gone.
        let down = json!({"command": "sleep 2", "instances": 1});
        let killing = row(
            spec("sleep 2", 1, false),
            json!({"running": 2, "killing": 1}),
        );
        assert!(matches!(judge(&killing, &down), Verdict::Waiting(_)));
        let gone = row(spec("sleep 2", 1, false), json!({"running": 1}));
        assert!(matches!(judge(&gone, &down), Verdict::Done(_)));
    }

    #[test]
    fn with_a_health_check_every_instance_must_be_healthy() {
        let applied = json!({"command": "sleep 2", "instances": 2,
            "health_check": {"type": "command", "command": "true"}});
        let running = row(
            spec("sleep 2", 2, true),
            json!({"running": 2, "healthy": 1}),
        );
        assert!(matches!(judge(&running, &applied), Verdict::Waiting(_)));
        let healthy = row(
            spec("sleep 2", 2, true),
            json!({"running": 2, "healthy": 2}),
        );
        assert_eq!(
            judge(&healthy, &applied),
            Verdict::Done("service web: 2/2 running, 2 healthy".into())
        );
    }

    #[test]
    fn numbers_compare_as_numbers_and_objects_by_the_keys_given() {
        assert!(same(&json!(32), &json!(32.0)));
        assert!(same(&json!("60s"), &json!("1m")));
        assert!(!same(&json!("sleep 1"), &json!("sleep 2")));
        assert!(!same(&json!(32), &json!(33)));
        assert!(subset(
            &json!({"type": "command"}),
            &json!({"type": "command", "interval": "10s"})
        ));
        assert!(!subset(
            &json!({"type": "tcp"}),
            &json!({"type": "command"})
        ));
        assert!(subset(&json!({"a": null}), &json!({})));
    }
}
