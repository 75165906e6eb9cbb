//! Dashboard pages and browser flows with `oneshot`: what each page shows,
//! the standby banner, the confirmation pages, CSRF and Origin on form
//! posts, login in token mode, post-redirect-get to result pages, escaping.

use crate::support;

use axum::http::{StatusCode, header};
use mesos_appliance::scheduler::{CommandError, FrameworkState};
use support::web::*;

const ORIGIN: Option<&str> = Some("http://127.0.0.1:8080");

/// GETs `path` and returns (csrf cookie, csrf field) from its form.
async fn csrf(web: &TestWeb, path: &str) -> (String, String) {
    let r = web.send(get(path)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let cookie = r.cookie("ma_csrf").expect("csrf cookie");
    let field = r.csrf_field().expect("csrf field");
    (cookie, field)
}

#[tokio::test]
async fn overview_shows_framework_id_leader_and_counts() {
    let web = TestWeb::leader();
    let r = web.send(get("/")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let html = r.text();
    assert!(html.contains(FRAMEWORK_ID));
    assert!(html.contains(r#"id="leader"><a class="mono" href="http://127.0.0.1:8080">"#));
    assert!(html.contains("http://master-1.cluster.test:5050"));
    assert!(html.contains("7d"), "failover timeout");
    assert!(html.contains("converged"), "last reconciliation");
    assert!(!html.contains("standby"), "no banner on the leader");
    assert!(
        html.contains(r#"href="/api/v1/state""#),
        "links its JSON twin"
    );
}

#[tokio::test]
async fn page_titles_name_the_framework_once() {
    let web = TestWeb::leader();
    let html = web.send(get("/tasks")).await.text();
    // The framework is called as the product: named once, not twice.
    assert!(
        html.contains("<title>Tasks · mesos-appliance</title>"),
        "{html}"
    );
    let mut s = web.snapshot();
    s.framework.name = "payments".into();
    web.publish(s);
    let html = web.send(get("/tasks")).await.text();
    assert!(
        html.contains("<title>Tasks · payments · mesos-appliance</title>"),
        "{html}"
    );
}

#[tokio::test]
async fn follower_pages_show_the_standby_banner() {
    let web = TestWeb::new(
        test_config(),
        follower_snapshot("http://127.0.0.1:8080", "http://sched-a.test:8080", 10),
    );
    for path in ["/", "/tasks", "/replicas", "/actions"] {
        let html = web.send(get(path)).await.text();
        assert!(
            html.contains(
                r#"<strong>standby</strong> — leader is <a href="http://sched-a.test:8080">"#
            ),
            "{path}: {html}"
        );
    }
    // The actions page links to the leader instead of posting here.
    let html = web.send(get("/actions")).await.text();
    assert!(html.contains(r#"href="http://sched-a.test:8080/actions""#));
    assert!(!html.contains(r#"<form method="post" action="/actions/"#));
    let html = web.send(get("/actions/teardown")).await.text();
    assert!(html.contains(r#"href="http://sched-a.test:8080/actions/teardown""#));
    assert!(!html.contains("confirm_name"));
}

#[tokio::test]
async fn removed_framework_shows_a_red_banner() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 3);
    s.framework.state = FrameworkState::Removed;
    s.framework.reason = Some("Framework has been removed".into());
    let web = TestWeb::new(test_config(), s);
    let html = web.send(get("/")).await.text();
    assert!(html.contains(r#"<div class="banner bad"><strong>framework removed</strong>"#));
    assert!(html.contains("not ready"));
    let html = web.send(get("/actions")).await.text();
    assert!(html.contains(r#"id="reregister-button""#));
}

#[tokio::test]
async fn tasks_page_is_paged_sortable_and_filterable() {
    let web = TestWeb::leader();
    let html = web.send(get("/tasks")).await.text();
    assert_eq!(html.matches(r#"<tr class="task">"#).count(), 50);
    assert!(html.contains("Tasks 1–50 of 120."));
    assert!(html.contains("page 1 of 3"));
    assert!(html.contains(r#"href="/tasks?page=2" rel="next""#));
    assert!(html.contains(r#"href="/tasks?sort=state">State"#));
    assert!(html.contains(r#"href="/api/v1/tasks""#));

    let html = web
        .send(get("/tasks?service=batch&sort=state&order=desc&page=1"))
        .await
        .text();
    assert_eq!(html.matches(r#"<tr class="task">"#).count(), 30);
    assert!(html.contains(r#"<option value="batch" selected>"#));
    assert!(html.contains("State ▼"));
    assert!(
        html.contains(r#"href="/api/v1/tasks?service=batch&#38;sort=state&#38;order=desc""#),
        "JSON twin keeps the query"
    );
    let r = web.send(get("/tasks?page=zero")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(r.text().contains("page"));
}

#[tokio::test]
async fn task_page_shows_the_timeline() {
    let web = TestWeb::leader();
    let failed = web
        .snapshot()
        .tasks
        .iter()
        .find(|t| t.state.as_str_name() == "TASK_FAILED")
        .unwrap()
        .task_id
        .clone();
    let html = web.send(get(&format!("/tasks/{failed}"))).await.text();
    assert!(html.contains("REASON_COMMAND_EXECUTOR_FAILED"));
    assert!(html.contains("Command exited with status 1"));
    let rows = html.split(r#"id="timeline""#).nth(1).unwrap();
    let first_state = rows.find("FAILED").unwrap();
    let running = rows.find("RUNNING").unwrap();
    assert!(first_state < running, "newest first");
    let r = web.send(get("/tasks/unknown-task")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.text().contains("unknown-task"));
}

#[tokio::test]
async fn other_pages_render() {
    let web = TestWeb::leader();
    for (path, needle) in [
        ("/offers", "[31100-32000]"),
        ("/services", "python3 -m http.server $PORT0"),
        ("/replicas", "replica-a"),
        ("/events", "TASK_FAILED batch.13"),
        ("/events?kind=leadership", "became leader"),
        ("/actions", "Reconcile explicitly"),
    ] {
        let r = web.send(get(path)).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert!(r.text().contains(needle), "{path} lacks {needle}");
    }
    let html = web.send(get("/events?kind=leadership")).await.text();
    assert!(!html.contains("TASK_FAILED batch.13"));
}

#[tokio::test]
async fn services_say_why_they_wait() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    let why = "no offer of the 2 held has enough: needs cpus 64 (largest offer: 4)";
    s.services[0].waiting = Some(why.into());
    let web = TestWeb::new(test_config(), s);
    let html = web.send(get("/services")).await.text();
    assert!(html.contains(&format!(r#"<span class="badge warn">waiting</span> {why}"#)));
    let api = web.send(get("/api/v1/services")).await.text();
    assert!(api.contains(why), "{api}");
}

#[tokio::test]
async fn kills_of_tasks_without_a_record_are_shown() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    let plain = web_tasks_html(&TestWeb::new(test_config(), s.clone())).await;
    assert!(!plain.contains("unrecorded-kills"));
    s.unrecorded_kills
        .push(mesos_appliance::scheduler::UnrecordedKill {
            task_id: "rogue.0.abc".into(),
            agent_id: Some("agent-7".into()),
            reason: "the master reports it; no record".into(),
            attempts: 4,
        });
    let web = TestWeb::new(test_config(), s);
    let html = web_tasks_html(&web).await;
    assert!(html.contains(r#"id="unrecorded-kills""#), "{html}");
    assert!(html.contains("rogue.0.abc") && html.contains("kill pending (4)"));
    let api: serde_json::Value =
        serde_json::from_str(&web.send(get("/api/v1/tasks")).await.text()).unwrap();
    assert_eq!(api["unrecorded_kills"][0]["task_id"], "rogue.0.abc");
    assert_eq!(api["unrecorded_kills"][0]["attempts"], 4);
}

async fn web_tasks_html(web: &TestWeb) -> String {
    web.send(get("/tasks")).await.text()
}

#[tokio::test]
async fn text_from_the_cluster_is_escaped() {
    let mut s = leader_snapshot("http://127.0.0.1:8080", 2);
    s.events.push(event(
        now(),
        "error",
        "<script>alert('x')</script> & \"quoted\"",
    ));
    s.framework.reason = Some("<img src=x onerror=alert(1)>".into());
    let web = TestWeb::new(test_config(), s);
    for path in ["/", "/events"] {
        let html = web.send(get(path)).await.text();
        assert!(!html.contains("<script>alert"), "{path}");
        assert!(!html.contains("<img src=x"), "{path}");
        assert!(html.contains("&#60;script&#62;"), "{path}");
    }
}

#[tokio::test]
async fn get_never_acts_and_the_confirmation_names_the_blast() {
    let web = TestWeb::leader();
    let html = web.send(get("/actions/teardown")).await.text();
    assert!(html.contains(&format!(r#"id="confirm-framework-id">{FRAMEWORK_ID}<"#)));
    assert!(html.contains(r#"id="confirm-tasks">114<"#));
    assert!(html.contains(r#"name="confirm_name""#));
    let html = web.send(get("/actions/kamikaze")).await.text();
    assert!(html.contains(r#"id="confirm-tasks">84<"#));
    assert_eq!(
        html.matches("<tr><td class=\"mono\">").count(),
        6,
        "one row per executor that obeys"
    );
    assert!(html.contains("30 tasks on the Mesos command executor"));
    assert!(web.core.received().is_empty());
}

#[tokio::test]
async fn confirmation_pages_name_the_tasks_that_die() {
    let web = TestWeb::leader();
    let s = web.snapshot();
    let active: Vec<&str> = s
        .tasks
        .iter()
        .filter(|t| !t.is_terminal())
        .map(|t| t.task_id.as_str())
        .collect();
    let listed =
        |html: &str, id: &str| html.contains(&format!(r#"<a href="/tasks/{id}">{id}</a>"#));
    // Teardown: 114 tasks die; the first 50 are named, the rest counted.
    let html = web.send(get("/actions/teardown")).await.text();
    assert!(html.contains(r#"id="confirm-task-list""#), "{html}");
    assert_eq!(active.iter().filter(|id| listed(&html, id)).count(), 50);
    assert!(active[..50].iter().all(|id| listed(&html, id)));
    assert!(html.contains(r#"id="confirm-more">and 64 more"#), "{html}");
    let failed = s.tasks.iter().find(|t| t.is_terminal()).unwrap();
    assert!(!listed(&html, &failed.task_id), "terminal tasks do not die");

    // Kamikaze: each executor that obeys, with its tasks.
    let html = web.send(get("/actions/kamikaze")).await.text();
    for t in s.tasks.iter().filter(|t| !t.is_terminal()) {
        let appliance = t.executor == mesos_appliance::scheduler::ExecutorKind::Appliance;
        assert_eq!(listed(&html, &t.task_id), appliance, "{}", t.task_id);
    }

    // A few tasks: all named, nothing more.
    let web = TestWeb::new(test_config(), leader_snapshot("http://127.0.0.1:8080", 5));
    let html = web.send(get("/actions/teardown")).await.text();
    for t in web.snapshot().tasks.iter() {
        assert!(listed(&html, &t.task_id), "{}", t.task_id);
    }
    assert!(!html.contains("confirm-more"));
    let v = web.send(get("/api/v1/actions")).await.json();
    assert_eq!(v["blast"]["task_ids"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn teardown_through_its_confirmation_page() {
    let web = TestWeb::leader();
    let (cookie, token) = csrf(&web, "/actions/teardown").await;
    let fields = |name: &'static str| {
        vec![
            ("csrf", token.clone()),
            ("framework_id", FRAMEWORK_ID.to_string()),
            ("confirm_name", name.to_string()),
        ]
    };
    let post =
        |fields: Vec<(&'static str, String)>, origin: Option<&'static str>, cookie: String| {
            let f: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            form_post("/actions/teardown", origin, &cookie, &f)
        };

    // Wrong name: the page again, nothing done.
    let r = web
        .send(post(fields("mesos-app"), ORIGIN, cookie.clone()))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().contains(r#"id="confirm-error""#));
    // No Origin (nor Referer), foreign Origin, no cookie, forged token.
    let r = web
        .send(post(fields(FRAMEWORK_NAME), None, cookie.clone()))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = web
        .send(post(
            fields(FRAMEWORK_NAME),
            Some("http://evil.test"),
            cookie.clone(),
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    let r = web
        .send(post(fields(FRAMEWORK_NAME), ORIGIN, String::new()))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let forged = "ma_csrf=AAAAAAAAAAAAAAAAAAAAAA.BBBB".to_string();
    let mut f = fields(FRAMEWORK_NAME);
    f[0].1 = "AAAAAAAAAAAAAAAAAAAAAA.BBBB".into();
    let r = web.send(post(f, ORIGIN, forged)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // A page confirming another framework.
    let mut f = fields(FRAMEWORK_NAME);
    f[1].1 = "older-framework-0001".into();
    let r = web.send(post(f, ORIGIN, cookie.clone())).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(web.core.received().is_empty());

    // The real thing: 303 to the result page.
    let r = web
        .send(post(fields(FRAMEWORK_NAME), ORIGIN, cookie.clone()))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let location = r.header("location").unwrap().to_string();
    assert!(location.starts_with("/actions/results/"));
    assert_eq!(web.core.received(), ["teardown"]);
    let html = web.send(get(&location)).await.text();
    assert!(html.contains(r#"<span class="badge ok" id="result-outcome">ok</span>"#));
    assert!(html.contains(&format!("framework {FRAMEWORK_ID} torn down")));
    assert!(html.contains("120 task records"));

    // A Referer from our origin stands in for a missing Origin.
    let web2 = TestWeb::leader();
    let (cookie, token) = csrf(&web2, "/actions").await;
    let mut req = form_post(
        "/actions/reconcile",
        None,
        &cookie,
        &[("csrf", &token), ("kind", "implicit")],
    );
    req.headers_mut().insert(
        header::REFERER,
        "http://127.0.0.1:8080/actions".parse().unwrap(),
    );
    let r = web2.send(req).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
}

#[tokio::test]
async fn kamikaze_result_lists_each_executor() {
    let web = TestWeb::leader();
    let (cookie, token) = csrf(&web, "/actions/kamikaze").await;
    let r = web
        .send(form_post(
            "/actions/kamikaze",
            ORIGIN,
            &cookie,
            &[
                ("csrf", &token),
                ("framework_id", FRAMEWORK_ID),
                ("confirm_name", FRAMEWORK_NAME),
            ],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    let html = web.send(get(r.header("location").unwrap())).await.text();
    let table = html.split(r#"id="result-executors""#).nth(1).unwrap();
    assert_eq!(
        table
            .matches(r#"<span class="badge ok">yes</span>"#)
            .count(),
        36
    );
    // The tasks page shows the replacements.
    let html = web.send(get("/tasks?state=TASK_KILLED")).await.text();
    assert!(html.contains("Tasks 1–50 of 84 matching"));
}

#[tokio::test]
async fn one_button_actions_and_their_failures() {
    let web = TestWeb::leader();
    let (cookie, token) = csrf(&web, "/actions").await;
    for (path, kind) in [
        ("/actions/reconcile", "explicit"),
        ("/actions/reconcile", "implicit"),
        ("/actions/abdicate", ""),
    ] {
        let r = web
            .send(form_post(
                path,
                ORIGIN,
                &cookie,
                &[("csrf", &token), ("kind", kind)],
            ))
            .await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{path}: {}", r.text());
    }
    let r = web
        .send(form_post(
            "/actions/reconcile",
            ORIGIN,
            &cookie,
            &[("csrf", &token), ("kind", "sideways")],
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(web.core.received(), ["reconcile", "reconcile", "abdicate"]);

    // A failure still redirects to a result page that says so.
    web.core.set_mode(Mode::Fail(CommandError::Mesos(
        mesos_appliance::mesos::client::CallError::Connect("master unreachable".into()),
    )));
    let r = web
        .send(form_post(
            "/actions/reconcile",
            ORIGIN,
            &cookie,
            &[("csrf", &token)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let html = web.send(get(r.header("location").unwrap())).await.text();
    assert!(html.contains("failed (502)"));
    assert!(html.contains("master unreachable"));
    // The actions page lists them.
    let html = web.send(get("/actions")).await.text();
    assert_eq!(html.matches("/actions/results/").count(), 4);
}

#[tokio::test]
async fn follower_form_posts_point_at_the_leader() {
    // The form was loaded while this replica led; then it stepped down.
    let web = TestWeb::leader();
    let (cookie, token) = csrf(&web, "/actions").await;
    web.publish(follower_snapshot(
        "http://127.0.0.1:8080",
        "http://sched-a.test:8080",
        10,
    ));
    let r = web
        .send(form_post(
            "/actions/reconcile",
            ORIGIN,
            &cookie,
            &[("csrf", &token)],
        ))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        r.header("location"),
        Some("http://sched-a.test:8080/actions/reconcile")
    );
    assert!(r.text().contains(r#"id="leader-link""#));
    assert!(web.core.received().is_empty());
}

#[tokio::test]
async fn token_mode_browsers_log_in_first() {
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 5),
    );
    let origin = Some("http://sched-a.cluster.test:8080");
    // The confirmation page sends an anonymous browser to log in.
    let r = web.send(get("/actions/teardown")).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.header("location"), Some("/login?next=/actions/teardown"));
    let html = web.send(get("/actions")).await.text();
    assert!(html.contains("Actions need the admin token"));

    let (cookie, token) = csrf(&web, "/login?next=/actions/teardown").await;
    let login = |secret: &str| {
        let mut req = form_post(
            "/login",
            origin,
            &cookie,
            &[
                ("csrf", &token),
                ("token", secret),
                ("next", "/actions/teardown"),
            ],
        );
        req.headers_mut()
            .insert(header::HOST, "sched-a.cluster.test:8080".parse().unwrap());
        req
    };
    let r = web.send(login("guess")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.cookie("ma_admin").is_none());
    let r = web.send(login(TOKEN)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.header("location"), Some("/actions/teardown"));
    let session = r.cookie("ma_admin").expect("session cookie");
    assert!(!session.contains(TOKEN));
    let set = r.header("set-cookie").unwrap();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));

    // Posting without the session is refused; with it, it works.
    let fields = [
        ("csrf", token.as_str()),
        ("framework_id", FRAMEWORK_ID),
        ("confirm_name", FRAMEWORK_NAME),
    ];
    let r = web
        .send(form_post("/actions/teardown", origin, &cookie, &fields))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let both = format!("{cookie}; {session}");
    let page = web
        .send(
            axum::http::Request::get("/actions/teardown")
                .header(header::COOKIE, &both)
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let r = web
        .send(form_post("/actions/teardown", origin, &both, &fields))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    assert_eq!(web.core.received(), ["teardown"]);
}

#[tokio::test]
async fn logging_out_ends_the_session_for_every_copy_of_the_cookie() {
    let web = TestWeb::new(
        token_config(),
        leader_snapshot("http://sched-a.cluster.test:8080", 5),
    );
    let origin = Some("http://sched-a.cluster.test:8080");
    let (cookie, token) = csrf(&web, "/login").await;
    let login = |secret: &str| {
        form_post(
            "/login",
            origin,
            &cookie,
            &[("csrf", &token), ("token", secret), ("next", "/actions")],
        )
    };
    let r = web.send(login(TOKEN)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let session = r.cookie("ma_admin").expect("session cookie");
    let both = format!("{cookie}; {session}");
    let reconcile = |cookies: &str| {
        form_post(
            "/actions/reconcile",
            origin,
            cookies,
            &[("csrf", &token), ("kind", "explicit")],
        )
    };
    assert_eq!(
        web.send(reconcile(&both)).await.status,
        StatusCode::SEE_OTHER
    );
    // Someone copied the cookie before the operator logged out.
    let copied = both.clone();
    let r = web.send(form_post("/logout", origin, &both, &[])).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.cookie("ma_admin").as_deref(), Some("ma_admin="));
    let r = web.send(reconcile(&copied)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text());
    let page = web
        .send(
            axum::http::Request::get("/actions")
                .header(header::COOKIE, &copied)
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .text();
    assert!(page.contains("Actions need the admin token"));
    assert_eq!(web.core.received(), ["reconcile"]);

    // Wrong tokens at the login form count too; then it answers 429.
    for _ in 0..5 {
        assert_eq!(
            web.send(login("guess")).await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    let r = web.send(login(TOKEN)).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(r.header("retry-after").is_some());
    assert!(r.cookie("ma_admin").is_none());
}

#[tokio::test]
async fn error_pages_link_back_without_script() {
    let web = TestWeb::leader();
    let from = |path: &str, referer: Option<&str>| {
        let mut b = axum::http::Request::get(path).header(header::HOST, "127.0.0.1:8080");
        if let Some(referer) = referer {
            b = b.header(header::REFERER, referer);
        }
        b.body(axum::body::Body::empty()).unwrap()
    };
    // From a page of this server: "Back" returns there.
    let r = web
        .send(from(
            "/tasks?sort=colour",
            Some("http://127.0.0.1:8080/tasks?state=active#top"),
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let html = r.text();
    assert!(!html.contains("javascript:"), "{html}");
    assert!(
        html.contains(r#"<a id="error-back" href="/tasks?state=active">Back</a>"#),
        "{html}"
    );
    let r = web
        .send(from(
            "/no/such/page",
            Some("http://127.0.0.1:8080/services"),
        ))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.text().contains(r#"href="/services">Back</a>"#));
    // A form post refused: back to the form.
    let mut post = form_post("/actions/abdicate", ORIGIN, "", &[("csrf", "x")]);
    post.headers_mut().insert(
        header::REFERER,
        "http://127.0.0.1:8080/actions".parse().unwrap(),
    );
    let r = web.send(post).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.text().contains(r#"href="/actions">Back</a>"#));
    // From another site, from nowhere, or from the failing page itself: no
    // "Back", the overview link only.
    for referer in [
        Some("http://evil.example/tasks"),
        None,
        Some("http://127.0.0.1:8080/tasks?sort=colour"),
    ] {
        let html = web.send(from("/tasks?sort=colour", referer)).await.text();
        assert!(!html.contains("error-back"), "{referer:?}");
        assert!(!html.contains("evil.example"));
        assert!(html.contains(r#"<a href="/">Overview</a>"#));
    }
}

#[tokio::test]
async fn csrf_refusals_say_which_part_is_missing_or_wrong() {
    let web = TestWeb::leader();
    let (cookie, token) = csrf(&web, "/actions").await;
    let other = TestWeb::leader();
    let (foreign_cookie, foreign_token) = csrf(&other, "/actions").await;
    for (cookie, field, says) in [
        ("", "", "CSRF field and the CSRF cookie are both missing"),
        ("", "garbage", "the CSRF cookie is missing"),
        ("", token.as_str(), "the CSRF cookie is missing"),
        (cookie.as_str(), "", "CSRF field is missing"),
        (cookie.as_str(), "garbage", "does not match the CSRF cookie"),
        (
            foreign_cookie.as_str(),
            foreign_token.as_str(),
            "not one this server issued",
        ),
    ] {
        let r = web
            .send(form_post(
                "/actions/abdicate",
                ORIGIN,
                cookie,
                &[("csrf", field)],
            ))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{cookie:?} {field:?}");
        let html = r.text();
        assert!(html.contains(says), "{cookie:?} {field:?}: {html}");
        assert!(html.contains("reload the form"));
    }
    assert!(web.core.received().is_empty());
}

#[tokio::test]
async fn login_refuses_foreign_next_urls() {
    let web = TestWeb::leader();
    let html = web.send(get("/login?next=//evil.test/")).await.text();
    assert!(html.contains(r#"href="/actions""#));
    assert!(!html.contains("evil.test"));
}

/// The links of the page's `<nav class="tabs">`, in order.
fn nav_links(html: &str) -> Vec<String> {
    let nav = html
        .split(r#"<nav class="tabs">"#)
        .nth(1)
        .and_then(|rest| rest.split("</nav>").next())
        .expect("a navigation");
    nav.split(r#"<a href=""#)
        .skip(1)
        .filter_map(|a| a.split('"').next())
        .map(str::to_string)
        .collect()
}

/// An HTML error page (a 404, a 405) shows the same navigation as every
/// other page, every section in it (`web::nav`).
#[tokio::test]
async fn an_error_page_shows_the_same_navigation_as_the_pages() {
    let web = TestWeb::leader();
    let page = nav_links(&web.send(get("/")).await.text());
    let sections: Vec<&str> = mesos_appliance::web::nav::SECTIONS
        .iter()
        .map(|s| s.href)
        .collect();
    assert_eq!(page, sections);
    for want in ["/jobs", "/agents", "/audit"] {
        assert!(page.iter().any(|h| h == want), "{want}");
    }
    let r = web.send(get("/no-such-page")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(nav_links(&r.text()), page, "the 404 page");
    let r = web
        .send(
            request(axum::http::Method::DELETE, "/tasks")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(nav_links(&r.text()), page, "the 405 page");
}
