//! The operator client against the testbed: GET_FRAMEWORKS (active, inactive
//! and completed frameworks) and TEARDOWN of a known, an unknown and an
//! already removed framework, over the v1 API and the legacy endpoint
//! (`docs/mesos-protocol.md#operator-api`, capture h).

use crate::support;
use crate::support::testbed;

use std::time::Duration;

use mesos_appliance::mesos::client::SchedulerClient;
use mesos_appliance::mesos::detector::MasterDetector;
use mesos_appliance::mesos::operator::{
    NO_SUCH_FRAMEWORK, OperatorClient, OperatorError, framework_id,
};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use support::client::*;
use tokio_util::sync::CancellationToken;

/// Subscribes a framework named `name`; returns its ID, the token that
/// disconnects it, and its events (dropping them would stop the client).
async fn framework_on(tb: &Testbed, name: &str) -> (String, CancellationToken, Events) {
    let cancel = CancellationToken::new();
    let (_client, rx) =
        SchedulerClient::start(fast_config(&tb.url()), framework(name), cancel.clone());
    let mut events = Events::new(rx);
    let id = events.subscribed().await.framework_id.value;
    (id, cancel, events)
}

fn refused_400() -> OperatorError {
    OperatorError::Refused {
        status: 400,
        body: NO_SUCH_FRAMEWORK.into(),
    }
}

#[tokio::test]
async fn teardown_of_a_known_an_unknown_and_an_already_removed_framework() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (known, _cancel, _events) = framework_on(&tb, "known").await;
    let operator = OperatorClient::start(&fast_config(&tb.url()), CancellationToken::new());

    let before = operator.get_frameworks().await.unwrap();
    let listed = before.get(&known).expect("listed while subscribed");
    assert!(listed.active && listed.connected && !listed.recovered);
    assert_eq!(listed.framework_info.name, "known");

    operator.teardown(&known).await.unwrap();
    let unknown = operator.teardown("no-such-framework").await.unwrap_err();
    assert_eq!(unknown, refused_400());
    assert!(unknown.is_no_such_framework());
    let again = operator.teardown(&known).await.unwrap_err();
    assert_eq!(again, refused_400());

    let after = operator.get_frameworks().await.unwrap();
    assert!(after.get(&known).is_none());
    assert!(after.is_completed(&known));

    let operator_calls: Vec<_> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "operator")
        .map(|c| (c.call_type, c.framework_id, c.status))
        .collect();
    assert_eq!(
        operator_calls,
        vec![
            ("GET_FRAMEWORKS".into(), None, 200),
            ("TEARDOWN".into(), Some(known.clone()), 200),
            ("TEARDOWN".into(), Some("no-such-framework".into()), 400),
            ("TEARDOWN".into(), Some(known.clone()), 400),
            ("GET_FRAMEWORKS".into(), None, 200),
        ]
    );
    // The v1 API answered every TEARDOWN: no fallback to the legacy endpoint.
    assert!(tb.calls().iter().all(|c| c.api != "teardown"));
}

#[tokio::test]
async fn get_frameworks_tells_active_inactive_and_completed_apart() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (active, _c1, _e1) = framework_on(&tb, "active").await;
    let (inactive, disconnect, _e2) = framework_on(&tb, "inactive").await;
    let (removed, _c3, _e3) = framework_on(&tb, "removed").await;
    disconnect.cancel();
    eventually("framework disconnected", Duration::from_secs(2), || {
        tb.frameworks()
            .iter()
            .any(|f| f.id == inactive && !f.connected)
    })
    .await;
    let operator = OperatorClient::start(&fast_config(&tb.url()), CancellationToken::new());
    operator.teardown(&removed).await.unwrap();

    let list = operator.get_frameworks().await.unwrap();
    let ids = |it: &mut dyn Iterator<Item = &mesos_appliance::mesos::operator::Framework>| {
        it.filter_map(|f| framework_id(f).map(str::to_string))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&mut list.active()), [active]);
    assert_eq!(ids(&mut list.inactive()), std::slice::from_ref(&inactive));
    assert_eq!(ids(&mut list.completed.iter()), [removed]);
    assert!(!list.get(&inactive).unwrap().connected);
}

#[tokio::test]
async fn legacy_teardown_endpoint() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (id, _cancel, _events) = framework_on(&tb, "legacy").await;
    let operator = OperatorClient::new(
        &fast_config(&tb.url()),
        MasterDetector::fixed(address(&tb)),
        CancellationToken::new(),
    );
    operator.teardown_legacy(&id).await.unwrap();
    assert_eq!(
        operator.teardown_legacy(&id).await.unwrap_err(),
        refused_400()
    );
    let legacy: Vec<_> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "teardown")
        .map(|c| (c.framework_id, c.status))
        .collect();
    assert_eq!(legacy, vec![(Some(id.clone()), 200), (Some(id), 400)]);
}

/// A master without the v1 operator API (404 on `/api/v1`): TEARDOWN falls
/// back to `POST /master/teardown`.
#[tokio::test]
async fn teardown_falls_back_to_the_legacy_endpoint_without_the_v1_api() {
    let tb = testbed(TestbedConfig::for_tests(1)).await;
    let (id, _cancel, _events) = framework_on(&tb, "old-master").await;
    tb.remove_operator_api();
    let operator = OperatorClient::new(
        &fast_config(&tb.url()),
        MasterDetector::fixed(address(&tb)),
        CancellationToken::new(),
    );
    operator.teardown(&id).await.unwrap();
    let calls: Vec<_> = tb
        .calls()
        .into_iter()
        .filter(|c| c.api != "scheduler")
        .map(|c| (c.api, c.status))
        .collect();
    assert_eq!(
        calls,
        vec![("operator".to_string(), 404), ("teardown".to_string(), 200)]
    );
    assert!(tb.frameworks().iter().any(|f| f.id == id && f.completed));
}

#[tokio::test]
async fn a_leaderless_master_is_retried_then_reported() {
    support::mesos::init();
    let mut config = TestbedConfig::for_tests(1);
    config.zk = Some(format!(
        "zk://127.0.0.1:{}/mesos",
        support::zookeeper::free_port()
    ));
    let tb = Testbed::start(config).await.unwrap();
    let mut client_config = fast_config(&tb.url());
    client_config.operator_retry_for = Duration::from_millis(1200);
    let operator = OperatorClient::new(
        &client_config,
        MasterDetector::fixed(address(&tb)),
        CancellationToken::new(),
    );
    let err = operator.get_frameworks().await.unwrap_err();
    let OperatorError::Unavailable { attempts, last } = &err else {
        panic!("{err:?}")
    };
    assert!(
        last.contains("503") && last.contains("No leader elected"),
        "{last}"
    );
    let seen = tb
        .calls()
        .into_iter()
        .filter(|c| c.api == "operator")
        .count();
    assert_eq!(seen as u32, *attempts);
    assert!((2..=15).contains(attempts), "{attempts} attempts in 1.2 s");
}
