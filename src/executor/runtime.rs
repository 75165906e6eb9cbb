//! The executor's main loop: one task owns all state (tasks, unacknowledged
//! updates) and reacts to agent events, task exits, SIGTERM and timers.
//!
//! Connection life cycle (`docs/executor-http-api.md` "Disconnections",
//! `src/executor/executor.cpp`): the first SUBSCRIBE is retried until it
//! succeeds or the agent's registration window ([`REGISTRATION_WINDOW`])
//! is over. Once subscribed, a lost stream ends the executor unless the
//! framework checkpoints (`MESOS_CHECKPOINT=1`); then SUBSCRIBE is retried —
//! each interval at most `MESOS_SUBSCRIPTION_BACKOFF_MAX` — for up to
//! `MESOS_RECOVERY_TIMEOUT`, carrying the updates the agent has not
//! acknowledged and the tasks none of whose updates it has acknowledged
//! (`src/launcher/default_executor.cpp` doReliableRegistration). Updates
//! produced while disconnected wait for that SUBSCRIBE.

use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;

use super::config::ExecutorConfig;
use super::connection::{AgentClient, EventStream, subscribe_backoff};
use super::state::{Flow, Runtime, Stop};
use crate::mesos::v1::executor::Call;

pub use super::state::KAMIKAZE;

/// How long the first SUBSCRIBE is retried: the agent's default
/// `--executor_registration_timeout`, after which it destroys us anyway.
pub const REGISTRATION_WINDOW: Duration = Duration::from_secs(60);

/// Runs the executor until it exits; returns the process exit code.
/// Task processes still running when it returns are SIGKILLed.
pub async fn run(cfg: ExecutorConfig) -> u8 {
    let client = match AgentClient::new(&cfg) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "cannot build the HTTP client");
            return 1;
        }
    };
    let mut sigterm = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(error) => {
            tracing::error!(%error, "cannot handle SIGTERM");
            return 1;
        }
    };
    tracing::info!(url = client.url(), executor_id = %cfg.executor_id,
        framework_id = %cfg.framework_id, checkpoint = cfg.checkpoint,
        encoding = cfg.encoding.media_type(), "starting");
    let mut rt = Runtime::new(cfg, client);
    let mut backoff = subscribe_backoff(if rt.cfg.checkpoint {
        rt.cfg.subscription_backoff_max
    } else {
        Duration::from_secs(1)
    });
    let started = Instant::now();
    let mut lost_at: Option<Instant> = None;
    loop {
        let call = rt.subscribe_call();
        let attempt = tokio::select! {
            attempt = rt.client.subscribe(&call) => attempt,
            _ = sigterm.recv() => return rt.abandon("SIGTERM while connecting", 0).await,
        };
        match attempt {
            Ok(stream) => {
                let flow = rt.serve(stream, &mut sigterm).await;
                rt.outbox = None;
                match flow {
                    Flow::Exit(code) => return code,
                    // Its tasks are dead and reported (or the agent reports
                    // them when we are gone): nothing to reconnect for.
                    Flow::Disconnected if rt.stop.is_some_and(|(why, _)| why == Stop::Kamikaze) => {
                        return rt.abandon("lost the agent during kamikaze", 1).await;
                    }
                    Flow::Disconnected if rt.subscribed_once => {
                        backoff.reset();
                        lost_at.get_or_insert_with(Instant::now);
                    }
                    Flow::Disconnected => {}
                }
            }
            Err(error) => tracing::warn!(%error, "SUBSCRIBE failed"),
        }
        let deadline = match lost_at {
            None if !rt.subscribed_once => started + REGISTRATION_WINDOW,
            Some(_) if !rt.cfg.checkpoint => {
                return rt
                    .abandon("lost the agent and the framework does not checkpoint", 1)
                    .await;
            }
            Some(at) => at + rt.cfg.recovery_timeout,
            None => Instant::now(),
        };
        if Instant::now() >= deadline {
            return rt.abandon("could not (re)subscribe in time", 1).await;
        }
        let delay = backoff.next_delay().min(deadline - Instant::now());
        if let Some(code) = rt.wait_offline(delay, &mut sigterm).await {
            return code;
        }
    }
}

impl Runtime {
    /// Serves one subscription until it ends or the executor exits.
    async fn serve(&mut self, mut stream: EventStream, sigterm: &mut Signal) -> Flow {
        let (tx, mut rx) = mpsc::unbounded_channel::<Call>();
        let client = self.client.clone();
        // One sender keeps calls in order (STARTING before RUNNING); a failed
        // call stays in `unacked_updates` and goes out with the next SUBSCRIBE.
        let sender = tokio::spawn(async move {
            while let Some(call) = rx.recv().await {
                if let Err(error) = client.call(&call).await {
                    tracing::warn!(%error, call = ?call.r#type(), "call to the agent failed");
                }
            }
        });
        self.outbox = Some(tx);
        let _abort_sender = AbortOnDrop(sender);
        loop {
            let deadline = self.stop.map(|(_, at)| at);
            tokio::select! {
                event = stream.next() => match event {
                    Some(Ok(event)) => {
                        if let Some(flow) = self.on_event(event) {
                            return flow;
                        }
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%error, "subscription broke");
                        return Flow::Disconnected;
                    }
                    None => {
                        tracing::warn!("agent closed the subscription");
                        return Flow::Disconnected;
                    }
                },
                Some(exited) = self.exits_rx.recv() => self.on_exit(exited),
                Some(result) = self.checks_rx.recv() => self.on_check(result),
                _ = sigterm.recv() => {
                    tracing::info!("SIGTERM: shutting down");
                    self.begin_stop(Stop::Shutdown);
                }
                _ = sleep_until(deadline), if deadline.is_some() => {
                    tracing::warn!("shutdown grace period over; exiting");
                    return Flow::Exit(self.exit_code());
                }
            }
            if let Some(code) = self.finished() {
                return Flow::Exit(code);
            }
        }
    }

    /// Waits `delay` between SUBSCRIBE attempts, still reaping tasks.
    async fn wait_offline(&mut self, delay: Duration, sigterm: &mut Signal) -> Option<u8> {
        let until = Instant::now() + delay;
        loop {
            tokio::select! {
                _ = sleep_until(Some(until)) => return None,
                Some(exited) = self.exits_rx.recv() => self.on_exit(exited),
                Some(result) = self.checks_rx.recv() => self.on_check(result),
                _ = sigterm.recv() => return Some(self.abandon("SIGTERM while disconnected", 0).await),
            }
        }
    }

    /// Gives up without an agent: kills every task with the shutdown grace
    /// and waits for them (bounded), then returns `code`.
    async fn abandon(&mut self, why: &str, code: u8) -> u8 {
        tracing::warn!(
            reason = why,
            tasks = self.tasks.len(),
            "exiting without the agent"
        );
        self.begin_stop(Stop::Shutdown);
        let until = Instant::now() + self.cfg.shutdown_grace_period + Duration::from_secs(1);
        while !self.tasks.is_empty() {
            tokio::select! {
                Some(exited) = self.exits_rx.recv() => self.on_exit(exited),
                _ = sleep_until(Some(until)) => break,
            }
        }
        code
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
