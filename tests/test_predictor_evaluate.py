"""Replay of measured iterations: predict-then-update, errors per iteration type."""

from __future__ import annotations

import math
import random

import pytest

from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.predictor.alp import ALPredictor, features
from ppsched.predictor.evaluate import evaluate_on_iterations
from ppsched.predictor.profile import LinearProfile

PROFILE = LinearProfile(alpha0=0.07, alpha1=7.0, boundaries=(), staircase=(), fit_mape=1.0,
                        staircase_mape=1.0, variant="linear", model="m", tp=1, source="test")
W = (3.0, 5.0, 4.0, 20.0)


def truth(shape: BatchShape) -> float:
    lin = 0.07 * shape.batched_tokens + 7.0
    return lin + sum(a * b for a, b in zip(W, features(shape), strict=True))


def rows(n: int, seed: int = 0) -> list[tuple[BatchShape, float]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 3
        dec = rng.randrange(1, 64)
        ctx = dec * rng.randrange(100, 3000)
        pre = ((rng.randrange(0, 3000), rng.randrange(64, 1024)),)
        shape = (BatchShape(prefill=pre) if kind == 0 else
                 BatchShape(prefill=pre, decode_count=dec, decode_ctx_sum=ctx) if kind == 1 else
                 BatchShape(decode_count=dec, decode_ctx_sum=ctx))
        out.append((shape, truth(shape)))
    return out


def test_learned_model_scores_near_zero_after_warmup():
    data = rows(900)
    res = evaluate_on_iterations(ALPredictor(PROFILE), data, warmup=300)
    assert res["n"] == 600 and res["warmup_iterations"] == 300 and res["iterations"] == 900
    linear_only = sum(abs(0.07 * s.batched_tokens + 7.0 - ms) / ms for s, ms in data[300:])
    linear_only_mape = 100 * linear_only / 600
    assert linear_only_mape > 10  # the attention part matters in this data
    assert res["mape"] < 0.1 * linear_only_mape and res["p90_ape"] < 0.2 * linear_only_mape
    assert {k: v["n"] for k, v in res["by_type"].items()} == {"prefill": 200, "mixed": 200,
                                                             "decode": 200}
    assert res["linear_variant"] == "linear"


def test_errors_are_measured_before_learning():
    # without warm-up the first prediction (linear term only) is scored: error is visible
    data = rows(30)
    res = evaluate_on_iterations(ALPredictor(PROFILE), data, warmup=0)
    first_shape, first_ms = data[0]
    first_ape = 100 * abs(0.07 * first_shape.batched_tokens + 7.0 - first_ms) / first_ms
    assert res["mape"] >= first_ape / 30


def test_mapping_rows_empty_batches_and_bad_warmup():
    shape = BatchShape(decode_count=4, decode_ctx_sum=400)
    mapped = [{"shape": shape, "measured_ms": truth(shape)}, (BatchShape(), 5.0),
              (shape, math.nan)]
    res = evaluate_on_iterations(ALPredictor(PROFILE), mapped, warmup=0)
    assert res["n"] == 1 and res["by_type"]["prefill"]["n"] == 0
    assert math.isnan(res["by_type"]["prefill"]["mape"])
    with pytest.raises(UserError, match="warmup"):
        evaluate_on_iterations(ALPredictor(PROFILE), mapped, warmup=-1)
