from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppsched.dcp.signals import (
    ArrivalWindow,
    candidate_grid,
    percentile,
    percentile_below,
    safe_floor,
    snap_to_grid,
)


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


# few distinct values: ties, and limits that fall on a sample or between two neighbours
_samples = st.lists(st.one_of(st.sampled_from([0.0, 1.0, 2.5, 3.0, 7.0, float("nan")]),
                              st.floats(0, 1e4)), max_size=70)


@given(_samples, st.sampled_from([0.0, 10.0, 50.0, 90.0, 99.0, 100.0]),
       st.one_of(st.sampled_from([0.0, 1.0, 2.5, 3.0, 7.0]), st.floats(0, 1e4)),
       st.sampled_from([1.0, 3.0, 2000.0]))
def test_percentile_below_is_the_percentile_compared(xs, q, limit, scale):
    # the same answer, bit for bit, as comparing the sorted percentile (the SLO rule's TPOT
    # gate reads it at every re-plan; a count replaces the sort)
    value = percentile(xs, q)
    assert percentile_below(xs, q, limit, scale) == (value is not None and value / scale < limit)


def test_percentile_below_reads_the_interpolation():
    xs = (1.0, 2.0, 3.0, 4.0, 5.0)  # P90 = 4.6: between the 4th and 5th samples
    assert percentile_below(xs, 90, 4.61) and not percentile_below(xs, 90, 4.6)
    assert percentile_below(xs, 90, 9.3, scale=2.0) and not percentile_below(xs, 90, 2.3, 2.0)
    assert not percentile_below((), 90, 1e9)
    assert not percentile_below((float("nan"),), 90, 1e9)


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
