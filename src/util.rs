//! Small helpers shared across layers: clocks, the host name.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_matches_the_kernel() {
        let name = hostname().expect("a host name");
        if let Ok(kernel) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            assert_eq!(name, kernel.trim());
        }
    }
}
