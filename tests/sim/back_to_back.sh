#!/usr/bin/env bash
# ctest sim_back_to_back: a compressed chain broadcast timed alone and back to back
# (compcoll-sim --back-to-back 10). Prints both times and "OK: faster back to back" when the
# per-call time back to back is under 0.9x the call alone.
set -euo pipefail
sim=$1
args=(experiments/loop-cpu.yaml --set 'sizes=[4MiB]' --set 'policies=[static]'
      --set 'calls=[{collective: broadcast, algorithm: chain, dtype: bf16, tensor: param}]')
time_of() { awk '/compress-once/ {print $9}'; }
one=$("$sim" "${args[@]}" | time_of)
ten=$("$sim" "${args[@]}" --back-to-back 10 | tee /dev/stderr | time_of)
echo "alone $one back-to-back $ten"
awk -v a="$one" -v b="$ten" 'BEGIN { if (a > 0 && b > 0 && b < 0.9 * a) print "OK: faster back to back" }'
