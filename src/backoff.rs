//! The one capped exponential backoff of the crate.
//!
//! Every retry loop uses it: re-subscribing to the master and re-detecting
//! it, operator calls, the executor's SUBSCRIBE retries, the ZooKeeper
//! session, the leader supervisor, kill retries, explicit reconciliation and
//! the testbed's own loops. Two flavours:
//!
//! - [`Backoff::jittered`] for clients of a shared peer. The Mesos scheduler
//!   HTTP API guide asks schedulers to re-subscribe "using an exponential
//!   backoff strategy" capped at about 15 s
//!   (`docs/mesos-protocol.md#heartbeats`); jitter keeps many schedulers (or
//!   many replicas, or many executors after an agent restart) from hammering
//!   a freshly elected master or a recovering agent in lockstep.
//! - [`Backoff::new`] (no jitter) where the delays are part of a rule that
//!   tests and operators read exactly: kill retries, explicit reconciliation
//!   (`docs/reconciliation.md` in apache/mesos: "exponential backoff"),
//!   restart backoff of failing services.

use std::time::Duration;

/// A capped exponential backoff: the n-th base delay is
/// `b = min(max, first · 2ⁿ)`. Without jitter the delay is `b`; with
/// "equal jitter" it is drawn uniformly from `[b/2, b]`, so half of each
/// delay is guaranteed (a flapping peer never sees a retry storm) and the
/// other half spreads retries out. Delays never exceed `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    attempt: u32,
    jitter: bool,
}

impl Backoff {
    /// A deterministic backoff from `first` to `max` (`max` below `first` is
    /// raised to `first`; a zero `first` is raised to 1 ms so that doubling
    /// makes progress).
    pub fn new(first: Duration, max: Duration) -> Self {
        let first = first.max(Duration::from_millis(1));
        Self {
            first,
            max: max.max(first),
            attempt: 0,
            jitter: false,
        }
    }

    /// Like [`Backoff::new`], with each delay drawn from the upper half of
    /// its base.
    pub fn jittered(first: Duration, max: Duration) -> Self {
        Self {
            jitter: true,
            ..Self::new(first, max)
        }
    }

    /// The next delay, then doubles the base for the following one.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.base();
        self.attempt = self.attempt.saturating_add(1);
        if !self.jitter {
            return base;
        }
        let half = base / 2;
        let jitter = rand::random_range(0..=half.as_millis() as u64);
        half + Duration::from_millis(jitter)
    }

    /// The base (the un-jittered upper bound) of the next delay.
    pub fn base(&self) -> Duration {
        Self::nth(self.first, self.max, self.attempt)
    }

    /// The base delay after `n` doublings, `min(max, first · 2ⁿ)`, for a
    /// rule that counts its attempts itself (a service's consecutive
    /// failures). No bounds are raised: a zero `first` gives zero.
    pub fn nth(first: Duration, max: Duration, n: u32) -> Duration {
        // Doubles until the cap (at most ~100 rounds: a Duration's range),
        // so a tiny `first` still reaches a large `max`.
        let mut delay = first;
        for _ in 0..n {
            if delay >= max || delay.is_zero() {
                break;
            }
            delay = delay.saturating_mul(2);
        }
        delay.min(max)
    }

    /// Starts over from `first` (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// How many delays were handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The cap, `max`.
    pub fn max(&self) -> Duration {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_reaches_a_cap_far_above_two_to_the_twentieth_of_the_first_delay() {
        let year = Duration::from_secs(365 * 86_400);
        let ms = Duration::from_millis(1);
        assert_eq!(Backoff::nth(ms, year, 0), ms);
        assert_eq!(Backoff::nth(ms, year, 10), Duration::from_millis(1024));
        // 2^35 ms is about 398 days: past the cap.
        assert_eq!(Backoff::nth(ms, year, 35), year);
        assert_eq!(Backoff::nth(ms, year, u32::MAX), year);
        assert_eq!(Backoff::nth(Duration::ZERO, year, 50), Duration::ZERO);
    }

    #[test]
    fn doubles_up_to_the_cap_with_jitter_in_the_upper_half() {
        let mut b = Backoff::jittered(Duration::from_millis(500), Duration::from_secs(15));
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
        let mut b = Backoff::jittered(Duration::from_secs(15), Duration::from_secs(15));
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

    #[test]
    fn without_jitter_the_delays_are_exact() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let delays: Vec<u64> = (0..5).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(b.attempts(), 5);
        assert_eq!(b.max(), Duration::from_secs(5));
    }
}
