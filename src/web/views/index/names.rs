//! Names as small numbers: the service names, hostnames and agent IDs of
//! the task records interned once, each with its rank in string order, and
//! the rank of each Mesos task state's name. Comparing two ranks orders
//! the names as comparing the strings would, without following a pointer.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::mesos::v1::TaskState;

/// Distinct strings, each given an ID when first seen, with their ranks.
///
/// IDs never change while the interner lives, so keys stored with an older
/// copy stay valid in a newer one; ranks do change as names are added, but
/// only by making room: two names compare the same way under any copy.
#[derive(Debug, Clone, Default)]
pub(super) struct Interner {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
    /// `rank[id]`: the position of `names[id]` among all names sorted.
    rank: Vec<u32>,
}

impl Interner {
    /// The ID of `name`, when interned.
    pub(super) fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The ID of `name`, interning it when new (ranks are stale until
    /// [`Interner::rerank`]).
    pub(super) fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        // At most u32::MAX names: a snapshot holds far fewer tasks.
        let id = self.names.len() as u32;
        let name: Arc<str> = name.into();
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    /// Recomputes the ranks after names were added.
    pub(super) fn rerank(&mut self) {
        if self.rank.len() == self.names.len() {
            return;
        }
        let mut by_name: Vec<u32> = (0..self.names.len() as u32).collect();
        by_name.sort_unstable_by(|a, b| self.names[*a as usize].cmp(&self.names[*b as usize]));
        self.rank = vec![0; self.names.len()];
        for (rank, id) in by_name.into_iter().enumerate() {
            self.rank[id as usize] = rank as u32;
        }
    }

    /// Whether names were added since the ranks were made.
    pub(super) fn stale(&self) -> bool {
        self.rank.len() != self.names.len()
    }

    /// The rank of name `id` (0 for an unknown ID, which no key holds).
    pub(super) fn rank(&self, id: u32) -> u32 {
        self.rank.get(id as usize).copied().unwrap_or(0)
    }

    /// Name `id`.
    pub(super) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |n| n)
    }

    /// How many names there are.
    pub(super) fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether each name contains `needle`, by ID.
    pub(super) fn containing(&self, needle: &str) -> Vec<bool> {
        self.names.iter().map(|n| n.contains(needle)).collect()
    }
}

/// The interned names of one task list's records.
#[derive(Debug, Clone, Default)]
pub(super) struct Names {
    /// Service names.
    pub(super) service: Interner,
    /// Agent hostnames.
    pub(super) host: Interner,
    /// Agent IDs.
    pub(super) agent: Interner,
}

impl Names {
    /// Whether any ranks are stale.
    pub(super) fn stale(&self) -> bool {
        self.service.stale() || self.host.stale() || self.agent.stale()
    }

    /// Recomputes the ranks of all three.
    pub(super) fn rerank(&mut self) {
        self.service.rerank();
        self.host.rerank();
        self.agent.rerank();
    }
}

/// The state names, sorted, and each state's rank among them.
struct StateTable {
    /// `rank[state as usize]`, for the enum's values (0..=255).
    rank: [u8; 256],
    /// The names in rank order.
    names: Vec<(&'static str, TaskState)>,
}

fn table() -> &'static StateTable {
    static TABLE: OnceLock<StateTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut names: Vec<(&'static str, TaskState)> = (0..=i32::from(u8::MAX))
            .filter_map(|n| TaskState::try_from(n).ok())
            .map(|s| (s.as_str_name(), s))
            .collect();
        names.sort_unstable();
        let mut rank = [0u8; 256];
        for (r, (_, s)) in names.iter().enumerate() {
            if let Some(slot) = usize::try_from(*s as i32)
                .ok()
                .and_then(|i| rank.get_mut(i))
            {
                *slot = r as u8;
            }
        }
        StateTable { rank, names }
    })
}

/// The rank of `state`'s name among all state names (the order of
/// `sort=state`).
pub(super) fn state_rank(state: TaskState) -> u8 {
    usize::try_from(state as i32)
        .ok()
        .and_then(|i| table().rank.get(i))
        .copied()
        .unwrap_or(0)
}

/// How many task states there are.
pub(super) fn state_count() -> usize {
    table().names.len()
}

/// The state of rank `rank`.
pub(super) fn state_of_rank(rank: usize) -> Option<TaskState> {
    table().names.get(rank).map(|(_, s)| *s)
}
