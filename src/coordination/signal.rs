//! The leadership signal shared by both coordinators: the `watch` channel,
//! term numbering, one cancellation token per term, and the hold-off that
//! rate-limits leadership transitions.
//!
//! Rate limit: after a term ends, the next one may start only after a
//! hold-off. It is the configured base (ZooKeeper default 1 s) after a
//! stable term; each term that ended within [`STABLE_TERMS`] × base of its
//! start doubles it, up to [`MAX_HOLD_OFF_FACTOR`] × base. So a link that
//! flaps every few hundred milliseconds yields at most one term per 32 s
//! instead of a subscribe storm against the Mesos master, while a single
//! blip costs one base hold-off.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Leadership;

/// A term that lasted at least this many base hold-offs was stable.
pub(crate) const STABLE_TERMS: u32 = 10;
/// The hold-off grows up to this many times the base.
pub(crate) const MAX_HOLD_OFF_FACTOR: u32 = 32;

/// Owns the leadership channel and the current term.
pub(crate) struct LeaderSignal {
    tx: watch::Sender<Leadership>,
    base_hold_off: Duration,
    terms: Mutex<Terms>,
}

struct Terms {
    /// Last term number handed out (0: never led).
    last: u64,
    /// The running term, its token and when it started.
    current: Option<(u64, CancellationToken, Instant)>,
    /// When the last term ended, for the hold-off.
    ended_at: Option<Instant>,
    /// Terms in a row that ended before they were stable.
    short_terms: u32,
}

impl LeaderSignal {
    /// A signal starting in `initial` with `base_hold_off` between terms.
    pub(crate) fn new(initial: Leadership, base_hold_off: Duration) -> LeaderSignal {
        LeaderSignal {
            tx: watch::Sender::new(initial),
            base_hold_off,
            terms: Mutex::new(Terms {
                last: 0,
                current: None,
                ended_at: None,
                short_terms: 0,
            }),
        }
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Leadership> {
        self.tx.subscribe()
    }

    pub(crate) fn current(&self) -> Leadership {
        self.tx.borrow().clone()
    }

    /// Whether a term is running.
    pub(crate) fn is_leading(&self) -> bool {
        self.lock().current.is_some()
    }

    /// Starts a new term and publishes `Leader { term }`. A no-op returning
    /// the running term when one runs.
    pub(crate) fn begin_term(&self) -> u64 {
        let mut terms = self.lock();
        if let Some((term, _, _)) = &terms.current {
            return *term;
        }
        terms.last += 1;
        let term = terms.last;
        terms.current = Some((term, CancellationToken::new(), Instant::now()));
        // Publish while holding the lock so a concurrent `publish` cannot
        // interleave and leave the channel saying Leader without a term.
        self.tx.send_replace(Leadership::Leader { term });
        term
    }

    /// Publishes a non-leader state. A running term ends first: its token is
    /// cancelled before the new state is visible.
    pub(crate) fn publish(&self, state: Leadership) {
        debug_assert!(!state.is_leader(), "use begin_term to lead");
        let mut terms = self.lock();
        if let Some((_, token, started)) = terms.current.take() {
            token.cancel();
            let now = Instant::now();
            if now.duration_since(started) < self.base_hold_off * STABLE_TERMS {
                terms.short_terms = terms.short_terms.saturating_add(1);
            } else {
                terms.short_terms = 0;
            }
            terms.ended_at = Some(now);
        }
        self.tx.send_if_modified(|cur| {
            if *cur == state {
                false
            } else {
                *cur = state;
                true
            }
        });
    }

    /// The token of `term`; cancelled if that term is not the running one.
    pub(crate) fn term_token(&self, term: u64) -> CancellationToken {
        match &self.lock().current {
            Some((t, token, _)) if *t == term => token.clone(),
            _ => {
                let token = CancellationToken::new();
                token.cancel();
                token
            }
        }
    }

    /// The hold-off in force after the last term (see the module doc).
    pub(crate) fn hold_off(&self) -> Duration {
        let short = self.lock().short_terms;
        let factor = 1u32
            << short
                .saturating_sub(1)
                .min(MAX_HOLD_OFF_FACTOR.trailing_zeros());
        self.base_hold_off * factor
    }

    /// Whether leadership is flapping: the last two terms (at least) ended
    /// early, each within [`STABLE_TERMS`] base hold-offs of its start, the
    /// last one as recently. A replica whose terms end before its scheduler
    /// can act should let another one lead rather than hold the lock (see
    /// the election module); one term that ends early is a blip, not this.
    pub(crate) fn flapping(&self) -> bool {
        let terms = self.lock();
        let window = self.base_hold_off * STABLE_TERMS;
        terms.short_terms >= 2 && terms.ended_at.is_some_and(|t| t.elapsed() < window)
    }

    /// How long until a new term may start; `None` when it may start now.
    pub(crate) fn hold_off_remaining(&self) -> Option<Duration> {
        let ended = self.lock().ended_at?;
        self.hold_off()
            .checked_sub(ended.elapsed())
            .filter(|d| !d.is_zero())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Terms> {
        // A panic while holding this lock cannot leave Terms inconsistent
        // (every update is a single assignment), so poisoning is ignored.
        self.terms.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_count_up_and_tokens_end_with_their_term() {
        let s = LeaderSignal::new(Leadership::Candidate, Duration::ZERO);
        let rx = s.subscribe();
        let t1 = s.begin_term();
        assert_eq!(t1, 1);
        assert_eq!(s.begin_term(), 1, "begin_term is idempotent while leading");
        assert_eq!(*rx.borrow(), Leadership::Leader { term: 1 });
        let token = s.term_token(1);
        assert!(!token.is_cancelled());
        assert!(s.term_token(2).is_cancelled(), "unknown term: cancelled");
        s.publish(Leadership::Suspended);
        assert!(token.is_cancelled());
        assert!(s.term_token(1).is_cancelled());
        assert_eq!(*rx.borrow(), Leadership::Suspended);
        assert_eq!(s.begin_term(), 2);
    }

    #[test]
    fn hold_off_counts_from_the_end_of_the_last_term() {
        let s = LeaderSignal::new(Leadership::Candidate, Duration::from_secs(5));
        assert_eq!(s.hold_off_remaining(), None, "never led");
        s.begin_term();
        s.publish(Leadership::Candidate);
        let left = s.hold_off_remaining().unwrap();
        assert!(left > Duration::from_secs(4) && left <= Duration::from_secs(5));
        let s = LeaderSignal::new(Leadership::Candidate, Duration::ZERO);
        s.begin_term();
        s.publish(Leadership::Candidate);
        assert_eq!(s.hold_off_remaining(), None);
    }

    #[test]
    fn flapping_terms_double_the_hold_off_up_to_the_cap() {
        let base = Duration::from_millis(100);
        let s = LeaderSignal::new(Leadership::Candidate, base);
        assert_eq!(s.hold_off(), base);
        let mut seen = Vec::new();
        for _ in 0..8 {
            s.begin_term();
            s.publish(Leadership::Suspended);
            seen.push(s.hold_off().as_millis());
        }
        assert_eq!(seen, [100, 200, 400, 800, 1600, 3200, 3200, 3200]);
        assert!(s.flapping());
    }

    #[test]
    fn flapping_is_a_recent_term_that_ended_early() {
        let s = LeaderSignal::new(Leadership::Candidate, Duration::from_millis(10));
        assert!(!s.flapping(), "never led");
        s.begin_term();
        s.publish(Leadership::Suspended);
        assert!(!s.flapping(), "one term that ended early is a blip");
        s.begin_term();
        assert!(!s.flapping(), "leading");
        s.publish(Leadership::Suspended);
        assert!(
            s.flapping(),
            "two terms in a row lasted less than 10 hold-offs"
        );
        std::thread::sleep(Duration::from_millis(120));
        assert!(!s.flapping(), "the early end is 10 hold-offs ago");
        s.begin_term();
        std::thread::sleep(Duration::from_millis(120));
        s.publish(Leadership::Suspended);
        assert!(!s.flapping(), "a stable term resets the count");
    }
}
