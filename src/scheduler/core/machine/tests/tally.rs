//! The snapshot's per-service counts kept as records change (`tally`,
//! `view::Shown`) against a full recount (`ServiceCounts::of`) after every
//! change of the task table: launches, updates of every kind, health
//! reports, kills, partitions, duplicates, instances beyond the count,
//! deletions, a table cleared, and time passing `min_healthy`.

use std::sync::Arc;

use serde_json::json;

use super::super::table::TaskTable;
use super::super::view::Shown;
use crate::mesos::v1::TaskState;
use crate::scheduler::records::{KillRequest, PartitionMark, StatusEntry, TaskRecord};
use crate::scheduler::snapshot::ServiceCounts;
use crate::scheduler::spec::service::ServiceSpec;

/// `instances` of `web`, with a health check when `checked`, available
/// 5 s after it is running (healthy).
fn spec(command: &str, instances: u32, checked: bool) -> ServiceSpec {
    let mut spec = json!({
        "name": "web", "command": command, "cpus": 0.1, "mem": 32,
        "instances": instances,
        "upgrade": {"min_healthy": "5s", "deadline": "5m"},
    });
    if checked {
        spec["health_check"] = json!({"type": "command", "command": "true"});
    }
    serde_json::from_value(spec).unwrap()
}

/// A small LCG: the sequence is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

/// A random record of task `id` of `web` at about `now`.
fn record(rng: &mut Lcg, id: &str, fingerprints: &[String], now: f64) -> Arc<TaskRecord> {
    let states = [
        TaskState::TaskStaging,
        TaskState::TaskStarting,
        TaskState::TaskRunning,
        TaskState::TaskRunning,
        TaskState::TaskRunning,
        TaskState::TaskFailed,
        TaskState::TaskKilled,
        TaskState::TaskUnreachable,
        TaskState::TaskUnknown,
    ];
    let state = states[rng.next(states.len())];
    let at = now - rng.next(8) as f64;
    let healthy = [None, Some(true), Some(false)][rng.next(3)];
    let mut timeline = Vec::new();
    for _ in 0..rng.next(3) {
        timeline.push(StatusEntry {
            at: at - rng.next(4) as f64,
            state: if rng.next(3) == 0 {
                TaskState::TaskStarting
            } else {
                TaskState::TaskRunning
            },
            source: None,
            reason: None,
            message: None,
            healthy,
        });
    }
    timeline.sort_by(|a, b| a.at.total_cmp(&b.at));
    // Fields in their old order: the random draws stay the same.
    Arc::new(TaskRecord {
        // Mostly below the count (4 or 6), now and then beyond.
        instance: rng.next(7) as u32,
        fingerprint: fingerprints[rng.next(fingerprints.len())].clone(),
        launched_at: at - 10.0,
        updated_at: at,
        kill: (rng.next(8) == 0).then(|| KillRequest::new("scaled down".into(), at)),
        timeline,
        healthy,
        healthy_since: healthy.filter(|_| rng.next(2) == 0).map(|_| at - 1.0),
        health_checked: [None, Some(true), Some(false)][rng.next(3)],
        partition: (rng.next(6) == 0).then_some(PartitionMark {
            unreachable_since: at - 2.0,
            returned_at: None,
        }),
        ..TaskRecord::sample(id, "web", state)
    })
}

/// Random changes of a table of 12 task IDs, with the counts of `web`
/// brought up to date at a random time after most, as a full snapshot
/// does, and compared with a recount of every stored record; between,
/// the sums take changes as a term's load does, or a light snapshot
/// comes.
fn run(seed: u64, steps: usize) {
    let mut rng = Lcg(seed);
    // Apart, so that the records drawn stay those of `rng` alone.
    let mut modes = Lcg(!seed);
    let specs = [
        spec("sleep 1", 4, true),
        spec("sleep 1", 6, true),
        spec("sleep 2", 4, false),
    ];
    let fingerprints: Vec<String> = specs.iter().map(ServiceSpec::fingerprint).collect();
    let mut spec = &specs[0];
    let mut table = TaskTable::default();
    let mut now = 1_000.0;
    let mut shown = None;
    let mut version = 0;
    for step in 0..steps {
        let id = format!("web.{}", rng.next(12));
        version += 1;
        match rng.next(10) {
            0 => table.insert_launching(record(&mut rng, &id, &fingerprints, now)),
            1 => {
                table.created(&id, version);
            }
            2..=4 => {
                if table.get(&id).is_some() {
                    table.replace(&id, record(&mut rng, &id, &fingerprints, now), version);
                }
            }
            5 => table.touch(&id, |r| r.kill = None),
            6 => table.remove(&id),
            7 if rng.next(40) == 0 => table.clear(),
            7 if rng.next(20) == 0 => spec = &specs[rng.next(specs.len())],
            _ => now += rng.next(4) as f64,
        }
        // Now and then the sums only take the changes, as a step of a
        // term's load does, or a light snapshot comes (it counts sums not
        // counted yet, else keeps the counts): the next full one counts
        // as if each change had been taken by a full one.
        match modes.next(4) {
            0 => Shown::absorb(&mut shown, spec, &mut table, now),
            1 => {
                Shown::refresh(&mut shown, spec, &mut table, now, true);
            }
            _ => {}
        }
        if modes.next(3) == 0 {
            continue;
        }
        let counts = Shown::refresh(&mut shown, spec, &mut table, now, false);
        let recount = ServiceCounts::of(
            spec,
            table.service("web").into_iter().flat_map(|s| s.stored()),
            now,
        );
        assert_eq!(counts, &recount, "seed {seed:#x}, after step {step}");
    }
}

#[test]
fn kept_counts_equal_a_recount_after_every_change() {
    for seed in [0x2545_f491_4f6c_dd1d, 7, 0xdead_beef, 42] {
        run(seed, 3_000);
    }
}
