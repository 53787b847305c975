#!/usr/bin/env bash
# scripts/gpu-check.sh [OUT_DIR] — the checks that only a machine with an NVIDIA GPU can run, in
# one go, with one log per step under OUT_DIR (default results/gpu-check):
#   1. build (scripts/build.sh; the dependencies must be installed: scripts/setup.sh);
#   2. the CUDA codec, lowrank and reduce kernels bit-exact against the host reference
#      (compcoll_tests "[cuda]");
#   3. the NCCL transport on one rank: CUDA codecs inside the executor, ncclAllReduce
#      (compcoll_real_tests "[nccl]" under mpirun -np 1);
#   4. compcoll-run with the nccl backend on one GPU (experiments/smoke-cpu.yaml, every row
#      checked);
#   5. compcoll-bench calibrate --device cuda -> OUT_DIR/calibration-cuda.yaml (copy it to
#      calibration/<gpu>.yaml to feed the simulator);
#   6. a summary: GB/s of every codec at 256 MiB from that file, against the device-to-device
#      copy of the same run and the targets for gauss-exp bf16 (encode >= 600, decode >= 800).
# A step whose tests report SKIPPED counts as failed: here a skip means the GPU was not used.
# Exit status: 0 every step passed, 1 some step failed, 2 no GPU (nothing run).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/gpu-check}
mkdir -p "$out"

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

step build ./scripts/build.sh
if [ ! -x build/tests/compcoll_tests ]; then
  echo "gpu-check: the build failed; see $out/build.log" >&2
  exit 1
fi
step cuda-tests build/tests/compcoll_tests "[cuda]"
step nccl-tests mpirun -np 1 build/tests/compcoll_real_tests "[nccl]"
step run-nccl bash -c "mpirun -np 1 build/real/compcoll-run experiments/smoke-cpu.yaml --backend nccl \
  --set run.gpus_per_node=1 --out '$out/run-nccl' | tee /dev/stderr | grep -qx '# OK'"
step calibrate build/tools/compcoll-bench calibrate --device cuda --out "$out/calibration-cuda.yaml"

if [ -f "$out/calibration-cuda.yaml" ]; then
  python3 - "$out/calibration-cuda.yaml" <<'EOF' | tee "$out/summary.txt"
import re, sys
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
EOF
fi
echo "gpu-check: $failed step(s) failed; logs in $out"
[ $failed -eq 0 ]
