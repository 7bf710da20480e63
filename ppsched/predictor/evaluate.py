"""Replay measured iterations through a predictor (predict, then learn) and score it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.predictor.alp import ALPredictor

KINDS = ("prefill", "mixed", "decode")


def _row(row: Any) -> tuple[BatchShape, float]:
    if isinstance(row, Mapping):
        return row["shape"], float(row["measured_ms"])
    shape, ms = row
    return shape, float(ms)


def _scores(ape: np.ndarray) -> dict[str, float]:
    if len(ape) == 0:
        return {"n": 0, "mape": float("nan"), "p90_ape": float("nan")}
    return {"n": int(len(ape)), "mape": float(np.mean(ape)),
            "p90_ape": float(np.percentile(ape, 90))}


def evaluate_on_iterations(predictor: ALPredictor, rows: Iterable[Any],
                           warmup: int) -> dict[str, Any]:
    """Errors in percent over rows after the first ``warmup``; every row also trains.

    ``rows``: (BatchShape, measured_ms) pairs or mappings with keys ``shape`` and
    ``measured_ms``, in the order the engine measured them. Empty batches are skipped.
    """
    if warmup < 0:
        raise UserError(f"warmup={warmup}: expected >= 0 iterations")
    ape: list[float] = []
    kinds: list[str] = []
    seen = 0
    for row in rows:
        shape, measured = _row(row)
        if shape.kind == "empty" or not measured > 0:
            continue
        predicted = predictor.predict(shape)
        if seen >= warmup:
            ape.append(100.0 * abs(predicted - measured) / measured)
            kinds.append(shape.kind)
        predictor.update(shape, measured)
        seen += 1
    arr = np.asarray(ape, dtype=float)
    kind_arr = np.asarray(kinds)
    result: dict[str, Any] = _scores(arr)
    result["by_type"] = {k: _scores(arr[kind_arr == k]) for k in KINDS}
    result["warmup_iterations"] = int(warmup)
    result["iterations"] = int(seen)
    result["linear_variant"] = predictor.profile.variant
    result["correct_linear_online"] = predictor.correct_linear_online
    result["rls_resets"] = predictor.resets
    return result
