"""A fake engine for the experiments tests: latency is an exact function of load and policy.

P90 TPOT = 50 ms x (nominal Poisson rate) / capacity(policy), TTFT = 100 ms, so the goodput of
each policy is known in closed form (4 x scale x capacity) and the searches can be checked.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pandas as pd

from ppsched.core.requests import RequestRecord

CALLS: list[str] = []


def capacity(config) -> float:
    if config.chunk.startswith("static:"):
        cap = 1.0 + int(config.chunk.split(":")[1]) / 1024  # 2048 best of the candidates
        return cap * (0.75 if config.parallel.startswith("tp") else 1.0)
    if config.chunk == "predictive":
        # SLO-dependent on purpose: a tighter TPOT SLO makes it choose smaller chunks.
        return 4.0 + (200.0 - config.slo.tpot_ms) / 100.0 + (0.5 if config.ds == "on" else 0.0)
    return {"greedy": 3.5, "sglang-dynamic": 2.5, "predictive-paper": 3.0}[config.chunk]


def measured_rate(workload) -> float:
    reqs = workload.requests
    return (len(reqs) - 1) / (reqs[-1].arrival_s - reqs[0].arrival_s)


def nominal_rate(workload) -> float:
    """The rate the workload was generated at ("poisson rate=R ..."), else the measured one."""
    match = re.search(r"poisson rate=([0-9.e+-]+)", workload.arrival)
    return float(match.group(1)) if match else measured_rate(workload)


def fake_simulate(config, workload, stop=None):  # runs to the end
    CALLS.append(config.chunk)
    tpot_s = 0.05 * nominal_rate(workload) / capacity(config)
    records = [RequestRecord(r.req_id, r.arrival_s, r.prompt_tokens, r.output_tokens,
                             first_token_s=r.arrival_s + 0.1,
                             finish_s=r.arrival_s + 0.1 + tpot_s * (r.output_tokens - 1),
                             slot=r.req_id % 4)
               for r in workload.requests]
    iterations = pd.DataFrame({"slot": [0, 1], "stage": [0, 0], "start_s": [0.0, 0.02],
                               "end_s": [0.02, 0.05], "prefill_tokens": [256, 0],
                               "prefix_tokens": [0, 0], "decode_reqs": [0, 8],
                               "decode_ctx_sum": [0, 4000], "kind": ["prefill", "decode"],
                               "predicted_ms": [19.0, 31.0], "measured_ms": [20.0, 30.0]})
    summary = {"requests": len(records), "ttft_ms": {"p90": 100.0},
               "tpot_ms": {"p90": 1000 * tpot_s}, "e2e_ms": {"p90": 1000 * tpot_s * 100},
               "slo_attainment": 1.0}
    return SimpleNamespace(records=records, summary=summary, iterations=iterations,
                           decisions=[])
