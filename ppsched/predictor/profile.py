"""The offline part of ALP: one pipeline stage's linear-layer time as a function of batched tokens.

Two variants are fitted from a vidur ``mlp.csv`` and compared on held-out token counts:
``linear`` (alpha0 * tokens + alpha1, the paper's) and ``staircase`` (flat per detected
boundary band, the line beyond the last band). The better one is the profile's default.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig
from ppsched.core.paths import data_dir as resolve_data_dir
from ppsched.predictor.boundaries import DEFAULT_REL_JUMP, detect_boundaries
from ppsched.predictor.linear_term import LinearTerm
from ppsched.predictor.vidur_csv import (
    map_layer_ms,
    model_layer_shape,
    read_mlp_csv,
    shape_distance,
)

VARIANTS = ("linear", "staircase")
HOLDOUT_EVERY = 3  # every 3rd token count is held out to choose the variant


@dataclass(frozen=True)
class LinearProfile:
    alpha0: float  # ms per batched token, one stage
    alpha1: float  # ms
    boundaries: tuple[int, ...]
    staircase: tuple[tuple[int, float], ...]  # (band upper token count, ms), ascending
    fit_mape: float  # % on held-out token counts, linear variant
    staircase_mape: float  # % on held-out token counts, staircase variant
    variant: str
    model: str
    tp: int
    source: str
    layers: int = 0  # layers of the stage the profile prices (0: unknown)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise UserError(f"profile variant {self.variant!r}: expected one of {VARIANTS}")
        for name in ("alpha0", "alpha1", "fit_mape", "staircase_mape"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise UserError(f"profile {name}={value!r}: expected a finite number")
        if self.alpha0 < 0:
            raise UserError(f"profile alpha0={self.alpha0}: expected >= 0 ms/token")
        uppers = [u for u, _ in self.staircase]
        if uppers != sorted(set(uppers)) or any(u <= 0 for u in uppers):
            raise UserError(f"profile staircase bands {uppers}: expected ascending counts > 0")
        if list(self.boundaries) != sorted(set(self.boundaries)):
            raise UserError(f"profile boundaries {self.boundaries}: expected ascending, unique")
        if self.tp < 1:
            raise UserError(f"profile tp={self.tp}: expected >= 1")
        # each variant's term, for the hot path (not fields: frozen, derived)
        levels = tuple(ms for _, ms in self.staircase)
        object.__setattr__(self, "_terms", {
            v: LinearTerm(self.alpha0, self.alpha1, tuple(uppers), levels, v == "staircase")
            for v in VARIANTS})

    def linear_ms(self, tokens: int, variant: str | None = None) -> float:
        """Linear-layer time of one stage for ``tokens`` batched tokens (0 tokens: 0 ms)."""
        if variant is not None and variant not in VARIANTS:
            raise UserError(f"profile variant {variant!r}: expected one of {VARIANTS}")
        return self._terms[variant or self.variant].ms(tokens)  # type: ignore[attr-defined]

    def linear_term(self) -> LinearTerm:
        """``linear_ms`` for this profile's variant as one compiled object (``linear_term``):
        ALP binds its ``ms``."""
        return self._terms[self.variant]  # type: ignore[attr-defined]

    def with_variant(self, variant: str) -> LinearProfile:
        fields = asdict(self)
        fields["variant"] = variant
        return _from_dict(fields, "<profile>")

    def scaled(self, factor: float) -> LinearProfile:
        """Every time multiplied by ``factor`` (a faster or slower device than the profiled
        one): tests ALP's adaptation to a profile that does not describe the server."""
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
            raise UserError(f"profile scale factor {factor!r}: expected a finite number > 0")
        fields = asdict(self)
        fields.update(alpha0=self.alpha0 * factor, alpha1=self.alpha1 * factor,
                      staircase=[(u, ms * factor) for u, ms in self.staircase],
                      source=f"{self.source} x{factor:g}")
        return _from_dict(fields, "<profile>")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> LinearProfile:
        """A JSON text (starts with '{') or a path to a file written by ``to_json``."""
        text = str(path_or_text)
        where = "<json text>"
        if not text.lstrip().startswith("{"):
            where = text
            try:
                text = Path(text).read_text()
            except OSError as exc:
                raise UserError(f"profile {where!r} could not be read: {exc}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"profile {where!r} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise UserError(f"profile {where!r}: expected a JSON object, got {type(data).__name__}")
        return _from_dict(data, where)


def _from_dict(data: dict, where: str) -> LinearProfile:
    required = ("alpha0", "alpha1", "boundaries", "staircase", "fit_mape", "staircase_mape",
                "variant", "model", "tp", "source")
    missing = [k for k in required if k not in data]
    if missing:
        raise UserError(f"profile {where!r} lacks keys {missing}; expected a `profile fit` JSON")
    try:
        return LinearProfile(
            alpha0=float(data["alpha0"]), alpha1=float(data["alpha1"]),
            boundaries=tuple(int(b) for b in data["boundaries"]),
            staircase=tuple((int(u), float(ms)) for u, ms in data["staircase"]),
            fit_mape=float(data["fit_mape"]), staircase_mape=float(data["staircase_mape"]),
            variant=str(data["variant"]), model=str(data["model"]), tp=int(data["tp"]),
            source=str(data["source"]), layers=int(data.get("layers", 0)))
    except (TypeError, ValueError) as exc:
        raise UserError(f"profile {where!r} has a malformed value: {exc}") from exc


def _fit_line(t: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares on relative error (weights 1/y): what MAPE rewards."""
    w = 1.0 / np.maximum(y, 1e-9)
    a = np.stack([t * w, w], axis=1)
    (alpha0, alpha1), *_ = np.linalg.lstsq(a, y * w, rcond=None)
    return max(float(alpha0), 0.0), float(alpha1)


def _fit_staircase(t: np.ndarray, y: np.ndarray,
                   boundaries: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
    """One level per band (lower edge exclusive): the median of the band's times."""
    bands = []
    lower = 0
    for upper in boundaries:
        inside = y[(t > lower) & (t <= upper)]
        if len(inside):
            bands.append((int(upper), float(np.median(inside))))
        lower = upper
    return tuple(bands)


def _mape(pred: np.ndarray, y: np.ndarray) -> float:
    return float(100.0 * np.mean(np.abs(pred - y) / y))


def _predict(t: np.ndarray, alpha0: float, alpha1: float, stairs: tuple[tuple[int, float], ...],
             variant: str) -> np.ndarray:
    line = alpha0 * t + alpha1
    if variant == "linear" or not stairs:
        return line
    uppers = np.array([u for u, _ in stairs], dtype=float)
    levels = np.array([ms for _, ms in stairs])
    idx = np.searchsorted(uppers, t, side="left")
    inside = idx < len(uppers)
    return np.where(inside, levels[np.minimum(idx, len(levels) - 1)], line)


def fit_tokens_ms(tokens: np.ndarray, stage_ms: np.ndarray, *, model: str, tp: int, source: str,
                  layers: int = 0, rel_jump: float = DEFAULT_REL_JUMP) -> LinearProfile:
    """Fit both variants to one stage's time on a token grid; choose by held-out MAPE."""
    if np.any(stage_ms <= 0):
        raise UserError(f"profile {source!r}: linear-layer time <= 0 ms at some token count; "
                        "expected positive latencies")
    held = np.arange(len(tokens)) % HOLDOUT_EVERY == 1
    train_t, train_y = tokens[~held], stage_ms[~held]
    boundaries = detect_boundaries(tokens, stage_ms, rel_jump=rel_jump)
    a0, a1 = _fit_line(train_t, train_y)
    stairs = _fit_staircase(train_t, train_y, boundaries)
    errors = {v: _mape(_predict(tokens[held], a0, a1, stairs, v), stage_ms[held])
              for v in VARIANTS}
    variant = min(VARIANTS, key=lambda v: errors[v])
    alpha0, alpha1 = _fit_line(tokens, stage_ms)  # final coefficients use every point
    return LinearProfile(alpha0=alpha0, alpha1=alpha1, boundaries=boundaries,
                         staircase=_fit_staircase(tokens, stage_ms, boundaries),
                         fit_mape=errors["linear"], staircase_mape=errors["staircase"],
                         variant=variant, model=model, tp=tp, source=source, layers=layers)


def fit_profile(mlp_csv: str | Path, model: ModelConfig, *, tp: int = 1,
                layers: int | None = None, rel_jump: float = DEFAULT_REL_JUMP) -> LinearProfile:
    """Map the CSV's ops to ``model``'s layer shapes and fit one stage of ``layers`` layers.

    ``layers`` defaults to the whole model; ALP predicts ONE pipeline stage, so pass
    ceil(model.layers / pp_size).
    """
    if tp < 1:
        raise UserError(f"tp={tp}: expected >= 1")
    n_layers = model.layers if layers is None else layers
    if n_layers < 1:
        raise UserError(f"layers={n_layers}: expected >= 1")
    groups = read_mlp_csv(mlp_csv)
    tokens, per_layer = map_layer_ms(groups, model_layer_shape(model, tp))
    return fit_tokens_ms(tokens, per_layer * n_layers, model=model.name, tp=tp,
                         source=str(mlp_csv), layers=n_layers, rel_jump=rel_jump)


def nearest_profile_csv(model: ModelConfig, *, tp: int = 1, data_dir: str | None = None) -> Path:
    """The vendored A100 mlp.csv whose profiled shape (any of its TP groups) is nearest."""
    root = resolve_data_dir(data_dir) / "profiles" / "a100"
    csvs = sorted(root.glob("*/mlp.csv"))
    if not csvs:
        raise UserError(f"no profiles under {str(root)!r}; expected <model>/mlp.csv files")
    best = min(csvs, key=lambda p: (min(shape_distance(g.shape, model, tp)
                                        for g in read_mlp_csv(p)), str(p)))
    return best


@functools.lru_cache(maxsize=32)
def default_profile(model: ModelConfig, *, pp_size: int, tp: int = 1,
                    data_dir: str | None = None) -> LinearProfile:
    """What a user gets without `profile fit`: the nearest vendored A100 CSV, one stage."""
    if pp_size < 1:
        raise UserError(f"pp_size={pp_size}: expected >= 1")
    csv = nearest_profile_csv(model, tp=tp, data_dir=data_dir)
    return fit_profile(csv, model, tp=tp, layers=math.ceil(model.layers / pp_size))
