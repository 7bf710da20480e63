"""Shifting-load workloads (``ppsched.traces.shifting``): the mix or the rate really shifts."""

from __future__ import annotations

import numpy as np
import pytest

from ppsched.core.errors import UserError
from ppsched.traces.shifting import alternating, diurnal, shifting_workload


def test_alternating_phases_swap_the_mix():
    w = alternating(4.0, 480.0, seed=3, period_s=120.0)
    arrival, prompt, output = w.arrays()
    phase = (arrival // 120.0).astype(int) % 2
    assert np.all((prompt[phase == 0] >= 512) & (output[phase == 0] <= 64))
    assert np.all((prompt[phase == 1] <= 64) & (output[phase == 1] >= 512))
    assert 0.8 < len(w) / (4.0 * 480.0) < 1.2  # Poisson at the asked rate
    again = alternating(4.0, 480.0, seed=3, period_s=120.0)
    assert again.requests == w.requests  # seeded


def test_diurnal_rate_swings_around_its_mean():
    w = diurnal(5.0, 1200.0, seed=1, period_s=300.0, depth=0.8)
    arrival, _, _ = w.arrays()
    phase = (arrival % 300.0) / 300.0
    high = np.sum(phase < 0.5)  # sin > 0: rate above the mean
    low = np.sum(phase >= 0.5)
    assert high > 2 * low
    assert 0.85 < len(w) / (5.0 * 1200.0) < 1.15
    assert [r.req_id for r in w.requests] == list(range(len(w)))


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError):
        shifting_workload("sawtooth", 1.0, 10.0)
    with pytest.raises(UserError):
        alternating(0.0, 10.0)
    with pytest.raises(UserError):
        diurnal(1.0, 10.0, depth=1.0)
