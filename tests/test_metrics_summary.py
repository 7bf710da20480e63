"""Metric definitions on hand-computed examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.metrics import percentile_with_misses, percentiles, summarize


def _rec(i, arrival, first, finish, out, **kw):
    return RequestRecord(req_id=i, arrival_s=arrival, prompt_tokens=10, output_tokens=out,
                         first_token_s=first, finish_s=finish, **kw)


RECORDS = [
    _rec(0, 0.0, 1.0, 3.0, 5),    # TTFT 1000, TPOT 2000/4 = 500, E2E 3000
    _rec(1, 1.0, 1.5, 2.5, 11),   # TTFT 500, TPOT 1000/10 = 100, E2E 1500
    _rec(2, 2.0, 2.1, 2.1, 1),    # TTFT 100 (approx), no TPOT, E2E 100
    RequestRecord(3, 3.0, 10, 4, rejected=True, reject_reason="kv full"),
]


def test_latency_percentiles_over_completed():
    s = summarize(RECORDS, Slo())
    assert (s["requests"], s["completed"], s["rejected"], s["unfinished"]) == (4, 3, 1, 0)
    assert s["ttft_ms"]["mean"] == pytest.approx(1600 / 3)
    assert s["ttft_ms"]["p50"] == pytest.approx(500)
    assert s["ttft_ms"]["p90"] == pytest.approx(900)  # 500 + 0.8 * (1000 - 500)
    assert s["tpot_ms"]["mean"] == pytest.approx(300)  # only the two multi-token requests
    assert s["tpot_ms"]["p90"] == pytest.approx(460)
    assert s["e2e_ms"]["p50"] == pytest.approx(1500)


def test_slo_attainment_counts_rejections_and_one_token_requests():
    s = summarize(RECORDS, Slo())
    # met: request 1 (500/100) and request 2 (1 token meets TPOT); 0 misses TPOT; 3 rejected
    assert s["slo_attainment"] == pytest.approx(0.5)
    assert summarize(RECORDS, Slo(), slo_scale=2.5)["slo_attainment"] == pytest.approx(0.75)
    assert summarize(RECORDS, Slo(), slo_scale=0.2)["slo_attainment"] == pytest.approx(0.25)


def test_throughput_over_first_arrival_to_last_finish():
    s = summarize(RECORDS, Slo())
    assert s["span_s"] == pytest.approx(3.0)
    assert s["throughput_rps"] == pytest.approx(1.0)
    assert s["output_tokens_per_s"] == pytest.approx(17 / 3)


def _uniform(n, ttft_s, tpot_s, out=11):
    return [_rec(i, float(i), i + ttft_s, i + ttft_s + tpot_s * (out - 1), out) for i in range(n)]


def test_goodput_criterion_p90():
    recs = _uniform(9, 1.0, 0.05) + [_rec(9, 9.0, 14.0, 14.5, 11)]  # one TTFT of 5000 ms
    s = summarize(recs, Slo())
    assert s["goodput_p90_ttft_ms"] == pytest.approx(1400)  # 1000 + 0.1 * (5000 - 1000)
    assert s["goodput_ok"] is True
    assert summarize(recs, Slo(), slo_scale=0.5)["goodput_ok"] is False  # 1400 > 1000
    assert summarize(_uniform(10, 0.1, 0.25), Slo())["goodput_ok"] is False  # TPOT 250 > 200
    assert summarize(_uniform(10, 0.1, 0.25), Slo(), slo_scale=1.5)["goodput_ok"] is True


def test_goodput_criterion_counts_rejections_as_late():
    rejected = RequestRecord(99, 50.0, 10, 5, rejected=True)
    assert summarize(_uniform(9, 0.1, 0.01) + [rejected], Slo())["goodput_ok"] is False
    assert summarize(_uniform(19, 0.1, 0.01) + [rejected], Slo())["goodput_ok"] is True
    assert summarize([rejected], Slo())["goodput_ok"] is False
    assert summarize([], Slo())["goodput_ok"] is False


def test_unfinished_requests_are_misses():
    recs = _uniform(3, 0.1, 0.01) + [RequestRecord(3, 5.0, 10, 5, first_token_s=5.1)]
    s = summarize(recs, Slo())
    assert (s["completed"], s["unfinished"], s["slo_attainment"]) == (3, 1, 0.75)


def test_percentile_helpers():
    p = percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert (p["mean"], p["p50"], p["p90"]) == (5.5, 5.5, pytest.approx(9.1))
    assert p["p999"] == pytest.approx(9.991)
    assert all(math.isnan(v) for v in percentiles([]).values())
    assert percentile_with_misses([1.0, 2.0, math.inf], 50) == 2.0
    assert percentile_with_misses([1.0, 2.0, math.inf], 51) == math.inf
    assert percentile_with_misses([], 90) == math.inf


_RECORD = st.builds(
    lambda i, a, t, d, out, rej: RequestRecord(i, a, 10, out, rejected=rej) if rej else
    _rec(i, a, a + t, a + t + d * (out - 1), out),
    st.integers(0, 10**6), st.floats(0, 100), st.floats(0, 10), st.floats(0, 1),
    st.integers(1, 50), st.booleans())


@settings(max_examples=80, deadline=None)
@given(records=st.lists(_RECORD, min_size=1, max_size=30), s1=st.floats(0.05, 5),
       s2=st.floats(0.05, 5))
def test_looser_slo_never_hurts(records, s1, s2):
    lo, hi = sorted((s1, s2))
    a, b = summarize(records, Slo(), slo_scale=lo), summarize(records, Slo(), slo_scale=hi)
    assert 0 <= a["slo_attainment"] <= b["slo_attainment"] <= 1
    assert b["goodput_ok"] or not a["goodput_ok"]
    assert a["completed"] + a["rejected"] + a["unfinished"] == len(records)
