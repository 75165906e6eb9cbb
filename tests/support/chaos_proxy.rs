//! A TCP proxy on loopback that can cut the link between a client and a
//! server, to test what a client does when its network fails.
//!
//! Point the client at [`ChaosProxy::addr`] instead of the server. While the
//! link is up, bytes flow both ways unchanged. [`ChaosProxy::break_link`]
//! closes every open connection at once and *blackholes* new ones: they are
//! accepted but nothing is forwarded and they are closed on
//! [`ChaosProxy::restore`], so a client sees what a partition looks like
//! (connects that never complete a handshake) rather than a quick refusal.
//! Pattern borrowed from crates.io's `tests/util/chaosproxy.rs`.
//!
//! Needs a tokio runtime; dropping the proxy stops it and closes everything.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A loopback TCP proxy to one upstream address that can break and restore
/// the link.
pub struct ChaosProxy {
    addr: SocketAddr,
    link_up: Arc<watch::Sender<bool>>,
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
        let accept = tokio::spawn(accept_loop(listener, upstream, link_up.clone()));
        ChaosProxy {
            addr,
            link_up,
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
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        tokio::spawn(serve(client, upstream, link_up.subscribe()));
    }
}

async fn serve(mut client: TcpStream, upstream: SocketAddr, mut link_up: watch::Receiver<bool>) {
    if !*link_up.borrow_and_update() {
        // Blackhole: hold the connection silently until the link is restored
        // (or the proxy dropped), then close it.
        let _ = link_up.wait_for(|up| *up).await;
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = link_up.wait_for(|up| !*up) => {}
    }
    // Dropping both streams closes them.
}
