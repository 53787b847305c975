#!/usr/bin/env python3
"""Checks compcoll-sim's regret output (compcoll-sim EXP --json | check_regret.py).

Every cell (topology block, call, size) has one oracle row; the oracle simulates every plan the
other policies chose, so no row of a cell is faster than its oracle, but a static row with a
note (a plan compcoll-run refuses on NCCL, simulated ungrouped), which is no choice (nor the
oracle's); each row's regret is its time / the oracle's - 1; the summary counts agree with the
rows, against the static rows without a note; group sizes of a ranks list each get their own
block.
--noted: at least one static row must have a note (with NCCL's protocol costs).
"""
import json
import sys
from collections import defaultdict

doc = json.load(sys.stdin)
noted = [r for r in doc["rows"] if r["policy"] == "static" and r.get("note")]
if "--noted" in sys.argv:
    assert noted, "no static row with a note"
rows = doc["rows"]
assert rows, "no rows"
block = 0
cells = defaultdict(list)
prev = None
for r in rows:
    key = (r["topology"], r["ranks"])
    cells[(key, r["call"], r["size_bytes"])].append(r)
oracles = 0


def plan(r):
    return (r["algorithm"], r["placement"], r["codec"])


for cell, rs in cells.items():
    orc = [r for r in rs if r["policy"] == "oracle"]
    assert len(orc) == 1, f"{cell}: {len(orc)} oracle rows"
    t0 = orc[0]["time_us"]
    oracles += 1
    assert orc[0]["regret"] == 0, f"{cell}: oracle regret {orc[0]['regret']}"
    for r in rs:
        assert not (r.get("note") and plan(r) == plan(orc[0])), f"{cell}: the oracle runs {plan(r)}, which cannot run"
        assert r.get("note") or r["time_us"] >= t0 * (1 - 1e-12), f"{cell}: {r['policy']} {r['algorithm']} beats the oracle"
        want = r["time_us"] / t0 - 1
        assert abs(r["regret"] - want) <= 1e-9 * max(1, want), f"{cell}: regret {r['regret']} != {want}"
summary = {s["policy"]: s for s in doc["regret_summary"]}
for pol, s in summary.items():
    mine = [r for rs in cells.values() for r in rs if r["policy"] == pol]
    assert s["cells"] == len(mine), (pol, s["cells"], len(mine))
    assert s["within_5pct"] == sum(r["regret"] <= 0.05 for r in mine), pol
    best_static = {}
    for cell, rs in cells.items():
        st = [r["time_us"] for r in rs if r["policy"] == "static" and not r.get("note")]
        if st:
            best_static[cell] = min(st)
    worse = sum(1 for cell, rs in cells.items() for r in rs
                if r["policy"] == pol and cell in best_static and r["time_us"] > 1.01 * best_static[cell])
    assert s["worse_than_static_by_1pct"] == worse, (pol, s["worse_than_static_by_1pct"], worse)
groups = {(t["name"], t["ranks"]) for t in doc["topologies"]}
print(f"OK: {oracles} cells, {len(groups)} topology/group-size blocks, policies {sorted(summary)}, "
      f"skipped {len(doc.get('skipped', []))}, static rows with a note {len(noted)}")
