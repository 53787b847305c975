#!/usr/bin/env bash
# scripts/gpu-check.sh [--quick] [OUT_DIR] — the checks that only a machine with an NVIDIA GPU can run, in
# one go, with one log per step under OUT_DIR (default results/gpu-check). It runs from the
# repository (it builds first) or from a relocatable bundle (scripts/bundle.sh; no build: run
# OUT/scripts/gpu-check.sh), one after the other:
#   0. the source under test in OUT_DIR/source.txt: the bundle's SOURCE or
#      the checkout's commit;
#   1. build (repository only: scripts/build.sh; the dependencies must be installed: scripts/setup.sh);
#   2. the CUDA codec, lowrank and reduce kernels bit-exact against the host reference
#      (compcoll_tests "[cuda]"); where that fails or hangs, each case again in a process of
#      its own, PASS / FAIL / TIMEOUT per case in OUT_DIR/cuda-cases.log; then, where
#      compute-sanitizer is on PATH, its memcheck and racecheck on two small cases (60 s
#      each; OUT_DIR/sanitizer.log);
#   3. the NCCL transport on one rank: CUDA codecs inside the executor, a rank that sends to
#      itself (sizes, wire budgets, queued mode, the fused decode-and-add), ncclAllReduce
#      (compcoll_real_tests "[nccl]" under mpirun -np 1);
#   4. compcoll-run with the nccl backend on one GPU (experiments/smoke-cpu.yaml, every row
#      checked), and again with nvCOMP's ANS as its codec (nvcomp-ans) where libnvcomp.so.6 loads;
#   5. compcoll-bench calibrate --device cuda --data <the bundle's or repository's tests/data>
#      -> OUT_DIR/calibration/<gpu>.yaml (h100.yaml on an H100; copy it to calibration/ to feed
#      the simulator), compcoll's codecs in chunks by each stream's size (its default);
#   6. compcoll-bench codec --device cuda --json on a bundled bf16 tensor and on 4, 64 and 256
#      MiB of synthetic Gaussian bf16 (synthetic:gaussian:2M, :32M, :128M): compcoll's codecs,
#      and nvCOMP's ANS and Bitcomp where the bench has nvCOMP (`compcoll-bench version`,
#      logged first as nvcomp.log, says whether libnvcomp.so.6 loads); then gauss-exp and entropy-exp in chunks of 2,048
#      elements on the tensor and 4 MiB of Gaussian bf16 (more warps on a small call, less
#      ratio); the rows in OUT_DIR/codec-cuda.jsonl;
#   7. compcoll-bench pipeline: 4, 16, 64 and 256 MiB of Gaussian bf16 moved between two buffers
#      of the GPU over PCIe through pinned host memory, uncompressed and with gauss-exp and
#      entropy-exp (and nvcomp-ans where libnvcomp.so.6 loads) in 1, 4 and 16 pieces, each row
#      beside the model's time from step 5's calibration (pipeline.log);
#   8. a summary: GB/s of every codec at 256 MiB from the calibration file, against the
#      device-to-device copy of the same run, and the rows of step 6, as OUT_DIR/summary.txt and
#      OUT_DIR/summary.json; a WARNING (here and in summary.json's "warnings") when step 6 has
#      no nvCOMP rows; then every target of the GPU codecs, met or not, with the figures it rests
#      on (tools/gpu_targets.py: OUT_DIR/targets.log and targets.json).
# --quick: the kernels only, in a few minutes: steps 0-3 (compute-sanitizer's memcheck case
# only), then the codec bench at 1, 4, 16,
# 64 and 256 MiB of synthetic Gaussian bf16 (synthetic:gaussian:512k ... :128M) and on the
# bundled tensor, nvCOMP beside them, and gauss-exp and entropy-exp at 1, 4, 16 and 64 MiB in
# chunks of 4,096 and 8,192 elements (more warps on a small call, for 1.8% and 0.6% of ratio:
# the sizes where calibrate's chunks by the stream's size change), and gauss-exp
# with the one-launch encoder (COMPCOLL_CUDA_ENCODER=one-launch) at 1 to 256 MiB, and identity,
# gauss-exp and entropy-exp at 4, 16 and 64 MiB split into 7 messages (a direct allreduce's
# blocks to its peers on 8 ranks), coded as one batch and as 7 calls (--batch 7; the rows in
# OUT_DIR/codec-batch.jsonl); calibrate of
# bf16 only (identity, gauss-exp, entropy-exp with their decode_add curves, gauss-exp's and
# entropy-exp's batch curves of 16 messages a call, reduce, copy, and
# nvCOMP's ANS with its ratios where libnvcomp.so.6 loads; 4 KiB to 256 MiB, --quick)
# into OUT_DIR/calibration/<gpu>-bf16-quick.yaml; where Nsight
# Compute's `ncu` is on PATH, the GPU time of every kernel launch of one gauss-exp, entropy-exp,
# identity and fp8-hadamard encode and decode of 4 MiB (ncu --metrics gpu__time_duration.sum,
# ncu.log), and gauss-exp's measure, emit and decode kernels on 256 MiB with the sections that
# say what bounds them (ncu-256.log); and
# the pipeline of step 7 (with the quick calibration); and the summary (at 256 MiB from the quick
# calibration; calibrate's batch curves at 4, 16 and 256 MiB against one call of their bytes;
# the batches of 7 of codec-batch.jsonl as a multiple of one call, measured and as the
# simulator prices them from the batch curves of 16).
# Either way, where cuobjdump is on PATH, the instructions of the codec kernels' lane loops in
# the bench's sm_90 code (tools/sass_loops.py: gauss-exp's and entropy-exp's bf16 decoders,
# the bf16 encoder's emit loop; sass.log).
# Each step runs under `timeout` (the limits below: 22 minutes in all, --quick 16), and all
# of them after the build (which gets 30 minutes) within GPU_CHECK_BUDGET seconds (default 540
# with --quick, 1,500 without): a step's limit is cut to what is left of it, a step with
# nothing left fails unrun, so a hang cannot take a short loan of a GPU whole (the summary
# runs whatever is left). From a bundle on one H200 the whole check took 6.4 minutes, 6 of
# them calibrate (calibration/logs/h200-2026-11-26/). A step counts as failed when it exits
# non-zero (the summary included), runs out of time, or has a test that reports SKIPPED (here
# a skip means the GPU was not used; the [cuda][nvcomp] cases are left out where
# libnvcomp.so.6 does not load). Where no ssh or rsh is on PATH, mpirun runs with
# OMPI_MCA_plm=isolated (Open MPI refuses to start otherwise, even one local rank).
# Exit status: 0 every step passed, 1 some step failed, 2 no GPU (nothing run).
#
# What it needs beyond the repository's build or the bundle, on a machine with no network:
#   - the NVIDIA driver (nvidia-smi, libcuda.so.1);
#   - glibc >= 2.36 (the bundle's libstdc++ and programs come from a Debian 12 build;
#     ldd --version);
#   - NCCL's libnccl.so.2 for steps 3-4: the bundle's own (scripts/bundle.sh --with-nvidia-libs),
#     the system's, the nvidia-nccl-cu13 wheel (pip install nvidia-nccl-cu13; env.sh finds it
#     through python3), or COMPCOLL_NCCL_LIB=<folder>;
#   - nvCOMP's libnvcomp.so.6 for the yardstick rows of step 6 (without it the step passes with
#     compcoll's rows and a warning): the bundle's own (--with-nvidia-libs), the
#     nvidia-libnvcomp-cu13 wheel, or COMPCOLL_NVCOMP_LIB=<folder>;
#   - python3 with its standard library only (the summary; env.sh's look-up of the wheels);
#   - coreutils (timeout).
# No other package.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
out=${1:-$PWD/results/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$here"
# From a bundle: its programs (env.sh puts them on PATH); from the repository: build/.
if [ -f env.sh ] && [ -x bin/compcoll-bench ]; then
  mode=bundle
  source ./env.sh
  tests=bin/compcoll_tests real_tests=bin/compcoll_real_tests run=bin/compcoll-run bench=bin/compcoll-bench
else
  mode=repository
  tests=build/tests/compcoll_tests real_tests=build/tests/compcoll_real_tests run=build/real/compcoll-run
  bench=build/tools/compcoll-bench
fi
# The tensors: env.sh's (a bundle's own, or the checkout's beside a bundle made --gpu-check),
# else the repository's.
data=${COMPCOLL_TEST_DATA_DIR:-$here/tests/data}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$out/gpus.txt" 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L failed); these checks need one" >&2
  exit 2
fi
cat "$out/gpus.txt"
# Which source the kernels under test come from: the bundle's SOURCE, or the checkout's commit.
if [ "$mode" = bundle ]; then
  cat SOURCE >"$out/source.txt" 2>/dev/null || echo "unknown (the bundle has no SOURCE)" >"$out/source.txt"
else
  { git rev-parse HEAD; git diff --quiet HEAD -- || echo "with uncommitted changes"; } >"$out/source.txt" 2>&1
fi
echo "source: $(head -1 "$out/source.txt")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's mpirun refuses to start, even one local rank, where it finds no ssh or rsh to
# launch remote ones with: all ranks here are local.
command -v ssh >/dev/null 2>&1 || command -v rsh >/dev/null 2>&1 || export OMPI_MCA_plm=isolated
failed=0
# step NAME SECONDS COMMAND...: runs COMMAND under `timeout SECONDS` (at most what is left of
# the check's budget, below), its output in $out/NAME.log (its stdin the step's); a non-zero
# exit, running out of time or a SKIPPED line fails the step, and so does a step the budget
# has no time left for (not run).
deadline=
left() { echo $((deadline - SECONDS)); }
step() {
  local name=$1 limit=$2
  shift 2
  printf '== %-14s %s\n' "$name" "$*"
  if [ -n "$deadline" ]; then
    if [ "$(left)" -le 10 ]; then
      echo "   FAILED (not run: the check's $budget s are spent)"
      failed=$((failed + 1))
      return
    fi
    [ "$limit" -gt "$(left)" ] && limit=$(left)
  fi
  timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "   FAILED (timed out after $limit s; $out/$name.log)"
    failed=$((failed + 1))
  elif [ $rc -ne 0 ]; then
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
  step build 1800 ./scripts/build.sh
  if [ ! -x "$tests" ]; then
    echo "gpu-check: the build failed; see $out/build.log" >&2
    exit 1
  fi
fi
# Every step after the build within GPU_CHECK_BUDGET seconds (default 540 with --quick, 1,500
# without), so that a hang cannot take a short loan of a GPU whole: each step's limit is cut to
# what is left, and a step with nothing left fails unrun.
budget=${GPU_CHECK_BUDGET:-$([ $quick = 1 ] && echo 540 || echo 1500)}
deadline=$((SECONDS + budget))
gpu=$(head -1 "$out/gpus.txt" | sed -n 's/^GPU [0-9]*: \(.*\) (UUID.*$/\1/p')
slug=$(echo "$gpu" | grep -oiE 'gh200|h100|h200|b200|a100|l40s?' | head -1 | tr 'A-Z' 'a-z')
slug=${slug:-gpu}
mkdir -p "$out/calibration"
cal="$out/calibration/$slug.yaml"
[ $quick = 1 ] && cal="$out/calibration/$slug-bf16-quick.yaml"
codec_rows="$out/codec-cuda.jsonl"
batch_rows="$out/codec-batch.jsonl"
# The limits, in seconds, together 22 minutes (--quick: 16; compute-sanitizer's two cases
# 2 of them). calibrate took 360 s on one
# H200 (the default sizes, 4 KiB to 1 GiB); its limit leaves a third more.
# Whether nvCOMP loads (its cases of [cuda] and the yardstick rows need it): nvcomp.log.
timeout 30 "$bench" version >"$out/nvcomp.log" 2>&1
grep '^nvcomp:' "$out/nvcomp.log" | sed 's/^/   /'
cuda_spec="[cuda]"
if ! grep -q '^nvcomp: loaded' "$out/nvcomp.log"; then
  cuda_spec="[cuda]~[nvcomp]"  # their SKIPPED would fail the step for want of a library, not of the GPU
  echo "   (libnvcomp.so.6 does not load: the [cuda][nvcomp] cases are not run)"
fi
# A test spec for one case: Catch2 reads , [ ] * ~ " and \ in a spec; escaped, the name
# matches itself only.
spec_of() { printf '%s' "$1" | sed 's/[],[\\*~"]/\\&/g'; }
step cuda-tests 150 "$tests" "$cuda_spec"
# Where the [cuda] cases failed or hung, each case again in a process of its own (a kernel
# fault poisons the CUDA context of every later case in its process; a hang takes the step's
# whole time): OUT_DIR/cuda-cases.log names each case PASS, FAIL or TIMEOUT, and
# cuda-case-N.log holds its output.
if ! grep -q "^All tests passed" "$out/cuda-tests.log" 2>/dev/null; then
  : >"$out/cuda-cases.log"
  n=0
  while IFS= read -r name; do
    n=$((n + 1))
    limit=45
    [ "$limit" -gt "$(left)" ] && limit=$(left)
    if [ "$limit" -le 5 ]; then
      printf '%-8s %2d  %s\n' "NOT RUN" "$n" "$name" >>"$out/cuda-cases.log"
      continue
    fi
    timeout -k 5 "$limit" "$tests" -w NoTests "$(spec_of "$name")" >"$out/cuda-case-$n.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q "SKIPPED" "$out/cuda-case-$n.log"; then verdict=PASS
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict=TIMEOUT
    else verdict=FAIL; fi
    printf '%-8s %2d  %s\n' "$verdict" "$n" "$name" >>"$out/cuda-cases.log"
  done < <(timeout 30 "$tests" "$cuda_spec" --list-test-names-only 2>/dev/null | grep -v '^$')
  sed 's/^/   /' "$out/cuda-cases.log"
fi
# compute-sanitizer (where it is on PATH), on two small [cuda] cases, 60 s each: memcheck on
# the damaged streams (every decode error path) and racecheck on the unaligned pointers (the
# windowed kernels' shared memory). OUT_DIR/sanitizer.log: CLEAN, ERRORS (the step fails),
# TIMEOUT or UNSUPPORTED (the tool cannot use this device) per case.
if command -v compute-sanitizer >/dev/null 2>&1; then
  : >"$out/sanitizer.log"
  sanitizer_errors=0
  pairs=("memcheck|cuda: damaged streams give per-chunk errors, never a crash")
  # --quick: memcheck only (each case may take its whole minute under the tool).
  [ $quick = 1 ] || pairs+=("racecheck|cuda: element-aligned input, unaligned stream and output pointers")
  for pair in "${pairs[@]}"; do
    tool=${pair%%|*} name=${pair#*|}
    limit=60
    [ "$limit" -gt "$(left)" ] && limit=$(left)
    [ "$limit" -le 5 ] && { printf '%-11s %-9s %s\n' "NOT RUN" "$tool" "$name" >>"$out/sanitizer.log"; continue; }
    # -w NoTests: a spec that matches no case fails (a clean verdict on nothing run is none).
    timeout -k 5 "$limit" compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" -w NoTests "$(spec_of "$name")" \
      >"$out/sanitizer-$tool.log" 2>&1
    rc=$?
    if grep -q "Device not supported" "$out/sanitizer-$tool.log"; then verdict=UNSUPPORTED
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict=TIMEOUT
    elif [ $rc -eq 0 ]; then verdict=CLEAN
    else verdict=ERRORS; sanitizer_errors=1; fi
    printf '%-11s %-9s %s\n' "$verdict" "$tool" "$name" >>"$out/sanitizer.log"
  done
  sed 's/^/   /' "$out/sanitizer.log"
  [ $sanitizer_errors = 1 ] && { echo "   FAILED (compute-sanitizer found errors; $out/sanitizer-*.log)"; failed=$((failed + 1)); }
else
  echo "   (no compute-sanitizer on PATH: no memory or race check)"
fi
if [ $quick = 1 ]; then
  # NCCL's transfers on one GPU: the executor's one-rank cases, the rank sending to itself at
  # exact sizes, within wire budgets, queued and fused (seconds).
  step nccl-tests 60 mpirun -np 1 "$real_tests" "[nccl]"
  # Every command of the step runs (the rows of one do not wait on another); it fails if any did.
  step codec-cuda 200 bash -c "rc=0; '$bench' codec --device cuda --dtype bf16 --json \
    '$data/grad.layer1-attn-out-weight.step060.bf16.npy' synthetic:gaussian:512k synthetic:gaussian:2M \
    synthetic:gaussian:8M synthetic:gaussian:32M synthetic:gaussian:128M >'$codec_rows' || rc=1; \
    for chunk in 4096 8192; do '$bench' codec --device cuda --dtype bf16 --json --chunk \$chunk \
      --codec gauss-exp,entropy-exp synthetic:gaussian:512k synthetic:gaussian:2M synthetic:gaussian:8M \
      synthetic:gaussian:32M >>'$codec_rows' || rc=1; done; \
    COMPCOLL_CUDA_ENCODER=one-launch '$bench' codec --device cuda --dtype bf16 --json --codec gauss-exp \
      synthetic:gaussian:512k synthetic:gaussian:2M synthetic:gaussian:8M synthetic:gaussian:32M \
      synthetic:gaussian:128M >>'$codec_rows' || rc=1; \
    '$bench' codec --device cuda --dtype bf16 --json --batch 7 --chunk auto --codec identity,gauss-exp,entropy-exp \
      synthetic:gaussian:2M synthetic:gaussian:8M synthetic:gaussian:32M >'$batch_rows' || rc=1; exit \$rc"
  quick_codecs=identity,gauss-exp,entropy-exp
  grep -q '^nvcomp: loaded' "$out/nvcomp.log" && quick_codecs+=,nvcomp-ans
  step calibrate 120 "$bench" calibrate --device cuda --quick --dtype bf16 --codec "$quick_codecs" \
    --max-bytes 256MiB --data "$data" --out "$cal"
  if command -v ncu >/dev/null 2>&1; then
    step ncu 90 bash -c "for c in gauss-exp entropy-exp identity fp8-hadamard; do \
      ncu --metrics gpu__time_duration.sum '$bench' codec --device cuda --dtype bf16 --min-time 0 --codec \$c \
        synthetic:gaussian:2M || exit 1; done"
    # Where a large call's time goes: gauss-exp's measure, emit and decode kernels on 256 MiB
    # of Gaussian bf16, one launch each, with the sections that say whether a kernel waits on
    # memory, on its instruction issue or on its dependencies (ncu-256.log).
    step ncu-256 90 bash -c "for k in measure_kernel emit_kernel 'decode_kernel.*StoreElement'; do \
      ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
        --kernel-name-base demangled -k regex:\"\$k\" -c 1 '$bench' codec --device cuda --dtype bf16 \
        --min-time 0 --codec gauss-exp synthetic:gaussian:128M || exit 1; done"
  else
    echo "   (no ncu on PATH: no per-kernel times)"
  fi
else
  step nccl-tests 90 mpirun -np 1 "$real_tests" "[nccl]"
  # run.timeout_s under the step's limit: a hang is named by compcoll-run's watchdog (the row).
  step run-nccl 90 bash -c "o=\$(mpirun -np 1 '$run' experiments/smoke-cpu.yaml --backend nccl \
    --set run.gpus_per_node=1 --set run.timeout_s=45 --out '$out/run-nccl' 2>&1); rc=\$?; echo \"\$o\"; [ \$rc = 0 ] && grep -qx '# OK' <<<\"\$o\""
  # nvcomp-ans inside the same plans (its ratio fixed: the model column only needs one).
  if grep -q '^nvcomp: loaded' "$out/nvcomp.log"; then
    step run-nccl-nvcomp 60 bash -c "o=\$(mpirun -np 1 '$run' experiments/smoke-cpu.yaml --backend nccl \
      --set run.gpus_per_node=1 --set run.timeout_s=45 --set 'codecs=[identity, nvcomp-ans]' \
      --set 'ratios.fixed={nvcomp-ans: 0.7}' \
      --out '$out/run-nccl-nvcomp' 2>&1); rc=\$?; echo \"\$o\"; [ \$rc = 0 ] && grep -qx '# OK' <<<\"\$o\""
  fi
  step calibrate 480 "$bench" calibrate --device cuda --data "$data" --out "$cal"
  step codec-cuda 150 bash -c "rc=0; '$bench' codec --device cuda --dtype bf16 --json \
    '$data/grad.layer1-attn-out-weight.step060.bf16.npy' synthetic:gaussian:2M synthetic:gaussian:32M \
    synthetic:gaussian:128M >'$codec_rows' || rc=1; \
    '$bench' codec --device cuda --dtype bf16 --json --chunk 2048 --codec gauss-exp,entropy-exp \
    '$data/grad.layer1-attn-out-weight.step060.bf16.npy' synthetic:gaussian:2M >>'$codec_rows' || rc=1; exit \$rc"
fi
# The lane loops of the kernels under test, as the sm_90 code in the bench has them (docs/
# CALIBRATION.md counts them so): instructions of gauss-exp's and entropy-exp's bf16 decode loops
# and of the bf16 encoder's lane loop, beside this run's speeds.
if command -v cuobjdump >/dev/null 2>&1; then
  step sass 60 bash -c "t=\$(mktemp) && cuobjdump -sass '$bench' >\"\$t\" || { rm -f \"\$t\"; exit 1; }; rc=0; \
    for spec in 'decode_kernelILNS0_4KindE0ENS_7expbits10Bf16LayoutENS3_12StoreElement 0xffc' \
                'decode_kernelILNS0_4KindE1ENS_7expbits10Bf16LayoutENS3_12StoreElement 0xffc' \
                'emit_kernelILNS0_4KindE0ENS_7expbits10Bf16 0x3fc'; do \
      set -- \$spec; python3 '$here/tools/sass_loops.py' \"\$t\" --arch sm_90 --kernel \$1 --marker \$2 || rc=1; done; \
    rm -f \"\$t\"; exit \$rc"
else
  echo "   (no cuobjdump on PATH: no lane-loop counts)"
fi
# A message over PCIe on this GPU, uncompressed and compressed with the kernels beside the
# copies, each row beside the model's figure from the calibration just written (without one, the
# compressed rows have no model figure).
pipeline_cal=()
[ -s "$cal" ] && pipeline_cal=(--calibration "$cal")
pipeline_codecs=gauss-exp,entropy-exp
grep -q '^nvcomp: loaded' "$out/nvcomp.log" && pipeline_codecs+=,nvcomp-ans
step pipeline 120 "$bench" pipeline --dtype bf16 --codec "$pipeline_codecs" --pieces 1,4,16 \
  ${pipeline_cal[@]+"${pipeline_cal[@]}"} synthetic:gaussian:2M synthetic:gaussian:8M synthetic:gaussian:32M synthetic:gaussian:128M
if ! grep -q '"codec": "nvcomp-' "$codec_rows" 2>/dev/null; then
  echo "   WARNING: no nvCOMP rows from codec-cuda ($(grep -m1 '^nvcomp:' "$out/nvcomp.log" || echo "compcoll-bench version failed; $out/nvcomp.log"))"
fi

deadline=  # the summary reads what the steps left, whatever the time
step summary 60 python3 - "$cal" "$codec_rows" "$out/summary.json" "$out/summary.txt" "$gpu" "$here/tools" "$batch_rows" <<'EOF'
import json, os, re, sys
cal, codec_rows, json_out, txt_out, gpu, tools, batch_rows = sys.argv[1:8]
sys.path.insert(0, tools)
import gpu_targets  # its reader of calibration files, which the targets step uses too
size = 268435456  # 256 MiB
lines, warnings = [], []
rows, copy = [], None
curves, batch_curves = {}, {}
if os.path.exists(cal):
    try:
        curves, _ = gpu_targets.read_calibration(cal)
    except SystemExit as e:  # a file it cannot read: said, and the rest of the summary still written
        warnings.append(str(e))
if curves:
    for (op, codec, dtype), points in curves.items():
        if size in points:
            gbps = gpu_targets.gbps(size, points[size])
            if op == "copy":
                copy = gbps
            else:
                rows.append((codec, dtype, op, gbps))
    lines.append(f"calibrate at 256 MiB (uncompressed bytes per second); device-to-device copy {copy:.0f} GB/s"
                 if copy else "calibrate at 256 MiB")
    cal_lines = open(cal).read().splitlines()
    chunk = next((l.split(":", 1)[1].strip() for l in cal_lines if l.startswith("chunk_elements:")), "16384")
    lines.append(f"  compcoll's codecs in chunks of {chunk} elements" + (" (by each stream's size)" if chunk == "auto" else ""))
    for codec, dtype, op, gbps in sorted(rows):
        frac = f"  {gbps / copy:5.2f} of copy" if copy else ""
        lines.append(f"  {codec:14s} {dtype:5s} {op:10s} {gbps:8.1f} GB/s{frac}")
    # The ratios calibrate measured with a GPU library's codec (nvcomp-ans), per dtype and kind.
    for line in cal_lines:
        m = re.match(r"\s*- \{codec: ([\w-]+), dtype: (\w+), tensor: ([^,]+), ratio: ([0-9.eE+-]+), bytes: (\d+)\}\s*$", line)
        if m:
            c, d, t, r, b = m.groups()
            lines.append(f"  ratio {c} {d} {t}: {float(r):.5f} (x{1 / float(r):.3f} smaller) on {b} bytes")
    # A batch of 16 messages in one call against one call of the same bytes (batch_curves): what
    # the simulator prices the schedules' batches by.
    try:
        batch_curves, _ = gpu_targets.read_calibration(cal, batches=True)
    except SystemExit as e:
        batch_curves = {}
        warnings.append(str(e))
    if batch_curves:
        lines.append("calibrate's batch curves: a batch in one call, against one call of the same bytes")
        for (op, codec, dtype, k), points in sorted(batch_curves.items()):
            single = curves.get((op, codec, dtype), {})
            for b in (4 << 20, 16 << 20, 256 << 20):
                if b in points and b in single:
                    lines.append(f"  {codec:14s} {dtype:5s} {op:10s} {k} messages at {b >> 20:3d} MiB: "
                                 f"{points[b] * 1e6:9.1f} us, one call {single[b] * 1e6:9.1f} us "
                                 f"(x{points[b] / single[b]:.2f})")
elif not os.path.exists(cal):
    warnings.append(f"no calibration file ({cal}): see calibrate.log")
codec = []
if os.path.exists(codec_rows):
    codec = [json.loads(l) for l in open(codec_rows) if l.startswith("{")]
if not codec:
    warnings.append("no rows from codec --device cuda: see codec-cuda.log")
elif not any(r["codec"].startswith("nvcomp-") for r in codec):
    warnings.append("no nvCOMP rows from codec --device cuda: see nvcomp.log (libnvcomp.so.6 not loadable, "
                    "or a compcoll-bench built without nvCOMP)")
if codec:
    lines.append("codec --device cuda (median GB/s of uncompressed bytes; memcpy = device to device)")
    for r in codec:
        check = r.get("lossy_ok") if r.get("lossless_ok") is None else r["lossless_ok"]
        chunk = r.get("chunk_elements")
        enc = r.get("cuda_encoder", "-") if r["codec"] == "gauss-exp" else "-"
        fused = ""
        if r.get("decode_add_gbps") and r.get("reduce_gbps") and r.get("decode_gbps"):
            apart = 1 / (1 / r["decode_gbps"] + 1 / r["reduce_gbps"])
            fused = f"  dec+add {r['decode_add_gbps']:8.1f} (apart {apart:8.1f})"
        lines.append(f"  {os.path.basename(r['file'])[:40]:40s} {r['codec']:16s} {enc:10s} chunk {chunk or '-':>5} ratio {r['ratio']:6.3f}"
                     f"  enc {r['encode_gbps']:8.1f}  dec {r['decode_gbps']:8.1f}  memcpy {r['memcpy_gbps']:7.1f}"
                     f"  {'-' if check is None else ('OK' if check else 'FAILED')}{fused}")
batch = [json.loads(l) for l in open(batch_rows) if l.startswith("{")] if os.path.exists(batch_rows) else []
if batch:
    lines.append("codec --device cuda --batch (median GB/s of the uncompressed bytes of all the messages)")
    for r in batch:
        if "batch_messages" not in r:
            continue
        k = r["batch_messages"]
        lines.append(f"  {os.path.basename(r['file'])[:40]:40s} {r['codec']:16s} chunk {r.get('chunk_elements') or '-':>5}"
                     f"  {k} messages: one batch enc {r['batch_encode_gbps']:8.1f} dec {r['batch_decode_gbps']:8.1f}"
                     f"  {k} calls enc {r['calls_encode_gbps']:8.1f} dec {r['calls_decode_gbps']:8.1f}"
                     f"  {'OK' if r.get('lossless_ok') else 'FAILED'}")
    # The simulator's price of these batches (docs/CALIBRATION.md, "Batches": a call of k messages
    # costs the single call plus (k - 1) / (m - 1) of what calibrate's batch of m adds), as a
    # multiple of one call of the same bytes, beside the rows' own batch / one call (the rows
    # time Gaussian data, calibrate the bundled tensors: the multiples compare, not the times).
    checks = []
    for r in batch:
        k, dt = r.get("batch_messages"), r.get("dtype")
        b = r.get("elements", 0) * {"bf16": 2, "fp16": 2, "fp32": 4}.get(dt, 0)
        for op, key, single_key in (("compress", "batch_encode_gbps", "encode_gbps"),
                                    ("decompress", "batch_decode_gbps", "decode_gbps")):
            curve = [(m, pts) for (o, c, d, m), pts in batch_curves.items() if (o, c, d) == (op, r["codec"], dt)]
            one = curves.get((op, r["codec"], dt), {})
            if not k or not curve or b not in one or b not in curve[0][1] or not r.get(key) or not r.get(single_key):
                continue
            m, pts = curve[0]
            model = 1 + (k - 1) / (m - 1) * (pts[b] / one[b] - 1)
            measured = r[single_key] / r[key]
            checks.append(f"  {r['codec']:14s} {dt:5s} {op:10s} {k} messages at {b >> 20:3d} MiB: x{measured:.2f} one call "
                          f"measured, x{model:.2f} priced from the batch of {m} ({100 * (model / measured - 1):+.1f}%)")
    if checks:
        lines.append("batches priced from calibrate's batch curves against the rows above (time of the batch / one call of its bytes)")
        lines += checks
lines += [f"WARNING: {w}" for w in warnings]
open(txt_out, "w").write("\n".join(lines) + "\n")
json.dump({"gpu": gpu, "calibration": cal if os.path.exists(cal) else None, "bytes": size, "copy_gbps": copy,
           "rows": [{"codec": c, "dtype": d, "op": o, "gbps": g, "fraction_of_copy": g / copy if copy else None}
                    for c, d, o, g in sorted(rows)],
           "codec_rows": codec, "batch_rows": batch, "warnings": warnings},
          open(json_out, "w"), indent=1)
EOF
[ -f "$out/summary.txt" ] && cat "$out/summary.txt"
# The targets of the GPU codecs, met or not, from the same calibration and codec rows.
# Without the codec step's rows, the targets that rest on them read `not measured`.
if [ -s "$cal" ]; then
  target_rows=()
  [ -s "$codec_rows" ] && target_rows=(--codec-rows "$codec_rows")
  step targets 30 python3 "$here/tools/gpu_targets.py" --calibration "$cal" \
    ${target_rows[@]+"${target_rows[@]}"} --json "$out/targets.json"
  cat "$out/targets.log"
fi
echo "gpu-check: $failed step(s) failed; logs in $out"
[ $failed -eq 0 ]
