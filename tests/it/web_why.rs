//! "Why isn't it running?" end to end: a replica (in-memory coordinator:
//! ZooKeeper is not what this is about) with its web server against the
//! testbed. A service no agent can offer memory for shows its offers
//! declined for insufficient mem; a service whose image no agent can run
//! (the testbed's agents have no image provider: TASK_FAILED,
//! REASON_CONTAINER_LAUNCH_FAILED, as `src/slave/slave.cpp` reports it)
//! shows its last failure with Mesos' reason and message — in
//! `/api/v1/services` and on the Services page.

use crate::support;

use std::time::{Duration, Instant};

use mesos_appliance::testbed::TestbedConfig;
use serde_json::{Value, json};
use support::appliance::{Served, services};
use support::processes::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_say_what_failed_and_why_offers_were_declined() {
    support::mesos::init();
    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    let specs = services(json!([
        {"name": "huge", "command": "sleep 1000", "cpus": 0.1, "mem": 1_000_000, "instances": 1},
        {"name": "boxed", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": 1,
         "container": {"image": "registry.example:5000/team/web:1.4"},
         "restart_backoff": "1s", "restart_backoff_max": "4s"},
        {"name": "plain", "command": "sleep 1000", "cpus": 0.1, "mem": 32, "instances": 1}
    ]));
    let served = Served::start("why", &tb.url(), specs).await;
    let url = served.url.clone();
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
    served.stop.cancel();
    tb.shutdown().await;
}
