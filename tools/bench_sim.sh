#!/usr/bin/env bash
# tools/bench_sim.sh — how fast the simulator is: simulated messages per wall-second, wall time
# and peak memory of hierarchical allreduce at 4,096, 16,384 and 131,072 ranks (fat trees; the
# 16,384- and 131,072-GPU dragonflies too), ring allreduce at 1,024 ranks and nccl-like's
# rail rings at 256 (experiments/bench-sim.yaml, uncompressed and gauss-exp; 1 GB at 131,072). Targets: a
# 131,072-rank row <= 10 minutes and <= 16 GiB on one core; at least 200,000 messages per
# wall-second. Usage: tools/bench_sim.sh [BUILD_DIR] [--large-only | --small-only] [--protocol-costs]
# (--protocol-costs: with NCCL's protocol costs, network.protocol_costs, docs/compcoll-sim.md).
set -euo pipefail
cd "$(dirname "$0")/.."
SIM=${1:-build}/sim/compcoll-sim
which=${2:-all}
costs=()
for a in "$@"; do [ "$a" = --protocol-costs ] && costs=(--set network.protocol_costs=true); done
[ "$which" = --protocol-costs ] && which=all
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
printf "%-34s %7s %10s %9s %12s %9s %9s\n" case ranks messages wall_s msgs_per_s platf_s peak_MB
run() {  # name, then --set arguments
  local name=$1; shift
  "$SIM" experiments/bench-sim.yaml "$@" ${costs[@]+"${costs[@]}"} --out "$OUT/$name" > /dev/null
  python3 - "$OUT/$name/results.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["topologies"][0]
for r in d["rows"]:
    print("%-34s %7d %10d %9.2f %12.0f %9.2f %9.0f" % (sys.argv[2] + " " + r["codec"], r["ranks"], r["messages"],
          r["wall_s"], r["messages"] / r["wall_s"] if r["wall_s"] else 0, t["platform_wall_s"], t["peak_rss_kb"] / 1024))
PY
}
if [ "$which" != --large-only ]; then
  run hier-4096 --set topology=topologies/fat-tree-4k-2to1.yaml --set 'codecs=[identity,gauss-exp]'
  run hier-16384 --set topology=topologies/fat-tree-16k.yaml --set 'codecs=[identity,gauss-exp]'
  run hier-16384-dragonfly --set topology=topologies/dragonfly-16k.yaml --set 'codecs=[identity,gauss-exp]'
  run ring-1024 --set topology=topologies/fat-tree-1k.yaml --set calls.0.algorithm=ring --set 'codecs=[identity,gauss-exp]'
  # nccl-like's 16 channels on 32 nodes x 8 H100, simulated as its 8 rail rings (merged channels).
  run nccl-like-256 --set topology=topologies/fat-tree-1k.yaml --set 'ranks=[256]' --set 'policies=[nccl-like]' \
      --set 'codecs=[identity]' --set 'sizes=[4GB]' --set calibration=zero
fi
if [ "$which" != --small-only ]; then
  run hier-131072 --set topology=topologies/fat-tree-131k.yaml --set 'codecs=[identity,gauss-exp]' --set 'sizes=[1GB]'
  run hier-131072-dragonfly --set topology=topologies/dragonfly-131k.yaml --set 'codecs=[identity,gauss-exp]' \
      --set 'sizes=[1GB]'
fi
