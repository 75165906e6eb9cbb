//! The web layer's own metrics, encoded by `/metrics` after the core's:
//! `http_requests_total{method,route,status}` and
//! `http_request_duration_seconds{route}` (time to the response head; a
//! live stream counts until its head is sent). `route` is the matched route
//! pattern (`/tasks/{id}`), so label values stay few.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::AppState;

/// Labels of `http_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP method (`OTHER` for non-standard ones).
    pub method: &'static str,
    /// Matched route pattern.
    pub route: String,
    /// Response status code.
    pub status: u16,
}

/// Labels of `http_request_duration_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// Matched route pattern.
    pub route: String,
}

fn duration_histogram() -> Histogram {
    // 0.25 ms to about 4 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

/// The HTTP metrics and the registry that holds them.
pub struct HttpMetrics {
    /// Holds the two families below.
    pub(crate) registry: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
}

impl HttpMetrics {
    /// Fresh, registered metrics.
    pub fn new() -> HttpMetrics {
        let mut registry = crate::scheduler::metrics::registry();
        let requests = Family::<RequestLabels, Counter>::default();
        let duration = Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram,
        );
        registry.register(
            "http_requests",
            "HTTP requests answered by the web layer",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from request to response head, by route",
            duration.clone(),
        );
        HttpMetrics {
            registry,
            requests,
            duration,
        }
    }
}

impl Default for HttpMetrics {
    fn default() -> Self {
        HttpMetrics::new()
    }
}

fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "OTHER",
    }
}

/// Middleware counting and timing every routed request.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = method_label(request.method());
    let start = Instant::now();
    let response = next.run(request).await;
    let metrics = &state.http_metrics;
    metrics
        .duration
        .get_or_create(&RouteLabels {
            route: route.clone(),
        })
        .observe(start.elapsed().as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status: response.status().as_u16(),
        })
        .inc();
    response
}
