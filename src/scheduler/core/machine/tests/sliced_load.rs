//! A term loads its stored task records a slice per step
//! (`CoreConfig::load_per_step`, `startup::load_slice`): a command between
//! two slices is answered before the load ends, an update that comes
//! meanwhile is held and applied once every record is in, and no full
//! snapshot shows a table half loaded: until the load ends a snapshot says
//! it is loading (`Snapshot::loading`).

use std::time::Duration;

use super::*;
use crate::scheduler::ReconcileKind;

/// A leader of `specs` with `records` stored, subscribed, whose load takes
/// two records a step (`cfg` otherwise); its first slice is in.
pub(super) fn loading_two_a_step(
    mut cfg: CoreConfig,
    specs: &[ServiceSpec],
    records: &[TaskRecord],
) -> Harness {
    cfg.load_per_step = 2;
    let mut h = Harness::new(cfg, Some(FRAMEWORK), specs, records);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_stores();
    h
}

#[tokio::test(start_paused = true)]
async fn a_command_between_slices_is_answered_and_the_load_goes_on() {
    let spec = service("web", 6);
    let records: Vec<TaskRecord> = (0..6).map(|i| running_record("web", i, &spec)).collect();
    let mut cfg = config();
    // A full snapshot due at every step: none may show a slice.
    cfg.snapshot_interval = Duration::ZERO;
    let mut h = loading_two_a_step(cfg, std::slice::from_ref(&spec), &records);
    assert_eq!(h.machine.tasks.len(), 2, "one slice per step");
    assert!(!h.machine.tasks.is_loaded());
    let shown = |h: &Harness| h.snapshot.as_ref().map_or(0, |s| s.tasks.len());
    assert_eq!(shown(&h), 0, "no snapshot of a table half loaded");
    let loading = |h: &Harness| h.snapshot.as_ref().map(|s| s.loading);
    assert_eq!(loading(&h), Some(true), "shown as loading, not as none");
    // A command between two slices is answered at once.
    let reply = h.command(Request::Reconcile(ReconcileKind::Explicit));
    h.answer_stores();
    assert!(h.reply(reply).is_some(), "answered during the load");
    assert!(!h.machine.tasks.is_loaded());
    // An update for a task not loaded yet waits for the load.
    h.update(status("web.5.stored", TaskState::TaskFailed, Some("u-5")));
    // The next slices come with the next steps.
    h.advance(Duration::ZERO).await;
    h.answer_stores();
    h.advance(Duration::ZERO).await;
    h.answer_stores();
    assert!(h.machine.tasks.is_loaded());
    assert_eq!(h.machine.tasks.len(), 6);
    h.answer_all();
    assert_eq!(
        h.stored("web.5.stored").map(|r| r.state),
        Some(TaskState::TaskFailed),
        "the update held during the load is applied after it"
    );
    h.advance(Duration::from_millis(300)).await;
    assert_eq!(
        shown(&h),
        6,
        "the full snapshot after the load shows every record"
    );
    assert_eq!(loading(&h), Some(false));
}

/// After the last slice, the restart backoffs are rebuilt a service per
/// step (as many as fit in the step's budget of records), with a command
/// answered between; a failed task's count is rebuilt for each service,
/// and the table counts as loaded only after the last.
#[tokio::test(start_paused = true)]
async fn backoffs_are_rebuilt_a_service_per_step_after_the_records() {
    let specs = [service("api", 2), service("web", 2)];
    let mut records = Vec::new();
    for spec in &specs {
        let mut failed = running_record(&spec.name, 0, spec);
        failed.task_id = format!("{}.0.failed", spec.name).into();
        failed.state = TaskState::TaskFailed;
        failed.timeline = vec![crate::scheduler::StatusEntry {
            at: 1.0,
            state: TaskState::TaskFailed,
            source: None,
            reason: None,
            message: None,
            healthy: None,
        }];
        records.push(failed);
        records.push(running_record(&spec.name, 1, spec));
    }
    let mut h = loading_two_a_step(config(), &specs, &records);
    let backoff = |h: &Harness, name: &str| {
        h.machine
            .services
            .state(name)
            .and_then(|s| s.backoff.as_ref())
            .map_or(0, |b| b.failures_at(&specs[0], Instant::now()))
    };
    // Two slices of two records each.
    assert_eq!(h.machine.tasks.len(), 2);
    h.feed(Input::Tick);
    assert_eq!(h.machine.tasks.len(), 4, "the last slice");
    assert_eq!((backoff(&h, "api"), backoff(&h, "web")), (0, 0));
    h.feed(Input::Tick);
    assert_eq!(
        (backoff(&h, "api"), backoff(&h, "web")),
        (1, 0),
        "one service's backoffs per step"
    );
    assert!(!h.machine.tasks.is_loaded());
    let reply = h.command(Request::Reconcile(ReconcileKind::Explicit));
    h.answer_stores();
    assert!(h.reply(reply).is_some(), "answered between two steps");
    h.feed(Input::Tick);
    assert_eq!((backoff(&h, "api"), backoff(&h, "web")), (1, 1));
    assert!(h.machine.tasks.is_loaded(), "loaded with the last backoffs");
}
