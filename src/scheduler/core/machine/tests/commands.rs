//! Commands: answered while writes are in flight, with the store's error
//! kinds kept.

use super::*;
use crate::scheduler::commands::CommandError;
use crate::scheduler::snapshot::{FrameworkState, ReconcileKind};

#[tokio::test(start_paused = true)]
async fn commands_are_answered_while_a_write_is_in_flight() {
    let spec = service("web", 1);
    let staging = TaskRecord {
        state: TaskState::TaskStaging,
        ..running_record("web", 0, &spec)
    };
    let mut h = Harness::leader(&[spec], &[staging]);
    h.subscribe();
    h.answer_all();
    // A task write hangs (ZooKeeper is slow)...
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("u")));
    assert_eq!(h.stores.len(), 1);
    // ...and a reconciliation request is answered at once,
    let id = h.command(Request::Reconcile(ReconcileKind::Implicit));
    assert!(matches!(h.reply(id), Some(Answer::Reconcile(Ok(_)))));
    // heartbeats keep the snapshot's event time current,
    h.feed(Input::Heartbeat);
    let seen = h.snapshot().await.framework.last_event_at;
    assert!(seen.is_some());
    // and a service change waits only for its own write.
    let put = h.command(Request::PutService(Box::new(valid(service("db", 1)))));
    assert!(h.reply(put).is_none());
    let (id, op) = h.stores.pop_back().expect("the service write");
    assert!(matches!(op, StoreOp::PutService(..)));
    let result = h.store.apply(op);
    h.feed(Input::Stored { id, result });
    assert!(matches!(h.reply(put), Some(Answer::Service(Ok(false)))));
    assert!(h.acks.is_empty(), "the task write still hangs");
}

#[tokio::test(start_paused = true)]
async fn a_service_written_by_someone_else_answers_a_version_conflict() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    // Someone edits the record in ZooKeeper behind the leader's back.
    h.store.services.get_mut("web").unwrap().1 = 5;
    let id = h.command(Request::PutService(Box::new(valid(service("web", 3)))));
    h.answer_next_store();
    match h.reply(id) {
        Some(Answer::Service(Err(CommandError::Store(CoordinationError::VersionConflict {
            ..
        })))) => {}
        other => panic!("{other:?}"),
    }
    // The services are read again; the next write goes through.
    assert!(matches!(h.stores.front(), Some((_, StoreOp::ListServices))));
    h.answer_all();
    let again = h.command(Request::PutService(Box::new(valid(service("web", 3)))));
    h.answer_all();
    assert!(matches!(h.reply(again), Some(Answer::Service(Ok(true)))));
    assert_eq!(h.store.services["web"].1, 6);
}

#[tokio::test(start_paused = true)]
async fn losing_leadership_during_a_write_answers_leadership_lost() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let id = h.command(Request::DeleteService {
        name: "web".into(),
        expected: None,
    });
    h.fail_next_store(CoordinationError::NotLeader);
    assert!(matches!(
        h.reply(id),
        Some(Answer::Service(Err(CommandError::LeadershipLost)))
    ));
}

#[tokio::test(start_paused = true)]
async fn two_changes_to_one_service_go_one_after_the_other() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let first = h.command(Request::PutService(Box::new(valid(service("web", 2)))));
    let second = h.command(Request::PutService(Box::new(valid(service("web", 3)))));
    assert_eq!(h.stores.len(), 1, "the second waits for the first");
    h.answer_all();
    assert!(matches!(h.reply(first), Some(Answer::Service(Ok(true)))));
    assert!(matches!(h.reply(second), Some(Answer::Service(Ok(true)))));
    assert_eq!(h.store.services["web"].0.spec.instances, 3);
}

#[tokio::test(start_paused = true)]
async fn teardown_forgets_the_framework_before_it_answers() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    let id = h.command(Request::Teardown);
    assert!(h.reply(id).is_none());
    h.answer_calls();
    assert!(h.reply(id).is_none(), "not before the records are gone");
    h.answer_all();
    match h.reply(id) {
        Some(Answer::Teardown(Ok(r))) => {
            assert_eq!((r.framework_id.as_str(), r.tasks), (FRAMEWORK, 1))
        }
        other => panic!("{other:?}"),
    }
    assert!(h.store.framework_id.is_none() && h.store.tasks.is_empty());
    assert_eq!(h.snapshot().await.framework.state, FrameworkState::Removed);
}

/// Teardown, then reregister: the new framework launches every instance
/// again, also of a service the last pass found settled (its records went
/// with the table; no record change marks it).
#[tokio::test(start_paused = true)]
async fn teardown_then_reregister_launches_every_instance_again() {
    let web = service("web", 2);
    let tasks = [
        running_record("web", 0, &web),
        running_record("web", 1, &web),
    ];
    let mut h = Harness::leader(std::slice::from_ref(&web), &tasks);
    h.subscribe();
    h.answer_all();
    h.offer("o-1", "agent-0", 4.0);
    h.answer_all();
    assert!(Harness::launched(&h.drain_call_log()).is_empty(), "settled");
    h.command(Request::Teardown);
    h.answer_all();
    h.command(Request::Reregister);
    h.answer_all();
    h.feed(Input::Subscribed(SubscribedInfo {
        framework_id: "fw-2".into(),
        master: "http://master.test:5050".into(),
        master_version: Some("1.12.0".into()),
        heartbeat_interval: Duration::from_secs(15),
        heartbeat_timeout: Duration::from_secs(75),
    }));
    h.answer_all();
    h.offer("o-2", "agent-0", 4.0);
    h.answer_all();
    let launched = Harness::launched(&h.drain_call_log());
    assert_eq!(launched.len(), 2, "{launched:?}");
}

#[tokio::test(start_paused = true)]
async fn a_command_is_answered_after_a_snapshot_that_shows_it() {
    let mut h = Harness::running(&service("web", 1));
    assert_eq!(h.snapshot().await.services[0].spec.instances, 1);
    // A snapshot goes out now (or went out less than its interval ago);
    // no time passes: the throttle would hold the next one back.
    h.feed(Input::Heartbeat);
    let put = h.command(Request::PutService(Box::new(valid(service("web", 3)))));
    h.answer_all();
    assert!(matches!(h.reply(put), Some(Answer::Service(Ok(true)))));
    let shown = h.snapshot.as_ref().expect("a snapshot");
    assert_eq!(shown.services[0].spec.instances, 3, "read-your-writes");
}

#[tokio::test(start_paused = true)]
async fn a_command_answer_between_full_snapshots_does_not_recount_the_tasks() {
    let spec = service("web", 1);
    let mut h = Harness::running(&spec);
    assert_eq!(h.snapshot().await.tasks[0].state, TaskState::TaskRunning);
    // The task fails; the throttle holds the snapshot that shows it.
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("u1")));
    h.answer_stores();
    let reconcile = h.command(Request::Reconcile(ReconcileKind::Implicit));
    assert!(h.reply(reconcile).is_some());
    let light = h.snapshot.as_ref().expect("a snapshot");
    assert!(
        light
            .events
            .iter()
            .any(|e| e.message.contains("reconciliation requested")),
        "it shows what the command did"
    );
    assert_eq!(
        (light.tasks[0].state, light.services[0].running),
        (TaskState::TaskRunning, 1),
        "the task list and counts of the last full snapshot"
    );
    // The next full snapshot shows the failure.
    let full = h.snapshot().await;
    assert!(full.tasks.iter().any(|t| t.state == TaskState::TaskFailed));
    assert_eq!(full.services[0].running, 0);
}
