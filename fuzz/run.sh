#!/usr/bin/env bash
# Builds the fuzz targets on the stable toolchain and runs them one after
# another, each for SECONDS_EACH seconds (default 600), niced; prints one
# summary line per target (executions, coverage, features) and keeps the
# logs in fuzz/logs/ (docs/fuzzing.md).
#
#   fuzz/run.sh                              # every target, 10 minutes each
#   SECONDS_EACH=60 fuzz/run.sh files_read   # one, a minute
#   fuzz/run.sh --cmin recordio              # minimise a corpus in place
#
# The build is a plain `cargo build` into the repository's target/ (its
# dependencies are already built there) with `rustc-sancov` adding
# libFuzzer's coverage instrumentation to the library and the targets.
# `cargo fuzz run <target>` works too (with RUSTC_BOOTSTRAP=1), adding
# AddressSanitizer, at the price of building every dependency again.
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="$PWD/../target"
RUSTC_WRAPPER="$PWD/rustc-sancov" cargo build --bins
bin="$CARGO_TARGET_DIR/debug"
all=(recordio scheduler_event executor_event service_spec web_request files_read marathon_import)
mkdir -p logs
cmin=false
if [ "${1:-}" = --cmin ]; then cmin=true; shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
if $cmin; then
  for t in "${targets[@]}"; do
    rm -rf "corpus/$t.min" && mkdir "corpus/$t.min"
    "$bin/$t" -merge=1 "corpus/$t.min" "corpus/$t" >"logs/$t.cmin.log" 2>&1
    rm -rf "corpus/$t" && mv "corpus/$t.min" "corpus/$t"
    echo "$t: $(ls "corpus/$t" | wc -l) files, $(du -sb "corpus/$t" | cut -f1) bytes"
  done
  exit 0
fi
each=${SECONDS_EACH:-600}
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  start=$(date -u +%FT%TZ)
  nice -n 15 "$bin/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" \
    -max_total_time="$each" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 \
    >"logs/$t.log" 2>&1 || echo "$t: CRASH (see fuzz/logs/$t.log and fuzz/artifacts/$t/)"
  last=$(grep -E '^#[0-9]+' "logs/$t.log" | tail -1 || true)
  execs=$(awk '/^stat::number_of_executed_units/ {print $2}' "logs/$t.log")
  echo "$t: from $start, ${each}s, ${execs:-?} executions; last: $last"
done
