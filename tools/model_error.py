#!/usr/bin/env python3
"""The model's error on a compcoll-run result, and another model's on the same rows.

    tools/model_error.py RUN.json [OTHER.json] [--min-bytes N]

RUN.json is compcoll-run's results.json (either file may be gzip-compressed, .json.gz): each plan row's measured time (`time_us`) beside the
model column (`model_us`). OTHER.json, optional, is a compcoll-sim results.json of the same
experiment run with `--back-to-back N` (N the run's iterations) on other model inputs, whose
`time_us` is that model's time for each plan (matched by collective, algorithm, placement,
codec and size; rows the two do not share are left out of both). For each model it prints the
geometric-mean error (as compcoll-run's `# model:` line: exp(mean |log(model / measured)|) - 1),
the signed geometric mean (exp(mean log(model / measured)) - 1: negative where the model is
fast), how many rows are within 25%, and the signed mean of the uncompressed rows, of the
compressed rows and of each size. Rows under --min-bytes (default 1 MiB) are left out.
"""
import argparse
import gzip
import json
import math
import sys
from collections import defaultdict


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def key(r):
    return (r["collective"], r["algorithm"], r["placement"], r["codec"], r["size_bytes"])


def signed(logs):
    return 100 * (math.exp(sum(logs) / len(logs)) - 1)


def report(name, rows, model):
    logs = [(r, math.log(model[key(r)] / r["time_us"])) for r in rows]
    if not logs:
        return f"{name}: no rows"
    geo = 100 * (math.exp(sum(abs(x) for _, x in logs) / len(logs)) - 1)
    within = sum(abs(math.exp(x) - 1) <= 0.25 for _, x in logs)
    by_size = defaultdict(list)
    for r, x in logs:
        by_size[r["size_bytes"]].append(x)
    plain = [x for r, x in logs if r["codec"] == "identity"]
    coded = [x for r, x in logs if r["codec"] != "identity"]
    parts = [f"{name}: {len(logs)} rows, error {geo:.1f}%, signed {signed([x for _, x in logs]):+.1f}%, "
             f"{within}/{len(logs)} within 25%"]
    if plain:
        parts.append(f"uncompressed {signed(plain):+.1f}%")
    if coded:
        parts.append(f"compressed {signed(coded):+.1f}%")
    parts.append("by size " + ", ".join(f"{s:,} B {signed(v):+.1f}%" for s, v in sorted(by_size.items())))
    return "; ".join(parts)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("other", nargs="?")
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    a = ap.parse_args(argv)
    try:
        run = load(a.run)
        rows = [r for r in run["rows"]
                if r.get("model_us") and r.get("time_us") and not r.get("error") and r["size_bytes"] >= a.min_bytes]
        other = None
        if a.other:
            sim = load(a.other)
            other = {key(r): r["time_us"] for r in sim["rows"] if r.get("time_us") and not r.get("error")}
            rows = [r for r in rows if key(r) in other]
    except KeyError as e:
        print(f"model_error.py: no key {e} where a results.json of compcoll-run (or compcoll-sim) has it", file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError) as e:
        print(f"model_error.py: {e}", file=sys.stderr)
        return 2
    print(report("the run's model", rows, {key(r): r["model_us"] for r in rows}))
    if other is not None:
        print(report(a.other, rows, other))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
