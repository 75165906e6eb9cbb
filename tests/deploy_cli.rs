//! The binaries at their command lines: `mesos-testbed` refuses bad flag
//! values with exit code 2 and names the address or directory it cannot use;
//! the executor answers `--help` and `--version`.

mod support;

use std::process::{Command, Output, Stdio};

const TESTBED: &str = env!("CARGO_BIN_EXE_mesos-testbed");
const EXECUTOR: &str = env!("CARGO_BIN_EXE_mesos-appliance-executor");

/// Runs `program args…` to completion (it must not need more than a few
/// seconds), output captured.
fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run the binary")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_exit(output: &Output, code: i32, args: &[&str], names: &str) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {text}");
    assert!(text.contains(names), "{args:?}: {names:?} not in {text}");
}

#[test]
fn the_testbed_refuses_bad_flags_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["--zk", "nope"], "--zk"),
        (
            &[
                "--status-update-retry-min",
                "0s",
                "--status-update-retry-max",
                "0s",
            ],
            "--status-update-retry-min",
        ),
        (
            &[
                "--status-update-retry-min",
                "10s",
                "--status-update-retry-max",
                "1s",
            ],
            "--status-update-retry-max",
        ),
        (&["--allocation-interval", "0s"], "--allocation-interval"),
    ];
    for (args, names) in cases {
        assert_exit(
            &run(TESTBED, &[&["--port", "0"], *args].concat()),
            2,
            args,
            names,
        );
    }
}

#[test]
fn testbed_start_failures_name_the_address_or_the_directory() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let args = ["--port", &port];
    assert_exit(
        &run(TESTBED, &args),
        1,
        &args,
        &format!("cannot listen on 127.0.0.1:{port}"),
    );
    let args = [
        "--port",
        "0",
        "--run-executors",
        EXECUTOR,
        "--work-dir",
        "/proc/nope",
    ];
    let output = run(TESTBED, &args);
    assert_exit(&output, 1, &args, "/proc/nope");
    assert!(
        !stderr(&output).contains('\u{1b}'),
        "colour codes: {}",
        stderr(&output)
    );
}

#[test]
fn the_executor_answers_help_and_version() {
    let help = run(EXECUTOR, &["--help"]);
    assert_eq!(help.status.code(), Some(0), "{}", stderr(&help));
    let text = String::from_utf8_lossy(&help.stdout);
    // Every variable the executor reads is documented.
    let config = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/executor/config.rs"),
    )
    .unwrap();
    let config = config.split("#[cfg(test)]").next().unwrap();
    let read = regex::Regex::new(r#"lookup\("([A-Z_]+)"\)|"(MESOS_[A-Z_]+)""#).unwrap();
    let mut names = 0;
    for found in read.captures_iter(config) {
        let name = found.get(1).or(found.get(2)).unwrap().as_str();
        assert!(text.contains(name), "{name} missing from --help:\n{text}");
        names += 1;
    }
    assert!(names >= 10, "only {names} variables found in config.rs");
    let version = run(EXECUTOR, &["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("mesos-appliance-executor {}", env!("CARGO_PKG_VERSION"))
    );
    assert_exit(&run(EXECUTOR, &["--bogus"]), 2, &["--bogus"], "--bogus");
    // Without the agent's environment: the C++ library's message, exit 1.
    let bare = Command::new(EXECUTOR).env_clear().output().unwrap();
    assert_exit(&bare, 1, &[], "Expecting 'MESOS_FRAMEWORK_ID'");
}
