//! The jobs API at the HTTP edge (`docs/jobs.md#api`), with `oneshot` and
//! the test web layer's fake core: the views of a published snapshot's
//! jobs and runs (attempts with log links), field errors before the core
//! is asked, 404s, and the token rule. The core's side is tested with the
//! real core (`scheduler_jobs`, `core/machine/tests/jobs.rs`).

use crate::support;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use mesos_appliance::scheduler::jobs::{
    Attempt, JobRecord, JobStatus, RunId, RunRecord, RunState, Trigger,
};
use serde_json::json;
use support::web::*;

fn snapshot_with_a_job() -> mesos_appliance::scheduler::Snapshot {
    let mut s = leader_snapshot("http://sched-a.cluster.test:8080", 1);
    let spec = serde_json::from_value(json!({
        "name": "report", "command": "./report.sh", "cpus": 0.1, "mem": 32,
        "schedule": {"cron": "*/1 * * * *", "concurrency": "forbid"}
    }))
    .unwrap();
    let run_id = RunId::scheduled(1_796_155_200);
    let run = RunRecord {
        job: "report".into(),
        run_id: run_id.clone(),
        trigger: Trigger::Schedule {
            at: 1_796_155_200.0,
        },
        state: RunState::Failed,
        reason: Some("exit status 3".into()),
        created_at: 1_796_155_200.2,
        finished_at: Some(1_796_155_210.0),
        args: vec![],
        env: Default::default(),
        attempts: vec![Attempt {
            number: 1,
            task_id: format!("report.{run_id}.1").as_str().into(),
            created_at: 1_796_155_200.2,
            running_at: Some(1_796_155_201.0),
            ended_at: Some(1_796_155_210.0),
            task_state: Some("TASK_FAILED".into()),
            exit_status: Some(3),
            message: Some("Command exited with status 3".into()),
        }],
        retry_at: None,
        kill: None,
    };
    s.jobs = vec![JobStatus {
        record: JobRecord {
            spec,
            created_at: 1_796_155_000.0,
            updated_at: 1_796_155_000.0,
        },
        next_run_at: Some(1_796_155_260.0),
        runs: vec![Arc::new(run)],
    }];
    s
}

#[tokio::test]
async fn jobs_and_runs_are_shown_with_their_attempts_and_log_links() {
    let web = TestWeb::new(test_config(), snapshot_with_a_job());
    let r = web
        .send(
            request(Method::GET, "/api/v1/jobs")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let v = r.json();
    let row = &v["jobs"][0];
    assert_eq!(row["name"], "report");
    assert_eq!(row["schedule"], "*/1 * * * *");
    assert_eq!(row["timezone"], "UTC");
    assert_eq!(row["enabled"], true);
    assert_eq!(row["concurrency"], "forbid");
    assert_eq!(row["next_run_at"], 1_796_155_260.0);
    assert_eq!(row["counts"], json!({"failed": 1}));
    assert_eq!(row["last_run"]["state"], "failed");

    let r = web
        .send(
            request(Method::GET, "/api/v1/jobs/report/runs/20261201T200000Z")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let run = r.json();
    assert_eq!(
        run["trigger"],
        json!({"kind": "schedule", "at": 1_796_155_200.0})
    );
    assert_eq!(run["reason"], "exit status 3");
    let attempt = &run["attempts"][0];
    assert_eq!(attempt["task_id"], "report.20261201T200000Z.1");
    assert_eq!(attempt["exit_status"], 3);
    assert_eq!(
        attempt["logs"]["stdout"],
        "/tasks/report.20261201T200000Z.1/logs/stdout"
    );
    let r = web
        .send(
            request(Method::GET, "/api/v1/jobs/report")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.json()["runs"].as_array().unwrap().len(), 1);

    for path in [
        "/api/v1/jobs/nope",
        "/api/v1/jobs/report/runs/nope",
        "/api/v1/jobs/nope/runs",
    ] {
        let r = web
            .send(request(Method::GET, path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn a_bad_job_spec_is_refused_with_field_errors_before_the_core_is_asked() {
    let web = TestWeb::leader();
    let bad = json!({"command": "", "cpus": 0.1, "mem": 32,
                     "schedule": {"cron": "61 * * * *"}, "retries": {"count": 1000}});
    let r = web
        .send(json_request(Method::PUT, "/api/v1/jobs/report", &bad))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let v = r.json();
    let fields: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["command", "schedule.cron", "retries.count"]);
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/jobs/report/runs",
            &json!({"env": {"1X": "y"}}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["errors"][0]["field"], "env.1X");
}

#[tokio::test]
async fn job_changes_need_the_token() {
    let web = TestWeb::new(token_config(), snapshot_with_a_job());
    let spec = json!({"command": "true", "cpus": 0.1, "mem": 32});
    for (method, path) in [
        (Method::PUT, "/api/v1/jobs/report"),
        (Method::DELETE, "/api/v1/jobs/report"),
        (Method::POST, "/api/v1/jobs/report/runs"),
        (Method::POST, "/api/v1/jobs/report/disable"),
        (
            Method::POST,
            "/api/v1/jobs/report/runs/20261201T200000Z/kill",
        ),
    ] {
        let r = web.send(json_request(method.clone(), path, &spec)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
}

/// A leader still reading the jobs refuses before doing anything: 503 with
/// `Retry-After` and the problem type `not-ready` (clients retry it, `ctl`
/// a POST too), not a 409 that reads as a final refusal.
#[tokio::test]
async fn a_job_command_before_the_jobs_are_read_is_503_with_retry_after() {
    let web = TestWeb::leader();
    web.core.set_mode(Mode::Fail(
        mesos_appliance::scheduler::CommandError::NotReady(
            "the leader is still reading the jobs; try again in a moment".into(),
        ),
    ));
    let r = web
        .send(json_request(
            Method::POST,
            "/api/v1/jobs/report/runs",
            &json!({}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    let v = r.json();
    assert_eq!(v["type"], "urn:mesos-appliance:problem:not-ready", "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("still reading the jobs")
    );
}
