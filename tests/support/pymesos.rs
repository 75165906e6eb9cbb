//! pymesos (PyPI, a pure-Python v1 scheduler library) for the tests and the
//! benchmarks that run a scheduler nobody here wrote.
//!
//! Needs Debian's `python3-venv` and `python3-http-parser` (installed by
//! `.ci/run`) and PyPI for `pymesos`, `six` and `addict`: `pip install
//! pymesos` fails on Python 3.11 (its `http-parser` dependency no longer
//! compiles), so the venv is made by Debian's own interpreter with system
//! site packages (which hold the working `http_parser`) and pymesos is
//! installed without dependency resolution
//! (`docs/testbed.md#an-independent-client-pymesos`). The venv is built
//! once under the Cargo target dir and reused.

use std::path::PathBuf;
use std::process::Command;

/// The pymesos version the tests and benchmarks run (checked against a real
/// Mesos 1.12 master: subscribe, offers, launch, updates, reconcile, teardown).
pub const VERSION: &str = "0.3.15";

/// Creates (once) a venv with pymesos and returns its `python`.
///
/// Panics (this is test support) when `/usr/bin/python3` or pip fails; the
/// message says which.
pub fn python() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pymesos-venv");
    let python = venv.join("bin/python");
    let ready = venv.join(".ready");
    if ready.exists() {
        return python;
    }
    let status = Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--system-site-packages"])
        .arg(&venv)
        .status()
        .expect("/usr/bin/python3 runs (Debian python3 with python3-venv)");
    assert!(status.success(), "venv creation failed");
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--no-deps"])
        .arg(format!("pymesos=={VERSION}"))
        .args(["six", "addict"])
        .status()
        .expect("pip runs");
    assert!(status.success(), "pip install pymesos failed");
    std::fs::write(&ready, b"").expect("mark the venv ready");
    python
}
