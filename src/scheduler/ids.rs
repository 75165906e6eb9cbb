//! Task, agent and framework IDs as their own types, so neither is mistaken for the
//! other (or for a service name) anywhere in the scheduler. Both are plain
//! strings in JSON and in ZooKeeper (`#[serde(transparent)]`), read as
//! `&str` (`Deref`), and borrow as `&str` so maps keyed by them are looked
//! up with a `&str`. A `&str` never passes for one: build it with `from`.
//!
//! An ID holds its text in an `Arc<str>`: the task table, its per-service
//! index, the snapshot's agent list and a reconciliation's task list all
//! name the same task, and a clone copies a pointer instead of the text
//! (about 50 bytes per copy of a task ID; `benches/memory.py`).

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::mesos::v1;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $proto:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(transparent)]
        #[schema(value_type = String)]
        pub struct $name(Arc<str>);

        impl $name {
            /// The ID as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// True for the empty ID (a record written before the agent was
            /// known).
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }

            /// The protobuf message Mesos calls carry.
            pub fn to_proto(&self) -> $proto {
                <$proto>::from(self.clone())
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                $name(Arc::from(value))
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                $name(Arc::from(value))
            }
        }

        impl From<$proto> for $name {
            fn from(value: $proto) -> Self {
                $name(Arc::from(value.value))
            }
        }

        impl From<&$proto> for $name {
            fn from(value: &$proto) -> Self {
                $name(Arc::from(value.value.as_str()))
            }
        }

        impl From<$name> for $proto {
            fn from(value: $name) -> Self {
                <$proto>::from_value(value.0.to_string())
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0.to_string()
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                *self.0 == **other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                **self == *other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                **self == *other.0
            }
        }
    };
}

/// Building the protobuf ID messages from a string.
trait FromValue {
    fn from_value(value: String) -> Self;
}

impl FromValue for v1::TaskId {
    fn from_value(value: String) -> Self {
        v1::TaskId { value }
    }
}

impl FromValue for v1::FrameworkId {
    fn from_value(value: String) -> Self {
        v1::FrameworkId { value }
    }
}

impl FromValue for v1::AgentId {
    fn from_value(value: String) -> Self {
        v1::AgentId { value }
    }
}

string_id!(
    /// A Mesos task ID; ours are `<service>.<instance>.<uuid>`.
    TaskId,
    v1::TaskId
);

string_id!(
    /// A Mesos framework ID, as the master assigns it.
    FrameworkId,
    v1::FrameworkId
);

string_id!(
    /// A Mesos agent ID, as the master assigns it.
    AgentId,
    v1::AgentId
);

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn ids_are_strings_on_the_wire_and_keys_by_str() {
        let id = TaskId::from("web.0.abc");
        assert_eq!(serde_json::to_string(&id).unwrap(), r#""web.0.abc""#);
        let back: TaskId = serde_json::from_str(r#""web.0.abc""#).unwrap();
        assert_eq!(back, id);
        let mut map = BTreeMap::new();
        map.insert(id.clone(), 1);
        assert_eq!(map.get("web.0.abc"), Some(&1));
        assert_eq!(id.to_proto().value, "web.0.abc");
        assert!(id == "web.0.abc" && AgentId::default().is_empty());
    }
}

/// Where the core's task IDs come from: a seeded generator, so that one seed
/// and one input sequence give one run (the machine's tests replay a run
/// from its seed). Production seeds it from the OS at the start of each
/// term ([`IdSource::from_os`]).
///
/// The generator is SplitMix64: a 64-bit counter stepped by an odd constant
/// and passed through a bijective mix, so one source never repeats an
/// output within 2⁶⁴ draws. Two sources with random seeds overlap only if
/// their counters meet: with n draws per term, about n / 2⁶⁴ (nothing).
/// It is not a cryptographic generator: task IDs need to be unique, not
/// secret.
#[derive(Debug, Clone)]
pub struct IdSource {
    state: u64,
}

impl IdSource {
    /// A source that gives the same IDs for the same `seed`.
    pub fn seeded(seed: u64) -> IdSource {
        IdSource { state: seed }
    }

    /// A source seeded from the operating system's random generator.
    pub fn from_os() -> IdSource {
        IdSource::seeded(rand::random())
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next UUID, shaped as a version 4 (random) UUID as before, so
    /// task IDs keep their `<service>.<instance>.<uuid>` form.
    pub fn uuid(&mut self) -> uuid::Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

#[cfg(test)]
mod id_source_tests {
    use super::IdSource;

    #[test]
    fn a_seed_gives_the_same_uuids_and_another_seed_others() {
        let draw = |seed| {
            let mut ids = IdSource::seeded(seed);
            [ids.uuid(), ids.uuid()]
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        let [a, b] = draw(0);
        assert_ne!(a, b);
        assert_eq!(a.get_version_num(), 4);
    }
}
