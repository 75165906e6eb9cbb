//! Named admin tokens, read from `--admin-token-file` by the replicas and
//! from `--token-file` by `mesos-appliance ctl` (`docs/cli.md`): one file
//! format, parsed here for both.
//!
//! The file holds one token per line as `name:token`, so that the audit
//! trail can say *who* acted (the name; never the token). Blank lines and
//! lines starting with `#` are skipped. A file whose only content is one
//! line without `:` is the older single-token form; that token is named
//! [`DEFAULT_TOKEN_NAME`]. Names are 1–64 characters of `A-Z a-z 0-9 . _ @ -`;
//! names and tokens must be unique; surrounding whitespace is ignored. A
//! token holds no white space and no control character: such a line is
//! refused (naming the line), never read as one token with a space in it
//! (`alice s3cr3t` is a `:` typed as a space, not a token).

use std::fmt;
use std::path::Path;

/// The name of the token in a single-token file.
pub const DEFAULT_TOKEN_NAME: &str = "admin";

/// Longest token name accepted, characters.
pub const MAX_NAME_CHARS: usize = 64;

/// One admin token and the name the audit trail shows for it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken {
    /// Who holds it (shown in the audit trail).
    pub name: String,
    /// The secret. Never logged ([`fmt::Debug`] redacts it).
    pub token: String,
}

impl AdminToken {
    /// A token named `name`.
    pub fn new(name: impl Into<String>, token: impl Into<String>) -> AdminToken {
        AdminToken {
            name: name.into(),
            token: token.into(),
        }
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminToken")
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .finish()
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
}

/// Refuses an empty token, or one holding white space or a control
/// character (never a token a client can send as one header value).
fn check_token(number: usize, name: &str, token: &str) -> Result<(), String> {
    if token.is_empty() {
        return Err(format!("line {number}: the token of {name:?} is empty"));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "line {number}: the token holds white space or a control character; \
             expected `name:token` (one token per line) or a file of one bare token"
        ));
    }
    Ok(())
}

/// Parses the content of a token file (see the module doc).
///
/// # Errors
/// A line that is not `name:token`, a bad or repeated name, an empty or
/// repeated token, a token with white space or a control character, or no
/// token at all; the message names the line (never the token).
pub fn parse_token_file(text: &str) -> Result<Vec<AdminToken>, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if let [(number, only)] = lines[..]
        && !only.contains(':')
    {
        check_token(number, DEFAULT_TOKEN_NAME, only)?;
        return Ok(vec![AdminToken::new(DEFAULT_TOKEN_NAME, only)]);
    }
    let mut tokens: Vec<AdminToken> = Vec::new();
    for (number, line) in lines {
        let Some((name, token)) = line.split_once(':') else {
            return Err(format!(
                "line {number}: expected `name:token` (one token per line)"
            ));
        };
        let (name, token) = (name.trim(), token.trim());
        if !valid_name(name) {
            return Err(format!(
                "line {number}: the name {name:?} must be 1-{MAX_NAME_CHARS} characters of \
                 A-Z a-z 0-9 . _ @ -"
            ));
        }
        check_token(number, name, token)?;
        if tokens.iter().any(|t| t.name == name) {
            return Err(format!("line {number}: the name {name:?} is given twice"));
        }
        if tokens.iter().any(|t| t.token == token) {
            return Err(format!(
                "line {number}: {name:?} has the same token as an earlier line"
            ));
        }
        tokens.push(AdminToken::new(name, token));
    }
    if tokens.is_empty() {
        return Err("the admin token file holds no token".into());
    }
    Ok(tokens)
}

/// Reads and parses `--admin-token-file`.
///
/// # Errors
/// The file cannot be read, or [`parse_token_file`] refuses it.
pub fn read_token_file(path: &Path) -> Result<Vec<AdminToken>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse_token_file(&text)
}

/// The token `ctl` sends out of a token file's `tokens`: the only one, or
/// the one named `name` (`--token-name`). A name given with a single-entry
/// file must still be that entry's.
///
/// # Errors
/// Several tokens and no name, or no token of that name; the message lists
/// the names (never a token).
pub fn choose_token<'a>(
    tokens: &'a [AdminToken],
    name: Option<&str>,
) -> Result<&'a AdminToken, String> {
    let names = || {
        tokens
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (tokens, name) {
        ([only], None) => Ok(only),
        (_, None) => Err(format!(
            "the file holds {} tokens ({}); pick one with --token-name NAME",
            tokens.len(),
            names()
        )),
        (_, Some(name)) => tokens
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("no token named {name:?} in the file; it holds {}", names())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_single_token_form_is_still_accepted() {
        let tokens = parse_token_file("  0123456789abcdef0123\n\n").unwrap();
        assert_eq!(
            tokens,
            vec![AdminToken::new("admin", "0123456789abcdef0123")]
        );
    }

    #[test]
    fn named_tokens_one_per_line() {
        let text = "# operators\nalice: tok-a\n\nbob.ops@example:tok-b:with-colon\n";
        let tokens = parse_token_file(text).unwrap();
        assert_eq!(
            tokens,
            vec![
                AdminToken::new("alice", "tok-a"),
                AdminToken::new("bob.ops@example", "tok-b:with-colon"),
            ]
        );
    }

    #[test]
    fn bad_files_are_refused_without_echoing_tokens() {
        for (text, says) in [
            ("", "no token"),
            ("# only a comment\n", "no token"),
            ("alice:a\nsecret-without-name\n", "line 2: expected"),
            ("al ice:a\n", "line 1: the name"),
            ("alice:\n", "the token of \"alice\" is empty"),
            ("alice:a\nalice:b\n", "given twice"),
            ("alice:same\nbob:same\n", "same token"),
            ("alice secret\n", "line 1: the token holds white space"),
            ("# ops\n\nalice secret\n", "line 3: the token holds"),
            (
                "alice:a\nbob: sec ret\n",
                "line 2: the token holds white space",
            ),
            ("alice:sec\u{7}ret\n", "line 1: the token holds"),
            ("alice:sec\tret\n", "line 1: the token holds"),
        ] {
            let e = parse_token_file(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains("secret") && !e.contains("same\""), "{e}");
        }
        let debug = format!("{:?}", AdminToken::new("a", "s3cret"));
        assert!(!debug.contains("s3cret"), "{debug}");
    }

    #[test]
    fn ctl_picks_the_only_token_or_the_named_one() {
        let one = parse_token_file("ci:tok-ci\n").unwrap();
        assert_eq!(choose_token(&one, None).unwrap().token, "tok-ci");
        assert_eq!(choose_token(&one, Some("ci")).unwrap().token, "tok-ci");
        let legacy = parse_token_file("tok-alone\n").unwrap();
        assert_eq!(choose_token(&legacy, None).unwrap().token, "tok-alone");
        let two = parse_token_file("alice:s3cret-a\nbob:s3cret-b\n").unwrap();
        assert_eq!(choose_token(&two, Some("bob")).unwrap().token, "s3cret-b");
        for (name, says) in [
            (
                None,
                "holds 2 tokens (alice, bob); pick one with --token-name",
            ),
            (
                Some("carol"),
                "no token named \"carol\" in the file; it holds alice, bob",
            ),
        ] {
            let e = choose_token(&two, name).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
        let e = choose_token(&one, Some("bob")).unwrap_err();
        assert!(e.contains("it holds ci"), "{e}");
    }
}
