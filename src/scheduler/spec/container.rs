//! A service's `container`: the image its tasks run in. Two forms, as
//! Mesos has two containerizers (`docs/containerizers.md`):
//!
//! ```json
//! {"image": "registry.example:5000/team/web:1.4", "force_pull": false,
//!  "volumes": [{"container_path": "/data", "host_path": "/srv/web", "mode": "RW"}],
//!  "environment": {"LANG": "C.UTF-8"}}
//! {"docker": {"image": "nginx:1.27", "network": "BRIDGE",
//!             "port_mappings": [{"container_port": 80}],
//!             "force_pull_image": false, "parameters": [{"key": "memory-swap", "value": "-1"}]}}
//! ```
//!
//! - `image`: the Mesos containerizer provisions the Docker image as the
//!   task's root file system — `ContainerInfo{type: MESOS, mesos: {image:
//!   {type: DOCKER, docker: {name}, cached: !force_pull}}}`. The agent needs
//!   `--image_providers=docker` and `--isolation=filesystem/linux,docker/runtime`
//!   (`docs/container-image.md`).
//! - `docker`: the Docker containerizer runs the task with `docker run` —
//!   `ContainerInfo{type: DOCKER, docker: DockerInfo}`; the agent needs
//!   `--containerizers=docker,…` (`docs/docker-containerizer.md`).
//!   `port_mappings[i]` maps the task's port `i` (`PORT<i>`, taken from the
//!   offer) to `container_port`; only with the BRIDGE and USER networks.
//!
//! In both forms `volumes` become `ContainerInfo.volumes` (`host_path`
//! mounted at `container_path`, `RO` or `RW`), and `environment` is added to
//! the task's `CommandInfo.environment`, which is how Mesos passes
//! variables into a container. A task run by `mesos-appliance-executor` puts
//! the container on its `ExecutorInfo` instead (the agent applies only the
//! executor's container to a custom executor, `src/slave/slave.cpp`
//! getExecutorInfo); the executor binary then has to run in the image.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::errors::FieldError;
use crate::mesos::v1::{self, container_info, image, volume};

pub use super::image_ref::{ImageReferenceError, MAX_IMAGE_LEN, check_image_reference};

/// A Docker network mode (`ContainerInfo.DockerInfo.Network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub enum DockerNetwork {
    /// The agent's network (Mesos' default on Linux).
    #[default]
    #[serde(rename = "HOST")]
    Host,
    /// Docker's bridge; ports reach the container through `port_mappings`.
    #[serde(rename = "BRIDGE")]
    Bridge,
    /// No network.
    #[serde(rename = "NONE")]
    None,
    /// A user-defined Docker network, named by `network_name`.
    #[serde(rename = "USER")]
    User,
}

/// `RO` or `RW`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum VolumeMode {
    /// Read-only.
    #[serde(rename = "RO")]
    Ro,
    /// Read-write.
    #[serde(rename = "RW")]
    Rw,
}

/// A host directory mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    /// Where it appears in the container (absolute, or relative to the sandbox).
    pub container_path: String,
    /// The agent's directory; absolute.
    pub host_path: String,
    /// `RO` or `RW`.
    pub mode: VolumeMode,
}

/// One port of a Docker BRIDGE or USER network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PortMappingSpec {
    /// The container's port the task's port (of the same index) maps to.
    #[serde(deserialize_with = "super::bounds::container_port")]
    pub container_port: u32,
    /// `tcp` (default), `udp` or `sctp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// A `docker run` option (`--key=value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ParameterSpec {
    /// The option without its dashes, e.g. `memory-swap`.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// The Docker containerizer's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DockerSpec {
    /// The image reference.
    pub image: String,
    /// Network mode (default HOST).
    #[serde(default)]
    pub network: DockerNetwork,
    /// The Docker network of the USER mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_name: Option<String>,
    /// `port_mappings[i]` maps the task's port `i`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_mappings: Vec<PortMappingSpec>,
    /// Pull the image even if the agent has it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force_pull_image: bool,
    /// Extra `docker run` options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParameterSpec>,
}

/// A service's container (see the module docs): `image` or `docker`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerSpec {
    /// Mesos containerizer: the Docker image to provision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Mesos containerizer: pull the image even if the agent has it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force_pull: bool,
    /// Docker containerizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerSpec>,
    /// Host directories to mount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeSpec>,
    /// Variables for the task in the container (with the service's `env`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: format!("container.{}", field.into()),
        message: message.into(),
    }
}

fn valid_variable(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ContainerSpec {
    /// Checks every field against a service with `ports` ports and `env`
    /// (fields named `container.<field>`).
    pub fn validate(&self, ports: u32, env: &BTreeMap<String, String>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        match (&self.image, &self.docker) {
            (Some(_), Some(_)) | (None, None) => errors.push(FieldError {
                field: "container".into(),
                message: "give either image (Mesos containerizer) or docker (Docker containerizer)"
                    .into(),
            }),
            _ => {}
        }
        if let Some(reference) = &self.image
            && let Err(e) = check_image_reference(reference)
        {
            errors.push(problem("image", e.to_string()));
        }
        if self.force_pull && self.image.is_none() {
            errors.push(problem(
                "force_pull",
                "only with image; the Docker containerizer has docker.force_pull_image",
            ));
        }
        if let Some(docker) = &self.docker {
            docker.validate(ports, &mut errors);
        }
        for (i, volume) in self.volumes.iter().enumerate() {
            let path = &volume.container_path;
            if path.is_empty()
                || path.contains(':')
                || path.chars().any(char::is_control)
                || path.split('/').any(|part| part == "..")
            {
                errors.push(problem(
                    format!("volumes[{i}].container_path"),
                    "must be a path without ':' or '..'",
                ));
            }
            let host = &volume.host_path;
            if !host.starts_with('/') || host.contains(':') || host.chars().any(char::is_control) {
                errors.push(problem(
                    format!("volumes[{i}].host_path"),
                    "must be an absolute path without ':'",
                ));
            }
        }
        for key in self.environment.keys() {
            if !valid_variable(key) {
                errors.push(problem(
                    format!("environment.{key}"),
                    "not a valid variable name",
                ));
            } else if env.contains_key(key) {
                errors.push(problem(
                    format!("environment.{key}"),
                    "also set in env; set it in one place",
                ));
            }
        }
        errors
    }

    /// The container port `port_index` is mapped to on a Docker BRIDGE or
    /// USER network, if any: where a health check must go inside the
    /// container's network (`docs/health-checks.md`: the port a task
    /// listens on, not a mapped one).
    pub fn container_port(&self, port_index: usize) -> Option<u32> {
        let docker = self.docker.as_ref()?;
        if !matches!(docker.network, DockerNetwork::Bridge | DockerNetwork::User) {
            return None;
        }
        docker
            .port_mappings
            .get(port_index)
            .map(|m| m.container_port)
    }

    /// The Mesos `ContainerInfo` for a task whose ports are `ports` (the
    /// offered host ports, `PORT0…`).
    pub fn to_proto(&self, ports: &[u64]) -> v1::ContainerInfo {
        let volumes = self
            .volumes
            .iter()
            .map(|v| v1::Volume {
                container_path: v.container_path.clone(),
                host_path: Some(v.host_path.clone()),
                mode: match v.mode {
                    VolumeMode::Ro => volume::Mode::Ro,
                    VolumeMode::Rw => volume::Mode::Rw,
                } as i32,
                image: None,
            })
            .collect();
        let mut info = v1::ContainerInfo {
            volumes,
            ..Default::default()
        };
        if let Some(docker) = &self.docker {
            info.r#type = container_info::Type::Docker as i32;
            info.docker = Some(docker.to_proto(ports));
            if docker.network == DockerNetwork::User {
                info.network_infos = vec![v1::NetworkInfo {
                    name: docker.network_name.clone(),
                    ..Default::default()
                }];
            }
        } else {
            info.r#type = container_info::Type::Mesos as i32;
            info.mesos = Some(container_info::MesosInfo {
                image: Some(v1::Image {
                    r#type: image::Type::Docker as i32,
                    docker: Some(image::Docker {
                        name: self.image.clone().unwrap_or_default(),
                    }),
                    cached: Some(!self.force_pull),
                    appc: None,
                }),
            });
        }
        info
    }
}

impl DockerSpec {
    fn validate(&self, ports: u32, errors: &mut Vec<FieldError>) {
        if let Err(e) = check_image_reference(&self.image) {
            errors.push(problem("docker.image", e.to_string()));
        }
        match (&self.network, &self.network_name) {
            (DockerNetwork::User, None) => errors.push(problem(
                "docker.network_name",
                "the USER network needs the Docker network's name",
            )),
            (DockerNetwork::User, Some(name)) if name.trim().is_empty() => {
                errors.push(problem("docker.network_name", "must not be empty"))
            }
            (DockerNetwork::User, Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                errors.push(problem("docker.network_name", "only with the USER network"))
            }
        }
        if !self.port_mappings.is_empty() {
            if matches!(self.network, DockerNetwork::Host | DockerNetwork::None) {
                // src/docker/docker.cpp RunOptions::create.
                errors.push(problem(
                    "docker.port_mappings",
                    "only with the BRIDGE and USER networks",
                ));
            }
            if self.port_mappings.len() > ports as usize {
                errors.push(problem(
                    "docker.port_mappings",
                    format!(
                        "port_mappings[i] takes the task's port i: at most {ports} (the service's ports)"
                    ),
                ));
            }
        }
        for (i, mapping) in self.port_mappings.iter().enumerate() {
            let port = super::bounds::CONTAINER_PORT;
            if !port.admits(f64::from(mapping.container_port)) {
                errors.push(problem(
                    format!("docker.port_mappings[{i}].container_port"),
                    port.message(),
                ));
            }
            if let Some(protocol) = &mapping.protocol
                && !["tcp", "udp", "sctp"].contains(&protocol.as_str())
            {
                errors.push(problem(
                    format!("docker.port_mappings[{i}].protocol"),
                    "must be tcp, udp or sctp",
                ));
            }
        }
        for (i, parameter) in self.parameters.iter().enumerate() {
            let key = parameter.key.trim_start_matches('-');
            if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
                errors.push(problem(
                    format!("docker.parameters[{i}].key"),
                    "must be a docker run option name",
                ));
            } else if key == "name" {
                // src/common/validation.cpp validateContainerInfo.
                errors.push(problem(
                    format!("docker.parameters[{i}].key"),
                    "must not be 'name' (the Docker containerizer names its containers)",
                ));
            }
        }
    }

    fn to_proto(&self, ports: &[u64]) -> container_info::DockerInfo {
        use container_info::docker_info::{Network, PortMapping};
        container_info::DockerInfo {
            image: self.image.clone(),
            network: Some(match self.network {
                DockerNetwork::Host => Network::Host,
                DockerNetwork::Bridge => Network::Bridge,
                DockerNetwork::None => Network::None,
                DockerNetwork::User => Network::User,
            } as i32),
            port_mappings: self
                .port_mappings
                .iter()
                .zip(ports)
                .map(|(m, host)| PortMapping {
                    host_port: u32::try_from(*host).unwrap_or(0),
                    container_port: m.container_port,
                    protocol: m.protocol.clone(),
                })
                .collect(),
            privileged: None,
            parameters: self
                .parameters
                .iter()
                .map(|p| v1::Parameter {
                    key: p.key.trim_start_matches('-').to_string(),
                    value: p.value.clone(),
                })
                .collect(),
            force_pull_image: Some(self.force_pull_image),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(json: serde_json::Value) -> ContainerSpec {
        serde_json::from_value(json).unwrap()
    }

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn an_image_is_a_mesos_container_with_a_docker_image() {
        let spec = container(
            serde_json::json!({"image": "team/web:1.4", "force_pull": true,
            "volumes": [{"container_path": "/data", "host_path": "/srv/web", "mode": "RO"}]}),
        );
        assert!(spec.validate(0, &BTreeMap::new()).is_empty());
        let info = spec.to_proto(&[]);
        assert_eq!(info.r#type(), container_info::Type::Mesos);
        let image = info.mesos.unwrap().image.unwrap();
        assert_eq!(image.r#type(), image::Type::Docker);
        assert_eq!(image.docker.unwrap().name, "team/web:1.4");
        assert_eq!(image.cached, Some(false), "force_pull");
        assert_eq!(info.volumes[0].mode(), volume::Mode::Ro);
        assert_eq!(info.volumes[0].host_path.as_deref(), Some("/srv/web"));
        assert!(info.docker.is_none());
    }

    #[test]
    fn docker_maps_the_tasks_ports_in_order() {
        let spec = container(serde_json::json!({"docker": {"image": "nginx:1.27",
            "network": "BRIDGE", "port_mappings": [{"container_port": 80},
            {"container_port": 53, "protocol": "udp"}],
            "parameters": [{"key": "--memory-swap", "value": "-1"}]}}));
        assert!(spec.validate(2, &BTreeMap::new()).is_empty());
        assert_eq!(
            (spec.container_port(0), spec.container_port(1)),
            (Some(80), Some(53))
        );
        assert_eq!(spec.container_port(2), None);
        let info = spec.to_proto(&[31000, 31001]);
        assert_eq!(info.r#type(), container_info::Type::Docker);
        let docker = info.docker.unwrap();
        assert_eq!(
            docker.network(),
            container_info::docker_info::Network::Bridge
        );
        let mapped: Vec<(u32, u32)> = docker
            .port_mappings
            .iter()
            .map(|m| (m.host_port, m.container_port))
            .collect();
        assert_eq!(mapped, [(31000, 80), (31001, 53)]);
        assert_eq!(docker.parameters[0].key, "memory-swap");
        assert_eq!(docker.force_pull_image, Some(false));
        let user = container(serde_json::json!({"docker": {"image": "nginx",
            "network": "USER", "network_name": "backend"}}));
        assert!(user.validate(0, &BTreeMap::new()).is_empty());
        assert_eq!(
            user.to_proto(&[]).network_infos[0].name.as_deref(),
            Some("backend")
        );
        let host = container(serde_json::json!({"docker": {"image": "nginx"}}));
        assert_eq!(host.container_port(0), None, "HOST: the task's own port");
    }

    #[test]
    fn field_errors_name_each_field() {
        let env: BTreeMap<String, String> = [("LANG".to_string(), "C".to_string())].into();
        let both = container(serde_json::json!({"image": "a", "docker": {"image": "b"}}));
        assert_eq!(fields(both.validate(0, &env)), ["container"]);
        assert_eq!(
            fields(container(serde_json::json!({})).validate(0, &env)),
            ["container"]
        );
        let bad = container(serde_json::json!({"docker": {"image": "Web",
            "network": "HOST", "network_name": "x",
            "port_mappings": [{"container_port": 0, "protocol": "icmp"}],
            "parameters": [{"key": "name", "value": "x"}]},
            "force_pull": true,
            "volumes": [{"container_path": "../x", "host_path": "rel", "mode": "RW"}],
            "environment": {"LANG": "C", "1X": "y"}}));
        assert_eq!(
            fields(bad.validate(0, &env)),
            [
                "container.force_pull",
                "container.docker.image",
                "container.docker.network_name",
                "container.docker.port_mappings",
                "container.docker.port_mappings",
                "container.docker.port_mappings[0].container_port",
                "container.docker.port_mappings[0].protocol",
                "container.docker.parameters[0].key",
                "container.volumes[0].container_path",
                "container.volumes[0].host_path",
                "container.environment.1X",
                "container.environment.LANG",
            ]
        );
        let user = container(serde_json::json!({"docker": {"image": "a", "network": "USER"}}));
        assert_eq!(
            fields(user.validate(0, &env)),
            ["container.docker.network_name"]
        );
        let err = serde_json::from_value::<ContainerSpec>(
            serde_json::json!({"image": "a", "volumes": [{"container_path": "/a",
                "host_path": "/b", "mode": "rw"}]}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown variant `rw`"), "{err}");
    }
}
