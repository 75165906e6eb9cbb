//! What a task runs: its command, and the files the Mesos fetcher puts
//! into its sandbox first.

use serde::{Deserialize, Serialize};

/// What a task runs: a shell command line (`/bin/sh -c`), or an argv array
/// executed directly (Mesos `CommandInfo.shell` = false).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum CommandSpec {
    /// Run by `/bin/sh -c`.
    Shell(String),
    /// `argv[0]` is the program.
    Argv(Vec<String>),
}

impl CommandSpec {
    /// The command as shown: the shell line, or the argv as a JSON array.
    pub fn display(&self) -> String {
        match self {
            CommandSpec::Shell(line) => line.clone(),
            CommandSpec::Argv(argv) => serde_json::to_string(argv).unwrap_or_default(),
        }
    }
}

/// A file the Mesos fetcher downloads into the sandbox (`CommandInfo.URI`).
///
/// In a service: an object `{"value": URL, "executable": false, "extract":
/// true, "cache": false}` (all but `value` optional, defaults as shown, as in
/// Mesos' `CommandInfo.URI`) or a bare URL string, which takes the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UriSpec {
    /// The URL.
    pub value: String,
    /// Make the file executable.
    #[serde(default)]
    pub executable: bool,
    /// Extract archives (Mesos default: true).
    #[serde(default = "yes")]
    pub extract: bool,
    /// Let the fetcher cache it.
    #[serde(default)]
    pub cache: bool,
}

fn yes() -> bool {
    true
}

/// Deserializes `uris`, each a URL string or a [`UriSpec`] object.
pub(super) fn uris_or_urls<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<UriSpec>, D::Error> {
    let items = Vec::<serde_json::Value>::deserialize(d)?;
    items
        .into_iter()
        .map(|item| match item {
            serde_json::Value::String(value) => Ok(UriSpec {
                value,
                executable: false,
                extract: true,
                cache: false,
            }),
            object => serde_json::from_value(object).map_err(serde::de::Error::custom),
        })
        .collect()
}

/// URL schemes the Mesos fetcher downloads (`src/launcher/fetcher.cpp`:
/// curl's, the Hadoop client's, and local files).
pub const URI_SCHEMES: [&str; 9] = [
    "http", "https", "ftp", "ftps", "hdfs", "s3", "s3n", "s3a", "file",
];

/// Why a `uris` value is refused; the URI is shown with its password
/// hidden.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    /// Empty or blank.
    #[error("must not be empty")]
    Empty,
    /// Surrounding spaces or control characters.
    #[error("{0:?}: no surrounding spaces or control characters")]
    Spacing(String),
    /// A scheme the Mesos fetcher does not fetch.
    #[error("{shown:?}: the Mesos fetcher does not fetch {scheme}: URLs; expected {} or an absolute path", URI_SCHEMES.join(", "))]
    Scheme {
        /// The URI as shown.
        shown: String,
        /// Its scheme.
        scheme: String,
    },
    /// Neither an absolute URL with a host (a path for `file`) nor an
    /// absolute path.
    #[error("{shown:?}: expected an absolute URL ({}) or an absolute path", URI_SCHEMES.join(", "))]
    NotAbsolute {
        /// The URI as shown.
        shown: String,
    },
}

/// A `uris` value: an absolute URL with a scheme of [`URI_SCHEMES`] (and a
/// host, but for `file`), or an absolute path, which the fetcher copies
/// from the agent's file system.
pub(super) fn check_uri(value: &str) -> Result<(), UriError> {
    // Messages show the URI with its password hidden.
    let shown = || crate::util::zk::redact_password(value);
    if value.trim().is_empty() {
        return Err(UriError::Empty);
    }
    if value != value.trim() || value.chars().any(char::is_control) {
        return Err(UriError::Spacing(shown()));
    }
    if value.starts_with('/') {
        return Ok(());
    }
    let url = reqwest::Url::parse(value).map_err(|_| UriError::NotAbsolute { shown: shown() })?;
    if !URI_SCHEMES.contains(&url.scheme()) {
        return Err(UriError::Scheme {
            shown: shown(),
            scheme: url.scheme().to_string(),
        });
    }
    let located = if url.scheme() == "file" {
        url.path().len() > 1
    } else {
        url.host_str().is_some_and(|h| !h.is_empty())
    };
    if !located {
        return Err(UriError::NotAbsolute { shown: shown() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    // `uris` is read and checked as a part of a service spec.
    use super::super::service::ServiceSpec;

    fn spec(json: serde_json::Value) -> ServiceSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn uris_are_urls_or_objects() {
        let s: ServiceSpec = serde_json::from_value(serde_json::json!({
            "name": "a", "command": "x", "cpus": 1, "mem": 1, "instances": 1,
            "uris": ["http://h/f.tgz", {"value": "http://h/run", "executable": true}]}))
        .unwrap();
        assert_eq!(s.uris[0].value, "http://h/f.tgz");
        assert!(s.uris[0].extract && !s.uris[0].executable && !s.uris[0].cache);
        assert!(s.uris[1].executable && s.uris[1].extract);
        let err = serde_json::from_value::<ServiceSpec>(serde_json::json!({
            "name": "a", "command": "x", "cpus": 1, "mem": 1, "instances": 1,
            "uris": [{"value": "http://h/f", "exec": true}]}))
        .unwrap_err();
        assert!(err.to_string().contains("unknown field `exec`"), "{err}");
        let clash = spec(serde_json::json!({
            "name": "a", "command": "x", "cpus": 1, "mem": 1, "instances": 1,
            "executor": "appliance", "uris": ["http://h/bin/mesos-appliance-executor?v=2"]}));
        assert!(
            clash.validate()[0]
                .to_string()
                .contains("replace mesos-appliance-executor"),
            "{:?}",
            clash.validate()
        );
    }

    #[test]
    fn uris_are_urls_the_fetcher_takes_or_absolute_paths() {
        let with = |uris: serde_json::Value| {
            spec(
                serde_json::json!({"name": "a", "command": "x", "cpus": 1, "mem": 1,
                "instances": 1, "uris": uris}),
            )
            .validate()
        };
        let good = serde_json::json!([
            "http://h/f.tgz",
            "https://h:8443/a/b?x=1",
            "ftp://h/f",
            "ftps://h/f",
            "hdfs://namenode:8020/apps/f.jar",
            "s3://bucket/key",
            "s3n://bucket/key",
            "s3a://bucket/key",
            "file:///opt/f.tgz",
            "/opt/local/f.tgz",
            {"value": "HTTP://H/F", "extract": false},
        ]);
        assert_eq!(with(good), []);
        let bad = serde_json::json!([
            "not a url at all",
            "",
            "relative/path.tgz",
            "gopher://h/f",
            "javascript:alert(1)",
            "http://",
            "file://",
            " http://h/f",
            "http://h/f\n",
        ]);
        let errors = with(bad);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "uris[0]", "uris[1]", "uris[2]", "uris[3]", "uris[4]", "uris[5]", "uris[6]",
                "uris[7]", "uris[8]"
            ]
        );
        assert!(
            errors[0].message.contains("absolute URL"),
            "{}",
            errors[0].message
        );
        assert!(
            errors[3].message.contains("does not fetch gopher"),
            "{}",
            errors[3].message
        );
    }
}
