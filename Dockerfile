# mesos-appliance, mesos-appliance-executor and mesos-testbed in a small image.
#
# Stage 1 builds static (musl) binaries with the release profile — the same
# `cargo build --release` as README. Static, because the Mesos fetcher
# downloads mesos-appliance-executor from the appliance and runs it inside
# whatever the agent runs on (the mesosphere/mesos-slave image is Ubuntu,
# with an older glibc than Debian 12).
# Stage 2 is distroless "static": no shell, no libc, CA certificates and a
# `nonroot` user only.
#
#   docker build -t mesos-appliance:local .
#   docker run --rm mesos-appliance:local --help

FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto proto
# The hot functions' link order of glibc builds (build.rs; unused for musl).
COPY link link
COPY benches benches
COPY src src
# Read at compile time: askama templates, the dashboard's CSS/JS and the
# demo's worker spec (examples/demo-worker.json)
# (include_str!). tests/deploy_files.rs checks this list against the sources.
COPY templates templates
COPY static static
COPY examples examples
RUN target="$(uname -m)-unknown-linux-musl" \
 && cargo build --release --locked --target "$target" \
      --bin mesos-appliance --bin mesos-appliance-executor --bin mesos-testbed \
 && mkdir /out \
 && cp "target/$target/release/mesos-appliance" \
       "target/$target/release/mesos-appliance-executor" \
       "target/$target/release/mesos-testbed" /out/ \
 && strip /out/*

FROM gcr.io/distroless/static-debian12:nonroot
# The appliance serves the executor binary that sits next to it
# (GET /executor/<version>/mesos-appliance-executor).
COPY --from=build /out/ /usr/local/bin/
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mesos-appliance"]
