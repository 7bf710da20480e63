"""Attention per layer from vidur's FlashAttention profile (32 q / 4 kv heads per GPU, d=128).

Build time: dense grids on regular axes (decode: batch 1..128 x context step 32; prefill: chunk
step 16 x prefix step 32), head-scaled. Call time: plain-list lookups with linear interpolation
along context/prefix, linear extrapolation past the grid.

Head scaling (affine above the launch floor, the grid minimum, which does not grow with heads):
decode reads the KV cache, memory-bound, so it scales with KV heads x head_dim per GPU; prefill
is compute-bound, so it scales with query heads x head_dim per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PROFILE_Q_HEADS = 32  # per GPU: 64 q heads / tp 2
PROFILE_KV_HEADS = 4  # per GPU: 8 kv heads / tp 2
PROFILE_HEAD_DIM = 128
KV_STEP = 32
KV_MAX = 4032
CHUNK_STEP = 16
CHUNK_MAX = 4096
DECODE_BATCH_MAX = 128
DECODE_BATCH_BAND = 64  # batch secant used past 128 (half the profiled range)
KV_BAND = 1024  # context secant used past 4032
CHUNK_BAND = 1024  # chunk secant used past 4096


@dataclass(frozen=True, slots=True)
class AttentionScale:
    decode_ratio: float
    prefill_ratio: float
    decode_floor_ms: float
    prefill_floor_ms: float


def head_scale(q_heads_per_gpu: int, kv_heads_per_gpu: int, head_dim: int,
               decode_floor: float, prefill_floor: float) -> AttentionScale:
    return AttentionScale(
        decode_ratio=kv_heads_per_gpu * head_dim / (PROFILE_KV_HEADS * PROFILE_HEAD_DIM),
        prefill_ratio=q_heads_per_gpu * head_dim / (PROFILE_Q_HEADS * PROFILE_HEAD_DIM),
        decode_floor_ms=decode_floor, prefill_floor_ms=prefill_floor)


def decode_grid(profile: pd.DataFrame) -> np.ndarray:
    """[batch 0..128, kv 0..4032 step 32] in ms (batch 0 row unused; kv < 32 uses kv 32)."""
    dec = profile[~profile["is_prefill"]]
    table = dec.pivot(index="batch_size", columns="kv_cache_size", values="total").sort_index()
    kv_axis = np.arange(0, KV_MAX + 1, KV_STEP, dtype=np.float64)
    grid = np.zeros((DECODE_BATCH_MAX + 1, len(kv_axis)))
    cols = table.columns.to_numpy(dtype=np.float64)
    for b in range(1, DECODE_BATCH_MAX + 1):
        row = table.loc[b].to_numpy(dtype=np.float64)
        ok = np.isfinite(row)
        grid[b] = np.interp(kv_axis, cols[ok], row[ok])
    return grid


def prefill_grid(profile: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """[chunk 0..4096 step 16, prefix 0..4032 step 32] in ms, and the kv-slope fit (a, b).

    The profile covers chunk + prefix <= ~4096 only. Past a chunk's largest profiled prefix the
    row continues linearly with slope s(chunk) = a*chunk + b, fitted over the secant slopes of
    the chunks profiled up to >= 1024 prefix (each extra prefix token is attended by every query
    token of the chunk, so the slope grows with the chunk).
    """
    pre = profile[profile["is_prefill"]]
    table = pre.pivot(index="prefill_chunk_size", columns="kv_cache_size", values="total")
    table = table.sort_index()
    cols = table.columns.to_numpy(dtype=np.float64)
    chunks = table.index.to_numpy(dtype=np.float64)
    kv_axis = np.arange(0, KV_MAX + 1, KV_STEP, dtype=np.float64)
    slopes, slope_chunks = [], []
    rows: list[tuple[np.ndarray, np.ndarray]] = []
    for chunk in chunks:
        row = table.loc[int(chunk)].to_numpy(dtype=np.float64)
        ok = np.isfinite(row)
        kv, ms = cols[ok], row[ok]
        rows.append((kv, ms))
        if kv.max() >= KV_BAND:
            band = kv >= kv.max() - KV_BAND
            slopes.append(np.polyfit(kv[band], ms[band], 1)[0])
            slope_chunks.append(chunk)
    a, b = np.polyfit(np.asarray(slope_chunks), np.asarray(slopes), 1)
    full = np.empty((len(chunks), len(kv_axis)))
    for i, (chunk, (kv, ms)) in enumerate(zip(chunks, rows, strict=True)):
        inside = np.interp(kv_axis, kv, ms)
        beyond = kv_axis > kv.max()
        slope = max(a * chunk + b, 0.0)
        inside[beyond] = ms[-1] + slope * (kv_axis[beyond] - kv.max())
        full[i] = inside
    chunk_axis = np.arange(0, CHUNK_MAX + 1, CHUNK_STEP, dtype=np.float64)
    floor = float(np.nanmin(table.to_numpy()))
    grid = np.empty((len(chunk_axis), len(kv_axis)))
    for j in range(len(kv_axis)):
        # chunk 0 costs the launch floor; below the smallest profiled chunk, a straight line.
        grid[:, j] = np.interp(chunk_axis, np.concatenate(([0.0], chunks)),
                               np.concatenate(([floor], full[:, j])))
    return grid, np.array([a, b])


class AttentionModel:
    """Per-layer attention time on one GPU for a target head configuration."""

    __slots__ = ("_dec", "_pre", "_dec_floor", "_pre_floor", "scale", "kv_slope_fit")

    def __init__(self, profile: pd.DataFrame, q_heads_per_gpu: int, kv_heads_per_gpu: int,
                 head_dim: int, hw_decode_factor: float = 1.0,
                 hw_prefill_factor: float = 1.0) -> None:
        dec = decode_grid(profile)
        pre, fit = prefill_grid(profile)
        dec_floor = float(dec[1:].min())
        pre_floor = float(pre.min())
        self.scale = head_scale(q_heads_per_gpu, kv_heads_per_gpu, head_dim, dec_floor, pre_floor)
        self.kv_slope_fit = (float(fit[0]), float(fit[1]))
        dec[1:] = dec_floor + (dec[1:] - dec_floor) * self.scale.decode_ratio
        pre = pre_floor + (pre - pre_floor) * self.scale.prefill_ratio
        dec *= hw_decode_factor
        pre *= hw_prefill_factor
        self._dec = dec.tolist()
        self._pre = pre.tolist()
        self._dec_floor = dec_floor * hw_decode_factor
        self._pre_floor = pre_floor * hw_prefill_factor

    @staticmethod
    def _along(row: list[float], x: float, step: int) -> float:
        """Linear interpolation on a row sampled every ``step``; secant extrapolation past it."""
        pos = x / step
        last = len(row) - 1
        if pos >= last:
            band = KV_BAND // step
            return row[last] + (row[last] - row[last - band]) / KV_BAND * (x - last * step)
        i = int(pos)
        frac = pos - i
        return row[i] + (row[i + 1] - row[i]) * frac

    def decode_ms(self, batch: int, ctx_sum: int) -> float:
        """Decode attention of ``batch`` requests with ``ctx_sum`` context tokens in total."""
        if batch <= 0:
            return 0.0
        ctx = max(ctx_sum / batch, float(KV_STEP))
        if batch <= DECODE_BATCH_MAX:
            return self._along(self._dec[batch], ctx, KV_STEP)
        top = self._along(self._dec[DECODE_BATCH_MAX], ctx, KV_STEP)
        lower = self._along(self._dec[DECODE_BATCH_MAX - DECODE_BATCH_BAND], ctx, KV_STEP)
        return top + (top - lower) / DECODE_BATCH_BAND * (batch - DECODE_BATCH_MAX)

    def _piece_ms(self, prefix: int, extend: int) -> float:
        pos = extend / CHUNK_STEP
        last = len(self._pre) - 1
        if pos >= last:
            top = self._along(self._pre[last], prefix, KV_STEP)
            lower = self._along(self._pre[last - CHUNK_BAND // CHUNK_STEP], prefix, KV_STEP)
            return top + (top - lower) / CHUNK_BAND * (extend - CHUNK_MAX)
        i = int(pos)
        frac = pos - i
        lo = self._along(self._pre[i], prefix, KV_STEP)
        if frac == 0.0:
            return lo
        hi = self._along(self._pre[i + 1], prefix, KV_STEP)
        return lo + (hi - lo) * frac

    def prefill_ms(self, pieces: tuple[tuple[int, int], ...]) -> float:
        """One batched (varlen) prefill kernel: one launch floor plus each piece's work above it."""
        if not pieces:
            return 0.0
        floor = self._pre_floor
        total = floor
        for prefix, extend in pieces:
            total += self._piece_ms(prefix, extend) - floor
        return total

    def describe(self) -> dict[str, object]:
        s = self.scale
        return {"profile_heads_per_gpu": {"q": PROFILE_Q_HEADS, "kv": PROFILE_KV_HEADS,
                                          "head_dim": PROFILE_HEAD_DIM},
                "decode_ratio": s.decode_ratio, "prefill_ratio": s.prefill_ratio,
                "decode_floor_ms": s.decode_floor_ms, "prefill_floor_ms": s.prefill_floor_ms,
                "prefill_kv_slope_fit_ms_per_token": {"a_per_chunk_token": self.kv_slope_fit[0],
                                                      "b": self.kv_slope_fit[1]}}
