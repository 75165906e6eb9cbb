//! Kills the scheduler wants and has not seen happen: each is sent as a KILL
//! call, then re-sent with exponential backoff until a terminal update for
//! the task arrives ("kill pending (n)" on the dashboard). KILL is not
//! acknowledged by Mesos and may be lost (a KILL naming the wrong agent is
//! silently ignored, `docs/mesos-protocol.md#kills`), so retrying is the only safe way.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::scheduler::ids::{AgentId, TaskId};

/// One wanted kill.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingKill {
    /// Agent the task is on, when known (KILL carries it).
    pub agent_id: Option<AgentId>,
    /// Why the scheduler wants it dead.
    pub reason: String,
    /// KILL calls sent so far.
    pub attempts: u32,
    /// SIGTERM → SIGKILL grace period to send with the KILL.
    pub grace: Duration,
    next_at: Instant,
    backoff: Backoff,
}

/// The queue of wanted kills, by task ID, with their retry times indexed so
/// that finding the due ones costs O(due · log n), not O(n).
#[derive(Debug)]
pub struct KillQueue {
    backoff: Backoff,
    pending: BTreeMap<TaskId, PendingKill>,
    schedule: BTreeSet<(Instant, TaskId)>,
}

impl KillQueue {
    /// Retries start after `min_backoff` and double up to `max_backoff`.
    pub fn new(min_backoff: Duration, max_backoff: Duration) -> Self {
        KillQueue {
            backoff: Backoff::new(min_backoff, max_backoff),
            pending: BTreeMap::new(),
            schedule: BTreeSet::new(),
        }
    }

    /// Wants `task_id` dead; the first KILL is due at once. Returns false if
    /// a kill was already pending (it is left as it is).
    pub fn request(
        &mut self,
        task_id: &TaskId,
        agent_id: Option<AgentId>,
        reason: &str,
        grace: Duration,
        now: Instant,
    ) -> bool {
        if self.pending.contains_key(task_id) {
            return false;
        }
        self.pending.insert(
            task_id.clone(),
            PendingKill {
                agent_id,
                reason: reason.to_string(),
                attempts: 0,
                grace,
                next_at: now,
                backoff: self.backoff.clone(),
            },
        );
        self.schedule.insert((now, task_id.clone()));
        true
    }

    /// Every pending kill, by task ID.
    pub fn iter(&self) -> impl Iterator<Item = (&TaskId, &PendingKill)> {
        self.pending.iter()
    }

    /// The kills due at `now`, each counted as one more attempt and
    /// rescheduled after its (doubling) backoff.
    pub fn due(&mut self, now: Instant) -> Vec<(TaskId, PendingKill)> {
        let mut out = Vec::new();
        while let Some(first) = self.schedule.first() {
            if first.0 > now {
                break;
            }
            let (_, task_id) = self.schedule.pop_first().expect("a first entry");
            let Some(kill) = self.pending.get_mut(&task_id) else {
                continue;
            };
            kill.attempts += 1;
            kill.next_at = now + kill.backoff.next_delay();
            out.push((task_id, kill.clone()));
        }
        for (task_id, kill) in &out {
            self.schedule.insert((kill.next_at, task_id.clone()));
        }
        out
    }

    /// The task reached a terminal state (or is forgotten): stop killing it.
    pub fn done(&mut self, task_id: &str) -> Option<PendingKill> {
        let (task_id, kill) = self.pending.remove_entry(task_id)?;
        self.schedule.remove(&(kill.next_at, task_id));
        Some(kill)
    }

    /// The pending kill of a task.
    pub fn get(&self, task_id: &str) -> Option<&PendingKill> {
        self.pending.get(task_id)
    }

    /// Number of pending kills.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no kill is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Forgets every pending kill (leadership lost: the next leader decides).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.schedule.clear();
    }

    /// When the next retry is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.schedule.first().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_are_retried_with_backoff_until_done() {
        let t0 = Instant::now();
        let mut q = KillQueue::new(Duration::from_secs(5), Duration::from_secs(20));
        let t1 = TaskId::from("t1");
        assert!(q.request(
            &t1,
            Some("a1".into()),
            "scaled down",
            Duration::from_secs(3),
            t0
        ));
        assert!(!q.request(&t1, None, "again", Duration::ZERO, t0));
        let mut sent = Vec::new();
        for s in 0..=60 {
            let now = t0 + Duration::from_secs(s);
            for (_, kill) in q.due(now) {
                sent.push((s, kill.attempts));
            }
        }
        assert_eq!(
            sent,
            [(0, 1), (5, 2), (15, 3), (35, 4), (55, 5)],
            "5, 10, 20, 20 s apart"
        );
        assert_eq!(q.get("t1").unwrap().reason, "scaled down");
        assert_eq!(q.done("t1").unwrap().attempts, 5);
        assert!(q.is_empty() && q.next_deadline().is_none());
    }
}
