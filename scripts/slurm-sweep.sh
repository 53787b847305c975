#!/usr/bin/env bash
# scripts/slurm-sweep.sh — a compcoll-sim sweep across a Slurm cluster: a job array with one
# shard of the experiment's cells per task (compcoll-sim --shard I/N, each its own process and
# SimGrid engine), then one dependent job that merges the shards into the table a single run
# writes (compcoll-sim merge). docs/SLURM.md.
#
#   scripts/slurm-sweep.sh EXPERIMENT.yaml OUT_DIR SHARDS [--set K=V]... [--force] [--wait] [-- SBATCH_OPTION...]
#   scripts/slurm-sweep.sh status OUT_DIR [--wait]
#   scripts/slurm-sweep.sh rerun OUT_DIR [SHARD...] [--wait] [-- SBATCH_OPTION...]
#
# Paths are taken as typed, relative to the directory the script is run from; each task runs
# compcoll-sim there (so the experiment's own relative paths resolve as in a run by hand).
# OUT_DIR gets sweep.env (what was submitted, the job ids), shard.sh and merge.sh (the job
# scripts), shards/I/ (shard I's results.csv, results.json, its table stdout.txt and `exit`, its
# exit status), shards/I.slurm.log (its stderr and Slurm's messages), merge.slurm.log, and
# results.csv and results.json, the merged table. The build (build/sim/compcoll-sim, or
# $COMPCOLL_SIM), the experiment and OUT_DIR must be on a file system every node sees.
#
# Each task asks for one CPU and the memory and time `compcoll-sim --estimate` gives the
# largest shard; the merge job one CPU, 1 GiB, 30 min. Options after `--` go to both sbatch
# calls, after these (so --mem=, --time=, --partition=, --account= there win).
# Environment: COMPCOLL_SIM (the compcoll-sim binary); COMPCOLL_SLURM_POLL (seconds between
# polls of --wait, default 30); COMPCOLL_SLURM_DRY_RUN=1 prints the sbatch commands instead
# of writing OUT_DIR and submitting them.
#
# Exit status: 0 submitted (with --wait: merged); 1 a shard or the merge failed (status,
# --wait: each failure named with its log), or sbatch refused a job (its message above); 2 bad
# input, nothing submitted; 3 (status) still running, nothing failed so far.
set -euo pipefail
me=$0
usage() {
  cat >&2 <<EOF
usage: $me EXPERIMENT.yaml OUT_DIR SHARDS [--set K=V]... [--force] [--wait] [-- SBATCH_OPTION...]
       $me status OUT_DIR [--wait]
       $me rerun OUT_DIR [SHARD...] [--wait] [-- SBATCH_OPTION...]
EOF
  exit 2
}
die() { echo "$me: $*" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
poll=${COMPCOLL_SLURM_POLL:-30}
[[ $poll =~ ^[0-9]+$ ]] || die "COMPCOLL_SLURM_POLL: expected seconds, got '$poll'"
dry=${COMPCOLL_SLURM_DRY_RUN:-0}
# What a sweep writes into OUT_DIR (and --force clears).
written=(results.csv results.json plans.csv shards sweep.env shard.sh merge.sh merge.slurm.log merge.exit)

# Words quoted for bash, each after a space (nothing at all for no words).
quote() { local w; for w in "$@"; do printf ' %q' "$w"; done; }
# An absolute path, as typed but relative to the current directory (symlinks kept).
absolute() { realpath -ms -- "$1"; }

need_slurm() {
  local c
  for c in sbatch squeue scontrol scancel; do
    command -v "$c" > /dev/null || die "$c: not found (run this on a Slurm submit host)"
  done
}

# --- the sweep's state ---------------------------------------------------------------------
# load OUT: the record sweep.env (experiment, shards, job ids). Sets out and the record's variables.
load() {
  out=$(absolute "$1")
  [ -f "$out/sweep.env" ] || die "$out: no sweep.env here (not a folder $me submitted a sweep into)"
  sets=() user_opts=() res_opts=() task_job=() merge_job=""
  # shellcheck disable=SC1091
  . "$out/sweep.env"
}
record() { [ "$dry" = 1 ] || printf '%s\n' "$@" >> "$out/sweep.env"; }
# sbatch, or with COMPCOLL_SLURM_DRY_RUN=1 the command printed (and a stand-in job id).
run_sbatch() {
  if [ "$dry" != 1 ]; then sbatch "$@"; return; fi
  echo "sbatch$(quote "$@")" >&2
  case " $* " in *" --array="*) echo ARRAY_JOB_ID ;; *) echo MERGE_JOB_ID ;; esac
}

# scan: reads squeue, the shards' exit files and (for tasks Slurm has let go) scontrol. Sets
#   state[I]  ok | failed | queued ; why[I] a phrase; job[I] the task's Slurm id (A_I)
#   merge_state  ok | failed | queued | none ; merge_why
#   queued_ids   the Slurm ids still queued (tasks, A_I)
scan() {
  local q f i s r rc js ids
  declare -gA queued=()
  # The sweep's jobs by id (their names may have been changed with -- --job-name); squeue
  # fails with "Invalid job id" once Slurm has let every one of them go.
  ids=$(printf '%s\n' "${task_job[@]}" $merge_job | sort -u | paste -sd, -)
  if ! q=$(squeue -h -r -j "$ids" -o '%i|%T|%r' 2>&1); then
    case $q in *"Invalid job id"*) q="" ;; *) echo "$me: squeue failed: $q" >&2; return 1 ;; esac
  fi
  while IFS='|' read -r i s r; do [ -n "$i" ] && queued[$i]="$s|$r"; done <<< "$q"
  state=() why=() job=() queued_ids=()
  for ((i = 1; i <= shards; i++)); do
    job[i]=${task_job[i]}_$i
    f=$out/shards/$i
    if [ -n "${queued[${job[i]}]:-}" ]; then
      state[i]=queued why[i]=$(queue_phrase "${queued[${job[i]}]}" "${job[i]}")
      queued_ids+=("${job[i]}")
    elif { read -r rc < "$f/exit"; } 2> /dev/null; then
      if [ "$rc" = 0 ]; then
        state[i]=ok why[i]=ok
      else
        state[i]=failed
        case $rc in
          1) why[i]="FAILED: exit 1, some rows have errors" ;;
          2) why[i]="FAILED: exit 2, bad input" ;;
          143) why[i]="FAILED: terminated (SIGTERM: scancel, or its time limit)" ;;
          137) why[i]="FAILED: killed (SIGKILL: its memory limit, or scancel)" ;;
          *) why[i]="FAILED: exit $rc" ;;
        esac
        js=$(job_state "${job[i]}")
        [ -z "$js" ] || [ "$js" = FAILED ] || why[i]+="; Slurm: $js"
      fi
    else
      state[i]=failed
      js=$(job_state "${job[i]}")
      why[i]="FAILED: ended without an exit status ($([ -n "$js" ] && echo "Slurm: $js" ||
        echo "Slurm no longer knows job ${job[i]}: cancelled before it started, or killed"))"
    fi
  done
  merge_state=none merge_why="not submitted"
  if [ -n "$merge_job" ] && [ -n "${queued[$merge_job]:-}" ]; then
    merge_state=queued merge_why=$(queue_phrase "${queued[$merge_job]}" "$merge_job")
  elif { read -r rc < "$out/merge.exit"; } 2> /dev/null; then
    if [ "$rc" = 0 ]; then merge_state=ok merge_why="done: $out/results.csv"
    else merge_state=failed merge_why="FAILED: exit $rc, log $out/merge.slurm.log"; fi
  elif [ -n "$merge_job" ]; then
    js=$(job_state "$merge_job")
    merge_state=failed
    case $js in
      *DependencyNeverSatisfied*) merge_why="cancelled by Slurm: a shard it waited for failed (job $merge_job)" ;;
      "") merge_why="ended without an exit status (job $merge_job, no longer known to Slurm)" ;;
      *) merge_why="ended without an exit status (Slurm: $js)" ;;
    esac
  fi
}
# queue_phrase "STATE|Reason" JOB: "pending (Resources), job JOB", "running, job JOB".
queue_phrase() {
  local s r
  IFS='|' read -r s r <<< "$1"
  s=$(tr 'A-Z' 'a-z' <<< "$s")
  case $r in None | "") echo "$s, job $2" ;; *) echo "$s ($r), job $2" ;; esac
}
# job_state ID: "STATE (Reason)" from scontrol, or nothing once Slurm has let the job go.
job_state() {
  scontrol -o show job "$1" 2> /dev/null |
    awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^JobState=/) s = substr($i, 10); if ($i ~ /^Reason=/) r = substr($i, 8) } }
         END { if (s != "") print s (r != "" && r != "None" ? " (" r ")" : "") }'
}
log_of() { echo "$out/shards/$1.slurm.log"; }

# report [changes]: prints the sweep's state (with `changes`, only failures not yet printed and a
# progress line when the counts change). Sets failed (the failed shards) and done_n, queued_n.
declare -A told=()
last_progress=""
report() {
  local i line
  failed=() done_n=0 queued_n=0
  for ((i = 1; i <= shards; i++)); do
    case ${state[i]} in
      ok) done_n=$((done_n + 1)) ;;
      queued) queued_n=$((queued_n + 1)) ;;
      failed) failed+=("$i") ;;
    esac
  done
  line="shards: $done_n of $shards done, $queued_n queued or running, ${#failed[@]} failed; merge: $merge_why"
  if [ "${1:-}" != changes ]; then
    echo "sweep $out: $experiment, $shards shards"
    for ((i = 1; i <= shards; i++)); do
      [ "${state[i]}" = ok ] || echo "shard $i: ${why[i]}: log $(log_of "$i")"
    done
    echo "$line"
    return
  fi
  for i in "${failed[@]}"; do
    [ -n "${told[$i]:-}" ] || echo "shard $i: ${why[i]}: log $(log_of "$i")"
    told[$i]=1
  done
  [ "$line" = "$last_progress" ] || echo "$line"
  last_progress=$line
}
rerun_hint() {
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "rerun the failed shards (and merge once all are done): $me rerun$(quote "$out")"
  else
    echo "merge again: $me rerun$(quote "$out")"
  fi
}

# Waits until the sweep is merged (0) or something failed (1), polling every $poll s.
wait_sweep() {
  local fails=0
  while :; do
    if ! scan; then
      fails=$((fails + 1))
      [ "$fails" -lt 5 ] || { echo "$me: squeue failed 5 times in a row; giving up" >&2; return 1; }
      sleep "$poll"
      continue
    fi
    fails=0
    report changes
    if [ "${#failed[@]}" -gt 0 ]; then
      [ "$queued_n" -eq 0 ] || echo "still queued or running: ${queued_ids[*]}"
      rerun_hint
      return 1
    fi
    case $merge_state in
      ok) echo "merged: $out/results.csv and $out/results.json"; return 0 ;;
      failed | none)
        if [ "$queued_n" -eq 0 ]; then
          echo "merge: $merge_why"
          rerun_hint
          return 1
        fi ;;
    esac
    sleep "$poll"
  done
}

# --- submitting ------------------------------------------------------------------------------
# submit SHARDS DEPENDENCIES OPTION...: an array of the tasks SHARDS ("1-3", "2,5"; none when
# empty), then the merge after it and the jobs DEPENDENCIES (":A_3:A_4"); records their ids.
# Returns 1 when sbatch refuses one (having said why).
submit() {
  local spec=$1 dep=$2 id array_id i
  shift 2
  local outpat=${out//%/%%} depopt=()  # sbatch reads % in --output as a pattern
  if [ -n "$spec" ]; then
    if ! id=$(run_sbatch --parsable --job-name=compcoll-sweep --array="$spec" --cpus-per-task=1 "${res_opts[@]}" \
                 --output="$outpat/shards/%a.slurm.log" "$@" "$out/shard.sh"); then
      echo "$me: sbatch refused the shards' job array (above); nothing submitted" >&2
      return 1
    fi
    array_id=${id%%;*}
    record "# $(date '+%F %T'): shards $spec submitted as job array $array_id"
    for i in $(spec_list "$spec"); do task_job[i]=$array_id; record "task_job[$i]=$array_id"; done
    dep=:$array_id$dep
  fi
  # --kill-on-invalid-dep: once a task it waits for fails or is cancelled, Slurm cancels the
  # merge (DependencyNeverSatisfied) rather than leave it pending.
  [ -z "$dep" ] || depopt=(--dependency="afterok$dep" --kill-on-invalid-dep=yes)
  if ! id=$(run_sbatch --parsable --job-name=compcoll-merge --cpus-per-task=1 --mem=1024M --time=30 \
               --output="$outpat/merge.slurm.log" ${depopt[@]+"${depopt[@]}"} "$@" "$out/merge.sh"); then
    local then="; once the shards (job array ${array_id:-}) are done,"
    [ -n "${array_id:-}" ] || then=";"
    echo "$me: sbatch refused the merge job (above)$then $me rerun$(quote "$out") submits it" >&2
    return 1
  fi
  merge_job=${id%%;*}
  record "merge_job=$merge_job"
  if [ "$dry" = 1 ]; then
    return
  elif [ -n "$spec" ]; then
    echo "submitted: shards job $array_id (array $spec), merge job $merge_job (after all shards succeed)"
  else
    echo "submitted: merge job $merge_job"
  fi
}
spec_list() { tr ',' '\n' <<< "$1" | awk -F- '{ for (i = $1; i <= ($2 == "" ? $1 : $2); i++) print i }'; }

write_jobs() {
  {
    echo '#!/bin/bash'
    echo "# One shard of the compcoll-sim sweep in $(printf %q "$out"), written by scripts/slurm-sweep.sh:"
    echo "# array task I runs compcoll-sim --shard I/$shards into shards/I, and writes its exit status to shards/I/exit."
    echo "i=\${SLURM_ARRAY_TASK_ID:?submit it as a Slurm array task}"
    echo "d=$(printf %q "$out")/shards/\$i"
    echo 'rm -rf "$d" && mkdir -p "$d" || exit 1'
    echo 'done_with() { echo "$1" > "$d/exit.tmp" && mv "$d/exit.tmp" "$d/exit"; echo "slurm-sweep: shard $i: exit $1 ($(date))" >&2; exit "$1"; }'
    echo "trap 'done_with 143' TERM"
    echo 'echo "slurm-sweep: shard $i of '"$shards"' on $(hostname), job ${SLURM_ARRAY_JOB_ID}_$i ($(date))" >&2'
    echo "cd $(printf %q "$cwd") || done_with 2"
    echo "$(printf %q "$sim")$(quote "$experiment" ${sets[@]+"${sets[@]}"}) --shard \"\$i/$shards\" --out \"\$d\" > \"\$d/stdout.txt\""
    echo 'done_with $?'
  } > "$out/shard.sh"
  {
    echo '#!/bin/bash'
    echo "# The merge of the compcoll-sim sweep in $(printf %q "$out"), written by scripts/slurm-sweep.sh:"
    echo "# once every shard's exit status is 0, compcoll-sim merge writes results.csv and results.json there."
    echo "out=$(printf %q "$out")"
    echo 'rm -f "$out/merge.exit"'
    echo 'done_with() { echo "$1" > "$out/merge.exit"; exit "$1"; }'
    echo 'dirs=()'
    echo "for ((i = 1; i <= $shards; i++)); do"
    echo '  if ! { read -r rc < "$out/shards/$i/exit"; } 2> /dev/null; then'
    echo '    echo "slurm-sweep: merge: shard $i has no exit status (log: $out/shards/$i.slurm.log)" >&2; done_with 1'
    echo '  elif [ "$rc" != 0 ]; then'
    echo '    echo "slurm-sweep: merge: shard $i exited $rc (log: $out/shards/$i.slurm.log)" >&2; done_with 1'
    echo '  fi'
    echo '  dirs+=("$out/shards/$i")'
    echo 'done'
    echo "$(printf %q "$sim") merge --out \"\$out\" --command $(printf %q "$command")"' "${dirs[@]}"'
    echo 'done_with $?'
  } > "$out/merge.sh"
  chmod +x "$out/shard.sh" "$out/merge.sh"
}

# --- status ----------------------------------------------------------------------------------
cmd_status() {
  local wait=0 dir=""
  while [ $# -gt 0 ]; do
    case $1 in
      --wait) wait=1 ;;
      -*) echo "$me: status: unknown option '$1'" >&2; usage ;;
      *) [ -z "$dir" ] || usage; dir=$1 ;;
    esac
    shift
  done
  [ -n "$dir" ] || usage
  need_slurm
  load "$dir"
  [ "$wait" = 0 ] || { wait_sweep; exit $?; }
  scan || exit 2
  report
  if [ "${#failed[@]}" -gt 0 ] || { [ "$merge_state" != ok ] && [ "$merge_state" != queued ] && [ "$queued_n" -eq 0 ]; }; then
    rerun_hint
    exit 1
  fi
  [ "$merge_state" = ok ] && exit 0
  exit 3
}

# --- rerun -----------------------------------------------------------------------------------
cmd_rerun() {
  local wait=0 dir="" picks=() opts=() i p dep=""
  while [ $# -gt 0 ]; do
    case $1 in
      --wait) wait=1 ;;
      --) shift; opts=("$@"); break ;;
      -*) echo "$me: rerun: unknown option '$1'" >&2; usage ;;
      *) if [ -z "$dir" ]; then dir=$1; else for p in ${1//,/ }; do picks+=("$p"); done; fi ;;
    esac
    shift
  done
  [ -n "$dir" ] || usage
  need_slurm
  load "$dir"
  scan || exit 2
  for p in ${picks[@]+"${picks[@]}"}; do
    [[ $p =~ ^[1-9][0-9]*$ ]] && [ "$p" -le "$shards" ] || die "rerun: SHARD: expected 1 to $shards, got '$p'"
    [ "${state[p]}" != queued ] || die "rerun: shard $p is still ${why[p]}"
  done
  if [ "${#picks[@]}" -eq 0 ]; then
    for ((i = 1; i <= shards; i++)); do [ "${state[i]}" != failed ] || picks+=("$i"); done
  fi
  if [ "${#picks[@]}" -eq 0 ]; then
    [ "$merge_state" != ok ] || { echo "nothing to rerun: the sweep is merged ($out/results.csv)"; exit 0; }
    [ "$merge_state" != queued ] || { echo "nothing to rerun: no shard failed, and the merge job $merge_job waits for the others"; exit 0; }
  fi
  if [ "$merge_state" = queued ]; then
    scancel "$merge_job"
    echo "cancelled the earlier merge job $merge_job (a new one follows the rerun)"
  fi
  for i in ${picks[@]+"${picks[@]}"}; do rm -rf "${out:?}/shards/$i" "$(log_of "$i")"; done
  rm -f "$out/results.csv" "$out/results.json" "$out/merge.exit"
  # The merge waits for the shards rerun and for those still queued from earlier (by task id: a
  # whole earlier array holds the failed tasks). merge.sh checks every shard's exit status itself.
  for i in ${queued_ids[@]+"${queued_ids[@]}"}; do dep+=":$i"; done
  local spec
  spec=$(IFS=,; echo "${picks[*]:-}")
  submit "$spec" "$dep" ${user_opts[@]+"${user_opts[@]}"} ${opts[@]+"${opts[@]}"} || exit 1
  [ "$wait" = 0 ] || { wait_sweep; exit $?; }
  exit 0
}

# --- a sweep -----------------------------------------------------------------------------------
case ${1:-} in
  status) shift; cmd_status "$@" ;;
  rerun) shift; cmd_rerun "$@" ;;
esac
[ $# -ge 3 ] || usage
command="$me$(quote "$@")"
experiment=$1 out_arg=$2 shards=$3
shift 3
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "SHARDS: expected a positive integer, got '$shards'"
[ -f "$experiment" ] || die "$experiment: no such experiment file"
sets=() user_opts=() task_job=() merge_job="" force=0 wait=0
while [ $# -gt 0 ]; do
  case $1 in
    --set) [ $# -ge 2 ] || usage; sets+=(--set "$2"); shift 2 ;;
    --set=*) sets+=("$1"); shift ;;
    --force) force=1; shift ;;
    --wait) wait=1; shift ;;
    --) shift; user_opts=("$@"); break ;;
    *) echo "$me: unknown argument '$1'" >&2; usage ;;
  esac
done
cwd=$PWD
out=$(absolute "$out_arg")
sim=${COMPCOLL_SIM:-$repo/build/sim/compcoll-sim}
[ -x "$sim" ] || die "$sim: not built (scripts/build.sh)"
sim=$(absolute "$sim")
[ "$dry" = 1 ] || need_slurm

# Memory and time per task: the largest shard's, as compcoll-sim --estimate prices them (which
# checks the experiment too, before anything is submitted).
est=$("$sim" "$experiment" ${sets[@]+"${sets[@]}"} --estimate "$shards") || exit 2
read -r mem_mb time_s < <(awk '$1 == "shard" { for (i = 2; i < NF; i++) { if ($i == "mem_mb" && $(i + 1) > m) m = $(i + 1);
                                                 if ($i == "time_s" && $(i + 1) > t) t = $(i + 1) } }
                               END { print m + 0, t + 0 }' <<< "$est")
[ "$mem_mb" -gt 0 ] && [ "$time_s" -gt 0 ] || die "compcoll-sim --estimate printed no shard lines: $est"
res_opts=(--mem="${mem_mb}M" --time=$(((time_s + 59) / 60)))
echo "per task: ${res_opts[*]} (compcoll-sim --estimate, the largest of $shards shards; override after --)"

# No stale results: an earlier run in OUT_DIR is refused, or with --force cleared.
there=()
for f in "${written[@]}"; do
  if [ -d "$out/$f" ]; then there+=("$f/"); elif [ -e "$out/$f" ]; then there+=("$f"); fi
done
if [ "${#there[@]}" -gt 0 ]; then
  [ "$force" = 1 ] || die "$out: holds an earlier run (${there[*]}): choose another OUT_DIR, or add --force to clear it"
  if [ -f "$out/sweep.env" ] && [ "$dry" != 1 ]; then
    ( load "$out_arg"; scan > /dev/null 2>&1 || true
      ids=(${queued_ids[@]+"${queued_ids[@]}"})
      [ "$merge_state" != queued ] || ids+=("$merge_job")
      [ "${#ids[@]}" -eq 0 ] || die "$out: its earlier sweep still has jobs queued (${ids[*]}): scancel them first" ) || exit 2
  fi
  if [ "$dry" = 1 ]; then
    echo "would clear the earlier run in $out: ${there[*]}"
  else
    for f in "${written[@]}"; do rm -rf "${out:?}/$f"; done
    echo "cleared the earlier run in $out: ${there[*]}"
  fi
fi

if [ "$dry" = 1 ]; then
  echo "each task, in $(printf %q "$cwd"): $(printf %q "$sim")$(quote "$experiment" ${sets[@]+"${sets[@]}"}) --shard I/$shards --out $(printf %q "$out")/shards/I"
  submit "1-$shards" "" ${user_opts[@]+"${user_opts[@]}"} 2>&1
  exit 0
fi

mkdir -p "$out/shards"
{
  echo "# The compcoll-sim sweep in this folder, written by scripts/slurm-sweep.sh (status and rerun read it)."
  printf '%s=%q\n' command "$command" cwd "$cwd" experiment "$experiment" shards "$shards" sim "$sim"
  echo "sets=($(quote ${sets[@]+"${sets[@]}"}) )"
  echo "res_opts=($(quote "${res_opts[@]}") )"
  echo "user_opts=($(quote ${user_opts[@]+"${user_opts[@]}"}) )"
} > "$out/sweep.env"
write_jobs
if ! submit "1-$shards" "" ${user_opts[@]+"${user_opts[@]}"}; then
  if [ "${#task_job[@]}" -eq 0 ]; then  # nothing was submitted: leave no earlier run behind
    rm -rf "${out:?}/sweep.env" "$out/shard.sh" "$out/merge.sh" "$out/shards"
  fi
  exit 1
fi
echo "results: $out/results.csv and results.json once merge job $merge_job has run; $me status$(quote "$out") [--wait]"
[ "$wait" = 0 ] || { wait_sweep; exit $?; }
exit 0
