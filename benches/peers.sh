# shellcheck shell=bash
# Section 6 of benches/compare.sh (sourced by it, not run alone): guard against the tools a user
# would pick instead, on the same workloads, in one run. Each tool confines the command to
# writing its workspace:
#
# - bare: no confinement;
# - guard: `guard exec -w WS` (the `agent` profile; transactional: every change journaled);
# - bwrap: a read-only bind of / with the workspace bound writable (no undo);
# - sandlock: `sandlock run -r / -w WS` (Landlock + seccomp; no undo);
# - sandlock-cow: the same with `--workdir WS`: a copy-on-write branch of the workspace,
#   committed at exit (`--on-exit abort` discards it: sandlock's undo);
# - nono: `nono run --allow WS` (Landlock; `--rollback` snapshots the workspace first).
#
# Workloads: start-up is in section 1; here, 20,000 calls of guard-callloop (the judged calls
# of section 3), `rm -rf` of the 10,000-file tree and its undo, and real work: a git session on
# a 2,000-file repository, shell edits of 500 files, `npm install` of local packages (offline),
# and CPython's file tests. Every timed run starts on a fresh copy of its workspace (not timed)
# and repetitions are interleaved across tools. Uses compare.sh's GUARD, CALLLOOP, WORK, RAW,
# TREE, TREE_SUM, manifest, avail, log, CALLS, REPS, REPS_W.

PEERS=(bare guard)
avail bwrap && PEERS+=(bwrap)
avail sandlock && PEERS+=(sandlock sandlock-cow)
avail nono && PEERS+=(nono)
declare -A PEER_TITLE=([bare]="bare" [guard]="guard" [bwrap]="bwrap" [sandlock]="sandlock"
    [sandlock-cow]="sandlock --workdir (COW)" [nono]="nono")

under() {   # under TOOL DIR CMD...: CMD run in DIR, confined by TOOL to writing DIR
    local tool=$1 dir=$2
    shift 2
    case $tool in
    bare) (cd "$dir" && "$@") ;;
    guard) (cd "$dir" && "$GUARD" exec -w "$dir" -- "$@") ;;
    bwrap) (cd "$dir" && bwrap --ro-bind / / --dev /dev --proc /proc --bind "$dir" "$dir" \
        --chdir "$dir" -- "$@") ;;
    # /dev/null is writable bare, under bwrap's --dev and under guard's base profile; git opens
    # it read-write.
    sandlock) (cd "$dir" && sandlock run -r / -w "$dir" -w /dev/null -- "$@") ;;
    sandlock-cow) (cd "$dir" && sandlock run -r / -w "$dir" -w /dev/null --workdir "$dir" -- "$@") ;;
    # nono's default read set leaves out /usr/local, where this machine's git and its helper
    # programs live (git gc fails to exec them otherwise).
    nono) (cd "$dir" && nono run --silent --allow "$dir" -r /usr/local -- "$@") ;;
    esac
}
now_ns() { date +%s%N; }
median3() {   # median3: median, min and max of the numbers on stdin
    sort -g | awk '{v[NR]=$1} END { if (!NR) { print "- - -"; exit }
        med = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; print med, v[1], v[NR] }'
}

# --- 6a. judged calls ------------------------------------------------------------------------
PEER_OPS=(unlink-missing open-write create-new)
PWS="$WORK/peer-ws"
: >"$RAW/peer-calls.tsv"
: >"$RAW/peer-fail.txt"
log "peers: $REPS x $CALLS calls of ${PEER_OPS[*]} under ${PEERS[*]}"
for ((r = 1; r <= REPS; r++)); do
    for op in "${PEER_OPS[@]}"; do
        for tool in "${PEERS[@]}"; do
            rm -rf "$PWS" && mkdir -p "$PWS" && cp "$CALLLOOP" "$PWS/guard-callloop"
            line=$(under "$tool" "$PWS" ./guard-callloop "$op" "$CALLS" 2>"$RAW/peer-err.txt" |
                grep "^$op $CALLS " | tail -n 1) || true
            if [[ -z $line ]]; then
                msg="guard-callloop $op under ${PEER_TITLE[$tool]} gave no result: $(head -n 1 "$RAW/peer-err.txt" | head -c 200 | tr -d '`|')"
                log "  $msg"
                grep -qxF -- "- $msg" "$RAW/peer-fail.txt" 2>/dev/null || echo "- $msg" >>"$RAW/peer-fail.txt"
                continue
            fi
            printf '%s\t%s\t%s\n' "$op" "$tool" "${line##* }" >>"$RAW/peer-calls.tsv"
        done
    done
done
PEER_CALLS_MD="$WORK/peer-calls.md"
{
    printf '| call (median µs per call, %s runs of %s) |' "$REPS" "$CALLS"
    for tool in "${PEERS[@]}"; do printf ' %s |' "${PEER_TITLE[$tool]}"; done
    printf '\n|---|'
    for _ in "${PEERS[@]}"; do printf -- '---:|'; done
    printf '\n'
    for op in "${PEER_OPS[@]}"; do
        printf '| %s |' "$op"
        for tool in "${PEERS[@]}"; do
            read -r med _ _ < <(awk -F'\t' -v o="$op" -v t="$tool" '$1==o && $2==t {print $3}' \
                "$RAW/peer-calls.tsv" | median3)
            [[ $med == - ]] && { printf ' failed |'; continue; }
            printf ' %s |' "$(awk -v x="$med" 'BEGIN { printf "%.2f", x / 1000 }')"
        done
        printf '\n'
    done
    if [[ -s $RAW/peer-fail.txt ]]; then
        echo
        echo "Failed cells (guard-callloop exits 1 when a call does not behave as it does bare):"
        echo
        cat "$RAW/peer-fail.txt"
    fi
} >"$PEER_CALLS_MD"

# --- 6b. rm -rf of the tree, and its undo ----------------------------------------------------
# guard: the run, then `guard rollback`; sandlock-cow: one run with `--on-exit abort` (the
# discarded branch is the undo); nono: `--rollback`, then its restore; bare, bwrap, sandlock:
# the deletion alone (they have no undo).
nono_restore() {   # nono_restore: undo the newest nono rollback session, non-interactively
    nono rollback restore --latest --yes >/dev/null 2>&1 ||
        nono rollback restore --yes >/dev/null 2>&1
}
: >"$RAW/peer-rm.tsv"
PRM="$WORK/peer-rm"
log "peers: rm -rf of the tree and its undo, $REPS_W repetitions"
for ((r = 1; r <= REPS_W; r++)); do
    for tool in "${PEERS[@]}"; do
        rm -rf "$PRM" && mkdir -p "$PRM" && cp -a "$TREE" "$PRM/tree" && sync
        t=$(now_ns) undo_ms=- ok=- rc=0
        case $tool in
        guard) under guard "$PRM" rm -rf tree 2>"$RAW/peer-err.txt" || rc=$? ;;
        sandlock-cow) (cd "$PRM" && sandlock run -r / -w "$PRM" --workdir "$PRM" --on-exit abort -- \
            rm -rf tree) 2>"$RAW/peer-err.txt" || rc=$? ;;
        nono) (cd "$PRM" && nono run --silent --rollback --allow "$PRM" -- rm -rf tree) </dev/null \
            2>"$RAW/peer-err.txt" || rc=$? ;;
        *) under "$tool" "$PRM" rm -rf tree 2>"$RAW/peer-err.txt" || rc=$? ;;
        esac
        rm_ms=$((($(now_ns) - t) / 1000000))
        if ((rc != 0)); then
            log "  rm -rf under $tool failed (exit $rc): $(head -n 2 "$RAW/peer-err.txt" | tr '\n' ' ')"
            printf '%s\tfailed\t-\t-\n' "$tool" >>"$RAW/peer-rm.tsv"
            continue
        fi
        t=$(now_ns)
        case $tool in
        guard) "$GUARD" rollback >/dev/null && undo_ms=$((($(now_ns) - t) / 1000000)) ;;
        sandlock-cow) undo_ms=0 ;;
        nono) (cd "$PRM" && nono_restore) && undo_ms=$((($(now_ns) - t) / 1000000)) ;;
        esac
        if [[ $tool == guard || $tool == sandlock-cow || $tool == nono ]]; then
            ok=no
            [[ -d $PRM/tree && $(manifest "$PRM/tree") == "$TREE_SUM" ]] && ok=yes
        fi
        printf '%s\t%s\t%s\t%s\n' "$tool" "$rm_ms" "$undo_ms" "$ok" >>"$RAW/peer-rm.tsv"
    done
done
rm -rf "$PRM"
PEER_RM_MD="$WORK/peer-rm.md"
{
    echo "| tool | rm -rf ms (median [min–max]) | undo ms (median [min–max]) | tree restored exactly |"
    echo "|---|---:|---:|---|"
    for tool in "${PEERS[@]}"; do
        read -r m lo hi < <(awk -F'\t' -v t="$tool" '$1==t && $2 != "failed" {print $2}' \
            "$RAW/peer-rm.tsv" | median3)
        if [[ $m == - ]]; then
            echo "| ${PEER_TITLE[$tool]} | failed (the deletion itself did not complete) | - | - |"
            continue
        fi
        read -r um ulo uhi < <(awk -F'\t' -v t="$tool" '$1==t && $3 != "-" {print $3}' \
            "$RAW/peer-rm.tsv" | median3)
        oks=$(awk -F'\t' -v t="$tool" '$1==t {print $4}' "$RAW/peer-rm.tsv" | sort -u | tr '\n' ' ')
        undo="$um [$ulo–$uhi]"
        case $tool in
        sandlock-cow) undo="0 (the branch is discarded at exit, inside the run)" ;;
        bare | bwrap | sandlock) undo="no undo"; oks="-" ;;
        esac
        [[ $um == - && $tool == nono ]] && undo="restore failed"
        echo "| ${PEER_TITLE[$tool]} | $m [$lo–$hi] | $undo | $oks |"
    done
} >"$PEER_RM_MD"

# --- 6c. real workloads ----------------------------------------------------------------------
# Each workload: a template workspace made once, a script run inside the copy. TMPDIR, HOME's
# caches and git's configuration point into the workspace, so every tool runs the same work.
WL="$WORK/workloads"
mkdir -p "$WL"
python3 - "$WL/git-template" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(7)
for a in range(20):
    d = os.path.join(root, "src", f"m{a:02}")
    os.makedirs(d)
    for b in range(100):
        with open(os.path.join(d, f"f{b:03}.txt"), "w") as f:
            f.write("".join(f"line {i} {rng.random()}\n" for i in range(rng.randrange(5, 60))))
PY
cat >"$WL/git.sh" <<'SH'
set -e
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 TMPDIR="$PWD/.tmp"
mkdir -p "$TMPDIR"
g() { git -c user.name=bench -c user.email=bench@localhost -c init.defaultBranch=main "$@"; }
g init -q && g add -A && g commit -q -m init
g checkout -q -b topic
for f in src/m0[0-4]/f0[0-4]*.txt; do echo topic >>"$f"; done
g commit -q -am "topic edits"
g checkout -q main
for f in src/m1[0-4]/f0[0-4]*.txt; do echo main >>"$f"; done
g commit -q -am "main edits"
g checkout -q topic && g rebase -q main
g gc -q
SH
cp -a "$WL/git-template" "$WL/shell-template"
cat >"$WL/shell.sh" <<'SH'
set -e
export TMPDIR="$PWD/.tmp"
mkdir -p "$TMPDIR" out
for f in src/m0[0-4]/*.txt; do
    sed -i 's/line 1 /LINE 1 /' "$f"
    cp "$f" "$f.bak"
    mv "$f.bak" "out/$(basename "$(dirname "$f")")-$(basename "$f")"
done
rm -r out
find src -name '*.txt' | head -n 100 | xargs rm
SH
# npm: a package depending on three local packages (copied in, not linked), offline.
mkdir -p "$WL/npm-template"
python3 - "$WL/npm-template" <<'PY'
import json, os, sys
root = sys.argv[1]
deps = {}
for p in range(3):
    name = f"local-dep-{p}"
    d = os.path.join(root, "pkgs", name)
    os.makedirs(os.path.join(d, "lib"))
    with open(os.path.join(d, "package.json"), "w") as f:
        json.dump({"name": name, "version": "1.0.0", "main": "lib/f000.js"}, f)
    for i in range(200):
        with open(os.path.join(d, "lib", f"f{i:03}.js"), "w") as f:
            f.write(f"module.exports = {i};\n")
    deps[name] = f"file:./pkgs/{name}"
with open(os.path.join(root, "package.json"), "w") as f:
    json.dump({"name": "bench", "version": "1.0.0", "dependencies": deps}, f)
PY
cat >"$WL/npm.sh" <<'SH'
set -e
export TMPDIR="$PWD/.tmp" npm_config_cache="$PWD/.npm-cache" npm_config_update_notifier=false
mkdir -p "$TMPDIR"
npm install --offline --install-links --no-audit --no-fund --silent >/dev/null
test -f node_modules/local-dep-2/lib/f199.js
SH
mkdir -p "$WL/cpython-template"
cat >"$WL/cpython.sh" <<'SH'
set -e
export TMPDIR="$PWD/.tmp"
mkdir -p "$TMPDIR"
python3 -m test -q test_fileio test_shutil test_tempfile >/dev/null
SH
WORKLOADS=(git shell)
declare -A WL_TITLE=([git]="git session, 2,000-file repository (init, add, commit, branch, rebase, gc)"
    [shell]="shell edits (sed -i, cp, mv of 500 files; rm)" [npm]="npm install, 3 local packages of 200 files, offline"
    [cpython]="CPython file tests (test_fileio, test_shutil, test_tempfile)")
declare -A WL_NA=()
wl_try() {   # wl_try NAME: add the workload if it runs bare here
    local w=$1 d="$WORK/wl-try"
    rm -rf "$d" && cp -a "$WL/$w-template" "$d"
    if (cd "$d" && bash "$WL/$w.sh") >"$RAW/wl-$w-try.txt" 2>&1; then
        WORKLOADS+=("$w")
    else
        WL_NA[$w]="fails bare here: $(tail -n 1 "$RAW/wl-$w-try.txt" | tr -d '`|')"
    fi
    rm -rf "$d"
}
if command -v npm >/dev/null 2>&1; then wl_try npm; else WL_NA[npm]="npm not installed"; fi
if python3 -c 'import test.support' 2>/dev/null; then wl_try cpython; else
    WL_NA[cpython]="CPython's test package not installed"; fi
: >"$RAW/peer-wl.tsv"
log "peers: workloads ${WORKLOADS[*]}, $REPS_W repetitions"
for ((r = 1; r <= REPS_W; r++)); do
    for w in "${WORKLOADS[@]}"; do
        for tool in "${PEERS[@]}"; do
            d="$WORK/wl-run"
            # The script goes into the workspace: a confining tool need not let the command
            # read the benchmark's own directory.
            rm -rf "$d" && cp -a "$WL/$w-template" "$d" && cp "$WL/$w.sh" "$d/.bench.sh" && sync
            t=$(now_ns)
            if under "$tool" "$d" bash .bench.sh >"$RAW/wl-out.txt" 2>&1; then
                printf '%s\t%s\t%s\n' "$w" "$tool" "$((($(now_ns) - t) / 1000000))" >>"$RAW/peer-wl.tsv"
                if [[ $tool == guard ]]; then
                    # The last guard run's audit log, for 6d (where guard's time goes).
                    run=$(ls -td "$GUARD_STATE_DIR"/runs/*/ | head -n 1 || true)
                    cp "$run/audit.jsonl" "$RAW/wl-$w-audit.jsonl"
                    cp "$run/summary.json" "$RAW/wl-$w-summary.json"
                fi
            else
                log "  $w under $tool failed: $(tail -n 2 "$RAW/wl-out.txt" | tr '\n' ' ')"
                printf '%s\t%s\tfailed\n' "$w" "$tool" >>"$RAW/peer-wl.tsv"
            fi
        done
    done
done
rm -rf "$WORK/wl-run"
PEER_WL_MD="$WORK/peer-wl.md"
{
    printf '| workload (median ms of %s; x bare) |' "$REPS_W"
    for tool in "${PEERS[@]}"; do printf ' %s |' "${PEER_TITLE[$tool]}"; done
    printf '\n|---|'
    for _ in "${PEERS[@]}"; do printf -- '---:|'; done
    printf '\n'
    for w in "${WORKLOADS[@]}"; do
        read -r base _ _ < <(awk -F'\t' -v w="$w" '$1==w && $2=="bare" && $3!="failed" {print $3}' \
            "$RAW/peer-wl.tsv" | median3)
        printf '| %s |' "${WL_TITLE[$w]}"
        for tool in "${PEERS[@]}"; do
            read -r med _ _ < <(awk -F'\t' -v w="$w" -v t="$tool" '$1==w && $2==t && $3!="failed" {print $3}' \
                "$RAW/peer-wl.tsv" | median3)
            if [[ $med == - ]]; then printf ' failed |'; continue; fi
            printf ' %s (x%s) |' "$med" "$(awk -v a="$med" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
        done
        printf '\n'
    done
    for w in "${!WL_NA[@]}"; do echo; echo "- ${WL_TITLE[$w]}: skipped, ${WL_NA[$w]}."; done
} >"$PEER_WL_MD"
PEER_PROF_MD="$WORK/peer-wl-profile.md"
profiles=()
for w in "${WORKLOADS[@]}"; do
    added=$(for tool in bare guard; do
        awk -F'\t' -v w="$w" -v t="$tool" '$1==w && $2==t && $3!="failed" {print $3}' \
            "$RAW/peer-wl.tsv" | median3 | cut -d' ' -f1
    done | paste -sd' ' | awk '$1 != "-" && $2 != "-" { print $2 - $1; next } { print "-" }')
    profiles+=("$w:${WL_TITLE[$w]}:$added")
done
python3 "$ROOT/benches/wl_profile.py" "$RAW" "${profiles[@]}" >"$PEER_PROF_MD"
