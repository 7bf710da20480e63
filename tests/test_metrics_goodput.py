"""Goodput search on synthetic monotone criteria."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.core.errors import UserError
from ppsched.metrics import goodput_search


def test_grows_then_bisects_and_reports_every_rate():
    calls = []

    def ok(rate):
        calls.append(rate)
        return rate <= 3.7

    res = goodput_search(ok, lo=0.5, hi=1.0, rel_tol=0.05, max_steps=20)
    assert [r for r, _ in res.tried] == calls
    assert res.tried[:4] == ((0.5, True), (1.0, True), (2.0, True), (4.0, False))
    passed, failed = res.bracket
    assert passed == res.goodput_rps <= 3.7 < failed
    assert failed - passed <= 0.05 * failed
    assert all(ok_ == (rate <= 3.7) for rate, ok_ in res.tried)


def test_lo_fails_gives_zero():
    res = goodput_search(lambda r: False, lo=1.0, hi=2.0)
    assert res.goodput_rps == 0.0 and res.tried == ((1.0, False),)


def test_budget_bounds_growth():
    res = goodput_search(lambda r: True, lo=1.0, hi=2.0, max_steps=5)
    assert [r for r, _ in res.tried] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert res.goodput_rps == 16.0 and res.bracket == (16.0, math.inf)


def test_budget_bounds_bisection():
    res = goodput_search(lambda r: r < 1.234567, lo=1.0, hi=2.0, rel_tol=1e-9, max_steps=6)
    assert len(res.tried) == 6
    assert res.bracket[0] < 1.234567 <= res.bracket[1]


@settings(max_examples=60, deadline=None)
@given(threshold=st.floats(0.3, 500.0), lo=st.floats(0.05, 0.29), rel_tol=st.floats(0.01, 0.2))
def test_brackets_any_threshold(threshold, lo, rel_tol):
    res = goodput_search(lambda r: r <= threshold, lo=lo, hi=2 * lo, rel_tol=rel_tol,
                         max_steps=40)
    passed, failed = res.bracket
    assert passed <= threshold < failed
    assert failed - passed <= rel_tol * failed
    assert res.goodput_rps == passed


@pytest.mark.parametrize("kwargs", [
    {"lo": 0.0, "hi": 1.0}, {"lo": 2.0, "hi": 1.0}, {"lo": 1.0, "hi": math.inf},
    {"lo": 1.0, "hi": 2.0, "rel_tol": 0.0}, {"lo": 1.0, "hi": 2.0, "max_steps": 0},
])
def test_bad_arguments(kwargs):
    with pytest.raises(UserError):
        goodput_search(lambda r: True, **kwargs)
