//! The scheduler side of the Mesos v1 HTTP API: one healthy subscription to
//! the leading master, held through master failovers, redirects, silent
//! half-open connections and refusals (`docs/mesos-protocol.md#scheduler-api-transport`,
//! `#subscribe-and-the-framework-lifecycle`, `#surprises`).
//!
//! [`SchedulerClient::start`] spawns a *driver* task (`subscription.rs`) that
//! detects the leader ([`crate::mesos::detector`]), subscribes with
//! protobuf on the wire, supervises heartbeats and re-subscribes after EOF,
//! stream errors, heartbeat timeouts and leader changes with capped,
//! jittered exponential backoff. Events arrive in stream order on a bounded
//! channel of [`ClientEvent`]s; the connection state is a `watch` of
//! [`ConnectionState`]. Calls ([`SchedulerClient::call`] and the helpers)
//! go on their own connections with the current `Mesos-Stream-Id`
//! (`calls.rs`).
//!
//! Rules the client keeps:
//! - after SUBSCRIBED, every re-subscription carries the assigned framework
//!   ID in both `framework_info.id` and `Call.framework_id` (else 400);
//! - a call never carries a stream ID other than the current one: the state
//!   switches to `Subscribed` with the new ID before the new stream's first
//!   event is delivered, and leaves it before `Disconnected` is delivered;
//! - an ERROR event is terminal ([`StopReason::Error`]): `Framework failed
//!   over` and `Framework has been removed` are never answered by
//!   re-subscribing (the scheduler core decides);
//! - cancelling the token drops the stream at once (leadership lost ⇒ no
//!   more Mesos traffic) and makes calls fail with [`CallError::NotSubscribed`];
//! - memory is bounded: RecordIO records (`max_record_bytes`), error bodies
//!   (`max_error_body_bytes`), and the event channel (`event_buffer`).

mod calls;
mod config;
pub mod decode;
mod errors;
mod inbox;
mod subscription;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

#[cfg(test)]
pub(crate) use calls::counting_server;
pub(crate) use calls::{
    Http, MAX_IDLE_CALL_CONNECTIONS, Request, SendError, error_text, read_limited,
};
pub use config::{ClientConfig, Credentials};
pub use errors::{CallError, DisconnectReason, ErrorKind, StopReason, StreamError};
pub use inbox::Inbox;

use crate::mesos::detector::{MasterAddress, MasterDetector};
use crate::mesos::media::PROTOBUF;
use crate::mesos::v1;
use crate::mesos::v1::scheduler::{Call, Event, call};

/// The scheduler endpoint. A real master redirects `/api/v1/scheduler` to
/// `/master/api/v1/scheduler` (its delegate), and serves both.
pub const SCHEDULER_PATH: &str = "/api/v1/scheduler";

/// What the client tells the scheduler core, in stream order.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// A (re-)subscription succeeded. Sent after every SUBSCRIBED: the core
    /// drops all offers it holds and reconciles. Boxed, as `Event` is.
    Subscribed(Box<Subscription>),
    /// An event of the stream: OFFERS, RESCIND, UPDATE, MESSAGE, FAILURE,
    /// INVERSE_OFFERS… (HEARTBEAT only with `forward_heartbeats`). Boxed:
    /// an `Event` is ~700 bytes inline and most other variants are small.
    Event(Box<Event>),
    /// The subscription was lost; the client is re-subscribing. Offers of
    /// the lost subscription are void.
    Disconnected {
        /// What happened.
        reason: DisconnectReason,
    },
    /// Terminal: the driver ended and will send nothing more.
    Stopped(StopReason),
}

/// A live subscription, as announced by SUBSCRIBED.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// The framework ID the master assigned (or confirmed).
    pub framework_id: v1::FrameworkId,
    /// `Mesos-Stream-Id` of this subscription; every call carries it.
    pub stream_id: String,
    /// The master the stream is open to (after any 307).
    pub master: MasterAddress,
    /// `SUBSCRIBED.master_info` (Mesos ≥ 1.1).
    pub master_info: Option<v1::MasterInfo>,
    /// `SUBSCRIBED.heartbeat_interval_seconds` (15 s on a real master).
    pub heartbeat_interval: Duration,
    /// When SUBSCRIBED arrived.
    pub since: Instant,
}

/// Where the client stands. Watch it with [`SchedulerClient::state`].
// One value lives in a watch channel; boxing `Subscribed` would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ConnectionState {
    /// Waiting for a leader or a SUBSCRIBE answer; `master` is the one
    /// being tried, if known.
    Connecting {
        /// The master being subscribed to.
        master: Option<MasterAddress>,
    },
    /// Subscribed; calls may be sent.
    Subscribed(Subscription),
    /// Not subscribed; the next attempt starts after `retry_in`.
    Disconnected {
        /// Why the last subscription or attempt ended.
        reason: DisconnectReason,
        /// Backoff before the next attempt.
        retry_in: Duration,
    },
    /// The driver ended.
    Stopped(StopReason),
}

/// Handle to a running scheduler client; clones share it. All calls go to
/// the master the current subscription is on.
#[derive(Clone)]
pub struct SchedulerClient {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) http: Http,
    pub(crate) detector: MasterDetector,
    pub(crate) state: watch::Sender<ConnectionState>,
    pub(crate) last_event: Mutex<Option<Instant>>,
    pub(crate) inbox: Inbox,
    pub(crate) cancel: CancellationToken,
    /// The calls' [`CallTarget`] of the latest subscription seen by a call.
    target: Mutex<Option<Arc<CallTarget>>>,
}

/// What every call of one subscription carries.
struct CallTarget {
    /// The subscription's `Mesos-Stream-Id`, as the state has it.
    stream_id: String,
    /// The same as a header value (`None`: not one, the call is refused).
    stream_header: Option<reqwest::header::HeaderValue>,
    framework_id: v1::FrameworkId,
    /// The subscribed master and its scheduler endpoint.
    master: MasterAddress,
    url: reqwest::Url,
}

impl SchedulerClient {
    /// Starts the client with its own leader detection (from
    /// `config.master`), stopped when the client stops. See
    /// [`SchedulerClient::start_with_detector`].
    ///
    /// # Panics
    /// Outside a tokio runtime, or if the TLS backend cannot initialise.
    pub fn start(
        config: ClientConfig,
        framework_info: v1::FrameworkInfo,
        cancel: CancellationToken,
    ) -> (SchedulerClient, mpsc::Receiver<ClientEvent>) {
        let detector_cancel = cancel.child_token();
        let detector = MasterDetector::start(
            config.master.clone(),
            config.detector_options(),
            detector_cancel.clone(),
        );
        Self::spawn(
            config,
            detector,
            Some(detector_cancel),
            framework_info,
            cancel,
        )
    }

    /// Starts the driver task on a shared detector: it waits for a leader,
    /// subscribes with `framework_info` (its `id`, if set, also as
    /// `Call.framework_id`), delivers events, and re-subscribes with the
    /// assigned ID on EOF, stream error, heartbeat timeout or leader change,
    /// after a capped, jittered exponential backoff. It stops on `cancel`
    /// (closing the stream at once), on a terminal ERROR / refusal, or when
    /// the event receiver is dropped; the last event is then
    /// [`ClientEvent::Stopped`]. A shared `detector` keeps running.
    ///
    /// # Panics
    /// Outside a tokio runtime, or if the TLS backend cannot initialise.
    pub fn start_with_detector(
        config: ClientConfig,
        detector: MasterDetector,
        framework_info: v1::FrameworkInfo,
        cancel: CancellationToken,
    ) -> (SchedulerClient, mpsc::Receiver<ClientEvent>) {
        Self::spawn(config, detector, None, framework_info, cancel)
    }

    fn spawn(
        config: ClientConfig,
        detector: MasterDetector,
        owned_detector: Option<CancellationToken>,
        framework_info: v1::FrameworkInfo,
        cancel: CancellationToken,
    ) -> (SchedulerClient, mpsc::Receiver<ClientEvent>) {
        let http = Http::new(&config).expect("the HTTP client builds with static settings");
        let (state, _) = watch::channel(ConnectionState::Connecting { master: None });
        let inner = Arc::new(Inner {
            http,
            detector,
            state,
            last_event: Mutex::new(None),
            inbox: Inbox::new(config.event_buffer),
            cancel,
            target: Mutex::new(None),
        });
        let (tx, rx) = mpsc::channel(config.event_buffer.max(1));
        tokio::spawn(subscription::drive(
            inner.clone(),
            config,
            framework_info,
            tx,
            owned_detector,
        ));
        (SchedulerClient { inner }, rx)
    }

    /// The connection state; changes on every (re)subscription, loss and stop.
    pub fn state(&self) -> watch::Receiver<ConnectionState> {
        self.inner.state.subscribe()
    }

    /// The current subscription, if subscribed.
    pub fn subscription(&self) -> Option<Subscription> {
        match &*self.inner.state.borrow() {
            ConnectionState::Subscribed(sub) => Some(sub.clone()),
            _ => None,
        }
    }

    /// When the last record (any event, heartbeats included) was read from
    /// the stream; for "heartbeat age" displays.
    pub fn last_event_at(&self) -> Option<Instant> {
        *self
            .inner
            .last_event
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// When each event in the channel was read off the stream: take one
    /// stamp per event received to measure how far behind the consumer is.
    pub fn inbox(&self) -> &Inbox {
        &self.inner.inbox
    }

    /// The leader detector this client uses (share it with an
    /// [`OperatorClient`](crate::mesos::operator::OperatorClient)).
    pub fn detector(&self) -> &MasterDetector {
        &self.inner.detector
    }

    /// Sends one call on a kept-alive connection to the subscribed master, with
    /// the current `Mesos-Stream-Id`, `Content-Type` and `Accept`
    /// `application/x-protobuf`, and basic auth if configured. Fills
    /// `Call.framework_id`. Follows 307s (remembering the leader). Success
    /// is 202 (200 for UPDATE_FRAMEWORK); the call's effects arrive as
    /// events. Never retried here.
    ///
    /// # Errors
    /// [`CallError::NotSubscribed`] without a live subscription,
    /// [`CallError::Invalid`] for SUBSCRIBE, a foreign `framework_id` or a
    /// stream ID that no header can carry,
    /// [`CallError::Rejected`] with the master's status and text, and
    /// transport errors (a refused connection or a 503 also asks the
    /// detector to look for a new leader).
    pub async fn call(&self, mut call: Call) -> Result<(), CallError> {
        let Some(target) = self.target() else {
            return Err(CallError::NotSubscribed);
        };
        if call.r#type() == call::Type::Subscribe {
            return Err(CallError::Invalid(
                "SUBSCRIBE is sent by the client itself".into(),
            ));
        }
        match &call.framework_id {
            Some(id) if *id != target.framework_id => {
                return Err(CallError::Invalid(format!(
                    "framework_id {} is not the subscribed {}",
                    id.value, target.framework_id.value
                )));
            }
            Some(_) => {}
            None => call.framework_id = Some(target.framework_id.clone()),
        }
        let Some(stream_id) = &target.stream_header else {
            return Err(CallError::Invalid(
                "the stream ID is not a header value".into(),
            ));
        };
        let request = Request {
            path: SCHEDULER_PATH,
            content_type: PROTOBUF,
            accept: Some(PROTOBUF),
            stream_id: Some(stream_id),
            body: Bytes::from(call.encode_to_vec()),
            long_lived: false,
        };
        let detector = &self.inner.detector;
        let answer = tokio::select! {
            _ = self.inner.cancel.cancelled() => return Err(CallError::NotSubscribed),
            answer = self.inner.http.post_to(&target.master, target.url.clone(), &request, |leader| detector.hint(leader.clone())) => answer,
        };
        let answer = answer.map_err(|error| match error {
            SendError::Connect(e) => {
                detector.redetect();
                CallError::Connect(e)
            }
            SendError::Timeout => CallError::Timeout,
            SendError::Redirect(e) => CallError::Redirect(e),
            SendError::Transport(e) => CallError::Transport(e),
        })?;
        let status = answer.response.status();
        let ok = status == reqwest::StatusCode::ACCEPTED
            || (status == reqwest::StatusCode::OK && call.r#type() == call::Type::UpdateFramework);
        if ok {
            return Ok(());
        }
        if status == reqwest::StatusCode::SERVICE_UNAVAILABLE {
            detector.redetect();
        }
        let body = error_text(answer.response, self.inner.http.max_error_body()).await;
        Err(CallError::Rejected {
            status: status.as_u16(),
            body,
        })
    }

    /// What the current subscription's calls carry, made once per
    /// subscription and shared by its calls (each call cloned the whole
    /// [`Subscription`], `master_info` included, and built its URL and
    /// stream ID header again). `None` when not subscribed. Checked against
    /// the state on every call, so a call never carries another
    /// subscription's stream ID.
    fn target(&self) -> Option<Arc<CallTarget>> {
        let state = self.inner.state.borrow();
        let ConnectionState::Subscribed(sub) = &*state else {
            return None;
        };
        let mut cached = self.inner.target.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(target) = &*cached
            && target.stream_id == sub.stream_id
            && target.master == sub.master
            && target.framework_id == sub.framework_id
        {
            return Some(target.clone());
        }
        let target = Arc::new(CallTarget {
            stream_id: sub.stream_id.clone(),
            stream_header: calls::stream_id_header(&sub.stream_id),
            framework_id: sub.framework_id.clone(),
            url: sub.master.endpoint(SCHEDULER_PATH),
            master: sub.master.clone(),
        });
        *cached = Some(target.clone());
        Some(target)
    }

    /// A call of `payload`'s type carrying it in its field.
    async fn send(&self, payload: impl Payload) -> Result<(), CallError> {
        self.call(payload.into_call()).await
    }

    /// KILL a task (on `agent_id` if known).
    pub async fn kill(
        &self,
        task_id: v1::TaskId,
        agent_id: Option<v1::AgentId>,
    ) -> Result<(), CallError> {
        self.send(call::Kill {
            task_id,
            agent_id,
            kill_policy: None,
        })
        .await
    }

    /// RECONCILE: explicit for the listed `(task, agent)` pairs, implicit
    /// (all tasks the master knows) when `tasks` is empty.
    pub async fn reconcile(
        &self,
        tasks: Vec<(v1::TaskId, Option<v1::AgentId>)>,
    ) -> Result<(), CallError> {
        let tasks = tasks
            .into_iter()
            .map(|(task_id, agent_id)| call::reconcile::Task { task_id, agent_id })
            .collect();
        self.send(call::Reconcile { tasks }).await
    }

    /// SUPPRESS offers for `roles` (all roles when empty).
    pub async fn suppress(&self, roles: Vec<String>) -> Result<(), CallError> {
        self.send(call::Suppress { roles }).await
    }

    /// REVIVE offers for `roles` (all when empty), clearing decline filters.
    pub async fn revive(&self, roles: Vec<String>) -> Result<(), CallError> {
        self.send(call::Revive { roles }).await
    }

    /// TEARDOWN the framework: the master kills all its tasks and forgets it;
    /// the stream then ends without an event (capture g).
    pub async fn teardown(&self) -> Result<(), CallError> {
        self.call(Call {
            r#type: Some(call::Type::Teardown as i32),
            ..Default::default()
        })
        .await
    }
}

/// The calls that only carry their arguments, one method each:
/// `name(args…)` sends `call::Message { args… }`.
macro_rules! forwarding_calls {
    ($($(#[$doc:meta])* $name:ident => $message:ident { $($arg:ident: $ty:ty),* $(,)? })*) => {
        impl SchedulerClient {$(
            $(#[$doc])*
            pub async fn $name(&self, $($arg: $ty),*) -> Result<(), CallError> {
                self.send(call::$message { $($arg),* }).await
            }
        )*}
    };
}

forwarding_calls! {
    /// ACCEPT `offer_ids` with `operations` (e.g. LAUNCH); unused resources
    /// are refused for `filters.refuse_seconds` (Mesos default 5 s).
    accept => Accept {
        offer_ids: Vec<v1::OfferId>,
        operations: Vec<v1::offer::Operation>,
        filters: Option<v1::Filters>,
    }
    /// DECLINE `offer_ids`, refusing them for `filters.refuse_seconds`.
    decline => Decline { offer_ids: Vec<v1::OfferId>, filters: Option<v1::Filters> }
    /// ACKNOWLEDGE a status update. Only updates carrying a `uuid` need it;
    /// master-generated ones (no uuid) must not be acknowledged
    /// (`docs/mesos-protocol.md#acknowledgements`).
    acknowledge => Acknowledge { agent_id: v1::AgentId, task_id: v1::TaskId, uuid: Vec<u8> }
    /// MESSAGE `data` to an executor (no delivery guarantee).
    message => Message { agent_id: v1::AgentId, executor_id: v1::ExecutorId, data: Vec<u8> }
}

/// What a call carries besides its type: the payload of one `Call` field,
/// which goes with one `Call.type` (`scheduler.proto`).
trait Payload {
    /// The call with `type` set and this payload in its field.
    fn into_call(self) -> Call;
}

/// The `Call.type` and the `Call` field of each payload, in one table.
macro_rules! payloads {
    ($($message:ident => $field:ident),* $(,)?) => {$(
        impl Payload for call::$message {
            fn into_call(self) -> Call {
                Call {
                    r#type: Some(call::Type::$message as i32),
                    $field: Some(self),
                    ..Default::default()
                }
            }
        }
    )*};
}

payloads!(
    Accept => accept,
    Decline => decline,
    Acknowledge => acknowledge,
    Kill => kill,
    Reconcile => reconcile,
    Message => message,
    Suppress => suppress,
    Revive => revive,
);

impl std::fmt::Debug for SchedulerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerClient")
            .field("state", &*self.inner.state.borrow())
            .finish()
    }
}
