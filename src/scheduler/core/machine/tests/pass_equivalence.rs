//! The bounded scheduling pass (`schedule::PassBound`) decides what one
//! unbounded pass decides: over random services and records (duplicates,
//! instances beyond the desired count, outdated specs, tasks ending or
//! being killed) and ample offers, the passes of one round with a budget
//! of one record (one service per pass) launch the same instances, mark
//! the same kills and move the same tasks as a single pass over every
//! service.

use proptest::prelude::*;

use super::*;
use crate::scheduler::records::KillRequest;

/// A record: instance, state (0 staging, 1 starting, 2 running, 3 failed,
/// 4 killed), outdated spec, kill asked.
type Rec = (u32, u8, bool, bool);

fn world() -> impl Strategy<Value = Vec<(u32, Vec<Rec>)>> {
    let rec = (0u32..7, 0u8..5, any::<bool>(), prop::bool::weighted(0.1));
    prop::collection::vec((0u32..6, prop::collection::vec(rec, 0..8)), 1..5)
}

/// What one round decided: new instances (service, instance), kill marks
/// and other record writes (task, instance, killed), KILL calls.
#[derive(Debug, PartialEq)]
struct Decisions {
    created: Vec<(String, u32)>,
    written: Vec<(String, u32, bool)>,
    kills: Vec<String>,
}

fn round(services: &[(u32, Vec<Rec>)], budget: usize) -> Decisions {
    paused_runtime().expect("runtime").block_on(async {
        let mut specs = Vec::new();
        let mut records = Vec::new();
        for (s, (instances, recs)) in services.iter().enumerate() {
            let spec = service(&format!("s{s}"), *instances);
            for (k, (instance, state, outdated, kill)) in recs.iter().enumerate() {
                let mut r = running_record(&spec.name, *instance, &spec);
                r.task_id = format!("s{s}.{instance}.r{k}").into();
                r.executor_id = r.task_id.to_string();
                r.state = [
                    TaskState::TaskStaging,
                    TaskState::TaskStarting,
                    TaskState::TaskRunning,
                    TaskState::TaskFailed,
                    TaskState::TaskKilled,
                ][usize::from(*state)];
                if *outdated {
                    r.fingerprint = "outdated".into();
                }
                if *kill {
                    r.kill = Some(KillRequest::new("test".into(), 1.0));
                }
                records.push(r);
            }
            specs.push(spec);
        }
        let mut h = Harness::leader(&specs, &records);
        h.machine.pass.budget = budget;
        let finish_round = |h: &mut Harness| {
            for _ in 0..64 {
                if !h.machine.pass.deferred() {
                    return;
                }
                h.feed(Input::Heartbeat);
            }
            panic!("the round did not end within 64 passes");
        };
        h.subscribe();
        finish_round(&mut h);
        let resources = Resources::parse("cpus:64;mem:65536")
            .expect("resources")
            .to_protos(None);
        // One offer per service, each large enough for every instance.
        let offers = (0..specs.len())
            .map(|i| v1::Offer {
                id: v1::OfferId {
                    value: format!("o{i}"),
                },
                agent_id: v1::AgentId {
                    value: format!("agent-o{i}"),
                },
                hostname: format!("o{i}.test"),
                resources: resources.clone(),
                ..Default::default()
            })
            .collect();
        h.feed(Input::Offers(offers));
        finish_round(&mut h);
        let mut d = Decisions {
            created: Vec::new(),
            written: Vec::new(),
            kills: Vec::new(),
        };
        for (_, op) in &h.stores {
            if let StoreOp::PutTask(r, expect) = op {
                if *expect == Expect::Absent {
                    d.created.push((r.service.clone(), r.instance));
                } else {
                    d.written
                        .push((r.task_id.to_string(), r.instance, r.kill.is_some()));
                }
            }
        }
        for call in &h.call_log {
            if let MesosCall::Kill { task_id, .. } = call {
                d.kills.push(task_id.to_string());
            }
        }
        d.created.sort();
        d.written.sort();
        d.kills.sort();
        d
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_bounded_round_decides_as_one_full_pass(services in world()) {
        let full = round(&services, usize::MAX);
        let bounded = round(&services, 1);
        prop_assert_eq!(full, bounded);
    }
}
