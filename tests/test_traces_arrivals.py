"""Arrival processes: Poisson rate for a fixed seed, replay window and speed exactly."""

from __future__ import annotations

import numpy as np
import pytest

from ppsched.core.errors import UserError
from ppsched.core.paths import data_dir
from ppsched.traces import load_workload, poisson_arrivals, read_trace, replay_arrivals
from ppsched.traces.catalog import CATALOG


def test_poisson_rate_within_tolerance():
    times = poisson_arrivals(np.random.default_rng(0), 4.0, count=20000)
    assert np.all(np.diff(times) >= 0) and times[0] > 0
    gaps = np.diff(np.concatenate([[0.0], times]))
    # mean gap 1/rate; with 20000 draws its standard error is 0.7%: 3% is ~4 sigma
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)
    # exponential gaps: coefficient of variation 1
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


def test_poisson_duration_bound():
    times = poisson_arrivals(np.random.default_rng(1), 10.0, duration_s=500.0)
    assert times.max() < 500.0
    assert len(times) == pytest.approx(5000, rel=0.05)


def test_workload_rate_and_seed():
    wl = load_workload("azure-conv", rate=2.0, num_requests=5000, seed=7)
    assert wl.stats()["rate_rps"] == pytest.approx(2.0, rel=0.05)
    assert "poisson" in wl.arrival
    other = load_workload("azure-conv", rate=2.0, num_requests=5000, seed=8)
    assert other.requests[0].arrival_s != wl.requests[0].arrival_s


def test_replay_window_and_speed_exact():
    trace = np.array([0.0, 10.0, 59.9, 60.0, 125.0])
    np.testing.assert_array_equal(replay_arrivals(trace, window_min=1.0), [0.0, 10.0, 59.9])
    np.testing.assert_allclose(replay_arrivals(trace, speedup=0.5), trace * 2)
    np.testing.assert_allclose(replay_arrivals(trace, window_min=1.0, speedup=0.9),
                               np.array([0.0, 10.0, 59.9]) / 0.9)


def test_replay_of_real_trace_window_and_speed():
    table = read_trace(data_dir() / CATALOG["azure-conv"].file, "azure")
    ts = table.arrival_s
    wl = load_workload("azure-conv", replay=True, window_min=15, speedup=0.9)
    expected = ts[ts < 900.0]
    assert len(wl) == len(expected)
    arrival, prompt, _ = wl.arrays()
    np.testing.assert_allclose(arrival, expected / 0.9, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(prompt, table.prompt_tokens[:len(expected)])
    # 10% slower: every gap is longer by the factor 1/0.9
    np.testing.assert_allclose(np.diff(arrival), np.diff(expected) / 0.9, atol=1e-9)


def test_timestamped_trace_replays_by_default():
    assert load_workload("azure-code").requests == load_workload("azure-code", replay=True).requests


@pytest.mark.parametrize("kwargs", [
    {"rate": 1.0, "replay": True},
    {"rate": 1.0, "window_min": 5},
    {"rate": 1.0, "speedup": 2.0},
    {"replay": True, "speedup": 0.0},
    {"replay": True, "window_min": -1},
])
def test_conflicting_or_bad_arrival_options(kwargs):
    with pytest.raises(UserError):
        load_workload("azure-conv", **kwargs)


def test_length_only_set_needs_a_rate():
    with pytest.raises(UserError, match="--rate"):
        load_workload("sharegpt")
    with pytest.raises(UserError, match="timestamp"):
        load_workload("summarization", replay=True)
