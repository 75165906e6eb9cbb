//! Compiles our own Mesos `.proto` files (under `proto/`) with protox (pure
//! Rust, no `protoc` binary) and prost-build. The encoded descriptor set is kept
//! in `$OUT_DIR/mesos_descriptor.bin` for the JSON mapping (`mesos::json`).
//! On glibc it also sets how `mesos-appliance` is linked, to keep less of
//! it resident: packed relocations and the hot functions first.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    pack_relative_relocations();
    hot_code_first();
    let files = [
        "proto/mesos/v1/mesos.proto",
        "proto/mesos/v1/scheduler/scheduler.proto",
        "proto/mesos/v1/executor/executor.proto",
        "proto/mesos/v1/master/master.proto",
        "proto/mesos/v1/maintenance/maintenance.proto",
    ];
    let fds = protox::compile(files, ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("mesos_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    prost_build::Config::new()
        .enable_type_names()
        .compile_fds(fds)?;
    Ok(())
}

/// Links `mesos-appliance` on glibc with packed relative relocations
/// (`-z pack-relative-relocs`, the `DT_RELR` format of glibc 2.36): the
/// position-independent executable's 1.6 MiB of `.rela.dyn`, which the
/// dynamic loader reads whole at every start, becomes a few KiB of
/// `.relr.dyn`, so each replica keeps about 1.7 MiB less resident
/// (docs/benchmarks.md, "Hot code first and packed relocations"). The
/// binary then needs glibc 2.36 or newer (`GLIBC_ABI_DT_RELR`; Debian 12,
/// Ubuntu 22.10), so it is done only when the glibc this builds on (a
/// native build) is that new: an older loader would not apply the packed
/// relocations. Only this binary: `mesos-appliance-executor` runs on the
/// agents, whose glibc may be older, and musl builds (the Docker image)
/// are left as they are.
fn pack_relative_relocations() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let native = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
    if os == "linux" && env == "gnu" && native && glibc_version() >= Some((2, 36)) {
        println!("cargo:rustc-link-arg-bin=mesos-appliance=-Wl,-z,pack-relative-relocs");
    }
}

/// The version of the glibc this builds on (`getconf GNU_LIBC_VERSION`:
/// `glibc 2.36` → (2, 36)); `None` if not glibc or unknown.
fn glibc_version() -> Option<(u32, u32)> {
    let out = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let (major, minor) = text.trim().strip_prefix("glibc ")?.split_once('.')?;
    let minor = minor.split('.').next()?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Links the functions a replica runs (`link/hot-symbols.txt`, about 4 MiB
/// of the 17 MiB of `.text`, listed by `benches/memory.py --callgrind`)
/// next to each other at the start of `mesos-appliance`'s code. The
/// kernel maps a binary's code 64 KiB at a time around each page touched
/// (fault-around), so hot functions spread among cold ones made 14 MiB of
/// code resident; grouped, they make about half that (docs/benchmarks.md,
/// "Hot code first"). Only the order of functions changes, not the code.
/// The file's names that no longer exist are skipped, and functions not in
/// it keep the compiler's order after the listed ones.
///
/// lld's `--symbol-ordering-file` is passed only where lld links: on
/// x86_64 Linux with glibc, rustc 1.90 or newer links with its own lld
/// unless another linker is configured (`RUSTC_LINKER`, or `-C linker`/
/// `-C link-arg` in the flags). GNU ld has no such option.
fn hot_code_first() {
    const FILE: &str = "link/hot-symbols.txt";
    println!("cargo:rerun-if-changed={FILE}");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let own_lld = target == "x86_64-unknown-linux-gnu"
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("fuse-ld")
        && rustc_minor().is_some_and(|minor| minor >= 90);
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let path = std::path::Path::new(&dir).join(FILE);
    if own_lld && path.exists() {
        println!(
            "cargo:rustc-link-arg-bin=mesos-appliance=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        println!("cargo:rustc-link-arg-bin=mesos-appliance=-Wl,--no-warn-symbol-ordering");
    }
}

/// The minor version of the compiler building this (`rustc 1.95.0 …` → 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc).arg("-V").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
