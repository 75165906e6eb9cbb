//! The restart backoff belongs to the instance: only the instance's own
//! stable, healthy run forgives its failures — not a sibling's run, another
//! service's change, a scale change or a reconciliation answer.

use std::time::Duration;

use super::rollout::{checked, health, healthy_record};
use super::*;

/// Offers every second (at most 20 s) until a task is launched: the whole
/// seconds waited and the task launched.
async fn next_launch(h: &mut Harness) -> (u64, String) {
    for waited in 0..=20 {
        h.offer(&format!("o-{:?}", Instant::now()), "agent-9", 4.0);
        h.answer_all();
        if let Some(id) = Harness::launched(&h.drain_call_log()).pop() {
            return (waited, id);
        }
        h.advance(Duration::from_secs(1)).await;
    }
    panic!("nothing launched within 20 s");
}

/// The task `id` fails at once after reaching RUNNING.
fn crash(h: &mut Harness, id: &str) {
    h.update(status(id, TaskState::TaskRunning, Some(&format!("{id}-r"))));
    h.update(status(id, TaskState::TaskFailed, Some(&format!("{id}-f"))));
    h.answer_all();
}

/// The health check killed `id` (TASK_KILLED with `healthy = false`).
fn health_killed(h: &mut Harness, id: &str) {
    h.update(v1::TaskStatus {
        healthy: Some(false),
        ..status(id, TaskState::TaskKilled, Some(&format!("{id}-k")))
    });
    h.answer_all();
}

/// Starts a leader for `specs` with running tasks of `web` (the first)
/// instances 0..n, and of every other service's instances, whose RUNNING
/// updates arrive now (their runs start now).
fn leader(specs: &[ServiceSpec], n: u32, record: fn(u32, &ServiceSpec) -> TaskRecord) -> Harness {
    let mut tasks: Vec<TaskRecord> = (0..n).map(|i| record(i, &specs[0])).collect();
    for spec in &specs[1..] {
        tasks.extend((0..spec.instances).map(|i| running_record(&spec.name, i, spec)));
    }
    let mut h = Harness::leader(specs, &tasks);
    h.subscribe();
    h.answer_all();
    for t in &tasks {
        let id = t.task_id.to_string();
        let update = match t.healthy {
            Some(healthy) => health(&id, healthy, &format!("{id}-h")),
            None => status(&id, TaskState::TaskRunning, Some(&format!("{id}-r"))),
        };
        h.update(update);
    }
    h.answer_all();
    h.drain_call_log();
    h
}

fn plain(instance: u32, spec: &ServiceSpec) -> TaskRecord {
    running_record("web", instance, spec)
}

async fn failures(h: &mut Harness, service: &str) -> u32 {
    let s = h.snapshot().await;
    let status = s.services.iter().find(|x| x.spec.name == service).unwrap();
    status.consecutive_failures
}

#[tokio::test(start_paused = true)]
async fn a_sibling_s_stable_run_does_not_forgive_a_failing_instance() {
    let spec = service("web", 3); // 2 s, up to 8 s; stable after 10 s
    let mut h = leader(std::slice::from_ref(&spec), 3, plain);
    crash(&mut h, "web.1.stored");
    let mut waits = Vec::new();
    for _ in 0..5 {
        let (waited, id) = next_launch(&mut h).await;
        assert!(id.starts_with("web.1."), "{id}");
        waits.push(waited);
        crash(&mut h, &id);
    }
    // Instances 0 and 2 ran RUNNING all along (over 20 s: stable).
    assert_eq!(waits, [2, 4, 8, 8, 8]);
    assert_eq!(failures(&mut h, "web").await, 6);
    let s = h.snapshot().await;
    let backoff = &s.services[0].backoff;
    assert_eq!(backoff.len(), 1, "only instance 1: {backoff:?}");
    assert_eq!(
        (backoff[0].instance, backoff[0].consecutive_failures),
        (1, 6)
    );
    assert!(backoff[0].next_launch_after.is_some());
    assert!(s.services[0].next_launch_after.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_sibling_launches_while_another_instance_backs_off() {
    let spec = service("web", 3);
    let mut h = leader(std::slice::from_ref(&spec), 3, plain);
    crash(&mut h, "web.1.stored");
    let (_, id) = next_launch(&mut h).await;
    crash(&mut h, &id); // instance 1 now waits 4 s
    crash(&mut h, "web.0.stored");
    // Instance 0's first failure: 2 s, not instance 1's 4 s.
    let (waited, id) = next_launch(&mut h).await;
    assert!(id.starts_with("web.0."), "{id}");
    assert_eq!(waited, 2);
}

#[tokio::test(start_paused = true)]
async fn another_service_s_change_and_a_scale_change_do_not_forgive() {
    let web = service("web", 2);
    let other = service("other", 1);
    let mut h = leader(&[web.clone(), other.clone()], 2, plain);
    crash(&mut h, "web.1.stored");
    let (_, id) = next_launch(&mut h).await;
    crash(&mut h, &id); // two failures: 4 s
    for spec in [service("other", 3), service("other", 1), service("web", 3)] {
        let reply = h.command(Request::PutService(Box::new(valid(spec))));
        h.answer_all();
        assert!(matches!(h.reply(reply), Some(Answer::Service(Ok(true)))));
    }
    h.drain_call_log();
    assert_eq!(failures(&mut h, "web").await, 2);
    // Instance 2 is new and launches at once; instance 1 waits its 4 s.
    h.offer("o-scaled", "agent-9", 4.0);
    h.answer_all();
    let launched = Harness::launched(&h.drain_call_log());
    assert!(
        launched.iter().all(|id| id.starts_with("web.2.")) && launched.len() == 1,
        "{launched:?}"
    );
    let (waited, id) = next_launch(&mut h).await;
    assert!(id.starts_with("web.1."), "{id}");
    assert!((3..=4).contains(&waited), "{waited}");
    crash(&mut h, &id);
    assert_eq!(failures(&mut h, "web").await, 3, "still counting");
    // A new release (another fingerprint) starts clean.
    let mut release = service("web", 3);
    release.command = crate::scheduler::spec::command::CommandSpec::Shell("sleep 2000".into());
    h.command(Request::PutService(Box::new(valid(release))));
    h.answer_all();
    assert_eq!(failures(&mut h, "web").await, 0);
}

#[tokio::test(start_paused = true)]
async fn reconciliation_answers_do_not_forgive() {
    let spec = checked(2, "sleep 1000");
    let mut h = leader(std::slice::from_ref(&spec), 2, healthy_record);
    health_killed(&mut h, "web.1.stored");
    let (_, id) = next_launch(&mut h).await;
    // The replacement runs, unhealthy; the master answers every second
    // that it and its sibling are RUNNING.
    h.update(status(&id, TaskState::TaskRunning, Some("r")));
    h.update(health(&id, false, "u"));
    h.answer_all();
    for _ in 0..15 {
        h.update(reconciled(&id, TaskState::TaskRunning));
        h.update(reconciled("web.0.stored", TaskState::TaskRunning));
        h.update(reconciled("web.1.stored", TaskState::TaskKilled));
        h.answer_all();
        h.advance(Duration::from_secs(1)).await;
    }
    assert_eq!(failures(&mut h, "web").await, 1);
    health_killed(&mut h, &id);
    assert_eq!(failures(&mut h, "web").await, 2);
    let (waited, _) = next_launch(&mut h).await;
    assert!(
        (3..=4).contains(&waited),
        "the second failure's 4 s: {waited}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_instance_s_own_stable_healthy_run_forgives() {
    let spec = checked(2, "sleep 1000");
    let mut h = leader(std::slice::from_ref(&spec), 2, healthy_record);
    health_killed(&mut h, "web.1.stored");
    let (_, id) = next_launch(&mut h).await;
    health_killed(&mut h, &id);
    let (_, id) = next_launch(&mut h).await;
    // RUNNING and healthy for the stable run (max(8 s, 10 s)).
    h.update(status(&id, TaskState::TaskRunning, Some("r")));
    h.update(health(&id, true, "h"));
    h.answer_all();
    h.advance(Duration::from_secs(10)).await;
    health_killed(&mut h, &id);
    assert_eq!(failures(&mut h, "web").await, 1, "counting from 1 again");
    let (waited, _) = next_launch(&mut h).await;
    assert_eq!(waited, 2);
}

#[tokio::test(start_paused = true)]
async fn an_unhealthy_running_task_never_counts_as_stable() {
    let spec = checked(1, "sleep 1000");
    let mut h = leader(std::slice::from_ref(&spec), 1, healthy_record);
    health_killed(&mut h, "web.0.stored");
    let (_, id) = next_launch(&mut h).await;
    // RUNNING for 30 s without a healthy report, then unhealthy.
    h.update(status(&id, TaskState::TaskRunning, Some("r")));
    h.answer_all();
    h.advance(Duration::from_secs(15)).await;
    h.update(health(&id, false, "u"));
    h.answer_all();
    h.advance(Duration::from_secs(15)).await;
    assert_eq!(failures(&mut h, "web").await, 1);
    health_killed(&mut h, &id);
    assert_eq!(failures(&mut h, "web").await, 2);
    // Healthy for a moment, then unhealthy again: the clock starts over.
    let (_, id) = next_launch(&mut h).await;
    h.update(status(&id, TaskState::TaskRunning, Some("r2")));
    h.update(health(&id, true, "h2"));
    h.answer_all();
    h.advance(Duration::from_secs(6)).await;
    h.update(health(&id, false, "u2"));
    h.answer_all();
    h.advance(Duration::from_secs(6)).await;
    h.update(health(&id, true, "h3"));
    h.answer_all();
    h.advance(Duration::from_secs(6)).await;
    health_killed(&mut h, &id);
    assert_eq!(failures(&mut h, "web").await, 3);
}

#[tokio::test(start_paused = true)]
async fn a_health_check_kill_is_named_in_the_event() {
    let spec = checked(1, "sleep 1000");
    let mut h = leader(std::slice::from_ref(&spec), 1, healthy_record);
    h.update(v1::TaskStatus {
        healthy: Some(false),
        message: Some("Command terminated with signal Terminated".into()),
        ..status("web.0.stored", TaskState::TaskKilled, Some("k"))
    });
    h.answer_all();
    let expected = "task web.0.stored is TASK_KILLED: killed after 3 failed health checks \
                    (Command terminated with signal Terminated)";
    assert!(h.logs.iter().any(|l| l.contains(expected)), "{:?}", h.logs);
    let s = h.snapshot().await;
    assert!(s.events.iter().any(|e| e.message == expected));
    // A plain kill says nothing about health.
    let record = h.stored("web.0.stored").unwrap().clone();
    assert_eq!(
        record.health_kill(Some(&spec)).as_deref(),
        Some("killed after 3 failed health checks")
    );
    let mut plain_kill = record.clone();
    plain_kill.timeline.last_mut().unwrap().healthy = None;
    assert_eq!(plain_kill.health_kill(Some(&spec)), None);
    // From another spec: the unhealthy reports the timeline ends with.
    let mut old = record;
    old.fingerprint = "older".into();
    let report = old.timeline.len() - 1;
    for healthy in [true, false, false] {
        let mut entry = old.timeline[report].clone();
        entry.state = TaskState::TaskRunning;
        entry.healthy = Some(healthy);
        old.timeline.insert(old.timeline.len() - 1, entry);
    }
    assert_eq!(
        old.health_kill(Some(&spec)).as_deref(),
        Some("killed after 2 failed health checks")
    );
}

/// Two failures of `web`'s instance 1, shown as the service's.
async fn failing_web() -> Harness {
    let spec = service("web", 2);
    let mut h = leader(std::slice::from_ref(&spec), 2, plain);
    crash(&mut h, "web.1.stored");
    let (_, id) = next_launch(&mut h).await;
    crash(&mut h, &id);
    assert_eq!(failures(&mut h, "web").await, 2);
    h
}

#[tokio::test(start_paused = true)]
async fn a_service_deleted_and_created_again_starts_clean() {
    let mut h = failing_web().await;
    let delete = h.command(Request::DeleteService {
        name: "web".into(),
        expected: None,
    });
    h.answer_all();
    assert!(matches!(h.reply(delete), Some(Answer::Service(Ok(true)))));
    let put = h.command(Request::PutService(Box::new(valid(service("web", 2)))));
    h.answer_all();
    assert!(matches!(h.reply(put), Some(Answer::Service(Ok(false)))));
    assert_eq!(failures(&mut h, "web").await, 0);
}

/// Deleted and created again in ZooKeeper by someone else, the leader
/// reading the store after a conflict: the same as through the API.
#[tokio::test(start_paused = true)]
async fn a_service_gone_from_the_store_and_back_starts_clean() {
    let mut h = failing_web().await;
    let (record, _) = h.store.services.remove("web").unwrap();
    let put = h.command(Request::PutService(Box::new(valid(service("web", 3)))));
    h.answer_all();
    assert!(matches!(h.reply(put), Some(Answer::Service(Err(_)))));
    assert!(h.snapshot().await.services.is_empty(), "read again: gone");
    h.store.services.insert("web".into(), (record, 1));
    let put = h.command(Request::PutService(Box::new(valid(service("web", 3)))));
    h.answer_all();
    assert!(matches!(h.reply(put), Some(Answer::Service(Err(_)))));
    assert_eq!(failures(&mut h, "web").await, 0, "read again: back, clean");
}
