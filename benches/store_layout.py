#!/usr/bin/env python3
"""How long a rename into the journal's store takes, by how many objects share a directory.

A kept deletion is a rename of the file into the store, and a rollback renames it back: this
times N renames out of one directory into a store laid out flat (every object in one
directory) and in directories of K objects each (the layout `journal::BUCKET` chose), their
`mkdir`s included, the way the journal makes them. Run it on the filesystem the state
directory lives on:

    python3 benches/store_layout.py DIR [N] [K ...]

DIR must be empty or missing; it is left empty. Prints microseconds per rename for each
layout, the layouts alternated over three rounds (Python's own cost per call, about a
microsecond here, is in every figure alike).
"""

import os
import shutil
import statistics
import sys
import time


def one(base: str, n: int, per: int) -> float:
    src = os.path.join(base, "src")
    store = os.path.join(base, "store")
    os.makedirs(src)
    os.mkdir(store, 0o733)
    for i in range(n):
        with open(os.path.join(src, f"f{i}"), "wb"):
            pass
    os.sync()
    sfd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    tfd = os.open(store, os.O_RDONLY | os.O_DIRECTORY)
    made = -1
    t = time.perf_counter_ns()
    for i in range(n):
        if per:
            if i // per != made:
                made = i // per
                os.mkdir(str(made), 0o733, dir_fd=tfd)
                os.chmod(str(made), 0o733, dir_fd=tfd)
            os.rename(f"f{i}", f"{made}/{i}", src_dir_fd=sfd, dst_dir_fd=tfd)
        else:
            os.rename(f"f{i}", str(i), src_dir_fd=sfd, dst_dir_fd=tfd)
    took = time.perf_counter_ns() - t
    os.close(sfd)
    os.close(tfd)
    shutil.rmtree(src)
    shutil.rmtree(store)
    return took / n / 1000


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    base = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    layouts = [int(k) for k in sys.argv[3:]] or [0, 32, 64, 128, 256]
    os.makedirs(base, exist_ok=True)
    if os.listdir(base):
        sys.exit(f"{base} is not empty")
    runs: dict[int, list[float]] = {k: [] for k in layouts}
    for _ in range(3):
        for k in layouts:
            runs[k].append(one(base, n, k))
    for k in layouts:
        what = "one directory" if k == 0 else f"directories of {k}"
        r = sorted(runs[k])
        print(f"{n} renames into {what}: {statistics.median(r):.2f} µs each "
              f"[{r[0]:.2f}-{r[-1]:.2f}]")


if __name__ == "__main__":
    main()
