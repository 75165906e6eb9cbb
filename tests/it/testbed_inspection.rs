//! Inspection reads of a busy testbed: the call log is paged, bounded and
//! rendered without holding the master, so that `/testbed/agents` (and
//! every scheduler call) is answered while a big read is written
//! (`docs/testbed.md#inspection`).

use crate::support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use mesos_appliance::testbed::TestbedConfig;
use serde_json::{Value, json};
use support::mesos::{call, get_status_json, launch};

/// Scheduler calls recorded, and LAUNCHes in each: the log then holds
/// about 6 MB of calls in Mesos JSON, several seconds to render in a debug
/// build.
const CALLS: usize = 200;
const LAUNCHES: usize = 100;

/// An ACCEPT of a framework that never subscribed: refused, but parsed
/// and recorded whole.
fn big_accept(n: usize) -> Value {
    let offer = json!({"id": {"value": format!("o-{n}")}, "agent_id": {"value": "a-S0"}});
    let ids: Vec<String> = (0..LAUNCHES).map(|i| format!("task-{n}-{i}")).collect();
    let tasks: Vec<(&str, f64, f64)> = ids.iter().map(|id| (id.as_str(), 0.01, 1.0)).collect();
    launch("never-subscribed", &offer, &tasks)
}

/// `GET url`'s status and JSON, as an owned future to spawn.
async fn get(url: String) -> (u16, Value) {
    get_status_json(&url).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_answered_while_a_big_call_log_renders() {
    let tb = support::testbed(TestbedConfig::for_tests(2)).await;
    let url = tb.url();
    futures::stream::iter(0..CALLS)
        .map(|n| call(&url, "no-stream", big_accept(n)))
        .buffer_unordered(4)
        .collect::<Vec<_>>()
        .await;

    let started = Instant::now();
    let render = tokio::spawn(get(format!("{url}/testbed/calls?limit=10000")));
    let mut worst = Duration::ZERO;
    let mut probes = 0;
    while !render.is_finished() {
        let asked = Instant::now();
        let (status, agents) = get(format!("{url}/testbed/agents")).await;
        assert_eq!(status, 200);
        assert_eq!(agents["agents"].as_array().map(Vec::len), Some(2));
        worst = worst.max(asked.elapsed());
        probes += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, log) = render.await.unwrap();
    let rendered = started.elapsed();
    assert_eq!(status, 200);
    let calls = log["calls"].as_array().unwrap();
    assert_eq!(calls.len(), CALLS);
    assert_eq!(
        calls[0]["call"]["accept"]["operations"][0]["launch"]["task_infos"]
            .as_array()
            .map(Vec::len),
        Some(LAUNCHES)
    );
    eprintln!("render {rendered:?}; /testbed/agents: {probes} probes, worst {worst:?}");
    // Held behind the render, /testbed/agents would wait about as long as
    // it (the first probe until it ends); free, it answers in well under a
    // second, a fifth of the render allowing for a loaded machine.
    let bound = Duration::from_secs(1).max(rendered / 5);
    assert!(
        worst < bound,
        "/testbed/agents took {worst:?} during a {rendered:?} render"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_log_is_read_in_pages_of_known_types() {
    let tb = support::testbed(TestbedConfig::for_tests(1)).await;
    let url = tb.url();
    for n in 0..5 {
        let decline = json!({"framework_id": {"value": "f"}, "type": "DECLINE",
            "decline": {"offer_ids": [{"value": format!("o-{n}")}]}});
        call(&url, "no-stream", decline).await;
        call(&url, "no-stream", big_accept(n)).await;
    }
    let (status, page) = get(format!("{url}/testbed/calls?type=DECLINE&limit=2")).await;
    assert_eq!(status, 200, "{page}");
    let seqs = |page: &Value| -> Vec<u64> {
        let calls = page["calls"].as_array().unwrap();
        calls.iter().map(|c| c["seq"].as_u64().unwrap()).collect()
    };
    assert_eq!(seqs(&page), [0, 2]);
    assert_eq!((&page["next"], &page["evicted"]), (&json!(4), &json!(0)));
    let (_, page) = get(format!("{url}/testbed/calls?type=DECLINE&since=4&limit=9")).await;
    assert_eq!(seqs(&page), [4, 6, 8]);
    assert_eq!(page["next"], Value::Null);
    let (_, all) = get(format!("{url}/testbed/calls")).await;
    assert_eq!(all["calls"].as_array().map(Vec::len), Some(10));
    // The library API reads the same log.
    assert_eq!(tb.calls().len(), 10);
    assert!(
        tb.scheduler_calls("ACCEPT")
            .iter()
            .all(|c| c.api == "scheduler")
    );
    assert_eq!(tb.scheduler_calls("ACCEPT").len(), 5);

    let (status, error) = get(format!("{url}/testbed/calls?type=ACCEPTT")).await;
    assert_eq!(status, 400);
    let text = error["error"].as_str().unwrap();
    assert!(
        text.contains("'ACCEPTT'") && text.contains("ACCEPT, ") && text.contains("SUBSCRIBE"),
        "{text}"
    );
    for bad in ["limit=0", "limit=10001", "since=-1", "limit=x", "page=2"] {
        let (status, error) = get(format!("{url}/testbed/calls?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {error}");
    }
}
