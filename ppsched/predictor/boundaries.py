"""Hardware-efficient batch sizes: token counts after which linear-layer time steps up.

GEMM kernels tile the token dimension, so latency is a staircase: flat inside a band, a jump
right after each band edge (128, 256, ... on A100; other GPUs and kernels differ, so nothing here
assumes a period). A boundary is a gap on the token grid whose increment exceeds what the local
trend explains by more than ``rel_jump`` of the time level, and whose new level persists.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.errors import UserError

# A100 steps are +25-45% at 128-384 and fade to a few % beyond ~1000 tokens, where same-size
# noise and kernel-switch wiggles appear; 12% keeps the clear steps and drops the wiggles.
DEFAULT_REL_JUMP = 0.12
SEPARATION = 0.5  # bands either side of a step must differ by half the jump threshold


def _median3(y: np.ndarray) -> np.ndarray:
    """Running median of 3: removes single-point spikes, keeps step edges where they are."""
    if len(y) < 3:
        return y.copy()
    padded = np.concatenate(([y[0]], y, [y[-1]]))
    return np.median(np.stack([padded[:-2], padded[1:-1], padded[2:]]), axis=0)


def detect_boundaries(tokens: Sequence[int], times_ms: Sequence[float], *,
                      rel_jump: float = DEFAULT_REL_JUMP,
                      max_tokens: int | None = None) -> tuple[int, ...]:
    """Token counts after which time jumps (ascending); () for a profile with no clean steps.

    ``tokens`` strictly increasing; ``times_ms`` the (median) time at each. A gap i -> i+1 is a
    boundary when the level after it (median of the next 3 smoothed points) exceeds the level
    before it (median of the previous 3) by more than the trend predicts plus ``rel_jump`` of the
    level. The trend is the median per-token slope of the surrounding gaps, so a straight line
    has no boundaries however steep. Gaps after ``max_tokens`` are ignored.
    """
    t = np.asarray(tokens, dtype=float)
    y = np.asarray(times_ms, dtype=float)
    if t.shape != y.shape or t.ndim != 1:
        raise UserError(f"boundaries: {len(t)} token counts but {len(y)} times; expected equal")
    if not (rel_jump > 0 and np.isfinite(rel_jump)):
        raise UserError(f"boundaries: rel_jump={rel_jump!r}; expected a finite number > 0")
    if len(t) < 6:
        return ()
    if not (np.all(np.diff(t) > 0) and np.all(np.isfinite(y))):
        raise UserError("boundaries: token counts must be strictly increasing and times finite")
    ys = _median3(y)
    n = len(t)
    slopes = np.diff(ys) / np.diff(t)
    found: list[tuple[int, float]] = []  # (gap index, excess)
    for i in range(2, n - 3):  # gap between i and i+1, three points each side
        if max_tokens is not None and t[i] > max_tokens:
            break
        left = float(np.median(ys[i - 2:i + 1]))
        right = float(np.median(ys[i + 1:i + 4]))
        around = np.concatenate((slopes[max(0, i - 6):i], slopes[i + 1:i + 7]))
        trend = max(0.0, float(np.median(around))) * (t[i + 2] - t[i - 1])
        excess = (right - left - trend) / max(left, 1e-12)
        # the step must happen at this very gap, not spread over the windows
        step_here = (ys[i + 1] - ys[i]) / max(left, 1e-12)
        if excess > rel_jump and step_here > rel_jump / 2:
            found.append((i, excess))
    # a step seen by two adjacent gaps (windows overlap it) counts once, at the bigger one
    result: list[tuple[int, float]] = []
    for i, ex in found:
        if result and i - result[-1][0] <= 2:
            if ex > result[-1][1]:
                result[-1] = (i, ex)
            continue
        result.append((i, ex))
    return tuple(int(t[i]) for i in _separated(ys, [i for i, _ in result], rel_jump * SEPARATION))


def _separated(ys: np.ndarray, gaps: list[int], margin: float) -> list[int]:
    """Keep gaps that separate bands: the band after (to the next gap) lies wholly above the
    band before (since the last kept gap) by ``margin``. Drops bumps that fall back (a
    kernel-choice blip) and recoveries from a dip, which a local window cannot tell."""
    kept: list[int] = []
    for k, i in enumerate(gaps):
        start = kept[-1] + 1 if kept else 0
        end = gaps[k + 1] + 1 if k + 1 < len(gaps) else min(len(ys), i + 1 + 16)
        before = float(np.max(ys[start:i + 1]))
        after = float(np.min(ys[i + 1:end]))
        if after >= before * (1.0 + margin):
            kept.append(i)
    return kept


def graph_aware_boundaries(profile_boundaries: Sequence[int], graphs: DecodeGraphs
                           ) -> tuple[int, ...]:
    """DS's efficient decode batch sizes on a server that replays decode CUDA graphs.

    Up to the graph cap a decode batch replays a captured graph padded to the next captured
    size; graph replay time is nearly flat in the batch (memory-bound, no launch gaps), so the
    eager profile's steps below the cap do not exist there and padding buckets are not worth a
    hold. The cap itself is the big step (graph -> eager at cap + 1): it is a boundary. Above
    it batches run eagerly, so the profile's boundaries above the cap stay. Graphs off → the
    profile's boundaries unchanged.
    """
    found = sorted({int(b) for b in profile_boundaries})
    if any(b <= 0 for b in found):
        raise UserError(f"boundaries {found}: expected positive batch sizes")
    if not graphs.enabled:
        return tuple(found)
    return tuple(sorted({graphs.cap, *(b for b in found if b > graphs.cap)}))
