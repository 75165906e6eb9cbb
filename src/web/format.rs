//! How the dashboard writes times, durations and states.

/// A compact duration: `250ms`, `45s`, `3m 20s`, `2h 5m`, `7d`, `2d 3h`
/// ([`crate::util::format_duration`], shared with the scheduler's reasons).
pub fn duration(seconds: f64) -> String {
    crate::util::format_duration(seconds)
}

/// `12s ago` for a time `at` seen from `now` (`in 5s` for the future).
pub fn ago(at: f64, now: f64) -> String {
    if !(at.is_finite() && at > 0.0) {
        return "—".to_string();
    }
    let delta = now - at;
    if delta.abs() < 1.0 {
        "just now".to_string()
    } else if delta >= 0.0 {
        format!("{} ago", duration(delta.max(0.0)))
    } else {
        format!("in {}", duration(-delta))
    }
}

/// The CSS class of a Mesos task state (or framework state) badge.
pub fn state_class(state: &str) -> &'static str {
    match state {
        "TASK_RUNNING" | "subscribed" | "leader" => "ok",
        "TASK_STAGING" | "TASK_STARTING" | "subscribing" | "follower" | "standby" => "info",
        "TASK_KILLING" | "TASK_UNREACHABLE" | "TASK_UNKNOWN" | "disconnected" | "candidate" => {
            "warn"
        }
        "TASK_FAILED"
        | "TASK_LOST"
        | "TASK_ERROR"
        | "TASK_DROPPED"
        | "TASK_GONE"
        | "TASK_GONE_BY_OPERATOR"
        | "removed"
        | "failed_over"
        | "fenced"
        | "suspended" => "bad",
        _ => "muted",
    }
}

/// `TASK_RUNNING` → `RUNNING` (the badge text; the title keeps the full name).
pub fn short_state(state: &str) -> &str {
    state.strip_prefix("TASK_").unwrap_or(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(45.0), "45s");
        assert_eq!(duration(200.0), "3m 20s");
        assert_eq!(duration(7.0 * 86_400.0), "7d");
        assert_eq!(duration(3600.0 + 5.0), "1h");
        assert_eq!(duration(2.0 * 86_400.0 + 3.0 * 3600.0), "2d 3h");
        assert_eq!(ago(100.0, 112.0), "12s ago");
        assert_eq!(ago(100.0, 100.5), "just now");
        assert_eq!(ago(100.0, 90.0), "in 10s");
        assert_eq!(crate::util::format_time(0.0), "—");
        assert_eq!(
            crate::util::format_time(1_700_000_000.0),
            "2023-11-14 22:13:20Z"
        );
    }
}
