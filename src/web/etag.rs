//! The `If-Match` request header (RFC 9110 §13.1.1) of a service change,
//! parsed into the versions the core may replace ([`Expected`]).
//!
//! ```text
//! If-Match    = "*" / #entity-tag
//! entity-tag  = [ "W/" ] DQUOTE *etagc DQUOTE
//! etagc       = %x21 / %x23-7E / obs-text
//! ```
//!
//! `#` is a comma-separated list; empty elements and white space around
//! commas are allowed (RFC 9110 §5.6.1). `If-Match` compares strongly
//! (§13.1.1), so a weak tag (`W/"3"`) never matches: it is accepted and
//! left out. A value that is none of these is a 400 (`invalid`, on the
//! field `If-Match`), never a 412: 412 says the service changed.
//!
//! (Neither `headers` nor `axum-extra` is a dependency; `headers`' typed
//! `IfMatch` would not refuse a malformed list in any case.)

use crate::scheduler::Expected;

/// Entity tags in one `If-Match` at most: the versions of one service a
/// client can have read are few.
pub const MAX_TAGS: usize = 32;

/// Parses an `If-Match` value.
///
/// # Errors
/// What is wrong with it, in words (the caller names the header).
pub fn parse_if_match(value: &[u8]) -> Result<Expected, String> {
    let hint = "give * or entity tags as the ETag of GET shows them, quoted (\"3\"), \
                comma-separated";
    let trimmed = value.trim_ascii();
    if trimmed == b"*" {
        return Ok(Expected::Any);
    }
    let mut strong = Vec::new();
    let mut tags = 0usize;
    let mut rest = trimmed;
    loop {
        rest = rest.trim_ascii_start();
        if let Some(after) = rest.strip_prefix(b",") {
            rest = after; // an empty list element
            continue;
        }
        if rest.is_empty() {
            break;
        }
        if rest.starts_with(b"*") {
            return Err(format!("* must stand alone; {hint}"));
        }
        let (weak, tagged) = match rest.strip_prefix(b"W/") {
            Some(after) => (true, after),
            None => (false, rest),
        };
        let Some(inner) = tagged.strip_prefix(b"\"") else {
            return Err(format!("an entity tag must be quoted; {hint}"));
        };
        let Some(end) = inner.iter().position(|&b| b == b'"') else {
            return Err(format!("an entity tag has no closing quote; {hint}"));
        };
        let opaque = &inner[..end];
        if !opaque
            .iter()
            .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
        {
            return Err(format!(
                "an entity tag holds a space or a control character; {hint}"
            ));
        }
        tags += 1;
        if tags > MAX_TAGS {
            return Err(format!("more than {MAX_TAGS} entity tags"));
        }
        if !weak {
            strong.push(String::from_utf8_lossy(opaque).into_owned());
        }
        rest = inner[end + 1..].trim_ascii_start();
        match rest.strip_prefix(b",") {
            Some(after) => rest = after,
            None if rest.is_empty() => break,
            None => return Err(format!("entity tags must be separated by commas; {hint}")),
        }
    }
    if tags == 0 {
        return Err(format!("the value is empty; {hint}"));
    }
    Ok(Expected::OneOf(strong))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of(tags: &[&str]) -> Expected {
        Expected::OneOf(tags.iter().map(|t| t.to_string()).collect())
    }

    #[test]
    fn star_tags_weak_tags_and_lists() {
        for (value, expected) in [
            ("*", Expected::Any),
            (" * ", Expected::Any),
            ("\"3\"", one_of(&["3"])),
            ("\"3\", \"4\"", one_of(&["3", "4"])),
            ("\"3\",,\"4\" ,", one_of(&["3", "4"])),
            (", \"3\"", one_of(&["3"])),
            ("W/\"3\"", one_of(&[])),
            ("W/\"3\", \"4\"", one_of(&["4"])),
            ("\"\"", one_of(&[""])),
            ("\"a!#~\"", one_of(&["a!#~"])),
        ] {
            assert_eq!(parse_if_match(value.as_bytes()), Ok(expected), "{value:?}");
        }
    }

    #[test]
    fn malformed_values_are_refused() {
        let too_many = vec!["\"1\""; MAX_TAGS + 1].join(",");
        for (value, says) in [
            ("3", "must be quoted"),
            ("abc", "must be quoted"),
            ("\"3", "no closing quote"),
            ("\"3\" \"4\"", "separated by commas"),
            ("\"3\"x", "separated by commas"),
            ("\"a b\"", "a space or a control character"),
            ("*, \"3\"", "* must stand alone"),
            ("\"3\", *", "* must stand alone"),
            ("w/\"3\"", "must be quoted"),
            ("", "empty"),
            (" , ", "empty"),
            (too_many.as_str(), "more than 32"),
        ] {
            let e = parse_if_match(value.as_bytes()).unwrap_err();
            assert!(e.contains(says), "{value:?}: {e}");
        }
    }

    #[test]
    fn admits_compares_strongly() {
        assert!(Expected::Any.admits("7"));
        assert!(one_of(&["3", "7"]).admits("7"));
        assert!(!one_of(&["3"]).admits("7"));
        assert!(!one_of(&[]).admits("7"));
    }
}
