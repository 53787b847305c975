#!/usr/bin/env bash
# tests/scripts/bundle_check.sh WORKDIR — scripts/bundle.sh from the current build, then, on a
# copy of the bundle in another folder: every program, library and Open MPI / PMIx component
# resolves each library it needs inside the bundle or from glibc (NCCL and the NVIDIA driver
# excepted: the target's), the packed bundle is under 60 MiB, and the bundle's own test runner
# passes with a clean environment from a third folder.
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
packed=$(tar -C "$work" -czf - copy | wc -c)
echo "packed bundle: $((packed / 1048576)) MiB"
[ "$packed" -lt $((60 * 1048576)) ] || { echo "FAILED: the packed bundle is 60 MiB or more"; bad=$((bad + 1)); }
mkdir -p "$work/elsewhere"
(cd "$work/elsewhere" && env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" RESULTS="$work/elsewhere/results" bash "$b/run-tests.sh") || bad=$((bad + 1))
if [ $bad -eq 0 ]; then echo "# OK"; else echo "# FAILED"; fi
exit $((bad > 0))
