"""What one simulated run returns, and its summary (metrics + engine figures)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.metrics import percentiles, summarize
from ppsched.metrics.frame import requests_frame
from ppsched.sim.invariants import RunStats


@dataclass(frozen=True)
class SimResult:
    """One simulated run: per-request records (``requests`` as a DataFrame), per-iteration log,
    decisions, and the summary (metrics, engine figures, the config)."""

    records: list[RequestRecord]
    iterations: pd.DataFrame  # one row per stage and microbatch (columns in engine.log.COLUMNS)
    decisions: list[dict]  # every chunk decision; every trim that held someone
    summary: dict
    stats: RunStats = field(repr=False)

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request (``ppsched.metrics.frame.REQUEST_COLUMNS``): arrival, first
        token and finish times, lengths, TTFT/TPOT/E2E in ms, rejected and why."""
        return requests_frame(self.records)


def engine_summary(records: list[RequestRecord], iterations: pd.DataFrame, slo: Slo, *,
                   stages: int, work_s: float, busy_s: float, end_s: float, wall_s: float,
                   retractions: int, ds_holds: int, max_held_streak: int,
                   kv_capacity: int, kv_peak: int) -> dict:
    """Metrics of the records plus: iteration_ms (stage-0 time per microbatch), bubble_fraction
    (stage idle time / stage time while requests were in the system), simulator speed."""
    summary = summarize(records, slo)
    stage0 = iterations["measured_ms"].to_numpy()[iterations["stage"].to_numpy() == 0] \
        if not iterations.empty else np.empty(0)
    summary["iteration_ms"] = percentiles(stage0)
    summary["microbatches"] = int(stage0.size)
    denom = stages * work_s
    summary["bubble_fraction"] = max(0.0, 1.0 - busy_s / denom) if denom > 0 else 0.0
    summary["sim_end_s"] = end_s
    summary["sim_wall_s"] = wall_s
    summary["sim_speed"] = end_s / wall_s if wall_s > 0 else float("inf")
    summary["retractions"] = retractions
    summary["ds_holds"] = ds_holds
    summary["ds_max_consecutive_holds"] = max_held_streak
    summary["kv_capacity_tokens"] = kv_capacity
    summary["kv_peak_tokens"] = kv_peak
    return summary
