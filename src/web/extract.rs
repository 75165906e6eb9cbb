//! The typed edges of the web layer: extractors that turn a request into
//! what a handler works with, or into the [`AppError`] it answers.
//!
//! - Rejections of axum's own extractors become an [`AppError`] here, and
//!   nowhere else (the `From` impls below).
//! - Paths and queries come in two flavours: [`ApiPath`] / [`ApiQuery`]
//!   answer a JSON problem, [`PagePath`] / [`PageQuery`] an HTML error
//!   page. (Queries that refuse unknown parameters:
//!   [`StrictQuery`](super::query::StrictQuery), API only.)
//! - [`Admin`]: the checks every mutating API call passes first — Origin,
//!   then the admin token (or the loopback rule), then leadership, then
//!   the declared `Content-Type`.
//! - [`ActionBody`]: an API action's JSON body as its own struct, left out
//!   meaning all defaults; unknown fields refused, each one named.
//! - [`AdminForm`]: a browser's action post — the form, then Origin, CSRF,
//!   the admin session (or loopback rule), leadership and the reason.
//!
//! Extractors run in the order of a handler's parameters and the first
//! refusal answers, so that order is the order of the checks.

use axum::Form;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FormRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::AppState;
use super::audit::{self, Context};
use super::auth::{self, Actor, Peer};
use super::error::AppError;
use super::query::{StrictQuery, field_names};
use crate::scheduler::FieldError;
use crate::util::json::JsonError;

/// A path that does not decode: 400.
impl From<PathRejection> for AppError {
    fn from(e: PathRejection) -> AppError {
        AppError::bad_request(e.body_text())
    }
}

/// A query that does not decode: 400.
impl From<QueryRejection> for AppError {
    fn from(e: QueryRejection) -> AppError {
        AppError::bad_request(e.body_text())
    }
}

/// A form post that cannot be read (axum's status: 415 not a form, 422 a
/// field that does not decode or that the form does not take, 400 else).
/// Forms come from browsers only: an HTML page.
impl From<FormRejection> for AppError {
    fn from(e: FormRejection) -> AppError {
        AppError::new(e.status(), "form", "Unusable form post", e.body_text()).html()
    }
}

/// A body that cannot be read.
impl From<BytesRejection> for AppError {
    fn from(e: BytesRejection) -> AppError {
        AppError::new(e.status(), "body", "Unreadable request body", e.body_text())
    }
}

/// A path's parameters as a `T`; 400 as a JSON problem.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

/// A path's parameters as a `T`; 400 as an HTML page.
#[derive(Debug, Clone)]
pub struct PagePath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PagePath<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let ApiPath(value) = ApiPath::from_request_parts(parts, state)
            .await
            .map_err(AppError::html)?;
        Ok(PagePath(value))
    }
}

/// The query as a `T` (parameters `T` does not name are ignored, as by
/// axum's `Query`); 400 as a JSON problem.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        super::query::decode(parts.uri.query().unwrap_or("")).map(ApiQuery)
    }
}

/// The query as a `T`, as [`ApiQuery`]; 400 as an HTML page.
#[derive(Debug, Clone)]
pub struct PageQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for PageQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let ApiQuery(value) = ApiQuery::from_request_parts(parts, state)
            .await
            .map_err(AppError::html)?;
        Ok(PageQuery(value))
    }
}

/// A mutating API call that passed the admin checks, in this order:
/// Origin (403), the admin token or the loopback rule (401/403/429), this
/// replica leads (503 with the leader's URL), and the request declares no
/// `Content-Type` but JSON (415, even with an empty body).
pub struct Admin {
    /// The web layer's state.
    pub state: AppState,
    /// Who is acting.
    pub actor: Actor,
    /// From where.
    pub peer: Peer,
    /// The request path (for a not-leader `Location`).
    pub path: String,
}

impl Admin {
    /// The audit context of this call, with its `reason`.
    pub fn context(&self, reason: Option<String>) -> Context {
        Context::api(self.actor.clone(), self.peer, reason)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        let peer = Peer::from_request_parts(parts, state)
            .await
            .unwrap_or(Peer(None));
        let headers = &parts.headers;
        auth::check_origin(headers, &state.config.advertised_url, false)?;
        let actor = auth::check_access(state.access, &state.keys, headers, peer, false)?;
        let path = parts.uri.path().to_string();
        leader_precheck(state, &path)?;
        refuse_form_types(headers)?;
        Ok(Admin {
            state: state.clone(),
            actor,
            peer,
            path,
        })
    }
}

/// 503 with the leader's URL unless the latest snapshot says this replica
/// leads (the core double-checks: it answers `NotLeader` too).
fn leader_precheck(state: &AppState, path: &str) -> Result<(), AppError> {
    let s = state.handle.snapshot();
    if s.leadership.is_leader() {
        Ok(())
    } else {
        Err(AppError::not_leader(s.leader_url(), path))
    }
}

/// `?reason=` of a service change (its body is the spec).
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct ReasonQuery {
    /// Why (see [`super::audit`]).
    pub reason: Option<String>,
}

/// A service change's checks, in this order: its `?reason=` decodes and no
/// other parameter is given (400, [`StrictQuery`]),
/// the checks of [`Admin`], then the reason's length (400). (The body, the
/// spec, is the handler's next extractor.)
pub struct AdminChange {
    /// Who acts, where.
    pub admin: Admin,
    /// Who asks and why.
    pub ctx: Context,
}

impl FromRequestParts<AppState> for AdminChange {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        // Strict, as every `/api/v1` write's query: `?reasn=` is a 400, not
        // a change whose audit reason is silently lost.
        let StrictQuery(query) =
            StrictQuery::<ReasonQuery>::from_request_parts(parts, state).await?;
        let admin = Admin::from_request_parts(parts, state).await?;
        let ctx = admin.context(audit::check_reason(query.reason.as_deref())?);
        Ok(AdminChange { admin, ctx })
    }
}

/// Whether the request declares a JSON `Content-Type`
/// (`application/json` or `application/*+json`); `None` when it declares
/// none.
fn declares_json(headers: &HeaderMap) -> Option<bool> {
    headers.get(header::CONTENT_TYPE).map(|v| {
        v.to_str()
            .ok()
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| {
                let t = t.trim().to_ascii_lowercase();
                t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
            })
    })
}

/// 415 when a mutating API call declares any `Content-Type` but JSON, even
/// with an empty body: a plain HTML form on another site can only send
/// `application/x-www-form-urlencoded`, `multipart/form-data` or
/// `text/plain`, and must never drive the API ([`super::auth`]).
fn refuse_form_types(headers: &HeaderMap) -> Result<(), AppError> {
    if declares_json(headers) == Some(false) {
        return Err(unsupported_media_type(
            "the API accepts only Content-Type: application/json (form and text types are \
             refused even with an empty body)",
        ));
    }
    Ok(())
}

fn unsupported_media_type(detail: &str) -> AppError {
    AppError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
        "Unsupported media type",
        detail,
    )
}

/// A JSON request body: empty (or only white space) is `None`; otherwise
/// it must be declared JSON (415), parse, each key once per object (400,
/// naming the JSON path at fault), and be a JSON object (400,
/// `not_an_object`): every JSON endpoint of the API takes an object.
pub struct JsonBody(pub Option<serde_json::Map<String, serde_json::Value>>);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, AppError> {
        let json = declares_json(request.headers());
        let body = Bytes::from_request(request, state).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(None));
        }
        if json != Some(true) {
            return Err(unsupported_media_type(
                "send the body as Content-Type: application/json",
            ));
        }
        match parse_json(&body)? {
            serde_json::Value::Object(object) => Ok(JsonBody(Some(object))),
            other => Err(not_an_object(&other)),
        }
    }
}

/// The one answer of every JSON endpoint to a body that is JSON but not
/// an object (an array, a string, a number, `true`, `null`): 400 `invalid`
/// with a field error on `body` saying what it got.
pub(crate) fn not_an_object(value: &serde_json::Value) -> AppError {
    let got = match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    };
    AppError::invalid(vec![FieldError {
        field: "body".into(),
        message: format!("must be a JSON object, not {got}"),
    }])
}

/// A JSON document as the API reads a body: 400 when it is not JSON, 400
/// with a field error when a key is given twice in one object.
pub(crate) fn parse_json(body: &[u8]) -> Result<serde_json::Value, AppError> {
    crate::util::json::parse(body).map_err(|e| {
        if e.syntax {
            AppError::bad_request(format!("the body is not JSON: {}", e.message))
        } else {
            json_field_error(e)
        }
    })
}

/// A field-level 400 naming the JSON path of the value at fault (`body`
/// for the whole document).
/// The body of a `PUT` of a named spec (`/api/v1/services/{name}`,
/// `/api/v1/jobs/{name}`) as a JSON object whose `name` is the path's:
/// filled in when left out. 400 without a JSON object (`what` names the
/// spec kind), 400 with a field error on `name` when it differs.
pub(crate) fn named_spec_body(
    body: Option<serde_json::Map<String, serde_json::Value>>,
    name: &str,
    what: &str,
) -> Result<serde_json::Value, AppError> {
    let mut object = body.ok_or_else(|| {
        AppError::invalid(vec![FieldError {
            field: "body".into(),
            message: format!("must be a {what} (a JSON object); the body is empty"),
        }])
    })?;
    let named = object
        .entry("name")
        .or_insert_with(|| serde_json::Value::String(name.to_string()));
    if named.as_str() != Some(name) {
        return Err(AppError::invalid(vec![FieldError {
            field: "name".into(),
            message: format!("must equal the name in the path ({name:?})"),
        }]));
    }
    Ok(serde_json::Value::Object(object))
}

pub(crate) fn json_field_error(e: JsonError) -> AppError {
    let field = if e.path.is_empty() {
        "body".to_string()
    } else {
        e.path
    };
    AppError::invalid(vec![FieldError {
        field,
        message: e.message,
    }])
}

/// The body of a write that takes none, for [`ActionBody`]: left out or
/// `{}`; any field is refused (`POST /api/v1/jobs/{name}/enable` with
/// `{"x":1}` is 400, not an enable that ignored it).
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoFields {}

/// An API action's body as a `T` (a struct of named fields, all optional
/// and defaulted): left out, all defaults; otherwise a JSON object
/// ([`JsonBody`]) holding only fields of `T` — 400 else, with one field
/// error per unknown field, or one naming the field of the wrong type.
/// The action is named as the user called it: its method and route
/// (`DELETE /api/v1/agents/{agent_id}/drain`), so that two actions on one
/// path (a drain and its cancel) are told apart.
pub struct ActionBody<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for ActionBody<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, AppError> {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| request.uri().path().to_string());
        let action = format!("{} {route}", request.method());
        let JsonBody(body) = JsonBody::from_request(request, state).await?;
        let Some(object) = body else {
            return Ok(ActionBody(T::default()));
        };
        // Every unknown field is named, where serde would stop at the first.
        let allowed = field_names::<T>();
        let takes = if allowed.is_empty() {
            format!("{action} takes no fields")
        } else {
            format!("{action} takes only {}", allowed.join(", "))
        };
        let unknown: Vec<FieldError> = object
            .keys()
            .filter(|key| !allowed.contains(&key.as_str()))
            .map(|key| FieldError {
                field: key.clone(),
                message: format!("unknown field; {takes}"),
            })
            .collect();
        if !unknown.is_empty() {
            return Err(AppError::invalid(unknown));
        }
        let value = serde_json::Value::Object(object);
        let body = crate::util::json::from_value(value).map_err(json_field_error)?;
        Ok(ActionBody(body))
    }
}

/// Serde helpers for action bodies: the field errors they give.
pub(crate) mod fields {
    use serde::de::{self, Deserialize, Deserializer};

    /// An optional string (null: none); "must be a string" else.
    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Option::<String>::deserialize(d).map_err(|_| de::Error::custom("must be a string"))
    }

    /// An optional reconciliation kind (null: none).
    pub fn reconcile_kind<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<crate::scheduler::ReconcileKind>, D::Error> {
        Option::deserialize(d).map_err(|_| de::Error::custom(r#"must be "explicit" or "implicit""#))
    }
}

/// A browser's form post as a `T`; refused as an HTML page (see the
/// `From<FormRejection>` above).
pub struct PageForm<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for PageForm<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, AppError> {
        let Form(value) = Form::<T>::from_request(request, state).await?;
        Ok(PageForm(value))
    }
}

/// A browser form with the fields every action post carries.
pub trait ActionForm {
    /// The CSRF field.
    fn csrf(&self) -> &str;
    /// The operator's reason, as typed (may be empty).
    fn reason(&self) -> &str;
}

/// A browser's action post that passed its checks, in this order: the
/// form decodes (HTML 4xx), Origin (403), CSRF (403), the admin session or
/// the loopback rule (401/403), this replica leads (503 with a link to the
/// leader), the reason's length (400). Every refusal is an HTML page.
pub struct AdminForm<F> {
    /// The web layer's state.
    pub state: AppState,
    /// The form.
    pub form: F,
    /// Who asks and why.
    pub ctx: Context,
    /// The request headers (for a page shown again).
    pub headers: HeaderMap,
    /// The request path.
    pub path: String,
}

impl<F: DeserializeOwned + ActionForm> FromRequest<AppState> for AdminForm<F> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AppError> {
        let (mut parts, body) = request.into_parts();
        let peer = Peer::from_request_parts(&mut parts, state)
            .await
            .unwrap_or(Peer(None));
        let headers = parts.headers.clone();
        let path = parts.uri.path().to_string();
        let PageForm(form) =
            PageForm::<F>::from_request(Request::from_parts(parts, body), state).await?;
        auth::check_origin(&headers, &state.config.advertised_url, true).map_err(AppError::html)?;
        state
            .keys
            .check_csrf(&headers, form.csrf())
            .map_err(AppError::html)?;
        let actor = auth::check_access(state.access, &state.keys, &headers, peer, true)
            .map_err(AppError::html)?;
        leader_precheck(state, &path).map_err(AppError::html)?;
        let reason = audit::check_reason(Some(form.reason())).map_err(AppError::html)?;
        let ctx = Context::browser(actor, peer, &headers, reason);
        Ok(AdminForm {
            state: state.clone(),
            form,
            ctx,
            headers,
            path,
        })
    }
}
