//! `TaskInfo.health_check`, `ContainerInfo` and a health status update on
//! the wire, byte for byte in protobuf and key for key in JSON, against the
//! field numbers and enum values of Apache Mesos 1.12's
//! `include/mesos/v1/mesos.proto` written out below (not taken from our own
//! `.proto`), for what the scheduler actually builds from a service spec.

use mesos_appliance::mesos::json;
use mesos_appliance::mesos::v1;
use mesos_appliance::scheduler::ServiceSpec;
use mesos_appliance::scheduler::rules::placement::Planned;
use mesos_appliance::scheduler::rules::taskinfo::{ExecutorSource, task_info};
use prost::{Message, Name};
use serde_json::{Value, json};

/// Field numbers and enum values of include/mesos/v1/mesos.proto, written
/// out in `tests/data/mesos-1.12-fields.txt` by their path
/// (`health_check.http.PORT`).
const MESOS_PROTO: &str = include_str!("../data/mesos-1.12-fields.txt");

/// The number named `name` in [`MESOS_PROTO`].
fn number(name: &str) -> u64 {
    MESOS_PROTO
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} is not in mesos-1.12-fields.txt"))
}

/// A field number of [`MESOS_PROTO`].
fn field(name: &str) -> u32 {
    u32::try_from(number(name)).expect("a field number")
}

// A minimal protobuf writer: fields in the order given.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn uint(number: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(number) << 3, &mut out);
    varint(value, &mut out);
    out
}

fn double(number: u32, value: f64) -> Vec<u8> {
    let mut out = Vec::new();
    varint((u64::from(number) << 3) | 1, &mut out);
    out.extend_from_slice(&value.to_le_bytes());
    out
}

fn bytes(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint((u64::from(number) << 3) | 2, &mut out);
    varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn text(number: u32, value: &str) -> Vec<u8> {
    bytes(number, value.as_bytes())
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// The payloads of field `number` (length-delimited) in an encoded message.
fn field_payloads(mut data: &[u8], number: u32) -> Vec<Vec<u8>> {
    fn read_varint(data: &mut &[u8]) -> u64 {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let byte = data[0];
            *data = &data[1..];
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return value;
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while !data.is_empty() {
        let key = read_varint(&mut data);
        match key & 7 {
            0 => {
                read_varint(&mut data);
            }
            1 => data = &data[8..],
            2 => {
                let len = read_varint(&mut data) as usize;
                if key >> 3 == u64::from(number) {
                    out.push(data[..len].to_vec());
                }
                data = &data[len..];
            }
            5 => data = &data[4..],
            other => panic!("wire type {other}"),
        }
    }
    out
}

fn spec(json: serde_json::Value) -> ServiceSpec {
    let spec: ServiceSpec = serde_json::from_value(json).expect("spec");
    assert_eq!(spec.validate(), []);
    spec
}

fn planned() -> Planned {
    Planned {
        service: "web".into(),
        instance: 0,
        offer_id: "o1".into(),
        agent_id: "a1".into(),
        hostname: "h1".into(),
        ports: vec![31000],
    }
}

/// The `TaskInfo` of `planned()` as task `task_id` of `spec` (framework
/// `fw`).
fn launch_info(
    spec: &ServiceSpec,
    task_id: &str,
    executor: Option<&ExecutorSource>,
) -> v1::TaskInfo {
    task_info(
        spec,
        &spec.fingerprint(),
        &planned(),
        task_id,
        "fw",
        executor,
    )
}

/// `message`, field `number` of `info`, encodes to `expected` byte for byte
/// (alone and inside the TaskInfo) and to `mesos_json` key for key (proto
/// field names, enums by name, seconds as numbers), and reads back from both.
fn assert_on_the_wire<M>(
    info: &v1::TaskInfo,
    number: u32,
    message: &M,
    expected: &[u8],
    mesos_json: Value,
) where
    M: Message + Name + Default + PartialEq + std::fmt::Debug,
{
    assert_eq!(message.encode_to_vec(), expected);
    assert_eq!(field_payloads(&info.encode_to_vec(), number), [expected]);
    assert_eq!(&M::decode(expected).unwrap(), message);
    assert_eq!(json::to_value(message), mesos_json);
    let parsed: M = json::from_slice(mesos_json.to_string().as_bytes()).unwrap();
    assert_eq!(&parsed, message);
}

#[test]
fn an_http_health_check_is_encoded_as_mesos_reads_it() {
    let spec = spec(
        json!({"name": "web", "command": "serve", "cpus": 0.1, "mem": 32,
        "ports": 1, "instances": 1,
        "health_check": {"type": "http", "port_index": 0, "path": "/health",
            "delay": "5s", "interval": "2s", "timeout": "1500ms", "grace_period": "30s",
            "consecutive_failures": 4}}),
    );
    let info = launch_info(&spec, "web.0.x", None);
    let expected = cat(&[
        bytes(
            field("health_check.HTTP"),
            &cat(&[
                uint(field("health_check.http.PORT"), 31000),
                text(field("health_check.http.PATH"), "/health"),
                text(field("health_check.http.SCHEME"), "http"),
            ]),
        ),
        double(field("health_check.DELAY_SECONDS"), 5.0),
        double(field("health_check.INTERVAL_SECONDS"), 2.0),
        double(field("health_check.TIMEOUT_SECONDS"), 1.5),
        uint(field("health_check.CONSECUTIVE_FAILURES"), 4),
        double(field("health_check.GRACE_PERIOD_SECONDS"), 30.0),
        uint(field("health_check.TYPE"), number("health_check.TYPE_HTTP")),
    ]);
    let check = info.health_check.clone().expect("health_check");
    let mesos_json = json!({"type": "HTTP",
        "http": {"port": 31000, "path": "/health", "scheme": "http"},
        "delay_seconds": 5.0, "interval_seconds": 2.0, "timeout_seconds": 1.5,
        "consecutive_failures": 4, "grace_period_seconds": 30.0});
    let field = field("task_info.HEALTH_CHECK");
    assert_on_the_wire(&info, field, &check, &expected, mesos_json.clone());
    assert_eq!(
        json::to_value(&info)["health_check"],
        mesos_json,
        "the same in the TaskInfo"
    );
}

#[test]
fn a_tcp_and_a_command_check_use_their_own_fields() {
    let tcp = spec(
        json!({"name": "db", "command": "db", "cpus": 0.1, "mem": 32,
        "instances": 1, "executor": "appliance",
        "health_check": {"type": "tcp", "port": 5432, "consecutive_failures": 1}}),
    );
    let source = mesos_appliance::scheduler::rules::taskinfo::ExecutorSource {
        url: "http://a/executor/0.1.0-ab/mesos-appliance-executor".into(),
        cpus: 0.05,
        mem: 32.0,
    };
    let check = launch_info(&tcp, "db.0.x", Some(&source))
        .health_check
        .unwrap();
    let encoded = check.encode_to_vec();
    assert_eq!(
        field_payloads(&encoded, field("health_check.TCP")),
        [uint(field("health_check.tcp.PORT"), 5432)]
    );
    assert!(encoded.ends_with(&cat(&[
        uint(field("health_check.TYPE"), number("health_check.TYPE_TCP")),
        bytes(
            field("health_check.TCP"),
            &uint(field("health_check.tcp.PORT"), 5432)
        ),
    ])));
    assert_eq!(json::to_value(&check)["tcp"], json!({"port": 5432}));

    let command = spec(
        json!({"name": "db", "command": "db", "cpus": 0.1, "mem": 32,
        "instances": 1, "health_check": {"type": "command", "command": "pg_isready"}}),
    );
    let check = launch_info(&command, "db.0.x", None).health_check.unwrap();
    let commands = field_payloads(&check.encode_to_vec(), field("health_check.COMMAND"));
    assert_eq!(commands.len(), 1);
    let info = v1::CommandInfo::decode(commands[0].as_slice()).unwrap();
    assert_eq!(info.value.as_deref(), Some("pg_isready"));
    assert_eq!(json::to_value(&check)["type"], "COMMAND");
    assert_eq!(json::to_value(&check)["command"]["shell"], true);
}

#[test]
fn an_image_container_is_encoded_as_mesos_reads_it() {
    let spec = spec(
        json!({"name": "web", "command": "serve", "cpus": 0.1, "mem": 32,
        "instances": 1, "container": {"image": "team/web:1.4", "force_pull": true,
            "volumes": [{"container_path": "/data", "host_path": "/srv/web", "mode": "RO"}]}}),
    );
    let info = launch_info(&spec, "web.0.x", None);
    let expected = cat(&[
        uint(
            field("container_info.TYPE"),
            number("container_info.TYPE_MESOS"),
        ),
        bytes(
            field("container_info.VOLUMES"),
            &cat(&[
                text(field("volume.CONTAINER_PATH"), "/data"),
                text(field("volume.HOST_PATH"), "/srv/web"),
                uint(field("volume.MODE"), number("volume.MODE_RO")),
            ]),
        ),
        bytes(
            field("container_info.MESOS"),
            &bytes(
                field("container_info.mesos_info.IMAGE"),
                &cat(&[
                    uint(field("image.TYPE"), number("image.TYPE_DOCKER")),
                    bytes(
                        field("image.DOCKER"),
                        &text(field("image.DOCKER_NAME"), "team/web:1.4"),
                    ),
                    uint(field("image.CACHED"), 0),
                ]),
            ),
        ),
    ]);
    let container = info.container.clone().expect("container");
    let mesos_json = json!({"type": "MESOS",
        "volumes": [{"container_path": "/data", "host_path": "/srv/web", "mode": "RO"}],
        "mesos": {"image": {"type": "DOCKER", "docker": {"name": "team/web:1.4"},
            "cached": false}}});
    let field = field("task_info.CONTAINER");
    assert_on_the_wire(&info, field, &container, &expected, mesos_json);
    assert!(json::missing_required_fields(&info).is_empty());
}

#[test]
fn a_docker_container_is_encoded_as_mesos_reads_it() {
    let spec = spec(
        json!({"name": "web", "command": "serve", "cpus": 0.1, "mem": 32,
        "ports": 1, "instances": 1, "container": {"docker": {"image": "nginx:1.27",
            "network": "BRIDGE", "port_mappings": [{"container_port": 80}],
            "parameters": [{"key": "memory-swap", "value": "-1"}]}}}),
    );
    let container = launch_info(&spec, "web.0.x", None).container.unwrap();
    let expected = cat(&[
        uint(
            field("container_info.TYPE"),
            number("container_info.TYPE_DOCKER"),
        ),
        bytes(
            field("container_info.DOCKER"),
            &cat(&[
                text(field("container_info.docker.IMAGE"), "nginx:1.27"),
                uint(
                    field("container_info.docker.NETWORK"),
                    number("container_info.docker.NETWORK_BRIDGE"),
                ),
                bytes(
                    field("container_info.docker.PORT_MAPPINGS"),
                    &cat(&[
                        uint(field("container_info.docker.HOST_PORT"), 31000),
                        uint(field("container_info.docker.CONTAINER_PORT"), 80),
                    ]),
                ),
                bytes(
                    field("container_info.docker.PARAMETERS"),
                    &cat(&[
                        text(field("parameter.KEY"), "memory-swap"),
                        text(field("parameter.VALUE"), "-1"),
                    ]),
                ),
                uint(field("container_info.docker.FORCE_PULL_IMAGE"), 0),
            ]),
        ),
    ]);
    assert_eq!(container.encode_to_vec(), expected);
    assert_eq!(
        json::to_value(&container),
        json!({"type": "DOCKER", "docker": {"image": "nginx:1.27", "network": "BRIDGE",
            "port_mappings": [{"host_port": 31000, "container_port": 80}],
            "parameters": [{"key": "memory-swap", "value": "-1"}],
            "force_pull_image": false}})
    );
}

#[test]
fn a_health_status_update_decodes_from_mesos_bytes_and_json() {
    let bytes = cat(&[
        bytes(field("task_status.TASK_ID"), &text(1, "web.0.x")),
        uint(
            field("task_status.STATE"),
            number("task_status.STATE_RUNNING"),
        ),
        uint(field("task_status.HEALTHY"), 0),
        uint(
            field("task_status.REASON"),
            number("task_status.REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ),
    ]);
    let status = v1::TaskStatus::decode(bytes.as_slice()).unwrap();
    assert_eq!(status.state(), v1::TaskState::TaskRunning);
    assert_eq!(status.healthy, Some(false));
    assert_eq!(
        status.reason(),
        v1::task_status::Reason::TaskHealthCheckStatusUpdated
    );
    assert_eq!(status.encode_to_vec(), bytes);
    let from_json: v1::TaskStatus = json::from_slice(
        br#"{"task_id":{"value":"web.0.x"},"state":"TASK_RUNNING","healthy":false,
            "reason":"REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"}"#,
    )
    .unwrap();
    assert_eq!(from_json, status);
}
