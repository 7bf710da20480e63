#!/bin/bash
# Goodput on recorded arrivals (ppsched goodput --arrivals trace), qwen2.5-32b, SLO scale 1.0:
# predictive, static:256/512/1024, greedy, predictive-paper on azure-conv and azure-code (the
# hour as recorded) and mooncake-synthetic (its first 5 min, context 8192, as the held-out
# table caps it). One seed, verified at 4x the window (the goodput default), at most 10 rates
# per search, started near the answer: about 15 CPU-minutes. Writes OUT/<trace>/goodput.csv
# and PIN (default results/pinned/recorded_arrivals.csv; empty: none). POLICIES overrides the
# list above.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/recorded-arrivals}
PY=${PY:-.venv/bin/python}
run() {  # trace, start rate, [minutes replayed], [context cap]
  $PY -m ppsched.cli.main goodput --model qwen2.5-32b --workload "$1" --arrivals trace \
    ${3:+--window-min "$3"} ${4:+--max-context "$4"} --slo-scales 1.0 \
    --policies "${POLICIES:-predictive,static-256,static-512,static-1024,greedy,predictive-paper}" \
    --seeds 1 --start "$2" --max-steps 10 --jobs "${JOBS:-2}" --out "$OUT/$1"
}
run azure-conv 4.0
run azure-code 0.25
run mooncake-synthetic 0.8 5 8192
PIN=${PIN-results/pinned/recorded_arrivals.csv}  # empty: no table written (a candidate's run)
if [ -n "$PIN" ]; then $PY bench/recorded_arrivals_table.py "$OUT" "$PIN"; fi
