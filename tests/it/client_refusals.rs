//! Terminal refusals: a removed framework and a failed-over framework stop
//! the client with typed errors and no retry loop
//! (`docs/mesos-protocol.md#refusals-arrive-on-a-200-stream`;
//! captures d, g, m); a 503 from a leaderless master is retried with backoff.

use crate::support;
use crate::support::testbed;

use std::time::Duration;

use mesos_appliance::mesos::client::{
    CallError, ClientEvent, ConnectionState, DisconnectReason, ErrorKind, SchedulerClient,
    StopReason,
};
use mesos_appliance::mesos::detector::MasterDetector;
use mesos_appliance::mesos::operator::OperatorClient;
use mesos_appliance::testbed::TestbedConfig;
use support::client::*;
use tokio_util::sync::CancellationToken;

/// Long enough for several retries if the client (wrongly) retried: its
/// backoff is 50–400 ms.
const NO_RETRY_WINDOW: Duration = Duration::from_millis(1500);

#[tokio::test]
async fn removed_framework_stops_the_client_without_a_retry_loop() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let config = fast_config(&tb.url());
    let cancel = CancellationToken::new();
    let (client, rx) = SchedulerClient::start(config.clone(), framework("rm"), cancel.clone());
    let mut events = Events::new(rx);
    let fid = events.subscribed().await.framework_id.value;

    // The operator tears it down: the stream ends with no event (capture h),
    // the client re-subscribes with its ID and is told it was removed.
    let operator = OperatorClient::new(&config, client.detector().clone(), cancel.clone());
    operator.teardown(&fid).await.unwrap();
    assert_eq!(events.disconnected().await, DisconnectReason::EndOfStream);
    assert_eq!(
        events.stopped().await,
        StopReason::Error(ErrorKind::Removed)
    );
    assert!(
        !events
            .seen
            .iter()
            .any(|e| matches!(e, ClientEvent::Subscribed(_))),
        "{:?}",
        events.seen
    );
    assert_eq!(
        *client.state().borrow(),
        ConnectionState::Stopped(StopReason::Error(ErrorKind::Removed))
    );
    assert_eq!(client.revive(vec![]).await, Err(CallError::NotSubscribed));

    tokio::time::sleep(NO_RETRY_WINDOW).await;
    // Both were answered 200 with a stream (the refusal is an ERROR event
    // on it), so each entry holds an issued stream ID.
    let subscribes: Vec<_> = summary(&tb.scheduler_calls("SUBSCRIBE"))
        .into_iter()
        .map(|(t, f, stream, status)| (t, f, stream.is_some(), status))
        .collect();
    let f = Some(fid.clone());
    assert_eq!(
        subscribes,
        vec![
            ("SUBSCRIBE".into(), None, true, 200),
            ("SUBSCRIBE".into(), f.clone(), true, 200),
        ]
    );

    // A new client given the removed ID: one SUBSCRIBE, then Removed.
    let (_again, rx) =
        SchedulerClient::start(config, existing_framework("rm", &fid), cancel.clone());
    let mut events = Events::new(rx);
    assert_eq!(
        events.stopped().await,
        StopReason::Error(ErrorKind::Removed)
    );
    tokio::time::sleep(NO_RETRY_WINDOW).await;
    assert_eq!(tb.scheduler_calls("SUBSCRIBE").len(), 3);
}

#[tokio::test]
async fn failed_over_framework_stops_the_old_client_and_it_does_not_fight_back() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let config = fast_config(&tb.url());
    let (old, rx) =
        SchedulerClient::start(config.clone(), framework("fo"), CancellationToken::new());
    let mut old_events = Events::new(rx);
    let fid = old_events.subscribed().await.framework_id.value;

    // A second scheduler takes the framework over (capture d).
    let cancel_new = CancellationToken::new();
    let (new, rx) =
        SchedulerClient::start(config, existing_framework("fo", &fid), cancel_new.clone());
    let mut new_events = Events::new(rx);
    let taken = new_events.subscribed().await;
    assert_eq!(taken.framework_id.value, fid);

    assert_eq!(
        old_events.stopped().await,
        StopReason::Error(ErrorKind::FailedOver)
    );
    assert_eq!(old.revive(vec![]).await, Err(CallError::NotSubscribed));

    tokio::time::sleep(NO_RETRY_WINDOW).await;
    assert_eq!(
        tb.scheduler_calls("SUBSCRIBE").len(),
        2,
        "the old client must not re-subscribe"
    );
    assert_eq!(
        new.subscription().map(|s| s.stream_id),
        Some(taken.stream_id)
    );
    assert!(
        new_events
            .next_within(Duration::ZERO)
            .await
            .is_none_or(|e| !matches!(
                e,
                ClientEvent::Stopped(_) | ClientEvent::Disconnected { .. }
            ))
    );
    cancel_new.cancel();
}

#[tokio::test]
async fn a_leaderless_master_is_retried_with_backoff() {
    support::mesos::init();
    // An election through a ZooKeeper that is not there: no leader, ever.
    let mut config = TestbedConfig::for_tests(1);
    config.zk = Some(format!(
        "zk://127.0.0.1:{}/mesos",
        support::zookeeper::free_port()
    ));
    let tb = testbed(config).await;
    let cancel = CancellationToken::new();
    let (client, _rx) = SchedulerClient::start_with_detector(
        fast_config(&tb.url()),
        MasterDetector::fixed(address(&tb)),
        framework("503"),
        cancel.clone(),
    );
    let mut state = client.state();
    let failed = support::wait_for(&mut state, WAIT, "a 503", |s| {
        matches!(s, ConnectionState::Disconnected { .. })
    })
    .await;
    let ConnectionState::Disconnected {
        reason: DisconnectReason::SubscribeFailed(text),
        ..
    } = failed
    else {
        panic!("{failed:?}")
    };
    assert!(
        text.contains("503") && text.contains("No leader elected"),
        "{text}"
    );

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let attempts: Vec<_> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "scheduler")
        .collect();
    assert!(attempts.iter().all(|c| c.status == 503), "{attempts:?}");
    // 1.5 s of 50–400 ms backoff: a handful of attempts, not hundreds.
    assert!(
        (3..=20).contains(&attempts.len()),
        "{} attempts",
        attempts.len()
    );
    let gaps: Vec<f64> = attempts.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps.iter().all(|g| *g >= 0.02), "{gaps:?}");
    cancel.cancel();
}
