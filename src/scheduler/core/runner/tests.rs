//! The runner's steps (`steps.rs`): a command, or a command's write
//! result, waits for at most one bounded step of other work however much
//! waits — thousands of status updates on the stream, thousands of
//! task-write results from ZooKeeper.

use super::steps::{UPDATES_PER_STEP, WRITTEN_PER_STEP};
use super::*;
use crate::coordination::memory::MemoryCoordinator;
use crate::coordination::{ReplicaInfo, Written};
use crate::mesos::v1::{self, TaskState};
use crate::scheduler::commands::Answer;
use crate::scheduler::commands::Request;
use crate::scheduler::snapshot::ReconcileKind;

/// What one step may feed: a millisecond or so of the machine's work (a
/// status update or a task-write result costs it about 10 µs at 50,000
/// tasks). The runner used to feed up to 1,024 UPDATEs, or a whole batch
/// of 125 write results, as one step.
const MOST_PER_STEP: usize = 64;
const _: () = assert!(UPDATES_PER_STEP <= MOST_PER_STEP && WRITTEN_PER_STEP <= MOST_PER_STEP);

fn deps() -> CoreDeps {
    let cfg = CoreConfig::default();
    let replica = ReplicaInfo::new("http://unit.test", "d1", "test");
    CoreDeps {
        coordinator: Arc::new(MemoryCoordinator::new(replica.clone())),
        client: ClientConfig::default(),
        metrics: crate::scheduler::metrics::Metrics::register(
            &mut crate::scheduler::metrics::registry(),
        ),
        snapshots: tokio::sync::watch::Sender::new(Arc::new(Snapshot::standby(
            replica,
            &cfg.framework_name,
            &cfg.role,
            cfg.strategy,
        ))),
        initial_services: Vec::new(),
        fence: CancellationToken::new(),
    }
}

/// A machine not started: its task records are not read, so the updates
/// it is fed wait in memory (nothing is written), and it answers a
/// reconciliation request at once.
fn machine(deps: &CoreDeps) -> Machine {
    Machine::new(
        CoreConfig::default(),
        TermInfo {
            term: 1,
            replica: deps.coordinator.replica().clone(),
            wary: false,
            initial_services: Vec::new(),
            ids: IdSource::from_os(),
            first_run_id: 1,
        },
        Instant::now(),
        unix_now_secs(),
    )
}

fn update(i: usize) -> ClientEvent {
    let status = v1::TaskStatus {
        task_id: v1::TaskId {
            value: format!("web.{i}"),
        },
        state: TaskState::TaskRunning as i32,
        uuid: Some(format!("u{i}").into_bytes()),
        ..Default::default()
    };
    ClientEvent::Event(Box::new(crate::mesos::v1::scheduler::Event {
        r#type: Some(event::Type::Update as i32),
        update: Some(event::Update { status }),
        ..Default::default()
    }))
}

/// `n` task-write results as a batch brings them (IDs nobody waits for:
/// the machine ignores them).
fn written_batch(first: u64, n: usize) -> Msg {
    let results = (0..n as u64)
        .map(|i| {
            (
                RequestId(first + i),
                StoreResult::Written(Ok(Written::Version(1))),
            )
        })
        .collect();
    Msg::StoreBatch(results)
}

/// Puts `n` UPDATEs on the runner's stream; the sender's capacity says how
/// many were read.
fn queue_updates(runner: &mut Runner<'_>, n: usize) -> mpsc::Sender<ClientEvent> {
    let (events_tx, events_rx) = mpsc::channel(n);
    for i in 0..n {
        events_tx
            .try_send(update(i))
            .expect("room for every update");
    }
    runner.events = Some(events_rx);
    events_tx
}

/// Sends `batches` batches of 125 task-write results to the runner.
fn queue_written_batches(runner: &Runner<'_>, batches: usize) {
    for b in 0..batches {
        let _ = runner
            .results_tx
            .send(written_batch((b * 1_000) as u64, 125));
    }
}

/// Sends the result of a store operation other than a task write (a
/// command's write).
fn queue_command_write_result(runner: &Runner<'_>) {
    let _ = runner.results_tx.send(Msg::Stored(
        RequestId(u64::MAX),
        StoreResult::Written(Ok(Written::Version(1))),
        std::time::Instant::now(),
    ));
}

fn reconcile() -> (Command, tokio::sync::oneshot::Receiver<Answer>) {
    Command::new(Request::Reconcile(ReconcileKind::Explicit))
}

/// With 4,096 UPDATEs on the stream and 16 batches of task-write results
/// back from ZooKeeper, a command sent after any step is answered by the
/// next one, and no step feeds more than [`MOST_PER_STEP`] of either.
#[tokio::test]
async fn a_command_behind_a_large_backlog_waits_for_one_bounded_step() {
    let deps = deps();
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    let mut runner = Runner::new(&deps, token.clone(), Work(token.child_token()), None);
    let mut machine = machine(&deps);
    const UPDATES: usize = 4_096;
    const BATCHES: usize = 16;
    let events_tx = queue_updates(&mut runner, UPDATES);
    queue_written_batches(&runner, BATCHES);
    let (commands_tx, mut commands) = mpsc::channel(4);
    let mut steps = 0;
    let mut answered = 0;
    loop {
        let (events_before, written_before) = (events_tx.capacity(), {
            runner.collect();
            runner.inbox.written_len()
        });
        if !runner.step(&mut machine, &mut commands) {
            break;
        }
        steps += 1;
        let updates_fed = events_tx.capacity() - events_before;
        let written_fed = written_before - runner.inbox.written_len();
        assert!(
            updates_fed <= MOST_PER_STEP && written_fed <= MOST_PER_STEP,
            "step {steps} fed {updates_fed} updates and {written_fed} write results"
        );
        // A command now: the next step answers it, whatever still waits.
        if steps % 7 == 0 {
            let (command, mut reply) = reconcile();
            commands_tx.try_send(command).expect("room");
            assert!(runner.step(&mut machine, &mut commands));
            assert!(
                matches!(reply.try_recv(), Ok(Answer::Reconcile(_))),
                "the command sent after step {steps} was not answered by the next step"
            );
            answered += 1;
            assert_eq!(
                events_tx.capacity(),
                events_before + updates_fed,
                "the command's step fed updates"
            );
        }
    }
    assert_eq!(events_tx.capacity(), UPDATES, "every update was fed");
    assert_eq!(runner.inbox.written_len(), 0, "every write result was fed");
    assert!(answered >= 10, "{answered} commands answered");
}

/// A command's write result (a store operation other than a task write)
/// that came back after many batches of task-write results is fed at the
/// next step, before any of them.
#[tokio::test]
async fn a_command_write_result_overtakes_task_write_results() {
    let deps = deps();
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    let mut runner = Runner::new(&deps, token.clone(), Work(token.child_token()), None);
    let mut machine = machine(&deps);
    const BATCHES: usize = 20;
    queue_written_batches(&runner, BATCHES);
    queue_command_write_result(&runner);
    let (_commands_tx, mut commands) = mpsc::channel(1);
    assert!(runner.step(&mut machine, &mut commands));
    assert!(
        runner.inbox.singles_is_empty(),
        "the command's write result still waits"
    );
    assert_eq!(
        runner.inbox.written_len(),
        BATCHES * 125,
        "task-write results were fed before the command's"
    );
}

/// A round that woke for a command and spent longer than
/// [`DRAIN_FOR`](super::DRAIN_FOR) on it still takes steps, and a stream
/// of queued commands does not hold up what else waits: a command's write
/// result goes first, and commands and the backlog take turns.
#[tokio::test]
async fn a_stream_of_commands_does_not_hold_up_the_rest() {
    let deps = deps();
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    let mut runner = Runner::new(&deps, token.clone(), Work(token.child_token()), None);
    let mut machine = machine(&deps);
    const UPDATES: usize = 1_024;
    let events_tx = queue_updates(&mut runner, UPDATES);
    queue_command_write_result(&runner);
    const COMMANDS: usize = 64;
    let (commands_tx, mut commands) = mpsc::channel(COMMANDS);
    let mut replies = Vec::new();
    for _ in 0..COMMANDS {
        let (command, reply) = reconcile();
        commands_tx.try_send(command).expect("room");
        replies.push(reply);
    }
    runner.collect();
    assert!(!runner.inbox.singles_is_empty());
    // The command that woke the round took 10 ms.
    let round = std::time::Instant::now() - Duration::from_millis(10);
    runner.drain(&mut machine, &mut commands, round);
    assert!(
        runner.inbox.singles_is_empty(),
        "the command's write result still waits"
    );
    let updates_fed = events_tx.capacity();
    let answered = replies
        .iter_mut()
        .map(|r| r.try_recv())
        .filter(Result::is_ok)
        .count();
    assert!(
        updates_fed > 0,
        "no update fed while {answered} commands were"
    );
    assert!(answered > 0);
}
