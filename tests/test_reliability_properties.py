"""Property tests on the real cost model: random workloads, policies, seeds; every invariant holds.

The engine runs ``ppsched/sim/invariants.py`` on every run (a violation raises); on top, these
tests check conservation and exact token counts on the records and iterations themselves.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.experiments.run_config import RunConfig
from ppsched.sim import simulate

CONTEXT = 32768  # Qwen2.5's max_context: lengths go up to it (and a little past, to be rejected)
EXAMPLES = int(os.environ.get("PPSCHED_FUZZ_EXAMPLES", "25"))  # more for a local bug hunt
CHUNKS = ("greedy", "predictive", "predictive-paper", "sglang-dynamic")


class _Workload:
    def __init__(self, requests: list[RequestSpec]) -> None:
        self.requests = tuple(requests)


@st.composite
def workloads(draw) -> _Workload:
    n = draw(st.integers(1, 60))
    shape = draw(st.sampled_from(["zero-gap", "bursts", "poisson"]))
    if shape == "zero-gap":
        times = [0.0] * n
    elif shape == "bursts":
        starts = draw(st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=1, max_size=4))
        times = [draw(st.sampled_from(starts)) for _ in range(n)]
    else:
        gaps = draw(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=n, max_size=n))
        times = list(np.cumsum(gaps))
    times.sort()
    small = st.tuples(st.integers(1, 2048), st.integers(1, 256))
    lengths = draw(st.lists(small, min_size=n, max_size=n))
    if draw(st.booleans()):  # one huge prompt among tiny ones, up to (and past) the context
        total = draw(st.integers(CONTEXT - 2000, CONTEXT + 50))
        output = draw(st.integers(1, 300))
        lengths[draw(st.integers(0, n - 1))] = (max(1, total - output), output)
    return _Workload([RequestSpec(i, float(t), p, o)
                      for i, (t, (p, o)) in enumerate(zip(times, lengths, strict=True))])


@st.composite
def configs(draw) -> RunConfig:
    parallel = draw(st.sampled_from(["pp4", "pp2", "tp4", "tp2"]))
    chunk = draw(st.one_of(st.sampled_from(CHUNKS),
                           st.integers(1, 4096).map(lambda n: f"static:{n}")))
    return RunConfig(
        model=draw(st.sampled_from(["qwen2.5-32b", "qwen2.5-14b"])),
        hardware=draw(st.sampled_from(["a100-40g-pcie", "a100-80g"])),
        parallel=parallel, chunk=chunk,
        ds=draw(st.sampled_from(["off", "on"])) if parallel.startswith("pp") else "off",
        ds_max_consecutive=draw(st.integers(0, 3)),
        seed=draw(st.integers(0, 2**16)),
        mixed_chunk=draw(st.booleans()),
        max_chunk_tokens=draw(st.sampled_from([256, 2048, 8192])),
        max_running_requests=draw(st.one_of(st.none(), st.integers(1, 64))),
        mem_fraction_static=draw(st.sampled_from([0.9, 0.9, 0.6, 0.5])),  # low: KV pressure
        admission=draw(st.sampled_from(["off", "on"])),
    )


def check_records(wl: _Workload, cfg: RunConfig, res) -> None:
    specs = {s.req_id: s for s in wl.requests}
    recs = res.records
    assert sorted(r.req_id for r in recs) == sorted(specs)  # conservation: one record each
    done = [r for r in recs if not r.rejected]
    rejected = [r for r in recs if r.rejected]
    assert res.summary["completed"] == len(done) and res.summary["rejected"] == len(rejected)
    generated = res.stats.generated
    for r in recs:
        spec = specs[r.req_id]
        assert (r.arrival_s, r.prompt_tokens, r.output_tokens) == \
            (spec.arrival_s, spec.prompt_tokens, spec.output_tokens)
        if r.rejected:
            assert r.reject_reason and generated[r.req_id] == 0
            assert math.isnan(r.first_token_s) and math.isnan(r.finish_s)
        else:
            assert generated[r.req_id] == r.output_tokens  # exact output length
            assert r.arrival_s <= r.first_token_s <= r.finish_s < math.inf
            if r.output_tokens == 1:
                assert r.first_token_s == r.finish_s
    capacity = res.summary["kv_capacity_tokens"]
    assert 0 <= res.summary["kv_peak_tokens"] <= capacity
    if cfg.admission == "off":
        for r in rejected:  # only what can never fit is turned away
            need = r.prompt_tokens + r.output_tokens
            assert need > CONTEXT or need - 1 >= capacity, r


def check_tokens(wl: _Workload, res) -> None:
    """Every prompt token prefilled once and one decode slot per later output token, exactly
    (a retraction recomputes, so then only lower bounds hold)."""
    it = res.iterations
    stage0 = it[it["stage"] == 0]
    done = [r for r in res.records if not r.rejected]
    prompts = sum(r.prompt_tokens for r in done)
    decodes = sum(r.output_tokens - 1 for r in done)
    prefilled = int(stage0["prefill_tokens"].sum())
    decoded = int(stage0["decode_reqs"].sum())
    if res.summary["retractions"] == 0:
        assert prefilled == prompts and decoded == decodes
    else:
        assert prefilled >= prompts and decoded >= decodes - res.summary["retractions"]
    if not it.empty:  # every microbatch crosses every stage once
        per_stage = it.groupby("stage")["mb"].nunique()
        assert (per_stage == stage0["mb"].nunique()).all()


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wl=workloads(), cfg=configs())
def test_every_policy_keeps_every_invariant(wl, cfg):
    try:
        res = simulate(cfg, wl)  # raises SimInvariantError on any engine-side violation
    except UserError as exc:  # a draw whose weights leave no room: not a valid example
        assert "fit" in str(exc) or "KV" in str(exc), exc
        reject()
    event(f"retractions: {'yes' if res.summary['retractions'] else 'no'}")
    event(f"rejected: {'yes' if res.summary['rejected'] else 'no'}")
    check_records(wl, cfg, res)
    check_tokens(wl, res)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wl=workloads(), cfg=configs())
def test_same_seed_same_run(wl, cfg):
    cfg = dataclasses.replace(cfg, mem_fraction_static=0.9)
    def key(res) -> list[tuple]:
        return [(r.req_id, r.rejected, r.reject_reason, None if r.rejected else r.first_token_s,
                 None if r.rejected else r.finish_s) for r in res.records]

    assert key(simulate(cfg, wl)) == key(simulate(cfg, wl))


def test_the_checks_catch_a_lost_token_and_a_lost_request():
    wl = _Workload([RequestSpec(0, 0.0, 300, 5), RequestSpec(1, 0.0, 40, 3)])
    cfg = RunConfig(chunk="static:128")
    res = simulate(cfg, wl)
    check_records(wl, cfg, res)
    check_tokens(wl, res)
    short = dataclasses.replace(res.stats, generated=(4,) + res.stats.generated[1:])
    with pytest.raises(AssertionError):
        check_records(wl, cfg, dataclasses.replace(res, stats=short))
    with pytest.raises(AssertionError):
        check_records(wl, cfg, dataclasses.replace(res, records=res.records[:1]))
    it = res.iterations.copy()
    it.loc[it.index[0], "prefill_tokens"] -= 1
    with pytest.raises(AssertionError):
        check_tokens(wl, dataclasses.replace(res, iterations=it))


@settings(max_examples=max(4, EXAMPLES // 3), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(40, 100), out=st.integers(800, 2000), gap_ms=st.integers(0, 5),
       mem=st.sampled_from([0.5, 0.55, 0.6]), cfg=configs())
def test_kv_pressure_with_retractions_keeps_every_invariant(n, out, gap_ms, mem, cfg):
    """Long outputs on a small KV cache: SGLang-style retractions happen; nothing is lost."""
    wl = _Workload([RequestSpec(i, gap_ms * i / 1000.0, 300 + 7 * i, out + 13 * i)
                    for i in range(n)])
    cfg = dataclasses.replace(cfg, model="qwen2.5-32b", hardware="a100-40g-pcie",
                              mem_fraction_static=mem,
                              parallel="pp4" if cfg.parallel.startswith("pp") else "tp4")
    res = simulate(cfg, wl)
    event(f"retractions: {'yes' if res.summary['retractions'] else 'no'}")
    check_records(wl, cfg, res)
    check_tokens(wl, res)
