//! The index against the obvious implementation (sort the records with
//! their own comparisons, filter with string tests), for single cases and
//! over random sequences of task lists.

use std::sync::Arc;

use proptest::prelude::*;

use super::text::IdText;
use super::*;
use crate::scheduler::KillRequest;

fn record(id: &str, service: &str, host: usize, state: TaskState, updated: f64) -> TaskRecord {
    TaskRecord {
        instance: id.len() as u32 % 3,
        agent_id: format!("S{host}").into(),
        hostname: format!("h{host}"),
        launched_at: updated - 1.0,
        updated_at: updated,
        ..TaskRecord::sample(id, service, state)
    }
}

/// `tasks` sorted by ID, as a snapshot holds them.
fn list(mut tasks: Vec<Arc<TaskRecord>>) -> Arc<[Arc<TaskRecord>]> {
    tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    tasks.into()
}

/// The selection as the views made it before the index: a stable sort of
/// the ID-ordered list with the records' own comparisons, reversed for
/// `desc`, then the filters as string tests.
fn reference(
    tasks: &[Arc<TaskRecord>],
    f: &Filter,
    key: SortKey,
    order: Order,
    start: usize,
    per_page: usize,
) -> Selection {
    let mut pos: Vec<u32> = (0..tasks.len() as u32).collect();
    let at = |i: &u32| &tasks[*i as usize];
    match key {
        SortKey::Id => {}
        SortKey::Service => pos.sort_by(|a, b| {
            let (a, b) = (at(a), at(b));
            (&a.service, a.instance).cmp(&(&b.service, b.instance))
        }),
        SortKey::State => pos.sort_by_key(|i| at(i).state.as_str_name()),
        SortKey::Host => pos.sort_by(|a, b| at(a).hostname.cmp(&at(b).hostname)),
        SortKey::Updated => pos.sort_by(|a, b| at(a).updated_at.total_cmp(&at(b).updated_at)),
        SortKey::Launched => pos.sort_by(|a, b| at(a).launched_at.total_cmp(&at(b).launched_at)),
    }
    if order == Order::Desc {
        pos.reverse();
    }
    let keep = |t: &TaskRecord| {
        f.service.as_ref().is_none_or(|s| &t.service == s)
            && f.state.is_none_or(|s| match s {
                StateIs::Active => !t.is_terminal(),
                StateIs::Terminal => t.is_terminal(),
                StateIs::Exactly(state) => t.state == state,
            })
            && f.health.is_none_or(|h| t.health() == h)
            && f.q.as_deref().is_none_or(|n| {
                t.task_id.as_str().contains(n)
                    || t.hostname.contains(n)
                    || t.agent_id.as_str().contains(n)
            })
    };
    let kept: Vec<u32> = pos.into_iter().filter(|p| keep(at(p))).collect();
    Selection {
        matched: kept.len(),
        page: kept.iter().skip(start).take(per_page).copied().collect(),
    }
}

fn sample() -> Vec<Arc<TaskRecord>> {
    use TaskState::*;
    vec![
        record("web.0.a", "web", 2, TaskRunning, 5.0),
        record("web.1.b", "web", 1, TaskRunning, 3.0),
        record("batch.0.c", "batch", 2, TaskFailed, 3.0),
        record("batch.1.d", "batch", 0, TaskStaging, 9.0),
        record("web.2.e", "web", 1, TaskKilled, 1.0),
    ]
    .into_iter()
    .map(Arc::new)
    .collect()
}

#[test]
fn orders_carried_into_the_next_list_equal_a_fresh_sort() {
    let first = list(sample());
    let before = TaskIndex::new(first.clone(), None);
    for key in SortKey::ALL {
        before.order(key);
    }
    // One task changed host and state, one left, two arrived.
    let mut next: Vec<Arc<TaskRecord>> = first.iter().cloned().collect();
    next.retain(|t| t.task_id != "batch.0.c");
    let moved = next.iter().position(|t| t.task_id == "web.1.b").unwrap();
    let mut t = (*next[moved]).clone();
    t.hostname = "h9".into();
    t.state = TaskState::TaskFinished;
    next[moved] = Arc::new(t);
    next.push(Arc::new(record(
        "a.9.z",
        "a",
        3,
        TaskState::TaskRunning,
        3.0,
    )));
    next.push(Arc::new(record(
        "zz.0.y",
        "zz",
        0,
        TaskState::TaskRunning,
        -0.0,
    )));
    let next = list(next);
    let after = TaskIndex::new(next.clone(), Some(&before));
    let fresh = TaskIndex::new(next.clone(), None);
    for key in SortKey::ALL {
        assert!(after.orders[key as usize].get().is_some(), "{key} carried");
        assert_eq!(after.order(key), fresh.order(key), "{key}");
        let all = reference(&next, &Filter::default(), key, Order::Asc, 0, 100);
        assert_eq!(&*after.order(key), &all.page[..], "{key}");
    }
}

#[test]
fn a_filtered_page_is_the_page_of_the_filtered_sort() {
    let tasks = list(sample());
    let index = TaskIndex::new(tasks.clone(), None);
    let filters = [
        Filter {
            service: Some("web".into()),
            ..Filter::default()
        },
        Filter {
            state: Some(StateIs::Active),
            q: Some("h1".into()),
            ..Filter::default()
        },
        Filter {
            service: Some("nobody".into()),
            ..Filter::default()
        },
        Filter {
            q: Some(".0.".into()),
            state: Some(StateIs::Exactly(TaskState::TaskFailed)),
            ..Filter::default()
        },
    ];
    for f in &filters {
        for key in SortKey::ALL {
            for order in [Order::Asc, Order::Desc] {
                for (start, per_page) in [(0, 2), (1, 2), (4, 10), (0, 100)] {
                    assert_eq!(
                        index.select(f, key, order, start, per_page),
                        reference(&tasks, f, key, order, start, per_page),
                        "{f:?} {key} {order} {start} {per_page}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_match_running_from_one_id_into_the_next_counts_for_neither() {
    let mut ids = IdText::default();
    for id in ["ab", "ca", "abc", "é", "x"] {
        ids.push(id);
    }
    // "b" + "c" straddles ids 0 and 1, then matches inside id 2.
    assert_eq!(ids.containing("bc"), [false, false, true, false, false]);
    assert_eq!(ids.containing("ca"), [false, true, false, false, false]);
    assert_eq!(ids.containing("é"), [false, false, false, true, false]);
    assert_eq!(ids.containing("éx"), [false; 5]);
    assert_eq!(ids.containing(""), [true; 5]);
    assert_eq!(ids.get(3), "é");
}

#[test]
fn names_no_task_uses_any_more_are_dropped() {
    let many: Vec<Arc<TaskRecord>> = (0..200)
        .map(|i| {
            Arc::new(record(
                &format!("t.{i:03}"),
                "s",
                i,
                TaskState::TaskRunning,
                1.0,
            ))
        })
        .collect();
    let first = TaskIndex::new(list(many.clone()), None);
    assert_eq!(first.names.host.len(), 200);
    let few = list(many[..5].to_vec());
    let next = TaskIndex::new(few.clone(), Some(&first));
    assert_eq!(next.names.host.len(), 5, "rebuilt without the 195 departed");
    let one = list(many[..4].to_vec());
    let after = TaskIndex::new(one, Some(&next));
    assert!(
        Arc::ptr_eq(&after.names, &next.names),
        "no new name: shared"
    );
}

#[test]
fn the_same_list_shares_what_was_made() {
    let tasks = list(sample());
    let first = TaskIndex::new(tasks.clone(), None);
    let by_host = first.order(SortKey::Host);
    let again = TaskIndex::new(tasks, Some(&first));
    assert!(Arc::ptr_eq(&again.order(SortKey::Host), &by_host));
    assert!(Arc::ptr_eq(&again.keys, &first.keys));
}

#[test]
fn counts_and_services_come_from_the_keys() {
    let index = TaskIndex::new(list(sample()), None);
    let (counts, active) = index.state_counts();
    let names: Vec<&str> = counts.iter().map(|(s, _)| s.as_str_name()).collect();
    assert_eq!(
        names,
        ["TASK_FAILED", "TASK_KILLED", "TASK_RUNNING", "TASK_STAGING"]
    );
    assert_eq!(counts.iter().map(|(_, n)| n).sum::<usize>(), 5);
    assert_eq!(active, 3);
    assert_eq!(index.services(), ["batch", "web"]);
}

/// Each task's keys with the names spelled out (IDs differ between
/// interners).
fn resolved(index: &TaskIndex) -> Vec<(String, String, String, Keys)> {
    let n = &index.names;
    index
        .keys
        .iter()
        .map(|k| {
            let names = (
                n.service.name(k.service).to_string(),
                n.host.name(k.host).to_string(),
                n.agent.name(k.agent).to_string(),
            );
            (
                names.0,
                names.1,
                names.2,
                Keys {
                    service: 0,
                    host: 0,
                    agent: 0,
                    ..*k
                },
            )
        })
        .collect()
}

/// One change between two task lists.
#[derive(Debug, Clone)]
enum Step {
    /// A new task (ID number, service, host, state, update time).
    Add(u16, u8, u8, u8, u8),
    /// The task at (position modulo the length) gets a new record with
    /// this host, state, update time and health.
    Change(u16, u8, u8, u8, Option<bool>),
    /// The task at (position modulo the length) is killed.
    Kill(u16),
    /// The task at (position modulo the length) leaves.
    Remove(u16),
    /// The same tasks in new records (a full republish).
    Copy,
}

const STATES: [TaskState; 5] = [
    TaskState::TaskRunning,
    TaskState::TaskStaging,
    TaskState::TaskFailed,
    TaskState::TaskKilled,
    TaskState::TaskUnreachable,
];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u16..400, 0u8..4, 0u8..12, 0u8..5, 0u8..6)
            .prop_map(|(i, s, h, st, u)| Step::Add(i, s, h, st, u)),
        4 => (any::<u16>(), 0u8..12, 0u8..5, 0u8..6, any::<Option<bool>>())
            .prop_map(|(p, h, st, u, hl)| Step::Change(p, h, st, u, hl)),
        1 => any::<u16>().prop_map(Step::Kill),
        2 => any::<u16>().prop_map(Step::Remove),
        1 => Just(Step::Copy),
    ]
}

/// The list after `step`.
fn apply(tasks: &[Arc<TaskRecord>], step: &Step) -> Arc<[Arc<TaskRecord>]> {
    let mut v: Vec<Arc<TaskRecord>> = tasks.to_vec();
    let at = |p: u16| (!v.is_empty()).then(|| usize::from(p) % v.len());
    // Update times with ties, and a negative zero against a zero.
    let time = |u: u8| [-0.0, 0.0, 1.5, 1.5, 7.0, -3.0][usize::from(u) % 6];
    match *step {
        Step::Add(i, s, h, st, u) => {
            let service = ["web", "batch", "a", "web2"][usize::from(s) % 4];
            let id = format!("{service}.{i}.x");
            if !v.iter().any(|t| t.task_id == id.as_str()) {
                let state = STATES[usize::from(st) % STATES.len()];
                v.push(Arc::new(record(&id, service, h.into(), state, time(u))));
            }
        }
        Step::Change(p, h, st, u, healthy) => {
            if let Some(i) = at(p) {
                let mut t = (*v[i]).clone();
                t.hostname = format!("h{h}");
                t.agent_id = format!("S{h}").into();
                t.state = STATES[usize::from(st) % STATES.len()];
                t.updated_at = time(u);
                t.healthy = healthy;
                v[i] = Arc::new(t);
            }
        }
        Step::Kill(p) => {
            if let Some(i) = at(p) {
                let mut t = (*v[i]).clone();
                t.kill = Some(KillRequest {
                    reason: "x".into(),
                    requested_at: 0.0,
                    attempts: 1,
                });
                v[i] = Arc::new(t);
            }
        }
        Step::Remove(p) => {
            if let Some(i) = at(p) {
                v.remove(i);
            }
        }
        Step::Copy => v = v.iter().map(|t| Arc::new((**t).clone())).collect(),
    }
    list(v)
}

fn filter() -> impl Strategy<Value = Filter> {
    let state = prop_oneof![
        Just(StateIs::Active),
        Just(StateIs::Terminal),
        (0usize..5).prop_map(|i| StateIs::Exactly(STATES[i])),
    ];
    (
        proptest::option::of(prop_oneof![Just("web"), Just("a"), Just("none")]),
        proptest::option::of(state),
        proptest::option::of(any::<Option<bool>>()),
        proptest::option::of(prop_oneof![
            Just("1"),
            Just("b.1"),
            Just("h1"),
            Just("S"),
            Just("x"),
            Just("0.xw")
        ]),
    )
        .prop_map(|(service, state, health, q)| Filter {
            service: service.map(str::to_string),
            state,
            health,
            q: q.map(str::to_string),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Over random sequences of task lists, each index built from the one
    /// before (with the orders and ID text the earlier ones were asked for)
    /// sorts and filters exactly as an index made from nothing and as the
    /// records' own comparisons do.
    #[test]
    fn an_index_built_from_the_previous_one_equals_one_made_from_nothing(
        steps in proptest::collection::vec((step(), any::<u8>(), filter()), 1..40),
        pages in proptest::collection::vec((0usize..30, 1usize..20, any::<bool>()), 1..4),
    ) {
        let mut tasks: Arc<[Arc<TaskRecord>]> = list(vec![]);
        let mut index = TaskIndex::new(tasks.clone(), None);
        for (step, asked, f) in &steps {
            // Ask the orders of the keys in `asked`'s bits, so that some
            // are carried over and some made later.
            for key in SortKey::ALL {
                if asked & (1 << key as u8) != 0 {
                    index.order(key);
                }
            }
            if asked & 0x80 != 0 {
                index.ids();
            }
            let next = if asked & 0x40 != 0 { tasks.clone() } else { apply(&tasks, step) };
            index = TaskIndex::new(next.clone(), Some(&index));
            tasks = next;
            let fresh = TaskIndex::new(tasks.clone(), None);
            prop_assert_eq!(resolved(&index), resolved(&fresh));
            prop_assert_eq!(index.state_counts(), fresh.state_counts());
            prop_assert_eq!(index.services(), fresh.services());
            for key in SortKey::ALL {
                prop_assert_eq!(index.order(key), fresh.order(key), "{}", key);
                for &(start, per_page, desc) in &pages {
                    let order = if desc { Order::Desc } else { Order::Asc };
                    prop_assert_eq!(
                        index.select(f, key, order, start, per_page),
                        reference(&tasks, f, key, order, start, per_page),
                        "{:?} {} {} {} {}", f, key, order, start, per_page
                    );
                }
            }
        }
    }
}
