//! Health changes on the events page, coalesced per task: a task's
//! executor reports every change of its health (`docs/health-checks.md` in
//! apache/mesos), so a flapping check would otherwise fill the bounded
//! event log and push out everything else. The first change of a task is
//! logged at once; further changes within [`WINDOW`] are counted, and
//! summed up in one event when the window ends (with the health then),
//! which opens the next window. So each task adds at most one health event
//! per window, and its last state is always shown. The task records keep
//! every change (their timeline) whatever the log says.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::scheduler::ids::TaskId;

/// Longest a task's health changes are held back from the event log.
pub(super) const WINDOW: Duration = Duration::from_secs(60);

/// Open windows, by task.
#[derive(Debug, Default)]
pub(super) struct HealthLog {
    windows: HashMap<TaskId, Window>,
}

#[derive(Debug)]
struct Window {
    until: Instant,
    /// Changes held back, and the last one's text (`healthy: …`).
    held: u32,
    last: String,
}

impl HealthLog {
    /// `task`'s health changed at `now` to `state` (`healthy` or
    /// `unhealthy`, with the check's message): the event to log now, if
    /// any.
    pub(super) fn change(&mut self, task: &TaskId, state: String, now: Instant) -> Option<String> {
        if let Some(w) = self.windows.get_mut(task).filter(|w| now < w.until) {
            w.held += 1;
            w.last = state;
            return None;
        }
        self.open(task, now);
        Some(format!("task {task} is {state}"))
    }

    /// Ends the windows due by `now`: one event for each that held changes
    /// back (and a new window from it).
    pub(super) fn due(&mut self, now: Instant) -> Vec<String> {
        let ended: Vec<TaskId> = self
            .windows
            .iter()
            .filter(|(_, w)| w.until <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let mut events = Vec::new();
        for task in ended {
            let Some(w) = self.windows.remove(&task) else {
                continue;
            };
            if w.held > 0 {
                events.push(format!(
                    "task {task} changed health {} more time(s) within {}; now {}",
                    w.held,
                    humantime::format_duration(WINDOW),
                    w.last
                ));
                self.open(&task, now);
            }
        }
        events
    }

    /// The task ended: nothing more to say about its health.
    pub(super) fn forget(&mut self, task: &TaskId) {
        self.windows.remove(task);
    }

    fn open(&mut self, task: &TaskId, now: Instant) {
        let window = Window {
            until: now + WINDOW,
            held: 0,
            last: String::new(),
        };
        self.windows.insert(task.clone(), window);
    }
}
