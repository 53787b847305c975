#!/usr/bin/env bash
# scripts/run.sh — set up, build, and run compcoll's main job: the what-if study
# experiments/whatif-fattree.yaml in the SimGrid simulator (bf16 gradient allreduce with and
# without exponent compression at 64, 1,024 and 16,384 H100s). The table goes to stdout,
# CSV and JSON to results/whatif-fattree/. Extra arguments go to compcoll-sim (--set ...).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
exec ./build/sim/compcoll-sim experiments/whatif-fattree.yaml --out results/whatif-fattree "$@"
