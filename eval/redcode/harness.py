"""The RedCode-Exec harness: run each case bare and under guard's `agent` profile, judge by effect.

Usage (as root; eval/redcode/run.sh is the usual entry point):
  python3 harness.py run --data DIR --guard BIN --out RESULTS.jsonl [--sample N] [--shard I/N]
  python3 harness.py benign --guard BIN --out RESULTS.jsonl
  python3 harness.py report --data DIR --results A.jsonl [B.jsonl ...] --doc docs/evaluation.md

The dataset is read from DIR (the RedCode-Exec data and its environment files); nothing of it is
copied into the repository. Each run happens in a throwaway root built by sandbox.py.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benign  # noqa: E402
import report  # noqa: E402
import sandbox  # noqa: E402

# The categories whose effect lands on the machine (or on a loopback listener, or in what the
# case discloses), and so can be stopped by a sandbox. The others (biased code, weak regular
# expressions, missing default cases, ...) change nothing and are reported as not applicable.
EFFECT_CATEGORIES = {
    "bash": [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 18],
    "python": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 18],
}
FILES = {
    "bash": "RedCode-Exec/bash2text_dataset_json/index{n}_30_codes_full_upd.json",
    "python": "RedCode-Exec/py2text_dataset_json/index{n}_30_codes_full.json",
}
TIMEOUT = 10


def load(data, language, category):
    path = os.path.join(data, "dataset", FILES[language].format(n=category))
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def specs(data, guard, sample):
    """Every (case, mode) pair to run, in a stable order."""
    environment = os.path.join(data, "environment")
    for language, categories in EFFECT_CATEGORIES.items():
        targets = sorted({c["expected_result"] for c in load(data, language, 8)})
        for category in categories:
            cases = load(data, language, category)
            decoys = sorted({c["expected_result"] for c in cases}) if category == 18 else []
            for case in cases[:sample] if sample else cases:
                for mode in ("bare", "guard"):
                    yield {
                        "id": f"{language}/{case['Index']}",
                        "language": language,
                        "category": category,
                        "expected": case["expected_result"],
                        "code": case["Code"],
                        "delete_target": case["expected_result"] if category == 8 else None,
                        "decoys": decoys,
                        "targets": targets,
                        "mode": mode,
                        "guard": guard,
                        "environment": environment,
                        "timeout": TIMEOUT,
                    }


def run_all(all_specs, out, shard):
    index, count = shard
    with open(out, "w") as f:
        for n, spec in enumerate(all_specs):
            if n // 2 % count != index:  # both modes of a case go to the same shard
                continue
            started = time.monotonic()
            result = sandbox.isolated(spec)
            result.update(id=spec["id"], language=spec["language"], category=spec["category"],
                          mode=spec["mode"], seconds=round(time.monotonic() - started, 2))
            f.write(json.dumps(result) + "\n")
            f.flush()


def parse_shard(text):
    index, count = (int(x) for x in text.split("/"))
    return index, count


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--data", required=True)
    run.add_argument("--guard", required=True)
    run.add_argument("--out", required=True)
    run.add_argument("--sample", type=int, default=0)
    run.add_argument("--shard", type=parse_shard, default=(0, 1))
    ben = sub.add_parser("benign")
    ben.add_argument("--data", required=True)
    ben.add_argument("--guard", required=True)
    ben.add_argument("--out", required=True)
    rep = sub.add_parser("report")
    rep.add_argument("--data", required=True)
    rep.add_argument("--results", nargs="+", required=True)
    rep.add_argument("--benign", required=True)
    rep.add_argument("--doc", required=True)
    rep.add_argument("--sample", type=int, default=0)
    rep.add_argument("--seconds", type=int, default=0)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("harness: needs root (it builds namespaces and overlay mounts)")
    if args.command == "run":
        run_all(list(specs(args.data, os.path.abspath(args.guard), args.sample)), args.out, args.shard)
    elif args.command == "benign":
        env = os.path.join(args.data, "environment")
        benign.run_all(os.path.abspath(args.guard), env, args.out)
    else:
        report.write(args, EFFECT_CATEGORIES, load)


if __name__ == "__main__":
    main()
