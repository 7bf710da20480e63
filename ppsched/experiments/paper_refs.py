"""The paper's reported numbers (PAPER.md, "Evaluation"), used to mark plots and in REPORT.md."""

from __future__ import annotations

# Goodput ratio of DCP (predictive) over PP_2048 (static:2048) at SLO scale 1.0 and 0.4.
GOODPUT_RATIO_VS_2048: dict[str, dict[float, float]] = {
    "qwen2.5-32b": {1.0: 2.7, 0.4: 5.4},
    "qwen2.5-14b": {1.0: 1.7, 0.4: 2.4},
}
# Predictive vs PP_static (oracle-static) goodput: "about equal on prefill-heavy traces".
GOODPUT_RATIO_VS_ORACLE = 1.0

# 32B, predictive vs PP_static: relative change of P90-ish TPOT / E2E (paper reports reductions).
# The summarization trace stands in for CNN/DailyMail (no CNN length file is public).
TAIL_REDUCTION: dict[str, dict[str, float]] = {
    "azure-conv": {"tpot": -0.35, "e2e": -0.31},
    "summarization": {"tpot": -0.42, "e2e": -0.36},
    "sharegpt": {"tpot": -0.36, "e2e": -0.24},
}
GREEDY_TAIL_REDUCTION_AZURE = {"tpot": -0.19, "e2e": -0.18}
# The paper's PP_static chunk per workload on 32B (512 for Azure/CNN/ShareGPT, 256 CNN-Reversed).
PAPER_STATIC_CHUNK = {"azure-conv": 512, "summarization": 512, "sharegpt": 512,
                      "summarization-reversed": 256}

# Azure 32B iteration latency (ms): P90 for PP_static / greedy / predictive; P99 static/predictive.
ITER_P90_MS = {"static": 51.68, "greedy": 29.56, "predictive": 21.53}
ITER_P99_MS = {"static": 65.34, "predictive": 30.94}

# Decode-heavy synthetic: PP over TP on mean TTFT / TPOT / E2E (TP time / PP time).
DECODE_HEAVY_PP_OVER_TP = {"ttft": 2.82, "tpot": 1.30, "e2e": 1.38}
SYNTHETIC_RATES = {"synthetic-prefill": 5.0, "synthetic-decode": 14.0}

# Azure conversation, first 15 minutes replayed at 0.9x: SLO attainment per policy.
REPLAY_ATTAINMENT = {"tp4": 0.019, "static-2048": 0.016, "oracle-static": 0.925,
                     "greedy": 0.935, "predictive": 0.945}
