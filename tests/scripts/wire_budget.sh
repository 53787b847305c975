#!/usr/bin/env bash
# tests/scripts/wire_budget.sh BUILD_DIR MPIRUN... — compcoll-run's wire budget on the smoke
# experiment (8 MPI ranks, in lockstep groups, as the nccl backend posts): every row checked
# and right, with budgets of the learned sizes (margin 0: each row's wire bytes are those of
# the run at exact sizes), 5% over them (wire bytes up to 5% more, never fewer), and queued
# (run.queue_ahead, on the compute thread's queue: the bytes of exact sizes again).
set -u
build=$1
shift
mpirun=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # name, then compcoll-run's --set arguments
  local name=$1
  shift
  if ! "${mpirun[@]}" "$build/real/compcoll-run" experiments/smoke-cpu.yaml --backend mpi --lockstep \
      --out "$out/$name" "$@" > "$out/$name.txt" 2>&1; then
    cat "$out/$name.txt"
    echo "FAILED: compcoll-run ($name) exited non-zero"
    exit 1
  fi
}
run exact
run budget --set run.wire_budget=true
run margin --set run.wire_budget=true --set run.wire_budget_margin=0.05
run queued --set run.wire_budget=true --set run.queue_ahead=true --set run.compute_thread=true
if ! grep -q '^# queued: each op submitted' "$out/queued.txt"; then
  cat "$out/queued.txt"
  echo "FAILED: compcoll-run did not say it runs queued"
  exit 1
fi
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
rows = {k: json.load(open(f"{d}/{k}/results.json"))["rows"] for k in ("exact", "budget", "margin", "queued")}
bad = []
if len({len(r) for r in rows.values()}) != 1 or len(rows["exact"]) < 40:
    bad.append(f"row counts {[len(r) for r in rows.values()]}")
budgeted = 0
for e, b, m, q in zip(rows["exact"], rows["budget"], rows["margin"], rows["queued"]):
    name = f'{e["collective"]} {e["algorithm"]} {e["codec"]} {e["size_bytes"]}'
    for k, r in (("exact", e), ("budget", b), ("margin", m), ("queued", q)):
        if r["wrong"] != 0:
            bad.append(f"{k}: {name}: {r['wrong']} wrong elements")
    for k, r in (("budget", b), ("queued", q)):
        if r["wire_bytes"] != e["wire_bytes"]:
            bad.append(f"{k}: {name}: {r['wire_bytes']} wire bytes where exact sizes sent {e['wire_bytes']}")
    if not (e["wire_bytes"] <= m["wire_bytes"] <= e["wire_bytes"] * 1.05 + m["messages"]):
        bad.append(f"margin: {name}: {m['wire_bytes']} wire bytes against {e['wire_bytes']} at exact sizes")
    budgeted += m["wire_bytes"] > e["wire_bytes"]
if budgeted < 10:
    bad.append(f"only {budgeted} rows sent more bytes with a 5% margin: the budgets were not used")
for line in bad:
    print("FAILED:", line)
print(f"{len(rows['exact'])} rows, {budgeted} compressed rows within 5% budgets")
if not bad:
    print("# OK")
PY
