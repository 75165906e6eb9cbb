//! Building the `ExecutorInfo` and `TaskInfo.data` that make Mesos run a
//! task under `mesos-appliance-executor`.
//!
//! The agent's fetcher downloads the executor binary from the appliance
//! (`GET /executor/<version>/mesos-appliance-executor`, served by the web
//! layer) into the sandbox: a `CommandInfo.URI` with `executable = true` (so
//! it can run) and `cache = true` (one download per agent and URL,
//! `docs/fetcher.md`), `extract = false` (it is no archive). The executor's
//! command is then `./mesos-appliance-executor`, run by the agent's shell in
//! the sandbox.
//!
//! Because the fetcher cache is keyed by the URL, the URL names the binary's
//! version ([`ServedExecutor`]): the crate version plus a hash of the file,
//! so an upgraded appliance — or a rebuilt one with the same crate version —
//! makes agents fetch the new binary instead of running a cached old one.
//!
//! A task that names an executor cannot also carry `TaskInfo.command` (the
//! master wants exactly one of the two, `src/master/validation.cpp`), so the
//! task's own command travels in `TaskInfo.data` as a serialized
//! `mesos.v1.CommandInfo` ([`task_data`]); the executor reads it back with
//! [`crate::executor::tasks::task_command`].
//!
//! ```
//! use mesos_appliance::executor::info::{ExecutorResources, executor_info, task_data};
//! use mesos_appliance::mesos::v1;
//!
//! let info = executor_info(
//!     "web-exec-1",
//!     "fw-0001",
//!     "http://appliance.example:8080/executor/0.1.0-0123456789ab/mesos-appliance-executor",
//!     &ExecutorResources::default(),
//! );
//! assert_eq!(info.command.as_ref().unwrap().value.as_deref(), Some("./mesos-appliance-executor"));
//! let data = task_data(&v1::CommandInfo { value: Some("sleep 100".into()), ..Default::default() });
//! assert!(!data.is_empty());
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prost::Message;

use crate::mesos::v1;

/// The file name the fetcher gives the binary, and the command that runs it.
pub const EXECUTOR_BINARY: &str = "mesos-appliance-executor";
/// `ExecutorInfo.command.value`: the binary in the sandbox, run by the
/// agent's `/bin/sh -c`. The testbed's process mode recognises executors by
/// this suffix.
pub const EXECUTOR_COMMAND: &str = "./mesos-appliance-executor";

/// The executor binary a replica serves to the fetcher, and the version
/// that goes into its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedExecutor {
    /// The file.
    pub path: PathBuf,
    /// `<crate version>-<first 12 hex digits of the file's SHA-256>`.
    pub version: String,
}

impl ServedExecutor {
    /// Reads and hashes `path` once (at startup; the file is expected not to
    /// change while the replica runs).
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn open(path: &Path) -> std::io::Result<ServedExecutor> {
        let mut file = std::fs::File::open(path)?;
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            digest.update(&buffer[..n]);
        }
        let hash: String = digest
            .finish()
            .as_ref()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(ServedExecutor {
            path: path.to_path_buf(),
            version: format!("{}-{hash}", env!("CARGO_PKG_VERSION")),
        })
    }

    /// The path it is served at: [`binary_path`] of its version.
    pub fn url_path(&self) -> String {
        binary_path(&self.version)
    }
}

/// `/executor/<version>/mesos-appliance-executor`: a new URL for every
/// version, and the basename the fetcher names the file by stays
/// [`EXECUTOR_BINARY`].
pub fn binary_path(version: &str) -> String {
    format!("/executor/{version}/{EXECUTOR_BINARY}")
}

/// The unversioned path older appliances advertised, still served.
pub const LEGACY_BINARY_PATH: &str = "/executor/mesos-appliance-executor";

/// Resources of the executor itself, on top of its tasks' (the agent
/// accounts them while the executor runs).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorResources {
    /// CPUs (Mesos `cpus`); default 0.05.
    pub cpus: f64,
    /// Memory in MB (Mesos `mem`); default 32 — the executor's RSS with one
    /// task is a few MB (see the executor tests' RSS check).
    pub mem: f64,
    /// Role the resources are allocated to, for MULTI_ROLE frameworks
    /// (`allocation_info.role`); `None` leaves them unreserved (`*`).
    pub role: Option<String>,
    /// `ExecutorInfo.shutdown_grace_period`: how long the agent waits after
    /// SHUTDOWN before destroying the executor; `None` uses the agent's
    /// `--executor_shutdown_grace_period` (5 s).
    pub shutdown_grace_period: Option<Duration>,
}

impl Default for ExecutorResources {
    fn default() -> Self {
        ExecutorResources {
            cpus: 0.05,
            mem: 32.0,
            role: None,
            shutdown_grace_period: None,
        }
    }
}

fn scalar(name: &str, value: f64, role: Option<&str>) -> v1::Resource {
    v1::Resource {
        name: name.to_string(),
        r#type: v1::value::Type::Scalar as i32,
        scalar: Some(v1::value::Scalar { value }),
        allocation_info: role.map(|r| v1::resource::AllocationInfo {
            role: Some(r.to_string()),
        }),
        ..Default::default()
    }
}

/// The `ExecutorInfo` for a task run by `mesos-appliance-executor`:
/// type CUSTOM, `executor_id` and `framework_id` as given, a `name`, the
/// binary fetched from `binary_url` (executable, cached, not extracted) and
/// run as [`EXECUTOR_COMMAND`], with `resources` of its own.
///
/// Tasks sharing an executor must carry identical `ExecutorInfo`s (the
/// master refuses a different one under the same ID), so build it from the
/// same inputs each time.
pub fn executor_info(
    executor_id: &str,
    framework_id: &str,
    binary_url: &str,
    resources: &ExecutorResources,
) -> v1::ExecutorInfo {
    let role = resources.role.as_deref();
    v1::ExecutorInfo {
        r#type: Some(v1::executor_info::Type::Custom as i32),
        executor_id: v1::ExecutorId {
            value: executor_id.to_string(),
        },
        framework_id: Some(v1::FrameworkId {
            value: framework_id.to_string(),
        }),
        name: Some(EXECUTOR_BINARY.to_string()),
        command: Some(v1::CommandInfo {
            uris: vec![v1::command_info::Uri {
                value: binary_url.to_string(),
                executable: Some(true),
                extract: Some(false),
                cache: Some(true),
                output_file: Some(EXECUTOR_BINARY.to_string()),
            }],
            value: Some(EXECUTOR_COMMAND.to_string()),
            shell: Some(true),
            ..Default::default()
        }),
        resources: vec![
            scalar("cpus", resources.cpus, role),
            scalar("mem", resources.mem, role),
        ],
        shutdown_grace_period: resources.shutdown_grace_period.map(|d| v1::DurationInfo {
            nanoseconds: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }),
        ..Default::default()
    }
}

/// `TaskInfo.data` for a task run by `mesos-appliance-executor`: its
/// command, serialized as a protobuf `mesos.v1.CommandInfo`.
pub fn task_data(command: &v1::CommandInfo) -> Vec<u8> {
    command.encode_to_vec()
}

/// A `KillPolicy` with `grace` between SIGTERM and SIGKILL, for
/// `TaskInfo.kill_policy` (the executor honours it on KILL).
pub fn kill_policy(grace: Duration) -> v1::KillPolicy {
    v1::KillPolicy {
        grace_period: Some(v1::DurationInfo {
            nanoseconds: i64::try_from(grace.as_nanos()).unwrap_or(i64::MAX),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executor_info_fetches_and_runs_the_binary() {
        let info = executor_info(
            "e1",
            "fw",
            "http://a:8080/executor/mesos-appliance-executor",
            &ExecutorResources {
                role: Some("web".into()),
                shutdown_grace_period: Some(Duration::from_secs(3)),
                ..Default::default()
            },
        );
        assert_eq!(info.r#type(), v1::executor_info::Type::Custom);
        assert_eq!(info.executor_id.value, "e1");
        assert_eq!(info.framework_id.as_ref().unwrap().value, "fw");
        let command = info.command.as_ref().unwrap();
        assert_eq!(command.value.as_deref(), Some("./mesos-appliance-executor"));
        let uri = &command.uris[0];
        assert_eq!(uri.value, "http://a:8080/executor/mesos-appliance-executor");
        assert_eq!(
            (uri.executable, uri.cache, uri.extract),
            (Some(true), Some(true), Some(false))
        );
        assert_eq!(info.resources.len(), 2);
        assert_eq!(
            info.resources[1]
                .allocation_info
                .as_ref()
                .unwrap()
                .role
                .as_deref(),
            Some("web")
        );
        assert_eq!(
            info.shutdown_grace_period.unwrap().nanoseconds,
            3_000_000_000
        );
        // Mesos JSON has every required field.
        assert!(crate::mesos::json::missing_required_fields(&info).is_empty());
    }

    #[test]
    fn the_url_changes_with_the_binary_and_keeps_the_basename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EXECUTOR_BINARY);
        std::fs::write(&path, b"build one").unwrap();
        let one = ServedExecutor::open(&path).unwrap();
        std::fs::write(&path, b"build two").unwrap();
        let two = ServedExecutor::open(&path).unwrap();
        assert_ne!(one.version, two.version);
        let prefix = concat!(env!("CARGO_PKG_VERSION"), "-");
        assert!(one.version.starts_with(prefix), "{}", one.version);
        assert_eq!(one.version.len(), prefix.len() + 12);
        assert_eq!(
            one.url_path(),
            format!("/executor/{}/mesos-appliance-executor", one.version)
        );
        assert!(one.url_path().ends_with(&format!("/{EXECUTOR_BINARY}")));
        assert_eq!(ServedExecutor::open(&path).unwrap(), two);
        assert!(ServedExecutor::open(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn task_data_round_trips_through_the_executor() {
        let command = v1::CommandInfo {
            value: Some("echo hi".into()),
            ..Default::default()
        };
        let task = v1::TaskInfo {
            data: Some(task_data(&command)),
            ..Default::default()
        };
        assert_eq!(
            crate::executor::tasks::task_command(&task).unwrap(),
            command
        );
        assert_eq!(
            kill_policy(Duration::from_millis(1500))
                .grace_period
                .unwrap()
                .nanoseconds,
            1_500_000_000
        );
    }
}
