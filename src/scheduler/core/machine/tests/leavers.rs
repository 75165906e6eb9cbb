//! A leaving task (on an agent a drain or a maintenance window empties)
//! whose instance its service no longer wants: it is killed without a
//! replacement, and the drain ends (`machine/evacuation.rs`, the review's
//! one rule of which instances a service wants,
//! `rules::review::wants_instance`). A scale-down, a deleted service, a
//! new spec and a job's task each end with the task killed and the drain
//! done.

use super::maintenance::{inverse_offer, window_in};
use super::rollout::health;
use super::*;
use crate::scheduler::drains::{
    DrainProgress, DrainRecord, DrainState, DrainStatus, MinHealthy, ThenAction,
};

fn start_drain(h: &mut Harness, agent: &str, min_healthy: MinHealthy) {
    h.command(Request::StartDrain {
        agent_id: agent.into(),
        min_healthy,
        reason: Some("kernel upgrade".into()),
        by: "admin".into(),
        then: ThenAction::None,
    });
    h.answer_all();
}

/// The drain of `agent` in a full snapshot.
async fn shown_drain(h: &mut Harness, agent: &str) -> DrainStatus {
    h.feed(Input::Heartbeat);
    let snapshot = h.snapshot().await;
    let agent = snapshot
        .agents
        .iter()
        .find(|a| a.agent_id.as_str() == agent);
    agent.and_then(|a| a.drain.clone()).expect("the drain")
}

fn stored_drain<'a>(h: &'a Harness, agent: &str) -> Option<&'a DrainRecord> {
    h.store.drains.get(agent).map(|(d, _)| d)
}

/// The tasks KILLed in `calls` (a retry counted once).
fn killed(calls: &[MesosCall]) -> Vec<String> {
    let mut killed: Vec<String> = calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Kill { task_id, .. } => Some(task_id.to_string()),
            _ => None,
        })
        .collect();
    killed.dedup();
    killed
}

fn kill_reason(h: &Harness, task: &str) -> Option<String> {
    h.stored(task)
        .and_then(|r| r.kill.as_ref())
        .map(|k| k.reason.clone())
}

/// The master's TASK_KILLED for `task` on `agent`, then a few seconds of
/// ticks.
async fn gone(h: &mut Harness, task: &str, agent: &str, uuid: &str) {
    h.update(v1::TaskStatus {
        agent_id: Some(v1::AgentId {
            value: agent.into(),
        }),
        ..status(task, TaskState::TaskKilled, Some(uuid))
    });
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
}

/// `web` with one task on each of agent-0..agent-(n-1), RUNNING long ago.
fn web(n: u32) -> (ServiceSpec, Vec<TaskRecord>) {
    let spec = service("web", n);
    let tasks = (0..n).map(|i| running_record("web", i, &spec)).collect();
    (spec, tasks)
}

/// The fresh-user trial: two instances, agent-1 drained with
/// `min_healthy: 0`, then the service scaled to one. The task on agent-1
/// is killed as scaled down (no replacement is wanted), and the drain is
/// done once it is gone; nothing is launched.
/// A subscribed leader of `web` with two instances, one on each of
/// agent-0 and agent-1.
fn leader_of_two() -> Harness {
    let (spec, tasks) = web(2);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    h
}

/// `task` on `agent` reports its end (`gone`); the drain of `agent` is
/// then stored done.
async fn ends_done(h: &mut Harness, task: &str, agent: &str, uuid: &str) {
    gone(h, task, agent, uuid).await;
    assert_eq!(
        stored_drain(h, agent).map(|d| d.state),
        Some(DrainState::Done)
    );
}

#[tokio::test(start_paused = true)]
async fn a_drain_kills_a_leaver_the_scale_down_no_longer_wants_and_ends() {
    let mut h = leader_of_two();
    start_drain(&mut h, "agent-1", MinHealthy::Count(0));
    h.drain_call_log();
    h.command(Request::PutService(Box::new(valid(service("web", 1)))));
    h.answer_all();
    h.offer("o-2", "agent-2", 4.0);
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(killed(&calls), ["web.1.stored"], "{calls:?}");
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    let reason = kill_reason(&h, "web.1.stored").unwrap_or_default();
    assert!(reason.starts_with("scaled down"), "{reason}");
    assert!(reason.contains("agent-1"), "{reason}");
    // The progress says so: stopped, not moved, with the kill's reason.
    let drain = shown_drain(&mut h, "agent-1").await;
    assert_eq!(
        (drain.moved, drain.waiting, drain.blocked, drain.stopped),
        (0, 0, 0, 1),
        "{drain:?}"
    );
    assert_eq!(drain.tasks[0].progress, DrainProgress::Stopped);
    assert_eq!(drain.tasks[0].reason.as_ref(), Some(&reason));
    ends_done(&mut h, "web.1.stored", "agent-1", "k1").await;
    let drain = shown_drain(&mut h, "agent-1").await;
    assert_eq!((drain.state, drain.stopped), (DrainState::Done, 1));
    // web.0 stays: the one instance wanted.
    assert_eq!(kill_reason(&h, "web.0.stored"), None);
}

/// The drain's floor still holds for a task no longer wanted, capped at
/// the instances the service wants: scaled to one with `min_healthy: 2`,
/// the leaver (the only available task) stays until the one that stays is
/// available (healthy for `upgrade.min_healthy`), then goes.
#[tokio::test(start_paused = true)]
async fn an_unwanted_leaver_keeps_the_floor_capped_at_the_instances_wanted() {
    let (spec, mut tasks) = web(2);
    // web.0 is unhealthy: not available.
    tasks[0].healthy = Some(false);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    start_drain(&mut h, "agent-1", MinHealthy::Count(2));
    h.command(Request::PutService(Box::new(valid(service("web", 1)))));
    h.answer_all();
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(killed(&calls).is_empty(), "{calls:?}");
    let drain = shown_drain(&mut h, "agent-1").await;
    assert_eq!(drain.tasks[0].progress, DrainProgress::Blocked, "{drain:?}");
    let why = drain.tasks[0].reason.clone().unwrap_or_default();
    assert!(
        why.contains("no longer wants instance 1") && why.contains("below 1 healthy"),
        "{why}"
    );
    h.update(health("web.0.stored", true, "r0"));
    h.answer_all();
    h.advance(Duration::from_secs(12)).await;
    h.answer_all();
    assert_eq!(killed(&h.drain_call_log()), ["web.1.stored"]);
    ends_done(&mut h, "web.1.stored", "agent-1", "k1").await;
}

/// The same for an agent emptied ahead of its maintenance window: scaled
/// down, its task is killed at once (maintenance has no floor of its own).
#[tokio::test(start_paused = true)]
async fn maintenance_kills_a_leaver_the_scale_down_no_longer_wants() {
    let mut h = leader_of_two();
    let window = window_in(&h, 600.0);
    h.feed(Input::InverseOffers(vec![inverse_offer(
        "io-1",
        Some("agent-1"),
        window,
    )]));
    h.answer_all();
    h.drain_call_log();
    h.command(Request::PutService(Box::new(valid(service("web", 1)))));
    h.answer_all();
    h.offer("o-2", "agent-2", 4.0);
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(killed(&calls), ["web.1.stored"], "{calls:?}");
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    let reason = kill_reason(&h, "web.1.stored").unwrap_or_default();
    assert!(reason.starts_with("scaled down"), "{reason}");
    assert!(reason.contains("maintenance"), "{reason}");
}

/// A deleted service's task on a drained agent is killed as such, and the
/// drain ends.
#[tokio::test(start_paused = true)]
async fn a_deleted_services_leaver_is_killed_and_the_drain_ends() {
    let mut h = leader_of_two();
    start_drain(&mut h, "agent-1", MinHealthy::Count(2));
    h.command(Request::DeleteService {
        name: "web".into(),
        expected: None,
    });
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    assert_eq!(
        kill_reason(&h, "web.1.stored").as_deref(),
        Some("service web deleted")
    );
    let drain = shown_drain(&mut h, "agent-1").await;
    assert_eq!(drain.stopped, 1, "{drain:?}");
    ends_done(&mut h, "web.1.stored", "agent-1", "k1").await;
}

/// A new spec during a drain: the leaver's instance is still wanted, its
/// replacement runs the new spec, and the old task goes once that one is
/// available (by the rollout or by the drain, whichever comes first).
#[tokio::test(start_paused = true)]
async fn a_new_spec_during_a_drain_replaces_the_leaver_and_the_drain_ends() {
    let mut h = leader_of_two();
    start_drain(&mut h, "agent-1", MinHealthy::Count(1));
    let new: ServiceSpec = serde_json::from_value(serde_json::json!({
        "name": "web", "command": "sleep 2000", "cpus": 0.1, "mem": 16,
        "instances": 2, "restart_backoff": "2s", "restart_backoff_max": "8s"
    }))
    .expect("a service spec");
    h.command(Request::PutService(Box::new(valid(new))));
    h.answer_all();
    let mut uuid = 0;
    for round in 0..12 {
        h.offer(&format!("o-{round}"), "agent-2", 4.0);
        h.offer(&format!("o-{round}b"), "agent-3", 4.0);
        h.answer_all();
        let calls = h.drain_call_log();
        for task in Harness::launched_infos(&calls) {
            uuid += 1;
            h.update(v1::TaskStatus {
                agent_id: Some(task.agent_id.clone()),
                ..status(
                    &task.task_id.value,
                    TaskState::TaskRunning,
                    Some(&format!("u{uuid}")),
                )
            });
        }
        for task in killed(&calls) {
            uuid += 1;
            let agent = h.stored(&task).map(|r| r.agent_id.to_string());
            gone(
                &mut h,
                &task,
                &agent.unwrap_or_default(),
                &format!("u{uuid}"),
            )
            .await;
        }
        h.answer_all();
        h.advance(Duration::from_secs(4)).await;
        h.answer_all();
    }
    assert_eq!(
        stored_drain(&h, "agent-1").map(|d| d.state),
        Some(DrainState::Done)
    );
    let live: Vec<&TaskRecord> = h
        .store
        .tasks
        .values()
        .map(|(r, _)| r)
        .filter(|r| crate::scheduler::records::is_live(r))
        .collect();
    assert_eq!(live.len(), 2, "{live:?}");
    assert!(live.iter().all(|r| r.agent_id.as_str() != "agent-1"));
}

/// A kill another rule decides counts against a drain's floor (the
/// property `machine_invariants`, seed 17866518820087048313): web.0 on
/// agent-1, web.1 and web.2 on the drained agent-0 (`min_healthy: 1`),
/// then a new spec of one instance. The rollout kills web.0, the one
/// instance left (outdated, not leaving), in the same pass as the
/// drain's unwanted leavers: one of those goes, the other stays, the
/// service's last available task, until the new instance 0 is available.
/// The drain counted web.0 as available and killed all three.
#[tokio::test(start_paused = true)]
async fn a_rollout_kill_counts_against_the_floor_of_an_unwanted_leaver() {
    let spec = service("web", 3);
    let tasks: Vec<TaskRecord> = (0..3)
        .map(|i| {
            let agent = if i == 0 { 1 } else { 0 };
            TaskRecord {
                agent_id: format!("agent-{agent}").into(),
                hostname: format!("host-{agent}"),
                ..running_record("web", i, &spec)
            }
        })
        .collect();
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    start_drain(&mut h, "agent-0", MinHealthy::Count(1));
    h.drain_call_log();
    h.command(Request::PutService(Box::new(valid(new_command(1)))));
    h.answer_all();
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    let marked = marked_with_reasons(&h);
    assert_eq!(marked.len(), 2, "one unwanted leaver stays: {marked:?}");
    assert!(
        marked
            .iter()
            .any(|m| m.starts_with("web.0.stored replaced")),
        "{marked:?}"
    );
    let drain = shown_drain(&mut h, "agent-0").await;
    let blocked: Vec<_> = drain
        .tasks
        .iter()
        .filter(|t| t.progress == DrainProgress::Blocked)
        .collect();
    assert_eq!(blocked.len(), 1, "{drain:?}");
    let why = blocked[0].reason.clone().unwrap_or_default();
    assert!(why.contains("below 1 healthy"), "{why}");
}

/// `web` with `instances` and a new command: every running task is
/// outdated.
fn new_command(instances: u32) -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": "web", "command": "sleep 2000", "cpus": 0.1, "mem": 16, "instances": instances
    }))
    .expect("a service spec")
}

/// The stored kill marks: `<task ID> <reason>`.
fn marked_with_reasons(h: &Harness) -> Vec<String> {
    h.store
        .tasks
        .values()
        .filter_map(|(r, _)| {
            r.kill
                .as_ref()
                .map(|k| format!("{} {}", r.task_id, k.reason))
        })
        .collect()
}

/// A new spec during a drain replaces a leaving task copy first, as the
/// drain moves it: the rollout does not kill it (it would go first, below
/// the floor: a fresh user's trial, `min_healthy: 100%`). Three instances
/// on the drained agent-0, floor 3: nothing is killed while the new
/// copies on agent-1 start; each old task goes once its copy is
/// available.
#[tokio::test(start_paused = true)]
async fn a_new_spec_during_a_drain_moves_leavers_copy_first() {
    let spec = service("web", 3);
    let tasks: Vec<TaskRecord> = (0..3)
        .map(|i| TaskRecord {
            agent_id: "agent-0".into(),
            hostname: "host-0".into(),
            ..running_record("web", i, &spec)
        })
        .collect();
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    start_drain(&mut h, "agent-0", MinHealthy::Percent(100));
    h.drain_call_log();
    h.command(Request::PutService(Box::new(valid(new_command(3)))));
    h.answer_all();
    h.offer("o-1", "agent-1", 4.0);
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    assert_eq!(marked_with_reasons(&h), Vec::<String>::new());
    let calls = h.drain_call_log();
    let launched: Vec<v1::TaskInfo> = Harness::launched_infos(&calls).cloned().collect();
    assert_eq!(launched.len(), 3, "{calls:?}");
    for (n, task) in launched.iter().enumerate() {
        h.update(v1::TaskStatus {
            agent_id: Some(task.agent_id.clone()),
            ..status(
                &task.task_id.value,
                TaskState::TaskRunning,
                Some(&format!("r{n}")),
            )
        });
    }
    h.answer_all();
    assert_eq!(marked_with_reasons(&h), Vec::<String>::new());
    // Available once RUNNING for `upgrade.min_healthy`: then moved.
    h.advance(Duration::from_secs(30)).await;
    h.answer_all();
    let marked = marked_with_reasons(&h);
    assert_eq!(marked.len(), 3, "{marked:?}");
    assert!(
        marked
            .iter()
            .all(|m| m.contains("moved off agent agent-0 by its drain")),
        "{marked:?}"
    );
}

/// Only an available task's kill lowers the count a drain's floor
/// guards: an unwanted leaver that is unhealthy goes at once although the
/// service is below the floor (its kill changes nothing there; waiting
/// kept a useless task and the drain running). Both of `web`'s tasks are
/// unhealthy; agent-1 is drained with `min_healthy: 1`; `web` is scaled
/// to one instance.
#[tokio::test(start_paused = true)]
async fn an_unwanted_leaver_that_is_not_available_goes_whatever_the_floor() {
    let (spec, mut tasks) = web(2);
    for t in &mut tasks {
        t.healthy = Some(false);
    }
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    start_drain(&mut h, "agent-1", MinHealthy::Count(1));
    h.drain_call_log();
    h.command(Request::PutService(Box::new(valid(service("web", 1)))));
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    assert_eq!(killed(&h.drain_call_log()), ["web.1.stored"]);
    let reason = kill_reason(&h, "web.1.stored").unwrap_or_default();
    assert!(reason.starts_with("scaled down"), "{reason}");
    ends_done(&mut h, "web.1.stored", "agent-1", "k1").await;
}
