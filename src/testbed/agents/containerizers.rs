//! The simulated agents' containerizers: which containers an agent can
//! launch, and how a launch it cannot do fails, as on a real agent.
//!
//! - An agent has the containerizers it was started with (agent flag
//!   `--containerizers`, default `mesos`) and the Mesos containerizer's
//!   image providers (`--image_providers`, default none).
//! - The agent tries its containerizers in order (`src/slave/containerizer/composing.cpp`):
//!   the Mesos containerizer takes a container without `ContainerInfo` or of
//!   type MESOS (`src/slave/containerizer/mesos/containerizer.cpp` launch),
//!   the Docker containerizer one of type DOCKER
//!   (`src/slave/containerizer/docker.cpp` launch). When none takes it the
//!   agent finds no container to wait for, and the executor's tasks fail
//!   with TASK_FAILED, REASON_EXECUTOR_TERMINATED, "Abnormal executor
//!   termination: unknown container" (`src/slave/slave.cpp`
//!   executorLaunched, executorTerminated, sendExecutorTerminatedStatusUpdate).
//! - A MESOS container with an image on an agent without that image type's
//!   provider fails in the provisioner ("Unsupported container image type:
//!   DOCKER", `src/slave/containerizer/mesos/provisioner/provisioner.cpp`
//!   provision); the agent reports TASK_FAILED,
//!   REASON_CONTAINER_LAUNCH_FAILED, "Failed to launch container: …"
//!   (`src/slave/slave.cpp` executorLaunched).
//!
//! The master also validates a task's and an executor's `ContainerInfo`
//! before the agent sees it (`src/common/validation.cpp`
//! validateContainerInfo, prefixed in `src/master/validation.cpp`):
//! [`validate_container_info`].
//!
//! What is simulated is only the choice: a container an agent can launch
//! runs as any simulated task does, and in process mode our executor runs
//! on the host, not in the image (noted in its sandbox's `stderr`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::mesos::v1::{self, container_info, image, task_status};
use crate::testbed::config::AgentSpec;

/// A containerizer of an agent (`--containerizers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Containerizer {
    /// The Mesos containerizer.
    Mesos,
    /// The Docker containerizer.
    Docker,
}

/// An image provider of the Mesos containerizer (`--image_providers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageProvider {
    /// Docker images (with `docker/runtime` isolation).
    Docker,
    /// AppC images.
    Appc,
}

impl FromStr for Containerizer {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "mesos" => Ok(Containerizer::Mesos),
            "docker" => Ok(Containerizer::Docker),
            other => Err(format!(
                "unknown containerizer {other:?}: expected mesos or docker"
            )),
        }
    }
}

impl FromStr for ImageProvider {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        // src/slave/containerizer/mesos/provisioner/store.cpp: case-insensitive.
        match text.trim().to_ascii_lowercase().as_str() {
            "docker" => Ok(ImageProvider::Docker),
            "appc" => Ok(ImageProvider::Appc),
            other => Err(format!(
                "unknown image provider {other:?}: expected docker or appc"
            )),
        }
    }
}

impl fmt::Display for Containerizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Containerizer::Mesos => "mesos",
            Containerizer::Docker => "docker",
        })
    }
}

/// Parses a comma-separated list (`mesos,docker`), without duplicates.
///
/// # Errors
/// An unknown or repeated name.
pub fn parse_list<T: FromStr<Err = String> + PartialEq>(text: &str) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in text.split(',').filter(|s| !s.trim().is_empty()) {
        let value: T = item.parse()?;
        if out.contains(&value) {
            return Err(format!("{:?} is listed twice", item.trim()));
        }
        out.push(value);
    }
    Ok(out)
}

/// Why an agent cannot launch a container: the tasks' update.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LaunchFailure {
    pub reason: task_status::Reason,
    pub message: String,
}

/// The failure of launching `container` (the executor's container: the
/// task's for the command executor) on `agent`, or `None` when one of its
/// containerizers takes it.
pub(crate) fn launch_failure(
    agent: &AgentSpec,
    container: Option<&v1::ContainerInfo>,
) -> Option<LaunchFailure> {
    for containerizer in &agent.containerizers {
        match (containerizer, container) {
            (Containerizer::Mesos, None) => return None,
            (Containerizer::Mesos, Some(c)) if c.r#type() == container_info::Type::Mesos => {
                let image = c.mesos.as_ref().and_then(|m| m.image.as_ref())?;
                let provider = match image.r#type() {
                    image::Type::Docker => ImageProvider::Docker,
                    image::Type::Appc => ImageProvider::Appc,
                };
                if agent.image_providers.contains(&provider) {
                    return None;
                }
                return Some(LaunchFailure {
                    reason: task_status::Reason::ContainerLaunchFailed,
                    message: format!(
                        "Failed to launch container: Unsupported container image type: {}",
                        image.r#type().as_str_name()
                    ),
                });
            }
            (Containerizer::Docker, Some(c)) if c.r#type() == container_info::Type::Docker => {
                return None;
            }
            _ => {}
        }
    }
    Some(LaunchFailure {
        reason: task_status::Reason::ExecutorTerminated,
        message: "Abnormal executor termination: unknown container".into(),
    })
}

/// What process mode writes into the sandbox's `stderr` of an executor
/// whose `ExecutorInfo` has a container: it runs on the host.
pub(crate) fn process_mode_note(container: &v1::ContainerInfo) -> String {
    let what = match (&container.docker, &container.mesos) {
        (Some(docker), _) => format!("the Docker container of image '{}'", docker.image),
        (None, Some(mesos)) => match mesos.image.as_ref().and_then(|i| i.docker.as_ref()) {
            Some(docker) => format!("a container of image '{}'", docker.name),
            None => "a Mesos container".to_string(),
        },
        (None, None) => "its container".to_string(),
    };
    format!(
        "mesos-testbed: process mode provisions no container: this executor runs on the \
         host, not in {what} as on a real agent\n"
    )
}

/// The master's checks of a `ContainerInfo` (`src/common/validation.cpp`
/// validateContainerInfo and validateVolume), in Mesos' words.
///
/// # Errors
/// The first problem.
pub(crate) fn validate_container_info(container: &v1::ContainerInfo) -> Result<(), String> {
    for volume in &container.volumes {
        let set = usize::from(volume.host_path.is_some()) + usize::from(volume.image.is_some());
        if set != 1 {
            return Err("Invalid volume: Only one of them should be set: \
                 'host_path', 'image' and 'source'"
                .into());
        }
    }
    if container.r#type() == container_info::Type::Docker {
        let Some(docker) = &container.docker else {
            return Err("DockerInfo 'docker' is not set for DOCKER typed ContainerInfo".into());
        };
        if docker.parameters.iter().any(|p| p.key == "name") {
            return Err("Parameter in DockerInfo must not be 'name'".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(containerizers: &str, providers: &str) -> AgentSpec {
        let mut agent = AgentSpec::new("a", "cpus:1;mem:128");
        agent.containerizers = parse_list(containerizers).unwrap();
        agent.image_providers = parse_list(providers).unwrap();
        agent
    }

    fn mesos_image() -> v1::ContainerInfo {
        v1::ContainerInfo {
            r#type: container_info::Type::Mesos as i32,
            mesos: Some(container_info::MesosInfo {
                image: Some(v1::Image {
                    r#type: image::Type::Docker as i32,
                    docker: Some(image::Docker {
                        name: "alpine".into(),
                    }),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    fn docker() -> v1::ContainerInfo {
        v1::ContainerInfo {
            r#type: container_info::Type::Docker as i32,
            docker: Some(container_info::DockerInfo {
                image: "alpine".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn agents_launch_what_their_containerizers_take() {
        let plain = agent("mesos", "");
        assert_eq!(launch_failure(&plain, None), None);
        let failure = launch_failure(&plain, Some(&mesos_image())).unwrap();
        assert_eq!(failure.reason, task_status::Reason::ContainerLaunchFailed);
        assert_eq!(
            failure.message,
            "Failed to launch container: Unsupported container image type: DOCKER"
        );
        let failure = launch_failure(&plain, Some(&docker())).unwrap();
        assert_eq!(failure.reason, task_status::Reason::ExecutorTerminated);
        assert_eq!(
            failure.message,
            "Abnormal executor termination: unknown container"
        );
        let images = agent("mesos", "docker");
        assert_eq!(launch_failure(&images, Some(&mesos_image())), None);
        let both = agent("mesos,docker", "");
        assert_eq!(launch_failure(&both, Some(&docker())), None);
        let docker_only = agent("docker", "");
        assert!(launch_failure(&docker_only, None).is_some());
    }

    #[test]
    fn lists_parse_and_refuse_unknown_or_repeated_names() {
        assert_eq!(
            parse_list::<Containerizer>("mesos, docker").unwrap(),
            [Containerizer::Mesos, Containerizer::Docker]
        );
        assert_eq!(
            parse_list::<ImageProvider>("DOCKER").unwrap(),
            [ImageProvider::Docker]
        );
        assert!(parse_list::<Containerizer>("mesos,mesos").is_err());
        assert!(parse_list::<Containerizer>("rkt").is_err());
    }

    #[test]
    fn the_master_validates_container_infos() {
        assert_eq!(validate_container_info(&docker()), Ok(()));
        let mut bad = docker();
        bad.docker = None;
        assert_eq!(
            validate_container_info(&bad).unwrap_err(),
            "DockerInfo 'docker' is not set for DOCKER typed ContainerInfo"
        );
        let mut named = docker();
        named.docker.as_mut().unwrap().parameters = vec![v1::Parameter {
            key: "name".into(),
            value: "x".into(),
        }];
        assert!(validate_container_info(&named).is_err());
        let mut volume = mesos_image();
        volume.volumes = vec![v1::Volume {
            container_path: "/a".into(),
            ..Default::default()
        }];
        assert!(
            validate_container_info(&volume)
                .unwrap_err()
                .starts_with("Invalid volume")
        );
    }
}
