//! A term's start, before and next to subscribing.
//!
//! 1. Read the framework ID and the services (and the deployment record
//!    under `hard`). These are small: a follower that takes over subscribes
//!    within moments whatever the task count.
//! 2. Under `hard`, once per deployment (its first leader): tear down every
//!    earlier framework of this name — the stored ID, and active or inactive
//!    frameworks of the same name and role on the master — through the
//!    operator API, delete the stored framework ID and task records, and
//!    record `teardown_done` (`docs/deployment-strategies.md`). Frameworks
//!    the master already removed are skipped.
//! 3. Apply the `--services` file: it seeds an empty store, or (with
//!    `replace_services`) is written over the stored services, deleting the
//!    ones it does not list.
//! 4. Start the client and, at the same time, read the task records. Until
//!    they are known nothing is launched, killed or reconciled explicitly,
//!    and status updates wait unacknowledged (the agents re-send them).
//!
//! A read or write that fails ends the term ([`TermOutcome::StartupFailed`]);
//! the supervisor tries again.

use std::collections::BTreeSet;

use tokio::time::Instant;

use super::service_table::ServiceEntry;
use super::{Machine, Pending};
use crate::coordination::{DeploymentRecord, Expect, RecordList, Versioned, Written};
use crate::mesos::operator::{self, Frameworks};
use crate::scheduler::core::io::{
    OperatorAnswer, OperatorFailure, OperatorOp, StoreOp, StoreResult,
};
use crate::scheduler::core::{StartupError, TermOutcome};
use crate::scheduler::ids::FrameworkId;
use crate::scheduler::records::ServiceRecord;
use crate::scheduler::records::TaskRecord;
use crate::scheduler::rules::restart::ServiceBackoff;

/// Where the term's start stands.
#[derive(Debug, Default)]
pub(super) struct Startup {
    framework_id: Option<Option<FrameworkId>>,
    services: Option<RecordList<ServiceRecord>>,
    /// `None` until read; not read unless `hard`.
    deployment: Option<Option<Versioned<DeploymentRecord>>>,
    /// Operator teardowns of earlier frameworks in flight (`hard`).
    teardowns: usize,
    /// Services-file writes in flight.
    services_writes: usize,
    /// The client was started (or deferred) and the task records asked for.
    running: bool,
    /// Registering a new framework waits for the task records: see
    /// [`Machine::startup_running`].
    client_deferred: bool,
    /// This term's `hard` teardown deleted the task records: the job runs
    /// that were going end `killed` (`jobs`).
    hard_forgot_tasks: bool,
    /// The stored task records not in the table yet, and then the
    /// services whose restart backoffs are still to rebuild from them
    /// ([`Machine::load_slice`]).
    loading: Option<Loading>,
}

/// A term's load of the stored task records, one bounded step at a time:
/// [`CoreConfig::load_per_step`](crate::scheduler::config::CoreConfig::load_per_step)
/// records per step, then one service's restart backoffs and snapshot sums
/// per step.
#[derive(Debug)]
struct Loading {
    records: std::vec::IntoIter<(String, Versioned<TaskRecord>)>,
    /// Services whose backoffs (and snapshot sums) are rebuilt next, last first; filled once
    /// the last record is in.
    backoffs: Option<Vec<String>>,
}

/// What a startup request in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    ReadFrameworkId,
    ReadServices,
    ReadDeployment,
    HardList,
    HardTeardown {
        id: String,
    },
    HardForgetId,
    HardForgetTasks {
        record: Box<Versioned<DeploymentRecord>>,
    },
    HardMarkDone,
    ServicesFile {
        name: String,
        record: Option<Box<ServiceRecord>>,
    },
    LoadTasks,
}

impl Machine {
    pub(super) fn begin_startup(&mut self, _now: Instant) {
        self.store(
            StoreOp::ReadFrameworkId,
            Pending::Startup(Step::ReadFrameworkId),
        );
        self.store(StoreOp::ListServices, Pending::Startup(Step::ReadServices));
        self.load_drains();
        if self.is_hard() {
            self.store(
                StoreOp::ReadDeployment,
                Pending::Startup(Step::ReadDeployment),
            );
        } else {
            self.startup.deployment = Some(None);
        }
    }

    fn startup_failed(&mut self, error: StartupError) {
        self.end_term(TermOutcome::StartupFailed(error));
    }

    pub(super) fn on_startup_stored(&mut self, step: Step, result: StoreResult, now: Instant) {
        let read = |what: &'static str| move |source| StartupError::Read { what, source };
        let hard = |step: &'static str| move |source| StartupError::HardStore { step, source };
        match (step, result) {
            (Step::ReadFrameworkId, StoreResult::FrameworkId(r)) => match r {
                Ok(id) => self.startup.framework_id = Some(id),
                Err(e) => return self.startup_failed(read("the framework ID")(e)),
            },
            (Step::ReadServices, StoreResult::Services(r)) => match r {
                Ok(list) => self.startup.services = Some(list),
                Err(e) => return self.startup_failed(read("services")(e)),
            },
            (Step::ReadDeployment, StoreResult::Deployment(r)) => match r {
                Ok(record) => self.startup.deployment = Some(record),
                Err(e) => return self.startup_failed(read("the deployment")(e)),
            },
            (Step::HardForgetId, StoreResult::Written(r)) => {
                if let Err(e) = r {
                    return self.startup_failed(hard("deleting the framework ID")(e));
                }
                self.store(
                    StoreOp::DeleteAllTasks,
                    Pending::Startup(Step::HardForgetTasks {
                        record: Box::new(self.hard_record()),
                    }),
                );
                return;
            }
            (Step::HardForgetTasks { record }, StoreResult::Count(r)) => {
                if let Err(e) = r {
                    return self.startup_failed(hard("deleting task records")(e));
                }
                self.startup.hard_forgot_tasks = true;
                let mut done = record.value.clone();
                done.teardown_done = true;
                self.store(
                    StoreOp::WriteDeployment(done, Expect::Version(record.version)),
                    Pending::Startup(Step::HardMarkDone),
                );
                return;
            }
            (Step::HardMarkDone, StoreResult::Written(r)) => {
                if let Err(e) = r {
                    return self.startup_failed(hard("recording the teardown")(e));
                }
                self.warn(
                    "hard deployment: earlier frameworks torn down; registering a fresh framework"
                        .into(),
                );
                self.startup.framework_id = Some(None);
                self.apply_services_file(now);
                return;
            }
            (Step::ServicesFile { name, record }, StoreResult::Written(r)) => {
                match (r, record) {
                    (Ok(Written::Version(version)), Some(record)) => {
                        self.services
                            .insert(name, ServiceEntry::new(*record, version));
                    }
                    (Ok(_), _) => {
                        self.services.remove(&name);
                    }
                    (Err(source), _) => {
                        return self.startup_failed(StartupError::ServicesFile { name, source });
                    }
                }
                self.startup.services_writes -= 1;
                if self.startup.services_writes == 0 {
                    self.startup_running(now);
                }
                return;
            }
            (Step::LoadTasks, StoreResult::Tasks(r)) => {
                match r {
                    Ok(list) => self.tasks_loaded(list, now),
                    Err(e) => self.startup_failed(read("task records")(e)),
                }
                return;
            }
            (step, result) => {
                self.warn(format!("unexpected answer {result:?} to {step:?}; ignored"));
                return;
            }
        }
        self.after_reads(now);
    }

    /// True when this term's `hard` teardown deleted the task records.
    pub(super) fn hard_forgot_tasks(&self) -> bool {
        self.startup.hard_forgot_tasks
    }

    /// The deployment record read at the start (`hard` only reads it).
    fn hard_record(&self) -> Versioned<DeploymentRecord> {
        self.startup
            .deployment
            .clone()
            .flatten()
            .expect("hard teardown runs on a read deployment record")
    }

    /// Once the three reads are in: `hard`'s teardown or the services file.
    fn after_reads(&mut self, now: Instant) {
        let (Some(framework_id), Some(_), Some(deployment)) = (
            &self.startup.framework_id,
            &self.startup.services,
            &self.startup.deployment,
        ) else {
            return;
        };
        self.framework.id = framework_id.clone();
        let teardown_due = deployment.as_ref().is_some_and(|record| {
            record.value.deployment_id == self.cfg.deployment_id
                && record.value.strategy == crate::coordination::Strategy::Hard
                && !record.value.teardown_done
        });
        if self.is_hard() && teardown_due {
            self.operator(
                OperatorOp::ListFrameworks { within: None },
                Pending::Startup(Step::HardList),
            );
        } else {
            self.apply_services_file(now);
        }
    }

    pub(super) fn on_startup_operator(
        &mut self,
        step: Step,
        answer: OperatorAnswer,
        _now: Instant,
    ) {
        match (step, answer) {
            (Step::HardList, OperatorAnswer::Frameworks(listed)) => match listed {
                Ok(frameworks) => self.hard_teardown(&frameworks),
                Err(e) => self.startup_failed(StartupError::HardList(e)),
            },
            (Step::HardTeardown { id }, OperatorAnswer::TornDown(result)) => {
                match result {
                    Ok(()) => self.warn(format!(
                        "hard deployment: tore down an earlier framework {id}"
                    )),
                    Err(OperatorFailure::Failed(e)) if e.is_no_such_framework() => {
                        self.warn(format!("hard deployment: framework {id} already gone"))
                    }
                    Err(source) => {
                        return self.startup_failed(StartupError::HardTeardown { id, source });
                    }
                }
                self.startup.teardowns -= 1;
                if self.startup.teardowns == 0 {
                    self.store(
                        StoreOp::DeleteFrameworkId,
                        Pending::Startup(Step::HardForgetId),
                    );
                }
            }
            (step, answer) => {
                self.warn(format!("unexpected answer {answer:?} to {step:?}; ignored"));
            }
        }
    }

    /// Tears down the stored framework and every framework of our name and
    /// role the master knows (active or not).
    fn hard_teardown(&mut self, frameworks: &Frameworks) {
        let mut ids = BTreeSet::new();
        if let Some(stored) = self.framework.id.clone() {
            ids.insert(stored.to_string());
        }
        for f in frameworks.active().chain(frameworks.inactive()) {
            if operator::same_name_and_role(f, &self.cfg.framework_name, &self.cfg.role)
                && let Some(id) = operator::framework_id(f)
            {
                ids.insert(id.to_string());
            }
        }
        self.framework.id = None;
        if ids.is_empty() {
            self.store(
                StoreOp::DeleteFrameworkId,
                Pending::Startup(Step::HardForgetId),
            );
            return;
        }
        self.startup.teardowns = ids.len();
        for id in ids {
            self.operator(
                OperatorOp::Teardown(id.clone()),
                Pending::Startup(Step::HardTeardown { id }),
            );
        }
    }

    /// Takes the valid stored services, then writes the `--services` file
    /// where it applies.
    fn apply_services_file(&mut self, now: Instant) {
        let listed = self.startup.services.take().unwrap_or_default();
        let all_decoded = listed.malformed.is_empty();
        for (name, record) in listed.records {
            if record.value.spec.validate().is_empty() {
                self.services
                    .insert(name, ServiceEntry::new(record.value, record.version));
            } else {
                self.services.add_malformed(name);
            }
        }
        for malformed in listed.malformed {
            self.services.add_malformed(malformed.key);
        }
        let seed = self.services.is_empty() && all_decoded;
        let file = self.term.initial_services.clone();
        if seed || (self.cfg.replace_services && !file.is_empty()) {
            let wanted: BTreeSet<&str> = file.iter().map(|s| s.name.as_str()).collect();
            let stale: Vec<String> = self
                .services
                .names()
                .into_iter()
                .filter(|k| !wanted.contains(k.as_str()))
                .collect();
            for name in stale {
                self.startup.services_writes += 1;
                self.store(
                    StoreOp::DeleteService(name.clone(), Expect::Any),
                    Pending::Startup(Step::ServicesFile { name, record: None }),
                );
            }
            for spec in file {
                if self.services.spec(&spec.name) == Some(&spec) {
                    continue;
                }
                self.startup.services_writes += 1;
                let record = match self.services.get(&spec.name) {
                    Some(entry) => entry.record().replaced_by(spec),
                    None => ServiceRecord::new(spec),
                };
                self.store(
                    StoreOp::PutService(Box::new(record.clone()), Expect::Any),
                    Pending::Startup(Step::ServicesFile {
                        name: record.spec.name.clone(),
                        record: Some(Box::new(record)),
                    }),
                );
            }
        }
        if self.startup.services_writes == 0 {
            self.startup_running(now);
        }
    }

    /// Starts the client and reads the task records beside it. Without a
    /// stored framework ID the client waits for the records instead: a
    /// SUBSCRIBE that registers a new framework while a failed read of the
    /// records then ends the term would leave that framework at the master
    /// with its ID stored nowhere, and the next leader refusing to orphan it.
    /// Resubscribing with a stored ID orphans nothing, so it goes at once.
    fn startup_running(&mut self, now: Instant) {
        if self.startup.running {
            return;
        }
        self.startup.running = true;
        if self.framework.id.is_some() {
            self.start_client(now);
        } else {
            self.startup.client_deferred = true;
        }
        self.store(StoreOp::ListTasks, Pending::Startup(Step::LoadTasks));
        // The jobs and their runs, next to the task records (`jobs`).
        self.begin_jobs();
    }

    /// The task records are known: kills a previous term wanted resume,
    /// waiting updates are handled, reconciliation and scheduling may start.
    fn tasks_loaded(&mut self, list: RecordList<TaskRecord>, now: Instant) {
        for malformed in &list.malformed {
            self.warn(format!(
                "task record {} does not decode and is skipped: {}",
                malformed.key, malformed.reason
            ));
        }
        self.startup.loading = Some(Loading {
            records: list.records.into_iter(),
            backoffs: None,
        });
        self.load_slice(now);
    }

    /// True while the stored task records are loaded slice by slice: the
    /// next step is due at once.
    pub(super) fn loading_tasks(&self) -> bool {
        self.startup.loading.is_some()
    }

    /// Loads the next slice of the stored task records into the table; after
    /// the last, rebuilds one service's restart backoffs and builds its
    /// snapshot sums ([`Machine::absorb_shown`]) per step; after the
    /// last, the table is loaded and the term goes on with them: kills to
    /// resume, the updates held meanwhile (after the backoffs, which a
    /// terminal update counts in), reconciliation. A command between two
    /// steps waits for one step, not for the list: at 100,000 records the
    /// step after the last slice took 159–220 ms with every service's
    /// backoffs in it (`docs/benchmarks.md`, *A follower that catches up*).
    /// A service created meanwhile has no earlier records to rebuild from.
    pub(super) fn load_slice(&mut self, now: Instant) {
        let Some(loading) = self.startup.loading.as_mut() else {
            return;
        };
        let per_step = self.cfg.load_per_step.max(1);
        let mut budget = per_step;
        if loading.records.len() > 0 {
            let slice = per_step.min(loading.records.len());
            self.tasks.load_part(loading.records.by_ref().take(slice));
            budget -= slice;
            if loading.records.len() > 0 {
                return;
            }
        }
        let mut names = loading.backoffs.take().unwrap_or_else(|| {
            let mut names = self.services.names();
            names.reverse();
            names
        });
        // The backoffs and the snapshot's sums cost a read each of the
        // service's records: the step goes on while its records read stay
        // within `per_step`, and does at least one thing.
        while let Some(name) = names.pop() {
            let reads = 2 * self.tasks.service(&name).map_or(0, |t| t.len());
            if reads > budget && budget < per_step {
                names.push(name);
                if let Some(loading) = self.startup.loading.as_mut() {
                    loading.backoffs = Some(names);
                }
                return;
            }
            budget = budget.saturating_sub(reads);
            self.rebuild_backoffs(&name, now);
            self.absorb_shown(&name, now);
        }
        self.startup.loading = None;
        let waiting = self.tasks.finish_load();
        if std::mem::take(&mut self.startup.client_deferred) {
            self.start_client(now);
        }
        // A framework the master removed has no tasks left to kill.
        self.settle_removed_records(now);
        if self.framework.removed.is_none() {
            self.resume_kills(now);
        }
        self.out.dirty = true;
        for status in waiting {
            self.route_update(status, now);
        }
        self.reconcile_after_subscription(now);
        self.needs_schedule = true;
    }

    /// Each instance of service `name`'s restart backoff from its stored
    /// tasks: the previous leader's count lived in its memory only, and a
    /// leader change must not forgive a crash-looping instance
    /// (`ServiceBackoff::from_records`).
    fn rebuild_backoffs(&mut self, name: &str, now: Instant) {
        let now_unix = self.unix(now);
        let (Some(spec), Some(tasks)) = (self.services.spec(name), self.tasks.service(name)) else {
            return;
        };
        let rebuilt = ServiceBackoff::from_records(spec, tasks.stored(), now, now_unix);
        if !rebuilt.is_empty()
            && let Some(backoff) = self.services.backoff_mut(name)
        {
            *backoff = rebuilt;
        }
    }
}
