//! Commands from the web layer, carried out by the leader's core.

use std::collections::BTreeSet;
use tokio::time::Instant;

use super::{Core, TermOutcome};
use crate::coordination::Expect;
use crate::mesos::v1;
use crate::scheduler::commands::{Command, CommandError, KamikazeResult, TeardownResult};
use crate::scheduler::offers::Gone;
use crate::scheduler::services::ExecutorKind;
use crate::scheduler::snapshot::{FrameworkState, ReconcileKind, ReconcileRun, ReconcileTrigger};
use crate::util::unix_now_secs;

/// Framework message that makes `mesos-appliance-executor` kill its tasks
/// and exit.
pub const KAMIKAZE: &[u8] = b"kamikaze";

impl Core {
    pub(crate) async fn on_command(&mut self, command: Command) {
        match command {
            Command::Reconcile { kind, reply } => {
                let _ = reply.send(self.reconcile_now(kind).await);
            }
            Command::Kamikaze { reply } => {
                let _ = reply.send(self.kamikaze().await);
            }
            Command::Teardown { reply } => {
                let _ = reply.send(self.teardown().await);
            }
            Command::Abdicate { reply } => {
                self.log("action", "abdicate requested: stepping down".into());
                self.outcome = Some(TermOutcome::Abdicated);
                let _ = reply.send(Ok(()));
            }
            Command::Reregister { reply } => {
                let _ = reply.send(self.reregister().await);
            }
            Command::PutService { spec, reply } => {
                let _ = reply.send(self.put_service(spec).await);
            }
            Command::DeleteService { name, reply } => {
                let _ = reply.send(self.delete_service(&name).await);
            }
        }
    }

    fn require_subscribed(&self) -> Result<(), CommandError> {
        if self.state == FrameworkState::Subscribed && self.client.is_some() {
            Ok(())
        } else {
            Err(CommandError::Conflict(format!(
                "the framework is {}, not subscribed",
                self.state.as_str()
            )))
        }
    }

    async fn reconcile_now(&mut self, kind: ReconcileKind) -> Result<ReconcileRun, CommandError> {
        self.require_subscribed()?;
        let tasks = self.reconcilable_tasks();
        let (run, actions) = self.reconciler.request(
            kind,
            ReconcileTrigger::Manual,
            || tasks,
            Instant::now(),
            unix_now_secs(),
        );
        self.log(
            "action",
            format!("{kind:?} reconciliation requested ({})", run.outcome).to_lowercase(),
        );
        self.reconcile_actions(actions).await;
        self.dirty = true;
        Ok(run)
    }

    /// Sends `kamikaze` to every executor of ours known from live task records.
    async fn kamikaze(&mut self) -> Result<Vec<KamikazeResult>, CommandError> {
        self.require_subscribed()?;
        let client = self.client().cloned().expect("subscribed");
        let executors: BTreeSet<(crate::scheduler::AgentId, String, String)> = self
            .tasks
            .values()
            .filter(|e| e.record.executor == ExecutorKind::Appliance && !e.record.is_terminal())
            .map(|e| {
                (
                    e.record.agent_id.clone(),
                    e.record.executor_id.clone(),
                    e.record.hostname.clone(),
                )
            })
            .collect();
        let mut results = Vec::with_capacity(executors.len());
        for (agent_id, executor_id, hostname) in executors {
            let outcome = client
                .message(
                    agent_id.to_proto(),
                    v1::ExecutorId {
                        value: executor_id.clone(),
                    },
                    KAMIKAZE.to_vec(),
                )
                .await;
            results.push(KamikazeResult {
                agent_id,
                hostname,
                executor_id,
                accepted: outcome.is_ok(),
                error: outcome.err().map(|e| e.to_string()),
            });
        }
        let accepted = results.iter().filter(|r| r.accepted).count();
        self.log(
            "action",
            format!(
                "kamikaze sent to {} executor(s), {accepted} accepted",
                results.len()
            ),
        );
        Ok(results)
    }

    /// TEARDOWN, then the stored framework ID and task records go, so a later
    /// start registers afresh (DESIGN.md §2a). The replica stays leader in
    /// state `removed` until the reregister action.
    async fn teardown(&mut self) -> Result<TeardownResult, CommandError> {
        self.require_subscribed()?;
        let framework_id = self.framework_id.clone().unwrap_or_default();
        let client = self.client().cloned().expect("subscribed");
        client
            .teardown()
            .await
            .map_err(|e| CommandError::Mesos(e.to_string()))?;
        self.stop_client();
        self.offers.clear(Gone::Dropped, Instant::now());
        self.kills.clear();
        let tasks = self.forget_framework().await?;
        let reason = format!(
            "torn down by an operator (framework {framework_id}, {tasks} task record(s) deleted)"
        );
        self.log("action", reason.clone());
        self.set_state(FrameworkState::Removed, Some(reason));
        Ok(TeardownResult {
            framework_id,
            tasks,
        })
    }

    /// Deletes the stored framework ID and every task record.
    async fn forget_framework(&mut self) -> Result<usize, CommandError> {
        self.deps
            .coordinator
            .delete_framework_id(Expect::Any)
            .await
            .map_err(|e| CommandError::Store(e.to_string()))?;
        let deleted = self
            .task_store
            .delete_all()
            .await
            .map_err(|e| CommandError::Store(e.to_string()))?;
        self.framework_id = None;
        self.tasks.clear();
        self.backoff.clear();
        self.dirty = true;
        Ok(deleted)
    }

    /// In state `removed`: clears the stale ID and task records (their tasks
    /// died with the framework) and subscribes as a new framework.
    pub(crate) async fn reregister(&mut self) -> Result<(), CommandError> {
        if self.state != FrameworkState::Removed {
            return Err(CommandError::Conflict(format!(
                "reregister applies in state removed; the framework is {}",
                self.state.as_str()
            )));
        }
        let old = self.framework_id.clone().unwrap_or_default();
        let tasks = self.forget_framework().await?;
        self.log(
            "action",
            format!(
                "registering a new framework (old {old}, {tasks} stale task record(s) deleted)"
            ),
        );
        self.start_client().await;
        Ok(())
    }

    async fn put_service(
        &mut self,
        spec: crate::scheduler::ServiceSpec,
    ) -> Result<bool, CommandError> {
        let errors = spec.validate();
        if !errors.is_empty() {
            return Err(CommandError::Invalid(errors));
        }
        self.service_store
            .put(&spec.name, &spec, Expect::Any)
            .await
            .map_err(|e| CommandError::Store(e.to_string()))?;
        let previous = self.services.insert(spec.name.clone(), spec.clone());
        let replaced = previous.is_some();
        if previous.as_ref() != Some(&spec) {
            // A changed spec starts with a clean slate: the failures that
            // earned the old backoff were the old spec's.
            self.backoff.remove(&spec.name);
        }
        self.log(
            "action",
            format!(
                "service {} {} ({} instance(s))",
                spec.name,
                if replaced { "updated" } else { "created" },
                spec.instances
            ),
        );
        self.schedule().await;
        Ok(replaced)
    }

    async fn delete_service(&mut self, name: &str) -> Result<bool, CommandError> {
        if !self.services.contains_key(name) {
            return Err(CommandError::NotFound(format!("service {name}")));
        }
        self.service_store
            .delete(name, Expect::Any)
            .await
            .map_err(|e| CommandError::Store(e.to_string()))?;
        // Kill while the spec is still known, so each KILL carries the
        // service's own grace period.
        let live: Vec<crate::scheduler::TaskId> = self
            .tasks
            .values()
            .filter(|e| e.record.service == name && !e.record.is_terminal())
            .map(|e| e.record.task_id.clone())
            .collect();
        for task_id in live {
            self.request_kill(&task_id, &format!("service {name} deleted"))
                .await;
        }
        self.services.remove(name);
        self.backoff.remove(name);
        self.waiting.remove(name);
        self.log(
            "action",
            format!("service {name} deleted; its tasks are killed"),
        );
        self.schedule().await;
        Ok(true)
    }
}
