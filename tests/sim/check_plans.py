#!/usr/bin/env python3
"""Checks compcoll-sim --plans-only --json (policies static and adaptive): every static row
carries the cost model's time for the plan as written, and adaptive, which prices every
candidate (the static plans here among them) and keeps the cheapest, predicts no more than the
cheapest static plan of its cell."""
import json
import sys
from collections import defaultdict

doc = json.load(sys.stdin)
cells = defaultdict(list)
for p in doc["plans"]:
    cells[(p["topology"], p["ranks"], p["call"], p["size_bytes"])].append(p)
assert cells, "no plans"
for cell, ps in cells.items():
    static = [p["predicted_us"] for p in ps if p["policy"] == "static"]
    adaptive = [p["predicted_us"] for p in ps if p["policy"] == "adaptive"]
    assert static and all(t is not None and t > 0 for t in static), f"{cell}: static predictions {static}"
    assert len(adaptive) == 1 and adaptive[0] > 0, f"{cell}: adaptive {adaptive}"
    assert adaptive[0] <= min(static) * (1 + 1e-9), f"{cell}: adaptive predicts {adaptive[0]} > static {min(static)}"
print(f"OK: {len(cells)} cells, static plans priced, adaptive no slower than static by the model")
