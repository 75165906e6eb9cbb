//! [`send_deadline`]: a connection whose writes fail once one has waited
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
//!
//! The timer is `tokio-io-timeout`'s write timeout, which does exactly
//! that (the count starts when a write, flush or shutdown waits and ends
//! with any of them making progress; vectored writes pass through). The
//! tests below pin the two halves of the rule on a paused clock.

use std::pin::Pin;
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio_io_timeout::TimeoutWriter;

/// A connection with a send deadline: `inner`, whose writes may wait for
/// the client at most `timeout` before they fail with
/// [`TimedOut`](std::io::ErrorKind::TimedOut). Reads pass through
/// untimed. Pinned on the heap because the timer is stored inline, and
/// hyper and rustls take `Unpin` streams.
pub(super) fn send_deadline<S: AsyncWrite>(
    inner: S,
    timeout: Duration,
) -> Pin<Box<TimeoutWriter<S>>> {
    let mut conn = TimeoutWriter::new(inner);
    conn.set_timeout(Some(timeout));
    Box::pin(conn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_takes_fails_after_the_timeout() {
        // A pipe with room for 4 bytes whose other end is never read.
        let (near, _far) = tokio::io::duplex(4);
        let mut conn = send_deadline(near, Duration::from_secs(5));
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
        let mut conn = send_deadline(near, Duration::from_secs(5));
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

    #[tokio::test]
    async fn vectored_writes_stay_vectored() {
        // hyper writes a response's head and body chunks in one vectored
        // write when the stream supports it, instead of copying the body
        // into its buffer.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        assert!(stream.is_write_vectored());
        assert!(send_deadline(stream, Duration::from_secs(5)).is_write_vectored());
    }
}
