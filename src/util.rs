//! Small helpers shared across layers.

use std::time::{SystemTime, UNIX_EPOCH};

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
