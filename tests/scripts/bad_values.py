#!/usr/bin/env python3
"""Figures out of the range the simulator resolves, and other bad values, in the three files a
compcoll-sim run reads: each is refused before anything runs, exit 2, with one line that names
the file and the key, and no SimGrid backtrace. (Found by fuzzing: a 1e-300GB/s link or kernel
throughput, a precision of 1e18 s or a factor of 1e-300 gave rows of absurd or collapsed times,
or rows that hung inside SimGrid.) Usage: bad_values.py BUILD_DIR; prints "# OK" when all hold."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sim = os.path.join(sys.argv[1], "sim", "compcoll-sim")
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tmp = tempfile.mkdtemp()
topo_text = open(os.path.join(root, "topologies/h100-64gpu.yaml")).read()
cal_text = open(os.path.join(root, "calibration/h100-derived.yaml")).read()
topo, cal, exp = (os.path.join(tmp, f) for f in ("topo.yaml", "cal.yaml", "exp.yaml"))
with open(exp, "w") as f:
    f.write(f"""name: bad-values
topology: {topo}
calibration: {cal}
network: {{model: lv08, latency_factor: 1.0, bandwidth_factor: 0.97, crosstraffic: false, protocol_costs: true}}
ranks: [16]
sizes: [64KB, 4MB]
calls:
  - {{collective: allreduce, algorithm: ring, dtype: bf16, tensor: grad, chunks: 2}}
  - {{collective: all-to-all, algorithm: pairwise, dtype: bf16, tensor: moe-dispatch}}
codecs: [identity, gauss-exp]
policies: [static, nccl-like, adaptive]
ratios: {{fixed: {{gauss-exp: 0.68}}}}
""")


def sub(text, old, new):
    assert old in text, old
    return text.replace(old, new, 1)


# (file the error must name, its key, topology text, calibration text, --set arguments)
cases = []
for v in ["1e-300GB/s", "0Gb/s", "-1Gb/s", "fast"]:
    cases.append((topo, "network.link.bandwidth", sub(topo_text, "bandwidth: 400Gb/s", "bandwidth: " + v), cal_text, []))
for v in ["1e30us", "-1us"]:
    cases.append((topo, "network.link.latency", sub(topo_text, "latency: 1us, efficiency: 0.92", f"latency: {v}, efficiency: 0.92"),
                  cal_text, []))
for v in ["0", "1e30", "nan"]:
    cases.append((topo, "network.link.efficiency", sub(topo_text, "efficiency: 0.92", "efficiency: " + v), cal_text, []))
for v in ["1e-300GB/s", "0GB/s"]:
    cases.append((cal, "curves.1.throughput", topo_text, sub(cal_text, "throughput: 985GB/s", "throughput: " + v), []))
cases.append((cal, "curves.1.latency", topo_text, sub(cal_text, "latency: 10us", "latency: 1e30us"), []))
cases.append((cal, "curves", topo_text, re.sub(r"\n  - \{op: reduce[^\n]*", "", cal_text), []))
for k, v in [("precision", "1e18"), ("precision", "1e-300"), ("tcp_gamma", "1e-300"), ("bandwidth_factor", "1e-300"),
             ("bandwidth_factor", "1e18"), ("latency_factor", "1e18")]:
    cases.append((exp, "network." + k, topo_text, cal_text, [f"--set=network.{k}={v}"]))

failures = 0
for where, key, t, c, sets in cases:
    open(topo, "w").write(t)
    open(cal, "w").write(c)
    p = subprocess.run([sim, exp] + sets, capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    ok = (p.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"compcoll-sim: {where}: {key}")
          and "Backtrace" not in p.stderr)
    failures += not ok
    print(("ok      " if ok else "FAILED  ") + f"{os.path.basename(where)} {key} {' '.join(sets)}: exit {p.returncode}: "
          + (" | ".join(lines)[:300] or "(no error)"))
shutil.rmtree(tmp)
print(f"{len(cases)} cases, {failures} failed")
if failures == 0:
    print("# OK")
sys.exit(1 if failures else 0)
