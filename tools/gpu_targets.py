#!/usr/bin/env python3
"""The GPU codec targets, met or not, from what scripts/gpu-check.sh measured.

    tools/gpu_targets.py --calibration CAL.yaml [--codec-rows codec-cuda.jsonl] [--json OUT.json]

CAL.yaml is a file `compcoll-bench calibrate --device cuda` wrote (gpu-check's
OUT/calibration/<gpu>[-bf16-quick].yaml); codec-cuda.jsonl the rows of `compcoll-bench codec
--device cuda --json` (gpu-check's step of that name). Every target is for bf16, on Gaussian
data, and set for an H100 80GB HBM3; on another GPU the verdicts read as that GPU's:

  1. 256 MiB: gauss-exp compress >= 1,200 GB/s and decompress >= 1,400 GB/s of uncompressed
     bytes, each ahead of nvCOMP's ANS in the same calibration, at a ratio no lower than ANS's
     (the codec rows of 256 MiB of Gaussian data);
  2. 4 MiB: gauss-exp encode and decode >= 400 GB/s each at a ratio no lower than ANS's on the
     same bytes (the codec rows of 4 MiB: each chunk size the bench ran);
  3. a 1 MiB call, launch to result, <= 15 us (calibrate times each op between CUDA events,
     launch included);
  4. entropy-exp and fp8-hadamard >= 50% of gauss-exp's speed at every size of the calibration;
  5. reduce (bf16, fp32) >= 80% of the device copy's bandwidth counting bytes read and written
     (a reduce of N bytes reads 2N and writes N, a copy reads N and writes N), at every size;
  6. the fused decode-and-add faster than decompress then reduce, at every size;
  7. the identity codec within 5% of the device copy, at every size.

Each line says `met`, `NOT met` or `not measured` (a curve or row the inputs lack), with the
figures it rests on. After them, not a target: at each size where the codec rows ran gauss-exp
in several chunk sizes, each one's speed and whether the size compcoll's codecs pick there by
the stream's size (the rows' auto_chunk_elements, docs/FORMAT.md) is the fastest. Exit status
0 whatever the verdicts; 1 with one line naming the file and line when an input cannot be read.
"""
import argparse
import json
import re
import sys

MIB = 1 << 20
# A curve line; a batch curve's (batch_curves) has its messages before its points.
POINTS = re.compile(r"\s*- \{op: (\w+), (?:codec: ([\w:=-]*), )?dtype: (\w+), (?:messages: (\d+), )?points: \[(.*)\]\}\s*$")
PAIR = re.compile(r"\[(\d+), ([0-9.eE+-]+)\]")


def fail(msg):
    sys.exit(f"gpu_targets.py: {msg}")


def read_calibration(path, batches=False):
    """{(op, codec, dtype): {bytes: seconds}}, and the device line; batches=True: the batch
    curves instead, {(op, codec, dtype, messages): {bytes: seconds}}."""
    curves, device = {}, None
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    for n, line in enumerate(lines, 1):
        if line.startswith("device:"):
            device = line.split(":", 1)[1].strip().strip('"')
        if "points:" not in line:
            continue
        m = POINTS.match(line)
        if not m:
            fail(f"{path}:{n}: a curve line this tool cannot read: {line.strip()[:80]}")
        op, codec, dtype, messages, pts = m.groups()
        if bool(messages) != batches:
            continue  # a batch of messages in one call (batch_curves): the targets are single calls'
        pairs = PAIR.findall(pts)
        if not pairs:
            fail(f"{path}:{n}: a curve with no [bytes, seconds] points")
        curve = {}
        for b, s in pairs:
            if float(s) <= 0:
                fail(f"{path}:{n}: a duration of {s} s at {b} bytes (durations are positive)")
            curve[int(b)] = float(s)
        curves[(op, codec or "-", dtype, int(messages)) if batches else (op, codec or "-", dtype)] = curve
    if not curves and not batches:
        fail(f"{path}: no curves (not a file of compcoll-bench calibrate)")
    return curves, device


def read_rows(path):
    rows = []
    try:
        text = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    for n, line in enumerate(text, 1):
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
            r["bytes"] = int(r["elements"]) * {"bf16": 2, "fp16": 2, "fp32": 4}[r["dtype"]]
            for k in ("ratio", "encode_gbps", "decode_gbps"):
                float(r[k])
        except (ValueError, KeyError, TypeError) as e:
            fail(f"{path}:{n}: not a row of compcoll-bench codec --json ({type(e).__name__}: {e})")
        rows.append(r)
    return rows


def gbps(size, seconds):
    return size / seconds / 1e9


def fmt_size(b):
    return f"{b // MIB} MiB" if b >= MIB and b % MIB == 0 else (f"{b // 1024} KiB" if b % 1024 == 0 else f"{b} B")


class Report:
    def __init__(self):
        self.items = []

    def add(self, target, verdict, detail):
        """verdict: True (met), False (NOT met) or None (not measured)."""
        self.items.append({"target": target, "verdict": {True: "met", False: "NOT met", None: "not measured"}[verdict],
                           "detail": detail})

    def lines(self):
        return [f"  {i['verdict']:12s} {i['target']}: {i['detail']}" for i in self.items]


def at_every_size(curves_a, curves_b, value):
    """value(size, a_seconds, b_seconds) over the sizes both curves have; [] where they share none."""
    return [(s, value(s, curves_a[s], curves_b[s])) for s in sorted(set(curves_a) & set(curves_b))]


def evaluate(curves, rows):
    rep = Report()
    big, small, one = 256 * MIB, 4 * MIB, MIB
    c = lambda op, codec="-", dtype="bf16": curves.get((op, codec, dtype), {})
    gauss_rows = [r for r in rows if r["dtype"] == "bf16" and "gaussian" in str(r.get("file", ""))]

    def ratio_of(codec, size, chunk=None):
        for r in gauss_rows:
            if r["codec"] == codec and r["bytes"] == size and (chunk is None or r.get("chunk_elements") == chunk):
                return r["ratio"]
        return None

    # 1. 256 MiB against 1,200 / 1,400 GB/s and nvCOMP's ANS.
    for op, need in (("compress", 1200), ("decompress", 1400)):
        g, a = c(op, "gauss-exp").get(big), c(op, "nvcomp-ans").get(big)
        if g is None:
            rep.add(f"256 MiB gauss-exp {op} >= {need:,} GB/s, ahead of nvCOMP ANS", None, "no 256 MiB point in the calibration")
            continue
        v = gbps(big, g)
        ans = f", nvCOMP ANS {gbps(big, a):.1f}" if a else ", no nvCOMP ANS curve"
        rep.add(f"256 MiB gauss-exp {op} >= {need:,} GB/s, ahead of nvCOMP ANS",
                v >= need and a is not None and g < a, f"{v:.1f} GB/s{ans}")
    rg, ra = ratio_of("gauss-exp", big, 16384), ratio_of("nvcomp-ans", big)
    rep.add("256 MiB gauss-exp ratio >= nvCOMP ANS's", None if rg is None or ra is None else rg >= ra,
            f"{rg:.4f} against {ra:.4f}" if rg is not None and ra is not None else "no codec rows of 256 MiB of Gaussian bf16 with both")

    # 2. 4 MiB: >= 400 each way at a ratio no lower than ANS's.
    ra = ratio_of("nvcomp-ans", small)
    four = sorted((r for r in gauss_rows if r["codec"] == "gauss-exp" and r["bytes"] == small),
                  key=lambda r: (r.get("chunk_elements") or 0, r.get("cuda_encoder", "")))
    if not four:
        rep.add("4 MiB gauss-exp encode and decode >= 400 GB/s, ratio >= nvCOMP ANS's", None, "no codec rows of 4 MiB of Gaussian bf16")
    for r in four:
        ok_ratio = None if ra is None else r["ratio"] >= ra
        met = r["encode_gbps"] >= 400 and r["decode_gbps"] >= 400 and ok_ratio is True
        enc = r.get("cuda_encoder")
        label = (f"chunk {r.get('chunk_elements', '-')}" + (" by the stream's size" if r.get("chunk_policy") == "auto" else "")
                 + (f", {enc} encoder" if enc and enc != "passes" else ""))
        rep.add(f"4 MiB gauss-exp ({label}) encode and decode >= 400 GB/s, ratio >= nvCOMP ANS's", met,
                f"encode {r['encode_gbps']:.1f}, decode {r['decode_gbps']:.1f} GB/s, ratio {r['ratio']:.4f}"
                + (f" against {ra:.4f}" if ra is not None else " (no nvCOMP ANS row)"))

    # 3. 1 MiB call <= 15 us.
    for op in ("compress", "decompress"):
        s = c(op, "gauss-exp").get(one)
        rep.add(f"1 MiB gauss-exp {op}, launch to result, <= 15 us", None if s is None else s <= 15e-6,
                "no 1 MiB point" if s is None else f"{s * 1e6:.1f} us")

    # 4. entropy-exp and fp8-hadamard >= 50% of gauss-exp at every size.
    for codec in ("entropy-exp", "fp8-hadamard"):
        for op in ("compress", "decompress"):
            share = at_every_size(c(op, codec), c(op, "gauss-exp"), lambda s, x, g: g / x)
            name = f"{codec} {op} >= 50% of gauss-exp's speed at every size"
            if not share:
                rep.add(name, None, f"no {codec} {op} curve beside gauss-exp's")
                continue
            worst = min(share, key=lambda p: p[1])
            rep.add(name, worst[1] >= 0.5, f"lowest {worst[1]:.0%} at {fmt_size(worst[0])}, "
                    f"{len(share)} sizes {fmt_size(share[0][0])} to {fmt_size(share[-1][0])}")

    # 5. reduce >= 80% of the copy's traffic.
    copy = c("copy", "-", "any")
    for dtype in ("bf16", "fp32"):
        share = at_every_size(c("reduce", "-", dtype), copy, lambda s, r, k: (3 * s / r) / (2 * s / k))
        name = f"reduce {dtype} >= 80% of the device copy's bytes read and written, at every size"
        if not share:
            rep.add(name, None, f"no reduce {dtype} curve beside the copy's")
            continue
        worst = min(share, key=lambda p: p[1])
        b = share[-1]
        rep.add(name, worst[1] >= 0.8, f"lowest {worst[1]:.0%} at {fmt_size(worst[0])}; {b[1]:.0%} at {fmt_size(b[0])}")

    # 6. fused decode-and-add faster than decompress then reduce.
    red = c("reduce")
    for codec in ("gauss-exp", "entropy-exp"):
        fused, dec = c("decode_add", codec), c("decompress", codec)
        sizes = sorted(set(fused) & set(dec) & set(red))
        name = f"{codec} decode_add faster than decompress then reduce, at every size"
        if not sizes:
            rep.add(name, None, "no decode_add, decompress and reduce curves of bf16 at the same sizes")
            continue
        slower = [s for s in sizes if fused[s] >= dec[s] + red[s]]
        best = max(sizes, key=lambda s: (dec[s] + red[s]) / fused[s])
        rep.add(name, not slower, (f"slower or equal at {', '.join(fmt_size(s) for s in slower)}; " if slower else "")
                + f"best {(dec[best] + red[best]) / fused[best]:.2f}x at {fmt_size(best)}")

    # 7. identity within 5% of the copy.
    for op in ("compress", "decompress"):
        share = at_every_size(c(op, "identity"), copy, lambda s, i, k: k / i)
        name = f"identity {op} within 5% of the device copy, at every size"
        if not share:
            rep.add(name, None, "no identity curve beside the copy's")
            continue
        worst = min(share, key=lambda p: p[1])
        at_big = dict(share).get(big)
        rep.add(name, worst[1] >= 0.95, f"lowest {worst[1]:.2f} of the copy's speed at {fmt_size(worst[0])}"
                + (f"; {at_big:.2f} at 256 MiB" if at_big is not None else ""))
    return rep


def chunk_sizes(rows):
    """Not a target: the chunk size compcoll's codecs pick by the stream's size (the rows'
    auto_chunk_elements, docs/FORMAT.md) against the sizes the codec rows ran gauss-exp in (its
    default encoder, Gaussian bf16): at each size with rows in more than one chunk size, each
    size's encode and decode GB/s, and whether the pick is within 5% of the fastest both ways.
    Returns (lines, items)."""
    by_size = {}
    for r in rows:
        if (r["codec"] == "gauss-exp" and r["dtype"] == "bf16" and "gaussian" in str(r.get("file", ""))
                and r.get("cuda_encoder", "passes") == "passes" and r.get("chunk_policy") != "auto"
                and r.get("chunk_elements")):
            by_size.setdefault(r["bytes"], {})[r["chunk_elements"]] = r
    lines, items = [], []
    for size in sorted(by_size):
        runs = by_size[size]
        if len(runs) < 2:
            continue
        picks = {r.get("auto_chunk_elements") for r in runs.values()}
        pick = picks.pop() if len(picks) == 1 else None
        best_enc = max(r["encode_gbps"] for r in runs.values())
        best_dec = max(r["decode_gbps"] for r in runs.values())
        figures = "; ".join(f"{c}{' (the pick)' if c == pick else ''}: encode {r['encode_gbps']:.1f}, decode {r['decode_gbps']:.1f}"
                            for c, r in sorted(runs.items()))
        if pick is None:
            verdict = "no pick: rows of a compcoll-bench that does not say its pick (auto_chunk_elements)"
        elif pick not in runs:
            verdict = f"the pick, {pick}, not run at this size"
        else:
            fast = runs[pick]["encode_gbps"] >= 0.95 * best_enc and runs[pick]["decode_gbps"] >= 0.95 * best_dec
            verdict = "the pick is the fastest" if fast else "the pick is NOT the fastest"
        lines.append(f"  {fmt_size(size)}: {figures} GB/s: {verdict}")
        items.append({"bytes": size, "pick": pick, "verdict": verdict,
                      "runs": {str(c): {"encode_gbps": r["encode_gbps"], "decode_gbps": r["decode_gbps"], "ratio": r["ratio"]}
                               for c, r in sorted(runs.items())}})
    return lines, items


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibration", required=True)
    ap.add_argument("--codec-rows")
    ap.add_argument("--json")
    a = ap.parse_args()
    curves, device = read_calibration(a.calibration)
    rows = read_rows(a.codec_rows) if a.codec_rows else []
    rep = evaluate(curves, rows)
    met = sum(i["verdict"] == "met" for i in rep.items)
    unmeasured = sum(i["verdict"] == "not measured" for i in rep.items)
    print(f"targets (bf16, Gaussian; set for an H100 80GB HBM3; measured on {device or 'an unnamed device'}): "
          f"{met} of {len(rep.items)} met, {unmeasured} not measured")
    print("\n".join(rep.lines()))
    chunk_lines, chunk_items = chunk_sizes(rows)
    if chunk_lines:
        print("chunks by the stream's size (not a target; gauss-exp, GB/s of each chunk size the codec rows ran):")
        print("\n".join(chunk_lines))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"device": device, "calibration": a.calibration, "codec_rows": a.codec_rows, "targets": rep.items,
                       "chunk_sizes": chunk_items}, f, indent=1)


if __name__ == "__main__":
    main()
