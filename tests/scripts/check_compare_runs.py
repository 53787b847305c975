#!/usr/bin/env python3
"""tools/compare_runs.py: a set against itself is 1.00x on every row (measured and model); two
sets give one row per plan row with the ratio of their medians; a missing file is one line and
exit 1 (argparse-style sys.exit). Usage: check_compare_runs.py DIR (notebooks/data/pipeline-cpu)"""
import glob
import gzip
import json
import re
import statistics
import subprocess
import sys

d = sys.argv[1]
a = sorted(glob.glob(d + "/r2-one-thread-*.json.gz"))
b = sorted(glob.glob(d + "/r2-compute-thread-*.json.gz"))
if len(a) < 2 or len(b) < 2:
    sys.exit(f"FAILED: expected runs in {d}")
tool = [sys.executable, "tools/compare_runs.py"]
same = subprocess.run(tool + a + ["--vs"] + a, capture_output=True, text=True, check=True).stdout
rows = [line for line in same.splitlines() if line.startswith("| ") and "x |" in line]
if not rows or any(not line.endswith("| 1.00x | 1.00x |") for line in rows):
    sys.exit("FAILED: a set against itself is not 1.00x everywhere:\n" + same)
out = subprocess.run(tool + a + ["--vs"] + b, capture_output=True, text=True, check=True).stdout
print(out, end="")
rows = [line for line in out.splitlines() if line.startswith("| ") and "x |" in line]
docs = [json.load(gzip.open(p, "rt")) for p in a + b]
plans = [r for r in docs[0]["rows"] if not r["algorithm"].startswith(("MPI_", "nccl"))]
if len(rows) != len(plans):
    sys.exit(f"FAILED: {len(rows)} rows printed, {len(plans)} plan rows in the runs")
# The first row's speed-up, recomputed from the files.
r0 = plans[0]
k = (r0["collective"], r0["algorithm"], r0["placement"], r0["codec"], r0["size_bytes"])
def med(docs_):
    return statistics.median(next(r["time_us"] for r in d_["rows"] if (r["collective"], r["algorithm"], r["placement"], r["codec"], r["size_bytes"]) == k) for d_ in docs_)
want = med(docs[: len(a)]) / med(docs[len(a):])
got = float(re.search(r"\| ([0-9.]+)x \| [0-9.-]+x? \|$", rows[0]).group(1))
if abs(got - want) > 0.006:
    sys.exit(f"FAILED: first row {got}x, the files give {want:.3f}x")
bad = subprocess.run(tool + [a[0] + ".missing", "--vs", a[0]], capture_output=True, text=True)
if bad.returncode == 0 or "compare_runs.py:" not in bad.stderr or bad.stderr.count("\n") != 1:
    sys.exit(f"FAILED: a missing file gave exit {bad.returncode}: {bad.stderr!r}")
print("OK")
