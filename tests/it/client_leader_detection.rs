//! Leading-master detection with two testbed masters elected through a real
//! ZooKeeper (`docs/mesos-protocol.md#zookeeper-master-detection`, captures j, k, o):
//! the client follows the
//! leader when the leading master stops, follows a non-leader's 307, and the
//! detector reads Mesos' group znodes, legacy ones included.

use crate::support;

use std::time::Duration;

use mesos_appliance::mesos::client::{DisconnectReason, SchedulerClient};
use mesos_appliance::mesos::detector::{DetectorOptions, MasterDetector, MasterSpec};
use mesos_appliance::mesos::operator::OperatorClient;
use mesos_appliance::mesos::v1;
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use prost::Message;
use support::client::*;
use support::zookeeper::ZkServer;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

/// Two testbeds in `zk`'s group `/mesos`; the first one leads.
async fn two_masters(zk: &ZkServer) -> (Testbed, Testbed, String) {
    support::mesos::init();
    let url = format!("zk://{}/mesos", zk.connect_string());
    let start = |url: &str| {
        let mut config = TestbedConfig::for_tests(1);
        config.zk = Some(url.to_string());
        config.zk_session_timeout = Duration::from_secs(2);
        Testbed::start(config)
    };
    let leader = start(&url).await.unwrap();
    eventually("first testbed leads", WAIT, || leader.is_leading()).await;
    let follower = start(&url).await.unwrap();
    // A follower knows the leader once it answers /master/redirect with a 307.
    let probe = format!("{}/master/redirect", follower.url());
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let response = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(&probe)
            .send()
            .await
            .unwrap();
        if response.status() == 307 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "follower never learnt the leader"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!follower.is_leading());
    (leader, follower, url)
}

#[tokio::test]
async fn follows_the_leader_through_zookeeper_when_the_leading_master_stops() {
    let zk = ZkServer::start();
    let (leader, follower, url) = two_masters(&zk).await;
    let cancel = CancellationToken::new();
    let (client, rx) = SchedulerClient::start(fast_config(&url), framework("ha"), cancel.clone());
    let mut events = Events::new(rx);
    let first = events.subscribed().await;
    assert_eq!(first.master, address(&leader));
    let fid = first.framework_id.value.clone();

    // The leader stops: its znode goes with its session, the follower leads.
    leader.shutdown().await;
    let reason = events.disconnected().await;
    assert!(
        matches!(
            reason,
            DisconnectReason::StreamError(_) | DisconnectReason::LeaderChanged { .. }
        ),
        "{reason:?}"
    );
    let second = events.subscribed().await;
    assert_eq!(second.master, address(&follower));
    assert_eq!(
        second.framework_id.value, fid,
        "the same framework on the new master"
    );
    let offers = events.offers().await;
    client
        .decline(offer_ids(&offers), refuse(60.0))
        .await
        .unwrap();

    let f = Some(fid.clone());
    assert_eq!(
        summary(&scheduler_calls(&follower)),
        vec![
            (
                "SUBSCRIBE".into(),
                f.clone(),
                Some(second.stream_id.clone()),
                200
            ),
            ("DECLINE".into(), f, Some(second.stream_id.clone()), 202),
        ]
    );
    cancel.cancel();
}

#[tokio::test]
async fn pointed_at_the_non_leader_the_client_follows_its_307_and_remembers_the_leader() {
    let zk = ZkServer::start();
    let (leader, follower, _) = two_masters(&zk).await;

    // SUBSCRIBE sent to the follower itself: 307 to
    // //<leader>/master/api/v1/scheduler, followed.
    let detector = MasterDetector::fixed(address(&follower));
    let cancel = CancellationToken::new();
    let config = fast_config(&follower.url());
    let (client, rx) = SchedulerClient::start_with_detector(
        config.clone(),
        detector.clone(),
        framework("307"),
        cancel.clone(),
    );
    let mut events = Events::new(rx);
    let sub = events.subscribed().await;
    assert_eq!(sub.master, address(&leader));
    assert_eq!(
        detector.current(),
        Some(address(&leader)),
        "the 307 taught the detector"
    );
    let offers = events.offers().await;
    client
        .decline(offer_ids(&offers), refuse(60.0))
        .await
        .unwrap();

    // The follower saw exactly the one redirected SUBSCRIBE; later calls
    // went straight to the leader.
    let at_follower = scheduler_calls(&follower);
    assert_eq!(summary(&at_follower), vec![("-".into(), None, None, 307)]);
    let fid = Some(sub.framework_id.value.clone());
    assert_eq!(
        summary(&scheduler_calls(&leader)),
        vec![
            ("SUBSCRIBE".into(), None, Some(sub.stream_id.clone()), 200),
            ("DECLINE".into(), fid, Some(sub.stream_id.clone()), 202),
        ]
    );

    // The operator client follows the same way.
    let operator = OperatorClient::new(
        &config,
        MasterDetector::fixed(address(&follower)),
        cancel.clone(),
    );
    let list = operator.get_frameworks().await.unwrap();
    assert!(list.get(&sub.framework_id.value).is_some());
    let follower_operator: Vec<u16> = follower
        .calls()
        .iter()
        .filter(|c| c.api == "operator")
        .map(|c| c.status)
        .collect();
    assert_eq!(follower_operator, [307]);

    // A URL list whose first master is down and second is the follower:
    // `/master/redirect` on the follower names the leader.
    let dead = support::zookeeper::free_port();
    let spec = MasterSpec::parse(&format!("http://127.0.0.1:{dead},{}", follower.url())).unwrap();
    let listed = MasterDetector::start(spec, DetectorOptions::default(), cancel.clone());
    let mut leader_rx = listed.leader();
    let found = support::wait_for(
        &mut leader_rx,
        WAIT,
        "leader from the list",
        Option::is_some,
    )
    .await;
    assert_eq!(found, Some(address(&leader)));
    assert_eq!(listed.problem(), None);
    cancel.cancel();
}

/// With no master reachable, "no leader" is a state with a reason naming
/// each master and what went wrong (shown on the dashboard).
#[tokio::test]
async fn with_every_master_down_the_detector_says_why() {
    support::mesos::init();
    let (a, b) = (
        support::zookeeper::free_port(),
        support::zookeeper::free_port(),
    );
    let spec = MasterSpec::parse(&format!("http://127.0.0.1:{a},http://127.0.0.1:{b}")).unwrap();
    let cancel = CancellationToken::new();
    let detector = MasterDetector::start(spec, DetectorOptions::default(), cancel.clone());
    let deadline = std::time::Instant::now() + WAIT;
    let problem = loop {
        if let Some(p) = detector.problem() {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "no problem reported");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(
        problem.contains(&format!("127.0.0.1:{a}: cannot connect"))
            && problem.contains(&format!("127.0.0.1:{b}: cannot connect")),
        "{problem}"
    );
    assert_eq!(detector.current(), None);
    cancel.cancel();
}

#[tokio::test]
async fn the_detector_reads_mesos_group_znodes_and_ignores_the_rest() {
    support::mesos::init();
    let server = ZkServer::start();
    let client = zk::Client::connector()
        .with_auth("digest", b"mesos:secret")
        .connect(&server.connect_string())
        .await
        .unwrap();
    // Readable only by the digest identity `mesos:secret`.
    let private = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    let url = format!("zk://mesos:secret@{}/mesos/group", server.connect_string());
    let cancel = CancellationToken::new();
    let detector = MasterDetector::start(
        MasterSpec::parse(&url).unwrap(),
        DetectorOptions::default(),
        cancel.clone(),
    );
    let mut leader = detector.leader();
    // The group does not exist yet: no leader, and its creation is noticed.
    assert_eq!(*leader.borrow(), None);
    client.mkdir("/mesos/group", &private).await.unwrap();
    client
        .create("/mesos/group/log_replicas", b"", &private)
        .await
        .unwrap();

    let json = br#"{"address":{"hostname":"m5","ip":"10.0.0.5","port":5055},"hostname":"m5","id":"x","ip":84017162,"pid":"master@10.0.0.5:5055","port":5055,"version":"1.12.0"}"#;
    let legacy = v1::MasterInfo {
        id: "y".into(),
        ip: u32::from_le_bytes([10, 0, 0, 7]),
        port: 5057,
        ..Default::default()
    };
    client
        .create("/mesos/group/0000000009", b"master@10.0.0.9:5059", &private)
        .await
        .unwrap();
    client
        .create(
            "/mesos/group/info_0000000007",
            &legacy.encode_to_vec(),
            &private,
        )
        .await
        .unwrap();
    client
        .create("/mesos/group/json.info_0000000005", json, &private)
        .await
        .unwrap();

    let wait = |want: &'static str| {
        let mut leader = leader.clone();
        async move {
            support::wait_for(&mut leader, WAIT, want, |l| {
                l.as_ref().map(|a| a.to_string()).as_deref() == Some(want)
            })
            .await;
        }
    };
    wait("http://m5:5055").await;
    // Without the URL's credentials the group cannot be read: no leader.
    let anonymous = format!("zk://{}/mesos/group", server.connect_string());
    let blind = MasterDetector::start(
        MasterSpec::parse(&anonymous).unwrap(),
        DetectorOptions::default(),
        cancel.clone(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(blind.current(), None);
    client
        .delete("/mesos/group/json.info_0000000005", None)
        .await
        .unwrap();
    wait("http://10.0.0.7:5057").await;
    client
        .delete("/mesos/group/info_0000000007", None)
        .await
        .unwrap();
    wait("http://10.0.0.9:5059").await;
    client
        .delete("/mesos/group/0000000009", None)
        .await
        .unwrap();
    support::wait_for(&mut leader, WAIT, "no leader", Option::is_none).await;
    cancel.cancel();
}
