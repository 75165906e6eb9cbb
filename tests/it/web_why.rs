//! "Why isn't it running?" end to end: a replica (in-memory coordinator:
//! ZooKeeper is not what this is about) with its web server against the
//! testbed. A service no agent can offer memory for shows its offers
//! declined for insufficient mem; a service whose image no agent can run
//! (the testbed's agents have no image provider: TASK_FAILED,
//! REASON_CONTAINER_LAUNCH_FAILED, as `src/slave/slave.cpp` reports it)
//! shows its last failure with Mesos' reason and message — in
//! `/api/v1/services` and on the Services page.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mesos_appliance::app::start_replica;
use mesos_appliance::coordination::memory::MemoryCoordinator;
use mesos_appliance::mesos::client::ClientConfig;
use mesos_appliance::mesos::detector::MasterSpec;
use mesos_appliance::testbed::TestbedConfig;
use mesos_appliance::web::WebConfig;
use serde_json::{Value, json};
use support::appliance::{core_config, services};
use support::processes::WAIT;
use support::zookeeper::free_port;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_say_what_failed_and_why_offers_were_declined() {
    support::mesos::init();
    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut info = support::replicas::replica("why");
    info.advertised_url = url.clone();
    let mut core = core_config();
    core.framework_name = "why".into();
    let specs = services(json!([
        {"name": "huge", "command": "sleep 1000", "cpus": 0.1, "mem": 1_000_000, "instances": 1},
        {"name": "boxed", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": 1,
         "container": {"image": "registry.example:5000/team/web:1.4"},
         "restart_backoff": "1s", "restart_backoff_max": "4s"},
        {"name": "plain", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": 1}
    ]));
    let web = WebConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), url.clone());
    let stop = CancellationToken::new();
    let client = ClientConfig::new(MasterSpec::parse(&tb.url()).unwrap());
    let _running = start_replica(
        core,
        client,
        Arc::new(MemoryCoordinator::new(info)),
        specs,
        web,
        stop.clone(),
    )
    .await
    .unwrap();
    let http = support::mesos::client();
    let service = |all: &Value, name: &str| {
        all["services"]
            .as_array()
            .and_then(|s| s.iter().find(|x| x["name"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let deadline = Instant::now() + WAIT;
    let all = loop {
        let all: Value = match http.get(format!("{url}/api/v1/services")).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        let huge = service(&all, "huge");
        let boxed = service(&all, "boxed");
        if huge["offers"]["reasons"]["insufficient_mem"].as_u64() > Some(0)
            && boxed["last_failure"].is_object()
        {
            break all;
        }
        assert!(Instant::now() < deadline, "not shown: {all}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let huge = service(&all, "huge");
    let offers = &huge["offers"];
    assert!(offers["processed"].as_u64() > Some(0), "{offers}");
    assert!(offers["last_offer_at"].is_number(), "{offers}");
    assert!(huge.get("last_failure").is_none(), "{huge}");
    let failure = &service(&all, "boxed")["last_failure"];
    assert_eq!(failure["state"], "TASK_FAILED", "{failure}");
    assert_eq!(
        failure["reason"], "REASON_CONTAINER_LAUNCH_FAILED",
        "{failure}"
    );
    assert_eq!(
        failure["message"],
        "Failed to launch container: Unsupported container image type: DOCKER"
    );
    assert!(
        failure["task_id"].as_str().unwrap().starts_with("boxed."),
        "{failure}"
    );
    let plain = service(&all, "plain");
    assert!(plain.get("last_failure").is_none(), "{plain}");

    // The Services page says the same.
    let html = http
        .get(format!("{url}/services"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let row = |id: &str| {
        let start = html
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no {id} in {html}"));
        html[start..].split("</tr>").next().unwrap().to_string()
    };
    let offers_row = row("offers-huge");
    assert!(offers_row.contains("offers declined"), "{offers_row}");
    assert!(offers_row.contains("insufficient mem"), "{offers_row}");
    let failure_row = row("last-failure-boxed");
    assert!(
        failure_row.contains("TASK_FAILED")
            && failure_row.contains("REASON_CONTAINER_LAUNCH_FAILED")
            && failure_row.contains("Unsupported container image type: DOCKER"),
        "{failure_row}"
    );
    assert!(!html.contains("id=\"last-failure-plain\""));
    stop.cancel();
    tb.shutdown().await;
}
