use super::*;

fn cfg() -> ReconcilerConfig {
    ReconcilerConfig {
        interval: Duration::from_secs(600),
        initial_delay: Duration::from_secs(30),
        cooldown: Duration::from_secs(5),
        explicit_max_backoff: Duration::from_secs(8),
        explicit_abort_timeout: Duration::from_secs(60),
        implicit_window: Duration::from_secs(3),
        explicit_slice: EXPLICIT_SLICE,
    }
}

fn tasks(ids: &[&str]) -> TaskList {
    ids.iter()
        .map(|t| (TaskId::from(*t), Some(AgentId::from("agent"))))
        .collect()
}

fn sent(actions: &[Action]) -> Vec<Vec<String>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(list) => Some(list.iter().map(|(t, _)| t.to_string()).collect()),
            _ => None,
        })
        .collect()
}

fn outcome(actions: &[Action]) -> Option<String> {
    actions.iter().find_map(|a| match a {
        Action::Finished(run) => Some(run.outcome.to_string()),
        _ => None,
    })
}

#[test]
fn explicit_run_asks_again_with_backoff_until_every_task_answered() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    let first = r.subscribed(tasks(&["a", "b"]), t0, 0.0);
    assert_eq!(sent(&first), [vec!["a", "b"]]);
    assert!(r.on_update("a", true, t0, 0.0).is_empty());
    assert!(
        r.tick(t0 + Duration::from_millis(500), 0.0, Vec::new)
            .is_empty(),
        "backoff 1 s"
    );
    let second = r.tick(t0 + Duration::from_secs(1), 0.0, Vec::new);
    assert_eq!(sent(&second), [vec!["b"]], "only the unanswered task");
    assert!(
        r.tick(t0 + Duration::from_secs(2), 0.0, Vec::new)
            .is_empty(),
        "now 2 s"
    );
    assert_eq!(
        sent(&r.tick(t0 + Duration::from_secs(3), 0.0, Vec::new)),
        [vec!["b"]]
    );
    let done = r.on_update("b", false, t0 + Duration::from_secs(4), 4.0);
    assert_eq!(
        outcome(&done).as_deref(),
        Some("converged"),
        "at the last answer"
    );
    let run = &r.status().history[0];
    assert_eq!((run.asked, run.answered, run.calls), (2, 2, 3));
}

#[test]
fn answers_still_coming_put_off_asking_again() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut r = Reconciler::new(cfg(), t0);
    r.subscribed(tasks(&["a", "b", "c"]), t0, 0.0);
    // An answer every 800 ms: the 1 s wait restarts at each.
    assert!(r.on_update("a", true, t0 + ms(800), 0.8).is_empty());
    assert!(r.tick(t0 + ms(1000), 1.0, Vec::new).is_empty());
    assert!(r.on_update("b", true, t0 + ms(1600), 1.6).is_empty());
    assert!(r.tick(t0 + ms(2500), 2.5, Vec::new).is_empty());
    // Silent for the wait: only the unanswered task is asked about.
    assert_eq!(sent(&r.tick(t0 + ms(2600), 2.6, Vec::new)), [vec!["c"]]);
}

#[test]
fn backoff_is_truncated_and_the_run_aborts_with_the_unanswered_listed() {
    let t0 = Instant::now();
    let mut c = cfg();
    c.explicit_abort_timeout = Duration::from_secs(40);
    let mut r = Reconciler::new(c, t0);
    r.subscribed(tasks(&["silent"]), t0, 0.0);
    let mut sends = Vec::new();
    let mut t = 0;
    while t <= 40 {
        let actions = r.tick(t0 + Duration::from_secs(t), t as f64, Vec::new);
        if !sent(&actions).is_empty() {
            sends.push(t);
        }
        if let Some(o) = outcome(&actions) {
            assert_eq!(o, "aborted");
            break;
        }
        t += 1;
    }
    assert_eq!(sends, [1, 3, 7, 15, 23, 31, 39], "1, 2, 4, 8, 8, 8 s apart");
    assert_eq!(r.status().history[0].unanswered, [TaskId::from("silent")]);
}

#[test]
fn implicit_follows_the_explicit_run_after_the_cooldown() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    r.subscribed(tasks(&[]), t0, 0.0);
    assert_eq!(
        r.status().history[0].outcome,
        ReconcileOutcome::Converged,
        "nothing to ask"
    );
    assert!(
        r.tick(t0 + Duration::from_secs(1), 1.0, Vec::new)
            .is_empty(),
        "cooldown"
    );
    let implicit = r.tick(t0 + Duration::from_secs(5), 5.0, Vec::new);
    assert_eq!(sent(&implicit), [Vec::<String>::new()]);
    r.on_update("x", true, t0, 5.0);
    let done = r.tick(t0 + Duration::from_secs(8), 8.0, Vec::new);
    assert_eq!(outcome(&done).as_deref(), Some("converged"));
    assert_eq!(r.status().history[1].answered, 1);
}

#[test]
fn requests_are_coalesced_queued_and_periodic() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    let (run, actions) = r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0,
        0.0,
    );
    assert_eq!(
        (run.outcome, sent(&actions).len()),
        (ReconcileOutcome::Running, 1)
    );
    let (merged, actions) = r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0,
        0.0,
    );
    assert!(actions.is_empty());
    assert_eq!(merged.started_at, run.started_at);
    assert_eq!(merged.id, run.id);
    // A request of the other kind queues one run, known by its ID,
    // which later requests of that kind join; an implicit request
    // never becomes explicit.
    let (queued, actions) = r.request(
        ReconcileKind::Implicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0,
        0.0,
    );
    assert!(actions.is_empty());
    assert_eq!(queued.outcome, ReconcileOutcome::Queued);
    assert_ne!(queued.id, run.id);
    let (again, _) = r.request(
        ReconcileKind::Implicit,
        ReconcileTrigger::Manual,
        Vec::new,
        t0,
        0.5,
    );
    assert_eq!(again.id, queued.id, "joins the queued implicit run");
    // The explicit run converges; the queued one waits out the
    // cooldown (5 s), then runs as an empty RECONCILE.
    r.on_update("a", true, t0 + Duration::from_secs(1), 1.0);
    assert!(
        r.tick(t0 + Duration::from_secs(3), 3.0, Vec::new)
            .is_empty()
    );
    let started = r.tick(t0 + Duration::from_secs(6), 6.0, || tasks(&["a"]));
    assert_eq!(sent(&started), [Vec::<String>::new()]);
    assert_eq!(r.status().running.map(|q| q.id), Some(queued.id));
    assert!(r.status().queued.is_empty());
    // The periodic run is due at 30 s; it waits for the cooldown after
    // the implicit run's window.
    r.tick(t0 + Duration::from_secs(16), 16.0, Vec::new);
    assert!(r.tick(t0 + Duration::from_secs(30), 30.0, Vec::new).len() == 1);
    assert_eq!(
        r.status().running.unwrap().trigger,
        ReconcileTrigger::Periodic
    );
}

#[test]
fn a_follow_up_run_queues_behind_a_running_explicit_run_instead_of_joining_it() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    let (first, _) = r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0,
        0.0,
    );
    // "b" was not asked about: a run of its own follows.
    let actions = r.follow_up(ReconcileTrigger::LaunchFailed, || tasks(&["b"]), t0, 0.0);
    assert!(actions.is_empty());
    let queued = r.status().queued;
    assert_eq!(queued.len(), 1);
    assert_ne!(queued[0].id, first.id);
    assert_eq!(queued[0].trigger, ReconcileTrigger::LaunchFailed);
    r.on_update("a", true, t0 + Duration::from_secs(1), 1.0);
    let started = r.tick(t0 + Duration::from_secs(6), 6.0, || tasks(&["a", "b"]));
    assert_eq!(sent(&started), [vec!["a", "b"]]);
    // With nothing running and no cooldown it starts at once.
    let mut idle = Reconciler::new(cfg(), t0);
    let started = idle.follow_up(ReconcileTrigger::LaunchFailed, || tasks(&["b"]), t0, 0.0);
    assert_eq!(sent(&started), [vec!["b"]]);
}

#[test]
fn an_explicit_request_supersedes_an_implicit_window_and_starts_at_once() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    let (implicit, _) = r.request(
        ReconcileKind::Implicit,
        ReconcileTrigger::Manual,
        Vec::new,
        t0,
        0.0,
    );
    r.on_update("a", true, t0 + Duration::from_millis(50), 0.05);
    // One second into the implicit run's 3 s window, inside no
    // cooldown: the explicit run starts now and asks about every task.
    let at = t0 + Duration::from_secs(1);
    let (explicit, actions) = r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a", "b"]),
        at,
        1.0,
    );
    assert_eq!(explicit.outcome, ReconcileOutcome::Running);
    assert_eq!(explicit.kind, ReconcileKind::Explicit);
    assert_eq!(sent(&actions), [vec!["a", "b"]]);
    assert_eq!(outcome(&actions).as_deref(), Some("superseded"));
    let ended = r.status().history.pop().unwrap();
    assert_eq!(
        (ended.id, ended.outcome, ended.answered),
        (implicit.id, ReconcileOutcome::Superseded, 1)
    );
    assert_eq!(r.status().running.map(|q| q.id), Some(explicit.id));
    // An implicit request meanwhile waits for the explicit run.
    let (queued, actions) = r.request(
        ReconcileKind::Implicit,
        ReconcileTrigger::Manual,
        Vec::new,
        at,
        1.0,
    );
    assert!(actions.is_empty());
    assert_eq!(queued.outcome, ReconcileOutcome::Queued);
}

#[test]
fn a_manual_implicit_run_asks_about_no_task_and_is_not_turned_explicit() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    let (run, actions) = r.request(
        ReconcileKind::Implicit,
        ReconcileTrigger::Manual,
        || tasks(&["a", "b"]),
        t0,
        0.0,
    );
    assert_eq!(run.kind, ReconcileKind::Implicit);
    assert_eq!(sent(&actions), [Vec::<String>::new()], "an empty RECONCILE");
    // After a subscription the implicit follow-up stays implicit even
    // when an explicit request arrives meanwhile.
    r.subscribed(tasks(&["a"]), t0, 1.0);
    let (explicit, _) = r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0,
        1.0,
    );
    assert_eq!(
        explicit.outcome,
        ReconcileOutcome::Running,
        "joins the subscription's run"
    );
    let kinds: Vec<ReconcileKind> = r.status().queued.iter().map(|q| q.kind).collect();
    assert_eq!(kinds, [ReconcileKind::Implicit]);
}

#[test]
fn cancel_ends_the_run_and_clears_the_queue() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    r.subscribed(tasks(&["a"]), t0, 0.0);
    let follow_up = r.status().queued[0].id;
    assert_eq!(outcome(&r.cancel(t0, 0.0)).as_deref(), Some("cancelled"));
    assert!(r.status().running.is_none());
    let history = r.status().history;
    let dropped = history.iter().find(|h| h.id == follow_up).unwrap();
    assert_eq!(
        dropped.outcome,
        ReconcileOutcome::Cancelled,
        "the queued run is reported, not lost"
    );
    assert!(
        r.tick(t0 + Duration::from_secs(6), 6.0, Vec::new)
            .is_empty(),
        "implicit dropped too"
    );
}

#[test]
fn run_ids_continue_from_the_first_id_given() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0).with_first_run_id(41);
    assert_eq!(r.next_run_id(), 41);
    r.subscribed(tasks(&["a"]), t0, 0.0);
    assert_eq!(r.status().running.map(|q| q.id), Some(41));
    // The implicit run that follows the explicit one is queued with an ID.
    assert_eq!(r.next_run_id(), 43);
    // A fresh reconciler (another term) without a first ID starts at 1.
    assert_eq!(Reconciler::new(cfg(), t0).next_run_id(), 1);
}

fn sliced(slice: usize) -> ReconcilerConfig {
    ReconcilerConfig {
        explicit_slice: slice,
        ..cfg()
    }
}

#[test]
fn an_explicit_run_asks_in_slices_the_next_once_half_the_asked_answered() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(sliced(2), t0);
    let first = r.subscribed(tasks(&["a", "b", "c", "d", "e"]), t0, 0.0);
    assert_eq!(sent(&first), [vec!["a", "b"]], "one slice of 2");
    // One of two unanswered (≤ half a slice): the next slice goes.
    assert_eq!(sent(&r.on_update("a", true, t0, 0.0)), [vec!["c", "d"]]);
    // b, c, d unanswered: more than half a slice, nothing more yet.
    assert!(r.on_update("b", true, t0, 0.0).is_empty());
    assert_eq!(sent(&r.on_update("c", true, t0, 0.0)), [vec!["e"]]);
    assert!(r.on_update("d", true, t0, 0.0).is_empty());
    let done = r.on_update("e", true, t0, 0.0);
    assert_eq!(outcome(&done).as_deref(), Some("converged"));
    let run = &r.status().history[0];
    assert_eq!((run.asked, run.answered, run.calls), (5, 5, 3));
}

#[test]
fn a_task_that_answered_before_its_slice_is_not_asked() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(sliced(2), t0);
    r.subscribed(tasks(&["a", "b", "c", "d"]), t0, 0.0);
    // An update for c (its own status update, say) before c was asked.
    assert!(r.on_update("c", false, t0, 0.0).is_empty());
    assert_eq!(sent(&r.on_update("a", true, t0, 0.0)), [vec!["d"]]);
    assert!(r.on_update("b", true, t0, 0.0).is_empty());
    let done = r.on_update("d", true, t0, 0.0);
    assert_eq!(outcome(&done).as_deref(), Some("converged"));
}

#[test]
fn a_silent_master_gets_the_unanswered_again_with_the_next_slice_and_the_abort_lists_all() {
    let t0 = Instant::now();
    let mut c = sliced(2);
    c.explicit_abort_timeout = Duration::from_secs(2);
    let mut r = Reconciler::new(c, t0);
    assert_eq!(
        sent(&r.subscribed(tasks(&["a", "b", "c", "d", "e"]), t0, 0.0)),
        [vec!["a", "b"]]
    );
    // The wait elapses with no answer: a and b again, then c and d.
    let retry = r.tick(t0 + Duration::from_secs(1), 1.0, Vec::new);
    assert_eq!(sent(&retry), [vec!["a", "b", "c", "d"]]);
    let aborted = r.tick(t0 + Duration::from_secs(2), 2.0, Vec::new);
    assert_eq!(outcome(&aborted).as_deref(), Some("aborted"));
    let unanswered: Vec<String> = r.status().history[0]
        .unanswered
        .iter()
        .map(|t| t.to_string())
        .collect();
    assert_eq!(unanswered, ["a", "b", "c", "d", "e"], "e was never asked");
}

/// An explicit request in the cooldown after a run waits, and the status
/// shows it queued with when it may start (the cooldown's end), until it
/// starts; behind a running run no start time is known yet.
#[test]
fn a_queued_run_is_shown_with_when_it_may_start() {
    let t0 = Instant::now();
    let mut r = Reconciler::new(cfg(), t0);
    r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0,
        100.0,
    );
    r.on_update("a", true, t0 + Duration::from_secs(2), 102.0);
    assert_eq!(r.status().history.len(), 1, "converged at 102 s");
    let (queued, actions) = r.request(
        ReconcileKind::Explicit,
        ReconcileTrigger::Manual,
        || tasks(&["a"]),
        t0 + Duration::from_secs(3),
        103.0,
    );
    assert!(actions.is_empty(), "in the cooldown");
    let status = r.status();
    assert_eq!(status.queued, std::slice::from_ref(&queued));
    assert_eq!(status.queued[0].kind, ReconcileKind::Explicit);
    assert_eq!(status.not_before, Some(107.0), "102 s + the 5 s cooldown");
    let started = r.tick(t0 + Duration::from_secs(7), 107.0, || tasks(&["a"]));
    assert_eq!(sent(&started).len(), 1);
    let status = r.status();
    assert!(status.queued.is_empty());
    assert_eq!(status.not_before, None);
    assert_eq!(status.running.map(|run| run.id), Some(queued.id));
    // Queued behind the running explicit run: no time yet.
    r.request(
        ReconcileKind::Implicit,
        ReconcileTrigger::Manual,
        Vec::new,
        t0 + Duration::from_secs(8),
        108.0,
    );
    let status = r.status();
    assert_eq!(status.queued.len(), 1);
    assert_eq!(status.not_before, None, "waits for the running run");
}
