//! The document is valid OpenAPI 3.1, complete and in step with the router.

use std::collections::BTreeSet;

use serde_json::Value;
use tower::ServiceExt;

use super::*;
use crate::web::tests::state;

fn doc() -> Value {
    serde_json::to_value(openapi()).expect("the document serializes")
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// `(METHOD, path)` of every documented operation.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            if METHODS.contains(&method.as_str()) {
                out.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    out
}

#[test]
fn the_document_is_openapi_3_1_with_responses_and_resolvable_refs() {
    let doc = doc();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "mesos-appliance");
    assert!(doc["info"]["version"].is_string());
    assert!(
        doc["components"]["securitySchemes"]["admin_token"]["scheme"] == "bearer",
        "{:#}",
        doc["components"]["securitySchemes"]
    );
    let ops = operations(&doc);
    assert!(ops.len() >= 40, "only {} operations", ops.len());
    let mut ids = BTreeSet::new();
    for (method, path, op) in &ops {
        let responses = op["responses"].as_object();
        assert!(
            responses.is_some_and(|r| !r.is_empty()),
            "{method} {path} has no responses"
        );
        for (status, response) in responses.into_iter().flatten() {
            assert!(
                status.len() == 3 && status.parse::<u16>().is_ok(),
                "{method} {path}: status {status}"
            );
            assert!(
                response["description"].is_string(),
                "{method} {path} {status}"
            );
            if status.starts_with('4') || status.starts_with('5') {
                // Errors are problem documents (a 503 of /readyz says why
                // in its own shape).
                if path != "/readyz" {
                    let content = &response["content"]["application/problem+json"];
                    assert_eq!(
                        content["schema"]["$ref"], "#/components/schemas/Problem",
                        "{method} {path} {status}: {response:#}"
                    );
                }
            }
        }
        let id = op["operationId"].as_str().unwrap_or("");
        assert!(
            ids.insert(format!("{method} {path} {id}")),
            "{method} {path}"
        );
        // Every path parameter is declared.
        for name in path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        {
            let declared = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["in"] == "path" && p["name"] == name && p["required"] == true);
            assert!(
                declared,
                "{method} {path}: path parameter {name} undeclared"
            );
        }
    }
    // Every reference resolves to a component.
    let text = doc.to_string();
    let refs = regex::Regex::new(r##""\$ref":"#/components/schemas/([^"]+)""##).unwrap();
    for found in refs.captures_iter(&text) {
        let name = &found[1];
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "#/components/schemas/{name} is referenced but not defined"
        );
    }
    // Changes name the admin token (or the loopback rule: `{}`).
    for (method, path, op) in &ops {
        if method != "GET" {
            assert_eq!(
                op["security"],
                serde_json::json!([{"admin_token": []}, {}]),
                "{method} {path}"
            );
        }
    }
}

#[test]
fn every_json_route_of_the_table_is_documented_and_undocumented_ones_are_listed() {
    let doc = doc();
    let ops: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(m, p, _)| (m, p))
        .collect();
    for expected in [
        ("GET", "/api/v1/state"),
        ("PUT", "/api/v1/services/{name}"),
        ("DELETE", "/api/v1/agents/{agent_id}/drain"),
        ("GET", "/api/v1/events/stream"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", PATH),
    ] {
        assert!(
            ops.contains(&(expected.0.to_string(), expected.1.to_string())),
            "{expected:?} is not documented"
        );
    }
    for (method, path) in UNDOCUMENTED {
        assert!(
            !ops.contains(&(method.to_string(), path.to_string())),
            "{method} {path}"
        );
    }
}

/// A request with each path parameter filled in.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|s| {
            if s.starts_with('{') {
                if s == "{file}" { "stdout" } else { "x" }
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Each documented operation reaches a handler of the full router: not
/// the fallback's 404 "no such page or endpoint", not 405.
#[tokio::test]
async fn every_documented_operation_is_routed() {
    let app = crate::web::router(state());
    for (method, path, _) in operations(&doc()) {
        let uri = concrete(&path);
        let request = axum::http::Request::builder()
            .method(method.as_str())
            .uri(&uri)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            app.clone().oneshot(request),
        )
        .await;
        let Ok(response) = response else {
            continue; // a stream that stays open: routed
        };
        let response = response.unwrap();
        let status = response.status();
        assert_ne!(status, 405, "{method} {uri}: 405, not routed");
        if status == 404 {
            let body = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            let body = String::from_utf8_lossy(&body);
            assert!(
                !body.contains("no such page or endpoint"),
                "{method} {uri} is documented but not routed: {body}"
            );
        }
    }
}

/// The JSON routes come from [`routes`] alone: a `.route("/api/…")` (or
/// `/healthz`, `/readyz`, `/metrics`) anywhere else in `src/web` would be
/// served without being documented.
#[test]
fn no_json_route_is_registered_outside_the_table() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src/web");
    let route = regex::Regex::new(r#"\.route(?:_service)?\(\s*"([^"]*)""#).unwrap();
    let json = |p: &str| p.starts_with("/api/") || matches!(p, "/healthz" | "/readyz" | "/metrics");
    let mut stack = vec![std::path::PathBuf::from(root)];
    let mut offenders = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            if path.ends_with("web/openapi/tests.rs") {
                continue;
            }
            // Code only: comments may show the pattern.
            let text: String = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| format!("{l}\n"))
                .collect();
            let table = path.ends_with("web/openapi.rs");
            for found in route.captures_iter(&text) {
                let p = &found[1];
                let listed = UNDOCUMENTED.iter().any(|(_, u)| *u == p);
                if json(p) && !(table && listed) {
                    offenders.push(format!("{}: {p}", path.display()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "JSON routes registered with `.route(…)`, so served but not in the OpenAPI \
         document: {offenders:#?}\nPut `#[utoipa::path(…)]` on the handler and add \
         `.routes(routes!(module::handler))` to `web::openapi::routes` (see its module doc)."
    );
}

#[tokio::test]
async fn the_document_is_served_as_json() {
    let app = crate::web::router(state());
    let request = axum::http::Request::builder()
        .uri(PATH)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body = axum::body::to_bytes(response.into_body(), 4 << 20)
        .await
        .unwrap();
    let served: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(served, doc());
}

/// Found by the schemathesis run: enabling or disabling a job without a
/// schedule answers 409, which the document did not list.
#[test]
fn job_enable_and_disable_document_their_409() {
    let doc = doc();
    for path in ["/api/v1/jobs/{name}/enable", "/api/v1/jobs/{name}/disable"] {
        let responses = &doc["paths"][path]["post"]["responses"];
        assert!(responses.get("409").is_some(), "{path}: {responses:#}");
    }
}

/// One rule for every JSON list endpoint (`GET /api/v1/…` without a path
/// parameter, answering JSON): a query parameter it does not take is 400,
/// naming the parameter and listing the ones it takes
/// (`web::query::StrictQuery`), as `/api/v1/tasks?stat=…` always was.
#[tokio::test]
async fn every_json_list_endpoint_refuses_an_unknown_parameter() {
    let app = crate::web::router(state());
    let mut lenient = Vec::new();
    for (method, path, op) in operations(&doc()) {
        let json = op["responses"]["200"]["content"]
            .as_object()
            .is_some_and(|c| c.contains_key("application/json"));
        if method != "GET" || !path.starts_with("/api/v1/") || path.contains('{') || !json {
            continue;
        }
        let request = axum::http::Request::builder()
            .uri(format!("{path}?bogus=1"))
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 4 << 20)
            .await
            .unwrap();
        let problem: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let named = problem["errors"][0]["field"] == "bogus"
            && problem["errors"][0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown parameter"));
        if status != 400 || !named {
            lenient.push(format!("{path}: {status} {problem}"));
        }
    }
    assert!(lenient.is_empty(), "{lenient:#?}");
}

/// A leader's state whose actions are open to any caller (no token, no
/// loopback rule): a write's own checks are reached.
fn open_leader_state() -> crate::web::AppState {
    use crate::coordination::memory::MemoryCoordinator;
    use crate::coordination::{Leadership, ReplicaInfo, Strategy};
    use crate::scheduler::{SchedulerHandle, Snapshot};
    let replica = ReplicaInfo::new("http://127.0.0.1:8080", "d", "0");
    let mut snapshot = Snapshot::standby(replica.clone(), "fw", "*", Strategy::Failover);
    snapshot.leadership = Leadership::Leader { term: 1 };
    let (_, snapshots) = tokio::sync::watch::channel(std::sync::Arc::new(snapshot));
    let (commands, _) = tokio::sync::mpsc::channel(1);
    let mut config =
        crate::web::WebConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:8080");
    config.insecure_actions = true;
    crate::web::AppState::new(
        config,
        SchedulerHandle::new(commands, snapshots),
        std::sync::Arc::new(MemoryCoordinator::new(replica)),
        std::sync::Arc::new(crate::scheduler::metrics::registry()),
    )
}

/// The path with every `{parameter}` filled in.
fn filled(path: &str) -> String {
    regex::Regex::new(r"\{[^}]*\}")
        .unwrap()
        .replace_all(path, "web")
        .into_owned()
}

/// One rule for every documented write (`POST`, `PUT`, `PATCH`, `DELETE`
/// under `/api/v1/`): a query parameter it does not take is 400 naming the
/// parameter and the ones it takes (`PUT /api/v1/services/web?reasn=…`
/// would otherwise lose the audit reason), as the list endpoints do; and a
/// body field it does not take is 400 naming the field.
#[tokio::test]
async fn every_write_refuses_an_unknown_parameter_and_an_unknown_body_field() {
    let app = crate::web::router(open_leader_state());
    let mut lenient = Vec::new();
    let mut writes = 0;
    for (method, path, op) in operations(&doc()) {
        if !["POST", "PUT", "PATCH", "DELETE"].contains(&method.as_str())
            || !path.starts_with("/api/v1/")
        {
            continue;
        }
        writes += 1;
        // A body (a spec) is a whole document of its own kind: only bodies
        // of named optional fields are checked field by field here.
        let spec_body = op["requestBody"]["required"] == true;
        let mut cases = vec![("query", "?bogus=1", "")];
        if !spec_body {
            cases.push(("body", "", r#"{"bogus":1}"#));
        }
        for (what, query, body) in cases {
            let request = axum::http::Request::builder()
                .method(method.as_str())
                .uri(format!("{}{query}", filled(&path)))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body))
                .unwrap();
            let response = app.clone().oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 4 << 20)
                .await
                .unwrap();
            let problem: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let says = if what == "query" {
                "unknown parameter"
            } else {
                "unknown field"
            };
            let named = problem["errors"][0]["field"] == "bogus"
                && problem["errors"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(says));
            if status != 400 || !named {
                lenient.push(format!("{method} {path} ({what}): {status} {problem}"));
            }
        }
    }
    assert!(writes >= 10, "only {writes} writes documented?");
    assert!(lenient.is_empty(), "{lenient:#?}");
}

/// Every range of `bounds::SCHEMA_FIELDS` is in the document, as the
/// decoder and validation apply it.
#[test]
fn the_spec_fields_ranges_are_in_the_schemas() {
    let doc = doc();
    for (schema, property, bound) in crate::scheduler::spec::bounds::SCHEMA_FIELDS {
        let field = &doc["components"]["schemas"][schema]["properties"][property];
        assert!(field.is_object(), "{schema}.{property} not documented");
        assert_eq!(
            field["minimum"].as_f64(),
            Some(bound.min),
            "{schema}.{property}: {field}"
        );
        assert_eq!(
            field["maximum"].as_f64(),
            Some(bound.max),
            "{schema}.{property}: {field}"
        );
    }
    let instances = &doc["components"]["schemas"]["ServiceSpec"]["properties"]["instances"];
    assert_eq!(instances["maximum"], 10000, "{instances}");
}
