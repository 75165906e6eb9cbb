//! How far behind the Mesos stream the leader is: the age of the oldest
//! event waiting in its inbox (gauge and snapshot), and a heartbeat age
//! counted from when the newest applied event was read off the stream.

use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn the_lag_is_the_age_of_the_oldest_event_waiting() {
    let mut h = Harness::running(&service("web", 1));
    let read = Instant::now();
    // The machine gets to a heartbeat read 100 s ago, 5 more wait behind it.
    tokio::time::advance(Duration::from_secs(100)).await;
    h.machine.event_read_at(read);
    h.feed(Input::Heartbeat);
    let now = Instant::now();
    h.machine
        .inbox(Some(read + Duration::from_secs(10)), 5, true, now);
    assert_eq!(h.machine.stats.event_lag_seconds, 90.0);
    assert_eq!(h.machine.stats.event_inbox_depth, 5);
    let s = h.snapshot().await;
    let fw = &s.framework;
    let lag = fw.event_lag_seconds;
    assert!((90.0..91.0).contains(&lag), "as of the snapshot: {lag}");
    assert_eq!((fw.event_inbox_depth, fw.event_inbox_full), (5, true));
    let age = s.at - fw.last_event_at.expect("an event applied");
    assert!(
        (100.0..101.0).contains(&age),
        "read 100 s ago, not now: {age}"
    );
    // Caught up: nothing waits, no lag.
    h.machine.inbox(None, 0, false, Instant::now());
    assert_eq!(h.machine.stats.event_lag_seconds, 0.0);
    h.feed(Input::Heartbeat);
    let s = h.snapshot().await;
    assert_eq!(s.framework.event_lag_seconds, 0.0);
    assert_eq!(s.framework.event_inbox_depth, 0);
}
