//! Streaming responses (a scheduler's or an executor's subscription): the
//! master pushes encoded RecordIO records into a queue; the HTTP response
//! body drains it, one record per chunk as a real master sends them
//! (`docs/mesos-protocol.md#capture-a-subscribe`). When the body is dropped
//! — the peer hung up — a callback tells the master, so it can mark the
//! framework disconnected (master.cpp `Master::exited`) or the executor gone.
//!
//! A real master queues without limit: `HttpConnection::send`
//! (`src/master/master.hpp`) writes each encoded event to the response's
//! `process::http::Pipe`, whose writer keeps what the reader has not taken
//! yet in an unbounded queue (`Pipe::Writer::write` in
//! `3rdparty/libprocess/src/http.cpp`). The testbed bounds each queue by
//! the bytes it holds (`TestbedConfig::stream_queue_bytes`), so a peer that
//! stops reading cannot exhaust its memory, and a slow one is not cut off
//! for the number of small events it is behind on: tens of thousands of
//! tasks, each with an update, its retries and a reconciliation answer
//! queued, are well within the bound. Queueing is O(1) whatever the depth.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use prost::{Message, Name};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use super::Master;
use crate::mesos::json;
use crate::mesos::media::Encoding;
use crate::mesos::recordio::encode_record;
use crate::mesos::v1::executor;
use crate::mesos::v1::scheduler::Event;

/// A delay the master sets and its open streams read (the `/testbed`
/// stream latency fault); zero by default.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedDelay(Arc<AtomicU64>);

impl SharedDelay {
    /// Sets the delay (saturating at about 584 years).
    pub fn set(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.0.store(nanos, Ordering::Relaxed);
    }

    /// The delay now.
    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// What the body of a subscription yields next.
#[derive(Debug)]
pub(crate) enum StreamItem {
    /// One RecordIO record, sent as one HTTP chunk; with the time it was
    /// queued when the stream had a latency then (it goes out that latency,
    /// as it is when the record is due, after it was queued).
    Record(Bytes, Option<Instant>),
    /// Cut the connection without the terminating chunk (a network failure,
    /// or a master or agent that died).
    Abort,
}

/// The master's end of a streaming response.
#[derive(Debug, Clone)]
pub(crate) struct RecordSender {
    encoding: Encoding,
    tx: mpsc::UnboundedSender<StreamItem>,
    /// Bytes queued and not yet taken by the response body.
    queued: Arc<AtomicUsize>,
    /// Most bytes queued at once.
    limit: usize,
    /// Each record goes out this long after it is queued.
    latency: Option<SharedDelay>,
}

impl RecordSender {
    /// Encodes and queues `message`. Returns false when the stream is gone or
    /// its queue would exceed its byte limit (the caller treats the peer as
    /// disconnected).
    pub fn send<M: Message + Name>(&self, message: &M) -> bool {
        let payload = match self.encoding {
            Encoding::Json => json::to_vec(message),
            Encoding::Protobuf => message.encode_to_vec(),
        };
        let queued_at = self
            .latency
            .as_ref()
            .is_some_and(|l| !l.get().is_zero())
            .then(Instant::now);
        let record = encode_record(&payload);
        let size = record.len();
        if self.queued.fetch_add(size, Ordering::AcqRel) + size > self.limit {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            return false;
        }
        if self.tx.send(StreamItem::Record(record, queued_at)).is_err() {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Cuts the connection abruptly (after what is queued); dropping every
    /// sender ends the stream cleanly instead.
    pub fn abort(&self) {
        let _ = self.tx.send(StreamItem::Abort);
    }
}

/// The response body of a streaming call.
pub(crate) struct RecordStream {
    rx: mpsc::UnboundedReceiver<StreamItem>,
    queued: Arc<AtomicUsize>,
    on_close: Option<Box<dyn FnOnce() + Send>>,
    /// A record waiting for its due time (queued at + the latency). Records
    /// are stamped when queued, so a burst is delayed once, not once per
    /// record (a long link, not a slow one). The latency is read again
    /// while a record waits, so clearing the fault releases what it held.
    held: Option<(Bytes, Instant, Pin<Box<Sleep>>)>,
    /// The stream's latency fault, shared with the master.
    latency: Option<SharedDelay>,
}

/// How often a held record looks at the latency again (so a lowered or
/// cleared latency takes effect within this).
const LATENCY_RECHECK: Duration = Duration::from_millis(20);

/// A stream in `encoding` holding at most `limit_bytes` of records not yet
/// sent; `on_close` runs when the body is dropped.
pub(crate) fn record_stream(
    encoding: Encoding,
    limit_bytes: usize,
    on_close: impl FnOnce() + Send + 'static,
) -> (RecordSender, RecordStream) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (
        RecordSender {
            encoding,
            tx,
            queued: queued.clone(),
            limit: limit_bytes,
            latency: None,
        },
        RecordStream {
            rx,
            queued,
            on_close: Some(Box::new(on_close)),
            held: None,
            latency: None,
        },
    )
}

impl Stream for RecordStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.held.is_some() {
            return self.poll_held(cx);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(StreamItem::Record(b, queued_at))) => {
                // Taken from the queue: no longer counts against its bound.
                self.queued.fetch_sub(b.len(), Ordering::AcqRel);
                let Some(queued_at) = queued_at else {
                    return Poll::Ready(Some(Ok(b)));
                };
                self.held = Some((b, queued_at, Box::pin(tokio::time::sleep_until(queued_at))));
                self.poll_held(cx)
            }
            Poll::Ready(Some(StreamItem::Abort)) => {
                self.rx.close();
                Poll::Ready(Some(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "testbed: stream cut",
                ))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl RecordStream {
    /// The held record once it is due (queued at + the latency as it is
    /// now); until then it wakes at least every [`LATENCY_RECHECK`].
    fn poll_held(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, std::io::Error>>> {
        let delay = self
            .latency
            .as_ref()
            .map(SharedDelay::get)
            .unwrap_or_default();
        loop {
            let Some((_, queued_at, sleep)) = self.held.as_mut() else {
                return Poll::Pending;
            };
            let now = Instant::now();
            let due = queued_at
                .checked_add(delay)
                .unwrap_or(now + LATENCY_RECHECK);
            if now >= due {
                let (bytes, ..) = self.held.take().expect("checked above");
                return Poll::Ready(Some(Ok(bytes)));
            }
            sleep.as_mut().reset(due.min(now + LATENCY_RECHECK));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

impl Drop for RecordStream {
    fn drop(&mut self) {
        if let Some(on_close) = self.on_close.take() {
            on_close();
        }
    }
}

/// The master's end of one scheduler subscription.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    /// The `Mesos-Stream-Id` issued for this subscription.
    pub stream_id: String,
    sender: RecordSender,
}

impl Subscription {
    /// Queues `event`; false when the stream is gone or full.
    pub fn send(&self, event: &Event) -> bool {
        self.sender.send(event)
    }

    /// Cuts the connection abruptly.
    pub fn abort(&self) {
        self.sender.abort();
    }
}

/// Builds a scheduler subscription and the body that serves it (queueing at
/// most `queue_bytes`); the master hears of the body's end through
/// `stream_closed`. Every event goes out `latency` (read when it is queued)
/// after it was queued.
pub(crate) fn open(
    stream_id: String,
    encoding: Encoding,
    queue_bytes: usize,
    latency: SharedDelay,
    master: Weak<Mutex<Master>>,
    framework_id: String,
) -> (Subscription, RecordStream) {
    let closed_id = stream_id.clone();
    let (mut sender, mut body) = record_stream(encoding, queue_bytes, move || {
        if let Some(master) = master.upgrade() {
            let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
            master.stream_closed(&framework_id, &closed_id);
        }
    });
    sender.latency = Some(latency.clone());
    body.latency = Some(latency);
    (Subscription { stream_id, sender }, body)
}

/// The master's end of an executor's subscription.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorStream {
    /// Identifies this subscription among the executor's successive ones.
    pub token: u64,
    sender: RecordSender,
}

impl ExecutorStream {
    /// The master's end of subscription `token`, sending through `sender`.
    pub fn new(token: u64, sender: RecordSender) -> Self {
        ExecutorStream { token, sender }
    }

    /// Encodes and queues `event`; false when the stream is gone or full.
    pub fn send(&self, event: &executor::Event) -> bool {
        self.sender.send(event)
    }

    /// Cuts the connection without the terminating chunk (an agent that died).
    pub fn abort(&self) {
        self.sender.abort();
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::mesos::v1::scheduler::event;

    #[tokio::test]
    async fn the_queue_is_bounded_by_bytes_and_drains() {
        let heartbeat = Event {
            r#type: Some(event::Type::Heartbeat as i32),
            ..Default::default()
        };
        let size = encode_record(&heartbeat.encode_to_vec()).len();
        let (sender, mut body) = record_stream(Encoding::Protobuf, 3 * size, || {});
        assert!(sender.send(&heartbeat));
        assert!(sender.send(&heartbeat));
        assert!(sender.send(&heartbeat));
        assert!(
            !sender.send(&heartbeat),
            "a fourth record exceeds the bound"
        );
        let first = body.next().await.unwrap().unwrap();
        assert_eq!(first.len(), size);
        assert!(sender.send(&heartbeat), "room again once one is taken");
        assert!(!sender.send(&heartbeat));
        // An abort passes even when the queue is full, after what is queued.
        sender.abort();
        for _ in 0..3 {
            assert!(body.next().await.unwrap().is_ok());
        }
        assert!(body.next().await.unwrap().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_latency_holds_records_and_clearing_it_releases_them() {
        let heartbeat = Event {
            r#type: Some(event::Type::Heartbeat as i32),
            ..Default::default()
        };
        let latency = SharedDelay::default();
        let (mut sender, mut body) = record_stream(Encoding::Protobuf, 1 << 20, || {});
        sender.latency = Some(latency.clone());
        body.latency = Some(latency.clone());
        latency.set(Duration::from_secs(90));
        let queued = Instant::now();
        assert!(sender.send(&heartbeat));
        assert!(sender.send(&heartbeat));
        let held = tokio::time::timeout(Duration::from_secs(5), body.next()).await;
        assert!(held.is_err(), "held by the 90 s latency");
        latency.set(Duration::ZERO);
        for _ in 0..2 {
            assert!(body.next().await.unwrap().is_ok());
        }
        let released = queued.elapsed();
        assert!(
            released < Duration::from_secs(5) + 2 * LATENCY_RECHECK,
            "released {released:?} after queueing, not 90 s"
        );
        // A latency set again holds new records, from when they are queued.
        latency.set(Duration::from_secs(2));
        let queued = Instant::now();
        assert!(sender.send(&heartbeat));
        assert!(body.next().await.unwrap().is_ok());
        assert!(queued.elapsed() >= Duration::from_secs(2));
    }
}
