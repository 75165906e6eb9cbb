//! A client nobody here wrote: pymesos (PyPI, a pure-Python v1 scheduler
//! library) runs a small scheduler against the in-process testbed in JSON.
//! It subscribes, receives offers, launches a task, sees TASK_RUNNING,
//! acknowledges, reconciles and tears down.
//!
//! Needs Debian's `python3-venv` and `python3-http-parser` (installed by
//! `.ci/run`) and PyPI (`support::pymesos`,
//! `docs/testbed.md#an-independent-client-pymesos`).

use crate::support;

use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use support::mesos::init;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymesos_scheduler_runs_a_task_against_the_testbed() {
    init();
    let python = tokio::task::spawn_blocking(support::pymesos::python)
        .await
        .unwrap();
    let tb = Testbed::start(TestbedConfig::for_tests(1)).await.unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pymesos/scheduler.py");
    let master = tb.addr().to_string();
    let run = tokio::process::Command::new(python)
        .arg(script)
        .arg(&master)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("pymesos scheduler finished within 60 s")
        .expect("python ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("pymesos stdout:\n{stdout}\npymesos stderr:\n{stderr}");
    assert!(output.status.success(), "pymesos scheduler failed");

    let steps: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("STEP "))
        .collect();
    assert!(
        steps[0].starts_with(&format!("registered {}-0000", tb.master_id())),
        "{steps:?}"
    );
    assert!(steps.iter().any(|s| s.starts_with("launched")));
    assert!(steps.contains(&"update pymesos-task-1 TASK_STARTING SOURCE_EXECUTOR "));
    assert!(steps.contains(&"update pymesos-task-1 TASK_RUNNING SOURCE_EXECUTOR "));
    assert!(steps.contains(
        &"update pymesos-task-1 TASK_RUNNING SOURCE_MASTER Reconciliation: Latest task state"
    ));
    assert_eq!(steps.last(), Some(&"stopped True"));

    let calls: Vec<(String, u16)> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "scheduler")
        .map(|c| (c.call_type, c.status))
        .collect();
    let count = |kind: &str| {
        calls
            .iter()
            .filter(|(k, s)| k == kind && (*s == 200 || *s == 202))
            .count()
    };
    assert_eq!(count("SUBSCRIBE"), 1, "{calls:?}");
    assert_eq!(count("ACCEPT"), 1, "{calls:?}");
    assert_eq!(
        count("ACKNOWLEDGE"),
        2,
        "STARTING and RUNNING acknowledged: {calls:?}"
    );
    assert_eq!(count("RECONCILE"), 1, "{calls:?}");
    assert_eq!(count("TEARDOWN"), 1, "{calls:?}");
    assert!(
        calls.iter().all(|(_, s)| *s == 200 || *s == 202),
        "every call accepted: {calls:?}"
    );
    assert!(tb.frameworks().iter().all(|f| f.completed));
}
