//! The tasks of one explicit run: which were asked about (the slices sent
//! so far) and which answered. An answer is found by hash, not by walking
//! an ordered map: at 100,000 tasks a run takes 100,000 answers, and each
//! costs one lookup whatever the task count.
//!
//! The hash index holds the tasks sent so far, filled a slice at a time.
//! Built whole at the start, it hashed every task ID in the step that
//! starts a run, and a command waits for that step: at 100,000 tasks the
//! step took 26.9 ms, 9.5 ms now (`docs/benchmarks.md` "Slow steps by
//! kind, drains' ticks and an explicit run's start"). A task not sent yet
//! is found by binary search among the unsent ones, which stay in task ID
//! order.

use std::collections::HashMap;

use super::TaskList;
use crate::scheduler::ids::{AgentId, TaskId};

/// Every task of an explicit run, asked already or not, in slice order
/// (task ID order).
#[derive(Debug, Default)]
pub(super) struct Asks {
    /// The tasks in task ID order, each once; `answered[i]` belongs to
    /// `tasks[i]`.
    tasks: Vec<(TaskId, Option<AgentId>)>,
    answered: Vec<bool>,
    /// Where each task sent so far is in `tasks` (`tasks[..sent]`).
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
    /// agent ID), none sent yet. A list already in task ID order without
    /// repeats (the task table's) is taken as it is.
    pub(super) fn new(mut tasks: TaskList) -> Asks {
        if !tasks.is_sorted_by(|a, b| a.0 < b.0) {
            tasks.sort_by(|a, b| a.0.cmp(&b.0));
            tasks.dedup_by(|later, first| later.0 == first.0);
        }
        Asks {
            answered: vec![false; tasks.len()],
            tasks,
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

    /// Where `task_id` is in `tasks`: by hash among those sent, else by
    /// binary search among those not sent yet.
    fn position(&self, task_id: &str) -> Option<usize> {
        if let Some(&at) = self.index.get(task_id) {
            return Some(at);
        }
        self.tasks[self.sent..]
            .binary_search_by(|(task, _)| task.as_str().cmp(task_id))
            .ok()
            .map(|i| self.sent + i)
    }

    /// Marks `task_id` answered; false when it is not in the run or had
    /// answered already.
    pub(super) fn answer(&mut self, task_id: &str) -> bool {
        let Some(at) = self.position(task_id) else {
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
                let task = &self.tasks[self.sent];
                self.index.insert(task.0.clone(), self.sent);
                list.push(task.clone());
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn list(ids: &[&str]) -> TaskList {
        ids.iter()
            .map(|id| {
                (
                    TaskId::from(*id),
                    Some(AgentId::from(format!("agent-{id}"))),
                )
            })
            .collect()
    }

    fn ids(list: &TaskList) -> Vec<String> {
        list.iter().map(|(t, _)| t.to_string()).collect()
    }

    #[test]
    fn a_task_is_found_sent_or_not_and_answers_once() {
        let mut asks = Asks::new(list(&["a", "b", "c", "d"]));
        assert!(asks.answer("c"), "an update before its slice went counts");
        assert!(!asks.answer("c"), "once");
        assert!(!asks.answer("zz"), "not in the run");
        assert_eq!(ids(&asks.next_slice(2)), ["a", "b"]);
        assert_eq!(asks.outstanding(), 2);
        assert!(asks.answer("b"));
        assert!(!asks.answer("b"));
        assert_eq!(ids(&asks.next_slice(2)), ["d"], "c answered: not asked");
        assert!(!asks.answer("c"), "answered before it was passed over");
        assert_eq!(ids(&asks.unanswered_sent()), ["a", "d"]);
        assert!(asks.answer("a") && asks.answer("d"));
        assert!(asks.all_answered() && asks.outstanding() == 0);
    }

    #[test]
    fn an_unordered_list_is_sorted_and_a_repeat_keeps_its_first_agent() {
        let mut tasks = list(&["b", "a"]);
        tasks.push((TaskId::from("a"), None));
        let mut asks = Asks::new(tasks);
        assert_eq!(asks.len(), 2);
        let slice = asks.next_slice(5);
        assert_eq!(ids(&slice), ["a", "b"]);
        assert_eq!(slice[0].1, Some(AgentId::from("agent-a")));
        assert!(asks.answer("a"));
    }

    /// One step of [`the_index_answers_as_a_scan_of_the_run_does`].
    #[derive(Debug, Clone)]
    enum Step {
        Answer(u8),
        Slice(u8),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (0u8..40).prop_map(Step::Answer),
            (1u8..6).prop_map(Step::Slice),
        ]
    }

    proptest::proptest! {
        /// For any run (unordered, repeated task IDs) and any interleaving
        /// of answers (of tasks in the run or not) and slices, `Asks`
        /// answers, slices and counts as a plain scan of the run's tasks
        /// does: the reference keeps every task's state in an ordered map.
        #[test]
        fn the_index_answers_as_a_scan_of_the_run_does(
            run in proptest::collection::vec(0u8..30, 0..30),
            steps in proptest::collection::vec(step(), 0..80),
        ) {
            let name = |i: u8| format!("t{i:02}");
            let tasks: TaskList = run.iter().map(|&i| (TaskId::from(name(i)), None)).collect();
            let mut asks = Asks::new(tasks);
            // task → (sent, answered), in task ID order.
            let mut model: BTreeMap<String, (bool, bool)> =
                run.iter().map(|&i| (name(i), (false, false))).collect();
            let unique: BTreeSet<String> = run.iter().map(|&i| name(i)).collect();
            proptest::prop_assert_eq!(asks.len(), unique.len());
            for step in steps {
                match step {
                    Step::Answer(i) => {
                        let want = match model.get_mut(&name(i)) {
                            Some((_, answered)) if !*answered => {
                                *answered = true;
                                true
                            }
                            _ => false,
                        };
                        proptest::prop_assert_eq!(asks.answer(&name(i)), want, "answer {}", name(i));
                    }
                    Step::Slice(n) => {
                        let want: Vec<String> = model
                            .iter_mut()
                            .filter(|(_, (sent, answered))| !*sent && !*answered)
                            .take(usize::from(n))
                            .map(|(task, (sent, _))| {
                                *sent = true;
                                task.clone()
                            })
                            .collect();
                        let got = ids(&asks.next_slice(usize::from(n)));
                        proptest::prop_assert_eq!(&got, &want);
                        // Skipped (answered before their slice) count as
                        // passed over: mark every task up to the last sent.
                        if let Some(last) = want.last() {
                            for (_, (sent, _)) in model.range_mut(..=last.clone()) {
                                *sent = true;
                            }
                        }
                    }
                }
                let outstanding = model.values().filter(|(s, a)| *s && !*a).count();
                proptest::prop_assert_eq!(asks.outstanding(), outstanding);
                proptest::prop_assert_eq!(
                    asks.all_answered(),
                    model.values().all(|(_, a)| *a)
                );
            }
        }
    }
}
