//! Server-rendered pages (askama templates in `templates/`). Each page is
//! built from the same view model as its JSON twin (linked in its header)
//! and works without JavaScript; `static/app.js` only refreshes the part
//! marked `#live` when a new snapshot arrives.

use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::actions::ActionsView;
use super::error::AppError;
use super::extract::{PagePath, PageQuery};
use super::views::{
    EventQuery, EventsView, OffersView, ReplicasView, ServicesView, StateView, TaskDetailView,
    TaskQuery, TasksView,
};
use super::{AppState, assets, auth, format};
use crate::coordination::Leadership;
use crate::scheduler::{EventEntry, ExecutorKind, FrameworkState, ReconcileKind, Snapshot};

/// A notice across the top of every page.
#[derive(Debug, Clone)]
pub struct Banner {
    /// `bad` (red) or `warn` (amber).
    pub level: &'static str,
    /// The headline, e.g. `standby`.
    pub head: &'static str,
    /// The rest of the sentence.
    pub text: String,
    /// A link to follow.
    pub link: Option<Link>,
    /// Words after the link.
    pub after: String,
}

/// A link in a banner.
#[derive(Debug, Clone)]
pub struct Link {
    /// Where to.
    pub href: String,
    /// The text.
    pub label: String,
}

fn link(href: impl Into<String>, label: impl Into<String>) -> Option<Link> {
    Some(Link {
        href: href.into(),
        label: label.into(),
    })
}

/// The banners `s` calls for: standby (with the leader), suspended,
/// loading (the stored records not all read yet), framework removed /
/// failed over / fenced / disconnected.
pub fn banners(s: &Snapshot) -> Vec<Banner> {
    let mut out = Vec::new();
    match &s.leadership {
        Leadership::Leader { .. } => {}
        Leadership::Follower { leader: Some(l) } => out.push(Banner {
            level: "warn",
            head: "standby",
            text: "— leader is".into(),
            link: link(l.advertised_url.clone(), l.advertised_url.clone()),
            after: "· this replica follows: its pages show the tasks and services stored in \
                    ZooKeeper, the charts and the audit trail are the leader's, and actions run \
                    on the leader"
                .into(),
        }),
        Leadership::Follower { leader: None } => out.push(Banner {
            level: "warn",
            head: "standby",
            text: "— the leader's election node is unreadable; its URL is unknown".into(),
            link: None,
            after: String::new(),
        }),
        Leadership::Candidate => out.push(Banner {
            level: "warn",
            head: "standby",
            text: "— not in the leader election yet (connecting to ZooKeeper)".into(),
            link: None,
            after: String::new(),
        }),
        Leadership::Suspended => out.push(Banner {
            level: "bad",
            head: "suspended",
            text: "— the ZooKeeper session is disconnected; this replica stopped every Mesos \
                   call until it reconnects or the session expires"
                .into(),
            link: None,
            after: String::new(),
        }),
    }
    if s.loading {
        out.push(Banner {
            level: "warn",
            head: "loading",
            text: "— the stored services and task records are not all read yet: the lists and \
                   counts show only what is read so far"
                .into(),
            link: None,
            after: String::new(),
        });
    }
    let fw = &s.framework;
    let reason = fw
        .reason
        .as_ref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let id = fw.id.as_deref().unwrap_or("(unknown)");
    match fw.state {
        FrameworkState::Removed => out.push(Banner {
            level: "bad",
            head: "framework removed",
            text: match fw.id.as_deref() {
                Some(id) => format!(
                    "— the master removed framework {id}{reason}; its tasks are gone. Next step:"
                ),
                // The appliance's own teardown forgets the ID; the reason
                // names it.
                None => {
                    format!("— the framework was removed{reason}; its tasks are gone. Next step:")
                }
            },
            link: link("/actions#reregister", "register as a new framework"),
            after: String::new(),
        }),
        FrameworkState::FailedOver => out.push(Banner {
            level: "bad",
            head: "failed over",
            text: format!("— this replica stepped back from framework {id}{reason}"),
            link: None,
            after: String::new(),
        }),
        FrameworkState::Fenced => out.push(Banner {
            level: "bad",
            head: "fenced",
            text: format!("— a newer deployment took over{reason}; this replica is stopping"),
            link: None,
            after: String::new(),
        }),
        FrameworkState::Disconnected => out.push(Banner {
            level: "warn",
            head: "disconnected",
            text: format!("— the subscription to the master broke{reason}; re-subscribing"),
            link: None,
            after: String::new(),
        }),
        _ => {}
    }
    out
}

/// A value a template passes as itself or through references (askama
/// binds loop and `if let` variables by reference, sometimes twice).
pub trait Val<T> {
    /// The value.
    fn val(&self) -> T;
}

macro_rules! val {
    ($($t:ty),*) => {$(
        impl Val<$t> for $t { fn val(&self) -> $t { *self } }
        impl Val<$t> for &$t { fn val(&self) -> $t { **self } }
        impl Val<$t> for &&$t { fn val(&self) -> $t { ***self } }
    )*};
}
val!(f64, Option<f64>, ReconcileKind, ExecutorKind);

/// What every page shows around its content (header, navigation, banners),
/// and the formatting helpers templates call.
pub struct Chrome {
    /// When the snapshot shown was made (`app.js` refreshes the page when
    /// a newer one is announced).
    pub snapshot_at: f64,
    /// The request's time, the "now" of relative times (the snapshot may
    /// be older: it is republished only when something changes).
    pub now: f64,
    /// The active navigation entry.
    pub page: &'static str,
    /// The page title.
    pub title: String,
    /// The JSON twin's URL.
    pub json: String,
    /// Framework name.
    pub framework_name: String,
    /// Framework ID.
    pub framework_id: Option<String>,
    /// `framework.state`.
    pub state: &'static str,
    /// `leadership.role`.
    pub role: &'static str,
    /// This replica's URL.
    pub replica_url: String,
    /// Banners.
    pub banners: Vec<Banner>,
    /// Whether `app.js` should keep the page live.
    pub live: bool,
    /// Actions need a login (admin token configured).
    pub token_mode: bool,
    /// The browser holds an admin session.
    pub logged_in: bool,
    /// Cache-busting version of the assets.
    pub asset_version: &'static str,
}

impl Chrome {
    /// The chrome of page `page` titled `title`, with JSON twin `json`.
    pub fn new(
        state: &AppState,
        s: &Snapshot,
        headers: &HeaderMap,
        page: &'static str,
        title: impl Into<String>,
        json: impl Into<String>,
    ) -> Chrome {
        Chrome {
            snapshot_at: s.at,
            now: crate::util::unix_now_secs(),
            page,
            title: title.into(),
            json: json.into(),
            framework_name: s.framework.name.clone(),
            framework_id: s.framework.id.clone(),
            state: s.framework.state.as_str(),
            role: s.leadership.role(),
            replica_url: s.replica.advertised_url.clone(),
            banners: banners(s),
            live: true,
            token_mode: state.access == auth::Access::Token,
            logged_in: state.keys.has_session(headers),
            asset_version: assets::version(),
        }
    }

    /// The document's `<title>`: the page's, then the framework's name
    /// unless it is the product's own (the default), then the product's.
    pub fn document_title(&self) -> String {
        if self.framework_name == "mesos-appliance" {
            format!("{} · mesos-appliance", self.title)
        } else {
            format!("{} · {} · mesos-appliance", self.title, self.framework_name)
        }
    }

    /// Turns live refresh off (pages with forms the user fills in).
    pub fn still(mut self) -> Chrome {
        self.live = false;
        self
    }

    /// An absolute time, `2026-11-29 12:03:04Z`.
    pub fn time(&self, at: impl Val<f64>) -> String {
        crate::util::format_time(at.val())
    }

    /// A time relative to now, `12s ago`.
    pub fn ago(&self, at: impl Val<f64>) -> String {
        format::ago(at.val(), self.now)
    }

    /// An optional relative time.
    pub fn ago_opt(&self, at: impl Val<Option<f64>>) -> String {
        at.val()
            .map_or_else(|| "—".to_string(), |t| format::ago(t, self.now))
    }

    /// Whether `at` is in the future.
    pub fn is_future(&self, at: impl Val<f64>) -> bool {
        at.val() > self.now
    }

    /// How long since `at` (seconds since the UNIX epoch), `2m 10s`.
    pub fn since(&self, at: impl Val<f64>) -> String {
        format::duration((self.now - at.val()).max(0.0))
    }

    /// A duration in seconds, `7d`, `3m 20s`.
    pub fn secs(&self, seconds: impl Val<f64>) -> String {
        format::duration(seconds.val())
    }

    /// `explicit` or `implicit`.
    pub fn reconcile_kind(&self, kind: impl Val<ReconcileKind>) -> &'static str {
        match kind.val() {
            ReconcileKind::Explicit => "explicit",
            ReconcileKind::Implicit => "implicit",
        }
    }

    /// `command` or `appliance`.
    pub fn executor(&self, kind: impl Val<ExecutorKind>) -> &'static str {
        match kind.val() {
            ExecutorKind::Command => "command",
            ExecutorKind::Appliance => "appliance",
        }
    }

    /// The badge class of a state.
    pub fn class(&self, state: &str) -> &'static str {
        format::state_class(state)
    }

    /// A task state without the `TASK_` prefix.
    pub fn short<'a>(&self, state: &'a str) -> &'a str {
        format::short_state(state)
    }

    /// The dashboard's sections, for the navigation ([`super::nav`]).
    pub fn sections(&self) -> &'static [super::nav::Section] {
        super::nav::SECTIONS
    }

    /// `class="on"` for the active navigation entry.
    pub fn nav(&self, page: &str) -> &'static str {
        if self.page == page { "on" } else { "" }
    }

    /// Percent-encodes a path segment (task IDs in links): everything but
    /// the RFC 3986 unreserved characters.
    pub fn seg(&self, text: impl AsRef<str>) -> String {
        crate::util::segment(text.as_ref())
    }

    /// `text` cut to `max` characters, with `…` when cut.
    pub fn clip(&self, text: &str, max: usize) -> String {
        if text.chars().count() <= max {
            return text.to_string();
        }
        let mut cut: String = text.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
struct OverviewPage {
    chrome: Chrome,
    view: StateView,
    services: ServicesView,
    events: Vec<EventEntry>,
    charts: super::charts::Charts,
}

/// `GET /[?window=15m|1h|6h]`: the overview, with the charts of the
/// window (the leader's history on a follower, see [`super::history`]).
pub async fn overview(
    State(state): State<AppState>,
    headers: HeaderMap,
    PageQuery(query): PageQuery<super::history::HistoryQuery>,
) -> Result<Response, AppError> {
    let window = super::history::Window::parse(query.window.as_deref()).map_err(AppError::html)?;
    let (history, note) = super::history::shown(&state, window).await;
    let s = state.handle.snapshot();
    let chrome = Chrome::new(
        &state,
        &s,
        &headers,
        "overview",
        "Overview",
        "/api/v1/state",
    );
    Ok(OverviewPage {
        view: StateView::new(&s, &*state.derived(&s).await, chrome.now),
        chrome,
        services: ServicesView::new(&s),
        events: s.events.iter().rev().take(8).cloned().collect(),
        charts: super::charts::Charts::new(&history, window, note),
    }
    .into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "replicas.html")]
struct ReplicasPage {
    chrome: Chrome,
    view: ReplicasView,
}

/// `GET /replicas`: one row per election member, the leader first.
pub async fn replicas(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let s = state.handle.snapshot();
    let view = super::api::replicas_view(&state, &s).await;
    ReplicasPage {
        chrome: Chrome::new(
            &state,
            &s,
            &headers,
            "replicas",
            "Replicas",
            "/api/v1/replicas",
        ),
        view,
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "tasks.html")]
struct TasksPage {
    chrome: Chrome,
    view: TasksView,
}

/// The snapshot and the view `make` builds of it under a page's query;
/// a query that does not decode, or that the view refuses, is a 400 page.
fn query_view<Q, V>(
    state: &AppState,
    query: &Q,
    make: impl FnOnce(&Arc<Snapshot>, &Q) -> Result<V, AppError>,
) -> Result<(Arc<Snapshot>, V), AppError> {
    let s = state.handle.snapshot();
    let view = make(&s, query).map_err(AppError::html)?;
    Ok((s, view))
}

/// `GET /tasks`: sortable, filterable, paged (see [`TaskQuery`]).
pub async fn tasks(
    State(state): State<AppState>,
    headers: HeaderMap,
    PageQuery(query): PageQuery<TaskQuery>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let view = super::api::tasks_view(&state, s.clone(), query)
        .await
        .map_err(AppError::html)?;
    let json = format!("/api/v1/tasks{}", view.query(&[]));
    let chrome = Chrome::new(&state, &s, &headers, "tasks", "Tasks", json);
    Ok(TasksPage { chrome, view }.into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "task.html")]
struct TaskPage {
    chrome: Chrome,
    view: TaskDetailView,
}

/// `GET /tasks/{id}`: one task and its status-update timeline.
pub async fn task(
    State(state): State<AppState>,
    headers: HeaderMap,
    PagePath(id): PagePath<String>,
) -> Result<Response, AppError> {
    let s = state.handle.snapshot();
    let view = TaskDetailView::new(&s, &id).map_err(AppError::html)?;
    let mut chrome = Chrome::new(&state, &s, &headers, "tasks", format!("Task {id}"), "");
    chrome.json = format!("/api/v1/tasks/{}", chrome.seg(&id));
    Ok(TaskPage { chrome, view }.into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "offers.html")]
struct OffersPage {
    chrome: Chrome,
    view: OffersView,
}

/// `GET /offers`: offers the leader holds.
pub async fn offers(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let s = state.handle.snapshot();
    OffersPage {
        chrome: Chrome::new(&state, &s, &headers, "offers", "Offers", "/api/v1/offers"),
        view: OffersView::new(&s),
    }
}

/// Whether this browser may act: the loopback or insecure rule, or an
/// admin session in token mode.
pub fn can_act(state: &AppState, headers: &HeaderMap) -> bool {
    match state.access {
        auth::Access::Loopback | auth::Access::Insecure => true,
        auth::Access::Token => state.keys.has_session(headers),
        auth::Access::Disabled => false,
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "services.html")]
struct ServicesPage {
    chrome: Chrome,
    view: ServicesView,
    /// For the rollout's resume and rollback forms.
    csrf: String,
    /// Show the change links (`docs/services-pages.md`).
    can_act: bool,
}

/// `GET /services`: desired workload with running counts, health, and
/// each rollout's progress with its resume and rollback buttons.
pub async fn services(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let s = state.handle.snapshot();
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let page = ServicesPage {
        chrome: Chrome::new(
            &state,
            &s,
            &headers,
            "services",
            "Services",
            "/api/v1/services",
        ),
        view: ServicesView::new(&s),
        csrf,
        can_act: can_act(&state, &headers),
    };
    with_cookie(page.into_response(), cookie)
}

#[derive(Template, WebTemplate)]
#[template(path = "events.html")]
struct EventsPage {
    chrome: Chrome,
    view: EventsView,
}

/// `GET /events`: recent ERRORs, failovers, leadership changes, actions.
pub async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    PageQuery(query): PageQuery<EventQuery>,
) -> Result<Response, AppError> {
    let (s, view) = query_view(&state, &query, |s, q| EventsView::new(s, q))?;
    let json = match &view.kind {
        Some(k) => format!(
            "/api/v1/events?{}",
            serde_urlencoded::to_string([("kind", k)]).unwrap_or_default()
        ),
        None => "/api/v1/events".to_string(),
    };
    let chrome = Chrome::new(&state, &s, &headers, "events", "Events", json);
    Ok(EventsPage { chrome, view }.into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "actions.html")]
struct ActionsPage {
    chrome: Chrome,
    view: ActionsView,
    csrf: String,
}

/// `GET /actions`: the actions, with forms on the leader and links to the
/// leader on a follower.
pub async fn actions(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: auth::Peer,
) -> Response {
    let s = state.handle.snapshot();
    let view = ActionsView::new(&state, &s, &headers, peer);
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let page = ActionsPage {
        chrome: Chrome::new(
            &state,
            &s,
            &headers,
            "actions",
            "Actions",
            "/api/v1/actions",
        ),
        view,
        csrf,
    };
    with_cookie(page.into_response(), cookie)
}

#[derive(Template, WebTemplate)]
#[template(path = "audit.html")]
struct AuditPage {
    chrome: Chrome,
    view: super::audit::AuditView,
}

/// `GET /audit`: the audit trail, with filters (see [`super::audit`]).
pub async fn audit(
    State(state): State<AppState>,
    headers: HeaderMap,
    PageQuery(query): PageQuery<super::audit::AuditQuery>,
) -> Result<Response, AppError> {
    let view = super::audit::AuditView::load(&state, query)
        .await
        .map_err(AppError::html)?;
    let s = state.handle.snapshot();
    let json = format!("/api/v1/audit{}", view.query_string());
    Ok(AuditPage {
        chrome: Chrome::new(&state, &s, &headers, "audit", "Audit", json),
        view,
    }
    .into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "login.html")]
pub(crate) struct LoginPage {
    pub(crate) chrome: Chrome,
    pub(crate) csrf: String,
    pub(crate) next: String,
    pub(crate) error: Option<String>,
    pub(crate) enabled: bool,
}

/// `GET /login?next=/actions`: the admin-token form (token mode only).
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let s = state.handle.snapshot();
    let (csrf, cookie) = state.keys.csrf_for(&headers, state.secure_cookies());
    let next = safe_next(query.get("next").map(String::as_str));
    let page = LoginPage {
        chrome: Chrome::new(&state, &s, &headers, "actions", "Log in", "").still(),
        csrf,
        next,
        error: None,
        enabled: state.access == auth::Access::Token,
    };
    with_cookie(page.into_response(), cookie)
}

/// A local path to return to after logging in (`/actions` unless `next`
/// is a plain absolute path on this server).
pub fn safe_next(next: Option<&str>) -> String {
    next.and_then(auth::local_path)
        .unwrap_or("/actions")
        .to_string()
}

/// Adds a `Set-Cookie` header when there is one.
pub fn with_cookie(mut response: Response, cookie: Option<axum::http::HeaderValue>) -> Response {
    if let Some(cookie) = cookie {
        response
            .headers_mut()
            .append(axum::http::header::SET_COOKIE, cookie);
    }
    response
}

/// `GET /static/{file}`: a compiled-in asset ([`super::assets::embedded`]);
/// 404 for anything else.
pub async fn asset(PagePath(file): PagePath<String>) -> Response {
    compiled_in(&file)
}

/// `GET /favicon.ico`: the icon, where browsers look when a page (a JSON
/// document, say) links none.
pub async fn favicon() -> Response {
    compiled_in("favicon.svg")
}

fn compiled_in(name: &str) -> Response {
    super::assets::embedded(name).unwrap_or_else(|| {
        AppError::not_found(format!("no asset {name:?}"))
            .html()
            .into_response()
    })
}

async fn asset_by_uri(uri: axum::http::Uri) -> Response {
    compiled_in(uri.path().trim_start_matches('/'))
}

/// `/static` served from `dir` (tower-http `ServeDir`), falling back to the
/// compiled-in assets.
pub fn assets_with_override(dir: &std::path::Path) -> axum::Router<super::AppState> {
    use axum::handler::HandlerWithoutStateExt;
    axum::Router::new().fallback_service(
        tower_http::services::ServeDir::new(dir).fallback(asset_by_uri.into_service()),
    )
}

/// Middleware: an HTML error page's "Back" link goes to the page the user
/// came from — its `Referer`, when that is a page of this server other
/// than the one that failed ([`super::auth::referring_page`]).
pub async fn back_links(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let this = request.uri().path_and_query().map(|p| p.as_str());
    let back = super::auth::referring_page(request.headers(), &state.config.advertised_url)
        .filter(|page| Some(page.as_str()) != this);
    let mut response = next.run(request).await;
    super::error::set_back_link(&mut response, back.as_deref());
    response
}
