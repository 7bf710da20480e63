"""Every simulated output is bit-identical to the engine's reference results for the same seed.

The digests below were computed by the engine before its per-microbatch path was made
incremental (requests, summary without its timings, decisions, per-stage iterations); any change
to a timing, a decision or a float in these runs changes them. The cases cover every chunk
policy, delay scheduling, TP, retractions, the prefix cache and SGLang's default (no mixed
chunk). ``bench/bench_sim_speed.py --baseline`` checks the same on its whole grid.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import ppsched
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.sim import simulate

TIMING_KEYS = ("sim_wall_s", "sim_speed", "sim_cpu_s", "sim_speed_cpu")
# the decision log's fields that existed when the reference digests were taken (fields added
# later, e.g. a regime, leave the digest as it is)
DECISION_KEYS = ("type", "time_s", "slot", "iteration", "chunk", "requested_chunk", "reason",
                 "inputs", "predicted_ms", "mb", "run", "held_ids")

# name: (run config, workload, expected digest, what the run must exercise)
CASES = {
    "static-512": (dict(chunk="static:512", mixed_chunk=True),
                   dict(name="azure-conv", rate=5.0, duration_s=60.0), "643c348819c9f53f", ()),
    "greedy-over": (dict(chunk="greedy", mixed_chunk=True),
                    dict(name="azure-conv", rate=8.0, duration_s=60.0), "7eb30dd1cd1e0afa", ()),
    "predictive": (dict(chunk="predictive", mixed_chunk=True),
                   dict(name="azure-conv", rate=6.0, duration_s=60.0), "bdbac98ed5d10b47", ()),
    "predictive-ds": (dict(chunk="predictive", ds="on", mixed_chunk=True),
                      dict(name="synthetic-decode", rate=4.0, duration_s=60.0), "d7f03f5d33f2f4f6",
                      ("ds_holds",)),
    "predictive-paper": (dict(chunk="predictive-paper", mixed_chunk=True),
                         dict(name="sharegpt", rate=2.0, duration_s=60.0), "fe13321812885862", ()),
    "sglang-dynamic-no-mixed": (dict(chunk="sglang-dynamic"),
                                dict(name="azure-conv", rate=3.0, duration_s=60.0),
                                "db67355784f3b338", ()),
    "tp4": (dict(chunk="static:2048", parallel="tp4", mixed_chunk=True),
            dict(name="azure-conv", rate=3.0, duration_s=60.0), "f7c46e08c59efa5e", ()),
    "retractions": (dict(chunk="static:1024", mixed_chunk=True, mem_fraction_static=0.6),
                    dict(name="sharegpt", rate=6.0, duration_s=60.0), "49f36d3367a35cb0",
                    ("retractions",)),
    "prefix-cache": (dict(chunk="predictive", mixed_chunk=True),
                     dict(name="mooncake-synthetic", rate=1.0, duration_s=60.0,
                          max_context=8192), "91e4c3f1fb031f96", ("prefix_hits",)),
}


def digest(result) -> str:
    h = hashlib.sha256()
    for r in result.records:
        h.update(repr((r.req_id, r.arrival_s, r.prompt_tokens, r.output_tokens,
                       r.first_token_s, r.finish_s, r.rejected, r.reject_reason, r.slot,
                       r.retractions)).encode())
    summary = {k: v for k, v in result.summary.items() if k not in TIMING_KEYS}
    tree = str(Path(ppsched.__file__).resolve().parent.parent)
    h.update(json.dumps(summary, sort_keys=True, default=repr).replace(tree, "<tree>").encode())
    decisions = [{k: v for k, v in d.items() if k in DECISION_KEYS} for d in result.decisions]
    h.update(json.dumps(decisions, sort_keys=True, default=repr).encode())
    it = result.iterations
    h.update(",".join(it.columns).encode())
    for col in it.columns:
        values = it[col].to_numpy()
        h.update("|".join(map(str, values)).encode() if values.dtype == object
                 else values.tobytes())
    return h.hexdigest()[:16]


def run_case(name: str):
    config, workload, _, _ = CASES[name]
    return simulate(RunConfig(seed=0, **config),
                    load(WorkloadSpec(seed=0, resample=True, **workload)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_match_the_reference_digest(name):
    result = run_case(name)
    for counter in CASES[name][3]:
        value = (result.summary["prefix_cache"]["hit_tokens"] if counter == "prefix_hits"
                 else result.summary[counter])
        assert value > 0, f"{name}: the run never exercises {counter}"
    assert digest(result) == CASES[name][2]


if __name__ == "__main__":  # print the digests of the code on PYTHONPATH
    for case in sorted(CASES):
        res = run_case(case)
        print(case, digest(res), res.summary["retractions"], res.summary["ds_holds"],
              res.summary["prefix_cache"].get("hit_tokens"), res.summary["microbatches"])
