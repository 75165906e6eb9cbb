//! A simulated agent's configuration: its resources, attributes,
//! containerizers and image providers (the agent flags `--resources`,
//! `--attributes`, `--containerizers` and `--image_providers`). What an
//! agent does with its containerizers is `testbed::agents::containerizers`.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::mesos::resources::{self, Resources};
use crate::mesos::v1;

/// One simulated agent.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// Hostname shown in offers (`Offer.hostname`) and in `/master/state`.
    pub hostname: String,
    /// Total resources, e.g. `cpus:4;mem:8192;disk:65536;ports:[31000-32000]`.
    pub resources: Resources,
    /// Agent attributes, e.g. `rack:r1` (`Offer.attributes`).
    pub attributes: Vec<v1::Attribute>,
    /// Agent `--containerizers`, in order (default: mesos); see
    /// `testbed::agents::containerizers` for what each launches.
    pub containerizers: Vec<Containerizer>,
    /// Agent `--image_providers` of the Mesos containerizer (default: none,
    /// so image tasks fail as on a real agent without them).
    pub image_providers: Vec<ImageProvider>,
}

impl AgentSpec {
    /// An agent named `hostname` with `resources` (Mesos text form) and no
    /// attributes.
    ///
    /// # Panics
    /// If `resources` does not parse; meant for tests with literal specs.
    pub fn new(hostname: &str, resources: &str) -> Self {
        Self {
            hostname: hostname.to_string(),
            resources: Resources::parse(resources).expect("valid resource text"),
            attributes: Vec::new(),
            containerizers: vec![Containerizer::Mesos],
            image_providers: Vec::new(),
        }
    }

    /// Sets the containerizers (`mesos,docker`) and image providers
    /// (`docker` or empty), as the agent flags `--containerizers` and
    /// `--image_providers`.
    ///
    /// # Panics
    /// If a list does not parse; meant for tests with literal specs.
    pub fn with_containerizers(mut self, containerizers: &str, image_providers: &str) -> Self {
        self.containerizers = parse_list(containerizers).expect("valid containerizers");
        self.image_providers = parse_list(image_providers).expect("valid image providers");
        self
    }

    /// Adds attributes in Mesos text form (`rack:r1;zone:a`).
    ///
    /// # Panics
    /// If `attributes` does not parse; meant for tests with literal specs.
    pub fn with_attributes(mut self, attributes: &str) -> Self {
        self.attributes = resources::parse_attributes(attributes).expect("valid attribute text");
        self
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
