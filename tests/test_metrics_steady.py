"""The steady-state verdict: an overloaded run fails the stability test, a stable one passes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.metrics.steady import Window, verdict, window_for

WINDOW = Window(warmup_s=60.0, measure_s=300.0, cooldown_s=30.0)
SLO = Slo(2000.0, 200.0)


def _queue_run(rate: float, service_rps: float, *, seed: int = 0, ttft_floor_s: float = 0.3,
               tpot_s: float = 0.05, out_tokens: int = 20) -> list[RequestRecord]:
    """A FIFO server finishing prefills at service_rps: the first token leaves when the queue
    ahead has drained. rate > service_rps makes the queue (and TTFT) grow linearly."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, int(rate * WINDOW.arrivals_s)))
    free = 0.0
    records = []
    for i, t in enumerate(arrivals):
        first = max(t + ttft_floor_s, free + 1.0 / service_rps)
        free = first
        records.append(RequestRecord(i, float(t), 100, out_tokens, first_token_s=first,
                                     finish_s=first + tpot_s * (out_tokens - 1)))
    return records


def test_stable_run_passes():
    result = verdict(_queue_run(rate=4.0, service_rps=6.0), WINDOW, SLO)
    assert result.meets_p90 and result.stable and result.ok
    assert result.balance > 0.97 and result.reason == "pass"
    assert result.measured == pytest.approx(4.0 * WINDOW.measure_s, rel=0.1)


def test_slowly_overloaded_run_fails_on_stability_even_if_the_overall_p90_passes():
    # 10% over capacity: the backlog grows ~0.5 req/s, so TTFT climbs through the window. With
    # a loose TTFT SLO the window-wide P90 (28 s here) is within it; the last quarter is not.
    records = _queue_run(rate=5.5, service_rps=5.0, ttft_floor_s=0.2)
    result = verdict(records, WINDOW, Slo(30_000.0, 200.0))
    assert result.meets_p90  # the burst is absorbed on the whole window ...
    assert not result.stable and not result.ok  # ... but the queue is still growing
    assert result.tail_p90_ttft_ms > 30_000.0


def test_heavily_overloaded_run_fails_balance_and_p90():
    result = verdict(_queue_run(rate=8.0, service_rps=5.0), WINDOW, SLO)
    assert not result.meets_p90 and not result.stable
    assert result.balance < 0.95
    assert "admissions" in result.reason


def test_warmup_and_cooldown_requests_are_not_scored():
    records = _queue_run(rate=4.0, service_rps=6.0)
    # Make every warm-up and cool-down request miss: the verdict must not notice.
    start = records[0].arrival_s
    spoiled = [r if WINDOW.warmup_s <= r.arrival_s - start < WINDOW.end_s else
               RequestRecord(r.req_id, r.arrival_s, 100, 20, rejected=True, reject_reason="x")
               for r in records]
    assert verdict(spoiled, WINDOW, SLO).ok


def test_rejected_or_unfinished_measured_requests_are_infinitely_late():
    records = _queue_run(rate=4.0, service_rps=6.0)
    start = records[0].arrival_s
    measured = [i for i, r in enumerate(records)
                if WINDOW.warmup_s <= r.arrival_s - start < WINDOW.end_s]
    cut = measured[: len(measured) // 9]  # 11% misses > the 10% a P90 tolerates
    spoiled = list(records)
    for i in cut:
        r = records[i]
        spoiled[i] = RequestRecord(r.req_id, r.arrival_s, 100, 20)  # never finished: NaN times
    result = verdict(spoiled, WINDOW, SLO)
    assert math.isinf(result.p90_ttft_ms) and not result.ok


def test_window_for_scales_with_the_median_output():
    short = window_for(129, SLO)  # azure-conv: e2e_ref = 2 + 128 * 0.2 = 27.6 s
    assert (short.warmup_s, short.measure_s, short.cooldown_s) == (60, 300, 28)
    long = window_for(415, SLO)  # sharegpt: e2e_ref = 2 + 414 * 0.2 = 84.8 s
    assert long.measure_s == 848 and long.warmup_s == 170
    assert short.longer(4).measure_s == 1200 and short.longer(4).warmup_s == 60
