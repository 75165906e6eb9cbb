//! The published contract: an OpenAPI 3.1 document of the JSON API, served
//! at [`PATH`] (`docs/api.md`).
//!
//! The document and the JSON routes come from **one source**: [`routes`]
//! registers each handler with utoipa-axum's `routes!`, which both adds the
//! handler to the axum router (at the path and methods of its
//! `#[utoipa::path]` attribute) and adds its operation to the document. A
//! route cannot be served without being documented, nor documented without
//! being served. The types behind the bodies derive `utoipa::ToSchema`;
//! their doc comments become the schemas' descriptions. Errors are RFC 9457
//! problem documents ([`Problem`]), declared once per status in
//! [`responses`] (in `web::error`, which handlers import without a cycle).
//!
//! ## Adding a JSON route
//!
//! 1. Put `#[utoipa::path(get|post|put|delete, path = "/api/v1/…", tag = …,
//!    params(…), request_body = …, responses(…))]` on the handler (copy a
//!    neighbour: [`super::api::service`] for a read, [`super::jobs::put`]
//!    for an admin change). Use the shared error responses of
//!    [`responses`] (`responses::NotFound`, `responses::AdminRefusals`, …)
//!    and `security(("admin_token" = []), ())` for admin routes.
//! 2. Derive `utoipa::ToSchema` on the request and response types.
//! 3. Add `.routes(routes!(module::handler))` to [`routes`] below — never
//!    `.route("/api/…")` in `super::router` (a test refuses it).
//!
//! `cargo test --lib web::openapi` checks the document (valid OpenAPI 3.1,
//! every operation has responses, every documented path is routed, no JSON
//! route outside this table).

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::query::{NoQuery, StrictQuery};
use super::{actions, agents, api, event_stream, history, jobs, live, logs};

pub use super::error::{Problem, responses};

/// Where the document is served.
pub const PATH: &str = "/api/v1/openapi.json";

/// Routes of the JSON API that are served but deliberately left out of the
/// document: catch-alls that answer 404 naming the valid values (a
/// templated path beside its concrete siblings would make the document
/// ambiguous). `(method, path)`.
pub const UNDOCUMENTED: &[(&str, &str)] = &[
    ("POST", "/api/v1/actions/{action}"),
    ("POST", "/api/v1/services/{name}/rollout/{action}"),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "mesos-appliance",
        description = "The JSON API of mesos-appliance, a highly available Apache Mesos \
            framework scheduler. Reads are open; changes need the admin token (or, on a \
            replica listening on loopback without a token file, nothing). Errors are RFC 9457 \
            problem documents (`application/problem+json`). A follower answers changes with \
            503 and the leader's URL (`leader_url`, `Location`). See docs/api.md.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    modifiers(&AdminToken),
    components(schemas(Problem, crate::scheduler::FieldError)),
    tags(
        (name = "state", description = "The scheduler's state, from the latest snapshot"),
        (name = "tasks", description = "Tasks and their sandbox logs"),
        (name = "services", description = "Long-running services (the spec: README.md, \"Running it\"; the pages: docs/services-pages.md)"),
        (name = "jobs", description = "Scheduled and on-demand jobs (docs/jobs.md)"),
        (name = "actions", description = "Operator actions, audited"),
        (name = "agents", description = "Mesos agents and draining (docs/draining.md)"),
        (name = "events", description = "Event lists and streams (docs/events.md)"),
        (name = "audit", description = "The audit trail"),
        (name = "health", description = "Liveness, readiness, metrics and this document"),
    )
)]
struct ApiDoc;

/// Adds the `admin_token` security scheme: `Authorization: Bearer <token>`
/// with a token of `--admin-token-file` (`docs/architecture.md#http-api`).
struct AdminToken;

impl utoipa::Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token of --admin-token-file. Without a token file, a replica that \
                         listens on loopback lets anyone who reaches it act.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The JSON API: every `/api/v1/…` route, `/healthz`, `/readyz` and
/// `/metrics`, each with its operation in the document (see the module
/// doc). `super::router` merges the axum half.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(document))
        .routes(routes!(api::state))
        .routes(routes!(api::tasks))
        .routes(routes!(api::task))
        .routes(routes!(logs::api))
        .routes(routes!(api::offers))
        .routes(routes!(agents::api))
        .routes(routes!(api::replicas))
        .routes(routes!(api::events))
        .routes(routes!(api::services))
        .routes(routes!(api::service, api::put_service, api::delete_service))
        .routes(routes!(api::actions))
        .routes(routes!(api::action_result))
        .routes(routes!(api::audit))
        .routes(routes!(actions::drain::start, actions::drain::cancel))
        .routes(routes!(actions::api::reconcile))
        .routes(routes!(actions::api::kamikaze))
        .routes(routes!(actions::api::teardown))
        .routes(routes!(actions::api::abdicate))
        .routes(routes!(actions::api::reregister))
        .routes(routes!(actions::api::resume))
        .routes(routes!(actions::api::rollback))
        .routes(routes!(actions::api::restart))
        .routes(routes!(jobs::list))
        .routes(routes!(jobs::get, jobs::put, jobs::delete))
        .routes(routes!(jobs::enable))
        .routes(routes!(jobs::disable))
        .routes(routes!(jobs::runs, jobs::start_run))
        .routes(routes!(jobs::run))
        .routes(routes!(jobs::kill_run))
        .routes(routes!(history::api))
        .routes(routes!(live::stream))
        .routes(routes!(event_stream::stream))
        .routes(routes!(api::healthz))
        .routes(routes!(api::readyz))
        .routes(routes!(api::metrics))
        // UNDOCUMENTED: served, not in the document.
        .route("/api/v1/actions/{action}", post(actions::unknown_action))
        .route(
            "/api/v1/services/{name}/rollout/{action}",
            post(actions::unknown_rollout_action),
        )
}

/// The document, built once from [`routes`], with the spec fields' ranges
/// ([`with_bounds`]).
pub fn openapi() -> &'static utoipa::openapi::OpenApi {
    static DOC: LazyLock<utoipa::openapi::OpenApi> =
        LazyLock::new(|| with_bounds(routes().split_for_parts().1));
    &DOC
}

/// `doc` with `minimum` and `maximum` on each property of
/// [`bounds::SCHEMA_FIELDS`], from the consts the decoder and validation
/// use (one source: a derive attribute would repeat each number).
///
/// [`bounds::SCHEMA_FIELDS`]: crate::scheduler::spec::bounds::SCHEMA_FIELDS
fn with_bounds(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    use utoipa::openapi::{RefOr, Schema};
    let Some(components) = doc.components.as_mut() else {
        return doc;
    };
    for (schema, property, bound) in crate::scheduler::spec::bounds::SCHEMA_FIELDS {
        let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(*schema) else {
            continue;
        };
        let Some(RefOr::T(Schema::Object(field))) = object.properties.get_mut(*property) else {
            continue;
        };
        let number = |v: f64| {
            if bound.whole {
                utoipa::Number::Int(v as isize)
            } else {
                utoipa::Number::Float(v)
            }
        };
        field.minimum = Some(number(bound.min));
        field.maximum = Some(number(bound.max));
    }
    doc
}

/// The document as JSON, built once.
fn document_json() -> &'static str {
    static JSON: LazyLock<String> = LazyLock::new(|| {
        // Serializing a tree of strings, maps and numbers cannot fail.
        serde_json::to_string(openapi()).unwrap_or_else(|_| "{}".into())
    });
    &JSON
}

/// The OpenAPI 3.1 document of this API (this document).
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "health",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json",
         body = Object),
        crate::web::error::responses::BadRequest,
    )
)]
pub async fn document(_: StrictQuery<NoQuery>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_json(),
    )
        .into_response()
}

#[cfg(test)]
mod tests;
