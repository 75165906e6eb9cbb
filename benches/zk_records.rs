//! ZooKeeper at scale: N task records as the leader writes them, on a real
//! server with its defaults (no `jute.maxbuffer` flag) and the heap
//! ZooKeeper's own start script gives it (1000 MB,
//! `ZkServer::start_production`: the tests' 256 MB heap collects itself to
//! a standstill at 100,000 records and sessions expire). Run it with
//!
//! ```text
//! cargo bench --bench zk_records               # 100,000 records
//! cargo bench --bench zk_records -- 10000 100000
//! ```
//!
//! For each N it prints: the time to write them (`write_records` batches of
//! 1,000, as the core's), the server's `zk_approximate_data_size` and
//! `zk_znode_count` (`mntr`), the size of the `tasks` directory's
//! `getChildren` answer (4 bytes per name plus the name, plus the count;
//! it has no limit on the server and none in our client, unlike Java
//! clients, which refuse answers over their own `jute.maxbuffer`), and the
//! time a new leader (another coordinator, fresh session) takes to read
//! them all (`list_records`: one `getChildren`, then the records with 1,024
//! reads in flight, decoded as JSON). Each record is one real-shaped `TaskRecord`
//! (running, with its STAGING/STARTING/RUNNING timeline).

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use mesos_appliance::coordination::{Coordinator, Expect, RecordKind, RecordWrite};
use mesos_appliance::scheduler::records::TaskRecord;
use serde_json::json;
use support::replicas::{config, start_with, wait_leader};
use support::zookeeper::ZkServer;

const T: Duration = Duration::from_secs(30);
/// The replicas' session timeout: `serve`'s default (the tests' 2 s is too
/// short for 100,000 records on a loaded machine).
const SESSION: Duration = Duration::from_secs(10);
const BATCH: usize = 1000;

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![100_000]
    } else {
        sizes
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for n in sizes {
        rt.block_on(run(n));
    }
}

/// One task record of the shape the leader stores for a running task.
fn record(i: usize) -> TaskRecord {
    let service = format!("svc{}", i / 10_000);
    let instance = i % 10_000;
    let task_id = format!(
        "{service}.{instance}.{}",
        uuid::Uuid::from_u128(0x5eed_0000_0000_0000_0000_0000_0000_0000 + i as u128)
    );
    let agent = format!("0b9b9a9e-5f4c-4bd2-9d7e-1c2f3a4b5c6d-S{}", i % 1000);
    let at = 1_796_000_000.0 + i as f64 / 1000.0;
    let entry = |state: &str, source: &str, dt: f64| json!({"at": at + dt, "state": state, "source": source});
    serde_json::from_value(json!({
        "task_id": task_id,
        "service": service,
        "instance": instance,
        "fingerprint": "9f2c4e1a7b3d5f60",
        "agent_id": agent,
        "hostname": format!("agent-{}.testbed.local", i % 1000),
        "executor": "command",
        "executor_id": task_id,
        "ports": [],
        "state": "TASK_RUNNING",
        "launched_at": at,
        "updated_at": at + 0.2,
        "timeline": [
            entry("TASK_STAGING", "", 0.0),
            entry("TASK_STARTING", "SOURCE_EXECUTOR", 0.1),
            entry("TASK_RUNNING", "SOURCE_EXECUTOR", 0.2),
        ],
    }))
    .expect("a task record")
}

async fn run(n: usize) {
    let zk = ZkServer::start_production();
    let leader =
        start_with(config(&zk.connect_string(), "leader").with_session_timeout(SESSION)).await;
    wait_leader(leader.as_ref(), T).await;
    let sample = serde_json::to_vec(&record(0)).expect("json");
    let started = Instant::now();
    for first in (0..n).step_by(BATCH) {
        let writes: Vec<RecordWrite> = (first..(first + BATCH).min(n))
            .map(|i| {
                let r = record(i);
                RecordWrite::put(r.task_id.as_str(), &r, Expect::Absent).expect("a write")
            })
            .collect();
        for result in leader.write_records(RecordKind::Tasks, writes).await {
            result.expect("written");
        }
    }
    let written = started.elapsed();
    let mntr = four_letters(&zk, "mntr");
    let stat = |key: &str| {
        mntr.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t'))
            .unwrap_or("?")
            .to_string()
    };
    let names: usize = (0..n).map(|i| record(i).task_id.len()).sum();
    // Hand over: a new leader reads everything.
    leader.close().await;
    let next = start_with(config(&zk.connect_string(), "next").with_session_timeout(SESSION)).await;
    wait_leader(next.as_ref(), T).await;
    let started = Instant::now();
    let list = next.list_records(RecordKind::Tasks).await.expect("listed");
    let read = started.elapsed();
    assert_eq!(list.records.len(), n);
    let decoded = Instant::now();
    let records: Vec<TaskRecord> = list
        .records
        .into_iter()
        .map(|(_, v)| serde_json::from_value(v.value).expect("a task record"))
        .collect();
    let decode = decoded.elapsed();
    println!(
        "{n} task records ({} bytes each): written in {:.1} s; ZooKeeper data {} bytes, \
         {} znodes; getChildren of tasks/ {} bytes; a new leader read them in {:.1} s \
         (+{:.2} s to TaskRecords, {})",
        sample.len(),
        written.as_secs_f64(),
        stat("zk_approximate_data_size"),
        stat("zk_znode_count"),
        4 + 4 * n + names,
        read.as_secs_f64(),
        decode.as_secs_f64(),
        records.len()
    );
    next.close().await;
}

/// A four-letter command's answer (`mntr` is allowed by the harness's
/// `4lw.commands.whitelist`).
fn four_letters(zk: &ZkServer, word: &str) -> String {
    let mut s = std::net::TcpStream::connect(zk.connect_string()).expect("connect");
    s.write_all(word.as_bytes()).expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
