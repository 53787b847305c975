#!/usr/bin/env bash
# scripts/slurm-sweep.sh — a compcoll-sim sweep across a Slurm cluster: a job array with one
# shard of the experiment's cells per task (compcoll-sim --shard I/N, each its own process and
# SimGrid engine), then one dependent job that merges the shards into the table a single run
# writes (compcoll-sim merge). docs/compcoll-sim.md, "Sweeps across machines".
#
#   scripts/slurm-sweep.sh EXPERIMENT.yaml OUT_DIR SHARDS [--set K=V]... [-- SBATCH_OPTION...]
#
# OUT_DIR/shards/I holds shard I's results.csv, results.json and its table (stdout.txt);
# OUT_DIR gets the merged results.csv and results.json. The build (build/sim/compcoll-sim, or
# $COMPCOLL_SIM) and the repository must be on a file system every node sees. Options after
# `--` go to both sbatch calls (--partition, --time, --account, ...). Each task asks for one
# CPU and 8 GB (16,384-rank topologies peak near 4 GB); override with -- --mem=...
# COMPCOLL_SLURM_DRY_RUN=1 prints the two sbatch commands instead of submitting them.
set -euo pipefail
usage() { echo "usage: $0 EXPERIMENT.yaml OUT_DIR SHARDS [--set K=V]... [-- SBATCH_OPTION...]" >&2; exit 2; }
[ $# -ge 3 ] || usage
cd "$(dirname "$0")/.."
exp=$1 out=$2 shards=$3
shift 3
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "$0: SHARDS: expected a positive integer, got '$shards'" >&2; exit 2; }
[ -f "$exp" ] || { echo "$0: $exp: no such experiment file" >&2; exit 2; }
sets=() sbatch_opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --set) [ $# -ge 2 ] || usage; sets+=(--set "$2"); shift 2 ;;
    --set=*) sets+=("$1"); shift ;;
    --) shift; sbatch_opts=("$@"); break ;;
    *) echo "$0: unknown argument '$1'" >&2; usage ;;
  esac
done
sim=${COMPCOLL_SIM:-$PWD/build/sim/compcoll-sim}
[ -x "$sim" ] || { echo "$0: $sim: not built (scripts/build.sh)" >&2; exit 2; }
mkdir -p "$out/shards"
out=$(cd "$out" && pwd)
# Reject a bad experiment now, not in every task: the plans of the first shard, nothing simulated.
"$sim" "$exp" "${sets[@]}" --plans-only --shard "1/$shards" > /dev/null

quoted_sets=$(printf ' %q' "${sets[@]}")
array_cmd=(sbatch --parsable --job-name=compcoll-sweep --array="1-$shards" --cpus-per-task=1 --mem=8G
           --output="$out/shards/%a.slurm.log" "${sbatch_opts[@]}"
           --wrap="mkdir -p $out/shards/\$SLURM_ARRAY_TASK_ID && cd $PWD && $sim $(printf %q "$exp")$quoted_sets --shard \$SLURM_ARRAY_TASK_ID/$shards --out $out/shards/\$SLURM_ARRAY_TASK_ID > $out/shards/\$SLURM_ARRAY_TASK_ID/stdout.txt")
merge_dirs=$(for i in $(seq 1 "$shards"); do printf ' %s/shards/%d' "$out" "$i"; done)
merge_cmd=(sbatch --parsable --job-name=compcoll-merge --cpus-per-task=1 --output="$out/merge.slurm.log"
           "${sbatch_opts[@]}" --wrap="$sim merge --out $out$merge_dirs")
if [ "${COMPCOLL_SLURM_DRY_RUN:-0}" = 1 ]; then
  printf '%q ' "${array_cmd[@]}"; echo
  printf '%q ' "${merge_cmd[@]:0:2}" --dependency=afterok:ARRAY_JOB_ID "${merge_cmd[@]:2}"; echo
  exit 0
fi
array_id=$("${array_cmd[@]}")
merge_id=$("${merge_cmd[@]:0:2}" --dependency="afterok:$array_id" "${merge_cmd[@]:2}")
echo "submitted: shards job $array_id (array 1-$shards), merge job $merge_id (after all shards succeed)"
echo "results: $out/results.csv and $out/results.json once job $merge_id has run"
