#!/usr/bin/env bash
# scripts/test.sh — set up, build, and run the whole test suite (Catch2 cases, the fuzz run,
# the bench smoke tests). GPU cases print SKIPPED where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
