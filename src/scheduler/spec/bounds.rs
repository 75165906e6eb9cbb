//! The ranges of the numeric fields of service and job specs, and the one
//! message each field gives, whichever way its number is wrong: of the
//! wrong type, a fraction where a whole number is due, outside what the
//! Rust type holds (`-1` or `4294967296` for `instances`: the decoder,
//! through the fields' `deserialize_with`), or outside the field's range
//! (`10001`: validation). A decoded value the type holds but the range
//! does not is left to validation, so that a stored record always reads.

use serde::Deserializer;
use serde::de::{self, Visitor};

use super::errors::FieldError;

/// A numeric field's range and its message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// Smallest value taken.
    pub min: f64,
    /// Largest value taken.
    pub max: f64,
    /// Whole numbers only.
    pub whole: bool,
    /// Said after the range (` (MB)`), or empty.
    pub unit: &'static str,
}

impl Bound {
    /// The field's one message, e.g. `must be a whole number from 0 to
    /// 10000`.
    pub fn message(&self) -> String {
        let kind = if self.whole {
            "a whole number"
        } else {
            "a number"
        };
        format!(
            "must be {kind} from {} to {}{}",
            self.min, self.max, self.unit
        )
    }

    /// Whether `value` is in range.
    pub fn admits(&self, value: f64) -> bool {
        value >= self.min && value <= self.max && (!self.whole || value.fract() == 0.0)
    }

    /// The field error of `field` when `value` is out of range.
    pub fn check(&self, field: impl Into<String>, value: f64) -> Option<FieldError> {
        (!self.admits(value)).then(|| FieldError {
            field: field.into(),
            message: self.message(),
        })
    }
}

const fn whole(min: u32, max: u32, unit: &'static str) -> Bound {
    Bound {
        min: min as f64,
        max: max as f64,
        whole: true,
        unit,
    }
}

/// `instances` of a service.
pub const INSTANCES: Bound = whole(0, super::service::MAX_INSTANCES, "");
/// `ports` of a service or job: ports per task.
pub const PORTS: Bound = whole(0, 100, " (ports per task)");
/// `cpus` of a service or job.
pub const CPUS: Bound = Bound {
    min: 0.01,
    max: super::service::MAX_SCALAR,
    whole: false,
    unit: "",
};
/// `mem` of a service or job.
pub const MEM: Bound = Bound {
    min: 1.0,
    max: super::service::MAX_SCALAR,
    whole: false,
    unit: " (MB)",
};
/// `disk` of a service or job.
pub const DISK: Bound = Bound {
    min: 0.0,
    max: super::service::MAX_SCALAR,
    whole: false,
    unit: " (MB)",
};
/// `retries.count` of a job: attempts after the first.
pub const RETRIES: Bound = whole(0, super::job::MAX_RETRIES, "");
/// `history` of a job: finished runs kept.
pub const HISTORY: Bound = whole(1, super::job::MAX_HISTORY, "");
/// `health_check.consecutive_failures`.
pub const CONSECUTIVE_FAILURES: Bound = whole(1, super::health::MAX_CONSECUTIVE_FAILURES, "");
/// `container.docker.port_mappings[i].container_port`.
pub const CONTAINER_PORT: Bound = whole(1, 65_535, "");

/// `health_check.port`: a fixed port.
pub const PORT: Bound = whole(1, 65_535, "");

/// Where each bound applies in the OpenAPI document: (component schema,
/// property, bound). `crate::web::openapi` writes the bounds into the
/// schemas as `minimum`/`maximum`, so a client can check a spec before
/// sending it; the decoder and validation read the same consts.
pub const SCHEMA_FIELDS: &[(&str, &str, Bound)] = &[
    ("ServiceSpec", "cpus", CPUS),
    ("ServiceSpec", "mem", MEM),
    ("ServiceSpec", "disk", DISK),
    ("ServiceSpec", "ports", PORTS),
    ("ServiceSpec", "instances", INSTANCES),
    ("JobSpec", "cpus", CPUS),
    ("JobSpec", "mem", MEM),
    ("JobSpec", "disk", DISK),
    ("JobSpec", "ports", PORTS),
    ("JobSpec", "history", HISTORY),
    ("RetrySpec", "count", RETRIES),
    (
        "HealthCheckSpec",
        "consecutive_failures",
        CONSECUTIVE_FAILURES,
    ),
    ("HealthCheckSpec", "port", PORT),
    ("PortMappingSpec", "container_port", CONTAINER_PORT),
];

/// The one message of `health_check.port_index`, whose range is the
/// service's `ports`.
pub const PORT_INDEX: &str =
    "must be the index of one of the service's ports: a whole number below `ports`";

/// Serde's `deserialize_with` of `health_check.port` (`null` or absent:
/// `None`; pair with `default`).
///
/// # Errors
/// [`PORT`]'s message for anything but `null` or a number a `u32` holds.
pub fn port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    optional_u32(d, PORT, PORT.message())
}

/// Serde's `deserialize_with` of `health_check.port_index`, as [`port`].
///
/// # Errors
/// [`PORT_INDEX`] for anything but `null` or a number a `u32` holds.
pub fn port_index<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    optional_u32(d, whole(0, u32::MAX, ""), PORT_INDEX.to_string())
}

/// `null` (`None`) or a whole number a `u32` holds; `message` else.
fn optional_u32<'de, D: Deserializer<'de>>(
    d: D,
    bound: Bound,
    message: String,
) -> Result<Option<u32>, D::Error> {
    struct Optional(Bound);
    impl<'de> Visitor<'de> for Optional {
        type Value = Option<u32>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0.message())
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<u32>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<u32>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
            whole_u32(d, self.0).map(Some)
        }
    }
    d.deserialize_option(Optional(bound))
        .map_err(|_: D::Error| de::Error::custom(message))
}

/// Reads any JSON number as `f64`; anything else is refused with
/// `bound`'s message.
struct Number(Bound);

impl Visitor<'_> for Number {
    type Value = f64;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
}

fn number<'de, D: Deserializer<'de>>(d: D, bound: Bound) -> Result<f64, D::Error> {
    // Our own message, not serde's "invalid type: …, expected …".
    d.deserialize_any(Number(bound))
        .map_err(|_: D::Error| de::Error::custom(bound.message()))
}

fn whole_u32<'de, D: Deserializer<'de>>(d: D, bound: Bound) -> Result<u32, D::Error> {
    let v = number(d, bound)?;
    if v.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&v) {
        return Err(de::Error::custom(bound.message()));
    }
    Ok(v as u32)
}

fn scalar<'de, D: Deserializer<'de>>(d: D, bound: Bound) -> Result<f64, D::Error> {
    let v = number(d, bound)?;
    if !v.is_finite() {
        return Err(de::Error::custom(bound.message()));
    }
    Ok(v)
}

macro_rules! fields {
    ($($(#[$doc:meta])* $name:ident: $read:ident -> $ty:ty = $bound:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// # Errors
        /// The bound's message for anything but a number the type holds.
        pub fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
            $read(d, $bound)
        }
    )*};
}

fields! {
    /// Serde's `deserialize_with` of `instances`.
    instances: whole_u32 -> u32 = INSTANCES;
    /// Of `ports`.
    ports: whole_u32 -> u32 = PORTS;
    /// Of `cpus`.
    cpus: scalar -> f64 = CPUS;
    /// Of `mem`.
    mem: scalar -> f64 = MEM;
    /// Of `disk`.
    disk: scalar -> f64 = DISK;
    /// Of `retries.count`.
    retries: whole_u32 -> u32 = RETRIES;
    /// Of `history`.
    history: whole_u32 -> u32 = HISTORY;
    /// Of `health_check.consecutive_failures`.
    consecutive_failures: whole_u32 -> u32 = CONSECUTIVE_FAILURES;
    /// Of `container_port`.
    container_port: whole_u32 -> u32 = CONTAINER_PORT;
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::scheduler::spec::{JobSpec, ServiceSpec};

    /// The field errors of `spec` with `path` set to `value`, from the
    /// decoder or, when it decodes, from validation.
    fn errors<T: serde::de::DeserializeOwned>(
        mut spec: Value,
        path: &str,
        value: Value,
        validate: fn(&T) -> Vec<FieldError>,
    ) -> Vec<FieldError> {
        *spec.pointer_mut(path).expect(path) = value;
        match crate::util::json::from_value::<T>(spec) {
            Ok(spec) => validate(&spec),
            Err(e) => vec![FieldError {
                field: e.path,
                message: e.message,
            }],
        }
    }

    #[test]
    fn one_message_per_field_whichever_way_the_number_is_wrong() {
        let service = json!({
            "name": "web", "command": "true", "cpus": 0.1, "mem": 32, "disk": 0,
            "ports": 1, "instances": 1,
            "health_check": {"type": "tcp", "port": 80, "consecutive_failures": 3},
            "container": {"docker": {"image": "nginx", "network": "BRIDGE",
                "port_mappings": [{"container_port": 80}]}}
        });
        let job = json!({
            "name": "report", "command": "true", "cpus": 0.1, "mem": 32,
            "retries": {"count": 1}, "history": 10
        });
        let wrong = |bound: Bound| {
            let above = if bound.whole {
                bound.max + 1.0
            } else {
                bound.max * 2.0
            };
            let mut values = vec![
                json!(-1),
                json!(above),
                json!("3"),
                json!(1e300),
                json!(true),
            ];
            if bound.whole {
                values.extend([json!(4_294_967_296_u64), json!(1.5)]);
            }
            values
        };
        let cases: [(&str, &str, Bound); 9] = [
            ("/instances", "instances", INSTANCES),
            ("/ports", "ports", PORTS),
            ("/cpus", "cpus", CPUS),
            ("/mem", "mem", MEM),
            ("/disk", "disk", DISK),
            ("/health_check/port", "health_check.port", PORT),
            (
                "/health_check/consecutive_failures",
                "health_check.consecutive_failures",
                CONSECUTIVE_FAILURES,
            ),
            (
                "/container/docker/port_mappings/0/container_port",
                "container.docker.port_mappings[0].container_port",
                CONTAINER_PORT,
            ),
            ("/cpus", "cpus", CPUS),
        ];
        for (path, field, bound) in cases {
            assert!(
                errors(
                    service.clone(),
                    path,
                    json!(bound.max),
                    ServiceSpec::validate
                )
                .is_empty(),
                "{path} at its max: {:?}",
                errors(
                    service.clone(),
                    path,
                    json!(bound.max),
                    ServiceSpec::validate
                )
            );
            for value in wrong(bound) {
                let got = errors(service.clone(), path, value.clone(), ServiceSpec::validate);
                let want = vec![FieldError {
                    field: field.into(),
                    message: bound.message(),
                }];
                assert_eq!(got, want, "{path} = {value}");
            }
        }
        // `port_index`'s range is the service's ports (1 here).
        for value in [
            json!(-1),
            json!(1),
            json!(4_294_967_296_u64),
            json!("0"),
            json!(0.5),
        ] {
            let mut spec = service.clone();
            spec["health_check"] = json!({"type": "tcp", "port_index": value});
            let got = errors(spec, "/ports", json!(1), ServiceSpec::validate);
            let want = vec![FieldError {
                field: "health_check.port_index".into(),
                message: PORT_INDEX.into(),
            }];
            assert_eq!(got, want, "port_index = {value}");
        }
        for (path, field, bound) in [
            ("/retries/count", "retries.count", RETRIES),
            ("/history", "history", HISTORY),
            ("/cpus", "cpus", CPUS),
            ("/mem", "mem", MEM),
        ] {
            for value in wrong(bound) {
                let got = errors(job.clone(), path, value.clone(), JobSpec::validate);
                let want = vec![FieldError {
                    field: field.into(),
                    message: bound.message(),
                }];
                assert_eq!(got, want, "{path} = {value}");
            }
        }
    }

    #[test]
    fn messages_read_well() {
        assert_eq!(
            INSTANCES.message(),
            "must be a whole number from 0 to 10000"
        );
        assert_eq!(CPUS.message(), "must be a number from 0.01 to 1000000");
        assert_eq!(MEM.message(), "must be a number from 1 to 1000000 (MB)");
        assert!(INSTANCES.admits(10_000.0) && !INSTANCES.admits(10_001.0));
        assert!(!INSTANCES.admits(1.5) && CPUS.admits(1.5));
    }
}
