//! Leadership under a slow but alive ZooKeeper (issue 13, part B): two
//! appliance replicas on one root with a 10 s session, the leader's
//! ZooKeeper traffic through a proxy that delays each direction. Latency
//! below the session timeout must not cost leadership, and no state may
//! leave the cluster without a subscribed scheduler while a replica holds
//! the lowest election node. Issue 24, part B: round trips up to half the
//! session timeout (5 s) change nothing at all, also when the latency
//! starts after a quiet spell on an established connection. A server that
//! raises the asked session timeout (its `minSessionTimeout`) makes every
//! failover slower: the replica says so and shows both figures.
//!
//! The ignored `leaderless_time_by_round_trip` measures the time without a
//! subscribed scheduler, leadership changes and resubscriptions over 60 s
//! per round trip (0.5, 1, 2, 3, 5 s, all at once), and
//! `leaderless_time_by_round_trip_with_cuts` the same with a's link also cut
//! for one second every nine (about 70 s each):
//! `cargo test --test it coordination_slow_zookeeper::leaderless_time -- --ignored --test-threads=1 --nocapture`.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mesos_appliance::coordination::zookeeper::ZkConfig;
use mesos_appliance::scheduler::FrameworkState;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, SubscriptionClock, core_config, services, zk_config};
use support::chaos_proxy::ChaosProxy;
use support::processes::{Appliance, base_args};
use support::replicas::Recorder;
use support::zookeeper::ZkServer;

const SESSION: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(40);

/// The replica's coordinator settings as `serve --zk-session-timeout 10s`
/// has them (the production hold-off too).
fn slow_config(connect: &str, name: &str) -> ZkConfig {
    let mut config = zk_config(connect, name).with_session_timeout(SESSION);
    config.hold_off = mesos_appliance::coordination::zookeeper::DEFAULT_HOLD_OFF;
    config
}

/// ZooKeeper, a testbed, replica `a` subscribed through a proxy to
/// ZooKeeper, and replica `b` (direct) standing by.
struct Cluster {
    // Dropped last: ZooKeeper outlives the replicas' sessions.
    a: Replica,
    b: Replica,
    proxy: ChaosProxy,
    tb: Arc<Testbed>,
    _zk: ZkServer,
}

async fn cluster() -> Cluster {
    let zk = ZkServer::start();
    let tb = Arc::new(Testbed::start(TestbedConfig::for_tests(2)).await.unwrap());
    let proxy = ChaosProxy::start(zk.addr()).await;
    let specs = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.1, "mem": 32, "instances": 2}
    ]));
    let a = Replica::start_with(
        slow_config(&proxy.connect_string(), "a"),
        &tb.url(),
        specs.clone(),
        core_config(),
    )
    .await;
    a.wait_for("a subscribed with 2 running", WAIT, |s| {
        s.framework.state == FrameworkState::Subscribed
            && support::appliance::running(s, "web") == 2
    })
    .await;
    let b = Replica::start_with(
        slow_config(&zk.connect_string(), "b"),
        &tb.url(),
        specs,
        core_config(),
    )
    .await;
    b.wait_for("b stands by behind a", WAIT, |s| {
        s.framework.state == FrameworkState::Standby && s.leader_url().is_some()
    })
    .await;
    Cluster {
        a,
        b,
        proxy,
        tb,
        _zk: zk,
    }
}

/// How [`flap`] ends.
#[derive(Clone, Copy, PartialEq)]
enum FlapUntil {
    /// After the whole window (a measurement).
    Window,
    /// Once b has led, subscribed, at two checks a cut apart (the hand-over
    /// is done and held through a cut), or after the window.
    HandOver,
}

/// For `window`, a's link delays `one_way` each way and is cut for one
/// second every nine; returns the time without a subscribed scheduler.
async fn flap(c: &Cluster, one_way: Duration, window: Duration, until: FlapUntil) -> Duration {
    let clock = SubscriptionClock::start(c.tb.clone());
    c.proxy.set_symmetric_latency(one_way);
    let t0 = Instant::now();
    let mut b_led_at_last_check = false;
    while t0.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(8).min(window - t0.elapsed())).await;
        if t0.elapsed() < window {
            c.proxy.break_link();
            tokio::time::sleep(Duration::from_secs(1)).await;
            c.proxy.restore();
        }
        let b = c.b.snapshot();
        let b_leads = b.framework.state == FrameworkState::Subscribed && b.leadership.is_leader();
        if until == FlapUntil::HandOver && b_leads && b_led_at_last_check {
            break;
        }
        b_led_at_last_check = b_leads;
    }
    let leaderless = clock.leaderless();
    eprintln!(
        "without a subscribed scheduler: {leaderless:?} of {:?}",
        t0.elapsed()
    );
    leaderless
}

/// Asserts that b leads and is subscribed, and that the time without a
/// subscribed scheduler, `leaderless`, stayed below `bound`.
fn assert_b_took_over(c: &Cluster, leaderless: Duration, bound: Duration) {
    let b = c.b.snapshot();
    assert_eq!(
        (b.framework.state, b.leadership.is_leader()),
        (FrameworkState::Subscribed, true),
        "b took over and is subscribed; a: {:?}",
        c.a.snapshot().leadership
    );
    assert!(
        leaderless < bound,
        "{leaderless:?} without a subscribed scheduler (bound {bound:?})"
    );
}

/// A cluster whose leader a's link delays `one_way` each way and is cut
/// every nine seconds until b has taken over (at most `window`); asserts
/// that b leads, subscribed, after under 30 s without a subscribed
/// scheduler, and returns the cluster with the link healthy again.
async fn b_takes_over_while_flapping(one_way: Duration, window: Duration) -> Cluster {
    support::init_tracing();
    let c = cluster().await;
    let leaderless = flap(&c, one_way, window, FlapUntil::HandOver).await;
    assert_b_took_over(&c, leaderless, Duration::from_secs(30));
    c.proxy.set_symmetric_latency(Duration::ZERO);
    c
}

/// With `one_way` delay each way on a's ZooKeeper link for `window`: a keeps
/// leading and subscribed, b never leads, and once the delay is gone a is
/// still the one subscribed.
async fn leader_keeps_leading_through(one_way: Duration, window: Duration) {
    leader_keeps_leading_under(one_way, one_way, false, window).await;
}

/// [`leader_keeps_leading_through`] with `to_server` and `to_client` delays;
/// with `mid_write`, the delay starts right after a scale-up of `web` to 12
/// instances was put, while the leader writes its task records.
async fn leader_keeps_leading_under(
    to_server: Duration,
    to_client: Duration,
    mid_write: bool,
    window: Duration,
) {
    let one_way = (to_server + to_client) / 2;
    support::init_tracing();
    let c = cluster().await;
    let rec_a = Recorder::start(c.a.coordinator.as_ref());
    let rec_b = Recorder::start(c.b.coordinator.as_ref());
    let subscribes_before = c.tb.scheduler_calls("SUBSCRIBE").len();
    let clock = SubscriptionClock::start(c.tb.clone());
    let t0 = Instant::now();
    if mid_write {
        let spec = services(json!([
            {"name": "web", "command": "serve", "cpus": 0.1, "mem": 32, "instances": 12}
        ]))
        .remove(0);
        let handle = c.a.handle.clone();
        tokio::spawn(async move { support::appliance::put_service(&handle, spec).await });
        // The scale-up's launches and record writes are under way.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    c.proxy.set_latency(to_server, to_client);
    tokio::time::sleep(window).await;
    c.proxy.set_symmetric_latency(Duration::ZERO);
    c.a.wait_for("a subscribed after the delay is gone", WAIT, |s| {
        s.framework.state == FrameworkState::Subscribed
    })
    .await;
    let leaderless = clock.leaderless();
    let a_log: Vec<_> = rec_a
        .log()
        .into_iter()
        .map(|(t, l)| (t.saturating_duration_since(t0), l.role()))
        .collect();
    assert!(
        !rec_a.any_after(t0, |l| !l.is_leader()),
        "a kept leading under a {:?} round trip: {a_log:?}",
        one_way * 2
    );
    assert!(!rec_b.any_after(t0, |l| l.is_leader()), "b never led");
    assert_eq!(
        c.tb.scheduler_calls("SUBSCRIBE").len(),
        subscribes_before,
        "no new SUBSCRIBE: the subscription never broke"
    );
    assert!(
        leaderless < Duration::from_millis(200),
        "no time without a subscribed scheduler, measured {leaderless:?}"
    );
    c.b.stop().await;
    c.a.stop().await;
}

/// How long the "keeps the leader" tests watch: 1.5 session timeouts. A
/// connection given up on shows within the connection timeout (3/5 of the
/// session), and the old code lost the leader within the first 10 s.
const KEEP_WINDOW: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_second_round_trip_keeps_the_leader() {
    leader_keeps_leading_through(Duration::from_secs(1), KEEP_WINDOW).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_second_round_trip_keeps_the_leader() {
    leader_keeps_leading_through(Duration::from_millis(1500), KEEP_WINDOW).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_second_round_trip_keeps_the_leader() {
    // Before the connection timeout was set, zookeeper-client gave up on a
    // connection silent for 4 s (two fifths of the session) and could not
    // even reconnect: a's session lived on, nobody led for about 20 s.
    leader_keeps_leading_through(Duration::from_secs(2), KEEP_WINDOW).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_second_round_trip_all_towards_the_server_keeps_the_leader() {
    // lease.rs promises the lease holds "however [the latency] is split
    // between the two directions".
    leader_keeps_leading_under(
        Duration::from_millis(4500),
        Duration::from_millis(500),
        false,
        KEEP_WINDOW,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_second_round_trip_all_towards_the_client_keeps_the_leader() {
    leader_keeps_leading_under(
        Duration::from_millis(500),
        Duration::from_millis(4500),
        false,
        KEEP_WINDOW,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_second_round_trip_starting_mid_write_keeps_the_leader() {
    leader_keeps_leading_under(
        Duration::from_millis(1500),
        Duration::from_millis(1500),
        true,
        KEEP_WINDOW,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_cut_off_briefly_under_latency_leads_and_subscribes_again() {
    support::init_tracing();
    let c = cluster().await;
    let rec_b = Recorder::start(c.b.coordinator.as_ref());
    c.proxy.set_symmetric_latency(Duration::from_millis(1500));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t0 = Instant::now();
    c.proxy.break_link();
    let mut rx = c.a.coordinator.leadership();
    support::wait_for(&mut rx, WAIT, "a suspended", |l| !l.is_leader()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.proxy.restore();
    // Same session, so a leads again under a new term; its scheduler loads
    // the stores over the 3 s round trip and subscribes again.
    let s =
        c.a.wait_for(
            "a subscribed again in a new term",
            Duration::from_secs(60),
            |s| {
                s.framework.state == FrameworkState::Subscribed
                    && s.leadership.term().is_some_and(|t| t >= 2)
            },
        )
        .await;
    assert!(
        !rec_b.any_after(t0, |l| l.is_leader()),
        "b never led: a's session lived"
    );
    let subscribes = c.tb.scheduler_calls("SUBSCRIBE");
    assert!(subscribes.len() >= 2, "a subscribed again: {subscribes:?}");
    assert_eq!(s.framework.id, c.b.snapshot().framework.id);
    c.proxy.set_symmetric_latency(Duration::ZERO);
    c.b.stop().await;
    c.a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_whose_terms_keep_ending_hands_over() {
    // A 2 s round trip and a cut of one second every nine: each cut
    // suspends a, which reconnects (two round trips) and leads again within
    // the session, but loses the term at the next cut, before its scheduler
    // (loading the stores over the slow link) subscribes. Without the
    // hand-over a holds the lock through it all and nobody is subscribed
    // (measured: 55 s of 60); with it b leads after a's second short term.
    let c = b_takes_over_while_flapping(Duration::from_secs(1), Duration::from_secs(60)).await;
    c.a.wait_for("a stands by behind b", WAIT, |s| {
        s.framework.state == FrameworkState::Standby
            && s.leader_url().as_deref() == Some("http://b.test:8080")
    })
    .await;
    c.b.stop().await;
    c.a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_that_reconnects_but_cannot_lead_gives_up_its_node() {
    // A 3 s round trip and a cut of one second every nine: a reconnects
    // (two round trips) and renews its session each time, but the next cut
    // comes before its election round is done, so it never leads again.
    // Without a bound it holds the lowest node for good (measured: nobody
    // subscribed for 52 s of 60); with it a gives the node up once it has
    // been suspended for a session timeout and b leads.
    let c = b_takes_over_while_flapping(Duration::from_millis(1500), Duration::from_secs(50)).await;
    c.b.stop().await;
    c.a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_that_cannot_read_the_stores_lets_another_lead() {
    support::init_tracing();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    // `tasks/` readable only by the `locker` identity: a (anonymous) cannot
    // load the task records, b (locker) can.
    let locker = zookeeper_client::Client::connector()
        .with_auth("digest", b"locker:secret")
        .connect(&zk.connect_string())
        .await
        .unwrap();
    let open =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    locker.create("/appliance", b"", &open).await.unwrap();
    let locked =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::creator_all());
    locker
        .create("/appliance/tasks", b"", &locked)
        .await
        .unwrap();
    let specs = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.1, "mem": 32, "instances": 1}
    ]));
    let a = Replica::start_with(
        zk_config(&zk.connect_string(), "a"),
        &tb.url(),
        specs.clone(),
        core_config(),
    )
    .await;
    let b = Replica::start_with(
        zk_config(&format!("locker:secret@{}", zk.connect_string()), "b"),
        &tb.url(),
        specs,
        core_config(),
    )
    .await;
    b.wait_for("b took over and subscribed", WAIT, |s| {
        s.framework.state == FrameworkState::Subscribed
    })
    .await;
    a.wait_for("a stands by behind b", WAIT, |s| {
        s.leader_url().as_deref() == Some("http://b.test:8080")
    })
    .await;
    assert_eq!(
        tb.scheduler_calls("SUBSCRIBE").len(),
        1,
        "only b ever subscribed"
    );
    b.stop().await;
    a.stop().await;
}

/// What one [`measure`] saw.
struct Measured {
    /// Time without a subscribed scheduler.
    leaderless: Duration,
    /// The longest stretch of it.
    longest: Duration,
    /// How often a scheduler subscribed again after a stretch without one.
    resubscriptions: u32,
    /// Leadership changes: terms that ended (on either replica) plus terms
    /// that began, after the latency began. Zero when a leads throughout.
    changes: usize,
    /// Who is subscribed at the end.
    who: &'static str,
}

/// Terms that began or ended in `rec`'s log after `t0`.
fn leadership_changes(rec: &Recorder, t0: Instant) -> usize {
    let log = rec.log();
    log.windows(2)
        .filter(|w| w[1].0 >= t0 && w[0].1.is_leader() != w[1].1.is_leader())
        .count()
}

/// How long a's link must carry nothing before the latency starts, and
/// the longest wait for that (a busy link starts it anyway).
const QUIET: Duration = Duration::from_secs(2);
const QUIET_AT_MOST: Duration = Duration::from_secs(6);

/// One measurement: leaderless time over `window` with `rtt` on a's link
/// (set on the established connection, half each way, after a quiet
/// spell), and with `cuts` a
/// one-second cut of that link every nine seconds.
async fn measure(rtt: Duration, window: Duration, cuts: bool) -> Measured {
    let c = cluster().await;
    let rec_a = Recorder::start(c.a.coordinator.as_ref());
    let rec_b = Recorder::start(c.b.coordinator.as_ref());
    let clock = SubscriptionClock::start(c.tb.clone());
    let t0 = Instant::now();
    if cuts {
        flap(&c, rtt / 2, window, FlapUntil::Window).await;
    } else {
        // The latency starts after two quiet seconds on a's link, when a
        // client that pings only once idle is furthest from its next
        // answer (the old client's pings were 3 s apart).
        let waited = c
            .proxy
            .set_symmetric_latency_when_quiet(rtt / 2, QUIET, QUIET_AT_MOST)
            .await;
        eprintln!("{rtt:?} round trip on after {waited:?}");
        tokio::time::sleep(window).await;
    }
    let a = c.a.snapshot().framework.state;
    let b = c.b.snapshot().framework.state;
    let who = match (a, b) {
        (FrameworkState::Subscribed, _) => "a",
        (_, FrameworkState::Subscribed) => "b",
        _ => "none",
    };
    let measured = Measured {
        leaderless: clock.leaderless(),
        longest: clock.longest(),
        resubscriptions: clock.resubscriptions(),
        changes: leadership_changes(&rec_a, t0) + leadership_changes(&rec_b, t0),
        who,
    };
    c.proxy.set_symmetric_latency(Duration::ZERO);
    c.b.stop().await;
    c.a.stop().await;
    measured
}

/// Measures every round trip of `rtts_ms` at once (each on its own
/// ZooKeeper, testbed and replicas: they wait, they hardly compute), prints
/// a table and returns the rows in order.
async fn measure_all(rtts_ms: &[u64], window: Duration, cuts: bool) -> Vec<(Duration, Measured)> {
    let runs = rtts_ms.iter().map(|&ms| async move {
        let rtt = Duration::from_millis(ms);
        (rtt, measure(rtt, window, cuts).await)
    });
    let rows = futures::future::join_all(runs).await;
    let cut = if cuts {
        ", a's link cut for 1 s every 9 s"
    } else {
        ""
    };
    println!(
        "\nleaderless time over {window:?}, 10 s session{cut}:\n\
         | round trip | leaderless | longest gap | resubscriptions | leadership changes | subscribed at the end |\n\
         |---|---|---|---|---|---|"
    );
    for (rtt, m) in &rows {
        println!(
            "| {:>4.1} s | {:>5.1} s | {:>5.1} s | {:>2} | {:>2} | {:>4} |",
            rtt.as_secs_f64(),
            m.leaderless.as_secs_f64(),
            m.longest.as_secs_f64(),
            m.resubscriptions,
            m.changes,
            m.who,
        );
    }
    rows
}

/// How long [`round_trips_up_to_half_the_session_keep_the_leader`] holds
/// the latency: three session timeouts. The first slow ping lands within
/// one round trip plus the ping interval, every later one a round trip plus
/// a tick after the one before, so a connection that survives the switch
/// survives the rest; and a suspended leader shows within the window (the
/// old code lost it 2 s in, and gave its node up after 17 s).
const LATENCY_WINDOW: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_up_to_half_the_session_keep_the_leader() {
    // Issue 24 B: with a 10 s session, a round trip of 1, 2, 3 or 5 s on
    // the leader's established ZooKeeper connection (every chunk delayed
    // half of it each way, pipelined) changes nothing: a keeps leading and
    // subscribed. The four run at once to keep the test short.
    support::init_tracing();
    let rows = measure_all(&[1000, 2000, 3000, 5000], LATENCY_WINDOW, false).await;
    for (rtt, m) in rows {
        assert_eq!(
            (m.changes, m.who),
            (0, "a"),
            "{rtt:?} round trip: no leadership change, a still subscribed"
        );
        assert!(
            m.leaderless < Duration::from_millis(200),
            "{rtt:?} round trip: no time without a subscribed scheduler, measured {:?}",
            m.leaderless
        );
    }
}

/// The 60 s table of [`measure_all`] for round trips of 0.5 to 5 s.
async fn leaderless_table(cuts: bool) {
    support::init_tracing();
    let rtts_ms = [500, 1000, 2000, 3000, 5000];
    measure_all(&rtts_ms, Duration::from_secs(60), cuts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about 70 s; run with --ignored --nocapture"]
async fn leaderless_time_by_round_trip() {
    leaderless_table(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about 70 s; run with --ignored --nocapture"]
async fn leaderless_time_by_round_trip_with_cuts() {
    leaderless_table(true).await;
}

/// A server whose `minSessionTimeout` (4 s) is above `--zk-session-timeout
/// 2s` raises the ask (ZooKeeper Administrator's Guide, "Advanced
/// Configuration"): the replica logs a WARN with both figures and
/// `/api/v1/state` shows them in `zookeeper_session`; on a server that
/// grants the ask both figures are 2 s and nothing is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_timeout_raised_by_the_server_is_warned_of_and_shown() {
    support::mesos::init();
    let raising = ZkServer::start_with("minSessionTimeout=4000\n");
    let granting = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let a = Appliance::spawn(
        "a",
        &base_args(&raising.connect_string(), &tb.url(), "raised"),
    );
    let b = Appliance::spawn(
        "b",
        &base_args(&granting.connect_string(), &tb.url(), "granted"),
    );
    let session = |v: &serde_json::Value| v["zookeeper_session"].clone();
    let raised = a
        .wait_state("a ZooKeeper session", WAIT, |v| session(v).is_object())
        .await;
    assert_eq!(
        session(&raised),
        json!({"asked_timeout_seconds": 2.0, "timeout_seconds": 4.0}),
        "{raised}"
    );
    let log = a.log();
    let warning = log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("gave a session timeout"))
        .unwrap_or_else(|| panic!("no warning of the raised session timeout:\n{log}"));
    assert!(
        warning.contains("4.0 s where --zk-session-timeout asked 2.0 s")
            && warning.contains("asked_ms=2000")
            && warning.contains("negotiated_ms=4000"),
        "{warning}"
    );
    let granted = b
        .wait_state("a ZooKeeper session", WAIT, |v| session(v).is_object())
        .await;
    assert_eq!(
        session(&granted),
        json!({"asked_timeout_seconds": 2.0, "timeout_seconds": 2.0}),
        "{granted}"
    );
    assert!(
        !b.log().contains("gave a session timeout"),
        "a granted ask is not warned of:\n{}",
        b.log()
    );
}
