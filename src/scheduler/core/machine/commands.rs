//! The web layer's commands. Each answers as soon as what it asked for is
//! done — a service change once stored, a teardown once the framework is
//! forgotten — while the machine goes on with everything else.
//!
//! Service writes are compare-and-set on the version the leader knows: a
//! conflict (someone else wrote the record) answers 409 and the services
//! are read again; two commands for one service go one after the other.

use std::collections::{BTreeSet, HashMap};

use tokio::time::Instant;

use super::forget::Then;
use super::rollout::Write;
use super::service_table::ServiceEntry;
use super::{Machine, Pending};
use crate::coordination::{CoordinationError, RecordList, Written};
use crate::executor::KAMIKAZE;
use crate::mesos::client::CallError;
use crate::scheduler::commands::{CommandError, Expected, KamikazeResult};
use crate::scheduler::core::TermOutcome;
use crate::scheduler::core::io::{Answer, MesosCall, ReplyId, Request, StoreOp, StoreResult};
use crate::scheduler::ids::{AgentId, TaskId};
use crate::scheduler::records::ServiceRecord;
use crate::scheduler::rules::partition;
use crate::scheduler::snapshot::{
    EventKind, FrameworkState, ReconcileKind, ReconcileRun, ReconcileTrigger,
};
use crate::scheduler::spec::service::ExecutorKind;
use crate::scheduler::spec::{ServiceSpec, ValidServiceSpec};

/// Kamikaze runs waiting for their MESSAGE calls, by run number.
#[derive(Debug, Default)]
pub(super) struct Kamikazes {
    runs: HashMap<u64, KamikazeRun>,
    next: u64,
}

#[derive(Debug)]
struct KamikazeRun {
    reply: ReplyId,
    results: Vec<KamikazeResult>,
    outstanding: usize,
}

/// What a command request in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    /// A service record write: a command's (`reply`) or the machine's own
    /// (a rollout halting).
    ServicePut {
        reply: Option<ReplyId>,
        record: Box<ServiceRecord>,
        why: Write,
    },
    ServiceDelete {
        reply: ReplyId,
        name: String,
    },
    ServicesReload,
    Message {
        run: u64,
        index: usize,
    },
    Teardown {
        reply: ReplyId,
    },
}

impl Machine {
    pub(super) fn on_command(&mut self, id: ReplyId, request: Request, now: Instant) {
        match request {
            Request::Reconcile(kind) => {
                let answer = self.reconcile_now(kind, now);
                self.reply(id, Answer::Reconcile(answer));
            }
            Request::Kamikaze => self.kamikaze(id, now),
            Request::Teardown => match self.require_subscribed() {
                Ok(()) => {
                    self.begin_teardown();
                    self.call(
                        MesosCall::Teardown,
                        Pending::Command(Step::Teardown { reply: id }),
                    );
                }
                Err(e) => self.reply(id, Answer::Teardown(Err(e))),
            },
            Request::Abdicate => {
                self.log(
                    EventKind::Action,
                    "abdicate requested: stepping down".into(),
                    now,
                );
                self.reply(id, Answer::Done(Ok(())));
                self.end_term(TermOutcome::Abdicated);
            }
            Request::Reregister => {
                if self.framework.state != FrameworkState::Removed {
                    let error = CommandError::Conflict(format!(
                        "reregister applies in state removed; the framework is {}",
                        self.framework.state.as_str()
                    ));
                    self.reply(id, Answer::Done(Err(error)));
                    return;
                }
                let old = self.framework.id.clone().unwrap_or_default().to_string();
                self.forget(Then::Reregister {
                    reply: Some(id),
                    old,
                });
            }
            Request::PutService(spec) => self.put_service(id, spec),
            Request::ReplaceService { spec, expected } => self.replace_service(id, spec, expected),
            Request::DeleteService { name, expected } => self.delete_service(id, name, expected),
            Request::Rollout {
                name,
                action,
                expected,
            } => self.rollout_command(id, name, action, expected, now),
            Request::StartDrain {
                agent_id,
                min_healthy,
                reason,
                by,
                then,
            } => self.start_drain(id, agent_id, min_healthy, reason, by, then, now),
            Request::CancelDrain { agent_id, by } => self.cancel_drain(id, agent_id, by, now),
            request @ (Request::PutJob(_)
            | Request::DeleteJob(_)
            | Request::SetJobEnabled { .. }
            | Request::StartRun(_)
            | Request::KillRun { .. }) => self.on_job_command(id, request, now),
        }
    }

    fn require_subscribed(&self) -> Result<(), CommandError> {
        if self.framework.is_subscribed() {
            Ok(())
        } else {
            Err(CommandError::Conflict(format!(
                "the framework is {}, not subscribed",
                self.framework.state.as_str()
            )))
        }
    }

    fn reconcile_now(
        &mut self,
        kind: ReconcileKind,
        now: Instant,
    ) -> Result<ReconcileRun, CommandError> {
        self.require_subscribed()?;
        if !self.tasks.is_loaded() {
            return Err(CommandError::Conflict(
                "the task records are still being read from ZooKeeper; try again in a moment"
                    .into(),
            ));
        }
        let at = self.unix(now);
        let tasks = &self.tasks;
        let (run, actions) = self.reconciler.request(
            kind,
            ReconcileTrigger::Manual,
            || tasks.reconcilable(),
            now,
            at,
        );
        self.log(
            EventKind::Action,
            format!("{kind:?} reconciliation requested ({})", run.outcome).to_lowercase(),
            now,
        );
        self.reconcile_actions(actions, now);
        self.out.dirty = true;
        Ok(run)
    }

    /// Sends `kamikaze` to every executor of ours known from live records
    /// the master can reach (not on an unreachable agent); answers once the
    /// master took or refused each MESSAGE.
    fn kamikaze(&mut self, reply: ReplyId, now: Instant) {
        if let Err(e) = self.require_subscribed() {
            self.reply(reply, Answer::Kamikaze(Err(e)));
            return;
        }
        let executors: BTreeSet<(AgentId, String, String)> = self
            .tasks
            .records()
            .filter(|r| r.executor == ExecutorKind::Appliance && partition::reachable(r))
            .map(|r| {
                (
                    r.agent_id.clone(),
                    r.executor_id.clone(),
                    r.hostname.clone(),
                )
            })
            .collect();
        if executors.is_empty() {
            self.log(
                EventKind::Action,
                "kamikaze sent to 0 executor(s), 0 accepted".into(),
                now,
            );
            self.reply(reply, Answer::Kamikaze(Ok(Vec::new())));
            return;
        }
        self.kamikazes.next += 1;
        let run = self.kamikazes.next;
        let mut results = Vec::with_capacity(executors.len());
        for (index, (agent_id, executor_id, hostname)) in executors.into_iter().enumerate() {
            self.call(
                MesosCall::Message {
                    agent_id: agent_id.clone(),
                    executor_id: executor_id.clone(),
                    data: KAMIKAZE.to_vec(),
                },
                Pending::Command(Step::Message { run, index }),
            );
            results.push(KamikazeResult {
                agent_id,
                hostname,
                executor_id,
                accepted: false,
                error: None,
            });
        }
        self.kamikazes.runs.insert(
            run,
            KamikazeRun {
                reply,
                outstanding: results.len(),
                results,
            },
        );
    }

    pub(super) fn on_command_called(
        &mut self,
        step: Step,
        result: Result<(), CallError>,
        now: Instant,
    ) {
        match step {
            Step::Teardown { reply } => match result {
                Ok(()) => self.torn_down(reply, now),
                Err(e) => {
                    self.teardown_failed();
                    self.reply(reply, Answer::Teardown(Err(CommandError::Mesos(e))));
                }
            },
            Step::Message { run, index } => {
                let Some(k) = self.kamikazes.runs.get_mut(&run) else {
                    return;
                };
                if let Some(r) = k.results.get_mut(index) {
                    r.accepted = result.is_ok();
                    r.error = result.err().map(|e| e.to_string());
                }
                k.outstanding -= 1;
                if k.outstanding > 0 {
                    return;
                }
                let Some(k) = self.kamikazes.runs.remove(&run) else {
                    return;
                };
                let accepted = k.results.iter().filter(|r| r.accepted).count();
                self.log(
                    EventKind::Action,
                    format!(
                        "kamikaze sent to {} executor(s), {accepted} accepted",
                        k.results.len()
                    ),
                    now,
                );
                self.reply(k.reply, Answer::Kamikaze(Ok(k.results)));
            }
            other => self.warn(format!("unexpected call answer for {other:?}; ignored")),
        }
    }

    fn put_service(&mut self, reply: ReplyId, spec: Box<ValidServiceSpec>) {
        if self.jobs.contains(&spec.name) {
            let error = CommandError::Conflict(format!("a job is named {}", spec.name));
            self.reply(reply, Answer::Service(Err(error)));
            return;
        }
        if self.services.writing(&spec.name) {
            self.services.queue(reply, Request::PutService(spec));
            return;
        }
        let record = match self.services.get(&spec.name) {
            Some(entry) => entry.record().replaced_by(spec.into_inner()),
            None => ServiceRecord::new(spec.into_inner()),
        };
        self.write_service(Some(reply), record, Write::Put);
    }

    /// [`Request::ReplaceService`]: `spec` replaces the stored spec only if
    /// that is still at version `expected`, as the core knows it once the
    /// service's write in flight (if any) is answered: a change made on a
    /// stale read (a follower's view behind the leader, a form shown
    /// before another change) cannot undo a change it did not see.
    fn replace_service(&mut self, reply: ReplyId, spec: Box<ValidServiceSpec>, expected: Expected) {
        if self.services.writing(&spec.name) {
            self.services
                .queue(reply, Request::ReplaceService { spec, expected });
            return;
        }
        let error = match self.services.spec(&spec.name).map(ServiceSpec::version) {
            None => CommandError::NotFound(format!("service {}", spec.name)),
            Some(now) if !expected.admits(&now) => CommandError::PreconditionFailed(format!(
                "service {} changed since it was read ({expected}, now {now}); \
                 nothing was done: read it again and redo the change",
                spec.name
            )),
            Some(_) => return self.put_service(reply, spec),
        };
        self.reply(reply, Answer::Service(Err(error)));
    }

    /// Writes a service's record, compare-and-set on the version known.
    pub(super) fn write_service(
        &mut self,
        reply: Option<ReplyId>,
        record: ServiceRecord,
        why: Write,
    ) {
        let name = record.spec.name.clone();
        let expect = self.services.expect(&name);
        let record = Box::new(record);
        let request = self.store(
            StoreOp::PutService(record.clone(), expect),
            Pending::Command(Step::ServicePut { reply, record, why }),
        );
        self.services.begin_write(name, request);
    }

    /// [`Request::DeleteService`]: with `expected`, only if the stored spec
    /// is still at one of those versions once the service's write in
    /// flight (if any) is answered, as [`Machine::replace_service`] checks.
    fn delete_service(&mut self, reply: ReplyId, name: String, expected: Option<Expected>) {
        if self.services.writing(&name) {
            self.services
                .queue(reply, Request::DeleteService { name, expected });
            return;
        }
        let stored = self.services.spec(&name).map(ServiceSpec::version);
        let refusal = match (stored, &expected) {
            (None, _) => Some(CommandError::NotFound(format!("service {name}"))),
            (Some(now), Some(expected)) if !expected.admits(&now) => {
                Some(CommandError::PreconditionFailed(format!(
                    "service {name} changed since it was read ({expected}, now {now}); \
                     nothing was deleted: read it again and redo the delete"
                )))
            }
            _ => None,
        };
        if let Some(error) = refusal {
            self.reply(reply, Answer::Service(Err(error)));
            return;
        }
        let expect = self.services.expect(&name);
        let request = self.store(
            StoreOp::DeleteService(name.clone(), expect),
            Pending::Command(Step::ServiceDelete {
                reply,
                name: name.clone(),
            }),
        );
        self.services.begin_write(name, request);
    }

    pub(super) fn on_command_stored(&mut self, step: Step, result: StoreResult, now: Instant) {
        match (step, result) {
            (Step::ServicePut { reply, record, why }, StoreResult::Written(written)) => {
                let name = record.spec.name.clone();
                self.services.end_write(&name);
                match written {
                    Ok(Written::Version(version)) => {
                        let spec = record.spec.clone();
                        let previous = self
                            .services
                            .insert(name.clone(), ServiceEntry::new(*record, version));
                        self.services.clear_malformed(&name);
                        let replaced = previous.is_some();
                        if previous.as_ref().map(|p| p.spec.fingerprint())
                            != Some(spec.fingerprint())
                        {
                            // A new release (another fingerprint) starts with
                            // a clean slate: the failures that earned the old
                            // backoff were the old spec's. A change of
                            // `instances`, the backoff or `upgrade` alone
                            // forgives nothing: the same release would fail
                            // the same way.
                            self.services.forgive(&name);
                        } else if let Some(backoff) = self.services.backoff_mut(&name) {
                            // A lowered `restart_backoff_max` caps a wait
                            // under way at the new maximum from now.
                            backoff.cap(spec.restart_backoff_max, now);
                        }
                        self.service_written(&spec, replaced, why, now);
                        self.needs_schedule = true;
                        self.out.dirty = true;
                        if let Some(reply) = reply {
                            self.reply(reply, why.answer(Ok(replaced)));
                        }
                    }
                    other => {
                        let error = self.service_write_failed(&name, other, now);
                        if let Some(reply) = reply {
                            self.reply(reply, why.answer(Err(error)));
                        }
                    }
                }
                self.resume_service_commands(&name, now);
            }
            (Step::ServiceDelete { reply, name }, StoreResult::Written(written)) => {
                self.services.end_write(&name);
                match written {
                    Ok(_) => {
                        // Kill while the spec is still known, so each KILL
                        // carries the service's own grace period.
                        let live: Vec<TaskId> = self
                            .tasks
                            .records()
                            .filter(|r| r.service == name && !r.is_terminal())
                            .map(|r| r.task_id.clone())
                            .collect();
                        let reason = format!("service {name} deleted");
                        for task_id in live {
                            self.request_kill(&task_id, &reason, now);
                        }
                        // Its backoff, rollout deadline and shortfall go
                        // with it: created again, it starts clean.
                        self.services.remove(&name);
                        self.log(
                            EventKind::Action,
                            format!("service {name} deleted; its tasks are killed"),
                            now,
                        );
                        self.needs_schedule = true;
                        self.out.dirty = true;
                        self.reply(reply, Answer::Service(Ok(true)));
                    }
                    Err(e) => {
                        let error = self.service_write_failed(&name, Err(e), now);
                        self.reply(reply, Answer::Service(Err(error)));
                    }
                }
                self.resume_service_commands(&name, now);
            }
            (Step::ServicesReload, StoreResult::Services(listed)) => match listed {
                Ok(list) => self.adopt_services(list, now),
                Err(e) => self.warn(format!("could not read the services again: {e}")),
            },
            (step, result) => {
                self.warn(format!("unexpected answer {result:?} to {step:?}; ignored"));
            }
        }
    }

    /// The error a failed service write answers; after a version conflict
    /// the services are read again, so the next command sees their state.
    fn service_write_failed(
        &mut self,
        name: &str,
        written: Result<Written, CoordinationError>,
        now: Instant,
    ) -> CommandError {
        let error = match written {
            Ok(other) => CoordinationError::Unexpected(format!("service write gave {other:?}")),
            Err(e) => e,
        };
        self.log(
            EventKind::Error,
            format!("writing service {name} failed: {error}"),
            now,
        );
        if matches!(error, CoordinationError::VersionConflict { .. }) {
            self.store(
                StoreOp::ListServices,
                Pending::Command(Step::ServicesReload),
            );
        }
        error.into()
    }

    /// Commands for `name` that waited for its write.
    fn resume_service_commands(&mut self, name: &str, now: Instant) {
        let mut ready = self.services.take_queued(name).into_iter();
        // They go in order until one writes the service; the others wait
        // for that write again. One answered without a write (refused: a
        // changed version, a rollout that does not apply) lets the next
        // go, else the next would wait for a write that never comes.
        while !self.services.writing(name)
            && let Some((id, request)) = ready.next()
        {
            self.on_command(id, request, now);
        }
        self.services.requeue(ready);
    }

    /// The services as ZooKeeper holds them now (after a conflicting
    /// write): the store is the truth.
    fn adopt_services(&mut self, list: RecordList<ServiceRecord>, now: Instant) {
        let mut adopted = std::collections::BTreeMap::new();
        let mut malformed: Vec<String> = list.malformed.into_iter().map(|m| m.key).collect();
        for (name, record) in list.records {
            if record.value.spec.validate().is_empty() {
                adopted.insert(name, ServiceEntry::new(record.value, record.version));
            } else {
                malformed.push(name);
            }
        }
        let changed: Vec<&String> = adopted
            .iter()
            .filter(|(name, entry)| self.services.spec(name) != Some(&entry.spec))
            .map(|(name, _)| name)
            .chain(
                self.services
                    .iter()
                    .map(|(n, _)| n)
                    .filter(|n| !adopted.contains_key(*n)),
            )
            .collect();
        if !changed.is_empty() {
            let names: Vec<&str> = changed.iter().map(|n| n.as_str()).collect();
            let message = format!(
                "services changed in ZooKeeper by someone else ({}); following the store",
                names.join(", ")
            );
            self.log(EventKind::Service, message, now);
        }
        self.services.adopt(adopted, malformed);
        self.needs_schedule = true;
        self.out.dirty = true;
    }
}
