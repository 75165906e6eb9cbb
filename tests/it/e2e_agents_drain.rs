//! The Agents page's SLA-aware drain in headless Chromium, end to end: a
//! real replica (scheduler core, web layer, real ZooKeeper) against the
//! testbed master with three agents. The operator opens the Agents page,
//! drains the agent of one `web` task through the confirmation form
//! (min_healthy, then, reason), follows the progress on the live page
//! until the drain is done (the task moved to another agent), cancels it,
//! and finds the drain marked on the overview's charts. Screenshots:
//! `$CARGO_TARGET_DIR/screenshots/agents-*.png`.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mesos_appliance::app::{Running, start_replica};
use mesos_appliance::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use mesos_appliance::mesos::client::ClientConfig;
use mesos_appliance::mesos::detector::MasterSpec;
use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::scheduler::Snapshot;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::util::zk::ZkUrl;
use mesos_appliance::web::WebConfig;
use serde_json::json;
use support::appliance::{core_config, services};
use support::browser::Browser;
use support::checks::{Checks, Store, View};
use support::replicas::{SESSION, replica};
use support::zookeeper::{ZkServer, free_port};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

struct Replica {
    url: String,
    running: Running,
    stop: CancellationToken,
    checks: Checks,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let failure = self.checks.at_drop();
        self.stop.cancel();
        if let Some(failure) = failure {
            panic!("{failure}");
        }
    }
}

async fn replica_on(zk: &ZkServer, tb: &Testbed) -> Replica {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let zk_url = ZkUrl::parse(&format!("zk://{}/agents-ui", zk.connect_string()), "x").unwrap();
    let mut info = replica("a");
    info.advertised_url = url.clone();
    let coordinator = Arc::new(
        ZkCoordinator::start(ZkConfig::new(zk_url.clone(), info).with_session_timeout(SESSION))
            .await
            .unwrap(),
    );
    let mut core = core_config();
    core.framework_name = "agents-ui".into();
    core.snapshot_interval = Duration::from_millis(100);
    let specs = services(json!([
        {"name": "web", "command": "sleep 600", "cpus": 0.1, "mem": 32, "instances": 2,
         "constraints": ["hostname:UNIQUE"]}
    ]));
    let mut web = WebConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), url.clone());
    web.handler_timeout = Duration::from_secs(10);
    let stop = CancellationToken::new();
    let client = ClientConfig::new(MasterSpec::parse(&tb.url()).unwrap());
    let running = start_replica(core, client, coordinator, specs, web, stop.clone())
        .await
        .unwrap();
    let checks = Checks::new(
        "a",
        &tb.url(),
        View::Snapshot(running.handle.clone()),
        Store::Zk(zk_url),
    );
    Replica {
        url,
        running,
        stop,
        checks,
    }
}

/// The agents of the live `web` tasks.
fn web_agents(s: &Snapshot) -> Vec<String> {
    s.tasks
        .iter()
        .filter(|t| t.service == "web" && t.state == TaskState::TaskRunning && t.kill.is_none())
        .map(|t| t.agent_id.to_string())
        .collect()
}

async fn wait(r: &Replica, what: &str, cond: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = r.running.handle.snapshot();
        if cond(&s) {
            return (*s).clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} not reached within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_drains_an_agent_from_the_agents_page_and_cancels_it() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(3)).await.unwrap();
    let r = replica_on(&zk, &tb).await;
    let s = wait(&r, "2 web tasks running, 3 agents known", |s| {
        web_agents(s).len() == 2 && s.agents.len() == 3
    })
    .await;
    let b = Browser::start().await;
    b.goto(&format!("{}/agents", r.url)).await;
    assert_eq!(b.count("#agents a.drain-start").await, 3);
    b.screenshot("agents-01-before").await;

    // A floor above the service's instances is capped at them
    // (`docs/draining.md`): a move keeps them available, so the task
    // moves and the drain is done.
    let blocked = web_agents(&s)[1].clone();
    let brow = format!("tr[data-agent='{blocked}']");
    b.click(&format!("{brow} a.drain-start")).await;
    b.wait_for_path(&format!("/agents/{blocked}/drain")).await;
    b.type_into("#drain-min-healthy", "3").await;
    b.click("#drain-submit").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    b.click("#result-agents").await;
    b.wait_for_path("/agents").await;
    let bdetail = format!("tr[data-drain-of='{blocked}']");
    b.wait_for_text(&format!("{brow} .drain-state"), "done", WAIT)
        .await;
    let text = b.text(&bdetail).await;
    assert!(
        text.contains("1 moved · 0 waiting for health · 0 blocked"),
        "{text}"
    );
    assert_eq!(b.count(&format!("{bdetail} li.progress-moved")).await, 1);
    assert_eq!(b.count(&format!("{brow} a.drain-start")).await, 0);
    b.screenshot("agents-02-capped").await;
    b.click(&format!("{bdetail} button.cancel-drain-button"))
        .await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    // Two live web tasks again, neither killing.
    let s = wait(&r, "2 live web tasks after the cancel", |s| {
        web_agents(s).len() == 2
            && s.tasks
                .iter()
                .filter(|t| t.service == "web" && !t.is_terminal())
                .count()
                == 2
    })
    .await;

    // A drain that completes.
    let drained = web_agents(&s)[0].clone();
    let row = format!("tr[data-agent='{drained}']");
    b.goto(&format!("{}/agents", r.url)).await;

    // The Drain button opens the confirmation page: what moves, the form.
    b.click(&format!("{row} a.drain-start")).await;
    b.wait_for_path(&format!("/agents/{drained}/drain")).await;
    assert_eq!(b.text("#drain-agent-id").await, drained);
    assert_eq!(b.text("#drain-tasks").await, "1");
    assert!(b.text("#drain-services").await.contains("web"));
    // A floor the API refuses: the page again, the field named.
    b.type_into("#drain-min-healthy", "lots").await;
    b.click("#drain-submit").await;
    b.wait_for_text("#drain-errors", "min_healthy", Duration::from_secs(10))
        .await;
    assert!(
        r.running
            .handle
            .snapshot()
            .agents
            .iter()
            .any(|a| a.agent_id.as_str() == drained && a.drain.is_none()),
        "nothing started"
    );
    b.client
        .find(fantoccini::Locator::Css("#drain-min-healthy"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    b.type_into("#drain-min-healthy", "1").await;
    b.select("#drain-then", "none").await;
    b.type_into("#drain-reason", "kernel upgrade").await;
    b.screenshot("agents-03-confirm").await;
    b.click("#drain-submit").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    assert!(
        b.text("#result-summary")
            .await
            .contains(&format!("drain of agent {drained} started")),
        "{}",
        b.text("#result-summary").await
    );

    // The progress on the live Agents page, until the drain is done.
    b.goto(&format!("{}/agents", r.url)).await;
    let cell = format!("{row} td.drain");
    let detail = format!("tr[data-drain-of='{drained}']");
    let text = b.text(&detail).await;
    assert!(text.contains("min_healthy 1"), "{text}");
    assert!(text.contains("kernel upgrade"), "{text}");
    assert!(text.contains("moved ·"), "the counts: {text}");
    b.wait_for_text(&format!("{cell} .drain-state"), "done", WAIT)
        .await;
    let text = b.text(&detail).await;
    assert!(
        text.contains("1 moved · 0 waiting for health · 0 blocked"),
        "{text}"
    );
    assert_eq!(b.count(&format!("{detail} li.progress-moved")).await, 1);
    assert_eq!(b.count(&format!("{row} a.drain-start")).await, 0);
    b.screenshot("agents-04-done").await;
    let s = r.running.handle.snapshot();
    let live = web_agents(&s);
    assert_eq!(live.len(), 2, "{live:?}");
    assert!(!live.contains(&drained), "{live:?}");

    // Cancel: the agent is released, the Drain button is back.
    b.type_into(&format!("{detail} input.reason"), "kernel done")
        .await;
    b.click(&format!("{detail} button.cancel-drain-button"))
        .await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    assert!(b.text("#result-summary").await.contains("cancelled"));
    b.goto(&format!("{}/agents", r.url)).await;
    b.wait_for_text(&format!("{cell} .drain-state"), "cancelled", WAIT)
        .await;
    assert_eq!(b.count(&format!("{row} a.drain-start")).await, 1);
    b.screenshot("agents-05-cancelled").await;

    // The overview's charts mark the drain, started and done.
    b.goto(&format!("{}/?window=15m", r.url)).await;
    assert!(b.count("#chart-running line.mark-drain").await >= 2);
    b.click("#charts details summary").await;
    let marks = b.text("#marks").await;
    assert!(
        marks.contains("SLA drain of agent") && marks.contains(&drained),
        "{marks}"
    );
    b.screenshot("agents-06-overview-marks").await;
    b.close().await;
}
