#!/usr/bin/env bash
# scripts/run.sh — set up, build, and run compcoll's main job on its default input.
# Until the simulator exists (issue 4) the main job is the codec bench on the bundled real
# training tensors (tests/data) and a 16M-element synthetic Gaussian.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
exec ./build/tools/compcoll-bench codec --dtype bf16 tests/data/*.bf16.npy synthetic:gaussian:16M "$@"
