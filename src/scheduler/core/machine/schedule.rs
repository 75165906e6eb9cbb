//! The scheduling pass (surplus kills, rolling replacement, placement,
//! launches, declines, SUPPRESS / REVIVE), kill retries and
//! reconciliation's calls. Housekeeping is in `housekeeping`.
//!
//! Task records are written *before* the ACCEPT that launches them: a
//! launch's records go to ZooKeeper and its offer's ACCEPT waits until they
//! are stored (a task whose record failed is left out). A leader that dies
//! between the two leaves records the next leader reconciles (the master
//! answers TASK_LOST for a task it never saw) rather than tasks nobody
//! knows. Offers belong to their subscription (`docs/app-framework-development-guide.md`
//! in apache/mesos): an ACCEPT whose subscription ended meanwhile is not
//! sent.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use tokio::time::Instant;

use super::service_table::ServiceEntry;
use super::{Machine, Pending, evacuation, tasks};
use crate::coordination::Expect;
use crate::mesos::v1::{self, TaskState};
use crate::scheduler::core::io::StoreOp;
use crate::scheduler::ids::{AgentId, TaskId};
use crate::scheduler::records::{TaskRecord, is_live};
use crate::scheduler::rules::offers::{Gone, OfferRegistry};
use crate::scheduler::rules::partition;
use crate::scheduler::rules::placement::{self, Demand};
use crate::scheduler::rules::review::{Review, review};
use crate::scheduler::rules::rollout;
use crate::scheduler::rules::taskinfo::{self, ExecutorSource};
use crate::scheduler::snapshot::EventKind;
use crate::scheduler::spec::service::{Constraint, ExecutorKind, ServiceSpec};

/// Filter for the unused part of an accepted offer while more work is
/// pending: short, so the rest comes back soon.
const ACCEPT_REFUSE_SECONDS: f64 = 1.0;

/// Records one scheduling pass reads at most (but always one service's):
/// the services past it wait for the next pass, which resumes with them.
/// A pass costs about a microsecond per record read (`pass_cost` in the
/// machine's tests), so a command waits behind one pass of about 10 ms
/// whatever the task count.
pub(super) const PASS_RECORDS: usize = 10_000;

/// The scheduling pass's bound: how many records a pass may read, and the
/// service the next pass starts with after one that ran out of budget.
///
/// A round of passes goes over the services in name order: each pass
/// from `resume` on (the first pass of a round from the first service),
/// assessing each one whose records or stored record changed; before one
/// that would take it past `budget` records (once it assessed one), it
/// stops assessing: that service and those after it are deferred to the
/// next pass of the round, which is due at once (paced as any pass). The
/// services before `resume` were assessed earlier in the round.
/// A deferred service places nothing and kills nothing in this pass; what
/// the last assessment found stands meanwhile: its instances still wait
/// (offers are kept for them, no REVIVE is new), its rollout's progress
/// and its shortfall are as they were. A round takes at most one pass per
/// service, and about `records / budget` passes.
#[derive(Debug)]
pub(super) struct PassBound {
    /// Records a pass may read (tests set it low).
    pub(super) budget: usize,
    /// The first service the last pass deferred.
    resume: Option<String>,
}

impl Default for PassBound {
    fn default() -> PassBound {
        PassBound {
            budget: PASS_RECORDS,
            resume: None,
        }
    }
}

impl PassBound {
    /// True while a pass deferred services the next one must assess.
    pub(super) fn deferred(&self) -> bool {
        self.resume.is_some()
    }
}

/// A service the last scheduling pass found needing nothing: no missing
/// instance, no surplus task, no replacement due, no rollout in progress.
/// None of these changes with time alone (availability only grows with
/// time), so it holds until one of the service's records changes (the
/// table's index marks it) or its stored record does (`spec`, `halted`).
#[derive(Debug)]
pub(super) struct Settled {
    spec: crate::scheduler::spec::service::ServiceSpec,
    halted: bool,
    progress: rollout::Progress,
}

impl Settled {
    pub(super) fn new(entry: &ServiceEntry, progress: rollout::Progress) -> Settled {
        Settled {
            spec: entry.spec.clone(),
            halted: entry.halted.is_some(),
            progress,
        }
    }

    /// True while `entry` is the service this was found of.
    fn holds_for(&self, entry: &ServiceEntry) -> bool {
        self.halted == entry.halted.is_some() && self.spec == entry.spec
    }
}

/// Launches whose records are being stored, by group (one per offer).
#[derive(Debug, Default)]
pub(super) struct Launches {
    pub(super) groups: HashMap<u64, LaunchGroup>,
    pub(super) next: u64,
    /// What one task needs (its resources and its executor's) and how many
    /// tasks wait, by service or job attempt whose demand the launch budget
    /// (`CoreConfig::launching_max`) held back when it was last assessed; a
    /// service deferred by [`PassBound`] keeps its entry until its next
    /// assessment. The held offers those tasks would take are kept past
    /// their TTL: they wait for the leader's own launch pace, not for work
    /// that may never come (see [`Launches::wanted`]).
    held_back: BTreeMap<String, (crate::mesos::resources::Resources, usize)>,
}

impl Launches {
    /// The held offers the tasks the launch budget held back would take:
    /// for each demand, offers in arrival order (the order placement fills
    /// them) with room for one of its tasks, until they hold all its
    /// waiting tasks. An offer a launch is under way on does not count (its
    /// ACCEPT uses it up; the rest goes back to the master). Constraints
    /// and ports are not looked at: such an offer is kept until the launch
    /// catches up, and the pass after that declines it if nothing placed
    /// there. The rest may expire.
    pub(super) fn wanted(&self, offers: &OfferRegistry) -> HashSet<String> {
        let mut wanted = HashSet::new();
        if self.held_back.is_empty() {
            return wanted;
        }
        let launching: HashSet<&str> = self.groups.values().map(|g| g.offer_id.as_str()).collect();
        for (need, waiting) in self.held_back.values() {
            let mut left = *waiting;
            for offer in offers.iter() {
                if left == 0 {
                    break;
                }
                if !launching.contains(offer.id()) && offer.remaining.contains(need) {
                    left = left.saturating_sub(offer.remaining.fits_times(need));
                    wanted.insert(offer.id().to_string());
                }
            }
        }
        wanted
    }
}

/// The tasks of one offer, waiting for their records.
#[derive(Debug)]
pub(super) struct LaunchGroup {
    pub(super) offer_id: String,
    /// The subscription the offer came on.
    pub(super) epoch: u64,
    /// `None` where the record could not be stored.
    pub(super) tasks: Vec<Option<PendingTask>>,
    pub(super) outstanding: usize,
    pub(super) refuse_seconds: f64,
}

/// A task placed on an offer, until the ACCEPT: its `TaskInfo` is built
/// only then, from the spec it was placed of. A `TaskInfo` is a few KiB
/// (command, environment, labels, health check, executor); held for every
/// launch whose record is being written, they were the leader's largest
/// transient memory during a launch.
#[derive(Debug)]
pub(super) struct PendingTask {
    pub(super) task_id: TaskId,
    /// The spec it was placed of (a later change of the service does not
    /// change what this launch is: its record names this one).
    pub(super) spec: Arc<LaunchSpec>,
    pub(super) planned: placement::Planned,
}

/// A spec as its tasks are launched: shared by the tasks one pass places
/// of it, its fingerprint computed once.
#[derive(Debug)]
pub(super) struct LaunchSpec {
    pub(super) spec: ServiceSpec,
    /// [`ServiceSpec::fingerprint`] of `spec`.
    pub(super) fingerprint: String,
}

impl LaunchSpec {
    fn new(spec: ServiceSpec) -> Arc<LaunchSpec> {
        let fingerprint = spec.fingerprint();
        Arc::new(LaunchSpec { spec, fingerprint })
    }
}

/// What a call in flight was for.
#[derive(Debug)]
pub(super) enum Step {
    Accept {
        offer_id: String,
        /// The tasks it launches.
        tasks: Vec<TaskId>,
    },
    Decline,
    /// A KILL; `attempt` counts it among the task's KILLs.
    Kill {
        task: TaskId,
        attempt: u32,
    },
    Reconcile,
    Suppress,
    Revive,
}

impl Machine {
    pub(super) fn on_offers(&mut self, offers: Vec<v1::Offer>, now: Instant) {
        let at = self.unix(now);
        self.count_offers("received", offers.len());
        let mut blocked = Vec::new();
        for offer in offers {
            self.agent_attributes
                .insert((&offer.agent_id).into(), offer.attributes.clone());
            if !self.offer_usable(&offer, now) {
                self.why
                    .received(&offer.id.value, &offer.agent_id.value, Some("maintenance"));
                blocked.push(offer.id.value);
                continue;
            }
            self.why
                .received(&offer.id.value, &offer.agent_id.value, None);
            self.offers.add(offer, now, at);
        }
        self.decline_blocked(blocked, now);
        self.out.dirty = true;
        self.needs_schedule = true;
    }

    pub(super) fn on_rescind(&mut self, offer_id: &str, now: Instant) {
        if self.offers.remove(offer_id, Gone::Rescinded, now).is_some() {
            self.count_offers("rescinded", 1);
            self.out.dirty = true;
        }
    }

    pub(super) fn on_agent_lost(&mut self, agent: &AgentId, now: Instant) {
        let dropped = self.offers.remove_agent(agent, now);
        self.count_offers("dropped", dropped.len());
        self.log(
            EventKind::Agent,
            format!("agent {agent} lost; {} offer(s) dropped", dropped.len()),
            now,
        );
    }

    pub(super) fn executor_source(&self) -> Option<ExecutorSource> {
        self.cfg.executor_url.as_ref().map(|url| ExecutorSource {
            url: url.clone(),
            cpus: self.cfg.executor_cpus,
            mem: self.cfg.executor_mem,
        })
    }

    /// Subscribed, the records known, the framework ID stored.
    pub(super) fn may_schedule(&self) -> bool {
        self.framework.is_subscribed()
            && self.tasks.is_loaded()
            // A new leader places nothing before it knows which agents
            // its predecessor was draining.
            && self.drains.is_loaded()
            // Nor before it knows the jobs: a job's task would look like
            // one of a deleted service and be killed (a forbid job's run
            // failed across a leader change once the task records loaded
            // before the jobs did).
            && self.jobs.loaded
            && !self.framework.registering
            && self.framework.id.is_some()
    }

    /// One scheduling pass: kill surplus tasks, replace outdated ones
    /// (rolling), place missing instances on held offers and launch them,
    /// then decline or keep the rest and suppress or revive offers. It reads
    /// each service's records from the table's index, and skips a service
    /// the last pass found settled (see [`Settled`]) while neither its
    /// records nor its stored record changed since.
    pub(super) fn schedule(&mut self, now: Instant) {
        if !self.may_schedule() {
            return;
        }
        self.decline_held_agents(now);
        let mut kills: Vec<(TaskId, String)> = Vec::new();
        let mut moves: Vec<(TaskId, u32)> = Vec::new();
        let orphaned: Vec<String> = self
            .tasks
            .services()
            .filter(|(name, _)| !self.services.contains(name) && !self.jobs.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in orphaned {
            self.tasks.take_changed(&name);
            if let Some(tasks) = self.tasks.service(&name) {
                kills.extend(
                    tasks
                        .records()
                        .filter(|r| is_live(r))
                        .map(|r| (r.task_id.clone(), "service deleted".to_string())),
                );
            }
        }
        let executor_resources = self
            .executor_source()
            .map(|s| s.resources())
            .unwrap_or_default();
        let mut demands_data = Vec::new();
        let mut rollouts = Vec::new();
        let at = self.unix(now);
        let mut missing_total = 0;
        let launching: usize = self.launches.groups.values().map(|g| g.tasks.len()).sum();
        let mut budget = self.cfg.launching_max.saturating_sub(launching);
        // Job attempts are held back afresh each pass; a service keeps its
        // entry while deferred, and loses it once deleted.
        let services = &self.services;
        self.launches
            .held_back
            .retain(|name, _| services.contains(name));
        let names = self.services.names();
        // From where the last pass stopped (`PassBound`): the services
        // before it were assessed earlier in this round.
        let resume = self.pass.resume.take();
        let mut records_read = 0;
        let mut assessed = 0usize;
        let mut carried_waiting: HashMap<String, placement::Shortfall> = HashMap::new();
        for name in names {
            let skip = |machine: &Machine| {
                let Some(state) = machine.services.state(&name) else {
                    return true;
                };
                // While an agent is emptied (for its window, or drained), no
                // service counts as settled: which of its tasks leave changes
                // without a record changing.
                !machine.tasks.is_changed(&name)
                    && !machine.maintenance.any_leaving()
                    // A done drain only holds: a task there again changes
                    // records.
                    && !machine.drains.any_running()
                    && state
                        .settled
                        .as_ref()
                        .is_some_and(|s| s.holds_for(&state.entry))
            };
            let earlier = resume.as_ref().is_some_and(|r| name < *r);
            let deferring = self.pass.resume.is_some();
            let over_budget = || {
                let reads = self.tasks.service(&name).map_or(0, |t| t.len());
                assessed > 0 && records_read + reads > self.pass.budget
            };
            if earlier || deferring || (over_budget() && !skip(self)) {
                if !earlier {
                    self.pass.resume.get_or_insert_with(|| name.clone());
                }
                let Some(state) = self.services.state(&name) else {
                    continue;
                };
                let progress = state.settled.as_ref().map(|s| &s.progress);
                if let Some(progress) = progress.or(state.progress.as_ref()) {
                    rollouts.push((name.clone(), progress.clone()));
                }
                if let Some(waiting) = &state.waiting {
                    carried_waiting.insert(name.clone(), waiting.clone());
                }
                missing_total += self.revive.carry(&name);
                continue;
            }
            let changed = self.tasks.take_changed(&name);
            let Some(state) = self.services.state_mut(&name) else {
                continue;
            };
            let entry = &state.entry;
            if !changed
                && !self.maintenance.any_leaving()
                && !self.drains.any_running()
                && let Some(settled) = &state.settled
                && settled.holds_for(entry)
            {
                self.launches.held_back.remove(&name);
                rollouts.push((name, settled.progress.clone()));
                continue;
            }
            assessed += 1;
            self.launches.held_back.remove(&name);
            let spec = &entry.spec;
            let empty = super::table::ServiceTasks::default();
            let tasks = self.tasks.service(&name).unwrap_or(&empty);
            records_read += tasks.len();
            // Tasks leaving an agent (for its maintenance window, or by a
            // drain) are not counted: their instances get replacements,
            // and they are killed once those are available and the floor
            // holds (`evacuation`).
            let maintenance = &self.maintenance;
            let drains = &self.drains;
            let leave = |r: &TaskRecord| maintenance.leave(r).or_else(|| drains.leave(spec, r));
            let evacuating = maintenance.any_leaving() || drains.any_holding();
            // One read of the records (`review`); while no agent is
            // emptied no task leaves, and none is asked.
            let seen = if evacuating {
                review(spec, tasks.records(), |r| leave(r).is_none(), at)
            } else {
                review(spec, tasks.records(), |_| true, at)
            };
            let leaving = seen.set_aside > 0;
            let halted = entry.halted.is_some();
            let replacement = seen.replacement(self.cfg.upgrade_max_unavailable, halted);
            let Review {
                assessment,
                progress,
                ..
            } = seen;
            let quiet = assessment.missing.is_empty()
                && assessment.surplus.is_empty()
                && assessment.moves.is_empty()
                && replacement.is_none()
                && !leaving
                && progress.complete()
                // An unreachable task's wait ends by time alone.
                && assessment.wake_at.is_none();
            state.settled = quiet.then(|| Settled::new(entry, progress.clone()));
            state.progress = Some(progress.clone());
            // A task whose record is being written may be up already (a
            // RUNNING or healthy update in flight) although the stored
            // record says it is down: its kill would wait behind that
            // write and land on an available task. The pass that follows
            // the write decides on it again.
            let replacement = replacement.filter(|id| {
                self.tasks
                    .get(id.as_str())
                    .is_none_or(|entry| !entry.writing)
            });
            let leaving_kills = if evacuating {
                // What dies anyway no longer counts for a drain's floor:
                // this pass's surplus and rollout kills, and kill marks
                // being stored (`evacuation::look`).
                let surplus: HashSet<&TaskId> =
                    assessment.surplus.iter().map(|(id, _)| id).collect();
                let dying = |r: &TaskRecord| {
                    surplus.contains(&r.task_id)
                        || replacement.as_ref() == Some(&r.task_id)
                        || self
                            .tasks
                            .get(r.task_id.as_str())
                            .is_some_and(|e| e.kill_wanted)
                };
                let steps = evacuation::look(
                    spec,
                    tasks.records(),
                    leave,
                    dying,
                    at,
                    self.cfg.transient_timeout,
                );
                // A task whose move into a free instance is being stored
                // (a pass before it began to leave moved it there) stands
                // for a wanted instance once stored: it is not killed as
                // unwanted on its old instance; the pass after the write
                // decides on it again.
                let moving =
                    |id: &TaskId| self.tasks.get(id.as_str()).is_some_and(|e| e.move_wanted);
                let steps = steps.into_iter().filter(|(id, step)| {
                    !matches!(step, evacuation::Step::Unwanted { .. }) || !moving(id)
                });
                evacuation::kills(steps.collect())
            } else {
                Vec::new()
            };
            kills.extend(assessment.surplus.iter().cloned());
            kills.extend(leaving_kills);
            moves.extend(assessment.moves.iter().cloned());
            if let Some(id) = replacement {
                kills.push((id, "replaced by a newer service spec".into()));
            }
            rollouts.push((name.clone(), progress));
            if assessment.missing.is_empty() {
                continue;
            }
            // Instances in their restart backoff wait; the rest are placed.
            // Only these are pending work: while every missing instance
            // backs off, held offers are declined and offers suppressed
            // (other frameworks get them), and the end of a backoff is a
            // new need that REVIVEs (`revive`).
            let mut missing = assessment.missing;
            if let Some(backoff) = &state.backoff {
                missing.retain(|i| backoff.ready(*i, now));
            }
            missing_total += missing.len();
            // Every instance past its backoff waits, also those beyond this
            // pass's budget: a launch spread over many passes is one need.
            self.revive.waits(&name, &missing);
            let resources = match spec.executor {
                ExecutorKind::Appliance => executor_resources.clone(),
                ExecutorKind::Command => Default::default(),
            };
            if missing.len() > budget {
                let mut need = placement::task_resources(spec);
                need.add(&resources);
                let waiting = missing.len() - budget;
                self.launches
                    .held_back
                    .insert(name.clone(), (need, waiting));
            }
            if missing.is_empty() || budget == 0 {
                continue;
            }
            missing.truncate(budget);
            budget -= missing.len();
            // The agents of the service's tasks, for UNIQUE constraints
            // only (a list as long as the service's records, built each
            // pass, is not built for the others). An unreachable task does
            // not hold its host (`partition`).
            let unique = spec
                .parsed_constraints()
                .iter()
                .any(|c| matches!(c, Constraint::Unique { .. }));
            let occupied: Vec<(AgentId, String)> = if unique {
                tasks
                    .records()
                    .filter(|t| partition::occupies_host(t))
                    .map(|t| (t.agent_id.clone(), t.hostname.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            demands_data.push((spec.clone(), missing, occupied, resources));
        }
        // Job attempts whose run records are stored (`jobs`): one demand
        // each, named `<job>.<run-id>`, its instance the attempt number.
        for demand in self.job_demands(now) {
            missing_total += 1;
            self.revive.waits(&demand.key, &[demand.attempt]);
            let resources = match demand.spec.executor {
                ExecutorKind::Appliance => executor_resources.clone(),
                ExecutorKind::Command => Default::default(),
            };
            if budget == 0 {
                let mut need = placement::task_resources(&demand.spec);
                need.add(&resources);
                self.launches.held_back.insert(demand.key, (need, 1));
                continue;
            }
            budget -= 1;
            let mut spec = demand.spec;
            spec.name = demand.key;
            demands_data.push((spec, vec![demand.attempt], Vec::new(), resources));
        }
        self.last_pass_records = records_read;
        self.watch_rollouts(rollouts, now);
        // A kill the pass decided on a task whose record is being written
        // waits for no write: the pass after that write decides again, on
        // what it stored. Queued behind it, the kill landed on a world that
        // had changed meanwhile (a task killed as scaled down after the
        // service was scaled back up: the property `machine_invariants`,
        // seed 8368845573905297724).
        for (task_id, reason) in kills {
            let writing = self
                .tasks
                .get(task_id.as_str())
                .is_some_and(|e| e.writing && e.record.kill.is_none());
            if writing {
                continue;
            }
            self.request_kill(&task_id, &reason, now);
        }
        for (task_id, instance) in moves {
            self.request_move(&task_id, instance);
        }
        self.send_due_kills(now);

        let demands: Vec<Demand<'_>> = demands_data
            .iter()
            .map(|(spec, missing, occupied, executor_resources)| Demand {
                spec,
                missing: missing.clone(),
                occupied: occupied.clone(),
                executor_resources: executor_resources.clone(),
            })
            .collect();
        let planned = placement::plan(&demands, &mut self.offers, &self.agent_attributes);
        let mut placed: HashMap<&str, usize> = HashMap::new();
        for p in &planned {
            *placed.entry(p.service.as_str()).or_default() += 1;
        }
        let mut waiting: HashMap<String, placement::Shortfall> = demands
            .iter()
            .filter(|d| placed.get(d.spec.name.as_str()).copied().unwrap_or(0) < d.missing.len())
            .map(|d| (d.spec.name.clone(), placement::shortfall(d, &self.offers)))
            .collect();
        waiting.extend(carried_waiting);
        let at = self.unix(now);
        for d in &demands {
            if waiting.contains_key(&d.spec.name) {
                let agents = &self.agents;
                let takes = |agent: &str| agents.takes_new_tasks(agent);
                self.why.tally(d, &self.offers, &takes, at);
            }
        }
        for service in placed.keys() {
            self.why.launched(service);
        }
        self.why.end_pass();
        let services = &self.services;
        self.why.retain(&|name| services.contains(name));
        drop(placed);
        drop(demands);
        self.note_waiting(waiting, now);
        let unplaced = missing_total.saturating_sub(planned.len());
        // Services deferred to the next pass may want the offers left:
        // they are neither declined nor suppressed before that pass.
        let deferred = self.pass.deferred();
        if !planned.is_empty() {
            self.launch(planned, unplaced > 0 || deferred, now);
        }
        let new_need = self.revive.end_pass(self.suppressed);
        if deferred {
            self.needs_schedule = true;
        }
        if !deferred || unplaced > 0 {
            self.settle_offers(unplaced > 0, new_need, now);
        }
    }

    /// Keeps why services wait for offers; an event when a service becomes
    /// stuck (no offer large enough, or constraints exclude them all), not
    /// while offers merely have not arrived yet. A stuck service stays stuck
    /// while no offers are held (declined offers come back no larger).
    fn note_waiting(&mut self, mut waiting: HashMap<String, placement::Shortfall>, now: Instant) {
        for (service, why) in waiting.iter_mut() {
            let before = self.services.waiting(service).filter(|w| w.is_stuck());
            match before {
                Some(stuck) if *why == placement::Shortfall::NoOffers => *why = stuck.clone(),
                None if why.is_stuck() => {
                    let message = format!("service {service} waits: {why}");
                    self.log(EventKind::Service, message, now);
                }
                _ => {}
            }
        }
        if self.services.set_waiting(waiting) {
            self.out.dirty = true;
        }
    }

    /// Stores the records of the planned tasks; each offer's ACCEPT follows
    /// once its records are stored.
    fn launch(&mut self, planned: Vec<placement::Planned>, more_pending: bool, now: Instant) {
        if self.framework.id.is_none() {
            return;
        }
        let executor = self.executor_source();
        let at = self.unix(now);
        let mut by_offer: BTreeMap<String, Vec<(PendingTask, TaskRecord)>> = BTreeMap::new();
        let mut specs: HashMap<String, Arc<LaunchSpec>> = HashMap::new();
        for p in planned {
            let (task_id, spec, record_fingerprint) =
                if let Some((task_id, spec)) = self.job_launch(&p.service, p.instance, at) {
                    // A job attempt's spec is its own (`jobs`); its record
                    // says "job" where a service task's names its spec.
                    (task_id, LaunchSpec::new(spec), "job".to_string())
                } else {
                    let Some(spec) = self.services.spec(&p.service) else {
                        continue;
                    };
                    let spec = specs
                        .entry(p.service.clone())
                        .or_insert_with(|| LaunchSpec::new(spec.clone()))
                        .clone();
                    let task_id = taskinfo::new_task_id(&spec.spec.name, p.instance, &mut self.ids);
                    let fingerprint = spec.fingerprint.clone();
                    (task_id.as_str().into(), spec, fingerprint)
                };
            let record = staging_record(
                &spec.spec,
                &p,
                task_id.clone(),
                record_fingerprint,
                executor.as_ref(),
                at,
            );
            let offer_id = p.offer_id.clone();
            let task = PendingTask {
                task_id,
                spec,
                planned: p,
            };
            by_offer.entry(offer_id).or_default().push((task, record));
        }
        let refuse_seconds = if more_pending {
            ACCEPT_REFUSE_SECONDS
        } else {
            self.cfg.decline_refuse_seconds
        };
        for (offer_id, launches) in by_offer {
            self.offers.remove(&offer_id, Gone::Used, now);
            self.launches.next += 1;
            let group = self.launches.next;
            let mut tasks = Vec::with_capacity(launches.len());
            for (index, (task, record)) in launches.into_iter().enumerate() {
                let record = Arc::new(record);
                self.tasks.insert_launching(record.clone());
                self.store(
                    StoreOp::PutTask(record.clone(), Expect::Absent),
                    Pending::Task(tasks::Step::Create {
                        task: record.task_id.clone(),
                        group,
                        index,
                    }),
                );
                tasks.push(Some(task));
            }
            self.launches.groups.insert(
                group,
                LaunchGroup {
                    offer_id,
                    epoch: self.framework.epoch,
                    outstanding: tasks.len(),
                    tasks,
                    refuse_seconds,
                },
            );
        }
        self.out.dirty = true;
    }
}

/// The record of a task about to be launched (TASK_STAGING), written before
/// the ACCEPT that carries its `TaskInfo`: its executor is the appliance's
/// where the spec asks for it and `executor` is set, else Mesos' command
/// executor (whose executor ID is the task ID), as in the `TaskInfo`
/// ([`taskinfo::executor_of`]).
fn staging_record(
    spec: &ServiceSpec,
    p: &placement::Planned,
    task_id: TaskId,
    fingerprint: String,
    executor: Option<&ExecutorSource>,
    at: f64,
) -> TaskRecord {
    let (executor, executor_id) = taskinfo::executor_of(spec, task_id.as_str(), executor);
    TaskRecord {
        task_id,
        service: spec.name.clone(),
        instance: p.instance,
        fingerprint,
        agent_id: p.agent_id.clone(),
        hostname: p.hostname.clone(),
        executor,
        executor_id,
        ports: p.ports.clone(),
        state: TaskState::TaskStaging,
        launched_at: at,
        updated_at: at,
        kill: None,
        timeline: Vec::new(),
        healthy: None,
        healthy_since: None,
        // The `TaskInfo` carries a health check exactly when the spec has one.
        health_checked: Some(spec.health_check.is_some()),
        partition: None,
    }
}
