#!/usr/bin/env bash
# scripts/gpu-check.sh [OUT_DIR] — the checks that only a machine with an NVIDIA GPU can run, in
# one go, with one log per step under OUT_DIR (default results/gpu-check). It runs from the
# repository (it builds first) or from a relocatable bundle (scripts/bundle.sh; no build: run
# OUT/scripts/gpu-check.sh), one after the other:
#   1. build (repository only: scripts/build.sh; the dependencies must be installed: scripts/setup.sh);
#   2. the CUDA codec, lowrank and reduce kernels bit-exact against the host reference
#      (compcoll_tests "[cuda]");
#   3. the NCCL transport on one rank: CUDA codecs inside the executor, ncclAllReduce
#      (compcoll_real_tests "[nccl]" under mpirun -np 1);
#   4. compcoll-run with the nccl backend on one GPU (experiments/smoke-cpu.yaml, every row
#      checked);
#   5. compcoll-bench calibrate --device cuda -> OUT_DIR/calibration/<gpu>.yaml (h100.yaml on an
#      H100; copy it to calibration/ to feed the simulator);
#   6. compcoll-bench codec --device cuda on a bundled bf16 tensor (compcoll's codecs, and
#      nvCOMP's ANS and Bitcomp where the bench was built with nvCOMP);
#   7. a summary: GB/s of every codec at 256 MiB from that file, against the device-to-device
#      copy of the same run and the targets for gauss-exp bf16 (encode >= 600, decode >= 800),
#      as OUT_DIR/summary.txt and OUT_DIR/summary.json.
# A step whose tests report SKIPPED counts as failed: here a skip means the GPU was not used.
# Exit status: 0 every step passed, 1 some step failed, 2 no GPU (nothing run).
#
# What it needs beyond the repository's build or the bundle: the NVIDIA driver (nvidia-smi,
# libcuda), python3 (the summary), and NCCL's libnccl.so.2 for steps 3-4: the system's, or the
# nvidia-nccl-cu13 wheel (pip install nvidia-nccl-cu13; the bundle's env.sh finds it), or
# COMPCOLL_NCCL_LIB=<folder>. No network, no other package.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$PWD/results/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$here"
# From a bundle: its programs (env.sh puts them on PATH); from the repository: build/.
if [ -f env.sh ] && [ -x bin/compcoll-run ]; then
  mode=bundle
  source ./env.sh
  tests=bin/compcoll_tests real_tests=bin/compcoll_real_tests run=bin/compcoll-run bench=bin/compcoll-bench
else
  mode=repository
  tests=build/tests/compcoll_tests real_tests=build/tests/compcoll_real_tests run=build/real/compcoll-run
  bench=build/tools/compcoll-bench
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$out/gpus.txt" 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L failed); these checks need one" >&2
  exit 2
fi
cat "$out/gpus.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
# step NAME COMMAND...: runs COMMAND with its output in $out/NAME.log; a non-zero exit or a
# SKIPPED line fails the step.
step() {
  local name=$1
  shift
  printf '== %-14s %s\n' "$name" "$*"
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "   FAILED (exit $rc; $out/$name.log)"
    failed=$((failed + 1))
  elif grep -q "SKIPPED" "$out/$name.log"; then
    echo "   FAILED (a test skipped: the GPU was not used; $out/$name.log)"
    failed=$((failed + 1))
  else
    echo "   OK"
  fi
}

echo "gpu-check: from the $mode ($here); NCCL: ${COMPCOLL_NCCL_DIR:-as the build found it}"
if [ $mode = repository ]; then
  step build ./scripts/build.sh
  if [ ! -x "$tests" ]; then
    echo "gpu-check: the build failed; see $out/build.log" >&2
    exit 1
  fi
fi
gpu=$(head -1 "$out/gpus.txt" | sed -n 's/^GPU [0-9]*: \(.*\) (UUID.*$/\1/p')
slug=$(echo "$gpu" | grep -oiE 'gh200|h100|h200|b200|a100|l40s?' | head -1 | tr 'A-Z' 'a-z')
slug=${slug:-gpu}
mkdir -p "$out/calibration"
cal="$out/calibration/$slug.yaml"
step cuda-tests "$tests" "[cuda]"
step nccl-tests mpirun -np 1 "$real_tests" "[nccl]"
step run-nccl bash -c "mpirun -np 1 '$run' experiments/smoke-cpu.yaml --backend nccl \
  --set run.gpus_per_node=1 --out '$out/run-nccl' | tee /dev/stderr | grep -qx '# OK'"
step calibrate "$bench" calibrate --device cuda --out "$cal"
step codec-cuda "$bench" codec --device cuda --dtype bf16 tests/data/grad.layer1-attn-out-weight.step060.bf16.npy

if [ -f "$cal" ]; then
  python3 - "$cal" "$out/summary.json" "$gpu" <<'EOF' | tee "$out/summary.txt"
import json, re, sys
size = 268435456  # 256 MiB
rows, copy = [], None
for line in open(sys.argv[1]):
    m = re.match(r"\s*- \{op: (\w+), (?:codec: ([\w:=-]*), )?dtype: (\w+), points: (.*)\}\s*$", line)
    if not m:
        continue
    op, codec, dtype, pts = m.groups()
    codec = codec or "-"
    for b, s in re.findall(r"\[(\d+), ([0-9.eE+-]+)\]", pts):
        if int(b) == size:
            gbps = size / float(s) / 1e9
            if op == "copy":
                copy = gbps
            else:
                rows.append((codec, dtype, op, gbps))
print(f"at 256 MiB (uncompressed bytes per second); device-to-device copy {copy:.0f} GB/s" if copy else "at 256 MiB")
for codec, dtype, op, gbps in sorted(rows):
    frac = f"  {gbps / copy:5.2f} of copy" if copy else ""
    target = ""
    if codec == "gauss-exp" and dtype == "bf16" and op in ("compress", "decompress"):
        need = 600 if op == "compress" else 800
        target = f"  target >= {need}: {'met' if gbps >= need else 'NOT met'}"
    print(f"  {codec:14s} {dtype:5s} {op:10s} {gbps:8.1f} GB/s{frac}{target}")
json.dump({"gpu": sys.argv[3], "calibration": sys.argv[1], "bytes": size, "copy_gbps": copy,
           "rows": [{"codec": c, "dtype": d, "op": o, "gbps": g, "fraction_of_copy": g / copy if copy else None}
                    for c, d, o, g in sorted(rows)]},
          open(sys.argv[2], "w"), indent=1)
EOF
fi
echo "gpu-check: $failed step(s) failed; logs in $out"
[ $failed -eq 0 ]
