//! The `api/` room: the testbed master's HTTP APIs — the v1 scheduler API
//! (`scheduler_api`), the v1 operator API and the legacy endpoints
//! (`operator_api`, with the JSON views of `views`), and the `/testbed`
//! fault and inspection API (`control`) — and what they share here: the
//! leader gate (redirect or 503 on a master that does not lead) and HTTP
//! basic authentication. The agents' endpoints (executor API, files API)
//! are in `agents/`, as on a real agent.
//!
//! The top room below `mod.rs`: it imports `master`, `agents`, `config`
//! and `http`; nothing imports it but `mod.rs`.

pub(super) mod control;
pub(super) mod maintenance_api;
pub(super) mod operator_api;
pub(super) mod scheduler_api;
pub(super) mod views;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::testbed::http::{empty, redirect, text};
use crate::testbed::master::{Leadership, Master};

/// The path a real master puts in its redirects: the request path under the
/// `master` delegate prefix (capture k: `/api/v1/scheduler` is redirected to
/// `//localhost:5050/master/api/v1/scheduler`).
fn delegate_path(path: &str) -> String {
    if path.starts_with("/master/") {
        path.to_string()
    } else {
        format!("/master{path}")
    }
}

/// `None` when this master leads; otherwise the 307 to the leader or the
/// 503 `No leader elected` that a non-leading master answers
/// (`Master::Http::redirect` in `src/master/http.cpp`; capture k).
pub(crate) fn leader_gate(master: &Master, path: &str) -> Option<Response> {
    match &master.leadership {
        Leadership::Leading => None,
        Leadership::Following { leader } => {
            Some(redirect(&format!("//{leader}{}", delegate_path(path))))
        }
        Leadership::NoLeader => Some(text(StatusCode::SERVICE_UNAVAILABLE, "No leader elected")),
    }
}

/// HTTP basic authentication as libprocess' basic authenticator does it
/// (`BasicAuthenticatorProcess::authenticate` in
/// `3rdparty/libprocess/src/authenticator.cpp`; enabled by the master flags
/// `--authenticate_http_frameworks`, `--authenticate_http_readwrite`):
/// `Ok(None)` when the testbed has no credentials, `Ok(Some(principal))`
/// for valid ones, else 401 with `WWW-Authenticate: Basic realm="<realm>"`
/// (realms `mesos-master-scheduler`, `mesos-master-readwrite`, named in
/// `src/master/constants.hpp`;
/// `docs/mesos-protocol.md#status-codes-of-the-scheduler-endpoint`).
pub(crate) fn authenticate(
    master: &Master,
    headers: &axum::http::HeaderMap,
    realm: &'static str,
) -> Result<Option<String>, Unauthorized> {
    use base64::Engine;
    let Some(credentials) = &master.cfg.credentials else {
        return Ok(None);
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
        })
        .and_then(|b| String::from_utf8(b).ok());
    if let Some((principal, secret)) = given.as_deref().and_then(|g| g.split_once(':'))
        && credentials
            .iter()
            .any(|(p, s)| p == principal && s == secret)
    {
        return Ok(Some(principal.to_string()));
    }
    Err(Unauthorized(realm))
}

/// A 401 challenging for basic credentials in a realm.
#[derive(Debug)]
pub(crate) struct Unauthorized(pub &'static str);

impl IntoResponse for Unauthorized {
    fn into_response(self) -> Response {
        let mut response = empty(StatusCode::UNAUTHORIZED);
        if let Ok(value) = HeaderValue::from_str(&format!("Basic realm=\"{}\"", self.0)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}
