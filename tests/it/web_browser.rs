//! The dashboard in headless Chromium (chromedriver + fantoccini), against
//! the web layer served on 127.0.0.1 over a scripted core: overview with
//! framework ID and leader, tasks page, reconcile, kamikaze through its
//! confirmation page with the tasks replaced, the tasks' health column and
//! a halted rollout resumed from the services page, live refresh, the
//! "scheduler unreachable" notice, and a follower's standby banner.
//! Screenshots: `$CARGO_TARGET_DIR/screenshots/web-*.png`.

use crate::support;

use std::time::Duration;

use mesos_appliance::web::{Server, WebConfig, serve_on};
use support::browser::Browser;
use support::web::*;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Serves a web layer showing `snapshot(url)` on a free loopback port.
async fn start(
    snapshot: impl FnOnce(&str) -> mesos_appliance::scheduler::Snapshot,
) -> (TestWeb, Server, String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}");
    let mut config = WebConfig::new(addr, url.clone());
    config.handler_timeout = Duration::from_secs(5);
    let web = TestWeb::new(config, snapshot(&url));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = serve_on(listener, web.state.clone(), async {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    (web, server, url, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_headless_chromium() {
    support::init_tracing();
    let (leader, server, url, stop) = start(|url| leader_snapshot(url, 60)).await;
    let b = Browser::start().await;

    // Overview: the framework ID and the leader, at a glance.
    b.goto(&format!("{url}/")).await;
    assert_eq!(b.text("#overview-framework-id").await, FRAMEWORK_ID);
    assert_eq!(b.text("#framework-id").await, FRAMEWORK_ID);
    assert_eq!(b.text("#leader").await, url);
    assert_eq!(b.text("#role").await, "leader");
    let rollouts = b.texts("td.rollout").await;
    assert!(
        rollouts.iter().any(|r| r.contains("halted")),
        "the halted rollout: {rollouts:?}"
    );
    b.screenshot("web-01-overview").await;

    // Live refresh: a new snapshot shows up without reloading.
    let mut s = leader.snapshot();
    s.at += 30.0;
    s.events
        .push(event(s.at, "agent", "agent-9.cluster.test registered"));
    // The health checks of `web` answered: three tasks fail theirs.
    let mut unhealthy = 0;
    let mut tasks = s.tasks.to_vec();
    for t in tasks.iter_mut() {
        if t.service == "web" && t.state.as_str_name() == "TASK_RUNNING" {
            let t = std::sync::Arc::make_mut(t);
            t.healthy = Some(unhealthy >= 3);
            t.healthy_since = Some(s.at - 5.0);
            unhealthy += 1;
        }
    }
    s.tasks = tasks.into();
    leader.publish(s);
    b.wait_for_text(
        "#live",
        "agent-9.cluster.test registered",
        Duration::from_secs(10),
    )
    .await;

    // Tasks: paged, sortable, a task with its timeline.
    b.click("nav.tabs a[href='/tasks']").await;
    b.wait_for_path("/tasks").await;
    assert_eq!(b.count("tr.task").await, 50);
    assert!(b.text("#tasks thead").await.contains("Health"));
    assert_eq!(b.count("#health-filter").await, 1);
    assert!(b.text("#task-summary").await.contains("Tasks 1–50 of 60"));
    b.screenshot("web-02-tasks").await;
    // The health column, and its filter.
    let health: Vec<String> = b.texts("tr.task td.health").await;
    assert!(health.iter().any(|h| h == "healthy"), "{health:?}");
    assert!(health.iter().any(|h| h == "unhealthy"), "{health:?}");
    b.select("#health-filter", "unhealthy").await;
    b.click("#task-filters button[type=submit]").await;
    b.wait_for_path("health=unhealthy").await;
    assert_eq!(b.count("tr.task").await, 3);
    let health: Vec<String> = b.texts("tr.task td.health").await;
    assert_eq!(health, ["unhealthy"; 3]);
    b.screenshot("web-02b-tasks-unhealthy").await;
    b.goto(&format!("{url}/tasks")).await;
    b.click("#tasks th a[href*='sort=state']").await;
    b.wait_for_path("sort=state").await;
    b.click("a[rel=next]").await;
    b.wait_for_path("page=2").await;
    assert_eq!(b.count("tr.task").await, 10);
    b.click("tr.task td a").await;
    b.wait_for_path("/tasks/").await;
    assert!(b.count("#timeline tbody tr").await >= 1);
    b.screenshot("web-03-task").await;

    // Reconcile from the actions page: post, redirect, result.
    b.click("nav.tabs a[href='/actions']").await;
    b.wait_for_path("/actions").await;
    b.screenshot("web-04-actions").await;
    b.click("#reconcile-explicit").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    assert!(
        b.text("#result-summary")
            .await
            .contains("explicit reconciliation running")
    );
    b.screenshot("web-05-reconcile-result").await;
    assert_eq!(leader.core.received(), ["reconcile"]);

    // Services: health, the halted rollout, and Resume.
    b.click("nav.tabs a[href='/services']").await;
    b.wait_for_path("/services").await;
    assert!(b.text("#services thead").await.contains("Health"));
    let rollout = b.text("#rollout-web").await;
    assert!(rollout.contains("rollout halted"), "{rollout}");
    assert!(rollout.contains("replaced"), "{rollout}");
    assert_eq!(b.count("#rollback-web").await, 1);
    b.screenshot("web-05b-services-rollout").await;
    b.click("#resume-web").await;
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    assert!(
        b.text("#result-summary")
            .await
            .contains("rollout of service web resumed")
    );
    assert_eq!(leader.core.received(), ["reconcile", "rollout"]);
    b.goto(&format!("{url}/services")).await;
    assert!(!b.text("#rollout-web").await.contains("halted"));
    assert_eq!(b.count("#resume-web").await, 0, "nothing left to resume");

    // Kamikaze through its confirmation page.
    let before: Vec<String> = leader
        .snapshot()
        .tasks
        .iter()
        .filter(|t| t.service == "web" && t.state.as_str_name() == "TASK_RUNNING")
        .map(|t| t.task_id.to_string())
        .collect();
    b.goto(&format!("{url}/actions")).await;
    b.click("#kamikaze-link").await;
    b.wait_for_path("/actions/kamikaze").await;
    assert_eq!(b.text("#confirm-framework-id").await, FRAMEWORK_ID);
    assert_eq!(b.text("#confirm-tasks").await, "42");
    let submit = b
        .client
        .find(fantoccini::Locator::Css("#confirm-submit"))
        .await
        .unwrap();
    assert!(
        !submit.is_enabled().await.unwrap(),
        "disabled until the name is typed"
    );
    b.type_into("#confirm-name", FRAMEWORK_NAME).await;
    assert!(submit.is_enabled().await.unwrap());
    b.screenshot("web-06-kamikaze-confirm").await;
    submit.click().await.unwrap();
    b.wait_for_path("/actions/results/").await;
    assert_eq!(b.text("#result-outcome").await, "ok");
    assert_eq!(b.count("#result-executors tbody tr").await, 6 + 15);
    b.screenshot("web-07-kamikaze-result").await;
    assert_eq!(leader.core.received(), ["reconcile", "rollout", "kamikaze"]);

    // The tasks were replaced: the old ones are killed, new IDs run.
    b.goto(&format!(
        "{url}/tasks?service=web&state=TASK_RUNNING&per_page=100"
    ))
    .await;
    let shown = b.text("#tasks").await;
    assert!(
        before.iter().all(|id| !shown.contains(id.as_str())),
        "old tasks no longer run"
    );
    assert_eq!(b.count("tr.task").await, 42, "42 replacements run");
    b.goto(&format!("{url}/tasks?state=TASK_KILLED")).await;
    assert_eq!(b.count("tr.task").await, 42);
    b.screenshot("web-08-tasks-killed").await;

    // The other pages, for the eye.
    for (path, name, css) in [
        ("/services", "web-12-services", "#services"),
        ("/offers", "web-13-offers", "#offers"),
        ("/replicas", "web-14-replicas", "#replicas"),
        ("/events", "web-15-events", "#events"),
        (
            "/actions/teardown",
            "web-16-teardown-confirm",
            "#confirm-form",
        ),
    ] {
        b.goto(&format!("{url}{path}")).await;
        b.text(css).await;
        b.screenshot(name).await;
    }
    // The master removed the framework: a red banner and the way out.
    let mut s = leader.snapshot();
    s.at += 1.0;
    s.framework.state = mesos_appliance::scheduler::FrameworkState::Removed;
    s.framework.reason = Some("Framework has been removed".into());
    leader.publish(s);
    b.goto(&format!("{url}/")).await;
    assert!(b.text("#banners").await.contains("FRAMEWORK REMOVED"));
    b.screenshot("web-17-removed").await;

    // A follower: the standby banner names the leader; actions link there.
    let (_follower, fserver, furl, fstop) = start(|u| follower_snapshot(u, &url, 60)).await;
    b.goto(&format!("{furl}/")).await;
    let banner = b.text("#banners").await;
    assert!(
        banner.contains(&format!("STANDBY — leader is {url}")),
        "{banner}"
    );
    assert_eq!(b.text("#role").await, "follower");
    b.screenshot("web-09-follower-overview").await;
    b.goto(&format!("{furl}/actions")).await;
    let link = b
        .client
        .find(fantoccini::Locator::Css("#leader-actions"))
        .await
        .unwrap();
    assert_eq!(
        link.attr("href").await.unwrap(),
        Some(format!("{url}/actions"))
    );
    b.screenshot("web-10-follower-actions").await;
    fstop.send(()).unwrap();
    let _ = fserver.task.await;

    // The leader goes away: the page says so and keeps the last data.
    b.goto(&format!("{url}/")).await;
    b.text("#overview-framework-id").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.send(()).unwrap();
    let _ = server.task.await;
    b.wait_for_text("#notice", "SCHEDULER UNREACHABLE", Duration::from_secs(15))
        .await;
    assert_eq!(b.text("#overview-framework-id").await, FRAMEWORK_ID);
    b.screenshot("web-11-unreachable").await;
    b.close().await;
}
