//! A ZooKeeper proxy that holds write requests: a slow disk or a busy
//! quorum, as a client sees it, while its session stays healthy.
//!
//! It reads the client's requests as ZooKeeper frames (a 4-byte big-endian
//! length, then the request header `xid`, `type`; the first frame of a
//! connection is the session handshake and passes as it is). While a hold
//! is set ([`ZkWriteHold::hold`]), a write request — create, delete,
//! setData, setACL, check, multi, create2/container/TTL, reconcile-config —
//! reaches the server that much later, and the requests behind it wait
//! behind it (ZooKeeper answers in request order, and so must the proxy).
//! Pings (`xid` −2) pass at once, so the session does not expire. Answers
//! flow back unchanged. Protocol: `zookeeper.jute` and
//! `ClientCnxn.java` in apache/zookeeper.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Request types that write (`ZooDefs.OpCode`).
const WRITES: [i32; 11] = [1, 2, 5, 7, 13, 14, 15, 16, 19, 20, 21];
/// The ping's xid.
const PING_XID: i32 = -2;
/// Largest frame forwarded (ZooKeeper's default `jute.maxbuffer` is 1 MiB).
const MAX_FRAME: usize = 4 << 20;

/// A loopback proxy to one ZooKeeper server that can hold writes.
pub struct ZkWriteHold {
    addr: SocketAddr,
    hold: Arc<watch::Sender<Duration>>,
    /// Write requests held so far (stamped while a hold was set).
    held: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
}

impl ZkWriteHold {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> ZkWriteHold {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let hold = Arc::new(watch::Sender::new(Duration::ZERO));
        let held = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn({
            let hold = hold.clone();
            let held = held.clone();
            async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    tokio::spawn(serve(client, upstream, hold.subscribe(), held.clone()));
                }
            }
        });
        ZkWriteHold {
            addr,
            hold,
            held,
            accept,
        }
    }

    /// `host:port` of the proxy for a ZooKeeper connect string.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Holds each write request this long from now on (zero: none).
    pub fn hold(&self, by: Duration) {
        self.hold.send_replace(by);
    }

    /// How many write requests have been held so far.
    pub fn held_writes(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Waits until more than `before` write requests have been held (a
    /// write is on its way and stuck); panics after `within`.
    pub async fn wait_held_write(&self, before: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.held_writes() <= before {
            assert!(Instant::now() < deadline, "no write held within {within:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for ZkWriteHold {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    hold: watch::Receiver<Duration>,
    held: Arc<AtomicUsize>,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let back = async move {
        let mut client_write = client_write;
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let read = read_frames(client_read, tx, hold, held);
    let write = write_frames(&mut server_write, rx);
    tokio::select! {
        _ = back => {}
        _ = async { tokio::join!(read, write) } => {}
    }
}

/// Reads the client's frames and stamps each with when it may go.
async fn read_frames(
    mut from: OwnedReadHalf,
    to: mpsc::UnboundedSender<(Option<Instant>, Vec<u8>)>,
    hold: watch::Receiver<Duration>,
    held: Arc<AtomicUsize>,
) {
    let mut first = true;
    let mut last_due = Instant::now();
    loop {
        let mut len = [0u8; 4];
        if from.read_exact(&mut len).await.is_err() {
            return;
        }
        let n = i32::from_be_bytes(len);
        let Ok(n) = usize::try_from(n) else { return };
        if n > MAX_FRAME {
            return;
        }
        let mut frame = len.to_vec();
        frame.resize(4 + n, 0);
        if from.read_exact(&mut frame[4..]).await.is_err() {
            return;
        }
        let header = |at: usize| {
            frame
                .get(4 + at..8 + at)
                .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (xid, kind) = (header(0), header(4));
        let due = if first {
            first = false;
            Some(Instant::now())
        } else if xid == Some(PING_XID) {
            // Pings overtake held requests: the session stays alive.
            None
        } else {
            let mut due = Instant::now().max(last_due);
            let by = *hold.borrow();
            if kind.is_some_and(|k| WRITES.contains(&k)) && !by.is_zero() {
                due = due.max(Instant::now() + by);
                held.fetch_add(1, Ordering::SeqCst);
            }
            last_due = due;
            Some(due)
        };
        if to.send((due, frame)).is_err() {
            return;
        }
    }
}

/// Writes frames to the server when due, in order; pings at once.
async fn write_frames(
    to: &mut OwnedWriteHalf,
    mut from: mpsc::UnboundedReceiver<(Option<Instant>, Vec<u8>)>,
) {
    let mut held: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    loop {
        let next = held.front().map(|(due, _)| *due);
        tokio::select! {
            frame = from.recv() => match frame {
                None => return,
                Some((None, ping)) => {
                    if to.write_all(&ping).await.is_err() {
                        return;
                    }
                }
                Some((Some(due), frame)) => held.push_back((due, frame)),
            },
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let (_, frame) = held.pop_front().expect("a held frame");
                if to.write_all(&frame).await.is_err() {
                    return;
                }
            }
        }
    }
}
