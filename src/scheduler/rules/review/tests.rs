use super::*;
use crate::scheduler::StatusEntry;
use crate::scheduler::records::PartitionMark;
use crate::scheduler::rules::{rollout, workload};

fn spec(instances: u32) -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": instances,
        "upgrade": {"min_healthy": "10s", "deadline": "60s"}
    }))
    .expect("a service spec")
}

/// A record of `web`, TASK_RUNNING since `at` (no timeline: its
/// `updated_at`), on agent `a` unless `host` says `leaving`.
fn task(id: &str, instance: u32, fingerprint: &str, at: f64) -> TaskRecord {
    TaskRecord {
        instance,
        fingerprint: fingerprint.into(),
        launched_at: at,
        updated_at: at,
        health_checked: Some(false),
        ..TaskRecord::sample(id, "web", TaskState::TaskRunning)
    }
}

fn not_leaving(r: &TaskRecord) -> bool {
    r.hostname != "leaving"
}

#[test]
fn a_task_leaving_its_agent_counts_for_the_rollout_not_for_the_workload() {
    let s = spec(2);
    let fp = s.fingerprint();
    let mut leaving = task("web.0.a", 0, &fp, 0.0);
    leaving.hostname = "leaving".into();
    let mut ended = task("web.1.x", 1, &fp, 0.0);
    ended.hostname = "leaving".into();
    ended.state = TaskState::TaskFailed;
    let records = [leaving, ended, task("web.1.b", 1, &fp, 0.0)];
    let r = review(&s, &records, not_leaving, 100.0);
    // Its instance needs a replacement …
    assert_eq!(r.assessment.missing, [0]);
    assert_eq!(r.assessment.running, 1);
    // … while it still serves: no instance is unavailable.
    assert!(r.progress.complete());
    assert_eq!((r.progress.replaced, r.progress.healthy), (2, 2));
    // The ended task on the leaving agent is not set aside: not live.
    assert_eq!(r.set_aside, 1);
    assert_eq!(r.replacement(1, false), None, "nothing outdated");
}

#[test]
fn the_replacement_is_the_lowest_outdated_task_down_first() {
    let s = spec(4);
    let fp = s.fingerprint();
    let mut down = task("web.3.old", 3, "old", 0.0);
    down.healthy = Some(false);
    let records = [
        task("web.2.old", 2, "old", 0.0),
        task("web.1.old", 1, "old", 0.0),
        task("web.1.dup", 1, "old", 0.0),
        down,
        task("web.0.new", 0, &fp, 0.0),
    ];
    let r = review(&s, &records, |_| true, 100.0);
    assert_eq!(r.progress.remaining, 4);
    // Down beats lower, halted or not.
    assert_eq!(r.replacement(1, true).as_deref(), Some("web.3.old"));
    let up: Vec<TaskRecord> = records
        .iter()
        .cloned()
        .map(|mut t| {
            t.healthy = None;
            t
        })
        .collect();
    let r = review(&s, &up, |_| true, 100.0);
    // The first read of the lowest instance; none while halted.
    assert_eq!(r.replacement(1, false).as_deref(), Some("web.1.old"));
    assert_eq!(r.replacement(1, true), None);
    // Every instance is available; one missing instance stops it at a
    // `max_unavailable` of 1 (0 counts as 1), not at 2.
    let mut three = up.clone();
    three.retain(|t| t.instance != 2);
    let r = review(&s, &three, |_| true, 100.0);
    assert_eq!(r.progress.unavailable, [2]);
    assert_eq!(r.replacement(0, false), None);
    assert_eq!(r.replacement(1, false), None);
    assert_eq!(r.replacement(2, false).as_deref(), Some("web.1.old"));
}

#[test]
fn a_service_without_records_misses_every_instance() {
    let r = review(&spec(3), [], |_| true, 0.0);
    assert_eq!(r.assessment.missing, [0, 1, 2]);
    assert_eq!(r.progress.unavailable, [0, 1, 2]);
    assert!(!r.progress.under_way(false) && r.progress.under_way(true));
    assert_eq!((r.set_aside, r.replacement(3, false)), (0, None));
}

#[test]
fn an_instance_is_available_when_any_of_its_tasks_is() {
    // The walk stops judging an instance once one task of it is
    // available: a later, unavailable copy changes nothing.
    let s = spec(1);
    let fp = s.fingerprint();
    let fresh = task("web.0.b", 0, &fp, 95.0);
    let proven = task("web.0.a", 0, "old", 0.0);
    for records in [[proven.clone(), fresh.clone()], [fresh, proven]] {
        let r = review(&s, &records, |_| true, 100.0);
        assert!(r.progress.unavailable.is_empty());
        assert_eq!((r.progress.replaced, r.progress.healthy), (1, 1));
    }
}

const STATES: [TaskState; 10] = [
    TaskState::TaskStaging,
    TaskState::TaskStarting,
    TaskState::TaskRunning,
    TaskState::TaskRunning,
    TaskState::TaskKilling,
    TaskState::TaskFailed,
    TaskState::TaskFinished,
    TaskState::TaskLost,
    TaskState::TaskUnreachable,
    TaskState::TaskUnknown,
];

/// One random record: (instance, fingerprint, state, kill, healthy,
/// healthy_since, health_checked, timeline, launched_at, partition,
/// service, leaving).
type Row = (
    (u32, u8, usize, bool, u8, u8),
    (u8, Vec<(usize, u8, bool)>, u8, u8, bool, bool),
);

fn record(s: &ServiceSpec, i: usize, row: &Row) -> TaskRecord {
    let ((instance, fp, state, kill, healthy, since), (checked, timeline, at, part, db, leaving)) =
        row;
    let current = s.fingerprint();
    // A 16-byte fingerprint that differs from the current one in its last
    // byte only: the fixed-width comparison must see it.
    let mut near = current.clone();
    near.pop();
    near.push(if current.ends_with('0') { '1' } else { '0' });
    let fingerprint = [current, "old".into(), near, String::new()][usize::from(*fp) % 4].clone();
    let service = if *db { "db" } else { "web" };
    let tri = |v: u8| [None, Some(true), Some(false), None][usize::from(v) % 4];
    let at = f64::from(*at);
    // Half of the records RUNNING (the rollout's cases need them).
    let state = STATES
        .get(*state)
        .copied()
        .unwrap_or(TaskState::TaskRunning);
    // Instances 6 and 7 stand for ones far beyond the count (sparse: the
    // walk's comparison sort).
    let instance = match instance {
        6 => 200,
        7 => u32::MAX,
        i => *i,
    };
    TaskRecord {
        instance,
        fingerprint,
        launched_at: at,
        updated_at: at + 5.0,
        kill: kill.then(|| crate::scheduler::KillRequest {
            reason: "x".into(),
            requested_at: at,
            attempts: 1,
        }),
        healthy: tri(*healthy),
        healthy_since: (*since > 0).then(|| at + f64::from(*since) * 7.0),
        health_checked: tri(*checked),
        timeline: timeline
            .iter()
            .map(|(state, dt, reconciliation)| StatusEntry {
                at: at + f64::from(*dt),
                state: STATES[*state % STATES.len()],
                source: None,
                reason: reconciliation.then_some(task_status::Reason::Reconciliation),
                message: None,
                healthy: None,
            })
            .collect(),
        partition: match part % 3 {
            0 => None,
            1 => Some(PartitionMark {
                unreachable_since: at + 1.0,
                returned_at: None,
            }),
            _ => Some(PartitionMark {
                unreachable_since: at + 1.0,
                returned_at: Some(at + 30.0),
            }),
        },
        hostname: if *leaving { "leaving" } else { "h" }.into(),
        ..TaskRecord::sample(&format!("{service}.{instance}.{i}"), service, state)
    }
}

use crate::mesos::v1::task_status;

proptest::proptest! {
    /// The one walk yields exactly what the three functions it replaced
    /// (`reference`) yield, for any records (instances in and beyond the
    /// count, dense or far apart, fingerprints current, older, nearly current and empty,
    /// every kind of state, kills, health, timelines, partitions, tasks
    /// leaving their agent) and any spec (count, health check,
    /// `min_healthy`, `unreachable` policy), rollout limits and time; and
    /// the views of it answer as the old functions over a list that holds
    /// another service's records too.
    #[test]
    fn one_walk_answers_as_the_three_old_functions_do(
        rows in proptest::collection::vec(
            (
                (0u32..8, 0u8..4, 0usize..18, proptest::bool::weighted(0.15), 0u8..4, 0u8..3),
                (
                    0u8..4,
                    proptest::collection::vec((0usize..10, 0u8..40, proptest::bool::weighted(0.2)), 0..4),
                    0u8..30,
                    0u8..3,
                    proptest::bool::weighted(0.2),
                    proptest::bool::weighted(0.2),
                ),
            ),
            0..14,
        ),
        instances in 0u32..5,
        check in proptest::bool::ANY,
        (min_healthy, inactive, expunge, kill_new) in (0u8..30, 0u8..40, 0u8..40, proptest::bool::ANY),
        (max_unavailable, halted, now) in (0u32..3, proptest::bool::ANY, 0u8..120),
    ) {
        let mut json = serde_json::json!({
            "name": "web", "command": "x", "cpus": 0.1, "mem": 32, "instances": instances,
            "ports": 1,
            "upgrade": {"min_healthy": format!("{min_healthy}s"), "deadline": "600s"},
            "unreachable": {
                "inactive_after": format!("{inactive}s"),
                "expunge_after": format!("{}s", u32::from(inactive) + u32::from(expunge)),
                "kill_on_return": if kill_new { "new" } else { "old" },
            },
        });
        if check {
            json["health_check"] = serde_json::json!({"type": "http", "port_index": 0});
        }
        let s: ServiceSpec = serde_json::from_value(json).expect("a service spec");
        let all: Vec<TaskRecord> = rows.iter().enumerate().map(|(i, row)| record(&s, i, row)).collect();
        let own: Vec<&TaskRecord> = all.iter().filter(|r| r.service == "web").collect();
        let now = f64::from(now);
        let fused = review(&s, own.iter().copied(), not_leaving, now);
        let counted = own.iter().copied().filter(|r| not_leaving(r));
        proptest::prop_assert_eq!(&fused.assessment, &reference::assess(&s, counted, now));
        proptest::prop_assert_eq!(&fused.progress, &reference::progress(&s, own.iter().copied(), now));
        proptest::prop_assert_eq!(
            fused.replacement(max_unavailable, halted),
            reference::next_replacement(&s, own.iter().copied(), not_leaving, max_unavailable, halted, now)
        );
        let set_aside = own.iter().filter(|r| is_live(r) && !not_leaving(r)).count();
        proptest::prop_assert_eq!(fused.set_aside as usize, set_aside);
        let assessed = workload::assess(&s, &all, now);
        proptest::prop_assert_eq!(&assessed, &reference::assess(&s, &all, now));
        // One unit, instances: each counted once, by one task.
        let (health, live) = (assessed.healthy + assessed.unhealthy, assessed.running + assessed.starting);
        proptest::prop_assert!(health <= live && live <= instances, "{:?}", assessed);
        proptest::prop_assert_eq!(rollout::progress(&s, &all, now), reference::progress(&s, &all, now));
        proptest::prop_assert_eq!(
            rollout::next_replacement(&s, &all, max_unavailable, halted, now),
            reference::next_replacement(&s, &all, |_| true, max_unavailable, halted, now)
        );
    }
}
