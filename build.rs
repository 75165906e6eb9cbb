//! Compiles our own Mesos `.proto` files (under `proto/`) with protox (pure
//! Rust, no `protoc` binary) and prost-build. The encoded descriptor set is kept
//! in `$OUT_DIR/mesos_descriptor.bin` for the JSON mapping (`mesos::json`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
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
