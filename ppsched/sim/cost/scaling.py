"""How an op's measured time moves from a profiled shape to another: the work measure, and the
rules for elementwise ops (GEMMs: gemm_roofline.py).

- work per launch: K*N for a GEMM; tensor passes x width for an elementwise op, idle lanes of a
  one-block-per-token kernel counted at a measured share (lane_share);
- one-block-per-token kernels (sarathi's RMSNorm, SiluAndMul, rope): a fixed cost plus work,
  fitted per token count over the pool (block_cost);
- flat kernels (torch's TensorIterator add / GELU): the source at the token count of equal work
  (flat_time);
- any other elementwise op (embedding; a kernel borrowed from another implementation): the work
  ratio raised to the op's measured elasticity (work_elasticity).
Every fit is over the pool given (in leave-one-model-out, all models but the held-out one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from ppsched.sim.cost.profiles import Kernel, OpProfile

MAX_PROFILED_TOKENS = 4096
LANE_SHARES = np.linspace(0.0, 1.0, 21)


def flat_time(source: OpProfile, tokens: np.ndarray) -> np.ndarray:
    """A flat elementwise kernel's time (Kernel.flat) at a fractional token count of the
    source's width: interpolated between profiled counts, the one-token time below one token
    (the launch floor), and proportional past the last profiled count (per-token time held, as
    ``extrapolate``)."""
    at = np.maximum(tokens, 1.0)
    last = float(source.tokens[-1])
    inside = np.interp(at, source.tokens, source.median_ms)
    return np.where(at > last, source.median_ms[-1] * at / last, inside)


def work_per_launch(dims: Sequence[int], kernel: Kernel, lanes: int | None = None,
          share: float = 0.0) -> float:
    """Work per token and launch: K*N for a GEMM; for elementwise ops tensor passes x the width,
    where a one-block-per-token kernel's idle lanes (``lanes`` - width, LayerShape.lanes) count
    with the measured ``share`` (lane_share)."""
    width: float = math.prod(dims)
    if lanes is not None and share:
        width += share * (lanes - width)
    return kernel.passes * width


def log_times_per_launch(profiles: Sequence[OpProfile]) -> np.ndarray:
    """log(time per launch) of each profile at every token count 1..MAX_PROFILED_TOKENS (row 0
    repeats token 1)."""
    grid = np.arange(MAX_PROFILED_TOKENS + 1, dtype=np.float64)
    grid[0] = 1.0
    return np.log(np.array([np.interp(grid, p.tokens, p.median_ms) / p.kernel.launches
                            for p in profiles]))


def log_slopes(log_work: np.ndarray, log_ms: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares slope of log time on log work at each token count, and the residual sum of
    squares over all of them."""
    dx = log_work - log_work.mean()
    dy = log_ms - log_ms.mean(axis=0)
    slope = (dx[:, None] * dy).sum(axis=0) / (dx * dx).sum()
    return slope, float(((dy - slope * dx[:, None]) ** 2).sum())



def lane_share(kernel: Kernel, pool: Iterable[OpProfile],
               exclude_model: str | None = None) -> float:
    """How much an idle lane of a one-block-per-token kernel costs relative to a busy one,
    measured: the share in [0, 1] (steps of 0.05) whose effective work, width + share x idle
    lanes, best explains the times of every profile of that kernel in the pool (all models but
    ``exclude_model``) in one log-log fit per token count. An idle lane still holds its block's
    slot on the SM until the block's last pass ends (occupancy), but moves no bytes; the
    profiles measure SiluAndMul ~0.7 and rope ~0.3. 0 where no profile has idle lanes."""
    same = [p for p in pool if p.kernel.name == kernel.name and p.model != exclude_model
            and p.lanes is not None]
    padded = [p.lanes != math.prod(p.dims) for p in same]
    if not kernel.block_threads or len(same) < 3 or not any(padded):
        return 0.0
    log_ms = log_times_per_launch(same)
    best = min(LANE_SHARES, key=lambda share: log_slopes(np.log(np.array(
        [work_per_launch(p.dims, p.kernel, p.lanes, share) for p in same])), log_ms)[1])
    return float(best)


def work_elasticity(source: OpProfile, pool: Iterable[OpProfile],
                    exclude_model: str | None = None, share: float = 0.0) -> np.ndarray:
    """d log(time per launch) / d log(work per launch) of ``source``'s op at each token count
    0..4096: the least-squares slope over every profile of that op and kernel (GEMMs: of that
    layer family) in the pool (all models but ``exclude_model``, all TP degrees), clipped to
    [0, 1] (time never shrinks with more work nor grows faster than it). Work is effective work
    (idle lanes at ``share``, see lane_share)."""
    same = [p for p in pool if p.op == source.op and p.model != exclude_model
            and p.kernel == source.kernel and p.gated == source.gated]
    log_work = np.log(np.array([work_per_launch(p.dims, p.kernel, p.lanes, share)
                                for p in same]))
    if len(same) < 2 or np.ptp(log_work) == 0.0:
        return np.ones(MAX_PROFILED_TOKENS + 1)  # nothing measured to say otherwise: FLOPs
    return np.clip(log_slopes(log_work, log_times_per_launch(same))[0], 0.0, 1.0)


def block_cost(source: OpProfile, pool: Iterable[OpProfile], exclude_model: str | None = None,
               share: float = 0.0) -> tuple[np.ndarray, np.ndarray] | None:
    """A one-block-per-token kernel's time at each token count 0..4096 as a fixed cost plus a
    cost per unit of effective work, (fixed, per_work): least squares of relative error over
    every profile of ``source``'s op and kernel in the pool (all models but ``exclude_model``).
    A block loops over its lanes after one launch, so the launch floor adds to the work instead
    of scaling with it (Qwen-72B TP1 rope, 16 passes of 512 threads: 12 us at one token where
    10 passes take 7 us and 8 take 5). None where fewer than 3 profiles measure it or the fit
    leaves some token count without a cost."""
    same = [p for p in pool if p.op == source.op and p.model != exclude_model
            and p.kernel == source.kernel and p.gated == source.gated]
    work = np.array([work_per_launch(p.dims, p.kernel, p.lanes, share) for p in same])
    if len(same) < 3 or np.ptp(work) == 0.0:
        return None
    ms = np.exp(log_times_per_launch(same))
    ones, per = 1.0 / ms, work[:, None] / ms  # rows of (fixed, per_work) / measured
    s00, s01, s11 = (ones * ones).sum(0), (ones * per).sum(0), (per * per).sum(0)
    r0, r1 = ones.sum(0), per.sum(0)
    det = s00 * s11 - s01 * s01
    fixed = np.maximum((r0 * s11 - r1 * s01) / det, 0.0)
    per_work = np.maximum((s00 * r1 - s01 * r0) / det, 0.0)
    if not np.all(fixed + per_work * work.min() > 0.0):
        return None  # a degenerate fit: no cost at some token count
    return fixed, per_work
