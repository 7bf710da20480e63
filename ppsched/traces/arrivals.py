"""Arrival processes: seeded Poisson, and replay of a trace's own timestamps (window + speed)."""

from __future__ import annotations

import math

import numpy as np

from ppsched.core.errors import UserError

MAX_GENERATED = 5_000_000  # guards memory against a typo such as --duration 1e9


def check_rate(rate: float) -> float:
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) \
            or not math.isfinite(rate) or rate <= 0:
        raise UserError(f"--rate {rate!r}: expected a finite request rate > 0 (requests/s)")
    return float(rate)


def poisson_arrivals(rng: np.random.Generator, rate: float, *, count: int | None = None,
                     duration_s: float | None = None) -> np.ndarray:
    """Arrival times (s) of a Poisson process: exponential gaps of mean 1/rate, first gap from 0.

    Stops after `count` arrivals and/or at the first arrival >= duration_s (at least one bound).
    """
    rate = check_rate(rate)
    if count is None and duration_s is None:
        raise ValueError("poisson_arrivals needs count or duration_s")
    if count is not None:
        times = np.cumsum(rng.exponential(1.0 / rate, size=count))
        return times if duration_s is None else times[times < duration_s]
    assert duration_s is not None
    if rate * duration_s > MAX_GENERATED:
        raise UserError(f"--rate {rate} over --duration {duration_s} s is about "
                        f"{rate * duration_s:.0f} requests; expected at most {MAX_GENERATED}")
    chunks: list[np.ndarray] = []
    last = 0.0
    block = max(16, int(rate * duration_s * 1.1) + 16)  # one draw almost always suffices
    while last < duration_s:
        part = last + np.cumsum(rng.exponential(1.0 / rate, size=block))
        chunks.append(part)
        last = float(part[-1])
    times = np.concatenate(chunks)
    return times[times < duration_s]


def replay_arrivals(trace_s: np.ndarray, *, window_min: float | None = None,
                    speedup: float = 1.0) -> np.ndarray:
    """Replay a trace's own arrival seconds (starting at 0).

    The window keeps requests that arrived in the trace's first `window_min` minutes; `speedup`
    then divides every time (and so every gap): 0.9 makes the replay 10% slower, 2 twice as fast.
    Returns the kept arrival times; they are a prefix of the trace.
    """
    check_speedup(speedup)
    times = np.asarray(trace_s, dtype=float)
    if window_min is not None:
        check_window(window_min)
        times = times[times < window_min * 60.0]
    return times / speedup


def check_speedup(speedup: float) -> float:
    if not (isinstance(speedup, (int, float)) and math.isfinite(speedup) and speedup > 0):
        raise UserError(f"--speedup {speedup!r}: expected a finite factor > 0 "
                        f"(0.9 = 10% slower, 2 = twice as fast)")
    return float(speedup)


def check_window(window_min: float) -> float:
    if not (isinstance(window_min, (int, float)) and math.isfinite(window_min) and window_min > 0):
        raise UserError(f"--window-min {window_min!r}: expected a finite number of minutes > 0")
    return float(window_min)
