//! Offer handling of the real scheduler core (in-process replica, testbed
//! master, real ZooKeeper), judged by the calls the master received: SUPPRESS
//! once every service is at its instance count and REVIVE before launching
//! new work; declines carry `--decline-refuse-seconds`; a rescinded offer is
//! never accepted; the offer, launch and kill counters follow the calls;
//! offers a launch paced by the leader's budget waits for outlive their TTL.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use mesos_appliance::scheduler::config::CoreConfig;
use mesos_appliance::scheduler::{FrameworkState, ServiceSpec, Snapshot};
use mesos_appliance::testbed::{CallRecord, Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config, health_checked, running, services, zk_config};
use support::chaos_proxy::ChaosProxy;
use support::client::eventually;
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(30);

/// Offers are held for a minute while work is pending, so none expires (and
/// is declined without a filter) during a test.
fn config() -> CoreConfig {
    CoreConfig {
        offer_ttl: Duration::from_secs(60),
        ..core_config()
    }
}

fn web(instances: u32) -> ServiceSpec {
    let mut list = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.1, "mem": 16, "instances": instances}
    ]));
    list.remove(0)
}

async fn put(replica: &Replica, spec: ServiceSpec) {
    replica.put_service(spec).await.expect("service stored");
}

fn subscribed_with(service: &'static str, n: usize) -> impl Fn(&Snapshot) -> bool {
    move |s: &Snapshot| {
        s.framework.state == FrameworkState::Subscribed
            && running(s, service) == n
            && s.tasks
                .iter()
                .filter(|t| t.service == service && !t.is_terminal())
                // An unreachable task stays in its record (PARTITION_AWARE).
                .filter(|t| t.state.as_str_name() != "TASK_UNREACHABLE")
                .count()
                == n
    }
}

/// Scheduler calls of `kind` with `seq` above `after`.
fn calls_after(tb: &Testbed, kind: &str, after: u64) -> Vec<CallRecord> {
    tb.scheduler_calls(kind)
        .into_iter()
        .filter(|c| c.seq > after)
        .collect()
}

/// The first ACCEPT that launched `task_id`.
fn launch_of(tb: &Testbed, task_id: &str) -> CallRecord {
    tb.scheduler_calls("ACCEPT")
        .into_iter()
        .find(|c| c.launched_task_ids().iter().any(|t| t == task_id))
        .unwrap_or_else(|| panic!("no ACCEPT launched {task_id}"))
}

fn live_task_ids(s: &Snapshot, service: &str) -> BTreeSet<String> {
    s.tasks
        .iter()
        .filter(|t| t.service == service && !t.is_terminal())
        .map(|t| t.task_id.to_string())
        .collect()
}

async fn wait_for_call(tb: &Testbed, kind: &str, after: u64) -> CallRecord {
    let what = format!("a {kind} after call {after}");
    eventually(&what, WAIT, || !calls_after(tb, kind, after).is_empty()).await;
    calls_after(tb, kind, after).remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suppress_at_instance_count_and_revive_before_new_launches() {
    let tb = Testbed::start(TestbedConfig::for_tests(3)).await.unwrap();
    let replica = Replica::in_memory("r1", &tb.url(), vec![web(2)], config()).await;
    let s = replica
        .wait_for("2 web running", WAIT, subscribed_with("web", 2))
        .await;
    let first = live_task_ids(&s, "web");
    let last_launch = first.iter().map(|t| launch_of(&tb, t).seq).max().unwrap();
    // At the instance count: SUPPRESS, after the last launch.
    let suppress = wait_for_call(&tb, "SUPPRESS", last_launch).await;
    assert_eq!(suppress.status, 202, "{suppress:?}");
    assert!(
        tb.scheduler_calls("REVIVE").is_empty(),
        "nothing to revive yet: {:?}",
        tb.scheduler_calls("REVIVE")
    );

    // Scale up: REVIVE, then the launch.
    put(&replica, web(3)).await;
    let s = replica
        .wait_for("3 web running", WAIT, subscribed_with("web", 3))
        .await;
    let added: Vec<String> = live_task_ids(&s, "web")
        .difference(&first)
        .cloned()
        .collect();
    assert_eq!(added.len(), 1, "{added:?}");
    let launch = launch_of(&tb, &added[0]);
    let revives = calls_after(&tb, "REVIVE", suppress.seq);
    assert!(
        revives
            .first()
            .is_some_and(|r| r.seq < launch.seq && r.status == 202),
        "REVIVE after SUPPRESS ({}) and before the launch ({}): {revives:?}",
        suppress.seq,
        launch.seq
    );
    assert!(
        tb.scheduler_calls("ACCEPT")
            .iter()
            .all(|c| c.seq < suppress.seq || c.seq > revives[0].seq),
        "no ACCEPT while suppressed"
    );
    // At the count again: SUPPRESS again.
    let suppress = wait_for_call(&tb, "SUPPRESS", launch.seq).await;

    // Lose an agent with a web task: REVIVE, then its replacement.
    let before = live_task_ids(&replica.snapshot(), "web");
    let victim = replica
        .snapshot()
        .tasks
        .iter()
        .find(|t| t.service == "web" && !t.is_terminal())
        .map(|t| t.agent_id.clone())
        .unwrap();
    assert!(tb.make_agent_unreachable(&victim));
    let s = replica
        .wait_for("web replaced on another agent", WAIT, |s| {
            // The lost tasks stay TASK_UNREACHABLE (PARTITION_AWARE).
            subscribed_with("web", 3)(s)
                && s.tasks
                    .iter()
                    .filter(|t| t.service == "web" && !t.is_terminal())
                    .filter(|t| t.state.as_str_name() != "TASK_UNREACHABLE")
                    .all(|t| t.agent_id != victim)
        })
        .await;
    let replacements: Vec<String> = live_task_ids(&s, "web")
        .difference(&before)
        .cloned()
        .collect();
    assert!(!replacements.is_empty());
    let revive = calls_after(&tb, "REVIVE", suppress.seq);
    for task in &replacements {
        let launch = launch_of(&tb, task);
        assert!(
            revive.first().is_some_and(|r| r.seq < launch.seq),
            "REVIVE after SUPPRESS ({}) and before launching {task} ({}): {revive:?}",
            suppress.seq,
            launch.seq
        );
    }
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unused_offers_are_declined_with_the_configured_refuse_seconds() {
    const REFUSE: f64 = 42.5;
    let tb = Testbed::start(TestbedConfig::for_tests(3)).await.unwrap();
    let cfg = CoreConfig {
        decline_refuse_seconds: REFUSE,
        ..config()
    };
    let replica = Replica::in_memory("r1", &tb.url(), vec![web(1)], cfg).await;
    let s = replica
        .wait_for("1 web running", WAIT, subscribed_with("web", 1))
        .await;
    let launch = launch_of(&tb, live_task_ids(&s, "web").first().unwrap());
    wait_for_call(&tb, "SUPPRESS", launch.seq).await;
    // Scale up once more: the revived offers not used are declined too.
    put(&replica, web(2)).await;
    replica
        .wait_for("2 web running", WAIT, subscribed_with("web", 2))
        .await;
    let revive = wait_for_call(&tb, "REVIVE", 0).await;
    wait_for_call(&tb, "SUPPRESS", revive.seq).await;

    let declines = tb.scheduler_calls("DECLINE");
    let accepted: BTreeSet<String> = tb
        .scheduler_calls("ACCEPT")
        .iter()
        .flat_map(|c| {
            c.call["accept"]["offer_ids"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|o| o["value"].as_str().map(str::to_string))
        .collect();
    let declined: Vec<String> = declines
        .iter()
        .flat_map(|c| {
            c.call["decline"]["offer_ids"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|o| o["value"].as_str().map(str::to_string))
        .collect();
    // Three agents, one offer each, one used per round: two declined per round.
    assert!(
        declined.len() >= 4,
        "unused offers of both rounds declined: {declines:?}"
    );
    assert!(declined.iter().all(|d| !accepted.contains(d)));
    assert!(declines.iter().any(|c| c.seq < revive.seq));
    assert!(declines.iter().any(|c| c.seq > revive.seq));
    for decline in &declines {
        assert_eq!(decline.status, 202, "{decline:?}");
        assert_eq!(
            decline.call["decline"]["filters"]["refuse_seconds"].as_f64(),
            Some(REFUSE),
            "DECLINE without --decline-refuse-seconds: {}",
            decline.call
        );
    }
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescinded_offer_is_never_accepted() {
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    // `huge` never fits, so work stays pending and every offer is held.
    let specs = services(json!([
        {"name": "huge", "command": "x", "cpus": 64, "mem": 16, "instances": 1}
    ]));
    let replica = Replica::in_memory("r1", &tb.url(), specs, config()).await;
    let agents = tb.agents();
    let (lost, kept) = (agents[0].id.clone(), agents[1].id.clone());
    let s = replica
        .wait_for("an offer of each agent held", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
                && s.offers.iter().any(|o| o.agent_id == lost)
                && s.offers.iter().any(|o| o.agent_id == kept)
        })
        .await;
    let fid = s.framework.id.clone().unwrap();
    // The master's outstanding offers on the agent about to go: those are
    // what it rescinds (nothing else takes them meanwhile: they are held).
    let state = support::mesos::master_state(&tb.url()).await;
    let rescinded: BTreeSet<String> = state["frameworks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == fid.as_str())
        .flat_map(|f| f["offers"].as_array().cloned().unwrap_or_default())
        .filter(|o| o["slave_id"] == lost.as_str())
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    let held: BTreeSet<String> = s
        .offers
        .iter()
        .filter(|o| o.agent_id == lost)
        .map(|o| o.id.clone())
        .collect();
    assert!(!rescinded.is_empty());
    assert_eq!(
        rescinded, held,
        "the scheduler holds what the master offered"
    );

    assert!(tb.make_agent_unreachable(&lost));
    // Give the RESCIND time to arrive (it is local), without requiring the
    // scheduler to show it: a scheduler that ignores it must still be caught
    // by the ACCEPT check below.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline
        && replica
            .snapshot()
            .offers
            .iter()
            .any(|o| rescinded.contains(&o.id))
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // New work that would fit on either agent, one instance per host: a
    // scheduler that kept the rescinded offer would put one there.
    let mut spread = web(2);
    spread.constraints = vec!["hostname:UNIQUE".into()];
    put(&replica, spread).await;
    // The pass that placed one also found no place for the second: every
    // ACCEPT it was going to send has been sent.
    replica
        .wait_for("one web running, the other waiting", WAIT, |s| {
            running(s, "web") == 1
                && s.services
                    .iter()
                    .any(|x| x.spec.name == "web" && x.waiting.is_some())
        })
        .await;
    let accepts = tb.scheduler_calls("ACCEPT");
    assert!(!accepts.is_empty());
    for accept in &accepts {
        let ids: Vec<&str> = accept.call["accept"]["offer_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["value"].as_str())
            .collect();
        assert!(
            ids.iter().all(|id| !rescinded.contains(*id)),
            "ACCEPT of a rescinded offer {ids:?} (rescinded: {rescinded:?})"
        );
    }
    let s = replica.snapshot();
    let web_agents: Vec<&str> = s
        .tasks
        .iter()
        .filter(|t| t.service == "web")
        .map(|t| t.agent_id.as_str())
        .collect();
    assert!(
        web_agents.iter().all(|a| *a == kept),
        "web placed on the lost agent {lost}: {web_agents:?}"
    );
    assert!(
        !s.offers.iter().any(|o| rescinded.contains(&o.id)),
        "a rescinded offer is still held"
    );
    replica.stop().await;
}

/// The value of the sample `name` (labels included) in the registry's text.
fn metric(replica: &Replica, name: &str) -> f64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &replica.registry).unwrap();
    text.lines()
        .find_map(|line| {
            line.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(' '))
                .map(|v| v.trim().parse::<f64>().expect("a number"))
        })
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offer_launch_and_kill_counters_follow_the_calls() {
    const RECEIVED: &str = "mesos_appliance_offers_total{event=\"received\"}";
    const DECLINED: &str = "mesos_appliance_offers_total{event=\"declined\"}";
    const USED: &str = "mesos_appliance_offers_total{event=\"used\"}";
    const LAUNCHES: &str = "mesos_appliance_task_launches_total";
    const KILLS: &str = "mesos_appliance_task_kills_total";
    let tb = Testbed::start(TestbedConfig::for_tests(3)).await.unwrap();
    let replica = Replica::in_memory("r1", &tb.url(), vec![web(2)], config()).await;
    let s = replica
        .wait_for("2 web running", WAIT, subscribed_with("web", 2))
        .await;
    let last = live_task_ids(&s, "web")
        .iter()
        .map(|t| launch_of(&tb, t).seq)
        .max()
        .unwrap();
    wait_for_call(&tb, "SUPPRESS", last).await;
    let offer_ids = |kind: &str, field: &str| -> usize {
        tb.scheduler_calls(kind)
            .iter()
            .map(|c| c.call[field]["offer_ids"].as_array().map_or(0, Vec::len))
            .sum()
    };
    let launched: usize = tb
        .scheduler_calls("ACCEPT")
        .iter()
        .map(|c| c.launched_task_ids().len())
        .sum();
    assert_eq!(launched, 2);
    assert_eq!(metric(&replica, LAUNCHES), 2.0);
    assert_eq!(metric(&replica, USED), offer_ids("ACCEPT", "accept") as f64);
    assert_eq!(
        metric(&replica, DECLINED),
        offer_ids("DECLINE", "decline") as f64
    );
    assert!(
        metric(&replica, DECLINED) >= 1.0,
        "three agents, two tasks: one offer unused"
    );
    assert!(
        metric(&replica, RECEIVED) >= metric(&replica, USED) + metric(&replica, DECLINED),
        "every offer used or declined was received"
    );
    assert_eq!(metric(&replica, KILLS), 0.0);

    // Scale down: the surplus task is killed.
    put(&replica, web(1)).await;
    replica
        .wait_for("1 web running", WAIT, subscribed_with("web", 1))
        .await;
    let kills = tb.scheduler_calls("KILL");
    assert!(!kills.is_empty());
    assert_eq!(metric(&replica, KILLS), kills.len() as f64);
    assert_eq!(
        metric(&replica, LAUNCHES),
        2.0,
        "no launch for a scale-down"
    );
    replica.stop().await;
}

/// A framework that only waits out a restart backoff has nothing to place:
/// holding offers meanwhile keeps them from every other framework (the
/// master offers an agent's resources to one framework at a time,
/// `src/master/allocator/mesos/hierarchical.cpp`), and the Mesos scheduler
/// guide asks a framework without work to decline or SUPPRESS
/// (`docs/app-framework-development-guide.md`). One agent; `tally` has one
/// instance whose health check always fails and a 20 s backoff; once it
/// waits in its backoff, a second framework subscribes and needs that agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_in_backoff_does_not_hold_offers_from_other_frameworks() {
    use mesos_appliance::testbed::SimulatedHealth;

    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    tb.set_health("tally.", None, SimulatedHealth::Unhealthy);
    let specs = services(json!([health_checked("tally", 1, "20s", "20s")]));
    // The product's offer TTL (10 s).
    let hoarder = Replica::in_memory(
        "r1",
        &tb.url(),
        specs,
        CoreConfig {
            offer_ttl: Duration::from_secs(10),
            ..core_config()
        },
    )
    .await;
    hoarder
        .wait_for("tally.0 failed once", WAIT, |s| {
            s.tasks.iter().any(|t| t.is_terminal())
        })
        .await;
    // Past the failure's own pass and the master's next allocation.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let other = Replica::in_memory(
        "r2",
        &tb.url(),
        services(
            json!([{"name": "other", "command": "serve", "cpus": 0.1, "mem": 16,
            "instances": 1}]),
        ),
        CoreConfig {
            framework_name: "bystander".into(),
            ..core_config()
        },
    )
    .await;
    let started = std::time::Instant::now();
    other
        .wait_for("the bystander's task running", WAIT, |s| {
            running(s, "other") == 1
        })
        .await;
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "the bystander waited {waited:?} for an offer while tally only waited out its backoff"
    );
    other.stop().await;
    hoarder.stop().await;
}

/// A REVIVE clears every filter of the framework and makes the allocator
/// offer everything again (`HierarchicalAllocatorProcess::reviveOffers` in
/// `src/master/allocator/mesos/hierarchical.cpp`); other schedulers bound
/// them (Marathon's `--min_revive_offers_interval`, 5 s by default).
/// Twelve services of one instance each fail their health check at once
/// and wait out staggered 1 s backoffs: each end of a backoff is a new need
/// and REVIVEs, so the master gets several REVIVEs a second for as long as
/// the crash loop lasts, while the framework already holds every offer.
/// With `--min-revive-interval` 5 s, at most one every 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_of_many_instances_revives_at_a_bounded_rate() {
    use mesos_appliance::testbed::SimulatedHealth;

    let tb = support::testbed(TestbedConfig::for_tests(3)).await;
    tb.set_health("crash", None, SimulatedHealth::Unhealthy);
    let specs: Vec<serde_json::Value> = (0..12)
        .map(|i| {
            let backoff = format!("{}ms", 1000 + 83 * i);
            health_checked(&format!("crash{i:02}"), 1, &backoff, &backoff)
        })
        .collect();
    let replica = Replica::in_memory(
        "r1",
        &tb.url(),
        services(serde_json::Value::Array(specs)),
        // Marathon's bound; the default (1 s) keeps a lost instance's
        // replacement quick (issue 24 A).
        CoreConfig {
            min_revive_interval: Duration::from_secs(5),
            ..config()
        },
    )
    .await;
    replica
        .wait_for("every service failed once", WAIT, |s| {
            s.tasks.iter().filter(|t| t.is_terminal()).count() >= 12
        })
        .await;
    let before = tb.scheduler_calls("REVIVE").len();
    let window = Duration::from_secs(20);
    tokio::time::sleep(window).await;
    let revives = tb.scheduler_calls("REVIVE").len() - before;
    let launches = replica.snapshot().tasks.len();
    eprintln!("{revives} REVIVEs in {window:?}; {launches} tasks launched in all");
    assert!(
        revives <= 5,
        "{revives} REVIVEs in {window:?}, more than one every 5 s"
    );
    replica.stop().await;
}

/// A launch the leader paces (4 tasks under way at once,
/// `CoreConfig::launching_max`) over a slow ZooKeeper (600 ms each way, so
/// each round of records takes over a second) outlasts the 1 s offer TTL:
/// four agents of 4 cpus offer at once, each round fills the oldest offer
/// with four 1-cpu tasks, and the tasks held back need every other offer.
/// Those are kept (none expires while the launch holds tasks back): the
/// launch takes the four offers made at its start. Declined, their
/// resources would come back only after the master's default 5 s filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_a_paced_launch_waits_for_outlive_their_ttl() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(4)).await.unwrap();
    let proxy = ChaosProxy::start(zk.addr()).await;
    let cfg = CoreConfig {
        offer_ttl: Duration::from_secs(1),
        launching_max: 4,
        ..config()
    };
    let zk = zk_config(&proxy.connect_string(), "r1").with_session_timeout(Duration::from_secs(10));
    let replica = Replica::start_with(zk, &tb.url(), Vec::new(), cfg).await;
    replica
        .wait_for("subscribed", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
        })
        .await;
    proxy.set_symmetric_latency(Duration::from_millis(600));
    let big = services(json!([
        {"name": "web", "command": "serve", "cpus": 1, "mem": 16, "instances": 16}
    ]));
    put(&replica, big[0].clone()).await;
    replica
        .wait_for(
            "16 web running",
            Duration::from_secs(60),
            subscribed_with("web", 16),
        )
        .await;
    // Each round fills one of the four offers made together at the start
    // (the testbed numbers offers in the order it makes them: `<master>-O<n>`).
    // Had one of them expired, its agent's cpus would come back in a later
    // offer, and a later round would launch there.
    let mut accepted: Vec<u64> = tb
        .scheduler_calls("ACCEPT")
        .iter()
        .filter_map(|c| {
            c.call["accept"]["offer_ids"][0]["value"]
                .as_str()
                .map(str::to_string)
        })
        .filter_map(|id| id.rsplit_once("-O").and_then(|(_, n)| n.parse().ok()))
        .collect();
    accepted.sort_unstable();
    let first = accepted.first().copied().unwrap_or(0);
    assert_eq!(
        accepted,
        (first..first + 4).collect::<Vec<_>>(),
        "ACCEPTed offers"
    );
    // The end-of-test checks read the store.
    proxy.set_symmetric_latency(Duration::ZERO);
    replica.stop().await;
}
