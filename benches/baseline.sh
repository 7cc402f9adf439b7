# shellcheck shell=bash
# Section 7 of benches/compare.sh (sourced by it with --baseline OLD_GUARD): the same guard
# measurements for OLD_GUARD ("before") and this build ("after"), alternated run by run, each
# build run first and second in every repetition, so both see the same machine at the same
# moment. Measured: start-up of `guard exec -- true`
# (started in turn, run by run), the judged calls of guard-callloop (median ns per call of REPS
# runs each), an exec (section 3's bash loop), the supervisor's system calls per judged unlinkat
# (strace -f -c), `rm -rf` of the 10,000-file tree and `guard rollback` of it, and the git
# session and shell edits of section 6. Uses
# compare.sh's GUARD, BASELINE, CALLLOOP, WORK, RAW, TREE, TREE_SUM, manifest, avail, log,
# CALLS, REPS, REPS_W, RUNS, and peers.sh's workload scripts.

BL_OPS=(unlink-missing open-write unlink-existing unlink-made create-new)
# Each repetition runs each build twice, first and second: a build run second came out 3-8%
# slower than the same build run first in hand checks (2026-12-06), which made one-order
# repetitions show differences neither build had.
BOTH_ORDERS="before after after before"
declare -A BL_BIN=([before]="$BASELINE" [after]="$GUARD")
BWS="$WORK/bl-ws"
BL_MD="$WORK/baseline.md"
: >"$RAW/bl.tsv"
bl_row() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RAW/bl.tsv"; }
log "before/after: $BASELINE against $GUARD"
export GUARD_STATE_DIR="$WORK/state-bl"
mkdir -p "$GUARD_STATE_DIR"

# The two builds' starts in turn, run by run, each first in every other round: in hyperfine's
# two runs in both orders (each build's runs in one block), a machine slower in the middle
# blocks made the build measured there look slower in both orders (2026-12-06: the new build
# 2.42 / 2.53 against 2.31 / 2.37 ms in the benchmark; minutes later, by hand on an ext4 image
# as the benchmark's, hyperfine in both orders had it faster: 2.5 / 2.4 against 2.6 / 2.6).
mkdir -p "$BWS"
BL_ALT_ROUNDS=${BL_ALT_ROUNDS:-${ALT_ROUNDS:-300}}
(cd "$BWS" && python3 "$ROOT/benches/alternate_runs.py" "$BL_ALT_ROUNDS" \
    "$RAW/bl-startup-alternated.json" \
    before "${BL_BIN[before]} exec -w $BWS -- true" \
    after "${BL_BIN[after]} exec -w $BWS -- true") >&2
for v in before after; do
    bl_row "start-up of \`guard exec -- true\`, ms (median of $BL_ALT_ROUNDS alternated)" "$v" \
        "$(jq -r --arg n "$v" '.[$n].median * 100 | round / 100' "$RAW/bl-startup-alternated.json")"
done
for ((r = 1; r <= REPS; r++)); do
    for op in "${BL_OPS[@]}"; do
        for v in $BOTH_ORDERS; do
            rm -rf "$BWS" && mkdir -p "$BWS" && cp "$CALLLOOP" "$BWS/guard-callloop"
            [[ $op != unlink-existing ]] || (cd "$BWS" && ./guard-callloop prepare "$CALLS")
            line=$(cd "$BWS" && "${BL_BIN[$v]}" exec -w "$BWS" -- ./guard-callloop "$op" "$CALLS" |
                grep "^$op $CALLS " | tail -n 1)
            printf '%s\t%s\t%s\n' "$op" "$v" "${line##* }" >>"$RAW/bl-calls.tsv"
        done
    done
done
for ((r = 1; r <= REPS; r++)); do
    for v in $BOTH_ORDERS; do
        rm -rf "$BWS" && mkdir -p "$BWS"
        t=$(now_ns)
        (cd "$BWS" && "${BL_BIN[$v]}" exec -w "$BWS" -- bash -c \
            "for i in \$(seq $EXEC_N); do /usr/bin/true; done")
        printf '%s\t%s\n' "$v" "$((($(now_ns) - t) / 1000 / EXEC_N))" >>"$RAW/bl-exec.tsv"
    done
done
for v in before after; do
    read -r med _ _ < <(awk -F'\t' -v v="$v" '$1==v {print $2}' "$RAW/bl-exec.tsv" | median3)
    bl_row "an exec under guard (bash loop of $EXEC_N /usr/bin/true), µs per exec (both orders)" "$v" "$med"
done
for op in "${BL_OPS[@]}"; do
    for v in before after; do
        read -r med _ _ < <(awk -F'\t' -v o="$op" -v v="$v" '$1==o && $2==v && $3 != "" {print $3}' \
            "$RAW/bl-calls.tsv" | median3)
        bl_row "$op under guard, µs per call (median of $((2 * REPS)) x $CALLS, both orders)" "$v" \
            "$(awk -v x="$med" 'BEGIN { printf "%.2f", x / 1000 }')"
    done
done
if avail strace; then
    for v in before after; do
        rm -rf "$BWS" && mkdir -p "$BWS" && cp "$CALLLOOP" "$BWS/guard-callloop"
        (cd "$BWS" && strace -f -c -o "$RAW/bl-strace-$v.txt" "${BL_BIN[$v]}" exec -w "$BWS" -- \
            ./guard-callloop unlink-missing 2000 >/dev/null)
        # guard-callloop makes 2,100 judged calls (with its warm-up); its own unlinkat are in
        # the count too, so one per judged call is the caller's, the rest the supervisor's.
        bl_row "system calls per judged unlinkat (strace -f -c, all threads)" "$v" \
            "$(awk '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { n += $4 } END { printf "%.1f", n / 2100 }' \
                "$RAW/bl-strace-$v.txt")"
    done
fi
for ((r = 1; r <= REPS_W; r++)); do
    for v in $BOTH_ORDERS; do
        rm -rf "$BWS" && mkdir -p "$BWS" && cp -a "$TREE" "$BWS/tree" && sync
        t=$(now_ns)
        (cd "$BWS" && "${BL_BIN[$v]}" exec -w "$BWS" -- rm -rf tree)
        printf 'rm\t%s\t%s\n' "$v" "$((($(now_ns) - t) / 1000000))" >>"$RAW/bl-rm.tsv"
        sync
        t=$(now_ns)
        "${BL_BIN[$v]}" rollback >/dev/null
        printf 'rollback\t%s\t%s\n' "$v" "$((($(now_ns) - t) / 1000000))" >>"$RAW/bl-rm.tsv"
        [[ $(manifest "$BWS/tree") == "$TREE_SUM" ]] || log "  $v: the rollback did not restore the tree"
        for w in git shell; do
            d="$WORK/bl-$w" && rm -rf "$d" && cp -a "$WL/$w-template" "$d" && cp "$WL/$w.sh" "$d/.bench.sh" && sync
            t=$(now_ns)
            (cd "$d" && "${BL_BIN[$v]}" exec -w "$d" -- bash .bench.sh >/dev/null)
            printf '%s\t%s\t%s\n' "$w" "$v" "$((($(now_ns) - t) / 1000000))" >>"$RAW/bl-rm.tsv"
        done
    done
done
rm -rf "$BWS" "$WORK/bl-git" "$WORK/bl-shell"
declare -A BL_WHAT=([rm]="\`guard exec -- rm -rf\` of the 10,000-file tree, ms"
    [rollback]="\`guard rollback\` of that run, ms" [git]="git session on the 2,000-file repository, ms"
    [shell]="shell edits (sed -i, cp, mv of 500 files; rm), ms")
for k in rm rollback git shell; do
    for v in before after; do
        read -r med _ _ < <(awk -F'\t' -v k="$k" -v v="$v" '$1==k && $2==v {print $3}' "$RAW/bl-rm.tsv" | median3)
        bl_row "${BL_WHAT[$k]} (median of $((2 * REPS_W)), both orders)" "$v" "$med"
    done
done
{
    echo "| measurement | before | after | after / before |"
    echo "|---|---:|---:|---:|"
    awk -F'\t' '{ key[NR] = $1; val[$1, $2] = $3; if (!seen[$1]++) order[++n] = $1 }
        END { for (i = 1; i <= n; i++) { k = order[i]; b = val[k, "before"]; a = val[k, "after"]
            printf "| %s | %s | %s | %s |\n", k, b, a, (b > 0 ? sprintf("%.2f", a / b) : "-") } }' "$RAW/bl.tsv"
} >"$BL_MD"
unset GUARD_STATE_DIR
