//! Two appliance replicas on a real three-server ZooKeeper ensemble (see
//! `support::zookeeper_ensemble`) and the testbed master, through the
//! ensemble faults an operator meets: a rolling restart, a SIGKILLed
//! ensemble leader, and two of three servers down for longer than a
//! session.
//!
//! A [`Watch`] samples the replicas' snapshots, the master's frameworks and
//! the ensemble's quorum every 50 ms for the whole scenario and records a
//! violation when
//! - two replicas are subscribed at once, or the master has two frameworks
//!   or two live subscriptions;
//! - a replica is still subscribed, or the master still has a live
//!   subscription, more than [`NO_QUORUM_GRACE`] after the ensemble lost
//!   its quorum.
//!
//! At the end one replica is subscribed with the framework ID and the task
//! IDs of the start, the master has one active framework, and its call log
//! has no call on a subscription after a newer one was answered. Each
//! scenario prints its leaderless time (no replica subscribed), and the
//! master's view of it. After two servers were down for longer than a
//! session a replica must be subscribed again within half a session of
//! coming back into the election on a new session: the servers revive the sessions the clients gave up,
//! and the replicas must not queue behind those sessions' election nodes.
//! Session timeout 2 s ([`SESSION`]).

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mesos_appliance::coordination::Leadership;
use mesos_appliance::scheduler::{FrameworkState, SchedulerHandle};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, SubscriptionClock, core_config, running, services};
use support::replicas::SESSION;
use support::zookeeper_ensemble::{Mode, ZkEnsemble, has_quorum};
use tokio::task::{JoinHandle, block_in_place};

const WAIT: Duration = Duration::from_secs(30);
/// How many tasks the service runs.
const TASKS: usize = 4;
/// How often the [`Watch`] looks.
const SAMPLE: Duration = Duration::from_millis(50);
/// How long a replica may stay subscribed once the ensemble has no quorum:
/// one session timeout. The leader suspends at once when its server drops
/// the connection (a member that leaves the quorum drops its clients) and,
/// failing that, when its lease (four fifths of the session timeout) runs
/// out; the last fifth covers the snapshot interval and the sampling.
const NO_QUORUM_GRACE: Duration = SESSION;

/// How many violations the [`Watch`] keeps (it counts them all).
const KEPT_VIOLATIONS: usize = 10;

/// What the [`Watch`] saw.
#[derive(Default)]
struct Seen {
    /// The first [`KEPT_VIOLATIONS`] violations.
    violations: Vec<String>,
    /// How many there were.
    violation_count: usize,
    /// Time with no replica subscribed, in total and the longest stretch.
    leaderless: Duration,
    longest_leaderless: Duration,
    leaderless_since: Option<Instant>,
    /// When the ensemble was last seen without a quorum, if it still is.
    no_quorum_since: Option<Instant>,
    /// The longest stretch without a quorum.
    longest_no_quorum: Duration,
    /// When the quorum was last seen back after a stretch without one:
    /// when the members that answered so were asked.
    quorum_back_at: Option<Instant>,
    /// Whether every replica was seen out of the election (a `Candidate`,
    /// its session given up) while the quorum was gone.
    all_out: bool,
    /// When every replica was first seen back in the election (following
    /// or leading, on a new session) after that. Not the first one back:
    /// a replica that returns first may find the other's abandoned node
    /// ahead of its own, which only that other replica may delete.
    rejoined_at: Option<Instant>,
    /// The longest time a replica was seen subscribed after the quorum went.
    subscribed_without_quorum: Duration,
    /// Which replicas were subscribed, in the order they took over.
    leaders: Vec<String>,
}

/// Samples the replicas, the master and the ensemble while a scenario runs.
struct Watch {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Seen {
    /// Records a violation seen at `at` (since the watch started).
    fn violation(&mut self, at: Duration, what: String) {
        self.violation_count += 1;
        if self.violations.len() < KEPT_VIOLATIONS {
            self.violations.push(format!("at {at:?}: {what}"));
        }
    }
}

impl Watch {
    fn start(replicas: &[Replica], tb: Arc<Testbed>, ensemble: Vec<SocketAddr>) -> Watch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let handles: Vec<(String, SchedulerHandle)> = replicas
            .iter()
            .map(|r| (r.name.clone(), r.handle.clone()))
            .collect();
        let leaderships: Vec<_> = replicas
            .iter()
            .map(|r| r.coordinator.leadership())
            .collect();
        let quorum = {
            let seen = seen.clone();
            tokio::spawn(async move {
                loop {
                    let asked = Instant::now();
                    let addrs = ensemble.clone();
                    let up = tokio::task::spawn_blocking(move || has_quorum(&addrs))
                        .await
                        .unwrap_or(false);
                    {
                        let mut s = seen.lock().unwrap();
                        if up {
                            if s.no_quorum_since.take().is_some() {
                                s.quorum_back_at = Some(asked);
                            }
                        } else {
                            // From before the question: the quorum may have
                            // gone while the members were being asked.
                            let since = *s.no_quorum_since.get_or_insert(asked);
                            s.longest_no_quorum = s.longest_no_quorum.max(asked - since);
                        }
                    }
                    tokio::time::sleep(SAMPLE).await;
                }
            })
        };
        let sampler = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let mut last = start;
                loop {
                    tokio::time::sleep(SAMPLE).await;
                    let now = Instant::now();
                    let subscribed: Vec<&str> = handles
                        .iter()
                        .filter(|(_, h)| h.snapshot().framework.state == FrameworkState::Subscribed)
                        .map(|(name, _)| name.as_str())
                        .collect();
                    let frameworks = tb.frameworks();
                    let active = frameworks.iter().filter(|f| !f.completed).count();
                    let connected = frameworks.iter().filter(|f| f.connected).count();
                    let out = leaderships
                        .iter()
                        .filter(|l| *l.borrow() == Leadership::Candidate)
                        .count();
                    let mut s = seen.lock().unwrap();
                    let at = now - start;
                    if s.no_quorum_since.is_some() && out == leaderships.len() {
                        s.all_out = true;
                    } else if s.all_out && out == 0 && s.rejoined_at.is_none() {
                        s.rejoined_at = Some(now);
                    }
                    if subscribed.len() > 1 {
                        s.violation(at, format!("two subscribed leaders: {subscribed:?}"));
                    }
                    if active > 1 || connected > 1 {
                        s.violation(
                            at,
                            format!(
                                "master: {active} active frameworks, {connected} subscriptions"
                            ),
                        );
                    }
                    if let Some(since) = s.no_quorum_since
                        && (!subscribed.is_empty() || connected > 0)
                    {
                        let after = now - since;
                        s.subscribed_without_quorum = s.subscribed_without_quorum.max(after);
                        if after > NO_QUORUM_GRACE {
                            let what = format!(
                                "subscribed {after:?} after the quorum was lost: replicas \
                                 {subscribed:?}, {connected} at the master"
                            );
                            s.violation(at, what);
                        }
                    }
                    match subscribed.first() {
                        Some(leader) => {
                            s.leaderless_since = None;
                            if s.leaders.last().map(String::as_str) != Some(leader) {
                                s.leaders.push(leader.to_string());
                            }
                        }
                        None => {
                            s.leaderless += now - last;
                            let since = *s.leaderless_since.get_or_insert(last);
                            s.longest_leaderless = s.longest_leaderless.max(now - since);
                        }
                    }
                    last = now;
                }
            })
        };
        Watch {
            seen,
            tasks: vec![quorum, sampler],
        }
    }

    /// Reads what was seen so far (the lock is not held after `f`).
    fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// The ensemble, the master, two replicas (the first leads and runs
/// [`TASKS`] tasks, the second follows), what the scenario must keep, and
/// the watchers started once all that runs.
struct Scenario {
    name: &'static str,
    ensemble: ZkEnsemble,
    tb: Arc<Testbed>,
    replicas: Vec<Replica>,
    framework_id: String,
    task_ids: Vec<String>,
    watch: Watch,
    clock: SubscriptionClock,
    started: Instant,
}

impl Scenario {
    async fn start(name: &'static str) -> Scenario {
        support::init_tracing();
        let ensemble = block_in_place(ZkEnsemble::start);
        let tb = Arc::new(support::testbed(TestbedConfig::for_tests(3)).await);
        let specs = services(json!([{"name": "web", "command": "sleep 1000", "cpus": 0.1,
            "mem": 32, "instances": TASKS}]));
        let zk = ensemble.connect_string();
        let first = Replica::start(&zk, "r1", &tb.url(), specs.clone(), core_config()).await;
        let s = first
            .wait_for("all tasks running", WAIT, |s| running(s, "web") == TASKS)
            .await;
        let framework_id = s.framework.id.clone().expect("a framework ID");
        let task_ids = task_ids(&s);
        let second = Replica::start(&zk, "r2", &tb.url(), specs, core_config()).await;
        second
            .wait_for("r2 follows", WAIT, |s| {
                s.framework.state == FrameworkState::Standby && s.leader_url().is_some()
            })
            .await;
        let replicas = vec![first, second];
        let watch = Watch::start(&replicas, tb.clone(), ensemble.addrs());
        let clock = SubscriptionClock::start(tb.clone());
        Scenario {
            name,
            ensemble,
            tb,
            replicas,
            framework_id,
            task_ids,
            watch,
            clock,
            started: Instant::now(),
        }
    }

    /// Does `fault` to the ensemble (blocking calls, so off the async
    /// workers) and prints how long it took.
    fn fault(&mut self, what: &str, fault: impl FnOnce(&mut ZkEnsemble)) {
        let t0 = Instant::now();
        block_in_place(|| fault(&mut self.ensemble));
        eprintln!("{}: {what} took {:?}", self.name, t0.elapsed());
    }

    /// Waits until a replica is subscribed and runs every task; its index.
    async fn wait_subscribed(&self) -> usize {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = self.replicas.iter().position(|r| {
                let s = r.snapshot();
                s.framework.state == FrameworkState::Subscribed && running(&s, "web") == TASKS
            });
            if let Some(i) = found {
                return i;
            }
            assert!(
                Instant::now() < deadline,
                "{}: no subscribed replica with {TASKS} tasks within {WAIT:?}; ensemble {:?}",
                self.name,
                self.ensemble.modes()
            );
            tokio::time::sleep(SAMPLE).await;
        }
    }

    /// Checks the end state and the watch, prints the figures and stops
    /// the replicas (which runs their own end-of-test checks).
    async fn finish(self) {
        let leader = self.wait_subscribed().await;
        // A last stretch of watching with everything back.
        tokio::time::sleep(SESSION).await;
        let elapsed = self.started.elapsed();
        let (report, violations, count) = self.watch.seen(|seen| {
            let report = format!(
                "ensemble {}: leaderless {:?} in total, longest {:?} (of {:?}); the master saw \
                 no subscription for {:?}; leaders {:?}; longest without quorum {:?}, a replica \
                 subscribed up to {:?} into it",
                self.name,
                seen.leaderless,
                seen.longest_leaderless,
                elapsed,
                self.clock.leaderless(),
                seen.leaders,
                seen.longest_no_quorum,
                seen.subscribed_without_quorum,
            );
            (report, seen.violations.clone(), seen.violation_count)
        });
        eprintln!("{report}");
        assert_eq!(
            count, 0,
            "{}: {count} violations: {violations:?}",
            self.name
        );
        let stale = calls_on_superseded_streams(&self.tb);
        assert!(
            stale.is_empty(),
            "{}: calls on a subscription after a newer SUBSCRIBE: {stale:?}",
            self.name
        );
        let s = self.replicas[leader].snapshot();
        assert_eq!(s.framework.state, FrameworkState::Subscribed);
        assert_eq!(
            s.framework.id.as_deref(),
            Some(self.framework_id.as_str()),
            "{}: the same framework ID",
            self.name
        );
        assert_eq!(task_ids(&s), self.task_ids, "{}: the same tasks", self.name);
        let mut at_master: Vec<String> = self.tb.tasks().into_iter().map(|t| t.task_id).collect();
        at_master.sort();
        assert_eq!(
            at_master, self.task_ids,
            "{}: the master's tasks",
            self.name
        );
        let active: Vec<_> = self
            .tb
            .frameworks()
            .into_iter()
            .filter(|f| !f.completed)
            .collect();
        assert_eq!(active.len(), 1, "{}: one active framework", self.name);
        assert_eq!(active[0].id, self.framework_id);
        assert!(
            active[0].connected,
            "{}: subscribed at the master",
            self.name
        );

        for replica in self.replicas {
            replica.stop().await;
        }
    }
}

/// The scheduler calls (but SUBSCRIBE) the master received on a stream
/// after a newer SUBSCRIBE had been answered: a deposed leader still acting
/// after the next one subscribed, which fencing must prevent.
fn calls_on_superseded_streams(tb: &Testbed) -> Vec<String> {
    let mut current: Option<String> = None;
    let mut stale = Vec::new();
    for call in tb.calls().into_iter().filter(|c| c.api == "scheduler") {
        if call.call_type == "SUBSCRIBE" {
            if call.stream_id.is_some() {
                current = call.stream_id;
            }
        } else if call.stream_id.is_some() && call.stream_id != current {
            stale.push(format!(
                "#{} {} on {:?}",
                call.seq, call.call_type, call.stream_id
            ));
        }
    }
    stale
}

/// The task IDs in a snapshot, sorted.
fn task_ids(s: &mesos_appliance::scheduler::Snapshot) -> Vec<String> {
    let mut ids: Vec<String> = s.tasks.iter().map(|t| t.task_id.to_string()).collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_of_the_ensemble_keeps_one_leader_and_the_tasks() {
    let mut sc = Scenario::start("rolling restart").await;
    for i in 0..support::zookeeper_ensemble::SIZE {
        let was = sc.ensemble.modes()[i];
        sc.fault(
            &format!("SIGTERM and restart of member {} ({was:?})", i + 1),
            |e| {
                e.terminate(i);
                e.start_again(&[i]);
                e.wait_serving(3, WAIT);
            },
        );
        sc.wait_subscribed().await;
    }
    sc.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_ensemble_leader_keeps_one_leader_and_the_tasks() {
    let mut sc = Scenario::start("leader SIGKILL").await;
    let leader = sc.ensemble.leader().expect("the ensemble has a leader");
    sc.fault(
        &format!("SIGKILL of member {} (leader) to a new quorum", leader + 1),
        |e| {
            e.kill(leader);
            e.wait_serving(2, WAIT);
        },
    );
    sc.wait_subscribed().await;
    sc.fault("its restart", |e| {
        e.start_again(&[leader]);
        e.wait_serving(3, WAIT);
    });
    sc.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_down_longer_than_a_session_then_back() {
    let mut sc = Scenario::start("two of three down").await;
    // The two followers go; the leader stays up but loses its quorum.
    let down: Vec<usize> = (0..support::zookeeper_ensemble::SIZE)
        .filter(|i| sc.ensemble.modes()[*i] == Mode::Follower)
        .collect();
    assert_eq!(down.len(), 2, "{:?}", sc.ensemble.modes());
    sc.fault("SIGKILL of both followers", |e| {
        down.iter().for_each(|i| e.kill(*i))
    });
    let outage = SESSION * 2 + Duration::from_secs(1);
    tokio::time::sleep(outage).await;
    let subscribed: Vec<&str> = sc
        .replicas
        .iter()
        .filter(|r| r.snapshot().framework.state == FrameworkState::Subscribed)
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        subscribed.is_empty(),
        "subscribed {outage:?} into the outage: {subscribed:?}"
    );
    sc.fault("their restart to a quorum of three", |e| {
        e.start_again(&down);
        e.wait_serving(3, WAIT);
    });
    let all_back = Instant::now();
    sc.wait_subscribed().await;
    let subscribed_at = Instant::now();
    let since = |at: Option<Instant>| at.map(|at| subscribed_at.saturating_duration_since(at));
    let (quorum_back, rejoined) = sc.watch.seen(|s| (s.quorum_back_at, s.rejoined_at));
    eprintln!(
        "two of three down: subscribed again {:?} after both replicas were back in the election, \
         {:?} after the quorum was seen back, {:?} after all three served",
        since(rejoined),
        since(quorum_back),
        subscribed_at.saturating_duration_since(all_back)
    );
    let without = sc.watch.seen(|s| s.longest_no_quorum);
    assert!(
        without >= SESSION,
        "the watch saw the quorum gone for only {without:?}"
    );
    sc.finish().await;
    // The servers revive the sessions the clients gave up during the
    // outage; the replicas must not wait for them to expire again (that
    // took a session and more). Measured from both replicas' return to
    // the election on new sessions: a server may answer `srvr` as a follower
    // a second before it takes client sessions.
    let rejoined = since(rejoined).expect("both replicas left the election, then came back");
    assert!(
        rejoined < SESSION / 2,
        "subscribed again only {rejoined:?} after both replicas were back in the election: the \
         abandoned sessions' election nodes were waited out"
    );
}
