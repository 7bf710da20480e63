"""Linear and elementwise ops: nearest profiled shapes, shape scaling, 80 GB -> target GPU.

A target op is predicted from the profiled ops whose per-GPU shapes are nearest in log space
(GEMMs: (K, N); elementwise ops: the work per launch), each source's measured times moved to
the target's shape at every token count: GEMMs by a roofline with a fixed cost whose constants
are measured from the profiled GEMMs (gemm_roofline.py), elementwise ops by the rule of their
kernel (scaling.py: fixed cost plus work for one-block-per-token kernels, equal work for flat
torch kernels, a measured elasticity otherwise). The measured token staircase of the sources is
kept, the sources are blended, then the roofline correction between the profile's GPU and the
target.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ppsched.sim.cost.gemm_roofline import GemmRoofline
from ppsched.sim.cost.profiles import GEMM_OPS, Kernel, OpProfile, op_kernel
from ppsched.sim.cost.scaling import (
    MAX_PROFILED_TOKENS,
    block_cost,
    flat_time,
    lane_share,
    work_elasticity,
    work_per_launch,
)
from ppsched.sim.hardware import HardwareSpec

DTYPE_BYTES = 2  # BF16


# An op is predicted from this many nearest distinct profiled shapes of its role (geometric mean,
# inverse log-distance weights): one source's cuBLAS kernel choice at a token count is noise to
# the target, and the roofline moves even a farther GEMM shape to the target's (LOMO 3 -> 8
# GEMM sources: 5.14% -> 5.01%, levelling off: 12 gives 5.00%). Elementwise ops keep 3: 2-5
# sources measure the same (5.01-5.02%).
GEMM_BLEND = 8
ELEMENTWISE_BLEND = 3


@dataclass(frozen=True, slots=True)
class SourcePart:
    """One profiled source of a prediction and how it is scaled to the target."""

    source: OpProfile
    work_ratio: float  # target / source work per launch and token (Kernel.passes x width)
    distance: float
    weight: float
    # per token count 0..MAX_PROFILED_TOKENS: target / source time per launch (see module doc)
    scale: np.ndarray = field(compare=False, repr=False)
    launches: int = 1  # kernel launches of the target op (the source's are divided out)
    # how the source moves to the target: "elasticity", "roofline", "exact" (scale) or "flat"
    # (the source's time at the token count of equal work: flat_time; scale is then 1)
    rule: str = "elasticity"

    def curve(self, grid: np.ndarray) -> np.ndarray:
        src = self.source
        if self.rule == "flat":  # the source at the token count that moves the same bytes
            return self.launches * flat_time(src, grid * self.work_ratio) / src.kernel.launches
        per_launch = np.interp(grid, src.tokens, src.median_ms) / src.kernel.launches
        return self.launches * per_launch * self.scale[:len(grid)]

    def describe(self) -> dict[str, object]:
        return {"source_model": self.source.model, "source_tp": self.source.tp,
                "source_op": self.source.op, "source_dims": list(self.source.dims),
                "source_lanes": self.source.lanes,
                "source_kernel": self.source.kernel.name, "launches": self.launches,
                "work_ratio": round(self.work_ratio, 6), "log_distance": round(self.distance, 6),
                "weight": round(self.weight, 4), "scaling": self.rule,
                "scale_at_tokens": {n: round(float(self.scale[n]), 4)
                                    for n in (1, 64, 512, 4096)}}


@dataclass(frozen=True, slots=True)
class ScaledOp:
    """A target op predicted from one or more profiled sources (nearest first)."""

    op: str
    dims: tuple[int, ...]
    parts: tuple[SourcePart, ...]
    lanes: int | None = None  # elementwise: elements per token its thread blocks span
    lane_share: float = 0.0  # measured cost of an idle lane relative to a busy one

    @property
    def source(self) -> OpProfile:
        return self.parts[0].source

    @property
    def work_ratio(self) -> float:
        return self.parts[0].work_ratio

    @property
    def distance(self) -> float:
        return self.parts[0].distance

    def describe(self) -> dict[str, object]:
        first = self.parts[0].describe()
        return {"op": self.op, "dims": list(self.dims), "lanes": self.lanes,
                "lane_share": self.lane_share, **first,
                "blend": [p.describe() for p in self.parts[1:]]}


def _log_distance(a: Sequence[float], b: Sequence[float]) -> float:
    return math.sqrt(sum((math.log(x) - math.log(y)) ** 2 for x, y in zip(a, b, strict=True)))


def _kernel(op: str, gated: bool, kernel: Kernel | None) -> Kernel:
    return kernel if kernel is not None else op_kernel(op, gated)


def nearest_profile(op: str, dims: tuple[int, ...], pool: Iterable[OpProfile],
                    exclude_model: str | None = None, tp: int = 1,
                    gated: bool = True, kernel: Kernel | None = None) -> tuple[OpProfile, float]:
    """The profile nearest to (op, dims) among the same op (same kernel family and weight
    layout in the profiler). The LM head has no profiled op of its own and borrows the nearest
    GEMM of any role. Ties (norms, adds, embeddings share one width at every TP degree) go to
    the target's own TP degree ``tp``: vidur measured those ops 5-16% slower at TP >= 2 than at
    TP 1 (same width, other processes' NCCL/stream state), so a TP-1 source under-predicts.
    GEMM sources of the target's layer family (``gated``: SwiGLU MLP, no biases, as every
    Llama/Qwen; not phi-2's GELU MLP with biases) come first. Elementwise ops rank by the
    profiler's kernel implementation instead (``kernel``, default ``op_kernel(op, gated)``):
    same implementation first (any op of it: torch GELU borrows torch add), nearest in log work
    per launch (Kernel.passes x width), then same op."""
    ranked = ranked_profiles(op, dims, pool, exclude_model, tp, gated, kernel)
    if not ranked:
        raise ValueError(f"no profiled op can stand in for {op!r} {dims}")
    return ranked[0]


def ranked_profiles(op: str, dims: tuple[int, ...], pool: Iterable[OpProfile],
                    exclude_model: str | None = None, tp: int = 1, gated: bool = True,
                    kernel: Kernel | None = None, lanes: int | None = None,
                    share: float = 0.0) -> list[tuple[OpProfile, float]]:
    """Every profile that may stand in for (op, dims), best first (see nearest_profile);
    elementwise distances in effective work (``lanes``, ``share``: see work_per_launch)."""
    any_gemm = op == "lm_head"
    kernel = _kernel(op, gated, kernel)
    elementwise = len(dims) == 1
    keyed = []
    for prof in pool:
        if prof.model == exclude_model:
            continue
        if any_gemm:
            if prof.op not in GEMM_OPS:
                continue
        elif prof.op != op and not (elementwise and prof.kernel.name == kernel.name):
            continue
        if elementwise:
            distance = _log_distance(
                (work_per_launch(dims, kernel, lanes, share),),
                (work_per_launch(prof.dims, prof.kernel, prof.lanes, share),))
            # same implementation first, then same op (another op of the implementation only
            # stands in where the op has none of it: torch GELU <- torch add), then layer family
            family = (prof.kernel.name != kernel.name, prof.op != op, prof.gated != gated)
        else:
            distance = _log_distance(dims, prof.dims)
            family = (False, False, prof.gated != gated)
        key = (family, round(distance, 9), 0 if prof.op == op else 1, prof.tp != tp, prof.tp)
        keyed.append((key, distance, prof))
    keyed.sort(key=lambda item: item[0])
    return [(prof, distance) for _, distance, prof in keyed]


def scale_op(op: str, dims: tuple[int, ...], pool: Iterable[OpProfile],
             exclude_model: str | None = None, tp: int = 1, gated: bool = True,
             kernel: Kernel | None = None, lanes: int | None = None) -> ScaledOp:
    """The prediction of (op, dims): its GEMM_BLEND (elementwise: ELEMENTWISE_BLEND) nearest
    distinct profiled shapes of the same role (elementwise: implementation and op) and layer
    family, each scaled to the target by the measured GEMM roofline (GEMMs) or by work with the
    measured elasticity (elementwise ops), blended as a geometric mean with weights
    1/log-distance (Shepard's inverse-distance rule). An exactly profiled shape is used alone,
    and so is the LM head's nearest GEMM. An elementwise op's time is per launch times the
    target's launches (``kernel``); ``lanes``: the elements per token the target's thread blocks
    span (LayerShape.lanes; None: the width), whose idle part counts as work at the kernel's
    measured lane_share."""
    pool = tuple(pool)
    kernel = _kernel(op, gated, kernel)
    share = lane_share(kernel, pool, exclude_model) if len(dims) == 1 else 0.0
    ranked = ranked_profiles(op, dims, pool, exclude_model, tp, gated, kernel, lanes, share)
    if not ranked:
        raise ValueError(f"no profiled op can stand in for {op!r} {dims}")
    first = ranked[0][0]
    blend = GEMM_BLEND if len(dims) == 2 else ELEMENTWISE_BLEND
    count = blend if ranked[0][1] > 0.0 and op != "lm_head" else 1
    chosen: list[tuple[OpProfile, float]] = []
    for prof, distance in ranked:
        if len(chosen) == count:
            break
        same_family = (prof.gated == first.gated and (len(dims) == 2 or (
            (prof.kernel.name, prof.op) == (first.kernel.name, first.op))))
        if same_family and all((prof.dims, prof.kernel) != (p.dims, p.kernel) for p, _ in chosen):
            chosen.append((prof, distance))
    grid = np.arange(MAX_PROFILED_TOKENS + 1)
    roofline: GemmRoofline | None = None  # fitted once, where a GEMM needs scaling
    raw = []
    alphas: dict[tuple[str, Kernel, bool], np.ndarray] = {}  # one regression per source family
    for prof, distance in chosen:
        ratio = (work_per_launch(dims, kernel, lanes, share)
                 / work_per_launch(prof.dims, prof.kernel, prof.lanes, share))
        family = (prof.op, prof.kernel, prof.gated)
        if ratio == 1.0:
            scale, rule = np.ones(grid.shape), "exact"
        elif kernel.flat and prof.kernel.flat:
            scale, rule = np.ones(grid.shape), "flat"
        elif len(dims) == 2:
            roofline = roofline or GemmRoofline.fit(pool, exclude_model)
            scale, rule = roofline.ms(dims, grid) / roofline.ms(prof.dims, grid), "roofline"
        elif kernel.block_threads and kernel == prof.kernel and (
                costs := block_cost(prof, pool, exclude_model, share)) is not None:
            fixed, per_work = costs
            source_work = work_per_launch(prof.dims, prof.kernel, prof.lanes, share)
            scale = (fixed + per_work * source_work * ratio) / (fixed + per_work * source_work)
            rule = "block"
        else:
            if family not in alphas:
                alphas[family] = work_elasticity(prof, pool, exclude_model, share)
            scale, rule = ratio ** alphas[family], "elasticity"
        raw.append((prof, ratio, distance, 1.0 / distance if distance > 0.0 else 1.0, scale,
                    rule))
    total = sum(item[3] for item in raw)
    parts = tuple(SourcePart(prof, ratio, distance, weight / total, scale, kernel.launches, rule)
                  for prof, ratio, distance, weight, scale, rule in raw)
    return ScaledOp(op=op, dims=dims, parts=parts, lanes=lanes, lane_share=share)


def roofline_factor(dims: tuple[int, ...], tokens: np.ndarray, profile_hw: HardwareSpec,
                    target_hw: HardwareSpec) -> np.ndarray:
    """time on target / time on the profile GPU, per token count, from the roofline.

    An op is memory-bound where its arithmetic intensity (FLOPs / bytes moved) is below the
    GPU's ridge point (peak FLOP/s / HBM bytes/s: 153 on the 80 GB part, 201 on the 40 GB PCIe
    part). Memory-bound ops scale with HBM bandwidth (2039 / 1555 = 1.31x slower), compute-bound
    ones not at all; in between, the roofline max() of the two times gives the ratio. Elementwise
    ops (norms, activation, rope, add, embedding) move bytes only: always memory-bound.
    """
    m = tokens.astype(np.float64)
    if len(dims) == 1:
        return np.full(m.shape, profile_hw.hbm_gbps / target_hw.hbm_gbps)
    k, n = dims
    flops = 2.0 * m * k * n
    moved = DTYPE_BYTES * (m * k + k * n + m * n)

    def roof(hw: HardwareSpec) -> np.ndarray:
        return np.maximum(flops / (hw.bf16_tflops * 1e12), moved / (hw.hbm_gbps * 1e9))

    return roof(target_hw) / roof(profile_hw)


def token_curve(scaled: ScaledOp, profile_hw: HardwareSpec, target_hw: HardwareSpec,
                max_tokens: int = MAX_PROFILED_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """(ms, cv) for token counts 0..max_tokens (index = tokens; index 0 is 0 ms).

    Linear interpolation between profiled token counts keeps every measured step at the
    profile's resolution (8 tokens up to 1024, 16 to 2048, 32 to 4096).
    """
    grid = np.arange(max_tokens + 1, dtype=np.float64)
    src = scaled.source
    if len(scaled.parts) == 1:
        ms = scaled.parts[0].curve(grid)
    else:  # weighted geometric mean of the sources' scaled curves
        ms = np.exp(sum(p.weight * np.log(np.maximum(p.curve(grid), 1e-12))
                        for p in scaled.parts))
    factor = roofline_factor(scaled.dims, np.maximum(grid, 1.0), profile_hw, target_hw)
    if len(scaled.dims) == 1:
        # Elementwise kernels at small token counts are launch/latency-bound: their measured
        # floor (the source's fastest time) does not grow with a slower HBM; only the part
        # above it moves bytes. (Measured A100->H100 ratios of small elementwise ops are
        # 0.67-0.86, not the 0.61 bandwidth ratio: latency, not bandwidth, sets them.)
        floor = min(float(src.median_ms.min()), float(ms[1:].min()))
        ms = floor + (ms - floor) * factor
    else:
        ms *= factor
    ms[0] = 0.0
    cv = np.interp(grid, src.tokens, src.cv)
    return ms, cv


def extrapolate(curve: Sequence[float], tokens: int) -> float:
    """curve[tokens] inside the table; beyond it, proportional to tokens (the per-token time at
    the last profiled count held: at 4096 tokens every GEMM and elementwise op is throughput-
    bound, so time grows with FLOPs/bytes, i.e. with tokens). Tested by truncating the profiles
    at 2048 tokens and predicting their 2064..4096 rows: 4.0% MAPE against 6.5% for the secant
    over the last quarter (tests/test_sim_cost_fidelity.py; docs/COST_MODEL.md)."""
    last = len(curve) - 1
    if tokens <= last:
        return curve[tokens]
    return curve[last] * tokens / last
