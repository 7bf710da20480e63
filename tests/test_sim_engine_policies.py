"""Every policy runs on the real cost model with all invariants holding (checked in simulate)."""

from __future__ import annotations

import pytest

from ppsched.experiments.run_config import RunConfig
from ppsched.sim import simulate
from ppsched.traces import load_workload


@pytest.fixture(scope="module")
def workload():
    return load_workload("azure-conv", rate=4, num_requests=120, seed=1)


@pytest.mark.parametrize("parallel, chunk, ds", [
    ("pp4", "static:512", "off"),
    ("pp4", "greedy", "off"),
    ("pp4", "predictive", "on"),
    ("pp4", "sglang-dynamic", "off"),
    ("pp2", "static:2048", "on"),
    ("tp4", "static:2048", "off"),
])
def test_policy_runs_clean_on_the_real_cost_model(workload, parallel, chunk, ds):
    res = simulate(RunConfig(parallel=parallel, chunk=chunk, ds=ds, ds_max_consecutive=2),
                   workload)
    s = res.summary
    print(parallel, chunk, ds, "TTFT p90", round(s["ttft_ms"]["p90"]), "TPOT p90",
          round(s["tpot_ms"]["p90"], 1), "iter p90", round(s["iteration_ms"]["p90"], 1),
          "bubble", round(s["bubble_fraction"], 3))
    assert s["completed"] + s["rejected"] == 120
    chunks = [d for d in res.decisions if d["type"] == "chunk"]
    assert chunks and all(0 < d["chunk"] <= 2048 for d in chunks)
    if chunk == "predictive":
        pre = res.iterations[res.iterations["prefill_tokens"] > 0]
        assert pre["predicted_ms"].notna().any()
