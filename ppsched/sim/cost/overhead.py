"""Per-iteration CPU time and sampling, from vidur's CodeLlama-34B TP2 CPU profile (ms medians)."""

from __future__ import annotations

import numpy as np
import pandas as pd

# Scheduler-side work per iteration: building the batch, preparing inputs, handling outputs.
CPU_PARTS = ("schedule_median", "prepare_inputs_e2e_median", "process_model_outputs_median")
SAMPLER_PART = "sampler_e2e_median"
MAX_BATCH_TABLE = 4096


def _curve(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[float]:
    """Index = requests in the batch (0..4096); linear between profiled batch sizes (8..128),
    flat below the smallest, linear past the largest with the secant of the last 64."""
    batch = frame["batch_size"].to_numpy(dtype=np.float64)
    ms = frame[list(columns)].sum(axis=1).to_numpy(dtype=np.float64)
    axis = np.arange(MAX_BATCH_TABLE + 1, dtype=np.float64)
    out = np.interp(axis, batch, ms)
    last = batch.max()
    ref = np.interp(last - 64, batch, ms)
    beyond = axis > last
    out[beyond] = ms[-1] + (ms[-1] - ref) / 64 * (axis[beyond] - last)
    out[0] = 0.0
    return out.tolist()


class OverheadModel:
    __slots__ = ("_cpu", "_sampler")

    def __init__(self, frame: pd.DataFrame) -> None:
        frame = frame.sort_values("batch_size")
        self._cpu = _curve(frame, CPU_PARTS)
        self._sampler = _curve(frame, (SAMPLER_PART,))

    @staticmethod
    def _at(curve: list[float], n: int) -> float:
        last = len(curve) - 1
        if n <= last:
            return curve[n]
        return curve[last] + (curve[last] - curve[last - 64]) / 64 * (n - last)

    def cpu_ms(self, requests: int) -> float:
        return self._at(self._cpu, requests) if requests > 0 else 0.0

    def sampler_ms(self, rows: int) -> float:
        return self._at(self._sampler, rows) if rows > 0 else 0.0

    def describe(self) -> dict[str, object]:
        return {"source": "cpu_overheads_codellama34b_tp2.csv (vLLM-based, via vidur)",
                "cpu_parts": list(CPU_PARTS), "sampler_part": SAMPLER_PART,
                "cpu_ms_at": {n: round(self._cpu[n], 4) for n in (1, 8, 64, 128, 256)},
                "sampler_ms_at": {n: round(self._sampler[n], 4) for n in (1, 8, 64, 128, 256)}}
