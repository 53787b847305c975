#!/usr/bin/env python3
"""tests/sim/check_oracle_exposed.py ALONE.json BESIDE.json — the codec's exposed time of an
oracle's fastest candidate, which compcoll-sim works out in its own process (the candidates'
processes leave it: sim::Call::exposed), against the same plan's when a static row runs it and
the call's process works it out: ALONE has the oracle only, BESIDE a static row of the plan the
oracle picks in ALONE. Both must be there and equal."""
import json
import sys


def rows(path):
    return json.load(open(path))["rows"]


def main():
    alone = [r for r in rows(sys.argv[1]) if r["policy"] == "oracle"]
    beside = [r for r in rows(sys.argv[2]) if r["policy"] == "static"]
    if len(alone) != 1 or len(beside) != 1:
        sys.exit(f"FAILED: expected one oracle row and one static row, got {len(alone)} and {len(beside)}")
    o, s = alone[0], beside[0]
    plan = lambda r: (r["algorithm"], r["placement"], r["codec"], r["time_us"])
    if plan(o) != plan(s):
        sys.exit(f"FAILED: the oracle ran {plan(o)}, the static row {plan(s)}: not the same plan")
    if o["codec"] == "identity" or o["codec_exposed_us"] is None or s["codec_exposed_us"] is None:
        sys.exit(f"FAILED: no exposed codec time to compare: oracle {o['codec_exposed_us']}, static {s['codec_exposed_us']}")
    if o["codec_exposed_us"] != s["codec_exposed_us"]:
        sys.exit(f"FAILED: the oracle's exposed codec time {o['codec_exposed_us']} us, the call's own {s['codec_exposed_us']} us")
    print(f"OK: {o['algorithm']} {o['placement']} {o['codec']}: exposed {o['codec_exposed_us']:.3f} us in both")


main()
