//! The tasks of one explicit run: which were asked about (the slices sent
//! so far) and which answered. An answer is found by hash, not by walking
//! an ordered map: at 100,000 tasks a run takes 100,000 answers, and each
//! costs one lookup whatever the task count.

use std::collections::HashMap;

use super::TaskList;
use crate::scheduler::ids::{AgentId, TaskId};

/// Every task of an explicit run, asked already or not, in slice order
/// (task ID order).
#[derive(Debug, Default)]
pub(super) struct Asks {
    /// The tasks in slice order; `answered[i]` belongs to `tasks[i]`.
    tasks: Vec<(TaskId, Option<AgentId>)>,
    answered: Vec<bool>,
    /// Where each task is in `tasks`.
    index: HashMap<TaskId, usize>,
    /// `tasks[..sent]` were in the slices sent so far.
    sent: usize,
    /// Tasks sent and not answered yet.
    outstanding: usize,
    /// Tasks answered, sent or not.
    answered_count: usize,
}

impl Asks {
    /// The run's tasks, each once (a task listed twice keeps its first
    /// agent ID), none sent yet.
    pub(super) fn new(mut tasks: TaskList) -> Asks {
        tasks.sort_by(|a, b| a.0.cmp(&b.0));
        tasks.dedup_by(|later, first| later.0 == first.0);
        let index = tasks
            .iter()
            .enumerate()
            .map(|(i, (task, _))| (task.clone(), i))
            .collect();
        Asks {
            answered: vec![false; tasks.len()],
            tasks,
            index,
            ..Asks::default()
        }
    }

    /// Tasks of the run.
    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True for a run of no task.
    pub(super) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// True when every task answered.
    pub(super) fn all_answered(&self) -> bool {
        self.answered_count == self.tasks.len()
    }

    /// True while some tasks were never sent.
    pub(super) fn unsent(&self) -> bool {
        self.sent < self.tasks.len()
    }

    /// Tasks sent and not answered yet.
    pub(super) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Marks `task_id` answered; false when it is not in the run or had
    /// answered already.
    pub(super) fn answer(&mut self, task_id: &str) -> bool {
        let Some(&at) = self.index.get(task_id) else {
            return false;
        };
        if std::mem::replace(&mut self.answered[at], true) {
            return false;
        }
        self.answered_count += 1;
        if at < self.sent {
            self.outstanding -= 1;
        }
        true
    }

    /// The next slice: up to `slice` (at least 1) tasks after the last one
    /// sent, skipping those that answered already (an update before they
    /// were asked about counts). Marks them sent.
    pub(super) fn next_slice(&mut self, slice: usize) -> TaskList {
        let slice = slice.max(1);
        let mut list = Vec::new();
        while self.sent < self.tasks.len() && list.len() < slice {
            if !self.answered[self.sent] {
                list.push(self.tasks[self.sent].clone());
            }
            self.sent += 1;
        }
        self.outstanding += list.len();
        list
    }

    /// The tasks sent and not answered, in slice order (a retry asks
    /// about them again).
    pub(super) fn unanswered_sent(&self) -> TaskList {
        self.unanswered(self.sent).cloned().collect()
    }

    /// Every task not answered, sent or not (an aborted run lists them).
    pub(super) fn unanswered_ids(&self) -> Vec<TaskId> {
        self.unanswered(self.tasks.len())
            .map(|(task, _)| task.clone())
            .collect()
    }

    fn unanswered(&self, upto: usize) -> impl Iterator<Item = &(TaskId, Option<AgentId>)> {
        self.tasks[..upto]
            .iter()
            .zip(&self.answered)
            .filter(|(_, answered)| !**answered)
            .map(|(task, _)| task)
    }
}
