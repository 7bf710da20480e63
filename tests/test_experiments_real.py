"""Tiny goodput searches on the real simulator (a 60 s measurement window per run)."""

import math

import pytest

from ppsched.experiments.goodput import SearchSettings, goodput_table
from ppsched.experiments.plan import Setup
from ppsched.experiments.runner import Runner
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.metrics.steady import Window

SPEC = WorkloadSpec("azure-conv", rate=1.0, seed=0)
SETTINGS = SearchSettings(start=2.0, floor=0.25, rel_tol=0.02, max_steps=7,
                          window=Window(warmup_s=10.0, measure_s=60.0, cooldown_s=5.0))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def table(cache):
    with Runner(cache, jobs=1) as runner:
        return goodput_table(runner, Setup(), SPEC, ("static-2048", "predictive"), (1.0, 0.4),
                             SETTINGS)


def test_search_on_simulator_finds_a_bracket_and_is_monotone(table):
    for row in table.itertuples():
        tried = [(float(r), ok == "1") for r, ok in
                 (t.split(":") for t in row.tried.split(": ", 1)[1].split(";"))]
        passes = [r for r, ok in tried if ok]
        fails = [r for r, ok in tried if not ok]
        # Criterion monotone in rate on these runs: every pass lies below every failure.
        assert not passes or not fails or max(passes) < min(fails), row.tried
        assert fails, f"{row.policy} @ {row.slo_scale}: no failing rate found ({row.tried})"
        if row.goodput_rps > 0:
            assert row.goodput_rps == pytest.approx(max(passes), rel=1e-3)
            assert math.isfinite(row.bracket_hi)
            assert row.bracket_hi - row.goodput_rps <= SETTINGS.rel_tol * row.bracket_hi \
                or len(tried) >= SETTINGS.max_steps


def test_tighter_slo_never_raises_goodput(table):
    for policy, group in table.groupby("policy"):
        by_scale = group.set_index("slo_scale")["goodput_rps"]
        assert by_scale[0.4] <= by_scale[1.0], policy


def test_rerun_is_served_from_cache(table, cache):
    with Runner(cache, jobs=1) as runner:
        again = goodput_table(runner, Setup(), SPEC, ("static-2048", "predictive"), (1.0, 0.4),
                              SETTINGS)
    assert runner.computed == 0 and runner.reused > 0
    assert list(again["goodput_rps"]) == list(table["goodput_rps"])
