//! The floor: a do-nothing scheduler on the crate's own Mesos client
//! (`mesos_appliance::mesos::client`). It keeps no state beyond one byte per
//! task, persists nothing and decides nothing: every offer is accepted with
//! as many tasks as fit, every update with a `uuid` is acknowledged (at most
//! [`ACKS_IN_FLIGHT`] at a time, on the client's keep-alive connections,
//! queued so that reading events never waits for them), and once all tasks
//! run and their acknowledgements are answered it asks an explicit
//! reconciliation of every task.
//! What it achieves is what `mesos-testbed` allows: the limit a real
//! scheduler races.
//!
//! It runs as its own process (the bench binary re-executed with
//! `--floor-client <master URL> <tasks>`), so its RSS is its own, and
//! speaks the line protocol of [`super::clients`] on stdout, with the
//! phases of its launch (`phase <name> <seconds>`, from its start):
//! `subscribed`, `offers` (the first OFFERS event), `accepted` (the last
//! task placed in an ACCEPT), `first-running`; they show where the floor's
//! time goes.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mesos_appliance::mesos::client::{ClientConfig, ClientEvent, SchedulerClient};
use mesos_appliance::mesos::detector::MasterSpec;
use mesos_appliance::mesos::resources::Resources;
use mesos_appliance::mesos::v1::scheduler::event;
use mesos_appliance::mesos::v1::{self, TaskState, task_status};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use super::clients::{SERVICE_COMMAND, TASK_CPUS_MILLIS, TASK_MEM};

/// Acknowledgements sent concurrently (each is one HTTP call, on a
/// keep-alive connection of its own).
const ACKS_IN_FLIGHT: usize = 32;

/// Per task: where it stands, one byte each.
const LAUNCHED: u8 = 1;
const RUNNING: u8 = 2;
const ANSWERED: u8 = 3;

/// `--floor-client <master URL> <tasks>`: runs until killed.
pub fn main(args: &[String]) {
    let (Some(master), Some(tasks)) = (args.first(), args.get(1).and_then(|n| n.parse().ok()))
    else {
        eprintln!("usage: --floor-client <master URL> <tasks>");
        std::process::exit(2);
    };
    let runtime = super::runtime();
    if let Err(error) = runtime.block_on(run(master, tasks)) {
        eprintln!("floor client: {error}");
        std::process::exit(1);
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `phase <name> <seconds since started>`.
fn phase(name: &str, started: Instant) {
    say(&format!(
        "phase {name} {:.3}",
        started.elapsed().as_secs_f64()
    ));
}

fn task_index(task_id: &str) -> Option<usize> {
    task_id.strip_prefix("floor-")?.parse().ok()
}

/// One acknowledgement to send: agent, task, update UUID.
type Ack = (v1::AgentId, v1::TaskId, Vec<u8>);

/// Starts [`ACKS_IN_FLIGHT`] senders taking acknowledgements from one
/// queue, oldest first, each on its own keep-alive connection; returns the
/// queue's sending end; `pending` counts acknowledgements queued or in
/// flight (the caller adds one per acknowledgement it queues). The queue is unbounded: it holds what the master
/// has already sent (one entry per update), and the event loop must never
/// wait on it.
fn acknowledger(client: SchedulerClient, pending: Arc<AtomicUsize>) -> mpsc::UnboundedSender<Ack> {
    let (tx, rx) = mpsc::unbounded_channel::<Ack>();
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..ACKS_IN_FLIGHT {
        let (client, rx, pending) = (client.clone(), rx.clone(), pending.clone());
        tokio::spawn(async move {
            loop {
                let next = rx.lock().await.recv().await;
                let Some((agent_id, task_id, uuid)) = next else {
                    return;
                };
                if let Err(error) = client.acknowledge(agent_id, task_id, uuid).await {
                    eprintln!("ACKNOWLEDGE failed: {error}");
                }
                pending.fetch_sub(1, Ordering::AcqRel);
            }
        });
    }
    tx
}

/// When the reconciliation under way started, if one is.
fn started_at(started: &std::sync::Mutex<Option<Instant>>) -> Option<Instant> {
    started.lock().ok().and_then(|t| *t)
}

/// Sends one RECONCILE naming all `n` tasks, timed on its own: it starts
/// (and `started` is set) once every acknowledgement sent so far is
/// answered.
fn reconcile_all(
    client: &SchedulerClient,
    n: usize,
    pending: &Arc<AtomicUsize>,
    started: &Arc<std::sync::Mutex<Option<Instant>>>,
) {
    let all = (0..n)
        .map(|i| {
            let id = v1::TaskId {
                value: format!("floor-{i}"),
            };
            (id, None)
        })
        .collect();
    let (client, pending, started) = (client.clone(), pending.clone(), started.clone());
    tokio::spawn(async move {
        while pending.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if let Ok(mut at) = started.lock() {
            *at = Some(Instant::now());
        }
        if let Err(error) = client.reconcile(all).await {
            eprintln!("RECONCILE failed: {error}");
        }
    });
}

async fn run(master: &str, n: usize) -> Result<(), String> {
    let started = Instant::now();
    let spec = MasterSpec::parse(master).map_err(|e| e.to_string())?;
    let info = v1::FrameworkInfo {
        user: "root".into(),
        name: "floor".into(),
        failover_timeout: Some(60.0),
        ..Default::default()
    };
    let (client, mut events) =
        SchedulerClient::start(ClientConfig::new(spec), info, CancellationToken::new());
    let pending_acks = Arc::new(AtomicUsize::new(0));
    let acks = acknowledger(client.clone(), pending_acks.clone());
    let task_resources = Resources::parse(&format!(
        "cpus:{};mem:{TASK_MEM}",
        TASK_CPUS_MILLIS as f64 / 1000.0
    ))
    .expect("literal resources")
    .to_protos(None);
    let mut tasks = vec![0u8; n];
    let mut next = 0;
    let mut running = 0;
    let mut answered = 0;
    // When the reconciliation under way started (none yet, or between
    // two), and how many are still to run after it.
    let reconcile_started: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let mut reconciles_left = super::reconciles();
    let mut offered = false;
    while let Some(event) = events.recv().await {
        let event = match event {
            ClientEvent::Event(event) => event,
            ClientEvent::Stopped(reason) => return Err(format!("client stopped: {reason:?}")),
            ClientEvent::Subscribed(_) => {
                phase("subscribed", started);
                continue;
            }
            ClientEvent::Disconnected { .. } => continue,
        };
        match event.r#type() {
            event::Type::Offers => {
                if !offered {
                    offered = true;
                    phase("offers", started);
                }
                for offer in event.offers.map(|o| o.offers).unwrap_or_default() {
                    let free = Resources::from_protos(&offer.resources);
                    let fit = ((free.scalar("cpus") * 1000.0).round() as usize
                        / TASK_CPUS_MILLIS as usize)
                        .min(free.scalar("mem") as usize / TASK_MEM as usize)
                        .min(n - next);
                    let client = client.clone();
                    if fit == 0 {
                        tokio::spawn(async move { client.decline(vec![offer.id], None).await });
                        continue;
                    }
                    let infos = (next..next + fit)
                        .map(|i| v1::TaskInfo {
                            name: format!("floor-{i}"),
                            task_id: v1::TaskId {
                                value: format!("floor-{i}"),
                            },
                            agent_id: offer.agent_id.clone(),
                            resources: task_resources.clone(),
                            command: Some(v1::CommandInfo {
                                value: Some(SERVICE_COMMAND.into()),
                                shell: Some(true),
                                ..Default::default()
                            }),
                            ..Default::default()
                        })
                        .collect();
                    for state in &mut tasks[next..next + fit] {
                        *state = LAUNCHED;
                    }
                    next += fit;
                    if next == n {
                        phase("accepted", started);
                    }
                    let launch = v1::offer::Operation {
                        r#type: Some(v1::offer::operation::Type::Launch as i32),
                        launch: Some(v1::offer::operation::Launch { task_infos: infos }),
                        ..Default::default()
                    };
                    tokio::spawn(async move {
                        if let Err(error) = client.accept(vec![offer.id], vec![launch], None).await
                        {
                            // Its tasks are not relaunched: the run cannot
                            // reach N running, so it ends now rather than
                            // at the deadline.
                            eprintln!("ACCEPT failed: {error}");
                            std::process::exit(3);
                        }
                    });
                }
            }
            event::Type::Update => {
                let Some(status) = event.update.map(|u| u.status) else {
                    continue;
                };
                if let (Some(uuid), Some(agent_id)) = (status.uuid.clone(), status.agent_id.clone())
                {
                    // Queued, not awaited: the event loop reads on (offers,
                    // later updates) while the acknowledgements go out in
                    // arrival order, ACKS_IN_FLIGHT at a time.
                    pending_acks.fetch_add(1, Ordering::AcqRel);
                    let _ = acks.send((agent_id, status.task_id.clone(), uuid));
                }
                let Some(i) = task_index(&status.task_id.value).filter(|i| *i < n) else {
                    continue;
                };
                let reconciliation =
                    status.reason == Some(task_status::Reason::Reconciliation as i32);
                let under_way = started_at(&reconcile_started).is_some();
                if reconciliation && under_way && tasks[i] == RUNNING {
                    tasks[i] = ANSWERED;
                    answered += 1;
                    if answered == n {
                        let took = reconcile_started
                            .lock()
                            .map(|mut t| t.take().map(|t| t.elapsed()))
                            .ok()
                            .flatten()
                            .unwrap_or_default();
                        say(&format!("reconciled {:.3}", took.as_secs_f64()));
                        reconciles_left = reconciles_left.saturating_sub(1);
                        if reconciles_left > 0 {
                            tasks.fill(RUNNING);
                            answered = 0;
                            reconcile_all(&client, n, &pending_acks, &reconcile_started);
                        }
                    }
                } else if status.state() == TaskState::TaskRunning && tasks[i] == LAUNCHED {
                    tasks[i] = RUNNING;
                    running += 1;
                    if running == 1 {
                        phase("first-running", started);
                    }
                    if running == n {
                        say("running");
                        reconcile_all(&client, n, &pending_acks, &reconcile_started);
                    }
                } else if !reconciliation
                    && !matches!(
                        status.state(),
                        // TASK_RUNNING again: a retried update whose
                        // acknowledgement was still on its way.
                        TaskState::TaskStarting | TaskState::TaskRunning
                    )
                {
                    eprintln!(
                        "task {} is {:?}: {}",
                        status.task_id.value,
                        status.state(),
                        status.message.unwrap_or_default()
                    );
                }
            }
            _ => {}
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err("the event stream ended".into())
}
