//! `--zk zk://[user:pass@]h1:p1,h2:p2/path` (`docs/deployment-strategies.md#zookeeper-layout`).
//!
//! The path names the root znode of this framework's state; nothing is
//! appended to it. Without a path, or with `/`, the root is
//! `/mesos-appliance/<framework-name>`. `user:pass` are ZooKeeper digest
//! credentials; `%XX` escapes are decoded in them so a password may contain
//! `@`, `:` or `/`. The password never appears in `Debug` or `Display`.
//!
//! [`redact_password`] hides the password of any URL (`zk://`, `http://`,
//! …) echoed as text: in errors, logs and pages.

use std::fmt;

/// What a password is shown as.
pub const REDACTED: &str = "***";

/// `text` with the password of every URL in it hidden: `scheme://user:pw@host`
/// becomes `scheme://user:***@host`, as [`ZkUrl`] shows itself; works on
/// lists (`http://u:p@a:1,http://b:2`, `zk://u:p@h1:1,h2:2/path`) and on
/// URLs inside longer messages. A URL runs to the next whitespace or quote
/// (or the `,` before the next `scheme://`), and its user information to
/// the last `@` in it: a password holding `/`, `@` or `:` is hidden whole.
/// Hides too much rather than too little (an `@` in a path hides the part
/// before it).
pub fn redact_password(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let mut end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        // A list: this URL ends at the ',' before the next scheme.
        if let Some(next) = tail[..end].find("://") {
            end = tail[..next].rfind(',').unwrap_or(next);
        }
        let url = &tail[..end];
        match url.rfind('@') {
            Some(at) => {
                let userinfo = &url[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..=colon]);
                        out.push_str(REDACTED);
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&url[at..]);
            }
            None => out.push_str(url),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Errors parsing a `zk://` URL. Messages never contain the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZkUrlError {
    /// The URL does not start with `zk://`.
    #[error("a ZooKeeper URL starts with zk://")]
    Scheme,
    /// The host list is empty.
    #[error("no ZooKeeper host in the URL")]
    NoHosts,
    /// A host is not `host:port` with a port from 1 to 65535 (the host as given).
    #[error("bad host {0:?}: expected host:port with a port from 1 to 65535")]
    Host(String),
    /// The text before `@` is not `user:password` (or the user contains `:`).
    #[error("bad credentials: expected user:password before @, user without ':'")]
    Credentials,
    /// The root path has an empty, `.` or `..` part (the path as given).
    #[error("bad root path {0:?}: expected /a/b with no empty, '.' or '..' parts")]
    Path(String),
    /// Without a path the root is `/mesos-appliance/<framework-name>`, and this
    /// framework name is not a valid znode name.
    #[error("bad framework name {0:?} for the default root: it must be one znode name")]
    FrameworkName(String),
}

/// ZooKeeper digest credentials (`user:password`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name (`%XX` escapes decoded).
    pub user: String,
    /// The password (`%XX` escapes decoded); never printed.
    pub password: String,
}

impl Credentials {
    /// The `digest` scheme's auth bytes: `user:password`.
    pub fn digest_auth(&self) -> Vec<u8> {
        format!("{}:{}", self.user, self.password).into_bytes()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A parsed `--zk` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct ZkUrl {
    /// `host:port` entries, in the given order.
    pub hosts: Vec<String>,
    /// Digest credentials, if any.
    pub credentials: Option<Credentials>,
    /// Absolute root znode path, without trailing `/`.
    pub root: String,
}

impl ZkUrl {
    /// Parses `url`; `framework_name` gives the default root.
    pub fn parse(url: &str, framework_name: &str) -> Result<ZkUrl, ZkUrlError> {
        Self::parse_with_default_root(url, || {
            if framework_name.is_empty()
                || framework_name == "."
                || framework_name == ".."
                || framework_name.chars().any(|c| c == '/' || c.is_control())
            {
                return Err(ZkUrlError::FrameworkName(framework_name.to_string()));
            }
            Ok(format!("/mesos-appliance/{framework_name}"))
        })
    }

    /// Parses a Mesos master `zk://` URL (agent/scheduler `--master`,
    /// `include/mesos/zookeeper/url.hpp`,
    /// `docs/mesos-protocol.md#zookeeper-master-detection`): the same syntax,
    /// but without a path (or with `/`) the masters' group is the ZooKeeper
    /// root `/` itself, as Mesos defaults it.
    pub fn parse_mesos(url: &str) -> Result<ZkUrl, ZkUrlError> {
        Self::parse_with_default_root(url, || Ok("/".to_string()))
    }

    fn parse_with_default_root(
        url: &str,
        default_root: impl FnOnce() -> Result<String, ZkUrlError>,
    ) -> Result<ZkUrl, ZkUrlError> {
        let rest = url.strip_prefix("zk://").ok_or(ZkUrlError::Scheme)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        // The userinfo ends at the last '@' of the authority: hosts have none.
        let (credentials, hosts) = match authority.rfind('@') {
            Some(i) => (
                Some(parse_credentials(&authority[..i])?),
                &authority[i + 1..],
            ),
            None => (None, authority),
        };
        let hosts = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(parse_host)
            .collect::<Result<Vec<_>, _>>()?;
        if hosts.is_empty() {
            return Err(ZkUrlError::NoHosts);
        }
        let root = if path.is_empty() || path == "/" {
            default_root()?
        } else {
            let trimmed = path.strip_suffix('/').unwrap_or(path);
            let ok = trimmed[1..].split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && !part.chars().any(|c| c.is_control())
            }) && trimmed != "/zookeeper"
                && !trimmed.starts_with("/zookeeper/");
            if !ok {
                return Err(ZkUrlError::Path(path.to_string()));
            }
            trimmed.to_string()
        };
        Ok(ZkUrl {
            hosts,
            credentials,
            root,
        })
    }

    /// The connect string for the ZooKeeper client: `h1:p1,h2:p2`.
    pub fn connect_string(&self) -> String {
        self.hosts.join(",")
    }
}

/// `zk://user:***@h1:p1,h2:p2/root`.
impl fmt::Display for ZkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("zk://")?;
        if let Some(c) = &self.credentials {
            write!(f, "{}:{REDACTED}@", c.user)?;
        }
        write!(f, "{}{}", self.connect_string(), self.root)
    }
}

impl fmt::Debug for ZkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZkUrl({self})")
    }
}

fn parse_credentials(userinfo: &str) -> Result<Credentials, ZkUrlError> {
    let (user, password) = userinfo.split_once(':').ok_or(ZkUrlError::Credentials)?;
    let user = percent_decode(user).ok_or(ZkUrlError::Credentials)?;
    let password = percent_decode(password).ok_or(ZkUrlError::Credentials)?;
    // The digest scheme splits "user:password" at the first ':'.
    if user.is_empty() || user.contains(':') {
        return Err(ZkUrlError::Credentials);
    }
    Ok(Credentials { user, password })
}

fn parse_host(host: &str) -> Result<String, ZkUrlError> {
    let bad = || ZkUrlError::Host(host.to_string());
    let (name, port) = host.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let name_ok = !name.is_empty()
        && (name.starts_with('[') && name.ends_with(']')
            || name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_'));
    if port == 0 || !name_ok {
        return Err(bad());
    }
    Ok(host.to_string())
}

/// Decodes `%XX` escapes; `None` on a broken escape or invalid UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_url() {
        let u = ZkUrl::parse("zk://alice:s3cr%40t@zk1:2181,zk2:2182/apps/sched", "x").unwrap();
        assert_eq!(u.hosts, vec!["zk1:2181", "zk2:2182"]);
        assert_eq!(u.root, "/apps/sched");
        let c = u.credentials.as_ref().unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("alice", "s3cr@t"));
        assert_eq!(c.digest_auth(), b"alice:s3cr@t");
        assert_eq!(u.connect_string(), "zk1:2181,zk2:2182");
    }

    #[test]
    fn default_root_uses_the_framework_name() {
        for url in ["zk://h:2181", "zk://h:2181/"] {
            let u = ZkUrl::parse(url, "my-fw").unwrap();
            assert_eq!(u.root, "/mesos-appliance/my-fw");
            assert!(u.credentials.is_none());
        }
        assert_eq!(
            ZkUrl::parse("zk://h:2181", "a/b").unwrap_err(),
            ZkUrlError::FrameworkName("a/b".into())
        );
        assert_eq!(ZkUrl::parse("zk://h:1/a/b/", "x").unwrap().root, "/a/b");
    }

    #[test]
    fn password_is_never_shown() {
        let u = ZkUrl::parse("zk://bob:hunter2@h:2181/r", "x").unwrap();
        let shown = format!("{u} {u:?} {:?}", u.credentials);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("zk://bob:***@h:2181/r"), "{shown}");
        let err = ZkUrl::parse("zk://bob:hunter2@h:0/r", "x").unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn passwords_in_echoed_urls_are_hidden() {
        let cases = [
            (
                "http://user:hunter2@127.0.0.1:1",
                "http://user:***@127.0.0.1:1",
            ),
            (
                "--master entry \"https://u:hunter2@m:5050/\": bad",
                "--master entry \"https://u:***@m:5050/\": bad",
            ),
            (
                "http://a:1,http://u:hunter2@b:2,https://v:hunter2@c:3",
                "http://a:1,http://u:***@b:2,https://v:***@c:3",
            ),
            (
                "zk://bob:hun@ter/2@z1:2181,z2:2181/mesos",
                "zk://bob:***@z1:2181,z2:2181/mesos",
            ),
            ("zk://bob@z:2181/a", "zk://bob@z:2181/a"),
            (
                "http://m:5050 and zk://z:1/x",
                "http://m:5050 and zk://z:1/x",
            ),
            ("no url here: a:b@c", "no url here: a:b@c"),
        ];
        for (given, shown) in cases {
            assert_eq!(redact_password(given), shown, "{given}");
        }
        // The same form as a parsed URL shows.
        let u = ZkUrl::parse("zk://bob:hunter2@h:2181/r", "x").unwrap();
        assert_eq!(redact_password("zk://bob:hunter2@h:2181/r"), u.to_string());
    }

    #[test]
    fn rejects_bad_urls() {
        let cases = [
            ("http://h:2181", ZkUrlError::Scheme),
            ("zk:///a", ZkUrlError::NoHosts),
            ("zk://h/a", ZkUrlError::Host("h".into())),
            ("zk://h:x/a", ZkUrlError::Host("h:x".into())),
            ("zk://h:0/a", ZkUrlError::Host("h:0".into())),
            ("zk://a b:1/a", ZkUrlError::Host("a b:1".into())),
            ("zk://user@h:1/a", ZkUrlError::Credentials),
            ("zk://:pw@h:1/a", ZkUrlError::Credentials),
            ("zk://u:%zz@h:1/a", ZkUrlError::Credentials),
            ("zk://h:1//a", ZkUrlError::Path("//a".into())),
            ("zk://h:1/a/../b", ZkUrlError::Path("/a/../b".into())),
            ("zk://h:1/zookeeper", ZkUrlError::Path("/zookeeper".into())),
        ];
        for (url, want) in cases {
            assert_eq!(ZkUrl::parse(url, "fw"), Err(want), "{url}");
        }
    }

    #[test]
    fn mesos_master_urls_default_to_the_zookeeper_root() {
        let u = ZkUrl::parse_mesos("zk://u:p@h1:2181,h2:2181/mesos").unwrap();
        assert_eq!(u.root, "/mesos");
        assert_eq!(u.hosts, vec!["h1:2181", "h2:2181"]);
        assert_eq!(u.credentials.unwrap().digest_auth(), b"u:p");
        assert_eq!(ZkUrl::parse_mesos("zk://h:2181").unwrap().root, "/");
        assert_eq!(ZkUrl::parse_mesos("zk://h:2181/").unwrap().root, "/");
        assert_eq!(ZkUrl::parse_mesos("http://h:1"), Err(ZkUrlError::Scheme));
    }

    #[test]
    fn ensemble_url_keeps_every_server_in_order() {
        // The form a three-server ensemble is given in: the client gets the
        // whole list and moves to another server when one goes away.
        let url = "zk://127.0.0.1:40001,127.0.0.1:40002,127.0.0.1:40003/appliance";
        let u = ZkUrl::parse(url, "x").unwrap();
        assert_eq!(
            u.hosts,
            vec!["127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003"]
        );
        assert_eq!(u.root, "/appliance");
        assert_eq!(
            u.connect_string(),
            "127.0.0.1:40001,127.0.0.1:40002,127.0.0.1:40003"
        );
        assert_eq!(u.to_string(), url);
        assert_eq!(ZkUrl::parse(&u.to_string(), "x").unwrap(), u);
        // An empty entry (a stray comma) is skipped, a broken one refused.
        assert_eq!(
            ZkUrl::parse("zk://a:1,,b:2,/r", "x").unwrap().hosts,
            ["a:1", "b:2"]
        );
        assert_eq!(
            ZkUrl::parse("zk://a:1,b/r", "x"),
            Err(ZkUrlError::Host("b".into()))
        );
    }

    #[test]
    fn password_may_hold_colons_and_ipv6_hosts_pass() {
        let u = ZkUrl::parse("zk://u:a:b@[::1]:2181/r", "x").unwrap();
        assert_eq!(u.credentials.unwrap().password, "a:b");
        assert_eq!(u.hosts, vec!["[::1]:2181"]);
    }
}
