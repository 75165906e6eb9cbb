//! The full snapshot's costly parts done ahead or not again: a term's load
//! builds each service's snapshot sums a service per step
//! (`view::Shown::absorb`), and the task list and the tasks by agent are
//! listed again only when a stored record changed
//! (`TaskTable::stored_generation`).

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::scheduler::ReconcileKind;
use crate::scheduler::records::{KillRequest, PartitionMark};
use crate::scheduler::snapshot::ServiceCounts;

/// `api`'s three records count on the sums; `web`'s (a duplicate, a
/// partition, a kill, a failure) are counted one by one.
fn mixed(api: &ServiceSpec, web: &ServiceSpec) -> Vec<TaskRecord> {
    let mut records: Vec<TaskRecord> = (0..3).map(|i| running_record("api", i, api)).collect();
    records[2].state = TaskState::TaskStaging;
    let mut web_records: Vec<TaskRecord> = (0..4).map(|i| running_record("web", i, web)).collect();
    let mut copy = running_record("web", 0, web);
    copy.task_id = "web.0.copy".into();
    web_records.push(copy);
    web_records[1].state = TaskState::TaskUnreachable;
    web_records[1].partition = Some(PartitionMark {
        unreachable_since: 1.0,
        returned_at: None,
    });
    web_records[2].state = TaskState::TaskFailed;
    web_records[3].kill = Some(KillRequest::new("scaled down".into(), 1.0));
    records.extend(web_records);
    records
}

/// The counts `snapshot` shows for each service, and those of a count of
/// every stored record at its time.
fn shown_and_recounted(h: &Harness, specs: &[ServiceSpec]) -> (Vec<String>, Vec<String>) {
    let snapshot = h.snapshot.as_ref().expect("a snapshot");
    let shown = snapshot
        .services
        .iter()
        .map(|s| {
            let r = s
                .rollout
                .as_ref()
                .map(|r| (r.replaced, r.healthy, r.remaining));
            format!(
                "{} {} {} {} {} {} {} {r:?}",
                s.spec.name,
                s.running,
                s.starting,
                s.killing,
                s.unreachable,
                s.healthy,
                s.unhealthy
            )
        })
        .collect();
    let recounted = specs
        .iter()
        .map(|spec| {
            let stored = h.machine.tasks.service(&spec.name).into_iter();
            let c = ServiceCounts::of(spec, stored.flat_map(|t| t.stored()), snapshot.at);
            let p = &c.progress;
            let r = p
                .under_way(false)
                .then_some((p.replaced, p.healthy, p.remaining));
            format!(
                "{} {} {} {} {} {} {} {r:?}",
                spec.name, c.running, c.starting, c.killing, c.unreachable, c.healthy, c.unhealthy
            )
        })
        .collect();
    (shown, recounted)
}

#[tokio::test(start_paused = true)]
async fn the_load_builds_each_services_sums_and_the_first_full_snapshot_counts_them() {
    let specs = [service("api", 3), service("web", 4)];
    let records = mixed(&specs[0], &specs[1]);
    let mut h = super::sliced_load::loading_two_a_step(config(), &specs, &records);
    let built = |h: &Harness, name: &str| {
        h.machine
            .services
            .state(name)
            .is_some_and(|s| s.shown.is_some())
    };
    // Three more slices of two records (eight in all), then a service per
    // step: `api`'s sums are built with its backoffs.
    for _ in 0..3 {
        h.feed(Input::Tick);
    }
    assert_eq!(h.machine.tasks.len(), records.len(), "every record is in");
    assert!(!built(&h, "api") && !built(&h, "web"));
    h.feed(Input::Tick);
    assert!(h.machine.loading_tasks());
    assert!(
        built(&h, "api") && !built(&h, "web"),
        "one service's sums per step, before any snapshot"
    );
    // A command's (light) snapshot between two steps.
    let reply = h.command(Request::Reconcile(ReconcileKind::Explicit));
    h.answer_stores();
    assert!(h.reply(reply).is_some());
    h.feed(Input::Tick);
    assert!(h.machine.tasks.is_loaded() && built(&h, "web"));
    h.answer_all();
    h.advance(Duration::from_millis(300)).await;
    let (shown, recounted) = shown_and_recounted(&h, &specs);
    assert_eq!(
        shown, recounted,
        "the first full snapshot counts as a count of every record"
    );
    assert_eq!(h.snapshot.as_ref().unwrap().tasks.len(), records.len());
    assert_eq!(h.machine.shown_mismatch(Instant::now()), None);
}

#[tokio::test(start_paused = true)]
async fn the_task_list_is_listed_again_only_when_a_stored_record_changed() {
    let spec = service("web", 2);
    let records: Vec<TaskRecord> = (0..2).map(|i| running_record("web", i, &spec)).collect();
    let mut cfg = config();
    cfg.terminal_retention = Duration::from_secs(5);
    let mut h = Harness::new(cfg, Some(FRAMEWORK), std::slice::from_ref(&spec), &records);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    let first = h.snapshot().await.clone();
    // An update that changes no record, then something else shown.
    h.update(reconciled("web.0.stored", TaskState::TaskRunning));
    h.feed(Input::Heartbeat);
    h.answer_all();
    let same = h.snapshot().await.clone();
    assert!(same.at > first.at, "a later full snapshot");
    assert!(
        Arc::ptr_eq(&first.tasks, &same.tasks),
        "nothing stored changed: the same list"
    );
    let by_agent = |s: &Snapshot| {
        let mut lists: Vec<(String, Vec<String>)> = s
            .agents
            .iter()
            .map(|a| {
                let ids = a.tasks.iter().map(ToString::to_string).collect();
                (a.agent_id.to_string(), ids)
            })
            .collect();
        lists.sort();
        lists
    };
    // A record changes: listed again, as stored.
    h.update(status("web.1.stored", TaskState::TaskFailed, Some("u-1")));
    h.answer_all();
    let changed = h.snapshot().await.clone();
    assert!(!Arc::ptr_eq(&same.tasks, &changed.tasks));
    let stored: Vec<Arc<TaskRecord>> = h.machine.tasks.stored().cloned().collect();
    assert_eq!(*changed.tasks, *stored);
    assert_eq!(
        changed
            .tasks
            .iter()
            .find(|t| t.task_id.as_ref() == "web.1.stored")
            .map(|t| t.state),
        Some(TaskState::TaskFailed)
    );
    assert_eq!(h.machine.shown_tasks_mismatch(), None);
    let lists = by_agent(&changed);
    assert!(
        !lists
            .iter()
            .any(|(_, ids)| ids.contains(&"web.1.stored".into())),
        "a failed task leaves its agent's list: {lists:?}"
    );
    // The failed record is deleted once its retention is over: listed
    // again without it.
    for _ in 0..10 {
        h.advance(Duration::from_secs(1)).await;
        h.answer_all();
    }
    assert!(!h.machine.tasks.contains("web.1.stored"), "deleted");
    let deleted = h.snapshot().await.clone();
    let stored: Vec<Arc<TaskRecord>> = h.machine.tasks.stored().cloned().collect();
    assert_eq!(*deleted.tasks, *stored);
    assert!(
        deleted
            .tasks
            .iter()
            .all(|t| t.task_id.as_ref() != "web.1.stored")
    );
}
