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
//! The master validates a task's and an executor's `ContainerInfo` before
//! the agent sees it (`testbed::master::launch`).
//!
//! What is simulated is only the choice: a container an agent can launch
//! runs as any simulated task does, and in process mode our executor runs
//! on the host, not in the image (noted in its sandbox's `stderr`).

use crate::mesos::v1::{self, container_info, image, task_status};
use crate::testbed::config::{AgentSpec, Containerizer, ImageProvider};
use crate::testbed::master::agent_side::LaunchFailure;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::config::parse_list;

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
}
