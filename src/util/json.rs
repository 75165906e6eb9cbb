//! Strict JSON for what operators write (service specs, `--services`
//! files, action bodies): a key given twice in one object is refused —
//! `serde_json` would keep the last one silently — and every error names
//! the JSON path of the value it is about (`health_check.interval`,
//! `constraints[0]`, `env.A`, `[2].cpus`), as `serde_path_to_error` tracks
//! it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Why JSON was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct JsonError {
    /// The path of the value at fault (`health_check.interval`,
    /// `constraints[0]`); empty for the whole document.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
    /// True when the text is not JSON at all (a syntax error or early end).
    pub syntax: bool,
}

/// The message of a key given twice.
pub const DUPLICATE_KEY: &str = "given more than once; a key may appear once per object";

/// Parses `text` as a `T`.
///
/// # Errors
/// Not JSON (`syntax`), a key given twice in one object, or a value `T`
/// refuses, each with the path of the value.
pub fn parse<T: DeserializeOwned>(text: &[u8]) -> Result<T, JsonError> {
    check_unique_keys(text)?;
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(path_error)?;
    de.end().map_err(|e| JsonError {
        path: String::new(),
        message: e.to_string(),
        syntax: true,
    })?;
    Ok(value)
}

/// `value` (already parsed, e.g. by [`parse`]) as a `T`.
///
/// # Errors
/// A value `T` refuses, with its path.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, JsonError> {
    serde_path_to_error::deserialize(value).map_err(path_error)
}

/// The error with its path; a missing or unknown field's error, which
/// serde raises on the object holding it, gets the field's own path.
fn path_error(e: serde_path_to_error::Error<serde_json::Error>) -> JsonError {
    let mut path = e.path().to_string();
    if path == "." {
        path.clear();
    }
    let inner = e.into_inner();
    let message = without_rust_names(&inner.to_string());
    let named = ["missing field `", "unknown field `", "duplicate field `"]
        .iter()
        .find_map(|start| message.strip_prefix(start)?.split('`').next());
    // serde_path_to_error already ends the path of an unknown field with
    // its key (it read the key before the type refused it); not a missing one.
    let already_named = |field: &str| path == field || path.ends_with(&format!(".{field}"));
    if let Some(field) = named.filter(|field| !already_named(field)) {
        path = if path.is_empty() {
            field.to_string()
        } else {
            format!("{path}.{field}")
        };
    }
    JsonError {
        path,
        syntax: inner.is_syntax() || inner.is_eof(),
        message,
    }
}

/// serde's names of primitive types and what they are in JSON.
const PRIMITIVES: [(&str, &str); 12] = [
    ("f64", "a number"),
    ("f32", "a number"),
    ("u8", "a whole number from 0 to 255"),
    ("u16", "a whole number from 0 to 65535"),
    ("u32", "a whole number from 0 to 4294967295"),
    ("u64", "a whole number from 0 to 18446744073709551615"),
    ("usize", "a whole number from 0 to 18446744073709551615"),
    ("i8", "a whole number from -128 to 127"),
    ("i16", "a whole number from -32768 to 32767"),
    ("i32", "a whole number from -2147483648 to 2147483647"),
    (
        "i64",
        "a whole number from -9223372036854775808 to 9223372036854775807",
    ),
    (
        "isize",
        "a whole number from -9223372036854775808 to 9223372036854775807",
    ),
];

/// `message` with serde's names of our Rust types (`expected struct
/// UnreachablePolicy`) said in JSON's words (`expected an object`;
/// `expected f64` becomes `expected a number`): the
/// operator wrote JSON and never sees the type names.
fn without_rust_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "expected ".len()..];
        let (kind, json) = if after.starts_with("struct ") {
            ("struct ", "expected an object")
        } else if after.starts_with("enum ") {
            ("enum ", "expected a string naming one of its values")
        } else if let Some((rust, json)) = PRIMITIVES.iter().find(|(rust, _)| {
            after.starts_with(rust)
                && !after[rust.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        }) {
            out.push_str("expected ");
            out.push_str(json);
            rest = &after[rust.len()..];
            continue;
        } else {
            out.push_str("expected ");
            rest = after;
            continue;
        };
        let name = &after[kind.len()..];
        let end = name
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(name.len());
        out.push_str(json);
        rest = &name[end..];
    }
    out.push_str(rest);
    out
}

/// Walks `text` once and refuses the first key given twice in an object
/// (nesting is bounded by `serde_json`'s recursion limit).
fn check_unique_keys(text: &[u8]) -> Result<(), JsonError> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(text);
    let walked = Unique {
        path: String::new(),
        duplicate: &duplicate,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    if let Some(path) = duplicate.into_inner() {
        return Err(JsonError {
            path,
            message: DUPLICATE_KEY.into(),
            syntax: false,
        });
    }
    walked.map_err(|e| JsonError {
        path: String::new(),
        message: e.to_string(),
        syntax: true,
    })
}

/// A value at `path`; records the path of the first duplicate key.
struct Unique<'a> {
    path: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Unique {
                path: format!("{}[{i}]", self.path),
                duplicate: self.duplicate,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom(DUPLICATE_KEY));
            }
            map.next_value_seed(Unique {
                path,
                duplicate: self.duplicate,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time written to ZooKeeper reads back equal (serde_json's
    /// `float_roundtrip`): this one came back one bit off without it, and
    /// a standby's run history then differed from the leader's.
    #[test]
    fn times_read_back_equal() {
        let at = 1_796_251_608.507_413_9_f64;
        let text = serde_json::to_string(&at).unwrap();
        assert_eq!(serde_json::from_str::<f64>(&text).unwrap(), at);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(from_value::<f64>(value).unwrap(), at);
    }

    #[test]
    fn type_errors_name_json_kinds_not_rust_types() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Outer {
            policy: Policy,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Policy {
            kill: Kill,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Kill {
            Old,
        }
        let e = parse::<Outer>(br#"{"policy": "always"}"#).unwrap_err();
        assert_eq!(e.path, "policy");
        assert!(
            e.message
                .starts_with(r#"invalid type: string "always", expected an object"#),
            "{}",
            e.message
        );
        for kill in ["3", "[]", r#"{"a": 1}"#] {
            let text = format!(r#"{{"policy": {{"kill": {kill}}}}}"#);
            let e = parse::<Outer>(text.as_bytes()).unwrap_err();
            assert_eq!(e.path, "policy.kill");
            assert!(!e.message.contains("Kill"), "{}", e.message);
        }
        assert_eq!(
            without_rust_names("invalid type: map, expected enum Kill"),
            "invalid type: map, expected a string naming one of its values"
        );
        assert_eq!(
            without_rust_names("invalid type: map, expected struct A_b at line 1"),
            "invalid type: map, expected an object at line 1"
        );
        assert_eq!(without_rust_names("expected `old`"), "expected `old`");
        // Primitive types name JSON numbers, not Rust types.
        assert_eq!(
            without_rust_names(r#"invalid type: string "a", expected f64"#),
            r#"invalid type: string "a", expected a number"#
        );
        assert_eq!(
            without_rust_names("invalid value: integer `-1`, expected u32 at line 1"),
            "invalid value: integer `-1`, expected a whole number from 0 to 4294967295 at line 1"
        );
        assert_eq!(
            without_rust_names("expected i64"),
            "expected a whole number from -9223372036854775808 to 9223372036854775807"
        );
        assert_eq!(without_rust_names("expected u32s"), "expected u32s");
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Spec {
        cpus: f64,
        #[serde(default)]
        env: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        nested: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        port: u16,
    }

    fn error(text: &str) -> JsonError {
        parse::<Spec>(text.as_bytes()).unwrap_err()
    }

    #[test]
    fn keys_given_twice_are_refused_with_their_path() {
        for (text, path) in [
            (r#"{"cpus": 1, "cpus": 2}"#, "cpus"),
            (r#"{"cpus": 1, "env": {"A": "1", "A": "2"}}"#, "env.A"),
            (
                r#"{"cpus": 1, "nested": [{"port": 1}, {"port": 1, "port": 2}]}"#,
                "nested[1].port",
            ),
        ] {
            let e = error(text);
            assert_eq!(
                (e.path.as_str(), e.message.as_str()),
                (path, DUPLICATE_KEY),
                "{text}"
            );
            assert!(!e.syntax);
        }
        let value: serde_json::Value = parse(br#"[{"a": 1}, {"a": 2}]"#).unwrap();
        assert_eq!(value[1]["a"], 2, "the same key in two objects is fine");
    }

    #[test]
    fn errors_name_the_json_path() {
        let e = error(r#"{"cpus": 1, "nested": [{"port": 1}, {"port": "x"}]}"#);
        assert_eq!(e.path, "nested[1].port");
        assert!(e.message.contains("invalid type"), "{e}");
        assert_eq!(e.to_string(), format!("nested[1].port: {}", e.message));
        let e = error(r#"{"cpus": "many"}"#);
        assert_eq!(e.path, "cpus");
        let e = error(r#"{"nested": []}"#);
        assert_eq!(e.path, "cpus", "missing: {e}");
        let e = error(r#"{"cpus": 1, "nested": [{"port": 1, "host": "h"}]}"#);
        assert_eq!(e.path, "nested[0].host", "unknown: {e:?}");
        let e = error(r#"{"cpus": 1, "bogus": 2}"#);
        assert_eq!(e.path, "bogus", "unknown at the top: {e:?}");
        let e = error(r#"{"cpus": 1,"#);
        assert!(e.syntax && e.path.is_empty(), "{e:?}");
        let e = error(r#"{"cpus": 1} {}"#);
        assert!(e.syntax, "trailing characters: {e:?}");
        let e = from_value::<Spec>(serde_json::json!({"cpus": 1, "env": {"A": 1}})).unwrap_err();
        assert_eq!(e.path, "env.A");
    }
}
