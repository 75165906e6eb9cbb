//! A real, standalone ZooKeeper server for tests.
//!
//! [`ZkServer::start`] runs Debian's `zookeeper` package (`ZooKeeperServerMain`,
//! Java 17) on a free loopback port with its own temporary data directory,
//! waits until it serves (`srvr` answers with its version; `ruok` says
//! `imok` too early), and kills it on drop.
//! The configuration is tuned for fast tests: `tickTime=500` and
//! `minSessionTimeout=1000`, so clients may negotiate session timeouts down
//! to 1 s (the server default would clamp anything below 4 s). The admin
//! server is disabled (it would take port 8080) and the four-letter-word
//! whitelist allows `ruok`, `srvr`, `mntr`, `cons` and `wchp` (watches by path).
//!
//! Helpers for the failure modes the coordination layer must survive:
//! - [`ZkServer::restart`]: stop and start again on the same port and data
//!   directory (sessions persist if the restart is quicker than their timeout);
//! - [`ZkServer::stop`] / [`ZkServer::start_again`]: the same in two steps;
//! - [`ZkServer::terminate`]: a clean stop (SIGTERM) instead of a crash;
//! - [`expire_session`]: make the server end a live session now;
//! - the [`super::chaos_proxy::ChaosProxy`] to cut one client off.
//!
//! The server log is kept in the data directory (`zk.log`) and printed to
//! stderr when a server fails to start.
//!
//! [`super::zookeeper_ensemble`] runs three of these as one ensemble
//! (`QuorumPeerMain`) through [`ZkServer::configure`], [`ZkServer::spawn`]
//! and [`ZkServer::wait_ready`].

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::chaos_proxy::ChaosProxy;
use zookeeper_client as zk;

/// How long a cold server may take to serve (measured: 0.3–1.3 s).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where Debian puts the server jar; the first one that exists is used. Its
/// manifest `Class-Path` names every dependency jar, so one entry is enough.
const JAR_CANDIDATES: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/zookeeper/zookeeper.jar",
    "/usr/share/zookeeper/lib/zookeeper.jar",
];

/// Without an slf4j binding the server logs nothing at all.
const SLF4J_CANDIDATES: &[&str] = &[
    "/usr/share/java/slf4j-simple.jar",
    "/usr/share/zookeeper/lib/slf4j-simple.jar",
];

/// The JVM flags of a test server: a small heap, one GC thread, the quick
/// JIT only (starts fast, fits many servers on one machine).
const TEST_JVM: &[&str] = &["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"];

/// The JVM flags of [`ZkServer::start_production`]: the heap ZooKeeper's
/// own start script gives a server (`bin/zkEnv.sh` in apache/zookeeper:
/// `ZK_SERVER_HEAP` defaults to 1000 MB), the JVM's defaults otherwise.
/// At 100,000 task records (about 64 MB of data) a 256 MB heap spends its
/// time in full collections, which pause the server past session timeouts.
const PRODUCTION_JVM: &[&str] = &["-Xmx1000m"];

/// The class a standalone server runs.
const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// A ZooKeeper server process on `127.0.0.1`, killed on drop: standalone,
/// or one member of a [`super::zookeeper_ensemble::ZkEnsemble`].
pub struct ZkServer {
    dir: TempDir,
    port: u16,
    child: Option<Child>,
    /// The Java class to run: standalone, or a quorum peer.
    main_class: &'static str,
    /// The JVM's flags ([`TEST_JVM`] unless a benchmark asks for more).
    jvm: &'static [&'static str],
}

impl ZkServer {
    /// Starts a standalone server on a free loopback port and waits until
    /// it serves.
    ///
    /// Panics (this is test support) when Java or the ZooKeeper jar is missing
    /// or the server does not answer within 30 s; the message says which.
    pub fn start() -> ZkServer {
        ZkServer::start_with("")
    }

    /// Like [`ZkServer::start`], with `extra` (whole `zoo.cfg` lines) after
    /// the fast-test settings; a key given again there wins (the server
    /// reads `zoo.cfg` as Java properties), e.g. `minSessionTimeout=4000\n`.
    pub fn start_with(extra: &str) -> ZkServer {
        let mut server = ZkServer::configure(STANDALONE_MAIN, free_port(), extra);
        server.start_again();
        server
    }

    /// Like [`ZkServer::start`], but the JVM runs as ZooKeeper's own start
    /// script runs it ([`PRODUCTION_JVM`]: a 1000 MB heap, full JIT), for
    /// benchmarks that store 100,000 records.
    pub fn start_production() -> ZkServer {
        let mut server = ZkServer::configure(STANDALONE_MAIN, free_port(), "");
        server.jvm = PRODUCTION_JVM;
        server.start_again();
        server
    }

    /// A server that is not running yet: client port `port` on loopback,
    /// its own data directory and a `zoo.cfg` with the fast-test settings followed by
    /// `extra` (whole lines, e.g. an ensemble's `server.N=` list), to be
    /// run as `main_class`. Start it with [`ZkServer::start_again`], or
    /// with [`ZkServer::spawn`] and [`ZkServer::wait_ready`] when several
    /// must start together (an ensemble serves only once a quorum runs).
    pub fn configure(main_class: &'static str, port: u16, extra: &str) -> ZkServer {
        let dir = tempfile::Builder::new()
            .prefix("zk-test-")
            .tempdir()
            .expect("create ZooKeeper temp dir");
        std::fs::create_dir_all(dir.path().join("data")).expect("create data dir");
        let server = ZkServer {
            dir,
            port,
            child: None,
            main_class,
            jvm: TEST_JVM,
        };
        server.write_config(extra);
        server
    }

    /// The server process's ID while it runs (benchmarks read its CPU time
    /// from `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// `host:port` for a client connect string.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The data directory (snapshots, transaction log, `zk.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The data folder (`zoo.cfg`'s `dataDir`, where an ensemble member's
    /// `myid` goes).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Kills the server process (SIGKILL: no clean shutdown, like a crash).
    /// Sessions and data survive in the data directory. No-op when stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server the way an operator's restart does: SIGTERM (the
    /// JVM runs its shutdown hooks and closes its sockets), then SIGKILL if
    /// it is still there after 10 s. No-op when stopped.
    pub fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on our own child's pid, which wait() has not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts the server again on the same port and data directory and waits
    /// until it serves. No-op when it is running.
    pub fn start_again(&mut self) {
        if self.child.is_some() {
            return;
        }
        self.spawn();
        self.wait_ready();
    }

    /// Starts the server process without waiting for it to serve. No-op
    /// when it is running.
    pub fn spawn(&mut self) {
        if self.child.is_some() {
            return;
        }
        let jar = find_file(JAR_CANDIDATES).unwrap_or_else(|| {
            panic!("ZooKeeper jar not found in {JAR_CANDIDATES:?}: apt-get install zookeeper")
        });
        let mut classpath = jar.display().to_string();
        if let Some(slf4j) = find_file(SLF4J_CANDIDATES) {
            classpath.push(':');
            classpath.push_str(&slf4j.display().to_string());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open zk.log");
        let child = Command::new("java")
            .args(self.jvm)
            .arg("-cp")
            .arg(&classpath)
            .arg(self.main_class)
            .arg(self.dir.path().join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run java (install default-jre-headless): {e}"));
        self.child = Some(child);
    }

    /// Stops the server and starts it again on the same port and data dir.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// Sends a four-letter-word command (`ruok`, `srvr`, `mntr`, `cons`, `wchp`) and
    /// returns the answer; `None` when the server does not answer.
    pub fn four_letter(&self, cmd: &str) -> Option<String> {
        four_letter(self.addr(), cmd)
    }

    /// Waits until znode `path` has no children (or does not exist), e.g.
    /// until a SIGKILLed leader's ephemeral election member is gone with its
    /// session; panics after `within`.
    pub async fn wait_no_children(&self, path: &str, within: Duration) {
        let client = zk::Client::connect(&self.connect_string())
            .await
            .expect("connect to ZooKeeper");
        let deadline = Instant::now() + within;
        loop {
            match client.list_children(path).await {
                Ok(children) if children.is_empty() => return,
                Err(zk::Error::NoNode) => return,
                Ok(children) => assert!(
                    Instant::now() < deadline,
                    "{path} still has {children:?} after {within:?}"
                ),
                Err(e) => panic!("list {path}: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the server serves clients (an ensemble member: until it
    /// is in a quorum); panics when it exits first or after 30 s.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // `ruok` answers `imok` as soon as the port is open, before the
            // server loads its database and serves; `srvr` says when it does.
            if self
                .four_letter("srvr")
                .is_some_and(|a| a.contains("Zookeeper version"))
            {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "ZooKeeper exited with {status} before serving; log:\n{}",
                    self.log()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "ZooKeeper did not serve within {START_TIMEOUT:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn write_config(&self, extra: &str) {
        let mut cfg = format!(
            "tickTime=500\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout=1000\n\
             maxSessionTimeout=60000\n\
             maxClientCnxns=0\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr,mntr,cons,wchp\n",
            self.data_dir().display(),
            self.port
        );
        cfg.push_str(extra);
        std::fs::write(self.dir.path().join("zoo.cfg"), cfg).expect("write zoo.cfg");
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("zk.log")
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A plain client of `server` (2 s session), for writing behind the
/// coordinators' backs.
pub async fn raw_client(server: &ZkServer) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(2))
        .connect(&server.connect_string())
        .await
        .unwrap()
}

/// Makes the server end `session` now, as if its holder had vanished for
/// longer than the session timeout. The holder must reach the server
/// through `proxy`.
///
/// ZooKeeper has no "expire this session" command. The standard trick:
/// open a second connection that *resumes* the same session (same ID and
/// password, zookeeper-client's `Connector::with_session`) and close it; the
/// server then ends the session (ephemeral nodes go, watches fire) and the
/// holder's next reconnect is answered with `Expired`. The link is cut
/// during the trick because a live holder reconnects at once and steals the
/// session back (the server moves a session to its newest connection), and
/// the two clients then ping-pong until the hijacker's connect times out.
pub async fn expire_session(server: &str, session: zk::SessionInfo, proxy: &ChaosProxy) {
    proxy.break_link();
    let hijack = zk::Client::connector()
        .with_session(session)
        .with_session_timeout(Duration::from_secs(2))
        .connect(server)
        .await
        .expect("resume the session to expire it");
    // Dropping the last clone closes the session; wait until that is done.
    let mut state = hijack.state_watcher();
    drop(hijack);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while !state.state().is_terminated() {
            state.changed().await;
        }
    })
    .await;
    proxy.restore();
}

/// Sends a four-letter-word command to the server at `addr` and returns
/// the answer; `None` when it does not answer (1 s to connect, 2 s to read).
pub fn four_letter(addr: SocketAddr, cmd: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(cmd.as_bytes()).ok()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // The server closes right after answering, sometimes with a reset:
    // keep what arrived before the error.
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    (!answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned())
}

fn find_file(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// A free TCP port on loopback (bind to port 0, read it, release it).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` different free TCP ports on loopback. All are held until all are
/// found: ports taken one at a time may repeat (the kernel hands a
/// released port out again), which an ensemble's nine ports must not.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("bound address").port())
        .collect()
}
