from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppsched.dcp.signals import ArrivalWindow, candidate_grid, percentile, safe_floor, snap_to_grid


def test_candidate_grid():
    assert candidate_grid(2048) == tuple(range(128, 2049, 128))
    assert candidate_grid(1000)[-1] == 896
    assert candidate_grid(100) == (100,)
    assert candidate_grid(8192)[-1] == 2048


@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=50), st.floats(1, 100))
def test_percentile_matches_numpy(xs, q):
    assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-9, abs=1e-9)


def test_percentile_empty_and_nan():
    assert percentile((), 90) is None
    assert percentile((float("nan"),), 90) is None
    assert percentile((float("nan"), 5.0), 90) == 5.0


def test_safe_floor_and_snap():
    grid = candidate_grid(2048)
    assert safe_floor(grid, 0) == 128 and safe_floor(grid, 128) == 256
    assert safe_floor(grid, 5000) == 2048
    assert snap_to_grid(700, grid) == 640 and snap_to_grid(10, grid) == 128


def test_arrival_window_rate():
    w = ArrivalWindow(window_s=10.0, min_gap_s=0.0)
    assert w.update(0.0, 0) == 0.0
    assert w.update(5.0, 5000) == pytest.approx(1000.0)
    assert w.update(10.0, 10000) == pytest.approx(1000.0)
    # window [5, 15]: 25000 tokens in 10 s; then [10, 20]: only the burst's 20000
    assert w.update(15.0, 30000) == pytest.approx(2500.0)
    assert w.update(20.0, 30000) == pytest.approx(2000.0)
    assert w.update(30.0, 30000) == pytest.approx(0.0)
