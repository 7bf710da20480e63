"""Per-stage iteration rows and the decision log, kept compact; one DataFrame at the end.

One tuple per microbatch (what it carried) and four floats per stage run (start, end, idle before,
measured ms) in a flat ``array('d')``: long overload runs keep millions of stage rows.
"""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from ppsched.sim.engine.state import Launched
from ppsched.sim.engine.timing import STAGE_VALUES

COLUMNS = ("mb", "slot", "stage", "start_s", "end_s", "prefill_tokens", "prefix_tokens",
           "decode_reqs", "decode_ctx_sum", "chunk", "idle_before_s", "predicted_ms",
           "measured_ms", "kind")
_MB_COLUMNS = ("slot", "prefill_tokens", "prefix_tokens", "decode_reqs", "decode_ctx_sum",
               "chunk", "predicted_ms", "kind")


class RunLog:
    def __init__(self, stages: int = 1) -> None:
        self.stages = stages
        self.batches: list[tuple] = []
        self.stage_values = array("d")  # per stage run: start, end, idle before, measured ms
        self.decisions: list[dict] = []

    def add_batch(self, mb: int, batch: Launched, runs: list[float]) -> None:
        """``runs``: ``Pipeline.run``'s flat stage values (``STAGE_VALUES`` per stage)."""
        if mb != len(self.batches) or len(runs) != STAGE_VALUES * self.stages:
            raise ValueError(f"microbatch {mb} logged out of order or with "
                             f"{len(runs) / STAGE_VALUES:g} stages")
        if batch.decision is not None:
            batch.decision["mb"] = mb
        if batch.trim is not None:
            batch.trim["mb"] = mb
        shape = batch.shape
        prefix_tokens = 0
        for prefix, _ in shape.prefill:
            prefix_tokens += prefix
        self.batches.append((batch.slot, shape.prefill_tokens, prefix_tokens,
                             shape.decode_count, shape.decode_ctx_sum, batch.chunk,
                             batch.predicted_ms, shape.kind))
        self.stage_values.extend(runs)

    def frame(self) -> pd.DataFrame:
        n, stages = len(self.batches), self.stages
        # one tuple per column (a transpose in C), each straight into its numpy array
        per_mb = dict(zip(_MB_COLUMNS, zip(*self.batches, strict=True), strict=True)) if n \
            else dict.fromkeys(_MB_COLUMNS, ())
        # a copy: the frame must not hold the log's buffer (the log may grow after it)
        values = np.frombuffer(self.stage_values, dtype=np.float64).reshape(
            -1, STAGE_VALUES).copy() if n else np.empty((0, STAGE_VALUES))
        out = {"mb": np.repeat(np.arange(n, dtype=np.int64), stages),
               "stage": np.tile(np.arange(stages, dtype=np.int64), n),
               "start_s": values[:, 0], "end_s": values[:, 1], "idle_before_s": values[:, 2],
               "measured_ms": values[:, 3]}
        for col in _MB_COLUMNS:
            dtype = object if col == "kind" else np.float64 if col == "predicted_ms" \
                else np.int64
            out[col] = np.repeat(np.array(per_mb[col], dtype=dtype), stages)
        # every array above is this frame's own: pandas need not copy them again
        return pd.DataFrame({col: out[col] for col in COLUMNS}, copy=False)
