#!/bin/sh
# Regenerate docs/evaluation.md: run the RedCode-Exec cases bare and under guard's `agent`
# profile, each in a throwaway root, then the benign workloads, and write the report.
#
#   sudo eval/redcode/run.sh [--sample N] [--jobs N]
#
# Needs root (namespaces, overlay mounts), /usr/bin/python3, and the RedCode-Exec data in
# $REDCODE_DIR (default ../shared/external/redcode, relative to the repository). The data is
# read in place, never copied into the repository. Nothing is sent beyond loopback.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
data=${REDCODE_DIR:-$repo/../shared/external/redcode}
# a worktree one level further down finds the same shared directory
[ -n "${REDCODE_DIR:-}" ] || [ -d "$data" ] || data=$repo/../../shared/external/redcode
sample=0
jobs=2
while [ $# -gt 0 ]; do
    case $1 in
        --sample) sample=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        *) echo "usage: $0 [--sample N] [--jobs N]" >&2; exit 2 ;;
    esac
done
[ -d "$data/dataset" ] || { echo "run.sh: no RedCode-Exec data in $data (set REDCODE_DIR)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (namespaces and overlay mounts)" >&2; exit 1; }

cd "$repo"
cargo build --release --quiet
guard=$repo/target/release/guard
out=$repo/target/redcode
mkdir -p "$out"
rm -f "$out"/results-*.jsonl "$out/benign.jsonl"
# The system interpreter: its standard library stays visible inside the throwaway root.
py="/usr/bin/python3 -I -S $repo/eval/redcode/harness.py"

start=$(date +%s)
pids=
i=0
while [ $i -lt "$jobs" ]; do
    $py run --data "$data" --guard "$guard" --sample "$sample" --shard "$i/$jobs" \
        --out "$out/results-$i.jsonl" &
    pids="$pids $!"
    i=$((i + 1))
done
for pid in $pids; do wait "$pid"; done
$py benign --data "$data" --guard "$guard" --out "$out/benign.jsonl"
seconds=$(( $(date +%s) - start ))
$py report --data "$data" --results "$out"/results-*.jsonl --benign "$out/benign.jsonl" \
    --sample "$sample" --seconds "$seconds" --doc "$repo/docs/evaluation.md"
echo "wrote docs/evaluation.md ($seconds s)"
