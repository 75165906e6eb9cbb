//! The public event stream, `GET /api/v1/events/stream`: server-sent
//! events of task status updates, health changes, services and their
//! rollouts, agents, leadership and audit entries, with IDs a client
//! resumes from (`docs/events.md`, the consumer's contract).
//!
//! One *hub* task per replica ([`start`]) watches the scheduler's
//! snapshots and, while this replica leads, turns each change into typed
//! events ([`diff`]), polls the audit log's tail, and appends them to the
//! [`journal::Journal`]: a bounded buffer (a `Last-Event-ID` resumes from
//! it) and a bounded broadcast to live streams. A stream that falls
//! [`EventStreamConfig::max_lag`] events behind is ended with a final
//! `disconnect` event saying so. A follower answers 307 to the same URL on
//! the leader (as Marathon's standbys redirect event subscribers,
//! `docs/events.md#followers`), a replica that knows no leader 503.

pub mod diff;
pub mod journal;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast, watch};

use super::AppState;
use super::error::AppError;
use crate::scheduler::{FieldError, Snapshot};
use journal::{EventId, Item, Journal, Start, Stored};

/// The path of the stream.
pub const PATH: &str = "/api/v1/events/stream";

/// How often the leader reads the newest audit entry (besides a nudge
/// after each entry this replica writes).
pub const AUDIT_POLL: Duration = Duration::from_secs(1);

/// How long a leader's stream request waits for the hub to learn its
/// epoch (one ZooKeeper read right after an election) before answering
/// 503.
pub const READY_WAIT: Duration = Duration::from_millis(500);

/// The event types a client may ask for with `?type=`; `resync` and
/// `disconnect` are always sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A task's status update or launch ([`diff::TaskStatusData`]).
    TaskStatus,
    /// A task's health check result changed ([`diff::HealthData`]).
    Health,
    /// A service added, updated or removed ([`diff::ServiceData`]).
    Service,
    /// A rollout started, stepped, halted, resumed or ended
    /// ([`diff::DeploymentData`]).
    Deployment,
    /// An agent added, removed, or changing state ([`diff::AgentData`]).
    Agent,
    /// This replica was elected or lost leadership ([`LeadershipData`]).
    Leadership,
    /// An audit entry ([`crate::web::audit::AuditEntry`]).
    Audit,
}

impl EventType {
    /// Every type.
    pub const ALL: [EventType; 7] = [
        EventType::TaskStatus,
        EventType::Health,
        EventType::Service,
        EventType::Deployment,
        EventType::Agent,
        EventType::Leadership,
        EventType::Audit,
    ];

    /// The `event:` name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TaskStatus => "task_status",
            EventType::Health => "health",
            EventType::Service => "service",
            EventType::Deployment => "deployment",
            EventType::Agent => "agent",
            EventType::Leadership => "leadership",
            EventType::Audit => "audit",
        }
    }

    /// The type named `name`.
    pub fn from_name(name: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// `leadership`: this replica was elected (the first event of its epoch)
/// or lost leadership (the last).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LeadershipData {
    /// When the hub saw it, seconds since the UNIX epoch.
    pub at: f64,
    /// `elected` or `lost`.
    pub change: &'static str,
    /// The replica's advertised URL.
    pub replica: String,
    /// Its replica ID.
    pub replica_id: String,
    /// Its leadership term (counts per replica, from 1).
    pub term: u64,
    /// The epoch of the event IDs (its election sequence number).
    pub epoch: u64,
}

/// Bounds of the stream (`WebConfig::events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventStreamConfig {
    /// Events kept for resuming (default 4096).
    pub buffer: usize,
    /// Events a stream may fall behind before it is ended with a
    /// `disconnect` (default 1024; rounded up to a power of two).
    pub max_lag: usize,
    /// Time between keep-alive comments on an idle stream (default 15 s).
    pub keep_alive: Duration,
}

impl Default for EventStreamConfig {
    fn default() -> Self {
        EventStreamConfig {
            buffer: 4096,
            max_lag: 1024,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// The per-replica state of the stream: the journal and the hub's flags.
pub struct Hub {
    config: EventStreamConfig,
    journal: Journal,
    started: AtomicBool,
    /// The epoch served, as the hub changes it.
    epoch: watch::Sender<Option<u64>>,
    audit: Notify,
}

impl Hub {
    /// A hub with `config`'s bounds; nothing runs until [`start`].
    pub fn new(config: EventStreamConfig) -> Hub {
        Hub {
            config,
            journal: Journal::new(config.buffer, config.max_lag),
            started: AtomicBool::new(false),
            epoch: watch::channel(None).0,
            audit: Notify::new(),
        }
    }

    /// The journal (tests publish into it directly).
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The time between keep-alive comments on an idle stream.
    pub fn keep_alive(&self) -> Duration {
        self.config.keep_alive
    }

    /// Says an audit entry was just written: the hub reads the log's tail
    /// now rather than at its next poll.
    pub fn nudge_audit(&self) {
        self.audit.notify_one();
    }
}

/// Starts the hub task of `state` unless it runs; it ends with the
/// server's shutdown. Called by `serve_on` and by the first stream
/// request (a router used without `serve_on`, as in tests).
pub fn start(state: &AppState) {
    if state.events.started.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(run(state.clone()));
}

/// What the hub knows of this replica's leadership.
struct Lead {
    term: u64,
    epoch: u64,
    /// The newest audit sequence number published or seen at election
    /// (`Some(None)`: the log was empty); `None` until first read.
    audit: Option<Option<u64>>,
}

async fn run(state: AppState) {
    let hub = &state.events;
    let mut snapshots = state.handle.subscribe();
    let mut prev: Arc<Snapshot> = snapshots.borrow_and_update().clone();
    let mut lead: Option<Lead> = None;
    let mut tick = tokio::time::interval(AUDIT_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let shutdown = state.shutdown.clone();
    let mut watching = true;
    loop {
        let s = snapshots.borrow().clone();
        match (s.leadership.term(), &lead) {
            (Some(term), Some(l)) if l.term == term => {
                if !Arc::ptr_eq(&prev, &s) {
                    let keep = hub.journal.capacity();
                    let (skipped, events) = events_between(prev, s.clone(), keep).await;
                    hub.journal.skip(skipped);
                    for (kind, data) in events {
                        hub.journal.publish(kind, data);
                    }
                    prev = s;
                }
            }
            (Some(term), _) => {
                if let Some(l) = lead.take() {
                    lost(&state, &s, &l, why_lost(&shutdown));
                }
                // A new term: learn the epoch; until then nothing is
                // published (and `prev` keeps the last snapshot seen).
                if let Some(epoch) = epoch_of(&state).await {
                    hub.journal.begin(epoch);
                    let data = leadership(&s, "elected", term, epoch);
                    hub.journal
                        .publish(EventType::Leadership.as_str(), data.to_string());
                    hub.epoch.send_replace(Some(epoch));
                    lead = Some(Lead {
                        term,
                        epoch,
                        audit: None,
                    });
                    prev = s;
                    tracing::info!(epoch, term, "event stream: serving as leader");
                }
            }
            (None, _) => {
                if let Some(l) = lead.take() {
                    lost(&state, &s, &l, why_lost(&shutdown));
                }
                prev = s;
            }
        }
        if let Some(l) = &mut lead {
            audit_tail(&state, l).await;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = snapshots.changed(), if watching => {
                // The core is gone (the process is stopping): serve what
                // is journalled until the shutdown.
                watching = changed.is_ok();
            }
            _ = tick.tick() => {}
            _ = hub.audit.notified() => {}
        }
    }
    // A graceful stop ends the epoch as a lost election does: the
    // `leadership` `lost` event, then the `disconnect`. Streams wait for
    // them before they close ([`sse`]).
    match lead.take() {
        Some(l) => lost(&state, &snapshots.borrow().clone(), &l, STOPPING),
        None => {
            hub.journal.end(STOPPING);
            hub.epoch.send_replace(None);
        }
    }
}

/// The newest `keep` events between snapshots `before` and `now`, as the
/// journal keeps them (type, JSON text), and how many older ones were not
/// made ([`diff::diff_tail`]). Made on tokio's blocking pool: at 100,000
/// tasks a full snapshot after a busy second brings thousands of events to
/// serialise, tens of milliseconds that would hold up an async worker — the
/// core's, or the one a command's handler waits for.
async fn events_between(
    before: Arc<Snapshot>,
    now: Arc<Snapshot>,
    keep: usize,
) -> (u64, Vec<(&'static str, String)>) {
    let made = move || -> (u64, Vec<(&'static str, String)>) {
        let (skipped, found) = diff::diff_tail(&before, &now, keep);
        let made = found
            .into_iter()
            .map(|(kind, data)| {
                // Written by doubling, the text has up to twice the room it
                // needs; the journal keeps thousands of them.
                let mut text = data.to_string();
                text.shrink_to_fit();
                (kind.as_str(), text)
            })
            .collect();
        (skipped, made)
    };
    // Only a panic in the diff (or the runtime's shutdown) ends it so:
    // nothing is published for this change.
    tokio::task::spawn_blocking(made).await.unwrap_or_default()
}

fn leadership(s: &Snapshot, change: &'static str, term: u64, epoch: u64) -> serde_json::Value {
    serde_json::to_value(LeadershipData {
        at: s.at,
        change,
        replica: s.replica.advertised_url.clone(),
        replica_id: s.replica.replica_id.clone(),
        term,
        epoch,
    })
    .unwrap_or_default()
}

/// The `disconnect` reason of an epoch that ended while the replica runs.
const LOST: &str = "this replica no longer leads; reconnect with Last-Event-ID (followers \
                    redirect to the new leader)";

/// The `disconnect` reason of a replica that stops (SIGTERM, SIGINT, a
/// fence, `uninstall`).
const STOPPING: &str = "the replica is shutting down; reconnect with Last-Event-ID to \
                        another replica (a follower redirects to the new leader)";

/// Why an epoch ended: [`STOPPING`] once the replica's shutdown began (the
/// scheduler's term ends with it), else [`LOST`].
fn why_lost(shutdown: &tokio_util::sync::CancellationToken) -> &'static str {
    if shutdown.is_cancelled() {
        STOPPING
    } else {
        LOST
    }
}

/// Ends the epoch `l`: the `leadership` `lost` event, then every stream's
/// `disconnect` with `reason` (`docs/events.md`: a reason before an end).
fn lost(state: &AppState, s: &Snapshot, l: &Lead, reason: &str) {
    let hub = &state.events;
    let data = leadership(s, "lost", l.term, l.epoch);
    hub.journal
        .publish(EventType::Leadership.as_str(), data.to_string());
    hub.journal.end(reason);
    hub.epoch.send_replace(None);
    tracing::info!(
        epoch = l.epoch,
        term = l.term,
        "event stream: leadership lost"
    );
}

/// This replica's election sequence number, `None` when it cannot be read
/// (or this replica's node is not the lowest: then it does not lead).
async fn epoch_of(state: &AppState) -> Option<u64> {
    let me = &state.coordinator.replica().replica_id;
    let members = tokio::time::timeout(state.config.handler_timeout, state.coordinator.members())
        .await
        .ok()?;
    match members {
        Ok(members) => {
            let first = members.first()?;
            (first.info.replica_id == *me).then_some(first.sequence)
        }
        Err(e) => {
            tracing::warn!(error = %e, "event stream: cannot read the election members");
            None
        }
    }
}

/// Publishes the audit entries appended since the last look.
async fn audit_tail(state: &AppState, lead: &mut Lead) {
    let coordinator = &state.coordinator;
    let timeout = state.config.handler_timeout;
    let Ok(Ok(newest)) = tokio::time::timeout(timeout, coordinator.audit_log(1)).await else {
        return;
    };
    let newest_seq = newest.last().map(|(seq, _)| *seq);
    let Some(last) = lead.audit else {
        // Elected just now: entries before are not this epoch's events.
        lead.audit = Some(newest_seq);
        return;
    };
    let Some(newest_seq) = newest_seq.filter(|n| last.is_none_or(|l| *n > l)) else {
        return;
    };
    let want = usize::try_from(newest_seq - last.unwrap_or(0) + 1)
        .unwrap_or(usize::MAX)
        .min(crate::coordination::AUDIT_KEPT);
    let Ok(Ok(entries)) = tokio::time::timeout(timeout, coordinator.audit_log(want)).await else {
        return;
    };
    for (seq, mut value) in entries {
        if last.is_some_and(|l| seq <= l) {
            continue;
        }
        if let Some(object) = value.as_object_mut() {
            object.insert("seq".into(), seq.into());
        }
        state
            .events
            .journal
            .publish(EventType::Audit.as_str(), value.to_string());
        lead.audit = Some(Some(seq));
    }
}

/// The query of the stream.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default, deny_unknown_fields)]
pub struct StreamQuery {
    /// Comma-separated event types to send (default: all).
    #[serde(rename = "type")]
    pub types: Option<String>,
    /// Resume after this ID, for clients that cannot set the
    /// `Last-Event-ID` header; the header wins when both are given.
    pub last_event_id: Option<String>,
}

impl StreamQuery {
    /// The query string as a [`StreamQuery`]: `type` may be repeated
    /// (`?type=a&type=b`) or a comma list (`?type=a,b`), or both; unknown
    /// parameters and a repeated `last_event_id` are 400 with field errors
    /// ([`StrictQuery`](super::query::StrictQuery)'s rules).
    pub fn parse(raw: &str) -> Result<StreamQuery, AppError> {
        let mut types: Vec<String> = Vec::new();
        let mut rest: Vec<(String, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(raw.as_bytes()) {
            if name == "type" {
                types.push(value.into_owned());
            } else {
                rest.push((name.into_owned(), value.into_owned()));
            }
        }
        let known = super::query::field_names::<StreamQuery>();
        let unknown: Vec<FieldError> = rest
            .iter()
            .filter(|(name, _)| !known.contains(&name.as_str()))
            .map(|(name, _)| FieldError {
                field: name.clone(),
                message: format!("unknown parameter; the parameters are {}", known.join(", ")),
            })
            .collect();
        if !unknown.is_empty() {
            return Err(AppError::invalid(unknown));
        }
        let rest = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&rest)
            .finish();
        let mut query: StreamQuery = super::query::decode(&rest)?;
        query.types = (!types.is_empty()).then(|| types.join(","));
        Ok(query)
    }
}

/// The types of `?type=`: `None` for all; 400 naming the unknown ones.
pub fn parse_types(types: Option<&str>) -> Result<Option<Vec<EventType>>, AppError> {
    let Some(types) = types.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for name in types.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match EventType::from_name(name) {
            Some(t) => out.push(t),
            None => {
                let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
                return Err(AppError::invalid(vec![FieldError {
                    field: "type".into(),
                    message: format!(
                        "unknown event type {name:?}; the types are {}",
                        known.join(", ")
                    ),
                }]));
            }
        }
    }
    Ok(Some(out))
}

/// The most bytes of a `Last-Event-ID` looked at (an ID has 20).
const MAX_LAST_EVENT_ID: usize = 64;

/// `GET /api/v1/events/stream`: see the module doc and `docs/events.md`.
#[utoipa::path(
    get,
    path = "/api/v1/events/stream",
    tag = "events",
    params(StreamQuery, ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event")),
    responses((status = 200, description = "Server-sent events (docs/events.md)", body = String, content_type = "text/event-stream"), (status = 307, description = "This replica does not lead: `Location` is the leader's stream"), crate::web::error::responses::BadRequest, crate::web::error::responses::Unavailable)
)]
pub async fn stream(
    State(state): State<AppState>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let query = StreamQuery::parse(uri.query().unwrap_or(""))?;
    let types = parse_types(query.types.as_deref())?;
    let path_and_query = uri.path_and_query().map_or(PATH, |p| p.as_str());
    if let Some(leader) = super::leader::other_leader(&state, path_and_query)? {
        let location = format!("{}{path_and_query}", leader.trim_end_matches('/'));
        let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        return Ok(response);
    }
    let last = headers
        .get("last-event-id")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .or(query.last_event_id)
        .map(|id| id.chars().take(MAX_LAST_EVENT_ID).collect::<String>())
        .filter(|id| !id.trim().is_empty());
    start(&state);
    let mut epoch = state.events.epoch.subscribe();
    let ready = tokio::time::timeout(READY_WAIT, epoch.wait_for(|e| e.is_some())).await;
    let begun = match ready {
        Ok(Ok(_)) => state.events.journal.subscribe(last.as_deref()),
        _ => None,
    };
    let Some(begun) = begun else {
        let mut e = AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "events-not-ready",
            "The event stream is not ready",
            "this replica is taking over leadership; the stream opens once it leads",
        );
        e.retry_after = Some(1);
        return Err(e);
    };
    let events = sse(begun, types, last.unwrap_or_default(), &state);
    let keep_alive = KeepAlive::new()
        .interval(state.events.config.keep_alive)
        .text("keep-alive");
    Ok((
        [("x-accel-buffering", "no")],
        Sse::new(events).keep_alive(keep_alive),
    )
        .into_response())
}

/// `resync`'s data.
#[derive(Serialize, utoipa::ToSchema)]
struct ResyncData {
    reason: String,
    /// The ID the client asked to resume after.
    last_event_id: String,
    /// The newest ID: the stream continues after it.
    resume_after: String,
}

/// `disconnect`'s data.
#[derive(Serialize, utoipa::ToSchema)]
struct DisconnectData {
    reason: String,
    /// For a slow consumer: how many events it missed (at least).
    #[serde(skip_serializing_if = "Option::is_none")]
    behind: Option<u64>,
    /// The last ID this stream sent (resume from it), if any.
    last_event_id: Option<String>,
}

struct Feed {
    pending: VecDeque<Event>,
    live: broadcast::Receiver<Item>,
    types: Option<Vec<EventType>>,
    last_sent: Option<EventId>,
    max_lag: usize,
    done: bool,
}

fn to_event(e: &Stored) -> Event {
    Event::default()
        .id(e.id.to_string())
        .event(e.kind)
        .data(e.data.as_str())
}

impl Feed {
    fn wants(&self, e: &Stored) -> bool {
        self.types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t.as_str() == e.kind))
    }

    fn disconnect(&mut self, reason: String, behind: Option<u64>) -> Event {
        self.done = true;
        let data = DisconnectData {
            reason,
            behind,
            last_event_id: self.last_sent.map(|id| id.to_string()),
        };
        Event::default()
            .event("disconnect")
            .json_data(&data)
            .unwrap_or_else(|_| Event::default().event("disconnect"))
    }

    async fn next(&mut self) -> Option<Event> {
        if let Some(e) = self.pending.pop_front() {
            return Some(e);
        }
        if self.done {
            return None;
        }
        loop {
            match self.live.recv().await {
                Ok(Item::Event(e)) => {
                    if self.wants(&e) {
                        self.last_sent = Some(e.id);
                        return Some(to_event(&e));
                    }
                }
                Ok(Item::End(reason)) => return Some(self.disconnect(reason, None)),
                Ok(Item::Skipped(n)) => {
                    let reason = format!(
                        "{n} events of one change were more than the buffer keeps; reconnect \
                         with Last-Event-ID to resync"
                    );
                    return Some(self.disconnect(reason, Some(n)));
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    let behind = missed + self.max_lag as u64;
                    let reason = format!(
                        "consumer too slow, {behind} events behind (at most {} may wait); \
                         reconnect with Last-Event-ID to resume",
                        self.max_lag
                    );
                    return Some(self.disconnect(reason, Some(behind)));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// The feed of a new stream: a first block (`retry:` and a comment), the
/// `resync` if any, the replay, then live events.
fn feed(begun: Start, types: Option<Vec<EventType>>, asked: String, max_lag: usize) -> Feed {
    let mut feed = Feed {
        pending: VecDeque::new(),
        live: begun.live,
        types,
        last_sent: None,
        max_lag,
        done: false,
    };
    feed.pending.push_back(
        Event::default()
            .retry(Duration::from_secs(1))
            .comment(format!("newest id {}", begun.head)),
    );
    if let Some(resync) = begun.resync {
        let data = ResyncData {
            reason: resync.reason(),
            last_event_id: asked,
            resume_after: begun.head.to_string(),
        };
        let event = Event::default()
            .id(begun.head.to_string())
            .event("resync")
            .json_data(&data)
            .unwrap_or_else(|_| Event::default().event("resync"));
        feed.pending.push_back(event);
        feed.last_sent = Some(begun.head);
    }
    for e in &begun.replay {
        if feed.wants(e) {
            feed.pending.push_back(to_event(e));
            feed.last_sent = Some(e.id);
        }
    }
    feed
}

fn sse(
    begun: Start,
    types: Option<Vec<EventType>>,
    asked: String,
    state: &AppState,
) -> impl futures::Stream<Item = Result<Event, Infallible>> + use<> {
    let feed = feed(begun, types, asked, state.events.journal.max_lag());
    futures::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok(event), feed))
    })
    .take_until(after_shutdown(state.shutdown.clone()))
}

/// How long a stream stays open after the replica's shutdown began, at
/// most: the hub ends each stream with its `disconnect` at once, so this is
/// a bound for a hub that cannot (its task gone), not a wait.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Resolves [`SHUTDOWN_GRACE`] after `shutdown` is cancelled.
async fn after_shutdown(shutdown: tokio_util::sync::CancellationToken) {
    shutdown.cancelled_owned().await;
    tokio::time::sleep(SHUTDOWN_GRACE).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SSE text of an event (as axum writes it).
    fn text(e: Event) -> String {
        use axum::response::IntoResponse;
        let body = Sse::new(futures::stream::iter([Ok::<_, Infallible>(e)])).into_response();
        let bytes = futures::executor::block_on(axum::body::to_bytes(body.into_body(), 1 << 16));
        String::from_utf8(bytes.unwrap().to_vec()).unwrap()
    }

    #[test]
    fn types_parse_and_unknown_ones_are_named() {
        assert_eq!(parse_types(None).unwrap(), None);
        assert_eq!(parse_types(Some(" ")).unwrap(), None);
        assert_eq!(
            parse_types(Some("audit, task_status")).unwrap(),
            Some(vec![EventType::Audit, EventType::TaskStatus])
        );
        let e = parse_types(Some("audit,tasks")).unwrap_err();
        assert_eq!(e.errors[0].field, "type");
        assert!(e.errors[0].message.contains("\"tasks\""));
        for t in EventType::ALL {
            assert_eq!(EventType::from_name(t.as_str()), Some(t));
        }
    }

    /// A snapshot without tasks, and the same with `n` tasks launched
    /// (`web.00000`, … in TASK_STAGING): `n` `task_status` events apart.
    fn launches(n: usize) -> (Snapshot, Snapshot) {
        use crate::coordination::{ReplicaInfo, Strategy};
        use crate::mesos::v1::TaskState;
        use crate::scheduler::records::TaskRecord;
        let replica = ReplicaInfo::new("http://a:8080", "d1", "0.1.0");
        let before = Snapshot::standby(replica, "f", "r", Strategy::Failover);
        let tasks: Vec<Arc<TaskRecord>> = (0..n)
            .map(|i| {
                let id = format!("web.{i:05}");
                Arc::new(TaskRecord::sample(&id, "web", TaskState::TaskStaging))
            })
            .collect();
        let now = Snapshot {
            tasks: tasks.into(),
            ..before.clone()
        };
        (before, now)
    }

    /// The journal keeps thousands of events' texts: each is kept at its
    /// size, not with the room left by writing it (up to twice its size).
    #[tokio::test]
    async fn event_texts_keep_no_spare_room() {
        let (before, now) = launches(50);
        let (skipped, events) = events_between(Arc::new(before), Arc::new(now), 4096).await;
        assert_eq!((skipped, events.len()), (0, 50));
        for (_, text) in &events {
            assert_eq!(text.capacity(), text.len(), "{text}");
        }
    }

    /// The events of a busy change are made off the async worker: a task
    /// of the same (single-threaded) runtime runs while they are made.
    /// Made inline, as they were, nothing else ran on the hub's worker
    /// until the last of 20,000 launches was serialised.
    #[tokio::test]
    async fn a_snapshots_events_are_made_off_the_async_worker() {
        let (before, now) = launches(20_000);
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = tokio_util::sync::CancellationToken::new();
        let other = tokio::spawn({
            let (ran, stop) = (ran.clone(), stop.clone());
            async move {
                while !stop.is_cancelled() {
                    ran.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            }
        });
        let (skipped, events) = events_between(Arc::new(before), Arc::new(now), usize::MAX).await;
        let ran_meanwhile = ran.load(Ordering::Relaxed);
        stop.cancel();
        other.await.unwrap();
        assert_eq!((skipped, events.len()), (0, 20_000));
        assert!(events.iter().all(|(kind, _)| *kind == "task_status"));
        assert!(
            ran_meanwhile > 0,
            "nothing else ran while the events were made"
        );
    }

    #[tokio::test]
    async fn a_feed_filters_resyncs_and_ends_with_a_reason() {
        let j = Journal::new(4, 3);
        j.begin(2);
        for kind in ["audit", "health", "audit", "health", "audit", "health"] {
            j.publish(kind, "{}".into());
        }
        // Asked from event 1: events 2 and 3 are gone (buffer of 4).
        let asked = EventId { epoch: 2, seq: 1 }.to_string();
        let begun = j.subscribe(Some(&asked)).unwrap();
        let mut f = feed(begun, Some(vec![EventType::Health]), asked.clone(), 3);
        let first = text(f.next().await.unwrap());
        assert!(
            first.contains(": newest id 00000000020000000006\n"),
            "{first}"
        );
        assert!(first.contains("retry: 1000\n"), "{first}");
        let resync = text(f.next().await.unwrap());
        assert!(resync.contains("event: resync\n"), "{resync}");
        assert!(resync.contains("id: 00000000020000000006\n"), "{resync}");
        assert!(
            resync.contains("\"last_event_id\":\"00000000020000000001\""),
            "{resync}"
        );
        // Only health events after that; the end says why.
        j.publish("audit", "{}".into());
        j.publish("health", "{\"n\":8}".into());
        let e = text(f.next().await.unwrap());
        assert!(
            e.contains("id: 00000000020000000008\nevent: health\n"),
            "{e}"
        );
        j.end("leadership lost");
        let end = text(f.next().await.unwrap());
        assert!(end.contains("event: disconnect\n"), "{end}");
        assert!(end.contains("leadership lost"), "{end}");
        assert!(
            end.contains("\"last_event_id\":\"00000000020000000008\""),
            "{end}"
        );
        assert!(f.next().await.is_none());
    }

    #[tokio::test]
    async fn a_feed_behind_by_more_than_its_bound_is_disconnected() {
        let j = Journal::new(100, 3);
        j.begin(1);
        let begun = j.subscribe(None).unwrap();
        assert_eq!(j.max_lag(), 4);
        let mut f = feed(begun, None, String::new(), j.max_lag());
        let first = text(f.next().await.unwrap());
        assert!(first.contains("newest id"), "{first}");
        for _ in 0..10 {
            j.publish("audit", "{}".into());
        }
        let e = text(f.next().await.unwrap());
        assert!(e.contains("consumer too slow, 10 events behind"), "{e}");
        assert!(e.contains("\"behind\":10"), "{e}");
        assert!(f.next().await.is_none());
    }
}
