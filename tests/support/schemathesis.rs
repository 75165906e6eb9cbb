//! schemathesis (PyPI), the schema-driven API tester of `web_openapi`: a
//! venv under the Cargo target dir, made once by Debian's `python3` (with
//! `python3-venv`, installed by `.ci/run`), with the pinned version.

use std::path::PathBuf;
use std::process::Command;

/// The schemathesis version the run is pinned to.
pub const VERSION: &str = "4.32.5";

/// Creates (once) the venv and returns its `schemathesis` executable.
///
/// Panics (this is test support) when `/usr/bin/python3` or pip fails; the
/// message says which. Never skipped: the run is part of `cargo test`.
pub fn binary() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("schemathesis-venv");
    let binary = venv.join("bin/schemathesis");
    let ready = venv.join(format!(".ready-{VERSION}"));
    if ready.exists() {
        return binary;
    }
    let status = Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .status()
        .expect("/usr/bin/python3 runs (Debian python3 with python3-venv)");
    assert!(status.success(), "venv creation failed");
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("schemathesis=={VERSION}"))
        .status()
        .expect("pip runs");
    assert!(
        status.success(),
        "pip install schemathesis=={VERSION} failed"
    );
    std::fs::write(&ready, b"").expect("mark the venv ready");
    binary
}
