#!/usr/bin/env python3
"""Two sets of compcoll-run results of one experiment, row by row: measured and modelled.

    tools/compare_runs.py A.json [A2.json ...] --vs B.json [B2.json ...] [--names A,B]

Each file is compcoll-run's results.json (or .json.gz). Rows are matched by collective,
algorithm, placement, codec and size (library rows, MPI_* or NCCL's, are left out; so are
rows not in every file). For each row it prints, per set, the median measured time over the
set's runs with its range and the model column (`model_us`, the median too), then A over B:
the measured speed-up of B (median A / median B) and the model's. Used for a run with and
without `run.compute_thread` (docs/compcoll-run.md, "Compute thread"). A Markdown table.
"""
import argparse
import gzip
import json
import statistics
import sys


def load(path):
    try:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"compare_runs.py: {path}: {e}")


def key(r):
    return (r["collective"], r["algorithm"], r["placement"], r["codec"], r["size_bytes"])


def plan_rows(path):
    doc = load(path)
    if "rows" not in doc:
        sys.exit(f"compare_runs.py: {path}: no 'rows': not a compcoll-run results.json")
    return {key(r): r for r in doc["rows"] if not r["algorithm"].startswith(("MPI_", "nccl"))}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", nargs="+")
    ap.add_argument("--vs", nargs="+", required=True)
    ap.add_argument("--names", default="A,B")
    args = ap.parse_args(argv)
    names = args.names.split(",")
    if len(names) != 2:
        sys.exit("compare_runs.py: --names: expected two names, A,B")
    sets = [[plan_rows(p) for p in args.a], [plan_rows(p) for p in args.vs]]
    keys = [k for k in sets[0][0] if all(k in run for s in sets for run in s)]
    if not keys:
        sys.exit("compare_runs.py: the two sets share no plan row")
    mib = 1 << 20
    print(f"| call | size | codec | {names[0]}: measured (µs), median (range) | model | "
          f"{names[1]}: measured | model | measured {names[0]} / {names[1]} | model's |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for k in keys:
        cells = []
        med = []
        for s in sets:
            t = [run[k]["time_us"] for run in s]
            m = [run[k]["model_us"] for run in s if run[k].get("model_us")]
            med.append((statistics.median(t), statistics.median(m) if m else None))
            cells.append(f"{med[-1][0]:,.0f} ({min(t):,.0f}-{max(t):,.0f})")
            cells.append(f"{med[-1][1]:,.0f}" if m else "-")
        coll, alg, placement, codec, size = k
        size_s = f"{size // mib} MiB" if size % mib == 0 else f"{size:,} B"
        speed = med[0][0] / med[1][0]
        model = med[0][1] / med[1][1] if med[0][1] and med[1][1] else None
        ratios.append(speed)
        print(f"| {coll} {alg} | {size_s} | {codec} ({placement}) | " + " | ".join(cells) +
              f" | {speed:.2f}x | " + (f"{model:.2f}x |" if model else "- |"))
    print(f"\n{len(keys)} rows; measured {names[0]} / {names[1]}: median {statistics.median(ratios):.2f}x, "
          f"{min(ratios):.2f}x to {max(ratios):.2f}x; {len(sets[0])} and {len(sets[1])} runs")


if __name__ == "__main__":
    main(sys.argv[1:])
