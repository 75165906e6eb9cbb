//! The driver task: detect → SUBSCRIBE → read the stream under heartbeat
//! supervision → on loss, back off and subscribe again; stop on cancel or on
//! a terminal ERROR or refusal.
//!
//! Sources: `docs/scheduler-http-api.md` (SUBSCRIBE, heartbeats, "Disconnections"),
//! `src/scheduler/scheduler.cpp` (the C++ v1 client retries 503/404/307 and
//! gives up on other statuses), `docs/mesos-protocol.md#scheduler-api-transport`,
//! `#subscribe-and-the-framework-lifecycle`, `#surprises`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use prost::Message;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::decode::event_stream;
use super::{
    ClientConfig, ClientEvent, ConnectionState, DisconnectReason, ErrorKind, Inner, Request,
    SCHEDULER_PATH, SendError, StopReason, Subscription, error_text,
};
use crate::backoff::Backoff;
use crate::mesos::detector::MasterAddress;
use crate::mesos::media::{PROTOBUF, STREAM_ID_HEADER};
use crate::mesos::v1;
use crate::mesos::v1::scheduler::{Call, call, event};

/// A subscription that lasted this long resets the backoff: losing it was
/// not part of a flapping pattern.
const STABLE_AFTER: Duration = Duration::from_secs(15);

/// How one attempt ended, short of stopping.
enum Attempt {
    /// Retry after the backoff; `was_subscribed` says whether SUBSCRIBED
    /// was seen (then the core is told `Disconnected`).
    Lost {
        reason: DisconnectReason,
        was_subscribed: bool,
        lasted: Duration,
    },
    Stop(StopReason),
}

/// Runs the client until it stops; publishes the final state and event,
/// then stops `owned_detector` (the detector `start` made for this client).
pub(super) async fn drive(
    inner: Arc<Inner>,
    config: ClientConfig,
    info: v1::FrameworkInfo,
    tx: mpsc::Sender<ClientEvent>,
    owned_detector: Option<CancellationToken>,
) {
    let mut driver = Driver {
        inner: inner.clone(),
        config,
        info,
        tx,
    };
    let reason = driver.run().await;
    tracing::info!(%reason, "Mesos scheduler client stopped");
    inner
        .state
        .send_replace(ConnectionState::Stopped(reason.clone()));
    if let Some(detector) = owned_detector {
        detector.cancel();
    }
    let stopped = ClientEvent::Stopped(reason);
    inner.inbox.push(Instant::now());
    // Whoever cancelled is not necessarily reading any more: wait for room
    // only until then.
    tokio::select! {
        _ = inner.cancel.cancelled() => {
            let _ = driver.tx.try_send(stopped);
        }
        _ = driver.tx.send(stopped.clone()) => {}
    }
}

struct Driver {
    inner: Arc<Inner>,
    config: ClientConfig,
    /// What SUBSCRIBE sends; `id` is set from the first SUBSCRIBED on.
    info: v1::FrameworkInfo,
    tx: mpsc::Sender<ClientEvent>,
}

impl Driver {
    async fn run(&mut self) -> StopReason {
        let mut backoff = Backoff::jittered(self.config.backoff_min, self.config.backoff_max);
        let mut leader = self.inner.detector.leader();
        let mut pause = None;
        loop {
            if let Some(delay) = pause.take() {
                tokio::select! {
                    _ = self.inner.cancel.cancelled() => return StopReason::Cancelled,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            // "No leader" is a state to wait in.
            let master = tokio::select! {
                _ = self.inner.cancel.cancelled() => return StopReason::Cancelled,
                current = leader.wait_for(Option::is_some) => match current {
                    Ok(current) => current.clone().expect("waited for Some"),
                    // The detector stopped: only on cancellation.
                    Err(_) => return StopReason::Cancelled,
                },
            };
            leader.mark_unchanged();
            self.inner.state.send_replace(ConnectionState::Connecting {
                master: Some(master.clone()),
            });
            let attempt = match self.subscribe(&master).await {
                Ok((response, master, stream_id)) => {
                    self.consume(response, master, stream_id, &mut leader).await
                }
                Err(attempt) => attempt,
            };
            match attempt {
                Attempt::Stop(reason) => return reason,
                Attempt::Lost {
                    reason,
                    was_subscribed,
                    lasted,
                } => {
                    tracing::warn!(%reason, %master, "Mesos subscription lost; re-subscribing");
                    if lasted >= STABLE_AFTER.min(self.config.backoff_max) {
                        backoff.reset();
                    }
                    self.inner.detector.redetect();
                    let delay = backoff.next_delay();
                    self.inner
                        .state
                        .send_replace(ConnectionState::Disconnected {
                            reason: reason.clone(),
                            retry_in: delay,
                        });
                    if was_subscribed
                        && let Err(stop) = self
                            .deliver(
                                ClientEvent::Disconnected {
                                    reason: reason.clone(),
                                },
                                Instant::now(),
                            )
                            .await
                    {
                        return stop;
                    }
                    pause = Some(delay);
                }
            }
        }
    }

    /// Delivers one event read off the stream at `read_at` (stamped in
    /// the inbox), waiting for room (backpressure) unless cancelled.
    async fn deliver(&self, event: ClientEvent, read_at: Instant) -> Result<(), StopReason> {
        self.inner.inbox.push(read_at);
        tokio::select! {
            _ = self.inner.cancel.cancelled() => Err(StopReason::Cancelled),
            sent = self.tx.send(event) => sent.map_err(|_| StopReason::ReceiverDropped),
        }
    }

    /// Sends SUBSCRIBE; on 200 returns the open response, the master that
    /// gave it (after 307s) and its stream ID.
    async fn subscribe(
        &self,
        master: &MasterAddress,
    ) -> Result<(reqwest::Response, MasterAddress, String), Attempt> {
        let call = Call {
            r#type: Some(call::Type::Subscribe as i32),
            // Must equal framework_info.id, both unset on the first subscription (else 400).
            framework_id: self.info.id.clone(),
            subscribe: Some(call::Subscribe {
                framework_info: self.info.clone(),
                suppressed_roles: Vec::new(),
            }),
            ..Default::default()
        };
        let request = Request {
            path: SCHEDULER_PATH,
            content_type: PROTOBUF,
            accept: Some(PROTOBUF),
            stream_id: None,
            body: Bytes::from(call.encode_to_vec()),
            long_lived: true,
        };
        let detector = &self.inner.detector;
        let retry = |reason: String| Attempt::Lost {
            reason: DisconnectReason::SubscribeFailed(reason),
            was_subscribed: false,
            lasted: Duration::ZERO,
        };
        let answer = tokio::select! {
            _ = self.inner.cancel.cancelled() => return Err(Attempt::Stop(StopReason::Cancelled)),
            answer = self.inner.http.post(master, &request, |leader| detector.hint(leader.clone())) => answer,
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(
                error @ (SendError::Connect(_)
                | SendError::Timeout
                | SendError::Redirect(_)
                | SendError::Transport(_)),
            ) => {
                return Err(retry(format!("{master}: {error}")));
            }
        };
        let status = answer.response.status();
        let master = answer.master;
        if status == StatusCode::OK {
            let content_type = answer
                .response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            if content_type != Some(PROTOBUF) {
                return Err(retry(format!(
                    "{master}: SUBSCRIBE answered with Content-Type {content_type:?}"
                )));
            }
            let Some(stream_id) = answer
                .response
                .headers()
                .get(STREAM_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
            else {
                return Err(retry(format!(
                    "{master}: SUBSCRIBE answered without {STREAM_ID_HEADER}"
                )));
            };
            return Ok((answer.response, master, stream_id));
        }
        let body = error_text(answer.response, self.inner.http.max_error_body()).await;
        // 503: not leading and no leader known, or still recovering; 404 and
        // other 5xx: a master (or proxy) not ready yet. The C++ v1 client
        // retries these too.
        if status == StatusCode::SERVICE_UNAVAILABLE
            || status == StatusCode::NOT_FOUND
            || status.is_server_error()
        {
            return Err(retry(format!("{master}: {status}: {body}")));
        }
        Err(Attempt::Stop(StopReason::SubscribeRefused {
            status: status.as_u16(),
            body,
        }))
    }

    /// Reads the stream until it is lost or the client stops.
    async fn consume(
        &mut self,
        response: reqwest::Response,
        master: MasterAddress,
        stream_id: String,
        leader: &mut tokio::sync::watch::Receiver<Option<MasterAddress>>,
    ) -> Attempt {
        let events = event_stream(response.bytes_stream(), self.config.max_record_bytes);
        let mut events = std::pin::pin!(events);
        let mut silence = self
            .config
            .heartbeat_timeout(self.config.default_heartbeat_interval);
        let mut subscribed_at: Option<Instant> = None;
        let lost = |reason, subscribed_at: Option<Instant>| Attempt::Lost {
            reason,
            was_subscribed: subscribed_at.is_some(),
            lasted: subscribed_at.map(|t| t.elapsed()).unwrap_or_default(),
        };
        loop {
            // The timeout restarts for every record: time spent waiting for
            // the consumer (backpressure) is not silence of the master.
            let next = tokio::select! {
                // Dropping the stream closes the connection at once.
                _ = self.inner.cancel.cancelled() => return Attempt::Stop(StopReason::Cancelled),
                _ = self.tx.closed() => return Attempt::Stop(StopReason::ReceiverDropped),
                changed = leader.changed() => {
                    let now = changed.ok().and_then(|_| leader.borrow_and_update().clone());
                    if now.as_ref() == Some(&master) {
                        continue;
                    }
                    return lost(DisconnectReason::LeaderChanged { to: now }, subscribed_at);
                }
                next = tokio::time::timeout(silence, events.next()) => next,
            };
            let event = match next {
                Err(_) => {
                    return lost(
                        DisconnectReason::HeartbeatTimeout { silence },
                        subscribed_at,
                    );
                }
                Ok(None) => return lost(DisconnectReason::EndOfStream, subscribed_at),
                Ok(Some(Err(error))) => {
                    return lost(
                        DisconnectReason::StreamError(error.to_string()),
                        subscribed_at,
                    );
                }
                Ok(Some(Ok(event))) => event,
            };
            let read_at = Instant::now();
            *self
                .inner
                .last_event
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(read_at);
            match event.r#type() {
                event::Type::Subscribed => {
                    let Some(subscribed) = event.subscribed else {
                        return lost(
                            DisconnectReason::StreamError("SUBSCRIBED without its body".into()),
                            subscribed_at,
                        );
                    };
                    let interval =
                        heartbeat_interval(subscribed.heartbeat_interval_seconds, &self.config);
                    silence = self.config.heartbeat_timeout(interval);
                    let sub = Subscription {
                        framework_id: subscribed.framework_id.clone(),
                        stream_id: stream_id.clone(),
                        master: master.clone(),
                        master_info: subscribed.master_info,
                        heartbeat_interval: interval,
                        since: Instant::now(),
                    };
                    if self
                        .info
                        .id
                        .as_ref()
                        .is_some_and(|id| *id != sub.framework_id)
                    {
                        tracing::warn!(asked = ?self.info.id, assigned = %sub.framework_id.value, "master assigned another framework ID");
                    }
                    // Every later SUBSCRIBE carries the ID the master assigned.
                    self.info.id = Some(sub.framework_id.clone());
                    subscribed_at = Some(sub.since);
                    tracing::info!(framework_id = %sub.framework_id.value, %master, %stream_id, "subscribed to Mesos");
                    // State first: a call made on seeing the event uses this stream ID.
                    self.inner
                        .state
                        .send_replace(ConnectionState::Subscribed(sub.clone()));
                    if let Err(stop) = self
                        .deliver(ClientEvent::Subscribed(Box::new(sub)), read_at)
                        .await
                    {
                        return Attempt::Stop(stop);
                    }
                }
                event::Type::Error => {
                    let message = event.error.map(|e| e.message).unwrap_or_default();
                    let kind = ErrorKind::classify(&message);
                    tracing::error!(%message, ?kind, %master, "Mesos master sent ERROR; stopping");
                    // Calls must stop before the core hears about it.
                    self.inner
                        .state
                        .send_replace(ConnectionState::Stopped(StopReason::Error(kind.clone())));
                    return Attempt::Stop(StopReason::Error(kind));
                }
                event::Type::Heartbeat if !self.config.forward_heartbeats => {}
                _ if subscribed_at.is_none() => {
                    tracing::warn!(kind = ?event.r#type(), "event before SUBSCRIBED dropped");
                }
                _ => {
                    if let Err(stop) = self
                        .deliver(ClientEvent::Event(Box::new(event)), read_at)
                        .await
                    {
                        return Attempt::Stop(stop);
                    }
                }
            }
        }
    }
}

/// `heartbeat_interval_seconds` as a duration; a missing, non-positive or
/// absurd value falls back to the configured default.
fn heartbeat_interval(seconds: Option<f64>, config: &ClientConfig) -> Duration {
    seconds
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(config.default_heartbeat_interval)
}
