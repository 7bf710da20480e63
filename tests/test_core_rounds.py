"""The measured round (``RoundMeter``) and the SLO rule's KV budget built on it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_dcp_rule_slo import ELSEWHERE, mixed_ctl
from test_dcp_support import make_snap, waiting

from ppsched.core.rounds import RoundMeter, kv_round_ms
from ppsched.core.snapshots import Launch


def launches(meter: RoundMeter, start: float, gap_s: float, n: int, *, decodes: int = 3,
             skip: int | None = None) -> float:
    """n launches round robin over the meter's slots, gap_s apart; ``skip``: a launch index
    the engine never reports. Returns the next launch time."""
    t = start
    for i in range(n):
        if i != skip:
            meter.launch(Launch(t, i % meter.pp, 0, decodes))
        t += gap_s
    return t


def test_the_round_is_the_time_between_a_slots_launches():
    meter = RoundMeter(4, horizon_s=10.0)
    assert meter.mean_round_ms is None
    launches(meter, 0.0, 0.020, 4)  # each slot's first launch: no round yet
    assert meter.mean_round_ms is None
    launches(meter, 0.080, 0.020, 8)  # 20 ms apart: every round 80 ms
    assert meter.mean_round_ms == pytest.approx(80.0)


def test_rounds_with_a_missing_launch_or_no_decodes_are_not_measured():
    meter = RoundMeter(4, horizon_s=10.0)
    launches(meter, 0.0, 0.020, 12, skip=6)  # slot 2's second launch never reported
    # rounds closed by launches 4, 5 (slots 0, 1) and 11 (slot 3) are whole; slot 2's third
    # launch (10) sees 8 launches since its first, and launch 7 (slot 3) only 2 since launch 5
    assert meter.mean_round_ms == pytest.approx(80.0)
    idle = RoundMeter(4, horizon_s=10.0)
    launches(idle, 0.0, 0.020, 12, decodes=0)  # nothing decodes: no TPOT waits on a round
    assert idle.mean_round_ms is None


def test_old_rounds_fade_over_the_horizon():
    meter = RoundMeter(2, horizon_s=1.0)
    t = launches(meter, 0.0, 0.050, 40)  # 100 ms rounds for 2 s...
    assert meter.mean_round_ms == pytest.approx(100.0)
    launches(meter, t, 0.100, 100)  # ...then 200 ms rounds for 10 s (10 horizons)
    assert 199.0 < meter.mean_round_ms < 200.0


def test_an_idle_gap_ended_by_new_work_is_not_a_round():
    meter = RoundMeter(2, horizon_s=100.0)
    t = launches(meter, 0.0, 0.050, 6)  # 100 ms rounds
    t = launches(meter, t + 30.0, 0.050, 2, decodes=0)  # idle 30 s, then a new prompt
    launches(meter, t, 0.050, 4)  # decoding again
    assert meter.mean_round_ms == pytest.approx(100.0)


def test_bad_meter_arguments_and_slots_fail_loudly():
    with pytest.raises(ValueError, match="pp=0"):
        RoundMeter(0, 1.0)
    with pytest.raises(ValueError, match="horizon_s=0"):
        RoundMeter(4, 0.0)
    with pytest.raises(ValueError, match="slot=4"):
        RoundMeter(4, 1.0).launch(Launch(0.0, 4, 0, 1))


def test_kv_round_uses_the_measured_round_when_there_is_one():
    snap = make_snap(stage_ms=(10.0, 30.0), kv_free=25_000)
    assert kv_round_ms(snap, 4) == pytest.approx(80.0 * 100_000 / 75_000)
    assert kv_round_ms(snap, 4, 96.0) == pytest.approx(96.0 * 100_000 / 75_000)
    # a measured round needs no stage samples; an empty cache still has no bound
    assert kv_round_ms(make_snap(kv_free=25_000), 4, 96.0) == pytest.approx(128.0)
    assert math.isinf(kv_round_ms(make_snap(kv_free=100_000), 4, 96.0))


def test_predictive_budgets_kv_with_the_round_its_launches_measured():
    q = [waiting(0, 100.0, 8000)]
    snap = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=50_000, kv_total=100_000,
                     decodes=ELSEWHERE)
    # stage samples alone: round 4 x 20 = 80 ms, half the KV used -> 160 ms (1408, see
    # test_dcp_rule_slo); measured rounds of 90 ms (scheduler and links included) -> 180 ms
    ctl = mixed_ctl()
    assert dict(ctl.decide(snap).inputs)["kv_round_ms"] == pytest.approx(160.0)
    t = 0.0
    for i in range(12):
        ctl.observe_launch(Launch(t, i % 4, 100 if i == 0 else 0, 2))
        t += 0.0225
    d = ctl.decide(replace(snap, iteration=8))  # the next decision (2 * pp iterations on)
    assert dict(d.inputs)["kv_round_ms"] == pytest.approx(180.0)
    # 4 (10 + 0.02 c) <= 180 -> c <= 1750 -> 1664
    assert (d.chunk_tokens, d.reason) == (1664, "slo:within-budget")


def test_the_papers_variant_ignores_launches():
    from test_dcp_support import LinearFake

    from ppsched.core.slo import Slo
    from ppsched.dcp.predictive import PredictiveChunk, Variant

    ctl = PredictiveChunk(Slo(2000.0, 200.0), 4, LinearFake(), Variant.PAPER)
    ctl.observe_launch(Launch(0.0, 0, 0, 1))  # accepted, and nothing keeps it
    assert ctl._rounds is None
