//! Jobs across leader changes (`docs/jobs.md`), on a real ZooKeeper and the
//! testbed: a `forbid` job whose task outlives its 3 s period, with the
//! leader stopped next to a trigger; exactly one launch per run that was
//! not skipped, per the testbed master's call log; the same history and
//! next run time on every replica; triggers passed while no leader could
//! launch are `missed` and never launched late.
//!
//! The rest of the acceptance (the leader SIGKILLed as a process,
//! ZooKeeper cut from the leader, retries, timeouts, `replace`, `allow`)
//! is in `scheduler_jobs_acceptance`.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use mesos_appliance::scheduler::FrameworkState;
use mesos_appliance::scheduler::Request;
use mesos_appliance::scheduler::jobs::{JobStatus, RunState};
use mesos_appliance::scheduler::spec::job::{JobSpec, ValidJobSpec};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::appliance::{Replica, core_config};
use support::zookeeper::ZkServer;

const WAIT: Duration = Duration::from_secs(40);

fn job(value: serde_json::Value) -> Box<ValidJobSpec> {
    let spec: JobSpec = serde_json::from_value(value).unwrap();
    Box::new(ValidJobSpec::new(spec).unwrap())
}

async fn put_job(replica: &Replica, spec: Box<ValidJobSpec>) {
    let _: bool = replica
        .handle
        .request(Duration::from_secs(10), Request::PutJob(spec))
        .await
        .expect("the job is stored");
}

fn report(s: &mesos_appliance::scheduler::Snapshot) -> Option<&JobStatus> {
    s.jobs.iter().find(|j| j.record.spec.name == "report")
}

/// The runs of `report` by run ID: state.
fn states(s: &mesos_appliance::scheduler::Snapshot) -> BTreeMap<String, RunState> {
    report(s)
        .map(|j| j.runs.iter().map(|r| (r.run_id.clone(), r.state)).collect())
        .unwrap_or_default()
}

/// Every task the testbed master was asked to launch, in order.
fn launches(tb: &Testbed) -> Vec<String> {
    tb.calls()
        .iter()
        .flat_map(|c| c.launched_task_ids())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbid_job_launches_once_per_run_across_a_leader_change() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let first = Replica::start(&zk.connect_string(), "r1", &tb.url(), vec![], core_config()).await;
    first
        .wait_for("r1 leads", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
        })
        .await;
    let second = Replica::start(&zk.connect_string(), "r2", &tb.url(), vec![], core_config()).await;
    put_job(
        &first,
        job(json!({
            "name": "report", "command": "sleep 3600", "cpus": 0.1, "mem": 32,
            "schedule": {"cron": "*/3 * * * * *", "starting_deadline": "10s",
                         "concurrency": "forbid"}
        })),
    )
    .await;
    // The first run runs (its task never ends); the next triggers skip.
    first
        .wait_for("a run and two skipped triggers", WAIT, |s| {
            let st = states(s);
            st.values().filter(|v| **v == RunState::Running).count() == 1
                && st.values().filter(|v| **v == RunState::Skipped).count() >= 2
        })
        .await;
    // Stop the leader right after a trigger was recorded (the next one
    // comes within 3 s, while r2 takes over).
    let before = states(&first.snapshot()).len();
    first
        .wait_for("one more trigger", WAIT, |s| states(s).len() > before)
        .await;
    first.stop().await;
    let s = second
        .wait_for("r2 leads and records triggers again", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed && states(s).len() >= before + 3
        })
        .await;
    let st = states(&s);
    // Still one run running: the same one, adopted, not launched again.
    let running: Vec<&String> = st
        .iter()
        .filter(|(_, v)| **v == RunState::Running)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(running.len(), 1, "{st:?}");
    let launched = launches(&tb);
    assert_eq!(
        launched,
        [format!("report.{}.1", running[0])],
        "exactly one launch, for the one run that was not skipped: {st:?}"
    );
    assert!(
        st.values()
            .all(|v| matches!(v, RunState::Running | RunState::Skipped)),
        "{st:?}"
    );
    // A third replica, standby: the same history and next run time as the
    // leader once the schedule stops.
    let third = Replica::start(&zk.connect_string(), "r3", &tb.url(), vec![], core_config()).await;
    let _: bool = second
        .handle
        .request(
            Duration::from_secs(10),
            Request::SetJobEnabled {
                name: "report".into(),
                enabled: false,
            },
        )
        .await
        .expect("disabled");
    second
        .wait_for("disabled", WAIT, |s| {
            report(s).is_some_and(|j| j.next_run_at.is_none())
        })
        .await;
    // Both sides are read anew each time: the leader's view may still
    // change after the disable (a run record written or trimmed from the
    // history a moment later), so a copy taken once can differ for good
    // from what the standby ends up with.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (leader, standby) = (second.snapshot(), third.snapshot());
        let (want, got) = (report(&leader), report(&standby));
        if want.is_some()
            && got.map(|j| (&j.runs, j.next_run_at)) == want.map(|j| (&j.runs, j.next_run_at))
        {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let show = |j: Option<&JobStatus>| j.map(|j| (j.runs.clone(), j.next_run_at));
            panic!("r3 shows {:#?}\nthe leader {:#?}", show(got), show(want));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    third.stop().await;
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_while_no_leader_could_launch_are_missed_and_never_launched() {
    let zk = ZkServer::start();
    let tb = Testbed::start(TestbedConfig::for_tests(2)).await.unwrap();
    let first = Replica::start(&zk.connect_string(), "r1", &tb.url(), vec![], core_config()).await;
    first
        .wait_for("r1 leads", WAIT, |s| {
            s.framework.state == FrameworkState::Subscribed
        })
        .await;
    put_job(
        &first,
        job(json!({
            "name": "report", "command": "sleep 3600", "cpus": 0.1, "mem": 32,
            "schedule": {"cron": "*/2 * * * * *", "starting_deadline": "2s",
                         "concurrency": "allow"}
        })),
    )
    .await;
    first
        .wait_for("a run", WAIT, |s| !states(s).is_empty())
        .await;
    first.stop().await;
    // No replica leads for a while: several triggers pass (a deliberate
    // gap, not a wait for a condition).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let second = Replica::start(&zk.connect_string(), "r2", &tb.url(), vec![], core_config()).await;
    let s = second
        .wait_for("the gap's triggers are missed", WAIT, |s| {
            states(s)
                .values()
                .filter(|v| **v == RunState::Missed)
                .count()
                >= 2
        })
        .await;
    let st = states(&s);
    let missed: Vec<&String> = st
        .iter()
        .filter(|(_, v)| **v == RunState::Missed)
        .map(|(k, _)| k)
        .collect();
    let launched = launches(&tb);
    for run in &missed {
        assert!(
            !launched
                .iter()
                .any(|t| t.starts_with(&format!("report.{run}."))),
            "missed run {run} was launched: {launched:?}"
        );
    }
    second.stop().await;
}
