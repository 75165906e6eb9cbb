//! Capped exponential backoff with jitter, for re-subscribing, re-detecting
//! the leading master and retrying operator calls.
//!
//! The Mesos scheduler HTTP API guide asks schedulers to re-subscribe "using
//! an exponential backoff strategy" capped at about 15 s
//! (`docs/mesos-protocol.md#heartbeats`);
//! jitter keeps many schedulers (or many replicas) from hammering a freshly
//! elected master in lockstep.

use std::time::Duration;

/// A capped exponential backoff with "equal jitter": the n-th delay is drawn
/// uniformly from `[b/2, b]` where `b = min(max, min · 2ⁿ)`. Half of each
/// delay is guaranteed, so a flapping peer never sees a retry storm, and the
/// other half spreads retries out.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// A backoff from `min` to `max` (`max` below `min` is raised to `min`;
    /// a zero `min` is raised to 1 ms so that doubling makes progress).
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        Self {
            min,
            max: max.max(min),
            attempt: 0,
        }
    }

    /// The next delay, then doubles the base for the following one.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.base();
        self.attempt = self.attempt.saturating_add(1);
        let half = base / 2;
        let jitter = rand::random_range(0..=half.as_millis() as u64);
        half + Duration::from_millis(jitter)
    }

    /// The base (un-jittered upper bound) of the next delay.
    pub fn base(&self) -> Duration {
        // 2^20 · min exceeds any sane cap; stop doubling there to avoid overflow.
        let factor = 1u32 << self.attempt.min(20);
        self.min.saturating_mul(factor).min(self.max)
    }

    /// Starts over from `min` (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// How many delays were handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_with_jitter_in_the_upper_half() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(15));
        let bases: Vec<u64> = (0..8)
            .map(|_| {
                let base = b.base();
                let d = b.next_delay();
                assert!(
                    d >= base / 2 && d <= base,
                    "{d:?} outside [{base:?}/2, {base:?}]"
                );
                base.as_millis() as u64
            })
            .collect();
        assert_eq!(bases, [500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]);
        b.reset();
        assert_eq!(b.base(), Duration::from_millis(500));
        assert_eq!(b.attempts(), 0);
    }

    #[test]
    fn jitter_spreads_delays_at_one_base() {
        // Without jitter every draw at the cap would equal the cap and a
        // fleet of clients would retry in lockstep.
        let mut b = Backoff::new(Duration::from_secs(15), Duration::from_secs(15));
        let draws: std::collections::BTreeSet<Duration> = (0..32).map(|_| b.next_delay()).collect();
        assert!(
            draws.len() > 16,
            "only {} distinct delays: {draws:?}",
            draws.len()
        );
    }

    #[test]
    fn degenerate_bounds_and_many_attempts_do_not_panic() {
        let mut b = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(b.base(), Duration::from_millis(1));
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_millis(1));
        }
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_millis(10));
        assert_eq!(b.base(), Duration::from_secs(1));
        let _ = b.next_delay();
    }
}
