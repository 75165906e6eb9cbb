//! Resource and attribute arithmetic over Mesos `Resource` / `Attribute`
//! messages, used by the testbed's allocator and by the scheduler's placement.
//!
//! Scalars are kept in thousandths, because Mesos itself stores scalar values
//! with three decimal digits of fixed-point precision (`docs/attributes-resources.md`,
//! `src/common/values.cpp`): offering `cpus:2` and launching `cpus:0.1` leaves
//! exactly `1.9`, as a real master reports. Ranges (e.g. `ports`) are kept as
//! sorted, merged, inclusive `[begin, end]` intervals. Sets and roles are not
//! modelled: every resource is unreserved (`role "*"`).

use std::collections::BTreeMap;
use std::fmt;

use super::v1::{self, value};

/// Why a resource or attribute string could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid {what} {input:?}: {reason}")]
pub struct ParseError {
    what: &'static str,
    input: String,
    reason: String,
}

fn parse_error(what: &'static str, input: &str, reason: impl Into<String>) -> ParseError {
    ParseError {
        what,
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// A bag of unreserved scalar and range resources, keyed by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Scalar values in thousandths (`cpus:0.1` is 100).
    scalars: BTreeMap<String, i64>,
    /// Sorted, merged, inclusive intervals.
    ranges: BTreeMap<String, Vec<(u64, u64)>>,
}

/// Order in which scalar resources are listed, as a real agent lists them.
const SCALAR_ORDER: [&str; 4] = ["cpus", "mem", "disk", "gpus"];

fn to_millis(value: f64) -> i64 {
    (value * 1000.0).round() as i64
}

fn merge(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.retain(|(b, e)| b <= e);
    intervals.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (b, e) in intervals {
        match out.last_mut() {
            Some(last) if b <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((b, e)),
        }
    }
    out
}

fn subtract_intervals(have: &[(u64, u64)], take: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(mut b, e) in have {
        for &(tb, te) in take {
            if te < b || tb > e {
                continue;
            }
            if tb > b {
                out.push((b, tb - 1));
            }
            if te >= e {
                b = e.saturating_add(1);
                break;
            }
            b = te + 1;
        }
        if b <= e {
            out.push((b, e));
        }
    }
    merge(out)
}

fn covers(have: &[(u64, u64)], want: &[(u64, u64)]) -> bool {
    want.iter()
        .all(|&(b, e)| have.iter().any(|&(hb, he)| hb <= b && e <= he))
}

impl Resources {
    /// An empty bag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses Mesos' resource text form, e.g.
    /// `cpus:4;mem:8192;disk:65536;ports:[31000-32000,33000-33100]`
    /// (`docs/attributes-resources.md`). Roles (`cpus(role):1`) and sets are
    /// refused.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut out = Resources::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once(':')
                .ok_or_else(|| parse_error("resource", item, "expected name:value"))?;
            let name = name.trim();
            if name.is_empty() || name.contains(['(', ')', '[', '{']) {
                return Err(parse_error(
                    "resource",
                    item,
                    "bad or reserved resource name",
                ));
            }
            let value = value.trim();
            if value.starts_with('[') {
                out.add_ranges(
                    name,
                    &parse_ranges(value).map_err(|r| parse_error("resource", item, r))?,
                );
            } else {
                let v: f64 = value
                    .parse()
                    .map_err(|_| parse_error("resource", item, "not a number"))?;
                if !v.is_finite() || v < 0.0 {
                    return Err(parse_error(
                        "resource",
                        item,
                        "must be a finite number >= 0",
                    ));
                }
                out.add_scalar(name, v);
            }
        }
        Ok(out)
    }

    /// Sums the scalar and range resources of Mesos `Resource` messages;
    /// other types are ignored.
    pub fn from_protos<'a>(resources: impl IntoIterator<Item = &'a v1::Resource>) -> Self {
        let mut out = Resources::new();
        for r in resources {
            match r.r#type() {
                value::Type::Scalar => {
                    if let Some(s) = &r.scalar {
                        out.add_scalar(&r.name, s.value);
                    }
                }
                value::Type::Ranges => {
                    if let Some(ranges) = &r.ranges {
                        let iv: Vec<_> = ranges.range.iter().map(|r| (r.begin, r.end)).collect();
                        out.add_ranges(&r.name, &iv);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The bag as Mesos `Resource` messages: ranges first, then `cpus`, `mem`,
    /// `disk`, `gpus` and the other scalars by name (the order a real agent
    /// offers them in). `role` is set to `"*"` when given (how a master shows
    /// unreserved resources to a framework without the MULTI_ROLE capability).
    #[allow(deprecated)] // Resource.role: how a master shows unreserved resources
    pub fn to_protos(&self, role: Option<&str>) -> Vec<v1::Resource> {
        let mut out = Vec::new();
        for (name, intervals) in &self.ranges {
            if intervals.is_empty() {
                continue;
            }
            out.push(v1::Resource {
                name: name.clone(),
                r#type: value::Type::Ranges as i32,
                ranges: Some(value::Ranges {
                    range: intervals
                        .iter()
                        .map(|&(begin, end)| value::Range { begin, end })
                        .collect(),
                }),
                role: role.map(str::to_string),
                ..Default::default()
            });
        }
        let mut names: Vec<&String> = self.scalars.keys().collect();
        names.sort_by_key(|n| {
            (
                SCALAR_ORDER
                    .iter()
                    .position(|o| o == n)
                    .unwrap_or(SCALAR_ORDER.len()),
                n.as_str(),
            )
        });
        for name in names {
            let millis = self.scalars[name];
            if millis <= 0 {
                continue;
            }
            out.push(v1::Resource {
                name: name.clone(),
                r#type: value::Type::Scalar as i32,
                scalar: Some(value::Scalar {
                    value: millis as f64 / 1000.0,
                }),
                role: role.map(str::to_string),
                ..Default::default()
            });
        }
        out
    }

    /// Adds `value` (in the resource's unit, e.g. cpus or MB) to scalar `name`.
    pub fn add_scalar(&mut self, name: &str, value: f64) {
        *self.scalars.entry(name.to_string()).or_default() += to_millis(value);
    }

    /// Adds inclusive intervals to range resource `name`.
    pub fn add_ranges(&mut self, name: &str, intervals: &[(u64, u64)]) {
        let entry = self.ranges.entry(name.to_string()).or_default();
        entry.extend_from_slice(intervals);
        *entry = merge(std::mem::take(entry));
    }

    /// The value of scalar `name` (0 when absent), in its unit.
    pub fn scalar(&self, name: &str) -> f64 {
        self.scalars.get(name).copied().unwrap_or(0) as f64 / 1000.0
    }

    /// The intervals of range resource `name` (empty when absent).
    pub fn ranges(&self, name: &str) -> &[(u64, u64)] {
        self.ranges.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// True when nothing positive is left.
    pub fn is_empty(&self) -> bool {
        self.scalars.values().all(|v| *v <= 0) && self.ranges.values().all(Vec::is_empty)
    }

    /// True when every scalar and range of `other` fits in `self`.
    pub fn contains(&self, other: &Resources) -> bool {
        other
            .scalars
            .iter()
            .all(|(n, v)| *v <= 0 || self.scalars.get(n).copied().unwrap_or(0) >= *v)
            && other
                .ranges
                .iter()
                .all(|(n, iv)| covers(self.ranges(n), iv))
    }

    /// How many copies of `one`'s scalars fit in `self` (ranges are not
    /// counted); `usize::MAX` when `one` has no positive scalar.
    pub fn fits_times(&self, one: &Resources) -> usize {
        one.scalars
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(n, v)| {
                let have = self.scalars.get(n).copied().unwrap_or(0).max(0);
                usize::try_from(have / v).unwrap_or(usize::MAX)
            })
            .min()
            .unwrap_or(usize::MAX)
    }

    /// Adds all of `other`.
    pub fn add(&mut self, other: &Resources) {
        for (n, v) in &other.scalars {
            *self.scalars.entry(n.clone()).or_default() += v;
        }
        for (n, iv) in &other.ranges {
            self.add_ranges(n, iv);
        }
    }

    /// Removes `other`; scalars never go below zero and ranges not held are
    /// ignored.
    pub fn subtract(&mut self, other: &Resources) {
        for (n, v) in &other.scalars {
            if let Some(have) = self.scalars.get_mut(n) {
                *have = (*have - v).max(0);
            }
        }
        for (n, iv) in &other.ranges {
            if let Some(have) = self.ranges.get_mut(n) {
                *have = subtract_intervals(have, iv);
            }
        }
        self.scalars.retain(|_, v| *v > 0);
        self.ranges.retain(|_, iv| !iv.is_empty());
    }

    /// Scalar totals as `(name, value)` pairs in their unit, ranges as Mesos'
    /// text form (`"[31000-32000]"`): the shape of `/master/state` resource
    /// objects, where `cpus`, `mem`, `disk` and `gpus` are always present.
    pub fn to_state_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for name in ["disk", "mem", "gpus", "cpus"] {
            map.insert(name.into(), serde_json::json!(self.scalar(name)));
        }
        for (name, v) in &self.scalars {
            map.insert(name.clone(), serde_json::json!(*v as f64 / 1000.0));
        }
        for (name, iv) in &self.ranges {
            map.insert(name.clone(), serde_json::json!(format_ranges(iv)));
        }
        serde_json::Value::Object(map)
    }
}

impl fmt::Display for Resources {
    /// Mesos' resource text form, e.g. `cpus:0.1;mem:32;ports:[31000-31001]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for r in self.to_protos(None) {
            match (&r.scalar, &r.ranges) {
                (Some(s), _) => parts.push(format!("{}:{}", r.name, s.value)),
                (_, Some(_)) => parts.push(format!(
                    "{}:{}",
                    r.name,
                    format_ranges(self.ranges(&r.name))
                )),
                _ => {}
            }
        }
        f.write_str(&parts.join(";"))
    }
}

/// Formats intervals as Mesos does: `[31000-31005, 31010-31010]`.
pub fn format_ranges(intervals: &[(u64, u64)]) -> String {
    let inner: Vec<String> = intervals.iter().map(|(b, e)| format!("{b}-{e}")).collect();
    format!("[{}]", inner.join(", "))
}

fn parse_ranges(text: &str) -> Result<Vec<(u64, u64)>, String> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or("ranges must look like [begin-end,...]")?;
    let mut out = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (b, e) = part.split_once('-').ok_or("each range must be begin-end")?;
        let b: u64 = b
            .trim()
            .parse()
            .map_err(|_| "range bound is not a number")?;
        let e: u64 = e
            .trim()
            .parse()
            .map_err(|_| "range bound is not a number")?;
        if b > e {
            return Err("range begin is after its end".into());
        }
        out.push((b, e));
    }
    Ok(out)
}

/// Parses Mesos' attribute text form, e.g. `rack:r1;zone:z2;level:3`
/// (`docs/attributes-resources.md`): numbers become SCALAR, `[a-b]` RANGES,
/// `{a,b}` SET, anything else TEXT.
pub fn parse_attributes(text: &str) -> Result<Vec<v1::Attribute>, ParseError> {
    let mut out = Vec::new();
    for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once(':')
            .ok_or_else(|| parse_error("attribute", item, "expected name:value"))?;
        let (name, value) = (name.trim().to_string(), value.trim());
        if name.is_empty() {
            return Err(parse_error("attribute", item, "empty name"));
        }
        let mut attr = v1::Attribute {
            name,
            ..Default::default()
        };
        if let Ok(v) = value.parse::<f64>() {
            attr.r#type = value::Type::Scalar as i32;
            attr.scalar = Some(value::Scalar { value: v });
        } else if value.starts_with('[') {
            let iv = parse_ranges(value).map_err(|r| parse_error("attribute", item, r))?;
            attr.r#type = value::Type::Ranges as i32;
            attr.ranges = Some(value::Ranges {
                range: iv
                    .into_iter()
                    .map(|(begin, end)| value::Range { begin, end })
                    .collect(),
            });
        } else if let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
            attr.r#type = value::Type::Set as i32;
            attr.set = Some(value::Set {
                item: inner
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
            });
        } else {
            attr.r#type = value::Type::Text as i32;
            attr.text = Some(value::Text {
                value: value.to_string(),
            });
        }
        out.push(attr);
    }
    Ok(out)
}

/// The value of an attribute as text (`r1`, `3`, `[1-2]`, `{a,b}`), for
/// constraint matching and display.
pub fn attribute_text(attr: &v1::Attribute) -> String {
    match attr.r#type() {
        value::Type::Scalar => attr
            .scalar
            .as_ref()
            .map(|s| format!("{}", s.value))
            .unwrap_or_default(),
        value::Type::Ranges => attr
            .ranges
            .as_ref()
            .map(|r| format_ranges(&r.range.iter().map(|r| (r.begin, r.end)).collect::<Vec<_>>()))
            .unwrap_or_default(),
        value::Type::Set => attr
            .set
            .as_ref()
            .map(|s| format!("{{{}}}", s.item.join(",")))
            .unwrap_or_default(),
        value::Type::Text => attr
            .text
            .as_ref()
            .map(|t| t.value.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_the_agent_form() {
        let r = Resources::parse("cpus:2;mem:2048;disk:100;ports:[31000-32000]").unwrap();
        assert_eq!(r.scalar("cpus"), 2.0);
        assert_eq!(r.ranges("ports"), &[(31000, 32000)]);
        let names: Vec<String> = r.to_protos(Some("*")).into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["ports", "cpus", "mem", "disk"]);
        assert_eq!(
            r.to_string(),
            "ports:[31000-32000];cpus:2;mem:2048;disk:100"
        );
    }

    #[test]
    fn subtraction_keeps_three_decimals_like_mesos() {
        let mut r = Resources::parse("cpus:2;mem:2048").unwrap();
        r.subtract(&Resources::parse("cpus:0.1;mem:32").unwrap());
        assert_eq!(r.scalar("cpus"), 1.9);
        assert_eq!(r.scalar("mem"), 2016.0);
    }

    #[test]
    fn ranges_split_and_merge() {
        let mut r = Resources::parse("ports:[31000-31010]").unwrap();
        r.subtract(&Resources::parse("ports:[31003-31004]").unwrap());
        assert_eq!(r.ranges("ports"), &[(31000, 31002), (31005, 31010)]);
        assert!(r.contains(&Resources::parse("ports:[31005-31006]").unwrap()));
        assert!(!r.contains(&Resources::parse("ports:[31002-31003]").unwrap()));
        r.add(&Resources::parse("ports:[31003-31004]").unwrap());
        assert_eq!(r.ranges("ports"), &[(31000, 31010)]);
    }

    #[test]
    fn contains_and_empty() {
        let big = Resources::parse("cpus:1;mem:128").unwrap();
        assert!(big.contains(&Resources::parse("cpus:0.5").unwrap()));
        assert!(!big.contains(&Resources::parse("cpus:0.5;disk:1").unwrap()));
        let mut r = big.clone();
        r.subtract(&big);
        assert!(r.is_empty());
    }

    #[test]
    fn bad_text_is_refused() {
        assert!(Resources::parse("cpus").is_err());
        assert!(Resources::parse("cpus:-1").is_err());
        assert!(Resources::parse("ports:[5-1]").is_err());
        assert!(Resources::parse("cpus(role):1").is_err());
    }

    #[test]
    fn attributes_by_kind() {
        let a = parse_attributes("rack:r1;level:3;ids:[1-2];tags:{a,b}").unwrap();
        let kinds: Vec<_> = a.iter().map(|a| a.r#type()).collect();
        assert_eq!(
            kinds,
            [
                value::Type::Text,
                value::Type::Scalar,
                value::Type::Ranges,
                value::Type::Set
            ]
        );
        assert_eq!(attribute_text(&a[0]), "r1");
        assert_eq!(attribute_text(&a[1]), "3");
        assert!(parse_attributes("nocolon").is_err());
    }
}
