//! The files users deploy with stay valid: the sample services load with the
//! appliance's own parser, and the Dockerfile builds with the Cargo profile
//! README tells people to use. (`docker-compose config -q` runs in `.ci/run`:
//! it needs the docker-compose program, not a Docker engine.)

use std::path::Path;

use mesos_appliance::scheduler::services::{ExecutorKind, parse_services_file};

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn sample_services_are_valid_and_use_both_executors() {
    let services = parse_services_file(&read("deploy/services.json")).expect("valid services");
    assert!(services.iter().any(|s| s.executor == ExecutorKind::Command));
    assert!(
        services
            .iter()
            .any(|s| s.executor == ExecutorKind::Appliance)
    );
}

#[test]
fn the_dockerfile_builds_with_the_readme_profile_and_ships_the_executor() {
    let readme = read("README.md");
    let dockerfile = read("Dockerfile");
    assert!(
        readme.contains("cargo run --release"),
        "README's profile is release"
    );
    assert!(dockerfile.contains("cargo build --release --locked"));
    for binary in [
        "mesos-appliance",
        "mesos-appliance-executor",
        "mesos-testbed",
    ] {
        assert!(dockerfile.contains(&format!("--bin {binary}")), "{binary}");
    }
    let compose = read("docker-compose.yml");
    assert!(compose.contains("--services=/etc/mesos-appliance/services.json"));
    assert!(compose.contains("./deploy:/etc/mesos-appliance:ro"));
}
