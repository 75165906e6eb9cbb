//! Tests of the restart backoff (`rules/restart.rs`).

use super::*;
use crate::mesos::v1::task_status;
use crate::scheduler::rules::workload::tests::{spec, task};

#[test]
fn backoff_doubles_to_its_cap() {
    let s = spec(1);
    let t0 = Instant::now();
    let mut b = RestartBackoff::default();
    assert!(b.ready(t0));
    let delays: Vec<u64> = (0..5)
        .map(|i| {
            b.terminal(&s, &format!("t{i}"), true, t0);
            b.remaining(t0).as_secs()
        })
        .collect();
    assert_eq!(delays, [1, 2, 4, 5, 5]);
    assert!(!b.ready(t0));
    b.terminal(&s, "killed", false, t0);
    assert_eq!(b.failures, 5, "kills and losses are not failures");
}

#[test]
fn a_crash_loop_that_reports_running_keeps_backing_off() {
    let s = spec(1);
    let t0 = Instant::now();
    let mut b = RestartBackoff::default();
    let mut at = t0;
    let mut delays = vec![];
    for i in 0..4 {
        let id = format!("t{i}");
        b.running(&TaskId::from(id.as_str()), true, at);
        at += Duration::from_millis(200);
        b.terminal(&s, &id, true, at);
        delays.push(b.remaining(at).as_secs());
        at += b.remaining(at);
    }
    assert_eq!(delays, [1, 2, 4, 5]);
    assert_eq!(b.failures_at(&s, at), 4);
}

#[test]
fn a_stable_run_forgives_failures() {
    let s = spec(1); // restart_backoff_max 5s, so MIN_STABLE_RUN (10s) rules
    let t0 = Instant::now();
    let mut b = RestartBackoff::default();
    b.terminal(&s, "a", true, t0);
    b.terminal(&s, "b", true, t0);
    b.running(&"c".into(), true, t0);
    let early = t0 + Duration::from_secs(9);
    assert_eq!(b.failures_at(&s, early), 2);
    let late = t0 + MIN_STABLE_RUN;
    assert_eq!(b.failures_at(&s, late), 0);
    b.terminal(&s, "c", true, late);
    assert_eq!(b.failures, 1, "the long run reset the count first");
    assert_eq!(b.remaining(late).as_secs(), 1);
}

#[test]
fn a_scaled_away_instance_is_not_shown_and_a_lowered_cap_shortens_a_wait() {
    let t0 = Instant::now();
    let mut s = spec(3);
    s.restart_backoff = Duration::from_secs(60);
    s.restart_backoff_max = Duration::from_secs(600);
    let mut b = ServiceBackoff::default();
    b.terminal(&s, 2, "web.2.a", true, t0);
    assert_eq!(b.failures_at(&s, t0), 1);
    assert_eq!(b.next_launch(&s, t0), Some(Duration::from_secs(60)));
    // Scaled to 2: instance 2 is gone from the view, its count kept.
    s.instances = 2;
    assert_eq!(b.failures_at(&s, t0), 0);
    assert!(b.failing(&s, t0).is_empty());
    assert_eq!(b.next_launch(&s, t0), None);
    s.instances = 3;
    assert_eq!(b.failing(&s, t0), [(2, 1, Duration::from_secs(60))]);
    // A lowered maximum: at most 2 s more from the change.
    let later = t0 + Duration::from_secs(5);
    b.cap(Duration::from_secs(2), later);
    assert_eq!(b.next_launch(&s, later), Some(Duration::from_secs(2)));
    assert_eq!(b.failures_at(&s, later), 1);
}

#[test]
fn an_unhealthy_report_stops_the_stable_run_clock() {
    let s = spec(1);
    let t0 = Instant::now();
    let mut b = RestartBackoff::default();
    b.terminal(&s, "a", true, t0);
    let c = TaskId::from("c");
    b.running(&c, true, t0);
    b.running(&c, false, t0 + Duration::from_secs(5));
    let late = t0 + MIN_STABLE_RUN;
    assert_eq!(b.failures_at(&s, late), 1, "unhealthy at 5 s");
    b.running(&c, true, late);
    assert_eq!(b.failures_at(&s, late + Duration::from_secs(9)), 1);
    assert_eq!(b.failures_at(&s, late + MIN_STABLE_RUN), 0);
    // A duplicate's healthy report does not restart a running clock.
    b.running(&TaskId::from("dup"), true, late + MIN_STABLE_RUN);
    assert_eq!(b.failures_at(&s, late + MIN_STABLE_RUN), 0);
}

/// A terminal record of instance `instance` of `spec(1)`'s release:
/// launched at `at`, RUNNING (healthy) from `at + 1` for `ran` s, then
/// `end` (`TASK_FAILED` counts, `TASK_KILLED` alone does not).
fn ended(id: &str, instance: u32, at: f64, ran: f64, end: &str) -> TaskRecord {
    use crate::scheduler::StatusEntry;
    let entry = |at: f64, state: &str| StatusEntry {
        at,
        state: TaskState::from_str_name(state).unwrap(),
        source: Some(task_status::Source::Executor),
        reason: None,
        message: None,
        healthy: None,
    };
    let mut t = task(id, instance, end, at);
    t.fingerprint = spec(1).fingerprint();
    t.timeline = vec![entry(at + 1.0, "TASK_RUNNING"), entry(at + 1.0 + ran, end)];
    t.updated_at = at + 1.0 + ran;
    t
}

#[test]
fn a_new_leader_rebuilds_each_instance_s_backoff_from_its_records() {
    let s = spec(3); // 1 s doubling to 5 s; a stable run is 10 s
    let now = Instant::now();
    let now_unix = 993.0;
    let records = [
        // Instance 0: three failures after a stable run (which itself
        // failed: it counts, then the count stops).
        ended("a0", 0, 900.0, 30.0, "TASK_FAILED"),
        ended("a1", 0, 940.0, 0.5, "TASK_FAILED"),
        ended("a2", 0, 950.0, 0.5, "TASK_FAILED"),
        // A kill the scheduler asked for neither counts nor forgives.
        TaskRecord {
            kill: Some(crate::scheduler::KillRequest {
                reason: "x".into(),
                requested_at: 0.0,
                attempts: 1,
            }),
            ..ended("a3", 0, 960.0, 0.5, "TASK_KILLED")
        },
        ended("a4", 0, 990.0, 0.5, "TASK_FAILED"),
        // Instance 1: a stable run in the middle resets the count.
        ended("b0", 1, 900.0, 0.5, "TASK_FAILED"),
        ended("b1", 1, 910.0, 20.0, "TASK_KILLED"),
        ended("b2", 1, 980.0, 0.5, "TASK_FAILED"),
    ];
    let b = ServiceBackoff::from_records(&s, &records, now, now_unix);
    let at_now = b.failing(&s, now);
    // a4 ended at 991.5: 4 failures wait 5 s (capped), 3.5 s left.
    // b2 ended at 981.5: 1 failure waits 1 s, over by now.
    assert_eq!(at_now.len(), 2);
    assert_eq!((at_now[0].0, at_now[0].1), (0, 4));
    assert_eq!(at_now[0].2, Duration::from_millis(3500));
    assert_eq!((at_now[1].0, at_now[1].1), (1, 1));
    assert!(b.ready(1, now) && !b.ready(0, now));
    // Instance 2 has no records: clean.
    assert!(b.ready(2, now));
    assert_eq!(b.instances.len(), 2);
}

#[test]
fn a_rebuilt_backoff_skips_older_releases_and_counts_tasks_that_never_started() {
    use crate::scheduler::StatusEntry;
    let s = spec(1);
    let now = Instant::now();
    let old = TaskRecord {
        fingerprint: "older release".into(),
        ..ended("o", 0, 800.0, 0.5, "TASK_FAILED")
    };
    // Its executor terminated before the task started.
    let mut never = ended("n", 0, 990.0, 0.0, "TASK_FAILED");
    never.timeline = vec![StatusEntry {
        at: 995.0,
        state: TaskState::TaskFailed,
        source: Some(task_status::Source::Agent),
        reason: Some(task_status::Reason::ExecutorTerminated),
        message: None,
        healthy: None,
    }];
    let b = ServiceBackoff::from_records(&s, [&old, &never], now, 1000.0);
    assert_eq!(b.failing(&s, now), [(0, 1, Duration::ZERO)]);
    // Only the older release's failures: forgiven.
    let b = ServiceBackoff::from_records(&s, [&old], now, 1000.0);
    assert!(b.is_empty());
    // Another service's records are not this one's.
    let other = TaskRecord {
        service: "db".into(),
        ..never.clone()
    };
    assert!(ServiceBackoff::from_records(&s, [&other], now, 1000.0).is_empty());
}

#[test]
fn a_rebuilt_backoff_keeps_a_running_task_s_clock() {
    let s = spec(1);
    let now = Instant::now();
    let failed = ended("f", 0, 900.0, 0.5, "TASK_FAILED");
    let mut live = ended("l", 0, 950.0, 0.0, "TASK_RUNNING");
    live.timeline.truncate(1); // RUNNING since 951
    let b = ServiceBackoff::from_records(&s, [&failed, &live], now, 955.0);
    assert_eq!(b.failures_at(&s, now), 1, "4 s of 10");
    assert_eq!(b.failures_at(&s, now + Duration::from_secs(6)), 0);
}

/// The summaries read the instances with a failure counted, and an
/// instance leaves them when a stable run forgives it: 1,000 running
/// instances with clocks only show nothing.
#[test]
fn the_summaries_read_only_the_instances_with_failures() {
    let s = spec(1_000);
    let t0 = Instant::now();
    let mut b = ServiceBackoff::default();
    for i in 0..1_000 {
        b.running(i, &TaskId::from(format!("web.{i}").as_str()), true, t0);
    }
    assert_eq!(b.failures_at(&s, t0), 0);
    assert!(b.failing(&s, t0).is_empty());
    assert_eq!(b.next_launch(&s, t0), None);
    assert!(b.failed.is_empty(), "{:?}", b.failed);
    // Instance 7's running task fails after 2 s: it backs off.
    let t1 = t0 + Duration::from_secs(2);
    b.terminal(&s, 7, "web.7", true, t1);
    assert_eq!(b.failing(&s, t1), [(7, 1, Duration::from_secs(1))]);
    assert_eq!(b.failed.iter().copied().collect::<Vec<_>>(), [7]);
    // Its next task runs stably, then is killed on request: the count
    // is forgiven and the instance leaves the index.
    let t2 = t1 + Duration::from_secs(1);
    b.running(7, &"web.7.b".into(), true, t2);
    let t3 = t2 + MIN_STABLE_RUN;
    b.terminal(&s, 7, "web.7.b", false, t3);
    assert!(b.failed.is_empty(), "{:?}", b.failed);
    assert_eq!(b.instances.get(&7).map(|r| r.failures), Some(0));
    assert!(b.failing(&s, t3).is_empty());
}

/// One step of [`the_summaries_equal_a_walk_of_every_instance`].
#[derive(Debug, Clone)]
enum Op {
    Running(u32, bool),
    Terminal(u32, bool),
    Cap(u64),
    Wait(u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0u32..6, any::<bool>()).prop_map(|(i, h)| Op::Running(i, h)),
        (0u32..6, any::<bool>()).prop_map(|(i, f)| Op::Terminal(i, f)),
        (0u64..8).prop_map(Op::Cap),
        (0u64..15).prop_map(Op::Wait),
    ]
}

proptest::proptest! {
    /// Whatever the sequence of runs, ends, caps and waits, the
    /// summaries read from the index equal those of a walk over
    /// every instance's backoff (the reference: the summaries before
    /// the index), at every step and for every instance count shown
    /// (a scale-down hides instances, a scale-up shows them again).
    #[test]
    fn the_summaries_equal_a_walk_of_every_instance(
        ops in proptest::collection::vec(op(), 1..60),
        shown in 1u32..7,
    ) {
        let mut s = spec(6);
        let t0 = Instant::now();
        let mut now = t0;
        let mut b = ServiceBackoff::default();
        let mut n = 0;
        for op in ops {
            match op {
                Op::Running(i, healthy) => {
                    n += 1;
                    b.running(i, &TaskId::from(format!("web.{i}.{n}").as_str()), healthy, now);
                }
                Op::Terminal(i, failed) => {
                    let running = b.instances.get(&i).and_then(|r| r.running_since.clone());
                    let id = running.map_or_else(|| format!("web.{i}.x"), |(id, _)| id.to_string());
                    b.terminal(&s, i, &id, failed, now);
                }
                Op::Cap(secs) => b.cap(Duration::from_secs(secs), now),
                Op::Wait(secs) => now += Duration::from_secs(secs),
            }
            s.instances = shown;
            let every = b.instances.range(..s.instances);
            let failing: Vec<(u32, u32, Duration)> = every
                .clone()
                .map(|(i, r)| (*i, r.failures_at(&s, now), r.remaining(now)))
                .filter(|(_, failures, _)| *failures > 0)
                .collect();
            let most = every.clone().map(|(_, r)| r.failures_at(&s, now)).max().unwrap_or(0);
            let next = every
                .filter(|(_, r)| !r.ready(now))
                .map(|(_, r)| r.remaining(now))
                .min();
            proptest::prop_assert_eq!(b.failing(&s, now), failing);
            proptest::prop_assert_eq!(b.failures_at(&s, now), most);
            proptest::prop_assert_eq!(b.next_launch(&s, now), next);
            s.instances = 6;
        }
    }
}
