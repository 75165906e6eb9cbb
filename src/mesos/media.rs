//! Media types and header names of the Mesos v1 HTTP APIs
//! (`docs/scheduler-http-api.md`, `docs/mesos-protocol.md#endpoint-and-media-types`).

/// `Content-Type` / `Accept` value for JSON bodies.
pub const JSON: &str = "application/json";
/// `Content-Type` / `Accept` value for protobuf bodies.
pub const PROTOBUF: &str = "application/x-protobuf";
/// Header carrying the subscription's stream ID, set by the master on SUBSCRIBE
/// and required on every later scheduler call.
pub const STREAM_ID_HEADER: &str = "Mesos-Stream-Id";

/// How a request or an event stream is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Mesos' JSON mapping of the protobuf messages ([`super::json`]).
    Json,
    /// Binary protobuf.
    Protobuf,
}

impl Encoding {
    /// The media type string of this encoding.
    pub fn media_type(self) -> &'static str {
        match self {
            Encoding::Json => JSON,
            Encoding::Protobuf => PROTOBUF,
        }
    }

    /// Parses a `Content-Type` the way the master does: exact string equality,
    /// no parameters allowed (`application/json; charset=utf-8` is refused).
    pub fn from_content_type(value: &str) -> Option<Self> {
        match value {
            JSON => Some(Encoding::Json),
            PROTOBUF => Some(Encoding::Protobuf),
            _ => None,
        }
    }

    /// Chooses the response encoding from an `Accept` header the way the master
    /// does: absent means "anything" and yields JSON; JSON is tested before
    /// protobuf; `None` means neither is acceptable (the master answers 406).
    pub fn negotiate(accept: Option<&str>) -> Option<Self> {
        let Some(accept) = accept else {
            return Some(Encoding::Json);
        };
        let accepts = |wanted: &str| {
            let (wanted_type, _) = wanted.split_once('/').unwrap_or((wanted, ""));
            accept.split(',').any(|item| {
                let mut parts = item.split(';');
                let range = parts.next().unwrap_or("").trim();
                let q_zero = parts.any(|p| {
                    let p = p.trim();
                    p.strip_prefix("q=")
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
                });
                if q_zero {
                    return false;
                }
                range == "*/*" || range == wanted || range == format!("{wanted_type}/*")
            })
        };
        if accepts(JSON) {
            Some(Encoding::Json)
        } else if accepts(PROTOBUF) {
            Some(Encoding::Protobuf)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_is_matched_exactly() {
        assert_eq!(Encoding::from_content_type(JSON), Some(Encoding::Json));
        assert_eq!(
            Encoding::from_content_type(PROTOBUF),
            Some(Encoding::Protobuf)
        );
        assert_eq!(
            Encoding::from_content_type("application/json; charset=utf-8"),
            None
        );
        assert_eq!(Encoding::from_content_type("text/plain"), None);
    }

    #[test]
    fn accept_negotiation_prefers_json() {
        assert_eq!(Encoding::negotiate(None), Some(Encoding::Json));
        assert_eq!(Encoding::negotiate(Some("*/*")), Some(Encoding::Json));
        assert_eq!(
            Encoding::negotiate(Some(PROTOBUF)),
            Some(Encoding::Protobuf)
        );
        assert_eq!(
            Encoding::negotiate(Some("application/x-protobuf, application/json")),
            Some(Encoding::Json)
        );
        assert_eq!(
            Encoding::negotiate(Some("application/json;q=0, application/x-protobuf")),
            Some(Encoding::Protobuf)
        );
        assert_eq!(Encoding::negotiate(Some("text/html")), None);
    }
}
