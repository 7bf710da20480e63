"""The steady-state goodput verdict on one run: does this Poisson rate hold, not just get absorbed?

A run's arrivals cover warm-up + measurement window + cool-down (docs/GOODPUT.md). Only requests
arriving inside the measurement window are scored; warm-up and cool-down requests are served so
the measured ones see a filled, still-loaded system. Rejected or unfinished measured requests are
infinitely late. A rate passes when the P90 criterion holds on the measured requests AND the run
is stable: admissions (first tokens) keep up with arrivals in the window's second half, and
the criterion still holds on the requests that arrived in the window's last quarter (a queue
that grows shows there).
Constants and their justification: docs/GOODPUT.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.metrics.summary import GOODPUT_PERCENTILE, percentile_with_misses

# Admissions (first token out, or rejected) in the window's second half may lag that half's
# arrivals by at most this share: a stable system's waiting queue only fluctuates (it holds about
# λ·TTFT requests), an overloaded one grows by (λ-μ)·T. First tokens, not finishes: the number of
# requests decoding fluctuates with the heavy tail of output lengths, the waiting queue does not.
# The first half is left out so a still-filling system is not mistaken for a growing queue.
BALANCE_TOLERANCE = 0.05
BALANCE_SHARE = 0.5
TAIL_SHARE = 0.25  # the stability trend looks at the last quarter of the measurement window
# Window sizing from the workload (see window_for): E2E of a median request served at the SLO.
MIN_MEASURE_S = 300.0
MAX_MEASURE_S = 600.0  # cost cap: decode-heavy workloads would otherwise need 25+ minutes
MEASURE_E2E_MULTIPLE = 10.0
MIN_WARMUP_S = 60.0
MAX_WARMUP_S = 300.0
WARMUP_E2E_MULTIPLE = 2.0
MAX_COOLDOWN_S = 150.0


@dataclass(frozen=True, slots=True)
class Window:
    """Arrival phases of one goodput run, in simulated seconds from the first arrival."""

    warmup_s: float
    measure_s: float
    cooldown_s: float

    def __post_init__(self) -> None:
        for name in ("warmup_s", "measure_s", "cooldown_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise UserError(f"goodput window {name}={value!r}: expected seconds >= 0")
        if self.measure_s <= 0:
            raise UserError(f"goodput window measure_s={self.measure_s!r}: expected > 0")

    @property
    def arrivals_s(self) -> float:
        return self.warmup_s + self.measure_s + self.cooldown_s

    @property
    def end_s(self) -> float:
        return self.warmup_s + self.measure_s

    def longer(self, factor: float) -> Window:
        """The same warm-up and cool-down around a measurement window `factor` times longer."""
        return Window(self.warmup_s, self.measure_s * factor, self.cooldown_s)


def window_for(output_p50: float, slo: Slo) -> Window:
    """Window sized from the workload: e2e_ref = TTFT SLO + (median output - 1) x TPOT SLO, the
    E2E of a median-length request served exactly at the SLO (an upper bound of the measured
    median E2E at any passing rate). Measure 10 e2e_ref within [300 s, 600 s], warm up 2 e2e_ref
    within [60 s, 300 s], cool down e2e_ref up to 150 s (so the last measured requests still
    see full load)."""
    e2e_ref = (slo.ttft_ms + max(0.0, output_p50 - 1) * slo.tpot_ms) / 1000.0

    def clamp(value: float, low: float, high: float) -> float:
        return float(round(min(high, max(low, value))))

    return Window(warmup_s=clamp(WARMUP_E2E_MULTIPLE * e2e_ref, MIN_WARMUP_S, MAX_WARMUP_S),
                  measure_s=clamp(MEASURE_E2E_MULTIPLE * e2e_ref, MIN_MEASURE_S, MAX_MEASURE_S),
                  cooldown_s=clamp(e2e_ref, 0.0, MAX_COOLDOWN_S))


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a rate passed or failed. P90s in ms with misses counted as +inf."""

    measured: int
    p90_ttft_ms: float
    p90_tpot_ms: float
    tail_p90_ttft_ms: float  # over measured requests arriving in the window's last quarter
    tail_p90_tpot_ms: float
    balance: float  # admissions / arrivals in the measurement window's second half
    meets_p90: bool
    stable: bool

    @property
    def ok(self) -> bool:
        return self.meets_p90 and self.stable

    @property
    def reason(self) -> str:
        if self.ok:
            return "pass"
        parts = []
        if not self.meets_p90:
            parts.append(f"P90 TTFT {self.p90_ttft_ms:.0f} / TPOT {self.p90_tpot_ms:.0f} ms")
        if self.balance < 1 - BALANCE_TOLERANCE:
            parts.append(f"admissions {self.balance:.0%} of arrivals")
        if self.stable is False and self.balance >= 1 - BALANCE_TOLERANCE:
            parts.append(f"last-quarter P90 TTFT {self.tail_p90_ttft_ms:.0f} / TPOT "
                         f"{self.tail_p90_tpot_ms:.0f} ms")
        return "; ".join(parts)


def _p90s(ttft: np.ndarray, tpot: np.ndarray) -> tuple[float, float]:
    t = percentile_with_misses(ttft, GOODPUT_PERCENTILE)
    p = percentile_with_misses(tpot, GOODPUT_PERCENTILE) if tpot.size else 0.0
    return t, p


def verdict(records: Sequence[RequestRecord], window: Window, slo: Slo) -> Verdict:
    """Score one run (``slo`` already scaled) on the requests of its measurement window."""
    return verdicts(records, window, (slo,))[0]


def verdicts(records: Sequence[RequestRecord], window: Window, slos: Sequence[Slo]
             ) -> list[Verdict]:
    """``verdict`` at each SLO of ``slos``: the window's P90s and balance are computed once (a
    run of a policy that does not read the SLO is judged at every scale)."""
    columns = np.array([(r.arrival_s, r.first_token_s, r.finish_s, r.output_tokens, r.rejected)
                        for r in records], dtype=float).reshape(-1, 5)
    arrival, first, finish, out = columns[:, 0], columns[:, 1], columns[:, 2], columns[:, 3]
    rejected = columns[:, 4] != 0
    done = ~rejected & np.isfinite(first) & np.isfinite(finish)
    start = float(arrival.min()) if len(records) else 0.0
    rel = arrival - start
    measured = (rel >= window.warmup_s) & (rel < window.end_s)
    ttft = np.where(done, (first - arrival) * 1000.0, math.inf)
    multi = out >= 2
    tpot = np.where(done, (finish - first) * 1000.0 / np.maximum(out - 1, 1), math.inf)

    def p90s(mask: np.ndarray) -> tuple[float, float]:
        return _p90s(ttft[mask], tpot[mask & multi])

    p90_ttft, p90_tpot = p90s(measured)
    tail = measured & (rel >= window.end_s - TAIL_SHARE * window.measure_s)
    tail_ttft, tail_tpot = p90s(tail)
    # A request leaves the waiting queue at its first token, or at arrival when rejected.
    started = np.isfinite(first) & ~rejected
    leave = np.where(rejected, arrival, np.where(started, first, math.inf)) - start
    half = window.end_s - BALANCE_SHARE * window.measure_s
    arrivals = int(((rel >= half) & (rel < window.end_s)).sum())
    departures = int(((leave >= half) & (leave < window.end_s)).sum())
    balance = departures / arrivals if arrivals else 0.0
    count, any_measured, any_tail = int(measured.sum()), bool(measured.any()), bool(tail.any())
    out_verdicts = []
    for slo in slos:
        meets = any_measured and p90_ttft <= slo.ttft_ms and p90_tpot <= slo.tpot_ms
        stable = (balance >= 1 - BALANCE_TOLERANCE and any_tail
                  and tail_ttft <= slo.ttft_ms and tail_tpot <= slo.tpot_ms)
        out_verdicts.append(Verdict(count, p90_ttft, p90_tpot, tail_ttft, tail_tpot, balance,
                                    bool(meets), bool(stable)))
    return out_verdicts
