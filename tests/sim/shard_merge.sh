#!/usr/bin/env bash
# The sharded run of a small grid merges to the unsharded run's table: three shards merged with
# `compcoll-sim merge`, and `--jobs 2`, against one run (check_shards.py); then a merge with a
# shard missing, which must fail naming it, and one with a shard of the same file run with
# another --set, which must fail too, as must one with a damaged shard and one whose shard
# count is not a whole number.
# Usage: shard_merge.sh COMPCOLL_SIM WORK_DIR
set -eo pipefail
sim=$1
o=$2/shard-test
rm -rf "$o"
args=(experiments/smoke-sim.yaml --set 'topology=[topologies/h100-64gpu.yaml]' --set 'ranks=[8, 16]' --set 'sizes=[64KB, 4MB]'
      --set 'calls=[{collective: allreduce, algorithm: hierarchical, inter: recursive, dtype: bf16, tensor: grad},
                    {collective: allgather, algorithm: ring, dtype: bf16, tensor: param, placement: compress-once}]')
"$sim" "${args[@]}" --out "$o/whole" > /dev/null 2>&1
for i in 1 2 3; do "$sim" "${args[@]}" --shard "$i/3" --out "$o/s$i" > /dev/null; done
"$sim" merge --out "$o/merged" "$o/s1" "$o/s2" "$o/s3"
"$sim" "${args[@]}" --jobs 2 --out "$o/jobs" > /dev/null
python3 tests/sim/check_shards.py "$o/whole" "$o/merged" "$o/jobs"
"$sim" merge --out "$o/bad" "$o/s1" "$o/s2" || echo "rc=$?"
"$sim" "${args[@]}" --set 'sizes=[64KB]' --shard 3/3 --out "$o/other" > /dev/null
"$sim" merge --out "$o/bad2" "$o/s1" "$o/s2" "$o/other" || echo "rc=$?"
# A shard whose results.json was damaged (a row's time not a number): named, not a bare JSON error.
cp -r "$o/s1" "$o/damaged"
python3 -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); d['rows'][0]['time_us'] = 'x'; json.dump(d, open(p, 'w'))" "$o/damaged/results.json"
"$sim" merge --out "$o/bad3" "$o/damaged" "$o/s2" "$o/s3" || echo "rc=$?"
# A shard count that is not a whole number: named, never cut short to one.
cp -r "$o/s1" "$o/fraction"
python3 -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); d['shard']['count'] = 3.5; json.dump(d, open(p, 'w'))" "$o/fraction/results.json"
"$sim" merge --out "$o/bad4" "$o/fraction" "$o/s2" "$o/s3" || echo "rc=$?"
