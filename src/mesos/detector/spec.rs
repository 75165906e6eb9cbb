//! Master addresses and the `--master` syntax (`docs/mesos-protocol.md#leader-redirects`,
//! `#zookeeper-master-detection`).

use std::fmt;

use reqwest::Url;

use crate::util::zk::{ZkUrl, ZkUrlError, redact_password};

/// The port a Mesos master listens on unless told otherwise (`MasterInfo.port`).
pub const DEFAULT_MASTER_PORT: u16 = 5050;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP (what Mesos masters serve by default).
    Http,
    /// HTTP over TLS, verified against the system's root certificates.
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A master's base URL, `scheme://host:port` (no path): where its endpoints
/// (`/api/v1/scheduler`, `/api/v1`, `/master/redirect`) live.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MasterAddress {
    url: Url,
}

impl MasterAddress {
    /// The base URL of a master at `host:port`; `None` if `host` is not a
    /// valid host name or IP literal (IPv6 in brackets).
    pub fn new(scheme: Scheme, host: &str, port: u16) -> Option<Self> {
        let url = Url::parse(&format!("{}://{host}:{port}/", scheme.as_str())).ok()?;
        (url.host_str().is_some() && url.path() == "/" && url.username().is_empty())
            .then_some(Self { url })
    }

    /// The master an absolute URL points at (its path is dropped).
    pub fn of_url(url: &Url) -> Option<Self> {
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return None,
        };
        Self::new(scheme, url.host_str()?, url.port_or_known_default()?)
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> Scheme {
        if self.url.scheme() == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        }
    }

    /// `host:port` (IPv6 hosts in brackets).
    pub fn authority(&self) -> String {
        let host = self.url.host_str().unwrap_or_default();
        let port = self
            .url
            .port_or_known_default()
            .unwrap_or(DEFAULT_MASTER_PORT);
        format!("{host}:{port}")
    }

    /// The URL of `path` (which starts with `/`) on this master.
    pub fn endpoint(&self, path: &str) -> Url {
        let mut url = self.url.clone();
        url.set_path(path);
        url
    }

    /// Where a `307` answer to a request for `requested` points: a
    /// protocol-relative `Location` (`//host:port/path`, what masters send)
    /// keeps the scheme of the request and takes host, port and path from
    /// the Location; an absolute one is taken as given; a path-only one
    /// stays on this master. A Location without a path keeps the requested
    /// path. `None` if the Location does not parse or is not http(s).
    pub fn follow(requested: &Url, location: &str) -> Option<Url> {
        let mut target = requested.join(location.trim()).ok()?;
        if !matches!(target.scheme(), "http" | "https") || target.host_str().is_none() {
            return None;
        }
        if target.path() == "/" && !location.trim_end().ends_with('/') {
            target.set_path(requested.path());
        }
        Some(target)
    }
}

impl fmt::Display for MasterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.url.scheme(), self.authority())
    }
}

impl fmt::Debug for MasterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterAddress({self})")
    }
}

/// A parsed `--master` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterSpec {
    /// Masters to ask `GET /master/redirect`, in order.
    Urls(Vec<MasterAddress>),
    /// The masters' ZooKeeper group; `scheme` is used for the masters found
    /// there (ZooKeeper does not say; Mesos masters serve plain HTTP unless
    /// built with SSL support).
    Zk {
        /// The ZooKeeper ensemble, credentials and group path.
        url: ZkUrl,
        /// Scheme of the masters' URLs.
        scheme: Scheme,
    },
}

/// Why a `--master` value did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterSpecError {
    /// Nothing given.
    #[error(
        "--master is empty: expected http(s)://host:port[,host:port…] or zk://host:port,…/path"
    )]
    Empty,
    /// A scheme other than http, https or zk. (Every echoed value has its
    /// password hidden.)
    #[error("--master {0:?}: expected http://, https:// or zk://")]
    Scheme(String),
    /// A list entry that is not `host[:port]`.
    #[error(
        "--master entry {0:?}: expected host:port (port 1-65535, default 5050), no path or credentials"
    )]
    Host(String),
    /// An http(s) entry with user information.
    #[error(
        "--master entry {0:?}: credentials do not belong in the URL; give --principal and --secret-file"
    )]
    Credentials(String),
    /// A malformed ZooKeeper URL.
    #[error("--master: {0}")]
    Zk(#[from] ZkUrlError),
}

impl MasterSpec {
    /// Parses `--master`:
    /// - `zk://[user:pass@]h1:2181,h2:2181/mesos` (path default `/`);
    /// - `http(s)://h1:5050[,h2:5050…]`; each entry may repeat its own
    ///   scheme (`http://a:5050,https://b:5050`); a missing port is 5050; a
    ///   trailing `/` is allowed, any other path is refused (Mesos endpoints
    ///   live at fixed paths);
    /// - bare `host:port[,…]` means http, as Mesos agents accept it.
    pub fn parse(value: &str) -> Result<MasterSpec, MasterSpecError> {
        let value = value.trim();
        if value.is_empty() {
            return Err(MasterSpecError::Empty);
        }
        if value.starts_with("zk://") {
            return Ok(MasterSpec::Zk {
                url: ZkUrl::parse_mesos(value)?,
                scheme: Scheme::Http,
            });
        }
        if let Some((scheme, _)) = value.split_once("://")
            && !matches!(scheme, "http" | "https")
        {
            return Err(MasterSpecError::Scheme(redact_password(value)));
        }
        let mut scheme = Scheme::Http;
        let mut masters = Vec::new();
        for entry in value.split(',').map(str::trim) {
            let mut rest = entry;
            if let Some(r) = entry.strip_prefix("http://") {
                (scheme, rest) = (Scheme::Http, r);
            } else if let Some(r) = entry.strip_prefix("https://") {
                (scheme, rest) = (Scheme::Https, r);
            }
            let authority = rest.strip_suffix('/').unwrap_or(rest);
            if authority.contains('@') {
                return Err(MasterSpecError::Credentials(redact_entry(entry)));
            }
            masters.push(
                parse_authority(scheme, authority)
                    .ok_or_else(|| MasterSpecError::Host(redact_entry(entry)))?,
            );
        }
        Ok(MasterSpec::Urls(masters))
    }
}

/// A `--master` list entry as shown in errors: the password hidden, also in
/// a scheme-less `user:pass@host:port` entry.
fn redact_entry(entry: &str) -> String {
    if entry.contains("://") {
        return redact_password(entry);
    }
    let shown = redact_password(&format!("http://{entry}"));
    shown
        .strip_prefix("http://")
        .map_or(shown.clone(), str::to_owned)
}

fn parse_authority(scheme: Scheme, authority: &str) -> Option<MasterAddress> {
    if authority.is_empty() || authority.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal without a port: the last ':' is inside the brackets.
        Some((host, port)) if !port.contains(']') => {
            (host, port.parse::<u16>().ok().filter(|p| *p != 0)?)
        }
        _ => (authority, DEFAULT_MASTER_PORT),
    };
    MasterAddress::new(scheme, host, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> MasterAddress {
        match MasterSpec::parse(s).unwrap() {
            MasterSpec::Urls(mut v) => v.remove(0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_url_lists() {
        let MasterSpec::Urls(list) =
            MasterSpec::parse("http://m1:5050,m2:5051, https://m3/").unwrap()
        else {
            panic!()
        };
        let shown: Vec<String> = list.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            shown,
            ["http://m1:5050", "http://m2:5051", "https://m3:5050"]
        );
        assert_eq!(addr("10.0.0.1:80").to_string(), "http://10.0.0.1:80");
        assert_eq!(addr("https://[::1]:5050").authority(), "[::1]:5050");
        assert_eq!(addr("[::1]").authority(), "[::1]:5050");
    }

    #[test]
    fn parses_zk_urls_with_the_mesos_default_path() {
        let MasterSpec::Zk { url, scheme } =
            MasterSpec::parse("zk://u:p@z1:2181,z2:2181/mesos").unwrap()
        else {
            panic!()
        };
        assert_eq!((url.root.as_str(), scheme), ("/mesos", Scheme::Http));
        let MasterSpec::Zk { url, .. } = MasterSpec::parse("zk://z1:2181").unwrap() else {
            panic!()
        };
        assert_eq!(url.root, "/");
    }

    #[test]
    fn refuses_bad_specs_clearly() {
        let cases = [
            ("", MasterSpecError::Empty),
            ("ftp://m:1", MasterSpecError::Scheme("ftp://m:1".into())),
            ("http://m:0", MasterSpecError::Host("http://m:0".into())),
            (
                "http://m:5050/api",
                MasterSpecError::Host("http://m:5050/api".into()),
            ),
            (
                "http://u:p@m:5050",
                MasterSpecError::Credentials("http://u:***@m:5050".into()),
            ),
            (
                "ftp://u:p@m:1",
                MasterSpecError::Scheme("ftp://u:***@m:1".into()),
            ),
            ("http://m:1,,n:2", MasterSpecError::Host("".into())),
            (
                "u:p@m:5050",
                MasterSpecError::Credentials("u:***@m:5050".into()),
            ),
            (
                "http://n:1,u:p@m:5050",
                MasterSpecError::Credentials("u:***@m:5050".into()),
            ),
            ("zk://", MasterSpecError::Zk(ZkUrlError::NoHosts)),
        ];
        for (spec, want) in cases {
            assert_eq!(MasterSpec::parse(spec), Err(want), "{spec}");
        }
        for spec in [
            "zk://u:hunter2@z:0/m",
            "http://user:hunter2@127.0.0.1:1",
            "http://m:1,https://user:hunter2@m:2",
            "http://user:hunter2@m:1/path",
            "ftp://user:hunter2@m:1",
            "user:hunter2@m:1",
            "http://m:1,user:hunter2@m:2",
            "user:hunter2@m:1/x",
        ] {
            let e = MasterSpec::parse(spec).unwrap_err().to_string();
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn follows_redirect_locations_like_a_browser_keeping_the_scheme() {
        let asked = Url::parse("https://m2:5051/api/v1/scheduler").unwrap();
        let cases = [
            // What a real 1.12 master sends (capture k): the delegate-prefixed path.
            (
                "//localhost:5050/master/api/v1/scheduler",
                "https://localhost:5050/master/api/v1/scheduler",
            ),
            // No path: keep the requested one.
            ("//m1:5050", "https://m1:5050/api/v1/scheduler"),
            (
                "http://m1:5050/api/v1/scheduler",
                "http://m1:5050/api/v1/scheduler",
            ),
            (
                "/master/api/v1/scheduler",
                "https://m2:5051/master/api/v1/scheduler",
            ),
        ];
        for (location, want) in cases {
            assert_eq!(
                MasterAddress::follow(&asked, location).unwrap().as_str(),
                want,
                "{location}"
            );
        }
        assert!(MasterAddress::follow(&asked, "ftp://x/").is_none());
        let leader =
            MasterAddress::of_url(&MasterAddress::follow(&asked, "//m1:5050").unwrap()).unwrap();
        assert_eq!(leader.to_string(), "https://m1:5050");
        assert_eq!(
            leader.endpoint("/api/v1").as_str(),
            "https://m1:5050/api/v1"
        );
    }
}
