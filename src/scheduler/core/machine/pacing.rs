//! Pacing of the leader's periodic passes whose cost grows with the task
//! count: the scheduling pass (it reads every record of each service that
//! changed) and the snapshot (it lists every record, and the web layer
//! counts them once per snapshot).
//!
//! While tens of thousands of tasks launch or answer a reconciliation,
//! every service changes all the time, so each pass costs O(tasks). Run
//! at a fixed interval, their cost over a launch whose length grows with
//! the task count would be O(tasks²). Paced by what the last pass read,
//! at most one pass per `base` or per `per_record` × records, whichever is
//! longer, their share of the CPU stays bounded whatever the count: with
//! the defaults nothing changes up to 10,000 tasks, and at 50,000 the
//! scheduling pass runs at most twice a second and the snapshot once.

use std::time::Duration;

/// Scheduling pass: 100 ms per 10,000 records read (the default
/// `schedule_interval` up to 10,000 tasks).
pub(super) const PASS_PER_RECORD: Duration = Duration::from_micros(10);
/// Snapshot: 200 ms per 10,000 records (the default `snapshot_interval`
/// up to 10,000 tasks).
pub(super) const SNAPSHOT_PER_RECORD: Duration = Duration::from_micros(20);

/// Passes over fewer records are not paced: they cost well under a
/// millisecond.
pub(super) const PACED_FROM: usize = 1_000;

/// The pause after a pass that read `records` records: `base`, or
/// `per_record` × `records` when longer (from [`PACED_FROM`] records).
pub(super) fn interval(base: Duration, records: usize, per_record: Duration) -> Duration {
    if records < PACED_FROM {
        return base;
    }
    let records = u32::try_from(records).unwrap_or(u32::MAX);
    base.max(per_record.saturating_mul(records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_grows_with_the_records_past_the_base() {
        let base = Duration::from_millis(100);
        let at = |n| interval(base, n, PASS_PER_RECORD).as_millis();
        assert_eq!(at(0), 100);
        assert_eq!(at(10_000), 100);
        assert_eq!(at(20_000), 200);
        assert_eq!(at(50_000), 500);
        assert_eq!(
            interval(base, usize::MAX, PASS_PER_RECORD),
            PASS_PER_RECORD * u32::MAX
        );
        assert_eq!(
            interval(Duration::ZERO, 999, PASS_PER_RECORD),
            Duration::ZERO
        );
        assert_eq!(
            interval(Duration::ZERO, 1_000, PASS_PER_RECORD).as_millis(),
            10
        );
    }
}
