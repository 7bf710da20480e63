"""How fast the engine drains its prefill queue, measured only while it was backlogged.

Between two consecutive admission calls no request enters the queue (admissions are the only
inflow), so the prompt tokens served in that interval are ``queued before + admitted - queued
now``. When fewer tokens were served than were queued at the start, the queue never ran empty in
between: the interval is a *backlog sample* and tokens/seconds is the engine's true drain rate,
whatever bounds it (prefill compute, KV room, running-request caps). Intervals in which the queue
ran dry say nothing about capacity and are skipped. Samples are combined with exponential decay
in time so the estimate follows load changes; the rate is reported only once the decayed
backlog time reaches ``min_window_s`` (a few pipeline cycles: one short interval in which no
chunk happened to be built would otherwise read as a drain rate of zero).
"""

from __future__ import annotations

import math


class DrainRateEstimator:
    def __init__(self, half_life_s: float = 20.0, min_window_s: float = 1.0) -> None:
        if not (math.isfinite(half_life_s) and half_life_s > 0):
            raise ValueError(f"half_life_s={half_life_s}: expected a finite number > 0")
        if not (math.isfinite(min_window_s) and 0 <= min_window_s < half_life_s):
            raise ValueError(f"min_window_s={min_window_s}: expected 0 <= it < half_life_s "
                             f"({half_life_s})")
        self.half_life_s = half_life_s
        self.min_window_s = min_window_s
        self._tokens = 0.0  # decayed sum of tokens served in backlog samples
        self._seconds = 0.0  # decayed sum of their durations
        self._last_s: float | None = None
        self._queued_after = 0  # queue length (tokens) right after the previous call
        self.samples = 0

    def update(self, now_s: float, queued_tokens: int) -> None:
        """The queue (in prompt tokens) seen at ``now_s``, before this call's admission."""
        if self._last_s is not None and now_s > self._last_s:
            served = self._queued_after - queued_tokens
            if 0 <= served < self._queued_after:  # backlogged throughout (see module doc)
                dt = now_s - self._last_s
                keep = 0.5 ** (dt / self.half_life_s)
                self._tokens = self._tokens * keep + served
                self._seconds = self._seconds * keep + dt
                self.samples += 1
        if self._last_s is None or now_s >= self._last_s:
            self._last_s = now_s
        self._queued_after = queued_tokens

    def admitted(self, tokens: int) -> None:
        """The request just seen was queued: its tokens join the queue."""
        self._queued_after += tokens

    @property
    def rate_tokens_per_s(self) -> float | None:
        """Measured drain rate, or None before ``min_window_s`` of backlog was seen."""
        if self._seconds <= 0 or self._seconds < self.min_window_s:
            return None
        return self._tokens / self._seconds
