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
//! order), never behind the backlog.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Msg, Work};
use crate::coordination::{
    CoordinationError, Coordinator, Expect, RecordKind, RecordStore, RecordWrite, Written,
};
use crate::scheduler::core::io::{RequestId, StoreOp, StoreResult};
use crate::scheduler::drains::DrainRecord;
use crate::scheduler::ids::TaskId;
use crate::scheduler::jobs::{JobRecord, RunRecord};
use crate::scheduler::records::ServiceRecord;
use crate::scheduler::records::TaskRecord;

/// Task writes per batch (one ZooKeeper `multi` of the ZooKeeper
/// implementation).
const BATCH: usize = 125;
/// Batches in flight at once: two keep ZooKeeper busy (one is committed
/// while the next waits), and a command's write (a service, the audit log)
/// waits behind at most `2 × BATCH` task writes in ZooKeeper's queue.
const BATCHES_IN_FLIGHT: usize = 2;

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
    queue: VecDeque<(RequestId, TaskWrite)>,
    in_flight: usize,
    /// Operations other than task writes in flight: task batches wait.
    singles: usize,
    results: mpsc::UnboundedSender<Msg>,
    work: Work,
}

impl StoreLane {
    pub(super) fn new(
        coordinator: Arc<dyn Coordinator>,
        results: mpsc::UnboundedSender<Msg>,
        work: Work,
    ) -> StoreLane {
        StoreLane {
            tasks: RecordStore::new(coordinator.clone(), RecordKind::Tasks),
            services: RecordStore::new(coordinator.clone(), RecordKind::Services),
            jobs: JobStores {
                jobs: RecordStore::new(coordinator.clone(), RecordKind::Jobs),
                runs: RecordStore::new(coordinator.clone(), RecordKind::Runs),
            },
            coordinator,
            queue: VecDeque::new(),
            in_flight: 0,
            singles: 0,
            results,
            work,
        }
    }

    /// Takes one operation: task writes queue for a batch, the rest go now.
    pub(super) fn submit(&mut self, id: RequestId, op: StoreOp) {
        match op {
            StoreOp::PutTask(record, expect) => {
                self.queue.push_back((id, TaskWrite::Put(record, expect)))
            }
            StoreOp::DeleteTask(task, expect) => {
                self.queue.push_back((id, TaskWrite::Delete(task, expect)))
            }
            other => {
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
    /// batches are out and no other operation is.
    pub(super) fn pump(&mut self) {
        while self.singles == 0 && self.in_flight < BATCHES_IN_FLIGHT && !self.queue.is_empty() {
            let n = self.queue.len().min(BATCH);
            let batch: Vec<(RequestId, TaskWrite)> = self.queue.drain(..n).collect();
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

    fn spawn_single(&self, id: RequestId, op: StoreOp) {
        let coordinator = self.coordinator.clone();
        let tasks = self.tasks.clone();
        let services = self.services.clone();
        let jobs = self.jobs.clone();
        let results = self.results.clone();
        let drains = RecordStore::<DrainRecord>::new(self.coordinator.clone(), RecordKind::Drains);
        self.work.spawn(async move {
            let result = match op {
                StoreOp::ListJobs
                | StoreOp::PutJob(..)
                | StoreOp::DeleteJob(..)
                | StoreOp::ListRuns
                | StoreOp::PutRun(..)
                | StoreOp::DeleteRun(..) => run_job_op(&jobs, op).await,
                op => run_single(coordinator.as_ref(), &tasks, &services, &drains, op).await,
            };
            let _ = results.send(Msg::Stored(id, result));
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
    use crate::scheduler::spec::service::{ExecutorKind, ServiceSpec};
    use tokio_util::sync::CancellationToken;

    fn record(i: usize) -> TaskRecord {
        TaskRecord {
            task_id: format!("web.{i}.t").into(),
            service: "web".into(),
            instance: i as u32,
            fingerprint: "f".into(),
            agent_id: "agent-0".into(),
            hostname: "host-0".into(),
            executor: ExecutorKind::Command,
            executor_id: format!("web.{i}.t"),
            ports: Vec::new(),
            state: TaskState::TaskStaging,
            launched_at: 1.0,
            updated_at: 1.0,
            kill: None,
            timeline: Vec::new(),
            healthy: None,
            healthy_since: None,
            health_checked: None,
            partition: None,
        }
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
        let (tx, mut rx) = mpsc::unbounded_channel();
        let token = CancellationToken::new();
        let _stop = token.clone().drop_guard();
        let mut lane = StoreLane::new(coordinator, tx, Work(token));
        const TASKS: usize = 5_000;
        for i in 0..TASKS {
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
                Msg::Stored(id, result) => {
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
        assert_eq!(batches, TASKS.div_ceil(BATCH));
    }
}
