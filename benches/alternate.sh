#!/usr/bin/env bash
# Compare guard builds by hand, alternated run by run so that every build sees the machine in
# the same state: the figures in the issue notes' "by hand" tables come from this script.
#
#   bash benches/alternate.sh calls OP ROUNDS BIN...   guard-callloop OP 20000 under each BIN
#   bash benches/alternate.sh startup ROUNDS BIN...    `BIN exec -w WS -- true`, wall clock
#
# BIN is a guard binary, or `bare` (calls only: the loop without guard). Each round runs every
# BIN once, in the order given; the script prints, per BIN, the median and the minimum of the
# rounds (ns per call, or ms per start). Every guard run gets a fresh, empty state directory,
# so no run prunes an older run's store while it is being measured (an `rm -rf` of 20,000
# files in the background of a 2-vCPU machine moves a per-call figure by a microsecond).
# Run it with nothing else running; tests never run it (timing does not belong in
# `cargo test`).
#
# Two copies of the same binary, alternated, give the noise floor: on this project's machine
# start-up medians of identical copies differed by up to 0.3 ms in one run of 300 rounds.
set -euo pipefail

die() { echo "alternate.sh: $*" >&2; exit 2; }
[[ $# -ge 3 ]] || die "usage: alternate.sh calls OP ROUNDS BIN... | startup ROUNDS BIN..."
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOOP="$ROOT/target/release/guard-callloop"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/guard-alternate.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
WS="$WORK/ws"
STATE="$WORK/state"
mkdir -p "$WS"
CALLS=20000

kind=$1
shift
case $kind in
calls)
    op=$1 rounds=$2
    shift 2
    case $op in
    getpid | open-read | unlink-missing | open-write | unlink-existing | unlink-made | create-new) ;;
    *) die "unknown call '$op' (see tests/helpers/src/bin/guard-callloop.rs)" ;;
    esac
    [[ -x $LOOP ]] || die "$LOOP is missing: cargo build --release --locked first"
    cp "$LOOP" "$WS/guard-callloop"
    ;;
startup)
    rounds=$1
    shift
    ;;
*) die "unknown measurement '$kind' (calls or startup)" ;;
esac
for b in "$@"; do
    [[ $b == bare || -x $b ]] || die "$b is not an executable"
done

now_ns() { date +%s%N; }
fresh_state() { rm -rf "$STATE" && mkdir -p "$STATE"; }

one_call_run() { # BIN: prints ns per call
    local b=$1 line
    rm -rf "$WS"/guard-callloop-[0-9]* "$WS/guard-callloop-files"
    if [[ $op == unlink-existing ]]; then
        (cd "$WS" && ./guard-callloop prepare "$CALLS" >/dev/null) && sync
    fi
    fresh_state
    if [[ $b == bare ]]; then
        line=$(cd "$WS" && ./guard-callloop "$op" "$CALLS")
    else
        line=$(cd "$WS" && GUARD_STATE_DIR="$STATE" "$b" exec -w "$WS" -- ./guard-callloop "$op" "$CALLS")
    fi
    echo "${line##* }"
}

one_start() { # BIN: prints ms for one `exec -- true`
    local b=$1 t
    fresh_state
    t=$(now_ns)
    GUARD_STATE_DIR="$STATE" "$b" exec -w "$WS" -- true
    echo "$(($(now_ns) - t))" | awk '{ printf "%.3f\n", $1 / 1e6 }'
}

bins=("$@")
for ((r = 0; r < rounds; r++)); do
    for i in "${!bins[@]}"; do
        b=${bins[$i]}
        case $kind in
        calls) v=$(one_call_run "$b") ;;
        startup) v=$(one_start "$b") ;;
        esac
        # Keyed by position, so two copies of one binary stay apart.
        printf '%s\t%s\t%s\n' "$i" "$b" "$v"
    done
done | python3 -c '
import collections, statistics, sys
rows = collections.OrderedDict()
for line in sys.stdin:
    i, b, v = line.rstrip("\n").split("\t")
    rows.setdefault((int(i), b), []).append(float(v))
unit = sys.argv[1]
digits = 0 if unit == "ns" else 3
for (i, b), vs in rows.items():
    med, low = statistics.median(vs), min(vs)
    print(f"{b}\tmedian {med:.{digits}f} {unit}\tmin {low:.{digits}f}\truns {len(vs)}")
' "$([[ $kind == calls ]] && echo ns || echo ms)"
