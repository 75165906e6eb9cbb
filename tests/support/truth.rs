//! The appliance's word against the master's: no task may be shown live
//! that the master lists as completed or does not know (a record whose
//! outcome the master decided is never shown as live:
//! `docs/deployment-strategies.md#removed`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mesos_appliance::mesos::v1::TaskState;
use mesos_appliance::testbed::{TaskView, Testbed};
use serde_json::Value;

use super::processes::Appliance;

/// States that claim the master told us the task lives. `TASK_STAGING` is
/// left out: a record is stored before its launch reaches the master.
const LIVE: [&str; 3] = ["TASK_STARTING", "TASK_RUNNING", "TASK_KILLING"];

/// Every disagreement between `appliance`'s `/api/v1/tasks` and the
/// testbed's live and completed tasks, in words; empty when they agree.
pub async fn disagreements(appliance: &Appliance, tb: &Testbed) -> Vec<String> {
    let Some((200, view)) = appliance.get("/api/v1/tasks?per_page=10000").await else {
        return vec![format!("{}: /api/v1/tasks did not answer", appliance.name)];
    };
    let mut master = tb.tasks();
    master.extend(tb.completed_tasks());
    compare(&appliance.name, &shown(&view), &master)
}

/// The tasks of a `/api/v1/tasks` answer: ID and state name.
pub fn shown(view: &Value) -> Vec<(String, String)> {
    view["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let text = |k: &str| t[k].as_str().unwrap_or_default().to_string();
            (text("id"), text("state"))
        })
        .collect()
}

/// The disagreements between the tasks `replica` shows (ID and state name)
/// and the master's tasks (live and completed), in words.
pub fn compare(replica: &str, shown: &[(String, String)], master: &[TaskView]) -> Vec<String> {
    let mut live: HashMap<&str, TaskState> = HashMap::new();
    let mut completed: HashMap<&str, TaskState> = HashMap::new();
    for t in master {
        let map = if t.completed {
            &mut completed
        } else {
            &mut live
        };
        map.insert(&t.task_id, t.state);
    }
    let mut out = Vec::new();
    for (id, state) in shown {
        if !LIVE.contains(&state.as_str()) {
            continue;
        }
        let master = if let Some(s) = completed.get(id.as_str()) {
            format!("completed {}", s.as_str_name())
        } else if live.contains_key(id.as_str()) {
            continue;
        } else {
            "unknown to the master".to_string()
        };
        out.push(format!(
            "{replica}: task {id} shown {state}, the master has it {master}"
        ));
    }
    out
}

/// Waits (at most `within`) until `appliance` shows no task live that the
/// master lists as completed or unknown; panics with the disagreements.
/// Waiting covers an update still on its way to the appliance.
pub async fn assert_agrees_with_master(appliance: &Appliance, tb: &Testbed, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let found = disagreements(appliance, tb).await;
        if found.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "the appliance shows tasks live that the master ended:\n{}",
                found.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The count of `state` in `/api/v1/state`'s `counts.tasks_by_state`.
pub fn count(state: &Value, task_state: &str) -> u64 {
    state["counts"]["tasks_by_state"][task_state]
        .as_u64()
        .unwrap_or(0)
}
