//! The appliance's SLA-aware drain (`machine/drains.rs`, the shared rule in
//! `machine/evacuation.rs`): replacement first, kill once it is available
//! and the floor holds; the agent held (offers declined) until cancelled;
//! a stored drain continued by a new leader; done, then the master's call.

use super::*;
use crate::scheduler::commands::CommandError;
use crate::scheduler::core::io::OperatorFailure;
use crate::scheduler::drains::{
    DrainProgress, DrainRecord, DrainState, DrainTask, MinHealthy, ThenAction,
};

pub(super) fn start(
    h: &mut Harness,
    agent: &str,
    min_healthy: MinHealthy,
    then: ThenAction,
) -> ReplyId {
    h.command(Request::StartDrain {
        agent_id: agent.into(),
        min_healthy,
        reason: Some("kernel upgrade".into()),
        by: "admin".into(),
        then,
    })
}

/// While `agent-0` is drained: agent-3 offers, the replacement of
/// `web.0` is launched there and reports TASK_RUNNING; its ID.
fn replacement_runs(h: &mut Harness) -> String {
    h.offer("o-3", "agent-3", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    let replacement = Harness::launched(&calls)
        .into_iter()
        .find(|t| t.starts_with("web.0."))
        .expect("the replacement of instance 0");
    h.update(update_on(
        &replacement,
        "agent-3",
        TaskState::TaskRunning,
        "u1",
    ));
    h.answer_all();
    replacement
}

/// A leader of `web` (1 instance) whose drain of `agent-5` (known from
/// an offer, nothing of ours there), with `then`, was started and stored.
fn drained_empty_agent(then: ThenAction) -> Harness {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    h.offer("o-5", "agent-5", 0.01);
    h.answer_all();
    let id = start(&mut h, "agent-5", MinHealthy::Count(1), then);
    h.answer_stores();
    drain_answer(&h, id).expect("started");
    h
}

pub(super) fn drain_answer(h: &Harness, id: ReplyId) -> Result<DrainRecord, CommandError> {
    match h.reply(id) {
        Some(Answer::Drain(r)) => r.clone(),
        other => panic!("no drain answer: {other:?}"),
    }
}

pub(super) fn stored_drain<'a>(h: &'a Harness, agent: &str) -> Option<&'a DrainRecord> {
    h.store.drains.get(agent).map(|(d, _)| d)
}

/// `web` with one task on each of agent-0..agent-(n-1), RUNNING long ago.
pub(super) fn web(n: u32) -> (ServiceSpec, Vec<TaskRecord>) {
    let spec = service("web", n);
    let tasks = (0..n).map(|i| running_record("web", i, &spec)).collect();
    (spec, tasks)
}

fn declined(calls: &[MesosCall]) -> Vec<(String, Option<f64>)> {
    calls
        .iter()
        .flat_map(|c| match c {
            MesosCall::Decline {
                offer_ids,
                refuse_seconds,
            } => offer_ids
                .iter()
                .map(|o| (o.clone(), *refuse_seconds))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

pub(super) fn killed(calls: &[MesosCall]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Kill { task_id, .. } => Some(task_id.to_string()),
            _ => None,
        })
        .collect()
}

/// An update of `task` on `agent`.
pub(super) fn update_on(task: &str, agent: &str, state: TaskState, uuid: &str) -> v1::TaskStatus {
    v1::TaskStatus {
        agent_id: Some(v1::AgentId {
            value: agent.into(),
        }),
        ..status(task, state, Some(uuid))
    }
}

#[tokio::test(start_paused = true)]
async fn a_drain_starts_the_replacement_first_and_kills_the_old_task_once_it_is_available() {
    let (spec, tasks) = web(3);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    let id = start(&mut h, "agent-0", MinHealthy::Count(3), ThenAction::None);
    h.answer_all();
    let record = drain_answer(&h, id).expect("started");
    assert_eq!(record.state, DrainState::Running);
    assert_eq!(stored_drain(&h, "agent-0"), Some(&record));
    // The drained agent's offer is declined with the hold's long filter;
    // nothing is killed before a replacement runs.
    h.offer("o-0", "agent-0", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty(), "{calls:?}");
    assert_eq!(declined(&calls), [("o-0".to_string(), Some(3600.0))]);
    assert!(killed(&calls).is_empty());
    // Another agent's offer takes the replacement of instance 0.
    h.offer("o-3", "agent-3", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    let launched: Vec<&v1::TaskInfo> = Harness::launched_infos(&calls).collect();
    assert_eq!(launched.len(), 1, "{calls:?}");
    assert_eq!(launched[0].agent_id.value, "agent-3");
    let replacement = launched[0].task_id.value.clone();
    assert!(replacement.starts_with("web.0."), "{replacement}");
    // RUNNING, but not yet available (upgrade.min_healthy, 10 s): the old
    // task stays, and the progress says why.
    h.update(update_on(
        &replacement,
        "agent-3",
        TaskState::TaskRunning,
        "u1",
    ));
    h.answer_all();
    h.advance(Duration::from_secs(5)).await;
    h.answer_all();
    assert!(killed(&h.drain_call_log()).is_empty());
    let drain = h
        .snapshot()
        .await
        .agents
        .iter()
        .find(|a| a.agent_id.as_str() == "agent-0")
        .and_then(|a| a.drain.clone())
        .expect("the drain in the snapshot");
    assert_eq!(drain.waiting, 1, "{drain:?}");
    let task = &drain.tasks[0];
    assert_eq!(task.progress, DrainProgress::WaitingForHealth);
    assert_eq!(
        task.replacement.as_ref().map(|t| t.to_string()),
        Some(replacement.clone())
    );
    // Available: the old task is killed, as moved by the drain.
    h.advance(Duration::from_secs(6)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(killed(&calls), ["web.0.stored"]);
    assert_eq!(
        h.stored("web.0.stored")
            .and_then(|r| r.kill.as_ref())
            .map(|k| k.reason.clone()),
        Some("moved off agent agent-0 by its drain".to_string())
    );
    // Once it is gone, the drain is done (and audited); the agent stays
    // held.
    h.update(update_on(
        "web.0.stored",
        "agent-0",
        TaskState::TaskKilled,
        "u2",
    ));
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let done = stored_drain(&h, "agent-0").expect("stored");
    assert_eq!(done.state, DrainState::Done);
    assert!(done.finished_at.is_some());
    assert!(h.store.audit.iter().any(|e| e["action"] == "drain.done"));
    h.offer("o-0b", "agent-0", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(Harness::launched(&calls).is_empty());
    assert_eq!(declined(&calls).len(), 1);
    let drain = h
        .snapshot()
        .await
        .agents
        .iter()
        .find(|a| a.agent_id.as_str() == "agent-0")
        .and_then(|a| a.drain.clone())
        .expect("the drain");
    assert_eq!(
        (drain.state, drain.moved),
        (DrainState::Done, 1),
        "{drain:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_kill_that_would_take_the_service_below_min_healthy_waits() {
    let (spec, mut tasks) = web(3);
    // Instance 2 is unhealthy: web has two available tasks.
    tasks[2].healthy = Some(false);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let id = start(
        &mut h,
        "agent-0",
        MinHealthy::Percent(100),
        ThenAction::None,
    );
    h.answer_all();
    assert!(drain_answer(&h, id).is_ok());
    replacement_runs(&mut h);
    h.advance(Duration::from_secs(15)).await;
    h.answer_all();
    // Three available with the replacement; killing the old one leaves
    // two, below 100 % of 3.
    let calls = h.drain_call_log();
    assert!(
        !killed(&calls).contains(&"web.0.stored".to_string()),
        "{calls:?}"
    );
    let drain = h
        .snapshot()
        .await
        .agents
        .iter()
        .find(|a| a.agent_id.as_str() == "agent-0")
        .and_then(|a| a.drain.clone())
        .expect("the drain");
    let task = drain
        .tasks
        .iter()
        .find(|t| t.task_id.as_str() == "web.0.stored")
        .expect("listed");
    assert_eq!(task.progress, DrainProgress::Blocked, "{drain:?}");
    assert!(
        task.reason
            .as_deref()
            .unwrap_or_default()
            .contains("would drop web below 3 healthy"),
        "{task:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_agents_are_not_found_and_a_second_drain_conflicts() {
    let (spec, tasks) = web(2);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let id = start(&mut h, "agent-9", MinHealthy::Count(1), ThenAction::None);
    h.answer_all();
    assert!(matches!(
        drain_answer(&h, id),
        Err(CommandError::NotFound(_))
    ));
    assert!(h.store.drains.is_empty());
    let first = start(&mut h, "agent-0", MinHealthy::Count(1), ThenAction::None);
    h.answer_all();
    assert!(drain_answer(&h, first).is_ok());
    let second = start(&mut h, "agent-0", MinHealthy::Count(1), ThenAction::None);
    h.answer_all();
    assert!(matches!(
        drain_answer(&h, second),
        Err(CommandError::Conflict(_))
    ));
    // Cancelling what does not run is not found.
    let cancel = h.command(Request::CancelDrain {
        agent_id: "agent-1".into(),
        by: "admin".into(),
    });
    assert!(matches!(
        drain_answer(&h, cancel),
        Err(CommandError::NotFound(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_drain_releases_the_agent_with_a_revive_and_may_start_again() {
    let (spec, tasks) = web(2);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    start(&mut h, "agent-0", MinHealthy::Count(1), ThenAction::None);
    h.answer_all();
    h.offer("o-0", "agent-0", 4.0);
    h.answer_all();
    h.drain_call_log();
    let cancel = h.command(Request::CancelDrain {
        agent_id: "agent-0".into(),
        by: "ops".into(),
    });
    h.answer_all();
    let record = drain_answer(&h, cancel).expect("cancelled");
    assert_eq!(record.state, DrainState::Cancelled);
    assert_eq!(record.cancelled_by.as_deref(), Some("ops"));
    assert_eq!(
        stored_drain(&h, "agent-0").map(|d| d.state),
        Some(DrainState::Cancelled)
    );
    let calls = h.drain_call_log();
    assert!(
        Harness::kinds_of_calls(&calls).contains(&"REVIVE"),
        "{calls:?}"
    );
    // A cancelled drain is replaced by a new one.
    let again = start(&mut h, "agent-0", MinHealthy::Count(1), ThenAction::None);
    h.answer_all();
    assert_eq!(
        drain_answer(&h, again).map(|d| d.state),
        Ok(DrainState::Running)
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_continues_a_stored_drain() {
    let (spec, tasks) = web(2);
    let mut h = Harness::new(config(), Some(FRAMEWORK), &[spec], &tasks);
    let record = DrainRecord {
        agent_id: "agent-0".into(),
        min_healthy: MinHealthy::Count(1),
        reason: None,
        by: "admin".into(),
        started_at: 5.0,
        then: ThenAction::None,
        state: DrainState::Running,
        finished_at: None,
        cancelled_by: None,
        then_called: false,
        then_error: None,
        reactivated: false,
        reactivate_error: None,
        reactivate_tries: 0,
        reactivate_retry: false,
        ended: None,
    };
    h.store.drains.insert("agent-0".into(), (record.clone(), 4));
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.offer("o-0", "agent-0", 4.0);
    h.offer("o-3", "agent-3", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    let launched: Vec<&v1::TaskInfo> = Harness::launched_infos(&calls).collect();
    assert_eq!(launched.len(), 1, "{calls:?}");
    assert_eq!(launched[0].agent_id.value, "agent-3");
    assert!(declined(&calls).iter().any(|(o, _)| o == "o-0"));
    // Not restarted: the stored record is untouched.
    assert_eq!(h.store.drains.get("agent-0"), Some(&(record, 4)));
}

#[tokio::test(start_paused = true)]
async fn a_done_drain_calls_the_masters_drain_agent_once() {
    let mut h = drained_empty_agent(ThenAction::DrainAgent);
    h.advance(Duration::from_secs(2)).await;
    h.answer_stores();
    assert_eq!(
        stored_drain(&h, "agent-5").map(|d| d.state),
        Some(DrainState::Done)
    );
    h.advance(Duration::from_secs(2)).await;
    let calls: Vec<(RequestId, OperatorOp)> = h
        .operators
        .iter()
        .filter(|(_, op)| matches!(op, OperatorOp::DrainAgent { .. }))
        .cloned()
        .collect();
    assert_eq!(calls.len(), 1, "{:?}", h.operators);
    let (call, op) = calls[0].clone();
    assert!(matches!(op, OperatorOp::DrainAgent { agent, .. } if agent.as_str() == "agent-5"));
    h.operators.retain(|(id, _)| *id != call);
    h.feed(Input::Operator {
        id: call,
        answer: OperatorAnswer::AgentCalled(Ok(())),
    });
    h.answer_stores();
    assert!(stored_drain(&h, "agent-5").is_some_and(|d| d.then_called));
    h.advance(Duration::from_secs(5)).await;
    assert!(
        !h.operators
            .iter()
            .any(|(_, op)| matches!(op, OperatorOp::DrainAgent { .. })),
        "called once"
    );
}

/// The drain of `agent` in `snapshot`.
pub(super) fn shown_drain(
    snapshot: &Snapshot,
    agent: &str,
) -> Option<crate::scheduler::drains::DrainStatus> {
    let agent = snapshot
        .agents
        .iter()
        .find(|a| a.agent_id.as_str() == agent);
    agent.and_then(|a| a.drain.clone())
}

/// A command's answer publishes a light snapshot: a drain's record as it is
/// now, with its tasks as the last full snapshot found them (finding them
/// goes over every record of their services, which a command's answer must
/// not: with a hundred tasks on a drained agent it was half the leader's
/// CPU during a 10,000-task launch); the next full snapshot finds them.
#[tokio::test(start_paused = true)]
async fn a_commands_answer_shows_the_drains_tasks_of_the_last_full_snapshot() {
    let (spec, tasks) = web(3);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    assert_eq!(shown_drain(h.snapshot().await, "agent-0"), None);
    // A full snapshot now (a heartbeat changes what is shown, and one is
    // due): the command's, at the same instant, is a light one.
    h.feed(Input::Heartbeat);
    let id = start(&mut h, "agent-0", MinHealthy::Count(0), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    let answered = h.snapshot.as_ref().expect("the answer's snapshot");
    let drain = shown_drain(answered, "agent-0").expect("the new drain in the answer's snapshot");
    assert_eq!(drain.state, DrainState::Running);
    assert!(drain.tasks.is_empty(), "{drain:?}");
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    let shown: Vec<String> = drain.tasks.iter().map(|t| t.task_id.to_string()).collect();
    assert_eq!(shown, ["web.0.stored"], "{drain:?}");
}

/// A move keeps `instances` available (the replacement first, then the
/// kill), so a floor above the service's `instances` is capped at them:
/// `min_healthy: 3` on a 2-instance service moves its tasks, and the
/// progress says the floor was capped while a move waits.
#[tokio::test(start_paused = true)]
async fn a_floor_above_the_instances_is_capped_at_them_for_a_move() {
    let (spec, tasks) = web(2);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let id = start(&mut h, "agent-0", MinHealthy::Count(3), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    replacement_runs(&mut h);
    h.advance(Duration::from_secs(5)).await;
    h.answer_all();
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    let task = drain
        .tasks
        .iter()
        .find(|t| t.task_id.as_str() == "web.0.stored")
        .expect("listed");
    assert_eq!(task.progress, DrainProgress::WaitingForHealth, "{drain:?}");
    // Available: killing the old task leaves 2 = instances available.
    h.advance(Duration::from_secs(6)).await;
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(killed(&calls), ["web.0.stored"], "{calls:?}");
}

/// The reason of a move held by a floor capped at `instances` says so.
#[tokio::test(start_paused = true)]
async fn a_capped_floor_is_named_in_the_reason() {
    let (spec, mut tasks) = web(2);
    // Instance 1 is unhealthy: web has one available task.
    tasks[1].healthy = Some(false);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let id = start(&mut h, "agent-0", MinHealthy::Count(3), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    replacement_runs(&mut h);
    h.advance(Duration::from_secs(15)).await;
    h.answer_all();
    // Two available with the replacement; the kill would leave one, below
    // the floor 3 capped at web's 2 instances.
    assert!(!killed(&h.drain_call_log()).contains(&"web.0.stored".to_string()));
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    let task = drain
        .tasks
        .iter()
        .find(|t| t.task_id.as_str() == "web.0.stored")
        .expect("listed");
    assert_eq!(task.progress, DrainProgress::Blocked, "{drain:?}");
    assert_eq!(
        task.reason.as_deref(),
        Some(
            "would drop web below 2 healthy (min_healthy 3 capped at web's 2 instances; \
             2 available now)"
        ),
        "{task:?}"
    );
}

/// Drains `agent-0` of `web(3)` with `min_healthy` 0 until its task moved
/// (killed as moved, then KILLED), returning the replacement's ID.
async fn move_instance_0(h: &mut Harness) -> String {
    let id = start(h, "agent-0", MinHealthy::Count(0), ThenAction::None);
    h.answer_all();
    drain_answer(h, id).expect("started");
    let replacement = replacement_runs(h);
    h.advance(Duration::from_secs(11)).await;
    h.answer_all();
    assert_eq!(killed(&h.drain_call_log()), ["web.0.stored"]);
    h.update(update_on(
        "web.0.stored",
        "agent-0",
        TaskState::TaskKilled,
        "u2",
    ));
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    replacement
}

fn cancel(h: &mut Harness, agent: &str) {
    let id = h.command(Request::CancelDrain {
        agent_id: agent.into(),
        by: "ops".into(),
    });
    h.answer_all();
    drain_answer(h, id).expect("cancelled");
}

/// A new drain of an agent counts only what it did: the tasks an earlier
/// drain of the agent moved are not its own.
#[tokio::test(start_paused = true)]
async fn a_new_drain_of_an_agent_does_not_inherit_an_earlier_drains_moves() {
    let (spec, tasks) = web(3);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    move_instance_0(&mut h).await;
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!((drain.state, drain.moved), (DrainState::Done, 1));
    cancel(&mut h, "agent-0");
    h.advance(Duration::from_secs(5)).await;
    h.answer_all();
    let again = start(&mut h, "agent-0", MinHealthy::Count(0), ThenAction::None);
    h.answer_all();
    drain_answer(&h, again).expect("started again");
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the new drain");
    assert_eq!(drain.moved, 0, "{drain:?}");
    assert!(drain.tasks.is_empty(), "{drain:?}");
}

/// A drain that ended shows what it was when it ended: tasks that arrive
/// on the agent afterwards, kills after its end and later copies of its
/// instances do not change it (its list is stored with the record).
#[tokio::test(start_paused = true)]
async fn an_ended_drain_shows_what_it_was_when_it_ended() {
    let (spec, tasks) = web(3);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &tasks);
    h.subscribe();
    h.answer_all();
    let replacement = move_instance_0(&mut h).await;
    let done = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!((done.state, done.moved), (DrainState::Done, 1), "{done:?}");
    assert_eq!(
        done.tasks[0].replacement.as_ref().map(|t| t.to_string()),
        Some(replacement)
    );
    cancel(&mut h, "agent-0");
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    // After the end: a fourth instance lands on the agent, then the
    // service is deleted (every task of it killed, the replacement too).
    h.command(Request::PutService(Box::new(valid(service("web", 4)))));
    h.answer_all();
    h.offer("o-0b", "agent-0", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(Harness::launched(&calls).len(), 1, "{calls:?}");
    h.advance(Duration::from_secs(2)).await;
    h.command(Request::DeleteService {
        name: "web".into(),
        expected: None,
    });
    h.answer_all();
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let ended = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!(ended.state, DrainState::Cancelled);
    assert_eq!(
        (ended.moved, ended.waiting, ended.blocked, ended.stopped),
        (done.moved, done.waiting, done.blocked, done.stopped),
        "{ended:?}"
    );
    assert_eq!(ended.tasks, done.tasks);
}

/// A drain cancelled after its `then` call (DEACTIVATE_AGENT, answered)
/// gives the agent back at the master: REACTIVATE_AGENT once, its answer
/// stored with the drain.
#[tokio::test(start_paused = true)]
async fn a_drain_cancelled_after_its_then_call_reactivates_the_agent_once() {
    let mut h = drained_empty_agent(ThenAction::DeactivateAgent);
    then_called(&mut h, |op| {
        matches!(op, OperatorOp::DeactivateAgent { .. })
    })
    .await;
    assert!(stored_drain(&h, "agent-5").is_some_and(|d| d.then_called));
    let cancel = h.command(Request::CancelDrain {
        agent_id: "agent-5".into(),
        by: "ops".into(),
    });
    h.answer_stores();
    drain_answer(&h, cancel).expect("cancelled");
    h.advance(Duration::from_secs(2)).await;
    let reactivations = |h: &Harness| -> Vec<RequestId> {
        h.operators
            .iter()
            .filter(|(_, op)| {
                matches!(op, OperatorOp::ReactivateAgent { agent, .. } if agent.as_str() == "agent-5")
            })
            .map(|(id, _)| *id)
            .collect()
    };
    let calls = reactivations(&h);
    assert_eq!(calls.len(), 1, "{:?}", h.operators);
    h.operators.retain(|(id, _)| *id != calls[0]);
    h.feed(Input::Operator {
        id: calls[0],
        answer: OperatorAnswer::AgentCalled(Ok(())),
    });
    h.answer_stores();
    let stored = stored_drain(&h, "agent-5").expect("stored");
    assert!(stored.reactivated, "{stored:?}");
    assert!(
        h.store
            .audit
            .iter()
            .any(|e| e["action"] == "drain.reactivate")
    );
    h.advance(Duration::from_secs(5)).await;
    assert!(reactivations(&h).is_empty(), "called once");
}

/// A task with no replacement names the other drained agents: another
/// drain holding an agent is often the real obstacle.
/// Two seconds on, the drain of `agent` lists `task` as blocked; returns
/// it (its reason says why).
async fn blocked_after_two_seconds(h: &mut Harness, agent: &str, task: &str) -> DrainTask {
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let drain = shown_drain(h.snapshot().await, agent).expect("the drain");
    let found = drain
        .tasks
        .iter()
        .find(|t| t.task_id.as_str() == task)
        .cloned()
        .expect("listed");
    assert_eq!(found.progress, DrainProgress::Blocked, "{drain:?}");
    found
}

#[tokio::test(start_paused = true)]
async fn a_blocked_move_names_the_other_drained_agents() {
    let (spec, tasks) = web(2);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    for agent in ["agent-0", "agent-1"] {
        let id = start(&mut h, agent, MinHealthy::Count(0), ThenAction::None);
        h.answer_all();
        drain_answer(&h, id).expect("started");
    }
    let task = blocked_after_two_seconds(&mut h, "agent-0", "web.0.stored").await;
    assert_eq!(
        task.reason.as_deref(),
        Some(
            "waiting for an offer elsewhere for the replacement; agent agent-1 (host-1) is drained too \
             (its offers are declined)"
        ),
        "{task:?}"
    );
}

/// An agent whose offers are declined for its maintenance window is named
/// as a drained one is: its offers are declined as well.
#[tokio::test(start_paused = true)]
async fn a_blocked_move_names_the_agents_near_their_maintenance_window() {
    let (spec, tasks) = web(2);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let near = super::maintenance::window_in(&h, 600.0);
    h.feed(Input::Offers(vec![super::maintenance::offer_with(
        "o-near",
        "agent-3",
        Some(near),
    )]));
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(
        declined(&calls).iter().any(|(o, _)| o == "o-near"),
        "{calls:?}"
    );
    let id = start(&mut h, "agent-0", MinHealthy::Count(0), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    let task = blocked_after_two_seconds(&mut h, "agent-0", "web.0.stored").await;
    assert_eq!(
        task.reason.as_deref(),
        Some(
            "waiting for an offer elsewhere for the replacement; agent agent-3 (agent-3.test) is \
             near or in its maintenance window (its offers are declined)"
        ),
        "{task:?}"
    );
}

/// A drain cancelled while running keeps its tasks as they stood: the
/// blocked task stays listed blocked, with its reason, after the cancel.
#[tokio::test(start_paused = true)]
async fn a_drain_cancelled_while_running_keeps_its_tasks_as_they_stood() {
    let (spec, tasks) = web(3);
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let id = start(&mut h, "agent-0", MinHealthy::Count(3), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let running = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!(running.blocked, 1, "{running:?}");
    cancel(&mut h, "agent-0");
    h.advance(Duration::from_secs(2)).await;
    h.answer_all();
    let ended = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!(ended.state, DrainState::Cancelled);
    assert_eq!(ended.blocked, 1, "{ended:?}");
    assert_eq!(ended.tasks, running.tasks);
    assert!(
        stored_drain(&h, "agent-0").is_some_and(|d| d.ended.is_some()),
        "stored with the record"
    );
}

/// The REACTIVATE_AGENT calls in flight for `agent-5`.
fn reactivations(h: &Harness) -> Vec<RequestId> {
    h.operators
        .iter()
        .filter(|(_, op)| {
            matches!(op, OperatorOp::ReactivateAgent { agent, .. } if agent.as_str() == "agent-5")
        })
        .map(|(id, _)| *id)
        .collect()
}

/// Lets a drain of an empty agent end and call its `then` (the operator
/// call `is` picks), and answers that call with success.
async fn then_called(h: &mut Harness, is: fn(&OperatorOp) -> bool) {
    h.advance(Duration::from_secs(2)).await;
    h.answer_stores();
    h.advance(Duration::from_secs(2)).await;
    let (call, _) = h
        .operators
        .iter()
        .find(|(_, op)| is(op))
        .cloned()
        .expect("the drain's then call");
    answer_call(h, call, Ok(()));
}

/// Answers the operator call `id` with `result`.
fn answer_call(h: &mut Harness, id: RequestId, result: Result<(), OperatorFailure>) {
    h.operators.retain(|(i, _)| *i != id);
    h.feed(Input::Operator {
        id,
        answer: OperatorAnswer::AgentCalled(result),
    });
    h.answer_stores();
}

/// The master's 400 of REACTIVATE_AGENT while the agent drains
/// (`Master::Http::_reactivateAgent` in `src/master/http.cpp`).
fn still_draining() -> Result<(), OperatorFailure> {
    Err(OperatorFailure::Failed(
        crate::mesos::operator::OperatorError::Refused {
            status: 400,
            body: crate::mesos::operator::STILL_DRAINING.into(),
        },
    ))
}

/// Answers the GET_AGENTS calls in flight: agent-5 with its drain at the
/// master in `state`.
fn list_agent_5(h: &mut Harness, state: v1::DrainState) {
    answer_agent_polls(h, super::agents::listed("agent-5", true, Some(state)));
}

/// Answers the GET_AGENTS calls in flight with `agent` alone, then the
/// store operations they lead to; true when one was in flight.
fn answer_agent_polls(h: &mut Harness, agent: crate::mesos::operator::Agent) -> bool {
    let polls: Vec<RequestId> = h
        .operators
        .iter()
        .filter(|(_, op)| matches!(op, OperatorOp::ListAgents { .. }))
        .map(|(id, _)| *id)
        .collect();
    h.operators
        .retain(|(_, op)| !matches!(op, OperatorOp::ListAgents { .. }));
    let answered = !polls.is_empty();
    for id in polls {
        h.feed(Input::Operator {
            id,
            answer: OperatorAnswer::Agents(Ok(vec![agent.clone()])),
        });
    }
    h.answer_stores();
    answered
}

/// [`drained_empty_agent`] with `then: drain_agent` answered, the master's
/// agent DRAINING (other frameworks' tasks there), the drain cancelled and
/// its first REACTIVATE_AGENT refused as "still DRAINING".
async fn refused_while_draining() -> Harness {
    let mut h = drained_empty_agent(ThenAction::DrainAgent);
    then_called(&mut h, |op| matches!(op, OperatorOp::DrainAgent { .. })).await;
    list_agent_5(&mut h, v1::DrainState::Draining);
    let cancel = h.command(Request::CancelDrain {
        agent_id: "agent-5".into(),
        by: "ops".into(),
    });
    h.answer_stores();
    drain_answer(&h, cancel).expect("cancelled");
    h.advance(Duration::from_secs(1)).await;
    let calls = reactivations(&h);
    assert_eq!(calls.len(), 1, "{:?}", h.operators);
    answer_call(&mut h, calls[0], still_draining());
    h
}

/// A drain with `then: drain_agent` cancelled while the master's agent is
/// still DRAINING: the master refuses REACTIVATE_AGENT; the refusal is
/// stored and shown, and the call is sent again once GET_AGENTS shows the
/// agent DRAINED — not before; accepted, the drain shows it reactivated.
/// (Before, the refusal was final and the agent stayed drained at the
/// master.)
#[tokio::test(start_paused = true)]
async fn a_reactivate_refused_while_draining_is_sent_again_once_drained() {
    let mut h = refused_while_draining().await;
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    assert!(stored.reactivate_retry && !stored.reactivated, "{stored:?}");
    assert_eq!(stored.reactivate_tries, 1);
    let error = stored.reactivate_error.unwrap_or_default();
    assert!(error.contains("still in the DRAINING state"), "{error}");
    assert!(
        error.contains("sent again once GET_AGENTS shows it DRAINED"),
        "{error}"
    );
    let shown = shown_drain(h.snapshot().await, "agent-5").expect("shown");
    assert!(shown.reactivate_retry, "{shown:?}");
    // The master still drains: nothing is sent.
    for _ in 0..3 {
        h.advance(Duration::from_secs(6)).await;
        list_agent_5(&mut h, v1::DrainState::Draining);
        h.advance(Duration::from_secs(1)).await;
        assert!(reactivations(&h).is_empty(), "{:?}", h.operators);
    }
    // DRAINED: sent again, once.
    h.advance(Duration::from_secs(6)).await;
    list_agent_5(&mut h, v1::DrainState::Drained);
    h.advance(Duration::from_secs(1)).await;
    let calls = reactivations(&h);
    assert_eq!(calls.len(), 1, "{:?}", h.operators);
    answer_call(&mut h, calls[0], Ok(()));
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    assert!(stored.reactivated && !stored.reactivate_retry, "{stored:?}");
    assert_eq!(
        (stored.reactivate_tries, stored.reactivate_error),
        (2, None)
    );
    h.advance(Duration::from_secs(6)).await;
    list_agent_5(&mut h, v1::DrainState::Drained);
    h.advance(Duration::from_secs(6)).await;
    assert!(reactivations(&h).is_empty(), "called once more only");
}

/// The retries are bounded: refused again and again while GET_AGENTS
/// shows the agent DRAINED, at most `REACTIVATE_TRIES` calls, at most one
/// per GET_AGENTS poll; then the error says what the operator does.
#[tokio::test(start_paused = true)]
async fn a_reactivate_refused_while_draining_is_sent_a_bounded_number_of_times() {
    use crate::scheduler::core::machine::drains::REACTIVATE_TRIES;
    let mut h = refused_while_draining().await;
    let mut calls = 1;
    for _ in 0..20 {
        h.advance(Duration::from_secs(1)).await;
        list_agent_5(&mut h, v1::DrainState::Drained);
        h.advance(Duration::from_secs(1)).await;
        let now = reactivations(&h);
        assert!(now.len() <= 1, "{:?}", h.operators);
        for id in now {
            calls += 1;
            answer_call(&mut h, id, still_draining());
        }
    }
    assert_eq!(calls, REACTIVATE_TRIES);
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    assert!(
        !stored.reactivate_retry && !stored.reactivated,
        "{stored:?}"
    );
    let error = stored.reactivate_error.unwrap_or_default();
    assert!(
        error.contains("not sent again") && error.contains("call REACTIVATE_AGENT at the master"),
        "{error}"
    );
}

/// The retries are bounded in time too: an agent still DRAINING an hour
/// after the cancel is left to the operator, and the error says so.
#[tokio::test(start_paused = true)]
async fn a_reactivate_waiting_for_drained_gives_up_after_its_time() {
    use crate::scheduler::core::machine::drains::REACTIVATE_RETRY_FOR;
    let mut h = refused_while_draining().await;
    h.advance(REACTIVATE_RETRY_FOR).await;
    h.answer_stores();
    h.advance(Duration::from_secs(1)).await;
    list_agent_5(&mut h, v1::DrainState::Drained);
    h.advance(Duration::from_secs(6)).await;
    assert!(reactivations(&h).is_empty(), "{:?}", h.operators);
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    assert!(!stored.reactivate_retry, "{stored:?}");
    let error = stored.reactivate_error.unwrap_or_default();
    assert!(error.contains("not DRAINED within 3600 s"), "{error}");
}

/// An agent the table still shows active from before the master's drain
/// (no GET_AGENTS since DRAIN_AGENT) does not end the retry: only the
/// master's word after the refusal does. Listed active after it (someone
/// reactivated it at the master), the retry ends with nothing left to do.
#[tokio::test(start_paused = true)]
async fn a_reactivate_retry_ends_only_on_an_active_listed_after_the_refusal() {
    let mut h = drained_empty_agent(ThenAction::DrainAgent);
    then_called(&mut h, |op| matches!(op, OperatorOp::DrainAgent { .. })).await;
    // No GET_AGENTS since: the table shows agent-5 active (its offer).
    let cancel = h.command(Request::CancelDrain {
        agent_id: "agent-5".into(),
        by: "ops".into(),
    });
    h.answer_stores();
    drain_answer(&h, cancel).expect("cancelled");
    h.advance(Duration::from_secs(1)).await;
    let calls = reactivations(&h);
    assert_eq!(calls.len(), 1, "{:?}", h.operators);
    answer_call(&mut h, calls[0], still_draining());
    h.advance(Duration::from_secs(1)).await;
    h.answer_stores();
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    assert!(stored.reactivate_retry, "{stored:?}");
    // The master lists it active after the refusal: nothing left to do.
    h.advance(Duration::from_secs(6)).await;
    answer_agent_polls(&mut h, super::agents::listed("agent-5", true, None));
    h.advance(Duration::from_secs(1)).await;
    h.answer_stores();
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    // Deactivated, not drained: still waiting.
    assert!(stored.reactivate_retry, "{stored:?}");
    h.advance(Duration::from_secs(6)).await;
    answer_agent_polls(&mut h, super::agents::listed("agent-5", false, None));
    h.advance(Duration::from_secs(1)).await;
    h.answer_stores();
    let stored = stored_drain(&h, "agent-5").cloned().expect("stored");
    assert!(
        !stored.reactivate_retry && !stored.reactivated,
        "{stored:?}"
    );
    let error = stored.reactivate_error.unwrap_or_default();
    assert!(error.contains("nothing is left to do"), "{error}");
    assert!(reactivations(&h).is_empty(), "{:?}", h.operators);
}

/// One step of [`reactivate_retry_case`].
#[derive(Debug, Clone)]
enum RetryOp {
    /// Answer the GET_AGENTS in flight: agent-5 DRAINING (0), DRAINED
    /// (1), active (2) or deactivated without a drain (3).
    List(u8),
    /// Answer the REACTIVATE_AGENT in flight: accepted, or "still DRAINING".
    Answer(bool),
    /// Let this many seconds pass.
    Wait(u64),
}

fn retry_op() -> impl proptest::strategy::Strategy<Value = RetryOp> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..4).prop_map(RetryOp::List),
        3 => any::<bool>().prop_map(RetryOp::Answer),
        3 => (1u64..8).prop_map(RetryOp::Wait),
        1 => Just(RetryOp::Wait(700)),
    ]
}

/// Answers the GET_AGENTS in flight with agent-5 as `state` says; true
/// when one was in flight.
fn list_agent_5_as(h: &mut Harness, state: u8) -> bool {
    let agent = match state {
        0 => super::agents::listed("agent-5", true, Some(v1::DrainState::Draining)),
        1 => super::agents::listed("agent-5", true, Some(v1::DrainState::Drained)),
        2 => super::agents::listed("agent-5", false, None),
        _ => super::agents::listed("agent-5", true, None),
    };
    answer_agent_polls(h, agent)
}

/// Random GET_AGENTS answers, REACTIVATE_AGENT answers and waits after a
/// "still DRAINING" refusal: at most `REACTIVATE_TRIES` calls in all; a
/// call after a refusal only once a GET_AGENTS answered since listed the
/// agent DRAINED; none after one was accepted; a retry still pending at
/// the end has calls left.
fn reactivate_retry_case(ops: &[RetryOp]) -> Result<(), String> {
    use crate::scheduler::core::machine::drains::REACTIVATE_TRIES;
    paused_runtime()?.block_on(async {
        let mut h = refused_while_draining().await;
        let mut seen: Vec<RequestId> = Vec::new();
        let mut calls = 1u32;
        // What GET_AGENTS said last since the last refusal.
        let mut listed_since_refusal: Option<u8> = None;
        let mut accepted = false;
        for op in ops {
            match op {
                RetryOp::List(state) => {
                    if list_agent_5_as(&mut h, *state) {
                        listed_since_refusal = Some(*state);
                    }
                }
                RetryOp::Answer(ok) => {
                    for id in reactivations(&h) {
                        if *ok {
                            accepted = true;
                            answer_call(&mut h, id, Ok(()));
                        } else {
                            listed_since_refusal = None;
                            answer_call(&mut h, id, still_draining());
                        }
                    }
                }
                RetryOp::Wait(secs) => h.advance(Duration::from_secs(*secs)).await,
            }
            h.answer_stores();
            for id in reactivations(&h) {
                if seen.contains(&id) {
                    continue;
                }
                seen.push(id);
                calls += 1;
                if accepted {
                    return Err("REACTIVATE_AGENT sent after one was accepted".into());
                }
                if listed_since_refusal != Some(1) {
                    return Err(format!(
                        "REACTIVATE_AGENT sent again while GET_AGENTS last said \
                         {listed_since_refusal:?} since the refusal"
                    ));
                }
                if calls > REACTIVATE_TRIES {
                    return Err(format!("{calls} REACTIVATE_AGENT calls"));
                }
            }
        }
        let stored = stored_drain(&h, "agent-5").cloned().ok_or("no drain")?;
        if stored.reactivated != accepted {
            return Err(format!("accepted {accepted}, stored {stored:?}"));
        }
        if stored.reactivate_retry && stored.reactivate_tries >= REACTIVATE_TRIES {
            return Err(format!("a retry pending with no call left: {stored:?}"));
        }
        Ok(())
    })
}

#[test]
fn a_refused_reactivate_is_retried_only_once_drained_and_a_bounded_number_of_times() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(retry_op(), 1..60), |ops| {
        reactivate_retry_case(&ops).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
