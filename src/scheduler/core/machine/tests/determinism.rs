//! The core is deterministic: the same inputs at the same times, with the
//! same task ID seed, give the same effects, byte for byte (their Debug
//! form). Two harnesses run in lockstep, so they share every `Instant`.

use std::time::Duration;

use super::*;

/// Both harnesses, fed the same inputs at the same instants.
struct Twins([Harness; 2]);

impl Twins {
    fn new(seeds: [u64; 2]) -> Twins {
        let spec = service("web", 3);
        let one = |seed| {
            Harness::seeded(
                config(),
                Some(FRAMEWORK),
                std::slice::from_ref(&spec),
                &[],
                seed,
            )
        };
        Twins([one(seeds[0]), one(seeds[1])])
    }

    fn each(&mut self, step: impl Fn(&mut Harness)) {
        for h in &mut self.0 {
            step(h);
        }
    }

    /// Moves paused time on by `by`, then ticks both.
    async fn advance(&mut self, by: Duration) {
        tokio::time::advance(by).await;
        self.each(|h| h.feed(Input::Tick));
    }

    /// The task IDs each harness launched so far.
    fn launched(&self) -> [Vec<String>; 2] {
        self.0.each_ref().map(|h| Harness::launched(&h.call_log))
    }
}

/// Start, subscription, launches on two offers, their updates in a mixed
/// order with a duplicate, a failure and its replacement, an explicit
/// reconciliation and the periodic one.
async fn scenario(t: &mut Twins) {
    t.each(|h| {
        h.start();
        h.answer_all();
        h.subscribe();
        h.answer_all();
        h.offer("o-1", "agent-0", 0.25);
        h.offer("o-2", "agent-1", 4.0);
        h.answer_all();
    });
    t.advance(Duration::from_secs(1)).await;
    t.each(|h| {
        let first = Harness::launched(&h.call_log);
        assert_eq!(first.len(), 3, "three launches");
        for (i, task) in first.iter().rev().enumerate() {
            let state = if i == 0 {
                TaskState::TaskStarting
            } else {
                TaskState::TaskRunning
            };
            h.update(status(task, state, Some(&format!("u{i}"))));
        }
        h.update(status(&first[0], TaskState::TaskRunning, Some("u9")));
        h.update(status(&first[0], TaskState::TaskRunning, Some("u9")));
        h.update(status("web.7.unknown", TaskState::TaskRunning, Some("ux")));
        h.answer_all();
        h.update(status(&first[1], TaskState::TaskFailed, Some("uf")));
        h.answer_all();
    });
    t.advance(Duration::from_secs(3)).await;
    t.each(|h| {
        h.offer("o-3", "agent-2", 4.0);
        h.answer_all();
        h.command(Request::Reconcile(
            crate::scheduler::rules::reconcile::ReconcileKind::Explicit,
        ));
        h.answer_all();
    });
    for _ in 0..4 {
        t.advance(Duration::from_secs(200)).await;
        t.each(|h| h.answer_all());
    }
}

#[tokio::test(start_paused = true)]
async fn the_same_inputs_and_seed_give_the_same_effects() {
    let mut t = Twins::new([7, 7]);
    scenario(&mut t).await;
    let [a, b] = &t.0;
    assert!(
        Harness::launched(&a.call_log).len() >= 4,
        "the failed task was replaced"
    );
    assert!(
        a.snapshot
            .as_ref()
            .is_some_and(|s| !s.reconciliation.history.is_empty()),
        "reconciliation ran"
    );
    for (i, (x, y)) in a.trace.iter().zip(&b.trace).enumerate() {
        assert_eq!(x, y, "effects {i} differ");
    }
    assert_eq!(a.trace.len(), b.trace.len());
}

#[tokio::test(start_paused = true)]
async fn another_seed_gives_other_task_ids() {
    let mut t = Twins::new([7, 8]);
    scenario(&mut t).await;
    let [a, b] = t.launched();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_ne!(x, y);
        // `service.instance.` then a UUID in its usual text form.
        let (prefix, uuid) = x.rsplit_once('.').expect("a dotted task ID");
        assert!(prefix.starts_with("web."), "{x}");
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{x}");
    }
}
