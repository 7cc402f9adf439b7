#!/usr/bin/env bash
# The supervisor's own system calls per notification over a whole run, grouped by the system
# call each notification answered: docs/design-notes.md, "What the supervisor calls per
# notification in real work".
#
#   bash benches/supervisor_calls.sh GUARD WORKSPACE -- COMMAND [ARG...]
#
# Runs `GUARD exec -w WORKSPACE -- COMMAND...` (after a second's pause, for strace to attach
# first) with `strace` attached to the receiving supervisor thread only, then prints, for all
# notifications and for each system call answered, the calls per notification and which ones.
# strace slows everything: only the counts mean anything. Root (or ptrace rights over guard).
set -euo pipefail
[[ $# -ge 4 && $3 == -- ]] || { sed -n '2,12p' "$0"; exit 2; }
GUARD=$1 WS=$2
shift 3
command -v strace >/dev/null || { echo "strace is needed" >&2; exit 1; }
LOG=$(mktemp /tmp/supervisor-calls.XXXXXX)
trap 'rm -f "$LOG"' EXIT
(cd "$WS" && exec "$GUARD" exec -w "$WS" -- sh -c 'sleep 1; exec "$@"' sh "$@") &
GUARD_PID=$!
# Worker 0 (`guard-supervisor-0`) is the first of the threads whose name starts so.
tid=""
for _ in $(seq 100); do
    tid=$(for t in /proc/$GUARD_PID/task/*; do
        [[ $(cat "$t/comm" 2>/dev/null) == guard-superviso ]] && basename "$t"
    done | sort -n | head -n 1 || true)
    [[ -n $tid ]] && break
    sleep 0.01
done
[[ -n $tid ]] || { echo "no supervisor thread found" >&2; wait "$GUARD_PID"; exit 1; }
strace -p "$tid" -o "$LOG" 2>/dev/null &
STRACE_PID=$!
status=0
wait "$GUARD_PID" || status=$?
kill "$STRACE_PID" 2>/dev/null || true
wait "$STRACE_PID" 2>/dev/null || true
python3 - "$LOG" <<'PY'
import collections, re, sys

per = collections.defaultdict(list)
detail = collections.defaultdict(collections.Counter)
cur, cnt = None, collections.Counter()

def flush():
    if cur is not None:
        per[cur].append(sum(cnt.values()))
        detail[cur].update(cnt)

for line in open(sys.argv[1]):
    m = re.match(r'(\w+)\(', line)
    if not m or m.group(1) == 'restart_syscall':
        continue
    name = m.group(1)
    ioctl = re.search(r'SECCOMP_IOCTL_NOTIF_(\w+)', line)
    if ioctl and ioctl.group(1) == 'RECV':
        flush()
        nr = re.search(r'nr=__NR_(\w+)', line)
        cur, cnt = (nr.group(1) if nr else '?'), collections.Counter(recv=1)
        continue
    if cur is None:
        continue
    cnt[ioctl.group(1).lower() if ioctl else name] += 1
flush()
total = sum(len(v) for v in per.values())
if not total:
    sys.exit("no notification was traced")
print(f"all: {total} notifications, {sum(map(sum, per.values())) / total:.2f} calls each")
for k, v in sorted(per.items(), key=lambda kv: -len(kv[1])):
    n = len(v)
    which = ", ".join(f"{a} {b / n:.2f}" for a, b in detail[k].most_common(8))
    print(f"{k:14} {n:7} {sum(v) / n:6.2f}  ({which})")
PY
exit "$status"
