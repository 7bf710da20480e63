"""Every simulated output is bit-identical to the reference engine's for the same seed.

The digests below are the reference engine's (ffa14cc) outputs of these runs, and for the cases
that run ``predictive`` in a mixed loop the outputs of its SLO rule as it is now: requests, the
summary's output figures, decisions and per-stage iterations. Any change to a timing, a decision
or a float changes them; a field added to the summary or the decision log does not. The cases
cover every chunk policy, delay scheduling with holds, TP, retractions, the prefix cache and
SGLang's default (no mixed chunk). ``bench/bench_sim_speed.py --baseline`` checks the same on
its whole grid. ``python tests/test_sim_golden.py`` prints the digests of the code on the path.
"""

from __future__ import annotations

import pytest

from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.sim import simulate
from ppsched.sim.digest import run_digest
from ppsched.sim.engine.feed import PolicyFeed

# the summary's output figures as the reference engine wrote them (its inputs -- config, engine
# settings, cost model -- and its own timings are not outputs; a figure added later leaves the
# digest as it is)
# name: (run config, workload, expected digest, what the run must exercise)
CASES = {
    "static-512": (dict(chunk="static:512", mixed_chunk=True),
                   dict(name="azure-conv", rate=5.0, duration_s=60.0), "867b7f65f1747565", ()),
    "greedy-over": (dict(chunk="greedy", mixed_chunk=True),
                    dict(name="azure-conv", rate=8.0, duration_s=60.0), "a4f21504352d8892", ()),
    "predictive": (dict(chunk="predictive", mixed_chunk=True),
                   dict(name="azure-conv", rate=6.0, duration_s=60.0), "d622c4d793816f78", ()),
    "predictive-ds": (dict(chunk="predictive", ds="on", mixed_chunk=True),
                      dict(name="synthetic-decode", rate=4.0, duration_s=60.0), "2e9f866c5fe86893",
                      ("ds_holds",)),
    "predictive-paper": (dict(chunk="predictive-paper", mixed_chunk=True),
                         dict(name="sharegpt", rate=2.0, duration_s=60.0), "394a4fffc85d2e32", ()),
    "sglang-dynamic-no-mixed": (dict(chunk="sglang-dynamic"),
                                dict(name="azure-conv", rate=3.0, duration_s=60.0),
                                "8caf2af5dac09bc2", ()),
    "tp4": (dict(chunk="static:2048", parallel="tp4", mixed_chunk=True),
            dict(name="azure-conv", rate=3.0, duration_s=60.0), "c23e76fbb577cc6a", ()),
    "retractions": (dict(chunk="static:1024", mixed_chunk=True, mem_fraction_static=0.6),
                    dict(name="sharegpt", rate=6.0, duration_s=60.0), "0fe171c4cb036e5d",
                    ("retractions",)),
    "prefix-cache": (dict(chunk="predictive", mixed_chunk=True),
                     dict(name="mooncake-synthetic", rate=1.0, duration_s=60.0,
                          max_context=8192), "1894ea55fc5a5284", ("prefix_hits",)),
}


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
    assert run_digest(result) == CASES[name][2]


HOLDING = {"greedy-over": "ppsched.dcp.greedy.GreedyChunk",
           "predictive": "ppsched.dcp.predictive.PredictiveChunk",
           "predictive-paper": "ppsched.dcp.predictive.PredictiveChunk"}


@pytest.mark.pure
@pytest.mark.parametrize("name", sorted(HOLDING))
def test_a_held_decision_is_the_one_decide_gives(name, monkeypatch):
    """The engine asks ``held_decision`` before it builds a snapshot; an engine that never asks
    sends every build through ``decide``: the same run either way, and most builds are held."""
    module, _, cls_name = HOLDING[name].rpartition(".")
    cls = getattr(__import__(module, fromlist=[cls_name]), cls_name)
    calls = {"held": 0, "answered": 0}
    original = cls.held_decision

    def counted(self, *args):
        decision = original(self, *args)
        calls["held"] += 1
        calls["answered"] += decision is not None
        return decision

    monkeypatch.setattr(cls, "held_decision", counted)
    with_held = run_digest(run_case(name))
    assert calls["answered"] > calls["held"] / 2, calls
    feed_init = PolicyFeed.__init__

    def without_held(self, *args):
        feed_init(self, *args)
        self.held_decision = None

    monkeypatch.setattr(PolicyFeed, "__init__", without_held)
    assert run_digest(run_case(name)) == with_held == CASES[name][2]


if __name__ == "__main__":  # print the digests of the code on PYTHONPATH
    for case in sorted(CASES):
        res = run_case(case)
        print(case, run_digest(res), res.summary["retractions"], res.summary["ds_holds"],
              res.summary["prefix_cache"].get("hit_tokens"), res.summary["microbatches"])
