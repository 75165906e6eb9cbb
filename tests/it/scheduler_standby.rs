//! What a follower and a new leader show on a real ZooKeeper and the
//! testbed: the standby view (`src/scheduler/standby.rs`) follows what its
//! record mirror read, a rewritten task record included; and what is not
//! read yet is shown as loading (`Snapshot::loading`), never as none.

use crate::support;

use std::time::Duration;

use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::scheduler::FrameworkState;
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(30);

/// r2 follows r1, which runs 3 tasks. The service is scaled to 2 through
/// r1 (as `PUT /api/v1/services/web` does): r1 kills one task, whose
/// record is rewritten (TASK_KILLED), neither created nor deleted, so the
/// records' count and keys stay the same. r2 shows it killed within two
/// refreshes (`standby::REFRESH`), not a minute later (`STALE_AFTER`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_shows_a_task_killed_through_the_leader_within_seconds() {
    let zk = ZkServer::start();
    let tb = mesos_appliance::testbed::Testbed::start(
        mesos_appliance::testbed::TestbedConfig::for_tests(3),
    )
    .await
    .unwrap();
    let spec = |instances: u32| {
        json!({"name": "web", "command": "serve", "cpus": 0.2, "mem": 64,
            "instances": instances})
    };
    let specs = services(json!([spec(3)]));
    let (connect, master) = (zk.connect_string(), tb.url());
    let start =
        |name: &'static str| Replica::start(&connect, name, &master, specs.to_vec(), core_config());
    let first = start("r1").await;
    first
        .wait_for("3 running", WAIT, |s| running(s, "web") == 3)
        .await;
    let second = start("r2").await;
    second
        .wait_for("r2 follows and shows the 3 tasks", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && running(s, "web") == 3
        })
        .await;

    let scaled = services(json!([spec(2)])).remove(0);
    first.put_service(scaled).await.expect("scaled to 2");
    let killed = |s: &mesos_appliance::scheduler::Snapshot| {
        s.tasks
            .iter()
            .find(|t| t.service == "web" && t.state == TaskState::TaskKilled)
            .map(|t| t.task_id.to_string())
    };
    let s = first
        .wait_for("r1 killed one task", WAIT, |s| killed(s).is_some())
        .await;
    let id = killed(&s).expect("a killed task");
    assert_eq!(s.tasks.len(), 3, "the killed task's record is kept");
    let shown = tokio::time::Instant::now();
    second
        .wait_for("r2 shows the task killed", Duration::from_secs(8), |s| {
            s.tasks
                .iter()
                .any(|t| t.task_id.as_str() == id && t.state == TaskState::TaskKilled)
        })
        .await;
    eprintln!("r2 showed {id} killed after {:?}", shown.elapsed());
    assert_eq!(running(&second.snapshot(), "web"), 2);

    second.stop().await;
    first.stop().await;
}

/// r2 follows r1, which runs 3 tasks, then takes over. Every snapshot r2
/// publishes from its start to its first full view as leader either
/// shows the services and tasks or says they are loading: never a
/// confident "no services, no tasks" while the store holds them (a new
/// leader showed 0 of each for 0.1–0.2 s while subscribing, before its
/// load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_shows_loading_not_zero_before_its_load() {
    let zk = ZkServer::start();
    let tb = mesos_appliance::testbed::Testbed::start(
        mesos_appliance::testbed::TestbedConfig::for_tests(3),
    )
    .await
    .unwrap();
    let specs = services(json!([
        {"name": "web", "command": "serve", "cpus": 0.2, "mem": 64, "instances": 3}
    ]));
    let (connect, master) = (zk.connect_string(), tb.url());
    let start =
        |name: &'static str| Replica::start(&connect, name, &master, specs.to_vec(), core_config());
    let first = start("r1").await;
    first
        .wait_for("3 running", WAIT, |s| running(s, "web") == 3)
        .await;
    let second = start("r2").await;
    // Every snapshot r2 publishes, as a reader sees them.
    let mut rx = second.handle.subscribe();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            let s = rx.borrow_and_update().clone();
            let leads = s.framework.state == FrameworkState::Subscribed;
            if (s.tasks.is_empty() || s.services.is_empty()) && !s.loading {
                seen.push(format!(
                    "{:?} ({:?}): {} services, {} tasks, not loading",
                    s.framework.state,
                    s.leadership.role(),
                    s.services.len(),
                    s.tasks.len()
                ));
            }
            if leads && running(&s, "web") == 3 && !s.loading {
                return seen;
            }
            if rx.changed().await.is_err() {
                return seen;
            }
        }
    });
    second
        .wait_for("r2 follows and shows the 3 tasks", WAIT, |s| {
            s.framework.state == FrameworkState::Standby && running(s, "web") == 3
        })
        .await;
    first.stop().await;
    let seen = tokio::time::timeout(WAIT, watcher)
        .await
        .expect("r2 took over and loaded")
        .expect("the watcher");
    assert!(seen.is_empty(), "shown as none while stored: {seen:#?}");
    second.stop().await;
}

/// The agents view on every replica and after a failover (the processes,
/// a real ZooKeeper, the testbed). A drain started through the leader `a`
/// is shown by the follower `b` from ZooKeeper: its `/api/v1/agents`
/// lists the drained agent with the drain as stored and the agent of the
/// task records, each in state `unknown`, says which fields it cannot know
/// (`unknown_fields`, `as_of`), and its page says it is not the master's
/// state. Once `a` stops and `b` leads, each agent shows the master's
/// `registered_time` (GET_AGENTS), from before the failover, beside `b`'s
/// own `since`. (Before, a follower listed no agent at all, and a new
/// leader showed only "since" its subscription, seconds old.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_shows_the_drains_and_a_new_leader_the_master_s_registration() {
    use mesos_appliance::testbed::{Testbed, TestbedConfig};
    use support::processes::{Appliance, base_args, framework_state, services_file, tail};
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args(&zk.connect_string(), &tb.url(), "agents-view");
    let worker = json!([{"name": "worker", "command": "sleep 100000", "cpus": 0.1, "mem": 32,
        "instances": 1, "kill_grace_period": "1s"}]);
    let file = services_file(dir.path(), "services.json", &worker);
    args.extend(["--services".into(), file.display().to_string()]);
    let mut a = Appliance::spawn("a", &args);
    a.wait_state("a subscribed", WAIT, |s| framework_state(s) == "subscribed")
        .await;
    let live = || -> Vec<(String, String)> {
        tb.tasks()
            .into_iter()
            .filter(|t| !t.completed && t.task_id.starts_with("worker."))
            .map(|t| (t.task_id, t.agent_id))
            .collect()
    };
    let deadline = std::time::Instant::now() + WAIT;
    while live().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (task, busy) = live()[0].clone();
    let empty = tb
        .agents()
        .into_iter()
        .map(|v| v.id)
        .find(|id| *id != busy)
        .expect("the other agent");
    let b = Appliance::spawn("b", &args);
    b.wait_state("b follows", WAIT, |s| framework_state(s) == "standby")
        .await;
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{empty}/drain"),
            json!({"min_healthy": 1, "reason": "disk swap"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let entry = |view: &serde_json::Value, agent: &str| {
        view["agents"]
            .as_array()
            .and_then(|l| l.iter().find(|e| e["agent_id"] == agent))
            .cloned()
            .unwrap_or_default()
    };
    // The follower: the drain from ZooKeeper within a few refreshes.
    let view = b
        .wait_get(
            "/api/v1/agents",
            "the follower shows the drain",
            WAIT,
            |view| entry(view, &empty)["drain"]["state"] == "done" && !entry(view, &busy).is_null(),
        )
        .await;
    assert_eq!(view["leading"], false, "{view}");
    assert!(view["as_of"].as_f64().is_some_and(|t| t > 0.0), "{view}");
    let unknown: Vec<&str> = view["unknown_fields"]
        .as_array()
        .map(|l| l.iter().filter_map(|f| f.as_str()).collect())
        .unwrap_or_default();
    for field in [
        "agents[].state",
        "agents[].since",
        "agents[].registered_time",
    ] {
        assert!(unknown.contains(&field), "{field}: {view}");
    }
    let drained = entry(&view, &empty);
    assert_eq!(drained["state"], "unknown", "{drained}");
    assert_eq!(drained["drain"]["reason"], "disk swap", "{drained}");
    let other = entry(&view, &busy);
    assert_eq!(other["state"], "unknown", "{other}");
    assert_eq!(other["tasks"], json!([task]), "{other}");
    // Its page: the agents, no buttons, and that the state is the leader's.
    let html = support::mesos::client()
        .get(format!("{}/agents", b.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"class="muted follower-view""#), "{html}");
    assert!(html.contains("known only to the leader"), "{html}");
    assert!(html.contains(&format!(r#"data-agent="{empty}""#)), "{html}");
    assert!(html.contains(r#"class="state-unknown muted""#), "{html}");
    assert!(
        !html.contains(">active<"),
        "no state of the master's: {html}"
    );
    assert!(!html.contains("drain-start"), "{html}");
    // On the leader: the master's word, no unknown fields.
    let view = a
        .get("/api/v1/agents")
        .await
        .map(|(_, v)| v)
        .unwrap_or_default();
    assert_eq!(
        (&view["leading"], &view["as_of"]),
        (&json!(true), &json!(null))
    );
    assert_eq!(view["unknown_fields"], json!([]), "{view}");

    // Failover: b leads; the master's registration is from before it.
    let stopped = mesos_appliance::util::unix_now_secs();
    a.signal(libc::SIGTERM);
    a.wait_exit(WAIT).await;
    let view = b
        .wait_get(
            "/api/v1/agents",
            "the new leader shows the registration",
            WAIT,
            |view| view["leading"] == true && entry(view, &busy)["registered_time"].is_number(),
        )
        .await;
    assert!(
        view["listed_at"].as_f64().is_some_and(|t| t >= stopped),
        "{view}"
    );
    let busy = entry(&view, &busy);
    let registered = busy["registered_time"].as_f64().unwrap();
    let since = busy["since"].as_f64().unwrap();
    assert!(
        registered < stopped && stopped <= since,
        "registered {registered}, failover at {stopped}, seen since {since}: {busy}"
    );
    assert_eq!(busy["state"], "active", "{busy}");
}

/// A task held in TASK_STAGING by the master is shown as launched and not
/// running on the follower too (`starting_tasks`, counted from the
/// records it read, `src/scheduler/standby.rs`), as on the leader: a
/// service whose instance never starts does not look healthy anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_shows_a_task_stuck_in_staging_as_starting() {
    let zk = ZkServer::start();
    let tb = mesos_appliance::testbed::Testbed::start(
        mesos_appliance::testbed::TestbedConfig::for_tests(2),
    )
    .await
    .unwrap();
    tb.hold_staging("web.1.");
    let specs = services(json!([{"name": "web", "command": "serve", "cpus": 0.2,
        "mem": 64, "instances": 2}]));
    let (connect, master) = (zk.connect_string(), tb.url());
    let start =
        |name: &'static str| Replica::start(&connect, name, &master, specs.to_vec(), core_config());
    let starting = |s: &mesos_appliance::scheduler::Snapshot| {
        s.services
            .iter()
            .find(|x| x.spec.name == "web")
            .map(|x| (x.starting_tasks, x.starting_since.is_some()))
    };
    let first = start("r1").await;
    first
        .wait_for("1 running, 1 held in staging", WAIT, |s| {
            running(s, "web") == 1 && starting(s) == Some((1, true))
        })
        .await;
    let second = start("r2").await;
    second
        .wait_for("r2 follows and shows the task held in staging", WAIT, |s| {
            s.framework.state == FrameworkState::Standby
                && running(s, "web") == 1
                && starting(s) == Some((1, true))
        })
        .await;
}
