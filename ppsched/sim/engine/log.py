"""Per-stage iteration rows and the decision log, kept as plain lists; one DataFrame at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ppsched.sim.engine.timing import StageRun

if TYPE_CHECKING:
    from ppsched.sim.engine.batches import Launched

COLUMNS = ("mb", "slot", "stage", "start_s", "end_s", "prefill_tokens", "prefix_tokens",
           "decode_reqs", "decode_ctx_sum", "chunk", "idle_before_s", "predicted_ms",
           "measured_ms", "kind")


class RunLog:
    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.decisions: list[dict] = []

    def add_batch(self, mb: int, batch: Launched, runs: list[StageRun]) -> None:
        if batch.decision is not None:
            batch.decision["mb"] = mb
        if batch.trim is not None:
            batch.trim["mb"] = mb
        shape = batch.shape
        prefill = shape.prefill_tokens
        prefix = sum(p for p, _ in shape.prefill)
        kind = shape.kind
        head = (mb, batch.slot)
        tail = (prefill, prefix, shape.decode_count, shape.decode_ctx_sum, batch.chunk)
        for stage, start, end, idle, ms in runs:
            self.rows.append(head + (stage, start, end) + tail + (idle, batch.predicted_ms, ms,
                                                                  kind))

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame.from_records(self.rows, columns=list(COLUMNS))
        for col in ("mb", "slot", "stage", "prefill_tokens", "prefix_tokens", "decode_reqs",
                    "decode_ctx_sum", "chunk"):
            frame[col] = frame[col].astype(np.int64)
        return frame
