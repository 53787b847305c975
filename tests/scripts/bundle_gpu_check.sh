#!/usr/bin/env bash
# tests/scripts/bundle_gpu_check.sh WORKDIR — scripts/bundle.sh --gpu-check from the current
# build, unpacked at the root of a stand-in checkout (its tests/data only): it holds the four
# programs gpu-check runs and nvCOMP, not compcoll-sim or SimGrid; its tests/data link reaches
# the checkout's tensors; its own test runner (--quick) passes with a clean environment from
# another folder; and gpu-check --quick, where nvidia-smi answers (a stand-in) but no CUDA device runs,
# runs every step on the checkout's tensors, every program taking its arguments, and reports
# the GPU steps failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$1
rm -rf "$work"
mkdir -p "$work/checkout/tests" "$work/elsewhere" "$work/fakegpu"
cp -r "$root/tests/data" "$work/checkout/tests/"
b="$work/checkout/gpu-bundle"
"$root/scripts/bundle.sh" "$b" --no-build --gpu-check >"$work/bundle.log" 2>&1 || {
  echo "FAILED: scripts/bundle.sh --gpu-check"; cat "$work/bundle.log"; exit 1; }
bad=0
programs=$(cd "$b/bin" && ls | tr '\n' ' ')
echo "programs: $programs"
[ "$programs" = "compcoll-bench compcoll-run compcoll_real_tests compcoll_tests " ] || { echo "FAILED: programs"; bad=$((bad + 1)); }
if ls "$b/lib" | grep -q simgrid; then echo "FAILED: SimGrid in the bundle"; bad=$((bad + 1)); fi
[ -e "$b/lib/nvidia/libnvcomp.so.6" ] || { echo "FAILED: no libnvcomp.so.6"; bad=$((bad + 1)); }
[ -e "$b/tests/data/grad.layer1-attn-out-weight.step060.bf16.npy" ] || { echo "FAILED: tests/data does not reach the checkout's"; bad=$((bad + 1)); }
(cd "$work/elsewhere" && env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" RESULTS="$work/elsewhere/tests" \
  bash "$b/run-tests.sh" --quick) >"$work/run-tests.log" 2>&1
if grep -q "^bundle tests: all passed" "$work/run-tests.log" && ! grep -q "sim-" "$work/run-tests.log"; then
  echo "bundle tests: all passed"
else
  echo "FAILED: run-tests.sh"; sed 's/^/  /' "$work/run-tests.log"; bad=$((bad + 1))
fi
printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-none)"\n' >"$work/fakegpu/nvidia-smi"
chmod +x "$work/fakegpu/nvidia-smi"
(cd "$work/elsewhere" && env -i PATH="$work/fakegpu:/usr/bin:/bin" HOME="${HOME:-/root}" \
  bash "$b/scripts/gpu-check.sh" --quick "$work/elsewhere/gc") >"$work/gpu-check.log" 2>&1
rc=$?
# Every program gpu-check ran took its arguments: where it failed, it failed for want of a GPU.
if grep -l "usage:" "$work/elsewhere/gc/"*.log >/dev/null 2>&1; then
  echo "FAILED: a gpu-check step's program refused its arguments:"
  grep -B1 -A1 "usage:" "$work/elsewhere/gc/"*.log | sed 's/^/  /'
  bad=$((bad + 1))
fi
if [ $rc -eq 1 ] && grep -q "FAILED (a test skipped" "$work/gpu-check.log" &&
   grep -q "== nccl-tests" "$work/gpu-check.log" && grep -qF "$b/tests/data/grad" "$work/gpu-check.log" &&
   [ -s "$work/elsewhere/gc/summary.txt" ]; then
  echo "gpu-check --quick from the bundle: OK"
else
  echo "FAILED: gpu-check --quick from the bundle, exit $rc:"; sed 's/^/  /' "$work/gpu-check.log"; bad=$((bad + 1))
fi
[ $bad -eq 0 ] && echo "# OK" || echo "# FAILED: $bad"
