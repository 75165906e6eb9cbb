//! The cluster a process-level test runs against: a real ZooKeeper, a
//! `mesos-testbed` master with three agents, and a folder for the services
//! files of `mesos-appliance` replicas. Each test module adds the replica
//! arguments it needs in its own `impl Cluster` block.

use mesos_appliance::testbed::{Testbed, TestbedConfig};

use super::zookeeper::ZkServer;

/// ZooKeeper, the testbed and a temporary folder, dropped together.
pub struct Cluster {
    /// The ZooKeeper server.
    pub zk: ZkServer,
    /// The testbed master (three agents).
    pub tb: Testbed,
    /// Where services files go.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts all three.
    pub async fn start() -> Cluster {
        super::mesos::init();
        Cluster {
            zk: ZkServer::start(),
            tb: Testbed::start(TestbedConfig::for_tests(3)).await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }
}
