//! The scheduler client's subscription against the in-process testbed:
//! subscribe, offers, calls with the current stream ID, re-subscription after
//! a cut stream, heartbeat supervision and cancellation
//! (`docs/mesos-protocol.md#scheduler-api-transport`).

use crate::support;
use crate::support::testbed;

use std::time::{Duration, Instant};

use mesos_appliance::mesos::client::{
    CallError, ClientEvent, ConnectionState, DisconnectReason, SchedulerClient, StopReason,
};
use mesos_appliance::mesos::detector::{MasterAddress, MasterDetector};
use mesos_appliance::mesos::v1;
use mesos_appliance::mesos::v1::scheduler::{Call, call};
use mesos_appliance::testbed::TestbedConfig;
use support::client::*;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn subscribes_declines_and_resubscribes_with_a_new_stream_id_after_the_stream_is_cut() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let cancel = CancellationToken::new();
    let (client, rx) =
        SchedulerClient::start(fast_config(&tb.url()), framework("sub"), cancel.clone());
    let mut events = Events::new(rx);

    let first = events.subscribed().await;
    let fid = first.framework_id.value.clone();
    assert_eq!(first.master, address(&tb));
    assert_eq!(first.heartbeat_interval, Duration::from_secs(1));
    assert_eq!(
        first.master_info.as_ref().map(|m| m.id.clone()),
        Some(tb.master_id())
    );
    let offers = events.offers().await;
    assert_eq!(offers.len(), 1);
    client
        .decline(offer_ids(&offers), refuse(0.2))
        .await
        .unwrap();

    // The testbed cuts the connection without a terminating chunk.
    assert!(tb.drop_stream(&fid));
    let reason = events.disconnected().await;
    assert!(
        matches!(reason, DisconnectReason::StreamError(_)),
        "{reason:?}"
    );
    let second = events.subscribed().await;
    assert_eq!(
        second.framework_id.value, fid,
        "same framework after re-subscribing"
    );
    assert_ne!(second.stream_id, first.stream_id);
    assert_eq!(client.subscription().unwrap().stream_id, second.stream_id);
    let offers = events.offers().await;
    client
        .decline(offer_ids(&offers), refuse(60.0))
        .await
        .unwrap();

    let calls = scheduler_calls(&tb);
    let (s1, s2) = (
        Some(first.stream_id.clone()),
        Some(second.stream_id.clone()),
    );
    let f = Some(fid.clone());
    assert_eq!(
        summary(&calls),
        vec![
            // A SUBSCRIBE's entry holds the stream ID its answer issued.
            ("SUBSCRIBE".into(), None, s1.clone(), 200),
            ("DECLINE".into(), f.clone(), s1, 202),
            ("SUBSCRIBE".into(), f.clone(), s2.clone(), 200),
            ("DECLINE".into(), f.clone(), s2, 202),
        ]
    );
    // The re-subscription names the assigned ID in FrameworkInfo too.
    assert_eq!(
        calls[2].call["subscribe"]["framework_info"]["id"]["value"],
        fid.as_str()
    );
    assert!(
        calls[0].call["subscribe"]["framework_info"]
            .get("id")
            .is_none()
    );
    // Declined offers were the ones of the stream they came from.
    assert_eq!(
        calls[3].call["decline"]["offer_ids"][0]["value"],
        offers[0].id.value.as_str()
    );

    cancel.cancel();
    assert_eq!(events.stopped().await, StopReason::Cancelled);
}

#[tokio::test]
async fn heartbeat_silence_closes_the_stream_and_resubscribes_within_k_intervals() {
    let mut config = TestbedConfig::for_tests(1);
    config.heartbeat_interval = Duration::from_millis(300);
    let tb = testbed(config).await;
    let mut client_config = fast_config(&tb.url());
    client_config.heartbeat_timeout_factor = 3;
    // Shorter than the quiet spell below: a request-wide timeout on the
    // event stream would cut it
    // (`docs/mesos-protocol.md#a-whole-request-timeout-kills-the-event-stream`).
    client_config.call_timeout = Duration::from_millis(500);
    let cancel = CancellationToken::new();
    let (_client, rx) = SchedulerClient::start(client_config, framework("hb"), cancel.clone());
    let mut events = Events::new(rx);
    let first = events.subscribed().await;
    // Hold the offer: from now on only heartbeats flow.
    events.offers().await;
    // Heartbeats keep a quiet stream alive well past k × interval.
    assert!(
        events
            .next_within(Duration::from_millis(1500))
            .await
            .is_none(),
        "a quiet stream with heartbeats must stay up; seen {:?}",
        events.seen
    );

    tb.stop_heartbeats(None);
    let stopped_at = Instant::now();
    let reason = events.disconnected().await;
    let silence = stopped_at.elapsed();
    assert_eq!(
        reason,
        DisconnectReason::HeartbeatTimeout {
            silence: Duration::from_millis(900)
        }
    );
    // The last record came at most one interval before the stop.
    assert!(
        silence >= Duration::from_millis(550) && silence <= Duration::from_millis(1900),
        "reconnect after {silence:?}, expected about 3 × 300 ms"
    );
    tb.resume_heartbeats();
    let second = events.subscribed().await;
    assert_eq!(second.framework_id, first.framework_id);
    assert_ne!(second.stream_id, first.stream_id);
    let subscribes = tb.scheduler_calls("SUBSCRIBE");
    assert_eq!(subscribes.len(), 2, "{subscribes:?}");
    cancel.cancel();
}

#[tokio::test]
async fn cancel_closes_the_stream_at_once_and_calls_stop() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let cancel = CancellationToken::new();
    let (client, rx) =
        SchedulerClient::start(fast_config(&tb.url()), framework("cancel"), cancel.clone());
    let mut events = Events::new(rx);
    let sub = events.subscribed().await;
    let offers = events.offers().await;

    cancel.cancel();
    assert_eq!(events.stopped().await, StopReason::Cancelled);
    // The master notices the hang-up: the framework is disconnected.
    eventually("framework disconnected", Duration::from_secs(2), || {
        tb.frameworks()
            .iter()
            .any(|f| f.id == sub.framework_id.value && !f.connected)
    })
    .await;
    assert_eq!(
        client.decline(offer_ids(&offers), None).await,
        Err(CallError::NotSubscribed)
    );
    assert!(matches!(
        &*client.state().borrow(),
        ConnectionState::Stopped(StopReason::Cancelled)
    ));
    assert_eq!(
        tb.scheduler_calls("DECLINE").len(),
        0,
        "nothing sent after cancel"
    );
}

#[tokio::test]
async fn refused_and_invalid_calls_are_typed_errors() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let cancel = CancellationToken::new();
    let (client, rx) =
        SchedulerClient::start(fast_config(&tb.url()), framework("errors"), cancel.clone());
    let mut events = Events::new(rx);
    let sub = events.subscribed().await;

    // 400 from the master: status and body verbatim.
    let err = client
        .acknowledge(
            v1::AgentId { value: "a".into() },
            v1::TaskId { value: "t".into() },
            b"not a uuid".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CallError::Rejected {
            status: 400,
            body: "Failed to validate scheduler::Call: Not a valid UUID".into()
        }
    );
    // Refused locally, never sent.
    let foreign = Call {
        r#type: Some(call::Type::Revive as i32),
        framework_id: Some(v1::FrameworkId {
            value: "other".into(),
        }),
        ..Default::default()
    };
    assert!(matches!(
        client.call(foreign).await,
        Err(CallError::Invalid(_))
    ));
    let subscribe = Call {
        r#type: Some(call::Type::Subscribe as i32),
        ..Default::default()
    };
    assert!(matches!(
        client.call(subscribe).await,
        Err(CallError::Invalid(_))
    ));
    // Helpers fill framework_id and the stream ID.
    client.revive(vec![]).await.unwrap();
    client.suppress(vec![]).await.unwrap();
    client
        .reconcile(vec![(
            v1::TaskId {
                value: "nope".into(),
            },
            None,
        )])
        .await
        .unwrap();
    let lost = events
        .expect("reconciliation answer", |e| {
            stream_event(e).is_some_and(|e| {
                e.update
                    .as_ref()
                    .is_some_and(|u| u.status.task_id.value == "nope")
            })
        })
        .await;
    let ClientEvent::Event(lost) = lost else {
        unreachable!()
    };
    assert_eq!(lost.update.unwrap().status.state(), v1::TaskState::TaskLost);

    let calls = scheduler_calls(&tb);
    let types: Vec<(&str, u16)> = calls
        .iter()
        .map(|c| (c.call_type.as_str(), c.status))
        .collect();
    assert_eq!(
        types,
        [
            ("SUBSCRIBE", 200),
            ("ACKNOWLEDGE", 400),
            ("REVIVE", 202),
            ("SUPPRESS", 202),
            ("RECONCILE", 202)
        ]
    );
    for c in &calls[1..] {
        assert_eq!(c.stream_id.as_deref(), Some(sub.stream_id.as_str()));
        assert_eq!(
            c.framework_id.as_deref(),
            Some(sub.framework_id.value.as_str())
        );
    }
    cancel.cancel();
}

#[tokio::test]
async fn refused_connections_are_retried_and_no_call_is_sent_meanwhile() {
    support::mesos::init();
    // Nothing listens there.
    let port = support::zookeeper::free_port();
    let dead = format!("http://127.0.0.1:{port}");
    let detector =
        MasterDetector::fixed(MasterAddress::of_url(&reqwest::Url::parse(&dead).unwrap()).unwrap());
    let cancel = CancellationToken::new();
    let (client, rx) = SchedulerClient::start_with_detector(
        fast_config(&dead),
        detector,
        framework("nobody"),
        cancel.clone(),
    );
    let mut state = client.state();
    let mut failures = 0;
    let start = Instant::now();
    while failures < 3 {
        let s = support::wait_for(&mut state, WAIT, "a failed attempt", |s| {
            matches!(s, ConnectionState::Disconnected { .. })
        })
        .await;
        let ConnectionState::Disconnected { reason, retry_in } = s else {
            unreachable!()
        };
        let DisconnectReason::SubscribeFailed(text) = &reason else {
            panic!("{reason:?}")
        };
        assert!(text.contains("cannot connect"), "{text}");
        assert!(
            retry_in <= Duration::from_millis(400),
            "capped backoff, got {retry_in:?}"
        );
        assert_eq!(client.revive(vec![]).await, Err(CallError::NotSubscribed));
        failures += 1;
        support::wait_for(&mut state, WAIT, "the next attempt", |s| {
            matches!(s, ConnectionState::Connecting { .. })
        })
        .await;
    }
    // Backoff, not a tight loop: three attempts take at least 25 + 50 ms.
    assert!(
        start.elapsed() >= Duration::from_millis(75),
        "{:?}",
        start.elapsed()
    );
    cancel.cancel();
    let mut events = Events::new(rx);
    assert_eq!(events.stopped().await, StopReason::Cancelled);
}

#[tokio::test]
async fn a_record_over_the_limit_ends_the_stream_before_it_is_buffered() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let mut config = fast_config(&tb.url());
    // SUBSCRIBED with MasterInfo is about 250 bytes.
    config.max_record_bytes = 64;
    let cancel = CancellationToken::new();
    let (client, _rx) = SchedulerClient::start(config, framework("big"), cancel.clone());
    let mut state = client.state();
    let failed = support::wait_for(&mut state, WAIT, "the stream refused", |s| {
        matches!(s, ConnectionState::Disconnected { .. })
    })
    .await;
    let ConnectionState::Disconnected {
        reason: DisconnectReason::StreamError(text),
        ..
    } = failed
    else {
        panic!("{failed:?}")
    };
    assert!(text.contains("exceeds the limit of 64 bytes"), "{text}");
    cancel.cancel();
}

#[tokio::test]
async fn dropping_the_event_receiver_stops_the_client() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (client, rx) = SchedulerClient::start(
        fast_config(&tb.url()),
        framework("deaf"),
        CancellationToken::new(),
    );
    let mut events = Events::new(rx);
    let sub = events.subscribed().await;
    drop(events);
    let mut state = client.state();
    support::wait_for(&mut state, WAIT, "stopped", |s| {
        *s == ConnectionState::Stopped(StopReason::ReceiverDropped)
    })
    .await;
    eventually("framework disconnected", Duration::from_secs(2), || {
        tb.frameworks()
            .iter()
            .any(|f| f.id == sub.framework_id.value && !f.connected)
    })
    .await;
}
