//! The Jobs pages end to end in headless Chromium (issue 28 §4): a real
//! replica (scheduler core, web layer, ZooKeeper) against the testbed in
//! process mode, so a job's command runs for real under the testbed's
//! command executor (`docs/testbed.md#finite-tasks`). A job is created
//! through the API; Run now is pressed on the Jobs page; the run's page
//! shows it succeed and its stdout. Screenshots:
//! `$CARGO_TARGET_DIR/screenshots/jobs-*.png`.

use crate::support;

use std::time::Duration;

use mesos_appliance::testbed::{Testbed, TestbedConfig};
use support::appliance::{Served, ServedConfig};
use support::browser::Browser;
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_from_the_jobs_page_shows_the_run_succeed_with_its_stdout() {
    support::mesos::init();
    let zk = ZkServer::start();
    let mut tb_config = TestbedConfig::for_tests(1);
    tb_config.run_executors = Some(env!("CARGO_BIN_EXE_mesos-appliance-executor").into());
    let tb = Testbed::start(tb_config).await.unwrap();

    let mut config = ServedConfig::new("jobs-ui");
    config.core.snapshot_interval = Duration::from_millis(100);
    config.web.handler_timeout = Duration::from_secs(10);
    let served = Served::start_on_zk(&zk.connect_string(), config, &tb.url(), Vec::new()).await;
    let url = served.url.clone();
    let running = &served.running;

    // The job, through the API (loopback: no token configured), once
    // this replica leads.
    let http = support::mesos::client();
    let spec = serde_json::json!({
        "command": "echo \"hello from job $MESOS_EXECUTOR_ID\"; echo second line",
        "cpus": 0.1, "mem": 32, "history": 5
    });
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = http
            .put(format!("{url}/api/v1/jobs/hello?reason=browser%20test"))
            .header("Content-Type", "application/json")
            .body(spec.to_string())
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        if status == 201 {
            break;
        }
        // 503 until this replica leads; 409 "still reading the jobs" for
        // the moment between leading and having read the job records.
        let body = answer.text().await.unwrap_or_default();
        let transient = status == 503 || (status == 409 && body.contains("still reading"));
        assert!(
            transient && tokio::time::Instant::now() < deadline,
            "PUT job: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while !running
        .handle
        .snapshot()
        .jobs
        .iter()
        .any(|j| j.record.spec.name == "hello")
    {
        assert!(tokio::time::Instant::now() < deadline, "job not shown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let b = Browser::start().await;
    b.goto(&format!("{url}/jobs")).await;
    assert!(b.text("#job-hello").await.contains("on demand"));
    assert!(b.text("#job-hello").await.contains("never ran"));
    b.screenshot("jobs-01-list").await;
    b.type_into("#job-hello input[name=reason]", "check the page")
        .await;
    b.click("#run-hello").await;
    b.wait_for_path("/jobs/hello/runs/").await;
    let run_page = b.url().await;
    // The run's page, until the run is over (it refreshes while active;
    // reloading keeps the test independent of that).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let state = b.text("#run-state").await;
        if state == "succeeded" {
            break;
        }
        assert!(
            matches!(state.as_str(), "starting" | "running")
                && tokio::time::Instant::now() < deadline,
            "run state {state:?}: {}",
            b.text("main").await
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.goto(&run_page).await;
    }
    assert_eq!(
        b.count("#run-stdout").await,
        1,
        "stdout shown: {}",
        b.text("main").await
    );
    let stdout = b.text("#run-stdout").await;
    assert!(
        stdout.contains("hello from job hello.") && stdout.contains("second line"),
        "stdout on the run's page: {stdout:?}"
    );
    assert!(b.text("#attempts").await.contains("TASK_FINISHED"));
    b.screenshot("jobs-02-run").await;

    // The job's page lists the run, succeeded, triggered by hand.
    b.goto(&format!("{url}/jobs/hello")).await;
    let runs = b.text("#runs").await;
    assert!(runs.contains("succeeded"), "{runs}");
    assert!(runs.contains("manual, by"), "{runs}");
    b.screenshot("jobs-03-job").await;
    // The testbed ran exactly one task, and it finished.
    let done: Vec<_> = tb
        .completed_tasks()
        .into_iter()
        .filter(|t| t.task_id.starts_with("hello."))
        .map(|t| t.state.as_str_name())
        .collect();
    assert_eq!(done, ["TASK_FINISHED"]);
    b.close().await;
}
