//! [`AppError`]: the one error type at the HTTP edge.
//!
//! API errors are RFC 9457 problem documents (`application/problem+json`):
//!
//! ```json
//! {"type": "urn:mesos-appliance:problem:not-leader", "title": "Not the leader",
//!  "status": 503, "detail": "this replica does not lead; the leader is http://b:8080",
//!  "leader_url": "http://b:8080"}
//! ```
//!
//! with `errors: [{"field", "message"}]` for field-level validation
//! failures. Page handlers mark their errors [`AppError::html`] and get an
//! HTML error page with the same status instead. Its "Back" link is a plain
//! link (the pages' CSP allows no inline script): to the page the user came
//! from when that is a page of this server ([`super::pages::back_links`]), else none.

use askama::Template;
use askama_web::WebTemplate;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::coordination::CoordinationError;
use crate::scheduler::{CommandError, FieldError};

/// An error answered to an HTTP client. Boxed: handlers return it in
/// `Result`s, and it carries several strings. Its fields are read through
/// [`ErrorDetail`].
#[derive(Debug, Clone)]
pub struct AppError(Box<ErrorDetail>);

impl std::ops::Deref for AppError {
    type Target = ErrorDetail;
    fn deref(&self) -> &ErrorDetail {
        &self.0
    }
}

impl std::ops::DerefMut for AppError {
    fn deref_mut(&mut self) -> &mut ErrorDetail {
        &mut self.0
    }
}

/// What an [`AppError`] says.
#[derive(Debug, Clone)]
pub struct ErrorDetail {
    /// The HTTP status.
    pub status: StatusCode,
    /// Problem type slug, e.g. `not-leader` (the `type` URI ends with it).
    pub kind: &'static str,
    /// Short, fixed summary of the kind.
    pub title: &'static str,
    /// What happened this time.
    pub detail: String,
    /// The leader's URL (not-leader answers).
    pub leader_url: Option<String>,
    /// `Location` header value (not-leader answers: the same path on the
    /// leader).
    pub location: Option<String>,
    /// Field-level problems (invalid service specs, forms).
    pub errors: Vec<FieldError>,
    /// `WWW-Authenticate` header value (401 answers).
    pub challenge: Option<&'static str>,
    /// `Retry-After` in seconds (429 answers; 503 answers say 2 without).
    pub retry_after: Option<u64>,
    /// Answer with an HTML page instead of JSON.
    pub html: bool,
}

/// An RFC 9457 problem document (`application/problem+json`), the body of
/// every error the JSON API answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"type": "urn:mesos-appliance:problem:not-found", "title": "Not found",
    "status": 404, "detail": "no service \"web\""}))]
pub struct Problem {
    /// `urn:mesos-appliance:problem:<kind>`, e.g. `…:not-leader`, `…:invalid`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short, fixed summary of the kind.
    pub title: String,
    /// The HTTP status.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What happened this time.
    pub detail: String,
    /// The leader's URL (answers of a replica that does not lead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_url: Option<String>,
    /// Field-level problems (validation), each naming the field's JSON path.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub errors: Vec<FieldError>,
}

impl AppError {
    /// An error of `status`, kind `kind` (slug), with `title` and `detail`.
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> AppError {
        AppError(Box::new(ErrorDetail {
            status,
            kind,
            title,
            detail: detail.into(),
            leader_url: None,
            location: None,
            errors: Vec::new(),
            challenge: None,
            retry_after: None,
            html: false,
        }))
    }

    /// Render as an HTML page (for page handlers).
    pub fn html(mut self) -> AppError {
        self.html = true;
        self
    }

    /// 400: the request cannot be understood.
    pub fn bad_request(detail: impl Into<String>) -> AppError {
        AppError::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Bad request",
            detail,
        )
    }

    /// 400 with field-level errors.
    pub fn invalid(errors: Vec<FieldError>) -> AppError {
        let detail = errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        let mut e = AppError::new(
            StatusCode::BAD_REQUEST,
            "invalid",
            "Invalid request",
            detail,
        );
        e.errors = errors;
        e
    }

    /// 404.
    pub fn not_found(detail: impl Into<String>) -> AppError {
        AppError::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 404 for `what` (`service "web"`, `task "web.0.x"`), not in `s`;
    /// but while `s` is [`loading`](crate::scheduler::Snapshot::loading),
    /// 503 `loading` (with `Retry-After`): it may be stored and not read
    /// yet, and an absence is not known until the records are.
    pub fn absent(s: &crate::scheduler::Snapshot, what: impl std::fmt::Display) -> AppError {
        if !s.loading {
            return AppError::not_found(format!("no {what}"));
        }
        AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "loading",
            "Loading",
            format!(
                "{what} is not known yet: the stored records are not all read yet; try again \
                 in a moment"
            ),
        )
    }

    /// 409: the action does not apply in the current state.
    pub fn conflict(detail: impl Into<String>) -> AppError {
        AppError::new(StatusCode::CONFLICT, "conflict", "Conflict", detail)
    }

    /// 401: no credentials. `invalid` when some were given but are wrong
    /// (RFC 6750 `error="invalid_token"`).
    pub fn unauthorized(invalid: bool) -> AppError {
        let (detail, challenge) = if invalid {
            (
                "the admin token is wrong",
                r#"Bearer realm="mesos-appliance", error="invalid_token""#,
            )
        } else {
            (
                "this action needs the admin token (Authorization: Bearer <token>, or log in)",
                r#"Bearer realm="mesos-appliance""#,
            )
        };
        let mut e = AppError::new(
            StatusCode::UNAUTHORIZED,
            if invalid {
                "invalid-token"
            } else {
                "unauthorized"
            },
            "Unauthorized",
            detail,
        );
        e.challenge = Some(challenge);
        e
    }

    /// 429: too many wrong admin tokens from this client lately; try again
    /// after `left` (see [`Keys::check_admin_token`](super::auth::Keys::check_admin_token)).
    pub fn too_many_attempts(left: std::time::Duration) -> AppError {
        let secs = left.as_secs_f64().ceil().max(1.0) as u64;
        let mut e = AppError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too-many-attempts",
            "Too many attempts",
            format!("too many wrong admin tokens from this client; try again in {secs}s"),
        );
        e.retry_after = Some(secs);
        e
    }

    /// 403 of kind `kind` (`cross-origin`, `csrf`, `actions-disabled`, …).
    pub fn forbidden(kind: &'static str, detail: impl Into<String>) -> AppError {
        AppError::new(StatusCode::FORBIDDEN, kind, "Forbidden", detail)
    }

    /// 503 from a replica that does not lead, pointing at the leader: the
    /// body carries `leader_url` and `Location` is `path` on the leader.
    pub fn not_leader(leader_url: Option<String>, path: &str) -> AppError {
        let detail = match &leader_url {
            Some(url) => format!("this replica does not lead; the leader is {url}"),
            None => "this replica does not lead and no leader is known right now".to_string(),
        };
        let mut e = AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-leader",
            "Not the leader",
            detail,
        );
        e.location = leader_url
            .as_ref()
            .map(|u| format!("{}{}", u.trim_end_matches('/'), path));
        e.leader_url = leader_url;
        e
    }

    /// The answer to a command the core refused or did not answer; `path`
    /// is the request path (for the not-leader `Location`).
    pub fn from_command(err: CommandError, path: &str) -> AppError {
        let detail = err.to_string();
        match err {
            CommandError::NotLeader { leader_url } => AppError::not_leader(leader_url, path),
            CommandError::LeadershipLost => AppError::not_leader(None, path),
            CommandError::Conflict(_) => AppError::conflict(detail),
            CommandError::PreconditionFailed(_) => AppError::new(
                StatusCode::PRECONDITION_FAILED,
                "precondition-failed",
                "Changed since it was read",
                detail,
            ),
            CommandError::Invalid(errors) => AppError::invalid(errors),
            // The title says "Not found"; the core's own "not found: "
            // prefix would say it twice.
            CommandError::NotFound(what) => AppError::not_found(what),
            CommandError::Mesos(_) => AppError::new(
                StatusCode::BAD_GATEWAY,
                "mesos",
                "Mesos refused or is unreachable",
                detail,
            ),
            CommandError::Store(e) => AppError::from(e),
            CommandError::NotReady(_) => {
                let mut e = AppError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not-ready",
                    "Not ready yet",
                    detail,
                );
                e.retry_after = Some(1);
                e
            }
            CommandError::Timeout(_) => AppError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout",
                "The scheduler did not answer in time",
                detail,
            ),
        }
    }

    /// 500 for a bug on our side (never an input problem).
    pub fn internal(detail: impl Into<String>) -> AppError {
        AppError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            detail,
        )
    }
}

/// A ZooKeeper failure at the edge: a version conflict (someone else wrote
/// the record since it was read) is 409, so the client reads again; an
/// outage is 503 and worth retrying.
impl From<CoordinationError> for AppError {
    fn from(error: CoordinationError) -> AppError {
        let detail = error.to_string();
        match error {
            CoordinationError::VersionConflict { .. } | CoordinationError::Mismatch { .. } => {
                AppError::conflict(format!(
                    "ZooKeeper: {detail}: the record changed meanwhile; read it again and retry"
                ))
            }
            CoordinationError::NotLeader => AppError::not_leader(None, ""),
            CoordinationError::Invalid(_) => AppError::bad_request(detail),
            CoordinationError::TooLarge { .. } => AppError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                "Too large to store",
                format!("ZooKeeper: {detail}"),
            ),
            _ => AppError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store",
                "ZooKeeper failed",
                format!("ZooKeeper: {detail}"),
            ),
        }
    }
}

impl ErrorDetail {
    /// The `type` URI of the problem document.
    pub fn type_uri(&self) -> String {
        format!("urn:mesos-appliance:problem:{}", self.kind)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.title,
            self.detail
        )
    }
}

impl std::error::Error for AppError {}

/// The HTML error page (standalone: it does not need a snapshot).
#[derive(Template, WebTemplate)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    detail: &'a str,
    leader_url: Option<&'a str>,
    location: Option<&'a str>,
    errors: &'a [FieldError],
    login: bool,
    /// Where "Back" goes; `/` (the overview, linked anyway) shows none.
    back: &'a str,
    asset_version: &'a str,
    /// The navigation, as every page shows it.
    sections: &'static [super::nav::Section],
}

impl ErrorDetail {
    /// The HTML error page, its "Back" link to `back`.
    fn page(&self, back: &str) -> Response {
        ErrorPage {
            status: self.status.as_u16(),
            title: self.title,
            detail: &self.detail,
            leader_url: self.leader_url.as_deref(),
            location: self.location.as_deref(),
            errors: &self.errors,
            login: self.status == StatusCode::UNAUTHORIZED,
            back,
            asset_version: super::assets::version(),
            sections: super::nav::SECTIONS,
        }
        .into_response()
    }
}

/// Marks a response as an HTML error page, with what it says, so that
/// [`super::pages::back_links`] can point its "Back" link at the page the user came from.
#[derive(Clone)]
struct HtmlError(ErrorDetail);

/// Re-renders the HTML error page `response` carries (if any) with its
/// "Back" link to `back` (the middleware is [`super::pages::back_links`]).
pub(super) fn set_back_link(response: &mut Response, back: Option<&str>) {
    let error = response.extensions_mut().remove::<HtmlError>();
    if let (Some(back), Some(HtmlError(detail))) = (back, error) {
        *response.body_mut() = detail.page(back).into_body();
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let this = *self.0;
        this.into_response()
    }
}

impl IntoResponse for ErrorDetail {
    fn into_response(self) -> Response {
        if self.status.is_server_error() && self.kind == "internal" {
            tracing::error!(detail = %self.detail, "internal error answered");
        }
        let mut response = if self.html {
            let mut page = self.page("/");
            page.extensions_mut().insert(HtmlError(self.clone()));
            page
        } else {
            let problem = Problem {
                kind: self.type_uri(),
                title: self.title.to_string(),
                status: self.status.as_u16(),
                detail: self.detail.clone(),
                leader_url: self.leader_url.clone(),
                errors: self.errors.clone(),
            };
            let body = serde_json::to_vec(&problem).unwrap_or_default();
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/problem+json"),
                )],
                body,
            )
                .into_response()
        };
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        if let Some(location) = self.location.and_then(|l| HeaderValue::try_from(l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        if let Some(challenge) = self.challenge {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        match self.retry_after {
            Some(secs) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            None if self.status == StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
            }
            None => {}
        }
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// Whether a request for `uri` wants JSON errors: everything under `/api/`
/// and the machine endpoints.
pub fn wants_json(uri: &Uri) -> bool {
    let path = uri.path();
    path.starts_with("/api/") || matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// Fallback for unknown routes: 404 as an HTML page, or a JSON problem
/// under `/api/`.
pub async fn not_found(uri: Uri) -> AppError {
    let e = AppError::not_found(format!("no such page or endpoint: {}", uri.path()));
    if wants_json(&uri) { e } else { e.html() }
}

/// Fallback for a known path with the wrong method: 405.
pub async fn method_not_allowed(method: Method, uri: Uri) -> AppError {
    let e = AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!("{method} is not allowed on {}", uri.path()),
    );
    if wants_json(&uri) { e } else { e.html() }
}

/// The error responses shared by the operations: RFC 9457 problem
/// documents ([`Problem`]) as the web layer really answers them.
pub mod responses {
    use super::Problem;

    /// 400: a path, query or body that does not decode or validate; field
    /// problems in `errors`.
    #[derive(utoipa::IntoResponses)]
    #[response(status = 400, content_type = "application/problem+json")]
    pub struct BadRequest(pub Problem);

    /// 404: no such object.
    #[derive(utoipa::IntoResponses)]
    #[response(status = 404, content_type = "application/problem+json")]
    pub struct NotFound(pub Problem);

    /// 409: the change does not apply in the current state.
    #[derive(utoipa::IntoResponses)]
    #[response(status = 409, content_type = "application/problem+json")]
    pub struct Conflict(pub Problem);

    /// 412: a conditional change (`If-Match`) whose object changed since
    /// it was read; nothing was done.
    #[derive(utoipa::IntoResponses)]
    #[response(status = 412, content_type = "application/problem+json")]
    pub struct PreconditionFailed(pub Problem);

    /// 503: no leader known, the store or the core did not answer in
    /// time, (live streams) every place for a stream is taken, or (a
    /// lookup) the stored records are not all read yet (`loading`)
    /// (`Retry-After`).
    #[derive(utoipa::IntoResponses)]
    #[response(status = 503, content_type = "application/problem+json")]
    pub struct Unavailable(pub Problem);

    /// 502 / 504: the Mesos master or agent failed or did not answer in time.
    #[derive(utoipa::IntoResponses)]
    pub enum Upstream {
        /// The Mesos master or agent answered an error, or is unreachable.
        #[response(status = 502, content_type = "application/problem+json")]
        BadGateway(Problem),
        /// The agent did not answer in time.
        #[response(status = 504, content_type = "application/problem+json")]
        Timeout(Problem),
    }

    /// The refusals of every change (`Admin` / `AdminChange` in
    /// `web/extract.rs`), in the order they are checked.
    #[derive(utoipa::IntoResponses)]
    pub enum AdminRefusals {
        /// `Origin` / `Referer` from another site (`cross-origin`), or
        /// actions disabled.
        #[response(status = 403, content_type = "application/problem+json")]
        Forbidden(Problem),
        /// No admin token, or a wrong one (`WWW-Authenticate: Bearer`).
        #[response(status = 401, content_type = "application/problem+json")]
        Unauthorized(Problem),
        /// Too many wrong tokens from this client (`Retry-After`).
        #[response(status = 429, content_type = "application/problem+json")]
        TooMany(Problem),
        /// The body is larger than 64 KiB.
        #[response(status = 413, content_type = "application/problem+json")]
        TooLarge(Problem),
        /// A `Content-Type` other than JSON was declared (even without a body).
        #[response(status = 415, content_type = "application/problem+json")]
        Unsupported(Problem),
        /// This replica does not lead: `leader_url` and `Location` name the
        /// leader; or no leader is known; or the core did not answer in time.
        #[response(status = 503, content_type = "application/problem+json")]
        NotLeader(Problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write ZooKeeper would refuse (`CoordinationError::TooLarge`,
    /// refused before sending) reaches the client as 413 with an RFC 9457
    /// problem naming the znode and both sizes, through the command path
    /// (`CommandError::Store`) as every handler answers it.
    #[tokio::test]
    async fn a_write_too_large_for_zookeeper_is_413_problem() {
        let error = CommandError::Store(CoordinationError::TooLarge {
            path: "/appliance/services/web".into(),
            bytes: 1_048_600,
            limit: 1_048_575,
        });
        let response = AppError::from_command(error, "/api/v1/services/web").into_response();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
            .await
            .expect("a body");
        let problem: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(problem["status"], 413, "{problem}");
        assert!(
            problem["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("too-large")),
            "{problem}"
        );
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("/appliance/services/web") && detail.contains("1048600"),
            "{problem}"
        );
    }

    /// A missing thing is said once: the title says "Not found", the
    /// detail names the thing (the audit summary and `ctl` join the two).
    #[test]
    fn not_found_from_the_core_does_not_repeat_itself() {
        let e = AppError::from_command(
            CommandError::NotFound("service nope".into()),
            "/api/v1/services/nope",
        );
        assert_eq!(e.status, StatusCode::NOT_FOUND);
        assert_eq!(
            format!("{}: {}", e.title, e.detail),
            "Not found: service nope"
        );
    }
}
