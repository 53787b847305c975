#!/usr/bin/env bash
# scripts/slurm-sweep.sh end to end with a stand-in sbatch (fake-sbatch: runs each array task
# here, in turn): the shards' tables and the merged results, which must equal one unsharded
# run's rows (tests/sim/check_shards.py). What it cannot show: Slurm itself scheduling the
# tasks on other nodes. Usage: slurm_sweep.sh BUILD_DIR WORK_DIR
set -eo pipefail
build=$1
o=$2/slurm-test
rm -rf "$o"
mkdir -p "$o/bin"
ln -s "$PWD/tests/scripts/fake-sbatch" "$o/bin/sbatch"
sets=(--set 'topology=[topologies/h100-64gpu.yaml]' --set 'ranks=[8, 16]' --set 'sizes=[64KB]')
COMPCOLL_SIM=$build/sim/compcoll-sim PATH="$o/bin:$PATH" scripts/slurm-sweep.sh experiments/smoke-sim.yaml "$o/sweep" 3 "${sets[@]}"
"$build/sim/compcoll-sim" experiments/smoke-sim.yaml "${sets[@]}" --out "$o/whole" > /dev/null 2>&1
python3 tests/sim/check_shards.py "$o/whole" "$o/sweep"
ls "$o/sweep/shards"/*/stdout.txt | wc -l | sed 's/^/shard tables: /'
COMPCOLL_SLURM_DRY_RUN=1 COMPCOLL_SIM=$build/sim/compcoll-sim scripts/slurm-sweep.sh experiments/smoke-sim.yaml "$o/dry" 0 || echo "rc=$?"
