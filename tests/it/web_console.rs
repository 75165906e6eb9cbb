//! The dashboard as an operator's console, in headless Chromium:
//! - a task's log, read from its real sandbox (testbed process mode),
//!   followed live as new lines arrive, with HTML, ANSI escapes and
//!   invalid UTF-8 shown as text;
//! - a scripted run with real processes on a real ZooKeeper — an action
//!   with a reason on the leader, the leader SIGKILLed, failover, another
//!   action, the old leader restarted — after which the charts show data
//!   and marks, and the audit trail on the *other* replica lists both
//!   actions with their reasons.
//!
//! Screenshots of the overview with charts and of a task's log view go to
//! `tests/screenshots/` (committed, linked from the README) when the run
//! sets `UPDATE_SCREENSHOTS=1`, else next to the others in
//! `target/screenshots/`.

use crate::support;

use std::time::Duration;

use mesos_appliance::testbed::TestbedConfig;
use serde_json::json;
use support::appliance::{Served, services};
use support::browser::Browser;
use support::processes::{Appliance, WAIT, base_args, services_file, with_flags};
use support::zookeeper::ZkServer;

/// A task's output: hostile bytes first, then one numbered line a second.
const NOISY: &str = r#"printf '<script>alert(1)</script> \033[31mred\033[0m bad:\377 end\n'; i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 1; done"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_log_is_followed_live_and_shown_safely() {
    support::mesos::init();
    let mut tb_config = TestbedConfig::for_tests(1);
    tb_config.run_executors = Some(env!("CARGO_BIN_EXE_mesos-appliance-executor").into());
    let tb = support::testbed(tb_config).await;
    let specs = services(json!([
        {"name": "noisy", "command": NOISY, "cpus": 0.1, "mem": 32, "instances": 1, "executor": "appliance", "kill_grace_period": "1s"}
    ]));
    let served = Served::start("logs", &tb.url(), specs).await;
    let url = served.url.clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    let task = loop {
        let s = served.running.handle.snapshot();
        if let Some(t) = s
            .tasks
            .iter()
            .find(|t| t.state.as_str_name() == "TASK_RUNNING")
        {
            break t.task_id.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no running task");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let b = Browser::start().await;
    b.goto(&format!("{url}/tasks/{task}")).await;
    let first = b.wait_for_text("#stdout-log", "tick 2", WAIT).await;
    // Hostile bytes arrive as text: no element was made of them, the ANSI
    // escapes are gone, the invalid byte is U+FFFD.
    assert!(
        first.contains("<script>alert(1)</script> red bad:\u{FFFD} end"),
        "{first:?}"
    );
    assert_eq!(b.count("#stdout-log script").await, 0);
    assert!(!first.contains('\u{1b}'));
    // Followed live: later lines arrive without reloading.
    let n: usize = first
        .lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .max()
        .unwrap();
    b.wait_for_text("#stdout-log", &format!("tick {}", n + 2), WAIT)
        .await;
    b.wait_for_text("#stderr-status", "following", WAIT).await;

    // The log page: server-rendered, then followed.
    b.goto(&format!("{url}/tasks/{task}/logs/stdout")).await;
    let shown = b.text("#log").await;
    let last: usize = shown
        .lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .max()
        .unwrap_or_else(|| panic!("no tick line in {shown:?}"));
    b.wait_for_text("#log", &format!("tick {}", last + 2), WAIT)
        .await;
    assert_eq!(b.count("#log script").await, 0);
    b.screenshot_committed("task-log").await;
    b.close().await;
    served.stop.cancel();
    tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_and_the_audit_trail_survive_a_leader_sigkill() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = services_file(
        dir.path(),
        "services.json",
        &json!([
            {"name": "web", "command": "sleep 600", "cpus": 0.1, "mem": 32, "instances": 3},
            {"name": "batch", "command": "sleep 600", "cpus": 0.1, "mem": 32, "instances": 2}
        ]),
    );
    let args = with_flags(
        base_args(&zk.connect_string(), &tb.url(), "console"),
        &["--services", file.to_str().unwrap()],
    );
    let a = Appliance::spawn("a", &args);
    a.wait_state("a leads with 5 tasks running", WAIT, |s| {
        support::processes::framework_state(s) == "subscribed"
            && support::processes::running_count(s) == 5
    })
    .await;
    let b_replica = Appliance::spawn("b", &args);
    b_replica
        .wait_state("b follows", WAIT, |s| s["leadership"]["role"] == "follower")
        .await;

    let browser = Browser::start().await;
    // An action with a reason on the leader.
    browser.goto(&format!("{}/actions", a.url)).await;
    browser
        .type_into(
            "#reconcile-reason",
            "before the failover: agent r3 rebooted",
        )
        .await;
    browser.click("#reconcile-explicit").await;
    browser.wait_for_path("/actions/results/").await;
    assert_eq!(browser.text("#result-outcome").await, "ok");

    // The leader dies without a word; the follower takes over.
    a.signal(libc::SIGKILL);
    b_replica
        .wait_state("b takes over", WAIT, |s| {
            support::processes::framework_state(s) == "subscribed"
        })
        .await;
    let a2 = Appliance::spawn("a2", &args);
    a2.wait_state("the restarted a follows", WAIT, |s| {
        s["leadership"]["role"] == "follower"
    })
    .await;

    browser.goto(&format!("{}/actions", b_replica.url)).await;
    browser
        .type_into(
            "#reconcile-reason",
            "after the failover: checking every task",
        )
        .await;
    browser.click("#reconcile-implicit").await;
    browser.wait_for_path("/actions/results/").await;

    // The audit trail on the other replica (the restarted one).
    browser.goto(&format!("{}/audit", a2.url)).await;
    let audit = browser.text("#audit").await;
    assert!(
        audit.contains("before the failover: agent r3 rebooted"),
        "{audit}"
    );
    assert!(
        audit.contains("after the failover: checking every task"),
        "{audit}"
    );
    assert!(
        audit.contains(&b_replica.url) && audit.contains(&a.url),
        "{audit}"
    );

    // The charts on the new leader: samples and marks.
    browser
        .goto(&format!("{}/?window=15m", b_replica.url))
        .await;
    for mark in ["leadership", "subscribed", "reconcile"] {
        let css = format!("#chart-running line.mark-{mark}");
        let deadline = std::time::Instant::now() + WAIT;
        while browser.count(&css).await == 0 {
            assert!(std::time::Instant::now() < deadline, "no {mark} mark");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // Both services drawn, over a few samples since the failover.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let points: usize = browser
            .text("#charts h2 .muted")
            .await
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if points >= 6 && browser.count("#chart-running polyline").await >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no running-task lines"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(browser.text("#window-15m").await, "15m");
    browser
        .client
        .execute("document.getElementById('charts').scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.screenshot_committed("overview-charts").await;
    // Without JavaScript the charts are there all the same: plain SVG.
    let html = support::mesos::client()
        .get(format!("{}/?window=6h", b_replica.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("<svg") && html.contains("<polyline"),
        "no SVG"
    );

    // The follower shows the leader's charts.
    browser.goto(&format!("{}/", a2.url)).await;
    browser
        .wait_for_text("#charts h2", &b_replica.url, WAIT)
        .await;
    assert_eq!(browser.count("#charts-note").await, 0);
    browser.close().await;
    drop(a);
    drop(a2);
    drop(b_replica);
    tb.shutdown().await;
}
