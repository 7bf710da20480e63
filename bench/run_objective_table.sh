#!/usr/bin/env bash
# A candidate predictive rule over the whole controller table, predictive only (oracle-static and
# the rule on main come from results/pinned), each part run by the script that pinned it:
# make paper's azure-conv groups and the ten held-out groups (bench/run_heldout.sh), the four
# held-out-model groups, the shifting-load target (chat-batch, 600 s phases, SLO 0.4) and
# recorded arrivals on the three traces (bench/run_recorded_arrivals.sh). Then
# bench/objective_table.py judges it: 8.5 min on the idle 2-core box with `make native`
# (empty cache), where on main it reproduced every pinned predictive figure.
# Usage: bash bench/run_objective_table.sh [ROOT]   (default results/objective; JOBS=2)
# Output: ROOT/{goodput,heldout,heldout-models}/<group>/goodput.csv, ROOT/shift.log,
# ROOT/recorded/<trace>/goodput.csv, ROOT/*/wall.txt, ROOT/log.txt and ROOT/table.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${1:-results/objective}
PY=${PY:-.venv/bin/python}
mkdir -p "$ROOT"/{goodput,heldout,heldout-models}
export POLICIES=predictive CACHE="$ROOT/cache"
{
  OUT_ROOT="$ROOT/goodput" SLO_SCALES=1.0,0.8,0.6,0.4,0.2 bash bench/run_heldout.sh \
    qwen2.5-32b:azure-conv qwen2.5-14b:azure-conv
  OUT_ROOT="$ROOT/heldout" bash bench/run_heldout.sh
  OUT_ROOT="$ROOT/heldout-models" bash bench/run_heldout.sh bench/models/codellama-34b:sharegpt \
    bench/models/codellama-34b:azure-conv bench/models/internlm2-20b:sharegpt \
    bench/models/internlm2-20b:azure-code
  $PY bench/bench_dcp_shifting.py --workload chat-batch --period 600 --seeds 0,1 \
    --slo-scale 0.4 --start 2 --verify --chunks predictive > "$ROOT/shift.log"
  OUT="$ROOT/recorded" PIN= PY="$PY" bash bench/run_recorded_arrivals.sh
} > "$ROOT/log.txt" 2>&1
$PY bench/objective_table.py "$ROOT" --csv "$ROOT/table.csv"
grep -E "GOODPUT|VERIFY" "$ROOT/shift.log"
