//! HTTP basic authentication to the master (`--principal`, `--secret-file`)
//! against a testbed that requires it, as a master started with
//! `--authenticate_http_frameworks --authenticate_http_readwrite` does:
//! 401 with the realm's challenge, the principal checked against
//! `FrameworkInfo.principal`, and the clients' credentials accepted.

use crate::support;

use mesos_appliance::mesos::client::{Credentials, SchedulerClient, StopReason};
use mesos_appliance::mesos::operator::{OperatorClient, OperatorError};
use mesos_appliance::testbed::{Testbed, TestbedConfig};
use serde_json::json;
use support::client::*;
use support::mesos::{new_framework, post};
use tokio_util::sync::CancellationToken;

async fn guarded() -> Testbed {
    support::mesos::init();
    let mut config = TestbedConfig::for_tests(1);
    config.credentials = Some(vec![("ops".into(), "s3cret".into())]);
    Testbed::start(config).await.unwrap()
}

fn basic(principal: &str, secret: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{principal}:{secret}"))
    )
}

#[tokio::test]
async fn the_master_challenges_and_checks_the_principal() {
    let tb = guarded().await;
    let url = format!("{}/api/v1/scheduler", tb.url());
    for auth in [
        None,
        Some(basic("ops", "wrong")),
        Some(basic("nobody", "s3cret")),
    ] {
        let mut headers = vec![("Content-Type", "application/json")];
        let value;
        if let Some(a) = &auth {
            value = a.clone();
            headers.push(("Authorization", value.as_str()));
        }
        let answer = post(&url, &headers, new_framework("x", 1.0).to_string()).await;
        assert_eq!(answer.status, 401, "{auth:?}");
        assert_eq!(
            answer.header("www-authenticate"),
            Some("Basic realm=\"mesos-master-scheduler\"")
        );
    }
    let mut body = new_framework("x", 1.0);
    body["subscribe"]["framework_info"]["principal"] = json!("someone-else");
    let ok_auth = basic("ops", "s3cret");
    let answer = post(
        &url,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &ok_auth),
        ],
        body.to_string(),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.body,
        "Failed to validate scheduler::Call: Authenticated principal 'ops' does not match principal 'someone-else' set in `FrameworkInfo`"
    );
    let operator = post(
        &format!("{}/api/v1", tb.url()),
        &[("Content-Type", "application/json")],
        r#"{"type":"GET_FRAMEWORKS"}"#,
    )
    .await;
    assert_eq!(operator.status, 401);
    assert_eq!(
        operator.header("www-authenticate"),
        Some("Basic realm=\"mesos-master-readwrite\"")
    );
}

#[tokio::test]
async fn clients_with_the_right_secret_get_in_and_the_wrong_one_stops() {
    let tb = guarded().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();

    let mut config = fast_config(&tb.url());
    config.credentials = Some(Credentials::from_secret_file("ops", &secret).unwrap());
    assert!(
        !format!("{config:?}").contains("s3cret"),
        "the secret never shows in Debug"
    );
    let cancel = CancellationToken::new();
    let mut info = framework("auth");
    info.principal = Some("ops".into());
    let (_client, rx) = SchedulerClient::start(config.clone(), info, cancel.clone());
    let mut events = Events::new(rx);
    events.subscribed().await;
    let operator = OperatorClient::start(&config, cancel.clone());
    let frameworks = operator.get_frameworks().await.unwrap();
    assert_eq!(frameworks.active().count(), 1);

    let mut wrong = fast_config(&tb.url());
    wrong.credentials = Some(Credentials::new("ops", "nope"));
    let (_bad, rx) = SchedulerClient::start(wrong.clone(), framework("bad"), cancel.clone());
    let mut events = Events::new(rx);
    match events.stopped().await {
        StopReason::SubscribeRefused { status, .. } => assert_eq!(status, 401),
        other => panic!("expected a 401 refusal, got {other:?}"),
    }
    let refused = OperatorClient::start(&wrong, cancel.clone())
        .get_frameworks()
        .await;
    assert!(
        matches!(refused, Err(OperatorError::Refused { status: 401, .. })),
        "{refused:?}"
    );
    cancel.cancel();
}
