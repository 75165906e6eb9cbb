//! The open connections as the connection cap sees them: which are serving
//! a request, and since when the others have been idle, so that at the cap
//! the longest idle one can make room for a new one.
//!
//! A connection is *busy* from the moment a request's headers have been
//! read (hyper calls the service) until its response body has ended or been
//! dropped; otherwise it is idle: just accepted and still sending its
//! headers (or nothing), in a TLS handshake, or between keep-alive
//! requests. Closing an idle connection loses no answer: its client either
//! never finished a request or got every answer it asked for (and an HTTP
//! client retries a request on a keep-alive connection the server closed,
//! RFC 9112 §9.3.1).
//!
//! A *live stream* (a response that stays open: server-sent events) keeps
//! its connection busy for as long as the client listens, so streams may
//! hold only a share of the connections ([`Connections::stream_slot`]):
//! the rest stay for requests that end, `/healthz` among them.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The registry of open connections, shared by the accept loop and the
/// connections' tasks.
#[derive(Clone)]
pub(super) struct Connections {
    open: Arc<Mutex<Registry>>,
    /// One permit per live stream that may be open at once.
    streams: Arc<Semaphore>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    by_id: HashMap<u64, Arc<Connection>>,
}

/// One open connection.
pub(super) struct Connection {
    id: u64,
    /// Requests whose response has not ended.
    busy: AtomicUsize,
    /// When it was accepted or its last response ended.
    idle_since: Mutex<Instant>,
    /// Cancelled to close it.
    cut: CancellationToken,
}

impl Connections {
    /// No connection open yet; at most `max_streams` live streams at once.
    pub(super) fn new(max_streams: usize) -> Connections {
        Connections {
            open: Arc::default(),
            streams: Arc::new(Semaphore::new(max_streams)),
        }
    }

    /// A place for one more live stream, held until its response ends
    /// ([`Busy::until_end_of`]); `None` when every place is taken.
    pub(super) fn stream_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.streams.clone().try_acquire_owned().ok()
    }

    /// Registers a connection just accepted (idle from now).
    pub(super) fn open(&self) -> Arc<Connection> {
        let mut registry = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        registry.next_id += 1;
        let conn = Arc::new(Connection {
            id: registry.next_id,
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            cut: CancellationToken::new(),
        });
        registry.by_id.insert(conn.id, conn.clone());
        conn
    }

    /// Forgets a connection that ended.
    pub(super) fn close(&self, conn: &Connection) {
        let mut registry = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        registry.by_id.remove(&conn.id);
    }

    /// Closes the connection idle the longest (not one already being
    /// closed); false when every open connection is busy.
    pub(super) fn cut_longest_idle(&self) -> bool {
        let registry = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let longest = registry
            .by_id
            .values()
            .filter(|c| !c.cut.is_cancelled() && c.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|c| *c.idle_since.lock().unwrap_or_else(PoisonError::into_inner));
        match longest {
            Some(conn) => {
                conn.cut.cancel();
                true
            }
            None => false,
        }
    }

    /// Open connections (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().unwrap().by_id.len()
    }
}

impl Connection {
    /// Marks the connection busy until the returned guard is dropped.
    pub(super) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Resolves when the connection is to be closed.
    pub(super) async fn cut_off(&self) {
        self.cut.cancelled().await;
    }
}

/// A request being served on a connection; dropping it ends it.
pub(super) struct Busy(Arc<Connection>);

impl Busy {
    /// `body`, which keeps the connection busy (and, for a live stream,
    /// its `stream` slot taken) until it has been sent or dropped.
    pub(super) fn until_end_of(self, body: Body, stream: Option<OwnedSemaphorePermit>) -> Body {
        Body::new(Tracked {
            body,
            _busy: self,
            _stream: stream,
        })
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self
            .0
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body holding its connection's [`Busy`] guard (and a live
/// stream's slot).
struct Tracked {
    body: Body,
    _busy: Busy,
    _stream: Option<OwnedSemaphorePermit>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_is_cut_never_a_busy_one() {
        let connections = Connections::new(1);
        let first = connections.open();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = connections.open();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let third = connections.open();
        // The oldest is serving a request: the next oldest idle one goes.
        let busy = first.busy();
        assert!(connections.cut_longest_idle());
        assert!(!first.cut.is_cancelled() && second.cut.is_cancelled());
        assert!(!third.cut.is_cancelled());
        // One already being closed is not counted again.
        assert!(connections.cut_longest_idle());
        assert!(third.cut.is_cancelled());
        assert!(!connections.cut_longest_idle(), "only a busy one is left");
        // Its response ended: idle again, so it can go.
        let body = busy.until_end_of(Body::from("done"), None);
        assert!(!connections.cut_longest_idle());
        drop(body);
        assert!(connections.cut_longest_idle());
        assert!(first.cut.is_cancelled());
        for conn in [&first, &second, &third] {
            connections.close(conn);
        }
        assert_eq!(connections.len(), 0);
    }

    #[test]
    fn a_stream_slot_is_held_until_the_stream_ends() {
        let connections = Connections::new(1);
        let conn = connections.open();
        let slot = connections.stream_slot().expect("one place");
        assert!(
            connections.stream_slot().is_none(),
            "the only place is taken"
        );
        let body = conn.busy().until_end_of(Body::from("event"), Some(slot));
        assert!(connections.stream_slot().is_none());
        drop(body);
        assert!(connections.stream_slot().is_some(), "freed with the stream");
    }
}
