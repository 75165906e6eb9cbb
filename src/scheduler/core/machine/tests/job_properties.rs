//! Property test of jobs in the core (`docs/jobs.md#exactly-once`):
//! random sequences of time passing, offers, store answers (each waits
//! for its own step, so offers come while run records are being written),
//! status updates of the jobs'
//! tasks (any state), manual runs, kills and new terms (the old leader's
//! writes in flight landing or not), against a job firing every 10 s with
//! a random concurrency policy, retries and timeout. Kept beside
//! `properties` (one service's world) so that each stays readable.
//!
//! Invariants:
//! - no task record of an attempt is written before a stored run record
//!   holds that attempt (checked at the effect);
//! - every task ID is launched (in an ACCEPT) at most once, over all
//!   terms: each trigger launches at most one first attempt;
//! - a run launches at most `1 + retries.count` attempts, and a run
//!   recorded `skipped` or `missed` launches none;
//! - every scheduled run ID is a trigger of the schedule, and its first
//!   attempt is placed (its task record created) within the schedule's
//!   starting deadline or never;
//! - a job's task is killed only by a job's own rule (a run killed,
//!   replaced or timed out; a task stuck in staging): never by a service's
//!   rule, whatever order a new leader's startup reads (the task records,
//!   the jobs, the runs) are answered in, and whenever it subscribes among
//!   them (checked at the effect that stores the kill mark);
//! - a `forbid` trigger is skipped in a term only for a run whose task the
//!   master spoke of in that term (an update of it, or a record written in
//!   the term), or that has no live task: never on a record an earlier
//!   leader left, which the task may have outlived;
//! - the framework's tasks vanish wholesale (an operator's teardown then
//!   reregister, or the master removing the framework and
//!   `--on-framework-removed=reregister`) and a new framework ID is
//!   assigned: once everything is answered and a few seconds pass with
//!   an offer, no run still going claims a launched attempt whose task
//!   record is gone, and the service `web` beside the job has a live task
//!   again (its instance is launched on the new framework).

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::*;
use crate::mesos::client::{ErrorKind, StopReason};
use crate::scheduler::jobs::{JobRecord, RunId, RunState};
use crate::scheduler::spec::job::JobSpec;

/// Cases per `cargo test` run.
const CASES: u32 = 96;
/// Steps of a case, at most.
const STEPS: usize = 60;
const BASE: f64 = 1_000_000.0;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Offer,
    /// An update of the `n`th launched task (modulo), in this state.
    Update(usize, TaskState, bool),
    ManualRun,
    /// Kill the `n`th run (modulo).
    Kill(usize),
    /// The leader goes; its writes in flight land or not. The new
    /// leader's startup reads are answered in an order drawn from the seed,
    /// and it subscribes among them.
    NewTerm(bool, u64),
    /// The framework's tasks vanish and a new framework registers: an
    /// operator's teardown then reregister (`true`), or the master removed
    /// the framework (`false`, `--on-framework-removed=reregister`).
    Vanish(bool),
    /// The oldest store operation is answered.
    AnswerOne,
    /// Every store operation and call is answered (and those they lead to).
    AnswerAll,
}

fn op() -> impl Strategy<Value = Op> {
    let state = prop_oneof![
        Just(TaskState::TaskRunning),
        Just(TaskState::TaskFinished),
        Just(TaskState::TaskFailed),
        Just(TaskState::TaskKilled),
        Just(TaskState::TaskLost),
    ];
    prop_oneof![
        4 => (1u64..15).prop_map(Op::Advance),
        3 => Just(Op::Offer),
        4 => (any::<usize>(), state, any::<bool>()).prop_map(|(n, s, e)| Op::Update(n, s, e)),
        1 => Just(Op::ManualRun),
        1 => any::<usize>().prop_map(Op::Kill),
        1 => (any::<bool>(), any::<u64>()).prop_map(|(land, seed)| Op::NewTerm(land, seed)),
        1 => any::<bool>().prop_map(Op::Vanish),
        3 => Just(Op::AnswerOne),
        3 => Just(Op::AnswerAll),
    ]
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        prop_oneof![Just("allow"), Just("forbid"), Just("replace")],
        0u32..3,
        prop::option::of(5u64..40),
        2u32..5,
    )
        .prop_map(|(concurrency, retries, timeout, history)| {
            let mut v = serde_json::json!({
                "name": "report", "command": "true", "cpus": 0.1, "mem": 32,
                "schedule": {"cron": "*/10 * * * * *", "starting_deadline": "5s",
                             "concurrency": concurrency},
                "retries": {"count": retries, "backoff": "2s"},
                "history": history
            });
            if let Some(t) = timeout {
                v["timeout"] = format!("{t}s").into();
            }
            serde_json::from_value(v).unwrap()
        })
}

/// Why a job's task may be killed: the reasons of the jobs' own rules
/// (`machine/jobs.rs` `kill_run`: the property's kill command, a
/// `replace` policy, a timeout), of housekeeping's stuck tasks, and of a
/// task reported alive after its end (`machine/tasks.rs`: its attempt was
/// given up).
const JOB_KILLS: [&str; 5] = [
    "killed by prop",
    "replaced by run",
    "timed out after",
    "stuck in",
    "reported ",
];

/// The effect-time invariants: a job attempt's task record is written only
/// once a stored run record holds the attempt; a kill mark stored on a
/// job's task gives a job's reason.
fn watch(h: &Harness, effect: &Effect) -> Option<String> {
    if let Effect::Store {
        op: StoreOp::PutTask(record, _),
        ..
    } = effect
        && record.service == "report"
        && let Some(kill) = &record.kill
        && !JOB_KILLS.iter().any(|why| kill.reason.starts_with(why))
    {
        return Some(format!(
            "job task {} killed by a rule not the job's: {}",
            record.task_id, kill.reason
        ));
    }
    if let Effect::Store {
        op: StoreOp::PutTask(record, Expect::Absent),
        ..
    } = effect
        && record.service == "report"
    {
        let (job, rest) = record.task_id.as_str().split_once('.')?;
        let (run_id, _) = rest.rsplit_once('.')?;
        let stored = h
            .store
            .runs
            .get(&format!("{job}.{run_id}"))
            .is_some_and(|(r, _)| r.attempts.iter().any(|a| a.task_id == record.task_id));
        if !stored {
            return Some(format!(
                "task record {} before its run record",
                record.task_id
            ));
        }
        // A scheduled run's first attempt is placed within its starting
        // deadline, or never (it is `missed`).
        let deadline = h
            .store
            .jobs
            .get(job)
            .and_then(|(j, _)| j.spec.schedule.as_ref())
            .map(|s| s.starting_deadline.as_secs_f64());
        let now = h.machine.clock.unix(Instant::now());
        if let (Some(trigger), Some(deadline)) = (RunId::scheduled_at(run_id), deadline)
            && record.task_id.as_str().ends_with(".1")
            && now - trigger as f64 > deadline
        {
            return Some(format!(
                "{} placed {:.1} s after its trigger (starting deadline {deadline} s)",
                record.task_id,
                now - trigger as f64
            ));
        }
    }
    None
}

/// A harness for a new term over `store`, its clock at `unix`. Its
/// startup reads are answered in an order drawn from `seed`, and the
/// subscription comes among them; then everything is answered.
fn term(store: Store, term: u64, unix: f64, seed: u64) -> Harness {
    let mut h = Harness::new(config(), Some(FRAMEWORK), &[], &[]);
    // The master's framework ID: the stored one, or a new one it assigns.
    let id = store
        .framework_id
        .clone()
        .unwrap_or_else(|| format!("fw-term-{term}"));
    h.store = store;
    let mut info = h.machine.term.clone();
    info.term = term;
    let mut cfg = h.machine.cfg.clone();
    cfg.on_framework_removed = crate::scheduler::config::OnFrameworkRemoved::Reregister;
    h.machine = Machine::new(cfg, info, Instant::now(), unix);
    h.watch = Some(watch);
    h.start();
    let mut draw = seed;
    let mut next = move |n: usize| {
        // splitmix64: a small deterministic draw from the case's seed.
        draw = draw.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = draw;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        usize::try_from((z ^ (z >> 31)) % n as u64).unwrap_or(0)
    };
    let mut subscribed = false;
    while !h.stores.is_empty() {
        if !subscribed && next(3) == 0 {
            h.subscribe_as(&id);
            subscribed = true;
        }
        let i = next(h.stores.len());
        let (id, op) = h.stores.remove(i).expect("a store operation");
        let result = h.store.apply(op);
        h.feed(Input::Stored { id, result });
        h.answer_calls();
        h.answer_operators();
    }
    // A subscription before the client started (the reads' answers start
    // it) is dropped by that start: the client's own comes after it.
    if !subscribed || !h.machine.framework.is_subscribed() {
        h.subscribe_as(&id);
    }
    h.answer_all();
    h
}

struct World {
    h: Harness,
    spec: JobSpec,
    terms: u64,
    launched: Vec<String>,
    seen: HashSet<String>,
    offers: u64,
    uuid: u64,
    /// When the current term began (seconds since the UNIX epoch).
    term_at: f64,
    /// The runs stored when the current term began (an earlier term's).
    earlier: HashSet<String>,
    /// The tasks an update was sent for in the current term.
    heard: HashSet<String>,
    /// Framework IDs the master assigned after the tasks vanished.
    vanished: u64,
}

impl World {
    fn collect(&mut self) -> Result<(), String> {
        for id in Harness::launched(&self.h.drain_call_log()) {
            // Each term's machine draws the same service task IDs (one
            // seed): only the job's, named by their runs, are compared.
            if id.starts_with("report.") && !self.seen.insert(id.clone()) {
                return Err(format!("task {id} launched twice"));
            }
            self.launched.push(id);
        }
        if let Some(v) = self.h.violations.first() {
            return Err(v.clone());
        }
        Ok(())
    }

    async fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Advance(s) => self.h.advance(Duration::from_secs(*s)).await,
            Op::Offer => {
                self.offers += 1;
                self.h
                    .offer(&format!("o-{}-{}", self.terms, self.offers), "agent-0", 4.0);
            }
            Op::Update(n, state, exit) => {
                if !self.launched.is_empty() {
                    let id = self.launched[n % self.launched.len()].clone();
                    // The service's task only comes up: `web` settles
                    // (the pass skips it until a record of it changes).
                    let state = if id.starts_with("web.") {
                        TaskState::TaskRunning
                    } else {
                        *state
                    };
                    self.uuid += 1;
                    self.heard.insert(id.clone());
                    let mut s = status(&id, state, Some(&format!("u{}", self.uuid)));
                    if *exit {
                        s.message = Some("Command exited with status 1".into());
                    }
                    self.h.update(s);
                }
            }
            Op::ManualRun => {
                self.h.command(Request::StartRun(Box::new(
                    crate::scheduler::commands::RunRequest {
                        job: "report".into(),
                        args: vec![],
                        env: Default::default(),
                        by: "prop".into(),
                        reason: None,
                    },
                )));
            }
            Op::Kill(n) => {
                let runs: Vec<String> = self
                    .h
                    .store
                    .runs
                    .values()
                    .map(|(r, _)| r.run_id.clone())
                    .collect();
                if !runs.is_empty() {
                    let run_id = runs[n % runs.len()].clone();
                    self.h.command(Request::KillRun {
                        name: "report".into(),
                        run_id,
                        by: "killed by prop".into(),
                    });
                }
            }
            Op::NewTerm(land, seed) => {
                self.collect()?;
                let unix = self.h.machine.unix(Instant::now());
                let mut old =
                    std::mem::replace(&mut self.h, Harness::new(config(), None, &[], &[]));
                if *land {
                    while let Some((_, op)) = old.stores.pop_front() {
                        old.store.apply(op);
                    }
                }
                self.terms += 1;
                self.term_at = unix;
                self.heard.clear();
                self.earlier = old.store.runs.keys().cloned().collect();
                self.h = term(old.store, self.terms, unix, *seed);
            }
            Op::Vanish(teardown) => {
                if *teardown {
                    self.h.command(Request::Teardown);
                    self.h.answer_all();
                    self.h.command(Request::Reregister);
                } else {
                    self.h
                        .feed(Input::ClientStopped(StopReason::Error(ErrorKind::Removed)));
                }
                self.h.answer_all();
                if self.h.store.framework_id.is_none() {
                    self.vanished += 1;
                    let id = format!("fw-new-{}", self.vanished);
                    self.h.subscribe_as(&id);
                }
            }
            Op::AnswerOne => {
                if !self.h.stores.is_empty() {
                    self.h.answer_next_store();
                }
            }
            Op::AnswerAll => self.h.answer_all(),
        }
        self.collect()?;
        self.check()
    }

    fn check(&self) -> Result<(), String> {
        let mut per_run: BTreeMap<String, usize> = BTreeMap::new();
        for id in self.launched.iter().filter(|t| t.starts_with("report.")) {
            let (_, rest) = id.split_once('.').unwrap_or_default();
            let (run_id, _) = rest.rsplit_once('.').unwrap_or_default();
            *per_run.entry(run_id.to_string()).or_default() += 1;
        }
        let schedule = self.spec.schedule.as_ref().unwrap().parse().unwrap();
        for (r, _) in self.h.store.runs.values() {
            if r.job != "report" {
                continue;
            }
            if let Some(going) = r
                .reason
                .as_deref()
                .and_then(|why| why.strip_prefix("skipped: concurrency (run "))
                .filter(|_| !self.earlier.contains(&r.key()))
            {
                let going = going.trim_end_matches(" still going)");
                for run_id in going.split(", ") {
                    let task = self
                        .h
                        .store
                        .runs
                        .values()
                        .find(|(o, _)| o.run_id == run_id)
                        .and_then(|(o, _)| o.current())
                        .map(|a| a.task_id.to_string());
                    let unheard = task
                        .as_ref()
                        .and_then(|t| self.h.store.tasks.get(t))
                        .is_some_and(|(t, _)| {
                            !t.is_terminal()
                                && t.updated_at < self.term_at
                                && !self.heard.contains(t.task_id.as_str())
                        });
                    if unheard {
                        return Err(format!(
                            "run {} skipped for run {run_id}, whose task {task:?} the master \
                             did not speak of in this term",
                            r.run_id
                        ));
                    }
                }
            }
            let n = per_run.get(&r.run_id).copied().unwrap_or(0);
            if n > 1 + self.spec.retries.count as usize {
                return Err(format!("run {} launched {n} attempts", r.run_id));
            }
            if matches!(r.state, RunState::Skipped | RunState::Missed) && n > 0 {
                return Err(format!("run {} is {:?} but launched", r.run_id, r.state));
            }
            if let Some(at) = RunId::scheduled_at(&r.run_id)
                && schedule.next_after(at - 1) != Some(at)
            {
                return Err(format!("run {} is no trigger of the schedule", r.run_id));
            }
        }
        Ok(())
    }

    /// The end of a case: everything is answered, time passes with
    /// offers; then no run still going claims a launched attempt whose
    /// task record is gone, and `web` has a live task.
    async fn settle_and_check_vanished(&mut self) -> Result<(), String> {
        for i in 0..3 {
            self.h.answer_all();
            self.h.offer(&format!("o-end-{i}"), "agent-0", 4.0);
            self.h.answer_all();
            self.h.advance(Duration::from_secs(2)).await;
            self.h.answer_all();
        }
        self.collect()?;
        for (r, _) in self.h.store.runs.values() {
            let Some(attempt) = r.current().filter(|_| !r.state.is_finished()) else {
                continue;
            };
            let launched = attempt
                .task_state
                .as_deref()
                .and_then(TaskState::from_str_name)
                .is_some_and(|s| !crate::mesos::is_terminal(s));
            if launched && !self.h.store.tasks.contains_key(attempt.task_id.as_str()) {
                return Err(format!(
                    "run {} is {:?} with attempt {} {:?}, whose task record is gone",
                    r.run_id, r.state, attempt.number, attempt.task_state
                ));
            }
        }
        let web = self
            .h
            .store
            .tasks
            .values()
            .any(|(t, _)| t.service == "web" && !t.is_terminal());
        if !web {
            return Err(format!(
                "service web has no live task after {} new framework(s): {:?}; log: {:?}",
                self.vanished,
                self.h.store.tasks.keys().collect::<Vec<_>>(),
                self.h.logs.iter().rev().take(12).collect::<Vec<_>>()
            ));
        }
        Ok(())
    }
}

fn run_case(spec: JobSpec, ops: &[Op]) -> Result<(), String> {
    paused_runtime()?.block_on(async {
        let mut store = Store {
            framework_id: Some(FRAMEWORK.into()),
            ..Store::default()
        };
        store.jobs.insert(
            "report".into(),
            (
                JobRecord {
                    spec: spec.clone(),
                    created_at: BASE,
                    updated_at: BASE,
                },
                0,
            ),
        );
        // A service beside the job: its instance must run again on a new
        // framework.
        store
            .services
            .insert("web".into(), (ServiceRecord::new(service("web", 1)), 0));
        let mut world = World {
            h: term(store, 1, BASE, 0),
            spec,
            terms: 1,
            launched: Vec::new(),
            seen: HashSet::new(),
            offers: 0,
            uuid: 0,
            term_at: BASE,
            earlier: HashSet::new(),
            heard: HashSet::new(),
            vanished: 0,
        };
        for op in ops {
            world.step(op).await?;
        }
        world.settle_and_check_vanished().await
    })
}

#[test]
fn job_runs_launch_at_most_once_per_trigger_and_only_after_their_record() {
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(
        &(job_spec(), prop::collection::vec(op(), 1..STEPS)),
        |(spec, ops)| run_case(spec, &ops).map_err(TestCaseError::fail),
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// OPEN FAULT, kept as its reproduction: a minimal case the property
/// finds in about 1 of 40 runs of 128 cases. Three manual runs across a
/// leader change, the master removes the framework
/// (`--on-framework-removed=reregister`), and the next leader dies with
/// its writes in flight: the third term launches a job attempt
/// (`report.<run>.1`) that an earlier term launched already. Not found
/// yet: which record lets the third term take the attempt for unlaunched.
/// Queueing the runs' ends before the framework's delete (`forget.rs`) did
/// not change it. Run with `cargo test --lib -- --ignored
/// a_removal_whose`.
#[test]
#[ignore = "open fault: a job attempt launched twice after a removal and a leader change"]
fn a_removal_whose_run_end_did_not_land_never_launches_the_attempt_again() {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "name": "report", "command": "true", "cpus": 0.1, "mem": 32,
        "schedule": {"cron": "*/10 * * * * *", "starting_deadline": "5s",
                     "concurrency": "allow"},
        "retries": {"count": 0, "backoff": "2s"},
        "history": 2
    }))
    .unwrap();
    let ops = [
        Op::Offer,
        Op::ManualRun,
        Op::NewTerm(true, 0),
        Op::ManualRun,
        Op::Offer,
        Op::ManualRun,
        Op::AnswerOne,
        Op::AnswerOne,
        Op::Vanish(false),
        Op::NewTerm(false, 0),
    ];
    if let Err(e) = run_case(spec, &ops) {
        panic!("{e}");
    }
}
