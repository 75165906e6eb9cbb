//! The leader's snapshot. The runner adds what only the process knows: the
//! election's view and the deployment record, and why no master leads.

use std::collections::HashMap;

use tokio::time::Instant;

use super::Machine;
use super::table::{ServiceTasks, ShownChanges, TaskTable};
use super::tally::Tally;
use crate::coordination::Leadership;
use crate::mesos::resources::format_ranges;
use crate::scheduler::snapshot::{
    FrameworkStatus, InstanceBackoff, OfferSummary, ServiceCounts, ServiceStatus, Snapshot,
    UnrecordedKill,
};
use crate::scheduler::spec::service::ServiceSpec;

/// A service's counts as the last snapshot showed them, from its stored
/// records, and the sums ([`Tally`]) they come from while they can: a
/// snapshot applies the records that changed since the last one to the
/// sums instead of counting every record of the service again. The sums
/// are built again when the spec changes or the table was cleared; the
/// records are counted one by one ([`ServiceCounts::of`]) at each full
/// snapshot while the sums cannot stand for them (partitions, duplicates,
/// a scale-down's surplus: their counts change with time alone).
///
/// A term's load builds the sums a service per step ([`Shown::absorb`]):
/// built at the first full snapshot after a load of 100,000 records they
/// took about 40 ms of one step (`tests/snapshot_cost.rs`,
/// `docs/benchmarks.md` *The first full snapshot after a failover*).
#[derive(Debug)]
pub(super) struct Shown {
    spec: ServiceSpec,
    counts: ServiceCounts,
    /// `counts` were counted from the sums (not so for sums built during
    /// the load until a snapshot counts them).
    counted: bool,
    tally: Tally,
    /// [`TaskTable::epoch`](super::table::TaskTable::epoch) when built.
    epoch: u64,
}

impl Shown {
    /// Counts `tasks` (the service's records; only stored ones count) of
    /// `spec` at `now_secs`, building the sums; `epoch` is the table's
    /// (tests: the machine builds them in [`Shown::refresh`]).
    #[cfg(test)]
    pub(super) fn new(
        spec: &ServiceSpec,
        tasks: Option<&ServiceTasks>,
        epoch: u64,
        now_secs: f64,
    ) -> Shown {
        let mut shown = Shown::build(spec, tasks, epoch);
        shown.count(tasks, now_secs);
        shown
    }

    /// The sums of `tasks` (only stored records count), not counted yet.
    fn build(spec: &ServiceSpec, tasks: Option<&ServiceTasks>, epoch: u64) -> Shown {
        let mut tally = Tally::new(spec);
        for record in tasks.into_iter().flat_map(ServiceTasks::stored) {
            tally.add(record);
        }
        Shown {
            spec: spec.clone(),
            counts: ServiceCounts::default(),
            counted: false,
            tally,
            epoch,
        }
    }

    /// Brings `shown`, the counts of `spec`'s service, to `now_secs` from
    /// the records of `tasks`: built again when absent, for another spec
    /// or from a table cleared since; else, for a full snapshot (not
    /// `light`), with the records changed since the last one. A light
    /// snapshot (a command's answer) keeps the last full one's counts, or
    /// counts the sums once if none did yet. Returns the counts.
    pub(super) fn refresh<'a>(
        shown: &'a mut Option<Shown>,
        spec: &ServiceSpec,
        tasks: &mut TaskTable,
        now_secs: f64,
        light: bool,
    ) -> &'a ServiceCounts {
        let name = &spec.name;
        let s = Shown::current(shown, spec, tasks);
        if !light || !s.counted {
            let changes = tasks.take_shown_changes(name);
            s.apply(tasks.service(name), changes);
            s.count(tasks.service(name), now_secs);
        }
        &s.counts
    }

    /// Brings the sums of `spec`'s service in `shown` up to the records of
    /// `tasks`, as [`Shown::refresh`] would, without counting them: a step
    /// of the term's load (`startup::load_slice`), so that the first full
    /// snapshot after it finds them built. The counts shown stay as they
    /// were; `now_secs` moves on the sums' clock (no earlier than any time
    /// they were counted at).
    pub(super) fn absorb(
        shown: &mut Option<Shown>,
        spec: &ServiceSpec,
        tasks: &mut TaskTable,
        now_secs: f64,
    ) {
        let name = &spec.name;
        let s = Shown::current(shown, spec, tasks);
        let changes = tasks.take_shown_changes(name);
        s.apply(tasks.service(name), changes);
        s.tally.advance(now_secs);
    }

    /// `shown` for `spec` and the table's epoch: built from every record
    /// when absent, for another spec or from a table cleared since (the
    /// changes so far are in then).
    fn current<'a>(
        shown: &'a mut Option<Shown>,
        spec: &ServiceSpec,
        tasks: &mut TaskTable,
    ) -> &'a mut Shown {
        let epoch = tasks.epoch();
        if shown
            .as_ref()
            .is_some_and(|s| s.spec != *spec || s.epoch != epoch)
        {
            *shown = None;
        }
        shown.get_or_insert_with(|| {
            tasks.take_shown_changes(&spec.name);
            Shown::build(spec, tasks.service(&spec.name), epoch)
        })
    }

    /// Applies `changes` (what each changed record was as last taken; the
    /// record now is in `tasks`) to the sums.
    fn apply(&mut self, tasks: Option<&ServiceTasks>, changes: ShownChanges) {
        for (task_id, before) in changes {
            if let Some(before) = before {
                self.tally.remove(&before);
            }
            if let Some(now) = tasks.and_then(|t| t.stored_record(&task_id)) {
                self.tally.add(now);
            }
        }
    }

    /// Counts the sums at `now_secs`, or every record of `tasks` when the
    /// sums cannot stand for them.
    fn count(&mut self, tasks: Option<&ServiceTasks>, now_secs: f64) {
        self.counts = self
            .tally
            .counts(now_secs)
            .unwrap_or_else(|| recount(&self.spec, tasks, now_secs));
        self.counted = true;
    }
}

/// The counts of `spec`'s stored records among `tasks`, one by one.
fn recount(spec: &ServiceSpec, tasks: Option<&ServiceTasks>, now_secs: f64) -> ServiceCounts {
    let empty = ServiceTasks::default();
    ServiceCounts::of(spec, tasks.unwrap_or(&empty).stored(), now_secs)
}

impl Machine {
    /// Brings service `name`'s snapshot sums up to its records
    /// ([`Shown::absorb`]): a step of the term's load does it for each
    /// service, and the first full snapshot after the load only counts.
    pub(super) fn absorb_shown(&mut self, name: &str, now: Instant) {
        let now_secs = self.unix(now);
        if let Some(state) = self.services.state_mut(name) {
            Shown::absorb(
                &mut state.shown,
                &state.entry.spec,
                &mut self.tasks,
                now_secs,
            );
        }
    }
}

impl Machine {
    /// The leader's snapshot at `now`. `light`: the task list, the tasks
    /// by agent, the drains' tasks and the counts of the last full one, recounting only
    /// services whose spec changed since (a command's answer between full
    /// snapshots): nothing in it goes over every record.
    pub(super) fn snapshot(&mut self, now: Instant, light: bool) -> Snapshot {
        let now_secs = self.unix(now);
        let sub = self.framework.subscription.as_ref();
        let framework = FrameworkStatus {
            id: self.framework.id.as_ref().map(ToString::to_string),
            name: self.cfg.framework_name.clone(),
            role: self.cfg.role.clone(),
            state: self.framework.state,
            reason: self.framework.reason.clone(),
            failover_timeout_seconds: self.cfg.failover_timeout.as_secs_f64(),
            master: sub.map(|s| s.info.master.clone()),
            master_version: sub.and_then(|s| s.info.master_version.clone()),
            subscribed_at: sub.map(|s| s.since),
            last_event_at: self.lag.last_read.map(|t| self.unix(t)),
            event_lag_seconds: self.lag.lag(now).as_secs_f64(),
            event_inbox_depth: self.lag.depth,
            event_inbox_full: self.lag.full,
            heartbeat_interval_seconds: sub.map(|s| s.info.heartbeat_interval.as_secs_f64()),
            heartbeat_timeout_seconds: sub.map(|s| s.info.heartbeat_timeout.as_secs_f64()),
            strategy: self.cfg.strategy,
        };
        if !light {
            self.shown_starting = self.starting_tasks();
        }
        let names = self.services.names();
        let mut services = Vec::with_capacity(names.len());
        for name in names {
            let Some(state) = self.services.state_mut(&name) else {
                continue;
            };
            let entry = &state.entry;
            let spec = &entry.spec;
            let counts = Shown::refresh(&mut state.shown, spec, &mut self.tasks, now_secs, light);
            let backoff = state.backoff.as_ref();
            let mut status = ServiceStatus::new(
                spec,
                entry.previous.as_deref(),
                entry.rolling_out,
                entry.halted.as_ref(),
                counts,
            );
            if let Some(backoff) = backoff {
                status.consecutive_failures = backoff.failures_at(spec, now);
                status.next_launch_after = backoff
                    .next_launch(spec, now)
                    .map(|left| now_secs + left.as_secs_f64());
                status.backoff = backoff
                    .failing(spec, now)
                    .into_iter()
                    .map(|(instance, failures, left)| InstanceBackoff {
                        instance,
                        consecutive_failures: failures,
                        next_launch_after: (!left.is_zero())
                            .then_some(now_secs + left.as_secs_f64()),
                    })
                    .collect();
            }
            status.waiting = state.waiting.as_ref().map(ToString::to_string);
            status.last_failure = self.why.last_failure(&name);
            status.offers = self.why.summary(&name);
            if let Some(&(n, since)) = self.shown_starting.get(&name) {
                (status.starting_tasks, status.starting_since) = (n, Some(since));
            }
            services.push(status);
        }
        if !light {
            let known = &self.services;
            self.tasks.retain_shown_changes(|name| known.contains(name));
        }
        if !light {
            // Listed again only when a stored record changed since (a
            // reconciliation that confirms every task changes none).
            let generation = self.tasks.stored_generation();
            if self.shown_tasks_at != Some(generation) {
                self.shown_tasks = self.tasks.stored().cloned().collect();
                self.shown_agent_tasks = self.tasks.tasks_by_agent();
                self.shown_tasks_at = Some(generation);
            }
            self.shown_drain_tasks = self.drain_tasks(now);
        }
        if self.shown_offers.0 != self.offers.generation() {
            self.shown_offers = (self.offers.generation(), self.offer_summaries());
        }
        let offers = self.shown_offers.1.clone();
        Snapshot {
            at: now_secs,
            replica: self.term.replica.clone(),
            leadership: Leadership::Leader {
                term: self.term.term,
            },
            framework,
            deployment: None,
            services,
            tasks: self.shown_tasks.clone(),
            offers,
            agents: self.agent_statuses(),
            agents_listed_at: self.agents.listed_at().map(|t| self.unix(t)),
            reconciliation: self.reconciler.status(),
            events: self.out.events.iter().cloned().collect(),
            unrecorded_kills: self
                .kills
                .iter()
                .filter(|(task_id, _)| !self.tasks.contains(task_id))
                .map(|(task_id, k)| UnrecordedKill {
                    task_id: task_id.clone(),
                    agent_id: k.agent_id.clone(),
                    reason: k.reason.clone(),
                    attempts: k.attempts,
                })
                .collect(),
            jobs: self.jobs.statuses(),
            // The services are read before the task records, which are
            // loaded last (`startup`).
            loading: !self.tasks.is_loaded(),
        }
    }
}

impl Machine {
    /// The held offers as the pages show them, oldest first.
    fn offer_summaries(&self) -> std::sync::Arc<[OfferSummary]> {
        self.offers
            .iter()
            .map(|o| OfferSummary {
                id: o.id().to_string(),
                agent_id: o.agent_id().to_string(),
                hostname: o.offer.hostname.clone(),
                cpus: o.remaining.scalar("cpus"),
                mem: o.remaining.scalar("mem"),
                disk: o.remaining.scalar("disk"),
                ports: format_ranges(o.remaining.ranges("ports")),
                received_at: o.received_at,
                expires_at: o.received_at + self.offers.ttl().as_secs_f64(),
            })
            .collect()
    }
}

#[cfg(test)]
impl Machine {
    /// Says how the offers last shown differ from the held offers, if the
    /// registry's generation says they are current (the property tests:
    /// a change that does not count as one would show stale offers).
    pub(super) fn offers_mismatch(&self) -> Option<String> {
        let (generation, shown) = &self.shown_offers;
        let now = self.offer_summaries();
        (*generation == self.offers.generation() && *shown != now)
            .then(|| format!("offers shown {shown:?} differ from those held {now:?}"))
    }

    /// Says how the task list and the tasks by agent last shown differ from
    /// the stored records, if the table's generation says they are current
    /// (the property tests: a change that does not move it would show a
    /// stale list).
    pub(super) fn shown_tasks_mismatch(&mut self) -> Option<String> {
        if self.shown_tasks_at != Some(self.tasks.stored_generation()) {
            return None;
        }
        let stored: Vec<_> = self.tasks.stored().cloned().collect();
        if *self.shown_tasks != *stored {
            return Some(format!(
                "tasks shown {:?} differ from those stored {stored:?}",
                self.shown_tasks
            ));
        }
        let shown = super::by_agent::listing(self.shown_agent_tasks.clone());
        let now = super::by_agent::listing(self.tasks.tasks_by_agent());
        (shown != now).then(|| format!("tasks by agent shown {shown:?} differ from {now:?}"))
    }

    /// Brings every service's shown counts to `now` as a full snapshot
    /// would, and says how the first differs from a recount of every
    /// stored record, if one does (the property tests).
    pub(super) fn shown_mismatch(&mut self, now: Instant) -> Option<String> {
        let now_secs = self.unix(now);
        for name in self.services.names() {
            let state = self.services.state_mut(&name)?;
            let spec = &state.entry.spec;
            let kept = Shown::refresh(&mut state.shown, spec, &mut self.tasks, now_secs, false);
            let recount = recount(spec, self.tasks.service(&name), now_secs);
            if *kept != recount {
                return Some(format!(
                    "{name}'s kept counts {kept:?} differ from a recount {recount:?}"
                ));
            }
        }
        None
    }
}

impl Machine {
    /// Each service's stored tasks launched and not running yet
    /// ([`counts::starting_by_service`]), from the transient tasks' index:
    /// a full snapshot reads only them, not every record.
    ///
    /// [`counts::starting_by_service`]: crate::scheduler::counts::starting_by_service
    fn starting_tasks(&self) -> HashMap<String, (u32, f64)> {
        let stored = self
            .tasks
            .aging()
            .transient_before(f64::INFINITY)
            .filter_map(|id| self.tasks.get(id.as_str()))
            .filter(|e| e.version.is_some())
            .map(|e| &*e.record);
        crate::scheduler::counts::starting_by_service(stored)
    }
}
