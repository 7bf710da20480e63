"""Early stop: a run ends exactly when its P90 TTFT verdict is decided, never when it can pass."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_compare import same_records

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.experiments.goodput_runs import run_spec
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.metrics.early_stop import StopRule, late_needed
from ppsched.metrics.steady import Window, verdict
from ppsched.metrics.summary import GOODPUT_PERCENTILE, percentile_with_misses
from ppsched.sim import simulate

SLO = Slo(2000.0, 200.0)
WINDOW = Window(warmup_s=30.0, measure_s=120.0, cooldown_s=10.0)
RULE = StopRule(SLO.ttft_ms, WINDOW.warmup_s, WINDOW.end_s)


@pytest.mark.parametrize("n", range(1, 260))
def test_late_needed_is_exactly_where_the_p90_certainly_fails(n):
    limit = 1000.0
    needed = late_needed(n)
    assert needed > 0.1 * n  # more than 10% of the window
    # late ones just over the limit, on-time ones far below: the least favourable to a failure
    fails = percentile_with_misses(np.array([0.0] * (n - needed) + [limit * 1.001] * needed),
                                   GOODPUT_PERCENTILE)
    assert fails > limit
    passes = percentile_with_misses(
        np.array([0.0] * (n - needed + 1) + [limit * 1.001] * (needed - 1)), GOODPUT_PERCENTILE)
    assert passes <= limit  # one fewer late request and the P90 can still pass


def test_rule_refuses_bad_values():
    for bad in (dict(ttft_ms=0.0), dict(ttft_ms=math.nan), dict(ttft_ms=1.0, measure_from_s=-1),
                dict(ttft_ms=1.0, measure_from_s=5.0, measure_to_s=5.0)):
        with pytest.raises(UserError, match="early stop"):
            StopRule(**bad)


def _req(arrival: float, first: float, rejected: bool = False) -> SimpleNamespace:
    return SimpleNamespace(arrival_s=arrival, first_s=first, rejected=rejected)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 60.0), st.floats(0.0, 10.0), st.booleans(),
                          st.booleans()), min_size=1, max_size=80),
       st.floats(0.5, 5.0))
def test_a_decided_count_always_means_a_failed_p90(rows, ttft_s):
    """Replay any run's first tokens in time order: whenever the count says decided, the P90
    TTFT over the measured requests (misses infinite) is above the SLO."""
    rows = sorted(rows)
    rule = StopRule(ttft_s * 1000.0, measure_from_s=5.0, measure_to_s=40.0)
    first = [math.nan if never else a + wait for a, wait, never, _ in rows]
    rejected = [rej for *_, rej in rows]
    count = rule.counter([a for a, *_ in rows])
    reqs = []
    events = sorted({a for a, *_ in rows} | {f for f in first if not math.isnan(f)} | {100.0})
    decided = False
    for now in events:  # arrivals and first tokens, as the engine's turns see them
        reqs = [_req(a, f if f <= now else math.nan, rej)
                for (a, *_), f, rej in zip(rows, first, rejected, strict=True) if a <= now]
        if count.decided(reqs, now):
            decided = True
            break
    start = rows[0][0]
    ttft = np.array([(f - a) * 1000.0 if not rej and not math.isnan(f) else math.inf
                     for (a, *_), f, rej in zip(rows, first, rejected, strict=True)
                     if 5.0 <= a - start < 40.0])
    if decided:
        assert percentile_with_misses(ttft, GOODPUT_PERCENTILE) > rule.ttft_ms
    elif ttft.size:  # at the end every deadline has passed: undecided means the P90 can pass
        late = int((ttft > rule.ttft_ms).sum())
        assert late < late_needed(ttft.size)


def _run(rate: float, chunk: str, stop: StopRule | None, seed: int = 0):
    spec = run_spec(WorkloadSpec("azure-conv", rate=1.0, seed=seed), rate, seed, WINDOW)
    return simulate(RunConfig(chunk=chunk, mixed_chunk=True, seed=seed), load(spec), stop=stop)


@pytest.fixture(scope="module")
def overloaded():
    return _run(9.0, "static:512", None), _run(9.0, "static:512", RULE)


def test_an_overloaded_run_stops_with_the_same_verdict(overloaded):
    full, stopped = overloaded
    assert not full.summary["stopped_early"] and full.summary["stop_reason"] == ""
    assert stopped.summary["stopped_early"]
    assert "certainly past the 2000 ms TTFT SLO" in stopped.summary["stop_reason"]
    assert stopped.summary["sim_end_s"] < 0.5 * full.summary["sim_end_s"]
    assert len(stopped.records) == len(full.records)  # every request recorded
    assert stopped.summary["unfinished"] > 0
    assert not verdict(full.records, WINDOW, SLO).ok
    assert not verdict(stopped.records, WINDOW, SLO).ok


def test_a_stopped_run_is_the_full_run_cut_short(overloaded):
    full, stopped = overloaded
    end = stopped.summary["sim_end_s"]
    for a, b in zip(full.records, stopped.records, strict=True):
        if b.finish_s <= end:
            assert a == b
        if a.first_token_s < end:  # every first token before the stop was given
            assert a.first_token_s == b.first_token_s


def test_it_stops_at_the_first_turn_the_count_reaches_the_threshold(overloaded):
    """From the full run: the deadline crossing that makes the certainly-late count reach
    late_needed(measured) comes just before the stop, and no earlier turn saw it."""
    full, stopped = overloaded
    start = min(r.arrival_s for r in full.records)
    measured = [r for r in full.records
                if WINDOW.warmup_s <= r.arrival_s - start < WINDOW.end_s]
    late_deadlines = sorted(r.arrival_s + SLO.ttft_ms / 1000.0 for r in measured
                            if r.rejected or not r.ttft_ms <= SLO.ttft_ms)
    needed = late_needed(len(measured))
    crossing = late_deadlines[needed - 1]
    end = stopped.summary["sim_end_s"]
    assert crossing < end <= crossing + 1.0  # the engine turns at least every microbatch
    assert f"{needed} of {len(measured)} measured" in stopped.summary["stop_reason"]


def test_a_passing_run_never_stops_and_is_unchanged():
    full, with_rule = _run(2.0, "static:512", None), _run(2.0, "static:512", RULE)
    assert verdict(full.records, WINDOW, SLO).ok
    assert not with_rule.summary["stopped_early"] and with_rule.summary["stop_reason"] == ""
    assert same_records(with_rule.records, full.records)


def test_a_rejected_request_counts_as_late():
    rule = StopRule(1000.0)
    count = rule.counter([0.0, 0.1, 0.2])
    reqs = [_req(0.0, math.nan, rejected=True), _req(0.1, 0.2), _req(0.2, math.nan, True)]
    assert not count.decided(reqs, 1.05)  # one deadline passed: one late of the 2 needed
    assert count.late == 1 and late_needed(3) == 2
    assert count.decided(reqs, 1.25)
    assert "2 of 3 measured" in count.reason


def test_records_of_a_stopped_run_mark_unfinished_not_rejected(overloaded):
    _, stopped = overloaded
    unfinished = [r for r in stopped.records if not math.isfinite(r.finish_s) and not r.rejected]
    assert len(unfinished) == stopped.summary["unfinished"]
    assert all(isinstance(r, RequestRecord) and r.reject_reason == "" for r in unfinished)


def test_goodput_table_is_identical_with_and_without_early_stop(tmp_path):
    """Every figure of a small real table, verification included, with early stop as without."""
    from dataclasses import replace

    from ppsched.experiments.goodput import SearchSettings, goodput_table
    from ppsched.experiments.plan import Setup
    from ppsched.experiments.runner import Runner

    settings = SearchSettings(start=4.0, rel_tol=0.02, max_steps=12, verify=True,
                              window=Window(warmup_s=20.0, measure_s=80.0, cooldown_s=5.0))
    tables, simulated = [], []
    for stop_early in (False, True):
        with Runner(tmp_path / f"cache-{stop_early}", jobs=1) as runner:
            tables.append(goodput_table(runner, Setup(), WorkloadSpec("azure-conv", rate=1.0),
                                        ("greedy",), (1.0, 0.4),
                                        replace(settings, stop_early=stop_early)))
        simulated.append(runner.computed)
    full, early = tables
    assert (full["verify"] != "not run").all()
    pd.testing.assert_frame_equal(full, early)
    assert simulated[0] == simulated[1]  # the same runs, some of them shorter
    stopped = [json.loads(p.read_text())["stopped_early"]
               for p in (tmp_path / "cache-True").glob("*/summary.json")]
    assert any(stopped) and not all(stopped)


def test_a_run_shared_by_several_scales_stops_on_the_loosest(tmp_path):
    """static-2048 does not read the SLO: its runs serve scales 1.0 and 0.4 and stop on 1.0's
    TTFT SLO; predictive reads it: each scale's runs stop on their own."""
    import test_experiments_fakes as fakes

    from ppsched.experiments.goodput import SearchSettings, goodput_table
    from ppsched.experiments.plan import Setup
    from ppsched.experiments.runner import Runner

    settings = SearchSettings(start=2.0, max_steps=4, window=WINDOW)
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        goodput_table(runner, Setup(), WorkloadSpec("azure-conv", rate=1.0), ("predictive",),
                      (1.0, 0.4), settings)
    stops: dict[str, set] = {}
    for meta in tmp_path.glob("*/meta.json"):
        data = json.loads(meta.read_text())
        stops.setdefault(data["config"]["chunk"], set()).add(
            (data["config"]["slo"]["ttft_ms"], data["stop"]["ttft_ms"],
             data["stop"]["measure_from_s"], data["stop"]["measure_to_s"]))
    assert {s[1:] for s in stops["static:2048"]} == {(2000.0, 30.0, 150.0)}
    assert stops["predictive"] == {(2000.0, 2000.0, 30.0, 150.0), (800.0, 800.0, 30.0, 150.0)}
