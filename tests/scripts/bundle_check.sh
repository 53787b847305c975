#!/usr/bin/env bash
# tests/scripts/bundle_check.sh WORKDIR — scripts/bundle.sh from the current build, then, on a
# copy of the bundle in another folder: every program, library and Open MPI / PMIx component
# resolves each library it needs inside the bundle or from glibc (NCCL and the NVIDIA driver
# excepted: the target's); no bundled program holds this source tree's path to tests/ or tools/;
# compcoll-bench reads the bundle's tensors and scripts with the source tree out of sight, with
# and without env.sh; the packed bundle is under 60 MiB; and the bundle's own test runner
# passes with a clean environment from a third folder (--quick: the build tree's ctest runs the
# [slow] cases and the whole smoke experiment).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$1
rm -rf "$work"
mkdir -p "$work"
"$root/scripts/bundle.sh" "$work/made" --no-build || { echo "FAILED: scripts/bundle.sh"; exit 1; }
cp -a "$work/made" "$work/copy"
rm -rf "$work/made"
b="$work/copy"
bad=0
while IFS= read -r f; do
  [ "$(head -c 4 "$f" | tail -c 3)" = "ELF" ] || continue
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue
    case "$name" in
      linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*|libnccl.so*|libcuda.so*) continue ;;
    esac
    case "$path" in
      "$b"/*) ;;
      *) echo "outside the bundle: ${f#"$b"/} needs $name -> $path"; bad=$((bad + 1)) ;;
    esac
  done < <(env -i ldd "$f" 2>&1)
done < <(find "$b/bin" "$b/lib" "$b/ompi" "$b/pmix" -type f)
echo "libraries resolved outside the bundle: $bad"

# The programs (not the test binaries: the runner sets their COMPCOLL_SOURCE_DIR) must not
# carry this tree's tests/ or tools/ path: on another machine it names nothing. Source file
# names (__FILE__ in error messages) are not paths a program reads.
root_re=$(printf '%s' "$root" | sed 's/[][\\.*^$()+?{}|]/\\&/g')
leaks=0
for p in compcoll-sim compcoll-run compcoll-bench; do
  while IFS= read -r s; do
    echo "build path in bin/$p: $s"
    leaks=$((leaks + 1))
  done < <(grep -aoE "$root_re/(tests|tools)(/[A-Za-z0-9_.+-]*)*" "$b/bin/$p" | grep -vE '\.(c|cc|cpp|cu|cuh|h|hpp)$' | sort -u)
done
echo "build paths in the programs: $leaks"
bad=$((bad + leaks))

# compcoll-bench from the bundle, with the source tree's tests/ and tools/ hidden (an empty
# tmpfs over each in a private mount namespace, where unshare may; else in plain sight, and
# the "# inputs:" line still tells): calibrate's tensors and the ZipNN script must be the
# bundle's, once through env.sh and once from bin/ alone.
b_real=$(cd "$b" && pwd -P)
hidden() {
  if unshare -m --propagation private true 2>/dev/null; then
    unshare -m --propagation private bash -c 'mount -t tmpfs none "$1/tests" && mount -t tmpfs none "$1/tools" && shift && exec "$@"' _ "$root" "$@"
  else
    "$@"
  fi
}
unshare -m --propagation private true 2>/dev/null && echo "source tree hidden: tests/, tools/" || echo "source tree not hidden (no unshare -m)"
mkdir -p "$work/elsewhere"
calib=(calibrate --device host --quick --max-bytes 4KiB --dtype bf16 --ops copy)
for how in env.sh bin; do
  if [ $how = env.sh ]; then
    run=(bash -c 'source "$0/env.sh" && exec compcoll-bench "$@"' "$b")
  else
    run=("$b/bin/compcoll-bench")
  fi
  log="$work/elsewhere/calibrate-$how.log"
  (cd "$work/elsewhere" && hidden env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" "${run[@]}" "${calib[@]}" --out "$work/elsewhere/calibrate-$how.yaml") >"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -qxF -e "# inputs: the tensors of $b_real/tests/data" -e "# inputs: the tensors of $b/tests/data" "$log" && grep -q "^# OK: wrote" "$log"; then
    echo "calibrate from the bundle ($how): OK"
  else
    echo "FAILED: calibrate from the bundle ($how), exit $rc:"; sed 's/^/  /' "$log"; bad=$((bad + 1))
  fi
  # --peer zipnn runs tools/zipnn_peer.py first: it must start (and may say zipnn is missing).
  out=$(cd "$work/elsewhere" && hidden env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" "${run[@]}" codec --peer zipnn --codec identity --min-time 0 synthetic:gaussian:1k 2>&1)
  rc=$?
  if [ $rc -eq 0 ] || echo "$out" | grep -q "^compcoll-bench: --peer zipnn: the zipnn Python package"; then
    echo "zipnn peer script from the bundle ($how): OK"
  else
    echo "FAILED: zipnn peer script from the bundle ($how), exit $rc:"; echo "$out" | sed 's/^/  /'; bad=$((bad + 1))
  fi
done
# gpu-check.sh --quick from the bundle where nvidia-smi answers (a stand-in) but no CUDA device
# runs: it logs the bundle's source, runs every step, reports the GPU steps failed (the [cuda]
# tests skipped, the benches without a device) and exits 1.
mkdir -p "$work/fakegpu"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-none)"\n' >"$work/fakegpu/nvidia-smi"
chmod +x "$work/fakegpu/nvidia-smi"
gc="$work/elsewhere/gpu-check"
(cd "$work/elsewhere" && env -i PATH="$work/fakegpu:/usr/bin:/bin" HOME="${HOME:-/root}" \
  bash "$b/scripts/gpu-check.sh" --quick "$gc") >"$work/elsewhere/gpu-check.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "cuda-tests" "$work/elsewhere/gpu-check.log" &&
   grep -q "FAILED (a test skipped" "$work/elsewhere/gpu-check.log" &&
   grep -qxF "$(head -1 "$b/SOURCE")" "$gc/source.txt" && [ -s "$gc/summary.txt" ]; then
  echo "gpu-check --quick from the bundle: OK"
else
  echo "FAILED: gpu-check --quick from the bundle, exit $rc:"; sed 's/^/  /' "$work/elsewhere/gpu-check.log"; bad=$((bad + 1))
fi
packed=$(tar -C "$work" -czf - copy | wc -c)
echo "packed bundle: $((packed / 1048576)) MiB"
[ "$packed" -lt $((60 * 1048576)) ] || { echo "FAILED: the packed bundle is 60 MiB or more"; bad=$((bad + 1)); }
(cd "$work/elsewhere" && env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" RESULTS="$work/elsewhere/results" bash "$b/run-tests.sh" --quick) || bad=$((bad + 1))
if [ $bad -eq 0 ]; then echo "# OK"; else echo "# FAILED"; fi
exit $((bad > 0))
