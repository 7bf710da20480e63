"""The SLO rule (ours, mixed loops): most efficient chunk within the SLO's and the KV's TPOT."""

from __future__ import annotations

import math

import pytest
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.batch import BatchShape
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.predictive import PredictiveChunk
from ppsched.dcp.rule_slo import kv_round_ms

SLO = Slo(2000.0, 200.0)
# LinearFake: stage = 10 + 0.02 * batched + 1e-4 * decode_ctx; in a mixed loop a budget c is c
# batched tokens whatever the decodes. pp = 4: the SLO allows stages up to 50 ms.


def mixed_ctl(slo: Slo = SLO, fake: LinearFake | None = None) -> PredictiveChunk:
    ctl = PredictiveChunk(slo, 4, fake or LinearFake())
    # exactly what the fake predicts, so the residual correction stays 0 (tile 8 of 128 tokens)
    shape = BatchShape(((0, 998),), 2, 100)
    ctl.observe(StageMeasurement(0.0, 0, 0, shape, 10 + 0.02 * 1000 + 1e-4 * 100))
    assert ctl.mixed_seen
    return ctl


def test_most_efficient_chunk_within_the_slo_tpot():
    snap = make_snap(queue=[waiting(0, 100.0, 8000)])
    d = mixed_ctl().decide(snap)  # 10 + 0.02 c <= 50 -> c <= 2000 -> 1920, the best supply
    assert (d.chunk_tokens, d.reason) == (1920, "slo:max-supply")
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 1920)
    assert dict(d.inputs)["tpot_budget_ms"] == 200.0
    # a tighter SLO shrinks it: 10 + 0.02 c <= 25 -> c <= 750 -> 640
    assert mixed_ctl(Slo(2000.0, 100.0)).decide(snap).chunk_tokens == 640


def test_kv_bound_budget_from_littles_law():
    q = [waiting(0, 100.0, 8000)]
    # mean stage 20 ms: round 80 ms; half the KV in use: the cache fills at a 160 ms round,
    # below the SLO's 200: 4 (10 + 0.02 c) <= 160 -> c <= 1500 -> 1408
    snap = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=50_000, kv_total=100_000)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (1408, "slo:max-supply:kv-bound")
    assert dict(d.inputs)["kv_round_ms"] == pytest.approx(160.0)
    # a tenth in use: the cache allows an 800 ms round, the SLO binds
    roomy = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=90_000, kv_total=100_000)
    assert mixed_ctl().decide(roomy).reason == "slo:max-supply"


def test_kv_round_ms():
    assert kv_round_ms(make_snap(stage_ms=(10.0, 30.0), kv_free=25_000), 4) == \
        pytest.approx(80.0 * 100_000 / 75_000)
    assert math.isinf(kv_round_ms(make_snap(), 4))  # no stage samples yet
    assert math.isinf(kv_round_ms(make_snap(stage_ms=(10.0,), kv_free=100_000), 4))  # KV empty


def test_per_microbatch_sized_by_the_asking_slot():
    q = [waiting(0, 100.0, 8000)]
    ctl = mixed_ctl()
    # slot 0 carries 100 decodes of 1000 context (10 ms): 20 + 0.02 c <= 50 -> 1408
    d0 = ctl.decide(make_snap(slot=0, queue=q, decodes=(100, 0, 0, 0)))
    d1 = ctl.decide(make_snap(slot=1, queue=q, decodes=(100, 0, 0, 0)))
    assert (d0.chunk_tokens, d1.chunk_tokens) == (1408, 1920)  # no hold between the calls
    assert dict(d0.inputs)["slot_decodes"] == 100 and dict(d1.inputs)["slot_decodes"] == 0


def test_nothing_fits_takes_the_least_stage_then_the_safety_floor():
    # 150 decodes of 3000 context: 45 ms of attention, so every budget breaks 50 ms
    snap = make_snap(queue=[waiting(0, 99.0, 1000)], decodes=(150,) * 4, ctx_per_decode=3000)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (256, "tpot-tight:least-stage+safety-floor")


def test_measured_residual_corrects_the_stage_predictions():
    fake = LinearFake()
    ctl = mixed_ctl(fake=fake)
    snap = make_snap(queue=[waiting(0, 100.0, 8000)])
    assert ctl.decide(snap).chunk_tokens == 1920
    shape = BatchShape(((0, 1900),))  # tile 15 (1793..1920 batched tokens) runs 30 ms slow
    ctl.observe(StageMeasurement(0.0, 0, 0, shape, fake.predict(shape) + 30.0))
    # 1920 now predicts 78 ms; 1792 (tile 14, no data of its own) takes the mean residual over
    # all tiles, 0 + (30 - 0) / 32, and still fits
    d = ctl.decide(snap)
    assert d.chunk_tokens == 1792
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 1792 + 30.0 / 32)


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
