#!/usr/bin/env python3
# The README's comparison tables and figures ("How it compares", up to "## Tests"), rewritten
# from a docs/benchmarks.md that benches/compare.sh wrote, so every number there comes from
# that one run:
#
#   python3 benches/readme_figures.py docs/benchmarks.md README.md
#
# The prose around the figures lives here too: edit it here, then run the script.
import re, sys, textwrap
bm = open(sys.argv[1]).read()
readme_path = sys.argv[2]
def row(prefix):
    for l in bm.splitlines():
        if l.startswith("| " + prefix + " |") or l.startswith("| " + prefix):
            return [c.strip() for c in l.strip().strip("|").split("|")]
    raise SystemExit("no row " + prefix)
def first(x): return x.split(" ")[0]
s1 = {k: row(k)[3] for k in ["true (bare)", "guard -p strict", "guard (agent)", "guard -p observe", "bwrap", "strace -f", "firejail", "sandlock", "nono"]}
calls = {k: row(k) for k in ["getpid", "umask", "open-read", "unlink-missing", "open-write", "unlink-existing", "unlink-made", "create-new"]}
# columns: name, bare, guard, nospin, nosync, noaddfd, strace
c = lambda k, i: first(calls[k][i])
s2_1 = row("guard, 1-file ws")[2]; s2_10k = row("guard, 10k-file ws")[2]
rm_bare = row("`rm -rf tree`, bare")[1]; rm_g = row("`guard exec -- rm -rf tree`")[1]
rb = row("`guard rollback RUN` of that run")[1]; at = row("`guard exec -p agent -p no-mass-delete.toml --atomic")[1]
at_verify = row("the same with `--verify`")[1]
at_stop_row = row("`guard exec --atomic -- sh -c")
at_stop = at_stop_row[1]
at_stop_n = re.search(r"stops it: (\d+) entries", at_stop_row[0]).group(1)
def f(x, n=1): return f"{float(x):.{n}f}"
# Section 1's alternated start-ups (guard, its static-pie build when it built, bwrap).
alt = {}
for l in bm.splitlines():
    m = re.match(r"\| (.+), alternated \| ([0-9.]+) \|", l)
    if m:
        alt[m.group(1)] = m.group(2)
static = alt.get("guard (agent), static-pie build")
alt_line = (f"Started in turn with bubblewrap, run by run (section 1), `guard exec -- true` took "
            f"{f(alt['guard (agent)'], 2)} ms"
            + (f", the same guard linked statically (the build \"Try it\" gives for the shortest "
               f"start) {f(static, 2)} ms" if static else "")
            + f", and bwrap {f(alt['bwrap'], 2)} ms.")
alt_line = textwrap.fill(alt_line, width=96, break_on_hyphens=False)
def ms(x): return f"{float(x)/1000:.2f}"
r = open(readme_path).read()
start = r.index("| guard (`agent`) |"); end = r.index("## Tests")
table_start = r.index("| | kernel boundary")
new = f"""| | kernel boundary | per-call judgement and audit | works without user namespaces | undo | start-up of `true` (median) |
|---|---|---|---|---|---|
| guard (`agent`) | Landlock + seccomp | yes (seccomp user notification) | yes | every process's changes in the workspace | {f(s1['guard (agent)'])} ms |
| guard (`strict`) | same, no network | yes | yes | yes | {f(s1['guard -p strict'])} ms |
| bubblewrap (`--ro-bind / /`) | mount namespaces | no | no | no | {f(s1['bwrap'])} ms |
| sandlock (`run -r / -w WS`) | Landlock + seccomp | some calls (seccomp user notification) | yes | `--workdir`: copy-on-write branch | {f(s1['sandlock'])} ms |
| nono (`run --allow WS`) | Landlock | no | yes | `--rollback`: snapshot | {f(s1['nono'])} ms |
| firejail (`--noprofile`) | namespaces + seccomp (setuid root) | no | needs setuid | no | {f(s1['firejail'])} ms |
| `strace -f` | none | logs only | yes | no | {f(s1['strace -f'])} ms |
| bare `true` | | | | | {f(s1['true (bare)'])} ms |

{alt_line}

Per system call, from the same run (µs, median; `docs/benchmarks.md` section 3):

| call | bare | under guard | under `strace -f` |
|---|---:|---:|---:|
| `getpid`, `open` for reading (never judged) | {c('getpid',1)} / {c('open-read',1)} | {c('getpid',2)} / {c('open-read',2)} | {f(c('getpid',6),0)} / {f(c('open-read',6),0)} |
| `umask` (trapped, let through at once unjudged: the floor of every trapped call) | {c('umask',1)} | {f(c('umask',2))} | {f(c('umask',6),0)} |
| `unlinkat` of a missing file (judged, performed by guard) | {c('unlink-missing',1)} | {f(c('unlink-missing',2))} | {f(c('unlink-missing',6),0)} |
| `unlinkat` of a file that existed before the run (judged, journaled: moved into the store) | {f(c('unlink-existing',1))} | {f(c('unlink-existing',2))} | {f(c('unlink-existing',6),0)} |
| `unlinkat` of a file the run made since the last checkpoint (judged, journaled, nothing kept) | {f(c('unlink-made',1))} | {f(c('unlink-made',2))} | {f(c('unlink-made',6),0)} |
| `open` for writing an existing file (judged, performed, injected with ADDFD) | {f(c('open-write',1))} | {f(c('open-write',2))} | {f(c('open-write',6),0)} |

An empty transaction (`guard exec -- true`: run directory, audit log, private tmp; no journal until a change) does
not grow with the workspace: {f(s2_1)} ms with one file, {f(s2_10k)} ms with 10,000 (section 2). `rm -rf`
of 10,000 files takes {ms(rm_g)} s as a whole guard run ({ms(rm_bare)} s bare: the files are kept in the
store, not freed). `guard rollback` restores them in {ms(rb)} s, each restored path checked
(`--verify` digests the whole tree). `guard exec --atomic` does all of it in one command, each
restored path checked, in {ms(at)} s ({ms(at_verify)} s with `--verify`, the whole tree digested
before and after), when a profile layered on `agent` switches its mass-deletion rule off. With the rule on, `--atomic` makes it a denial: the run is
stopped after {at_stop_n} deletions and the workspace restored, in {ms(at_stop)} s.

A call relative to the working directory starts from the directory guard remembers for the
calling thread; chdir and fchdir are trapped and let through, so that guard knows when to look
again (a chdir costs one notification more than bare).

A file the run made since the last checkpoint (a build's or git's temporary file) is deleted
without keeping a copy: a rollback removes it anyway. Its deletion costs {f(c('unlink-made',2),0)} µs instead of
{f(c('unlink-existing',2),0)} µs.

Write-opens inject the descriptor (ADDFD), so the caller has to run to pick it up. On a virtual
machine whose idle vCPUs halt at once, as here, a write-open took {f(c('open-write',3),0)} µs that way. guard
therefore keeps idle CPUs awake for 200 µs after each injection, with two spinning threads of
the lowest scheduling class; the same write-open then takes {f(c('open-write',2),0)} µs. `GUARD_ADDFD_SPIN_US=0`
switches the spinners off, and they stay off under a cgroup CPU quota. A longer window
(`GUARD_ADDFD_SPIN_US=5000`) keeps them up through a shell loop that starts a program per
file, whose injections come too far apart for the default one, at the price of a CPU kept
spinning while the loop runs; docs/design-notes.md has a measurement by hand. For the same reason a
run's start polls for its child's messages for up to 1 ms each instead of sleeping, and moves
the sandbox's init to another CPU than its own right after the fork (the init takes back its
affinity before it starts the command), where the process may use two CPUs and no more
processes are runnable than there are CPUs. An idle run
(a command waiting on the network, an agent thinking) lets guard sleep: its threads look for
work every 50 to 250 ms, not every 5 (`an_idle_run_lets_guard_sleep` holds it to fewer than
60 wake-ups a second), and the first call after such a spell has them look every 5 ms again
(and the audit writer write its record at once, for `guard log --follow`).

These figures come from one run of `benches/compare.sh` on a shared 2-vCPU machine, copied into
this page by `benches/readme_figures.py`; expect noise of tens of percent between runs. The
script runs on a fresh ext4 image it mounts for the run (`BENCH_FS=tmp` runs it in /tmp
instead): a long-used disk's history changes what a create costs, for bare runs as for
guard (a comment in the script says how).

"""
r = r[:table_start] + new + r[end:]
open(readme_path, "w").write(r)
