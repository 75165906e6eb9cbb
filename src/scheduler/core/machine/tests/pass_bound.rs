//! The scheduling pass's record budget (`schedule::PassBound`): a pass
//! reads at most the budget (but always one service), defers the services
//! past it to the next pass, which resumes with them; meanwhile their
//! offers are neither declined nor suppressed.

use super::*;

/// Three services of four instances, three of each running: each pass
/// with a budget of three records assesses one service.
fn three_services() -> Harness {
    let specs: Vec<ServiceSpec> = ["a", "b", "c"].iter().map(|n| service(n, 4)).collect();
    let records: Vec<TaskRecord> = specs
        .iter()
        .flat_map(|s| (0..3).map(|i| running_record(&s.name, i, s)))
        .collect();
    let mut h = Harness::leader(&specs, &records);
    h.machine.pass.budget = 3;
    h
}

fn offers(ids: &[&str]) -> Input {
    let resources = Resources::parse("cpus:4;mem:4096")
        .expect("resources")
        .to_protos(None);
    Input::Offers(
        ids.iter()
            .map(|id| v1::Offer {
                id: v1::OfferId {
                    value: (*id).into(),
                },
                agent_id: v1::AgentId {
                    value: format!("agent-{id}"),
                },
                hostname: format!("{id}.test"),
                resources: resources.clone(),
                ..Default::default()
            })
            .collect(),
    )
}

/// The services whose task records the queued store operations create.
fn creating(h: &Harness) -> Vec<String> {
    h.stores
        .iter()
        .filter_map(|(_, op)| match op {
            StoreOp::PutTask(record, Expect::Absent) => Some(record.service.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_pass_over_its_record_budget_defers_the_other_services_to_the_next_pass() {
    let mut h = three_services();
    h.subscribe();
    h.answer_calls();
    h.drain_call_log();
    h.feed(offers(&["o1", "o2", "o3"]));
    // The pass that followed the offers read `a`'s three records and
    // stopped: only `a`'s missing instance is being launched.
    assert_eq!(creating(&h), ["a"]);
    let calls = h.drain_call_log();
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, MesosCall::Decline { .. } | MesosCall::Suppress)),
        "offers kept for the deferred services: {calls:?}"
    );
    assert!(h.machine.pass.deferred());
    // The next passes resume with `b`, then `c`.
    h.answer_next_store();
    assert_eq!(creating(&h), ["b"]);
    h.answer_next_store();
    assert_eq!(creating(&h), ["c"]);
    h.answer_all();
    let mut launched = Harness::launched(&h.drain_call_log());
    launched.sort();
    let services: Vec<&str> = launched.iter().map(|t| &t[..1]).collect();
    assert_eq!(services, ["a", "b", "c"], "{launched:?}");
    // Once the new tasks run, a few more passes (one per input here) go
    // over the services, then every one is settled and none deferred.
    for (n, task) in launched.iter().enumerate() {
        h.update(status(task, TaskState::TaskRunning, Some(&format!("r{n}"))));
        h.answer_all();
    }
    // (They count as available after the service's minimum healthy time.)
    h.advance(std::time::Duration::from_secs(120)).await;
    h.answer_all();
    for _ in 0..4 {
        h.feed(Input::Heartbeat);
    }
    assert!(!h.machine.pass.deferred());
}

#[tokio::test(start_paused = true)]
async fn a_budget_as_large_as_the_records_assesses_every_service_in_one_pass() {
    let mut h = three_services();
    h.machine.pass.budget = 9;
    h.subscribe();
    h.answer_calls();
    h.feed(offers(&["o1", "o2", "o3"]));
    let mut services = creating(&h);
    services.sort();
    assert_eq!(services, ["a", "b", "c"]);
    assert!(!h.machine.pass.deferred());
}

/// A service larger than the budget is still assessed: a pass always
/// reads at least one service.
#[tokio::test(start_paused = true)]
async fn a_service_larger_than_the_budget_is_assessed_alone() {
    let mut h = three_services();
    h.machine.pass.budget = 1;
    h.subscribe();
    h.answer_calls();
    h.feed(offers(&["o1", "o2", "o3"]));
    assert_eq!(creating(&h), ["a"]);
    h.answer_all();
    assert_eq!(Harness::launched(&h.drain_call_log()).len(), 3);
}
