//! Streaming responses (a scheduler's or an executor's subscription): the
//! master pushes encoded RecordIO records into a bounded queue; the HTTP
//! response body drains it, one record per chunk as a real master sends
//! them (`docs/mesos-protocol.md#capture-a-subscribe`). When the body is dropped
//! — the peer hung up — a callback tells the master, so it can mark the
//! framework disconnected (master.cpp `Master::exited`) or the executor gone.

use std::pin::Pin;
use std::sync::{Mutex, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use prost::{Message, Name};
use tokio::sync::mpsc;

use super::master::Master;
use crate::mesos::json;
use crate::mesos::media::Encoding;
use crate::mesos::recordio::encode_record;
use crate::mesos::v1::scheduler::Event;

/// What the body of a subscription yields next.
#[derive(Debug)]
pub(crate) enum StreamItem {
    /// One RecordIO record, sent as one HTTP chunk.
    Record(Bytes),
    /// Cut the connection without the terminating chunk (a network failure,
    /// or a master or agent that died).
    Abort,
}

/// The master's end of a streaming response.
#[derive(Debug, Clone)]
pub(crate) struct RecordSender {
    encoding: Encoding,
    tx: mpsc::Sender<StreamItem>,
}

impl RecordSender {
    /// Encodes and queues `message`. Returns false when the stream is gone or
    /// its queue is full (the caller treats the peer as disconnected).
    pub fn send<M: Message + Name>(&self, message: &M) -> bool {
        let payload = match self.encoding {
            Encoding::Json => json::to_vec(message),
            Encoding::Protobuf => message.encode_to_vec(),
        };
        self.tx
            .try_send(StreamItem::Record(encode_record(&payload)))
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
        RecordSender { encoding, tx },
        RecordStream {
            rx,
            on_close: Some(Box::new(on_close)),
        },
    )
}

impl Stream for RecordStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(StreamItem::Record(b))) => Poll::Ready(Some(Ok(b))),
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
/// hears of the body's end through `stream_closed`.
pub(crate) fn open(
    stream_id: String,
    encoding: Encoding,
    queue_limit: usize,
    master: Weak<Mutex<Master>>,
    framework_id: String,
) -> (Subscription, RecordStream) {
    let closed_id = stream_id.clone();
    let (sender, body) = record_stream(encoding, queue_limit, move || {
        if let Some(master) = master.upgrade() {
            let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
            master.stream_closed(&framework_id, &closed_id);
        }
    });
    (Subscription { stream_id, sender }, body)
}
