//! The service pages without a browser (`src/web/service_pages.rs`): the
//! editor's inline field errors (from the API's own validation), the diff
//! and the tasks named before a change, and the refusals — another
//! Origin, no CSRF, no admin session, bad JSON, an unknown service, a
//! count that is not one, a stale confirmation — each a clear 4xx page
//! with nothing asked of the core.

use crate::support;

use axum::http::{StatusCode, header};
use support::web::*;

const ORIGIN: Option<&str> = Some("http://127.0.0.1:8080");

/// The CSRF cookie and field of the page at `path` (which must answer 200).
async fn csrf(web: &TestWeb, path: &str) -> (String, String) {
    let r = web.send(get(path)).await;
    assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
    let cookie = r.cookie("ma_csrf").expect("csrf cookie");
    let field = r.csrf_field().expect("csrf field");
    (cookie, field)
}

/// The value of the hidden field `name` in a page's form.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = html.find(&marker).expect(name) + marker.len();
    let end = html[start..].find('"').unwrap();
    html_unescape(&html[start..start + end])
}

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&#60;", "<")
        .replace("&gt;", ">")
        .replace("&#62;", ">")
        .replace("&amp;", "&")
        .replace("&#38;", "&")
}

fn leader() -> TestWeb {
    TestWeb::new(test_config(), leader_snapshot("http://127.0.0.1:8080", 8))
}

fn instances(web: &TestWeb, name: &str) -> Option<u32> {
    web.snapshot()
        .services
        .iter()
        .find(|s| s.spec.name == name)
        .map(|s| s.spec.instances)
}

async fn audit_actions(web: &TestWeb) -> Vec<(String, String, String)> {
    let view = web.send(get("/api/v1/audit")).await.json();
    view["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_string(),
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["who"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_new_service_with_field_errors_gets_the_editor_again_then_a_diff_then_applies() {
    let web = leader();
    let html = web.send(get("/services")).await.text();
    assert!(html.contains(r#"href="/services/_new""#), "{html}");
    assert!(html.contains(r#"id="edit-web""#));
    let (cookie, token) = csrf(&web, "/services/_new").await;
    let html = web.send(get("/services/_new")).await.text();
    assert!(html.contains("python3 -m http.server $PORT0"), "the sample");

    // Field errors from the API's validation, listed with their lines;
    // the text is kept as typed.
    let bad = "{\n  \"name\": \"shop\",\n  \"command\": \"sleep 100\",\n  \"cpus\": 0,\n  \"mem\": 64, \"instances\": 1,\n  \"health_check\": {\"type\": \"http\", \"interval\": \"10ms\"}\n}\n";
    let r = web
        .send(form_post(
            "/services/_new",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", bad), ("reason", "")],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let html = r.text();
    assert!(html.contains(r#"data-field="cpus""#), "{html}");
    assert!(html.contains("line 4"), "the line of cpus: {html}");
    assert!(html.contains("health_check.interval"), "{html}");
    assert!(html.contains("&quot;sleep 100&quot;") || html.contains("&#34;sleep 100&#34;"));
    // The API says the same about the same spec.
    let api = web
        .send(
            request(axum::http::Method::PUT, "/api/v1/services/shop")
                .header(header::CONTENT_TYPE, "application/json")
                .body(axum::body::Body::from(bad))
                .unwrap(),
        )
        .await;
    assert_eq!(api.status, StatusCode::BAD_REQUEST);
    let fields = api.error_fields();
    for f in &fields {
        assert!(
            html.contains(&format!(r#"data-field="{f}""#)),
            "{f}: {html}"
        );
    }

    // Not JSON: the parser's line.
    let r = web
        .send(form_post(
            "/services/_new",
            ORIGIN,
            &cookie,
            &[
                ("csrf", &token),
                ("spec", "{\n \"name\": \"shop\",\n \"cpus\" 1\n}"),
            ],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let html = r.text();
    assert!(
        html.contains("not JSON") && html.contains("line 3"),
        "{html}"
    );
    // No name.
    let r = web
        .send(form_post(
            "/services/_new",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", r#"{"command": "x"}"#)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains(r#"data-field="name""#));
    assert!(web.core.received().is_empty(), "nothing asked yet");

    // Fixed: the confirmation shows the whole spec as added.
    let good = bad.replace("\"cpus\": 0", "\"cpus\": 0.1").replace(
        "\"interval\": \"10ms\"",
        "\"interval\": \"2s\", \"port_index\": 0",
    );
    let good = good.replace("\"mem\": 64,", "\"mem\": 64, \"ports\": 1,");
    let r = web
        .send(form_post(
            "/services/_new",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", &good)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let html = r.text();
    assert!(html.contains("Creates service shop"), "{html}");
    assert!(
        html.contains(r#"<span class="add">+   &quot;name&quot;: &quot;shop&quot;,</span>"#)
            || html.contains(r#"<span class="add">+   &#34;name&#34;: &#34;shop&#34;,</span>"#),
        "{html}"
    );
    assert!(!html.contains(r#"class="del""#));
    assert!(html.contains(r#"action="/services/shop/apply""#));
    let spec = hidden(&html, "spec");
    let base = hidden(&html, "base");
    assert_eq!(base, "absent");
    assert!(web.core.received().is_empty(), "a review changes nothing");

    let r = web
        .send(form_post(
            "/services/shop/apply",
            ORIGIN,
            &cookie,
            &[
                ("csrf", &token),
                ("spec", &spec),
                ("base", &base),
                ("reason", "new shop"),
            ],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    assert_eq!(r.header("location"), Some("/services/shop"));
    assert_eq!(web.core.received(), ["put_service"]);
    assert_eq!(instances(&web, "shop"), Some(1));
    let html = web.send(get("/services/shop")).await.text();
    assert!(html.contains(r#"id="service-spec""#) && html.contains("sleep 100"));
    // The same post again is stale: the service exists now.
    let r = web
        .send(form_post(
            "/services/shop/apply",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", &spec), ("base", &base)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.text().contains("changed since"));
    assert_eq!(web.core.received(), ["put_service"]);
    let audit = audit_actions(&web).await;
    assert!(
        audit
            .iter()
            .any(|(a, why, _)| a == "service.put" && why == "new shop"),
        "{audit:?}"
    );
}

#[tokio::test]
async fn an_edit_shows_the_diff_and_the_tasks_the_rollout_replaces() {
    let web = leader();
    let live_web: Vec<String> = web
        .snapshot()
        .tasks
        .iter()
        .filter(|t| t.service == "web" && !t.is_terminal() && t.kill.is_none())
        .map(|t| t.task_id.to_string())
        .collect();
    assert!(!live_web.is_empty());
    let r = web.send(get("/services/web/edit")).await;
    assert_eq!(r.status, StatusCode::OK);
    let cookie = r.cookie("ma_csrf").unwrap();
    let token = r.csrf_field().unwrap();
    let html = r.text();
    let start = html.find("id=\"spec-text\"").unwrap();
    let start = start + html[start..].find('>').unwrap() + 1;
    let end = start + html[start..].find("</textarea>").unwrap();
    let text = html_unescape(&html[start..end]);
    assert!(
        text.contains("\"command\": \"python3 -m http.server $PORT0\""),
        "{text}"
    );
    let base = hidden(&html, "base");

    // The name cannot change in an edit.
    let renamed = text.replace("\"name\": \"web\"", "\"name\": \"web2\"");
    let r = web
        .send(form_post(
            "/services/web/edit",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", &renamed), ("base", &base)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains(r#"data-field="name""#));

    let changed = text.replace("http.server $PORT0", "http.server --bind 0.0.0.0 $PORT0");
    let r = web
        .send(form_post(
            "/services/web/edit",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", &changed), ("base", &base)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let html = r.text();
    assert!(html.contains(r#"class="del">-   &"#), "{html}");
    assert!(html.contains("--bind 0.0.0.0"));
    assert!(html.contains("rolling rollout replaces"), "{html}");
    for id in &live_web {
        assert!(html.contains(id.as_str()), "{id} named: {html}");
    }
    let spec = hidden(&html, "spec");
    // Another change lands meanwhile: the apply is refused, nothing done.
    let mut s = web.snapshot();
    s.services[0].spec.mem = 128.0;
    web.publish(s);
    let r = web
        .send(form_post(
            "/services/web/apply",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", &spec), ("base", &base)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert!(web.core.received().is_empty());
}

#[tokio::test]
async fn scale_names_the_tasks_that_die_and_refuses_what_is_not_a_count() {
    let web = leader();
    let before = instances(&web, "web").unwrap();
    assert!(before >= 3);
    let (cookie, token) = csrf(&web, "/services/web").await;
    for bad in ["abc", "-1", "1.5", "99999"] {
        let r = web
            .send(get(&format!("/services/web/scale?instances={bad}")))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(r.text().contains("must be a whole number"), "{bad}");
        let r = web
            .send(form_post(
                "/services/web/scale",
                ORIGIN,
                &cookie,
                &[("csrf", &token), ("instances", bad)],
            ))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(r.text().contains("must be a whole number"), "{bad}");
    }
    let r = web.send(get("/services/web/scale?instances=1")).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    let doomed = html.matches("killed: scaled down").count();
    assert_eq!(doomed as u32, before - 1, "{html}");
    let base = hidden(&html, "base");
    let r = web.send(get("/services/web/scale?instances=0")).await;
    assert_eq!(
        r.text().matches("killed: scaled down").count() as u32,
        before,
        "a scale to 0 names every task"
    );
    // Unknown service.
    let r = web.send(get("/services/nope/scale?instances=1")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = web
        .send(form_post(
            "/services/nope/scale",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("instances", "1"), ("base", "absent")],
        ))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(web.core.received().is_empty());

    let r = web
        .send(form_post(
            "/services/web/scale",
            ORIGIN,
            &cookie,
            &[
                ("csrf", &token),
                ("instances", "1"),
                ("base", &base),
                ("reason", "less"),
            ],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    assert_eq!(web.core.received(), ["replace_service"]);
    assert_eq!(instances(&web, "web"), Some(1));
    let audit = audit_actions(&web).await;
    assert!(
        audit
            .iter()
            .any(|(a, why, _)| a == "service.scale" && why == "less"),
        "{audit:?}"
    );
}

#[tokio::test]
async fn delete_names_every_task_and_refuses_bad_origin_csrf_and_unknown_services() {
    let web = leader();
    let live: Vec<String> = web
        .snapshot()
        .tasks
        .iter()
        .filter(|t| t.service == "batch" && !t.is_terminal())
        .map(|t| t.task_id.to_string())
        .collect();
    let r = web.send(get("/services/batch/delete")).await;
    assert_eq!(r.status, StatusCode::OK);
    let cookie = r.cookie("ma_csrf").unwrap();
    let token = r.csrf_field().unwrap();
    let html = r.text();
    for id in &live {
        assert!(html.contains(id.as_str()), "{id}: {html}");
    }
    assert_eq!(
        html.matches("killed: the service is deleted").count(),
        live.len()
    );
    let base = hidden(&html, "base");
    let fields = [("csrf", token.as_str()), ("base", base.as_str())];

    let r = web
        .send(form_post(
            "/services/batch/delete",
            Some("http://evil.test"),
            &cookie,
            &fields,
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    let r = web
        .send(form_post(
            "/services/batch/delete",
            ORIGIN,
            &cookie,
            &[("base", base.as_str())],
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.text().contains("CSRF"));
    let r = web
        .send(form_post("/services/batch/delete", ORIGIN, "", &fields))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = web.send(get("/services/nope")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.text().contains("no service"));
    let r = web.send(get("/services/nope/delete")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = web
        .send(form_post("/services/nope/delete", ORIGIN, &cookie, &fields))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(web.core.received().is_empty(), "nothing done");

    let r = web
        .send(form_post(
            "/services/batch/delete",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("base", &base), ("reason", "retired")],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    assert_eq!(r.header("location"), Some("/services"));
    assert_eq!(web.core.received(), ["delete_service"]);
    assert_eq!(instances(&web, "batch"), None);
    let audit = audit_actions(&web).await;
    assert!(
        audit
            .iter()
            .any(|(a, why, _)| a == "service.delete" && why == "retired"),
        "{audit:?}"
    );
}

#[tokio::test]
async fn token_mode_asks_for_a_login_and_refuses_posts_without_a_session() {
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 8),
    );
    let origin = Some("http://sched-a.cluster.test:8080");
    for path in [
        "/services/_new",
        "/services/web/edit",
        "/services/web/scale?instances=1",
        "/services/web/delete",
    ] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{path}");
        assert!(
            r.header("location")
                .unwrap()
                .starts_with("/login?next=/services/"),
            "{path}"
        );
    }
    let html = web.send(get("/services")).await.text();
    assert!(
        !html.contains(r#"id="new-service""#),
        "no buttons without a session"
    );
    assert!(!html.contains(r#"id="delete-web""#));
    assert!(html.contains("Log in"));
    let html = web.send(get("/services/web")).await.text();
    assert!(!html.contains(r#"id="delete""#));

    let (cookie, token) = csrf(&web, "/login").await;
    for (path, fields) in [
        ("/services/web/delete", vec![("csrf", token.as_str())]),
        (
            "/services/web/scale",
            vec![("csrf", token.as_str()), ("instances", "1")],
        ),
        (
            "/services/_new",
            vec![("csrf", token.as_str()), ("spec", "{}")],
        ),
    ] {
        let mut req = form_post(path, origin, &cookie, &fields);
        req.headers_mut()
            .insert(header::HOST, "sched-a.cluster.test:8080".parse().unwrap());
        let r = web.send(req).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}: {}", r.text());
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
    }
    assert!(web.core.received().is_empty());
}

#[tokio::test]
async fn a_follower_links_to_the_leader_and_refuses_posts() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot(
            "http://127.0.0.1:8080",
            "http://sched-b.cluster.test:8080",
            8,
        ),
    );
    let r = web.send(get("/services/_new")).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(
        html.contains(r#"href="http://sched-b.cluster.test:8080/services/_new""#),
        "{html}"
    );
    let cookie = r.cookie("ma_csrf").unwrap();
    let token = r.csrf_field().unwrap();
    let r = web
        .send(form_post(
            "/services/_new",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("spec", SAMPLE)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().contains("http://sched-b.cluster.test:8080"));
    assert!(web.core.received().is_empty());
}

const SAMPLE: &str = mesos_appliance::web::service_pages::SAMPLE_SPEC;

#[tokio::test]
async fn the_restart_confirmation_names_the_tasks_or_says_why_not() {
    let web = leader();
    // `web` has a halted rollout in the sample snapshot.
    let r = web.send(get("/services/web/restart")).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let html = r.text();
    assert!(html.contains("under way or halted"), "{html}");
    assert!(!html.contains(r#"action="/actions/restart""#));
    let live: Vec<String> = web
        .snapshot()
        .tasks
        .iter()
        .filter(|t| t.service == "batch" && !t.is_terminal() && t.kill.is_none())
        .map(|t| t.task_id.to_string())
        .collect();
    let r = web.send(get("/services/batch/restart")).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(html.contains(r#"action="/actions/restart""#), "{html}");
    assert_eq!(hidden(&html, "service"), "batch");
    assert_eq!(
        html.matches("replaced by the rolling restart").count(),
        live.len()
    );
    let r = web.send(get("/services/nope/restart")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(web.core.received().is_empty());
}

/// A service whose instance counts once by its running task while a copy
/// of it is launched and not running (a drain's replacement held in
/// TASK_STAGING) does not look whole: both pages show the tasks launched
/// and not running and the longest time one has been so
/// (`starting_tasks`, `starting_since`; `docs/services-pages.md`).
#[tokio::test]
async fn a_task_launched_and_not_running_is_shown_with_its_age() {
    let web = leader();
    let mut s = web.snapshot();
    let web_status = s
        .services
        .iter_mut()
        .find(|x| x.spec.name == "web")
        .expect("web");
    web_status.starting_tasks = 2;
    // The page counts from the wall clock (`Chrome::since`), not from
    // `support::web::now()`, which is fixed at its first call in the run.
    web_status.starting_since = Some(mesos_appliance::util::unix_now_secs() - 130.0);
    web.publish(s);
    let html = web.send(get("/services")).await.text();
    assert!(html.contains(r#"id="starting-web""#), "{html}");
    assert!(
        html.contains("2 launched, not running, longest 2m 1"),
        "{html}"
    );
    assert!(!html.contains(r#"id="starting-batch""#), "{html}");
    let html = web.send(get("/services/web")).await.text();
    assert!(html.contains(r#"id="starting-tasks""#), "{html}");
    assert!(
        html.contains("2 launched, not running, longest 2m 1"),
        "{html}"
    );
}
