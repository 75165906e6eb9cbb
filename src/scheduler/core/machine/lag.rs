//! How far the machine is behind the Mesos stream (`docs/architecture.md`,
//! "Event lag"): the runner says when each event it feeds was read off the
//! stream and which events wait behind it; the machine keeps when the
//! newest applied event was read (`last_event_at`, so a heartbeat's age
//! counts from the stream, not from when a lagging machine got to it) and
//! the age of the oldest one waiting (the lag).

use std::time::Duration;

use tokio::time::Instant;

use super::Machine;

/// The machine's view of its inbox.
#[derive(Debug, Default)]
pub(super) struct EventLag {
    /// When the newest applied event was read off the stream.
    pub(super) last_read: Option<Instant>,
    /// When the event(s) of the next input were read (set by the runner).
    next_read: Option<Instant>,
    /// When the oldest event received and not applied was read.
    oldest_waiting: Option<Instant>,
    /// Events received and not applied.
    pub(super) depth: usize,
    /// The inbox is full: the stream is not being read.
    pub(super) full: bool,
}

impl EventLag {
    /// Records that an event input is applied at `now`.
    pub(super) fn applied(&mut self, now: Instant) {
        let read = self.next_read.take().unwrap_or(now);
        self.last_read = Some(self.last_read.map_or(read, |l| l.max(read)));
    }

    /// The age at `now` of the oldest event waiting (zero when none does).
    pub(super) fn lag(&self, now: Instant) -> Duration {
        self.oldest_waiting
            .map(|t| now.saturating_duration_since(t))
            .unwrap_or_default()
    }
}

impl Machine {
    /// The stream events of the next input ([`Machine::handle`]) were read
    /// off the Mesos stream at `read_at` (the newest of them, for a batch).
    pub fn event_read_at(&mut self, read_at: Instant) {
        self.lag.next_read = Some(read_at);
    }

    /// The events received from the Mesos stream and not applied yet:
    /// `depth` of them, the oldest read at `oldest`; `full` when the
    /// inbox holds all it can (the stream is not read meanwhile, so the
    /// lag is a lower bound). Updates the lag gauges as of `now`.
    pub fn inbox(&mut self, oldest: Option<Instant>, depth: usize, full: bool, now: Instant) {
        let lag = &mut self.lag;
        let changed = lag.depth != depth || lag.oldest_waiting != oldest;
        lag.oldest_waiting = oldest;
        lag.depth = depth;
        lag.full = full;
        if changed {
            self.out.dirty = true;
        }
        let seconds = self.lag.lag(now).as_secs_f64();
        self.stats.event_lag_seconds = seconds;
        self.stats.event_inbox_depth = depth;
    }
}
