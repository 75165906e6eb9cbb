//! Small helpers shared across layers: clocks, the host name, durations,
//! strict JSON for what operators write ([`json`]), and the admin token
//! file that replicas and `ctl` both read ([`tokens`]).

pub mod json;
pub mod tokens;
pub mod zk;

/// The one helper that hides the password of every URL in a text
/// (`http://alice:***@host`): whatever prints or logs a URL that may carry
/// user information (`ctl --url`, `--master`, `--zk`, a page's links) shows
/// it through this.
pub use zk::redact_password;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest duration any flag or service field takes: 365 days. Longer
/// ones are mistakes, and would overflow the clock arithmetic (`Instant +
/// d`) they end up in.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Refuses `text` with white space before or after it: the one rule of
/// every duration and percentage string an operator writes (a spec field,
/// a flag, an action's body), so that `" 50%"` is refused wherever it is
/// given rather than trimmed in some places. `example` is a good value.
///
/// # Errors
/// `text` has surrounding white space; the message says so.
pub fn refuse_padding(text: &str, example: &str) -> Result<(), String> {
    if text.trim() != text {
        return Err(format!(
            "{text:?} has white space around it; write the value alone, as {example:?}"
        ));
    }
    Ok(())
}

/// Parses a human-readable duration (`500ms`, `30s`, `5m`, `2h`, `1week`,
/// `1h 30m`): the one parser of every duration flag (`--offer-ttl`, …),
/// `ctl` flag (`--timeout`) and service field (`restart_backoff`, …).
/// Refuses white space around the value ([`refuse_padding`]), negative
/// values and anything longer than [`MAX_DURATION`]. The caller names the
/// flag or field in its error.
///
/// # Errors
/// What is wrong with `text`, in words.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    refuse_padding(text, "30s")?;
    if let Some(rest) = text.strip_prefix('-') {
        return Err(
            if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                format!("{text:?}: negative durations are not allowed")
            } else {
                format!("{text:?} is not a duration (a missing value?)")
            },
        );
    }
    let duration = humantime::parse_duration(text).map_err(|e| {
        format!("{text:?}: {e}; expected a duration such as 500ms, 30s, 5m, 2h or 7days")
    })?;
    if duration > MAX_DURATION {
        return Err(format!(
            "{text:?} is too long: at most 365 days (8760h) is accepted"
        ));
    }
    Ok(duration)
}

/// Serde's `with` for a [`Duration`] field in the project's syntax: read by
/// [`parse_duration`] (`"30s"`, `"5m"`, bounded, not negative), written as
/// humantime writes it (`"30s"`, `"5m"`). Errors say what is wrong with the
/// value; [`json`] adds the field's path.
///
/// ```ignore
/// #[serde(default = "default_interval", with = "crate::util::duration")]
/// pub interval: Duration,
/// ```
pub mod duration {
    use std::time::Duration;

    /// Writes `d` as humantime does (`"1m 30s"`).
    ///
    /// # Errors
    /// Those of `serializer`.
    pub fn serialize<S: serde::Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        humantime_serde::serialize(d, serializer)
    }

    /// Reads a duration string with [`super::parse_duration`].
    ///
    /// # Errors
    /// Not a string, or not a duration [`super::parse_duration`] takes.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }

    /// The same for an `Option<Duration>` field (`null` or absent: `None`;
    /// pair with `default` and `skip_serializing_if`).
    pub mod option {
        use std::time::Duration;

        /// Writes `Some(d)` as [`super::serialize`], `None` as `null`.
        ///
        /// # Errors
        /// Those of `serializer`.
        pub fn serialize<S: serde::Serializer>(
            d: &Option<Duration>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, serializer),
                None => serializer.serialize_none(),
            }
        }

        /// Reads `null` or a duration string.
        ///
        /// # Errors
        /// Neither `null` nor a duration [`super::super::parse_duration`] takes.
        pub fn deserialize<'de, D: serde::Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            let text = <Option<String> as serde::Deserialize>::deserialize(d)?;
            text.map(|t| super::super::parse_duration(&t).map_err(serde::de::Error::custom))
                .transpose()
        }
    }
}

/// Now, in seconds since the UNIX epoch, as Mesos writes timestamps.
pub fn unix_now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Now, in nanoseconds since the UNIX epoch (Mesos `TimeInfo`).
pub fn unix_now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// This machine's host name (`gethostname(2)`), `None` if it cannot be read
/// or is empty.
pub fn hostname() -> Option<String> {
    // POSIX host names are at most 255 bytes (HOST_NAME_MAX on Linux is 64).
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call;
    // gethostname writes at most `buf.len()` bytes into it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    // Truncated names may lack the terminating NUL: take the whole buffer then.
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = std::str::from_utf8(&buf[..end]).ok()?.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// A compact duration: `250ms`, `45s`, `3m 20s`, `2h 5m`, `7d`, `2d 3h`
/// (`—` for a negative or non-finite one): how the dashboard and the
/// scheduler's reasons write a span of time.
pub fn format_duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "—".to_string();
    }
    if seconds < 1.0 {
        return format!("{}ms", (seconds * 1000.0).round() as u64);
    }
    let s = seconds.round() as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    let parts: [(u64, &str); 4] = [(d, "d"), (h, "h"), (m, "m"), (sec, "s")];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    parts[first..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `2026-11-29 12:03:04Z` for seconds since the UNIX epoch (`—` for 0 or
/// nonsense): how the dashboard, the CLI and the testbed's sandbox logs
/// write a point in time.
pub fn format_time(at: f64) -> String {
    if !(at.is_finite() && at > 0.0) {
        return "—".to_string();
    }
    let t = UNIX_EPOCH + Duration::from_secs_f64(at);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
}

/// Everything but the RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes `text` as one URL path segment or query value.
pub fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_bounded_and_not_negative() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        for padded in [" 1h 30m ", " 30s", "30s ", "30s\n", "\t5m"] {
            let e = parse_duration(padded).unwrap_err();
            assert!(e.contains("has white space around it"), "{padded:?}: {e}");
        }
        assert_eq!(parse_duration("365days"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for long in ["366days", "500000000000years", "1000000000000000000000s"] {
            let e = parse_duration(long).unwrap_err();
            assert!(
                e.contains("at most 365 days") || e.contains("too large"),
                "{long}: {e}"
            );
        }
        let e = parse_duration("500000000000years").unwrap_err();
        assert!(e.contains("at most 365 days"), "{e}");
        for negative in ["-5s", "-1", "-0s"] {
            let e = parse_duration(negative).unwrap_err();
            assert!(e.contains("negative durations are not allowed"), "{e}");
        }
        let e = parse_duration("--offer-ttl").unwrap_err();
        assert!(e.contains("not a duration"), "{e}");
        let e = parse_duration("soon").unwrap_err();
        assert!(e.contains("expected a duration"), "{e}");
    }

    #[test]
    fn hostname_matches_the_kernel() {
        let name = hostname().expect("a host name");
        if let Ok(kernel) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            assert_eq!(name, kernel.trim());
        }
    }
}
