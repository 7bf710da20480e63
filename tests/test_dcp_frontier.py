"""The frontier rule (mixed loops): OA rate, per-microbatch choice, tile residual correction."""

from __future__ import annotations

import math

import pytest
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.batch import BatchShape
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.frontier import frontier_choice, oa_rate
from ppsched.dcp.predictive import PAPER_CONFIG, PredictiveChunk, PredictiveConfig

SLO = Slo(2000.0, 200.0)
# LinearFake: stage = 10 + 0.02 * batched + 1e-4 * decode_ctx. TPOT cap 1.05*200/4 = 52.5 ms/stage,
# so every budget up to 2048 (50.96 ms with no decodes) is admissible; lead = 4 * 50.96 ms.
LEAD = 4 * (10 + 0.02 * 2048)
REACH = 2000.0 - LEAD


def mixed_ctl(config: PredictiveConfig | None = None, fake: LinearFake | None = None
              ) -> PredictiveChunk:
    ctl = PredictiveChunk(SLO, 4, fake or LinearFake(), config)
    # exactly what the fake predicts, so the residual correction stays 0 (tile 8 of 128 tokens)
    shape = BatchShape(((0, 998),), 2, 100)
    ctl.observe(StageMeasurement(0.0, 0, 0, shape, 10 + 0.02 * 1000 + 1e-4 * 100))
    assert ctl.mixed_seen
    return ctl


def test_oa_rate_fcfs_prefix_and_lateness():
    now = 100.0
    snap = make_snap(now_s=now, queue=[waiting(0, 99.0, 1000), waiting(1, 99.9, 3000)])
    # time left to each deadline: arrival + REACH - now; request 1 also waits for request 0
    left0, left1 = REACH - 1000.0, REACH - 100.0
    assert oa_rate(snap, 2000.0, LEAD) == pytest.approx(max(1000 / left0, 4000 / left1))
    assert oa_rate(make_snap(now_s=now), 2000.0, LEAD) == 0.0
    late = make_snap(now_s=now, queue=[waiting(0, now - 1.99, 10)])
    assert oa_rate(late, 2000.0, LEAD) == math.inf
    assert oa_rate(snap, 2000.0, 2000.0) == math.inf  # no reach at all


def test_oa_rate_chunked_first_and_tail_beyond_the_view():
    now = 100.0
    ch = waiting(9, 99.5, 5000, remaining=2000)
    snap = make_snap(now_s=now, chunked=ch, queue=[waiting(1, 99.8, 1000)])
    assert oa_rate(snap, 2000.0, 0.0) == pytest.approx(max(2000 / 1500, 3000 / 1800))
    # a 1-entry view: the second request enters only through the exact total, at the latest
    # deadline it can have (now + reach)
    queue = [waiting(0, 99.9, 100), waiting(1, 99.99, 50_000)]
    snap = make_snap(now_s=now, queue=queue)
    assert oa_rate(snap, 2000.0, 0.0, limit=1) == pytest.approx(50_100 / 2000)


def test_frontier_choice():
    # least stage among those covering; a bigger budget on a cheaper tile wins
    prefill, stage = [100, 200, 300], [20.0, 18.0, 30.0]
    assert frontier_choice(prefill, stage, 4.0) == (1, True)
    assert frontier_choice(prefill, stage, 10.5) == (1, True)  # 200/18 = 11.1
    assert frontier_choice(prefill, stage, 50.0) == (1, False)  # drain: greatest supply
    assert frontier_choice([0, 0], [5.0, 6.0], 1.0) == (-1, False)


def test_light_queue_small_budget_and_growth_as_slack_runs_out():
    now = 100.0
    fresh = make_snap(now_s=now, queue=[waiting(0, now, 8000)])
    d = mixed_ctl().decide(fresh)  # 8000 / REACH = 4.45 tok/ms; 128 / 12.56 ms = 10.2 covers
    assert (d.chunk_tokens, d.reason) == (128, "frontier:covers")
    assert dict(d.inputs)["demand_tok_s"] == pytest.approx(1000 * 8000 / REACH)
    # waited 1.2 s: 8000 / (REACH - 1200) = 13.4 tok/ms; c / (10 + 0.02 c) >= 13.4 -> c >= 183
    d = mixed_ctl().decide(make_snap(now_s=now, queue=[waiting(0, now - 1.2, 8000)]))
    assert (d.chunk_tokens, d.reason) == (256, "frontier:covers")
    assert dict(d.inputs)["supply_tok_s"] >= dict(d.inputs)["demand_tok_s"]
    # the long-run arrival rate is a floor under the OA rate: 18 tok/ms > 256 / 15.12 -> 384
    ctl = mixed_ctl()
    ctl.decide(make_snap(now_s=90.0, arrived_tokens=0))
    d = ctl.decide(make_snap(now_s=100.0, queue=[waiting(0, now, 10)], arrived_tokens=180_000))
    assert d.chunk_tokens == 384


def test_past_deadline_drains_within_the_tpot_cap():
    d = mixed_ctl().decide(make_snap(queue=[waiting(0, 98.1, 20_000)]))
    assert (d.chunk_tokens, d.reason) == (2048, "frontier:drain")
    # with 60 decodes of 3000 context (18 ms), budgets above 1024 break the TPOT cap
    snap = make_snap(queue=[waiting(0, 98.1, 20_000)], decodes=(60,) * 4, ctx_per_decode=3000)
    d = mixed_ctl().decide(snap)
    assert d.chunk_tokens == 1152 and d.predicted_stage_ms * 4 <= 1.05 * 200
    assert d.reason == "frontier:drain"


def test_tpot_infeasible_takes_minimum_then_safety_floor():
    snap = make_snap(queue=[waiting(0, 99.0, 1000)], decodes=(150,) * 4, ctx_per_decode=3000)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (256, "tpot-infeasible:min+safety-floor")


def test_per_microbatch_sized_by_the_asking_slot():
    now = 100.0
    q = [waiting(0, now, 8000)]
    ctl = mixed_ctl()
    # slot 0 carries 100 decodes (10 ms of attention): (c - 100) / (20 + 0.02 c) >= 4.45 -> 256
    d0 = ctl.decide(make_snap(slot=0, now_s=now, queue=q, decodes=(100, 0, 0, 0)))
    d1 = ctl.decide(make_snap(slot=1, now_s=now, queue=q, decodes=(100, 0, 0, 0)))
    assert (d0.chunk_tokens, d1.chunk_tokens) == (256, 128)  # no hold between the calls
    assert dict(d0.inputs)["slot_decodes"] == 100 and dict(d1.inputs)["slot_decodes"] == 0


def test_frontier_only_in_mixed_loops_and_not_in_the_paper_variant():
    snap = make_snap(queue=[waiting(0, 99.0, 8000)])
    plain = PredictiveChunk(SLO, 4, LinearFake())
    assert not plain.decide(snap).reason.startswith("frontier")
    paper = mixed_ctl(PAPER_CONFIG)
    assert not paper.decide(snap).reason.startswith("frontier")
    steady = mixed_ctl(PredictiveConfig(select="steady"))
    assert not steady.decide(snap).reason.startswith("frontier")


def test_measured_residual_corrects_the_stage_predictions():
    fake = LinearFake()
    ctl = mixed_ctl(fake=fake)
    snap = make_snap(queue=[waiting(0, 100.0, 100)], decodes=(28, 0, 0, 0))
    assert ctl.decide(snap).chunk_tokens == 128
    shape = BatchShape(((0, 100),), 28, 28_000)  # 128 batched tokens: tile 1
    ctl.observe(StageMeasurement(0.0, 0, 0, shape, fake.predict(shape) + 100.0))
    # tile 1 now predicts 115 ms, over the TPOT cap; tile 2 has no data of its own and takes the
    # mean residual over all tiles: 0 + (100 - 0) / 32
    d = ctl.decide(snap)
    assert d.chunk_tokens == 256
    big = BatchShape(((0, 228),), 28, 28_000)
    assert d.predicted_stage_ms == pytest.approx(fake.predict(big) + 100.0 / 32)


def test_tile_residual():
    tr = TileResidual(tiles=4, weight=0.5)
    small, big = BatchShape(((0, 100),)), BatchShape(((0, 300),))
    assert tr.correct(small, 10.0) == 10.0  # nothing learnt yet
    tr.update(small, 10.0, 14.0)
    assert tr.correct(small, 10.0) == 14.0
    assert tr.correct(big, 20.0) == 24.0  # unseen tile: the residual over all tiles
    tr.update(small, 10.0, 12.0)
    assert tr.correct(small, 10.0) == pytest.approx(13.0)
    huge = BatchShape(((0, 9000),))
    tr.update(huge, 50.0, 40.0)  # beyond the last tile: shares the last one
    assert tr.correct(BatchShape(((0, 8000),)), 50.0) == 40.0
    with pytest.raises(ValueError):
        TileResidual(weight=0.0)


def test_kv_pressure_does_not_shrink_the_frontier_choice():
    snap = make_snap(queue=[waiting(0, 98.1, 20_000)], decodes=(40, 0, 0, 0), kv_free=2_000)
    d = mixed_ctl().decide(snap)
    # 2048 would carry 40 decodes of 1000 context: 54.96 ms > 52.5, so 1920 is the largest
    assert (d.chunk_tokens, d.reason) == (1920, "frontier:drain")
