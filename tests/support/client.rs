//! Helpers for tests of the scheduler and operator clients
//! (`mesos_appliance::mesos::client`, `::operator`): a fast client
//! configuration, a framework, an event receiver with deadlines, and waits on
//! the testbed's call log.

use std::time::{Duration, Instant};

use mesos_appliance::mesos::client::{ClientConfig, ClientEvent, StopReason, Subscription};
use mesos_appliance::mesos::detector::{MasterAddress, MasterSpec};
use mesos_appliance::mesos::v1;
use mesos_appliance::mesos::v1::scheduler::{Event, event};
use mesos_appliance::testbed::{CallRecord, Testbed};
use tokio::sync::mpsc;

/// How long a test waits for an expected client event.
pub const WAIT: Duration = Duration::from_secs(10);

/// A configuration for `master` with short backoffs (50–400 ms) and
/// timeouts, so that retries show up within a test's patience.
pub fn fast_config(master: &str) -> ClientConfig {
    super::mesos::init();
    ClientConfig {
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(400),
        connect_timeout: Duration::from_secs(2),
        call_timeout: Duration::from_secs(5),
        operator_retry_for: Duration::from_secs(5),
        zk_session_timeout: Duration::from_secs(2),
        ..ClientConfig::new(MasterSpec::parse(master).expect("valid --master"))
    }
}

/// The address of a testbed.
pub fn address(tb: &Testbed) -> MasterAddress {
    let url = reqwest::Url::parse(&tb.url()).expect("testbed URL");
    MasterAddress::of_url(&url).expect("http URL")
}

/// A new framework (`user: root`, failover timeout 60 s).
pub fn framework(name: &str) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "root".into(),
        name: name.into(),
        failover_timeout: Some(60.0),
        ..Default::default()
    }
}

/// The same framework re-using `id`.
pub fn existing_framework(name: &str, id: &str) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        id: Some(v1::FrameworkId { value: id.into() }),
        ..framework(name)
    }
}

/// The client's event channel, with waits that fail the test on timeout.
pub struct Events {
    rx: mpsc::Receiver<ClientEvent>,
    /// Events skipped by `expect`, in order.
    pub seen: Vec<ClientEvent>,
}

impl Events {
    pub fn new(rx: mpsc::Receiver<ClientEvent>) -> Self {
        Self {
            rx,
            seen: Vec::new(),
        }
    }

    /// The next event within `wait`; `None` if none came (or the channel closed).
    pub async fn next_within(&mut self, wait: Duration) -> Option<ClientEvent> {
        tokio::time::timeout(wait, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// The first event matching `wanted` within [`WAIT`], keeping the others in `seen`.
    pub async fn expect(
        &mut self,
        what: &str,
        wanted: impl Fn(&ClientEvent) -> bool,
    ) -> ClientEvent {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(event)) if wanted(&event) => return event,
                Ok(Some(event)) => self.seen.push(event),
                Ok(None) => panic!(
                    "event channel closed while waiting for {what}; seen {:#?}",
                    self.seen
                ),
                Err(_) => panic!("no {what} within {WAIT:?}; seen {:#?}", self.seen),
            }
        }
    }

    /// The next `Subscribed`.
    pub async fn subscribed(&mut self) -> Subscription {
        match self
            .expect("Subscribed", |e| matches!(e, ClientEvent::Subscribed(_)))
            .await
        {
            ClientEvent::Subscribed(sub) => *sub,
            _ => unreachable!(),
        }
    }

    /// The next OFFERS event's offers.
    pub async fn offers(&mut self) -> Vec<v1::Offer> {
        match self
            .expect("OFFERS", |e| is_event(e, event::Type::Offers))
            .await
        {
            ClientEvent::Event(e) => e.offers.expect("OFFERS body").offers,
            _ => unreachable!(),
        }
    }

    /// The next `Disconnected`'s reason.
    pub async fn disconnected(&mut self) -> mesos_appliance::mesos::client::DisconnectReason {
        match self
            .expect("Disconnected", |e| {
                matches!(e, ClientEvent::Disconnected { .. })
            })
            .await
        {
            ClientEvent::Disconnected { reason } => reason,
            _ => unreachable!(),
        }
    }

    /// The `Stopped` event; asserts the channel closes right after it.
    pub async fn stopped(&mut self) -> StopReason {
        let reason = match self
            .expect("Stopped", |e| matches!(e, ClientEvent::Stopped(_)))
            .await
        {
            ClientEvent::Stopped(reason) => reason,
            _ => unreachable!(),
        };
        assert!(
            self.next_within(WAIT).await.is_none(),
            "an event after Stopped"
        );
        reason
    }
}

/// True if `e` is a stream event of type `kind`.
pub fn is_event(e: &ClientEvent, kind: event::Type) -> bool {
    matches!(e, ClientEvent::Event(ev) if ev.r#type() == kind)
}

/// The stream event inside a client event.
pub fn stream_event(e: &ClientEvent) -> Option<&Event> {
    match e {
        ClientEvent::Event(ev) => Some(ev),
        _ => None,
    }
}

/// Offer IDs of `offers`.
pub fn offer_ids(offers: &[v1::Offer]) -> Vec<v1::OfferId> {
    offers.iter().map(|o| o.id.clone()).collect()
}

/// `refuse_seconds` filters.
pub fn refuse(seconds: f64) -> Option<v1::Filters> {
    Some(v1::Filters {
        refuse_seconds: Some(seconds),
    })
}

/// Scheduler calls in the testbed's log (any type), oldest first.
pub fn scheduler_calls(tb: &Testbed) -> Vec<CallRecord> {
    tb.calls()
        .into_iter()
        .filter(|c| c.api == "scheduler")
        .collect()
}

/// `(type, framework_id, stream_id, status)` of each call, for exact comparisons.
pub fn summary(calls: &[CallRecord]) -> Vec<(String, Option<String>, Option<String>, u16)> {
    calls
        .iter()
        .map(|c| {
            (
                c.call_type.clone(),
                c.framework_id.clone(),
                c.stream_id.clone(),
                c.status,
            )
        })
        .collect()
}

/// Checks that `cond` holds throughout `window`, polling every 10 ms, and
/// panics naming `what` the moment it does not: the shape of every "nothing
/// happens" check (no retry loop, no second SUBSCRIBE, no call after a
/// fence). Such a check can only bound the wait, so keep `window` to a few
/// multiples of the retry period it is meant to catch.
pub async fn holds_for(what: &str, window: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    loop {
        assert!(
            cond(),
            "{what}: stopped holding after {:?}",
            start.elapsed()
        );
        if start.elapsed() >= window {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `cond` every 10 ms until it holds; panics naming `what` after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > timeout {
            panic!("{what}: not within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
