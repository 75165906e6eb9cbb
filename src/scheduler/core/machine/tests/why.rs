//! "Why isn't it running?" (`why`): a service no offer fits counts the
//! offers it passed over by reason, each offer once; a launch starts a new
//! window; a failed task is the service's last failure with Mesos' state,
//! reason and message; a kill the appliance asked for is not a failure.

use std::time::Duration;

use super::*;

fn big(name: &str) -> ServiceSpec {
    serde_json::from_value(serde_json::json!({
        "name": name, "command": "sleep 1000", "cpus": 0.1, "mem": 4096,
        "instances": 1, "restart_backoff": "2s", "restart_backoff_max": "8s"
    }))
    .expect("a service spec")
}

fn status_of<'a>(s: &'a Snapshot, name: &str) -> &'a crate::scheduler::snapshot::ServiceStatus {
    s.services
        .iter()
        .find(|x| x.spec.name == name)
        .expect("the service")
}

#[tokio::test(start_paused = true)]
async fn offers_too_small_count_once_each_as_insufficient_mem() {
    let spec = big("huge");
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[]);
    h.subscribe();
    h.answer_all();
    for n in 0..3 {
        h.offer(&format!("o-{n}"), "agent-1", 4.0);
        h.answer_all();
    }
    // More passes over the same held offers do not count them again.
    h.advance(Duration::from_secs(3)).await;
    h.answer_all();
    let s = h.snapshot().await;
    let offers = status_of(s, "huge")
        .offers
        .clone()
        .expect("an offers summary");
    assert_eq!(offers.processed, 3, "{offers:?}");
    assert_eq!(
        offers.reasons.get("insufficient_mem"),
        Some(&3),
        "{offers:?}"
    );
    assert_eq!(offers.reasons.len(), 1, "{offers:?}");
    assert!(offers.last_offer_at.is_some());
    assert_eq!(offers.reasons_text(), "insufficient mem 3");
    assert!(status_of(s, "huge").last_failure.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_kept_with_its_reason_and_a_launch_starts_a_new_window() {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[]);
    h.subscribe();
    h.answer_all();
    h.offer("o-1", "agent-1", 4.0);
    h.answer_all();
    let id = Harness::launched(&h.drain_call_log())
        .pop()
        .expect("a launch");
    h.update(v1::TaskStatus {
        reason: Some(task_status::Reason::ContainerLaunchFailed as i32),
        message: Some("Failed to pull image 'nope:latest'".into()),
        ..status(&id, TaskState::TaskFailed, Some("u-f"))
    });
    h.answer_all();
    // In its backoff: offers are passed over while no instance may launch
    // (not counted: nothing is placed on them), then the next launch.
    let s = h.snapshot().await;
    let web = status_of(s, "web");
    let failure = web.last_failure.clone().expect("a last failure");
    assert_eq!(failure.task_id, id);
    assert_eq!(failure.state, "TASK_FAILED");
    assert_eq!(
        failure.reason.as_deref(),
        Some("REASON_CONTAINER_LAUNCH_FAILED")
    );
    assert_eq!(
        failure.message.as_deref(),
        Some("Failed to pull image 'nope:latest'")
    );
    assert_eq!(failure.instance, 0);
    // A too-small offer while it may launch is counted; the launch that
    // follows starts the window over.
    h.advance(Duration::from_secs(3)).await;
    let resources = Resources::parse("cpus:0.01;mem:1024")
        .expect("resources")
        .to_protos(None);
    h.feed(Input::Offers(vec![v1::Offer {
        id: v1::OfferId {
            value: "small".into(),
        },
        agent_id: v1::AgentId {
            value: "agent-2".into(),
        },
        hostname: "agent-2.test".into(),
        resources,
        ..Default::default()
    }]));
    h.answer_all();
    let s = h.snapshot().await;
    let offers = status_of(s, "web").offers.clone().expect("a summary");
    assert_eq!(
        offers.reasons.get("insufficient_cpus"),
        Some(&1),
        "{offers:?}"
    );
    h.offer("o-2", "agent-1", 4.0);
    h.answer_all();
    let next = Harness::launched(&h.drain_call_log())
        .pop()
        .expect("a relaunch");
    assert_ne!(next, id);
    let s = h.snapshot().await;
    assert!(status_of(s, "web").offers.is_none(), "a new window");
    // The last failure stays shown after the relaunch.
    assert_eq!(
        status_of(s, "web")
            .last_failure
            .as_ref()
            .map(|f| f.task_id.clone()),
        Some(id)
    );
}
