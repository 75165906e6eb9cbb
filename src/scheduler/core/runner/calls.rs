//! Mesos calls for the runner.
//!
//! - Offer calls (ACCEPT, DECLINE, SUPPRESS, REVIVE) go through one ordered
//!   lane: a REVIVE must not overtake the DECLINE whose filter it clears,
//!   nor a SUPPRESS the REVIVE before it. Consecutive ACCEPTs and DECLINEs
//!   are sent together; SUPPRESS and REVIVE wait for what is before them.
//! - KILL, RECONCILE, MESSAGE and TEARDOWN go at once, at most
//!   [`CALLS_IN_FLIGHT`] together.
//! - Acknowledgements queue in one lane that [`ACKS_IN_FLIGHT`] senders
//!   take from, each a task of its own, on the client's keep-alive
//!   connections; a failed one is only logged (the agent sends the update
//!   again). The queue holds only the acknowledgements' IDs: a launch of
//!   tens of thousands of tasks brings as many updates at once, and only
//!   the ones in flight hold an HTTP request's state.
//!
//! The acknowledgements and the offer calls together stay within the
//! connections the client keeps ([`MAX_IDLE_CALL_CONNECTIONS`]): a launch
//! then sends all its calls on connections it opened once.
//!
//! Every call uses the client of the moment: after a re-subscription the new
//! stream ID; with no client, the call fails with `NotSubscribed`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use tokio::sync::{Semaphore, mpsc};

use super::{Msg, Work};
use crate::mesos::client::{CallError, MAX_IDLE_CALL_CONNECTIONS, SchedulerClient};
use crate::mesos::v1::scheduler::{Call, call};
use crate::mesos::v1::{self};
use crate::scheduler::core::io::{Ack, Input, MesosCall, RequestId};
use crate::scheduler::ids::TaskId;

/// Calls other than offer calls and acknowledgements in flight at once.
const CALLS_IN_FLIGHT: usize = 64;
/// Acknowledgements in flight at once; with the offer calls, within the
/// connections the client keeps (the floor of `benches/` keeps 32).
const ACKS_IN_FLIGHT: usize = 64;
/// ACCEPTs and DECLINEs of the offer lane sent together.
const OFFER_CALLS_TOGETHER: usize = 32;

// A launch's calls reuse the client's kept connections: a call beyond them
// would open a connection and close it again when it ends.
const _: () = assert!(ACKS_IN_FLIGHT + OFFER_CALLS_TOGETHER <= MAX_IDLE_CALL_CONNECTIONS);

/// The client calls go through, replaced on every start.
pub(super) type SharedClient = Arc<Mutex<Option<SchedulerClient>>>;

fn current(client: &SharedClient) -> Option<SchedulerClient> {
    client.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The call side of the runner.
pub(super) struct CallLanes {
    client: SharedClient,
    offers: mpsc::UnboundedSender<(RequestId, MesosCall)>,
    calls: Arc<Semaphore>,
    acks: mpsc::UnboundedSender<Ack>,
    /// The acknowledgements queued or in flight.
    unanswered: Unanswered,
    results: mpsc::UnboundedSender<Msg>,
    work: Work,
}

/// The acknowledgements queued or in flight, by task and update uuid. An
/// agent sends an update again while its acknowledgement has not come
/// (10 s after it, then backing off: `src/slave/task_status_update_manager.cpp`
/// in apache/mesos); during a launch of 100,000 tasks acknowledgements
/// waited that long in the queue, and each retried update queued a second
/// acknowledgement of the same update (218,841 ACKNOWLEDGE calls for
/// 200,000 updates, up to 326,144 on a loaded machine). An update whose
/// acknowledgement is still queued or in flight is not queued again.
#[derive(Clone, Default)]
struct Unanswered(Arc<Mutex<HashSet<UpdateKey>>>);

/// An update: its task and uuid.
type UpdateKey = (TaskId, Vec<u8>);

impl Unanswered {
    /// True (and noted) unless `ack` is queued or in flight already.
    fn admit(&self, ack: &Ack) -> bool {
        let key = (ack.task_id.clone(), ack.uuid.clone());
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(key)
    }

    /// `ack` was sent (answered or failed): an update sent again may be
    /// acknowledged again.
    fn done(&self, task_id: &TaskId, uuid: Vec<u8>) {
        let key = (task_id.clone(), uuid);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }
}

impl CallLanes {
    pub(super) fn new(
        client: SharedClient,
        results: mpsc::UnboundedSender<Msg>,
        work: Work,
    ) -> CallLanes {
        let (offers, queue) = mpsc::unbounded_channel();
        work.spawn(offer_lane(client.clone(), queue, results.clone()));
        let (acks, ack_queue) = mpsc::unbounded_channel();
        let unanswered = Unanswered::default();
        ack_lane(client.clone(), ack_queue, unanswered.clone(), &work);
        CallLanes {
            client,
            offers,
            calls: Arc::new(Semaphore::new(CALLS_IN_FLIGHT)),
            acks,
            unanswered,
            results,
            work,
        }
    }

    /// Sends `call`; its result comes back as [`Input::Called`].
    pub(super) fn submit(&self, id: RequestId, call: MesosCall) {
        if is_offer_call(&call) {
            let _ = self.offers.send((id, call));
            return;
        }
        let client = self.client.clone();
        let permits = self.calls.clone();
        let results = self.results.clone();
        self.work.spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let result = send(current(&client), call).await;
            let _ = results.send(Msg::Input(Input::Called { id, result }));
        });
    }

    /// Acknowledges the updates, concurrently (see [`ack_lane`]), but those
    /// whose acknowledgement is queued or in flight already
    /// ([`Unanswered`]); with no client they are dropped (the agents send
    /// the updates again).
    pub(super) fn acknowledge(&self, acks: Vec<Ack>) {
        if current(&self.client).is_none() {
            return;
        }
        for ack in acks {
            if self.unanswered.admit(&ack) {
                let _ = self.acks.send(ack);
            }
        }
    }
}

/// The lane of acknowledgements: [`ACKS_IN_FLIGHT`] senders, each a task
/// of its own, take the oldest queued acknowledgement in turn and send it
/// with the client of the moment.
///
/// One task polling every acknowledgement in flight (as this lane did
/// once) ran all their HTTP exchanges on the one worker holding it, the
/// worker the core shares: at 50,000 tasks it acknowledged 3,000–4,000
/// updates a second, the floor 16,000. A launch waits on that pace: an
/// agent forwards a task's TASK_RUNNING only once its TASK_STARTING is
/// acknowledged (one update per task in flight,
/// `src/slave/task_status_update_manager.cpp` in apache/mesos). Senders
/// that live as long as the lane (instead of a task spawned per
/// acknowledgement) spare each acknowledgement a task's allocation and a
/// cancellation waiter.
fn ack_lane(
    client: SharedClient,
    queue: mpsc::UnboundedReceiver<Ack>,
    unanswered: Unanswered,
    work: &Work,
) {
    let queue = Arc::new(tokio::sync::Mutex::new(queue));
    for _ in 0..ACKS_IN_FLIGHT {
        let (client, queue, unanswered) = (client.clone(), queue.clone(), unanswered.clone());
        work.spawn(async move {
            loop {
                // The lock is fair: waiting senders take turns.
                let Some(ack) = queue.lock().await.recv().await else {
                    return;
                };
                let Some(client) = current(&client) else {
                    unanswered.done(&ack.task_id, ack.uuid);
                    continue;
                };
                let result = client
                    .acknowledge(
                        ack.agent_id.to_proto(),
                        ack.task_id.to_proto(),
                        ack.uuid.clone(),
                    )
                    .await;
                unanswered.done(&ack.task_id, ack.uuid);
                if let Err(e) = result {
                    tracing::warn!(task_id = %ack.task_id, error = %e, "acknowledge failed; the agent will re-send");
                }
            }
        });
    }
}

fn is_offer_call(call: &MesosCall) -> bool {
    matches!(
        call,
        MesosCall::Accept { .. }
            | MesosCall::Decline { .. }
            | MesosCall::Suppress
            | MesosCall::Revive
    )
}

/// The ordered lane of offer calls.
async fn offer_lane(
    client: SharedClient,
    mut queue: mpsc::UnboundedReceiver<(RequestId, MesosCall)>,
    results: mpsc::UnboundedSender<Msg>,
) {
    let mut next = None;
    loop {
        let first = match next.take() {
            Some(first) => first,
            None => match queue.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let mut group = vec![first];
        let together = matches!(
            group[0].1,
            MesosCall::Accept { .. } | MesosCall::Decline { .. }
        );
        while together && group.len() < OFFER_CALLS_TOGETHER {
            match queue.try_recv() {
                Ok(item @ (_, MesosCall::Accept { .. } | MesosCall::Decline { .. })) => {
                    group.push(item)
                }
                Ok(barrier) => {
                    next = Some(barrier);
                    break;
                }
                Err(_) => break,
            }
        }
        let client = current(&client);
        let sent = join_all(group.into_iter().map(|(id, call)| {
            let client = client.clone();
            async move { (id, send(client, call).await) }
        }))
        .await;
        for (id, result) in sent {
            let _ = results.send(Msg::Input(Input::Called { id, result }));
        }
    }
}

/// Sends one call with the client of the moment.
async fn send(client: Option<SchedulerClient>, call: MesosCall) -> Result<(), CallError> {
    let Some(client) = client else {
        return Err(CallError::NotSubscribed);
    };
    match call {
        MesosCall::Accept {
            offer_id,
            operations,
            refuse_seconds,
        } => {
            client
                .accept(
                    vec![v1::OfferId { value: offer_id }],
                    operations,
                    Some(v1::Filters {
                        refuse_seconds: Some(refuse_seconds),
                    }),
                )
                .await
        }
        MesosCall::Decline {
            offer_ids,
            refuse_seconds,
        } => {
            let ids = offer_ids
                .into_iter()
                .map(|value| v1::OfferId { value })
                .collect();
            let filters = refuse_seconds.map(|r| v1::Filters {
                refuse_seconds: Some(r),
            });
            client.decline(ids, filters).await
        }
        MesosCall::Kill {
            task_id,
            agent_id,
            grace,
        } => {
            client
                .call(Call {
                    r#type: Some(call::Type::Kill as i32),
                    kill: Some(call::Kill {
                        task_id: task_id.to_proto(),
                        agent_id: agent_id.map(|a| a.to_proto()),
                        kill_policy: Some(v1::KillPolicy {
                            grace_period: Some(v1::DurationInfo {
                                nanoseconds: i64::try_from(grace.as_nanos()).unwrap_or(i64::MAX),
                            }),
                        }),
                    }),
                    ..Default::default()
                })
                .await
        }
        MesosCall::Reconcile(tasks) => {
            let list = tasks
                .into_iter()
                .map(|(t, a)| (t.to_proto(), a.map(|a| a.to_proto())))
                .collect();
            client.reconcile(list).await
        }
        MesosCall::Suppress => client.suppress(Vec::new()).await,
        MesosCall::Revive => client.revive(Vec::new()).await,
        MesosCall::Message {
            agent_id,
            executor_id,
            data,
        } => {
            client
                .message(
                    agent_id.to_proto(),
                    v1::ExecutorId { value: executor_id },
                    data,
                )
                .await
        }
        MesosCall::Teardown => client.teardown().await,
        MesosCall::AnswerInverseOffers {
            inverse_offer_ids,
            accept,
            refuse_seconds,
        } => {
            let ids = inverse_offer_ids
                .into_iter()
                .map(|value| v1::OfferId { value })
                .collect();
            let filters = Some(v1::Filters {
                refuse_seconds: Some(refuse_seconds),
            });
            let (kind, accept_body, decline_body) = if accept {
                (
                    call::Type::AcceptInverseOffers,
                    Some(call::AcceptInverseOffers {
                        inverse_offer_ids: ids,
                        filters,
                    }),
                    None,
                )
            } else {
                (
                    call::Type::DeclineInverseOffers,
                    None,
                    Some(call::DeclineInverseOffers {
                        inverse_offer_ids: ids,
                        filters,
                    }),
                )
            };
            client
                .call(Call {
                    r#type: Some(kind as i32),
                    accept_inverse_offers: accept_body,
                    decline_inverse_offers: decline_body,
                    ..Default::default()
                })
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::mesos::client::{ClientConfig, Http, counting_server};

    /// A launch's calls, wave after wave of as many as the acknowledgement
    /// and offer lanes keep in flight together, go on the connections the
    /// first wave opened: none is closed and opened again.
    #[tokio::test]
    async fn a_launchs_calls_go_on_the_connections_opened_once() {
        const WAVES: usize = 4;
        let in_flight = ACKS_IN_FLIGHT + OFFER_CALLS_TOGETHER;
        // Each wave's calls are held until all have arrived: all at once.
        let server = counting_server::start(in_flight).await;
        let http = Http::new(&ClientConfig::default()).unwrap();
        for _ in 0..WAVES {
            counting_server::calls_at_once(&http, &server, in_flight).await;
            // A connection goes back to the pool just after its answer.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(server.accepted.load(Ordering::SeqCst), in_flight);
    }

    fn ack(task: &str, uuid: u8) -> Ack {
        Ack {
            agent_id: "agent-1".into(),
            task_id: task.into(),
            uuid: vec![uuid; 16],
        }
    }

    /// An update sent again while its acknowledgement is queued or in
    /// flight is not acknowledged twice; once that acknowledgement was
    /// sent, an update sent again is acknowledged again (the first may
    /// have been lost), and other updates of the task are their own.
    #[test]
    fn an_acknowledgement_queued_or_in_flight_is_not_queued_again() {
        let unanswered = Unanswered::default();
        assert!(unanswered.admit(&ack("web.0", 1)));
        assert!(!unanswered.admit(&ack("web.0", 1)), "a retried update");
        assert!(unanswered.admit(&ack("web.0", 2)), "the task's next update");
        assert!(unanswered.admit(&ack("web.1", 1)), "another task");
        unanswered.done(&"web.0".into(), vec![1; 16]);
        assert!(
            unanswered.admit(&ack("web.0", 1)),
            "sent: acknowledged again"
        );
    }
}
