//! The operator drains an agent on the master (`DRAIN_AGENT`, the testbed
//! imitating capture u): the scheduler acknowledges the drain's updates
//! within a second, replaces the tasks on other agents without restart
//! backoff, shows the agent draining then drained (snapshot and
//! `/api/v1/agents`), and places nothing there until `REACTIVATE_AGENT`.
//! Real ZooKeeper, in-process replica, testbed master.
//!
//! And the appliance's own drain (`docs/draining.md`) meeting a
//! scale-down, as a fresh user's trial did (a `serve` process, the JSON
//! API): the task on the drained agent is no longer wanted, so it is
//! killed without a replacement and the drain is done; and cancelled
//! after its `then: drain_agent`, giving the agent back at the master
//! (REACTIVATE_AGENT).

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::scheduler::Snapshot;
use mesos_appliance::scheduler::snapshot::AgentState;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::web::agents::AgentsView;
use serde_json::json;
use support::appliance::{Replica, core_config, running, services};
use support::zookeeper::ZkServer;
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(30);

fn web(instances: u32) -> mesos_appliance::scheduler::ServiceSpec {
    services(
        json!([{"name": "web", "command": "sleep 100000", "cpus": 0.1, "mem": 32,
        "instances": instances, "constraints": ["hostname:UNIQUE"],
        "restart_backoff": "20s", "restart_backoff_max": "60s"}]),
    )
    .remove(0)
}

fn agent_state(s: &Snapshot, agent: &str) -> Option<AgentState> {
    s.agents
        .iter()
        .find(|a| a.agent_id.as_str() == agent)
        .map(|a| a.state)
}

/// Live `web` tasks by agent.
fn live_agents(s: &Snapshot) -> Vec<String> {
    s.tasks
        .iter()
        .filter(|t| t.service == "web" && t.state == TaskState::TaskRunning && t.kill.is_none())
        .map(|t| t.agent_id.to_string())
        .collect()
}

async fn operator(tb: &Testbed, body: serde_json::Value) {
    let answer = support::mesos::operator(&tb.url(), body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_agent_s_tasks_are_replaced_at_once_and_it_gets_nothing_until_reactivated() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(4)).await.unwrap();
    let replica = Replica::start(
        &zk.connect_string(),
        "r1",
        &tb.url(),
        vec![web(3)],
        core_config(),
    )
    .await;
    let s = replica
        .wait_for("3 running", WAIT, |s| running(s, "web") == 3)
        .await;
    let before: BTreeSet<String> = live_agents(&s).into_iter().collect();
    let drained = before.iter().next().unwrap().clone();
    let old: Vec<String> = s
        .tasks
        .iter()
        .filter(|t| t.agent_id.as_str() == drained)
        .map(|t| t.task_id.to_string())
        .collect();
    assert_eq!(old.len(), 1);

    // Watch every snapshot for the agent's states, in order.
    let mut rx = replica.handle.subscribe();
    let watched = drained.clone();
    let seen = tokio::spawn(async move {
        let mut states: Vec<AgentState> = Vec::new();
        while rx.changed().await.is_ok() {
            let state = agent_state(&rx.borrow_and_update(), &watched);
            if let Some(state) = state
                && states.last() != Some(&state)
            {
                states.push(state);
                if state == AgentState::Drained {
                    break;
                }
            }
        }
        states
    });

    let drained_at = Instant::now();
    operator(
        &tb,
        json!({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": drained},
            "max_grace_period": {"seconds": 5}}}),
    )
    .await;
    // Acknowledged within 1 s: an acknowledged terminal update ends the
    // task on the master (it leaves the live tasks).
    loop {
        let acked = !tb.tasks().iter().any(|t| t.task_id == old[0]);
        if acked {
            break;
        }
        assert!(
            drained_at.elapsed() < Duration::from_secs(1),
            "TASK_KILLED of {} not acknowledged within 1 s",
            old[0]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let acked_after = drained_at.elapsed();
    // Replaced on another agent, without the 20 s restart backoff.
    let s = replica
        .wait_for("3 running again", Duration::from_secs(10), |s| {
            running(s, "web") == 3 && !live_agents(s).contains(&drained)
        })
        .await;
    let replaced_after = drained_at.elapsed();
    assert!(
        replaced_after < Duration::from_secs(10),
        "{replaced_after:?}"
    );
    let status = s.services.iter().find(|x| x.spec.name == "web").unwrap();
    assert_eq!(status.consecutive_failures, 0);
    assert!(status.next_launch_after.is_none());

    let states = tokio::time::timeout(Duration::from_secs(15), seen)
        .await
        .expect("the agent shows DRAINED (GET_AGENTS poll)")
        .unwrap();
    assert_eq!(
        states
            .iter()
            .filter(|s| **s != AgentState::Active)
            .collect::<Vec<_>>(),
        [&AgentState::Draining, &AgentState::Drained],
        "{states:?}"
    );
    // The JSON twin shows it too.
    let view = serde_json::to_value(AgentsView::new(&replica.snapshot())).unwrap();
    let entry = view["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent_id"] == drained.as_str())
        .cloned()
        .unwrap();
    assert_eq!(entry["state"], "drained");
    assert!(entry["hostname"].as_str().is_some_and(|h| !h.is_empty()));

    // A fourth instance can only go to the drained agent (hostname:UNIQUE):
    // it waits until REACTIVATE_AGENT.
    replica.put_service(web(4)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = replica.snapshot();
    assert_eq!(running(&s, "web"), 3);
    assert!(!live_agents(&s).contains(&drained));
    let reactivated_at = Instant::now();
    operator(
        &tb,
        json!({"type": "REACTIVATE_AGENT", "reactivate_agent": {"agent_id": {"value": drained}}}),
    )
    .await;
    let s = replica
        .wait_for("4 running", Duration::from_secs(20), |s| {
            running(s, "web") == 4 && live_agents(s).contains(&drained)
        })
        .await;
    assert_eq!(agent_state(&s, &drained), Some(AgentState::Active));
    eprintln!(
        "drain: acknowledged after {acked_after:?}, replaced after {replaced_after:?}; \
         back on the agent {:?} after REACTIVATE_AGENT",
        reactivated_at.elapsed()
    );
    replica.stop().await;
}

/// `worker`: `instances` tasks, one per host.
fn worker(instances: u32) -> serde_json::Value {
    json!({"name": "worker", "command": "sleep 100000", "cpus": 0.1, "mem": 32,
        "instances": instances, "constraints": ["hostname:UNIQUE"], "kill_grace_period": "1s"})
}

/// The master's live `worker` tasks: (task ID, agent ID).
fn worker_tasks(tb: &Testbed) -> Vec<(String, String)> {
    tb.tasks()
        .into_iter()
        .filter(|t| !t.completed && t.task_id.starts_with("worker."))
        .map(|t| (t.task_id, t.agent_id))
        .collect()
}

/// The trial's steps: two agents, `worker` on both (UNIQUE), agent of
/// `worker.1` drained with `min_healthy: 0` (its replacement has nowhere
/// to go), then `worker` scaled to one instance. The task on the drained
/// agent is killed as scaled down, the drain is done with it shown
/// `stopped`, and exactly one `worker` task runs, not on that agent.
/// (Before, it ran on with no kill and the drain waited forever for an
/// offer elsewhere for a replacement nobody wanted.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_during_a_drain_kills_the_unwanted_task_and_the_drain_ends() {
    use support::processes::{Appliance, base_args, services_file, tail};
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args(&zk.connect_string(), &tb.url(), "drain-scale");
    let file = services_file(dir.path(), "services.json", &json!([worker(2)]));
    args.extend(["--services".into(), file.display().to_string()]);
    let a = Appliance::spawn("a", &args);
    let deadline = std::time::Instant::now() + WAIT;
    while worker_tasks(&tb).len() < 2
        || tb
            .tasks()
            .iter()
            .any(|t| !t.completed && t.state != TaskState::TaskRunning)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "2 running: {:?}\n{}",
            worker_tasks(&tb),
            tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (leaving, agent) = worker_tasks(&tb)
        .into_iter()
        .find(|t| t.0.starts_with("worker.1."))
        .expect("worker.1");
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 0}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = a
        .send(reqwest::Method::PUT, "/api/v1/services/worker", worker(1))
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    // The drain is done, the task shown stopped with the kill's reason.
    let drain = drain_until(&a, &agent, "the drain done", |d| d["state"] == "done").await;
    assert_eq!(
        (&drain["moved"], &drain["blocked"], &drain["stopped"]),
        (&json!(0), &json!(0), &json!(1)),
        "{drain}"
    );
    assert_eq!(drain["tasks"][0]["task_id"], leaving.as_str(), "{drain}");
    assert_eq!(drain["tasks"][0]["progress"], "stopped", "{drain}");
    let reason = drain["tasks"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("scaled down"), "{drain}");
    // Exactly one worker runs, at the master and in the appliance's list,
    // and not on the drained agent.
    let live = worker_tasks(&tb);
    assert_eq!(live.len(), 1, "{live:?}");
    assert_ne!(live[0].1, agent, "{live:?}");
    let (_, tasks) = a.get("/api/v1/tasks").await.expect("the tasks");
    let running: Vec<&serde_json::Value> = tasks["tasks"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter(|t| t["state"] == "TASK_RUNNING" && t["kill"].is_null())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(running.len(), 1, "{tasks}");
}

/// A `mesos-appliance` process (framework `group`) on `zk` and `tb` with
/// `worker` of one instance, once its task is at the master; the
/// services file's directory lives as long as the second value.
async fn one_worker(
    zk: &ZkServer,
    tb: &Testbed,
    group: &str,
) -> (support::processes::Appliance, tempfile::TempDir) {
    one_worker_with(zk, tb, group, &[]).await
}

/// [`one_worker`] with `extra` flags (`support::processes::with_flags`).
async fn one_worker_with(
    zk: &ZkServer,
    tb: &Testbed,
    group: &str,
    extra: &[&str],
) -> (support::processes::Appliance, tempfile::TempDir) {
    use support::processes::{Appliance, base_args, services_file, tail, with_flags};
    let dir = tempfile::tempdir().unwrap();
    let args = base_args(&zk.connect_string(), &tb.url(), group);
    let mut args = with_flags(args, extra);
    let file = services_file(dir.path(), "services.json", &json!([worker(1)]));
    args.extend(["--services".into(), file.display().to_string()]);
    let a = Appliance::spawn("a", &args);
    let deadline = std::time::Instant::now() + WAIT;
    while worker_tasks(tb).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (a, dir)
}

/// The `drain` of `agent` in `a`'s `/api/v1/agents` (null without one).
async fn drain_of(a: &support::processes::Appliance, agent: &str) -> serde_json::Value {
    let body = a.get("/api/v1/agents").await.map(|(_, b)| b);
    drain_in(&body.unwrap_or_default(), agent)
}

/// The `drain` of `agent` in an answer of `/api/v1/agents` (null without
/// one).
fn drain_in(agents: &serde_json::Value, agent: &str) -> serde_json::Value {
    agents["agents"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["agent_id"] == agent))
        .map(|e| e["drain"].clone())
        .unwrap_or_default()
}

/// Waits until `a`'s drain of `agent` made its `then` call and the master
/// shows the agent's drain `state`, then cancels the drain.
async fn cancel_once_the_master_shows(
    a: &support::processes::Appliance,
    tb: &Testbed,
    agent: &str,
    state: &str,
) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let drain = drain_of(a, agent).await;
        let at_master = master_agent(tb, agent).await;
        if drain["then_called"] == true && at_master["drain_info"]["state"] == state {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not {state} at the master: {drain} {at_master}\n{}",
            support::processes::tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = a
        .send(
            reqwest::Method::DELETE,
            &format!("/api/v1/agents/{agent}/drain"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

/// GET_AGENTS' entry of `agent` at the testbed master.
async fn master_agent(tb: &Testbed, agent: &str) -> serde_json::Value {
    let answer = support::mesos::operator(&tb.url(), json!({"type": "GET_AGENTS"})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
    body["get_agents"]["agents"]
        .as_array()
        .and_then(|l| l.iter().find(|a| a["agent_info"]["id"]["value"] == agent))
        .cloned()
        .unwrap_or_default()
}

/// A drain with `then: drain_agent`, done at once (nothing of ours
/// there), drains the agent at the master; cancelling it gives the agent
/// back at the master too: REACTIVATE_AGENT (`docs/draining.md`), shown
/// `reactivated` in the drain. (Before, the agent stayed DRAINED and
/// deactivated at the master though the docs said it takes tasks again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_drain_after_its_drain_agent_reactivates_the_agent_at_the_master() {
    use support::processes::tail;
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let (a, _dir) = one_worker(&zk, &tb, "drain-reactivate").await;
    let busy = worker_tasks(&tb)[0].1.clone();
    let agent = tb
        .agents()
        .into_iter()
        .map(|v| v.id)
        .find(|id| *id != busy)
        .expect("the other agent");
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 1, "then": "drain_agent"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    cancel_once_the_master_shows(&a, &tb, &agent, "DRAINED").await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let drain = drain_of(&a, &agent).await;
        let at_master = master_agent(&tb, &agent).await;
        if drain["reactivated"] == true
            && at_master["deactivated"] == false
            && at_master.get("drain_info").is_none()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not reactivated at the master: {drain} {at_master}\n{}",
            tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A drain with `then: drain_agent` cancelled while the master still
/// drains the agent (another framework's task there has not acknowledged
/// its TASK_KILLED): the master refuses REACTIVATE_AGENT ("Agent is still
/// in the DRAINING state", `Master::Http::_reactivateAgent`), the drain
/// shows the refusal and that it will try again, and once the other
/// framework's update is acknowledged and the agent is DRAINED the
/// appliance sends it again and the agent is back at the master. (Before,
/// the refusal was final: the agent stayed drained and deactivated.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reactivate_refused_while_the_master_drains_is_sent_again_once_drained() {
    use support::mesos::{Subscription, acknowledge, call, launch, subscribe};
    use support::processes::tail;
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let (a, _dir) = one_worker(&zk, &tb, "drain-retry").await;
    let busy = worker_tasks(&tb)[0].1.clone();
    let agent = tb
        .agents()
        .into_iter()
        .map(|v| v.id)
        .find(|id| *id != busy)
        .expect("the other agent");
    // Another framework runs a task on the agent.
    let mut other: Subscription = subscribe(
        &tb.url(),
        json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
            "user": "root", "name": "other", "failover_timeout": 60.0}}}),
    )
    .await;
    let other_id = other.subscribed().await;
    let offer = loop {
        let event = other.expect("OFFERS").await;
        let offers = event["offers"]["offers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(o) = offers
            .into_iter()
            .find(|o| o["agent_id"]["value"] == agent.as_str())
        {
            break o;
        }
    };
    call(
        &tb.url(),
        &other.stream_id,
        launch(&other_id, &offer, &[("other-1", 0.1, 32.0)]),
    )
    .await;
    for _ in 0..2 {
        let status = other.expect_update("other-1").await;
        call(&tb.url(), &other.stream_id, acknowledge(&other_id, &status)).await;
    }
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 1, "then": "drain_agent"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // The master kills the other framework's task; unacknowledged, the
    // agent stays DRAINING.
    let killed = other.expect_update("other-1").await;
    assert_eq!(killed["reason"], "REASON_AGENT_DRAINING", "{killed}");
    cancel_once_the_master_shows(&a, &tb, &agent, "DRAINING").await;
    // Refused: shown, with the retry to come.
    let drain = drain_until(&a, &agent, "the refusal shown", |d| {
        d["reactivate_retry"] == true
    })
    .await;
    let error = drain["reactivate_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("Agent is still in the DRAINING state"),
        "{drain}"
    );
    assert_eq!(drain["reactivated"], false, "{drain}");
    // The other framework acknowledges: DRAINED, and the appliance's
    // REACTIVATE_AGENT follows.
    call(&tb.url(), &other.stream_id, acknowledge(&other_id, &killed)).await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let drain = drain_of(&a, &agent).await;
        let at_master = master_agent(&tb, &agent).await;
        if drain["reactivated"] == true
            && drain["reactivate_retry"] == false
            && drain["reactivate_error"].is_null()
            && at_master["deactivated"] == false
            && at_master.get("drain_info").is_none()
        {
            assert_eq!(drain["reactivate_tries"], 2, "{drain}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not reactivated at the master: {drain} {at_master}\n{}",
            tail(&a.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `a`'s drain of `agent` until `done` holds for it.
async fn drain_until(
    a: &support::processes::Appliance,
    agent: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let agents = a
        .wait_get("/api/v1/agents", what, WAIT, |b| done(&drain_in(b, agent)))
        .await;
    drain_in(&agents, agent)
}

/// The trial's fault: a drain whose replacement the agent holds in
/// TASK_STAGING (`hold-staging`). With `--task-launch-timeout 3s` the
/// drain's wait names the copy's state, its age and the timeout; the
/// service shows the task launched and not running; the held copy is
/// killed past the timeout (the events say why), a new copy runs once
/// the hold is lifted, and the drain ends done with the task moved.
/// (Before, the drain showed "waiting" with no deadline, the timeout
/// could not be set, and the Services page said all was well.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_held_in_staging_is_replaced_after_the_launch_timeout_and_the_drain_ends() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let (a, _dir) =
        one_worker_with(&zk, &tb, "drain-staging", &["--task-launch-timeout", "3s"]).await;
    let (leaving, agent) = worker_tasks(&tb)[0].clone();
    // Running as the appliance knows it (not only at the master): no task
    // of `worker` is launched and not running.
    a.wait_get("/api/v1/services", "worker running", WAIT, |b| {
        let worker = &b["services"][0];
        worker["running"] == 1 && worker["starting_tasks"] == 0
    })
    .await;
    tb.hold_staging("worker.0.");
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 1}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // The wait names the held copy's state, age and deadline.
    let drain = drain_until(&a, &agent, "no wait on a TASK_STAGING copy", |d| {
        d["tasks"][0]["reason"].as_str().is_some_and(|r| {
            r.contains("is TASK_STAGING for")
                && r.ends_with("killed and replaced after 3s (--task-launch-timeout)")
        })
    })
    .await;
    assert_eq!(
        drain["tasks"][0]["progress"], "waiting_for_health",
        "{drain}"
    );
    let held = drain["tasks"][0]["replacement"]
        .as_str()
        .expect("the held copy")
        .to_string();
    let reason = drain["tasks"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.ends_with("killed and replaced after 3s (--task-launch-timeout)"),
        "{drain}"
    );
    // The service shows a task launched and not running (polled: on a
    // loaded machine the held copy may be between its kill and the next).
    a.wait_get(
        "/api/v1/services",
        "a task launched, not running",
        WAIT,
        |b| {
            let worker = &b["services"][0];
            worker["starting_tasks"] == 1 && worker["starting_since"].is_number()
        },
    )
    .await;
    // Past the timeout the held copy is killed, the events say why; then
    // the hold is lifted (a copy launched before that is held and killed
    // in turn).
    let killing =
        format!("killing {held}: stuck in TASK_STAGING for more than 3s (--task-launch-timeout)");
    a.wait_get("/api/v1/events?kind=kill", &killing, WAIT, |events| {
        events["events"]
            .as_array()
            .is_some_and(|l| l.iter().any(|e| e["message"] == killing.as_str()))
    })
    .await;
    tb.clear_faults();
    let drain = drain_until(&a, &agent, "the drain not done", |d| d["state"] == "done").await;
    assert_eq!(
        (&drain["moved"], &drain["ended"]),
        (&json!(1), &json!(0)),
        "{drain}"
    );
    assert_eq!(drain["tasks"][0]["task_id"], leaving.as_str(), "{drain}");
    assert_eq!(drain["tasks"][0]["progress"], "moved", "{drain}");
    assert_ne!(drain["tasks"][0]["replacement"], held.as_str(), "{drain}");
}

/// The trial's other fault: a drain runs while the operator brings the
/// agent's machine DOWN (a maintenance window, START_MAINTENANCE): the
/// master ends its task with TASK_LOST, no kill of ours. The drain ends
/// done listing it `ended`, with the master's reason. (Before, it ended
/// "0 moved, 0 stopped" with `tasks: []`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_lost_when_the_drained_agent_goes_down_is_listed_at_the_drains_end() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let (a, _dir) = one_worker(&zk, &tb, "drain-down").await;
    let (lost, agent) = worker_tasks(&tb)[0].clone();
    let hostname = tb
        .agents()
        .into_iter()
        .find(|v| v.id == agent)
        .map(|v| v.hostname)
        .expect("the agent");
    // One agent: the replacement has nowhere to go, the task stays.
    let (status, body) = a
        .post(
            &format!("/api/v1/agents/{agent}/drain"),
            json!({"min_healthy": 1}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    drain_until(&a, &agent, "not blocked", |d| {
        d["tasks"][0]["progress"] == "blocked"
    })
    .await;
    let machine = json!([{"hostname": hostname, "ip": "127.0.0.1"}]);
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    operator(
        &tb,
        json!({"type": "UPDATE_MAINTENANCE_SCHEDULE", "update_maintenance_schedule": {
            "schedule": {"windows": [{"machine_ids": machine, "unavailability": {
                "start": {"nanoseconds": start.as_nanos() as i64},
                "duration": {"nanoseconds": 600_000_000_000i64}}}]}}}),
    )
    .await;
    operator(
        &tb,
        json!({"type": "START_MAINTENANCE", "start_maintenance": {"machines": machine}}),
    )
    .await;
    let drain = drain_until(&a, &agent, "the drain not done", |d| d["state"] == "done").await;
    assert_eq!(
        (&drain["moved"], &drain["stopped"], &drain["ended"]),
        (&json!(0), &json!(0), &json!(1)),
        "{drain}"
    );
    assert_eq!(drain["tasks"][0]["task_id"], lost.as_str(), "{drain}");
    assert_eq!(drain["tasks"][0]["progress"], "ended", "{drain}");
    let reason = drain["tasks"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("ended on the agent: TASK_LOST, REASON_AGENT_REMOVED"),
        "{drain}"
    );
}
