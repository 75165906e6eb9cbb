//! Conditional service changes (`Request::ReplaceService` and
//! `Request::DeleteService` with `expected`, HTTP `If-Match`): a change
//! made on a spec read earlier replaces or deletes the service only if the
//! stored spec is still at the version read, as the core knows it once the
//! service's write in flight is answered. The fault it
//! closes: `ctl services scale` read a follower's older spec during a
//! failover and put it back through the new leader, undoing a change the
//! API had acknowledged.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::*;
use crate::scheduler::commands::{CommandError, Expected};

/// `web` with `instances` and the label `op` (one per change, so that a
/// write tells which change it is).
fn web(instances: u32, op: usize) -> ServiceSpec {
    let mut spec = service("web", instances);
    spec.labels.insert("op".into(), op.to_string());
    spec
}

fn replace(spec: ServiceSpec, expected: &str) -> Request {
    Request::ReplaceService {
        spec: Box::new(valid(spec)),
        expected: Expected::version(expected),
    }
}

fn stored_version(h: &Harness) -> String {
    h.store.services["web"].0.spec.version()
}

#[tokio::test(start_paused = true)]
async fn a_change_made_on_the_stored_version_replaces_the_service() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let read = stored_version(&h);
    let id = h.command(replace(web(3, 1), &read));
    h.answer_all();
    assert!(matches!(h.reply(id), Some(Answer::Service(Ok(true)))));
    assert_eq!(h.store.services["web"].0.spec.instances, 3);
}

#[tokio::test(start_paused = true)]
async fn star_replaces_any_stored_spec_and_a_list_any_of_its_versions() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let any = h.command(Request::ReplaceService {
        spec: Box::new(valid(web(2, 1))),
        expected: Expected::Any,
    });
    h.answer_all();
    assert!(matches!(h.reply(any), Some(Answer::Service(Ok(true)))));
    let now = stored_version(&h);
    let listed = h.command(Request::ReplaceService {
        spec: Box::new(valid(web(3, 2))),
        expected: Expected::OneOf(vec!["no-such".into(), now]),
    });
    h.answer_all();
    assert!(matches!(h.reply(listed), Some(Answer::Service(Ok(true)))));
    assert_eq!(h.store.services["web"].0.spec.instances, 3);
    // Only weak tags: nothing matches, nothing is written.
    let weak = h.command(Request::ReplaceService {
        spec: Box::new(valid(web(4, 3))),
        expected: Expected::OneOf(Vec::new()),
    });
    assert!(h.stores.is_empty(), "nothing is written");
    assert!(matches!(
        h.reply(weak),
        Some(Answer::Service(Err(CommandError::PreconditionFailed(_))))
    ));
    // `*` on a service that is not stored: not found, nothing created.
    let mut spec = web(1, 4);
    spec.name = "api".into();
    let absent = h.command(Request::ReplaceService {
        spec: Box::new(valid(spec)),
        expected: Expected::Any,
    });
    assert!(h.stores.is_empty(), "nothing is written");
    assert!(matches!(
        h.reply(absent),
        Some(Answer::Service(Err(CommandError::NotFound(_))))
    ));
    assert!(!h.store.services.contains_key("api"));
}

#[tokio::test(start_paused = true)]
async fn a_change_made_on_an_older_version_is_refused_and_nothing_is_written() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let old = stored_version(&h);
    // Someone's change lands (V=3 in the trial), acknowledged.
    let first = h.command(Request::PutService(Box::new(valid(web(2, 1)))));
    h.answer_all();
    assert!(matches!(h.reply(first), Some(Answer::Service(Ok(true)))));
    // A scale made on the spec read before it.
    let writes = h.store.services["web"].1;
    let id = h.command(replace(web(6, 2), &old));
    assert!(h.stores.is_empty(), "nothing is written");
    match h.reply(id) {
        Some(Answer::Service(Err(CommandError::PreconditionFailed(why)))) => {
            assert!(why.contains("changed since it was read"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.store.services["web"].1, writes);
    assert_eq!(h.store.services["web"].0.spec.labels["op"], "1");
}

#[tokio::test(start_paused = true)]
async fn a_change_queued_behind_a_write_is_checked_against_that_write() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let read = stored_version(&h);
    // A change is being written when the conditional one comes: the
    // condition is checked once that write is answered, so it fails.
    let first = h.command(Request::PutService(Box::new(valid(web(2, 1)))));
    let second = h.command(replace(web(6, 2), &read));
    assert_eq!(h.stores.len(), 1, "the second waits for the first");
    h.answer_all();
    assert!(matches!(h.reply(first), Some(Answer::Service(Ok(true)))));
    assert!(matches!(
        h.reply(second),
        Some(Answer::Service(Err(CommandError::PreconditionFailed(_))))
    ));
    assert_eq!(h.store.services["web"].0.spec.instances, 2);
}

#[tokio::test(start_paused = true)]
async fn a_change_to_a_deleted_service_is_not_found() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let read = stored_version(&h);
    let gone = h.command(Request::DeleteService {
        name: "web".into(),
        expected: None,
    });
    h.answer_all();
    assert!(matches!(h.reply(gone), Some(Answer::Service(Ok(true)))));
    let id = h.command(replace(web(2, 1), &read));
    assert!(matches!(
        h.reply(id),
        Some(Answer::Service(Err(CommandError::NotFound(_))))
    ));
    assert!(!h.store.services.contains_key("web"), "not created again");
}

fn delete(expected: Option<Expected>) -> Request {
    Request::DeleteService {
        name: "web".into(),
        expected,
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_made_on_an_older_version_is_refused_and_nothing_is_deleted() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let old = stored_version(&h);
    let first = h.command(Request::PutService(Box::new(valid(web(2, 1)))));
    h.answer_all();
    assert!(matches!(h.reply(first), Some(Answer::Service(Ok(true)))));
    let writes = h.store.services["web"].1;
    let id = h.command(delete(Some(Expected::version(&old))));
    assert!(h.stores.is_empty(), "nothing is written");
    match h.reply(id) {
        Some(Answer::Service(Err(CommandError::PreconditionFailed(why)))) => {
            assert!(why.contains("nothing was deleted"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.store.services["web"].1, writes);
    assert_eq!(h.store.services["web"].0.spec.instances, 2);
}

#[tokio::test(start_paused = true)]
async fn a_delete_on_the_stored_version_or_star_deletes_and_on_none_is_not_found() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let now = stored_version(&h);
    let listed = h.command(delete(Some(Expected::OneOf(vec!["no-such".into(), now]))));
    h.answer_all();
    assert!(matches!(h.reply(listed), Some(Answer::Service(Ok(true)))));
    assert!(!h.store.services.contains_key("web"));
    // Gone: not found whatever the condition, as without one.
    let absent = h.command(delete(Some(Expected::Any)));
    assert!(h.stores.is_empty(), "nothing is written");
    assert!(matches!(
        h.reply(absent),
        Some(Answer::Service(Err(CommandError::NotFound(_))))
    ));
    let put = h.command(Request::PutService(Box::new(valid(web(1, 1)))));
    h.answer_all();
    assert!(matches!(h.reply(put), Some(Answer::Service(Ok(false)))));
    let any = h.command(delete(Some(Expected::Any)));
    h.answer_all();
    assert!(matches!(h.reply(any), Some(Answer::Service(Ok(true)))));
    assert!(!h.store.services.contains_key("web"));
}

#[tokio::test(start_paused = true)]
async fn a_delete_queued_behind_a_write_is_checked_against_that_write() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    let read = stored_version(&h);
    let first = h.command(Request::PutService(Box::new(valid(web(2, 1)))));
    let second = h.command(delete(Some(Expected::version(&read))));
    assert_eq!(h.stores.len(), 1, "the delete waits for the put");
    h.answer_all();
    assert!(matches!(h.reply(first), Some(Answer::Service(Ok(true)))));
    assert!(matches!(
        h.reply(second),
        Some(Answer::Service(Err(CommandError::PreconditionFailed(_))))
    ));
    assert_eq!(h.store.services["web"].0.spec.instances, 2, "not deleted");
}

/// One step of the property.
#[derive(Debug, Clone)]
enum Op {
    /// An unconditional put.
    Put,
    /// A change made on the version stored `ago` changes back (modulo),
    /// and, with `also`, on that one too (an `If-Match` list).
    Replace { ago: usize, also: Option<usize> },
    /// A change on any stored spec (`If-Match: *`).
    ReplaceAny,
    /// A delete made on the version stored `ago` changes back.
    Delete { ago: usize },
    /// The oldest store operation is answered.
    AnswerOne,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Put),
        4 => (0usize..4, prop::option::of(0usize..4))
            .prop_map(|(ago, also)| Op::Replace { ago, also }),
        1 => Just(Op::ReplaceAny),
        1 => (0usize..4).prop_map(|ago| Op::Delete { ago }),
        4 => Just(Op::AnswerOne),
    ]
}

/// The stored spec's version; `None` while `web` is deleted.
fn version_of(h: &Harness) -> Option<String> {
    h.store.services.get("web").map(|s| s.0.spec.version())
}

/// Answers the oldest store operation, noting over which version a
/// service write went (`over`: a put's by its label, a delete's by the
/// one of `deletes` answered with it) and each new version (`stored`).
fn answer_one(
    h: &mut Harness,
    over: &mut HashMap<usize, String>,
    stored: &mut Vec<String>,
    deletes: &[(usize, ReplyId)],
) {
    let Some((id, op)) = h.stores.pop_front() else {
        return;
    };
    let before = version_of(h);
    let unanswered: Vec<(usize, ReplyId)> = deletes
        .iter()
        .copied()
        .filter(|(_, reply)| h.reply(*reply).is_none())
        .collect();
    let is_delete = matches!(op, StoreOp::DeleteService(..));
    if let StoreOp::PutService(record, _) = &op
        && let Some(before) = &before
    {
        let label = record.spec.labels["op"].parse().unwrap_or(0);
        over.insert(label, before.clone());
    }
    let result = h.store.apply(op);
    h.feed(Input::Stored { id, result });
    if is_delete && let Some(before) = before {
        // One delete is written at a time: the one answered done now.
        for (n, reply) in unanswered {
            if matches!(h.reply(reply), Some(Answer::Service(Ok(true)))) {
                over.insert(n, before.clone());
            }
        }
    }
    if let Some(now) = version_of(h)
        && stored.last() != Some(&now)
    {
        stored.push(now);
    }
}

/// Random puts, conditional changes and conditional deletes, each made on
/// one of the last versions stored, with store answers held back at
/// random: every change or delete answered as done was written over
/// exactly the version it was made on (no lost update), every refused one
/// wrote nothing, and one made on the version stored while no write is in
/// flight is not refused.
fn run_case(ops: &[Op]) -> Result<(), String> {
    paused_runtime()?.block_on(async {
        let mut h = Harness::leader(&[web(1, 0)], &[]);
        h.subscribe();
        h.answer_all();
        // Versions stored, oldest first; per change: what it expected
        // (`None`: a put) and the version it was written over.
        let mut stored = vec![stored_version(&h)];
        let mut expected: HashMap<usize, (ReplyId, Option<Expected>)> = HashMap::new();
        // The changes made on the version stored while nothing was written.
        let mut current: Vec<usize> = Vec::new();
        let mut over: HashMap<usize, String> = HashMap::new();
        let mut deletes: Vec<(usize, ReplyId)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let n = i + 1;
            match op {
                Op::Put => {
                    let id = h.command(Request::PutService(Box::new(valid(web(2, n)))));
                    expected.insert(n, (id, None));
                }
                Op::Replace { ago, also } => {
                    let version =
                        |ago: usize| stored[stored.len() - 1 - ago % stored.len()].clone();
                    let mut versions = vec![version(*ago)];
                    versions.extend(also.map(version));
                    let present = version_of(&h);
                    if h.stores.is_empty() && versions.iter().any(|v| present.as_ref() == Some(v)) {
                        current.push(n);
                    }
                    let condition = Expected::OneOf(versions);
                    let id = h.command(Request::ReplaceService {
                        spec: Box::new(valid(web(3, n))),
                        expected: condition.clone(),
                    });
                    expected.insert(n, (id, Some(condition)));
                }
                Op::ReplaceAny => {
                    if version_of(&h).is_some() {
                        current.push(n);
                    }
                    let id = h.command(Request::ReplaceService {
                        spec: Box::new(valid(web(3, n))),
                        expected: Expected::Any,
                    });
                    expected.insert(n, (id, Some(Expected::Any)));
                }
                Op::Delete { ago } => {
                    let version = stored[stored.len() - 1 - ago % stored.len()].clone();
                    if h.stores.is_empty() && version_of(&h) == Some(version.clone()) {
                        current.push(n);
                    }
                    let condition = Expected::version(version);
                    let id = h.command(delete(Some(condition.clone())));
                    deletes.push((n, id));
                    expected.insert(n, (id, Some(condition)));
                }
                Op::AnswerOne => answer_one(&mut h, &mut over, &mut stored, &deletes),
            }
        }
        while !h.stores.is_empty() {
            answer_one(&mut h, &mut over, &mut stored, &deletes);
        }
        for (n, (id, condition)) in &expected {
            let answer = h.reply(*id);
            match (answer, condition) {
                (Some(Answer::Service(Ok(_))), Some(v))
                    if !over.get(n).is_some_and(|at| v.admits(at)) =>
                {
                    return Err(format!(
                        "change {n} made on {v} was written over {:?}",
                        over.get(n)
                    ));
                }
                (Some(Answer::Service(Err(CommandError::PreconditionFailed(_)))), _)
                    if over.contains_key(n) =>
                {
                    return Err(format!("change {n} was refused but written"));
                }
                (Some(Answer::Service(Err(CommandError::PreconditionFailed(_)))), Some(_))
                    if current.contains(n) =>
                {
                    return Err(format!("change {n} on the current version was refused"));
                }
                (Some(Answer::Service(_)), _) => {}
                (other, _) => return Err(format!("change {n}: {other:?}")),
            }
        }
        Ok(())
    })
}

#[test]
fn no_conditional_change_is_written_over_a_version_it_did_not_see() {
    let mut runner = TestRunner::new(Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(op(), 1..40), |ops| {
        run_case(&ops).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
