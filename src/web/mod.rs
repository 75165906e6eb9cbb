//! The web layer: dashboard pages, the JSON API, actions, health and metrics
//! (`docs/architecture.md#http-api`).
//!
//! It needs only a [`SchedulerHandle`] (snapshots to read, commands to send),
//! a [`Coordinator`] (election members for the replicas page), a
//! `prometheus_client` registry and a [`WebConfig`]. It holds no scheduler
//! state of its own: every read handler renders the latest
//! [`Snapshot`], and every action is a
//! [`Command`](crate::scheduler::Command) answered by the core within
//! [`WebConfig::handler_timeout`] (or 503).
//!
//! Modules:
//! - [`views`]: view models built from a snapshot; a page and its JSON twin
//!   under `/api/v1/...` serialize / render the same struct;
//! - [`pages`]: server-rendered askama templates (`templates/`), usable
//!   without JavaScript;
//! - [`api`]: the JSON API, health, readiness and metrics;
//! - [`jobs`]: the jobs API (specs, runs, run now, kill, enable, disable);
//! - [`job_pages`]: the Jobs pages and their Run now / Kill / Enable / Disable forms;
//! - [`actions`]: reconcile, kamikaze, teardown, abdicate, reregister — one
//!   command each, the API endpoint and the in-memory log of outcomes;
//! - [`forms`]: the same actions from the browser: confirmation pages, CSRF,
//!   post-redirect-get to a result page; login and logout;
//! - [`auth`]: bearer token, loopback rule, `Origin` check, CSRF tokens and
//!   the admin session cookie;
//! - [`error`]: [`AppError`], the one error type at the HTTP edge (JSON
//!   problem bodies, HTML error pages);
//! - [`extract`]: the typed edges — path, query and body extractors in an
//!   API and a page flavour, rejections as [`AppError`], the admin checks
//!   ([`extract::Admin`], [`extract::AdminForm`]);
//! - [`etag`]: `If-Match` (RFC 9110 §13.1.1) as the versions a service
//!   change may replace;
//! - [`live`]: the server-sent-event stream that keeps pages live;
//! - [`event_stream`]: the public, resumable event stream;
//! - [`openapi`]: the JSON routes and their OpenAPI 3.1 document, from one
//!   table (`/api/v1/openapi.json`; how to add a route is in its doc);
//! - [`marathon_compat`]: the read-only Marathon `/v2` subset
//!   (`/v2/apps`, `/v2/tasks`, `/v2/events`) for load balancers;
//! - [`query`]: query strings that refuse unknown parameters, and the URI
//!   length limit;
//! - [`assets`]: CSS and JS from `static/`, compiled in (a directory may
//!   override them during development);
//! - `server`: the accept loop — HTTP/1.1 with a header read timeout, a
//!   connection cap and graceful shutdown.
//!
//! ## Routes
//!
//! | method | path | who | answers |
//! |---|---|---|---|
//! | GET | `/`, `/tasks`, `/tasks/{id}`, `/services`, `/offers`, `/agents`, `/replicas`, `/events`, `/actions`, `/audit` | anyone | 200 HTML (400 bad query, 404 unknown task) |
//! | GET | `/tasks/{id}/logs/{stdout\|stderr}?offset=` | anyone | 200 HTML, a page of the task's sandbox file ([`logs`]); 400, 404, 410, 502, 503, 504 |
//! | GET | `/api/v1/state`, `/tasks`, `/tasks/{id}`, `/services`, `/services/{name}`, `/offers`, `/agents`, `/replicas`, `/events`, `/actions`, `/actions/results/{id}`, `/audit` | anyone | 200 JSON twins of the pages (400, 404 as problems; the lists refuse unknown parameters, [`query::StrictQuery`]) |
//! | GET | `/api/v1/tasks/{id}/logs/{stdout\|stderr}?offset=&length=` | anyone | 200 one read of the sandbox file ([`logs::LogView`]); 400, 404, 410, 502, 503, 504 |
//! | GET | `/api/v1/history?window=15m\|1h\|6h&points=N` | anyone | 200 the charts' samples and marks ([`history::HistoryView`]); 400 |
//! | GET | `/api/v1/openapi.json` | anyone | 200 the OpenAPI 3.1 document of every JSON route ([`openapi`], `docs/api.md`) |
//! | GET | `/api/v1/stream` | anyone | server-sent events, one per snapshot |
//! | GET | `/api/v1/events/stream?type=&last_event_id=` | anyone | the public event stream ([`event_stream`], `docs/events.md`); 307 to the leader on a follower, 400 unknown type, 503 no leader |
//! | PUT, DELETE | `/api/v1/services/{name}` | admin | 201/200; 400 field errors, 401, 403, 404, 413, 415 (any declared type but JSON, even without a body), 503 |
//! | POST | `/api/v1/actions/{reconcile,kamikaze,teardown,abdicate,reregister}` | admin | 202/200; 400, 401, 403, 404, 409, 415, 502, 503 (+`Location` on a follower) |
//! | POST | `/api/v1/services/{name}/rollout/{resume,rollback}` | admin | 200; 400, 401, 403, 404, 409, 415, 503 (+`Location` on a follower) |
//! | POST, DELETE | `/api/v1/agents/{agent_id}/drain` | admin | 202 started / 200 cancelled (`docs/draining.md`); 400 field errors, 401, 403, 404, 409, 415, 503 |
//! | GET | `/actions/teardown`, `/actions/kamikaze` | anyone (login first in token mode: 303) | confirmation page |
//! | POST | `/actions/{teardown,kamikaze,reconcile,abdicate,reregister,resume,rollback}` | admin session or loopback rule; `Origin` + CSRF | 303 to `/actions/results/{id}`; 401, 403, 409, 422, 503 |
//! | GET | `/actions/results/{id}` | anyone | 200 result page, 404 |
//! | GET, POST | `/agents/{agent_id}/drain` (confirmation page, start), POST `/agents/{agent_id}/drain/cancel` | as the other actions' pages and posts | 200 page (404 unknown agent); 303 to `/actions/results/{id}`; 401, 403, 422 (the page again, fields named), 503 |
//! | GET, POST | `/login`; POST `/logout` | anyone (`Origin` + CSRF) | 303 with the session cookie, 401 wrong token, 429 too many wrong tokens |
//! | GET | `/v2/apps`, `/v2/apps/{id}`, `/v2/apps/{id}/tasks`, `/v2/tasks`, `/v2/events` | anyone | Marathon's JSON and event names ([`marathon_compat`], `docs/marathon.md`); 404 `{"message"}` (405 for other methods); `/v2/events` 307 to the leader on a follower, 503 no leader |
//! | GET | `/healthz` | anyone | 200 `ok` |
//! | GET | `/readyz` | anyone | 200 / 503 with the reason |
//! | GET | `/metrics` | anyone | OpenMetrics text |
//! | GET | `/executor/<version>/mesos-appliance-executor` | anyone | the executor binary, for the Mesos fetcher (404 unless configured, or for another version) |
//! | GET | `/executor/mesos-appliance-executor` | anyone | the same binary at the unversioned path older releases advertised |
//! | GET | `/static/{file}` | anyone | CSS / JS / the icon |
//! | GET | `/favicon.ico` | anyone | the icon (SVG) |
//!
//! Anything else: 404, an HTML page or (under `/api/`) a JSON problem; a
//! known path with the wrong method: 405 with `Allow`. Bodies are limited
//! to [`MAX_BODY_BYTES`] (413 at once when `Content-Length` declares more)
//! and must arrive within [`WebConfig::header_read_timeout`] (else 408);
//! URIs to [`query::MAX_URI_BYTES`] (else 414). JSON bodies may not give
//! a key twice in one object, and their errors name the JSON path of the
//! field ([`crate::util::json`]).
//!
//! ## Who may act
//!
//! Read endpoints are open. Actions and service changes are allowed when
//! the caller presents the admin token (`Authorization: Bearer`, or for a
//! browser the session cookie from `/login`) or, without a token file, when
//! the server listens on loopback only; [`serve`] refuses to start on any
//! other address with actions unprotected unless
//! [`WebConfig::insecure_actions`] is set. Logging out ends the session on
//! the server; a client that presents too many wrong tokens gets 429 for a
//! while. See [`auth`] for the details.

pub mod actions;
pub mod agents;
pub mod api;
pub mod assets;
pub mod audit;
pub mod auth;
pub mod charts;
pub mod error;
pub mod etag;
pub mod event_stream;
pub mod extract;
pub mod format;
pub mod forms;
pub mod history;
pub mod job_pages;
pub mod jobs;
pub mod leader;
pub mod live;
pub mod logs;
pub mod marathon_compat;
pub mod metrics;
pub mod nav;
pub mod openapi;
pub mod pages;
pub mod query;
mod server;
pub mod service_pages;
pub mod tls;
pub mod views;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::coordination::Coordinator;
use crate::executor::info::ServedExecutor;
use crate::scheduler::{SchedulerHandle, Snapshot};

pub use error::AppError;

/// Largest request body accepted anywhere (service specs, forms): 64 KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

// No single request can make a ZooKeeper write over its request limit
// (`jute.maxbuffer`, `coordination/zookeeper/request_size.rs`): the largest
// record a request writes is a service record holding the new spec and the
// one before it, each at most a body's size plus the defaults it is stored
// with. Such a write would be refused before sending
// (`CoordinationError::TooLarge`, answered 413 `too-large`); this keeps the
// body limit far enough below for that to stay a safeguard.
const _: () = assert!(
    4 * MAX_BODY_BYTES < crate::coordination::zookeeper::request_size::MAX_REQUEST,
    "a request body could make a record ZooKeeper refuses"
);

/// Admin tokens shorter than this are accepted with a warning: easy to guess.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// Default for [`WebConfig::handler_timeout`].
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default for [`WebConfig::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);

/// Default for [`WebConfig::agent_timeout`].
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Default for [`WebConfig::send_timeout`]: a minute, as nginx's
/// `send_timeout`.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// Default for [`WebConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// How the web layer is exposed. Built by the caller from the CLI flags
/// (`--listen`, `--advertised-url`, `--admin-token-file`,
/// `--insecure-actions`, `--http-handler-timeout`).
#[derive(Clone)]
pub struct WebConfig {
    /// Address to listen on (`--listen`).
    pub listen: SocketAddr,
    /// URL users and other replicas reach this replica at
    /// (`--advertised-url`), e.g. `http://10.0.0.5:8080`. Its origin is the
    /// one browser posts must come from (besides loopback and IP-literal
    /// hosts, see [`auth`]).
    pub advertised_url: String,
    /// The admin tokens, read from `--admin-token-file` by the caller
    /// ([`crate::util::tokens::read_token_file`]); empty without one. Never logged
    /// ([`fmt::Debug`] shows only the names).
    pub admin_tokens: Vec<crate::util::tokens::AdminToken>,
    /// Allow unauthenticated actions on a non-loopback address
    /// (`--insecure-actions`).
    pub insecure_actions: bool,
    /// How long an action handler waits for the core before answering 503
    /// (`--http-handler-timeout`). Also bounds the replicas page's
    /// ZooKeeper read.
    pub handler_timeout: Duration,
    /// The `mesos-appliance-executor` binary served at
    /// `/executor/<version>/mesos-appliance-executor` (and the old
    /// unversioned path) for the Mesos fetcher; 404 when `None`.
    pub executor_binary: Option<ServedExecutor>,
    /// A directory whose files override the compiled-in `static/` assets
    /// (for editing CSS/JS without rebuilding). `None`: compiled-in only.
    pub static_dir: Option<PathBuf>,
    /// How long a client may take to send a request's headers, counted
    /// from when the server starts waiting for them (on a new connection,
    /// or on a keep-alive one between requests); then the connection is
    /// closed. Bounds clients that trickle headers or never send them.
    /// A request's body must arrive within it too, counted from the end of
    /// the headers (else 408).
    pub header_read_timeout: Duration,
    /// How long one write of a response may wait for the client to take
    /// data; then the connection is closed. Bounds clients that stop
    /// reading (a large response, a live stream), which would otherwise
    /// keep their connection busy forever; a slow client that keeps
    /// reading is not affected.
    pub send_timeout: Duration,
    /// Connections open at once (at least 1). At the cap a new connection
    /// closes the one idle longest (no request in progress: half-open
    /// sockets, idle keep-alives); only when all are serving a request does
    /// it wait in the listen backlog. Live streams may take only three
    /// quarters of them; past that a new stream is 503 (`server` module
    /// doc).
    pub max_connections: usize,
    /// How long one call to a Mesos agent or master for a task's log may
    /// take, body included ([`logs`]).
    pub agent_timeout: Duration,
    /// Serve HTTPS with this certificate and key (`--tls-cert`,
    /// `--tls-key`), reloaded on SIGHUP; plain HTTP when `None`.
    pub tls: Option<tls::TlsFiles>,
    /// Bounds of `/api/v1/events/stream` ([`event_stream`]).
    pub events: event_stream::EventStreamConfig,
}

impl WebConfig {
    /// A config listening on `listen`, advertised as `advertised_url`, with
    /// no admin token, actions protected, the default timeouts and
    /// connection cap, and no executor binary.
    pub fn new(listen: SocketAddr, advertised_url: impl Into<String>) -> WebConfig {
        WebConfig {
            listen,
            advertised_url: advertised_url.into(),
            admin_tokens: Vec::new(),
            insecure_actions: false,
            handler_timeout: DEFAULT_HANDLER_TIMEOUT,
            executor_binary: None,
            static_dir: None,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            agent_timeout: DEFAULT_AGENT_TIMEOUT,
            tls: None,
            events: event_stream::EventStreamConfig::default(),
        }
    }

    /// Whether actions would be protected when serving on `addr`: a token
    /// is configured, or `addr` is loopback, or the operator said
    /// `--insecure-actions`.
    pub fn actions_protected_on(&self, addr: SocketAddr) -> bool {
        !self.admin_tokens.is_empty() || addr.ip().is_loopback() || self.insecure_actions
    }
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("listen", &self.listen)
            .field("advertised_url", &self.advertised_url)
            .field("admin_tokens", &self.admin_tokens)
            .field("insecure_actions", &self.insecure_actions)
            .field("handler_timeout", &self.handler_timeout)
            .field("executor_binary", &self.executor_binary)
            .field("static_dir", &self.static_dir)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("send_timeout", &self.send_timeout)
            .field("max_connections", &self.max_connections)
            .field("agent_timeout", &self.agent_timeout)
            .field("tls", &self.tls)
            .field("events", &self.events)
            .finish()
    }
}

/// What the handlers share. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState(Arc<App>);

impl std::ops::Deref for AppState {
    type Target = App;
    fn deref(&self) -> &App {
        &self.0
    }
}

/// The shared state behind [`AppState`].
pub struct App {
    /// The configuration.
    pub config: WebConfig,
    /// Snapshots to read, commands to send.
    pub handle: SchedulerHandle,
    /// Election members for the replicas page.
    pub coordinator: Arc<dyn Coordinator>,
    /// The core's metrics, encoded by `/metrics`.
    pub registry: Arc<Registry>,
    /// The web layer's own metrics (HTTP requests), encoded after `registry`.
    pub(crate) http_metrics: metrics::HttpMetrics,
    /// The per-process secret behind CSRF tokens and admin sessions.
    pub(crate) keys: auth::Keys,
    /// Who may act (from the config, fixed at start).
    pub(crate) access: auth::Access,
    /// Outcomes of recent actions, for the result pages.
    pub(crate) results: actions::ResultLog,
    /// Reads task logs from the agents.
    pub(crate) sandboxes: crate::mesos::sandbox::SandboxClient,
    /// Calls to the leader's JSON API (a follower's charts and logs).
    pub(crate) http: reqwest::Client,
    /// This replica's samples over time (fed by [`history::spawn_sampler`]).
    pub history: Arc<history::History>,
    /// The leader's history last read, for a few seconds (a follower's
    /// live overview would read it every second otherwise).
    leader_history: std::sync::Mutex<Option<LeaderHistory>>,
    /// Cancelled when the server shuts down: ends the live streams so the
    /// graceful shutdown does not wait for them.
    pub(crate) shutdown: CancellationToken,
    /// The public event stream's journal and hub ([`event_stream`]).
    pub events: event_stream::Hub,
    /// The aggregates of the latest snapshot seen (see [`App::derived`]).
    derived: Arc<views::DerivedCache>,
    /// Slots for page work done off the async workers ([`App::off_workers`]):
    /// one per core, so a burst of task-list requests queues instead of
    /// taking a blocking thread each (tokio allows 512).
    page_work: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// The state for a web layer over `handle` and `coordinator`, encoding
    /// `registry` at `/metrics`.
    pub fn new(
        config: WebConfig,
        handle: SchedulerHandle,
        coordinator: Arc<dyn Coordinator>,
        registry: Arc<Registry>,
    ) -> AppState {
        let keys = auth::Keys::generate(&config.admin_tokens);
        let access = auth::Access::from_config(&config);
        let sandboxes = crate::mesos::sandbox::SandboxClient::new(config.agent_timeout);
        let http = leader_client(config.handler_timeout);
        let events = event_stream::Hub::new(config.events);
        AppState(Arc::new(App {
            events,
            config,
            handle,
            coordinator,
            registry,
            http_metrics: metrics::HttpMetrics::new(),
            keys,
            access,
            results: actions::ResultLog::default(),
            sandboxes,
            http,
            history: Arc::new(history::History::new()),
            leader_history: std::sync::Mutex::new(None),
            shutdown: CancellationToken::new(),
            derived: Arc::default(),
            page_work: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            )),
        }))
    }
}

/// How long a follower reuses the leader's history.
const LEADER_HISTORY_FOR: Duration = Duration::from_secs(3);

/// The leader's history as last read.
struct LeaderHistory {
    at: std::time::Instant,
    leader: String,
    window: history::Window,
    view: history::HistoryView,
}

/// The client of [`leader::get_json`]: no redirects, connect timeout.
fn leader_client(timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

impl App {
    /// The aggregates of snapshot `s`, computed on the first request that
    /// sees it (from the previous snapshot's) and shared by the requests
    /// after it. The computing is done off the async workers: at 100,000
    /// tasks it can take milliseconds, which `/healthz` must not wait for.
    pub async fn derived(&self, s: &Arc<Snapshot>) -> Arc<views::Derived> {
        if let Some(d) = self.derived.ready(s) {
            return d;
        }
        let (cache, snapshot) = (self.derived.clone(), s.clone());
        match self.off_workers(move || cache.get(&snapshot)).await {
            Ok(d) => d,
            // The runtime is shutting down: answer anyway.
            Err(_) => self.derived.get(s),
        }
    }

    /// Runs CPU-heavy page work `f` on tokio's blocking pool, at most one
    /// job per core at once (the others wait their turn here, not in
    /// threads of their own).
    ///
    /// # Errors
    /// The job panicked or the runtime is shutting down.
    pub(crate) async fn off_workers<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        // The semaphore is never closed.
        let slot = self.page_work.clone().acquire_owned().await.ok();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            f()
        })
        .await
    }

    /// The leader's history for `window` if read from `leader` lately.
    pub(crate) fn leader_history(
        &self,
        leader: &str,
        window: history::Window,
    ) -> Option<history::HistoryView> {
        let cache = self
            .leader_history
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        cache
            .as_ref()
            .filter(|c| c.leader == leader && c.window == window)
            .filter(|c| c.at.elapsed() < LEADER_HISTORY_FOR)
            .map(|c| c.view.clone())
    }

    /// Keeps the leader's history just read.
    pub(crate) fn remember_leader_history(
        &self,
        leader: &str,
        window: history::Window,
        view: &history::HistoryView,
    ) {
        *self
            .leader_history
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(LeaderHistory {
            at: std::time::Instant::now(),
            leader: leader.to_string(),
            window,
            view: view.clone(),
        });
    }

    /// Whether cookies get the `Secure` attribute: served over TLS, or
    /// advertised over https (TLS ended by a proxy in front).
    pub fn secure_cookies(&self) -> bool {
        self.config.tls.is_some()
            || self
                .config
                .advertised_url
                .to_ascii_lowercase()
                .starts_with("https://")
    }
}

/// Every route of the web layer (see the table in the crate README and
/// [`api`] / [`pages`] / [`actions`]). Unknown routes answer 404, as an
/// HTML page or, under `/api/`, a JSON problem.
pub fn router(state: AppState) -> Router {
    // Pages; most have a JSON twin at `/api/v1` + the same path, routed
    // (and documented) by [`openapi::routes`] with the rest of the API.
    let (api, _) = openapi::routes().split_for_parts();
    let mut app = Router::new()
        .route("/", get(pages::overview))
        .route("/tasks", get(pages::tasks))
        .route("/tasks/{id}", get(pages::task))
        .route("/tasks/{id}/logs/{file}", get(logs::page))
        .route("/offers", get(pages::offers))
        .route("/agents", get(agents::page))
        .route("/replicas", get(pages::replicas))
        .route("/events", get(pages::events))
        .route("/services", get(pages::services))
        .route("/actions", get(pages::actions))
        .route("/actions/results/{id}", get(forms::result_page))
        .route("/audit", get(pages::audit))
        .route(
            "/actions/teardown",
            get(forms::confirm_teardown).post(forms::post_teardown),
        )
        .route(
            "/actions/kamikaze",
            get(forms::confirm_kamikaze).post(forms::post_kamikaze),
        )
        .route("/actions/reconcile", post(forms::post_reconcile))
        .route("/actions/abdicate", post(forms::post_abdicate))
        .route("/actions/reregister", post(forms::post_reregister))
        .route("/actions/resume", post(forms::post_resume))
        .route("/actions/rollback", post(forms::post_rollback))
        .route("/actions/restart", post(forms::post_restart))
        .route(
            "/agents/{agent_id}/drain",
            get(agents::confirm_drain).post(agents::post_drain),
        )
        .route(
            "/agents/{agent_id}/drain/cancel",
            post(agents::post_cancel_drain),
        )
        .route("/login", get(pages::login).post(forms::post_login))
        .route("/favicon.ico", get(pages::favicon))
        .route("/logout", post(forms::post_logout))
        .merge(job_pages::routes())
        .merge(service_pages::routes())
        // The JSON API, health, readiness and metrics.
        .merge(api)
        // The read-only Marathon subset (`docs/marathon.md`).
        .merge(marathon_compat::routes());
    app = match &state.config.static_dir {
        Some(dir) => app.nest("/static", pages::assets_with_override(dir)),
        None => app.route("/static/{file}", get(pages::asset)),
    };
    if let Some(binary) = &state.config.executor_binary {
        // A versioned URL never changes its content: cacheable for good.
        let versioned = Router::new()
            .route_service(
                &binary.url_path(),
                tower_http::services::ServeFile::new(&binary.path),
            )
            .layer(axum::middleware::map_response(immutable));
        app = app.merge(versioned).route_service(
            crate::executor::info::LEGACY_BINARY_PATH,
            tower_http::services::ServeFile::new(&binary.path),
        );
    }
    app.route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        metrics::track,
    ))
    .fallback(error::not_found)
    .method_not_allowed_fallback(error::method_not_allowed)
    .layer(axum::middleware::from_fn_with_state(
        state.clone(),
        pages::back_links,
    ))
    .layer(axum::middleware::from_fn_with_state(
        state.clone(),
        bounded_body,
    ))
    .layer(axum::middleware::from_fn(query::bounded_uri))
    .layer(axum::middleware::map_response(security_headers))
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
    // 5xx answers are mostly deliberate (a follower's 503 with the leader's
    // Location, a handler timeout): WARN, not ERROR.
    .layer(
        tower_http::trace::TraceLayer::new_for_http()
            .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::WARN)),
    )
    .with_state(state)
}

async fn immutable(mut response: axum::response::Response) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    if response.status().is_success() {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        );
    }
    response
}

/// Middleware: reads a request's body before any handler sees it, at most
/// [`MAX_BODY_BYTES`] and within [`WebConfig::header_read_timeout`]. A
/// declared `Content-Length` above the limit is 413 at once, without
/// waiting for a body that may never come; a body that does not arrive in
/// time is 408. Either way the connection is closed after the answer.
async fn bounded_body(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::body::{Body, HttpBody};
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use futures::StreamExt;

    let json = error::wants_json(request.uri());
    let refuse = |e: AppError| {
        let mut response = if json { e } else { e.html() }.into_response();
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        response
    };
    let too_large = || {
        refuse(AppError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            "Request body too large",
            format!(
                "request bodies are limited to {MAX_BODY_BYTES} bytes (an action's reason: \
                 at most {} characters); nothing was done",
                audit::MAX_REASON_CHARS
            ),
        ))
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return too_large();
    }
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let timeout = state.config.header_read_timeout;
    let read = async {
        let mut data = body.into_data_stream();
        let mut buffer = Vec::new();
        while let Some(chunk) = data.next().await {
            let chunk = chunk.map_err(|_| None)?;
            if buffer.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(Some(()));
            }
            buffer.extend_from_slice(&chunk);
        }
        Ok(buffer)
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(buffer)) => {
            let request = axum::extract::Request::from_parts(parts, Body::from(buffer));
            next.run(request).await
        }
        Ok(Err(Some(()))) => too_large(),
        Ok(Err(None)) => refuse(AppError::bad_request("the request body could not be read")),
        Err(_) => refuse(AppError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body-timeout",
            "Request timeout",
            format!(
                "the request body did not arrive within {}s",
                timeout.as_secs_f64()
            ),
        )),
    }
}

/// Headers on every response: no framing (the action forms must not be
/// clickjacked), no MIME sniffing, same-origin referrers (the `Referer`
/// fallback of the Origin check), scripts and styles from this origin only.
async fn security_headers(mut response: axum::response::Response) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        // Live data and per-browser CSRF tokens: nothing for shared caches.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; \
             form-action 'self'; base-uri 'none'",
        ),
    );
    response
}

/// Why [`serve`] did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Actions would be open to anyone who can reach a non-loopback
    /// address: give `--admin-token-file`, listen on loopback, or say
    /// `--insecure-actions`.
    #[error(
        "refusing to serve on {0}: actions would be unprotected; give --admin-token-file, \
         listen on a loopback address, or pass --insecure-actions"
    )]
    Unprotected(SocketAddr),
    /// `--tls-cert` / `--tls-key` do not load.
    #[error("{0}")]
    Tls(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running web server.
#[derive(Debug)]
pub struct Server {
    /// The bound address (the real port when `--listen` said port 0).
    pub addr: SocketAddr,
    /// Ends when the server stopped (after `shutdown` resolved and open
    /// requests finished; live streams end at once).
    pub task: JoinHandle<std::io::Result<()>>,
}

/// Binds [`WebConfig::listen`] and serves [`router`] until `shutdown`
/// resolves. Refuses with [`ServeError::Unprotected`] when actions would be
/// unprotected on that address (`docs/architecture.md#http-api`, `--admin-token-file`).
pub async fn serve(
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Server, ServeError> {
    let addr = state.config.listen;
    if !state.config.actions_protected_on(addr) {
        return Err(ServeError::Unprotected(addr));
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    serve_on(listener, state, shutdown).await
}

/// Like [`serve`], on a listener the caller bound (tests bind port 0).
pub async fn serve_on(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Server, ServeError> {
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: state.config.listen,
        source,
    })?;
    // The access rule was derived from `config.listen`; the socket really
    // bound must not be more exposed than that.
    if !state.config.actions_protected_on(addr)
        || (state.access == auth::Access::Loopback && !addr.ip().is_loopback())
    {
        return Err(ServeError::Unprotected(addr));
    }
    if state.config.insecure_actions && state.config.admin_tokens.is_empty() {
        tracing::warn!(%addr, "--insecure-actions: anyone who can reach this address may run actions");
    }
    let tls = match &state.config.tls {
        Some(files) => {
            let tls = tls::TlsState::new(files.clone()).map_err(ServeError::Tls)?;
            tls::spawn_reload(tls.clone(), state.shutdown.clone());
            Some(tls)
        }
        None => None,
    };
    if tls.is_none() && !state.config.admin_tokens.is_empty() && !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "admin tokens are accepted over plain HTTP on a non-loopback address: tokens and \
             session cookies cross the network in clear text; give --tls-cert and --tls-key, \
             or put a TLS proxy in front"
        );
    }
    let token = state.shutdown.clone();
    let config = state.config.clone();
    let scheme = if tls.is_some() { "https" } else { "http" };
    event_stream::start(&state);
    let app = router(state);
    let task = tokio::spawn(async move {
        server::run(listener, app, &config, tls, async move {
            shutdown.await;
            token.cancel();
        })
        .await;
        Ok(())
    });
    tracing::info!(%addr, scheme, "web layer listening");
    Ok(Server { addr, task })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::AppState;

    /// A web layer over a standby snapshot and an in-memory coordinator.
    pub(crate) fn state() -> AppState {
        use crate::coordination::memory::MemoryCoordinator;
        use crate::coordination::{ReplicaInfo, Strategy};
        use crate::scheduler::{SchedulerHandle, Snapshot};
        let replica = ReplicaInfo::new("http://127.0.0.1:8080", "d", "0");
        let snapshot = Snapshot::standby(replica.clone(), "fw", "*", Strategy::Failover);
        let (_, snapshots) = tokio::sync::watch::channel(Arc::new(snapshot));
        let (commands, _) = tokio::sync::mpsc::channel(1);
        AppState::new(
            super::WebConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:8080"),
            SchedulerHandle::new(commands, snapshots),
            Arc::new(MemoryCoordinator::new(replica)),
            Arc::new(crate::scheduler::metrics::registry()),
        )
    }

    #[tokio::test]
    async fn page_work_runs_at_most_one_job_per_core_at_once() {
        let state = state();
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let jobs = (0..cores * 4).map(|i| {
            let (running, most) = (running.clone(), most.clone());
            let state = state.clone();
            async move {
                state
                    .off_workers(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                        i
                    })
                    .await
                    .unwrap()
            }
        });
        let done = futures::future::join_all(jobs).await;
        assert_eq!(done, (0..cores * 4).collect::<Vec<_>>());
        assert_eq!(
            most.load(Ordering::SeqCst),
            cores,
            "at most one per core, all used"
        );
    }
}
