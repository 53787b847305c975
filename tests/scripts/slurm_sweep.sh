#!/usr/bin/env bash
# scripts/slurm-sweep.sh on a real Slurm: starts a single-node Slurm of its own (munged,
# slurmctld, slurmd from Debian's munge and slurm-wlm, as root, with a slurm.conf, key, state
# and spool in the work dir and free ports, so nothing global is touched and a Slurm started
# elsewhere is not), then runs sweeps of tests/scripts/slurm-tiny.yaml on it, each checked
# against one unsharded run (tests/sim/check_shards.py: every column but wall_s):
#   1. the plain form (no --set), from another working directory, with relative paths and a
#      space in OUT_DIR; the tasks ask for compcoll-sim --estimate's memory; the merged
#      results.json records the sweep's command;
#   2. a rerun into that finished folder: refused, then with --force cleared; a --set form with
#      an sbatch option after -- (--mem) that the tasks get;
#   3. a shard that fails: --wait exits 1 naming it and its log, Slurm cancels the merge job;
#      `rerun` runs it alone and merges;
#   4. a task cancelled with scancel while it runs (`status` says it runs, exit 3): `status
#      --wait` names it; rerun and merge.
# The daemons are stopped by their PIDs at the end, also on failure. Where Slurm cannot start
# (not root, packages missing, a daemon fails) it prints `SKIPPED: <why>` and exits 0.
# Usage: slurm_sweep.sh BUILD_DIR WORK_DIR (run from the repository root).
set -uo pipefail
repo=$PWD
build=$(realpath "$1")
w=$(realpath -m "$2/slurm-test")
sim=$build/sim/compcoll-sim
sweep=$repo/scripts/slurm-sweep.sh
t0=$(date +%s)
skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

[ "$(id -u)" = 0 ] || skip "not root (the test Slurm runs its daemons as root)"
for c in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
  command -v "$c" > /dev/null || skip "$c not found (Debian packages munge and slurm-wlm: scripts/setup.sh)"
done
[ -x "$sim" ] || fail "$sim: not built"
command -v python3 > /dev/null || skip "python3 not found"

# Our own Slurm, and nothing of the environment's: no SLURM_*/SBATCH_*/SQUEUE_* variables.
for v in $(compgen -e | grep -E '^(SLURM|SBATCH|SQUEUE|SCONTROL|SINFO)_' || true); do unset "$v"; done
rm -rf "$w"
mkdir -p "$w"
# Daemon files: under the work dir, unless its path is too long for a Unix socket.
d=$w/slurm
if [ "${#d}" -gt 60 ]; then d=$(mktemp -d /tmp/compcoll-slurm.XXXXXX); fi
mkdir -p "$d/munge" "$d/state" "$d/spool" "$d/log"
chmod 755 "$w" "$d" "$d/munge"  # munged refuses a socket or key in a folder others may write
pids=() up=0
stop() {
  local p
  if [ "$up" = 1 ]; then  # end the jobs first: their slurmstepd outlive slurmd
    scancel --quiet -u root 2> /dev/null
    for _ in $(seq 1 20); do [ -z "$(squeue -h 2> /dev/null)" ] && break; sleep 0.5; done
  fi
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 20); do kill -0 "$p" 2> /dev/null || continue 2; sleep 0.25; done
    kill -9 "$p" 2> /dev/null
  done
  [ "$d" = "$w/slurm" ] || rm -rf "$d"
}
trap stop EXIT

# munge: its own key and socket.
dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$d/munge/munge.key"
munged --foreground --force --socket="$d/munge/munge.sock" --key-file="$d/munge/munge.key" \
  --pid-file="$d/munge/munged.pid" --seed-file="$d/munge/munged.seed" --log-file="$d/log/munged.log" \
  > "$d/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 40); do [ -S "$d/munge/munge.sock" ] && break; sleep 0.25; done
[ -S "$d/munge/munge.sock" ] || skip "munged did not start: $(tail -1 "$d/log/munged.out")"

# slurm.conf: this node as it is (slurmd -C), two free ports, everything under $d.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
node=$(slurmd -C 2> /dev/null | head -1)
[[ $node == NodeName=* ]] || skip "slurmd -C printed no node line"
name=${node%% *}
name=${name#NodeName=}
cat > "$d/slurm.conf" << EOF
ClusterName=compcoll$$
SlurmctldHost=$name(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
KillWait=5
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$name Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$d/slurm.conf
slurmctld -D -f "$SLURM_CONF" > "$d/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > "$d/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do [ "$(sinfo -h -o %T 2> /dev/null)" = idle ] && break; sleep 0.5; done
[ "$(sinfo -h -o %T 2> /dev/null)" = idle ] ||
  skip "the test Slurm did not start: $(tail -2 "$d/log/slurmctld.out" "$d/log/slurmd.out" | tr '\n' ' ')"
up=1
echo "test Slurm up: $(sinfo -h -o '%N %c CPUs %m MB') (ports $ctld_port, $slurmd_port; $(( $(date +%s) - t0 )) s)"

export COMPCOLL_SLURM_POLL=1
exp=$repo/tests/scripts/slurm-tiny.yaml
# The compcoll-sim the tasks run: this build's, failing shard 2 of 3 while $w/fail-2 exists and
# waiting in shard 3 of 3 while $w/slow-3 exists.
cat > "$w/sim" << EOF
#!/bin/bash
case " \$* " in
  *" --shard 2/3 "*) [ ! -e $(printf %q "$w/fail-2") ] || { echo "injected failure" >&2; exit 1; } ;;
  *" --shard 3/3 "*) [ ! -e $(printf %q "$w/slow-3") ] || sleep 120 ;;
esac
exec $(printf %q "$sim") "\$@"
EOF
chmod +x "$w/sim"
export COMPCOLL_SIM=$w/sim
# job_field JOB FIELD: a field of scontrol show job.
job_field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# The unsharded runs to compare with, from where the sweeps run (the rows name the experiment
# file as typed): $w/cwd, with the experiment's path relative to it, and the repository.
mkdir -p "$w/cwd"
cd "$w/cwd" || fail "cd $w/cwd"
rel_exp=$(realpath --relative-to=. "$exp")
"$sim" "$rel_exp" --out "$w/whole" > /dev/null 2>&1 || fail "the unsharded run failed"
"$sim" "$rel_exp" --set 'sizes=[64KB, 1MB, 16MB]' --set 'codecs=[identity]' --out "$w/whole-set" > /dev/null 2>&1 ||
  fail "the unsharded --set run failed"
(cd "$repo" && "$sim" tests/scripts/slurm-tiny.yaml --out "$w/whole-repo" > /dev/null 2>&1) || fail "the unsharded run failed"

# 1. The plain form, from $w/cwd with paths relative to it; OUT_DIR has a space.
"$sweep" "$rel_exp" "out dir" 3 --wait > "$w/1.txt" 2>&1
rc=$?
cat "$w/1.txt"
[ "$rc" = 0 ] || fail "plain sweep: exit $rc"
out1=$w/cwd/out\ dir
[ -f "$out1/results.csv" ] || fail "plain sweep: no $out1/results.csv (OUT_DIR not relative to the working directory?)"
python3 "$repo/tests/sim/check_shards.py" "$w/whole" "$out1" || fail "plain sweep: merged rows differ"
array1=$(sed -n 's/^submitted: shards job \([0-9]*\) .*/\1/p' "$w/1.txt")
mem=$(job_field "${array1}_1" MinMemoryNode)
want=$("$sim" "$exp" --estimate 3 | awk '$1 == "shard" { for (i = 2; i < NF; i++) if ($i == "mem_mb" && $(i + 1) > m) m = $(i + 1) } END { print m }')
[ "$mem" = "${want}M" ] || fail "plain sweep: a task asked for $mem, compcoll-sim --estimate says ${want}M"
ok "plain form: 3 shards merged, equal to the unsharded run; each task asked for $mem (--estimate)"
python3 - "$out1/results.json" << 'EOF' || fail "plain sweep: results.json's command"
import json, sys
cmd = json.load(open(sys.argv[1]))["command"]
assert "slurm-sweep.sh" in cmd and "shards/1" not in cmd and "--shard" not in cmd, cmd
print("ok: the merged results.json records the sweep's command:", cmd)
EOF

# 2. Into the finished folder again: refused; --force clears it. A --set form, with --mem after --.
"$sweep" "$rel_exp" "out dir" 3 > "$w/2a.txt" 2>&1
rc=$?
cat "$w/2a.txt"
[ "$rc" = 2 ] && grep -q "holds an earlier run (results.csv .*--force" "$w/2a.txt" || fail "a sweep into a finished sweep's folder: exit $rc"
ok "a sweep into a finished sweep's folder is refused, naming what is there"
"$sweep" "$rel_exp" "out dir" 2 --set 'sizes=[64KB, 1MB, 16MB]' --set 'codecs=[identity]' --force --wait -- --mem=700M \
  > "$w/2b.txt" 2>&1
rc=$?
cat "$w/2b.txt"
[ "$rc" = 0 ] || fail "--set sweep with --force: exit $rc"
grep -q "^cleared the earlier run in $out1: results.csv" "$w/2b.txt" || fail "--force did not say what it cleared"
python3 "$repo/tests/sim/check_shards.py" "$w/whole-set" "$out1" || fail "--set sweep: merged rows differ"
array2=$(sed -n 's/^submitted: shards job \([0-9]*\) .*/\1/p' "$w/2b.txt")
[ "$(job_field "${array2}_1" MinMemoryNode)" = 700M ] || fail "--mem=700M after -- did not reach the tasks"
ok "--force cleared the finished sweep; the --set form merged equal to its unsharded run; -- --mem=700M reached the tasks"

# 3. A shard that fails: --wait names it and its log; Slurm cancels the merge; rerun merges.
cd "$repo" || fail "cd $repo"
touch "$w/fail-2"
"$sweep" tests/scripts/slurm-tiny.yaml "$w/failed" 3 --wait > "$w/3a.txt" 2>&1
rc=$?
cat "$w/3a.txt"
[ "$rc" = 1 ] || fail "failed shard: --wait exit $rc"
grep -q "^shard 2: FAILED: exit 1.*: log $w/failed/shards/2.slurm.log" "$w/3a.txt" || fail "failed shard: not named with its log"
grep -q "injected failure" "$w/failed/shards/2.slurm.log" || fail "failed shard: its log lacks compcoll-sim's error"
merge3=$(sed -n 's/^submitted: .*merge job \([0-9]*\) .*/\1/p' "$w/3a.txt")
for _ in $(seq 1 120); do [ -z "$(squeue -h -j "$merge3" 2> /dev/null)" ] && break; sleep 0.5; done
[ -z "$(squeue -h -j "$merge3" 2> /dev/null)" ] || fail "failed shard: the merge job $merge3 is still queued: $(squeue -h -j "$merge3" -o '%T %r')"
job_field "$merge3" Reason | grep -q DependencyNeverSatisfied || fail "failed shard: merge job $merge3: $(job_field "$merge3" JobState)"
"$sweep" status "$w/failed" > "$w/3b.txt" 2>&1
rc=$?
cat "$w/3b.txt"
[ "$rc" = 1 ] && grep -q "merge: cancelled by Slurm: a shard it waited for failed" "$w/3b.txt" || fail "failed shard: status exit $rc"
ok "a failed shard: --wait exits 1 naming shard 2 and its log; Slurm cancelled the merge job (DependencyNeverSatisfied)"
rm "$w/fail-2"
"$sweep" rerun "$w/failed" --wait > "$w/3c.txt" 2>&1
rc=$?
cat "$w/3c.txt"
[ "$rc" = 0 ] && grep -q "^submitted: shards job [0-9]* (array 2)" "$w/3c.txt" || fail "rerun of the failed shard: exit $rc"
python3 "$repo/tests/sim/check_shards.py" "$w/whole-repo" "$w/failed" || fail "rerun of the failed shard: merged rows differ"
ok "rerun ran shard 2 alone and merged"

# 4. A task cancelled while it runs: status --wait names it; rerun and merge.
touch "$w/slow-3"
"$sweep" tests/scripts/slurm-tiny.yaml "$w/cancelled" 3 > "$w/4a.txt" 2>&1 || { cat "$w/4a.txt"; fail "cancel: submit"; }
cat "$w/4a.txt"
array4=$(sed -n 's/^submitted: shards job \([0-9]*\) .*/\1/p' "$w/4a.txt")
for _ in $(seq 1 60); do grep -q "shard 3 of 3" "$w/cancelled/shards/3.slurm.log" 2> /dev/null && break; sleep 0.5; done
[ "$(squeue -h -j "${array4}_3" -o %T)" = RUNNING ] || fail "cancel: task ${array4}_3 is not running"
"$sweep" status "$w/cancelled" > "$w/4s.txt" 2>&1
rc=$?
cat "$w/4s.txt"
[ "$rc" = 3 ] && grep -q "^shard 3: running, job ${array4}_3: log $w/cancelled/shards/3.slurm.log" "$w/4s.txt" ||
  fail "status of a running sweep: exit $rc"
scancel "${array4}_3"
"$sweep" status "$w/cancelled" --wait > "$w/4b.txt" 2>&1
rc=$?
cat "$w/4b.txt"
[ "$rc" = 1 ] && grep -q "^shard 3: FAILED: .*CANCELLED.*: log $w/cancelled/shards/3.slurm.log" "$w/4b.txt" ||
  fail "cancelled task: status --wait exit $rc"
ok "a cancelled task: status --wait exits 1 naming shard 3 and its log"
rm "$w/slow-3"
"$sweep" rerun "$w/cancelled" 3 --wait > "$w/4c.txt" 2>&1
rc=$?
cat "$w/4c.txt"
[ "$rc" = 0 ] || fail "rerun of the cancelled shard: exit $rc"
python3 "$repo/tests/sim/check_shards.py" "$w/whole-repo" "$w/cancelled" || fail "rerun of the cancelled shard: merged rows differ"
[ -z "$(squeue -h 2> /dev/null)" ] || fail "jobs left queued: $(squeue -h)"
ok "rerun of the cancelled shard merged; no job left queued"

# Bad input: one line naming the file and key, nothing submitted.
"$sweep" tests/scripts/slurm-tiny.yaml "$w/bad" 2 --set 'sizes=[lots]' > "$w/5.txt" 2>&1
rc=$?
cat "$w/5.txt"
[ "$rc" = 2 ] && grep -q "slurm-tiny.yaml.*sizes" "$w/5.txt" && [ ! -e "$w/bad/sweep.env" ] || fail "bad input: exit $rc"
COMPCOLL_SLURM_DRY_RUN=1 "$sweep" tests/scripts/slurm-tiny.yaml "$w/dry" 0 > "$w/6.txt" 2>&1
rc=$?
cat "$w/6.txt"
[ "$rc" = 2 ] && grep -q "SHARDS: expected a positive integer, got '0'" "$w/6.txt" || fail "SHARDS 0: exit $rc"
ok "bad input refused before anything is submitted"
echo "OK: slurm sweeps on a test Slurm: plain, --set, failed shard, cancelled task ($(( $(date +%s) - t0 )) s)"
