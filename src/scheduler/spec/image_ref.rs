//! Docker image references, checked against the grammar of Docker's
//! distribution `reference` package (`reference/reference.go` in
//! github.com/distribution/reference — the grammar Mesos' Docker store,
//! `src/slave/containerizer/mesos/provisioner/docker/`, and `docker pull`
//! read):
//!
//! ```text
//! reference        := name [ ":" tag ] [ "@" digest ]
//! name             := [domain "/"] path          (at most 255 characters)
//! domain           := host [":" port]            (port 1..=65535 here)
//! host             := domain-component ("." domain-component)* | "[" IPv6 "]"
//! domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//! path             := path-component ("/" path-component)*
//! path-component   := [a-z0-9]+ (separator [a-z0-9]+)*
//! separator        := "." | "_" | "__" | "-"+
//! tag              := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//! digest           := algorithm ":" hex{32,}
//! algorithm        := [A-Za-z][A-Za-z0-9]* ([+._-] [A-Za-z][A-Za-z0-9]*)*
//! ```
//!
//! The first component of a name is its registry (domain) when it has a
//! `.` or `:`, is `localhost`, or has capitals (`ParseNormalizedNamed` in
//! the same package); otherwise the whole name is the path. The grammar's
//! port is any digits; a port outside 1..=65535 is refused here, since no
//! registry listens there.

/// Longest image reference accepted.
pub const MAX_IMAGE_LEN: usize = 512;
/// Longest name (registry and path), as the grammar allows.
const MAX_NAME_LEN: usize = 255;

/// Why a Docker image reference was refused ([`check_image_reference`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageReferenceError {
    /// Empty or only whitespace.
    #[error("must not be empty")]
    Empty,
    /// Longer than [`MAX_IMAGE_LEN`] bytes.
    #[error("at most {MAX_IMAGE_LEN} characters")]
    TooLong,
    /// Holds whitespace or a control character.
    #[error("{0:?}: no spaces or control characters")]
    Whitespace(String),
    /// The repository path has capitals (only a registry host may).
    #[error("{0:?}: the repository path must be lowercase")]
    Uppercase(String),
    /// Anything else the grammar refuses; `why` names the part.
    #[error(
        "{reference:?} is not a Docker image reference ({why}); expected \
         [registry[:port]/]name[:tag][@sha256:digest]"
    )]
    Grammar {
        /// The reference as given.
        reference: String,
        /// The part the grammar refuses.
        why: GrammarFault,
    },
}

/// The part of a reference that breaks the grammar
/// ([`ImageReferenceError::Grammar`]), with the text of that part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarFault {
    /// `@algorithm:hex` with an unreadable algorithm or under 32 hex digits.
    #[error("digest {0:?}")]
    Digest(String),
    /// A tag with other characters or over 128 of them.
    #[error("tag {0:?}")]
    Tag(String),
    /// Registry and path over 255 characters (the grammar's limit).
    #[error("name longer than {MAX_NAME_LEN}")]
    NameTooLong,
    /// An IPv6 registry without its closing `]`.
    #[error("registry {0:?}: unclosed '['")]
    UnclosedIpv6(String),
    /// A bracketed registry that is not an IPv6 address.
    #[error("registry {0:?}: not an IPv6 address")]
    NotIpv6(String),
    /// A registry host with an empty or ill-formed component.
    #[error("registry host {0:?}")]
    RegistryHost(String),
    /// A registry port outside 1..=65535 or not digits.
    #[error("registry port {0:?} is not 1 to 65535")]
    RegistryPort(String),
    /// A path component outside `[a-z0-9]+ (separator [a-z0-9]+)*`.
    #[error("path component {0:?}")]
    PathComponent(String),
}

/// Checks a Docker image reference against the grammar in the module docs.
///
/// # Errors
/// [`ImageReferenceError`]: what is wrong, in words.
pub fn check_image_reference(reference: &str) -> Result<(), ImageReferenceError> {
    if reference.trim().is_empty() {
        return Err(ImageReferenceError::Empty);
    }
    if reference.len() > MAX_IMAGE_LEN {
        return Err(ImageReferenceError::TooLong);
    }
    if reference
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ImageReferenceError::Whitespace(reference.into()));
    }
    let grammar = |why: GrammarFault| ImageReferenceError::Grammar {
        reference: reference.into(),
        why,
    };
    let (rest, digest) = match reference.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (reference, None),
    };
    if let Some(digest) = digest {
        check_digest(digest).map_err(grammar)?;
    }
    // A tag follows the last ':' that comes after the last '/' (a ':'
    // before it is the registry's port).
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[slash..].find(':') {
        Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        check_tag(tag).map_err(grammar)?;
    }
    if name.len() > MAX_NAME_LEN {
        return Err(grammar(GrammarFault::NameTooLong));
    }
    let path = match name.split_once('/') {
        Some((first, path)) if is_domain(first) => {
            check_domain(first).map_err(grammar)?;
            path
        }
        _ => name,
    };
    if path.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(ImageReferenceError::Uppercase(reference.into()));
    }
    check_path(path).map_err(grammar)
}

fn is_domain(first: &str) -> bool {
    first.contains(['.', ':'])
        || first == "localhost"
        || first.chars().any(|c| c.is_ascii_uppercase())
}

fn check_domain(domain: &str) -> Result<(), GrammarFault> {
    let (host, port) = if let Some(v6) = domain.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| GrammarFault::UnclosedIpv6(domain.into()))?;
        addr.parse::<std::net::Ipv6Addr>()
            .map_err(|_| GrammarFault::NotIpv6(domain.into()))?;
        match after {
            "" => (None, None),
            _ => (None, Some(after.strip_prefix(':').unwrap_or(after))),
        }
    } else {
        match domain.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(domain), None),
        }
    };
    if let Some(host) = host {
        let component = |c: &str| {
            !c.is_empty()
                && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
                && !c.starts_with('-')
                && !c.ends_with('-')
        };
        if !host.split('.').all(component) {
            return Err(GrammarFault::RegistryHost(host.into()));
        }
    }
    if let Some(port) = port {
        let valid = port.len() <= 5 && !port.is_empty() && port.chars().all(|c| c.is_ascii_digit());
        match port.parse::<u32>() {
            Ok(1..=65_535) if valid => {}
            _ => return Err(GrammarFault::RegistryPort(port.into())),
        }
    }
    Ok(())
}

fn check_path(path: &str) -> Result<(), GrammarFault> {
    for component in path.split('/') {
        if !path_component(component) {
            return Err(GrammarFault::PathComponent(component.into()));
        }
    }
    Ok(())
}

/// `[a-z0-9]+ (separator [a-z0-9]+)*` with separators `.`, `_`, `__`, `-`+.
fn path_component(component: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if component.is_empty() || !component.starts_with(alnum) || !component.ends_with(alnum) {
        return false;
    }
    // Every run of non-alphanumerics must be one separator.
    let mut run = String::new();
    for c in component.chars().chain(std::iter::once('a')) {
        if alnum(c) {
            let ok = run.is_empty()
                || matches!(run.as_str(), "." | "_" | "__")
                || run.chars().all(|r| r == '-');
            if !ok {
                return false;
            }
            run.clear();
        } else {
            run.push(c);
        }
    }
    true
}

fn check_tag(tag: &str) -> Result<(), GrammarFault> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let valid = tag.len() <= 128
        && tag.starts_with(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(GrammarFault::Tag(tag.into()))
    }
}

fn check_digest(digest: &str) -> Result<(), GrammarFault> {
    let bad = || GrammarFault::Digest(digest.into());
    let (algorithm, hex) = digest.split_once(':').ok_or_else(bad)?;
    let component = |c: &str| {
        c.starts_with(|ch: char| ch.is_ascii_alphabetic())
            && c.chars().all(|ch| ch.is_ascii_alphanumeric())
    };
    let algorithm_ok = algorithm.split(['+', '.', '_', '-']).all(component);
    let hex_ok = hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit());
    if algorithm_ok && hex_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_follow_the_distribution_grammar() {
        for good in [
            "nginx",
            "nginx:1.27",
            "library/nginx:latest",
            "registry.example:5000/team/web:1.4",
            "registry.example:65535/web",
            "localhost/web",
            "localhost:5000/a__b/c-d--e/f.g_h",
            "[::1]:5000/web",
            "Registry.Example.com/team/web",
            "ghcr.io/a/b/c:v1.2.3-rc_1",
            "busybox@sha256:7b3ccabffc97de872a30dfd234fd972a66d247c8cfc69b0550f276481852627c",
            "busybox:1.36@sha256:7b3ccabffc97de872a30dfd234fd972a66d247c8cfc69b0550f276481852627c",
        ] {
            assert_eq!(check_image_reference(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("", "must not be empty"),
            ("Nginx:1.27", "must be lowercase"),
            ("registry.example:5000/Team/web", "must be lowercase"),
            ("nginx:", "tag"),
            ("nginx:tag with space", "no spaces"),
            ("-nginx", "path component"),
            ("a___b", "path component"),
            ("a._b", "path component"),
            ("web/", "path component"),
            ("nginx@sha256:abc", "digest"),
            ("http://registry/nginx", "registry port"),
            ("host:99999/x", "registry port \"99999\" is not 1 to 65535"),
            ("host:0/x", "registry port"),
            ("host:/x", "registry port"),
            ("-host.example/x", "registry host"),
            ("[::1/x", "unclosed"),
        ] {
            let error = check_image_reference(bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
        let long = format!("{}/x", "a".repeat(300));
        assert!(check_image_reference(&long).is_err());
    }
}
