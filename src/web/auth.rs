//! Who may run actions, and proof that a browser post is really ours.
//!
//! **Access** ([`Access`], fixed at start from [`WebConfig`]):
//! - `--admin-token-file` given (one or more named tokens, see
//!   [`crate::util::tokens`]): API clients send `Authorization: Bearer <token>`
//!   (missing → 401, wrong → 401 `invalid_token`); browsers log in once at
//!   `/login` and get an admin session cookie. Either way the request acts
//!   as the token's name ([`Actor`]), which the audit trail records.
//! - no token, listening on loopback: anyone who can reach the loopback
//!   address may act (that is: local users).
//! - no token, not loopback, `--insecure-actions`: anyone may act.
//! - otherwise actions are disabled (403); [`serve`](super::serve) refuses
//!   to start in that configuration anyway.
//!
//! **Origin** ([`check_origin`], the one place for it, for form posts and
//! the API alike): a mutating request must come from an allowed origin —
//! the advertised URL's origin, or `http(s)://<Host>` when the `Host` header
//! names an IP literal or `localhost` (a DNS-rebinding page has a domain
//! name as host, so it never matches). The origin claimed is `Origin` when
//! present (browsers send it on POST), else `Referer` when present (older
//! browsers, some privacy settings); either from another origin is refused,
//! and so is `Sec-Fetch-Site: cross-site`. Browser form posts must carry
//! one of the two; API clients with neither (curl) are not browsers and
//! pass. The JSON API also refuses form and text content types (`415`,
//! even with an empty body), the only ones a plain HTML form on another
//! site can send.
//!
//! **CSRF** ([`Keys::new_csrf`], [`Keys::check_csrf`]): a signed
//! double-submit token. The token is `nonce.mac` with a random 128-bit nonce
//! and `mac` = HMAC-SHA256(per-process secret, "csrf" ‖ nonce). Pages with
//! forms set it as the `ma_csrf` cookie (HttpOnly, SameSite=Strict) and
//! embed it in a hidden `csrf` field; a post is accepted only if the field
//! equals the cookie and the MAC verifies. The secret lives only in memory,
//! so tokens die with the process (a reload of the form gets a fresh one).
//!
//! **Admin session** ([`Keys::new_session`]): `expiry.nonce.mac` with the
//! MAC over "admin" ‖ expiry ‖ nonce, in the `ma_admin` cookie (HttpOnly,
//! SameSite=Strict, 8 hours). The nonce also names the session in a
//! per-process table of live sessions: logging out removes it
//! ([`Keys::end_session`]), so a copy of the cookie taken before stops
//! working at once; it also remembers the token name the session logged in
//! with. The table holds at most [`MAX_SESSIONS`]; past that the oldest
//! session ends (its browser logs in again). Token comparisons go through
//! HMAC verify, so they take constant time (every configured token is
//! checked, whichever matches). The token itself is never logged or stored
//! in a cookie. Cookies are parsed and written with the `cookie` crate.
//!
//! **Throttle** ([`Keys::check_admin_token`]): a client (by IP address; all
//! clients without a known address share one count) that presented
//! [`MAX_TOKEN_FAILURES`] wrong admin tokens within [`THROTTLE_WINDOW`]
//! gets 429 with `Retry-After` for every token it presents until the
//! window ends — the right one too, or the answers would still tell a good
//! guess from a bad one.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::WebConfig;
use super::error::AppError;
use crate::util::tokens::AdminToken;

/// Name of the CSRF cookie (and, as `csrf`, of the form field).
pub const CSRF_COOKIE: &str = "ma_csrf";
/// Name of the admin session cookie.
pub const SESSION_COOKIE: &str = "ma_admin";
/// Lifetime of an admin session, seconds.
pub const SESSION_SECONDS: u64 = 8 * 3600;
/// Admin sessions held at once; past it the oldest ends.
pub const MAX_SESSIONS: usize = 1000;
/// Wrong admin tokens a client may present within [`THROTTLE_WINDOW`]
/// before its attempts are refused (429) until the window ends.
pub const MAX_TOKEN_FAILURES: u32 = 5;
/// The window of [`MAX_TOKEN_FAILURES`], from a client's first wrong token.
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(60);
/// Clients whose wrong tokens are counted at once; past it the count that
/// started longest ago is dropped.
const THROTTLED_CLIENTS: usize = 4096;

/// The client's IP address, for the throttle: from the connection the
/// request came on (`None` when served without one, e.g. in tests). Behind
/// a reverse proxy every client has the proxy's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer(pub Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Peer, Infallible> {
        Ok(Peer(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip()),
        ))
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ip) => write!(f, "{ip}"),
            None => f.write_str("unknown"),
        }
    }
}

/// Who is acting, as the audit trail records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The token's name (token or session), `local user` (loopback rule)
    /// or `anonymous` (`--insecure-actions`).
    pub name: String,
    /// `token` (bearer), `session` (browser login), `loopback` or
    /// `insecure`.
    pub method: String,
}

impl Actor {
    fn new(name: &str, method: &str) -> Actor {
        Actor {
            name: name.to_string(),
            method: method.to_string(),
        }
    }
}

/// What presenting an admin token came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// It is the admin token of this name.
    Valid(String),
    /// It is not (or none is configured); counted against the client.
    Wrong,
    /// The client presented too many wrong tokens lately: not checked;
    /// try again after this long.
    Throttled(Duration),
}

/// Who may run actions; see the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The admin token is required.
    Token,
    /// No token; listening on loopback only.
    Loopback,
    /// No token; `--insecure-actions`.
    Insecure,
    /// No token on a non-loopback address without `--insecure-actions`.
    Disabled,
}

impl Access {
    /// The rule for `config` (from `admin_token`, `listen`, `insecure_actions`).
    pub fn from_config(config: &WebConfig) -> Access {
        if !config.admin_tokens.is_empty() {
            Access::Token
        } else if config.listen.ip().is_loopback() {
            Access::Loopback
        } else if config.insecure_actions {
            Access::Insecure
        } else {
            Access::Disabled
        }
    }

    /// `token`, `loopback`, `insecure` or `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Token => "token",
            Access::Loopback => "loopback",
            Access::Insecure => "insecure",
            Access::Disabled => "disabled",
        }
    }
}

/// The per-process secret and what is derived from it, the live admin
/// sessions and the wrong-token counts.
pub struct Keys {
    key: hmac::Key,
    rng: SystemRandom,
    /// Name and HMAC of each admin token (compared with HMAC verify:
    /// constant time).
    admin_tags: Vec<(String, hmac::Tag)>,
    /// Live admin sessions: nonce → (expiry in seconds since the UNIX
    /// epoch, the name of the token that logged in).
    sessions: Mutex<HashMap<String, (u64, String)>>,
    /// Wrong admin tokens per client: (first in the window, count).
    failures: Mutex<HashMap<Peer, (Instant, u32)>>,
}

impl Keys {
    /// A fresh random secret; each admin token is kept only as its HMAC.
    pub fn generate(admin_tokens: &[AdminToken]) -> Keys {
        let rng = SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .expect("the system random generator works");
        let admin_tags = admin_tokens
            .iter()
            .map(|t| (t.name.clone(), hmac::sign(&key, t.token.as_bytes())))
            .collect();
        Keys {
            key,
            rng,
            admin_tags,
            sessions: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn nonce(&self) -> String {
        let mut bytes = [0u8; 16];
        self.rng
            .fill(&mut bytes)
            .expect("the system random generator works");
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn mac(&self, parts: &[&str]) -> String {
        let mut ctx = hmac::Context::with_key(&self.key);
        for part in parts {
            ctx.update(part.as_bytes());
            ctx.update(b"\0");
        }
        URL_SAFE_NO_PAD.encode(ctx.sign().as_ref())
    }

    fn verify(&self, parts: &[&str], mac: &str) -> bool {
        let Ok(tag) = URL_SAFE_NO_PAD.decode(mac) else {
            return false;
        };
        let mut data = Vec::new();
        for part in parts {
            data.extend_from_slice(part.as_bytes());
            data.push(0);
        }
        hmac::verify(&self.key, &data, &tag).is_ok()
    }

    /// The name of admin token `token`, if it is one. Every token is
    /// checked, so the time taken does not tell which one matched.
    fn admin_token_name(&self, token: &str) -> Option<&str> {
        let mut found = None;
        for (name, tag) in &self.admin_tags {
            if hmac::verify(&self.key, token.as_bytes(), tag.as_ref()).is_ok() {
                found = Some(name.as_str());
            }
        }
        found
    }

    /// Checks an admin token presented by client `peer`, under the
    /// throttle (see the module doc): a wrong one counts against `peer`.
    pub fn check_admin_token(&self, token: &str, peer: Peer) -> TokenCheck {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(since, count)) = failures.get(&peer) {
            let left = THROTTLE_WINDOW.saturating_sub(now.duration_since(since));
            if left.is_zero() {
                failures.remove(&peer);
            } else if count >= MAX_TOKEN_FAILURES {
                return TokenCheck::Throttled(left);
            }
        }
        if let Some(name) = self.admin_token_name(token) {
            return TokenCheck::Valid(name.to_string());
        }
        if failures.len() >= THROTTLED_CLIENTS && !failures.contains_key(&peer) {
            failures.retain(|_, (since, _)| now.duration_since(*since) < THROTTLE_WINDOW);
            let oldest = failures.iter().min_by_key(|(_, (since, _))| *since);
            if let Some(oldest) = oldest.map(|(p, _)| *p) {
                failures.remove(&oldest);
            }
        }
        failures.entry(peer).or_insert((now, 0)).1 += 1;
        TokenCheck::Wrong
    }

    /// A new CSRF token.
    pub fn new_csrf(&self) -> String {
        let nonce = self.nonce();
        let mac = self.mac(&["csrf", &nonce]);
        format!("{nonce}.{mac}")
    }

    /// Whether `token` is a CSRF token we issued.
    pub fn csrf_valid(&self, token: &str) -> bool {
        match token.split_once('.') {
            Some((nonce, mac)) => self.verify(&["csrf", nonce], mac),
            None => false,
        }
    }

    /// Checks a form post's CSRF field against the cookie: equal and ours.
    /// The 403 says which part is missing or wrong.
    pub fn check_csrf(&self, headers: &HeaderMap, field: &str) -> Result<(), AppError> {
        let cookie = cookie(headers, CSRF_COOKIE).unwrap_or_default();
        let problem = match (cookie.is_empty(), field.is_empty()) {
            (true, true) => Some(
                "the form's CSRF field and the CSRF cookie are both missing (cookies must be \
                 enabled)",
            ),
            (true, false) => Some(
                "the CSRF cookie is missing (cookies must be enabled for this site); the \
                 form's CSRF field alone is not enough",
            ),
            (false, true) => Some("the form's CSRF field is missing"),
            (false, false) if !bool::from(cookie.as_bytes().ct_eq(field.as_bytes())) => {
                Some("the form's CSRF field does not match the CSRF cookie (an old form?)")
            }
            (false, false) if !self.csrf_valid(field) => {
                Some("the CSRF token is not one this server issued (it may have restarted)")
            }
            (false, false) => None,
        };
        match problem {
            Some(problem) => Err(AppError::forbidden(
                "csrf",
                format!("{problem}; reload the form"),
            )),
            None => Ok(()),
        }
    }

    /// The CSRF token of this browser: the cookie's if valid, else a new one
    /// with the `Set-Cookie` value that installs it.
    pub fn csrf_for(&self, headers: &HeaderMap, secure: bool) -> (String, Option<HeaderValue>) {
        if let Some(token) = cookie(headers, CSRF_COOKIE)
            && self.csrf_valid(token)
        {
            return (token.to_string(), None);
        }
        let token = self.new_csrf();
        let set = set_cookie(CSRF_COOKIE, &token, None, secure);
        (token, Some(set))
    }

    /// A new admin session cookie value for the holder of token `name`,
    /// valid [`SESSION_SECONDS`] or until [`Keys::end_session`].
    pub fn new_session(&self, name: &str) -> String {
        let now = crate::util::unix_now_secs() as u64;
        let expiry = now + SESSION_SECONDS;
        let nonce = self.nonce();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= MAX_SESSIONS {
            sessions.retain(|_, (e, _)| *e > now);
        }
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, (e, _))| *e)
                .map(|(n, _)| n.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(nonce.clone(), (expiry, name.to_string()));
        let expiry = expiry.to_string();
        let mac = self.mac(&["admin", &expiry, &nonce]);
        format!("{expiry}.{nonce}.{mac}")
    }

    /// The nonce of the request's admin session cookie, when it is ours
    /// and unexpired (whether or not it is still live).
    fn session_nonce(&self, headers: &HeaderMap) -> Option<String> {
        let value = cookie(headers, SESSION_COOKIE)?;
        let mut parts = value.splitn(3, '.');
        let (Some(expiry), Some(nonce), Some(mac)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let fresh = expiry
            .parse::<u64>()
            .is_ok_and(|e| (e as f64) > crate::util::unix_now_secs());
        (fresh && self.verify(&["admin", expiry, nonce], mac)).then(|| nonce.to_string())
    }

    /// The token name of the request's live admin session (issued by this
    /// process, unexpired, not ended), if it has one.
    pub fn session_name(&self, headers: &HeaderMap) -> Option<String> {
        let nonce = self.session_nonce(headers)?;
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&nonce)
            .map(|(_, name)| name.clone())
    }

    /// Whether the request carries a live admin session.
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        self.session_name(headers).is_some()
    }

    /// Ends the request's admin session (logout): the cookie, and any copy
    /// of it, no longer counts. Whether there was one.
    pub fn end_session(&self, headers: &HeaderMap) -> bool {
        self.session_nonce(headers).is_some_and(|nonce| {
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&nonce)
                .is_some()
        })
    }
}

/// The value of cookie `name` in the request's `Cookie` headers (the
/// first one, as browsers send the most specific first).
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .and_then(|c| c.value_raw())
        .map(str::trim)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, Path=/, `Secure` when
/// served over TLS or advertised as https; `max_age` seconds (`Some(0)`
/// deletes), session cookie when `None`.
pub fn set_cookie(name: &str, value: &str, max_age: Option<u64>, secure: bool) -> HeaderValue {
    let mut built = cookie::Cookie::build((name, value))
        .path("/")
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure);
    if let Some(age) = max_age {
        let age = i64::try_from(age).unwrap_or(i64::MAX);
        built = built.max_age(cookie::time::Duration::seconds(age));
    }
    HeaderValue::try_from(built.build().to_string())
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `path` when it is a plain absolute path on this server (`/tasks?x=1`):
/// no scheme, no `//host`, no backslash — safe to redirect or link to.
pub fn local_path(path: &str) -> Option<&str> {
    (path.starts_with('/') && !path.starts_with("//") && !path.contains('\\')).then_some(path)
}

/// The page a request came from, as a local path: its `Referer` when that
/// is a page of an allowed origin (see [`origin_allowed`]; our
/// `Referrer-Policy` sends it only within the origin anyway), without its
/// fragment.
pub fn referring_page(headers: &HeaderMap, advertised_url: &str) -> Option<String> {
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if !origin_allowed(referer, host, advertised_url) {
        return None;
    }
    // A referer is a page: `http://host` with no path at all is not one.
    let (_, rest) = referer.split_once("://")?;
    rest.find(['/', '?'])?;
    let url = url::Url::parse(referer).ok()?;
    local_path(&url[url::Position::BeforePath..url::Position::AfterQuery]).map(str::to_string)
}

/// The origin (`scheme://host[:port]`) of an http(s) URL, as browsers send
/// it in `Origin`: lowercased, default port left out, no path.
pub fn origin_of(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    match url.origin() {
        origin @ url::Origin::Tuple(..) => Some(origin.ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

/// Whether `host` (a `Host` header: name or IP, optional port) is an IP
/// literal or `localhost`: names a DNS-rebinding page cannot take over.
fn host_is_literal(host: &str) -> bool {
    let Ok(url) = url::Url::parse(&format!("http://{host}/")) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => true,
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    }
}

/// Whether `origin` may post to us, given the request's `Host` header and
/// the advertised URL (see the module doc).
pub fn origin_allowed(origin: &str, host: Option<&str>, advertised_url: &str) -> bool {
    let Some(origin) = origin_of(origin) else {
        return false;
    };
    if origin_of(advertised_url).is_some_and(|a| a == origin) {
        return true;
    }
    let Some(host) = host.filter(|h| host_is_literal(h)) else {
        return false;
    };
    ["http", "https"]
        .iter()
        .filter_map(|scheme| origin_of(&format!("{scheme}://{host}")))
        .any(|o| o == origin)
}

/// The Origin rule for a mutating request (see the module doc): the origin
/// claimed by `Origin`, else by `Referer`, must be allowed. `browser_form`:
/// a form post, which must claim one; other requests may claim none.
pub fn check_origin(
    headers: &HeaderMap,
    advertised_url: &str,
    browser_form: bool,
) -> Result<(), AppError> {
    let header_str = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = header_str(header::HOST);
    if header_str(header::HeaderName::from_static("sec-fetch-site")) == Some("cross-site") {
        return Err(AppError::forbidden(
            "cross-origin",
            "cross-site requests may not change anything",
        ));
    }
    let claimed = header_str(header::ORIGIN).or_else(|| header_str(header::REFERER));
    match claimed {
        Some(origin) if origin_allowed(origin, host, advertised_url) => Ok(()),
        // Only the origin of a Referer is named: its path and query are
        // the other site's business.
        Some(claimed) => Err(AppError::forbidden(
            "cross-origin",
            format!(
                "requests from origin {:?} may not change anything here",
                origin_of(claimed).unwrap_or_else(|| "(unreadable)".into())
            ),
        )),
        None if browser_form => Err(AppError::forbidden(
            "cross-origin",
            "the browser sent neither Origin nor Referer; cannot tell where this post comes from",
        )),
        None => Ok(()),
    }
}

/// The bearer token of an `Authorization` header, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// May this request, from client `peer`, act, and as whom? `session_ok`:
/// browsers may use the admin session cookie instead of a bearer token. A
/// bearer token goes through the throttle ([`Keys::check_admin_token`];
/// 429).
pub fn check_access(
    access: Access,
    keys: &Keys,
    headers: &HeaderMap,
    peer: Peer,
    session_ok: bool,
) -> Result<Actor, AppError> {
    match access {
        Access::Loopback => Ok(Actor::new("local user", "loopback")),
        Access::Insecure => Ok(Actor::new("anonymous", "insecure")),
        Access::Disabled => Err(AppError::forbidden(
            "actions-disabled",
            "actions are disabled: no admin token is configured and the server does not listen on loopback",
        )),
        Access::Token => match bearer(headers).map(|t| keys.check_admin_token(t, peer)) {
            Some(TokenCheck::Valid(name)) => Ok(Actor::new(&name, "token")),
            Some(TokenCheck::Wrong) => Err(AppError::unauthorized(true)),
            Some(TokenCheck::Throttled(left)) => Err(AppError::too_many_attempts(left)),
            None => match keys.session_name(headers).filter(|_| session_ok) {
                Some(name) => Ok(Actor::new(&name, "session")),
                None => Err(AppError::unauthorized(false)),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(token: &str) -> Vec<AdminToken> {
        vec![AdminToken::new("admin", token)]
    }

    #[test]
    fn origins_compare_without_default_ports() {
        assert_eq!(origin_of("http://A:80/x").as_deref(), Some("http://a"));
        assert_eq!(
            origin_of("https://h:8443/p?q").as_deref(),
            Some("https://h:8443")
        );
        assert_eq!(origin_of("nonsense"), None);
    }

    #[test]
    fn origin_rule() {
        let adv = "http://sched.example:8080";
        assert!(origin_allowed("http://sched.example:8080", Some("x"), adv));
        assert!(origin_allowed(
            "http://127.0.0.1:5000",
            Some("127.0.0.1:5000"),
            adv
        ));
        assert!(origin_allowed("http://[::1]:5000", Some("[::1]:5000"), adv));
        assert!(origin_allowed(
            "http://localhost:1",
            Some("localhost:1"),
            adv
        ));
        // DNS rebinding: the page's origin matches Host, but Host is a name.
        assert!(!origin_allowed(
            "http://evil.test:8080",
            Some("evil.test:8080"),
            adv
        ));
        assert!(!origin_allowed(
            "http://evil.test",
            Some("127.0.0.1:5000"),
            adv
        ));
        assert!(!origin_allowed("null", Some("127.0.0.1:5000"), adv));
    }

    #[test]
    fn referring_pages_are_local_paths_of_allowed_origins() {
        let adv = "http://sched.example:8080";
        let with = |referer: &str, host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::REFERER, HeaderValue::try_from(referer).unwrap());
            headers.insert(header::HOST, HeaderValue::try_from(host).unwrap());
            headers
        };
        let page = |referer: &str, host: &str| referring_page(&with(referer, host), adv);
        assert_eq!(
            page("http://sched.example:8080/tasks?q=a#f", "x").as_deref(),
            Some("/tasks?q=a")
        );
        assert_eq!(
            page("http://127.0.0.1:5000/", "127.0.0.1:5000").as_deref(),
            Some("/")
        );
        assert_eq!(page("http://127.0.0.1:5000", "127.0.0.1:5000"), None);
        assert_eq!(page("http://evil.test/tasks", "127.0.0.1:5000"), None);
        assert_eq!(page("http://sched.example:8080//evil.test/", "x"), None);
        assert_eq!(local_path("/a\\b"), None);
    }

    #[test]
    fn a_refused_referer_is_named_by_its_origin_only() {
        let mut headers = HeaderMap::new();
        let referer = "http://evil.example/secret/path?token=x";
        headers.insert(header::REFERER, HeaderValue::from_static(referer));
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:5000"));
        let refused = check_origin(&headers, "http://sched.example:8080", true).unwrap_err();
        assert_eq!(refused.status, axum::http::StatusCode::FORBIDDEN);
        assert!(
            refused.detail.contains("\"http://evil.example\"")
                && !refused.detail.contains("secret"),
            "{}",
            refused.detail
        );
    }

    #[test]
    fn csrf_tokens_are_signed() {
        let keys = Keys::generate(&[]);
        let token = keys.new_csrf();
        assert!(keys.csrf_valid(&token));
        let other = Keys::generate(&[]);
        assert!(!other.csrf_valid(&token));
        assert!(!keys.csrf_valid("abc.def"));
        assert!(!keys.csrf_valid(""));
    }

    #[test]
    fn sessions_and_tokens() {
        let keys = Keys::generate(&one("s3cret"));
        assert_eq!(keys.admin_token_name("s3cret"), Some("admin"));
        assert_eq!(keys.admin_token_name("s3cre"), None);
        let mut headers = HeaderMap::new();
        let cookie = format!("a=b; {SESSION_COOKIE}={}", keys.new_session("admin"));
        headers.insert(header::COOKIE, HeaderValue::try_from(cookie).unwrap());
        assert!(keys.has_session(&headers));
        assert_eq!(keys.session_name(&headers).as_deref(), Some("admin"));
        assert!(!Keys::generate(&one("s3cret")).has_session(&headers));
        assert!(keys.end_session(&headers));
        assert!(!keys.has_session(&headers));
        assert!(!keys.end_session(&headers));
    }

    #[test]
    fn sessions_are_capped() {
        let keys = Keys::generate(&one("s3cret"));
        let with = |value: String| {
            let mut headers = HeaderMap::new();
            let cookie = format!("{SESSION_COOKIE}={value}");
            headers.insert(header::COOKIE, HeaderValue::try_from(cookie).unwrap());
            headers
        };
        let first = with(keys.new_session("admin"));
        for _ in 1..MAX_SESSIONS {
            keys.new_session("admin");
        }
        assert!(keys.has_session(&first));
        let last = with(keys.new_session("admin"));
        assert!(keys.has_session(&last));
        let live = keys.sessions.lock().unwrap().len();
        assert_eq!(live, MAX_SESSIONS);
    }

    #[test]
    fn wrong_tokens_are_throttled_per_client() {
        let keys = Keys::generate(&one("s3cret"));
        let a = Peer(Some("192.0.2.1".parse().unwrap()));
        let b = Peer(Some("192.0.2.2".parse().unwrap()));
        for _ in 0..MAX_TOKEN_FAILURES {
            assert_eq!(keys.check_admin_token("guess", a), TokenCheck::Wrong);
        }
        assert!(matches!(
            keys.check_admin_token("s3cret", a),
            TokenCheck::Throttled(left) if left <= THROTTLE_WINDOW
        ));
        assert_eq!(
            keys.check_admin_token("s3cret", b),
            TokenCheck::Valid("admin".into())
        );
    }

    #[test]
    fn each_named_token_acts_as_its_name() {
        let keys = Keys::generate(&[
            AdminToken::new("alice", "token-of-alice"),
            AdminToken::new("bob", "token-of-bob"),
        ]);
        let peer = Peer(None);
        let with_bearer = |token: &str| {
            let mut headers = HeaderMap::new();
            let value = HeaderValue::try_from(format!("Bearer {token}")).unwrap();
            headers.insert(header::AUTHORIZATION, value);
            headers
        };
        let actor = check_access(
            Access::Token,
            &keys,
            &with_bearer("token-of-bob"),
            peer,
            false,
        )
        .unwrap();
        assert_eq!(actor, Actor::new("bob", "token"));
        assert!(check_access(Access::Token, &keys, &with_bearer("nope"), peer, false).is_err());
        let loopback = check_access(Access::Loopback, &keys, &HeaderMap::new(), peer, true);
        assert_eq!(loopback.unwrap().method, "loopback");
    }

    #[test]
    fn cookies_round_trip_through_the_cookie_crate() {
        let set = set_cookie(CSRF_COOKIE, "n.m", Some(60), true);
        let text = set.to_str().unwrap();
        for part in [
            "ma_csrf=n.m",
            "Path=/",
            "HttpOnly",
            "SameSite=Strict",
            "Max-Age=60",
            "Secure",
        ] {
            assert!(text.contains(part), "{text}");
        }
        assert!(
            !set_cookie("a", "b", None, false)
                .to_str()
                .unwrap()
                .contains("Secure")
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("x=1; ma_csrf= abc.def ;y=2"),
        );
        assert_eq!(cookie(&headers, CSRF_COOKIE), Some("abc.def"));
        assert_eq!(cookie(&headers, "z"), None);
    }
}
