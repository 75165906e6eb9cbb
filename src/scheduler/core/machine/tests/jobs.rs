//! Jobs (`docs/jobs.md`): triggers from the injected clock, one run record
//! per trigger written before its task record, concurrency, retries,
//! timeouts, missed triggers, a new leader's runs, daylight-saving days.

use super::*;
use crate::mesos::client::{ErrorKind, StopReason};
use crate::scheduler::jobs::{JobRecord, RunRecord, RunState};
use crate::scheduler::spec::job::JobSpec;

/// The machine's clock starts here (seconds since the UNIX epoch).
const BASE: f64 = 1_000_000.0;

fn job(extra: serde_json::Value) -> JobSpec {
    let mut value = serde_json::json!({
        "name": "report", "command": "./report.sh", "cpus": 0.1, "mem": 32,
        "schedule": {"cron": "*/10 * * * * *", "starting_deadline": "5s"}
    });
    if let (Some(v), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
        for (k, x) in extra {
            if k == "schedule" {
                let s = v["schedule"].as_object_mut().unwrap();
                s.extend(x.as_object().unwrap().clone());
            } else {
                v.insert(k.clone(), x.clone());
            }
        }
    }
    let spec: JobSpec = serde_json::from_value(value).unwrap();
    assert!(spec.validate().is_empty(), "{:?}", spec.validate());
    spec
}

/// Puts `spec` in `h`'s store as a job record created (and last updated)
/// at `created`, at version 0.
fn store_job(h: &mut Harness, spec: &JobSpec, created: f64) {
    let record = JobRecord {
        spec: spec.clone(),
        created_at: created,
        updated_at: created,
    };
    h.store.jobs.insert(spec.name.clone(), (record, 0));
}

/// A subscribed leader whose store holds `spec` (created at `created`)
/// and `runs`, `tasks`; its clock at `base`.
fn leader_at(
    base: f64,
    spec: &JobSpec,
    created: f64,
    runs: &[RunRecord],
    tasks: &[TaskRecord],
) -> Harness {
    let mut h = Harness::new(config(), Some(FRAMEWORK), &[], tasks);
    h.machine = Machine::new(
        h.machine.cfg.clone(),
        h.machine.term.clone(),
        Instant::now(),
        base,
    );
    store_job(&mut h, spec, created);
    for run in runs {
        h.store.runs.insert(run.key(), (run.clone(), 1));
    }
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    h
}

fn leader(spec: &JobSpec) -> Harness {
    leader_at(BASE, spec, BASE, &[], &[])
}

/// The stored runs, oldest first.
fn runs(h: &Harness) -> Vec<RunRecord> {
    h.store.runs.values().map(|(r, _)| r.clone()).collect()
}

fn states(h: &Harness) -> Vec<(String, RunState)> {
    runs(h).into_iter().map(|r| (r.run_id, r.state)).collect()
}

/// Advances, answering all I/O, offering one agent's resources each second.
async fn run_for(h: &mut Harness, secs: u64) -> Vec<String> {
    let mut launched = Vec::new();
    for i in 0..secs {
        h.offer(&format!("o-{i}-{}", h.next_reply), "agent-0", 4.0);
        h.next_reply += 1;
        h.answer_all();
        h.advance(Duration::from_secs(1)).await;
        h.answer_all();
        launched.extend(Harness::launched(&h.drain_call_log()));
    }
    launched
}

/// Runs second by second until something launches (at most `max` s):
/// what launched and after how many seconds.
async fn until_launch(h: &mut Harness, max: u64) -> (Vec<String>, u64) {
    for i in 1..=max {
        let launched = run_for(h, 1).await;
        if !launched.is_empty() {
            return (launched, i);
        }
    }
    (Vec::new(), max)
}

#[tokio::test(start_paused = true)]
async fn each_trigger_records_one_run_before_its_task_and_launches_it_once() {
    let spec = job(serde_json::json!({}));
    let mut h = leader(&spec);
    // The order of writes: the run record (`runs/`), then the task record.
    h.watch = Some(|h: &Harness, effect: &Effect| {
        if let Effect::Store {
            op: StoreOp::PutTask(record, Expect::Absent),
            ..
        } = effect
        {
            let stored = h
                .store
                .runs
                .values()
                .any(|(r, _)| r.attempts.iter().any(|a| a.task_id == record.task_id));
            if !stored {
                return Some(format!("task {} before its run record", record.task_id));
            }
        }
        None
    });
    let launched = run_for(&mut h, 12).await;
    assert!(h.violations.is_empty(), "{:?}", h.violations);
    // 1_000_010 = 1970-01-12T13:46:50Z.
    assert_eq!(launched, ["report.19700112T134650Z.1"]);
    assert_eq!(
        states(&h),
        [("19700112T134650Z".to_string(), RunState::Starting)]
    );
    h.update(status(&launched[0], TaskState::TaskRunning, Some("u1")));
    h.answer_all();
    assert_eq!(runs(&h)[0].state, RunState::Running);
    h.update(status(&launched[0], TaskState::TaskFinished, Some("u2")));
    h.answer_all();
    let run = &runs(&h)[0];
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.reason.as_deref(), Some("exit status 0"));
    // The next trigger: one more run, one more task.
    let launched = run_for(&mut h, 10).await;
    assert_eq!(launched, ["report.19700112T134700Z.1"]);
    let snapshot = h.snapshot().await;
    assert_eq!(snapshot.jobs.len(), 1);
    assert_eq!(snapshot.jobs[0].runs.len(), 2);
    assert_eq!(snapshot.jobs[0].next_run_at, Some(1_000_030.0));
}

#[tokio::test(start_paused = true)]
async fn forbid_records_an_overlapping_trigger_as_skipped() {
    let spec = job(serde_json::json!({"schedule": {"concurrency": "forbid"}}));
    let mut h = leader(&spec);
    let launched = run_for(&mut h, 12).await;
    h.update(status(&launched[0], TaskState::TaskRunning, Some("u1")));
    h.answer_all();
    let launched = run_for(&mut h, 20).await;
    assert!(launched.is_empty(), "{launched:?}");
    let s = states(&h);
    assert_eq!(s[0].1, RunState::Running);
    assert_eq!(
        &s[1..],
        [
            ("19700112T134700Z".to_string(), RunState::Skipped),
            ("19700112T134710Z".to_string(), RunState::Skipped),
        ]
    );
    assert!(
        runs(&h)[1]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("skipped: concurrency")
    );
}

#[tokio::test(start_paused = true)]
async fn replace_kills_the_running_run_then_starts_the_new_one() {
    let spec = job(serde_json::json!({"schedule": {"concurrency": "replace"}}));
    let mut h = leader(&spec);
    let first = run_for(&mut h, 12).await;
    h.update(status(&first[0], TaskState::TaskRunning, Some("u1")));
    h.answer_all();
    let second = run_for(&mut h, 10).await;
    assert_eq!(second, ["report.19700112T134700Z.1"]);
    assert_eq!(h.marked(), [first[0].clone()]);
    h.update(status(&first[0], TaskState::TaskKilled, Some("u2")));
    h.answer_all();
    let r = runs(&h);
    assert_eq!(r[0].state, RunState::Killed);
    assert_eq!(
        r[0].reason.as_deref(),
        Some("replaced by run 19700112T134700Z")
    );
    assert_eq!(r[1].state, RunState::Starting);
}

#[tokio::test(start_paused = true)]
async fn allow_runs_both() {
    let spec = job(serde_json::json!({"schedule": {"concurrency": "allow"}}));
    let mut h = leader(&spec);
    let first = run_for(&mut h, 12).await;
    h.update(status(&first[0], TaskState::TaskRunning, Some("u1")));
    h.answer_all();
    let second = run_for(&mut h, 10).await;
    assert_eq!(second, ["report.19700112T134700Z.1"]);
    assert!(h.marked().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_retried_with_backoff_then_the_run_fails_with_the_exit_status() {
    let spec = job(serde_json::json!({
        "schedule": {"cron": "0 0 * * * *"},
        "retries": {"count": 2, "backoff": "3s"}
    }));
    let mut h = leader(&spec);
    let id = h.command(Request::StartRun(Box::new(
        crate::scheduler::commands::RunRequest {
            job: "report".into(),
            args: vec![],
            env: Default::default(),
            by: "alice".into(),
            reason: None,
        },
    )));
    h.answer_all();
    let Some(Answer::Run(Ok(run))) = h.reply(id) else {
        panic!("{:?}", h.reply(id));
    };
    let run_id = run.run_id.clone();
    let failed = |task: &str, uuid: &str| v1::TaskStatus {
        message: Some("Command exited with status 3".into()),
        ..status(task, TaskState::TaskFailed, Some(uuid))
    };
    for attempt in 1..=3u32 {
        let (launched, waited) = until_launch(&mut h, 20).await;
        assert_eq!(launched, [format!("report.{run_id}.{attempt}")]);
        if attempt > 1 {
            // The retry waited for its backoff: 3 s, then 6 s.
            let delay = 3 * (1 << (attempt - 2));
            assert!(waited >= delay, "attempt {attempt} after {waited} s");
        }
        h.update(failed(&launched[0], &format!("f{attempt}")));
        h.answer_all();
        if attempt < 3 {
            let r = &runs(&h)[0];
            assert_eq!(r.state, RunState::Starting);
            let delay = 3.0 * f64::from(1u32 << (attempt - 1));
            let ended = r.attempts[attempt as usize - 1].ended_at.unwrap();
            assert!((r.retry_at.unwrap() - ended - delay).abs() < 0.01);
        }
    }
    let r = &runs(&h)[0];
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(r.reason.as_deref(), Some("exit status 3"));
    assert_eq!(r.attempts.len(), 3);
    assert_eq!(r.attempts[2].exit_status, Some(3));
    assert!(
        matches!(&r.trigger, crate::scheduler::jobs::Trigger::Manual { by, .. } if by == "alice")
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_is_killed_and_recorded_timed_out() {
    let spec = job(serde_json::json!({"timeout": "5s"}));
    let mut h = leader(&spec);
    let launched = run_for(&mut h, 12).await;
    h.update(status(&launched[0], TaskState::TaskRunning, Some("u1")));
    h.answer_all();
    run_for(&mut h, 5).await;
    assert_eq!(h.marked(), [launched[0].clone()]);
    h.update(status(&launched[0], TaskState::TaskKilled, Some("u2")));
    h.answer_all();
    let r = &runs(&h)[0];
    assert_eq!(r.state, RunState::TimedOut);
    assert_eq!(r.reason.as_deref(), Some("timed out after 5s"));
}

#[tokio::test(start_paused = true)]
async fn a_trigger_no_leader_could_launch_within_the_deadline_is_missed_not_launched() {
    // The last stored trigger was 30 s before this leader's start: the
    // two triggers since are past their 5 s deadline.
    let spec = job(serde_json::json!({}));
    let last = RunRecord {
        job: "report".into(),
        run_id: crate::scheduler::jobs::RunId::scheduled(999_970),
        trigger: crate::scheduler::jobs::Trigger::Schedule { at: 999_970.0 },
        state: RunState::Succeeded,
        reason: None,
        created_at: 999_970.0,
        finished_at: Some(999_975.0),
        args: vec![],
        env: Default::default(),
        attempts: vec![],
        retry_at: None,
        kill: None,
    };
    let mut h = leader_at(BASE, &spec, 999_000.0, &[last], &[]);
    let launched = run_for(&mut h, 3).await;
    // Only the trigger within its deadline launches.
    assert_eq!(launched, ["report.19700112T134640Z.1"]);
    let s = states(&h);
    assert_eq!(s.len(), 4);
    // 999_980, 999_990: missed; 1_000_000 (the start): within the deadline.
    assert_eq!(s[1].1, RunState::Missed);
    assert_eq!(s[2].1, RunState::Missed);
    assert_eq!(s[3].1, RunState::Starting);
}

/// A scheduled run's first attempt is not launched past its starting
/// deadline, even between two of the once-a-second ticks that record it
/// `missed` (a fresh user's trial: launched 31.2 s after its trigger with
/// a 30 s deadline). The trigger at 1_000_010, deadline 5 s, the first
/// offer 5.5 s after it: declined to the run, then `missed`.
#[tokio::test(start_paused = true)]
async fn a_run_past_its_starting_deadline_between_two_ticks_is_not_launched() {
    let spec = job(serde_json::json!({}));
    let mut h = leader(&spec);
    h.advance(Duration::from_millis(15_500)).await;
    h.answer_all();
    assert_eq!(
        states(&h),
        [("19700112T134650Z".to_string(), RunState::Starting)]
    );
    h.drain_call_log();
    h.offer("o-late", "agent-0", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    h.advance(Duration::from_secs(1)).await;
    h.answer_all();
    assert_eq!(
        states(&h),
        [("19700112T134650Z".to_string(), RunState::Missed)]
    );
}

/// A run of `report` triggered at `id` (a scheduled run ID) and recorded
/// `Starting` at 999,990 s by an earlier leader, with its first attempt.
fn recorded(id: &str) -> RunRecord {
    RunRecord {
        job: "report".into(),
        run_id: id.into(),
        trigger: crate::scheduler::jobs::Trigger::Schedule {
            at: crate::scheduler::jobs::RunId::scheduled_at(id).unwrap() as f64,
        },
        state: RunState::Starting,
        reason: None,
        created_at: 999_990.0,
        finished_at: None,
        args: vec![],
        env: Default::default(),
        attempts: vec![crate::scheduler::jobs::Attempt {
            number: 1,
            task_id: format!("report.{id}.1").as_str().into(),
            created_at: 999_990.0,
            running_at: None,
            ended_at: None,
            task_state: None,
            exit_status: None,
            message: None,
        }],
        retry_at: None,
        kill: None,
    }
}

/// A forbid job's run left running by an earlier leader, its task
/// record stored RUNNING at 999,990 s: a new leader whose trigger at
/// 1,000,000 s comes before the master spoke of that task.
fn forbid_leader_with_an_unheard_run() -> (Harness, String) {
    let spec = job(serde_json::json!({"schedule": {"concurrency": "forbid"}}));
    let mut run = recorded("19700112T134630Z");
    run.state = RunState::Running;
    let task_id = run.attempts[0].task_id.to_string();
    let mut task = running_record("report", 1, &service("report", 1));
    task.task_id = task_id.as_str().into();
    task.updated_at = 999_990.0;
    let h = leader_at(BASE, &spec, 999_000.0, &[run], &[task]);
    (h, task_id)
}

/// The trial's false skip: the old run's task ended while no leader
/// listened; the new leader judged the next trigger before the master's
/// word on it arrived, and skipped it as overlapping. Now the trigger
/// waits for that word (within its starting deadline) and fires.
#[tokio::test(start_paused = true)]
async fn forbid_waits_for_the_masters_word_on_an_old_run_before_it_skips() {
    let (mut h, task) = forbid_leader_with_an_unheard_run();
    let launched = run_for(&mut h, 2).await;
    assert!(launched.is_empty(), "{launched:?}");
    assert_eq!(states(&h).len(), 1, "the trigger waits: {:?}", states(&h));
    // The subscription's reconciliation answers: it finished meanwhile.
    h.update(reconciled(&task, TaskState::TaskFinished));
    h.answer_all();
    let launched = run_for(&mut h, 2).await;
    assert_eq!(launched, ["report.19700112T134640Z.1"]);
    let s = states(&h);
    assert_eq!(s[0].1, RunState::Succeeded, "{s:?}");
    assert_eq!(s[1].0, "19700112T134640Z", "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn forbid_skips_a_trigger_once_the_master_says_the_old_run_goes_on() {
    let (mut h, task) = forbid_leader_with_an_unheard_run();
    run_for(&mut h, 1).await;
    h.update(reconciled(&task, TaskState::TaskRunning));
    h.answer_all();
    run_for(&mut h, 2).await;
    let s = states(&h);
    assert_eq!(s[1], ("19700112T134640Z".to_string(), RunState::Skipped));
}

#[tokio::test(start_paused = true)]
async fn forbid_misses_a_trigger_the_master_never_spoke_for_within_its_deadline() {
    let (mut h, _) = forbid_leader_with_an_unheard_run();
    let launched = run_for(&mut h, 8).await;
    assert!(launched.is_empty(), "{launched:?}");
    let runs = runs(&h);
    assert_eq!(runs[1].state, RunState::Missed, "{runs:?}");
    assert!(runs[1].reason.as_deref().unwrap().starts_with("missed"));
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_launches_a_recorded_attempt_once_and_never_fires_its_trigger_again() {
    let spec = job(serde_json::json!({
        "schedule": {"starting_deadline": "1m", "concurrency": "allow"}
    }));
    // The old leader stored the run of 999_990 and died before its task
    // record: the new one launches that attempt.
    let run = recorded("19700112T134630Z");
    let mut h = leader_at(BASE, &spec, 999_000.0, std::slice::from_ref(&run), &[]);
    let mut launched = run_for(&mut h, 5).await;
    launched.sort();
    // The recorded attempt, and the trigger of 1_000_000 (allow).
    assert_eq!(
        launched,
        ["report.19700112T134630Z.1", "report.19700112T134640Z.1"]
    );
    // The old leader launched it (its task record is stored): nothing is
    // launched again; the trigger at 1_000_000 fires once.
    let mut task = running_record("report", 1, &service("report", 1));
    task.task_id = "report.19700112T134630Z.1".into();
    let mut h = leader_at(BASE, &spec, 999_000.0, &[run], &[task]);
    let launched = run_for(&mut h, 5).await;
    assert_eq!(launched, ["report.19700112T134640Z.1"]);
    let s = states(&h);
    assert_eq!(s[0].1, RunState::Running, "{s:?}");
    assert_eq!(s.len(), 2);
}

/// Seconds since the epoch of a wall-clock time in Europe/Berlin.
fn berlin(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> f64 {
    use chrono::TimeZone as _;
    chrono_tz::Europe::Berlin
        .with_ymd_and_hms(y, mo, d, h, mi, 0)
        .earliest()
        .unwrap()
        .timestamp() as f64
}

#[tokio::test(start_paused = true)]
async fn a_time_missing_in_spring_runs_once_at_the_shifted_time() {
    let spec = job(serde_json::json!({
        "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}
    }));
    // 01:55 CET; 02:30 does not exist (02:00 CET → 03:00 CEST).
    let base = berlin(2026, 3, 29, 1, 55);
    let mut h = leader_at(base, &spec, base, &[], &[]);
    run_for(&mut h, 10 * 60).await;
    // 03:00 CEST = 01:00Z, once.
    let ids: Vec<String> = runs(&h).into_iter().map(|r| r.run_id).collect();
    assert_eq!(ids, ["20260329T010000Z"]);
    run_for(&mut h, 60).await;
    assert_eq!(runs(&h).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_time_repeated_in_autumn_runs_once() {
    let spec = job(serde_json::json!({
        "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "concurrency": "allow"}
    }));
    // 02:25 CEST; 02:30 comes twice (03:00 CEST → 02:00 CET).
    let base = berlin(2026, 10, 25, 2, 25);
    let mut h = leader_at(base, &spec, base, &[], &[]);
    run_for(&mut h, 75 * 60).await;
    let ids: Vec<String> = runs(&h).into_iter().map(|r| r.run_id).collect();
    // 02:30 CEST = 00:30Z; not 02:30 CET = 01:30Z.
    assert_eq!(ids, ["20261025T003000Z"]);
}

#[tokio::test(start_paused = true)]
async fn history_keeps_the_newest_finished_runs() {
    let spec = job(serde_json::json!({"history": 2, "schedule": {"concurrency": "allow"}}));
    let mut h = leader(&spec);
    for i in 0..4 {
        let (launched, _) = until_launch(&mut h, 15).await;
        assert_eq!(launched.len(), 1, "round {i}");
        h.update(status(&launched[0], TaskState::TaskFinished, Some("u")));
        h.answer_all();
    }
    let ids: Vec<String> = runs(&h).into_iter().map(|r| r.run_id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[1], "19700112T134720Z");
}

#[tokio::test(start_paused = true)]
async fn a_job_cannot_take_a_services_name_nor_a_service_a_jobs() {
    let spec = job(serde_json::json!({}));
    let mut h = leader(&spec);
    let id = h.command(Request::PutService(Box::new(valid(service("report", 1)))));
    assert!(matches!(
        h.reply(id),
        Some(Answer::Service(Err(
            crate::scheduler::commands::CommandError::Conflict(_)
        )))
    ));
}

#[tokio::test(start_paused = true)]
async fn enabling_an_enabled_job_changes_nothing_and_loses_no_trigger() {
    // The housekeeping tick runs half a second after each whole second, so
    // a trigger waits up to a second for its run record. An `enable` of a
    // job already enabled in that gap must not move the job's last change
    // past the trigger (`docs/jobs.md#exactly-once`: every trigger gets a
    // run record).
    let spec = job(serde_json::json!({}));
    let mut h = leader_at(BASE + 0.5, &spec, BASE, &[], &[]);
    let launched = run_for(&mut h, 9).await; // the clock at BASE + 9.5
    assert!(launched.is_empty(), "{launched:?}");
    h.advance(Duration::from_millis(600)).await; // BASE + 10.1: trigger due
    let id = h.command(Request::SetJobEnabled {
        name: "report".into(),
        enabled: true,
    });
    h.answer_all();
    assert!(matches!(h.reply(id), Some(Answer::Service(Ok(_)))));
    let launched = run_for(&mut h, 2).await;
    assert_eq!(launched, ["report.19700112T134650Z.1"]);
}

fn manual_run() -> Request {
    Request::StartRun(Box::new(crate::scheduler::commands::RunRequest {
        job: "report".into(),
        args: vec![],
        env: Default::default(),
        by: "alice".into(),
        reason: None,
    }))
}

#[tokio::test(start_paused = true)]
async fn a_job_command_before_the_jobs_are_read_is_not_ready_not_a_conflict() {
    let spec = job(serde_json::json!({}));
    let mut h = Harness::new(config(), Some(FRAMEWORK), &[], &[]);
    store_job(&mut h, &spec, BASE);
    h.start();
    // The reads of the jobs are not answered yet.
    let id = h.command(manual_run());
    assert!(
        matches!(
            h.reply(id),
            Some(Answer::Run(Err(
                crate::scheduler::commands::CommandError::NotReady(_)
            )))
        ),
        "{:?}",
        h.reply(id)
    );
    let valid = crate::scheduler::spec::job::ValidJobSpec::new(spec.clone()).expect("valid");
    let put = h.command(Request::PutJob(Box::new(valid)));
    assert!(
        matches!(
            h.reply(put),
            Some(Answer::Service(Err(
                crate::scheduler::commands::CommandError::NotReady(_)
            )))
        ),
        "{:?}",
        h.reply(put)
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_kill_of_a_run_being_killed_is_a_conflict() {
    let spec = job(serde_json::json!({"schedule": {"cron": "0 0 * * * *"}}));
    let mut h = leader(&spec);
    let id = h.command(manual_run());
    h.answer_all();
    let Some(Answer::Run(Ok(run))) = h.reply(id) else {
        panic!("{:?}", h.reply(id));
    };
    let run_id = run.run_id.clone();
    let (launched, _) = until_launch(&mut h, 20).await;
    h.update(status(&launched[0], TaskState::TaskRunning, Some("r1")));
    h.answer_all();
    let kill = || Request::KillRun {
        name: "report".into(),
        run_id: run_id.clone(),
        by: "killed by alice".into(),
    };
    let ids: Vec<ReplyId> = (0..4).map(|_| h.command(kill())).collect();
    h.answer_all();
    let ok = ids
        .iter()
        .filter(|id| matches!(h.reply(**id), Some(Answer::Run(Ok(_)))))
        .count();
    let conflicts = ids
        .iter()
        .filter(|id| {
            matches!(
                h.reply(**id),
                Some(Answer::Run(Err(
                    crate::scheduler::commands::CommandError::Conflict(_)
                )))
            )
        })
        .count();
    assert_eq!((ok, conflicts), (1, 3));
    assert_eq!(h.marked(), [launched[0].clone()], "one kill");
}

/// A new leader whose task records load before its jobs do kills no job
/// task as one of a deleted service: the pass waits for the jobs (a forbid
/// job's run failed across a leader change that way).
#[tokio::test(start_paused = true)]
async fn a_new_leader_kills_no_job_task_before_its_jobs_are_read() {
    let spec = job(serde_json::json!({}));
    let task = TaskRecord {
        agent_id: "agent-0".into(),
        ..TaskRecord::sample(
            "report.20000101T000000Z.1",
            "report",
            TaskState::TaskRunning,
        )
    };
    let mut h = Harness::new(config(), Some(FRAMEWORK), &[], &[task]);
    store_job(&mut h, &spec, BASE);
    h.start();
    // The small reads, then the task list; the jobs' lists stay unanswered.
    for _ in 0..3 {
        h.answer_next_store();
    }
    h.subscribe();
    assert!(matches!(h.stores.front(), Some((_, StoreOp::ListTasks))));
    h.answer_next_store();
    h.advance(Duration::from_secs(2)).await;
    let kills = |calls: &[MesosCall]| {
        calls
            .iter()
            .filter(|c| matches!(c, MesosCall::Kill { .. }))
            .count()
    };
    let calls = h.drain_call_log();
    assert_eq!(kills(&calls), 0, "{calls:?}");
    // The jobs come: the task is the job's, still not killed.
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(kills(&calls), 0, "{calls:?}");
}

/// A job's task on a drained agent is not moved: the drain waits for its
/// run to end and says so; deleting the job kills it, and the drain ends.
#[tokio::test(start_paused = true)]
async fn a_drain_waits_for_a_jobs_task_and_ends_once_the_job_is_deleted() {
    use crate::scheduler::drains::{DrainProgress, DrainState, MinHealthy, ThenAction};
    let spec = job(serde_json::json!({"schedule": {"cron": "0 0 * * * *"}}));
    let mut h = leader(&spec);
    h.command(manual_run());
    h.answer_all();
    let (launched, _) = until_launch(&mut h, 20).await;
    h.update(status(&launched[0], TaskState::TaskRunning, Some("r1")));
    h.answer_all();
    h.command(Request::StartDrain {
        agent_id: "agent-0".into(),
        min_healthy: MinHealthy::Count(1),
        reason: None,
        by: "admin".into(),
        then: ThenAction::None,
    });
    h.answer_all();
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    assert_eq!(h.marked(), Vec::<String>::new());
    h.feed(Input::Heartbeat);
    let drain = |snapshot: &Snapshot| {
        snapshot
            .agents
            .iter()
            .find(|a| a.agent_id.as_str() == "agent-0")
            .and_then(|a| a.drain.clone())
            .expect("the drain")
    };
    let shown = drain(h.snapshot().await);
    assert_eq!(shown.state, DrainState::Running);
    assert_eq!(shown.blocked, 1, "{shown:?}");
    let why = shown.tasks[0].reason.clone().unwrap_or_default();
    assert!(why.contains("job report"), "{why}");
    h.command(Request::DeleteJob("report".into()));
    h.answer_all();
    assert_eq!(h.marked(), [launched[0].clone()]);
    h.update(v1::TaskStatus {
        agent_id: Some(v1::AgentId {
            value: "agent-0".into(),
        }),
        ..status(&launched[0], TaskState::TaskKilled, Some("k1"))
    });
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    h.feed(Input::Heartbeat);
    let shown = drain(h.snapshot().await);
    assert_eq!(
        (shown.state, shown.stopped),
        (DrainState::Done, 1),
        "{shown:?}"
    );
    assert_eq!(shown.tasks[0].progress, DrainProgress::Stopped);
}

/// A subscribed leader of the service `web` (2 instances, both running)
/// and the job `spec`, whose manual run's first attempt runs: the
/// harness and the attempt's task ID.
async fn web_and_a_running_run(spec: &JobSpec) -> (Harness, String) {
    let web = service("web", 2);
    let tasks = [
        running_record("web", 0, &web),
        running_record("web", 1, &web),
    ];
    let mut h = Harness::new(
        config(),
        Some(FRAMEWORK),
        std::slice::from_ref(&web),
        &tasks,
    );
    h.machine = Machine::new(
        h.machine.cfg.clone(),
        h.machine.term.clone(),
        Instant::now(),
        BASE,
    );
    store_job(&mut h, spec, BASE);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    h.command(manual_run());
    h.answer_all();
    let (launched, _) = until_launch(&mut h, 5).await;
    assert_eq!(launched.len(), 1, "{launched:?}");
    h.update(status(&launched[0], TaskState::TaskRunning, Some("r1")));
    h.answer_all();
    assert_eq!(runs(&h)[0].state, RunState::Running);
    (h, launched[0].clone())
}

/// The trial's fault: teardown, then reregister, while a job run was
/// active. The new framework launches every service instance again (the
/// services the last pass found settled are assessed afresh), and the run
/// ends: its task went with the framework.
#[tokio::test(start_paused = true)]
async fn teardown_then_reregister_ends_the_run_and_launches_the_services_again() {
    let spec = job(serde_json::json!({"schedule": {"cron": "0 0 0 1 1 *"}}));
    let (mut h, task) = web_and_a_running_run(&spec).await;
    let teardown = h.command(Request::Teardown);
    h.answer_all();
    assert!(matches!(h.reply(teardown), Some(Answer::Teardown(Ok(_)))));
    let r = failed_with(&h, "framework torn down");
    let attempt = &r.attempts[0];
    assert_eq!(attempt.task_state.as_deref(), Some("TASK_KILLED"), "{r:?}");
    assert!(attempt.ended_at.is_some(), "{r:?}");
    let reregister = h.command(Request::Reregister);
    h.answer_all();
    assert!(matches!(h.reply(reregister), Some(Answer::Done(Ok(())))));
    h.subscribe_as("fw-2");
    h.answer_all();
    h.drain_call_log();
    let launched = run_for(&mut h, 3).await;
    let mut web: Vec<&String> = launched.iter().filter(|t| t.starts_with("web.")).collect();
    web.sort();
    assert_eq!(web.len(), 2, "both instances again: {launched:?}");
    assert!(!launched.contains(&task), "the ended attempt stays ended");
    assert_eq!(runs(&h)[0].state, RunState::Failed);
}

/// A torn-down run with a retry left is retried on the new framework.
#[tokio::test(start_paused = true)]
async fn a_run_with_a_retry_left_is_retried_after_a_teardown() {
    let spec = job(serde_json::json!({
        "schedule": {"cron": "0 0 0 1 1 *"},
        "retries": {"count": 1, "backoff": "1s"}
    }));
    let (mut h, task) = web_and_a_running_run(&spec).await;
    h.command(Request::Teardown);
    h.answer_all();
    let r = &runs(&h)[0];
    assert_eq!(
        (r.state, r.attempts.len()),
        (RunState::Starting, 2),
        "{r:?}"
    );
    assert!(
        r.attempts[0]
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("framework torn down"),
        "{r:?}"
    );
    h.command(Request::Reregister);
    h.answer_all();
    h.subscribe_as("fw-2");
    h.answer_all();
    h.drain_call_log();
    let launched = run_for(&mut h, 4).await;
    let retry = format!("{}.2", task.strip_suffix(".1").expect("attempt 1"));
    assert!(launched.contains(&retry), "{launched:?}");
}

/// `forbid` no longer skips once the run the teardown ended is over.
#[tokio::test(start_paused = true)]
async fn forbid_does_not_skip_after_a_teardown_ended_the_run() {
    let spec = job(serde_json::json!({"schedule": {"cron": "*/10 * * * * *"}}));
    let (mut h, _) = web_and_a_running_run(&spec).await;
    h.command(Request::Teardown);
    h.answer_all();
    h.command(Request::Reregister);
    h.answer_all();
    h.subscribe_as("fw-2");
    h.answer_all();
    run_for(&mut h, 12).await;
    let skipped: Vec<_> = runs(&h)
        .into_iter()
        .filter(|r| r.state == RunState::Skipped)
        .collect();
    assert!(skipped.is_empty(), "{skipped:?}");
}

/// The first run, which ended `failed`, its reason naming `why`.
fn failed_with(h: &Harness, why: &str) -> RunRecord {
    let r = runs(h).remove(0);
    assert_eq!(r.state, RunState::Failed, "{r:?}");
    assert!(
        r.reason.as_deref().unwrap_or_default().contains(why),
        "{r:?}"
    );
    r
}

/// The master removed the framework (its failover timeout passed) and
/// `--on-framework-removed=reregister` registers a new one: the run ends
/// "framework removed by the master", the services launch again.
#[tokio::test(start_paused = true)]
async fn a_removed_framework_ends_the_run_and_the_new_one_launches_the_services() {
    let spec = job(serde_json::json!({"schedule": {"cron": "0 0 0 1 1 *"}}));
    let (mut h, _) = web_and_a_running_run(&spec).await;
    h.machine.cfg.on_framework_removed = crate::scheduler::config::OnFrameworkRemoved::Reregister;
    h.feed(Input::ClientStopped(StopReason::Error(ErrorKind::Removed)));
    h.answer_all();
    failed_with(&h, "framework removed by the master");
    h.subscribe_as("fw-2");
    h.answer_all();
    h.drain_call_log();
    let launched = run_for(&mut h, 3).await;
    let web = launched.iter().filter(|t| t.starts_with("web.")).count();
    assert_eq!(web, 2, "{launched:?}");
}

/// The trial's second fault: a replica restarted after the master removed
/// its framework (`--on-framework-removed=reregister`) learns of the
/// removal before it has read the runs. The run whose task went with the
/// framework ends once they are read (its task record is gone by then),
/// and a `forbid` trigger after it fires.
#[tokio::test(start_paused = true)]
async fn a_removal_seen_before_the_runs_are_read_ends_the_run_once_they_are() {
    let spec = job(serde_json::json!({"schedule": {"concurrency": "forbid"}}));
    let mut run = recorded("19700112T134630Z");
    run.state = RunState::Running;
    run.attempts[0].task_state = Some("TASK_RUNNING".into());
    run.attempts[0].running_at = Some(999_991.0);
    let mut task = running_record("report", 1, &service("report", 1));
    task.task_id = run.attempts[0].task_id.clone();
    let mut h = Harness::new(config(), Some(FRAMEWORK), &[], &[task]);
    h.machine = Machine::new(
        h.machine.cfg.clone(),
        h.machine.term.clone(),
        Instant::now(),
        BASE,
    );
    h.machine.cfg.on_framework_removed = crate::scheduler::config::OnFrameworkRemoved::Reregister;
    store_job(&mut h, &spec, 999_000.0);
    h.store.runs.insert(run.key(), (run.clone(), 1));
    h.start();
    // The job reads are held back; everything else is answered, the
    // master says "Framework has been removed", and the framework is
    // forgotten.
    let mut held = Vec::new();
    while let Some((id, op)) = h.stores.pop_front() {
        if matches!(op, StoreOp::ListJobs | StoreOp::ListRuns) {
            held.push((id, op));
            continue;
        }
        let result = h.store.apply(op);
        h.feed(Input::Stored { id, result });
    }
    assert_eq!(held.len(), 2, "both job reads held");
    h.feed(Input::ClientStopped(StopReason::Error(ErrorKind::Removed)));
    h.answer_stores();
    assert!(h.store.tasks.is_empty(), "the task records are forgotten");
    for (id, op) in held {
        let result = h.store.apply(op);
        h.feed(Input::Stored { id, result });
    }
    h.answer_all();
    let r = failed_with(&h, "framework removed by the master");
    assert_eq!(r.attempts[0].task_state.as_deref(), Some("TASK_KILLED"));
    h.answer_operators();
    h.subscribe_as("fw-2");
    h.answer_all();
    let launched = run_for(&mut h, 3).await;
    assert_eq!(
        launched,
        ["report.19700112T134640Z.1"],
        "the next trigger fires: {:?}",
        states(&h)
    );
}
