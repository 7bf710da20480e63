"""The SLO rule's measured residuals (``calibrate``): per tile and kind, fading with the
predictor's forgetting, and the unmeasured size above the choice priced at its lower bound."""

from __future__ import annotations

import pytest

from ppsched.core.batch import BatchShape
from ppsched.dcp.calibrate import TileResidual, explore_above
from ppsched.dcp.candidate_costs import CandidateCosts


def test_tile_residual():
    tr = TileResidual(tiles=4, weight=0.5)
    small, big = BatchShape(((0, 100),)), BatchShape(((0, 300),))
    assert tr.correct(small, 10.0) == 10.0  # nothing learnt yet
    tr.update(small, 10.0, 14.0)
    assert tr.correct(small, 10.0) == 14.0
    assert tr.correct(big, 20.0) == 24.0  # unseen tile: the residual over all tiles
    tr.update(small, 10.0, 12.0)  # the old residual faded one stage's forgetting first
    lam = tr.forgetting
    assert tr.correct(small, 10.0) == pytest.approx(10.0 + 4.0 * lam + 0.5 * (2.0 - 4.0 * lam))
    huge = BatchShape(((0, 9000),))
    tr.update(huge, 50.0, 40.0)  # beyond the last tile: shares the last one
    assert tr.correct(BatchShape(((0, 8000),)), 50.0) == 40.0
    shapes = [small, big, huge, BatchShape(((0, 200),), 40, 9000), BatchShape((), 7, 700)]
    predicted = [10.0, 20.0, 30.0, 40.0, 50.0]  # the scan form: one call, same shifts
    assert tr.correct_scan([s.batched_tokens for s in shapes], predicted,
                           [bool(s.prefill) for s in shapes]) == [
        tr.correct(s, ms) for s, ms in zip(shapes, predicted, strict=True)]
    with pytest.raises(ValueError):
        TileResidual(weight=0.0)


def test_a_tiles_residual_fades_and_expires_with_the_predictors_forgetting():
    tr = TileResidual(tiles=4, weight=0.5, forgetting=0.99)  # window: 100 stages
    small, big = BatchShape(((0, 100),)), BatchShape(((0, 300),))
    tr.update(small, 10.0, 30.0)  # +20 ms, e.g. learnt while the predictor was still far off
    for _ in range(50):
        tr.update(big, 20.0, 20.0)
    assert tr.measured(1) and tr.correct(small, 10.0) == pytest.approx(10.0 + 20.0 * 0.99**50)
    for _ in range(51):
        tr.update(big, 20.0, 20.0)
    assert not tr.measured(1)  # older than the window: the mean residual over all tiles
    assert tr.correct(small, 10.0) == pytest.approx(10.0, abs=0.1)
    assert tr.measured(3) and not tr.measured(2)


def test_pieces_and_decode_only_microbatches_learn_their_residuals_apart():
    """Same tile, two kinds: a light load's decode-only stages (most of its microbatches) must
    not set the price of a microbatch carrying a piece."""
    tr = TileResidual(tiles=4, weight=0.5)
    piece, decode_only = BatchShape(((500, 100),), 20), BatchShape((), 100, 40_000)  # tile 1
    tr.update(decode_only, 10.0, 12.0)  # +2 ms
    # no piece measured yet: a piece borrows the decode-only mean, the tile is not its own
    assert tr.correct(piece, 15.0) == 17.0 and not tr.measured(1, prefill=True)
    tr.update(piece, 15.0, 19.0)  # +4 ms
    for _ in range(20):
        tr.update(decode_only, 10.0, 12.0)
    assert tr.correct(piece, 15.0) == pytest.approx(15.0 + 4.0 * tr.forgetting**20)
    assert tr.correct(decode_only, 10.0) == pytest.approx(12.0, abs=0.01)
    assert tr.measured(1, prefill=True) and tr.measured(1, prefill=False)
    assert tr.correct_scan([120, 120], [15.0, 10.0], [True, False]) == [
        tr.correct(piece, 15.0), tr.correct(decode_only, 10.0)]


def test_the_unmeasured_size_above_the_choice_is_priced_at_its_lower_bound():
    tr = TileResidual(tiles=8)
    tr.update(BatchShape(((0, 120),), 8), 20.0, 20.0)  # tile 1 ran
    costs = CandidateCosts((128, 256, 384), (120, 248, 376), (20.0, 45.0, 50.0), 0.0)
    # 256 (tile 2) never ran, right above the choice (128, tile 1): at most 128's stage
    assert explore_above(tr, costs, 0, 8).stage_ms == (20.0, 20.0, 50.0)
    assert explore_above(tr, costs, 1, 8) is None  # the choice's own tile never ran
    assert explore_above(tr, costs, 2, 8) is None  # nothing above the largest
    tr.update(BatchShape(((0, 248),), 8), 45.0, 24.0)  # tried once: measured from now on
    assert explore_above(tr, costs, 0, 8) is None
    # 384 is next above 256, but only explored where 256 is the choice
    assert explore_above(tr, costs, 1, 8).stage_ms == (20.0, 45.0, 45.0)
    # a tile that has not run within the forgetting window counts as not measured again
    for _ in range(int(tr.window) + 1):
        tr.update(BatchShape(((0, 120),), 8), 20.0, 20.0)
    assert explore_above(tr, costs, 0, 8).stage_ms == (20.0, 20.0, 50.0)
