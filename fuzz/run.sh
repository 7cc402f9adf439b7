#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 20) on its committed seed corpus,
# then prints one row per target: seconds, executions, crashes. Exits non-zero when a target
# crashed (a failed property is a panic, hence a crash); the reproducer is under
# fuzz/target/run/artifacts/TARGET/ (`cargo fuzz run TARGET FILE` replays it).
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). On a stable toolchain,
# RUSTC_BOOTSTRAP=1 lets rustc accept the -Z flags cargo-fuzz passes. FUZZ_SANITIZER=none
# builds without AddressSanitizer (faster; guard has no unsafe outside sys/).
# New inputs found during the run go to fuzz/target/run/corpus/, never to the committed seeds.
set -uo pipefail

secs=${1:-20}
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
sanitizer=(--sanitizer "${FUZZ_SANITIZER:-address}")
targets=(profile_parse normalize decide sockaddr audit_encode bpf_program dns_message)
out=target/run
mkdir -p "$out"
# profile_parse writes its profile under TMPDIR; keep it inside target/ and clean it up.
export TMPDIR="$PWD/$out/tmp"

start=$(date +%s)
if ! cargo fuzz build "${sanitizer[@]}" >"$out/build.log" 2>&1; then
    cat "$out/build.log" >&2
    echo "run.sh: cargo fuzz build failed" >&2
    exit 2
fi
echo "build: $(($(date +%s) - start)) s"

failed=0
rows=()
for t in "${targets[@]}"; do
    rm -rf "$out/artifacts/$t" "$TMPDIR"
    mkdir -p "$out/corpus/$t" "$out/artifacts/$t" "$TMPDIR"
    t0=$(date +%s)
    cargo fuzz run "${sanitizer[@]}" "$t" "$out/corpus/$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/$t/" >"$out/$t.log" 2>&1
    rc=$?
    took=$(($(date +%s) - t0))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
    crashes=$(find "$out/artifacts/$t" -type f | wc -l)
    if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes=1 # died without an artifact (e.g. the build or the harness failed)
    fi
    if [ "$crashes" -ne 0 ]; then
        failed=1
        echo "--- $t failed (exit $rc), last lines of $out/$t.log:" >&2
        tail -n 30 "$out/$t.log" >&2
    fi
    rows+=("$(printf '%-14s %8s %12s %8s' "$t" "$took" "${execs:-?}" "$crashes")")
done
rm -rf "$TMPDIR"

printf '%-14s %8s %12s %8s\n' target seconds executions crashes
printf '%s\n' "${rows[@]}"
exit "$failed"
