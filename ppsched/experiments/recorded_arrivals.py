"""Goodput on a trace's own arrivals (``ppsched goodput --arrivals trace``).

Poisson arrivals at a rate remove the bursts and regime changes of a real trace, which is where a
dynamic controller earns its keep. Here every run replays the trace's recorded timestamps (all of
them, or its first ``--window-min`` minutes) with each gap divided by a speed factor, as the
paper's Azure replay does (``ppsched run --replay --speedup``). A rate maps to the factor
rate / the replayed part's mean rate (requests / span), so the search over rates (and its
sustained criterion) is the Poisson one and goodput reads in requests per second: the largest
factor that passes, times the trace's mean rate.

The run's arrivals are the whole replay, so its measurement window is what the warm-up and the
cool-down leave of it. Both are the Poisson window's (sized from the workload,
``metrics.steady.window_for``), each at most ``EDGE_SHARE`` of the replay so that the measured
requests stay the bulk of it at high factors. Seeds change the simulator's noise only (the
arrivals and lengths are the trace's); verification replays the trace again on a fresh seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from ppsched.core.errors import UserError
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.metrics.steady import Window
from ppsched.traces.arrivals import check_window
from ppsched.traces.catalog import lookup
from ppsched.traces.readers import FORMATS

ARRIVALS = ("poisson", "trace")
EDGE_SHARE = 0.25  # warm-up and cool-down each take at most a quarter of the replay


@dataclass(frozen=True, slots=True)
class RecordedArrivals:
    """The replayed part of a timestamped trace: its request count and span (s) at factor 1."""

    requests: int
    span_s: float

    def __post_init__(self) -> None:
        if self.requests < 2 or not (math.isfinite(self.span_s) and self.span_s > 0):
            raise UserError(f"recorded arrivals: {self.requests} requests over {self.span_s} s; "
                            "expected at least two requests at distinct times")

    @property
    def mean_rate(self) -> float:
        """Requests per second as recorded (the rate at factor 1)."""
        return self.requests / self.span_s

    def factor(self, rate: float) -> float:
        """The speed factor at which the replay's mean rate is ``rate`` (6 significant digits,
        as ``WorkloadSpec.at_rate`` rounds rates: searches meeting there share a cached run)."""
        if not (math.isfinite(rate) and rate > 0):
            raise UserError(f"recorded arrivals: rate {rate!r}: expected a finite rate > 0")
        return float(f"{rate / self.mean_rate:.6g}")

    def window(self, factor: float, base: Window) -> Window:
        """The verdict's window over a replay at ``factor``: ``base``'s warm-up and cool-down,
        each at most EDGE_SHARE of the replay, and the rest measured."""
        if not (math.isfinite(factor) and factor > 0):
            raise UserError(f"--speedup {factor!r}: expected a finite factor > 0")
        span = self.span_s / factor
        warmup = min(base.warmup_s, EDGE_SHARE * span)
        cooldown = min(base.cooldown_s, EDGE_SHARE * span)
        return Window(warmup, span - warmup - cooldown, cooldown)


def check_timestamped(workload: WorkloadSpec) -> None:
    """One clear error when ``workload``'s trace records no arrival times to replay."""
    fmt = workload.trace_format if workload.trace_file else lookup(workload.name).fmt
    if fmt is None or FORMATS[fmt][0] is None:
        what = "is synthetic" if fmt is None else f"has lengths only (format {fmt!r})"
        raise UserError(f"--arrivals trace: workload {workload.name!r} {what}, no recorded "
                        "timestamps to replay; expected a timestamped trace (azure-conv, "
                        "azure-code, mooncake-synthetic, or a --trace-file in the azure or "
                        "mooncake format), or --arrivals poisson")


def recorded_arrivals(workload: WorkloadSpec) -> RecordedArrivals:
    """The replayed part of ``workload`` (a replay spec), read at factor 1."""
    if not workload.replay:
        raise UserError(f"workload {workload.name!r}: recorded arrivals need a replay "
                        "(--arrivals trace)")
    return _at_factor_one(replace(workload, speedup=1.0, seed=0, num_requests=None,
                                  duration_s=None))


@lru_cache(maxsize=16)
def _at_factor_one(workload: WorkloadSpec) -> RecordedArrivals:
    check_timestamped(workload)
    arrival, _, _ = load(workload).arrays()
    return RecordedArrivals(len(arrival), float(arrival[-1] - arrival[0]))


def replay_spec(workload: WorkloadSpec, rate: float, seed: int) -> WorkloadSpec:
    """One goodput run on recorded arrivals: the trace replayed at the factor of ``rate``."""
    return replace(workload, rate=None, replay=True, seed=seed, num_requests=None,
                   duration_s=None, resample=False,
                   speedup=recorded_arrivals(workload).factor(rate))


def replay_window(spec: WorkloadSpec, base: Window) -> Window:
    """The verdict's window of a run: ``base`` for Poisson runs; for a replay, what warm-up and
    cool-down leave of it (``RecordedArrivals.window``)."""
    if not spec.replay:
        return base
    return recorded_arrivals(spec).window(spec.speedup, base)


def check_arrivals(arrivals: str) -> str:
    if arrivals not in ARRIVALS:
        raise UserError(f"--arrivals {arrivals!r}: expected one of {', '.join(ARRIVALS)} "
                        "(Poisson at each rate, or the trace's recorded timestamps)")
    return arrivals


def window_at(workload: WorkloadSpec, rate: float, base: Window) -> Window:
    """The verdict's window of ``workload``'s runs at ``rate``: ``base`` for Poisson arrivals
    (and for a rate of 0, which no run had)."""
    if not workload.replay or rate <= 0:
        return base
    return recorded_arrivals(workload).window(recorded_arrivals(workload).factor(rate), base)


def arrivals_label(workload: WorkloadSpec) -> str:
    """The arrival process of ``workload``'s goodput runs, in words (goodput.csv)."""
    if not workload.replay:
        return "poisson"
    recorded = recorded_arrivals(workload)
    window = "" if workload.window_min is None else f", first {workload.window_min:g} min"
    return (f"trace ({recorded.requests} requests over {recorded.span_s:.0f} s{window}; "
            f"factor 1 = {recorded.mean_rate:.4g} req/s)")


def with_arrivals(workload: WorkloadSpec, arrivals: str, window_min: float | None
                  ) -> WorkloadSpec:
    """``workload`` (a Poisson spec) for ``--arrivals``: unchanged for poisson; for trace, a
    replay of the trace's timestamps (its first ``window_min`` minutes), checked now."""
    check_arrivals(arrivals)
    if arrivals == "poisson":
        if window_min is not None:
            raise UserError(f"--window-min {window_min}: applies to --arrivals trace only")
        return workload
    if window_min is not None:
        check_window(window_min)
    spec = replace(workload, rate=None, replay=True, window_min=window_min, speedup=1.0)
    recorded_arrivals(spec)  # a trace without timestamps fails here, before any run
    return spec
