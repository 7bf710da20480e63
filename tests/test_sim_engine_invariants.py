"""The invariant checks catch what they claim to, and hold on random small workloads."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_engine_fakes import FakeCost, specs

from ppsched.experiments.run_config import RunConfig
from ppsched.sim import SimInvariantError, simulate
from ppsched.sim.invariants import (
    check_all,
    check_decisions,
    check_engine,
    check_iterations,
    check_requests,
)

ROWS = [(0.0, 300, 5), (0.01, 1500, 3), (0.02, 40, 1), (0.5, 700, 9)]


@pytest.fixture(scope="module")
def good():
    wl = specs(ROWS)
    return wl, simulate(RunConfig(chunk="static:512"), wl, cost_model=FakeCost())


def test_a_clean_run_passes(good):
    wl, res = good
    check_all(wl.requests, res.records, res.iterations, res.decisions, res.stats)


def test_conservation_violation_is_caught(good):
    wl, res = good
    with pytest.raises(SimInvariantError, match="conservation"):
        check_requests(wl.requests, res.records[:-1], res.stats)
    unfinished = [dataclasses.replace(res.records[0], finish_s=math.nan)] + res.records[1:]
    with pytest.raises(SimInvariantError, match="never finished"):
        check_requests(wl.requests, unfinished, res.stats)


def test_wrong_token_count_is_caught(good):
    wl, res = good
    stats = dataclasses.replace(res.stats, generated=(4,) + res.stats.generated[1:])
    with pytest.raises(SimInvariantError, match="output tokens"):
        check_requests(wl.requests, res.records, stats)


def test_non_monotone_times_are_caught(good):
    wl, res = good
    bad = [dataclasses.replace(res.records[0], first_token_s=res.records[0].finish_s + 1)]
    with pytest.raises(SimInvariantError, match="monotone"):
        check_requests(wl.requests, bad + res.records[1:], res.stats)


def test_engine_level_violations_are_caught(good):
    _, res = good
    with pytest.raises(SimInvariantError, match="KV peak"):
        check_engine(dataclasses.replace(res.stats, kv_peak=res.stats.kv_capacity + 1))
    with pytest.raises(SimInvariantError, match="never resumed"):
        check_engine(dataclasses.replace(res.stats, held_left=1))
    with pytest.raises(SimInvariantError, match="consecutive"):
        check_engine(dataclasses.replace(res.stats, max_held_streak=3, ds_max_consecutive=2))


def test_empty_batch_and_stage_overlap_are_caught(good):
    _, res = good
    it = res.iterations.copy()
    it.loc[it["mb"] == 1, ["prefill_tokens", "decode_reqs"]] = 0
    with pytest.raises(SimInvariantError, match="empty microbatch"):
        check_iterations(it)
    it = res.iterations.copy()
    row = it.index[(it["mb"] == 1) & (it["stage"] == 2)][0]
    it.loc[row, "start_s"] -= 10.0
    with pytest.raises(SimInvariantError, match="stage"):
        check_iterations(it)


def _message(check, *args) -> str:
    with pytest.raises(SimInvariantError) as caught:
        check(*args)
    return str(caught.value)


def test_a_shuffled_frame_is_checked_alike(good):
    """The engine's frame (microbatch-major) is checked on reshaped columns; the same rows in
    another order by sorting: both must raise the same error for each broken frame."""
    _, res = good
    it = res.iterations
    assert it["mb"].is_monotonic_increasing  # the ordered path is the one the engine takes
    shuffled = it.sample(frac=1.0, random_state=0)
    assert not shuffled["mb"].is_monotonic_increasing
    check_iterations(shuffled)
    check_decisions(shuffled, res.decisions)
    broken = []
    fifo = it.copy()  # stage 1 starts microbatch 2 before it finished microbatch 1
    fifo.loc[(fifo["mb"] == 2) & (fifo["stage"] == 1), "start_s"] = \
        fifo.loc[(fifo["mb"] == 1) & (fifo["stage"] == 1), "start_s"].iloc[0]
    broken.append(fifo)
    early = it.copy()  # microbatch 0 enters stage 1 before stage 0 finished it
    early.loc[(early["mb"] == 0) & (early["stage"] == 1), "start_s"] = \
        early.loc[(early["mb"] == 0) & (early["stage"] == 0), "start_s"].iloc[0]
    broken.append(early)
    messages = [_message(check_iterations, frame) for frame in broken]
    assert "stage ran two microbatches" in messages[0]
    assert "before the previous stage finished" in messages[1]
    for frame, message in zip(broken, messages, strict=True):
        assert _message(check_iterations, frame.sample(frac=1.0, random_state=1)) == message
    decisions = [dict(d) for d in res.decisions]
    next(d for d in decisions if d["type"] == "chunk" and d["mb"] >= 0)["chunk"] = 1
    assert _message(check_decisions, it, decisions) == \
        _message(check_decisions, shuffled, decisions)


def test_decision_log_mismatch_is_caught(good):
    _, res = good
    decisions = [dict(d) for d in res.decisions]
    first = next(d for d in decisions if d["type"] == "chunk" and d["mb"] >= 0)
    first["chunk"] = 1
    with pytest.raises(SimInvariantError, match="chunk"):
        check_decisions(res.iterations, decisions)
    dropped = [d for d in res.decisions if d is not res.decisions[0]]
    with pytest.raises(SimInvariantError, match="one-to-one"):
        check_decisions(res.iterations, dropped)


# Arrivals on a coarse grid so bursts and zero gaps are common; lengths up to the context length.
request = st.tuples(st.integers(0, 40).map(lambda k: k * 0.05),
                    st.one_of(st.integers(1, 64), st.integers(1, 6000), st.integers(1, 32768)),
                    st.one_of(st.integers(1, 8), st.integers(1, 120)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(request, min_size=1, max_size=25),
       parallel=st.sampled_from(["pp4", "pp2", "tp4", "pp1"]),
       chunk=st.sampled_from(["static:128", "static:512", "static:2048", "greedy",
                              "predictive", "sglang-dynamic"]),
       ds=st.sampled_from(["off", "on"]), hold=st.integers(0, 3),
       capacity=st.integers(800, 20000), mixed=st.booleans(),
       cap=st.one_of(st.none(), st.integers(1, 8)))
def test_invariants_hold_on_random_workloads(rows, parallel, chunk, ds, hold, capacity, mixed,
                                            cap):
    rows = sorted(rows)
    wl = specs(rows)
    cfg = RunConfig(parallel=parallel, chunk=chunk, ds=ds, ds_max_consecutive=hold,
                    mixed_chunk=mixed, pp_max_micro_batch_size=cap)
    res = simulate(cfg, wl, cost_model=FakeCost(capacity=capacity))  # checks run inside
    s = res.summary
    assert s["completed"] + s["rejected"] == len(rows)
    for rec, spec in zip(res.records, wl.requests, strict=True):
        assert rec.rejected == (spec.prompt_tokens + spec.output_tokens >= capacity)


def test_zero_gap_burst_with_one_huge_prompt():
    rows = [(0.0, 16, 4)] * 30 + [(0.0, 30000, 8)] + [(0.0, 16, 4)] * 30
    wl = specs(rows)
    res = simulate(RunConfig(chunk="static:256"), wl, cost_model=FakeCost(capacity=40000))
    assert res.summary["completed"] == 61
    huge = res.records[30]
    assert huge.first_token_s > res.records[0].first_token_s


def test_prompt_beyond_the_context_length_is_rejected_with_reason():
    rows = [(0.0, 32000, 1000), (0.0, 10, 3)]
    res = simulate(RunConfig(), specs(rows), cost_model=FakeCost(capacity=10**6))
    assert res.records[0].rejected and "context length" in res.records[0].reject_reason
    assert not res.records[1].rejected
