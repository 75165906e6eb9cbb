use std::time::Duration;

use super::*;
use crate::scheduler::spec::upgrade::UpgradePolicy;

fn spec(instances: u32, check: bool) -> ServiceSpec {
    let mut json = serde_json::json!({"name": "web", "command": "x", "cpus": 0.1, "mem": 32,
        "instances": instances, "ports": 1, "upgrade": {"min_healthy": "10s", "deadline": "60s"}});
    if check {
        json["health_check"] = serde_json::json!({"type": "http", "port_index": 0});
    }
    serde_json::from_value(json).unwrap()
}

fn task(id: &str, instance: u32, fingerprint: &str, running_at: f64) -> TaskRecord {
    TaskRecord {
        instance,
        fingerprint: fingerprint.into(),
        launched_at: running_at,
        updated_at: running_at,
        ..TaskRecord::sample(id, "web", TaskState::TaskRunning)
    }
}

fn healthy(mut t: TaskRecord, since: f64) -> TaskRecord {
    t.healthy = Some(true);
    t.healthy_since = Some(since);
    t
}

#[test]
fn available_means_running_and_healthy_for_min_healthy() {
    let s = spec(1, true);
    let mut t = task("a", 0, "f", 0.0);
    t.health_checked = Some(true);
    assert!(!is_available(&s, &t, 100.0), "no health report yet");
    let t = healthy(t, 50.0);
    assert!(!is_available(&s, &t, 55.0), "healthy for 5 s of 10");
    assert!(is_available(&s, &t, 60.0));
    let mut sick = t.clone();
    sick.healthy = Some(false);
    assert!(!is_available(&s, &sick, 100.0));
    // Without a check, RUNNING for min_healthy is enough.
    let plain = spec(1, false);
    let t = task("b", 0, "f", 0.0);
    assert!(!is_available(&plain, &t, 9.0));
    assert!(is_available(&plain, &t, 10.0));
}

#[test]
fn a_replacement_must_be_healthy_before_the_next_old_task_goes() {
    let s = spec(3, true);
    let fp = s.fingerprint();
    let mut tasks: Vec<TaskRecord> = (0..3)
        .map(|i| healthy(task(&format!("old{i}"), i, "old", 0.0), 0.0))
        .collect();
    let at = 100.0;
    assert_eq!(
        next_replacement(&s, &tasks, 1, false, at).as_deref(),
        Some("old0")
    );
    tasks.remove(0);
    // The replacement runs but has not reported healthy: nothing else goes.
    tasks.push(task("new0", 0, &fp, at));
    assert_eq!(next_replacement(&s, &tasks, 1, false, at + 30.0), None);
    let p = progress(&s, &tasks, at + 30.0);
    assert_eq!((p.replaced, p.healthy, p.remaining), (1, 0, 2));
    assert!(p.under_way(false), "outdated tasks remain: a rollout");
    // Healthy, but not for min_healthy yet.
    tasks[2] = healthy(tasks[2].clone(), at + 30.0);
    assert_eq!(next_replacement(&s, &tasks, 1, false, at + 35.0), None);
    assert_eq!(
        next_replacement(&s, &tasks, 1, false, at + 40.0).as_deref(),
        Some("old1")
    );
    // A halted rollout kills no available old task.
    assert_eq!(next_replacement(&s, &tasks, 1, true, at + 40.0), None);
}

#[test]
fn outdated_tasks_that_are_down_go_first_even_when_halted() {
    let s = spec(2, true);
    let mut broken = task("broken0", 0, "other", 0.0);
    broken.healthy = Some(false);
    let ok = healthy(task("ok1", 1, &s.fingerprint(), 0.0), 0.0);
    let tasks = [broken, ok];
    assert_eq!(
        next_replacement(&s, &tasks, 1, true, 100.0).as_deref(),
        Some("broken0")
    );
    // Healthy for less than min_healthy is not down: it waits its turn.
    let fresh = [
        healthy(task("old0", 0, "other", 99.0), 99.0),
        healthy(task("old1", 1, "other", 0.0), 0.0),
        healthy(task("new2", 2, &s.fingerprint(), 0.0), 0.0),
    ];
    let three = ServiceSpec {
        instances: 3,
        ..s.clone()
    };
    assert_eq!(
        next_replacement(&three, &fresh, 1, false, 100.0),
        None,
        "old0 is not available yet: nothing may go"
    );
}

#[test]
fn overdue_names_the_instances_past_the_deadline() {
    let s = spec(2, true);
    let fp = s.fingerprint();
    let tasks = [
        task("new0", 0, &fp, 0.0),
        healthy(task("old1", 1, "old", 0.0), 0.0),
    ];
    let p = progress(&s, &tasks, 59.0);
    assert_eq!(p.unavailable, [0]);
    assert_eq!(overdue(&s, &p, true, 0.0, 59.0), None);
    let why = overdue(&s, &p, true, 0.0, 60.0).expect("halts");
    assert!(
        why.contains("instance(s) 0 not RUNNING and healthy"),
        "{why}"
    );
    // Done: every task current and available.
    let done = [
        healthy(task("new0", 0, &fp, 0.0), 0.0),
        healthy(task("new1", 1, &fp, 0.0), 0.0),
    ];
    let p = progress(&s, &done, 100.0);
    assert!(!p.under_way(true) && p.complete());
    assert_eq!(overdue(&s, &p, true, 0.0, 100.0), None);
}

#[test]
fn a_first_launch_or_a_scale_up_is_no_rollout_and_cannot_halt() {
    let s = spec(3, true);
    let fp = s.fingerprint();
    // Instance 0 runs; 1 is staging; 2 has no task at all.
    let mut staging = task("new1", 1, &fp, 0.0);
    staging.state = TaskState::TaskStaging;
    let tasks = [healthy(task("new0", 0, &fp, 0.0), 0.0), staging];
    let p = progress(&s, &tasks, 1000.0);
    assert_eq!(
        (p.replaced, p.remaining, p.unavailable.clone()),
        (2, 0, vec![1, 2])
    );
    assert!(!p.under_way(false) && !p.complete());
    assert_eq!(overdue(&s, &p, false, 0.0, 1000.0), None);
    // After a change of shape the last replacements still count.
    assert!(p.under_way(true));
    assert!(overdue(&s, &p, true, 0.0, 1000.0).is_some());
}

#[test]
fn upgrade_policy_is_validated_and_outside_the_fingerprint() {
    let mut s = spec(1, false);
    let before = s.fingerprint();
    s.upgrade = Some(UpgradePolicy {
        min_healthy: Duration::from_secs(60),
        deadline: Duration::from_secs(30),
    });
    assert_eq!(s.fingerprint(), before);
    let fields: Vec<String> = s.validate().into_iter().map(|e| e.field).collect();
    assert_eq!(fields, ["upgrade.deadline"]);
}

#[test]
fn each_task_is_judged_by_the_check_it_was_launched_with() {
    let s = spec(1, true);
    let current = s.fingerprint();
    let plain = task("a", 0, "old", 0.0);
    // A record from before `health_checked`: on another spec and never
    // reported, it had no check.
    assert!(is_available(&s, &plain, 10.0));
    let mut recorded = plain.clone();
    recorded.health_checked = Some(true);
    assert!(
        !is_available(&s, &recorded, 100.0),
        "its check never reported"
    );
    let legacy_current = task("b", 0, &current, 0.0);
    assert!(
        !is_available(&s, &legacy_current, 100.0),
        "the spec's check"
    );
    let mut unhealthy = plain;
    unhealthy.healthy = Some(false);
    assert!(!is_available(&s, &unhealthy, 100.0));
}

#[test]
fn a_task_runs_the_spec_only_when_every_byte_of_its_fingerprint_matches() {
    let s = spec(1, false);
    let fp = s.fingerprint();
    assert_eq!(fp.len(), 16, "the fixed-width comparison's case");
    let judge = Judge::new(&s);
    let runs = |fingerprint: &str| judge.is_current(&task("a", 0, fingerprint, 0.0));
    assert!(runs(&fp));
    for at in [0, 7, 8, 15] {
        let mut near = fp.clone().into_bytes();
        near[at] = if near[at] == b'0' { b'1' } else { b'0' };
        let near = String::from_utf8(near).expect("hex digits");
        assert!(!runs(&near), "differs at byte {at}");
    }
    assert!(!runs(&fp[..15]));
    assert!(!runs(&format!("{fp}0")));
    assert!(!runs(""));
    assert!(!runs("job"));
}

proptest::proptest! {
    /// `Judge::is_current` is string equality, for fingerprints of any
    /// length near the spec's (cut, grown, one byte changed anywhere).
    #[test]
    fn is_current_is_string_equality(
        shape in 0u8..4,
        cut in 0usize..16,
        grow in proptest::collection::vec(b'0'..=b'f', 1..3),
        change in proptest::option::of((0usize..18, b'0'..=b'f')),
    ) {
        let s = spec(1, false);
        let fp = s.fingerprint();
        // Half of the cases as long as the spec's, the others cut or grown.
        let mut theirs = fp.as_bytes().to_vec();
        match shape {
            2 => theirs.truncate(cut),
            3 => theirs.extend(&grow),
            _ => {}
        }
        if let Some((at, byte)) = change
            && let Some(b) = theirs.get_mut(at)
        {
            *b = byte;
        }
        let theirs = String::from_utf8_lossy(&theirs).into_owned();
        let judge = Judge::new(&s);
        proptest::prop_assert_eq!(
            judge.is_current(&task("a", 0, &theirs, 0.0)),
            theirs == fp
        );
    }
}
