"""How a GEMM's time changes with its shape at a fixed token count: a roofline with a fixed cost,
its three constants measured from the profiled GEMMs.

t(M, K, N) = t0 + max(2MKN / peak, 2(MK + KN + MN) / bandwidth)   (BF16, per GPU)

A few-token GEMM streams its weights (memory-bound: time ~ weight bytes), a many-token one is
compute-bound (time ~ FLOPs); the fixed cost t0 (launch, pipeline fill, the tail of the last
wave) is what keeps a small GEMM from shrinking in proportion. The prediction of a target GEMM is
its source's measured time at each token count times t(target) / t(source): the source's
cuBLAS staircase is kept, the roofline moves it between shapes. Unlike one pooled elasticity per
token count, the ratio knows that at a given M a wide GEMM is compute-bound while a narrow TP-8
one is still memory-bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ppsched.core.errors import UserError
from ppsched.sim.cost.profiles import OpProfile

DTYPE_BYTES = 2  # BF16
DECODE_TOKENS = 1  # the row t0 and the bandwidth are fitted at (the peak: each GEMM's largest
# profiled token count, 4096, where every profiled GEMM is compute-bound)


@dataclass(frozen=True, slots=True)
class GemmRoofline:
    fixed_ms: float  # t0
    bytes_per_ms: float  # achieved HBM bandwidth streaming weights
    flops_per_ms: float  # achieved BF16 rate of large GEMMs

    @classmethod
    def fit(cls, pool: Iterable[OpProfile], exclude_model: str | None = None) -> GemmRoofline:
        """t0 and bandwidth: least squares of relative error of t0 + weight bytes / bandwidth
        against every GEMM's one-token time; peak: the median achieved FLOP rate at each GEMM's
        largest profiled token count (4096).
        On the vendored profiles (all five models): 4.4 us, 1.61 TB/s, 233 TFLOP/s."""
        gemms = [p for p in pool if p.kernel.name == "gemm" and p.model != exclude_model]
        if len(gemms) < 3:
            raise UserError(f"{len(gemms)} profiled GEMMs (models other than "
                            f"{exclude_model!r}): expected >= 3 to fit the GEMM roofline")
        weights = np.array([DTYPE_BYTES * k * n for k, n in [p.dims for p in gemms]], float)
        one = np.array([np.interp(DECODE_TOKENS, p.tokens, p.median_ms) for p in gemms])
        rows = np.stack([1.0 / one, weights / one], axis=1)
        (fixed, ms_per_byte), *_ = np.linalg.lstsq(rows, np.ones(len(one)), rcond=None)
        flops = np.array([2.0 * p.tokens[-1] * p.dims[0] * p.dims[1] for p in gemms])
        many = np.array([p.median_ms[-1] for p in gemms])
        if ms_per_byte <= 0.0:
            raise UserError("the profiled GEMMs' one-token times do not grow with their weight "
                            "bytes; expected weight-streaming GEMM profiles (vidur mlp.csv)")
        return cls(fixed_ms=max(float(fixed), 0.0), bytes_per_ms=1.0 / float(ms_per_byte),
                   flops_per_ms=float(np.median(flops / many)))

    def ms(self, dims: tuple[int, ...], tokens: np.ndarray) -> np.ndarray:
        k, n = dims
        m = np.maximum(tokens.astype(np.float64), 1.0)
        compute = 2.0 * m * k * n / self.flops_per_ms
        memory = DTYPE_BYTES * (m * k + k * n + m * n) / self.bytes_per_ms
        return self.fixed_ms + np.maximum(compute, memory)

    def describe(self) -> dict[str, float]:
        return {"fixed_us": round(self.fixed_ms * 1e3, 3),
                "bandwidth_tb_s": round(self.bytes_per_ms * 1e3 / 1e12, 4),
                "peak_tflop_s": round(self.flops_per_ms * 1e3 / 1e12, 2)}
