//! The accept loop behind [`serve`](super::serve): HTTP/1.1 connections
//! served by hyper, with
//! - a header read timeout ([`WebConfig::header_read_timeout`]): a client
//!   that opens a connection and never finishes its request headers (or
//!   idles on a keep-alive connection) is cut off, instead of holding a
//!   file descriptor forever; responses being written (live streams) are
//!   not affected;
//! - a cap on open connections ([`WebConfig::max_connections`]): at the
//!   cap, a new connection takes the place of the connection that has been
//!   idle longest (one that sent nothing yet, or whose last response ended:
//!   half-open sockets, slow TLS handshakes, idle keep-alives), which is
//!   closed; only when every connection is serving a request (live streams)
//!   does it wait in the listen backlog until one ends. So sockets that never
//!   finish a request cannot lock out `/healthz` (a slowloris attack) until
//!   the header read timeout frees them;
//! - live streams (server-sent events: `/api/v1/stream`,
//!   `/api/v1/events/stream`, `/v2/events`) on at most three quarters of
//!   the connections ([`max_streams`]): past that a new stream is answered
//!   503 with `Retry-After`, so the last quarter always serves requests
//!   that end, `/healthz` among them, however many streams anyone opens;
//!   streams already open are never closed for new ones;
//! - a send timeout ([`WebConfig::send_timeout`], [`stall`]): a client
//!   that stops reading a response is cut off once a write has waited that
//!   long, so it cannot keep its connection busy forever either;
//! - a graceful shutdown: on the signal, stop accepting, close idle
//!   connections, let requests in flight finish;
//! - the client's address in each request (`ConnectInfo<SocketAddr>`, read
//!   as [`Peer`](super::auth::Peer));
//! - with TLS ([`super::tls`]), the handshake first, bounded by the header
//!   read timeout too;
//! - a problem document in hyper's own refusals of a request head (414 for
//!   a URI past its 64 KiB, 431, 400), which hyper sends with an empty
//!   body ([`refusals`]).
//!
//! (`axum::serve` offers neither the timeout nor the cap.)

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::WebConfig;
use super::error::AppError;
use super::tls::TlsState;
use connections::Connections;
use refusals::Refusals;
use stall::send_deadline;

mod connections;
mod refusals;
mod stall;

/// The live streams open at once on a server of `max_connections`
/// connections: all but a quarter of them (at least one kept for other
/// requests when there are two or more, and at least one stream).
pub(crate) fn max_streams(max_connections: usize) -> usize {
    let max_connections = max_connections.max(1);
    (max_connections - (max_connections / 4).max(1)).max(1)
}

/// Whether `response` is a live stream (server-sent events).
fn is_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The answer to a live stream asked for while every stream place is
/// taken: 503, to retry later (an `EventSource` does by itself).
fn too_many_streams(limit: usize) -> Response {
    let mut e = AppError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too-many-streams",
        "Too many live streams",
        format!(
            "{limit} live streams are open, as many as this replica serves at once (the other \
             connections are kept for requests that end); retry later"
        ),
    );
    e.retry_after = Some(5);
    e.into_response()
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits for
/// the open connections to finish (see the module doc).
pub(crate) async fn run(
    listener: TcpListener,
    app: Router,
    config: &WebConfig,
    tls: Option<TlsState>,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout);
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let stream_limit = max_streams(config.max_connections);
    let connections = Connections::new(stream_limit);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if connections.cut_longest_idle() {
                    tracing::debug!(%peer, "at the connection cap: the longest idle connection was closed for a new one");
                }
                tokio::select! {
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        let conn = connections.open();
        // Each request marks the connection busy until its response body
        // ends; the client's address goes in for the wrong-token throttle
        // (`auth::Peer`).
        let service = {
            let (app, conn, connections) = (app.clone(), conn.clone(), connections.clone());
            hyper::service::service_fn(
                move |mut request: axum::http::Request<hyper::body::Incoming>| {
                    let busy = conn.busy();
                    request.extensions_mut().insert(ConnectInfo(peer));
                    let (app, connections) = (app.clone(), connections.clone());
                    async move {
                        let mut response = app.oneshot(request).await?;
                        let mut slot = None;
                        if is_stream(&response) {
                            slot = connections.stream_slot();
                            if slot.is_none() {
                                tracing::debug!(%peer, "a live stream was refused: every stream place is taken");
                                response = too_many_streams(stream_limit);
                            }
                        }
                        Ok::<_, std::convert::Infallible>(
                            response.map(|body| busy.until_end_of(body, slot)),
                        )
                    }
                },
            )
        };
        let stream = send_deadline(stream, config.send_timeout);
        match &tls {
            None => {
                let connection = graceful
                    .watch(builder.serve_connection(TokioIo::new(Refusals::new(stream)), service));
                let connections = connections.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        ended = connection => if let Err(e) = ended {
                            tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
                        },
                        () = conn.cut_off() => {}
                    }
                    connections.close(&conn);
                    drop(slot);
                });
            }
            Some(tls) => {
                let acceptor = tls.acceptor();
                let builder = builder.clone();
                let handshake_timeout = config.header_read_timeout;
                let watcher = graceful.watcher();
                let connections = connections.clone();
                tokio::spawn(async move {
                    let served = async {
                        let stream =
                            match tokio::time::timeout(handshake_timeout, acceptor.accept(stream))
                                .await
                            {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(e)) => {
                                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    tracing::debug!(%peer, "TLS handshake timed out");
                                    return;
                                }
                            };
                        let connection = watcher.watch(
                            builder.serve_connection(TokioIo::new(Refusals::new(stream)), service),
                        );
                        if let Err(e) = connection.await {
                            tracing::debug!(%peer, error = %e, "HTTPS connection ended with an error");
                        }
                    };
                    tokio::select! {
                        () = served => {}
                        () = conn.cut_off() => {}
                    }
                    connections.close(&conn);
                    drop(slot);
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// After a failed `accept`: a connection that died in the backlog is
/// nothing; anything else (out of file descriptors, …) is logged and
/// waited out briefly instead of spinning.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %e, "accepting an HTTP connection failed; retrying in 1s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::max_streams;

    #[test]
    fn streams_leave_a_quarter_of_the_connections_to_other_requests() {
        assert_eq!(max_streams(512), 384);
        assert_eq!(max_streams(8), 6);
        assert_eq!(max_streams(4), 3);
        assert_eq!(max_streams(2), 1, "one kept for requests that end");
        // A cap of one (or none, read as one) still serves a stream.
        assert_eq!(max_streams(1), 1);
        assert_eq!(max_streams(0), 1);
    }
}
