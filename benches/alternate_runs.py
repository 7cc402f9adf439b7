#!/usr/bin/env python3
"""Start commands in turn, run by run, and write the median, quartiles and minimum of each
command's wall-clock times (ms) as JSON: for comparisons on a machine whose speed drifts
within minutes, where one command's runs after the other's (hyperfine) can favour either.
The order is reversed every other round, so that each command is first as often as second
(the second of a pair ran a few percent slower in hand checks here).

    alternate_runs.py ROUNDS OUT.json NAME CMD [NAME CMD ...]

Each CMD is split like a shell command line, started with posix_spawnp with its standard
output on /dev/null, and waited for; a command that exits non-zero stops the script.
"""
import json
import os
import shlex
import statistics
import sys
import time


def main():
    rounds, out = int(sys.argv[1]), sys.argv[2]
    pairs = [(name, shlex.split(cmd)) for name, cmd in zip(sys.argv[3::2], sys.argv[4::2])]
    null = os.open(os.devnull, os.O_RDWR)
    times = {name: [] for name, _ in pairs}
    for r in range(rounds):
        for name, argv in pairs if r % 2 == 0 else reversed(pairs):
            t = time.perf_counter_ns()
            pid = os.posix_spawnp(argv[0], argv, os.environ,
                                  file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
            _, status = os.waitpid(pid, 0)
            times[name].append((time.perf_counter_ns() - t) / 1e6)
            if status != 0:
                sys.exit(f"{shlex.join(argv)}: exit status {status}")
    json.dump({name: {"median": statistics.median(x), "min": min(x),
                      "p25": statistics.quantiles(x, n=4)[0],
                      "p75": statistics.quantiles(x, n=4)[2]}
               for name, x in times.items()}, open(out, "w"))


if __name__ == "__main__":
    main()
