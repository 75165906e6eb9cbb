//! Partition awareness (`rules/partition.rs`): an unreachable task is
//! waited for on the machine's own clock, neither a failure nor a live
//! copy; a task that returns is settled by `kill_on_return`, with an audit
//! entry; TASK_GONE* and TASK_DROPPED are replaced at once; TASK_UNKNOWN
//! waits for an explicit reconciliation; a new leader continues the waits
//! from the stored times.

use std::time::Duration;

use super::*;
use crate::scheduler::records::PartitionMark;
use crate::scheduler::spec::unreachable::{KillOnReturn, UnreachablePolicy};

/// `web` with one instance and the acceptance's policy (20 s, 40 s,
/// `kill_on_return`).
fn web(kill_on_return: KillOnReturn) -> ServiceSpec {
    let mut spec = service("web", 1);
    spec.unreachable = Some(UnreachablePolicy {
        inactive_after: Duration::from_secs(20),
        expunge_after: Duration::from_secs(40),
        kill_on_return,
    });
    spec
}

/// The master's TASK_UNREACHABLE for `task` (`Master::markUnreachable`).
pub(super) fn unreachable(task: &str) -> v1::TaskStatus {
    v1::TaskStatus {
        source: Some(task_status::Source::Master as i32),
        reason: Some(task_status::Reason::AgentRemoved as i32),
        ..status(task, TaskState::TaskUnreachable, Some(&format!("{task}-u")))
    }
}

/// The master's TASK_RUNNING for `task` when its agent re-registers
/// (`Master::_reregisterSlave`).
pub(super) fn returned(task: &str) -> v1::TaskStatus {
    v1::TaskStatus {
        source: Some(task_status::Source::Master as i32),
        reason: Some(task_status::Reason::AgentReregistered as i32),
        ..status(task, TaskState::TaskRunning, Some(&format!("{task}-b")))
    }
}

/// Offers on `agent` every second for `secs` s; the first task launched
/// and the whole seconds waited for it.
async fn launch_within(h: &mut Harness, agent: &str, secs: u64) -> Option<(u64, String)> {
    for waited in 0..=secs {
        h.offer(&format!("o-{waited}-{:?}", Instant::now()), agent, 4.0);
        h.answer_all();
        if let Some(id) = Harness::launched(&h.drain_call_log()).pop() {
            return Some((waited, id));
        }
        h.advance(Duration::from_secs(1)).await;
    }
    None
}

async fn web_status(h: &mut Harness) -> crate::scheduler::counts::ServiceStatus {
    let s = h.snapshot().await;
    s.services
        .iter()
        .find(|x| x.spec.name == "web")
        .unwrap()
        .clone()
}

#[test]
fn the_framework_is_partition_aware() {
    let h = Harness::new(config(), Some(FRAMEWORK), &[], &[]);
    let info = h.machine.framework_info();
    let aware = v1::framework_info::capability::Type::PartitionAware as i32;
    assert!(info.capabilities.iter().any(|c| c.r#type == Some(aware)));
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_task_is_waited_for_then_replaced_without_backoff() {
    let spec = web(KillOnReturn::Old);
    let mut h = Harness::running(&spec);
    h.drain_call_log();
    h.update(unreachable("web.0.stored"));
    h.answer_all();
    let record = h.stored("web.0.stored").unwrap();
    assert_eq!(record.state, TaskState::TaskUnreachable);
    assert_eq!(
        record.partition.map(|m| m.unreachable_since),
        Some(1_000_000.0),
        "the wait's start is stored with the record"
    );
    let status = web_status(&mut h).await;
    assert_eq!((status.running, status.unreachable), (0, 1));
    let (waited, id) = launch_within(&mut h, "agent-9", 30)
        .await
        .expect("a launch");
    // Offered every second from 0.2 s on: the wait ends at 20 s.
    assert_eq!(waited, 20, "replaced when inactive_after is over");
    assert!(id.starts_with("web.0."), "{id}: the same instance");
    let status = web_status(&mut h).await;
    assert_eq!(status.consecutive_failures, 0, "not a failure");
    assert_eq!(status.unreachable, 1, "still shown until expunged");
    assert!(h.marked().is_empty(), "an unreachable task is not killed");
    h.advance(Duration::from_secs(25)).await;
    assert_eq!(web_status(&mut h).await.unreachable, 0, "expunged at 40 s");
}

#[tokio::test(start_paused = true)]
async fn a_task_back_before_inactive_after_is_kept_and_not_replaced() {
    let spec = web(KillOnReturn::Old);
    let mut h = Harness::running(&spec);
    h.drain_call_log();
    h.update(unreachable("web.0.stored"));
    h.answer_all();
    assert_eq!(launch_within(&mut h, "agent-9", 10).await, None);
    h.update(returned("web.0.stored"));
    h.answer_all();
    let record = h.stored("web.0.stored").unwrap();
    assert_eq!(record.state, TaskState::TaskRunning);
    assert!(record.partition.unwrap().returned_at.is_some());
    assert_eq!(launch_within(&mut h, "agent-9", 30).await, None);
    let status = web_status(&mut h).await;
    assert_eq!((status.running, status.unreachable), (1, 0));
    assert_eq!(status.consecutive_failures, 0);
    assert!(h.marked().is_empty());
}

/// The task is unreachable past `inactive_after`, its replacement runs,
/// then it returns: the replacement's ID.
async fn returns_after_its_replacement(h: &mut Harness) -> String {
    h.drain_call_log();
    h.update(unreachable("web.0.stored"));
    h.answer_all();
    let (_, new) = launch_within(h, "agent-9", 30).await.expect("a launch");
    h.update(status(&new, TaskState::TaskRunning, Some("new-r")));
    h.answer_all();
    h.update(returned("web.0.stored"));
    h.answer_all();
    new
}

#[tokio::test(start_paused = true)]
async fn kill_on_return_old_kills_the_copy_that_returned_and_audits_it() {
    let spec = web(KillOnReturn::Old);
    let mut h = Harness::running(&spec);
    let new = returns_after_its_replacement(&mut h).await;
    assert_eq!(h.marked(), ["web.0.stored"]);
    let kills: Vec<_> = h
        .drain_call_log()
        .into_iter()
        .filter(|c| matches!(c, MesosCall::Kill { .. }))
        .collect();
    assert_eq!(kills.len(), 1, "{kills:?}");
    let entry = h.store.audit.last().expect("an audit entry");
    assert_eq!(entry["action"], "task.kill_on_return");
    assert_eq!(entry["params"]["task_id"], "web.0.stored");
    let reason = entry["reason"].as_str().unwrap();
    assert!(reason.contains(&new), "names the copy kept: {reason}");
    assert!(reason.contains("kill_on_return: old"), "{reason}");
    // Killed: one copy again, nothing launched.
    h.update(status("web.0.stored", TaskState::TaskKilled, Some("k")));
    h.answer_all();
    let status = web_status(&mut h).await;
    assert_eq!((status.running, status.killing), (1, 0));
    assert_eq!(status.consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn kill_on_return_new_kills_the_replacement() {
    let spec = web(KillOnReturn::New);
    let mut h = Harness::running(&spec);
    let new = returns_after_its_replacement(&mut h).await;
    assert_eq!(h.marked(), std::slice::from_ref(&new));
    let entry = h.store.audit.last().expect("an audit entry");
    assert_eq!(entry["params"]["task_id"], new.as_str());
}

#[tokio::test(start_paused = true)]
async fn the_default_policy_replaces_at_once_and_keeps_the_replacement() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    h.drain_call_log();
    h.update(unreachable("web.0.stored"));
    h.answer_all();
    let (waited, new) = launch_within(&mut h, "agent-9", 5).await.expect("a launch");
    assert_eq!(waited, 0);
    h.update(status(&new, TaskState::TaskRunning, Some("new-r")));
    h.update(returned("web.0.stored"));
    h.answer_all();
    assert_eq!(h.marked(), ["web.0.stored"]);
}

#[tokio::test(start_paused = true)]
async fn gone_and_dropped_tasks_are_replaced_at_once() {
    for state in [
        TaskState::TaskGone,
        TaskState::TaskGoneByOperator,
        TaskState::TaskDropped,
    ] {
        let spec = web(KillOnReturn::Old);
        let mut h = Harness::running(&spec);
        h.drain_call_log();
        h.update(unreachable("web.0.stored"));
        h.answer_all();
        h.advance(Duration::from_secs(5)).await;
        h.update(status("web.0.stored", state, Some("g")));
        h.answer_all();
        let (waited, _) = launch_within(&mut h, "agent-9", 5).await.expect("a launch");
        assert_eq!(waited, 0, "{state:?}");
        assert_eq!(web_status(&mut h).await.consecutive_failures, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn an_unknown_task_is_given_up_only_after_explicit_reconciliation() {
    let spec = web(KillOnReturn::Old);
    let mut h = Harness::running(&spec);
    h.drain_call_log();
    h.update(status("web.0.stored", TaskState::TaskUnknown, None));
    h.answer_stores();
    let calls = h.drain_call_log();
    let asked = calls.iter().find_map(|c| match c {
        MesosCall::Reconcile(tasks) => Some(tasks.clone()),
        _ => None,
    });
    assert_eq!(
        asked.map(|t| t
            .into_iter()
            .map(|(id, _)| id.to_string())
            .collect::<Vec<_>>()),
        Some(vec!["web.0.stored".to_string()]),
        "{calls:?}"
    );
    h.answer_all();
    assert_eq!(launch_within(&mut h, "agent-9", 3).await, None);
    h.update(reconciled("web.0.stored", TaskState::TaskUnknown));
    h.answer_all();
    assert!(h.stored("web.0.stored").unwrap().unknown_confirmed());
    let (waited, _) = launch_within(&mut h, "agent-9", 3).await.expect("a launch");
    assert_eq!(waited, 0);
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_continues_the_wait_from_the_stored_time() {
    let spec = web(KillOnReturn::Old);
    // Unreachable since 12 s before this term's start (1_000_000).
    let mut record = running_record("web", 0, &spec);
    record.state = TaskState::TaskUnreachable;
    record.partition = Some(PartitionMark {
        unreachable_since: 1_000_000.0 - 12.0,
        returned_at: None,
    });
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[record]);
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    let (waited, _) = launch_within(&mut h, "agent-9", 30)
        .await
        .expect("a launch");
    assert_eq!(waited, 8, "20 s from the stored time, not from the term");
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_task_does_not_hold_its_host_for_unique() {
    let mut spec = web(KillOnReturn::Old);
    spec.constraints = vec!["hostname:UNIQUE".into()];
    spec.instances = 2;
    let mut h = Harness::leader(
        std::slice::from_ref(&spec),
        &[
            running_record("web", 0, &spec),
            running_record("web", 1, &spec),
        ],
    );
    h.subscribe();
    h.answer_all();
    h.drain_call_log();
    h.update(unreachable("web.0.stored"));
    h.answer_all();
    h.advance(Duration::from_secs(21)).await;
    // agent-0 (host agent-0.test in offers) is web.0's: its record says
    // host-0. An offer from host-1 stays refused (web.1 runs there);
    // host-0's is taken although the unreachable copy was there.
    let offer = |h: &mut Harness, id: &str, host: &str| {
        let resources = Resources::parse("cpus:4;mem:1024")
            .expect("resources")
            .to_protos(None);
        h.feed(Input::Offers(vec![v1::Offer {
            id: v1::OfferId { value: id.into() },
            agent_id: v1::AgentId {
                value: format!("{host}-agent"),
            },
            hostname: host.into(),
            resources,
            ..Default::default()
        }]));
        h.answer_all();
        Harness::launched(&h.drain_call_log())
    };
    assert!(offer(&mut h, "o-1", "host-1").is_empty());
    assert_eq!(offer(&mut h, "o-2", "host-0").len(), 1);
}
