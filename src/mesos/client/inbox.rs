//! When each event waiting in the client's event channel was read off the
//! Mesos stream, so the consumer can tell how far behind the stream it is
//! (`docs/architecture.md`, "Event lag").
//!
//! The driver stamps every [`ClientEvent`](super::ClientEvent) it hands to
//! the channel, in channel order; the consumer takes one stamp per event it
//! receives. The stamps are bounded by the channel's capacity (plus the one
//! event a blocked send holds): a consumer that never takes them only
//! keeps the newest.
//!
//! While the channel is full the driver reads no further, so the master's
//! next events wait unread in the connection: the oldest stamp's age is
//! then a lower bound of the lag, and a full inbox says so.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

/// Read times of the events handed to the channel and not yet taken.
#[derive(Debug)]
pub struct Inbox {
    stamps: Mutex<VecDeque<Instant>>,
    capacity: usize,
}

impl Inbox {
    /// An inbox for a channel of `buffer` events.
    pub(crate) fn new(buffer: usize) -> Inbox {
        Inbox {
            stamps: Mutex::new(VecDeque::new()),
            capacity: buffer.max(1) + 1,
        }
    }

    fn stamps(&self) -> std::sync::MutexGuard<'_, VecDeque<Instant>> {
        self.stamps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stamps the next event handed to the channel as read at `read_at`.
    pub(crate) fn push(&self, read_at: Instant) {
        let mut stamps = self.stamps();
        stamps.push_back(read_at);
        while stamps.len() > self.capacity {
            stamps.pop_front();
        }
    }

    /// Takes the stamp of the event just received from the channel (the
    /// oldest); `None` when none is left.
    pub fn take(&self) -> Option<Instant> {
        self.stamps().pop_front()
    }

    /// When the oldest event not yet received was read off the stream.
    pub fn oldest(&self) -> Option<Instant> {
        self.stamps().front().copied()
    }

    /// Events handed to the channel and not yet received.
    pub fn depth(&self) -> usize {
        self.stamps().len()
    }

    /// True when the channel holds all it can: the driver has stopped
    /// reading the stream.
    pub fn is_full(&self) -> bool {
        self.depth() >= self.capacity - 1
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn stamps_come_out_in_order_and_stay_bounded() {
        let inbox = Inbox::new(2);
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        inbox.push(at(1));
        inbox.push(at(2));
        assert!(inbox.is_full());
        assert_eq!((inbox.oldest(), inbox.depth()), (Some(at(1)), 2));
        assert_eq!(inbox.take(), Some(at(1)));
        for s in 3..10 {
            inbox.push(at(s));
        }
        assert_eq!(inbox.depth(), 3, "bounded by the channel plus one");
        assert_eq!(inbox.oldest(), Some(at(7)));
    }
}
