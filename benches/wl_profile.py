#!/usr/bin/env python3
"""Where guard's time goes in a workload: the judged calls of one guard run, by operation.

    python3 benches/wl_profile.py RAW WORKLOAD:TITLE:ADDED_MS...

For each workload, RAW/wl-WORKLOAD-audit.jsonl and RAW/wl-WORKLOAD-summary.json are the audit
log and summary of its last run under guard (benches/peers.sh copies them there). ADDED_MS is
what guard added to the workload's median wall time ("-" if unknown). Prints a Markdown
section: per workload, the judged calls grouped by operation and system call, with the
supervisor's `latency_us` (count, median, sum), and how many of them were a new process's
exec or the first judged call of the program an exec started (those read the process's name
and executable from /proc, a create its umask, and an exec its cwd and parent).
"""

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

TOP = 8


def profile(audit: Path):
    """(rows, calls, total_us): rows are (op, syscall, count, first, median_us, sum_us)."""
    groups = defaultdict(list)
    firsts = defaultdict(int)
    last = {}
    with audit.open() as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("type") != "decision" or "latency_us" not in d:
                continue
            key = (d.get("op") or "-", d.get("syscall") or "-")
            groups[key].append(int(d["latency_us"]))
            # A new process's exec, or the first call of the program it started.
            before = last.get(d.get("pid"))
            if before is None or (before == "exec" and key[0] != "exec"):
                firsts[key] += 1
            last[d.get("pid")] = key[0]
    rows = [
        (op, sc, len(v), firsts[(op, sc)], statistics.median(v), sum(v))
        for (op, sc), v in groups.items()
    ]
    rows.sort(key=lambda r: -r[5])
    calls = sum(r[2] for r in rows)
    total = sum(r[5] for r in rows)
    return rows, calls, total


def main() -> int:
    raw = Path(sys.argv[1])
    out = []
    for spec in sys.argv[2:]:
        name, title, added = spec.split(":", 2)
        audit = raw / f"wl-{name}-audit.jsonl"
        summary = raw / f"wl-{name}-summary.json"
        if not audit.exists():
            out.append(f"- {title}: no guard run to profile.\n")
            continue
        rows, calls, total = profile(audit)
        suppressed = 0
        if summary.exists():
            suppressed = json.loads(summary.read_text()).get("suppressed", 0)
        share = ""
        if added not in ("", "-") and float(added) > 0:
            share = f", {100 * total / 1000 / float(added):.0f}% of the {float(added):.0f} ms guard added"
        out.append(
            f"**{title}**: {calls} judged calls in the audit log"
            f" ({suppressed} more left out by its rate limit), the supervisor's `latency_us`"
            f" summing to {total / 1000:.0f} ms{share}.\n"
        )
        out.append("| operation (system call) | calls | first of a process or program | median µs | sum ms |")
        out.append("|---|---:|---:|---:|---:|")
        for op, sc, n, first, med, s in rows[:TOP]:
            out.append(f"| {op} ({sc}) | {n} | {first} | {med:.0f} | {s / 1000:.1f} |")
        rest = rows[TOP:]
        if rest:
            n = sum(r[2] for r in rest)
            first = sum(r[3] for r in rest)
            s = sum(r[5] for r in rest)
            out.append(f"| {len(rest)} other kinds | {n} | {first} | - | {s / 1000:.1f} |")
        out.append("")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
