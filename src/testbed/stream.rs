//! A subscription's event stream: the master pushes encoded RecordIO records
//! into a bounded queue; the HTTP response body drains it, one record per
//! chunk as a real master sends them (mesos-notes §12, "One record per chunk").
//! When the body is dropped — the scheduler hung up — the master is told, so
//! it can mark the framework disconnected (master.cpp `Master::exited`).

use std::pin::Pin;
use std::sync::{Mutex, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use prost::Message;
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
    /// or a master that died).
    Abort,
}

/// The master's end of one subscription.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    /// The `Mesos-Stream-Id` issued for this subscription.
    pub stream_id: String,
    /// The encoding chosen from the SUBSCRIBE's `Accept` header.
    pub encoding: Encoding,
    tx: mpsc::Sender<StreamItem>,
}

impl Subscription {
    /// Encodes and queues `event`. Returns false when the stream is gone or its
    /// queue is full (the caller treats the scheduler as disconnected).
    pub fn send(&self, event: &Event) -> bool {
        let payload = match self.encoding {
            Encoding::Json => json::to_vec(event),
            Encoding::Protobuf => event.encode_to_vec(),
        };
        self.tx
            .try_send(StreamItem::Record(encode_record(&payload)))
            .is_ok()
    }

    /// Cuts the connection abruptly. The master forgets the subscription after
    /// calling this; dropping the last sender ends a clean stream instead.
    pub fn abort(&self) {
        let _ = self.tx.try_send(StreamItem::Abort);
    }
}

/// Builds a subscription and the body stream that serves it. `closed` is
/// called with the stream ID once the body is dropped.
pub(crate) fn open(
    stream_id: String,
    encoding: Encoding,
    queue_limit: usize,
    master: Weak<Mutex<Master>>,
    framework_id: String,
) -> (Subscription, EventStream) {
    let (tx, rx) = mpsc::channel(queue_limit.max(1));
    let body = EventStream {
        rx,
        _guard: DisconnectGuard {
            master,
            framework_id,
            stream_id: stream_id.clone(),
        },
    };
    (
        Subscription {
            stream_id,
            encoding,
            tx,
        },
        body,
    )
}

/// The response body of a SUBSCRIBE.
pub(crate) struct EventStream {
    rx: mpsc::Receiver<StreamItem>,
    _guard: DisconnectGuard,
}

impl Stream for EventStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(StreamItem::Record(b))) => Poll::Ready(Some(Ok(b))),
            Poll::Ready(Some(StreamItem::Abort)) => {
                self.rx.close();
                Poll::Ready(Some(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "testbed: subscription cut",
                ))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

struct DisconnectGuard {
    master: Weak<Mutex<Master>>,
    framework_id: String,
    stream_id: String,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if let Some(master) = self.master.upgrade() {
            let mut master = master.lock().unwrap_or_else(|p| p.into_inner());
            master.stream_closed(&self.framework_id, &self.stream_id);
        }
    }
}
