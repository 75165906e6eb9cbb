//! The files users deploy with stay valid: the sample services load with the
//! appliance's own parser, and the Dockerfile builds with the Cargo profile
//! README tells people to use, and its build stage copies every file the
//! build reads at compile time (derived from the sources, so a new
//! `include_str!` directory or template directory is caught here rather than
//! by a failing `docker build`). (`docker-compose config -q` runs in `.ci/run`:
//! it needs the docker-compose program, not a Docker engine.)

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use mesos_appliance::scheduler::spec::service::{ExecutorKind, parse_services_file};

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

/// The sample image service runs on the Compose agents: a Docker container
/// (the agents' containerizers include docker, with the host's Docker
/// socket), with an HTTP health check on the container port its task port
/// maps to, and ports that do not collide between the two agents, which
/// share the host's Docker engine.
#[test]
fn the_sample_image_service_fits_the_compose_agents() {
    use mesos_appliance::scheduler::spec::container::DockerNetwork;
    use mesos_appliance::scheduler::spec::health::HealthCheckKind;
    let services = parse_services_file(&read("deploy/services.json")).expect("valid services");
    let web = services
        .iter()
        .find(|s| s.container.is_some())
        .expect("an image-based sample service");
    let container = web.container.as_ref().unwrap();
    let docker = container.docker.as_ref().expect("Docker containerizer");
    assert_eq!(docker.network, DockerNetwork::Bridge);
    let check = web.health_check.as_ref().expect("a health check");
    assert_eq!(check.kind, HealthCheckKind::Http);
    let index = check.port_index.expect("on one of its ports") as usize;
    assert_eq!(
        container.container_port(index),
        Some(8080),
        "checked where the server listens inside the container"
    );
    assert!(
        matches!(&web.command, mesos_appliance::scheduler::CommandSpec::Shell(line) if line.contains("8080"))
    );

    let compose = read("docker-compose.yml");
    assert!(compose.contains("MESOS_CONTAINERIZERS: mesos,docker"));
    assert!(compose.contains("MESOS_DOCKER_KILL_ORPHANS: \"false\""));
    let mut ranges = Vec::new();
    for agent in ["mesos-agent-1", "mesos-agent-2"] {
        let service = compose_service(&compose, agent);
        assert!(
            service.contains("- /var/run/docker.sock:/var/run/docker.sock"),
            "{service}"
        );
        // Docker mounts sandboxes by their host path: the work directory
        // is mounted at the same path.
        let work_dir = service
            .lines()
            .find_map(|l| l.trim().strip_prefix("MESOS_WORK_DIR: "))
            .expect("a work directory per agent");
        assert!(
            service.contains(&format!("- {work_dir}:{work_dir}")),
            "{service}"
        );
        let ports = service
            .lines()
            .find_map(|l| l.split("ports:[").nth(1))
            .expect("a port range per agent");
        ranges.push(ports.trim_end_matches(']').to_string());
    }
    assert_ne!(ranges[0], ranges[1], "host ports are shared");
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

/// The lines of one service of docker-compose.yml: its `  name:` line and
/// the more deeply indented lines after it.
fn compose_service(compose: &str, name: &str) -> String {
    let header = format!("  {name}:");
    let mut lines = compose.lines().skip_while(|l| !l.starts_with(&header));
    let head = lines.next().unwrap_or_else(|| panic!("service {name}"));
    let body = lines.take_while(|l| l.is_empty() || l.starts_with("   "));
    std::iter::once(head)
        .chain(body)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn compose_never_restarts_a_fenced_replica_and_waits_for_zookeeper() {
    let compose = read("docker-compose.yml");
    // appliance-2 inherits from appliance-1 (`<<: *appliance`).
    let replica = compose_service(&compose, "appliance-1");
    assert!(replica.contains("hostname: appliance-1"), "{replica}");
    assert!(replica.contains("restart: \"no\""), "{replica}");
    assert!(!replica.contains("on-failure"), "{replica}");
    assert!(replica.contains("condition: service_healthy"), "{replica}");
    assert!(compose_service(&compose, "appliance-2").contains("<<: *appliance"));
    assert!(compose_service(&compose, "zookeeper").contains("healthcheck:"));
    // The exit code Compose must not undo is the one README documents.
    assert!(read("README.md").contains("| 3 | fenced by a newer deployment"));
    assert!(read("README.md").contains("docker-compose run --rm appliance-1 uninstall"));
}

// --- What the build stage must copy --------------------------------------
//
// The list is derived from the repository, not written down here: Cargo's
// targets (explicit `path`s, bench/test/example/bin sections, `build.rs`),
// every literal path build.rs mentions that exists, every file the sources
// pull in at compile time (`include!`, `include_str!`, `include_bytes!`)
// and askama's template directories (askama.toml `dirs`, else `templates`)
// when a source derives a template from a file.

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The first component of `path` (relative to the repository root), or None
/// when it points outside the repository or into the build's output.
fn top_level(path: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    let first = parts.into_iter().next()?;
    (first != "target").then_some(first)
}

/// String literals in Rust source (plain "…" only; escapes kept verbatim).
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' => {
                // A char literal ('"' must not open a string); lifetimes pass.
                if bytes.get(i + 2) == Some(&b'\'') {
                    i += 2;
                } else if bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'') {
                    i += 3;
                }
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                out.push((start - 1, text[start..i.min(text.len())].to_string()));
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Cargo.toml's targets and build script: (section, key, value) for the
/// `path`/`build` keys, and the sections that declare targets.
fn manifest_needs(manifest: &str) -> BTreeSet<String> {
    let mut needs = BTreeSet::new();
    let mut section = String::new();
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            // A declared target is looked for by Cargo at every build, even
            // when only some binaries are built.
            let default_dir = match section.as_str() {
                "bench" => Some("benches"),
                "test" => Some("tests"),
                "example" => Some("examples"),
                "bin" | "lib" => Some("src"),
                _ => None,
            };
            needs.extend(default_dir.map(String::from));
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().trim_matches('"'));
        let is_path = match section.as_str() {
            "package" => key == "build" && value != "false",
            "lib" | "bin" | "bench" | "test" | "example" => key == "path",
            _ => false,
        };
        if is_path {
            needs.extend(top_level(Path::new(value)));
        }
    }
    if !manifest.contains("build = false") && root().join("build.rs").exists() {
        needs.insert("build.rs".into());
    }
    needs.insert("Cargo.toml".into());
    if root().join("Cargo.lock").exists() {
        needs.insert("Cargo.lock".into());
    }
    needs
}

/// Every top-level file or directory the release build reads.
fn build_inputs() -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut needs = manifest_needs(&manifest);

    // Paths build.rs names (e.g. the .proto files) that exist in the repo.
    if needs.contains("build.rs") {
        let script = std::fs::read_to_string(root().join("build.rs")).unwrap();
        for (_, literal) in string_literals(&script) {
            let literal = literal.trim_start_matches("cargo:rerun-if-changed=");
            if root().join(literal).exists() {
                needs.extend(top_level(Path::new(literal)));
            }
        }
    }

    // Compile-time includes and askama templates in every compiled source.
    let mut files = Vec::new();
    for dir in needs.clone() {
        let path = root().join(&dir);
        if path.is_dir() {
            rust_files(&path, &mut files);
        }
    }
    let mut uses_template_files = false;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let dir = file.parent().unwrap().strip_prefix(root()).unwrap();
        for (at, literal) in string_literals(&text) {
            let before = text[..at].trim_end();
            let macro_arg = ["include!(", "include_str!(", "include_bytes!("]
                .iter()
                .any(|m| before.ends_with(m));
            if macro_arg {
                needs.extend(top_level(&dir.join(&literal)));
            }
            // `#[template(path = "…")]`, possibly with other arguments
            // before `path` or on earlier lines.
            if before.ends_with("path =")
                && before
                    .rfind("#[template(")
                    .is_some_and(|open| !before[open..].contains(")]"))
            {
                uses_template_files = true;
            }
        }
    }
    if uses_template_files {
        let config = std::fs::read_to_string(root().join("askama.toml")).ok();
        let dirs: Vec<String> = config
            .as_deref()
            .and_then(|c| c.lines().find(|l| l.trim_start().starts_with("dirs")))
            .map(|l| {
                string_literals(l.split_once('=').unwrap().1)
                    .into_iter()
                    .map(|(_, s)| s)
                    .collect()
            })
            .unwrap_or_else(|| vec!["templates".into()]);
        for dir in dirs {
            needs.extend(top_level(Path::new(&dir)));
        }
        needs.extend(config.map(|_| "askama.toml".to_string()));
    }
    needs
}

/// The top-level entries the first stage of `dockerfile` copies from the
/// build context before it runs `cargo build` ("." when it copies all).
fn copied_before_build(dockerfile: &str) -> BTreeSet<String> {
    let mut copied = BTreeSet::new();
    let mut joined = String::new();
    let mut lines = Vec::new();
    for line in dockerfile.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
        } else {
            joined.push_str(line);
            lines.push(std::mem::take(&mut joined));
        }
    }
    let mut stages = 0;
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(instruction) = words.first() else {
            continue;
        };
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                stages += 1;
                if stages > 1 {
                    break;
                }
            }
            "COPY" | "ADD" => {
                let args: Vec<&str> = words[1..]
                    .iter()
                    .copied()
                    .filter(|w| !w.starts_with("--"))
                    .collect();
                if words.iter().any(|w| w.starts_with("--from")) || args.len() < 2 {
                    continue;
                }
                let (sources, dest) = args.split_at(args.len() - 1);
                let dest = dest[0].trim_start_matches("./").trim_end_matches('/');
                for source in sources {
                    let source = source.trim_start_matches("./").trim_end_matches('/');
                    if source == "." || source.is_empty() {
                        copied.insert(".".to_string());
                        continue;
                    }
                    // Kept at the same place under WORKDIR: `COPY src src`,
                    // or files into `./`.
                    let name = Path::new(source).file_name().unwrap().to_string_lossy();
                    let same_place = if sources.len() == 1 && dest == source {
                        true
                    } else {
                        (dest.is_empty() || dest == ".") && !source.contains('/')
                    };
                    if same_place {
                        copied.insert(name.into_owned());
                    }
                }
            }
            "RUN" if line.contains("cargo build") => break,
            _ => {}
        }
    }
    copied
}

/// `.dockerignore` patterns (the simple forms: `name`, `dir/`, `*.ext`,
/// `**/name`) that exclude `entry` from the build context.
fn ignored(dockerignore: &str, entry: &str) -> bool {
    fn glob(pattern: &str, name: &str) -> bool {
        match pattern.split_once('*') {
            None => pattern == name,
            Some((pre, post)) => {
                name.len() >= pre.len() + post.len()
                    && name.starts_with(pre)
                    && name.ends_with(post)
            }
        }
    }
    dockerignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .any(|pattern| {
            let pattern = pattern.trim_start_matches("./").trim_end_matches('/');
            let pattern = pattern.strip_prefix("**/").unwrap_or(pattern);
            !pattern.contains('/') && glob(pattern, entry)
        })
}

#[test]
fn the_build_inputs_are_derived_from_the_repository() {
    let needs = build_inputs();
    // A sanity check of the derivation itself on today's tree: if one of
    // these stops being read at compile time, adjust this list, not the
    // derivation.
    for expected in ["src", "build.rs", "proto", "benches", "templates", "static"] {
        assert!(
            needs.contains(expected),
            "{expected} not derived: {needs:?}"
        );
    }
    assert!(!needs.contains("tests"), "tests are not built: {needs:?}");
}

#[test]
fn the_dockerfile_build_stage_copies_everything_the_build_reads() {
    let dockerfile = read("Dockerfile");
    let copied = copied_before_build(&dockerfile);
    let dockerignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap_or_default();
    for input in build_inputs() {
        assert!(
            copied.contains(&input) || copied.contains("."),
            "the Dockerfile's build stage does not COPY `{input}` before `cargo build` \
             (it copies {copied:?})"
        );
        assert!(
            !ignored(&dockerignore, &input),
            ".dockerignore excludes `{input}`, which the build reads"
        );
    }
}

#[test]
fn the_dockerfile_check_notices_a_missing_copy() {
    let dockerfile = read("Dockerfile");
    let without_static: String = dockerfile
        .lines()
        .filter(|l| !l.starts_with("COPY static"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!copied_before_build(&without_static).contains("static"));
    assert!(copied_before_build("FROM a\nCOPY . .\nRUN cargo build\n").contains("."));
    assert!(
        !copied_before_build("FROM a\nRUN cargo build\nCOPY static static\n").contains("static")
    );
    assert!(ignored("target/\n*.md\n", "README.md"));
    assert!(!ignored("target/\n*.md\ntests/data/\n", "tests"));
}

/// The demo's rollout: `examples/demo-worker-v2.json` is the demo's
/// `worker` with another command (a new fingerprint, so applying it rolls
/// out), the same HTTP health check and upgrade policy; the demo's
/// services have health checks in both of the demo's modes.
#[test]
fn the_demo_rollout_spec_changes_only_the_command() {
    use mesos_appliance::app::demo::sample_services;
    use mesos_appliance::scheduler::spec::health::HealthCheckKind;
    let v1 = parse_services_file(&format!("[{}]", read("examples/demo-worker.json")))
        .expect("valid v1")
        .remove(0);
    let v2 = parse_services_file(&format!("[{}]", read("examples/demo-worker-v2.json")))
        .expect("valid v2")
        .remove(0);
    assert_ne!(v1.fingerprint(), v2.fingerprint());
    assert_eq!(v1.health_check, v2.health_check);
    assert_eq!(v1.upgrade, v2.upgrade);
    for real in [false, true] {
        let services = sample_services(real);
        assert!(services.iter().all(|s| s.health_check.is_some()));
        let worker = services.iter().find(|s| s.name == "worker").unwrap();
        assert_eq!(worker, &v1, "the demo runs examples/demo-worker.json");
        assert_eq!(
            worker.health_check.as_ref().unwrap().kind,
            HealthCheckKind::Http
        );
    }
    let web = sample_services(false).remove(0);
    assert_eq!(web.health_check.unwrap().kind, HealthCheckKind::Http);
}
