//! [`SendDeadline`]: a connection whose writes fail once one has waited
//! longer than [`WebConfig::send_timeout`](crate::web::WebConfig::send_timeout)
//! for the client to take data.
//!
//! hyper bounds how long a client may take to *send* a request (the header
//! read timeout) but not how long it may take to *read* the answer: a
//! client that asks for a large response (the executor binary, the OpenAPI
//! document) and never reads keeps its connection busy forever once the
//! socket buffers are full, and busy connections are never closed to make
//! room at the cap. So a write that makes no progress for the timeout
//! fails the connection, which hyper then closes. A slow client that
//! keeps reading, however slowly, is not affected: each write that goes
//! through starts the count again.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `S` with a deadline on each stalled write (see the module doc).
pub(super) struct SendDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Running while a write waits for the client.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> SendDeadline<S> {
    /// `inner`, whose writes may wait for the client at most `timeout`.
    pub(super) fn new(inner: S, timeout: Duration) -> SendDeadline<S> {
        SendDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// The outcome of a write-side poll: progress ends the stall; waiting
    /// starts it (or goes on with it) and fails once it lasted `timeout`.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took no data for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SendDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SendDeadline<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_takes_fails_after_the_timeout() {
        // A pipe with room for 4 bytes whose other end is never read.
        let (near, _far) = tokio::io::duplex(4);
        let mut conn = SendDeadline::new(near, Duration::from_secs(5));
        conn.write_all(b"full").await.unwrap();
        let started = tokio::time::Instant::now();
        let err = conn.write_all(b"more").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_never_cut() {
        use tokio::io::AsyncReadExt;
        let (near, mut far) = tokio::io::duplex(4);
        let mut conn = SendDeadline::new(near, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut byte = [0u8; 1];
            // One byte every 3 s: each stall is shorter than the timeout,
            // though the whole write takes far longer.
            while far.read(&mut byte).await.unwrap() == 1 {
                got.push(byte[0]);
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            got
        });
        conn.write_all(b"twelve bytes").await.unwrap();
        conn.shutdown().await.unwrap();
        drop(conn);
        assert_eq!(reader.await.unwrap(), b"twelve bytes");
    }
}
