//! ZooKeeper for the runner: task writes in batches, everything else at
//! once beside them.
//!
//! Task record writes and deletes queue here and leave as
//! [`Coordinator::write_records`] batches (ZooKeeper `multi`s), at most
//! [`BATCHES_IN_FLIGHT`] at a time: enough to keep ZooKeeper busy, few
//! enough that a service write or a framework-ID check sent meanwhile is
//! not stuck behind thousands of task writes in ZooKeeper's queue. Other
//! operations are sent at once, each on its own, and go first: while one
//! is out no new task batch is sent, so it waits behind at most the
//! batches already sent (ZooKeeper serves one session's requests in
//! order), never behind the backlog. While commands come, those batches
//! are small and one at a time ([`BATCH_NEAR_COMMANDS`]). A launch's
//! records go ahead of other task writes, which keep a share of each batch
//! ([`StoreLane::take_batch`]).

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Msg, Work};
use crate::coordination::{
    CoordinationError, Coordinator, Expect, RecordKind, RecordMirror, RecordStore, RecordWrite,
    Written,
};
use crate::scheduler::core::io::{RequestId, StoreOp, StoreResult};
use crate::scheduler::drains::DrainRecord;
use crate::scheduler::ids::TaskId;
use crate::scheduler::jobs::{JobRecord, RunRecord};
use crate::scheduler::records::ServiceRecord;
use crate::scheduler::records::TaskRecord;

/// Task writes per batch (one ZooKeeper `multi` of the ZooKeeper
/// implementation; 250 records of about 600 bytes are far from its 1 MiB
/// `jute.maxbuffer`, and the coordinator splits a batch that is not).
/// ZooKeeper commits a `multi` as one transaction: larger batches write
/// more records per commit (125 → 250 with twice the launches under way
/// halved the ACCEPT phase of a 50,000-task launch, `docs/benchmarks.md`).
const BATCH: usize = 250;
/// Batches in flight at once: two keep ZooKeeper busy (one is committed
/// while the next waits), and a command's write (a service, the audit log)
/// waits behind at most `2 × BATCH` task writes in ZooKeeper's queue.
const BATCHES_IN_FLIGHT: usize = 2;
/// While commands come (an operator's write was sent within
/// [`COMMANDS_RECENT`]), task writes leave one batch of this many at a
/// time, so that the next command's write waits behind at most that: at
/// 10,000 tasks launching under the benchmark's probes, a command's
/// ZooKeeper write waited p99 304 ms behind two full batches
/// (`docs/benchmarks.md`, "A fifth run"). A launch nobody commands meanwhile
/// keeps the full pace.
const BATCH_NEAR_COMMANDS: usize = 50;
/// How long after an operator's write task batches stay small.
const COMMANDS_RECENT: std::time::Duration = std::time::Duration::from_secs(2);
/// The share of a batch other task writes keep while a launch's records
/// wait too: one in [`OTHERS_SHARE`] (see [`StoreLane::take_batch`]).
const OTHERS_SHARE: usize = 5;

/// A task write waiting for its batch.
enum TaskWrite {
    Put(Arc<TaskRecord>, Expect),
    Delete(TaskId, Expect),
}

/// The store side of the runner.
pub(super) struct StoreLane {
    coordinator: Arc<dyn Coordinator>,
    tasks: RecordStore<TaskRecord>,
    services: RecordStore<ServiceRecord>,
    jobs: JobStores,
    /// The records of launches (creates): their ACCEPT waits for them.
    launches: VecDeque<(RequestId, TaskWrite)>,
    /// Every other task write (updates, kill marks, deletes).
    queue: VecDeque<(RequestId, TaskWrite)>,
    in_flight: usize,
    /// Operations other than task writes in flight: task batches wait.
    singles: usize,
    /// When an operator's write (a command's) was last sent.
    last_command: Option<tokio::time::Instant>,
    results: mpsc::UnboundedSender<Msg>,
    work: Work,
    /// The follower's mirror of the task records, until the term's first
    /// listing of them takes it.
    mirror: Option<RecordMirror<TaskRecord>>,
}

impl StoreLane {
    /// A lane on `coordinator` answering on `results`. `mirror`: the task
    /// records as this replica kept them while it followed; the term's first
    /// [`StoreOp::ListTasks`] is answered from it after reading what changed
    /// ([`RecordMirror::sync`]) rather than by reading every record.
    pub(super) fn new(
        coordinator: Arc<dyn Coordinator>,
        results: mpsc::UnboundedSender<Msg>,
        work: Work,
        mirror: Option<RecordMirror<TaskRecord>>,
    ) -> StoreLane {
        StoreLane {
            tasks: RecordStore::new(coordinator.clone(), RecordKind::Tasks),
            services: RecordStore::new(coordinator.clone(), RecordKind::Services),
            jobs: JobStores {
                jobs: RecordStore::new(coordinator.clone(), RecordKind::Jobs),
                runs: RecordStore::new(coordinator.clone(), RecordKind::Runs),
            },
            coordinator,
            launches: VecDeque::new(),
            queue: VecDeque::new(),
            in_flight: 0,
            singles: 0,
            last_command: None,
            results,
            work,
            mirror,
        }
    }

    /// Takes one operation: task writes queue for a batch, the rest go now.
    pub(super) fn submit(&mut self, id: RequestId, op: StoreOp) {
        match op {
            StoreOp::PutTask(record, Expect::Absent) => self
                .launches
                .push_back((id, TaskWrite::Put(record, Expect::Absent))),
            StoreOp::PutTask(record, expect) => {
                self.queue.push_back((id, TaskWrite::Put(record, expect)))
            }
            StoreOp::DeleteTask(task, expect) => {
                self.queue.push_back((id, TaskWrite::Delete(task, expect)))
            }
            other => {
                if other.is_command_write() {
                    self.last_command = Some(tokio::time::Instant::now());
                }
                self.singles += 1;
                self.spawn_single(id, other);
            }
        }
    }

    /// An operation other than a task write came back.
    pub(super) fn single_done(&mut self) {
        self.singles = self.singles.saturating_sub(1);
    }

    /// A batch came back.
    pub(super) fn batch_done(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Sends queued task writes while fewer than [`BATCHES_IN_FLIGHT`]
    /// batches are out and no other operation is; one batch of
    /// [`BATCH_NEAR_COMMANDS`] at a time while commands come.
    pub(super) fn pump(&mut self) {
        let near_commands = self
            .last_command
            .is_some_and(|at| at.elapsed() < COMMANDS_RECENT);
        let (most, size) = if near_commands {
            (1, BATCH_NEAR_COMMANDS)
        } else {
            (BATCHES_IN_FLIGHT, BATCH)
        };
        while self.singles == 0
            && self.in_flight < most
            && !(self.queue.is_empty() && self.launches.is_empty())
        {
            let batch = self.take_batch(size);
            self.in_flight += 1;
            let tasks = self.tasks.clone();
            let results = self.results.clone();
            self.work.spawn(async move {
                let mut answers: Vec<(RequestId, StoreResult)> = Vec::with_capacity(batch.len());
                let mut ids = Vec::with_capacity(batch.len());
                let mut writes = Vec::with_capacity(batch.len());
                for (id, write) in batch {
                    let write = match write {
                        TaskWrite::Put(record, expect) => {
                            RecordWrite::put(record.task_id.as_str(), record.as_ref(), expect)
                        }
                        TaskWrite::Delete(task, expect) => Ok(RecordWrite::Delete {
                            key: task.to_string(),
                            expect,
                        }),
                    };
                    match write {
                        Ok(write) => {
                            ids.push(id);
                            writes.push(write);
                        }
                        Err(e) => answers.push((id, StoreResult::Written(Err(e)))),
                    }
                }
                let written = tasks.write_many(writes).await;
                answers.extend(
                    ids.into_iter()
                        .zip(written)
                        .map(|(id, r)| (id, StoreResult::Written(r))),
                );
                let _ = results.send(Msg::StoreBatch(answers));
            });
        }
    }

    /// The next batch of at most `size` task writes: a launch's records
    /// first, but other writes keep one place in [`OTHERS_SHARE`] while
    /// both wait (and take what launches leave).
    ///
    /// A launch waits only for its records: its tasks' later writes (the
    /// first TASK_RUNNING, acknowledged ahead of its write) are on no one's
    /// path, and taken in arrival order they held each create back behind
    /// an update of a task already launched: at 100,000 tasks ZooKeeper
    /// wrote about 7,000 records a second, half of them such updates, and
    /// the last ACCEPT waited for the last create (`docs/benchmarks.md`,
    /// "A launch's records first"). Kill marks, ends and deletes still move
    /// at a fifth of the pace at least. Writes of one task are never
    /// reordered: a task has one write in flight at a time (`TaskTable`),
    /// and its create is its first.
    fn take_batch(&mut self, size: usize) -> Vec<(RequestId, TaskWrite)> {
        let others = if self.launches.is_empty() {
            size
        } else {
            size.div_ceil(OTHERS_SHARE)
        };
        let mut batch: Vec<(RequestId, TaskWrite)> =
            self.queue.drain(..others.min(self.queue.len())).collect();
        let launches = (size - batch.len()).min(self.launches.len());
        batch.extend(self.launches.drain(..launches));
        let rest = (size - batch.len()).min(self.queue.len());
        batch.extend(self.queue.drain(..rest));
        batch
    }

    fn spawn_single(&mut self, id: RequestId, op: StoreOp) {
        if matches!(op, StoreOp::ListTasks)
            && let Some(mirror) = self.mirror.take()
        {
            let results = self.results.clone();
            self.work.spawn(async move {
                let started = std::time::Instant::now();
                let synced = mirror.sync().await;
                super::timing::stored("list_tasks", started.elapsed());
                if let Ok((list, reads)) = &synced {
                    tracing::info!(
                        records = list.records.len(),
                        read = reads,
                        took_ms = started.elapsed().as_millis() as u64,
                        "task records from the follower's mirror"
                    );
                }
                let result = StoreResult::Tasks(synced.map(|(list, _)| list));
                let _ = results.send(Msg::Stored(id, result, std::time::Instant::now()));
            });
            return;
        }
        let coordinator = self.coordinator.clone();
        let tasks = self.tasks.clone();
        let services = self.services.clone();
        let jobs = self.jobs.clone();
        let results = self.results.clone();
        let drains = RecordStore::<DrainRecord>::new(self.coordinator.clone(), RecordKind::Drains);
        self.work.spawn(async move {
            let started = std::time::Instant::now();
            let name = super::timing::op_name(&op);
            let result = match op {
                StoreOp::ListJobs
                | StoreOp::PutJob(..)
                | StoreOp::DeleteJob(..)
                | StoreOp::ListRuns
                | StoreOp::PutRun(..)
                | StoreOp::DeleteRun(..) => run_job_op(&jobs, op).await,
                op => run_single(coordinator.as_ref(), &tasks, &services, &drains, op).await,
            };
            super::timing::stored(name, started.elapsed());
            let _ = results.send(Msg::Stored(id, result, std::time::Instant::now()));
        });
    }
}

/// The stores of job and run records.
#[derive(Clone)]
struct JobStores {
    jobs: RecordStore<JobRecord>,
    runs: RecordStore<RunRecord>,
}

/// A job or run operation (fenced writes, as every record write).
async fn run_job_op(stores: &JobStores, op: StoreOp) -> StoreResult {
    match op {
        StoreOp::ListJobs => StoreResult::Jobs(stores.jobs.list().await),
        StoreOp::PutJob(record, expect) => StoreResult::Written(
            stores
                .jobs
                .put(&record.spec.name, &record, expect)
                .await
                .map(Written::Version),
        ),
        StoreOp::DeleteJob(name, expect) => {
            StoreResult::Written(stores.jobs.delete(&name, expect).await.map(deleted))
        }
        StoreOp::ListRuns => StoreResult::Runs(stores.runs.list().await),
        StoreOp::PutRun(record, expect) => StoreResult::Written(
            stores
                .runs
                .put(&record.key(), &record, expect)
                .await
                .map(Written::Version),
        ),
        StoreOp::DeleteRun(key, expect) => {
            StoreResult::Written(stores.runs.delete(&key, expect).await.map(deleted))
        }
        _ => StoreResult::Written(Err(CoordinationError::Invalid(
            "not a job operation".into(),
        ))),
    }
}

fn run_job_op_unreachable() -> StoreResult {
    StoreResult::Written(Err(CoordinationError::Invalid(
        "job operations go through run_job_op".into(),
    )))
}

fn deleted(gone: bool) -> Written {
    if gone {
        Written::Deleted
    } else {
        Written::Absent
    }
}

/// One operation that is not a task write.
async fn run_single(
    coordinator: &dyn Coordinator,
    tasks: &RecordStore<TaskRecord>,
    services: &RecordStore<ServiceRecord>,
    drains: &RecordStore<DrainRecord>,
    op: StoreOp,
) -> StoreResult {
    match op {
        StoreOp::ReadFrameworkId => StoreResult::FrameworkId(
            coordinator
                .framework_id()
                .await
                .map(|v| v.map(|v| v.value.into())),
        ),
        StoreOp::StoreFrameworkId(id) => StoreResult::Written(
            coordinator
                .store_framework_id(id.as_str())
                .await
                .map(|v| Written::Version(v.version)),
        ),
        StoreOp::DeleteFrameworkId => StoreResult::Written(
            coordinator
                .delete_framework_id(Expect::Any)
                .await
                .map(deleted),
        ),
        StoreOp::ReadDeployment => StoreResult::Deployment(coordinator.deployment().await),
        StoreOp::WriteDeployment(record, expect) => StoreResult::Written(
            coordinator
                .write_deployment(&record, expect)
                .await
                .map(|v| Written::Version(v.version)),
        ),
        StoreOp::ListServices => StoreResult::Services(services.list().await),
        StoreOp::PutService(record, expect) => StoreResult::Written(
            services
                .put(&record.spec.name, &record, expect)
                .await
                .map(Written::Version),
        ),
        StoreOp::DeleteService(name, expect) => {
            StoreResult::Written(services.delete(&name, expect).await.map(deleted))
        }
        StoreOp::ListTasks => StoreResult::Tasks(tasks.list().await),
        StoreOp::ReadTask(task) => StoreResult::Task(Box::new(tasks.get(&task).await)),
        StoreOp::DeleteAllTasks => StoreResult::Count(tasks.delete_all().await),
        StoreOp::AppendAudit(entry) => StoreResult::Written(
            coordinator
                .append_audit(&entry)
                .await
                .map(|seq| Written::Version(i32::try_from(seq).unwrap_or(i32::MAX))),
        ),
        StoreOp::ListDrains => StoreResult::Drains(drains.list().await),
        StoreOp::PutDrain(record, expect) => StoreResult::Written(
            drains
                .put(record.agent_id.as_str(), &*record, expect)
                .await
                .map(Written::Version),
        ),
        // Batched by the lane; never sent alone.
        StoreOp::PutTask(..) | StoreOp::DeleteTask(..) => StoreResult::Written(Err(
            CoordinationError::Invalid("task writes go in batches".into()),
        )),
        // `run_job_op`.
        StoreOp::ListJobs
        | StoreOp::PutJob(..)
        | StoreOp::DeleteJob(..)
        | StoreOp::ListRuns
        | StoreOp::PutRun(..)
        | StoreOp::DeleteRun(..) => run_job_op_unreachable(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::ReplicaInfo;
    use crate::coordination::memory::MemoryCoordinator;
    use crate::mesos::v1::TaskState;
    use crate::scheduler::spec::service::ServiceSpec;
    use tokio_util::sync::CancellationToken;

    fn record(i: usize) -> TaskRecord {
        TaskRecord {
            instance: i as u32,
            fingerprint: "f".into(),
            agent_id: "agent-0".into(),
            hostname: "host-0".into(),
            launched_at: 1.0,
            updated_at: 1.0,
            ..TaskRecord::sample(&format!("web.{i}.t"), "web", TaskState::TaskStaging)
        }
    }

    /// A lane on `coordinator` with `tasks` task writes queued and pumped,
    /// then a service write (the command) submitted: the lane, its
    /// results, the command's request ID and the guard that stops it.
    fn queued_lane(
        coordinator: Arc<dyn Coordinator>,
        tasks: usize,
    ) -> (
        StoreLane,
        mpsc::UnboundedReceiver<Msg>,
        RequestId,
        tokio_util::sync::DropGuard,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let token = CancellationToken::new();
        let stop = token.clone().drop_guard();
        let mut lane = StoreLane::new(coordinator, tx, Work(token), None);
        for i in 0..tasks {
            lane.submit(
                RequestId(i as u64),
                StoreOp::PutTask(Arc::new(record(i)), Expect::Absent),
            );
        }
        lane.pump();
        let spec: ServiceSpec = serde_json::from_value(serde_json::json!({
            "name": "web", "command": "sleep 1", "cpus": 0.1, "mem": 16, "instances": 1
        }))
        .expect("a spec");
        let command = RequestId(u64::MAX);
        lane.submit(
            command,
            StoreOp::PutService(Box::new(ServiceRecord::new(spec)), Expect::Absent),
        );
        (lane, rx, command, stop)
    }

    /// A command's write (a service record here) sent while 5,000 task
    /// writes wait for their batches is answered after at most the
    /// batches already sent ([`BATCHES_IN_FLIGHT`]), not after the
    /// backlog: no task batch leaves while it is out.
    #[tokio::test]
    async fn a_command_write_overtakes_thousands_of_queued_task_writes() {
        let coordinator = Arc::new(MemoryCoordinator::new(ReplicaInfo::new(
            "http://unit.test",
            "d1",
            "test",
        )));
        const TASKS: usize = 5_000;
        let (mut lane, mut rx, command, _stop) = queued_lane(coordinator, TASKS);
        let mut batches = 0;
        let mut written = 0;
        let mut command_after = None;
        while written < TASKS || command_after.is_none() {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
                .await
                .expect("the lane answers")
                .expect("the channel is open");
            match msg {
                Msg::StoreBatch(answers) => {
                    batches += 1;
                    written += answers.len();
                    assert!(
                        answers
                            .iter()
                            .all(|(_, r)| matches!(r, StoreResult::Written(Ok(_))))
                    );
                    lane.batch_done();
                }
                Msg::Stored(id, result, _) => {
                    assert_eq!(id, command);
                    assert!(matches!(result, StoreResult::Written(Ok(_))), "{result:?}");
                    command_after = Some(batches);
                    lane.single_done();
                }
                Msg::Input(_) => unreachable!("the store lane sends no inputs"),
            }
            lane.pump();
        }
        let before = command_after.expect("answered");
        assert!(
            before <= BATCHES_IN_FLIGHT,
            "the command's write waited for {before} task batches"
        );
        assert!(batches >= TASKS.div_ceil(BATCH));
    }

    /// A launch's records (creates) go ahead of other task writes queued
    /// before them, which keep one place in [`OTHERS_SHARE`] of each batch
    /// while both wait, and take whole batches once the creates are out.
    #[tokio::test]
    async fn a_launch_s_records_go_first_and_other_writes_keep_a_share() {
        let coordinator = Arc::new(MemoryCoordinator::new(ReplicaInfo::new(
            "http://unit.test",
            "d1",
            "test",
        )));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let token = CancellationToken::new();
        let _stop = token.clone().drop_guard();
        let mut lane = StoreLane::new(coordinator, tx, Work(token), None);
        const EACH: usize = 1_000;
        // Updates first (records of tasks launched earlier), then creates.
        for i in 0..2 * EACH {
            let expect = if i < EACH {
                Expect::Any
            } else {
                Expect::Absent
            };
            lane.submit(
                RequestId(i as u64),
                StoreOp::PutTask(Arc::new(record(i)), expect),
            );
        }
        let mut mix = Vec::new();
        let mut written = 0;
        lane.pump();
        while written < 2 * EACH {
            let Some(Msg::StoreBatch(answers)) = rx.recv().await else {
                panic!("only task batches are sent");
            };
            written += answers.len();
            let creates = answers.iter().filter(|(id, _)| id.0 >= EACH as u64).count();
            mix.push((answers.len() - creates, creates));
            lane.batch_done();
            lane.pump();
        }
        let share = BATCH.div_ceil(OTHERS_SHARE);
        let creates_out = EACH.div_ceil(BATCH - share);
        for (n, (others, creates)) in mix.iter().enumerate() {
            if n < creates_out - 1 {
                assert_eq!(
                    (*others, *creates),
                    (share, BATCH - share),
                    "batch {n}: {mix:?}"
                );
            } else if n >= creates_out {
                assert_eq!(*creates, 0, "batch {n}: {mix:?}");
            }
        }
        assert_eq!(mix.iter().map(|m| m.1).sum::<usize>(), EACH);
    }

    /// After a command's write, task writes leave one batch of
    /// [`BATCH_NEAR_COMMANDS`] at a time (the next command waits behind
    /// that much at most), and full batches again once no command came for
    /// [`COMMANDS_RECENT`].
    #[tokio::test(start_paused = true)]
    async fn task_batches_are_small_and_one_at_a_time_while_commands_come() {
        let coordinator = Arc::new(MemoryCoordinator::new(ReplicaInfo::new(
            "http://unit.test",
            "d1",
            "test",
        )));
        const TASKS: usize = 2_000;
        let (mut lane, mut rx, command, _stop) = queued_lane(coordinator, TASKS);
        let mut sizes = Vec::new();
        let mut answered = false;
        while sizes.len() < 6 {
            let msg = rx.recv().await.expect("the channel is open");
            match msg {
                Msg::StoreBatch(answers) => {
                    sizes.push(answers.len());
                    lane.batch_done();
                }
                Msg::Stored(id, _, _) => {
                    assert_eq!(id, command);
                    answered = true;
                    lane.single_done();
                }
                Msg::Input(_) => unreachable!("the store lane sends no inputs"),
            }
            lane.pump();
            assert!(lane.in_flight <= 1 || sizes.len() < BATCHES_IN_FLIGHT);
        }
        assert!(answered);
        // The two sent before the command, then small ones.
        assert_eq!(
            sizes,
            [
                BATCH,
                BATCH,
                BATCH_NEAR_COMMANDS,
                BATCH_NEAR_COMMANDS,
                BATCH_NEAR_COMMANDS,
                BATCH_NEAR_COMMANDS
            ]
        );
        tokio::time::advance(COMMANDS_RECENT).await;
        // The small batch out comes back; then full ones, two at a time.
        while let Msg::StoreBatch(answers) = rx.recv().await.expect("open") {
            lane.batch_done();
            lane.pump();
            if answers.len() == BATCH_NEAR_COMMANDS {
                continue;
            }
            assert_eq!(answers.len(), BATCH);
            assert_eq!(lane.in_flight, BATCHES_IN_FLIGHT);
            return;
        }
        panic!("only task batches are left");
    }

    /// A coordinator whose service writes wait until [`Gate::open`]: it
    /// holds a command's write out for as long as the test likes, which no
    /// timing of a real ZooKeeper can do reliably. Everything else goes to
    /// the in-memory coordinator at once.
    struct Gate {
        inner: MemoryCoordinator,
        open: tokio::sync::Semaphore,
        /// `write_records` calls (task batches) received.
        batches: std::sync::atomic::AtomicUsize,
    }

    impl Gate {
        fn open(&self) {
            self.open.add_permits(1);
        }
    }

    #[async_trait::async_trait]
    impl Coordinator for Gate {
        fn replica(&self) -> &ReplicaInfo {
            self.inner.replica()
        }
        fn leadership(&self) -> tokio::sync::watch::Receiver<crate::coordination::Leadership> {
            self.inner.leadership()
        }
        fn term_token(&self, term: u64) -> CancellationToken {
            self.inner.term_token(term)
        }
        async fn members(&self) -> crate::coordination::Result<Vec<crate::coordination::Member>> {
            self.inner.members().await
        }
        async fn abdicate(&self) -> crate::coordination::Result<()> {
            self.inner.abdicate().await
        }
        async fn close(&self) {
            self.inner.close().await
        }
        async fn deployment(
            &self,
        ) -> crate::coordination::Result<
            Option<crate::coordination::Versioned<crate::coordination::DeploymentRecord>>,
        > {
            self.inner.deployment().await
        }
        async fn write_deployment(
            &self,
            record: &crate::coordination::DeploymentRecord,
            expect: Expect,
        ) -> crate::coordination::Result<
            crate::coordination::Versioned<crate::coordination::DeploymentRecord>,
        > {
            self.inner.write_deployment(record, expect).await
        }
        fn watch_deployment(
            &self,
        ) -> tokio::sync::watch::Receiver<
            Option<crate::coordination::Versioned<crate::coordination::DeploymentRecord>>,
        > {
            self.inner.watch_deployment()
        }
        async fn framework_id(
            &self,
        ) -> crate::coordination::Result<Option<crate::coordination::Versioned<String>>> {
            self.inner.framework_id().await
        }
        async fn store_framework_id(
            &self,
            id: &str,
        ) -> crate::coordination::Result<crate::coordination::Versioned<String>> {
            self.inner.store_framework_id(id).await
        }
        async fn replace_framework_id(
            &self,
            id: &str,
            expect: Expect,
        ) -> crate::coordination::Result<crate::coordination::Versioned<String>> {
            self.inner.replace_framework_id(id, expect).await
        }
        async fn delete_framework_id(&self, expect: Expect) -> crate::coordination::Result<bool> {
            self.inner.delete_framework_id(expect).await
        }
        async fn get_record(
            &self,
            kind: RecordKind,
            key: &str,
        ) -> crate::coordination::Result<Option<crate::coordination::Versioned<serde_json::Value>>>
        {
            self.inner.get_record(kind, key).await
        }
        async fn put_record(
            &self,
            kind: RecordKind,
            key: &str,
            value: &serde_json::Value,
            expect: Expect,
        ) -> crate::coordination::Result<i32> {
            if kind == RecordKind::Services {
                let _held = self.open.acquire().await;
            }
            self.inner.put_record(kind, key, value, expect).await
        }
        async fn visit_records(
            &self,
            kind: RecordKind,
            visit: &mut crate::coordination::RecordVisitor<'_>,
        ) -> crate::coordination::Result<()> {
            self.inner.visit_records(kind, visit).await
        }
        async fn records_stat(
            &self,
            kind: RecordKind,
        ) -> crate::coordination::Result<crate::coordination::RecordsStat> {
            self.inner.records_stat(kind).await
        }
        async fn delete_record(
            &self,
            kind: RecordKind,
            key: &str,
            expect: Expect,
        ) -> crate::coordination::Result<bool> {
            self.inner.delete_record(kind, key, expect).await
        }
        async fn delete_records(&self, kind: RecordKind) -> crate::coordination::Result<usize> {
            self.inner.delete_records(kind).await
        }
        async fn write_records(
            &self,
            kind: RecordKind,
            writes: Vec<RecordWrite>,
        ) -> Vec<crate::coordination::Result<Written>> {
            self.batches
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.inner.write_records(kind, writes).await
        }
        async fn append_audit(
            &self,
            entry: &serde_json::Value,
        ) -> crate::coordination::Result<u64> {
            self.inner.append_audit(entry).await
        }
        async fn audit_log(
            &self,
            limit: usize,
        ) -> crate::coordination::Result<Vec<(u64, serde_json::Value)>> {
            self.inner.audit_log(limit).await
        }
        async fn delete_all(&self) -> crate::coordination::Result<()> {
            self.inner.delete_all().await
        }
    }

    /// While a command's write is out, no task batch leaves, however long
    /// it stays out: the batches already sent come back, the queue waits,
    /// and only once the command's write is answered do batches flow again.
    /// (Without the check in [`StoreLane::pump`], the batches sent behind
    /// the command's write would queue before any write a later command
    /// sends, and a command that takes several round trips would wait
    /// behind two batches at each.)
    #[tokio::test]
    async fn no_task_batch_leaves_while_a_command_write_is_out() {
        let gate = Arc::new(Gate {
            inner: MemoryCoordinator::new(ReplicaInfo::new("http://unit.test", "d1", "test")),
            open: tokio::sync::Semaphore::new(0),
            batches: std::sync::atomic::AtomicUsize::new(0),
        });
        const TASKS: usize = 2_000;
        let (mut lane, mut rx, command, _stop) = queued_lane(gate.clone(), TASKS);
        async fn next(rx: &mut mpsc::UnboundedReceiver<Msg>) -> Msg {
            tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
                .await
                .expect("the lane answers")
                .expect("the channel is open")
        }
        // The batches sent before the command's write come back; each is
        // followed by a pump, as the runner does.
        for _ in 0..BATCHES_IN_FLIGHT {
            match next(&mut rx).await {
                Msg::StoreBatch(answers) => assert_eq!(answers.len(), BATCH),
                _ => panic!("only task batches are answered while the command's write is held"),
            }
            lane.batch_done();
            lane.pump();
        }
        assert_eq!(
            lane.in_flight, 0,
            "a task batch left while the command's write was out"
        );
        assert_eq!(
            gate.batches.load(std::sync::atomic::Ordering::SeqCst),
            BATCHES_IN_FLIGHT
        );
        assert_eq!(
            lane.queue.len() + lane.launches.len(),
            TASKS - BATCHES_IN_FLIGHT * BATCH
        );
        // Released: the command's write is answered, then the backlog flows.
        gate.open();
        match next(&mut rx).await {
            Msg::Stored(id, StoreResult::Written(Ok(_)), _) => assert_eq!(id, command),
            _ => panic!("the command's write is answered next"),
        }
        lane.single_done();
        lane.pump();
        let mut written = BATCHES_IN_FLIGHT * BATCH;
        while written < TASKS {
            match next(&mut rx).await {
                Msg::StoreBatch(answers) => written += answers.len(),
                _ => panic!("only task batches are left"),
            }
            lane.batch_done();
            lane.pump();
        }
        assert_eq!(lane.in_flight, 0);
    }
}
