//! What happened over time: an in-memory ring of samples per replica, for
//! the overview's charts ([`super::charts`]) and `GET /api/v1/history`.
//!
//! Every [`SAMPLE_INTERVAL`] the sampler ([`spawn_sampler`]) counts, per
//! service, the task records that are running, staging or starting, and
//! failed (`TASK_FAILED`, `TASK_ERROR`), and the offers received and
//! declined since the last sample (the core's `offers_total` counters).
//! Between samples it watches every snapshot for *marks*: leadership
//! changes, new subscriptions, a new leading master, reconciliation runs,
//! partitions (an agent unreachable and back), drains (the master's
//! `DRAIN_AGENT` / `DEACTIVATE_AGENT`, the appliance's SLA drain) and
//! maintenance windows (learnt, begun). Samples older than [`KEEP`] (6 h) are dropped, so the ring holds
//! at most `KEEP / SAMPLE_INTERVAL` samples; at most [`MAX_SERVICES`]
//! services are told apart (the rest count as `other`) and counts are
//! 16-bit (saturating), which bounds a sample's size. Marks are bounded by
//! [`MAX_MARKS`]. `benches/history.rs` measures the ring at 10,000 tasks
//! and 6 h.
//!
//! Every replica samples its own snapshots (a follower's come from
//! ZooKeeper), so a new leader already has the past; a follower shows the
//! leader's history nonetheless (read from the leader's
//! `/api/v1/history`), so the charts are the same whichever replica is
//! opened.
//!
//! `GET /api/v1/history?window=15m|1h|6h&points=N` answers [`HistoryView`]:
//! the window's samples reduced to at most `points` (default
//! [`DEFAULT_POINTS`], at most [`MAX_POINTS`]; each point is the last
//! sample of its slice), offers per minute, and the marks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::error::AppError;
use super::query::StrictQuery;
use crate::coordination::Leadership;
use crate::scheduler::Snapshot;
use crate::scheduler::drains::{DrainState, DrainStatus};
use crate::scheduler::ids::AgentId;
use crate::scheduler::jobs::{RunState, Trigger};
use crate::scheduler::metrics::OfferLabels;
use crate::scheduler::snapshot::{AgentState, AgentStatus, MaintenanceWindow};

/// Time between two samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);
/// How far back the ring reaches.
pub const KEEP: Duration = Duration::from_secs(6 * 3600);
/// Services told apart; the rest are summed as [`OTHER`].
pub const MAX_SERVICES: usize = 64;
/// The name the services past [`MAX_SERVICES`] are summed under.
pub const OTHER: &str = "(other)";
/// Marks kept.
pub const MAX_MARKS: usize = 2000;
/// Points per series in a [`HistoryView`] unless asked otherwise.
pub const DEFAULT_POINTS: usize = 360;
/// Most points per series in a [`HistoryView`].
pub const MAX_POINTS: usize = 4320;

/// One sample: counts per service (index into the service names) and the
/// offers since the previous sample.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    at: f64,
    /// `(service, [running, starting, failed])`, services with any.
    counts: Box<[(u16, [u16; 3])]>,
    offers_received: u32,
    offers_declined: u32,
}

/// A thing that happened at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Mark {
    /// When, seconds since the UNIX epoch.
    pub at: f64,
    /// `leadership`, `subscribed`, `master`, `reconcile`, `partition`
    /// (an agent unreachable, back or gone), `drain` (the master's
    /// DRAIN_AGENT or DEACTIVATE_AGENT, the appliance's SLA drain) or
    /// `maintenance` (a window learnt, a window begun).
    pub kind: String,
    /// What, in words.
    pub text: String,
}

#[derive(Debug, Default)]
struct Ring {
    samples: VecDeque<Sample>,
    /// Service names by index (at most [`MAX_SERVICES`] + [`OTHER`]).
    services: Vec<String>,
    marks: VecDeque<Mark>,
}

/// The ring of one replica. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct History {
    ring: Mutex<Ring>,
}

/// Task states counted as staging or starting.
const STARTING: [&str; 2] = ["TASK_STAGING", "TASK_STARTING"];
/// Task states counted as failed.
const FAILED: [&str; 2] = ["TASK_FAILED", "TASK_ERROR"];

impl Ring {
    fn service_index(&mut self, name: &str) -> u16 {
        if let Some(i) = self.services.iter().position(|s| s == name) {
            return i as u16;
        }
        if self.services.len() < MAX_SERVICES {
            self.services.push(name.to_string());
            return (self.services.len() - 1) as u16;
        }
        match self.services.iter().position(|s| s == OTHER) {
            Some(i) => i as u16,
            None => {
                self.services.push(OTHER.to_string());
                (self.services.len() - 1) as u16
            }
        }
    }

    fn prune(&mut self, now: f64) {
        let oldest = now - KEEP.as_secs_f64();
        while self.samples.front().is_some_and(|s| s.at < oldest) {
            self.samples.pop_front();
        }
        while self.marks.front().is_some_and(|m| m.at < oldest) || self.marks.len() > MAX_MARKS {
            self.marks.pop_front();
        }
    }
}

impl History {
    /// An empty ring.
    pub fn new() -> History {
        History::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a sample of `s` taken at `at`, with the offers received and
    /// declined since the previous one.
    pub fn sample(&self, s: &Snapshot, at: f64, offers_received: u32, offers_declined: u32) {
        let mut per: Vec<(&str, [u32; 3])> = Vec::new();
        for t in s.tasks.iter() {
            let state = t.state.as_str_name();
            let slot = if state == "TASK_RUNNING" {
                0
            } else if STARTING.contains(&state) {
                1
            } else if FAILED.contains(&state) {
                2
            } else {
                continue;
            };
            match per.last_mut() {
                Some((name, counts)) if *name == t.service => counts[slot] += 1,
                _ => match per.iter_mut().find(|(n, _)| *n == t.service) {
                    Some((_, counts)) => counts[slot] += 1,
                    None => {
                        let mut counts = [0; 3];
                        counts[slot] = 1;
                        per.push((&t.service, counts));
                    }
                },
            }
        }
        let mut ring = self.lock();
        let mut counts: Vec<(u16, [u16; 3])> = Vec::with_capacity(per.len());
        for (name, c) in per {
            let index = ring.service_index(name);
            let c = c.map(|n| u16::try_from(n).unwrap_or(u16::MAX));
            match counts.iter_mut().find(|(i, _)| *i == index) {
                Some((_, sum)) => {
                    for k in 0..3 {
                        sum[k] = sum[k].saturating_add(c[k]);
                    }
                }
                None => counts.push((index, c)),
            }
        }
        ring.samples.push_back(Sample {
            at,
            counts: counts.into_boxed_slice(),
            offers_received,
            offers_declined,
        });
        ring.prune(at);
    }

    /// Records a mark.
    pub fn mark(&self, at: f64, kind: &str, text: impl Into<String>) {
        let mut ring = self.lock();
        ring.marks.push_back(Mark {
            at,
            kind: kind.to_string(),
            text: text.into(),
        });
        ring.prune(at);
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.lock().samples.len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the ring holds on the heap (samples, names, marks), by
    /// capacity.
    pub fn heap_bytes(&self) -> usize {
        let ring = self.lock();
        let samples = ring.samples.capacity() * std::mem::size_of::<Sample>()
            + ring
                .samples
                .iter()
                .map(|s| std::mem::size_of_val(&*s.counts))
                .sum::<usize>();
        let names = ring.services.capacity() * std::mem::size_of::<String>()
            + ring.services.iter().map(String::capacity).sum::<usize>();
        let marks = ring.marks.capacity() * std::mem::size_of::<Mark>()
            + ring
                .marks
                .iter()
                .map(|m| m.kind.capacity() + m.text.capacity())
                .sum::<usize>();
        samples + names + marks
    }

    /// The last `window` before `now`, reduced to at most `points` points
    /// per series.
    pub fn view(&self, window: Window, now: f64, points: usize, replica: &str) -> HistoryView {
        let ring = self.lock();
        // A ring younger than the window is drawn from its first entry, so
        // a replica that just started shows its minutes across the chart.
        let earliest = ring
            .samples
            .front()
            .map(|s| s.at)
            .into_iter()
            // Marks may be dated back (an agent's move, at its `since`).
            .chain(ring.marks.iter().map(|m| m.at))
            .fold(now, f64::min);
        let from = (now - window.seconds()).max(earliest - SAMPLE_INTERVAL.as_secs_f64());
        let inside: Vec<&Sample> = ring.samples.iter().filter(|s| s.at >= from).collect();
        let points = points.clamp(1, MAX_POINTS);
        let slice = (now - from).max(1.0) / points as f64;
        let mut reduced: Vec<&Sample> = Vec::new();
        for s in &inside {
            let bucket = ((s.at - from) / slice) as i64;
            match reduced.last_mut() {
                Some(last) if ((last.at - from) / slice) as i64 == bucket => *last = s,
                _ => reduced.push(s),
            }
        }
        let n = ring.services.len();
        let series = |slot: usize| -> Vec<Vec<u32>> {
            (0..n)
                .map(|i| {
                    reduced
                        .iter()
                        .map(|s| {
                            s.counts
                                .iter()
                                .find(|(k, _)| *k as usize == i)
                                .map_or(0, |(_, c)| u32::from(c[slot]))
                        })
                        .collect()
                })
                .collect()
        };
        let minutes = ((now - from) / 60.0).ceil() as usize;
        let start = (from / 60.0).floor() * 60.0;
        let mut offers: Vec<OfferMinute> = (0..=minutes)
            .map(|m| OfferMinute {
                at: start + 60.0 * m as f64,
                received: 0,
                declined: 0,
            })
            .collect();
        for s in &inside {
            let m = ((s.at - start) / 60.0) as usize;
            if let Some(o) = offers.get_mut(m) {
                o.received += s.offers_received;
                o.declined += s.offers_declined;
            }
        }
        HistoryView {
            replica: replica.to_string(),
            window: window.name().to_string(),
            from,
            to: now,
            interval_seconds: SAMPLE_INTERVAL.as_secs_f64(),
            times: reduced.iter().map(|s| s.at).collect(),
            services: ring.services.clone(),
            running: series(0),
            starting: series(1),
            failed: series(2),
            offers,
            marks: {
                // A mark may be dated back (an agent's move, at its
                // `since`): shown in time order.
                let mut marks: Vec<Mark> = ring
                    .marks
                    .iter()
                    .filter(|m| m.at >= from)
                    .cloned()
                    .collect();
                marks.sort_by(|a, b| a.at.total_cmp(&b.at));
                marks
            },
        }
    }
}

/// A chart window: 15 minutes, 1 hour or 6 hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    /// 15 minutes.
    Quarter,
    /// 1 hour (the default).
    #[default]
    Hour,
    /// 6 hours.
    Six,
}

impl Window {
    /// Every window, shortest first.
    pub const ALL: [Window; 3] = [Window::Quarter, Window::Hour, Window::Six];

    /// `15m`, `1h` or `6h`.
    pub fn name(self) -> &'static str {
        match self {
            Window::Quarter => "15m",
            Window::Hour => "1h",
            Window::Six => "6h",
        }
    }

    /// Its length in seconds.
    pub fn seconds(self) -> f64 {
        match self {
            Window::Quarter => 900.0,
            Window::Hour => 3600.0,
            Window::Six => 21600.0,
        }
    }

    /// Parses `15m`, `1h` or `6h` (left out or empty: the default, as a
    /// form's empty choice); 400 with a field error on `window` otherwise.
    pub fn parse(text: Option<&str>) -> Result<Window, AppError> {
        match text.map(str::trim).unwrap_or("") {
            "" => Ok(Window::default()),
            name => Window::ALL
                .into_iter()
                .find(|w| w.name() == name)
                .ok_or_else(|| {
                    AppError::invalid(vec![crate::scheduler::FieldError {
                        field: "window".into(),
                        message: format!("{name:?} is not a window: 15m, 1h or 6h"),
                    }])
                }),
        }
    }
}

/// Offers in one minute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OfferMinute {
    /// The minute's start, seconds since the UNIX epoch.
    pub at: f64,
    /// Offers received.
    pub received: u32,
    /// Offers declined.
    pub declined: u32,
}

/// `/api/v1/history`: a window of the ring (see the module doc). Series
/// are indexed like `services`, each value like `times`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HistoryView {
    /// The replica whose ring this is.
    pub replica: String,
    /// `15m`, `1h` or `6h`.
    pub window: String,
    /// Start of the window, seconds since the UNIX epoch (later than
    /// `to` minus the window when the ring holds less than that).
    pub from: f64,
    /// End of the window (the time of the request).
    pub to: f64,
    /// Seconds between samples.
    pub interval_seconds: f64,
    /// The points' times.
    pub times: Vec<f64>,
    /// Service names.
    pub services: Vec<String>,
    /// Running tasks per service, per point.
    pub running: Vec<Vec<u32>>,
    /// Staging or starting tasks per service, per point.
    pub starting: Vec<Vec<u32>>,
    /// Failed task records per service, per point.
    pub failed: Vec<Vec<u32>>,
    /// Offers received and declined per minute.
    pub offers: Vec<OfferMinute>,
    /// Leadership changes, subscriptions, master changes, reconciliations,
    /// partitions, drains and maintenance windows, in time order.
    pub marks: Vec<Mark>,
}

/// What the sampler compares between snapshots to find marks.
#[derive(Default)]
struct Seen {
    role: Option<(&'static str, Option<u64>, Option<String>)>,
    subscribed_at: Option<f64>,
    master: Option<String>,
    reconcile: u64,
    /// Per agent: the state and `since` last marked, the maintenance
    /// window last marked as learnt, and whether its start was marked.
    agents: HashMap<AgentId, SeenAgent>,
    /// Per job run (`<job>.<run-id>`): the state last marked.
    runs: HashMap<String, RunState>,
}

/// What [`Seen`] last marked of one agent.
struct SeenAgent {
    state: AgentState,
    since: f64,
    window: Option<MaintenanceWindow>,
    window_began: bool,
    /// The appliance's drain last marked: its start and state.
    drain: Option<(f64, DrainState)>,
}

/// The kind of mark of an agent's move into `state` from `before`
/// (`None`: first seen), or none for a move that is neither a partition
/// nor a drain.
fn agent_mark(before: Option<AgentState>, state: AgentState) -> Option<(&'static str, String)> {
    use AgentState::*;
    let (kind, what) = match (before, state) {
        (_, Unreachable) => ("partition", "unreachable".to_string()),
        (Some(Unreachable), Active) => ("partition", "reachable again".to_string()),
        (Some(Unreachable), Gone) | (None, Gone) => ("partition", "gone".to_string()),
        (_, Gone) => ("drain", "gone".to_string()),
        (_, Draining) => ("drain", "draining (the master's DRAIN_AGENT)".to_string()),
        (_, Drained) => ("drain", "drained".to_string()),
        (_, Deactivated) => ("drain", "deactivated (DEACTIVATE_AGENT)".to_string()),
        (Some(Draining | Drained | Deactivated), Active) => {
            ("drain", "active again (REACTIVATE_AGENT)".to_string())
        }
        (_, Active) => return None,
        // A replica that does not lead does not know (`AgentsView`).
        (_, Unknown) => return None,
    };
    Some((kind, what))
}

impl Seen {
    /// Marks for what changed from the previous snapshot to `s`.
    fn update(&mut self, s: &Snapshot, history: &History) {
        let leader = match &s.leadership {
            Leadership::Follower { leader } => leader.as_ref().map(|l| l.advertised_url.clone()),
            _ => None,
        };
        let role = (s.leadership.role(), s.leadership.term(), leader);
        if self.role.as_ref() != Some(&role) {
            let text = match &role {
                ("leader", Some(term), _) => format!("this replica leads (term {term})"),
                ("follower", _, Some(url)) => format!("follows the leader {url}"),
                (other, _, _) => format!("this replica is {other}"),
            };
            if self.role.is_some() || role.0 == "leader" {
                history.mark(s.at, "leadership", text);
            }
            self.role = Some(role);
        }
        // The core recomputes `subscribed_at` from a monotonic clock: it
        // wobbles by microseconds between snapshots of one subscription.
        if let Some(at) = s.framework.subscribed_at
            && self
                .subscribed_at
                .is_none_or(|seen| (seen - at).abs() > 1.0)
        {
            let id = s.framework.id.as_deref().unwrap_or("(new framework)");
            history.mark(at, "subscribed", format!("subscribed as {id}"));
            self.subscribed_at = Some(at);
        }
        if let Some(master) = &s.framework.master
            && self.master.as_ref() != Some(master)
        {
            if self.master.is_some() {
                history.mark(s.at, "master", format!("leading master now {master}"));
            }
            self.master = Some(master.clone());
        }
        let runs = s
            .reconciliation
            .running
            .iter()
            .chain(&s.reconciliation.history);
        let mut newest = self.reconcile;
        for run in runs.filter(|r| r.id > self.reconcile) {
            let kind = match run.kind {
                crate::scheduler::ReconcileKind::Explicit => "explicit",
                crate::scheduler::ReconcileKind::Implicit => "implicit",
            };
            history.mark(
                run.started_at,
                "reconcile",
                format!("{kind} reconciliation ({})", run.trigger),
            );
            newest = newest.max(run.id);
        }
        self.reconcile = newest;
        self.update_agents(s, history);
        self.update_runs(s, history);
    }

    /// Job run marks (`docs/jobs.md`): a run's start at its creation and
    /// its end at `finished_at`, each once; a skipped or missed run is one
    /// mark. Runs no longer kept are forgotten; an empty job list (a
    /// replica that has not read the jobs yet) forgets nothing.
    fn update_runs(&mut self, s: &Snapshot, history: &History) {
        if s.jobs.is_empty() {
            return;
        }
        let mut listed = std::collections::HashSet::new();
        for run in s.jobs.iter().flat_map(|j| j.runs.iter()) {
            let key = run.key();
            let before = self.runs.get(&key).copied();
            let trigger = match &run.trigger {
                Trigger::Schedule { .. } => "scheduled".to_string(),
                Trigger::Manual { by, .. } => format!("manual, by {by}"),
            };
            let never_ran = matches!(run.state, RunState::Skipped | RunState::Missed);
            if before.is_none() && !never_ran {
                history.mark(
                    run.created_at,
                    "job",
                    format!("job {} run {} started ({trigger})", run.job, run.run_id),
                );
            }
            if run.state.is_finished() && before.is_none_or(|b| !b.is_finished()) {
                // Reasons often begin with the state ("skipped: concurrency").
                let state = run.state.as_str();
                let outcome = match run.reason.as_deref() {
                    Some(r) if r.starts_with(state) => r.to_string(),
                    Some(r) => format!("{state}: {r}"),
                    None => state.to_string(),
                };
                history.mark(
                    run.finished_at.unwrap_or(run.created_at),
                    "job",
                    format!("job {} run {} {outcome}", run.job, run.run_id),
                );
            }
            self.runs.insert(key.clone(), run.state);
            listed.insert(key);
        }
        self.runs.retain(|key, _| listed.contains(key));
    }

    /// Partition, drain and maintenance marks from the agent table
    /// (`docs/partitions.md`): a move is marked at the agent's `since`, so
    /// a new leader that first sees an agent unreachable or draining marks
    /// when that began; a follower's empty table forgets nothing, so
    /// leading again marks no move twice.
    fn update_agents(&mut self, s: &Snapshot, history: &History) {
        if s.agents.is_empty() {
            return;
        }
        for a in &s.agents {
            let name = if a.hostname.is_empty() {
                a.agent_id.to_string()
            } else {
                format!("{} ({})", a.hostname, a.agent_id)
            };
            let seen = self.agents.get_mut(&a.agent_id);
            let before = seen.as_ref().map(|x| (x.state, x.since));
            if before.map(|b| b.0) != Some(a.state) {
                let at = a.since.min(s.at);
                if let Some((kind, what)) = agent_mark(before.map(|b| b.0), a.state) {
                    let text = match before {
                        Some((AgentState::Unreachable, lost)) if a.state == AgentState::Active => {
                            format!("agent {name} {what} after {:.0} s", (at - lost).max(0.0))
                        }
                        _ => format!("agent {name} {what}"),
                    };
                    history.mark(at, kind, text);
                }
            }
            let entry = self.agents.entry(a.agent_id.clone()).or_insert(SeenAgent {
                state: a.state,
                since: a.since,
                window: None,
                window_began: false,
                drain: None,
            });
            entry.state = a.state;
            entry.since = a.since;
            if let Some(w) = a.maintenance {
                if entry.window != Some(w) {
                    let length = w
                        .duration_seconds
                        .map_or("open-ended".to_string(), |d| format!("for {d:.0} s"));
                    history.mark(
                        s.at,
                        "maintenance",
                        format!(
                            "maintenance window of {name} learnt: from {} {length}",
                            crate::util::format_time(w.start)
                        ),
                    );
                    entry.window = Some(w);
                    entry.window_began = false;
                }
                if !entry.window_began && w.start <= s.at {
                    history.mark(
                        w.start,
                        "maintenance",
                        format!("maintenance window of {name} began"),
                    );
                    entry.window_began = true;
                }
            }
        }
        for a in &s.agents {
            if let (Some(d), Some(entry)) = (&a.drain, self.agents.get_mut(&a.agent_id)) {
                mark_drain(history, a, d, &mut entry.drain);
            }
        }
        let listed: std::collections::HashSet<&AgentId> =
            s.agents.iter().map(|a| &a.agent_id).collect();
        self.agents.retain(|id, _| listed.contains(id));
    }
}

/// Marks the appliance's drain `d` of agent `a` (`docs/draining.md`) when
/// it started, ended or was cancelled since `seen`, the drain last marked;
/// each at its own time (`started_at`, `finished_at`).
fn mark_drain(
    history: &History,
    a: &AgentStatus,
    d: &DrainStatus,
    seen: &mut Option<(f64, DrainState)>,
) {
    let name = if a.hostname.is_empty() {
        a.agent_id.to_string()
    } else {
        format!("{} ({})", a.hostname, a.agent_id)
    };
    let same_drain = seen.is_some_and(|(started, _)| started == d.started_at);
    if !same_drain {
        history.mark(
            d.started_at,
            "drain",
            format!(
                "SLA drain of agent {name} started by {} (min_healthy {}, then {})",
                d.by,
                d.min_healthy,
                d.then.as_str()
            ),
        );
    }
    let before = seen.filter(|_| same_drain).map(|(_, state)| state);
    if before != Some(d.state) && d.state != DrainState::Running {
        let at = d.finished_at.unwrap_or(d.started_at);
        let text = match d.state {
            DrainState::Done => {
                format!("SLA drain of agent {name} done: {} task(s) moved", d.moved)
            }
            _ => format!("SLA drain of agent {name} cancelled"),
        };
        history.mark(at, "drain", text);
    }
    *seen = Some((d.started_at, d.state));
}

/// The sum of the `event` series of the offers counter.
fn offers_total(offers: &Family<OfferLabels, Counter>, event: &str) -> u64 {
    offers
        .get_or_create(&OfferLabels {
            event: event.to_string(),
        })
        .get()
}

/// Starts the sampler of `history` over the snapshots of `snapshots`
/// (see the module doc); `offers` is the core's offer counter. Ends with
/// `shutdown`.
pub fn spawn_sampler(
    history: Arc<History>,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    offers: Option<Family<OfferLabels, Counter>>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = Seen::default();
        let mut tick = tokio::time::interval(SAMPLE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let totals = |offers: &Option<Family<OfferLabels, Counter>>| {
            offers.as_ref().map_or((0, 0), |o| {
                (offers_total(o, "received"), offers_total(o, "declined"))
            })
        };
        let mut last = totals(&offers);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = snapshots.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let s = snapshots.borrow_and_update().clone();
                    seen.update(&s, &history);
                }
                _ = tick.tick() => {
                    let s = snapshots.borrow().clone();
                    seen.update(&s, &history);
                    let now = totals(&offers);
                    let received = u32::try_from(now.0.saturating_sub(last.0)).unwrap_or(u32::MAX);
                    let declined = u32::try_from(now.1.saturating_sub(last.1)).unwrap_or(u32::MAX);
                    last = now;
                    history.sample(&s, crate::util::unix_now_secs(), received, declined);
                }
            }
        }
    })
}

/// `window` and `points` of `/api/v1/history` and the overview.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct HistoryQuery {
    /// `15m`, `1h` (default, also when empty) or `6h`.
    pub window: Option<String>,
    /// Points per series, 1 to [`MAX_POINTS`].
    pub points: Option<usize>,
}

/// The history to show on this replica: its own when it leads (or no
/// leader is known, or the leader cannot be read — then with a note), the
/// leader's otherwise.
pub async fn shown(state: &AppState, window: Window) -> (HistoryView, Option<String>) {
    let s = state.handle.snapshot();
    let own = || {
        state.history.view(
            window,
            crate::util::unix_now_secs(),
            DEFAULT_POINTS,
            &s.replica.advertised_url,
        )
    };
    let leader = match super::leader::other_leader(state, "/api/v1/history") {
        Ok(Some(leader)) => leader,
        _ => return (own(), None),
    };
    if let Some(view) = state.leader_history(&leader, window) {
        return (view, None);
    }
    let path = format!(
        "/api/v1/history?window={}&points={DEFAULT_POINTS}",
        window.name()
    );
    match super::leader::get_json(state, &leader, &path).await {
        Ok((status, body)) if status.is_success() => match serde_json::from_value(body) {
            Ok(view) => {
                state.remember_leader_history(&leader, window, &view);
                (view, None)
            }
            Err(e) => (
                own(),
                Some(format!("the leader's history does not parse: {e}")),
            ),
        },
        Ok((status, _)) => (
            own(),
            Some(format!("the leader answered HTTP {status} for its history")),
        ),
        Err(e) => (own(), Some(e.detail.clone())),
    }
}

/// `GET /api/v1/history`: this replica's ring.
#[utoipa::path(
    get,
    path = "/api/v1/history",
    tag = "state",
    params(HistoryQuery),
    responses((status = 200, description = "Samples and marks", body = HistoryView), crate::web::error::responses::BadRequest)
)]
pub async fn api(
    State(state): State<AppState>,
    StrictQuery(query): StrictQuery<HistoryQuery>,
) -> Result<Json<HistoryView>, AppError> {
    let window = Window::parse(query.window.as_deref())?;
    let points = query.points.unwrap_or(DEFAULT_POINTS);
    if points == 0 || points > MAX_POINTS {
        return Err(AppError::bad_request(format!(
            "points must be from 1 to {MAX_POINTS}"
        )));
    }
    let s = state.handle.snapshot();
    Ok(Json(state.history.view(
        window,
        crate::util::unix_now_secs(),
        points,
        &s.replica.advertised_url,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::ReplicaInfo;
    use crate::scheduler::records::TaskRecord;
    use crate::scheduler::snapshot::{AgentState, AgentStatus, MaintenanceWindow};

    fn snapshot(tasks: &[(&str, &str)]) -> Snapshot {
        let mut s = Snapshot::standby(
            ReplicaInfo::new("http://a:1", "d", "0"),
            "fw",
            "*",
            Default::default(),
        );
        s.tasks = tasks
            .iter()
            .enumerate()
            .map(|(i, (service, state))| {
                let mut t: TaskRecord = serde_json::from_value(serde_json::json!({
                    "task_id": format!("{service}.{i}"), "service": service, "instance": i,
                    "fingerprint": "f", "agent_id": "a", "hostname": "h",
                    "executor": "command", "executor_id": "e", "ports": [],
                    "state": state, "launched_at": 0.0, "updated_at": 0.0,
                }))
                .unwrap();
                t.state = crate::mesos::v1::TaskState::from_str_name(state).unwrap();
                Arc::new(t)
            })
            .collect();
        s
    }

    #[test]
    fn samples_count_per_service_and_reduce_to_points() {
        let h = History::new();
        let s = snapshot(&[
            ("web", "TASK_RUNNING"),
            ("web", "TASK_RUNNING"),
            ("web", "TASK_STAGING"),
            ("db", "TASK_FAILED"),
            ("db", "TASK_FINISHED"),
        ]);
        let now = 1_700_000_000.0;
        for i in 0..100 {
            h.sample(&s, now - 500.0 + 5.0 * i as f64, 2, 1);
        }
        h.mark(now - 100.0, "leadership", "x");
        let v = h.view(Window::Quarter, now, 10, "http://a:1");
        assert_eq!(v.services, ["web", "db"]);
        assert!(v.times.len() <= 11, "{}", v.times.len());
        assert_eq!(v.running[0].last(), Some(&2));
        assert_eq!(v.starting[0].last(), Some(&1));
        assert_eq!(v.failed[1].last(), Some(&1));
        assert_eq!(v.offers.iter().map(|o| o.received).sum::<u32>(), 200);
        assert_eq!(v.marks.len(), 1);
        // Older than the ring: pruned.
        h.sample(&s, now + KEEP.as_secs_f64(), 0, 0);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn services_past_the_cap_count_as_other() {
        let h = History::new();
        let names: Vec<String> = (0..MAX_SERVICES + 5).map(|i| format!("s{i}")).collect();
        let tasks: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "TASK_RUNNING")).collect();
        h.sample(&snapshot(&tasks), 1.0, 0, 0);
        let v = h.view(Window::Quarter, 2.0, 10, "");
        assert_eq!(v.services.len(), MAX_SERVICES + 1);
        assert_eq!(v.services.last().map(String::as_str), Some(OTHER));
        assert_eq!(v.running[MAX_SERVICES], [5]);
    }

    fn agent(id: &str, state: AgentState, since: f64) -> AgentStatus {
        AgentStatus {
            agent_id: id.into(),
            hostname: format!("{id}.example"),
            state,
            since,
            registered_time: None,
            reregistered_time: None,
            maintenance: None,
            tasks: Default::default(),
            drain: None,
        }
    }

    fn marks_of(h: &History, kind: &str) -> Vec<Mark> {
        h.view(Window::Six, 10_000.0, 10, "")
            .marks
            .into_iter()
            .filter(|m| m.kind == kind)
            .collect()
    }

    #[test]
    fn partitions_are_marked_when_an_agent_is_lost_and_when_it_returns() {
        let h = History::new();
        let mut seen = Seen::default();
        let mut s = snapshot(&[]);
        s.at = 1000.0;
        s.agents = vec![agent("S0", AgentState::Active, 900.0)];
        seen.update(&s, &h);
        assert!(marks_of(&h, "partition").is_empty());
        s.at = 1010.0;
        s.agents = vec![agent("S0", AgentState::Unreachable, 1005.0)];
        seen.update(&s, &h);
        // The same state again marks nothing new.
        s.at = 1015.0;
        seen.update(&s, &h);
        s.at = 1060.0;
        s.agents = vec![agent("S0", AgentState::Active, 1050.0)];
        seen.update(&s, &h);
        let marks = marks_of(&h, "partition");
        assert_eq!(marks.len(), 2, "{marks:?}");
        assert_eq!(marks[0].at, 1005.0);
        assert!(marks[0].text.contains("S0.example") && marks[0].text.contains("unreachable"));
        assert_eq!(marks[1].at, 1050.0);
        assert!(
            marks[1].text.contains("reachable again after 45 s"),
            "{marks:?}"
        );
    }

    #[test]
    fn job_runs_are_marked_when_they_start_and_end_once_each() {
        use crate::scheduler::jobs::{JobRecord, JobStatus, RunRecord};
        let h = History::new();
        let mut seen = Seen::default();
        let spec: crate::scheduler::spec::job::JobSpec = serde_json::from_value(
            serde_json::json!({"name": "report", "command": "true", "cpus": 0.1, "mem": 32}),
        )
        .unwrap();
        let run = |id: &str, state: RunState, finished: Option<f64>| RunRecord {
            job: "report".into(),
            run_id: id.into(),
            trigger: Trigger::Schedule { at: 100.0 },
            state,
            reason: (state == RunState::Skipped).then(|| "skipped: concurrency".into()),
            created_at: 100.0,
            finished_at: finished,
            args: vec![],
            env: Default::default(),
            attempts: vec![],
            retry_at: None,
            kill: None,
        };
        let mut s = snapshot(&[]);
        let jobs = |runs: Vec<RunRecord>| {
            vec![JobStatus {
                record: JobRecord {
                    spec: spec.clone(),
                    created_at: 0.0,
                    updated_at: 0.0,
                },
                next_run_at: None,
                runs: runs.into_iter().map(std::sync::Arc::new).collect(),
            }]
        };
        s.jobs = jobs(vec![run("r1", RunState::Running, None)]);
        seen.update(&s, &h);
        seen.update(&s, &h);
        s.jobs = jobs(vec![
            run("r1", RunState::Succeeded, Some(130.0)),
            run("r2", RunState::Skipped, Some(110.0)),
        ]);
        seen.update(&s, &h);
        seen.update(&s, &h);
        // A replica that has not read the jobs yet forgets nothing.
        s.jobs.clear();
        seen.update(&s, &h);
        s.jobs = jobs(vec![run("r1", RunState::Succeeded, Some(130.0))]);
        seen.update(&s, &h);
        let texts: Vec<(f64, String)> = marks_of(&h, "job")
            .into_iter()
            .map(|m| (m.at, m.text))
            .collect();
        assert_eq!(
            texts,
            [
                (100.0, "job report run r1 started (scheduled)".to_string()),
                (110.0, "job report run r2 skipped: concurrency".to_string()),
                (130.0, "job report run r1 succeeded".to_string()),
            ],
            "{texts:?}"
        );
    }

    #[test]
    fn drains_and_maintenance_are_marked() {
        let h = History::new();
        let mut seen = Seen::default();
        let mut s = snapshot(&[]);
        s.at = 2000.0;
        // First seen already draining (a new leader): marked at its `since`.
        let mut m = agent("S1", AgentState::Active, 1000.0);
        m.maintenance = Some(MaintenanceWindow {
            start: 2100.0,
            duration_seconds: Some(600.0),
        });
        s.agents = vec![agent("S0", AgentState::Draining, 1990.0), m.clone()];
        seen.update(&s, &h);
        s.at = 2050.0;
        s.agents[0] = agent("S0", AgentState::Drained, 2040.0);
        seen.update(&s, &h);
        let drains = marks_of(&h, "drain");
        assert_eq!(drains.len(), 2, "{drains:?}");
        assert_eq!(drains[0].at, 1990.0);
        assert!(drains[0].text.contains("draining"), "{drains:?}");
        assert!(drains[1].text.contains("drained"), "{drains:?}");
        // The window is marked when learnt and when it begins, once each.
        let maintenance = marks_of(&h, "maintenance");
        assert_eq!(maintenance.len(), 1, "{maintenance:?}");
        assert!(
            maintenance[0].text.contains("S1.example"),
            "{maintenance:?}"
        );
        s.at = 2110.0;
        seen.update(&s, &h);
        s.at = 2120.0;
        seen.update(&s, &h);
        let maintenance = marks_of(&h, "maintenance");
        assert_eq!(maintenance.len(), 2, "{maintenance:?}");
        assert_eq!(maintenance[1].at, 2100.0);
        assert!(maintenance[1].text.contains("began"), "{maintenance:?}");
        // A follower's empty table forgets nothing: leading again marks no
        // transition twice.
        s.agents.clear();
        seen.update(&s, &h);
        s.agents = vec![agent("S0", AgentState::Drained, 2040.0), m];
        seen.update(&s, &h);
        assert_eq!(marks_of(&h, "drain").len(), 2);
        assert_eq!(marks_of(&h, "maintenance").len(), 2);
    }

    #[test]
    fn the_appliances_drains_are_marked_when_started_done_and_cancelled() {
        use crate::scheduler::drains::{DrainRecord, MinHealthy, ThenAction};
        let h = History::new();
        let mut seen = Seen::default();
        let mut s = snapshot(&[]);
        let mut record = DrainRecord {
            agent_id: "S0".into(),
            min_healthy: MinHealthy::Count(3),
            reason: Some("kernel".into()),
            by: "admin".into(),
            started_at: 3000.0,
            then: ThenAction::DrainAgent,
            state: DrainState::Running,
            finished_at: None,
            cancelled_by: None,
            then_called: false,
            then_error: None,
            reactivated: false,
            reactivate_error: None,
            reactivate_tries: 0,
            reactivate_retry: false,
            ended: None,
        };
        let with = |record: &DrainRecord| {
            let mut a = agent("S0", AgentState::Active, 100.0);
            a.drain = Some(DrainStatus::new(record, Vec::new()));
            a
        };
        s.at = 3001.0;
        s.agents = vec![with(&record)];
        seen.update(&s, &h);
        seen.update(&s, &h);
        record.state = DrainState::Done;
        record.finished_at = Some(3050.0);
        s.agents = vec![with(&record)];
        seen.update(&s, &h);
        seen.update(&s, &h);
        let drains = marks_of(&h, "drain");
        assert_eq!(drains.len(), 2, "{drains:?}");
        assert_eq!(drains[0].at, 3000.0);
        assert!(drains[0].text.contains("SLA drain of agent S0.example (S0) started by admin (min_healthy 3, then drain_agent)"), "{drains:?}");
        assert_eq!(drains[1].at, 3050.0);
        assert!(drains[1].text.contains("done"), "{drains:?}");
        record.state = DrainState::Cancelled;
        record.finished_at = Some(3070.0);
        s.agents = vec![with(&record)];
        seen.update(&s, &h);
        // A new drain of the same agent is marked anew.
        record.state = DrainState::Running;
        record.started_at = 3100.0;
        record.finished_at = None;
        s.agents = vec![with(&record)];
        seen.update(&s, &h);
        let drains = marks_of(&h, "drain");
        assert_eq!(drains.len(), 4, "{drains:?}");
        assert!(drains[2].text.contains("cancelled"), "{drains:?}");
        assert_eq!(drains[3].at, 3100.0);
    }

    #[test]
    fn windows_parse() {
        assert_eq!(Window::parse(None).unwrap(), Window::Hour);
        assert_eq!(Window::parse(Some("6h")).unwrap(), Window::Six);
        assert!(Window::parse(Some("2h")).is_err());
        // Left out or empty (a form's empty choice): the default.
        assert_eq!(Window::parse(Some("")).unwrap(), Window::Hour);
        // Anything else names the parameter and the value, as every other
        // query error does.
        let e = Window::parse(Some("1y")).unwrap_err();
        assert_eq!(e.errors[0].field, "window");
        assert!(e.errors[0].message.contains("\"1y\""), "{e:?}");
    }
}
