//! The supervisor runs on every replica: while the replica leads it runs the
//! core for the term; otherwise it publishes a *standby* snapshot (leader
//! identity from the election, framework ID, services and tasks read from
//! ZooKeeper, [`super::standby`]) and answers commands with
//! [`CommandError::NotLeader`].
//!
//! Term outcomes: abdication rejoins the election at the back; "framework
//! failed over" and a framework-ID mismatch back off, then abdicate, so this
//! replica never fights the scheduler that took over
//! (`docs/deployment-strategies.md#failed-over`). The
//! back-off doubles with each such step-down in a row (10 s up to 5 min), so
//! a replica alone in the election cannot ping-pong the framework ID with a
//! scheduler outside it; the standby snapshot keeps saying `failed_over`
//! and why until this replica leads again. When the deployment is fenced
//! ([`CoreDeps::fence`]) the term ends, the state becomes `fenced` and the
//! supervisor returns.
//!
//! A replica that leads must act or let another replica lead: when a term
//! cannot load the stores three times in a row it abdicates, and a standby
//! refresh (ZooKeeper reads, slow on a slow link) gives way as soon as
//! leadership changes. A term that ends on suspension
//! (`LeadershipLost`) needs nothing here: when the coordinator leads again
//! under a new term, the next loop runs it and the core subscribes again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::commands::{Command, CommandError, SchedulerHandle};
use super::config::CoreConfig;
use super::core::{CoreDeps, TermOutcome, run_term};
use super::snapshot::{FrameworkState, Snapshot};
use super::standby::{self, Held, Standby};
use crate::coordination::Leadership;

/// Pause after "failed over" or a mismatch before stepping down, so two
/// schedulers cannot ping-pong the framework ID; doubles per step-down in a
/// row up to [`STEP_DOWN_BACKOFF_MAX`].
const STEP_DOWN_BACKOFF: Duration = Duration::from_secs(10);
/// Cap of the step-down pause; a term that lasted this long forgives the
/// earlier step-downs.
const STEP_DOWN_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Pause before a term tries again to load the stores after a failure.
const STORE_RETRY: Duration = Duration::from_secs(2);
/// Failed loads of the stores in one term before the replica steps down.
const STORE_ATTEMPTS: u32 = 3;
/// Queue of commands from the web layer.
const COMMAND_QUEUE: usize = 64;

/// Starts the supervisor; returns the web layer's handle and the task, which
/// ends when `shutdown` is cancelled.
pub fn start(
    cfg: CoreConfig,
    deps: CoreDeps,
    shutdown: CancellationToken,
) -> (SchedulerHandle, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
    let handle = SchedulerHandle::new(tx, deps.snapshots.subscribe());
    let task = tokio::spawn(supervise(cfg, deps, rx, shutdown));
    (handle, task)
}

/// A snapshot channel holding an empty standby snapshot for this replica.
pub fn snapshot_channel(
    cfg: &CoreConfig,
    deps_replica: crate::coordination::ReplicaInfo,
) -> watch::Sender<Arc<Snapshot>> {
    let snapshot = Snapshot::standby(deps_replica, &cfg.framework_name, &cfg.role, cfg.strategy);
    watch::Sender::new(Arc::new(snapshot))
}

async fn supervise(
    cfg: CoreConfig,
    deps: CoreDeps,
    mut commands: mpsc::Receiver<Command>,
    shutdown: CancellationToken,
) {
    let coordinator = deps.coordinator.clone();
    let mut leadership = coordinator.leadership();
    // Why the last term stepped down, shown while standing by.
    let mut held: Option<Held> = None;
    // The task records last read while standing by.
    let mut standby = Standby::default();
    let mut step_downs: u32 = 0;
    // (term, failed attempts to load the stores in that term)
    let mut store_failures: (u64, u32) = (0, 0);
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        if deps.fence.is_cancelled() {
            let reason = "a newer deployment fenced this one; the replica exits".to_string();
            held = Some(Held {
                state: FrameworkState::Fenced,
                reason,
            });
            standby.publish(&cfg, &deps, held.as_ref()).await;
            return;
        }
        let current = leadership.borrow_and_update().clone();
        if let Leadership::Leader { term } = current {
            let token = CancellationToken::new();
            let link = {
                let (term_token, shutdown, fence, token) = (
                    coordinator.term_token(term),
                    shutdown.clone(),
                    deps.fence.clone(),
                    token.clone(),
                );
                tokio::spawn(async move {
                    tokio::select! {
                        _ = term_token.cancelled() => {}
                        _ = shutdown.cancelled() => {}
                        _ = fence.cancelled() => {}
                    }
                    token.cancel();
                })
            };
            let began = Instant::now();
            let wary = held
                .as_ref()
                .is_some_and(|h| h.state == FrameworkState::FailedOver);
            // The task records the standby kept current: the term reads
            // only what changed since (`standby`). The standby view's
            // copies go, so that the term owns the records unshared.
            let mirror = standby.take_mirror();
            // Shown as loading until the term has loaded them.
            deps.snapshots.send_if_modified(|snapshot| {
                let shown = !snapshot.tasks.is_empty() || !snapshot.loading;
                if shown {
                    let snapshot = Arc::make_mut(snapshot);
                    snapshot.tasks = Default::default();
                    snapshot.loading = true;
                }
                shown
            });
            let outcome = run_term(
                &cfg,
                &deps,
                term,
                token.clone(),
                &mut commands,
                wary,
                mirror,
            )
            .await;
            token.cancel();
            link.abort();
            if began.elapsed() >= STEP_DOWN_BACKOFF_MAX {
                step_downs = 0;
            }
            held = None;
            standby.forget();
            match outcome {
                TermOutcome::LeadershipLost => {}
                TermOutcome::Abdicated => abdicate(&deps).await,
                TermOutcome::FailedOver | TermOutcome::Mismatch(_) => {
                    let pause = step_down_pause(step_downs);
                    step_downs = step_downs.saturating_add(1);
                    let why = match &outcome {
                        TermOutcome::Mismatch(why) => format!("framework ID mismatch: {why}"),
                        _ => "another scheduler subscribed with our framework ID".to_string(),
                    };
                    tracing::error!(
                        pause_seconds = pause.as_secs(),
                        "{why}; stepping down after the pause"
                    );
                    held = Some(Held {
                        state: FrameworkState::FailedOver,
                        reason: format!(
                            "{why}; stepped down (step-down {step_downs} in a row, paused {}s)",
                            pause.as_secs()
                        ),
                    });
                    // Meanwhile the replica stands by: it shows who leads and
                    // refuses commands (pointing at the leader) at once.
                    standby.publish(&cfg, &deps, held.as_ref()).await;
                    let until = tokio::time::Instant::now() + pause;
                    let fenced = loop {
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = deps.fence.cancelled() => break true,
                            _ = tokio::time::sleep_until(until) => break false,
                            _ = leadership.changed() => {
                                standby.publish(&cfg, &deps, held.as_ref()).await;
                            }
                            command = commands.recv() => match command {
                                Some(command) => refuse(command, &deps),
                                None => return,
                            },
                        }
                    };
                    if fenced {
                        continue;
                    }
                    abdicate(&deps).await;
                }
                TermOutcome::StartupFailed(why) => {
                    store_failures = if store_failures.0 == term {
                        (term, store_failures.1 + 1)
                    } else {
                        (term, 1)
                    };
                    if store_failures.1 >= STORE_ATTEMPTS {
                        // Leading without acting keeps everyone else from
                        // leading: let the next replica try (alone, this
                        // one leads again after the hold-off).
                        tracing::error!(
                            "the term could not start: {why}; {STORE_ATTEMPTS} attempts in term \
                             {term} failed, stepping down so that another replica leads"
                        );
                        abdicate(&deps).await;
                    } else {
                        tracing::error!("the term could not start: {why}; retrying");
                    }
                    // The end of the term (abdication) cuts the pause short.
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = leadership.changed() => {}
                        _ = tokio::time::sleep(STORE_RETRY) => {}
                    }
                }
            }
            continue;
        }
        // A standby refresh reads ZooKeeper, which may be slow: a change of
        // leadership interrupts it, so that a replica that begins to lead
        // acts at once rather than after the refresh.
        let refresh = async {
            standby.publish(&cfg, &deps, held.as_ref()).await;
            tokio::time::sleep(standby::REFRESH).await;
        };
        tokio::pin!(refresh);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = deps.fence.cancelled() => break,
                _ = leadership.changed() => break,
                command = commands.recv() => match command {
                    Some(command) => refuse(command, &deps),
                    None => return,
                },
                _ = &mut refresh => break,
            }
        }
    }
}

/// The pause before the `n`-th step-down in a row (0-based) gives up
/// leadership: 10 s doubling, capped at 5 min.
fn step_down_pause(n: u32) -> Duration {
    STEP_DOWN_BACKOFF
        .saturating_mul(2u32.saturating_pow(n.min(16)))
        .min(STEP_DOWN_BACKOFF_MAX)
}

async fn abdicate(deps: &CoreDeps) {
    if let Err(e) = deps.coordinator.abdicate().await {
        tracing::warn!(error = %e, "abdication failed");
    }
}

/// Answers a command on a replica that does not lead (or leads only until
/// its step-down pause ends): with the leader's URL when another replica
/// leads, with none when this one still holds the election, so that a
/// client is never sent back to the replica that refused it.
fn refuse(command: Command, deps: &CoreDeps) {
    let leader_url = {
        let snapshot = deps.snapshots.borrow();
        match snapshot.leadership {
            Leadership::Leader { .. } => None,
            _ => snapshot.leader_url(),
        }
    };
    command.refuse(CommandError::NotLeader { leader_url });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_down_pauses_double_up_to_five_minutes() {
        let secs: Vec<u64> = (0..7).map(|n| step_down_pause(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(step_down_pause(u32::MAX), STEP_DOWN_BACKOFF_MAX);
    }
}
