"""``sglang-dynamic``: SGLang 0.5.23's ``--enable-dynamic-chunking``, as SGLANG.md states it.

Start-up: prefill times of single requests without prefix on stage 0 (engine-provided samples),
fit T(L) = a L^2 + b L + c by least squares (first sample skipped, >= 8 points; a <= 0 disables;
b < 0 -> 0). Target = T(base) - T(0). A continuation chunk of a request with prefix L gets the x
that makes its marginal cost equal the target: a x^2 + (2 a L + b) x - target = 0; smoothed
base + 0.75 (x - base); floored at base // 4; rounded down to max(page_size, 64); capped at
min(context - L - 100, max_prefill_tokens). First chunks use base. Never updated online.
When the user gives chunk candidates, every size is snapped down to one of them (the smallest when
none is below it): SGLang has no such option, so this is the nearest it can honour them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ppsched.core.policy import ChunkDecision
from ppsched.core.snapshots import ChunkSnapshot, StageMeasurement
from ppsched.dcp.signals import check_candidates, snap_to_grid

SMOOTH_FACTOR = 0.75  # SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR default
PROFILE_POINTS = 128
MIN_FIT_POINTS = 8


def profile_lengths(base: int, context: int, points: int = PROFILE_POINTS) -> list[int]:
    """SGLang's start-up lengths: from min(1.25 base, context) downward in steps of 128."""
    top = min(int(1.25 * base), context)
    return [top - 128 * i for i in range(points) if top - 128 * i > 0]


def fit_quadratic(samples: Sequence[tuple[int, float]]) -> tuple[float, float, float] | None:
    """(a, b, c) of T = aL^2 + bL + c; None when SGLang would disable dynamic chunking."""
    usable = samples[1:]  # the first forward is a warm-up outlier
    if len(usable) < MIN_FIT_POINTS:
        return None
    x = np.array([float(n) for n, _ in usable])
    y = np.array([float(t) for _, t in usable])
    a, b, c = np.linalg.lstsq(np.stack([x * x, x, np.ones_like(x)], axis=1), y, rcond=None)[0]
    if not (math.isfinite(a) and a > 0):
        return None
    return float(a), max(float(b), 0.0), float(c)


class SglangDynamicChunk:
    def __init__(self, base: int, prefill_samples: Sequence[tuple[int, float]], context: int,
                 max_prefill_tokens: int = 16384, page_size: int = 1,
                 smooth: float = SMOOTH_FACTOR, name: str = "sglang-dynamic",
                 candidates: tuple[int, ...] | None = None) -> None:
        if base <= 0 or context <= 0 or max_prefill_tokens <= 0 or page_size <= 0:
            raise ValueError(f"sglang-dynamic: base={base}, context={context}, max_prefill_tokens="
                             f"{max_prefill_tokens}, page_size={page_size}: expected all > 0")
        self.name = name
        self.candidates = None if candidates is None else check_candidates(candidates)
        self.base = base
        self.context = context
        self.max_prefill_tokens = max_prefill_tokens
        self.align = max(page_size, 64)
        self.smooth = smooth
        self.coeffs = fit_quadratic(list(prefill_samples))
        a_b = self.coeffs
        self.target_ms = a_b[0] * base * base + a_b[1] * base if a_b else math.nan
        first = self._snap(base)
        self._first = ChunkDecision(first, "first-chunk:base", (("base", float(base)),))
        self._off = ChunkDecision(first, "disabled:fit-rejected", (("base", float(base)),))

    def _snap(self, chunk: int) -> int:
        return chunk if self.candidates is None else snap_to_grid(chunk, self.candidates)

    def chunk_for_prefix(self, prefix: int) -> int:
        """The continuation chunk SGLang picks for a request with ``prefix`` tokens prefilled."""
        if self.coeffs is None:
            return self.base
        a, b, _ = self.coeffs
        lin = 2.0 * a * prefix + b
        x = (-lin + math.sqrt(lin * lin + 4.0 * a * self.target_ms)) / (2.0 * a)
        x = self.base + self.smooth * (x - self.base)
        size = max(int(x), self.base // 4)
        size = size // self.align * self.align
        cap = min(self.context - prefix - 100, self.max_prefill_tokens)
        return max(min(size, cap), 1)

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        ch = snap.chunked
        if self.coeffs is None:
            return self._off
        if ch is None or ch.remaining_prompt_tokens >= ch.prompt_tokens:
            return self._first
        prefix = ch.prompt_tokens - ch.remaining_prompt_tokens
        chunk = self._snap(self.chunk_for_prefix(prefix))
        return ChunkDecision(chunk, "continuation:quadratic", (("prefix", float(prefix)),
                                                                ("target_ms", self.target_ms)))

    def observe(self, measurement: StageMeasurement) -> None:
        return None  # SGLang never updates the fit online


def sample_prefill_times(timer: Callable[[int], float], base: int, context: int
                         ) -> list[tuple[int, float]]:
    """Run the engine's stage-0 prefill timer over SGLang's start-up lengths."""
    return [(n, float(timer(n))) for n in profile_lengths(base, context)]
