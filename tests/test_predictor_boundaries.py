"""Boundary detection: synthetic staircases of any period, spikes, lines, and the A100 profiles."""

from __future__ import annotations

import numpy as np
import pytest

from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS
from ppsched.core.paths import data_dir
from ppsched.predictor.boundaries import detect_boundaries
from ppsched.predictor.collect import vidur_token_grid
from ppsched.predictor.vidur_csv import map_layer_ms, model_layer_shape, read_mlp_csv

GRID = np.array(vidur_token_grid(2048), dtype=float)


def staircase(period: int, step: float = 1.0, base: float = 2.0, slope: float = 0.001):
    return base + step * np.ceil(GRID / period) + slope * GRID


@pytest.mark.parametrize("period", [64, 128, 192, 256])
def test_staircase_of_any_period(period):
    # a pure staircase's k-th step is ~1/k of the level: the first 5 are all above 12%
    found = detect_boundaries(GRID, staircase(period), max_tokens=5 * period)
    assert found == tuple(range(period, 5 * period + 1, period))


def test_single_point_spikes_are_ignored():
    y = staircase(128)
    spiky = y.copy()
    for t in (40, 200, 336, 600):  # lone spikes inside bands, +60%
        spiky[GRID == t] *= 1.6
    assert detect_boundaries(GRID, spiky, max_tokens=700) == \
        detect_boundaries(GRID, y, max_tokens=700) == (128, 256, 384, 512, 640)


def test_a_line_or_noise_has_no_boundaries():
    assert detect_boundaries(GRID, 0.5 + 0.07 * GRID) == ()
    rng = np.random.default_rng(0)
    noisy = (5 + 0.01 * GRID) * (1 + rng.normal(0, 0.01, len(GRID)))
    assert detect_boundaries(GRID, noisy) == ()


def test_max_tokens_and_tiny_inputs():
    assert detect_boundaries(GRID, staircase(128), max_tokens=300) == (128, 256)
    assert detect_boundaries([1, 2, 4], [1.0, 1.0, 2.0]) == ()
    with pytest.raises(UserError, match="strictly increasing"):
        detect_boundaries([1, 2, 4, 3, 5, 6], [1.0] * 6)
    with pytest.raises(UserError, match="rel_jump"):
        detect_boundaries(GRID, staircase(128), rel_jump=0)


@pytest.mark.parametrize("name", ["internlm-20b", "CodeLlama-34b-Instruct-hf", "Qwen-72B"])
def test_a100_profiles_step_after_multiples_of_128(name):
    """The large-model A100 profiles, mapped to qwen2.5-32b as `profile fit` does: the first
    steps are 128, 256, 384, then every later one is a multiple of 128 up to 768."""
    groups = read_mlp_csv(data_dir() / "profiles" / "a100" / name / "mlp.csv")
    tokens, ms = map_layer_ms(groups, model_layer_shape(BUILTIN_MODELS["qwen2.5-32b"], 1))
    found = [b for b in detect_boundaries(tokens, ms, max_tokens=800) if b >= 100]
    assert found[:3] == [128, 256, 384]
    assert all(b % 128 == 0 for b in found)


def test_blips_and_dip_recoveries_are_not_boundaries():
    y = staircase(128)
    bump = y.copy()
    bump[(GRID > 64) & (GRID <= 96)] *= 1.2  # up after 64, back down after 96: a kernel blip
    assert detect_boundaries(GRID, bump, max_tokens=700) == (128, 256, 384, 512, 640)
    dip = y.copy()
    dip[(GRID > 160) & (GRID <= 192)] *= 0.85  # a dip inside the band, then back up
    assert detect_boundaries(GRID, dip, max_tokens=700) == (128, 256, 384, 512, 640)


def test_codellama_step_after_64_is_real_and_reported():
    """CodeLlama-34b's shape (hidden 8192) steps after 64 in all four GEMMs (+12-21%): a true
    efficient size on that shape, not noise; the detector reports it."""
    groups = read_mlp_csv(data_dir() / "profiles" / "a100" / "CodeLlama-34b-Instruct-hf" /
                          "mlp.csv")
    tp1 = next(g for g in groups if g.shape.tp == 1)
    tokens, ms = map_layer_ms([tp1], tp1.shape)
    assert detect_boundaries(tokens, ms, max_tokens=300) == (64, 128, 256)
