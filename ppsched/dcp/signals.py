"""Signals and guards shared by the chunk controllers: candidates, percentiles, arrival rate.

All of it is O(samples) or O(slots) per call; the controllers keep state, these helpers keep none
except ``ArrivalWindow``, which turns the engine's cumulative counters into a windowed rate.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Sequence

from ppsched.core.errors import UserError
from ppsched.core.snapshots import ChunkSnapshot

PAPER_STEP = 128  # artifact: candidates 128, 256, ..., 2048
PAPER_MAX = 2048
PAPER_KV_WATERMARK = 0.10  # artifact: free KV below 10% -> smallest safe chunk


@functools.lru_cache(maxsize=64)  # called every iteration with the same few arguments
def candidate_grid(cap: int, step: int = PAPER_STEP, top: int = PAPER_MAX) -> tuple[int, ...]:
    """step, 2*step, ... up to min(top, cap); (cap,) when the engine's cap is below one step.

    The default candidates when the user gave none (the paper's grid)."""
    if cap <= 0 or step <= 0:
        raise ValueError(f"cap={cap}, step={step}: expected both > 0")
    limit = min(top, cap)
    grid = tuple(range(step, limit + 1, step))
    return grid if grid else (limit,)


def check_candidates(values: Sequence[int], what: str = "chunk candidates") -> tuple[int, ...]:
    """The user's chunk sizes, sorted and unique; any positive ints, no grid assumed."""
    out = tuple(sorted(set(values)))
    if not out or any(not isinstance(c, int) or isinstance(c, bool) or c <= 0 for c in out):
        raise UserError(f"{what} {list(values)!r}: expected a non-empty list of positive "
                        "integers (token counts)")
    return out


@functools.lru_cache(maxsize=64)
def usable_candidates(user: tuple[int, ...] | None, cap: int) -> tuple[int, ...]:
    """What a controller chooses among: the user's sizes that fit the engine's cap, or the paper's
    grid when the user gave none. When no user size fits, the smallest one (the engine clamps it
    to its cap): a size the user did not allow is never invented."""
    if user is None:
        return candidate_grid(cap)
    fitting = tuple(c for c in user if c <= cap)
    return fitting or user[:1]


def percentile(samples: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default) of ``samples``; None when empty.

    Plain Python: the sample windows are short, and numpy's call overhead would dominate.
    """
    total = sum(samples, 0.0)  # NaN only when a sample is (1-token requests have no TPOT)
    return sorted_percentile(sorted(samples) if total == total else
                             sorted([x for x in samples if x == x]), q)


def percentile_below(samples: Sequence[float], q: float, limit: float, scale: float = 1.0
                     ) -> bool:
    """Whether ``percentile(samples, q) / scale < limit`` (False when empty), without the sort
    where one count settles it: the percentile lies between two neighbouring samples, so it is
    at or above the limit when fewer samples than the lower one's rank lie below, and it is the
    two's interpolation when the limit falls between them."""
    n = below = 0
    top_below, least_above = -math.inf, math.inf
    for x in samples:
        if x == x:  # NaN: no sample
            n += 1
            if x / scale < limit:
                below += 1
                top_below = max(top_below, x)
            else:
                least_above = min(least_above, x)
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    if below <= lo:  # none, or the lower one above the limit
        return False
    if below == lo + 1 < n:
        return (top_below + (least_above - top_below) * (pos - lo)) / scale < limit
    value = percentile(samples, q)
    return value is not None and value / scale < limit


def sorted_percentile(ordered: Sequence[float], q: float) -> float | None:
    """``percentile`` of samples already in ascending order, none of them NaN."""
    n = len(ordered)
    if n == 0:
        return None
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def safe_floor(candidates: Sequence[int], max_slot_decodes: int) -> int:
    """Smallest candidate strictly above the decodes of the fullest microbatch.

    Mixed batches spend one budget token per decode, so a chunk at or below that count would leave
    no room for prefill. When no candidate is large enough, the largest one is the best we have.
    """
    for c in candidates:
        if c > max_slot_decodes:
            return c
    return candidates[-1]


def snap_to_grid(chunk: int, candidates: Sequence[int]) -> int:
    """The largest candidate <= chunk (the smallest candidate if none is)."""
    best = candidates[0]
    for c in candidates:
        if c <= chunk:
            best = c
        else:
            break
    return best


def kv_pressure(snap: ChunkSnapshot, watermark: float) -> bool:
    return snap.kv_total_tokens > 0 and snap.kv_free_fraction < watermark


class ArrivalWindow:
    """Prompt-token arrival rate (tokens/s) over a sliding window of the cumulative counter.

    Samples are kept at most every ``min_gap_s`` so the deque stays short (window/min_gap entries).
    Until a second sample exists the rate is 0: cumulative counters say how many, not since when.
    """

    def __init__(self, window_s: float = 10.0, min_gap_s: float = 0.1) -> None:
        if not (window_s > 0 and min_gap_s >= 0):
            raise ValueError(f"window_s={window_s}, min_gap_s={min_gap_s}: expected > 0 and >= 0")
        self.window_s = window_s
        self.min_gap_s = min_gap_s
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, now_s: float, tokens_total: int) -> float:
        samples = self._samples
        if not samples or now_s - samples[-1][0] >= self.min_gap_s:
            samples.append((now_s, tokens_total))
        # keep exactly one sample at or before the window start, so the span covers the window
        start = now_s - self.window_s
        while len(samples) >= 2 and samples[1][0] <= start:
            samples.popleft()
        t0, n0 = samples[0]
        span = now_s - t0
        if span <= 0:
            return 0.0
        return max(0, tokens_total - n0) / span


def finite_or(value: float | None, default: float) -> float:
    """For decision inputs: a number, never None (NaN marks 'no samples yet')."""
    return default if value is None or not math.isfinite(value) else value
