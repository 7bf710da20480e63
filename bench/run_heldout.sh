#!/usr/bin/env bash
# The controller table's held-out cells under the sustained method (3 seeds, lowest over seeds, every point
# verified at 4x the window): predictive vs oracle-static, greedy and predictive-paper on the
# workloads the controller was not developed on. azure-conv (development) is in make paper's
# results/goodput/. Usage: bash bench/run_heldout.sh [GROUP ...]   GROUP = model:workload[:cap]
# Output: results/heldout/<model>-<workload>/goodput.csv; table: bench/dcp_table.py.
# A model may be a config.json folder (bench/models/*: models no rule was developed on); its folder
# name names the output. OUT_ROOT (default results/heldout), SLO_SCALES (default the table's
# 1.0,0.8,0.6,0.4), POLICIES (default the four below) and CACHE (default results/cache) override.
set -euo pipefail
cd "$(dirname "$0")/.."
groups=("$@")
if [ ${#groups[@]} -eq 0 ]; then
  groups=(qwen2.5-32b:sharegpt qwen2.5-32b:azure-code qwen2.5-32b:summarization
          qwen2.5-14b:sharegpt qwen2.5-14b:azure-code qwen2.5-14b:summarization
          qwen2.5-32b:mooncake-synthetic:8192 qwen2.5-14b:mooncake-synthetic:8192
          qwen2.5-32b:sharegpt-short qwen2.5-14b:sharegpt-short)
fi
for g in "${groups[@]}"; do
  IFS=: read -r model workload cap <<<"$g"
  out="${OUT_ROOT:-results/heldout}/$(basename "$model")-${workload}"
  extra=()
  if [ -n "${cap:-}" ]; then extra=(--max-context "$cap"); out="${out}-cap${cap}"; fi
  start=$(date +%s)
  .venv/bin/ppsched goodput --model "$model" --workload "$workload" "${extra[@]}" \
    --slo-scales "${SLO_SCALES:-1.0,0.8,0.6,0.4}" \
    --policies "${POLICIES:-oracle-static,predictive,greedy,predictive-paper}" \
    --seeds 3 --verify --jobs "${JOBS:-2}" --no-progress --cache "${CACHE:-results/cache}" --out "$out"
  echo "$g: $(( $(date +%s) - start )) s wall" | tee -a "${OUT_ROOT:-results/heldout}/wall.txt"
done
