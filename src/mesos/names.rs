//! The Mesos enums the scheduler stores and shows, as their Mesos names.
//!
//! [`v1::TaskState`], [`task_status::Source`] and [`task_status::Reason`]
//! serialize as the protobuf value names of `include/mesos/v1/mesos.proto`
//! (`TASK_RUNNING`, `SOURCE_AGENT`, `REASON_RECONCILIATION`) and display the
//! same way. So task records in ZooKeeper, the JSON API and the pages keep
//! the strings they always had while the code handles enums.
//!
//! Deserializing an unknown name is an error; [`lenient_task_state`] and
//! [`lenient_source`] / [`lenient_reason`] are the forgiving forms stored
//! records use (a name written by a newer Mesos or by hand must not make a
//! whole record unreadable).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::v1::{self, task_status};

/// Implements `Serialize`, `Deserialize` and `Display` by Mesos name.
macro_rules! by_mesos_name {
    ($ty:ty, $what:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str_name())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = deserializer.deserialize_str(NameVisitor($what))?;
                <$ty>::from_str_name(&name)
                    .ok_or_else(|| de::Error::custom(format!("unknown {} {name:?}", $what)))
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str_name())
            }
        }
    };
}

by_mesos_name!(v1::TaskState, "task state");
by_mesos_name!(task_status::Source, "status source");
by_mesos_name!(task_status::Reason, "status reason");

/// Reads a string without copying it when the input allows.
struct NameVisitor(&'static str);

impl Visitor<'_> for NameVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a Mesos {} name", self.0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
}

/// A task state from a stored record: a name this build does not know
/// reads as `TASK_UNKNOWN`, so the task is reconciled rather than dropped.
pub fn lenient_task_state<'de, D: Deserializer<'de>>(d: D) -> Result<v1::TaskState, D::Error> {
    let name = d.deserialize_str(NameVisitor("task state"))?;
    Ok(v1::TaskState::from_str_name(&name).unwrap_or(v1::TaskState::TaskUnknown))
}

/// A status source from a stored record: `""` (absent) or an unknown name
/// reads as `None`.
pub fn lenient_source<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<task_status::Source>, D::Error> {
    let name = Option::<String>::deserialize(d)?;
    Ok(name.and_then(|n| task_status::Source::from_str_name(&n)))
}

/// Writes an absent source as `""`, the shape records always had.
pub fn source_or_empty<S: Serializer>(
    source: &Option<task_status::Source>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(source.map_or("", |s| s.as_str_name()))
}

/// A status reason from a stored record: an unknown name reads as `None`.
pub fn lenient_reason<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<task_status::Reason>, D::Error> {
    let name = Option::<String>::deserialize(d)?;
    Ok(name.and_then(|n| task_status::Reason::from_str_name(&n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_travel_as_their_mesos_names() {
        let json = serde_json::to_string(&v1::TaskState::TaskGoneByOperator).unwrap();
        assert_eq!(json, r#""TASK_GONE_BY_OPERATOR""#);
        let back: v1::TaskState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v1::TaskState::TaskGoneByOperator);
        assert_eq!(task_status::Source::Agent.to_string(), "SOURCE_AGENT");
        let reason: task_status::Reason =
            serde_json::from_str(r#""REASON_RECONCILIATION""#).unwrap();
        assert_eq!(reason, task_status::Reason::Reconciliation);
        let bad = serde_json::from_str::<v1::TaskState>(r#""TASK_SLEEPING""#).unwrap_err();
        assert!(bad.to_string().contains("unknown task state"), "{bad}");
    }

    #[test]
    fn lenient_forms_keep_a_record_readable() {
        #[derive(Deserialize)]
        struct Entry {
            #[serde(deserialize_with = "lenient_task_state")]
            state: v1::TaskState,
            #[serde(default, deserialize_with = "lenient_source")]
            source: Option<task_status::Source>,
            #[serde(default, deserialize_with = "lenient_reason")]
            reason: Option<task_status::Reason>,
        }
        let e: Entry = serde_json::from_str(
            r#"{"state": "TASK_SLEEPING", "source": "", "reason": "REASON_NEW_IN_2030"}"#,
        )
        .unwrap();
        assert_eq!(e.state, v1::TaskState::TaskUnknown);
        assert_eq!((e.source, e.reason), (None, None));
    }
}
