#!/usr/bin/env bash
# scripts/setup.sh — install everything compcoll needs on a fresh Debian 12 machine.
# Safe to run twice: apt-get and pip skip what is already present.
# The CUDA toolkit and NCCL are expected to be installed already (nvcc on PATH);
# the build compiles CUDA code whenever nvcc is found.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git patch patchelf
  libyaml-cpp-dev
  libboost-graph-dev libboost-dev
  catch2
  libopenmpi-dev openmpi-bin
  libzstd-dev liblz4-dev
  clang libclang-rt-14-dev
  nlohmann-json3-dev
  libjemalloc-dev   # compcoll-sim's allocator
  python3-numpy
  slurm-wlm munge   # ctest scripts_slurm_sweep starts a single-node Slurm of its own (docs/SLURM.md)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# Python side (tests read .npy files with numpy; the capture tool needs torch,
# which is optional and installed only with COMPCOLL_SETUP_TORCH=1).
PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy" 2>/dev/null; then
  "$PY" -m pip install -q numpy
fi
# The notebooks (notebooks/) and their headless test: nbclient runs them on a python3 kernel.
PY_PACKAGES=(nbclient nbformat ipykernel matplotlib pandas)
if ! "$PY" -c "import nbclient, nbformat, ipykernel, matplotlib, pandas" 2>/dev/null; then
  "$PY" -m pip install -q "${PY_PACKAGES[@]}"
fi
if ! "$PY" -m jupyter_client.kernelspec list 2>/dev/null | grep -q python3; then
  "$PY" -m ipykernel install --user --name python3 >/dev/null
fi
if [ "${COMPCOLL_SETUP_TORCH:-0}" = "1" ] && ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q torch
fi
# nvCOMP 6 (ANS, Bitcomp) beside the CUDA codecs in compcoll-bench codec --device cuda; CMake
# finds the wheel through this python3 (tools/CMakeLists.txt).
if ! "$PY" -c "import nvidia.libnvcomp" 2>/dev/null; then
  "$PY" -m pip install -q "nvidia-libnvcomp-cu13>=6,<7"
fi

# SimGrid 4.1 (the simulator's engine; Debian 12 packages 3.32, whose actor-free activities do
# not scale: docs/compcoll-sim.md, "How a call is simulated"), built from the source
# distribution on PyPI with the patches of scripts/patches/ (each says what it changes: two
# leave every simulated time as it was, the lmm one corrects SimGrid's lazy updates) into
# $COMPCOLL_SIMGRID_PREFIX (default /opt/simgrid-4.1-p3, the patch level in its name): the
# library only, without SMPI, the model checker and the language bindings (about 10 minutes on
# 2 cores).
SG_VERSION=4.1
SG_PREFIX=${COMPCOLL_SIMGRID_PREFIX:-/opt/simgrid-$SG_VERSION-p3}
SG_PATCHES=$(cd "$(dirname "$0")/patches" && pwd)
if [ ! -f "$SG_PREFIX/lib/pkgconfig/simgrid.pc" ]; then
  echo "setup: building SimGrid $SG_VERSION into $SG_PREFIX (about 10 minutes)"
  sg_tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps --no-binary :all: "simgrid==$SG_VERSION" -d "$sg_tmp"
  tar xzf "$sg_tmp/simgrid-$SG_VERSION.tar.gz" -C "$sg_tmp"
  for p in "$SG_PATCHES"/simgrid-$SG_VERSION-*.patch; do
    patch -d "$sg_tmp/simgrid-$SG_VERSION" -p1 --quiet < "$p" || { echo "setup: $p does not apply" >&2; exit 1; }
  done
  # From inside the scratch folder: SimGrid's configure test writes a file into the current one.
  (cd "$sg_tmp" && cmake -S "$sg_tmp/simgrid-$SG_VERSION" -B "$sg_tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$SG_PREFIX" -Denable_smpi=OFF -Denable_model-checking=OFF -Denable_python=OFF \
    -Denable_java=OFF -Denable_fortran=OFF -Denable_lto=OFF -Denable_sthread=OFF -Denable_documentation=OFF \
    > "$sg_tmp/configure.log" 2>&1) || { cat "$sg_tmp/configure.log" >&2; exit 1; }
  cmake --build "$sg_tmp/build" --target simgrid graphicator -j "$(nproc)" > "$sg_tmp/build.log" 2>&1 \
    || { tail -50 "$sg_tmp/build.log" >&2; exit 1; }
  $SUDO cmake --install "$sg_tmp/build" > /dev/null
  rm -rf "$sg_tmp"
fi

if ! command -v nvcc >/dev/null 2>&1; then
  echo "setup: note: nvcc not on PATH; CUDA parts will not be built" >&2
fi
echo "setup: done"
