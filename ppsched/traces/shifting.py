"""Shifting-load workloads: the mix or the rate changes within a run, so no single fixed chunk is
right for all of it.

- ``alternating``: phases of ``period_s`` seconds alternate a prefill-heavy mix (prompts 512-1024,
  outputs 32-64 tokens: wants large, efficient chunks) and a decode-heavy one (prompts 32-64,
  outputs 512-1024: wants small chunks that keep TPOT down), Poisson at the same request rate.
- ``diurnal``: azure-conv lengths, Poisson with a rate that swings sinusoidally between
  (1 - depth) and (1 + depth) times the mean over ``period_s`` (thinning), a compressed day.

Seeded like ``load_workload``: one stream for arrivals, one for lengths. Not in the named catalog
(wiring a generator there is a change to ``traces/load.py``); ``bench/bench_dcp.py --shifting``
runs them.
"""

from __future__ import annotations

import math

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.traces.arrivals import check_rate, poisson_arrivals
from ppsched.traces.load import load_workload
from ppsched.traces.workload import Workload

PREFILL_HEAVY = ((512, 1024), (32, 64))  # (prompt range, output range), inclusive
DECODE_HEAVY = ((32, 64), (512, 1024))
SHIFTING_NAMES = ("alternating", "diurnal")


def _check(rate: float, duration_s: float, period_s: float) -> None:
    check_rate(rate)
    for name, value in (("duration_s", duration_s), ("period_s", period_s)):
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"shifting workload {name}={value!r}: expected seconds > 0")


def alternating(rate: float, duration_s: float, seed: int = 0, period_s: float = 120.0
                ) -> Workload:
    """Prefill-heavy and decode-heavy phases of ``period_s`` each, starting prefill-heavy."""
    _check(rate, duration_s, period_s)
    arr_seq, len_seq = np.random.SeedSequence(seed).spawn(2)
    times = poisson_arrivals(np.random.default_rng(arr_seq), rate, duration_s=duration_s)
    rng = np.random.default_rng(len_seq)
    requests = []
    for i, t in enumerate(times):
        (p_lo, p_hi), (o_lo, o_hi) = PREFILL_HEAVY if int(t // period_s) % 2 == 0 \
            else DECODE_HEAVY
        requests.append(RequestSpec(i, float(t), int(rng.integers(p_lo, p_hi + 1)),
                                    int(rng.integers(o_lo, o_hi + 1))))
    return Workload("alternating", tuple(requests), source="synthetic",
                    notes=(f"alternating phases of {period_s:g} s: prefill-heavy (prompt "
                           "512-1024, output 32-64) then decode-heavy (prompt 32-64, output "
                           "512-1024)",),
                    arrival=f"poisson rate={rate} seed={seed}")


def diurnal(rate: float, duration_s: float, seed: int = 0, period_s: float = 300.0,
            depth: float = 0.8, data_dir: str | None = None) -> Workload:
    """azure-conv lengths; Poisson at rate * (1 + depth * sin(2 pi t / period_s)), mean ``rate``."""
    _check(rate, duration_s, period_s)
    if not 0 <= depth < 1:
        raise UserError(f"diurnal depth={depth!r}: expected 0 <= depth < 1")
    peak = rate * (1 + depth)
    base = load_workload("azure-conv", rate=peak, duration_s=duration_s, seed=seed,
                         data_dir=data_dir)
    keep_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[2])
    requests = []
    for r in base.requests:  # thinning: keep an arrival at t with probability rate(t) / peak
        if keep_rng.random() * peak <= rate * (1 + depth * math.sin(2 * math.pi * r.arrival_s
                                                                     / period_s)):
            requests.append(RequestSpec(len(requests), r.arrival_s, r.prompt_tokens,
                                        r.output_tokens))
    return Workload("diurnal", tuple(requests), source=base.source,
                    notes=base.notes + (f"diurnal rate: mean {rate:g} req/s, x(1 +- {depth:g}) "
                                        f"over {period_s:g} s",),
                    arrival=f"modulated poisson rate={rate} seed={seed}")


def shifting_workload(name: str, rate: float, duration_s: float, seed: int = 0) -> Workload:
    if name == "alternating":
        return alternating(rate, duration_s, seed)
    if name == "diurnal":
        return diurnal(rate, duration_s, seed)
    raise UserError(f"shifting workload {name!r}: expected one of {', '.join(SHIFTING_NAMES)}")
