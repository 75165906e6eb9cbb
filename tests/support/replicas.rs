//! Replicas of the ZooKeeper coordinator for tests: start one against a
//! server (or a chaos proxy), record its leadership transitions with
//! timestamps, and wait for states with deadlines.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mesos_appliance::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use mesos_appliance::coordination::{Coordinator, Leadership, ReplicaInfo};
use mesos_appliance::util::zk::ZkUrl;

/// The session timeout tests ask for (the test server allows down to 1 s).
pub const SESSION: Duration = Duration::from_secs(2);
/// The base hold-off tests use, short to keep them fast.
pub const HOLD_OFF: Duration = Duration::from_millis(200);

/// A replica named `name` (used as replica ID and in its URL).
pub fn replica(name: &str) -> ReplicaInfo {
    ReplicaInfo {
        replica_id: name.to_string(),
        advertised_url: format!("http://{name}.test:8080"),
        deployment_id: "dep-1".to_string(),
        version: "test".to_string(),
        started_at: 0,
    }
}

/// A config for `name` on `connect` (`host:port`, maybe with `user:pass@`)
/// with root `/t`, a 2 s session and a 200 ms hold-off.
pub fn config(connect: &str, name: &str) -> ZkConfig {
    let url = ZkUrl::parse(&format!("zk://{connect}/t"), "unused").expect("test URL");
    let mut config = ZkConfig::new(url, replica(name)).with_session_timeout(SESSION);
    config.hold_off = HOLD_OFF;
    config
}

/// Starts a replica with [`config`].
pub async fn start(connect: &str, name: &str) -> Arc<ZkCoordinator> {
    start_with(config(connect, name)).await
}

/// Starts a replica with the given config.
pub async fn start_with(config: ZkConfig) -> Arc<ZkCoordinator> {
    Arc::new(
        ZkCoordinator::start(config)
            .await
            .expect("start coordinator"),
    )
}

/// Leadership transitions of one replica, each with the instant a task
/// watching the channel saw it.
#[derive(Clone)]
pub struct Recorder {
    log: Arc<Mutex<Vec<(Instant, Leadership)>>>,
}

impl Recorder {
    /// Starts recording `c`'s transitions (the current state first).
    pub fn start(c: &dyn Coordinator) -> Recorder {
        let mut rx = c.leadership();
        let log = Arc::new(Mutex::new(vec![(
            Instant::now(),
            rx.borrow_and_update().clone(),
        )]));
        let sink = log.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let state = rx.borrow_and_update().clone();
                sink.lock().unwrap().push((Instant::now(), state));
            }
        });
        Recorder { log }
    }

    /// All transitions so far.
    pub fn log(&self) -> Vec<(Instant, Leadership)> {
        self.log.lock().unwrap().clone()
    }

    /// When the first state after `since` matching `pred` was seen.
    pub fn first_after(
        &self,
        since: Instant,
        pred: impl Fn(&Leadership) -> bool,
    ) -> Option<Instant> {
        self.log()
            .into_iter()
            .find(|(t, l)| *t >= since && pred(l))
            .map(|(t, _)| t)
    }

    /// Like [`Recorder::first_after`], but waits up to `timeout` for the
    /// recording task to catch up (it runs concurrently with the test).
    pub async fn wait_first_after(
        &self,
        since: Instant,
        pred: impl Fn(&Leadership) -> bool,
        timeout: Duration,
    ) -> Instant {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(t) = self.first_after(since, &pred) {
                return t;
            }
            if Instant::now() > deadline {
                panic!(
                    "no matching transition within {timeout:?}: {:?}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Whether any state after `since` matched `pred`.
    pub fn any_after(&self, since: Instant, pred: impl Fn(&Leadership) -> bool) -> bool {
        self.first_after(since, pred).is_some()
    }
}

/// Waits until `c` leads; returns the term.
pub async fn wait_leader(c: &dyn Coordinator, timeout: Duration) -> u64 {
    let mut rx = c.leadership();
    let what = format!("{} leads", c.replica().replica_id);
    super::wait_for(&mut rx, timeout, &what, |l| l.is_leader())
        .await
        .term()
        .unwrap_or_default()
}

/// Waits until `c` follows `leader`.
pub async fn wait_follower_of(c: &dyn Coordinator, leader: &str, timeout: Duration) {
    let mut rx = c.leadership();
    let what = format!("{} follows {leader}", c.replica().replica_id);
    super::wait_for(
        &mut rx,
        timeout,
        &what,
        |l| matches!(l, Leadership::Follower { leader: Some(info) } if info.replica_id == leader),
    )
    .await;
}

/// Waits until exactly one of `cs` leads and the others follow it; returns
/// the leader's index.
pub async fn wait_one_leader(cs: &[Arc<ZkCoordinator>], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        let states: Vec<Leadership> = cs.iter().map(|c| c.leadership().borrow().clone()).collect();
        let leaders: Vec<usize> = (0..cs.len()).filter(|i| states[*i].is_leader()).collect();
        if let [leader] = leaders[..] {
            let leader_id = &cs[leader].replica().replica_id;
            let all_follow = states.iter().enumerate().all(|(i, l)| {
                i == leader
                    || matches!(l, Leadership::Follower { leader: Some(info) } if &info.replica_id == leader_id)
            });
            if all_follow {
                return leader;
            }
        }
        if Instant::now() > deadline {
            panic!("no single leader within {timeout:?}: {states:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
