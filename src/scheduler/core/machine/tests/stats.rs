//! The machine's counts for the metrics: counters since the last take,
//! gauges as they are.

use super::*;

#[tokio::test(start_paused = true)]
async fn stats_count_since_the_last_take_and_keep_the_gauges() {
    let spec = service("web", 1);
    let mut h = Harness::leader(std::slice::from_ref(&spec), &[]);
    h.subscribe();
    h.answer_all();
    h.offer("o-1", "agent-0", 4.0);
    h.answer_all();
    let stats = h.machine.take_stats();
    assert!(stats.framework_subscribed);
    assert_eq!(stats.offers.get("received"), Some(&1));
    assert_eq!(stats.offers.get("used"), Some(&1));
    assert_eq!(stats.launches, 1);
    let again = h.machine.take_stats();
    assert!(again.framework_subscribed, "a gauge stays");
    assert!(again.offers.is_empty() && again.launches == 0, "{again:?}");

    // Published to the registry under the names /metrics shows.
    let mut registry = crate::scheduler::metrics::registry();
    let metrics = crate::scheduler::metrics::Metrics::register(&mut registry);
    metrics.record(&stats);
    metrics.record(&again);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    for line in [
        "launches_total 1",
        "offers_total{event=\"received\"} 1",
        "framework_subscribed 1",
    ] {
        assert!(text.lines().any(|l| l.ends_with(line)), "{line} in\n{text}");
    }
}
