//! A term loads its stored task records a slice per step
//! (`CoreConfig::load_per_step`, `startup::load_slice`): a command between
//! two slices is answered before the load ends, an update that comes
//! meanwhile is held and applied once every record is in, and no full
//! snapshot shows a table half loaded.

use std::time::Duration;

use super::*;
use crate::scheduler::ReconcileKind;

#[tokio::test(start_paused = true)]
async fn a_command_between_slices_is_answered_and_the_load_goes_on() {
    let spec = service("web", 6);
    let records: Vec<TaskRecord> = (0..6).map(|i| running_record("web", i, &spec)).collect();
    let mut cfg = config();
    cfg.load_per_step = 2;
    // A full snapshot due at every step: none may show a slice.
    cfg.snapshot_interval = Duration::ZERO;
    let mut h = Harness::new(cfg, Some(FRAMEWORK), std::slice::from_ref(&spec), &records);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_stores();
    assert_eq!(h.machine.tasks.len(), 2, "one slice per step");
    assert!(!h.machine.tasks.is_loaded());
    let shown = |h: &Harness| h.snapshot.as_ref().map_or(0, |s| s.tasks.len());
    assert_eq!(shown(&h), 0, "no snapshot of a table half loaded");
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
}
