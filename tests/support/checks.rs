//! Checks every replica harness runs where a replica's life in a test ends
//! ([`crate::support::appliance::Replica`],
//! [`crate::support::processes::Appliance`]; see "When they run" below), so
//! that no test has to remember them:
//!
//! - **Truth** ([`super::truth`]): a replica still running shows no task
//!   live (`TASK_STARTING`, `TASK_RUNNING`, `TASK_KILLING`) that the testbed
//!   master lists as completed or does not know
//!   (`docs/deployment-strategies.md#removed`). An in-process replica is
//!   judged by its latest snapshot (what its API would serve), a process by
//!   its `GET /api/v1/tasks`.
//! - **No ACK before its store**: every status update the master saw
//!   acknowledged for the framework whose ID the replica's store holds is
//!   reflected in that task's stored record (`tasks/<task-id>`): the
//!   record's state or its timeline reaches that state or a later one
//!   (`docs/deployment-strategies.md#rules-every-strategy-keeps`, "Acknowledge
//!   after storing"). The master's side is the testbed's per-task record of
//!   the latest acknowledged update (`TaskView::acknowledged`). A launch's
//!   TASK_STARTING and first TASK_RUNNING are acknowledged ahead of their
//!   write (`ahead_of_store` in `src/scheduler/core/machine/tasks.rs`): the
//!   check waits for that write like for any update on its way.
//!
//! What the ACK check proves: at the end of the test no acknowledged update
//! is missing from the store, so a leader that died right after any of
//! these ACKs would have left the next one a record at least as new as
//! what the master forgot. What it cannot prove: the order in time (a
//! store that lands after its ACK but before the test ends passes), the
//! earlier acknowledgements of a task (only the latest is kept, and a record
//! only moves forward), a terminal update whose record is gone (it is read
//! as pruned after the core's terminal retention, `CoreConfig::terminal_retention`; a missing record is a failure only
//! for a non-terminal state), and anything of a framework the store no
//! longer names (forgotten by the teardown action, `reregister`,
//! `uninstall`). The strict order — the ACK effect only after the store's
//! answer — is the core's property tests' job.
//!
//! When they run: once per replica, where its life as the test sees it
//! ends — [`Replica::stop`](crate::support::appliance::Replica::stop), a
//! SIGTERM, SIGINT or SIGSTOP sent with
//! [`Appliance::signal`](crate::support::processes::Appliance::signal), or
//! the drop of a replica still running. A process that SIGKILL (a crash at
//! the moment the test chose, which nothing may delay) or its own exit
//! ended shows nothing: its drop runs the store check alone. Nothing runs
//! while the test is already panicking, or after the test opted out with a
//! reason ([`Checks::expect_disagreement`], printed to the test's output).
//! The master must be an in-process testbed that still runs (found by the
//! replica's `--master`, [`TestbedInspector::find`]); otherwise the checks
//! say so on stderr and are skipped. A disagreement may be an update still
//! on its way: from async code (a stop) and under a multi-threaded runtime
//! they wait up to [`SETTLE`] for it to go; a drop under a current-thread
//! runtime blocks the only thread that would deliver it, so it looks once.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mesos_appliance::coordination::{Coordinator, RecordKind};
use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::scheduler::SchedulerHandle;
use mesos_appliance::testbed::{TaskView, TestbedInspector};
use mesos_appliance::util::zk::ZkUrl;
use serde_json::Value;

/// How long the checks wait for a disagreement to settle (an update on its
/// way to the replica) under a multi-threaded runtime.
pub const SETTLE: Duration = Duration::from_secs(5);
/// Bound of one remote read (a replica's API, ZooKeeper).
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Where a replica shows its tasks.
pub enum View {
    /// An in-process replica: its latest snapshot.
    Snapshot(SchedulerHandle),
    /// A process: `GET <url>/api/v1/tasks`.
    Api(String),
}

/// Where a replica stores its records.
pub enum Store {
    /// A ZooKeeper root, read with a client of the check's own.
    Zk(ZkUrl),
    /// The in-memory coordinator of an in-process replica.
    Memory(Arc<dyn Coordinator>),
    /// Not readable from the test (a process without `--zk`).
    Unreadable,
}

/// The end-of-test checks of one replica.
pub struct Checks {
    /// The test (its thread's name when the replica started).
    test: String,
    replica: String,
    master: String,
    view: View,
    store: Store,
    opt_out: Mutex<Option<String>>,
    /// Set once the checks ran (or were due and skipped).
    ended: AtomicBool,
}

impl Checks {
    /// Checks for `replica`, subscribed to `master` (its `--master`).
    pub fn new(replica: &str, master: &str, view: View, store: Store) -> Checks {
        Checks {
            test: std::thread::current().name().unwrap_or("?").to_string(),
            replica: replica.to_string(),
            master: master.to_string(),
            view,
            store,
            opt_out: Mutex::new(None),
            ended: AtomicBool::new(false),
        }
    }

    /// Turns the checks off for this replica, because the test's scenario
    /// makes them meaningless (`why` is printed when the replica drops).
    pub fn expect_disagreement(&self, why: &str) {
        *self.opt_out.lock().unwrap() = Some(why.to_string());
    }

    /// Runs the checks from a `Drop` (or another place that cannot
    /// await): on a thread of their own, waiting for a disagreement to
    /// settle only under a multi-threaded runtime (a current-thread one is
    /// blocked here). The failure names the test, the replica and each
    /// disagreement; the caller panics with it once it has stopped the
    /// replica. See the module doc for when they are skipped.
    pub fn at_drop(&self) -> Option<String> {
        let master = self.due()?;
        let can_wait = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let settle = if can_wait { SETTLE } else { Duration::ZERO };
        on_own_runtime(self.check(&master, settle, true))
    }

    /// Only the "no ACK before its store" check, from a `Drop`, for a
    /// replica that no longer runs (a process killed by the test or exited
    /// on its own): it shows nothing, but what it acknowledged while it
    /// ran must still be in the store.
    pub fn after_exit(&self) -> Option<String> {
        let master = self.due()?;
        on_own_runtime(self.check(&master, Duration::ZERO, false))
    }

    /// Like [`Checks::at_drop`], from async code about to end the replica
    /// (a failover stop): the test's runtime goes on while they wait.
    pub async fn at_end(&self) -> Option<String> {
        let master = self.due()?;
        self.check(&master, SETTLE, true).await
    }

    /// The master to check against, when the checks are due: once per
    /// replica, not while the test panics, not after an opt-out, and only
    /// against an in-process testbed that still runs.
    fn due(&self) -> Option<TestbedInspector> {
        if std::thread::panicking() || self.ended.swap(true, Ordering::SeqCst) {
            return None;
        }
        if let Some(why) = self.opt_out.lock().unwrap().as_deref() {
            eprintln!("{}: end-of-test checks off: {why}", self.replica);
            return None;
        }
        let master = TestbedInspector::find(&self.master);
        if master.is_none() {
            eprintln!(
                "{}: end-of-test checks skipped: master {} is no running in-process testbed",
                self.replica, self.master
            );
        }
        master
    }

    /// Every disagreement, in one message; waits up to `settle` for them
    /// to go away (an update on its way).
    async fn check(
        &self,
        master: &TestbedInspector,
        settle: Duration,
        shows: bool,
    ) -> Option<String> {
        let deadline = Instant::now() + settle;
        let found = loop {
            let found = self.disagreements(master, shows).await;
            if found.is_empty() || Instant::now() >= deadline {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        (!found.is_empty()).then(|| {
            format!(
                "end-of-test checks of replica {} (test {}, master {}) failed:\n{}",
                self.replica,
                self.test,
                self.master,
                found.join("\n")
            )
        })
    }

    /// The disagreements: the truth check while the replica `shows`
    /// tasks, and the "no ACK before its store" check.
    async fn disagreements(&self, master: &TestbedInspector, shows: bool) -> Vec<String> {
        let mut found = match self.shown().await {
            _ if !shows => Vec::new(),
            Ok(shown) => super::truth::compare(&self.replica, &shown, &master.tasks()),
            Err(e) => vec![format!("{}: its tasks cannot be read: {e}", self.replica)],
        };
        found.extend(self.acks_not_stored(master).await);
        found
    }

    /// The replica's tasks and their shown states.
    async fn shown(&self) -> Result<Vec<(String, String)>, String> {
        match &self.view {
            View::Snapshot(handle) => Ok(handle
                .snapshot()
                .tasks
                .iter()
                .map(|t| (t.task_id.to_string(), t.state.as_str_name().to_string()))
                .collect()),
            View::Api(url) => {
                let response = super::mesos::client()
                    .get(format!("{url}/api/v1/tasks?per_page=10000"))
                    .timeout(READ_TIMEOUT)
                    .send()
                    .await
                    .map_err(|e| format!("GET /api/v1/tasks: {e}"))?;
                let view: Value = response.json().await.map_err(|e| e.to_string())?;
                Ok(super::truth::shown(&view))
            }
        }
    }

    /// Acknowledged updates the store does not reflect, in words.
    async fn acks_not_stored(&self, master: &TestbedInspector) -> Vec<String> {
        let store = match StoreReader::open(&self.store).await {
            Ok(Some(store)) => store,
            Ok(None) => return Vec::new(),
            Err(e) => return vec![format!("{}: its store cannot be read: {e}", self.replica)],
        };
        let framework = match store.framework_id().await {
            Ok(Some(id)) => id,
            Ok(None) => return Vec::new(),
            Err(e) => return vec![format!("{}: framework-id: {e}", self.replica)],
        };
        let acked: Vec<(TaskView, TaskState)> = master
            .tasks()
            .into_iter()
            .filter(|t| t.framework_id == framework)
            .filter_map(|t| t.acknowledged.map(|s| (t, s)))
            .collect();
        let mut out = Vec::new();
        for (task, acked) in acked {
            let record = match store.task(&task.task_id).await {
                Ok(record) => record,
                Err(e) => {
                    out.push(format!("{}: tasks/{}: {e}", self.replica, task.task_id));
                    continue;
                }
            };
            if let Some(problem) = unreflected(acked, record.as_ref()) {
                out.push(format!(
                    "{}: the master saw {} of task {} acknowledged, but {problem}",
                    self.replica,
                    acked.as_str_name(),
                    task.task_id
                ));
            }
        }
        // Forgetting the framework (teardown, reregister) deletes records:
        // what was read across it proves nothing.
        match store.framework_id().await {
            Ok(Some(id)) if id == framework => out,
            _ => Vec::new(),
        }
    }
}

/// Why `record` (a stored task record) does not reflect an acknowledged
/// update in `acked`; `None` when it does.
fn unreflected(acked: TaskState, record: Option<&Value>) -> Option<String> {
    let Some(record) = record else {
        // A terminal record may have been pruned after the retention.
        return (!is_terminal(acked)).then(|| "no task record is stored".to_string());
    };
    let stored = std::iter::once(&record["state"])
        .chain(
            record["timeline"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| &e["state"]),
        )
        .filter_map(|s| TaskState::from_str_name(s.as_str()?))
        .map(progress)
        .max();
    match stored {
        Some(p) if p >= progress(acked) => None,
        _ => Some(format!(
            "its stored record is {} (timeline {})",
            record["state"],
            record["timeline"]
                .as_array()
                .map(|t| t
                    .iter()
                    .map(|e| e["state"].to_string())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        )),
    }
}

fn is_terminal(state: TaskState) -> bool {
    progress(state) == 4
}

/// How far along its life a state puts a task: a record may only move to
/// the same or a higher value. All terminal states share the last one (the
/// first terminal state a record reaches is kept).
fn progress(state: TaskState) -> u8 {
    use TaskState as S;
    match state {
        S::TaskStaging => 0,
        S::TaskStarting => 1,
        S::TaskRunning | S::TaskUnreachable => 2,
        S::TaskKilling => 3,
        S::TaskFinished
        | S::TaskFailed
        | S::TaskKilled
        | S::TaskError
        | S::TaskLost
        | S::TaskDropped
        | S::TaskGone
        | S::TaskGoneByOperator => 4,
        S::TaskUnknown => 0,
    }
}

/// An open store.
enum StoreReader<'a> {
    Zk(zookeeper_client::Client, String),
    Memory(&'a Arc<dyn Coordinator>),
}

impl<'a> StoreReader<'a> {
    async fn open(store: &'a Store) -> Result<Option<StoreReader<'a>>, String> {
        match store {
            Store::Unreadable => Ok(None),
            Store::Memory(c) => Ok(Some(StoreReader::Memory(c))),
            Store::Zk(url) => {
                let hosts = url.connect_string();
                let connect = mesos_appliance::util::zk::connector(url, Duration::from_secs(2))
                    .connect(&hosts);
                let client = tokio::time::timeout(READ_TIMEOUT, connect)
                    .await
                    .map_err(|_| format!("no ZooKeeper session within {READ_TIMEOUT:?}"))?
                    .map_err(|e| e.to_string())?;
                Ok(Some(StoreReader::Zk(client, url.root.clone())))
            }
        }
    }

    async fn framework_id(&self) -> Result<Option<String>, String> {
        match self {
            StoreReader::Memory(c) => c
                .framework_id()
                .await
                .map(|v| v.map(|v| v.value))
                .map_err(|e| e.to_string()),
            StoreReader::Zk(client, root) => Ok(zk_read(client, &format!("{root}/framework-id"))
                .await?
                .map(|b| String::from_utf8_lossy(&b).into_owned())),
        }
    }

    async fn task(&self, id: &str) -> Result<Option<Value>, String> {
        match self {
            StoreReader::Memory(c) => c
                .get_record(RecordKind::Tasks, id)
                .await
                .map(|v| v.map(|v| v.value))
                .map_err(|e| e.to_string()),
            StoreReader::Zk(client, root) => zk_read(client, &format!("{root}/tasks/{id}"))
                .await?
                .map(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
                .transpose(),
        }
    }
}

async fn zk_read(client: &zookeeper_client::Client, path: &str) -> Result<Option<Vec<u8>>, String> {
    match tokio::time::timeout(READ_TIMEOUT, client.get_data(path)).await {
        Err(_) => Err(format!("{path}: no answer within {READ_TIMEOUT:?}")),
        Ok(Ok((data, _))) => Ok(Some(data)),
        Ok(Err(zookeeper_client::Error::NoNode)) => Ok(None),
        Ok(Err(e)) => Err(format!("{path}: {e}")),
    }
}

/// Runs `fut` to completion on a short-lived thread with a runtime of its
/// own: a `Drop` may run inside a runtime (which cannot nest), and one
/// whose only thread it blocks.
fn on_own_runtime<T: Send>(fut: impl Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the end-of-test checks")
                .block_on(fut)
        })
        .join()
        .expect("end-of-test checks thread")
    })
}
