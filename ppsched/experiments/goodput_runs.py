"""One goodput run: the workload spec of a run at a rate, and the window it is judged on.

Shared by the search (``goodput``), its verification (``goodput_verify``), sweeps and fleet
capacity plans, so that every run of a goodput method is drawn the same way.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ppsched.core.slo import Slo
from ppsched.experiments.recorded_arrivals import replay_spec
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.metrics.steady import Window, window_for


def measurement_window(workload: WorkloadSpec, slo: Slo) -> Window:
    """The window sized from the workload's median output length at the base SLO."""
    full = load(replace(workload, rate=1.0, replay=False, duration_s=None, num_requests=None,
                        window_min=None, speedup=1.0))
    _, _, output = full.arrays()
    return window_for(float(pd.Series(output).median()), slo)


def run_spec(workload: WorkloadSpec, rate: float, seed: int, window: Window) -> WorkloadSpec:
    """One goodput run: Poisson at `rate` over the window, lengths drawn i.i.d. from every row
    of the trace with `seed` (not the file's first rows: those would be the same for every seed
    and differ from the longer verification run's). A replay spec (``--arrivals trace``): the
    trace's own timestamps at the speed factor of `rate` (``recorded_arrivals``)."""
    if workload.replay:
        return replay_spec(workload, rate, seed)
    return replace(workload.at_rate(rate), seed=seed, num_requests=None,
                   duration_s=window.arrivals_s, resample=True)
