#!/usr/bin/env python3
"""Writes docs/RESULTS.md from the results files bundled in notebooks/data: every figure in it
comes from a file a command wrote, and each section names the command and the machine.

  tools/results_doc.py                  rewrite docs/RESULTS.md
  tools/results_doc.py --check          exit 1 when docs/RESULTS.md is not what the data give
  tools/results_doc.py --codec-bench BUILD_DIR
                                        rerun the codec bench on this machine into
                                        notebooks/data/codec-bench.jsonl (and its host file)

The simulated results (compcoll-sim --out DIR, DIR/results.json) record their command line and
the host they ran on; the codec bench's host is kept beside it (codec-bench.host.json)."""
import argparse
import csv
import gzip
import json
import math
import re
import os
import platform
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "notebooks", "data")
DOC = os.path.join(ROOT, "docs", "RESULTS.md")
CODEC_CMD = ["tools/compcoll-bench", "codec", "--json", "--dtype", "bf16", "--min-time", "0.05"]


def load(name):
    path = os.path.join(DATA, name)
    with (gzip.open(path, "rt") if name.endswith(".gz") else open(path)) as f:
        return json.load(f)


def fmt(v, p=2):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{p}f}"


def host_text(doc):
    h = doc.get("host")
    if not h:
        return "host not recorded in the file"
    return f"{h.get('cpu') or 'unknown CPU'}, {h.get('cores')} logical cores"


def sim_provenance(doc, name, fallback_cmd):
    cal = doc["calibration"]
    kernels = cal.get("source", "?")
    # The file as the repository names it (results files hold the absolute path they ran with).
    file = "calibration/" + os.path.basename(cal.get("file", "?"))
    if kernels == "derived":
        kernels = "DERIVED from stated figures, not measured (" + file + ")"
    elif kernels == "measured":
        kernels = f"measured on one {cal.get('device', '?')} ({file}, {cal.get('date', '?')})"
    cmd = doc.get("command") or fallback_cmd
    cmd = re.sub(r"--out \S+", "--out DIR", cmd.replace(ROOT + "/", ""))
    return (f"Command: `{cmd}` (data: `notebooks/data/{name}`). Simulated in SimGrid "
            f"{doc['versions'].get('simgrid', '?')}, {doc['network_model']['model']} "
            f"(latency factor {doc['network_model']['latency_factor']}, bandwidth factor "
            f"{doc['network_model']['bandwidth_factor']}"
            f"{', NCCL protocol costs' if doc['network_model'].get('protocol_costs') else ''}); "
            f"kernel durations {kernels}; run on {host_text(doc)}.")


def by_cell_and_codec(rows):
    """Rows by (topology, ranks, size), then by codec."""
    by = defaultdict(dict)
    for r in rows:
        by[(r["topology"], r["ranks"], r["size_bytes"])][r["codec"]] = r
    return by


def section_whatif(name="whatif-fattree.json", title="What compression buys as the cluster grows (the main job)",
                   fallback_cmd="./scripts/run.sh (results/whatif-fattree/results.json)"):
    doc = load(name)
    out = ["## " + title, "", sim_provenance(doc, name, fallback_cmd), ""]
    rows = [r for r in doc["rows"] if not r.get("error")]
    by = by_cell_and_codec(rows)
    codecs = sorted({r["codec"] for r in rows if r["codec"] != "identity"})
    out += ["*Bound*: the speed-up the same plan would reach with its compress and decompress kernels free "
            "(the identity row's time over the compressed row's time less `codec_exposed_us`); the plans compress "
            "only what crosses the network, so it is the bound that compressing the network hops allows. "
            "*Of bound*: the speed-up reached, as a share of it. A dash where compcoll-sim does not price the "
            "codec's exposed time (calls of more than 4,000,000 ops).", ""]
    head = "| topology | ranks | size | identity busbw (GB/s) | " + " | ".join(
        f"{c} busbw | {c} speed-up | bound | of bound" for c in codecs) + " |"
    out += [head, "|" + "---|" * (4 + 4 * len(codecs))]
    for (topo, ranks, size), cs in by.items():
        ident = cs.get("identity", {})
        cells = [topo, f"{ranks:,}", f"{size:,}", fmt(ident.get("busbw_gbps"))]
        for c in codecs:
            r = cs.get(c, {})
            bound = network_bound(ident, r)
            cells += [fmt(r.get("busbw_gbps")), fmt(r.get("speedup_vs_identity"), 3), fmt(bound, 3),
                      pct_of(r.get("speedup_vs_identity"), bound)]
        out.append("| " + " | ".join(cells) + " |")
    return out


def network_bound(ident, row):
    """The speed-up of `row` over `ident` with the row's codec kernels free (None where unknown)."""
    t, exposed, t_id = row.get("time_us"), row.get("codec_exposed_us"), ident.get("time_us")
    if t is None or exposed is None or not t_id or t - exposed <= 0:
        return None
    return t_id / (t - exposed)


def pct_of(value, bound):
    return "-" if value is None or not bound else f"{100 * value / bound:.1f}%"


def section_whatif_nccl():
    """The main job's calls as NCCL runs them (nccl-like, simulated), beside the main job's plan."""
    main, name = load("whatif-fattree.json"), "whatif-fattree-nccl.json"
    doc = load(name)
    ours = by_cell_and_codec(r for r in main["rows"] if not r.get("error"))
    out = ["## The main job beside NCCL", "",
           "The main job's calls as NCCL runs them, its own algorithm choice (`nccl-like`, docs/POLICIES.md), "
           "simulated as the main job is, beside the main job's plan (hierarchical, "
           "compressed only across nodes) uncompressed and with gauss-exp. *vs NCCL*: NCCL's time over the plan's "
           "(above 1: the plan is the faster). The 16,384-GPU calls are left out: at 2,048 nodes NCCL's model picks its tree (1 MB, "
           "32 MB) and NVLS-Tree (1 GB), which nccl-like simulates with NCCL's chunks and loops, never fewer "
           "(docs/POLICIES.md): schedules far larger than the main job's (`compcoll-sim "
           "experiments/whatif-fattree.yaml --set 'policies=[nccl-like]' --plans-only` names them).", "",
           sim_provenance(doc, name, "build/sim/compcoll-sim experiments/whatif-fattree.yaml "
                                     "--set 'policies=[nccl-like]' --set 'codecs=[identity]' --out DIR"), "",
           "| topology | ranks | size | NCCL's plan | NCCL busbw (GB/s) | identity busbw | vs NCCL | "
           "gauss-exp busbw | vs NCCL |", "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        if r.get("error") or r["policy"] != "nccl-like":
            continue
        mine = ours.get((r["topology"], r["ranks"], r["size_bytes"]), {})
        cells = [r["topology"], f"{r['ranks']:,}", f"{r['size_bytes']:,}", f"`{r['algorithm']}`", fmt(r["busbw_gbps"])]
        for c in ("identity", "gauss-exp"):
            m = mine.get(c)
            cells += [fmt(m["busbw_gbps"]), f"{r['time_us'] / m['time_us']:.3f}"] if m else ["-", "-"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def section_whatif_measured():
    out = section_whatif("whatif-fattree-h200.json", "The main job with compcoll's kernels as measured",
                         "build/sim/compcoll-sim experiments/whatif-fattree.yaml "
                         "--set calibration=calibration/h200-bf16.yaml --out DIR")
    return out[:2] + ["The same job with the kernel durations compcoll's CUDA kernels took on one H200 "
                      "(calibration/h200-bf16.yaml) in place of the derived ones: the same plans, their codec paid "
                      "at the speed compcoll's kernels reach today.", ""] + out[2:]


def section_whatif_131k():
    name = "whatif-131k.json"
    out = section_whatif(name, "From 64 to 131,072 GPUs (the second job)",
                         "build/sim/compcoll-sim experiments/whatif-131k.yaml --out DIR")
    doc = load(name)
    out += ["", "The dragonflies (topologies/dragonfly-16k.yaml, dragonfly-131k.yaml) have 2 links between "
            "groups, which the recursive halving/doubling across nodes crosses with every step between groups; "
            "the rail-optimized fat trees are non-blocking.", "",
            "What each topology cost the simulator (one process, one core; the platform built once per "
            "topology, each row simulated in a process of its own):", "",
            "| topology | GPUs | platform built (s) | rows simulated (s) | simulated messages | messages per wall-second | peak memory (MiB) |",
            "|---|---|---|---|---|---|---|"]
    for t in doc["topologies"]:
        wall = t.get("calls_wall_s", 0)
        out.append(f"| {t['name']} | {t['ranks']:,} | {fmt(t.get('platform_wall_s'), 1)} | {fmt(wall, 1)} | "
                   f"{t.get('messages', 0):,} | {fmt(t.get('messages_per_wall_s'), 0)} | {t.get('peak_rss_kb', 0) // 1024:,} |")
    return out


def section_whatif_workload():
    return section_workloads("zipccl-whatif.json", "GPT-13B at 1,024 and 8,192 GPUs")


def section_edgc():
    name = "edgc-13b.json"
    doc = load(name)
    out = ["## EDGC: the entropy policy over a gradient trace", "",
           sim_provenance(doc, name, "build/sim/compcoll-sim experiments/edgc-13b.yaml --out DIR"), "",
           "Per window: the controller's rank (0: uncompressed warm-up), the iteration it gives and the "
           "compressor's measured error on the trace (docs/WORKLOADS.md).", "",
           "| window | first step | steps | entropy (bits) | rank | iteration (ms) | communication (ms) | rel. error |",
           "|---|---|---|---|---|---|---|---|"]
    for w in doc.get("workload", []):
        e = w.get("entropy")
        if not e:
            continue
        for x in e["windows"]:
            out.append(f"| {x['window']} | {x['first_step']} | {x['steps']} | {fmt(x['entropy_bits'], 3)} | {x['rank']} | "
                       f"{fmt(x['iteration_ms'])} | {fmt(x['comm_ms'])} | {fmt(x['relative_error'], 4)} |")
        run = e["run"]
        out += ["", f"The run: {fmt(run['entropy_s'], 3)} s against {fmt(run['uncompressed_s'], 3)} s uncompressed "
                    f"({fmt(run['speedup'], 3)}x); mean error after warm-up {fmt(run['mean_relative_error'], 4)}. "
                    "Fixed ranks after the same warm-up: " +
                    "; ".join(f"rank {f['rank']}: {fmt(f['seconds'], 3)} s, error {fmt(f['mean_relative_error'], 4)}"
                              for f in run.get("fixed", [])) + "."]
    return out


def regret_table(doc):
    """The run's regret summary (compcoll-sim's regret_summary) as a table."""
    out = ["| policy | cells | within 5% of the oracle | median regret | p95 | max | > 1% slower than static |",
           "|---|---|---|---|---|---|---|"]
    for p in doc.get("regret_summary", []):
        out.append(f"| {p['policy']} | {p['cells']} | {p['within_5pct']} | {fmt(p['median_regret'], 4)} | "
                   f"{fmt(p['p95_regret'], 4)} | {fmt(p['max_regret'], 4)} | {p['worse_than_static_by_1pct']} |")
    return out


def section_policies():
    name = "smoke-sim.json"
    doc = load(name)
    out = ["## Policies against the oracle (the golden experiment)", "",
           sim_provenance(doc, name, "build/sim/compcoll-sim experiments/smoke-sim.yaml --out DIR"), "",
           "Regret = a policy's time / the oracle's − 1 per cell (the oracle simulates every candidate plan); "
           "docs/POLICIES.md has the full validation grid.", ""]
    return out + regret_table(doc)


def section_workloads(name="zipccl-64gpu.json", title="Training iterations on 64 H100s", note=""):
    doc = load(name)
    out = ["## " + title, "",
           sim_provenance(doc, name, "build/sim/compcoll-sim experiments/%s.yaml --out DIR" % name[:-5]), "",
           "Speed-ups over `nccl-like` (NCCL's own choice, uncompressed, run by NCCL's kernels); docs/WORKLOADS.md "
           "explains the variants." + (" " + note if note else ""), "",
           "| model | layout | variant | iteration (ms) | communication (ms) | exposed (ms) | comm speed-up | iteration speed-up |",
           "|---|---|---|---|---|---|---|---|"]
    for w in doc.get("workload", []):
        lay = w["layout"]
        layout = f"{w['gpus']:,} GPUs: dp {lay['dp']}, tp {lay['tp']}, pp {lay['pp']}, ep {lay['ep']}"
        for i, v in enumerate(w["variants"]):
            out.append(f"| {w['model'] if i == 0 else ''} | {layout if i == 0 else ''} | {v['variant']} | "
                       f"{fmt(v['iteration_ms'])} | {fmt(v['comm_ms'])} | {fmt(v['exposed_comm_ms'])} | "
                       f"{fmt(v['comm_speedup'], 3)} | {fmt(v['iteration_speedup'], 3)} |")
    return out


def section_workloads_measured():
    return section_workloads(
        "zipccl-64gpu-h200.json", "Training iterations on 64 H100s, compcoll's kernels as measured",
        "The same study with the kernel durations an earlier generation of compcoll's CUDA kernels took on one "
        "H200 (calibration/h200.yaml, 2026-11-26: the study needs an fp32 reduce curve, which the file of the "
        "kernels of 2026-11-30, calibration/h200-bf16.yaml, lacks; docs/CALIBRATION.md) in place of the derived "
        "ones. An H200 has the H100's "
        "132 SMs and clock and 1.4x its memory bandwidth: on the bf16 curves an H100 measured from 1 MiB to 1 GiB "
        "(calibration/logs/h100-2026-11-25) took 1.00-1.07x the H200's time for gauss-exp and entropy-exp, up to "
        "1.21x for fp8-hadamard and up to 1.41x for the memory-bound copy, so an H100's reduce and copy are "
        "slower than charged here. At these kernels' "
        "speed no compressed plan pays, and compcoll's own uncompressed schedules, which reduce in a kernel "
        "launched per step, are slower than NCCL's on the dense model, where adaptive runs NCCL's own "
        "collectives (its library candidate, docs/POLICIES.md); docs/WORKLOADS.md discusses it.")


def pipeline_run(name):
    """A pipeline-dp results file: the document, its rows without errors, its sizes in order and its
    static plans (the rings, as the algorithm column names them) in the order they first appear."""
    doc = load(name)
    rows = [r for r in doc["rows"] if not r.get("error")]
    sizes = sorted({r["size_bytes"] for r in rows})
    plans = []
    for r in rows:
        if r["policy"] == "static" and r["algorithm"] not in plans:
            plans.append(r["algorithm"])
    return doc, rows, sizes, plans


def static_by_codec(rows, size, plan):
    """The static rows of `plan` at `size`, by codec."""
    return {r["codec"]: r for r in rows if r["size_bytes"] == size and r["policy"] == "static" and r["algorithm"] == plan}


def pipeline_table(name):
    """One pipeline-dp run: per size, each ring's compressed speed-up over the same ring uncompressed,
    and what adaptive ran."""
    doc, rows, sizes, chunks = pipeline_run(name)
    out = ["| size | " + " | ".join(f"{a}: uncompressed / compressed (µs), speed-up; codec exposed" for a in chunks) +
           " | adaptive: plan, time (µs) |", "|---" * (len(chunks) + 2) + "|"]
    crossover = None
    for size in sizes:
        cells = []
        for a in chunks:
            same = static_by_codec(rows, size, a)
            t = {codec: r["time_us"] for codec, r in same.items()}
            exposed = same["gauss-exp"].get("codec_exposed_us")
            shown = "-" if exposed is None else f"{exposed / t['gauss-exp']:.1%}"
            cells.append(f"{fmt(t['identity'])} / {fmt(t['gauss-exp'])}, {t['identity'] / t['gauss-exp']:.3f}x; {shown}")
        ad = [r for r in rows if r["size_bytes"] == size and r["policy"] == "adaptive"][0]
        if crossover is None and ad["codec"] != "identity":
            crossover = size
        cells.append(f"{ad['algorithm']} {ad['placement']} {ad['codec']}, {fmt(ad['time_us'])}")
        out.append(f"| {size:,} | " + " | ".join(cells) + " |")
    out += ["", "The smallest size at which adaptive compresses: " +
            (f"{crossover:,} bytes." if crossover else "none up to the largest size.")]
    return [sim_provenance(doc, name, "build/sim/compcoll-sim experiments/pipeline-dp.yaml --out DIR"), ""] + out


def crossover_rows(name):
    """A pipeline-dp sweep on a fine size grid: per ring plan, the smallest size from which its
    compressed row beats the same plan uncompressed at every larger size of the grid, and the size
    from which adaptive compresses at every larger size."""
    doc, rows, sizes, plans = pipeline_run(name)

    def from_on(pays):
        first = None
        for size in reversed(sizes):
            if not pays(size):
                break
            first = size
        return first

    def static_pays(plan, size):
        same = static_by_codec(rows, size, plan)
        return same["gauss-exp"]["time_us"] < same["identity"]["time_us"]

    adaptive = {r["size_bytes"]: r for r in rows if r["policy"] == "adaptive"}
    found = {plan: from_on(lambda size, plan=plan: static_pays(plan, size)) for plan in plans}
    found["adaptive"] = from_on(lambda size: adaptive[size]["codec"] != "identity")
    return doc, sizes, found


EXACT = ("Simulated with SimGrid's full updates at 1e-12 s (`--set network.update=full --set "
         "network.precision=1e-12`), which compcoll-sim's default lazy updates at 1e-12 match (docs/compcoll-sim.md, "
         "\"Exactness\").")


def section_whatif_nic():
    """The main job's 64-GPU calls with the network's rate per GPU lowered: where compression pays against NCCL."""
    out = ["## Where compression pays against NCCL: the network's rate", "",
           "The main job's 64-GPU calls (32 MB and 1 GB) on `h100-64gpu` as it is (one 400 Gb/s NIC per GPU) and "
           "with every network link at 200 and 100 Gb/s, the NVLink inside the nodes unchanged: NCCL's own choice "
           "(`nccl-like`), the main job's plan compressed (hierarchical, gauss-exp across nodes) and what adaptive "
           "runs. *vs NCCL*: NCCL's time over the row's. " + EXACT, ""]
    table = ["| network per GPU | size | NCCL: plan, time (µs) | main job's plan, gauss-exp (µs), vs NCCL | "
             "adaptive: plan, codec, time (µs), vs NCCL |", "|---|---|---|---|---|"]
    for gbps in (400, 200, 100):
        name = f"whatif-nic-{gbps}gbps.json"
        doc = load(name)
        out += [sim_provenance(doc, name, "build/sim/compcoll-sim experiments/whatif-fattree.yaml --out DIR"), ""]
        rows = [r for r in doc["rows"] if not r.get("error")]
        for size in sorted({r["size_bytes"] for r in rows}):
            at = [r for r in rows if r["size_bytes"] == size]
            nccl = next(r for r in at if r["policy"] == "nccl-like")
            ours = next(r for r in at if r["policy"] == "static" and r["codec"] == "gauss-exp")
            ad = next(r for r in at if r["policy"] == "adaptive")
            table.append(f"| {gbps} Gb/s | {size:,} | `{nccl['algorithm']}`, {fmt(nccl['time_us'])} | "
                         f"{fmt(ours['time_us'])}, {nccl['time_us'] / ours['time_us']:.3f} | "
                         f"`{ad['algorithm']}` {ad['placement']} {ad['codec']}, {fmt(ad['time_us'])}, "
                         f"{nccl['time_us'] / ad['time_us']:.3f} |")
    return out + table


CROSSOVER_EXPERIMENTS = [
    ("pipeline-dp", "the allreduce over one GPU of each of 8 nodes (the experiment above)",
     "the plain ring pays its codec in full; the pipelined rings hide it behind the transfers; the direct "
     "allreduce pays four batched codec launches a rank",
     [("derived kernels", "pipeline-dp-sweep.json.gz"), ("H200-measured kernels", "pipeline-dp-sweep-h200.json.gz")]),
    ("pipeline-64gpu", "the main job's plan over all 64 GPUs of `h100-64gpu` (hierarchical, recursive "
     "halving/doubling across nodes, compressed only across nodes), whole and pipelined in 2 and 4 chunks, and "
     "the same with the direct allreduce across nodes, whole and in 2 chunks",
     "each piece's codec runs while the piece before it crosses the network",
     [("derived kernels", "pipeline-64gpu-sweep.json.gz"), ("H200-measured kernels", "pipeline-64gpu-sweep-h200.json.gz")]),
]


def section_crossover():
    out = ["### The crossover size", ""]
    for experiment, what, how, names in CROSSOVER_EXPERIMENTS:
        runs = [(label, name) + crossover_rows(name) for label, name in names]
        sizes = runs[0][3]
        out += [f"`experiments/{experiment}.yaml`, {what}, on a grid of {len(sizes)} sizes, {sizes[0]:,} to "
                f"{sizes[-1]:,} bytes, each {sizes[1] / sizes[0]:.4f}x the last: the smallest size from which the "
                "compressed plan is faster than the same plan uncompressed at every larger size of the grid "
                f"({how}), and the size from which adaptive compresses at every larger size.", ""]
        for label, name, doc, _, _ in runs:
            out.append(sim_provenance(doc, name, f"build/sim/compcoll-sim experiments/{experiment}.yaml --out DIR"))
            out.append("")
        plans = list(runs[0][4])
        out += ["| plan | " + " | ".join(label for label, *_ in runs) + " |", "|---" * (len(runs) + 1) + "|"]

        def cell(size):
            if not size:
                return "none on the grid"
            return f"{size:,} bytes" + (" (the grid's largest size only)" if size == sizes[-1] else "")

        for plan in plans:
            out.append(f"| {plan} | " + " | ".join(cell(found[plan]) for *_, found in runs) + " |")
        # The first plan is the experiment's unpipelined one: the others against it.
        base = plans[0]
        ratios = []
        for label, *_, found in runs:
            others = [(found[p], p) for p in plans[1:] if p != "adaptive" and found[p]]
            if found.get(base) and others:
                at_least = "at least " if found[base] == sizes[-1] else ""
                best, plan = min(others)
                ratios.append(f"{label} {at_least}{found[base] / best:.1f}x (`{plan}`)")
            else:
                ratios.append(f"{label} not defined (" + ("no other plan crosses over on the grid)" if found.get(base)
                                                          else f"{base} does not cross over on the grid)"))
        out += ["", f"The smallest crossover of the other plans against {base}'s: smaller by " + ", ".join(ratios) + "."]
        largest = []
        for label, name, doc, _, _ in runs:
            ad = [r for r in doc["rows"] if r["policy"] == "adaptive" and r["size_bytes"] == sizes[-1] and not r.get("error")]
            if ad:
                placement = "" if ad[0]["codec"] == "identity" else f" {ad[0]['placement']}"
                largest.append(f"{label} `{ad[0]['algorithm']}`{placement} {ad[0]['codec']}")
        out += ["", f"What adaptive runs at {sizes[-1]:,} bytes: " + "; ".join(largest) + ".", ""]
    return out[:-1]


def section_pipeline():
    out = ["## Compression inside the pipeline: the data-parallel allreduce across 8 nodes", "",
           "The ring allreduce of bf16 gradients over one H100 of each of 8 nodes (one 400 Gb/s NIC each), with "
           "ZipCCL's placement, whole and pipelined in 2 and 4 chunks (each chunk's compression and decompression "
           "run while the chunk before it is on the wire), and the direct allreduce (two steps; a rank's "
           "compressions of a phase are one batched launch, its decompressions another: docs/SCHEDULES.md), each "
           "beside the same plan uncompressed; the gauss-exp ratio (0.6858) bounds the speed-up at 1.458x. *Codec exposed*: the share of the compressed row that "
           "its compress and decompress kernels add (the cost model's time for the plan less its time with them "
           "free, `codec_exposed_us`). Adaptive chooses among every candidate, NCCL's own "
           "collective included (`nccl:`). With the derived kernel durations:", ""]
    out += pipeline_table("pipeline-dp.json")
    out += ["", "With compcoll's kernels as measured on one H200:", ""]
    out += pipeline_table("pipeline-dp-h200.json")
    out += [""] + section_crossover()
    return out


def section_gpu_codecs():
    name = "calibration/logs/h200-2026-11-30/3-branch-free/codec-cuda.jsonl"
    with open(os.path.join(ROOT, name)) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    device = rows[0].get("device", "?") if rows else "?"
    out = ["## GPU codecs beside nvCOMP", "",
           "Command: the codec step of `scripts/gpu-check.sh --quick` in a bundle (docs/BUNDLE.md): "
           "`bin/compcoll-bench codec --device cuda --dtype bf16 --json` on the bundled tensor "
           "`tests/data/grad.layer1-attn-out-weight.step060.bf16.npy` and on 512 Ki to 128 Mi elements of "
           "Gaussian bf16 (`synthetic:gaussian:N`), then gauss-exp and entropy-exp with `--chunk 4096` and "
           "`--chunk 8192`, then gauss-exp with `COMPCOLL_CUDA_ENCODER=one-launch` "
           f"(data: `{name}`); measured on one {device}. Speeds in GB/s of uncompressed bytes (median), device "
           "to device; nvCOMP 6.0.0's ANS and Bitcomp on the same bytes. *decode+add*: the decoder adding into an "
           "accumulator in one kernel (`cuda_decode_add`), *reduce*: the reduce kernel alone. The bundled tensor "
           "is 128 KiB: at that size every kernel's launch and fixed cost decides the speed.", "",
           "| input | codec | chunk | ratio | encode GB/s | decode GB/s | decode+add GB/s | reduce GB/s | "
           "device copy GB/s | round trip |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = r.get("lossless_ok")
        if ok is None:
            trip = f"lossy, rel. L2 error {r['rel_l2']:.3f}" + ("" if r.get("lossy_ok") else " (NOT within its bound)")
        else:
            trip = "bit-exact" if ok else "NOT bit-exact"
        codec = r["codec"] + (" (one launch)" if r.get("cuda_encoder") == "one-launch" else "")
        chunk = f"{r['chunk_elements']:,}" if r.get("chunk_elements") and not r["codec"].startswith("nvcomp") else "-"
        out.append(f"| {os.path.basename(r['file'])} | {codec} | {chunk} | {fmt(r['ratio'], 3)} | "
                   f"{fmt(r['encode_gbps'], 1)} | {fmt(r['decode_gbps'], 1)} | {fmt(r.get('decode_add_gbps'), 1)} | "
                   f"{fmt(r.get('reduce_gbps'), 1)} | {fmt(r['memcpy_gbps'], 1)} | {trip} |")
    return out


def section_validation(stem="policy-validation-64", title="Policy validation at 8 and 64 GPUs", ranks="8, 64",
                       grid="Six topologies, allreduce, reduce-scatter, allgather and all-to-all"):
    """grid: the grid's words, or a function of the CSV's rows that returns them."""
    name = stem + ".json"
    doc = load(name)
    with open(os.path.join(DATA, stem + ".csv")) as f:
        rows = list(csv.DictReader(f))
    if callable(grid):
        grid = grid(rows)
    out = ["## " + title, "",
           sim_provenance(doc, name, f"build/sim/compcoll-sim experiments/policy-validation.yaml --set 'ranks=[{ranks}]' --out DIR"),
           f"Rows: `notebooks/data/{stem}.csv`. {grid} from 4 KB to 1 GB, identity and gauss-exp; the oracle "
           "simulates every candidate plan (docs/POLICIES.md).", ""] + regret_table(doc)
    picks = defaultdict(int)
    for r in rows:
        if r["policy"] == "adaptive":
            picks[(r["algorithm"].split(" ")[0], "compressed" if r["codec"] != "identity" else "uncompressed")] += 1
    out += ["", "What `adaptive` picks, over all cells (`nccl:`: NCCL's own collective, its library candidate): " +
            ", ".join(f"{alg} {kind} {n}" for (alg, kind), n in sorted(picks.items(), key=lambda x: -x[1])) + "."]
    # adaptive against NCCL's own choice (nccl-like, the plan adaptive's library candidate is), cell by cell.
    by_cell = defaultdict(dict)
    for r in rows:
        if r["policy"] in ("adaptive", "nccl-like") and not r["error"]:
            by_cell[(r["topology"], r["ranks"], r["collective"], r["size_bytes"])][r["policy"]] = float(r["time_us"])
    pairs = [c for c in by_cell.values() if len(c) == 2]
    if pairs:
        slower = sum(1 for c in pairs if c["adaptive"] > c["nccl-like"] * (1 + 1e-9))
        gains = sorted(c["nccl-like"] / c["adaptive"] for c in pairs)
        out += ["", f"`adaptive` against `nccl-like` (NCCL's own choice, run by NCCL's kernels) in the same cells: "
                f"slower in {slower} of {len(pairs)}; its speed-up over it {gains[0]:.3f}x to {gains[-1]:.2f}x, "
                f"median {gains[len(gains) // 2]:.3f}x."]
    return out


def section_validation_1k():
    stem = "policy-validation-1k-protocol"
    if not os.path.exists(os.path.join(DATA, stem + ".json")):
        return []
    def grid(rows):
        tops = sorted({r["topology"] for r in rows})
        colls = {t: {r["collective"] for r in rows if r["topology"] == t} for t in tops}
        out = ", ".join(f"`{t}`" for t in tops) + ", allreduce, reduce-scatter, allgather and all-to-all"
        partial = [t for t in tops if "all-to-all" not in colls[t]]
        if partial:
            out += " (" + ", ".join(f"`{t}`" for t in partial) + " without its all-to-all, not run)"
        return out
    return section_validation(stem, "Policy validation at 1,024 GPUs", "1024", grid)


def section_validation_16k():
    if not os.path.exists(os.path.join(DATA, "policy-validation-16k-protocol.json")):
        return []
    return section_validation("policy-validation-16k-protocol", "Policy validation at 16,384 GPUs", "16384",
                              "`fat-tree-16k`, allreduce, reduce-scatter and allgather (no all-to-all of 16,384 ranks "
                              "is small enough to build, docs/POLICIES.md)")


def section_codecs():
    with open(os.path.join(DATA, "codec-bench.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    try:
        host = load("codec-bench.host.json")
        simd = "AVX-512: the AVX-512 paths of gauss-exp and entropy-exp" if host.get("avx512") else "no AVX-512: the portable paths"
        machine = f"{host['cpu']}, {host['cores']} logical cores, one thread ({simd})"
    except OSError:
        machine = "host not recorded"
    out = ["## Host codecs on the bundled tensors", "",
           f"Command: `build/{' '.join(CODEC_CMD)} tests/data/*.bf16.npy` (data: "
           f"`notebooks/data/codec-bench.jsonl`); measured on {machine}. Ratio = uncompressed / compressed; "
           "speeds in GB/s of uncompressed bytes, mean over the files; zstd and lz4 on the same bytes "
           "(docs/compcoll-bench.md).", "",
           "| codec | files | ratio (mean) | encode GB/s | decode GB/s | round trip |",
           "|---|---|---|---|---|---|"]
    by = defaultdict(list)
    for r in rows:
        by[r["codec"]].append(r)
    for codec, rs in by.items():
        mean = lambda k: sum(r[k] for r in rs) / len(rs)
        ok = all(r.get("lossless_ok", True) for r in rs)
        trip = "lossy (FP8)" if codec.startswith("fp8") else "bit-exact on every file" if ok else "NOT bit-exact"
        out.append(f"| {codec} | {len(rs)} | {fmt(mean('ratio'), 4)} | {fmt(mean('encode_gbps'))} | "
                   f"{fmt(mean('decode_gbps'))} | {trip} |")
    return out


def geo_abs(errs):
    return math.exp(sum(abs(math.log1p(e)) for e in errs) / len(errs)) - 1 if errs else float("nan")


def pct(v):
    return "-" if v is None or math.isnan(v) else f"{100 * v:+.1f}%"


def repo_path(path):
    """The file as the repository names it (results files hold the absolute path they ran with)."""
    for top in ("topologies/", "calibration/", "experiments/"):
        if top in path:
            return path[path.rfind(top):]
    return path


def loop_run(name, label):
    doc = load(name)
    rows = [r for r in doc["rows"] if r.get("model_us") is not None and r["time_us"] > 0]
    errs = [r["model_err"] for r in rows]
    large = [r["model_err"] for r in rows if r["size_bytes"] >= 1 << 20]
    cmd = re.sub(r"--out \S+", "--out DIR", doc["command"].replace(ROOT + "/", ""))
    m = doc["machine"]
    cells = [c for c in doc["model_check"]["cells"] if c["model_fastest"]]
    picked = sum(c["model_fastest"] == c["fastest"] for c in cells)
    close = sum(c["model_pick_regret"] <= doc["model_check"]["ranking_tolerance"] for c in cells)
    pairs = sum(c["pairs"] for c in cells)
    agree = sum(c["pairs_agree"] for c in cells)
    env = m.get("environment", [])
    out = [f"**{label}** — command: `{cmd}`" + (f" with `{' '.join(env)}` in the environment" if env else "") +
           f" (data: `notebooks/data/{name}`); {doc['versions']['mpi']}, "
           f"run on {host_text(doc)}; topology `{repo_path(doc['topology']['file'])}`.",
           "",
           f"- model error over {len(errs)} rows: geometric mean {100 * geo_abs(errs):.1f}%; rows of 1 MiB and more: "
           f"{100 * geo_abs(large):.1f}%, {sum(abs(e) <= 0.15 for e in large)}/{len(large)} within 15%."]
    # Measured kernel times: host rows (GPU rows have none: null).
    timed = [r for r in rows if r.get("model_kernel_us") and None not in (r["codec_us"], r["reduce_us"], r["copy_us"])]
    kernels = [(r["codec_us"] + r["reduce_us"] + r["copy_us"]) / r["model_kernel_us"] for r in timed
               if r["codec_us"] + r["reduce_us"] + r["copy_us"] > 0]
    if kernels:
        out.append(f"- kernels (compress, decompress, reduce, copy) measured / calibrated: geometric mean "
                   f"{math.exp(sum(map(math.log, kernels)) / len(kernels)):.2f}x over {len(kernels)} rows.")
    for key, when in (("transport_check", "before the first row"), ("transport_check_end", "after the last row")):
        if doc.get(key):
            size = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
            pts = ", ".join(f"{size(p['bytes'])}{' (resident)' if p.get('resident') else ' (one buffer per side)' if p.get('window') == 1 else ''} {p['measured_us']:.1f} / "
                            f"{p['model_us']:.1f} us ({pct(p['err'])})" for p in doc[key])
            out.append(f"- transport check {when} (exchange measured / the model on the topology): {pts}.")
    out += [
           f"- ranking: the model's fastest plan measured fastest in {picked}/{len(cells)} cells, within 10% of it in "
           f"{close}/{len(cells)}; of the plan pairs whose measured times differ by more than 10%, {agree}/{pairs} "
           "ordered as measured.",
           ""]
    pol = defaultdict(list)
    for c in cells:
        for p, r in c["regret"].items():
            pol[p].append(r)
        pol["the model's pick"].append(c["model_pick_regret"])
    out += ["| policy | mean measured regret | max | fastest in |", "|---|---|---|---|"]
    for p, v in sorted(pol.items()):
        out.append(f"| {p} | {sum(v) / len(v):.3f} | {max(v):.3f} | {sum(x == 0 for x in v)}/{len(v)} |")
    out += ["", "| collective | codec | rows < 1 MiB: geomean error (range) | rows >= 1 MiB: geomean error (range) |",
            "|---|---|---|---|"]
    groups = defaultdict(lambda: ([], []))
    for r in rows:
        groups[(r["collective"], r["codec"])][r["size_bytes"] >= 1 << 20].append(r["model_err"])
    for (coll, codec), (small, big) in sorted(groups.items()):
        cell = lambda v: f"{100 * geo_abs(v):.1f}% ({pct(min(v))} to {pct(max(v))})" if v else "-"
        out.append(f"| {coll} | {codec} | {cell(small)} | {cell(big)} |")
    return out + [""]


def section_loop():
    out = ["## Predicted beside measured: compcoll-run on this host", "",
           "`experiments/loop-cpu.yaml` for real (MPI ranks on one host, host codecs), every row beside the time "
           "compcoll-sim's cost model gives the same plan on the topology and calibration measured on the same host "
           "(`compcoll-bench transport`, `compcoll-bench calibrate --concurrent N`). Error = model / measured - 1 "
           "(negative: the model is faster); the geometric-mean error is exp(mean |ln(model / measured)|) - 1, so a "
           "model 50% too fast counts as 100%. The VM is shared: the 2-ranks run twice shows how much the same "
           "command varies. docs/compcoll-run.md explains the misses.", ""]
    for name, label in (("loop-cpu-2.json", "2 ranks"), ("loop-cpu-2-repeat.json", "2 ranks, the same command again"),
                        ("loop-cpu-4.json", "4 ranks (oversubscribed)"),
                        ("loop-cpu-2-nocma.json", "2 ranks, Open MPI without its single-copy mechanism")):
        if os.path.exists(os.path.join(DATA, name)):
            out += loop_run(name, label)
    return out


def render():
    lines = ["# Results", "",
             "<!-- Written by tools/results_doc.py from notebooks/data; edit the data or the script, not this file. -->",
             "",
             "The figures users ask for, each from a results file in `notebooks/data` with the command that "
             "wrote it and the machine it ran on. Simulated figures use the kernel durations of the "
             "calibration they name; where that is `h100-derived.yaml` they are DERIVED, not measured on a GPU, "
             "and where it is `h200-bf16.yaml` (the kernels of 2026-11-30) or `h200.yaml` (an earlier generation) "
             "they are compcoll's kernels as measured on one H200 (docs/CALIBRATION.md). "
             "The NCCL baseline against published measurements is in docs/FIDELITY.md "
             "(`tools/fidelity_table.py`).", ""]
    for section in (section_whatif, section_whatif_nccl, section_whatif_nic, section_whatif_measured, section_whatif_131k, section_workloads, section_workloads_measured, section_whatif_workload,
                    section_pipeline, section_edgc, section_policies, section_validation, section_validation_1k,
                    section_validation_16k, section_loop, section_codecs,
                    section_gpu_codecs):
        out = section()
        if out:
            lines += out + [""]
    return "\n".join(lines)


def run_codec_bench(build):
    import glob
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.bf16.npy")))
    cmd = [os.path.join(build, CODEC_CMD[0])] + CODEC_CMD[1:] + [os.path.relpath(f, ROOT) for f in files]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    with open(os.path.join(DATA, "codec-bench.jsonl"), "w") as f:
        f.write(out)
    cpu, flags = platform.processor(), ""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
        cpu = next(l.split(":", 1)[1].strip() for l in info if l.startswith("model name"))
        flags = next(l for l in info if l.startswith("flags"))
    except (OSError, StopIteration):
        pass
    with open(os.path.join(DATA, "codec-bench.host.json"), "w") as f:
        json.dump({"cpu": cpu, "cores": os.cpu_count(), "avx512": " avx512bw" in flags}, f)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--codec-bench", metavar="BUILD_DIR")
    a = ap.parse_args()
    if a.codec_bench:
        run_codec_bench(a.codec_bench)
    text = render()
    if a.check:
        current = open(DOC).read() if os.path.exists(DOC) else ""
        if current != text:
            print("results: docs/RESULTS.md is not what notebooks/data give (run tools/results_doc.py)")
            return 1
        print("results: docs/RESULTS.md is current")
        return 0
    with open(DOC, "w") as f:
        f.write(text)
    print("results: wrote docs/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
