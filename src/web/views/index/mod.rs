//! The task list's index, one per snapshot: each task's sort and filter
//! keys packed in one array (names as interned numbers, no pointer to
//! follow), the orders by each sort key, and the task IDs as one text for
//! the `q=` search.
//!
//! At 100,000 tasks, sorting the records themselves (two pointers followed
//! per comparison, strings compared) took well over 100 ms per snapshot,
//! and a launch publishes one every ~2 s. So an index is built from the
//! previous snapshot's: a walk over both task lists (sorted by ID, records
//! shared while unchanged) finds the records that are new or changed; only
//! their keys are computed, and each order the previous index had made is
//! the previous order without the changed tasks merged with those tasks
//! sorted on their own. Ties in every order fall back on the list's (ID)
//! order, as a stable sort of the ID-ordered list gives.

mod names;
#[cfg(test)]
mod tests;
mod text;

use std::sync::{Arc, OnceLock};

use names::Names;
use text::IdText;

use super::{Order, SortKey};
use crate::mesos::v1::TaskState;
use crate::scheduler::TaskRecord;

/// No position: the task is gone from (or changed in) the newer list.
const GONE: u32 = u32::MAX;

/// One task's sort and filter keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Keys {
    updated: f64,
    launched: f64,
    service: u32,
    host: u32,
    agent: u32,
    instance: u32,
    state: TaskState,
    /// [`TaskRecord::health`].
    health: Option<bool>,
}

impl Keys {
    /// The keys of `t`, interning its names into `names` (copied first
    /// when shared and a name is new).
    fn of(t: &TaskRecord, names: &mut Arc<Names>) -> Keys {
        Keys {
            updated: t.updated_at,
            launched: t.launched_at,
            service: intern(names, Kind::Service, &t.service),
            host: intern(names, Kind::Host, &t.hostname),
            agent: intern(names, Kind::Agent, t.agent_id.as_str()),
            instance: t.instance,
            state: t.state,
            health: t.health(),
        }
    }
}

/// The ID of `name` among the `kind` names, interned when new. Looks
/// first: the names are shared with the previous index and copied only
/// when one is new.
fn intern(names: &mut Arc<Names>, kind: Kind, name: &str) -> u32 {
    match names.get(kind).id(name) {
        Some(id) => id,
        None => Arc::make_mut(names).get_mut(kind).intern(name),
    }
}

/// Which names.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Service,
    Host,
    Agent,
}

impl Names {
    fn get(&self, kind: Kind) -> &names::Interner {
        match kind {
            Kind::Service => &self.service,
            Kind::Host => &self.host,
            Kind::Agent => &self.agent,
        }
    }

    fn get_mut(&mut self, kind: Kind) -> &mut names::Interner {
        match kind {
            Kind::Service => &mut self.service,
            Kind::Host => &mut self.host,
            Kind::Agent => &mut self.agent,
        }
    }
}

/// `x` as a `u64` that orders as [`f64::total_cmp`] orders the floats.
fn float_order(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// What the walk over an older and a newer task list found.
struct Diff {
    /// Per position in the older list: the same record's position in the
    /// newer one, or [`GONE`] (removed or changed).
    moved: Vec<u32>,
    /// Per position in the newer list: the same record's position in the
    /// older one, or [`GONE`] (new or changed).
    came_from: Vec<u32>,
    /// Positions in the newer list whose records are new or changed.
    fresh: Vec<u32>,
}

/// Matches the records of `old` and `new`, both sorted by task ID: the
/// same record (one pointer) is unchanged, the same ID with another record
/// changed. The positions it pairs increase together, so the pairing is a
/// monotone map even for lists that are not sorted after all (a record it
/// fails to pair is merely recomputed).
fn diff(old: &[Arc<TaskRecord>], new: &[Arc<TaskRecord>]) -> Diff {
    let mut d = Diff {
        moved: vec![GONE; old.len()],
        came_from: vec![GONE; new.len()],
        fresh: Vec::new(),
    };
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < new.len() {
        if Arc::ptr_eq(&old[i], &new[j]) {
            d.moved[i] = j as u32;
            d.came_from[j] = i as u32;
            i += 1;
            j += 1;
            continue;
        }
        match old[i].task_id.as_str().cmp(new[j].task_id.as_str()) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => {
                d.fresh.push(j as u32);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                d.fresh.push(j as u32);
                i += 1;
                j += 1;
            }
        }
    }
    d.fresh.extend(j as u32..new.len() as u32);
    d
}

/// The index of one task list (see the module doc).
#[derive(Debug)]
pub struct TaskIndex {
    /// The list indexed: positions are into it.
    tasks: Arc<[Arc<TaskRecord>]>,
    /// `keys[p]`: the keys of `tasks[p]`.
    keys: Arc<[Keys]>,
    names: Arc<Names>,
    /// Positions by each sort key (not [`SortKey::Id`]: the list's own
    /// order), made on first use or carried over from the previous index.
    orders: [OnceLock<Arc<[u32]>>; SortKey::COUNT],
    /// The IDs for `q=`, made on first use or carried over.
    ids: OnceLock<Arc<IdText>>,
}

/// Positions of one page of matching tasks, and how many match in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Positions in [`TaskIndex::tasks`], in the page's order.
    pub page: Vec<u32>,
    /// Tasks matching the filter.
    pub matched: usize,
}

impl TaskIndex {
    /// The index of `tasks` (sorted by task ID), built from `prev` (the
    /// previous snapshot's) when given: only new and changed records are
    /// read, and the orders and ID text `prev` had are carried over.
    pub fn new(tasks: Arc<[Arc<TaskRecord>]>, prev: Option<&TaskIndex>) -> TaskIndex {
        let Some(prev) = prev else {
            return TaskIndex::full(tasks);
        };
        if Arc::ptr_eq(&prev.tasks, &tasks) {
            return prev.share();
        }
        let built = TaskIndex::from_prev(tasks, prev);
        if built.names_bloated() {
            // Names of departed agents and services pile up otherwise.
            return TaskIndex::full(built.tasks);
        }
        built
    }

    /// The index of `tasks` made from nothing.
    fn full(tasks: Arc<[Arc<TaskRecord>]>) -> TaskIndex {
        let mut names = Arc::new(Names::default());
        let keys: Arc<[Keys]> = tasks.iter().map(|t| Keys::of(t, &mut names)).collect();
        Arc::make_mut(&mut names).rerank();
        TaskIndex {
            tasks,
            keys,
            names,
            orders: Default::default(),
            ids: OnceLock::new(),
        }
    }

    /// The same index (same list), sharing everything made so far.
    fn share(&self) -> TaskIndex {
        TaskIndex {
            tasks: self.tasks.clone(),
            keys: self.keys.clone(),
            names: self.names.clone(),
            orders: std::array::from_fn(|k| {
                let cell = OnceLock::new();
                if let Some(o) = self.orders[k].get() {
                    let _ = cell.set(o.clone());
                }
                cell
            }),
            ids: self
                .ids
                .get()
                .cloned()
                .map_or_else(OnceLock::new, OnceLock::from),
        }
    }

    /// The index of `tasks` from `prev`'s (see [`TaskIndex::new`]).
    fn from_prev(tasks: Arc<[Arc<TaskRecord>]>, prev: &TaskIndex) -> TaskIndex {
        let d = diff(&prev.tasks, &tasks);
        let mut names = prev.names.clone();
        let mut fresh = d.fresh.iter().peekable();
        let mut keys = Vec::with_capacity(tasks.len());
        for (j, (t, &from)) in tasks.iter().zip(&d.came_from).enumerate() {
            match prev.keys.get(from as usize) {
                Some(k) if from != GONE => keys.push(*k),
                _ => {
                    debug_assert_eq!(fresh.next().copied(), Some(j as u32));
                    keys.push(Keys::of(t, &mut names));
                }
            }
        }
        if names.stale() {
            Arc::make_mut(&mut names).rerank();
        }
        let index = TaskIndex {
            tasks,
            keys: keys.into(),
            names,
            orders: Default::default(),
            ids: OnceLock::new(),
        };
        for key in SortKey::ALL {
            if let Some(before) = prev.orders[key as usize].get() {
                let merged = index.merged(key, before, &d.moved, &d.fresh);
                let _ = index.orders[key as usize].set(merged.into());
            }
        }
        if let Some(before) = prev.ids.get() {
            let mut ids = IdText::with_capacity(index.tasks.len(), before.bytes());
            for (t, &from) in index.tasks.iter().zip(&d.came_from) {
                if from == GONE {
                    ids.push(t.task_id.as_str());
                } else {
                    ids.push(before.get(from as usize));
                }
            }
            let _ = index.ids.set(Arc::new(ids));
        }
        index
    }

    /// Whether far more names are interned than the keys use.
    fn names_bloated(&self) -> bool {
        let used = self.used();
        [Kind::Service, Kind::Host, Kind::Agent]
            .into_iter()
            .zip(used)
            .any(|(kind, used)| self.names.get(kind).len() > 2 * used + 64)
    }

    /// How many distinct services, hosts and agents the keys use.
    fn used(&self) -> [usize; 3] {
        let mut seen = [Kind::Service, Kind::Host, Kind::Agent]
            .map(|kind| vec![false; self.names.get(kind).len()]);
        for k in self.keys.iter() {
            for (seen, id) in seen.iter_mut().zip([k.service, k.host, k.agent]) {
                if let Some(s) = seen.get_mut(id as usize) {
                    *s = true;
                }
            }
        }
        seen.map(|s| s.iter().filter(|x| **x).count())
    }

    /// The task list indexed.
    pub fn tasks(&self) -> &Arc<[Arc<TaskRecord>]> {
        &self.tasks
    }

    /// The service names of the task records, sorted, each once.
    pub fn services(&self) -> Vec<&str> {
        let n = &self.names.service;
        let mut seen = vec![false; n.len()];
        for k in self.keys.iter() {
            if let Some(s) = seen.get_mut(k.service as usize) {
                *s = true;
            }
        }
        let mut out: Vec<u32> = (0..n.len() as u32)
            .filter(|id| seen[*id as usize])
            .collect();
        out.sort_unstable_by_key(|id| n.rank(*id));
        out.into_iter().map(|id| n.name(id)).collect()
    }

    /// Task records per state, in the order of the states' names, states
    /// without a record left out; and the records not in a terminal state.
    pub fn state_counts(&self) -> (Vec<(TaskState, usize)>, usize) {
        let mut by_rank = vec![0usize; names::state_count()];
        let mut active = 0;
        for k in self.keys.iter() {
            if let Some(n) = by_rank.get_mut(usize::from(names::state_rank(k.state))) {
                *n += 1;
            }
            active += usize::from(!crate::mesos::is_terminal(k.state));
        }
        let counts = by_rank
            .into_iter()
            .enumerate()
            .filter(|(_, n)| *n > 0)
            .filter_map(|(rank, n)| Some((names::state_of_rank(rank)?, n)))
            .collect();
        (counts, active)
    }

    /// What `key` sorts `k` by; ties fall back on the position.
    fn primary(&self, key: SortKey, k: &Keys) -> u64 {
        match key {
            SortKey::Id => 0,
            SortKey::Service => {
                u64::from(self.names.service.rank(k.service)) << 32 | u64::from(k.instance)
            }
            SortKey::State => u64::from(names::state_rank(k.state)),
            SortKey::Host => u64::from(self.names.host.rank(k.host)),
            SortKey::Updated => float_order(k.updated),
            SortKey::Launched => float_order(k.launched),
        }
    }

    /// `positions` with their sort keys under `key`, sorted.
    fn keyed(&self, key: SortKey, positions: impl Iterator<Item = u32>) -> Vec<(u64, u32)> {
        let mut v: Vec<(u64, u32)> = positions
            .map(|p| (self.primary(key, &self.keys[p as usize]), p))
            .collect();
        // Positions are distinct: unstable is stable here.
        v.sort_unstable();
        v
    }

    /// All positions sorted by `key`, made from nothing.
    fn sorted(&self, key: SortKey) -> Vec<u32> {
        self.keyed(key, 0..self.keys.len() as u32)
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    /// All positions sorted by `key`, from the previous index's order
    /// `before`: its tasks still here (`moved`, monotone) keep their
    /// relative order, the `fresh` ones are sorted and merged in.
    fn merged(&self, key: SortKey, before: &[u32], moved: &[u32], fresh: &[u32]) -> Vec<u32> {
        if fresh.len() > self.keys.len() / 2 {
            return self.sorted(key);
        }
        let fresh = self.keyed(key, fresh.iter().copied());
        let mut kept = before
            .iter()
            .filter_map(|&i| moved.get(i as usize).copied().filter(|&p| p != GONE))
            .map(|p| (self.primary(key, &self.keys[p as usize]), p))
            .peekable();
        let mut fresh = fresh.into_iter().peekable();
        let mut out = Vec::with_capacity(self.keys.len());
        loop {
            let next = match (kept.peek(), fresh.peek()) {
                (Some(a), Some(b)) if a <= b => kept.next(),
                (Some(_), Some(_)) => fresh.next(),
                (Some(_), None) => kept.next(),
                (None, _) => fresh.next(),
            };
            match next {
                Some((_, p)) => out.push(p),
                None => break,
            }
        }
        out
    }

    /// Positions sorted ascending by `key` (ties in list order), made once
    /// per index.
    pub fn order(&self, key: SortKey) -> Arc<[u32]> {
        self.orders[key as usize]
            .get_or_init(|| self.sorted(key).into())
            .clone()
    }

    /// The IDs as one text, made once per index.
    fn ids(&self) -> &IdText {
        self.ids.get_or_init(|| {
            let bytes = self.tasks.iter().map(|t| t.task_id.as_str().len()).sum();
            let mut ids = IdText::with_capacity(self.tasks.len(), bytes);
            for t in self.tasks.iter() {
                ids.push(t.task_id.as_str());
            }
            Arc::new(ids)
        })
    }

    /// The filter `f` over this index's names.
    pub fn filter(&self, f: &Filter) -> Matcher {
        Matcher {
            service: f.service.as_deref().map(|name| self.names.service.id(name)),
            state: f.state,
            health: f.health,
            q: f.q.as_deref().map(|needle| Needle {
                ids: self.ids().containing(needle),
                hosts: self.names.host.containing(needle),
                agents: self.names.agent.containing(needle),
            }),
        }
    }

    /// Page `start..start + per_page` of the tasks `filter` keeps, sorted
    /// by `key` in `order`; only the page's positions are kept.
    pub fn select(
        &self,
        filter: &Filter,
        key: SortKey,
        order: Order,
        start: usize,
        per_page: usize,
    ) -> Selection {
        let n = self.keys.len();
        let by_key = (key != SortKey::Id).then(|| self.order(key));
        let at = |i: usize| -> u32 {
            let i = if order == Order::Desc { n - 1 - i } else { i };
            by_key.as_ref().map_or(i as u32, |o| o[i])
        };
        if filter.is_empty() {
            let end = start.saturating_add(per_page).min(n);
            return Selection {
                page: (start.min(end)..end).map(at).collect(),
                matched: n,
            };
        }
        let m = self.filter(filter);
        let mut page = Vec::with_capacity(per_page.min(n));
        let mut matched = 0usize;
        for i in 0..n {
            let p = at(i);
            if m.keeps(p as usize, &self.keys[p as usize]) {
                if matched >= start && page.len() < per_page {
                    page.push(p);
                }
                matched += 1;
            }
        }
        Selection { page, matched }
    }
}

/// Which tasks a list shows (`service=`, `state=`, `health=`, `q=`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Exact service name.
    pub service: Option<String>,
    /// The state wanted.
    pub state: Option<StateIs>,
    /// [`TaskRecord::health`] wanted (`Some(None)`: no report).
    pub health: Option<Option<bool>>,
    /// Substring of the task ID, agent ID or hostname.
    pub q: Option<String>,
}

impl Filter {
    /// Whether it keeps every task.
    pub fn is_empty(&self) -> bool {
        self.service.is_none() && self.state.is_none() && self.health.is_none() && self.q.is_none()
    }
}

/// A state filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateIs {
    /// Not terminal.
    Active,
    /// Terminal.
    Terminal,
    /// Exactly this state.
    Exactly(TaskState),
}

/// A [`Filter`] over one index's names and IDs.
#[derive(Debug)]
pub struct Matcher {
    /// `Some(None)`: a service no task has.
    service: Option<Option<u32>>,
    state: Option<StateIs>,
    health: Option<Option<bool>>,
    q: Option<Needle>,
}

/// Which task IDs, hostnames and agent IDs hold the `q=` text.
#[derive(Debug)]
struct Needle {
    ids: Vec<bool>,
    hosts: Vec<bool>,
    agents: Vec<bool>,
}

impl Matcher {
    /// Whether the task at position `p`, whose keys are `k`, is kept.
    fn keeps(&self, p: usize, k: &Keys) -> bool {
        self.service.is_none_or(|s| s == Some(k.service))
            && self.state.is_none_or(|s| match s {
                StateIs::Active => !crate::mesos::is_terminal(k.state),
                StateIs::Terminal => crate::mesos::is_terminal(k.state),
                StateIs::Exactly(state) => k.state == state,
            })
            && self.health.is_none_or(|h| k.health == h)
            && self.q.as_ref().is_none_or(|q| {
                let has = |v: &Vec<bool>, i: usize| v.get(i).copied().unwrap_or(false);
                has(&q.ids, p) || has(&q.hosts, k.host as usize) || has(&q.agents, k.agent as usize)
            })
    }
}
