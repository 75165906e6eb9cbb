//! Building the Mesos `TaskInfo` of a planned task from its service spec.
//!
//! With the command executor the task carries its `CommandInfo`. With our
//! executor (`executor: "appliance"`) Mesos forbids both `command` and
//! `executor` on one task (TASK_ERROR "Task should have at least one (but not
//! both) of CommandInfo or ExecutorInfo present", validation.cpp), so the
//! task's `CommandInfo` travels protobuf-encoded in `TaskInfo.data`, and the
//! `ExecutorInfo` runs `./mesos-appliance-executor`, fetched from the
//! appliance (`CommandInfo.URI` with `executable` and `cache`).
//!
//! The agent's fetcher only downloads the URIs of the command it launches
//! (`ExecutorInfo.command`; `docs/fetcher.md`,
//! `src/slave/containerizer/fetcher.cpp`); it never
//! looks into `TaskInfo.data`, and our executor fetches nothing. So with our
//! executor the service's `uris` go into `ExecutorInfo.command.uris`, after
//! the binary — one executor per task, so they are the task's own — and
//! the command in `data` carries none.
//!
//! A service's `health_check` becomes `TaskInfo.health_check` under both
//! executors (both run it, `docs/health-checks.md`). Its `container` becomes
//! `TaskInfo.container` for the command executor, and
//! `ExecutorInfo.container` for ours: the agent containerizes a custom
//! executor by its own `ContainerInfo` only (`src/slave/slave.cpp`
//! getExecutorInfo builds one from `TaskInfo.container` for command tasks).

use super::placement::{Planned, task_resources};
use crate::executor::info::{self as executor, ExecutorResources};
use crate::mesos::resources::Resources;
use crate::mesos::v1::{self, command_info, environment};
use crate::scheduler::ids::IdSource;
use crate::scheduler::spec::{CommandSpec, ExecutorKind, ServiceSpec};

pub use crate::executor::info::EXECUTOR_BINARY;

/// A task ID: `<service>.<instance>.<uuid>`, the UUID drawn from `ids`.
pub fn new_task_id(service: &str, instance: u32, ids: &mut IdSource) -> String {
    format!("{service}.{instance}.{}", ids.uuid())
}

/// The executor ID of our executor for a task: one executor per task.
pub fn executor_id(task_id: &str) -> String {
    format!("{EXECUTOR_BINARY}.{task_id}")
}

/// Where and what our executor is: the fetch URL and its resources.
#[derive(Debug, Clone)]
pub struct ExecutorSource {
    /// URL of the binary (`<advertised URL>/executor/<version>/mesos-appliance-executor`).
    pub url: String,
    /// CPUs of one executor.
    pub cpus: f64,
    /// Memory of one executor, MB.
    pub mem: f64,
}

impl ExecutorSource {
    /// The executor's own resources.
    pub fn resources(&self) -> Resources {
        let mut r = Resources::new();
        r.add_scalar("cpus", self.cpus);
        r.add_scalar("mem", self.mem);
        r
    }
}

/// The task's `CommandInfo`: shell or argv, environment (the service's and
/// its container's, plus `PORT0…`, `PORTS`, `APPLIANCE_SERVICE`,
/// `APPLIANCE_INSTANCE`) and URIs.
pub fn command_info(spec: &ServiceSpec, planned: &Planned) -> v1::CommandInfo {
    let container_env = spec.container.iter().flat_map(|c| c.environment.iter());
    let mut variables: Vec<environment::Variable> = spec
        .env
        .iter()
        .chain(container_env)
        .map(|(k, v)| variable(k, v))
        .collect();
    for (i, port) in planned.ports.iter().enumerate() {
        variables.push(variable(&format!("PORT{i}"), &port.to_string()));
    }
    if let Some(first) = planned.ports.first() {
        variables.push(variable("PORT", &first.to_string()));
    }
    let ports: Vec<String> = planned.ports.iter().map(u64::to_string).collect();
    variables.push(variable("PORTS", &ports.join(",")));
    variables.push(variable("APPLIANCE_SERVICE", &spec.name));
    variables.push(variable(
        "APPLIANCE_INSTANCE",
        &planned.instance.to_string(),
    ));
    let (value, shell, arguments) = match &spec.command {
        CommandSpec::Shell(line) => (line.clone(), true, Vec::new()),
        CommandSpec::Argv(argv) => (argv[0].clone(), false, argv.clone()),
    };
    v1::CommandInfo {
        uris: spec
            .uris
            .iter()
            .map(|u| command_info::Uri {
                value: u.value.clone(),
                executable: Some(u.executable),
                extract: Some(u.extract),
                cache: Some(u.cache),
                output_file: None,
            })
            .collect(),
        environment: Some(v1::Environment { variables }),
        value: Some(value),
        user: None,
        shell: Some(shell),
        arguments,
    }
}

fn variable(name: &str, value: &str) -> environment::Variable {
    environment::Variable {
        name: name.to_string(),
        value: Some(value.to_string()),
        r#type: Some(environment::variable::Type::Value as i32),
    }
}

/// The executor that runs task `task_id` and its executor ID: ours where
/// the spec asks for it and `executor` is set, else Mesos' command
/// executor, whose executor ID is the task ID.
pub fn executor_of(
    spec: &ServiceSpec,
    task_id: &str,
    executor: Option<&ExecutorSource>,
) -> (ExecutorKind, String) {
    match (spec.executor, executor) {
        (ExecutorKind::Appliance, Some(_)) => (ExecutorKind::Appliance, executor_id(task_id)),
        _ => (ExecutorKind::Command, task_id.to_string()),
    }
}

/// The `TaskInfo` launching `planned` as task `task_id`; `fingerprint` is
/// `spec`'s ([`ServiceSpec::fingerprint`], computed once by the caller for
/// all the tasks it places of a spec). `executor` must be set for services
/// using our executor.
pub fn task_info(
    spec: &ServiceSpec,
    fingerprint: &str,
    planned: &Planned,
    task_id: &str,
    framework_id: &str,
    executor: Option<&ExecutorSource>,
) -> v1::TaskInfo {
    let mut resources = task_resources(spec);
    let taken: Vec<(u64, u64)> = planned.ports.iter().map(|p| (*p, *p)).collect();
    resources.add_ranges("ports", &taken);
    let command = command_info(spec, planned);
    let labels = v1::Labels {
        labels: [
            ("appliance.service", spec.name.clone()),
            ("appliance.instance", planned.instance.to_string()),
            ("appliance.fingerprint", fingerprint.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| v1::Label {
            key: k.into(),
            value: Some(v),
        })
        .collect(),
    };
    let health_check = spec.health_check.as_ref().map(|check| {
        let port = match (check.port_index, check.port) {
            (Some(i), _) => {
                let i = i as usize;
                spec.container
                    .as_ref()
                    .and_then(|c| c.container_port(i))
                    .or_else(|| planned.ports.get(i).and_then(|p| u32::try_from(*p).ok()))
                    .unwrap_or(0)
            }
            (None, port) => port.unwrap_or(0),
        };
        let environment = command.environment.clone().unwrap_or_default();
        check.to_proto(port, &environment)
    });
    let container = spec.container.as_ref().map(|c| c.to_proto(&planned.ports));
    let mut info = v1::TaskInfo {
        name: format!("{}.{}", spec.name, planned.instance),
        task_id: v1::TaskId {
            value: task_id.to_string(),
        },
        agent_id: planned.agent_id.to_proto(),
        resources: resources.to_protos(None),
        labels: Some(labels),
        kill_policy: Some(executor::kill_policy(spec.kill_grace_period)),
        health_check,
        ..Default::default()
    };
    match (executor_of(spec, task_id, executor), executor) {
        ((ExecutorKind::Appliance, executor_id), Some(source)) => {
            let v1::CommandInfo { uris, .. } = &command;
            let resources = ExecutorResources {
                cpus: source.cpus,
                mem: source.mem,
                ..ExecutorResources::default()
            };
            let mut executor_info =
                executor::executor_info(&executor_id, framework_id, &source.url, &resources);
            if let Some(fetched) = executor_info.command.as_mut() {
                fetched.uris.extend(uris.iter().cloned());
            }
            executor_info.container = container;
            info.executor = Some(executor_info);
            info.data = Some(executor::task_data(&v1::CommandInfo {
                uris: Vec::new(),
                ..command
            }));
        }
        _ => {
            info.command = Some(command);
            info.container = container;
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> ServiceSpec {
        serde_json::from_value(json).unwrap()
    }

    /// The `TaskInfo` of `planned()` as task `task_id` of `spec`.
    fn launch_info(
        spec: &ServiceSpec,
        task_id: &str,
        framework_id: &str,
        executor: Option<&ExecutorSource>,
    ) -> v1::TaskInfo {
        task_info(
            spec,
            &spec.fingerprint(),
            &planned(),
            task_id,
            framework_id,
            executor,
        )
    }

    fn planned() -> Planned {
        Planned {
            service: "web".into(),
            instance: 2,
            offer_id: "o1".into(),
            agent_id: "a1".into(),
            hostname: "h1".into(),
            ports: vec![31000, 31001],
        }
    }

    #[test]
    fn command_tasks_carry_command_env_ports_and_kill_policy() {
        let s = spec(
            serde_json::json!({"name": "web", "command": "serve $PORT0", "cpus": 0.5, "mem": 64,
            "ports": 2, "instances": 3, "env": {"A": "b"}, "kill_grace_period": "7s"}),
        );
        let info = launch_info(&s, "web.2.x", "fw", None);
        assert_eq!(info.name, "web.2");
        assert!(info.executor.is_none());
        let cmd = info.command.unwrap();
        assert_eq!(
            (cmd.value.as_deref(), cmd.shell),
            (Some("serve $PORT0"), Some(true))
        );
        let env: Vec<(String, String)> = cmd
            .environment
            .unwrap()
            .variables
            .into_iter()
            .map(|v| (v.name, v.value.unwrap()))
            .collect();
        for pair in [
            ("A", "b"),
            ("PORT0", "31000"),
            ("PORT1", "31001"),
            ("PORTS", "31000,31001"),
            ("APPLIANCE_INSTANCE", "2"),
        ] {
            assert!(
                env.contains(&(pair.0.to_string(), pair.1.to_string())),
                "{pair:?} in {env:?}"
            );
        }
        let r = Resources::from_protos(&info.resources);
        assert_eq!((r.scalar("cpus"), r.scalar("mem")), (0.5, 64.0));
        assert_eq!(r.ranges("ports"), &[(31000, 31001)]);
        assert_eq!(
            info.kill_policy.unwrap().grace_period.unwrap().nanoseconds,
            7_000_000_000
        );
    }

    #[test]
    fn appliance_tasks_use_our_executor_and_carry_the_command_in_data() {
        let s = spec(
            serde_json::json!({"name": "web", "command": ["sleep", "100"], "cpus": 0.1, "mem": 32,
            "instances": 1, "executor": "appliance"}),
        );
        let source = ExecutorSource {
            url: "http://h:8080/executor/0.1.0-ab/mesos-appliance-executor".into(),
            cpus: 0.05,
            mem: 32.0,
        };
        let info = launch_info(&s, "web.2.x", "fw-1", Some(&source));
        assert!(info.command.is_none());
        let executor = info.executor.unwrap();
        assert_eq!(
            executor.executor_id.value,
            "mesos-appliance-executor.web.2.x"
        );
        assert_eq!(executor.framework_id.unwrap().value, "fw-1");
        let fetch = &executor.command.as_ref().unwrap().uris[0];
        assert_eq!((fetch.executable, fetch.cache), (Some(true), Some(true)));
        let cmd =
            <v1::CommandInfo as prost::Message>::decode(info.data.unwrap().as_slice()).unwrap();
        assert_eq!(
            (cmd.shell, cmd.arguments),
            (Some(false), vec!["sleep".to_string(), "100".to_string()])
        );
    }

    #[test]
    fn appliance_tasks_have_the_fetcher_bring_the_service_uris() {
        let s = spec(
            serde_json::json!({"name": "web", "command": "./site/serve", "cpus": 0.1,
            "mem": 32, "instances": 1, "executor": "appliance",
            "uris": ["http://files/site.tgz",
                     {"value": "http://files/serve", "executable": true, "extract": false, "cache": true}]}),
        );
        let source = ExecutorSource {
            url: "http://h:8080/executor/0.1.0-ab/mesos-appliance-executor".into(),
            cpus: 0.05,
            mem: 32.0,
        };
        let info = launch_info(&s, "web.2.x", "fw-1", Some(&source));
        let uris = &info.executor.unwrap().command.unwrap().uris;
        let fetched: Vec<_> = uris
            .iter()
            .map(|u| (u.value.as_str(), u.executable, u.extract, u.cache))
            .collect();
        assert_eq!(
            fetched,
            [
                (source.url.as_str(), Some(true), Some(false), Some(true)),
                (
                    "http://files/site.tgz",
                    Some(false),
                    Some(true),
                    Some(false)
                ),
                ("http://files/serve", Some(true), Some(false), Some(true)),
            ]
        );
        // Only the executor binary is renamed; the service's files keep the
        // fetcher's own naming (the URI's basename).
        assert!(uris[1..].iter().all(|u| u.output_file.is_none()));
        // The executor never fetches: the command it runs lists no URIs.
        let cmd =
            <v1::CommandInfo as prost::Message>::decode(info.data.unwrap().as_slice()).unwrap();
        assert!(cmd.uris.is_empty());
        assert_eq!(cmd.value.as_deref(), Some("./site/serve"));
        // The command executor fetches the task's own command URIs.
        let s = spec(
            serde_json::json!({"name": "web", "command": "true", "cpus": 0.1,
            "mem": 32, "instances": 1, "uris": ["http://files/site.tgz"]}),
        );
        let info = launch_info(&s, "web.2.y", "fw-1", None);
        assert_eq!(info.command.unwrap().uris[0].value, "http://files/site.tgz");
    }

    #[test]
    fn health_checks_go_on_the_task_under_both_executors() {
        let source = ExecutorSource {
            url: "http://h:8080/executor/0.1.0-ab/mesos-appliance-executor".into(),
            cpus: 0.05,
            mem: 32.0,
        };
        for executor in ["command", "appliance"] {
            let s = spec(
                serde_json::json!({"name": "web", "command": "serve", "cpus": 0.1,
                "mem": 32, "ports": 2, "instances": 1, "executor": executor,
                "health_check": {"type": "http", "port_index": 1, "path": "/ready",
                                 "interval": "2s", "consecutive_failures": 5}}),
            );
            assert!(s.validate().is_empty());
            let info = launch_info(&s, "web.2.x", "fw", Some(&source));
            let check = info.health_check.expect(executor);
            let http = check.http.unwrap();
            assert_eq!((http.port, http.path.as_deref()), (31001, Some("/ready")));
            assert_eq!(
                (check.interval_seconds, check.consecutive_failures),
                (Some(2.0), Some(5))
            );
        }
        let s = spec(
            serde_json::json!({"name": "web", "command": "serve", "cpus": 0.1,
            "mem": 32, "ports": 1, "instances": 1,
            "health_check": {"type": "command", "command": "test -n \"$PORT0\""}}),
        );
        let check = launch_info(&s, "web.2.x", "fw", None).health_check.unwrap();
        let env = check.command.unwrap().environment.unwrap();
        assert!(env.variables.iter().any(|v| v.name == "PORT0"), "{env:?}");
    }

    #[test]
    fn containers_go_on_the_task_or_on_our_executor() {
        let s = spec(
            serde_json::json!({"name": "web", "command": "serve", "cpus": 0.1,
            "mem": 32, "ports": 1, "instances": 1, "env": {"A": "b"},
            "container": {"image": "team/web:1", "environment": {"LANG": "C"}}}),
        );
        assert!(s.validate().is_empty());
        let info = launch_info(&s, "web.2.x", "fw", None);
        let container = info.container.expect("on the task");
        assert_eq!(
            container.mesos.unwrap().image.unwrap().docker.unwrap().name,
            "team/web:1"
        );
        let env = info.command.unwrap().environment.unwrap().variables;
        assert!(
            env.iter()
                .any(|v| v.name == "LANG" && v.value.as_deref() == Some("C"))
        );
        let mut appliance = s.clone();
        appliance.executor = ExecutorKind::Appliance;
        let source = ExecutorSource {
            url: "http://h:8080/executor/0.1.0-ab/mesos-appliance-executor".into(),
            cpus: 0.05,
            mem: 32.0,
        };
        let info = launch_info(&appliance, "web.2.x", "fw", Some(&source));
        assert!(info.container.is_none());
        assert!(
            info.executor.unwrap().container.is_some(),
            "on the executor"
        );
        // A Docker BRIDGE task is checked on the container port.
        let s = spec(
            serde_json::json!({"name": "web", "command": "serve", "cpus": 0.1,
            "mem": 32, "ports": 1, "instances": 1,
            "container": {"docker": {"image": "nginx", "network": "BRIDGE",
                                     "port_mappings": [{"container_port": 80}]}},
            "health_check": {"type": "tcp", "port_index": 0}}),
        );
        assert!(s.validate().is_empty());
        let info = launch_info(&s, "web.2.x", "fw", None);
        assert_eq!(info.health_check.unwrap().tcp.unwrap().port, 80);
        let docker = info.container.unwrap().docker.unwrap();
        assert_eq!(docker.port_mappings[0].host_port, 31000);
    }
}
