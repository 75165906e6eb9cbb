//! How a drain ends when its agent's tasks do not simply move
//! (`machine/drains.rs`, `machine/evacuation.rs`, `docs/draining.md`):
//! a replacement stuck in TASK_STAGING is named with its age and the
//! launch timeout that replaces it, and the drain moves the task once a
//! later copy is available; a task that ends on the drained agent without
//! a kill (lost with the agent brought DOWN) is listed `ended` at the
//! drain's end, with its last status.

use super::drains::{drain_answer, killed, shown_drain, start, stored_drain, update_on, web};
use super::*;
use crate::scheduler::drains::{DrainProgress, DrainState, DrainTask, MinHealthy, ThenAction};

/// The launch timeout of these tests (`--task-launch-timeout`).
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A subscribed leader of `web(3)` (instance `i` on `agent-i`) with the
/// launch timeout [`LAUNCH_TIMEOUT`], its drain of agent-0 (floor 3)
/// started.
fn draining() -> Harness {
    let (spec, tasks) = web(3);
    let cfg = CoreConfig {
        transient_timeout: LAUNCH_TIMEOUT,
        ..config()
    };
    let mut h = Harness::new(cfg, Some(FRAMEWORK), &[spec], &tasks);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    let id = start(&mut h, "agent-0", MinHealthy::Count(3), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    h
}

/// `secs` seconds on, I/O settled.
async fn after(h: &mut Harness, secs: u64) {
    h.advance(Duration::from_secs(secs)).await;
    h.answer_all();
}

/// Agent-3 offers; the copy of instance 0 launched there, its ID.
fn copy_launched(h: &mut Harness, offer: &str) -> String {
    h.offer(offer, "agent-3", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    Harness::launched(&calls)
        .into_iter()
        .find(|t| t.starts_with("web.0."))
        .expect("a copy of instance 0")
}

/// The drained task `web.0.stored` as the snapshot shows it.
async fn leaver(h: &mut Harness) -> DrainTask {
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    drain
        .tasks
        .into_iter()
        .find(|t| t.task_id.as_str() == "web.0.stored")
        .expect("listed")
}

/// The drain waits on a replacement the agent holds in TASK_STAGING: the
/// wait names how long and when the launch timeout replaces it, and the
/// service shows the task launched and not running; once
/// past it, the copy is killed (its reason names the state), a new copy
/// is launched, and once that one is available the drained task moves
/// and the drain is done.
#[tokio::test(start_paused = true)]
async fn a_drain_waiting_on_a_stuck_replacement_moves_once_the_launch_timeout_replaced_it() {
    let mut h = draining();
    let stuck = copy_launched(&mut h, "o-3");
    after(&mut h, 10).await;
    let task = leaver(&mut h).await;
    assert_eq!(task.progress, DrainProgress::WaitingForHealth, "{task:?}");
    let why = task.reason.unwrap_or_default();
    assert!(
        why.starts_with(&format!("replacement {stuck} is TASK_STAGING for 10s")),
        "{why}"
    );
    assert!(
        why.ends_with("killed and replaced after 30s (--task-launch-timeout)"),
        "{why}"
    );
    // The service does not look whole: its instance counts once, by the
    // running task, but the copy launched and not running is shown with
    // how long it has been so.
    let launched_at = h.stored(&stuck).map(|r| r.updated_at);
    let snapshot = h.snapshot().await;
    let web = snapshot.services.iter().find(|s| s.spec.name == "web");
    let web = web.expect("web");
    assert_eq!((web.running, web.starting), (3, 0));
    assert_eq!((web.starting_tasks, web.starting_since), (1, launched_at));
    // Past the launch timeout: the stuck copy is killed, not the task
    // the drain moves.
    after(&mut h, 21).await;
    assert_eq!(killed(&h.drain_call_log()), std::slice::from_ref(&stuck));
    let reason = h.stored(&stuck).and_then(|r| r.kill.as_ref());
    assert_eq!(
        reason.map(|k| k.reason.as_str()),
        Some("stuck in TASK_STAGING for more than 30s (--task-launch-timeout)")
    );
    h.update(update_on(&stuck, "agent-3", TaskState::TaskKilled, "k1"));
    h.answer_all();
    // A new copy, RUNNING and available (`upgrade.min_healthy`, 10 s):
    // the drained task moves.
    let copy = copy_launched(&mut h, "o-3b");
    assert_ne!(copy, stuck);
    h.update(update_on(&copy, "agent-3", TaskState::TaskRunning, "r1"));
    h.answer_all();
    after(&mut h, 11).await;
    assert_eq!(killed(&h.drain_call_log()), ["web.0.stored"]);
    h.update(update_on(
        "web.0.stored",
        "agent-0",
        TaskState::TaskKilled,
        "k2",
    ));
    h.answer_all();
    after(&mut h, 2).await;
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!(
        (drain.state, drain.moved),
        (DrainState::Done, 1),
        "{drain:?}"
    );
    assert_eq!(
        drain.tasks[0].replacement.as_ref().map(ToString::to_string),
        Some(copy)
    );
}

/// The agent is brought DOWN while it is drained (an operator's
/// START_MAINTENANCE): the master ends its task with TASK_LOST, no kill
/// of ours. The drain is done and lists it `ended`, with its last
/// status; a task that ended there before the drain began is not its.
#[tokio::test(start_paused = true)]
async fn a_task_lost_on_the_drained_agent_is_listed_ended_at_the_drains_end() {
    let (spec, mut tasks) = web(3);
    // An earlier task of instance 0 on agent-0, ended long before.
    tasks.push(TaskRecord {
        state: TaskState::TaskFailed,
        updated_at: 10.0,
        ..running_record("web", 0, &spec)
    });
    tasks[3].task_id = "web.0.earlier".into();
    let mut h = Harness::leader(&[spec], &tasks);
    h.subscribe();
    h.answer_all();
    let id = start(&mut h, "agent-0", MinHealthy::Count(3), ThenAction::None);
    h.answer_all();
    drain_answer(&h, id).expect("started");
    after(&mut h, 2).await;
    // No offer elsewhere: the task waits for one.
    assert_eq!(leaver(&mut h).await.progress, DrainProgress::Blocked);
    h.update(v1::TaskStatus {
        reason: Some(v1::task_status::Reason::AgentRemoved as i32),
        message: Some("Agent agent-0 removed: Operator initiated 'Machine DOWN'".into()),
        source: Some(v1::task_status::Source::Master as i32),
        ..update_on("web.0.stored", "agent-0", TaskState::TaskLost, "l1")
    });
    h.answer_all();
    after(&mut h, 2).await;
    assert_eq!(
        stored_drain(&h, "agent-0").map(|d| d.state),
        Some(DrainState::Done)
    );
    let drain = shown_drain(h.snapshot().await, "agent-0").expect("the drain");
    assert_eq!(
        (drain.moved, drain.stopped, drain.ended),
        (0, 0, 1),
        "{drain:?}"
    );
    let [task] = drain.tasks.as_slice() else {
        panic!("one task: {drain:?}");
    };
    assert_eq!(task.task_id.as_str(), "web.0.stored");
    assert_eq!(task.progress, DrainProgress::Ended);
    assert_eq!(
        task.reason.as_deref(),
        Some(
            "ended on the agent: TASK_LOST, REASON_AGENT_REMOVED: Agent agent-0 removed: \
             Operator initiated 'Machine DOWN'"
        )
    );
    // Stored with the drain's end, the count too.
    let end = stored_drain(&h, "agent-0").and_then(|d| d.ended.clone());
    assert_eq!(end.map(|e| (e.ended, e.tasks.len())), Some((1, 1)));
}
