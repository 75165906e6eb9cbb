//! Memory and cost of the charts' history ring (`web::history`) at 10,000
//! tasks over 6 hours: 4,320 samples (one every 5 s) of a snapshot whose
//! tasks are spread over 100 services (past the 64 told apart, the rest
//! count as one), plus 2,000 marks.
//!
//! Memory is counted by a global allocator: the bytes the ring holds after
//! filling it, less what was held before (the snapshot itself is built
//! first). The target is under 8 MiB. The time of one sample is given as a
//! ratio to the time of `Snapshot::task_counts` on the same snapshot (one
//! pass over the tasks, which the overview also pays per snapshot).
//!
//! `cargo bench --bench history`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use mesos_appliance::coordination::{ReplicaInfo, Strategy};
use mesos_appliance::scheduler::{Snapshot, TaskRecord};
use mesos_appliance::web::history::{History, KEEP, SAMPLE_INTERVAL, Window};

struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout, passed through.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same pointer and layout, passed through.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const TASKS: usize = 10_000;
const SERVICES: usize = 100;
const BUDGET: isize = 8 * 1024 * 1024;

fn snapshot() -> Snapshot {
    let replica = ReplicaInfo::new("http://bench:8080", "d", "0");
    let mut s = Snapshot::standby(replica, "bench", "*", Strategy::Failover);
    let states = [
        "TASK_RUNNING",
        "TASK_RUNNING",
        "TASK_STAGING",
        "TASK_FAILED",
    ];
    let mut tasks: Vec<Arc<TaskRecord>> = (0..TASKS)
        .map(|i| {
            let service = format!("service-{:03}", i % SERVICES);
            let t: TaskRecord = serde_json::from_value(serde_json::json!({
                "task_id": format!("{service}.{i}.0000"), "service": service, "instance": i,
                "fingerprint": "f", "agent_id": "a", "hostname": "h",
                "executor": "command", "executor_id": "e", "ports": [],
                "state": states[i % states.len()], "launched_at": 0.0, "updated_at": 0.0,
            }))
            .expect("task record");
            Arc::new(t)
        })
        .collect();
    tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    s.tasks = tasks.into();
    s
}

fn main() {
    let s = snapshot();
    let samples = (KEEP.as_secs() / SAMPLE_INTERVAL.as_secs()) as usize;
    let history = History::new();
    let before = HELD.load(Ordering::Relaxed);
    let start = 1_800_000_000.0;
    let began = Instant::now();
    for i in 0..samples {
        let at = start + (i as f64) * SAMPLE_INTERVAL.as_secs_f64();
        history.sample(&s, at, 12, 9);
        if i % 2 == 0 && i / 2 < 2000 {
            history.mark(at, "reconcile", "explicit reconciliation (periodic)");
        }
    }
    let per_sample = began.elapsed() / samples as u32;
    let held = HELD.load(Ordering::Relaxed) - before;

    let began = Instant::now();
    let rounds = 200;
    for _ in 0..rounds {
        std::hint::black_box(s.task_counts());
    }
    let per_count = began.elapsed() / rounds;

    let end = start + samples as f64 * SAMPLE_INTERVAL.as_secs_f64();
    let began = Instant::now();
    let view = history.view(Window::Six, end, 360, "http://bench:8080");
    let view_time = began.elapsed();

    println!("history ring: {TASKS} tasks in {SERVICES} services, {samples} samples (6 h at 5 s)");
    println!(
        "  held: {:.2} MiB by the allocator ({:.2} MiB by capacity), budget 8 MiB",
        held as f64 / 1048576.0,
        history.heap_bytes() as f64 / 1048576.0
    );
    println!(
        "  one sample: {per_sample:?}, {:.2}x Snapshot::task_counts ({per_count:?})",
        per_sample.as_secs_f64() / per_count.as_secs_f64()
    );
    println!(
        "  6 h view at 360 points: {view_time:?} ({} services, {} marks)",
        view.services.len(),
        view.marks.len()
    );
    assert_eq!(history.len(), samples);
    assert!(
        held < BUDGET,
        "the ring holds {held} bytes, over the 8 MiB budget"
    );
}
