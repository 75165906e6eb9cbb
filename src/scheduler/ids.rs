//! Task, agent and framework IDs as their own types, so neither is mistaken for the
//! other (or for a service name) anywhere in the scheduler. Both are plain
//! strings in JSON and in ZooKeeper (`#[serde(transparent)]`), read as
//! `&str` (`Deref`), and borrow as `&str` so maps keyed by them are looked
//! up with a `&str`. A `&str` never passes for one: build it with `from`.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::mesos::v1;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $proto:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

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
                $name(value)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                $name(value.to_string())
            }
        }

        impl From<$proto> for $name {
            fn from(value: $proto) -> Self {
                $name(value.value)
            }
        }

        impl From<&$proto> for $name {
            fn from(value: &$proto) -> Self {
                $name(value.value.clone())
            }
        }

        impl From<$name> for $proto {
            fn from(value: $name) -> Self {
                <$proto>::from_value(value.0)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
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
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
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
