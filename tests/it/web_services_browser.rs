//! Services from the dashboard end to end in headless Chromium (issue 29
//! §1, "Browser tests"): a real replica (scheduler core, web layer, a real
//! ZooKeeper) against the testbed, in token mode with a named admin.
//! Through the pages only: log in; create a service whose first spec has a
//! field error, fixed in the editor; scale it down (the confirmation names
//! the task that dies); restart it — a rolling, health-gated rollout, the
//! service's HTTP health checks answered by the testbed's simulated
//! executors (`docs/testbed.md#containers-and-health-checks`); delete it.
//! Each step is in the audit trail with who and why. Screenshots:
//! `$CARGO_TARGET_DIR/screenshots/services-*.png`.

use crate::support;

use std::time::Duration;

use mesos_appliance::scheduler::{SchedulerHandle, Snapshot, TaskRecord};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use mesos_appliance::util::tokens::AdminToken;
use support::appliance::{Served, ServedConfig};
use support::browser::Browser;
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "svc-ui-admin-token-0123456789abcdef";

/// Three instances answering an HTTP health check every second;
/// replacements are available after 1 s healthy. `cpus` is `CPUS`.
const SPEC: &str = r#"{
  "name": "shop",
  "command": "python3 -m http.server $PORT0",
  "cpus": CPUS,
  "mem": 32,
  "instances": 3,
  "ports": 1,
  "kill_grace_period": "1s",
  "health_check": {"type": "http", "port_index": 0, "path": "/", "delay": "0s",
    "interval": "1s", "timeout": "1s", "grace_period": "1s", "consecutive_failures": 3},
  "upgrade": {"min_healthy": "1s", "deadline": "30s"}
}"#;

/// Live tasks of `shop`: not terminal, no kill asked.
fn live(s: &Snapshot) -> Vec<&TaskRecord> {
    s.tasks
        .iter()
        .map(|t| &**t)
        .filter(|t| t.service == "shop" && !t.is_terminal() && t.kill.is_none())
        .collect()
}

/// Live tasks of `shop` in TASK_RUNNING and reported healthy.
fn healthy(s: &Snapshot) -> Vec<String> {
    live(s)
        .into_iter()
        .filter(|t| t.state.as_str_name() == "TASK_RUNNING" && t.healthy == Some(true))
        .map(|t| t.task_id.to_string())
        .collect()
}

/// Polls the snapshot until `ok` holds (panics after [`WAIT`]).
async fn wait_for(handle: &SchedulerHandle, what: &str, ok: impl Fn(&Snapshot) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ok(&handle.snapshot()) {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn set_text(b: &Browser, css: &str, text: &str) {
    b.client
        .execute(
            "document.querySelector(arguments[0]).value = arguments[1];",
            vec![css.into(), text.into()],
        )
        .await
        .expect("set value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_with_a_fixed_field_error_scale_restart_and_delete_from_the_dashboard() {
    support::mesos::init();
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();

    let mut config = ServedConfig::new("services-ui");
    config.core.snapshot_interval = Duration::from_millis(100);
    config.web.handler_timeout = Duration::from_secs(10);
    config.web.admin_tokens = vec![AdminToken::new("alice", TOKEN)];
    let served = Served::start_on_zk(&zk.connect_string(), config, &tb.url(), Vec::new()).await;
    let url = served.url.clone();
    let running = &served.running;
    let handle = running.handle.clone();
    let snapshot = || handle.snapshot();
    wait_for(&handle, "this replica leads and subscribed", |s| {
        s.leadership.is_leader() && s.framework.id.is_some()
    })
    .await;

    let b = Browser::start().await;
    // Anonymous: no buttons, a login link.
    b.goto(&format!("{url}/services")).await;
    assert_eq!(b.count("#new-service").await, 0);
    b.goto(&format!("{url}/login?next=/services")).await;
    b.type_into("input[name=token]", TOKEN).await;
    b.click("main form button[type=submit]").await;
    b.wait_for_path("/services").await;
    b.click("#new-service").await;
    b.wait_for_path("/services/_new").await;

    // 1. Create, with a field error fixed in the editor.
    set_text(&b, "#spec-text", &SPEC.replace("CPUS", "0")).await;
    b.click("#review").await;
    let errors = b.text("#spec-errors").await;
    assert!(errors.contains("cpus"), "{errors}");
    assert!(errors.contains("line 4"), "{errors}");
    assert_eq!(b.count(r#".field-error[data-field="cpus"]"#).await, 1);
    b.screenshot("services-01-field-error").await;
    assert!(snapshot().services.is_empty(), "nothing created yet");
    set_text(&b, "#spec-text", &SPEC.replace("CPUS", "0.1")).await;
    b.click("#review").await;
    let intro = b.text("#confirm-intro").await;
    assert!(intro.contains("Creates service shop"), "{intro}");
    assert!(
        b.text("#spec-diff")
            .await
            .contains("+   \"name\": \"shop\"")
    );
    b.screenshot("services-02-diff").await;
    b.type_into("#confirm-reason", "open the shop").await;
    b.click("#confirm").await;
    b.wait_for_path("/services/shop").await;
    wait_for(&handle, "three healthy tasks", |s| healthy(s).len() == 3).await;
    b.goto(&format!("{url}/services/shop")).await;
    b.wait_for_text("#service-status", "3 healthy", Duration::from_secs(10))
        .await;
    b.screenshot("services-03-created").await;

    // 2. Scale down to 2: the confirmation names the task that dies.
    set_text(&b, "#scale-instances", "2").await;
    b.click("#scale").await;
    b.wait_for_path("/services/shop/scale?instances=2").await;
    let doomed = b.texts("#doomed-tasks tbody tr").await;
    assert_eq!(doomed.len(), 1, "{doomed:?}");
    assert!(doomed[0].contains("killed: scaled down"), "{doomed:?}");
    let dying = doomed[0].split_whitespace().nth(1).unwrap().to_string();
    b.screenshot("services-04-scale").await;
    b.type_into("#confirm-reason", "quiet night").await;
    b.click("#confirm").await;
    b.wait_for_path("/services/shop").await;
    wait_for(&handle, "two live tasks", |s| {
        live(s).len() == 2 && healthy(s).len() == 2
    })
    .await;
    assert!(
        !healthy(&snapshot()).contains(&dying),
        "the task named is the one that died"
    );

    // 3. A rolling, health-gated restart.
    let before = healthy(&snapshot());
    b.goto(&format!("{url}/services/shop")).await;
    b.click("#restart").await;
    b.wait_for_path("/services/shop/restart").await;
    let replaced = b.texts("#doomed-tasks tbody tr").await;
    assert_eq!(replaced.len(), 2, "{replaced:?}");
    b.screenshot("services-05-restart").await;
    b.type_into("#confirm-reason", "pick up the new certificates")
        .await;
    b.click("#confirm").await;
    b.wait_for_path("/actions/results/").await;
    // Never fewer than one healthy task while the old ones are replaced
    // one at a time; done when both are new and healthy.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut saw_rollout = false;
    loop {
        let s = snapshot();
        let now = healthy(&s);
        let rolling = s
            .services
            .iter()
            .any(|x| x.spec.name == "shop" && x.rollout.is_some());
        saw_rollout |= rolling;
        assert!(
            !now.is_empty(),
            "a healthy task of shop at all times during the restart"
        );
        if !rolling && now.len() == 2 && now.iter().all(|id| !before.contains(id)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "restart: {now:?}");
        if saw_rollout && rolling {
            b.goto(&format!("{url}/services/shop")).await;
            if b.count("#rollout-progress").await == 1 {
                b.screenshot("services-06-rolling").await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(saw_rollout, "the restart went through a rollout");

    // 4. Delete: the confirmation names both tasks.
    b.goto(&format!("{url}/services/shop")).await;
    b.click("#delete").await;
    b.wait_for_path("/services/shop/delete").await;
    let doomed = b.texts("#doomed-tasks tbody tr").await;
    assert_eq!(doomed.len(), 2, "{doomed:?}");
    b.screenshot("services-07-delete").await;
    b.type_into("#confirm-reason", "shop closed").await;
    b.click("#confirm").await;
    b.wait_for_path("/services").await;
    wait_for(&handle, "shop gone, its tasks killed", |s| {
        s.services.is_empty() && live(s).is_empty()
    })
    .await;

    // The audit trail: each step, by alice, with her reason.
    b.goto(&format!("{url}/audit")).await;
    b.screenshot("services-08-audit").await;
    let audit: serde_json::Value = support::mesos::get_json(&format!("{url}/api/v1/audit")).await;
    let entries: Vec<(String, String, String, bool)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().into(),
                e["who"].as_str().unwrap_or_default().into(),
                e["reason"].as_str().unwrap_or_default().into(),
                e["ok"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    for (action, why) in [
        ("service.put", "open the shop"),
        ("service.scale", "quiet night"),
        ("restart", "pick up the new certificates"),
        ("service.delete", "shop closed"),
    ] {
        assert!(
            entries
                .iter()
                .any(|(a, who, r, ok)| a == action && who == "alice" && r == why && *ok),
            "{action} by alice ({why}) in {entries:?}"
        );
    }
    b.close().await;
}
