"""Goodput on a trace's own arrivals: rates map to speed factors of the recorded timestamps, the
verdict measures what warm-up and cool-down leave of the replay, bad input fails clearly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import test_experiments_fakes as fakes

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.experiments.goodput import SearchSettings, goodput_table
from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import get_policy
from ppsched.experiments.recorded_arrivals import (
    EDGE_SHARE,
    RecordedArrivals,
    recorded_arrivals,
    replay_spec,
    replay_window,
    with_arrivals,
)
from ppsched.experiments.runner import Runner
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.metrics.steady import Window

POISSON = WorkloadSpec("azure-conv", rate=1.0, seed=0)
TRACE = with_arrivals(POISSON, "trace", 2.0)  # the trace's first two minutes
WINDOW = Window(warmup_s=30.0, measure_s=120.0, cooldown_s=10.0)


def test_a_rate_is_the_recorded_timestamps_at_its_speed_factor():
    recorded = recorded_arrivals(TRACE)
    as_recorded, _, _ = load(replace(TRACE, speedup=1.0)).arrays()
    assert recorded.requests == len(as_recorded) and as_recorded[-1] < 120.0
    assert recorded.mean_rate == pytest.approx(len(as_recorded) / as_recorded[-1])
    rate = 2.5 * recorded.mean_rate
    spec = replay_spec(TRACE, rate, seed=7)
    assert spec.replay and spec.rate is None and spec.seed == 7
    assert spec.speedup == pytest.approx(2.5, rel=1e-5)
    replayed, _, _ = load(spec).arrays()
    np.testing.assert_allclose(replayed, as_recorded / spec.speedup)
    assert len(replayed) / replayed[-1] == pytest.approx(rate, rel=1e-5)


def test_the_window_is_what_warm_up_and_cool_down_leave_of_the_replay():
    recorded = RecordedArrivals(requests=1000, span_s=3600.0)
    slow = recorded.window(1.0, WINDOW)
    assert (slow.warmup_s, slow.measure_s, slow.cooldown_s) == (30.0, 3560.0, 10.0)
    fast = recorded.window(50.0, WINDOW)  # a 72 s replay: warm-up capped at a quarter of it
    assert fast.warmup_s == pytest.approx(EDGE_SHARE * 72.0)
    assert fast.cooldown_s == pytest.approx(10.0)
    assert fast.arrivals_s == pytest.approx(72.0)
    assert recorded.window(400.0, WINDOW).cooldown_s == pytest.approx(EDGE_SHARE * 9.0)
    assert replay_window(POISSON, WINDOW) is WINDOW  # Poisson runs keep the search's window


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_factor_or_rate_that_is_not_positive_fails_clearly(bad):
    recorded = RecordedArrivals(requests=10, span_s=60.0)
    with pytest.raises(UserError, match="expected a finite factor > 0"):
        recorded.window(bad, WINDOW)
    with pytest.raises(UserError, match="expected a finite rate > 0"):
        recorded.factor(bad)


@pytest.mark.parametrize("name, what", [("sharegpt", "has lengths only \\(format 'lengths'\\)"),
                                        ("synthetic-prefill", "is synthetic")])
def test_a_trace_without_timestamps_fails_clearly(name, what):
    with pytest.raises(UserError, match=f"'{name}' {what}, no recorded timestamps"):
        with_arrivals(WorkloadSpec(name, rate=1.0), "trace", None)


@pytest.mark.parametrize("argv, names", [
    (("--workload", "sharegpt", "--arrivals", "trace"), "'sharegpt' has lengths only"),
    (("--arrivals", "recorded"), "--arrivals 'recorded'"),
    (("--window-min", "5"), "--window-min 5.0: applies to --arrivals trace only"),
    (("--arrivals", "trace", "--window-min", "0"), "--window-min 0.0"),
])
def test_goodput_cli_bad_arrivals_exit_2_with_one_line(argv, names, tmp_path, capsys):
    rc = main(["goodput", *argv, "--out", str(tmp_path / "out"), "--no-progress"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("ppsched: error: ")
    assert names in lines[0], lines


def test_goodput_on_recorded_arrivals_finds_the_fakes_closed_form(tmp_path):
    # the fake engine's TPOT grows with the replay's measured rate: goodput = 4 x capacity
    settings = SearchSettings(start=1.0, floor=0.25, rel_tol=0.02, max_steps=14,
                              window=WINDOW)
    with Runner(tmp_path / "cache", jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        table = goodput_table(runner, Setup(), TRACE, ("predictive",), (1.0,), settings)
    recorded = recorded_arrivals(TRACE)
    n = recorded.requests
    for row in table.itertuples():
        config = make_config(get_policy(row.policy), Setup(), Setup().base_slo)
        truth = 4.0 * fakes.capacity(config) * n / (n - 1)  # measured rate: (n - 1) / span
        assert truth * (1 - 2 * settings.rel_tol) <= row.goodput_rps <= truth + 1e-9, row
        assert row.arrivals.startswith(f"trace ({n} requests")
        at = recorded.window(recorded.factor(row.goodput_rps), WINDOW)
        assert row.measure_s == pytest.approx(at.measure_s)


def test_verification_replays_the_trace_again_on_a_fresh_seed(tmp_path):
    settings = SearchSettings(start=1.0, floor=0.25, rel_tol=0.02, max_steps=14,
                              window=WINDOW, verify=True)
    with Runner(tmp_path / "cache", jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        table = goodput_table(runner, Setup(), TRACE, ("static-512",), (1.0,), settings)
    row = next(table.itertuples())
    recorded = recorded_arrivals(TRACE)
    assert row.verify == "pass" and row.goodput_rps == row.search_goodput_rps
    # the whole replay at the goodput's factor, not 4x a Poisson window the trace cannot fill
    at = recorded.window(recorded.factor(row.goodput_rps), WINDOW)
    assert row.verify_measure_s == pytest.approx(at.measure_s)
