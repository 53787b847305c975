#!/usr/bin/env python3
"""tools/model_error.py on a compcoll-run result gives the run's own figure: its error over the
rows of 1 MiB and more equals the run's `geomean_abs_err_1mib`; a missing file is one line and
exit 2. Usage: check_model_error.py RUN.json"""
import json
import re
import subprocess
import sys

run = sys.argv[1]
out = subprocess.run([sys.executable, "tools/model_error.py", run], capture_output=True, text=True, check=True).stdout
print(out, end="")
got = float(re.search(r"error ([0-9.]+)%", out).group(1))
want = 100 * json.load(open(run))["model_check"]["geomean_abs_err_1mib"]
if abs(got - want) > 0.051:
    sys.exit(f"FAILED: model_error.py says {got}%, the run {want:.2f}%")
# A missing file: one line, exit 2.
bad = subprocess.run([sys.executable, "tools/model_error.py", run + ".missing"], capture_output=True, text=True)
if bad.returncode != 2 or "model_error.py:" not in bad.stderr:
    sys.exit(f"FAILED: a missing file gave exit {bad.returncode}: {bad.stderr!r}")
print("OK")
