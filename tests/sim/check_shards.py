#!/usr/bin/env python3
"""Checks that shards merged give the rows of one unsharded run: the same rows in the same
order in results.json and results.csv (every column but wall_s, the host time), the same
regret summary and the same simulated messages per topology.
Usage: check_shards.py WHOLE_DIR MERGED_DIR..."""
import csv
import json
import sys


def rows_json(d):
    doc = json.load(open(d + "/results.json"))
    return doc, [{k: v for k, v in r.items() if k != "wall_s"} for r in doc["rows"]]


def rows_csv(d):
    rows = list(csv.reader(open(d + "/results.csv")))
    i = rows[0].index("wall_s")
    return [r[:i] + r[i + 1:] for r in rows]


whole_doc, whole = rows_json(sys.argv[1])
whole_csv = rows_csv(sys.argv[1])
if len(whole) < 2:
    sys.exit("FAIL: the unsharded run has %d rows" % len(whole))
for d in sys.argv[2:]:
    doc, merged = rows_json(d)
    if merged != whole:
        diff = next(i for i, (a, b) in enumerate(zip(whole + [None], merged + [None])) if a != b)
        sys.exit("FAIL: %s: row %d differs: %s vs %s" % (d, diff, whole[diff] if diff < len(whole) else None,
                                                           merged[diff] if diff < len(merged) else None))
    if rows_csv(d) != whole_csv:
        sys.exit("FAIL: %s/results.csv differs from the unsharded run's" % d)
    if doc.get("regret_summary") != whole_doc.get("regret_summary"):
        sys.exit("FAIL: %s: regret summary differs" % d)
    msgs = [(t["name"], t["messages"]) for t in doc["topologies"]]
    if msgs != [(t["name"], t["messages"]) for t in whole_doc["topologies"]]:
        sys.exit("FAIL: %s: simulated messages per topology differ: %s" % (d, msgs))
print("OK: %d rows, %d merged runs identical to the unsharded run" % (len(whole), len(sys.argv) - 2))
