//! A TCP proxy on loopback that can cut or slow the link between a client
//! and a server, to test what a client does when its network fails.
//!
//! Point the client at [`ChaosProxy::addr`] instead of the server. While the
//! link is up, bytes flow both ways unchanged. [`ChaosProxy::break_link`]
//! closes every open connection at once and *blackholes* new ones: they are
//! accepted but nothing is forwarded and they are closed on
//! [`ChaosProxy::restore`], so a client sees what a partition looks like
//! (connects that never complete a handshake) rather than a quick refusal.
//! Pattern borrowed from crates.io's `tests/util/chaosproxy.rs`.
//!
//! [`ChaosProxy::set_latency`] delays each direction by a fixed time, on open
//! connections too: every chunk read is written that long after it was read,
//! and chunks read meanwhile are in flight at the same time (a long link, not
//! a slow one: the delay does not add up along a stream of chunks). A round
//! trip through the proxy takes the sum of both directions.
//!
//! When the latency starts matters to a client that pings only after a
//! quiet spell: [`ChaosProxy::set_symmetric_latency_when_quiet`] switches it
//! on right after the link has carried nothing either way for a while, so
//! the client's first answer under latency comes that much later than its
//! last one (the worst moment for it, and a repeatable one).
//!
//! Needs a tokio runtime; dropping the proxy stops it and closes everything.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Chunks in flight per direction and connection before the reader waits.
const IN_FLIGHT: usize = 1024;

/// The one-way delays of the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Client to server.
    pub to_server: Duration,
    /// Server to client.
    pub to_client: Duration,
}

/// A loopback TCP proxy to one upstream address that can break, restore and
/// slow down the link.
pub struct ChaosProxy {
    addr: SocketAddr,
    link_up: Arc<watch::Sender<bool>>,
    latency: Arc<watch::Sender<Latency>>,
    /// When a chunk last passed either way, on any connection.
    last_chunk: Arc<Mutex<Instant>>,
    accept: JoinHandle<()>,
}

impl ChaosProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> ChaosProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let link_up = Arc::new(watch::Sender::new(true));
        let latency = Arc::new(watch::Sender::new(Latency::default()));
        let last_chunk = Arc::new(Mutex::new(Instant::now()));
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            link_up.clone(),
            latency.clone(),
            last_chunk.clone(),
        ));
        ChaosProxy {
            addr,
            link_up,
            latency,
            last_chunk,
            accept,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port` of the proxy for a ZooKeeper connect string.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Cuts the link: closes all open connections and blackholes new ones
    /// until [`ChaosProxy::restore`].
    pub fn break_link(&self) {
        self.link_up.send_replace(false);
    }

    /// Restores the link: new connections are forwarded again; connections
    /// accepted while the link was down are closed so the client retries.
    pub fn restore(&self) {
        self.link_up.send_replace(true);
    }

    /// Whether the link is currently up.
    pub fn is_up(&self) -> bool {
        *self.link_up.borrow()
    }

    /// Delays bytes by `to_server` on their way to the server and by
    /// `to_client` on their way back, from now on and on open connections
    /// too. Zero for both (the start) forwards at once.
    pub fn set_latency(&self, to_server: Duration, to_client: Duration) {
        self.latency.send_replace(Latency {
            to_server,
            to_client,
        });
    }

    /// The same delay both ways: a round trip takes twice `one_way`.
    pub fn set_symmetric_latency(&self, one_way: Duration) {
        self.set_latency(one_way, one_way);
    }

    /// Like [`ChaosProxy::set_symmetric_latency`], but from the end of the
    /// first spell of `quiet` without a chunk either way, or after
    /// `at_most` if none comes. Returns how long it waited.
    pub async fn set_symmetric_latency_when_quiet(
        &self,
        one_way: Duration,
        quiet: Duration,
        at_most: Duration,
    ) -> Duration {
        let start = Instant::now();
        loop {
            let last = *self.last_chunk.lock().unwrap();
            let now = Instant::now();
            if now >= last + quiet || now >= start + at_most {
                break;
            }
            tokio::time::sleep_until((last + quiet).min(start + at_most)).await;
        }
        self.set_symmetric_latency(one_way);
        start.elapsed()
    }

    /// The current delays.
    pub fn latency(&self) -> Latency {
        *self.latency.borrow()
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Connection tasks stop when they see the link go down.
        self.link_up.send_replace(false);
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    link_up: Arc<watch::Sender<bool>>,
    latency: Arc<watch::Sender<Latency>>,
    last_chunk: Arc<Mutex<Instant>>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        tokio::spawn(serve(
            client,
            upstream,
            link_up.subscribe(),
            latency.subscribe(),
            last_chunk.clone(),
        ));
    }
}

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    mut link_up: watch::Receiver<bool>,
    latency: watch::Receiver<Latency>,
    last_chunk: Arc<Mutex<Instant>>,
) {
    if !*link_up.borrow_and_update() {
        // Blackhole: hold the connection silently until the link is restored
        // (or the proxy dropped), then close it.
        let _ = link_up.wait_for(|up| *up).await;
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let to_server = pipe(
        client_read,
        server_write,
        latency.clone(),
        |l| l.to_server,
        last_chunk.clone(),
    );
    let to_client = pipe(
        server_read,
        client_write,
        latency,
        |l| l.to_client,
        last_chunk,
    );
    tokio::select! {
        _ = async { tokio::join!(to_server, to_client) } => {}
        _ = link_up.wait_for(|up| !*up) => {}
    }
    // Dropping both halves of both streams closes them.
}

/// Forwards one direction: each chunk is written `delay` after it was read;
/// end of stream is passed on (as a write shutdown) after the last chunk.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    latency: watch::Receiver<Latency>,
    delay: fn(&Latency) -> Duration,
    last_chunk: Arc<Mutex<Instant>>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let read = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let now = Instant::now();
                    *last_chunk.lock().unwrap() = now;
                    let due = now + delay(&latency.borrow());
                    if tx.send((due, buf[..n].to_vec())).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `tx` tells the writer the stream ended.
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}
