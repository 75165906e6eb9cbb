//! What a replica that does not lead shows: the *standby* snapshot (leader
//! identity from the election, framework ID, services and tasks read from
//! ZooKeeper), refreshed by the supervisor every few seconds.
//!
//! The framework ID and the services are small and read on every refresh.
//! The task records are not: with tens of thousands of tasks, reading them
//! all every few seconds would keep every follower (and ZooKeeper) busy
//! with O(tasks) work while it waits to take over, and so would rebuilding
//! the view (its copy of the records, sorted, and the counts of every
//! service over them). The records themselves come from a
//! [`RecordMirror`]: a watch on their directory reports each record
//! created, rewritten or deleted, and every refresh reads those again, only
//! those (paced, [`RecordMirror::refresh`]). The view is rebuilt from the
//! mirror only when
//! - the mirror read a change since the view was built (its
//!   [`RecordMirror::generation`]: a rewritten record, e.g. a task's new
//!   state, counts, though it changes neither the records' count nor their
//!   keys), the records' stat changed (one read: their count and the
//!   version of their set of keys,
//!   [`Coordinator::records_stat`](crate::coordination::Coordinator::records_stat)),
//!   a job's run record (read on every refresh, `docs/jobs.md`) says an
//!   attempt's task ended while the view shows it live, or [`STALE_AFTER`]
//!   passed (the last three for a mirror without a watch, which reads every
//!   record only then), and
//! - at least [`PER_RECORD`] × records passed since the last rebuild (at
//!   least the refresh period): 10,000 tasks are rebuilt at most every
//!   10 s, 50,000 every 50 s.
//!
//! Between rebuilds the standby snapshot shows the view last built, with
//! the service counts computed from it once per rebuild.
//!
//! The agents a follower can know without the master are shown too
//! (`docs/draining.md`, "On a replica that does not lead"): those of the
//! live task records (grouped once per rebuild) and those of the drains,
//! read on every refresh like the services (`drains/<agent_id>`, a few
//! small records). Their state at the master is `unknown`: only the leader
//! asks the master (GET_AGENTS).
//!
//! When this replica is elected the mirror goes to its term
//! ([`Standby::take_mirror`]), which reads only what changed since the last
//! refresh instead of every record (`docs/benchmarks.md`, *A new leader's
//! read of the task records*).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::config::CoreConfig;
use super::core::CoreDeps;
use super::counts::ServiceCounts;
use super::drains::{DrainRecord, DrainStatus};
use super::ids::{AgentId, TaskId};
use super::records::ServiceRecord;
use super::records::{TaskRecord, is_live};
use super::snapshot::{AgentState, AgentStatus, FrameworkState, ServiceStatus, Snapshot};
use super::spec::service::ServiceSpec;
use crate::coordination::{RecordKind, RecordMirror, RecordStore, RecordsStat};
use crate::util::unix_now_secs;

/// How often a standby replica refreshes its view from ZooKeeper.
pub const REFRESH: Duration = Duration::from_secs(3);
/// The standby view is rebuilt at least this often while any task record
/// exists, even if no change was seen (a mirror without a watch sees none).
pub const STALE_AFTER: Duration = Duration::from_secs(60);
/// The standby view is rebuilt (and an unwatched mirror reads every record)
/// at most once per this much per record.
pub const PER_RECORD: Duration = Duration::from_millis(1);

/// A state a standby replica keeps showing after its term ended.
pub struct Held {
    /// The framework state shown.
    pub state: FrameworkState,
    /// Why.
    pub reason: String,
}

/// The task records a standby replica last read, and the counts of each
/// service over them.
#[derive(Default)]
pub struct Standby {
    read: Option<Read>,
    /// The task records, kept current between refreshes; created at the
    /// first refresh.
    mirror: Option<RecordMirror<TaskRecord>>,
    /// When the mirror last read changed records: it reads at most one per
    /// [`PER_RECORD`] since.
    mirror_read_at: Option<Instant>,
}

struct Read {
    at: Instant,
    stat: RecordsStat,
    /// The mirror's [`RecordMirror::generation`] the view was built at.
    generation: u64,
    tasks: Arc<[Arc<TaskRecord>]>,
    /// Per service: the spec the counts were computed for, and the counts.
    counts: HashMap<String, (ServiceSpec, ServiceCounts)>,
    /// Per service: its tasks launched and not running, and the oldest
    /// one's last update ([`super::counts::starting_by_service`], one
    /// pass per read).
    starting: HashMap<String, (u32, f64)>,
    /// Per agent of a live task record: a hostname a record gives, and
    /// the live tasks there, sorted (grouped once per rebuild).
    agents: Arc<LiveByAgent>,
}

/// Per agent: a hostname a task record gives, and its live tasks, sorted.
pub type LiveByAgent = BTreeMap<AgentId, (String, Arc<[TaskId]>)>;

impl Standby {
    /// Forgets what was read (the next refresh reads every record), e.g.
    /// after a term of this replica's own.
    pub fn forget(&mut self) {
        self.read = None;
        self.mirror = None;
        self.mirror_read_at = None;
    }

    /// The task records' mirror for a term that begins, when a watch keeps
    /// it current (its [`RecordMirror::sync`] then reads only the changes);
    /// `None` otherwise, and the term reads every record. The standby view
    /// built from it is dropped too: the records go to the term unshared.
    pub fn take_mirror(&mut self) -> Option<RecordMirror<TaskRecord>> {
        self.read = None;
        self.mirror.take().filter(RecordMirror::is_watched)
    }

    /// Whether the view must be rebuilt at `now` (and an unwatched mirror
    /// read in full), given the records' stat now, whether the runs read
    /// now are [`Standby::runs_ahead`] and the mirror's generation now.
    fn due(&self, stat: RecordsStat, runs_ahead: bool, generation: u64, now: Instant) -> bool {
        let Some(read) = &self.read else {
            return true;
        };
        let age = now.saturating_duration_since(read.at);
        let count = u32::try_from(stat.count.max(read.stat.count)).unwrap_or(u32::MAX);
        let pace = REFRESH.max(PER_RECORD.saturating_mul(count));
        let changed = stat != read.stat || generation != read.generation || runs_ahead;
        age >= pace && (changed || age >= STALE_AFTER)
    }

    /// Whether a run in `jobs` has an attempt that ended (`ended_at`) whose
    /// task the records last read still show live: its task record was
    /// rewritten (a terminal update), which the records' stat does not
    /// show. Without this a standby would show a finished job task running
    /// for up to [`STALE_AFTER`] after its run record says it ended.
    fn runs_ahead(&self, jobs: &[crate::scheduler::jobs::JobStatus]) -> bool {
        let Some(read) = &self.read else {
            return false;
        };
        jobs.iter()
            .flat_map(|j| j.runs.iter())
            .flat_map(|r| r.attempts.iter())
            .filter(|a| a.ended_at.is_some())
            .any(|a| {
                read.tasks
                    .binary_search_by(|t| t.task_id.as_str().cmp(a.task_id.as_str()))
                    .is_ok_and(|i| !read.tasks[i].is_terminal())
            })
    }

    /// Publishes what a replica that does not lead can know; `held` is the
    /// state it keeps showing after stepping down.
    pub async fn publish(&mut self, cfg: &CoreConfig, deps: &CoreDeps, held: Option<&Held>) {
        let coordinator = &deps.coordinator;
        let mut snapshot = Snapshot::standby(
            coordinator.replica().clone(),
            &cfg.framework_name,
            &cfg.role,
            cfg.strategy,
        );
        snapshot.leadership = coordinator.leadership().borrow().clone();
        snapshot.framework.state = held.map_or(FrameworkState::Standby, |h| h.state);
        snapshot.framework.reason = held.map(|h| h.reason.clone());
        snapshot.framework.failover_timeout_seconds = cfg.failover_timeout.as_secs_f64();
        if let Ok(Some(id)) = coordinator.framework_id().await {
            snapshot.framework.id = Some(id.value);
        }
        snapshot.deployment = coordinator
            .watch_deployment()
            .borrow()
            .clone()
            .map(|d| d.value);
        let services = RecordStore::<ServiceRecord>::new(coordinator.clone(), RecordKind::Services);
        let services: Vec<ServiceRecord> = match services.list().await {
            Ok(list) => list.records.into_iter().map(|(_, v)| v.value).collect(),
            Err(_) => Vec::new(),
        };
        let jobs = read_jobs(coordinator).await;
        let stat = coordinator.records_stat(RecordKind::Tasks).await;
        let runs_ahead = self.runs_ahead(&jobs);
        // Without a watch the mirror reads every record, only when due.
        let before = self.mirror.as_ref().map_or(0, RecordMirror::generation);
        let full = stat
            .as_ref()
            .is_ok_and(|stat| self.due(*stat, runs_ahead, before, Instant::now()));
        // Watched, the mirror reads what changed at every refresh, which
        // keeps a new leader's read short; the view below is rebuilt from it
        // at the pace of `due` (the counts cost O(tasks)).
        let mirror = self
            .mirror
            .get_or_insert_with(|| RecordMirror::new(coordinator.clone(), RecordKind::Tasks));
        // The pace of the full reads before the mirror, one record per
        // `PER_RECORD` on average, bounds the changed records read while
        // the leader keeps writing; once it writes less, the backlog is
        // read at once (`RecordMirror::refresh`).
        let now = Instant::now();
        let since = self
            .mirror_read_at
            .map_or(REFRESH, |at| now.saturating_duration_since(at));
        let budget = since.as_micros() / PER_RECORD.as_micros().max(1);
        self.mirror_read_at = Some(now);
        let refreshed = mirror
            .refresh(full, usize::try_from(budget).unwrap_or(usize::MAX))
            .await;
        // What the mirror read just now is shown now, not a refresh later.
        let generation = mirror.generation();
        let rebuild = refreshed.is_ok()
            && stat
                .as_ref()
                .is_ok_and(|stat| self.due(*stat, runs_ahead, generation, Instant::now()));
        if let (Ok(stat), true, Some(mirror)) = (stat, rebuild, &self.mirror) {
            // By task ID, as the leader's snapshot (its readers
            // binary-search it); the mirror keeps them by key, the task ID.
            let mut tasks: Vec<Arc<TaskRecord>> = mirror.records().cloned().collect();
            tasks.sort_by(|a, b| a.task_id.as_str().cmp(b.task_id.as_str()));
            let agents = Arc::new(live_by_agent(&tasks));
            let starting = super::counts::starting_by_service(tasks.iter().map(|t| t.as_ref()));
            self.read = Some(Read {
                at: Instant::now(),
                stat,
                generation,
                tasks: tasks.into(),
                counts: HashMap::new(),
                starting,
                agents,
            });
        }
        let now = unix_now_secs();
        snapshot.services = services
            .into_iter()
            .map(|record| self.service_status(record, now))
            .collect();
        // Until the task records are read, what is shown is not a count.
        snapshot.loading = self.read.is_none();
        if let Some(read) = &self.read {
            snapshot.tasks = read.tasks.clone();
        }
        snapshot.jobs = jobs;
        let drains = RecordStore::<DrainRecord>::new(coordinator.clone(), RecordKind::Drains);
        let drains: Vec<DrainRecord> = match drains.list().await {
            Ok(list) => list.records.into_iter().map(|(_, v)| v.value).collect(),
            Err(_) => Vec::new(),
        };
        let by_agent = self.read.as_ref().map(|r| r.agents.clone());
        snapshot.agents = follower_agents(by_agent.as_deref(), drains);
        // Keep the leader's recent events when this replica just lost leadership.
        snapshot.events = deps.snapshots.borrow().events.clone();
        snapshot.at = now;
        deps.snapshots.send_replace(Arc::new(snapshot));
    }

    /// A service as a standby replica shows it: its counts over the records
    /// last read, as the leader counts its own (`ServiceCounts`), computed
    /// once per read and spec.
    fn service_status(&mut self, record: ServiceRecord, now: f64) -> ServiceStatus {
        let counts = self.read.as_mut().map(|read| {
            let fresh = read
                .counts
                .get(&record.spec.name)
                .is_some_and(|(spec, _)| *spec == record.spec);
            if !fresh {
                let records = read.tasks.iter().map(|t| t.as_ref());
                let counts = ServiceCounts::of(&record.spec, records, now);
                read.counts
                    .insert(record.spec.name.clone(), (record.spec.clone(), counts));
            }
            read.counts[&record.spec.name].1.clone()
        });
        let counts = counts.unwrap_or_default();
        let mut status = ServiceStatus::new(
            &record.spec,
            record.previous.as_deref(),
            record.rolling_out,
            record.halted.as_ref(),
            &counts,
        );
        let starting = self
            .read
            .as_ref()
            .and_then(|r| r.starting.get(&record.spec.name));
        if let Some(&(n, since)) = starting {
            (status.starting_tasks, status.starting_since) = (n, Some(since));
        }
        status
    }
}

/// The live task records of `tasks` by agent: a hostname a record gives,
/// and their task IDs, sorted.
fn live_by_agent(tasks: &[Arc<TaskRecord>]) -> LiveByAgent {
    let mut by_agent: BTreeMap<AgentId, (String, Vec<TaskId>)> = BTreeMap::new();
    for t in tasks.iter().filter(|t| is_live(t)) {
        let entry = by_agent
            .entry(t.agent_id.clone())
            .or_insert_with(|| (t.hostname.clone(), Vec::new()));
        if entry.0.is_empty() {
            entry.0 = t.hostname.clone();
        }
        entry.1.push(t.task_id.clone());
    }
    by_agent
        .into_iter()
        .map(|(id, (host, mut tasks))| {
            tasks.sort();
            (id, (host, tasks.into()))
        })
        .collect()
}

/// The agents a replica that does not lead can know: those of the live
/// task records (`by_agent`, [`live_by_agent`]) and of the stored `drains`,
/// by agent ID, each in state [`AgentState::Unknown`] (`since` 0: the
/// master's word is the leader's). A drain shows as stored: an ended one
/// with its stored end; a running one without its progress, which the
/// leader works out (`web::agents::FOLLOWER_UNKNOWN`).
pub fn follower_agents(
    by_agent: Option<&LiveByAgent>,
    drains: Vec<DrainRecord>,
) -> Vec<AgentStatus> {
    let mut out: BTreeMap<AgentId, AgentStatus> = BTreeMap::new();
    let unknown = |agent_id: AgentId, hostname: String, tasks: Arc<[TaskId]>| AgentStatus {
        agent_id,
        hostname,
        state: AgentState::Unknown,
        since: 0.0,
        registered_time: None,
        reregistered_time: None,
        maintenance: None,
        tasks,
        drain: None,
    };
    for (id, (host, tasks)) in by_agent.into_iter().flatten() {
        out.insert(id.clone(), unknown(id.clone(), host.clone(), tasks.clone()));
    }
    for drain in drains {
        let id = drain.agent_id.clone();
        let entry = out
            .entry(id.clone())
            .or_insert_with(|| unknown(id, String::new(), Arc::from(Vec::new())));
        entry.drain = Some(DrainStatus::new(&drain, Vec::new()));
    }
    out.into_values().collect()
}

/// The jobs and their runs as stored (empty when they cannot be read):
/// the same [`crate::scheduler::jobs::statuses`] the leader shows.
async fn read_jobs(
    coordinator: &Arc<dyn crate::coordination::Coordinator>,
) -> Vec<crate::scheduler::jobs::JobStatus> {
    use crate::scheduler::jobs::{JobRecord, RunRecord, statuses};
    let jobs = RecordStore::<JobRecord>::new(coordinator.clone(), RecordKind::Jobs);
    let Ok(jobs) = jobs.list().await else {
        return Vec::new();
    };
    let runs = RecordStore::<RunRecord>::new(coordinator.clone(), RecordKind::Runs);
    let runs = runs.list().await.map(|l| l.records).unwrap_or_default();
    statuses(
        jobs.records.into_iter().map(|(_, v)| v.value),
        runs.into_iter().map(|(_, v)| Arc::new(v.value)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_at(at: Instant, count: usize, keys_version: i64) -> Standby {
        Standby {
            mirror: None,
            mirror_read_at: None,
            read: Some(Read {
                at,
                stat: RecordsStat {
                    count,
                    keys_version,
                },
                generation: 0,
                tasks: Default::default(),
                counts: HashMap::new(),
                starting: HashMap::new(),
                agents: Default::default(),
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn records_are_read_again_only_when_created_or_deleted_or_stale_and_paced() {
        let t0 = Instant::now();
        let stat = |count, keys_version| RecordsStat {
            count,
            keys_version,
        };
        assert!(
            Standby::default().due(stat(50_000, 7), false, 0, t0),
            "nothing read yet"
        );
        // A few records: unchanged keys are not read again until stale.
        let few = read_at(t0, 10, 7);
        assert!(!few.due(stat(10, 7), false, 0, t0 + REFRESH));
        assert!(
            few.due(stat(11, 8), false, 0, t0 + REFRESH),
            "a record was created"
        );
        assert!(
            !few.due(stat(11, 8), false, 0, t0 + REFRESH / 2),
            "within the period"
        );
        assert!(few.due(stat(10, 7), false, 0, t0 + STALE_AFTER), "stale");
        // 20,000 records: at most one read per 20 s, whatever changed.
        let many = read_at(t0, 20_000, 7);
        assert!(!many.due(stat(20_000, 8), false, 0, t0 + Duration::from_secs(19)));
        assert!(many.due(stat(20_000, 8), false, 0, t0 + Duration::from_secs(20)));
        assert!(!many.due(stat(20_000, 7), false, 0, t0 + Duration::from_secs(20)));
        // Past a minute a large table is still paced by its size.
        let huge = read_at(t0, 100_000, 7);
        assert!(!huge.due(stat(100_000, 7), false, 0, t0 + STALE_AFTER));
        assert!(huge.due(stat(100_000, 7), false, 0, t0 + Duration::from_secs(100)));
        let mut forgotten = huge;
        forgotten.forget();
        assert!(forgotten.due(stat(100_000, 7), false, 0, t0));
    }

    /// A record rewritten (a task killed: a new state, the same count and
    /// keys) and read by the mirror rebuilds the view at the next refresh
    /// past the pace, not after [`STALE_AFTER`].
    #[tokio::test(start_paused = true)]
    async fn a_change_the_mirror_read_rebuilds_the_view_at_its_pace() {
        let t0 = Instant::now();
        let stat = |count| RecordsStat {
            count,
            keys_version: 7,
        };
        let few = read_at(t0, 10, 7);
        assert!(!few.due(stat(10), false, 0, t0 + REFRESH), "nothing read");
        assert!(few.due(stat(10), false, 1, t0 + REFRESH), "a rewrite read");
        assert!(
            !few.due(stat(10), false, 1, t0 + REFRESH / 2),
            "within the period"
        );
        // 50,000 records: rebuilt at most every 50 s, whatever was read.
        let many = read_at(t0, 50_000, 7);
        assert!(!many.due(stat(50_000), false, 9, t0 + Duration::from_secs(49)));
        assert!(many.due(stat(50_000), false, 9, t0 + Duration::from_secs(50)));
    }

    fn task(id: &str, state: &str) -> Arc<TaskRecord> {
        use crate::mesos::v1::TaskState;
        Arc::new(TaskRecord::sample(
            id,
            "report",
            TaskState::from_str_name(state).unwrap(),
        ))
    }

    /// A job with one run whose attempt ended (`ended`) or not.
    fn job_with_attempt(task_id: &str, ended: bool) -> Vec<crate::scheduler::jobs::JobStatus> {
        use crate::scheduler::jobs::{JobRecord, JobStatus, RunRecord};
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "job": "report", "run_id": "20261201T200000Z",
            "trigger": {"kind": "schedule", "at": 0.0}, "state": "succeeded",
            "reason": null, "created_at": 0.0, "finished_at": null, "args": [], "env": {},
            "attempts": [{"number": 1, "task_id": task_id, "created_at": 0.0,
                "running_at": 1.0, "ended_at": if ended { Some(2.0) } else { None },
                "task_state": if ended { "TASK_FINISHED" } else { "TASK_RUNNING" },
                "exit_status": null, "message": null}],
            "retry_at": null, "kill": null}))
        .unwrap();
        let record: JobRecord = serde_json::from_value(serde_json::json!({
            "spec": {"name": "report", "command": "true", "cpus": 0.1, "mem": 32},
            "created_at": 0.0, "updated_at": 0.0}))
        .unwrap();
        vec![JobStatus {
            record,
            next_run_at: None,
            runs: vec![Arc::new(run)],
        }]
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_attempt_shown_live_reads_the_task_records_again() {
        let t0 = Instant::now();
        let stat = RecordsStat {
            count: 2,
            keys_version: 7,
        };
        let mut standby = read_at(t0, 2, 7);
        let read = standby.read.as_mut().unwrap();
        read.tasks = Arc::from(vec![
            task("report.20261201T200000Z.1", "TASK_RUNNING"),
            task("web.1", "TASK_RUNNING"),
        ]);
        let id = "report.20261201T200000Z.1";
        assert!(!standby.runs_ahead(&job_with_attempt(id, false)));
        let ahead = standby.runs_ahead(&job_with_attempt(id, true));
        assert!(
            ahead,
            "the run says its attempt ended; the read says running"
        );
        assert!(standby.due(stat, ahead, 0, t0 + REFRESH));
        assert!(
            !standby.due(stat, ahead, 0, t0 + REFRESH / 2),
            "still paced"
        );
        assert!(!standby.due(stat, false, 0, t0 + REFRESH), "no change seen");
        // Once read again with the terminal state, nothing is ahead.
        let read = standby.read.as_mut().unwrap();
        let mut tasks = read.tasks.to_vec();
        tasks[0] = task("report.20261201T200000Z.1", "TASK_FINISHED");
        read.tasks = tasks.into();
        assert!(!standby.runs_ahead(&job_with_attempt(id, true)));
        // A task whose record is gone (pruned) is not waited for.
        assert!(!standby.runs_ahead(&job_with_attempt("report.x.1", true)));
    }

    /// A follower lists the agents of its live task records and of the
    /// stored drains, each in state `unknown` (the master's word is the
    /// leader's), with a drain as stored. (Before, it listed none.)
    #[test]
    fn a_follower_lists_the_agents_of_its_task_records_and_drains() {
        use crate::mesos::v1::TaskState;
        use crate::scheduler::drains::{DrainState, MinHealthy, ThenAction};
        let on = |id: &str, agent: &str, state| {
            Arc::new(TaskRecord {
                agent_id: agent.into(),
                hostname: format!("{agent}.test"),
                ..TaskRecord::sample(id, "web", state)
            })
        };
        let tasks = [
            on("web.0.a", "S1", TaskState::TaskRunning),
            on("web.1.b", "S1", TaskState::TaskStaging),
            on("web.2.c", "S2", TaskState::TaskFinished),
        ];
        let drain: DrainRecord = serde_json::from_value(serde_json::json!({
            "agent_id": "S3", "min_healthy": 1, "by": "ops", "started_at": 5.0,
            "then": "drain_agent", "state": "running"}))
        .unwrap();
        let by_agent = live_by_agent(&tasks);
        let agents = follower_agents(Some(&by_agent), vec![drain]);
        let shown: Vec<(&str, &str, AgentState, usize, Option<DrainState>)> = agents
            .iter()
            .map(|a| {
                (
                    a.agent_id.as_str(),
                    a.hostname.as_str(),
                    a.state,
                    a.tasks.len(),
                    a.drain.as_ref().map(|d| d.state),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("S1", "S1.test", AgentState::Unknown, 2, None),
                ("S3", "", AgentState::Unknown, 0, Some(DrainState::Running)),
            ]
        );
        let d = agents[1].drain.as_ref().unwrap();
        assert_eq!(
            (d.min_healthy, d.then),
            (MinHealthy::Count(1), ThenAction::DrainAgent)
        );
        assert!(
            agents
                .iter()
                .all(|a| a.since == 0.0 && a.registered_time.is_none())
        );
    }
}
