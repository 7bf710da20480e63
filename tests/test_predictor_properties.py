"""Property tests: boundary detection is scale-free; RLS stays finite and symmetric."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.core.batch import BatchShape
from ppsched.predictor.alp import ALPredictor
from ppsched.predictor.boundaries import detect_boundaries
from ppsched.predictor.collect import vidur_token_grid
from ppsched.predictor.profile import LinearProfile

GRID = np.array(vidur_token_grid(1024), dtype=float)
PROFILE = LinearProfile(alpha0=0.07, alpha1=7.0, boundaries=(128,), staircase=((128, 11.0),),
                        fit_mape=1.0, staircase_mape=1.0, variant="staircase", model="m", tp=1,
                        source="test")

times = st.lists(st.floats(0.5, 50.0), min_size=len(GRID), max_size=len(GRID))


@settings(max_examples=40, deadline=None)
@given(times, st.floats(0.01, 100.0))
def test_boundaries_are_scale_free_ascending_and_on_the_grid(ys, scale):
    y = np.array(ys)
    found = detect_boundaries(GRID, y)
    assert detect_boundaries(GRID, y * scale) == found  # ms or us, one GPU or a 2x slower one
    assert list(found) == sorted(set(found)) and set(found) <= set(GRID.astype(int))


shapes = st.builds(
    lambda pieces, dec, ctx: BatchShape(prefill=tuple(pieces), decode_count=dec,
                                        decode_ctx_sum=dec * ctx),
    st.lists(st.tuples(st.integers(0, 32768), st.integers(1, 4096)), max_size=3),
    st.integers(0, 512), st.integers(1, 32768))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(shapes, st.floats(1e-3, 1e4)), min_size=1, max_size=60),
       st.booleans())
def test_rls_stays_finite_and_symmetric_on_arbitrary_data(data, online):
    alp = ALPredictor(PROFILE, correct_linear_online=online)
    for shape, ms in data:
        alp.update(shape, ms)
        p = alp.cov.rows()
        assert all(p[i][j] == p[j][i] for i in range(alp.n) for j in range(alp.n))
        assert all(0 < p[i][i] < 1e8 for i in range(alp.n))
        assert all(math.isfinite(w) for w in alp.weights)
        assert math.isfinite(alp.predict(shape))
