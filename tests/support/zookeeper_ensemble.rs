//! A real three-server ZooKeeper ensemble on loopback for tests.
//!
//! Each member is a [`ZkServer`] (its own client port, data directory and
//! log, the same fast-test settings) run as `QuorumPeerMain` with the
//! `server.N=` list of all three and its `myid`, as the ZooKeeper
//! administrator's guide describes a replicated setup. A member serves
//! clients only while it is in a quorum (two of three), so
//! [`ZkServer::wait_ready`] waits for that.
//!
//! The faults the ensemble scenarios need: stop a member with SIGTERM
//! ([`ZkEnsemble::terminate`]) or SIGKILL ([`ZkEnsemble::kill`]), start it
//! again ([`ZkEnsemble::start_again`]), find the leader with `srvr`
//! ([`ZkEnsemble::leader`]) and wait until a quorum serves
//! ([`ZkEnsemble::wait_serving`]). [`has_quorum`] looks at the members
//! from another task (by address) while the test changes them.
//!
//! All calls block (process start, four-letter words): from async code run
//! them in `tokio::task::block_in_place` or `spawn_blocking`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::processes::tail;
use super::zookeeper::{ZkServer, four_letter, free_ports};

/// The class an ensemble member runs (reads the `server.N` list and `myid`).
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// How many servers an ensemble has.
pub const SIZE: usize = 3;

/// Ensemble settings on top of the standalone ones: `initLimit` and
/// `syncLimit` in ticks of 500 ms (5 s to sync a joining member, 2.5 s
/// before a silent follower is dropped), so that a dead leader is noticed
/// and replaced within about a second on loopback.
const QUORUM_SETTINGS: &str = "initLimit=10\nsyncLimit=5\n";

/// What `srvr` says a member is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Leads a quorum.
    Leader,
    /// Follows the leader of a quorum.
    Follower,
    /// Up, but in no quorum (looking for one): does not serve clients.
    NotServing,
    /// Does not answer (stopped or not yet listening).
    Down,
}

impl Mode {
    /// Whether the member serves clients.
    pub fn serves(self) -> bool {
        matches!(self, Mode::Leader | Mode::Follower)
    }
}

/// The mode of the member at `addr`, from its `srvr` answer.
pub fn mode(addr: SocketAddr) -> Mode {
    let Some(answer) = four_letter(addr, "srvr") else {
        return Mode::Down;
    };
    match answer
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(str::trim)
    {
        Some("leader") => Mode::Leader,
        Some("follower") => Mode::Follower,
        _ => Mode::NotServing,
    }
}

/// Three ZooKeeper servers forming one ensemble on loopback; all are killed
/// on drop.
pub struct ZkEnsemble {
    servers: Vec<ZkServer>,
}

impl ZkEnsemble {
    /// Starts three members and waits until all of them serve.
    pub fn start() -> ZkEnsemble {
        // A client, a peer (quorum) and a leader-election port a member.
        let ports = free_ports(3 * SIZE);
        let peers: String = (1..=SIZE)
            .map(|id| {
                let (peer, election) = (ports[SIZE + 2 * (id - 1)], ports[SIZE + 2 * id - 1]);
                format!("server.{id}=127.0.0.1:{peer}:{election}\n")
            })
            .collect();
        let extra = format!("{QUORUM_SETTINGS}{peers}");
        let mut servers: Vec<ZkServer> = (1..=SIZE)
            .map(|id| {
                let server = ZkServer::configure(QUORUM_MAIN, ports[id - 1], &extra);
                std::fs::write(server.data_dir().join("myid"), format!("{id}\n"))
                    .expect("write myid");
                server
            })
            .collect();
        // A member serves only in a quorum: start all before waiting for any.
        servers.iter_mut().for_each(ZkServer::spawn);
        servers.iter_mut().for_each(ZkServer::wait_ready);
        ZkEnsemble { servers }
    }

    /// `h1:p1,h2:p2,h3:p3` for a client connect string or a `zk://` URL.
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(ZkServer::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The members' client addresses, in `myid` order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.servers.iter().map(ZkServer::addr).collect()
    }

    /// Member `i` (0-based; its `myid` is `i + 1`).
    pub fn server(&self, i: usize) -> &ZkServer {
        &self.servers[i]
    }

    /// Each member's mode, in order.
    pub fn modes(&self) -> Vec<Mode> {
        self.addrs().into_iter().map(mode).collect()
    }

    /// The member that says it leads, if one does.
    pub fn leader(&self) -> Option<usize> {
        self.modes().iter().position(|m| *m == Mode::Leader)
    }

    /// Stops member `i` with SIGTERM (a clean stop, as in a rolling restart).
    pub fn terminate(&mut self, i: usize) {
        self.servers[i].terminate();
    }

    /// Kills member `i` with SIGKILL (a crash).
    pub fn kill(&mut self, i: usize) {
        self.servers[i].stop();
    }

    /// Starts the stopped members `which` again and waits until each serves
    /// (it has joined a quorum).
    pub fn start_again(&mut self, which: &[usize]) {
        for &i in which {
            self.servers[i].spawn();
        }
        for &i in which {
            self.servers[i].wait_ready();
        }
    }

    /// Waits until `count` members serve, one of them as leader; panics
    /// with every member's mode after `within`.
    pub fn wait_serving(&self, count: usize, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let modes = self.modes();
            let serving = modes.iter().filter(|m| m.serves()).count();
            if serving >= count && modes.contains(&Mode::Leader) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{count} serving members not within {within:?}: {modes:?}\n{}",
                self.log_tails(20)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last `lines` lines of each member's log, for a failure message.
    pub fn log_tails(&self, lines: usize) -> String {
        self.servers
            .iter()
            .enumerate()
            .map(|(i, s)| format!("--- member {} ---\n{}\n", i + 1, tail(&s.log(), lines)))
            .collect()
    }
}

/// Whether a quorum of the ensemble at `addrs` serves: a majority answers
/// `srvr` as leader or follower. Blocking (up to 3 s per member that hangs).
pub fn has_quorum(addrs: &[SocketAddr]) -> bool {
    let serving = addrs.iter().filter(|a| mode(**a).serves()).count();
    serving > addrs.len() / 2
}
