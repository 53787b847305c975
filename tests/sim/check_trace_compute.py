#!/usr/bin/env python3
"""Checks a trace replay's compute column against the traced compute the same run reports
(compcoll-sim experiments/trace-replay.yaml --json | check_trace_compute.py).

The compute column is the replay with every call free; the traced compute is the slowest rank's
step less its waits, times compute_scale. With free calls a rank still waits at each call for
its group's slower members to issue it, so the column may exceed the traced compute, never fall
below it; on the bundled job by 0.24%, checked here within 0.5%. Every variant of every trace
workload (every topology, scale_dp and compute_scale) is checked; a run with none fails.
"""
import json
import sys

TOLERANCE = 0.005

doc = json.load(sys.stdin)
checked = 0
for w in doc.get("workload", []):
    if "trace" not in w:
        continue
    tr = w["trace"]
    traced = tr["traced_compute_ms"] * tr["compute_scale"]
    assert traced > 0, f"{w['model']}: traced compute {traced} ms"
    for v in w["variants"]:
        ratio = v["compute_ms"] / traced
        where = f"{w['model']} scale_dp {tr['scale_dp']} compute x {tr['compute_scale']} {v['variant']}"
        print(f"{where}: compute {v['compute_ms']:.4f} ms, traced {traced:.4f} ms, ratio {ratio:.5f}")
        assert 1 - 1e-9 <= ratio <= 1 + TOLERANCE, f"{where}: compute / traced compute = {ratio}"
        checked += 1
assert checked, "no trace workload in the output"
print(f"OK: {checked} rows within {TOLERANCE:.1%} above the traced compute")
