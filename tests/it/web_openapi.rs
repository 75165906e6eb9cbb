//! The schema-driven run: schemathesis (PyPI, pinned in
//! `support::schemathesis`) reads `/api/v1/openapi.json` from a running
//! `mesos-appliance demo` (embedded testbed) and calls every operation with
//! inputs generated from the document. It fails on any 5xx, any response
//! whose status, content type or body the document does not allow
//! (`docs/api.md#the-schema-driven-run`).
//!
//! Left out, and why:
//! - `POST /api/v1/actions/{teardown,kamikaze,abdicate}`: they end the
//!   demo's framework or leadership, after which every later call would
//!   test a replica that no longer leads (their contract is checked by
//!   `web_actions` and `web_abdicate_audit`);
//! - `GET /api/v1/stream`, `GET /api/v1/events/stream`: server-sent event
//!   streams never end, so a request of them never completes (their
//!   contract is checked by `web_events` and `web_liveness`).

use std::process::Command;
use std::time::Duration;

use crate::support::processes::{Appliance, WAIT};

/// Operations left out of the run (see the module doc), as path regexes.
const EXCLUDED_PATHS: &str =
    "^/api/v1/(actions/(teardown|kamikaze|abdicate)|stream|events/stream)$";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_5xx_and_no_response_that_breaks_the_contract() {
    let schemathesis = crate::support::schemathesis::binary();
    let demo = Appliance::spawn("demo", &["demo".to_string()]);
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some((200, state)) = demo.get("/api/v1/state").await
            && state["framework"]["state"] == "subscribed"
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "demo not subscribed:\n{}",
            demo.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let report = tempfile::tempdir().unwrap();
    let output = tokio::task::spawn_blocking({
        let url = format!("{}/api/v1/openapi.json", demo.url);
        let report = report.path().to_path_buf();
        move || {
            Command::new(schemathesis)
                .arg("run")
                .arg(url)
                .args([
                    "--checks",
                    "not_a_server_error,status_code_conformance,content_type_conformance,\
                     response_schema_conformance",
                    "--exclude-path-regex",
                    EXCLUDED_PATHS,
                    "--phases",
                    "examples,coverage,fuzzing",
                    "--max-examples",
                    "25",
                    "--workers",
                    "2",
                    "--request-timeout",
                    "15",
                    "--max-time",
                    "100",
                    "--seed",
                    "20261203",
                    "--generation-database",
                    "none",
                    "--no-color",
                    "--report-dir",
                ])
                .arg(&report)
                // It keeps state in `.schemathesis/` of its working directory.
                .current_dir(&report)
                .env("SCHEMATHESIS_HOOKS", "")
                .output()
                .expect("schemathesis runs")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "schemathesis found problems (exit {:?}):\n{stdout}\n{stderr}\n--- demo log (tail) ---\n{}",
        output.status.code(),
        tail(&demo.log(), 60)
    );
    // It really ran: it names the operations it tested.
    assert!(
        stdout.contains("/api/v1/services/{name}") && stdout.contains("passed"),
        "{stdout}"
    );
    assert!(
        !demo.log().contains("panicked"),
        "the demo panicked:\n{}",
        demo.log()
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
