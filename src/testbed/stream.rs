//! Streaming responses (a scheduler's or an executor's subscription): the
//! master pushes encoded RecordIO records into a bounded queue; the HTTP
//! response body drains it, one record per chunk as a real master sends
//! them (`docs/mesos-protocol.md#capture-a-subscribe`). When the body is dropped
//! — the peer hung up — a callback tells the master, so it can mark the
//! framework disconnected (master.cpp `Master::exited`) or the executor gone.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use prost::{Message, Name};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use super::master::Master;
use crate::mesos::json;
use crate::mesos::media::Encoding;
use crate::mesos::recordio::encode_record;
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
    /// One RecordIO record, sent as one HTTP chunk no sooner than `due`
    /// (when the stream has a latency).
    Record(Bytes, Option<Instant>),
    /// Cut the connection without the terminating chunk (a network failure,
    /// or a master or agent that died).
    Abort,
}

/// The master's end of a streaming response.
#[derive(Debug, Clone)]
pub(crate) struct RecordSender {
    encoding: Encoding,
    tx: mpsc::Sender<StreamItem>,
    /// Each record goes out this long after it is queued.
    latency: Option<SharedDelay>,
}

impl RecordSender {
    /// Encodes and queues `message`. Returns false when the stream is gone or
    /// its queue is full (the caller treats the peer as disconnected).
    pub fn send<M: Message + Name>(&self, message: &M) -> bool {
        let payload = match self.encoding {
            Encoding::Json => json::to_vec(message),
            Encoding::Protobuf => message.encode_to_vec(),
        };
        let due = self
            .latency
            .as_ref()
            .map(SharedDelay::get)
            .filter(|d| !d.is_zero())
            .and_then(|d| Instant::now().checked_add(d));
        self.tx
            .try_send(StreamItem::Record(encode_record(&payload), due))
            .is_ok()
    }

    /// Cuts the connection abruptly; dropping every sender ends the stream
    /// cleanly instead.
    pub fn abort(&self) {
        let _ = self.tx.try_send(StreamItem::Abort);
    }
}

/// The response body of a streaming call.
pub(crate) struct RecordStream {
    rx: mpsc::Receiver<StreamItem>,
    on_close: Option<Box<dyn FnOnce() + Send>>,
    /// A record waiting for its due time. Records are stamped when queued,
    /// so a burst is delayed once, not once per record (a long link, not a
    /// slow one).
    held: Option<(Bytes, Pin<Box<Sleep>>)>,
}

/// A stream in `encoding` queueing at most `limit` records; `on_close` runs
/// when the body is dropped.
pub(crate) fn record_stream(
    encoding: Encoding,
    limit: usize,
    on_close: impl FnOnce() + Send + 'static,
) -> (RecordSender, RecordStream) {
    let (tx, rx) = mpsc::channel(limit.max(1));
    (
        RecordSender {
            encoding,
            tx,
            latency: None,
        },
        RecordStream {
            rx,
            on_close: Some(Box::new(on_close)),
            held: None,
        },
    )
}

impl Stream for RecordStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some((_, sleep)) = self.held.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let (bytes, _) = self.held.take().expect("checked above");
            return Poll::Ready(Some(Ok(bytes)));
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(StreamItem::Record(b, None))) => Poll::Ready(Some(Ok(b))),
            Poll::Ready(Some(StreamItem::Record(b, Some(due)))) => {
                let mut sleep = Box::pin(tokio::time::sleep_until(due));
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Ok(b)));
                }
                self.held = Some((b, sleep));
                Poll::Pending
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

/// Builds a scheduler subscription and the body that serves it; the master
/// hears of the body's end through `stream_closed`. Every event goes out
/// `latency` (read when it is queued) after it was queued.
pub(crate) fn open(
    stream_id: String,
    encoding: Encoding,
    queue_limit: usize,
    latency: SharedDelay,
    master: Weak<Mutex<Master>>,
    framework_id: String,
) -> (Subscription, RecordStream) {
    let closed_id = stream_id.clone();
    let (mut sender, body) = record_stream(encoding, queue_limit, move || {
        if let Some(master) = master.upgrade() {
            let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
            master.stream_closed(&framework_id, &closed_id);
        }
    });
    sender.latency = Some(latency);
    (Subscription { stream_id, sender }, body)
}
