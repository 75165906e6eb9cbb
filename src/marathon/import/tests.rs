//! The mapping, on the fixtures of `tests/fixtures/marathon/` (written
//! from Marathon's documented app schema) and on small apps.

use std::time::Duration;

use super::*;
use crate::scheduler::spec::health::HealthCheckKind;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/marathon/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The notes of `app` as `(field, outcome)`.
fn notes_of<'a>(imported: &'a Imported, app: &str) -> Vec<(&'a str, Outcome)> {
    imported
        .notes
        .iter()
        .filter(|n| n.app == app)
        .map(|n| (n.field.as_str(), n.outcome))
        .collect()
}

fn why<'a>(imported: &'a Imported, app: &str, field: &str) -> &'a str {
    imported
        .notes
        .iter()
        .find(|n| n.app == app && n.field == field)
        .map(|n| n.why.as_str())
        .unwrap_or_else(|| panic!("no note on {app} {field}: {:#?}", imported.notes))
}

#[test]
fn a_docker_app_with_an_http_check_becomes_a_bridged_docker_service() {
    let out = import(&fixture("docker-http.json")).unwrap();
    assert_eq!(out.specs.len(), 1);
    let s = &out.specs[0];
    assert!(s.validate().is_empty(), "{:?}", s.validate());
    assert_eq!(s.name, "shop-frontend");
    assert_eq!(
        s.command,
        CommandSpec::Argv(vec!["nginx".into(), "-g".into(), "daemon off;".into()])
    );
    assert_eq!((s.cpus, s.mem, s.instances, s.ports), (0.25, 96.0, 3, 1));
    let docker = s.container.as_ref().unwrap().docker.as_ref().unwrap();
    assert_eq!(docker.image, "nginx:1.27");
    assert!(docker.force_pull_image);
    assert_eq!(docker.network, DockerNetwork::Bridge);
    assert_eq!(docker.port_mappings[0].container_port, 80);
    assert_eq!(docker.parameters[0].key, "log-driver");
    let check = s.health_check.as_ref().unwrap();
    assert_eq!(check.kind, HealthCheckKind::Http);
    assert_eq!(check.path.as_deref(), Some("/healthz"));
    assert_eq!(check.port_index, Some(0));
    assert_eq!(
        (
            check.grace_period,
            check.interval,
            check.timeout,
            check.delay
        ),
        (
            Duration::from_secs(60),
            Duration::from_secs(10),
            Duration::from_secs(5),
            Duration::from_secs(5)
        )
    );
    assert_eq!(check.consecutive_failures, 3);
    assert_eq!(s.labels["HAPROXY_GROUP"], "external");
    assert_eq!(s.labels["MARATHON_SERVICE_PORT_0"], "10080");
    // The secret reference is not carried, the plain variable is.
    assert_eq!(s.env.len(), 1);
    assert_eq!(s.env["NGINX_ENTRYPOINT_QUIET_LOGS"], "1");
    let u = s.unreachable.as_ref().unwrap();
    assert_eq!(
        (u.inactive_after, u.expunge_after),
        (Duration::from_secs(60), Duration::from_secs(120))
    );
    let app = "/shop/frontend";
    assert_eq!(
        notes_of(&out, app),
        [
            ("id", Outcome::Changed),
            ("container.portMappings[0].servicePort", Outcome::Changed),
            ("container.portMappings[0].name", Outcome::NotCarried),
            ("args", Outcome::Changed),
            ("env.API_KEY", Outcome::NotCarried),
            ("upgradeStrategy", Outcome::NotCarried),
            ("secrets", Outcome::NotCarried),
        ]
    );
    assert!(why(&out, app, "env.API_KEY").contains("secret"));
    assert!(why(&out, app, "upgradeStrategy").contains("minimumHealthCapacity 0.5"));
}

#[test]
fn a_v2_apps_answer_gives_each_app_with_its_constraints_and_checks() {
    let out = import(&fixture("apps.json")).unwrap();
    let names: Vec<&str> = out.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["billing-worker", "billing-api"]);
    let worker = &out.specs[0];
    assert_eq!(
        worker.constraints,
        [
            "hostname:UNIQUE",
            "rack:LIKE:r[12]",
            "zone:LIKE:eu\\-1a",
            "hostname:UNIQUE"
        ]
    );
    let check = worker.health_check.as_ref().unwrap();
    assert_eq!(check.kind, HealthCheckKind::Command);
    assert_eq!(check.consecutive_failures, MAX_CONSECUTIVE_FAILURES);
    assert_eq!(check.port_index, None);
    assert_eq!(
        worker.uris[0].value,
        "https://artifacts.example.com/worker.tgz"
    );
    assert_eq!(worker.restart_backoff, Duration::from_secs(2));
    assert_eq!(worker.restart_backoff_max, Duration::from_secs(120));
    assert_eq!(worker.kill_grace_period, Duration::from_secs(10));
    assert_eq!(worker.disk, 10.0);
    let u = worker.unreachable.as_ref().unwrap();
    assert_eq!(u.inactive_after, Duration::ZERO);
    let app = "/billing/worker";
    let fields: Vec<&str> = notes_of(&out, app).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        [
            "id",
            "version, versionInfo, tasksRunning, tasksHealthy",
            "portDefinitions[0]",
            "portDefinitions[0].name",
            "healthChecks[0].maxConsecutiveFailures",
            "constraints[2]",
            "constraints[3]",
            "constraints[4]",
            "backoffFactor",
        ]
    );
    assert!(why(&out, app, "constraints[3]").contains("GROUP_BY"));
    assert!(why(&out, app, "backoffFactor").contains("1.15"));
    let api = &out.specs[1];
    assert_eq!(api.ports, 2);
    assert_eq!(
        api.health_check.as_ref().unwrap().kind,
        HealthCheckKind::Http
    );
    assert_eq!(api.labels["MARATHON_SERVICE_PORT_0"], "10102");
    assert!(!api.labels.contains_key("MARATHON_SERVICE_PORT_1"));
    let app = "/billing/api";
    assert_eq!(
        notes_of(&out, app),
        [
            ("id", Outcome::Changed),
            ("tasksRunning", Outcome::NotCarried),
            ("portDefinitions[0]", Outcome::Changed),
            ("portDefinitions[1]", Outcome::NotCarried),
            ("healthChecks[0].protocol", Outcome::Changed),
            ("healthChecks[1]", Outcome::NotCarried),
        ]
    );
    assert!(why(&out, app, "healthChecks[0].protocol").contains("executor"));
}

#[test]
fn group_ids_become_names_relative_ids_resolve_against_their_group() {
    let out = import(&fixture("groups.json")).unwrap();
    let names: Vec<&str> = out.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["prod-cache", "prod-search-indexer-v2", "prod-search-ui"]
    );
    let apps: Vec<&str> = out.notes.iter().map(|n| n.app.as_str()).collect();
    assert!(apps.contains(&"/prod/search/indexer.v2"), "{apps:?}");
    assert!(apps.contains(&"/prod/search-ui"), "{apps:?}");
    assert_eq!(out.specs[1].instances, 0);
    // Marathon's defaults where the app says nothing.
    let ui = &out.specs[2];
    assert_eq!((ui.cpus, ui.mem, ui.instances), (0.1, 32.0, 1));
    let u = ui.unreachable.as_ref().unwrap();
    assert_eq!(
        (u.inactive_after, u.expunge_after),
        (Duration::from_secs(300), Duration::from_secs(600))
    );
    assert_eq!(ui.restart_backoff, Duration::from_secs(1));
    assert_eq!(ui.restart_backoff_max, Duration::from_secs(300));
    let tcp = out.specs[0].health_check.as_ref().unwrap();
    assert_eq!(tcp.kind, HealthCheckKind::Tcp);
    assert_eq!(tcp.grace_period, Duration::from_secs(300));
    assert_eq!(tcp.interval, Duration::from_secs(60));
}

#[test]
fn unsupported_fields_and_unusable_apps_are_each_listed() {
    let out = import(&fixture("unsupported.json")).unwrap();
    assert_eq!(out.specs.len(), 1);
    let batch = &out.specs[0];
    assert_eq!(batch.name, "legacy-batch");
    assert_eq!(
        batch.container.as_ref().unwrap().image.as_deref(),
        Some("busybox:1.36")
    );
    assert!(batch.constraints.is_empty());
    assert_eq!(batch.unreachable, None);
    let app = "/legacy/batch";
    let fields: Vec<&str> = notes_of(&out, app).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        [
            "id",
            "container.volumes[0]",
            "container.volumes[0].persistent",
            "constraints[0]",
            "constraints[1]",
            "constraints[2]",
            "unreachableStrategy",
            "killSelection",
            "acceptedResourceRoles",
            "dependencies",
            "frobnicate",
            "gpus",
            "readinessChecks",
            "residency",
            "user",
        ]
    );
    assert!(why(&out, app, "frobnicate").contains("unknown field"));
    assert!(why(&out, app, "user").contains("framework"));
    assert!(why(&out, "/legacy/image-only", "").contains("neither cmd nor args"));
    assert!(why(&out, "/legacy/both", "").contains("both cmd and args"));
    assert_eq!(out.refused(), 2);
}

#[test]
fn input_that_is_not_marathon_json_is_refused_with_the_reason() {
    for (text, says) in [
        (fixture("not-marathon.json"), "needs an \"id\""),
        ("42".to_string(), "expected an app object"),
        ("[]".to_string(), "no apps"),
        ("[1]".to_string(), "[0] is not an app object"),
        (r#"{"id": "/a"}"#.to_string(), "not a Marathon app"),
    ] {
        match import(&text) {
            Err(ImportError::NotMarathon(why)) => assert!(why.contains(says), "{text}: {why}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    assert!(matches!(import("{"), Err(ImportError::NotJson(_))));
}

#[test]
fn names_collide_or_do_not_fit_and_the_app_is_refused() {
    let text = serde_json::json!([
        {"id": "/a/b-c", "cmd": "x"},
        {"id": "/a-b/c", "cmd": "x"},
        {"id": format!("/{}", "x".repeat(64)), "cmd": "x"},
        {"id": "/Upper", "cmd": "x"},
        {"id": "/trailing-", "cmd": "x"},
        {"id": "/ok", "cmd": "x", "cpus": 0},
    ])
    .to_string();
    let out = import(&text).unwrap();
    assert_eq!(out.specs.len(), 1);
    assert!(why(&out, "/a-b/c", "").contains("already the name of /a/b-c"));
    assert!(why(&out, &format!("/{}", "x".repeat(64)), "").contains("1-63"));
    assert!(why(&out, "/Upper", "").contains("[a-z0-9-]"));
    assert!(why(&out, "/trailing-", "").contains("ending with a letter or digit"));
    assert!(why(&out, "/ok", "").contains("cpus"));
}

#[test]
fn every_spec_made_validates_and_survives_a_round_trip() {
    for name in [
        "docker-http.json",
        "apps.json",
        "groups.json",
        "unsupported.json",
    ] {
        for spec in import(&fixture(name)).unwrap().specs {
            assert!(spec.validate().is_empty(), "{name}: {:?}", spec.validate());
            let text = serde_json::to_string(&spec).unwrap();
            let back: ServiceSpec = crate::util::json::parse(text.as_bytes()).unwrap();
            assert_eq!(back, spec);
        }
    }
}

#[test]
fn absolute_ids() {
    assert_eq!(absolute("web", "/"), "/web");
    assert_eq!(absolute("web", "/prod"), "/prod/web");
    assert_eq!(absolute("/x/y", "/prod"), "/x/y");
    assert_eq!(absolute("../ui", "/prod/search"), "/prod/ui");
    assert_eq!(absolute("./a/", "/p"), "/p/a");
}

mod random {
    //! Whatever an app's fields hold, the import neither panics nor makes
    //! an invalid spec, and every app ends as a spec or a refusal.

    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::super::*;

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e12f64..1e12).prop_map(Value::from),
            prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(1e300), Just(-1.0)]
                .prop_map(Value::from),
            "[a-zA-Z0-9:/._ $-]{0,12}".prop_map(Value::from),
            prop_oneof![
                Just("DOCKER"),
                Just("MESOS"),
                Just("MESOS_HTTP"),
                Just("COMMAND"),
                Just("TCP"),
                Just("UNIQUE"),
                Just("CLUSTER"),
                Just("container/bridge"),
                Just("BRIDGE"),
                Just("disabled"),
                Just("hostname"),
                Just("nginx:1.27"),
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        "[a-zA-Z]{1,8}",
                        Just("image".to_string()),
                        Just("protocol".to_string()),
                        Just("portIndex".to_string()),
                        Just("containerPort".to_string()),
                        Just("servicePort".to_string()),
                        Just("value".to_string()),
                        Just("mode".to_string()),
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    const KEYS: [&str; 26] = [
        "id",
        "cmd",
        "args",
        "cpus",
        "mem",
        "disk",
        "instances",
        "env",
        "labels",
        "container",
        "networks",
        "portDefinitions",
        "ports",
        "healthChecks",
        "constraints",
        "fetch",
        "uris",
        "backoffSeconds",
        "maxLaunchDelaySeconds",
        "backoffFactor",
        "taskKillGracePeriodSeconds",
        "upgradeStrategy",
        "unreachableStrategy",
        "killSelection",
        "secrets",
        "apps",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn any_field_values_give_valid_specs_or_reasons(
            fixture in 0usize..4,
            changes in prop::collection::vec((0usize..KEYS.len(), json()), 1..6),
        ) {
            let name = ["docker-http.json", "apps.json", "groups.json", "unsupported.json"][fixture];
            let mut doc: Value = serde_json::from_str(&super::fixture(name)).unwrap();
            let app = match &mut doc {
                Value::Array(apps) => &mut apps[0],
                Value::Object(o) if o.contains_key("apps") => &mut o.get_mut("apps").unwrap()[0],
                other => other,
            };
            for (key, value) in changes {
                app[KEYS[key]] = value;
            }
            let text = doc.to_string();
            if let Ok(out) = import(&text) {
                for spec in &out.specs {
                    prop_assert!(spec.validate().is_empty(), "{:?}", spec.validate());
                }
                let refused: std::collections::BTreeSet<&str> = out
                    .notes
                    .iter()
                    .filter(|n| n.outcome == Outcome::Refused)
                    .map(|n| n.app.as_str())
                    .collect();
                prop_assert_eq!(refused.len(), out.refused());
            }
        }
    }
}
