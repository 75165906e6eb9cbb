//! The journal of the public event stream: event IDs, the bounded buffer a
//! `Last-Event-ID` resumes from, and the broadcast that feeds live streams
//! (`docs/events.md#ids-and-resuming`).
//!
//! An [`EventId`] is the leader's *epoch* and a sequence number within it.
//! The epoch is the ZooKeeper sequence number of the leader's election node
//! (`election/member-<seq>`, `docs/deployment-strategies.md#zookeeper-layout`):
//! the leader is the member with the lowest node still alive, and nodes of
//! later members are numbered higher, so each new leader's epoch is higher
//! than every earlier leader's. Within an epoch the sequence counts from 1.
//! Written as 20 decimal digits (10 of epoch, 10 of sequence, zero-padded),
//! the string order and the numeric order of IDs agree.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

/// Digits of each half of an [`EventId`]'s text.
const HALF_DIGITS: usize = 10;
/// The largest value one half holds.
const HALF_MAX: u64 = 9_999_999_999;

/// The ID of one event: `(epoch, seq)`, ordered as a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    /// The leader's election sequence number (see the module doc).
    pub epoch: u64,
    /// The event's place in the epoch, from 1; 0 stands for "before the
    /// first event of the epoch".
    pub seq: u64,
}

impl EventId {
    /// Parses the text form as the decimal number it is (epoch × 10^10 +
    /// seq): the 20 digits sent, or the same number without its leading
    /// zeros (`257` is epoch 0, event 257), as clients that store the ID
    /// as a number send it; `None` for anything else (not 1 to 20 decimal
    /// digits).
    pub fn parse(text: &str) -> Option<EventId> {
        let text = text.trim();
        if text.is_empty()
            || text.len() > 2 * HALF_DIGITS
            || !text.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let n: u128 = text.parse().ok()?;
        let split = u128::from(HALF_MAX) + 1;
        Some(EventId {
            epoch: u64::try_from(n / split).ok()?,
            seq: u64::try_from(n % split).ok()?,
        })
    }
}

impl std::fmt::Display for EventId {
    /// 20 digits: the epoch and the sequence, each zero-padded to 10
    /// (values above 9,999,999,999 saturate; the election sequence of
    /// ZooKeeper is a signed 32-bit number).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:0w$}{:0w$}",
            self.epoch.min(HALF_MAX),
            self.seq.min(HALF_MAX),
            w = HALF_DIGITS
        )
    }
}

/// One event as journalled: its ID, its type name and its JSON data,
/// serialized once for every stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The ID.
    pub id: EventId,
    /// The `event:` name, e.g. `task_status`.
    pub kind: &'static str,
    /// The `data:` JSON text (one line).
    pub data: String,
}

/// What the broadcast carries to live streams.
#[derive(Debug, Clone)]
pub enum Item {
    /// The next event.
    Event(Arc<Stored>),
    /// The epoch ended (this replica lost leadership or stops): streams
    /// send a final `disconnect` with this reason and close.
    End(String),
    /// This many events were counted and never kept ([`Journal::skip`]):
    /// a stream cannot go on without them and disconnects, as one that
    /// lagged does.
    Skipped(u64),
}

/// Why a resume could not be served from the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resync {
    /// The `Last-Event-ID` is not an ID of this stream (not 20 digits).
    Unreadable,
    /// It belongs to another leader's epoch.
    OtherEpoch {
        /// The epoch the client named.
        asked: u64,
        /// The epoch served here.
        current: u64,
    },
    /// It is newer than anything journalled in this epoch.
    Ahead,
    /// Events after it have already left the buffer.
    Gap {
        /// Events missed that are no longer buffered.
        lost: u64,
    },
}

impl Resync {
    /// The reason in words, for the `resync` event's data.
    pub fn reason(&self) -> String {
        match self {
            Resync::Unreadable => "the Last-Event-ID is not an ID of this stream".into(),
            Resync::OtherEpoch { asked, current } if asked < current => format!(
                "the Last-Event-ID is from an earlier leader (epoch {asked}; this leader's is \
                 {current}): its events after that ID cannot be replayed"
            ),
            Resync::OtherEpoch { asked, current } => format!(
                "the Last-Event-ID is from epoch {asked}, which this leader (epoch {current}) \
                 does not know"
            ),
            Resync::Ahead => "the Last-Event-ID is newer than any event of this leader".into(),
            Resync::Gap { lost } => {
                format!("{lost} events after the Last-Event-ID are no longer buffered")
            }
        }
    }
}

/// What a new stream starts with.
#[derive(Debug)]
pub struct Start {
    /// Set when the client must re-read state: the stream then continues
    /// with the events after [`Start::head`].
    pub resync: Option<Resync>,
    /// The newest ID at subscription time.
    pub head: EventId,
    /// Buffered events after the client's `Last-Event-ID`, oldest first.
    pub replay: Vec<Arc<Stored>>,
    /// Live events from here on (with their lag bound).
    pub live: broadcast::Receiver<Item>,
}

/// The journal: at most `capacity` recent events of the current epoch, and
/// a broadcast of at most `max_lag` items per stream.
pub struct Journal {
    capacity: usize,
    max_lag: usize,
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Item>,
}

struct Inner {
    /// The current epoch, `None` while this replica serves none.
    epoch: Option<u64>,
    /// The epoch of `head` and `events` (kept after [`Journal::end`]).
    buffered: Option<u64>,
    /// The sequence of the newest event of the epoch (0 before the first).
    head: u64,
    events: VecDeque<Arc<Stored>>,
}

impl Journal {
    /// A journal keeping `capacity` events (at least 1), each stream at
    /// most `max_lag` events behind (at least 1, rounded up to a power of
    /// two: the broadcast's ring has that size).
    pub fn new(capacity: usize, max_lag: usize) -> Journal {
        let max_lag = max_lag.max(1).next_power_of_two();
        let (tx, _) = broadcast::channel(max_lag);
        Journal {
            capacity: capacity.max(1),
            max_lag,
            inner: Mutex::new(Inner {
                epoch: None,
                buffered: None,
                head: 0,
                events: VecDeque::new(),
            }),
            tx,
        }
    }

    /// How far a stream may fall behind, events.
    pub fn max_lag(&self) -> usize {
        self.max_lag
    }

    /// How many events the buffer keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counts `n` events that came before the next ones published and are
    /// not kept: they would have left the buffer before anyone could read
    /// them (`n` older events of one change than the buffer holds). Their
    /// IDs are used up, the buffer empties, and live streams are told
    /// ([`Item::Skipped`]); a resume from before them is a gap.
    pub fn skip(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut inner = self.lock();
        if inner.epoch.is_none() {
            return;
        }
        inner.head = inner.head.saturating_add(n);
        inner.events.clear();
        let _ = self.tx.send(Item::Skipped(n));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current epoch, if any.
    pub fn epoch(&self) -> Option<u64> {
        self.lock().epoch
    }

    /// Serves `epoch` from now on. The same epoch again (a new term of the
    /// same election node) continues its sequence; another one starts
    /// afresh with an empty buffer.
    pub fn begin(&self, epoch: u64) {
        let mut inner = self.lock();
        inner.epoch = Some(epoch);
        if inner.buffered != Some(epoch) {
            inner.buffered = Some(epoch);
            inner.head = 0;
            inner.events.clear();
        }
    }

    /// Stops serving: live streams end with `reason`; new ones are refused
    /// until [`Journal::begin`]. The buffer is kept, so that the same
    /// epoch resumed (see `begin`) still serves it.
    pub fn end(&self, reason: &str) {
        let mut inner = self.lock();
        if inner.epoch.is_some() {
            inner.epoch = None;
            let _ = self.tx.send(Item::End(reason.to_string()));
        }
    }

    /// Appends an event of type `kind` with JSON `data`; returns its ID,
    /// `None` when no epoch is served (the event is dropped: there is no
    /// stream to serve it).
    pub fn publish(&self, kind: &'static str, data: String) -> Option<EventId> {
        let mut inner = self.lock();
        let epoch = inner.epoch?;
        inner.head += 1;
        let id = EventId {
            epoch,
            seq: inner.head,
        };
        let event = Arc::new(Stored { id, kind, data });
        inner.events.push_back(event.clone());
        while inner.events.len() > self.capacity {
            inner.events.pop_front();
        }
        // Sent under the lock, so that `subscribe` sees each event either
        // in the buffer or on its receiver, never both or neither. No
        // receiver is not an error.
        let _ = self.tx.send(Item::Event(event));
        Some(id)
    }

    /// A new stream resuming after `last` (the client's `Last-Event-ID`,
    /// `None` for a fresh start: live events only). `None` while no epoch
    /// is served.
    pub fn subscribe(&self, last: Option<&str>) -> Option<Start> {
        let inner = self.lock();
        let epoch = inner.epoch?;
        let head = EventId {
            epoch,
            seq: inner.head,
        };
        let live = self.tx.subscribe();
        let oldest = inner.events.front().map_or(inner.head + 1, |e| e.id.seq);
        let mut start = Start {
            resync: None,
            head,
            replay: Vec::new(),
            live,
        };
        let Some(last) = last else {
            return Some(start);
        };
        let resync = match EventId::parse(last) {
            None => Some(Resync::Unreadable),
            Some(id) if id.epoch != epoch => Some(Resync::OtherEpoch {
                asked: id.epoch,
                current: epoch,
            }),
            Some(id) if id.seq > inner.head => Some(Resync::Ahead),
            // The client has everything up to `id.seq`; the buffer must
            // hold the event right after it.
            Some(id) if id.seq + 1 < oldest => Some(Resync::Gap {
                lost: oldest - id.seq - 1,
            }),
            Some(id) => {
                start.replay = inner
                    .events
                    .iter()
                    .filter(|e| e.id.seq > id.seq)
                    .cloned()
                    .collect();
                None
            }
        };
        start.resync = resync;
        Some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(epoch: u64, seq: u64) -> String {
        EventId { epoch, seq }.to_string()
    }

    #[test]
    fn ids_read_back_and_order_as_strings_and_numbers() {
        let ids = [
            EventId { epoch: 0, seq: 1 },
            EventId { epoch: 0, seq: 9 },
            EventId { epoch: 0, seq: 10 },
            EventId { epoch: 7, seq: 1 },
            EventId {
                epoch: 12,
                seq: 99_999,
            },
            EventId {
                epoch: 2_147_483_647,
                seq: 1,
            },
        ];
        for w in ids.windows(2) {
            let (a, b) = (w[0].to_string(), w[1].to_string());
            assert_eq!(a.len(), 20);
            assert!(a < b, "{a} < {b} as strings");
            assert!(a.parse::<u128>().unwrap() < b.parse::<u128>().unwrap());
            assert_eq!(EventId::parse(&a), Some(w[0]));
        }
        assert_eq!(id(3, 17), "00000000030000000017");
        // The same number without its zero padding.
        assert_eq!(EventId::parse("257"), Some(EventId { epoch: 0, seq: 257 }));
        assert_eq!(
            EventId::parse("30000000017"),
            Some(EventId { epoch: 3, seq: 17 })
        );
        for bad in [
            "",
            "1e3",
            "0000000003000000001x",
            "000000000300000000170",
            "-0000000030000000017",
        ] {
            assert_eq!(EventId::parse(bad), None, "{bad:?}");
        }
    }

    fn publish(j: &Journal, n: usize) -> Vec<EventId> {
        (0..n)
            .map(|i| j.publish("audit", format!("{{\"n\":{i}}}")).unwrap())
            .collect()
    }

    #[test]
    fn nothing_is_served_or_kept_without_an_epoch() {
        let j = Journal::new(8, 8);
        assert!(j.publish("audit", "{}".into()).is_none());
        assert!(j.subscribe(None).is_none());
        j.begin(4);
        let ids = publish(&j, 2);
        assert_eq!(
            ids,
            [EventId { epoch: 4, seq: 1 }, EventId { epoch: 4, seq: 2 }]
        );
    }

    #[test]
    fn a_resume_within_the_buffer_replays_exactly_the_missed_events() {
        let j = Journal::new(8, 8);
        j.begin(4);
        let ids = publish(&j, 6);
        let start = j.subscribe(Some(&ids[2].to_string())).unwrap();
        assert_eq!(start.resync, None);
        let replayed: Vec<EventId> = start.replay.iter().map(|e| e.id).collect();
        assert_eq!(replayed, ids[3..]);
        // Up to date: nothing to replay; "before the first" replays all.
        assert!(
            j.subscribe(Some(&ids[5].to_string()))
                .unwrap()
                .replay
                .is_empty()
        );
        let all = j.subscribe(Some(&id(4, 0))).unwrap();
        assert_eq!((all.resync, all.replay.len()), (None, 6));
    }

    #[test]
    fn a_gap_beyond_the_buffer_is_a_resync_with_the_count_lost() {
        let j = Journal::new(4, 8);
        j.begin(4);
        let ids = publish(&j, 10);
        // Buffered: 7..=10. After 6 nothing is lost; after 5, event 6 is.
        let ok = j.subscribe(Some(&ids[5].to_string())).unwrap();
        assert_eq!((ok.resync, ok.replay.len()), (None, 4));
        let gap = j.subscribe(Some(&ids[4].to_string())).unwrap();
        assert_eq!(gap.resync, Some(Resync::Gap { lost: 1 }));
        assert!(gap.replay.is_empty());
        assert_eq!(gap.head, ids[9]);
        let gap = j.subscribe(Some(&id(4, 0))).unwrap();
        assert_eq!(gap.resync, Some(Resync::Gap { lost: 6 }));
    }

    #[test]
    fn other_epochs_unknown_ids_and_ids_ahead_are_resyncs() {
        let j = Journal::new(8, 8);
        j.begin(9);
        publish(&j, 3);
        let start = j.subscribe(Some(&id(4, 2))).unwrap();
        assert_eq!(
            start.resync,
            Some(Resync::OtherEpoch {
                asked: 4,
                current: 9
            })
        );
        assert!(start.resync.unwrap().reason().contains("earlier leader"));
        assert_eq!(
            j.subscribe(Some(&id(9, 4))).unwrap().resync,
            Some(Resync::Ahead)
        );
        assert_eq!(
            j.subscribe(Some("last")).unwrap().resync,
            Some(Resync::Unreadable)
        );
    }

    #[test]
    fn a_new_epoch_starts_afresh_and_the_same_epoch_continues() {
        let j = Journal::new(8, 8);
        j.begin(4);
        publish(&j, 3);
        j.end("leadership lost");
        j.begin(4);
        assert_eq!(publish(&j, 1)[0], EventId { epoch: 4, seq: 4 });
        j.begin(6);
        assert_eq!(publish(&j, 1)[0], EventId { epoch: 6, seq: 1 });
        assert_eq!(j.subscribe(Some(&id(6, 0))).unwrap().replay.len(), 1);
    }

    /// Events counted and not kept use up their IDs: a live stream is told,
    /// a resume from before them is a gap of exactly those lost, and the
    /// events after them are served.
    #[tokio::test]
    async fn skipped_events_use_their_ids_and_streams_learn_of_them() {
        let j = Journal::new(100, 4);
        j.begin(1);
        let ids = publish(&j, 3);
        let mut live = j.subscribe(None).unwrap().live;
        j.skip(1_000);
        let after = publish(&j, 2);
        assert_eq!(after[0].seq, 1_004, "{after:?}");
        assert!(matches!(live.recv().await, Ok(Item::Skipped(1_000))));
        let start = j.subscribe(Some(&ids[2].to_string())).unwrap();
        assert_eq!(start.resync, Some(Resync::Gap { lost: 1_000 }));
        let start = j.subscribe(Some(&after[0].to_string())).unwrap();
        assert!(start.resync.is_none());
        assert_eq!(start.replay.len(), 1);
        j.skip(0);
        assert_eq!(j.subscribe(None).unwrap().head, after[1], "nothing to skip");
    }

    #[tokio::test]
    async fn live_streams_get_each_event_once_and_learn_their_lag_and_the_end() {
        let j = Journal::new(100, 4);
        j.begin(1);
        let ids = publish(&j, 2);
        let mut start = j.subscribe(Some(&ids[0].to_string())).unwrap();
        let later = publish(&j, 1);
        // Replayed: 2; live: 3 — neither twice, none missing.
        assert_eq!(start.replay.len(), 1);
        match start.live.recv().await.unwrap() {
            Item::Event(e) => assert_eq!(e.id, later[0]),
            other => panic!("not an event: {other:?}"),
        }
        publish(&j, 6);
        assert!(matches!(
            start.live.recv().await,
            Err(broadcast::error::RecvError::Lagged(2))
        ));
        let mut other = j.subscribe(None).unwrap();
        j.end("leadership lost");
        assert!(matches!(other.live.recv().await, Ok(Item::End(r)) if r == "leadership lost"));
        assert!(j.subscribe(None).is_none());
    }
}
