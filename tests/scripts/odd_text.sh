#!/usr/bin/env bash
# tests/scripts/odd_text.sh BUILD_DIR — text that is not UTF-8, or would drive a terminal, on
# the way into and out of compcoll-sim: an experiment file and an output folder whose names are
# not UTF-8 still give a results.json that parses (the bytes replaced), an experiment holding a
# byte that is not UTF-8 is refused in one line naming its line, and a key holding an escape
# sequence is named with the escape made harmless. Prints "# OK" when all hold.
set -uo pipefail
sim=$1/sim/compcoll-sim
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
small=(--set 'topology=[topologies/dgx-h100.yaml]' --set 'sizes=[64KB]' --set 'policies=[static]')
cd "$root"
odd_exp="$tmp/smoke"$'\xff'".yaml"
sed "s|tests/data|$root/tests/data|; s|topologies/|$root/topologies/|g; s|calibration/|$root/calibration/|" \
  experiments/smoke-sim.yaml >"$odd_exp"
out="$tmp/results"$'\xfe'
"$sim" "$odd_exp" "${small[@]}" --out "$out" >/dev/null || fail "a run named in bytes that are not UTF-8 failed"
rows=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1], encoding="utf-8"))["rows"]))' "$out/results.json") \
  || fail "results.json does not parse as UTF-8 JSON"
[ "$rows" -gt 0 ] || fail "results.json has no rows"
echo "a run named in other bytes: $rows rows in results.json"

printf 'description: caf\xc3\xa9 \xff\n' >"$tmp/bad.yaml"
grep -v '^description:' "$odd_exp" >>"$tmp/bad.yaml"
err=$("$sim" "$tmp/bad.yaml" 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] || fail "exit $rc for an experiment that is not UTF-8"
[ "$(echo "$err" | wc -l)" = 1 ] || fail "not one line: $err"
echo "$err" | grep -q 'bad.yaml: line 1: not UTF-8 text (byte 0xff at offset 19)' || fail "unexpected: $err"
echo "not UTF-8: $err"

{ printf '"x\\e[2Jy": 1\n'; cat "$odd_exp"; } >"$tmp/esc.yaml"
err=$("$sim" "$tmp/esc.yaml" 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] || fail "exit $rc for an unknown key"
if printf '%s' "$err" | LC_ALL=C grep -q $'\x1b'; then fail "the escape reached the terminal: $err"; fi
echo "$err" | grep -q "unknown key 'x \[2Jy'" || fail "unexpected: $err"
echo "an escape in a key: $err"
echo "# OK"
